"""llama.cpp LoRA adapter GGUFs: check one against its base model, read its matrices.

llama.cpp (``llama_adapter_lora_init``, ``src/llama-adapter.cpp``) reads an adapter GGUF with

* ``general.type = "adapter"``, ``general.architecture`` equal to the base model's,
  ``adapter.type = "lora"`` and ``adapter.lora.alpha`` (f32);
* for every adapted weight ``W`` of the base GGUF (e.g. ``blk.3.attn_q.weight``) two tensors
  ``W.lora_a`` and ``W.lora_b``. With ggml's dimension order (``ne[0]`` innermost) the base
  tensor has ``ne = [in, out]``; llama.cpp requires ``a.ne = [in, r]`` and ``b.ne = [r, out]``,
  i.e. as numpy arrays PEFT's ``lora_A.weight`` (``r x in``) and ``lora_B.weight`` (``out x r``);
* at inference ``W x + scale * alpha / r * B (A x)`` with ``r = b.ne[0]`` and ``scale`` the
  user's adapter scale (1 = PEFT's ``lora_alpha / r``).

:func:`check_lora_gguf` makes llama.cpp's checks before the backend loads an adapter, so that a
mismatch is a clear error instead of llama.cpp's log line and a ``None`` adapter;
:func:`read_lora_gguf` returns the matrices (to continue training from a shipped adapter).
The exporter (PEFT -> GGUF) lives in :mod:`routerag.train.export_gguf`. Only ``gguf`` and numpy
are needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from routerag.errors import RouteragError
from routerag.llm.base import ModelError

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
GGUF_TO_HF: dict[str, str] = {gguf: hf for hf, gguf in HF_TO_GGUF.items()}


class LoraExportError(RouteragError, ValueError):
    """The adapter cannot be exported for, applied to or read for this base model."""


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
    """``(architecture, {tensor name: ggml ne})`` of a (base) GGUF, header only (routerag's own
    header reader: ``GGUFReader`` took ~18 s on the bundled 0.5B at load 6, this a fraction of a second)."""
    from routerag.llm.gguf_meta import read_gguf_tensor_shapes

    path = Path(base_gguf)
    if not path.is_file():
        raise LoraExportError(f"base GGUF {path} does not exist")
    try:
        meta, shapes = read_gguf_tensor_shapes(path)
    except ModelError as exc:
        raise LoraExportError(f"{path} is not a readable GGUF file: {exc}") from exc
    arch = meta.get("general.architecture")
    return (arch if isinstance(arch, str) else ""), shapes


def check_lora_gguf(adapter_gguf: str | Path, base_gguf: str | Path) -> LoraGGUFInfo:
    """Check that ``adapter_gguf`` is a llama.cpp LoRA adapter that fits ``base_gguf`` (the
    checks llama.cpp makes, with messages that say what is wrong)."""
    path = Path(adapter_gguf)
    return _check(_read_gguf(path, "LoRA adapter"), path, base_gguf)


def _ne(tensor: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in tensor.shape)  # ggml order: ne[0] innermost


def _lora_pairs(reader: Any, path: Path) -> dict[str, tuple[Any, Any]]:
    """The adapter's tensors grouped by base tensor name: ``{base: (lora_a, lora_b)}``."""
    grouped: dict[str, dict[str, Any]] = {}
    for t in reader.tensors:
        base, _, suffix = t.name.rpartition(".")
        if suffix not in ("lora_a", "lora_b"):
            raise LoraExportError(f"{path}: tensor {t.name!r} is neither .lora_a nor .lora_b")
        grouped.setdefault(base, {})[suffix] = t
    for base, ab in grouped.items():
        if set(ab) != {"lora_a", "lora_b"}:
            raise LoraExportError(f"{path}: the LoRA pair of {base} is incomplete")
    return {base: (ab["lora_a"], ab["lora_b"]) for base, ab in grouped.items()}


def _check(reader: Any, path: Path, base_gguf: str | Path) -> LoraGGUFInfo:
    if _field_str(reader, "general.type") != "adapter" or _field_str(reader, "adapter.type") != "lora":
        raise LoraExportError(f"{path} is not a LoRA adapter GGUF (general.type={_field_str(reader, 'general.type')!r}, "
                              f"adapter.type={_field_str(reader, 'adapter.type')!r}); export one with routerag export-lora-gguf")
    arch, shapes = base_tensor_shapes(base_gguf)
    adapter_arch = _field_str(reader, "general.architecture")
    if adapter_arch != arch:
        raise LoraExportError(f"{path} is an adapter for architecture {adapter_arch!r}, the base model {base_gguf} is {arch!r}")
    pairs = _lora_pairs(reader, path)
    ranks = set()
    for base, (ta, tb) in pairs.items():
        if base not in shapes:
            raise LoraExportError(f"{path} adapts {base}, which {base_gguf} does not have: the adapter belongs to another base model")
        a, b = _ne(ta), _ne(tb)
        if shapes[base][0] != a[0] or shapes[base][1] != b[1] or a[1] != b[0]:
            raise LoraExportError(f"{path}: {base} has ne {list(shapes[base])} in the base model but lora_a {list(a)} / "
                                  f"lora_b {list(b)}: the adapter belongs to another base model")
        ranks.add(a[1])
    if not pairs:
        raise LoraExportError(f"{path} holds no LoRA tensors")
    alpha = _field_scalar(reader, "adapter.lora.alpha") or 0.0
    return LoraGGUFInfo(path=str(path), architecture=arch, alpha=alpha, rank=max(ranks), tensors=2 * len(pairs), targets=sorted(pairs))


class LoraMatrices(BaseModel):
    """The matrices of a LoRA adapter GGUF in PEFT's orientation (``A``: r x in, ``B``: out x r)."""

    model_config = {"arbitrary_types_allowed": True}
    info: LoraGGUFInfo
    pairs: dict[str, tuple[Any, Any]]  # base tensor name -> (A, B) float32 numpy arrays


def read_lora_gguf(adapter_gguf: str | Path, base_gguf: str | Path) -> LoraMatrices:
    """The checked adapter's matrices as float32 numpy arrays in PEFT's orientation."""
    import numpy as np

    path = Path(adapter_gguf)
    reader = _read_gguf(path, "LoRA adapter")
    info = _check(reader, path, base_gguf)

    def array(t: Any) -> Any:
        return np.asarray(t.data, dtype=np.float32).reshape(_ne(t)[::-1]).copy()

    return LoraMatrices(info=info, pairs={base: (array(a), array(b)) for base, (a, b) in _lora_pairs(reader, path).items()})
