"""Load Hugging Face tokenizers and causal LMs for a configured model name.

``bundled:`` names and ``.gguf`` paths are loaded through transformers' GGUF support
(``from_pretrained(dir, gguf_file=name)``). Converting the GGUF vocabulary to a fast tokenizer
takes ~30 s, so the converted tokenizer is saved once under
``cache_dir("models")/tokenizers/`` (temp dir + rename) and reloaded from there (~1 s).
Anything else is passed to ``from_pretrained`` as a Hugging Face id or directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from routerag.llm.base import ModelError
from routerag.llm.bundled import BUNDLED_PREFIX
from routerag.paths import cache_dir


def gguf_file_for(model: str) -> Path | None:
    """The local GGUF a model name refers to (assembling a bundled one), or None for HF ids."""
    if model.startswith(BUNDLED_PREFIX) or model.endswith(".gguf"):
        from routerag.llm.resolve import resolve_model_file

        return resolve_model_file(model)
    return None


def load_tokenizer(model: str) -> Any:
    """A transformers tokenizer for ``model`` (a ``bundled:`` name, a ``.gguf`` path, an HF id/dir)."""
    from transformers import AutoTokenizer

    gguf = gguf_file_for(model)
    if gguf is None:
        try:
            return AutoTokenizer.from_pretrained(model)
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot load a tokenizer for {model!r}: {exc}") from exc
    target = cache_dir("models") / "tokenizers" / f"{gguf.stem}-{gguf.stat().st_size}"
    if (target / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "tokenizer_config.json").is_file():  # not a lost race with another process
            raise
    return tokenizer


def load_causal_lm(model: str, *, dtype: str = "auto", device: str = "cpu") -> Any:
    """An ``AutoModelForCausalLM`` in eval mode on ``device``. GGUF weights are dequantised
    (the bundled 0.5B becomes a 630M-parameter model; ~40 s on 2 CPU cores)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtypes = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in dtypes:
        raise ModelError(f"unknown dtype {dtype!r}; valid: {', '.join(dtypes)}")
    torch_dtype = dtypes[dtype]
    if torch_dtype is None:
        torch_dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    gguf = gguf_file_for(model)
    try:
        if gguf is not None:
            lm = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch_dtype)
        else:
            lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load {model!r} with transformers: {exc}") from exc
    return lm.to(device).eval()
