"""The frozen lower layers of a LoRA run, run without autograd and cached.

With LoRA on the upper layers only (``lora.layers_top``), the layers below the first adapted
one hold no trainable parameter: their output is a function of the input ids alone, fixed for
the whole run (and for every run on the same base model). :class:`FrozenPrefix` patches those
decoder layers so that they

* run under ``torch.no_grad()`` (no graph is recorded, no activations are kept for a backward
  pass that would stop there anyway — also when a trainer turns on input gradients for
  gradient checkpointing), and
* optionally remember the hidden state leaving the last frozen layer per input row
  (``cache=True``): a row seen again (a second epoch, the golden trajectories of the next
  rejection-sampling round) skips the lower layers entirely.

The loss and the gradients of the trainable parameters are exactly those of the full graph with
the same trainable set (the frozen layers' outputs do not depend on them);
``tests/integration/test_train_frozen_prefix.py`` checks both. torch is imported inside the functions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def decoder_layers(model: Any) -> Any:
    """The decoder layer list of a (peft-wrapped) causal LM (``model.layers`` of Qwen2/Llama)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = getattr(base, "model", base)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(f"{type(base).__name__} has no decoder layer list (model.layers)")
    return layers


def first_trainable_layer(model: Any) -> int:
    """Index of the lowest decoder layer holding a trainable parameter (len(layers) if none)."""
    layers = decoder_layers(model)
    for i, layer in enumerate(layers):
        if any(p.requires_grad for p in layer.parameters()):
            return i
    return len(layers)


def _row_key(input_ids: Any, attention_mask: Any) -> str:
    h = hashlib.sha1(input_ids.detach().cpu().numpy().tobytes())
    h.update(str(tuple(input_ids.shape)).encode())
    if attention_mask is not None:
        h.update(attention_mask.detach().cpu().numpy().tobytes())
    return h.hexdigest()


class FrozenPrefix:
    """Runs the decoder layers below ``first_trainable_layer(model)`` without autograd; with
    ``cache``, keeps their output per batch of input ids (call the model inside :meth:`batch`).

    ``max_cached`` bounds the cache (rows beyond it are computed every time). The cache holds the
    fp32 hidden states (``seq_len x hidden`` floats per row: ~4 MB for a 1,190-token row of a
    0.5B Qwen2)."""

    def __init__(self, model: Any, *, cache: bool = True, max_cached: int = 2048, store: dict[str, Any] | None = None) -> None:
        self.layers = decoder_layers(model)
        self.boundary = first_trainable_layer(model)
        self.cache_enabled = cache
        self.max_cached = max_cached
        # ``store``: a cache shared between trainers of the same base model (the RFT rounds); keys hold the boundary
        self._cache: dict[str, Any] = store if store is not None else {}
        self._key: str | None = None
        self._hit: Any = None
        self.hits = 0
        self.misses = 0
        self._originals: list[tuple[Any, Any]] = []
        for i in range(self.boundary):
            layer = self.layers[i]
            self._originals.append((layer, layer.forward))
            layer.forward = self._patched(i, layer.forward)

    def _patched(self, index: int, forward: Any) -> Any:
        import torch

        last = index == self.boundary - 1

        def run(hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
            if self._hit is not None:  # cached: the lower layers are skipped, the last one hands over the state
                return self._hit if last else hidden_states
            with torch.no_grad():
                out = forward(hidden_states, *args, **kwargs)
            if last and self._key is not None and self.cache_enabled and len(self._cache) < self.max_cached:
                self._cache[self._key] = (out[0] if isinstance(out, tuple) else out).detach().clone()
            return out

        return run

    @contextmanager
    def batch(self, input_ids: Any, attention_mask: Any = None) -> Iterator[bool]:
        """Context of one forward pass over ``input_ids``; yields whether the lower layers' output was cached."""
        if self.boundary == 0 or not self.cache_enabled:
            yield False
            return
        self._key = f"{self.boundary}:{_row_key(input_ids, attention_mask)}"
        self._hit = self._cache.get(self._key)
        hit = self._hit is not None
        self.hits += hit
        self.misses += not hit
        try:
            yield hit
        finally:
            self._key, self._hit = None, None

    def remove(self) -> None:
        """Restore the original forwards (a shared ``store`` keeps its entries)."""
        for layer, _ in self._originals:
            del layer.forward  # the instance attribute goes; the class's forward is back
        self._originals.clear()

    def __len__(self) -> int:
        return len(self._cache)
