"""The trainable policy of a run: tokenizer, model (HF, GGUF dequantised, or the tiny random
Qwen2 for CPU checks), LoRA adapter restored from ``lora.init_from``. Heavy libraries are imported
inside the functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from routerag.train.adapters import restore_adapter
from routerag.train.config import TrainConfig


def load_tokenizer_for(spec: Any) -> Any:
    from routerag.llm.hf_assets import load_tokenizer

    source = spec.tokenizer or ("bundled:qwen2.5-coder-0.5b" if spec.name == "tiny" else spec.name)
    tokenizer = load_tokenizer(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(spec: Any, tokenizer: Any, *, seed: int = 0) -> Any:
    """The trainable policy: a tiny random Qwen2 ('tiny') or a pretrained causal LM in train mode."""
    if spec.name == "tiny":
        from routerag.train.fixtures import tiny_qwen2

        return tiny_qwen2(len(tokenizer), layers=spec.tiny_layers, hidden=spec.tiny_hidden, seed=seed)
    from routerag.llm.hf_assets import load_causal_lm
    from routerag.llm.transformers_backend import pick_device

    model = load_causal_lm(spec.name, dtype=spec.dtype, device=pick_device("auto"))
    unmark_gguf_quantization(model)
    model.train()
    return model


def load_trainable(cfg: TrainConfig, tokenizer: Any) -> Any:
    """The policy of the run; with ``lora.init_from``, wrapped with that trained adapter (trainable)."""
    model = load_policy(cfg.model, tokenizer, seed=cfg.grpo.seed)
    if cfg.lora.enabled and cfg.lora.init_from:
        model = restore_adapter(model, cfg.lora, gguf_base_path(cfg.model.name))
    return model


def unmark_gguf_quantization(model: Any) -> Any:
    """A model loaded with ``gguf_file=`` holds plain dequantised fp32/bf16 weights, but
    transformers keeps its GGUF "quantizer" and marks it quantized, and ``Trainer`` then refuses to
    train it ("QuantizationMethod.GGUF ... do not support training"). Other quantizers are left alone."""
    quantizer = getattr(model, "hf_quantizer", None)
    method = str(getattr(getattr(quantizer, "quantization_config", None), "quant_method", "")).lower()
    if quantizer is None or ("gguf" not in method and "gguf" not in type(quantizer).__name__.lower()):
        return model
    quantizer.remove_quantization_config(model)  # transformers' own way: drops hf_quantizer, is_quantized=False
    return model


def gguf_base_path(name: str) -> Path | None:
    """The GGUF file behind a ``bundled:`` name or a ``.gguf`` path (None for HF models)."""
    if name.startswith("bundled:") or name.endswith(".gguf"):
        from routerag.llm.resolve import resolve_model_file

        return Path(resolve_model_file(name))
    return None
