"""Export a PEFT LoRA adapter of a Qwen2 policy as a llama.cpp LoRA adapter GGUF.

The exporter maps transformers' Qwen2 module names to the GGUF names, checks every pair
against the base GGUF's tensor names and shapes (read with ``gguf.GGUFReader``) and refuses an
adapter that does not fit (another base model, DoRA, trained biases or embeddings). The GGUF
format, the checker and the reader are in :mod:`routerag.llm.lora_gguf` (the inference backend
needs them without the training package).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routerag.llm.lora_gguf import (
    HF_TO_GGUF,
    LoraExportError,
    LoraGGUFInfo,
    base_tensor_shapes,
    check_lora_gguf,
)

if TYPE_CHECKING:
    from routerag.train.config import TrainConfig

ADAPTER_GGUF = "adapter.gguf"

__all__ = ["ADAPTER_GGUF", "HF_TO_GGUF", "LoraExportError", "LoraGGUFInfo", "base_tensor_shapes", "check_lora_gguf",
           "export_adapter_gguf", "export_lora_gguf", "gguf_name", "read_peft_adapter"]

_PEFT_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.(\w+\.\w+)\.lora_([AB])(?:\.[\w-]+)?\.weight$")


def gguf_name(peft_key: str) -> tuple[str, str]:
    """``(base GGUF tensor name, 'A' | 'B')`` of a PEFT state-dict key such as
    ``base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight``."""
    m = _PEFT_KEY.search(peft_key)
    if not m or m.group(2) not in HF_TO_GGUF:
        raise LoraExportError(
            f"adapter tensor {peft_key!r} is not a LoRA matrix of a supported module "
            f"({', '.join(HF_TO_GGUF)}); embeddings, norms and trained biases cannot be exported"
        )
    return f"blk.{m.group(1)}.{HF_TO_GGUF[m.group(2)]}.weight", m.group(3)


def read_peft_adapter(adapter_dir: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(adapter_config.json, {key: float32 numpy array})`` of a saved PEFT adapter."""
    from safetensors.numpy import load_file

    folder = Path(adapter_dir)
    config_path, weights_path = folder / "adapter_config.json", folder / "adapter_model.safetensors"
    for p in (config_path, weights_path):
        if not p.is_file():
            raise LoraExportError(f"{folder} is not a saved PEFT adapter: {p.name} is missing")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    tensors = {k: v.astype("float32") for k, v in load_file(str(weights_path)).items()}
    return config, tensors


def export_lora_gguf(adapter_dir: str | Path, base_gguf: str | Path, out_path: str | Path, *,
                     dtype: str = "f16", name: str | None = None) -> LoraGGUFInfo:
    """Write the PEFT LoRA adapter in ``adapter_dir`` as a llama.cpp adapter GGUF for ``base_gguf``."""
    import numpy as np
    from gguf import GGUFWriter

    config, tensors = read_peft_adapter(adapter_dir)
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        raise LoraExportError(f"only LoRA adapters can be exported, not {config.get('peft_type')}")
    if config.get("use_dora"):
        raise LoraExportError("DoRA adapters cannot be exported to llama.cpp (it applies plain LoRA)")
    if config.get("modules_to_save"):
        raise LoraExportError(f"modules_to_save {config['modules_to_save']} are full weights, not LoRA; cannot export")
    if dtype not in ("f16", "f32"):
        raise LoraExportError(f"dtype must be f16 or f32, not {dtype!r}")
    arch, shapes = base_tensor_shapes(base_gguf)
    pairs: dict[str, dict[str, Any]] = {}
    for key, value in tensors.items():
        target, which = gguf_name(key)
        pairs.setdefault(target, {})[which] = value
    if not pairs:
        raise LoraExportError(f"{adapter_dir} holds no LoRA tensors")
    ranks = set()
    for target, ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise LoraExportError(f"LoRA pair of {target} is missing lora_{'B' if 'A' in ab else 'A'}")
        if target not in shapes:
            raise LoraExportError(f"the adapter adapts {target}, which the base GGUF {base_gguf} does not have (another base model?)")
        a, b = ab["A"], ab["B"]
        n_in, n_out = shapes[target][0], shapes[target][1]
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1] or a.shape[1] != n_in or b.shape[0] != n_out:
            raise LoraExportError(
                f"{target}: lora_A {tuple(a.shape)} / lora_B {tuple(b.shape)} do not fit the base weight "
                f"(in {n_in}, out {n_out}); the adapter was trained on another base model"
            )
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise LoraExportError(f"{target}: the adapter holds NaN or infinite values (the training diverged); "
                                  "refusing to export it")
        ranks.add(a.shape[0])
    r = int(config.get("r") or next(iter(ranks)))
    if ranks != {r}:
        raise LoraExportError(f"adapter ranks {sorted(ranks)} differ from r={r}; rank_pattern adapters are not supported")
    alpha = float(config.get("lora_alpha", r))
    if config.get("alpha_pattern"):
        raise LoraExportError("alpha_pattern adapters are not supported (llama.cpp has one alpha per adapter)")
    if config.get("use_rslora"):
        alpha = alpha * math.sqrt(r)  # rsLoRA scales by alpha / sqrt(r); llama.cpp by alpha / r
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    writer = GGUFWriter(str(tmp), arch)
    writer.add_type("adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", alpha)
    writer.add_name(name or Path(adapter_dir).name)
    if config.get("base_model_name_or_path"):
        writer.add_string("routerag.base_model", str(config["base_model_name_or_path"]))
    np_dtype = np.float16 if dtype == "f16" else np.float32
    for target, ab in sorted(pairs.items()):
        writer.add_tensor(f"{target}.lora_a", np.ascontiguousarray(ab["A"].astype(np_dtype)))
        writer.add_tensor(f"{target}.lora_b", np.ascontiguousarray(ab["B"].astype(np_dtype)))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return LoraGGUFInfo(path=str(out), architecture=arch, alpha=alpha, rank=r, tensors=2 * len(pairs), targets=sorted(pairs))


def export_adapter_gguf(cfg: TrainConfig, final: Path, out: Path) -> dict[str, Any] | None:
    """For a LoRA run on a GGUF base model: the saved adapter as ``out/adapter.gguf`` for llama.cpp
    (``model.lora_path``); None when there is nothing to export."""
    from routerag.train.policy import gguf_base_path

    if not cfg.export_gguf:
        return None
    base = gguf_base_path(cfg.model.name)
    if base is None:
        return None
    info = export_lora_gguf(final, base, out / ADAPTER_GGUF, name=f"{cfg.recipe}:{Path(cfg.output_dir).name}")
    return {**info.model_dump(exclude={"targets"}), "targets": len(info.targets)}
