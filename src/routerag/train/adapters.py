"""LoRA adapters of a training run: a fresh one (a peft ``LoraConfig`` for TRL) or a trained one
restored as trainable, so that GRPO continues from an SFT cold start.

``lora.init_from`` names the trained adapter:

* a PEFT adapter directory (``adapter_config.json`` + ``adapter_model.safetensors``), e.g. the
  ``final/`` of a ``routerag-sft`` run;
* a llama.cpp LoRA adapter GGUF of the same base model (what ``routerag export-lora-gguf``
  writes), read back with :func:`routerag.llm.lora_gguf.read_lora_gguf`;
* ``policy:NAME`` — an adapter GGUF shipped inside the package (``data/policies/NAME``).

peft is imported inside the functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from routerag.llm.config import POLICY_PREFIX
from routerag.llm.lora_gguf import GGUF_TO_HF as _GGUF_TO_HF
from routerag.llm.lora_gguf import LoraExportError
from routerag.train.config import LoraSpec


def fresh_lora_config(spec: LoraSpec, num_layers: int | None = None) -> Any:
    """The peft ``LoraConfig`` of a new adapter (None when LoRA is off or an adapter is restored);
    with ``spec.layers_top`` the adapters go on the top ``layers_top`` of ``num_layers`` layers."""
    if not spec.enabled or spec.init_from:
        return None
    from peft import LoraConfig

    layers = None
    if spec.layers_top is not None:
        if num_layers is None:
            raise ValueError("lora.layers_top needs the model's number of layers")
        layers = list(range(max(num_layers - spec.layers_top, 0), num_layers))
    return LoraConfig(r=spec.r, lora_alpha=spec.alpha, lora_dropout=spec.dropout,
                      target_modules=list(spec.target_modules), task_type="CAUSAL_LM", layers_to_transform=layers)


def num_layers_of(model: Any) -> int | None:
    """The decoder layer count of a transformers model (None when its config does not say)."""
    config = getattr(model, "config", None)
    return getattr(config, "num_hidden_layers", None)


def resolve_adapter(init_from: str) -> Path:
    """The file or directory ``init_from`` names (``policy:NAME`` = a shipped policy's GGUF)."""
    if init_from.startswith(POLICY_PREFIX):
        from routerag.llm.config import lora_path_of

        return lora_path_of(init_from)
    path = Path(init_from).expanduser()
    if not path.exists():
        raise LoraExportError(f"lora.init_from: {path} does not exist (a PEFT adapter directory, an adapter .gguf or policy:NAME)")
    return path


def restore_adapter(model: Any, spec: LoraSpec, base_gguf: Path | None) -> Any:
    """``model`` wrapped in a trainable peft model holding the adapter ``spec.init_from`` names;
    with ``spec.layers_top`` only the adapter weights of the top ``layers_top`` layers train (the
    ones below stay as restored, so the backward pass stops at the first trained layer)."""
    if not spec.init_from:
        raise ValueError("restore_adapter needs lora.init_from")
    path = resolve_adapter(spec.init_from)
    if path.is_dir():
        from peft import PeftModel

        if not (path / "adapter_config.json").is_file():
            raise LoraExportError(f"lora.init_from: {path} is not a saved PEFT adapter (adapter_config.json is missing)")
        restored = PeftModel.from_pretrained(model, str(path), is_trainable=True)
    elif base_gguf is None:
        raise LoraExportError(f"lora.init_from: {path.name} is a llama.cpp adapter GGUF; the policy must be its GGUF base "
                              "model (model.name bundled:... or a .gguf path) to read it")
    else:
        restored = _from_gguf(model, path, spec, base_gguf)
    if spec.layers_top is not None:
        freeze_below_top(restored, spec.layers_top)
    return restored


def freeze_below_top(peft_model: Any, layers_top: int) -> int:
    """Stop the adapter weights below the top ``layers_top`` decoder layers from training; returns
    how many parameter tensors were frozen."""
    total = num_layers_of(peft_model)
    if total is None:
        raise ValueError("lora.layers_top needs the model's number of layers")
    first = max(total - layers_top, 0)
    frozen = 0
    for name, param in peft_model.named_parameters():
        if "lora_" not in name or ".layers." not in name:
            continue
        layer = int(name.split(".layers.", 1)[1].split(".", 1)[0])
        if layer < first and param.requires_grad:
            param.requires_grad_(False)
            frozen += 1
    return frozen


def _from_gguf(model: Any, path: Path, spec: LoraSpec, base_gguf: Path) -> Any:
    import torch
    from peft import LoraConfig, get_peft_model

    from routerag.llm.lora_gguf import read_lora_gguf

    adapter = read_lora_gguf(path, base_gguf)
    by_module: dict[str, tuple[Any, Any]] = {}
    modules: set[str] = set()
    for target, (a, b) in adapter.pairs.items():
        parts = target.split(".")  # blk.<i>.<gguf name>.weight
        if len(parts) != 4 or parts[0] != "blk" or parts[2] not in _GGUF_TO_HF:
            raise LoraExportError(f"{path}: adapted tensor {target!r} is not a Qwen2 attention/MLP projection")
        hf = _GGUF_TO_HF[parts[2]]
        modules.add(hf.split(".")[1])
        by_module[f"layers.{parts[1]}.{hf}"] = (a, b)
    ranks = {a.shape[0] for a, _ in adapter.pairs.values()}
    if len(ranks) != 1:
        raise LoraExportError(f"{path}: adapter ranks {sorted(ranks)} differ; one rank per adapter is supported")
    adapted = sorted({int(key.split(".")[1]) for key in by_module})
    total = num_layers_of(model)
    config = LoraConfig(r=ranks.pop(), lora_alpha=adapter.info.alpha, lora_dropout=spec.dropout,
                        target_modules=sorted(modules), task_type="CAUSAL_LM",
                        layers_to_transform=None if total is None or len(adapted) == total else adapted)
    peft_model = get_peft_model(model, config)
    loaded = 0
    with torch.no_grad():
        for name, module in peft_model.named_modules():
            key = name[name.find("layers."):]  # base_model.model.model.layers.3.self_attn.q_proj -> layers.3...
            if key in by_module and hasattr(module, "lora_A"):
                a, b = by_module[key]
                module.lora_A["default"].weight.copy_(torch.from_numpy(a))
                module.lora_B["default"].weight.copy_(torch.from_numpy(b))
                loaded += 1
    if loaded != len(by_module):
        raise LoraExportError(f"{path}: {len(by_module)} adapted tensors but {loaded} matching modules in the policy "
                              "(another base model?)")
    return peft_model
