"""Sampling from a transformers causal LM at the token level, for rollouts.

:class:`PolicySampler` is a ``generate(prompt_ids, stop_strings, max_new_tokens)`` callable for
:class:`~routerag.train.env.RouteRAGEnv`. Unlike the chat backend (which restores the RNG after
every call so that evaluation is reproducible), it owns a ``torch.Generator`` that advances from
call to call: the ``G`` completions of a GRPO group must differ. Log-probabilities are those of
the sampling distribution (after temperature), one per generated token. It keeps the KV cache of
its last call and evaluates only what follows the longest common prefix (the next turn of an
episode, the next episode of a group); :meth:`PolicySampler.reset` drops it when the weights change.

:class:`LlamaCppSampler` is the same callable over llama.cpp (base GGUF + the policy's current LoRA
adapter, re-exported every optimiser step), for GRPO of a GGUF-based policy on a CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from routerag.llm.llamacpp import find_stop


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def end_token_ids(tokenizer: Any, extra: Sequence[int] | None = None) -> set[int]:
    """The token ids that end a turn: ``extra`` plus the tokenizer's EOS and pad ids."""
    ids = set(extra or [])
    for tid in (getattr(tokenizer, "eos_token_id", None), getattr(tokenizer, "pad_token_id", None)):
        if isinstance(tid, int):
            ids.add(tid)
    return ids


def turn_ended(completion: Sequence[int], stop_strings: Sequence[str], end_ids: set[int], decode: Any) -> bool:
    """Whether a turn ends with the last sampled token: an end token, or a stop string in the
    decoded tail (the last 16 tokens). Every sampler decides it here, so they stop alike."""
    if completion[-1] in end_ids:
        return True
    return bool(stop_strings) and find_stop(decode(list(completion[-16:])), list(stop_strings), 0) is not None


class PolicySampler:
    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        eos_token_ids: Sequence[int] | None = None,
    ) -> None:
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.top_p = top_p
        self.eos_token_ids = end_token_ids(tokenizer, eos_token_ids)
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(seed)
        self.calls = 0
        self.reused_tokens = 0  # prompt tokens served from the KV cache (turns after the first, group members)
        self.reset()

    def reset(self) -> None:
        """Forget the KV cache; call it whenever the model's weights change (every optimiser step)."""
        self._fed: list[int] = []  # the tokens whose keys/values ``_cache`` holds
        self._cache: Any = None

    def __call__(self, prompt_ids: list[int], stop_strings: list[str], max_new_tokens: int) -> tuple[list[int], list[float]]:
        import torch

        self.calls += 1
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        completion: list[int] = []
        logprobs: list[float] = []
        # the longest prefix shared with the tokens already in the cache is not evaluated again
        # (a later turn extends the previous one; a group's episodes share the prompt)
        common = min(_common_prefix(self._fed, prompt_ids), len(prompt_ids) - 1)
        cache = None
        if self._cache is not None and common > 0:
            extra = self._cache.get_seq_length() - common
            if extra > 0:
                self._cache.crop(-extra)  # transformers 5: a negative count removes that many trailing tokens
            cache = self._cache
            self.reused_tokens += common
        else:
            common = 0
        self._cache, self._fed = None, []
        try:
            with torch.no_grad():
                inputs = torch.tensor([prompt_ids[common:]], device=device)
                for _ in range(max_new_tokens):
                    out = self.model(input_ids=inputs, past_key_values=cache, use_cache=True)
                    cache = out.past_key_values
                    logits = out.logits[0, -1].float().cpu()
                    if self.temperature > 0:
                        logits = logits / self.temperature
                    log_probs = torch.log_softmax(logits, dim=-1)
                    if self.temperature > 0:
                        probs = log_probs.exp()
                        if self.top_p < 1.0:
                            sorted_p, order = torch.sort(probs, descending=True)
                            keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < self.top_p
                            probs = torch.zeros_like(probs).scatter(0, order, torch.where(keep, sorted_p, 0.0))
                        token = int(torch.multinomial(probs / probs.sum(), 1, generator=self.generator)[0])
                    else:
                        token = int(torch.argmax(logits))
                    completion.append(token)
                    logprobs.append(float(log_probs[token]))
                    if turn_ended(completion, stop_strings, self.eos_token_ids, self.tokenizer.decode):
                        break
                    inputs = torch.tensor([[token]], device=device)
            if completion:  # at least one forward ran: the cache holds the prompt and all but the last token
                self._cache, self._fed = cache, list(prompt_ids) + completion[:-1]
        finally:
            if was_training:
                self.model.train()
        return completion, logprobs


class LlamaCppSampler:
    """Rollouts sampled by llama.cpp from the base GGUF with the policy's current LoRA adapter —
    on a CPU the counterpart of a vLLM generation server with weight sync: decoding runs in
    llama.cpp's quantised kernels (several times faster than token-by-token transformers), the
    loss in the fp32 training model. :meth:`sync` exports the trainable adapter (PEFT -> adapter
    GGUF, :func:`routerag.train.export_gguf.export_lora_gguf`) and reloads it; the rollout function
    syncs once per optimiser step, so episodes are sampled from the policy being trained (up to the
    quantisation gap, measured in docs/experiments/). Log-probabilities are llama.cpp's."""

    def __init__(self, base_gguf: str | Path, tokenizer: Any, workdir: str | Path, *, temperature: float = 1.0,
                 seed: int = 0, n_ctx: int = 4096, n_threads: int | None = None) -> None:
        import numpy as np

        self.base_gguf = Path(base_gguf)
        self.tokenizer = tokenizer
        self.workdir = Path(workdir)
        self.temperature = temperature
        self.rng = np.random.default_rng(seed)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.model: Any = None
        self.synced_step: int | None = None
        self.calls = 0

    def sync(self, peft_model: Any, step: int) -> Path:
        """Export ``peft_model``'s adapter and load llama.cpp with it (once per ``step``)."""
        from routerag.train.export_gguf import export_lora_gguf

        adapter_dir = self.workdir / "adapter"
        peft_model.save_pretrained(str(adapter_dir))
        path = Path(export_lora_gguf(adapter_dir, self.base_gguf, self.workdir / "adapter.gguf", dtype="f32").path)
        self.load(path, step)
        return path

    def load(self, adapter_gguf: Path | None, step: int) -> None:
        """Load llama.cpp with an adapter GGUF (None: the base model alone)."""
        from routerag.llm.llamacpp import LlamaCppModel

        self.model = None  # free the old context first
        self.model = LlamaCppModel(self.base_gguf, n_ctx=self.n_ctx, n_threads=self.n_threads,
                                   lora_path=str(adapter_gguf) if adapter_gguf is not None else None)
        self.synced_step = step

    def __call__(self, prompt_ids: list[int], stop_strings: list[str], max_new_tokens: int) -> tuple[list[int], list[float]]:
        if self.model is None:
            raise RuntimeError("LlamaCppSampler.sync() must load an adapter before sampling")
        self.calls += 1
        return self.model.sample_ids(list(prompt_ids), list(stop_strings), max_new_tokens, temperature=self.temperature,
                                     rng=self.rng, decode=self.tokenizer.decode)
