"""Read the key/value metadata of a GGUF file header without loading the model.

Only the header is parsed (magic, version, counts, then the key/value pairs); tensor data is
never touched, so reading the chat template of a 500 MB model takes milliseconds. Arrays are
skipped unless their key is asked for (the tokenizer's vocabulary is an array of 150k strings).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from routerag.llm.base import ModelError

_MAGIC = b"GGUF"
_SCALARS: dict[int, str] = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9

Value = int | float | bool | str | list


class GGUFFormatError(ModelError):
    """The file is not a GGUF file or its header is truncated."""


def _read(handle: BinaryIO, n: int) -> bytes:
    data = handle.read(n)
    if len(data) != n:
        raise GGUFFormatError("truncated GGUF header")
    return data


def _unpack(handle: BinaryIO, fmt: str) -> int | float | bool:
    return struct.unpack(fmt, _read(handle, struct.calcsize(fmt)))[0]


def _string(handle: BinaryIO) -> str:
    length = int(_unpack(handle, "<Q"))
    return _read(handle, length).decode("utf-8", errors="replace")


def _value(handle: BinaryIO, vtype: int, keep: bool) -> Value | None:
    if vtype in _SCALARS:
        return _unpack(handle, _SCALARS[vtype])
    if vtype == _STRING:
        if keep:
            return _string(handle)
        handle.seek(int(_unpack(handle, "<Q")), 1)
        return None
    if vtype == _ARRAY:
        item_type = int(_unpack(handle, "<I"))
        count = int(_unpack(handle, "<Q"))
        if not keep and item_type in _SCALARS:
            handle.seek(count * struct.calcsize(_SCALARS[item_type]), 1)
            return None
        items = [_value(handle, item_type, keep) for _ in range(count)]
        return items if keep else None
    raise GGUFFormatError(f"unknown GGUF value type {vtype}")


def _read_metadata(handle: BinaryIO, path: Path, arrays: frozenset[str]) -> tuple[int, dict[str, Value]]:
    """The header up to the tensor index: ``(tensor count, metadata)``, array values only for
    keys in ``arrays``; the handle is left at the tensor index."""
    if handle.read(4) != _MAGIC:
        raise GGUFFormatError(f"{path} is not a GGUF file (bad magic)")
    version = int(_unpack(handle, "<I"))
    if version < 2:
        raise GGUFFormatError(f"{path}: GGUF version {version} is not supported")
    tensor_count = int(_unpack(handle, "<Q"))
    kv_count = int(_unpack(handle, "<Q"))
    out: dict[str, Value] = {}
    for _ in range(kv_count):
        key = _string(handle)
        vtype = int(_unpack(handle, "<I"))
        value = _value(handle, vtype, keep=vtype != _ARRAY or key in arrays)
        if value is not None:
            out[key] = value
    return tensor_count, out


def read_gguf_metadata(path: str | Path, arrays: frozenset[str] = frozenset()) -> dict[str, Value]:
    """All scalar and string metadata of ``path``; array values only for keys in ``arrays``."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            return _read_metadata(handle, path, arrays)[1]
    except FileNotFoundError:
        raise ModelError(f"model file {path} does not exist") from None


def read_gguf_tensor_shapes(path: str | Path) -> tuple[dict[str, Value], dict[str, tuple[int, ...]]]:
    """``(scalar and string metadata, {tensor name: ggml ne})`` from the header of ``path``: the
    tensor index is read, the tensor data never (``gguf.GGUFReader`` also builds every metadata
    array, which takes seconds for a model's 150k-token vocabulary)."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            tensor_count, meta = _read_metadata(handle, path, frozenset())
            shapes: dict[str, tuple[int, ...]] = {}
            for _ in range(tensor_count):
                name = _string(handle)
                n_dims = int(_unpack(handle, "<I"))
                shapes[name] = struct.unpack(f"<{n_dims}Q", _read(handle, 8 * n_dims))
                _read(handle, 12)  # ggml type (u32) and data offset (u64)
            return meta, shapes
    except FileNotFoundError:
        raise ModelError(f"model file {path} does not exist") from None


def gguf_chat_template(path: str | Path) -> tuple[str | None, str, str]:
    """(chat template or None, bos token text, eos token text) from a GGUF header."""
    meta = read_gguf_metadata(path, arrays=frozenset({"tokenizer.ggml.tokens"}))
    tokens = meta.get("tokenizer.ggml.tokens")
    tokens = tokens if isinstance(tokens, list) else []

    def token(key: str) -> str:
        idx = meta.get(key)
        return str(tokens[idx]) if isinstance(idx, int) and 0 <= idx < len(tokens) else ""

    template = meta.get("tokenizer.chat_template")
    return (
        template if isinstance(template, str) else None,
        token("tokenizer.ggml.bos_token_id"),
        token("tokenizer.ggml.eos_token_id"),
    )
