"""llama.cpp LoRA adapter GGUF -> PEFT adapter folder, the inverse of :mod:`routerag.train.export_gguf`.

A shipped policy is an adapter GGUF (``policy:<name>``, ``bundled_policy_path``); vLLM
(``--enable-lora --lora-modules NAME=DIR``), transformers and PEFT read adapters as a folder with
``adapter_config.json`` and ``adapter_model.safetensors``. The matrices are written in float32
(exact for the f16/f32 GGUF the exporter writes) under PEFT's keys
``base_model.model.model.layers.<i>.<module>.lora_{A,B}.weight``; ``lora_alpha`` is the GGUF's
``adapter.lora.alpha``, so the scale ``alpha / r`` is the one llama.cpp applies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from routerag.llm.lora_gguf import GGUF_TO_HF, LoraExportError, base_tensor_shapes, read_lora_gguf


class PeftExportInfo(BaseModel):
    path: str
    rank: int
    alpha: float
    target_modules: list[str]
    layers: list[int]
    tensors: int


def export_peft_adapter(adapter_gguf: str | Path, base_gguf: str | Path, out_dir: str | Path, *,
                        base_model: str | None = None) -> PeftExportInfo:
    """Write the adapter GGUF (checked against ``base_gguf``) as a PEFT LoRA folder ``out_dir``;
    ``base_model`` is recorded as ``base_model_name_or_path`` (the HF id the server loads)."""
    import numpy as np
    from safetensors.numpy import save_file

    adapter = read_lora_gguf(adapter_gguf, base_gguf)
    tensors = {}
    modules: set[str] = set()
    layers: set[int] = set()
    ranks: set[int] = set()
    for target, (a, b) in sorted(adapter.pairs.items()):
        parts = target.split(".")  # blk.<i>.<gguf name>.weight
        if len(parts) != 4 or parts[0] != "blk" or parts[2] not in GGUF_TO_HF:
            raise LoraExportError(f"{adapter_gguf}: adapted tensor {target!r} is not a Qwen2/Llama attention/MLP projection")
        hf = GGUF_TO_HF[parts[2]]
        key = f"base_model.model.model.layers.{int(parts[1])}.{hf}"
        tensors[f"{key}.lora_A.weight"] = np.ascontiguousarray(a, dtype=np.float32)
        tensors[f"{key}.lora_B.weight"] = np.ascontiguousarray(b, dtype=np.float32)
        modules.add(hf.split(".")[1])
        layers.add(int(parts[1]))
        ranks.add(int(a.shape[0]))
    if len(ranks) != 1:
        raise LoraExportError(f"{adapter_gguf}: adapter ranks {sorted(ranks)} differ; PEFT needs one r (no rank_pattern)")
    rank = ranks.pop()
    _, shapes = base_tensor_shapes(base_gguf)
    base_layers = {int(name.split(".")[1]) for name in shapes if name.startswith("blk.")}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": rank,
        "lora_alpha": adapter.info.alpha,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted(modules),
        "fan_in_fan_out": False,
        "inference_mode": True,
        "use_rslora": False,
        "use_dora": False,
    }
    if layers != base_layers:  # an adapter on the upper layers only (lora.layers_top)
        config["layers_to_transform"] = sorted(layers)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return PeftExportInfo(path=str(out), rank=rank, alpha=adapter.info.alpha, target_modules=sorted(modules),
                          layers=sorted(layers), tensors=len(tensors))
