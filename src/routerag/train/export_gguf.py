"""Export a PEFT LoRA adapter of a Qwen2 policy as a llama.cpp LoRA adapter GGUF, and check one.

llama.cpp (``llama_adapter_lora_init``, ``src/llama-adapter.cpp``) reads an adapter GGUF with

* ``general.type = "adapter"``, ``general.architecture`` equal to the base model's,
  ``adapter.type = "lora"`` and ``adapter.lora.alpha`` (f32);
* for every adapted weight ``W`` of the base GGUF (e.g. ``blk.3.attn_q.weight``) two tensors
  ``W.lora_a`` and ``W.lora_b``. With ggml's dimension order (``ne[0]`` innermost) the base
  tensor has ``ne = [in, out]``; llama.cpp requires ``a.ne = [in, r]`` and ``b.ne = [r, out]``,
  i.e. the numpy arrays written are PEFT's ``lora_A.weight`` (``r x in``) and
  ``lora_B.weight`` (``out x r``) as they are;
* at inference ``W x + scale * alpha / r * B (A x)`` with ``r = b.ne[0]`` and ``scale`` the
  user's adapter scale (1 = PEFT's ``lora_alpha / r``).

The exporter maps transformers' Qwen2 module names to the GGUF names, checks every pair
against the base GGUF's tensor names and shapes (read with ``gguf.GGUFReader``) and refuses an
adapter that does not fit (another base model, DoRA, trained biases or embeddings).
:func:`check_lora_gguf` runs the same checks on an exported file before llama.cpp loads it,
so that a mismatch is a clear error instead of llama.cpp's log line and a ``None`` adapter.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

# transformers Qwen2 / Llama module -> GGUF tensor name (llama.cpp's tensor map)
HF_TO_GGUF: dict[str, str] = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_PEFT_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.(\w+\.\w+)\.lora_([AB])(?:\.[\w-]+)?\.weight$")


class LoraExportError(ValueError):
    """The adapter cannot be exported for (or applied to) this base model."""


class LoraGGUFInfo(BaseModel):
    path: str
    architecture: str
    alpha: float
    rank: int
    tensors: int  # lora_a + lora_b tensors
    targets: list[str] = Field(default_factory=list)  # base tensor names that are adapted


def _field_str(reader: Any, key: str) -> str | None:
    field = reader.fields.get(key)
    if field is None:
        return None
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def _field_scalar(reader: Any, key: str) -> float | None:
    field = reader.fields.get(key)
    if field is None:
        return None
    return float(field.parts[field.data[0]][0])


def _read_gguf(path: Path, what: str) -> Any:
    """A ``GGUFReader`` over ``path`` (header and tensor index), or a clear error."""
    from gguf import GGUFReader

    if not path.is_file():
        raise LoraExportError(f"{what} {path} does not exist")
    try:
        return GGUFReader(str(path))
    except Exception as exc:
        raise LoraExportError(f"{path} is not a readable GGUF file: {exc}") from exc


def base_tensor_shapes(base_gguf: str | Path) -> tuple[str, dict[str, tuple[int, ...]]]:
    """``(architecture, {tensor name: ggml ne})`` of a (base) GGUF, header only."""
    path = Path(base_gguf)
    reader = _read_gguf(path, "base GGUF")
    arch = _field_str(reader, "general.architecture") or ""
    return arch, {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}


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


def check_lora_gguf(adapter_gguf: str | Path, base_gguf: str | Path) -> LoraGGUFInfo:
    """Check that ``adapter_gguf`` is a llama.cpp LoRA adapter that fits ``base_gguf`` (the
    checks llama.cpp makes, with messages that say what is wrong)."""
    path = Path(adapter_gguf)
    reader = _read_gguf(path, "LoRA adapter")
    if _field_str(reader, "general.type") != "adapter" or _field_str(reader, "adapter.type") != "lora":
        raise LoraExportError(f"{path} is not a LoRA adapter GGUF (general.type={_field_str(reader, 'general.type')!r}, "
                              f"adapter.type={_field_str(reader, 'adapter.type')!r}); export one with routerag export-lora-gguf")
    arch, shapes = base_tensor_shapes(base_gguf)
    adapter_arch = _field_str(reader, "general.architecture")
    if adapter_arch != arch:
        raise LoraExportError(f"{path} is an adapter for architecture {adapter_arch!r}, the base model {base_gguf} is {arch!r}")
    pairs: dict[str, dict[str, tuple[int, ...]]] = {}
    for t in reader.tensors:
        base, _, suffix = t.name.rpartition(".")
        if suffix not in ("lora_a", "lora_b"):
            raise LoraExportError(f"{path}: tensor {t.name!r} is neither .lora_a nor .lora_b")
        pairs.setdefault(base, {})[suffix] = tuple(int(d) for d in t.shape)
    ranks = set()
    for base, ab in pairs.items():
        if set(ab) != {"lora_a", "lora_b"}:
            raise LoraExportError(f"{path}: the LoRA pair of {base} is incomplete")
        if base not in shapes:
            raise LoraExportError(f"{path} adapts {base}, which {base_gguf} does not have: the adapter belongs to another base model")
        a, b = ab["lora_a"], ab["lora_b"]
        if shapes[base][0] != a[0] or shapes[base][1] != b[1] or a[1] != b[0]:
            raise LoraExportError(f"{path}: {base} has ne {list(shapes[base])} in the base model but lora_a {list(a)} / "
                                  f"lora_b {list(b)}: the adapter belongs to another base model")
        ranks.add(a[1])
    if not pairs:
        raise LoraExportError(f"{path} holds no LoRA tensors")
    alpha = _field_scalar(reader, "adapter.lora.alpha") or 0.0
    return LoraGGUFInfo(path=str(path), architecture=arch, alpha=alpha, rank=max(ranks), tensors=2 * len(pairs), targets=sorted(pairs))
