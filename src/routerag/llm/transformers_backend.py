"""transformers backend: any ``AutoModelForCausalLM`` (HF id/dir, or a GGUF dequantised).

This is the backend training and GPU runs use: it wraps an already loaded model and tokenizer
(``TransformersModel(model, tokenizer)``, e.g. the policy being trained) or loads one
(:func:`from_config`). Prompts are rendered with the tokenizer's chat template through the same
:class:`~routerag.llm.template.ChatTemplate` as the llama.cpp backend, so both see identical
text. :meth:`TransformersModel.generate_tokens` returns the completion's token ids and their
log-probabilities under the model (for rollouts); :meth:`chat` wraps it. Under
:func:`~routerag.llm.streaming.tokens_to` the text is streamed as it is decoded.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

from routerag.llm.base import ChatResponse, GenerationParams, ModelError, RenderedChatModel, Usage
from routerag.llm.config import ModelConfig
from routerag.llm.llamacpp import find_stop
from routerag.llm.streaming import StopSafeText, token_sink
from routerag.llm.template import ChatTemplate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenGeneration:
    """One completion at the token level: ids, per-token log-probabilities (temperature 1),
    the decoded text (cut at the stop string) and why generation ended."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: Literal["stop", "length", "eos"]
    stop_string: str | None


def pick_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class TransformersModel(RenderedChatModel):
    """Chat with a transformers causal LM (batch size one, thread-safe by a lock)."""

    def __init__(
        self, model: Any, tokenizer: Any, *, name: str = "transformers", chat_template: str | None = None
    ) -> None:
        source = chat_template or getattr(tokenizer, "chat_template", None)
        if not source:
            raise ModelError(f"tokenizer of {name} has no chat template; set chat_format")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.template = ChatTemplate(source, tokenizer.bos_token or "", tokenizer.eos_token or "")
        eos = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        generation_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if isinstance(generation_eos, int):
            eos.add(generation_eos)
        elif isinstance(generation_eos, list):
            eos.update(generation_eos)
        if not eos:
            raise ModelError(f"{name}: no end-of-sequence token known")
        self.eos_token_ids = sorted(eos)
        self._lock = threading.Lock()
        self._warned_grammar = False

    def complete(self, prompt: str, params: GenerationParams | None = None) -> ChatResponse:
        """Continue a raw, already rendered prompt."""
        start = time.perf_counter()
        ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        out = self.generate_tokens(ids, params)
        return ChatResponse(
            text=out.text,
            usage=Usage(prompt_tokens=len(ids), completion_tokens=len(out.completion_ids)),
            latency_ms=(time.perf_counter() - start) * 1000.0,
            finish_reason=out.finish_reason,
            stop_string=out.stop_string,
            model=self.name,
        )

    def generate_tokens(self, prompt_ids: list[int], params: GenerationParams | None = None) -> TokenGeneration:
        """Greedy (``temperature=0``) or sampled generation from prompt token ids; stops at an
        end-of-sequence token, a stop string, or ``max_tokens``."""
        import torch

        params = params or GenerationParams()
        if params.grammar and not self._warned_grammar:
            log.warning("the transformers backend ignores GBNF grammars")
            self._warned_grammar = True
        if not prompt_ids:
            raise ModelError("cannot generate from an empty prompt")
        device = next(self.model.parameters()).device
        sampled = params.temperature > 0
        with (
            self._lock,
            torch.inference_mode(),
            torch.random.fork_rng(devices=[device] if device.type == "cuda" else []),
        ):
            if params.seed is not None:
                torch.manual_seed(params.seed)
            cache = None
            inputs = torch.tensor([prompt_ids], device=device)
            completion: list[int] = []
            logprobs: list[float] = []
            finish: Literal["stop", "length", "eos"] = "length"
            stop_string = None
            text = None
            sink = token_sink()
            streamed = StopSafeText(sink, params.stop) if sink is not None else None
            for _ in range(params.max_tokens):
                output = self.model(input_ids=inputs, past_key_values=cache, use_cache=True)
                cache = output.past_key_values
                logits = output.logits[0, -1].float()
                log_probs = torch.log_softmax(logits, dim=-1)
                if sampled:
                    token = int(self._sample(logits, params.temperature, params.top_p))
                else:
                    token = int(torch.argmax(logits))
                completion.append(token)
                logprobs.append(float(log_probs[token]))
                if token in self.eos_token_ids:
                    finish = "eos"
                    break
                if params.stop or streamed is not None:
                    decoded = self.tokenizer.decode(completion, skip_special_tokens=False)
                    hit = find_stop(decoded, params.stop, 0)
                    if hit is not None:
                        finish, stop_string, text = "stop", hit[1], decoded[: hit[0]]
                        break
                    if streamed is not None:  # a character still incomplete waits for its next token
                        streamed.update(decoded.rstrip("\ufffd"))
                inputs = torch.tensor([[token]], device=device)
        if text is None:
            body = completion[:-1] if finish == "eos" else completion
            text = self.tokenizer.decode(body, skip_special_tokens=False)
        if streamed is not None:
            streamed.finish(text)
        return TokenGeneration(list(prompt_ids), completion, logprobs, text, finish, stop_string)

    @staticmethod
    def _sample(logits: Any, temperature: float, top_p: float) -> Any:
        import torch

        probs = torch.softmax(logits / temperature, dim=-1)
        if top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < top_p
            sorted_probs = torch.where(keep, sorted_probs, torch.zeros_like(sorted_probs))
            probs = torch.zeros_like(probs).scatter(0, order, sorted_probs)
        return torch.multinomial(probs / probs.sum(), 1)[0]


def from_config(config: ModelConfig) -> TransformersModel:
    import torch

    from routerag.llm.hf_assets import load_causal_lm, load_tokenizer

    model_name = config.model or ""
    if config.n_threads:
        torch.set_num_threads(config.n_threads)
    tokenizer = load_tokenizer(model_name)
    lm = load_causal_lm(model_name, dtype=config.dtype, device=pick_device(config.device))
    template = config.chat_format.read_text(encoding="utf-8") if config.chat_format else None
    return TransformersModel(lm, tokenizer, name=model_name, chat_template=template)
