"""In-process llama.cpp backend (``llama_cpp.Llama``) for GGUF models.

The conversation is rendered with the GGUF's own chat template (see :mod:`routerag.llm.template`)
and tokenised here, and tokens are generated with :meth:`Llama.generate`, so this module decides
where a stop string ends the text, whether the model stopped on its end-of-turn token or ran out
of ``max_tokens``, and how many tokens each side used. ``Llama.generate`` keeps the KV cache of
the previous call and evaluates only the tokens after the longest common prefix, so the turns of
one multi-turn trajectory (each a growing prompt) prefill only their new tokens;
``last_stats.reused_prompt_tokens`` shows how many were reused. One model serves one request
at a time (a lock); interleaving trajectories works but loses the prefix reuse. Under
:func:`~routerag.llm.streaming.tokens_to` the text is streamed as it is decoded.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routerag import progress
from routerag.llm.base import (
    ChatResponse,
    GenerationParams,
    ModelError,
    RenderedChatModel,
    Usage,
)
from routerag.llm.config import ModelConfig, available_cores
from routerag.llm.streaming import StopSafeText, token_sink
from routerag.llm.template import ChatTemplate


@dataclass(frozen=True)
class GenerationStats:
    """Timing of the last call: prefill (prompt evaluation up to the first sampled token) and decode."""

    prompt_tokens: int
    reused_prompt_tokens: int  # served from the KV cache of the previous call
    completion_tokens: int
    prefill_ms: float
    decode_ms: float


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _last_logits(llm: Any) -> Any:
    """A numpy view (float32, vocabulary size) of the context's logits after the last evaluated
    token; llama-cpp-python no longer copies them into ``Llama.scores`` unless ``logits_all``."""
    import ctypes

    import numpy as np
    from llama_cpp import llama_cpp as capi

    row = ctypes.cast(capi.llama_get_logits_ith(llm._ctx.ctx, -1), ctypes.POINTER(ctypes.c_float))
    return np.ctypeslib.as_array(row, shape=(llm.n_vocab(),))


_native_logging: dict[str, Any] = {"enabled": False, "callback": None, "last_level": 0}
# ggml_log_level of current llama.cpp (llama-cpp-python's own callback still maps the older enum,
# so it prints WARN lines such as the LoRA loader's "fallback to CPU" as errors)
_GGML_ERROR, _GGML_CONT = 4, 5


def set_native_logging(enabled: bool) -> None:
    """Show all of llama.cpp's own log lines (model loading, LoRA adapters, backends) on stderr, or
    only its errors (the default). llama-cpp-python's ``verbose=False`` silences model loading
    only; adapter loading still reaches its log callback, so this module installs its own
    (routerag's ``--verbose`` turns everything on)."""
    _native_logging["enabled"] = enabled


def native_logging_enabled() -> bool:
    """Whether llama.cpp's own log lines are on (:func:`set_native_logging`), for either binding."""
    return bool(_native_logging["enabled"])


def _install_log_callback() -> None:
    """Route llama.cpp's C-level log through a callback of ours (once per process)."""
    if _native_logging["callback"] is not None:
        return
    import ctypes
    import sys

    from llama_cpp import llama_cpp as capi

    @capi.llama_log_callback
    def callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if level != _GGML_CONT:
            _native_logging["last_level"] = level
        if _native_logging["enabled"] or _native_logging["last_level"] == _GGML_ERROR:
            print(text.decode("utf-8", errors="replace"), end="", flush=True, file=sys.stderr)

    capi.llama_log_set(callback, ctypes.c_void_p(0))
    _native_logging["callback"] = callback  # a reference, or ctypes frees the callback llama.cpp calls


def find_stop(text: str, stops: list[str], start: int) -> tuple[int, str] | None:
    """Earliest stop string occurring in ``text`` at or after ``start`` (ties: the longer one)."""
    best: tuple[int, str] | None = None
    for stop in stops:
        at = text.find(stop, start) if stop else -1
        if at >= 0 and (best is None or at < best[0] or (at == best[0] and len(stop) > len(best[1]))):
            best = (at, stop)
    return best


def checked_model_and_adapter(model_path: str | Path, lora_path: str | Path | None) -> tuple[Path, Any]:
    """The GGUF model file, and the LoRA adapter GGUF checked against it (None without one); a
    missing file or an adapter that does not fit the model is a ``ModelError`` (both bindings)."""
    path = Path(model_path)
    if not path.is_file():
        raise ModelError(f"GGUF model file {path} does not exist")
    if lora_path is None:
        return path, None
    from routerag.llm.lora_gguf import LoraExportError, check_lora_gguf

    try:
        return path, check_lora_gguf(lora_path, path)
    except LoraExportError as exc:
        raise ModelError(f"LoRA adapter does not fit {path.name}: {exc}") from exc


class LlamaCppModel(RenderedChatModel):
    """A GGUF model run by llama.cpp (the llama-cpp-python binding) in this process."""

    binding = "llama-cpp-python"

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        chat_template: str | None = None,
        name: str | None = None,
        lora_path: str | Path | None = None,
        lora_scale: float = 1.0,
    ) -> None:
        path, lora = checked_model_and_adapter(model_path, lora_path)
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelError("the llamacpp backend needs llama-cpp-python: pip install llama-cpp-python") from exc
        _install_log_callback()
        threads = n_threads or available_cores()
        verbose = bool(_native_logging["enabled"])
        description = f"llama.cpp: loading {path.stem}" + (f" + adapter {Path(lora_path).parent.name}" if lora else "")
        try:
            extra = {"lora_path": str(lora_path), "lora_scale": float(lora_scale)} if lora is not None else {}
            with progress.step(description):
                self._llm = Llama(
                    model_path=str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=verbose, **extra
                )
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp could not load {path}{' with ' + str(lora_path) if lora else ''}: {exc}") from exc
        self.path = path
        self.lora = lora
        self.lora_scale = lora_scale
        self.name = name or path.name
        self.n_ctx = self._llm.n_ctx()
        source = chat_template or self._llm.metadata.get("tokenizer.chat_template")
        if not source:
            raise ModelError(f"{path} carries no chat template; set chat_format to a Jinja template file")
        self.template = ChatTemplate(
            source, self._token_text(self._llm.token_bos()), self._token_text(self._llm.token_eos())
        )
        self._lock = threading.Lock()
        self.last_stats: GenerationStats | None = None
        self._valid_grammars: set[str] = set()

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._llm.detokenize([token], special=True).decode("utf-8", errors="replace")

    def reset(self) -> None:
        """Forget the KV cache. Seeded sampling is reproducible from the same cache state; a
        prompt whose prefix is reused is evaluated in smaller batches, which can move
        near-tied tail probabilities by rounding and so change a sampled (never a greedy) token."""
        with self._lock:
            self._llm.reset()

    def _grammar(self, gbnf: str):
        """A ``LlamaGrammar``, checked first: llama.cpp crashes the process on a grammar that
        does not parse, so it is compiled once here and a failure becomes a ``ModelError``."""
        from llama_cpp import LlamaGrammar
        from llama_cpp import llama_cpp as capi

        if gbnf not in self._valid_grammars:
            sampler = capi.llama_sampler_init_grammar(self._llm._model.vocab, gbnf.encode("utf-8"), b"root")
            if not sampler:
                raise ModelError("invalid GBNF grammar (llama.cpp could not parse it; it needs a 'root' rule)")
            capi.llama_sampler_free(sampler)
            self._valid_grammars.add(gbnf)
        return LlamaGrammar.from_string(gbnf, verbose=False)

    def tokenize(self, text: str) -> list[int]:
        """Token ids of a raw prompt (special tokens such as ``<|im_start|>`` are recognised)."""
        return self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)

    def next_token_logits(self, prompt: str):
        """The raw next-token logits (numpy float32, vocabulary size) after a rendered prompt;
        for checks against another implementation (e.g. an exported LoRA adapter vs PEFT).
        Clears the KV cache."""


        with self._lock:
            llm = self._llm
            llm.reset()
            llm.eval(self.tokenize(prompt))
            out = _last_logits(llm).copy()
            llm.reset()
        return out

    def sample_ids(self, prompt_ids: list[int], stop: list[str], max_new_tokens: int, *, temperature: float = 1.0,
                   rng: Any = None, decode: Callable[[list[int]], str] | None = None) -> tuple[list[int], list[float]]:
        """Sample a continuation of token ids with the log-probability of every sampled token under
        the sampling distribution (logits / temperature; full vocabulary, no top-k/top-p), for RL
        rollouts. The longest common prefix with the previous call's tokens is reused from the KV
        cache. Stops after an end-of-generation token (included, as a trainer expects), a ``stop``
        string (``decode`` turns ids into text; default llama.cpp's detokenizer) or ``max_new_tokens``."""

        import numpy as np
        from llama_cpp import llama_cpp as capi

        rng = rng if rng is not None else np.random.default_rng()
        with self._lock:
            llm = self._llm
            if len(prompt_ids) + max_new_tokens > self.n_ctx:
                max_new_tokens = self.n_ctx - len(prompt_ids)
                if max_new_tokens < 1:
                    raise ModelError(f"prompt of {len(prompt_ids)} tokens does not fit the context of {self.n_ctx}")
            reused = min(_common_prefix(list(llm._input_ids[: llm.n_tokens]), list(prompt_ids)), len(prompt_ids) - 1)
            llm.n_tokens = reused  # eval() drops the KV cache after n_tokens
            llm.eval(list(prompt_ids[reused:]))
            vocab = llm.n_vocab()
            ids: list[int] = []
            logprobs: list[float] = []
            text_of = decode or (lambda t: llm.detokenize(t).decode("utf-8", errors="ignore"))
            for _ in range(max_new_tokens):
                logits = _last_logits(llm).astype(np.float64)
                if temperature > 0:
                    logits /= temperature
                logits -= logits.max()
                log_probs = logits - np.log(np.exp(logits).sum())
                if temperature > 0:
                    token = int(rng.choice(vocab, p=np.exp(log_probs)))
                else:
                    token = int(np.argmax(logits))
                ids.append(token)
                logprobs.append(float(log_probs[token]))
                if capi.llama_vocab_is_eog(llm._model.vocab, token):
                    break
                if stop and find_stop(text_of(ids[-16:]), stop, 0) is not None:
                    break
                llm.eval([token])
        return ids, logprobs

    def complete(self, prompt: str, params: GenerationParams | None = None) -> ChatResponse:
        """Continue a raw, already rendered prompt."""
        params = params or GenerationParams()
        from llama_cpp import llama_cpp as capi

        start = time.perf_counter()
        with self._lock:
            locked = time.perf_counter()  # prefill is timed from here, not from waiting on the lock
            llm = self._llm
            tokens = self.tokenize(prompt)
            room = self.n_ctx - len(tokens)
            if room < 1:
                raise ModelError(f"prompt of {len(tokens)} tokens does not fit the context of {self.n_ctx}")
            max_tokens = min(params.max_tokens, room)
            reused = _common_prefix(list(llm._input_ids[: llm.n_tokens]), tokens)
            llm.set_seed(params.seed if params.seed is not None else random.randrange(2**31))
            grammar = self._grammar(params.grammar) if params.grammar else None
            completion: list[int] = []
            buffer = bytearray()
            checked = 0  # characters of the decoded text already searched for stops
            longest_stop = max((len(s) for s in params.stop), default=0)
            finish, stop_string, text = "length", None, None
            first_token_at = None
            sink = token_sink()
            streamed = StopSafeText(sink, params.stop) if sink is not None else None
            generator = llm.generate(
                tokens,
                top_k=0,
                top_p=params.top_p,
                min_p=0.0,
                temp=params.temperature,
                repeat_penalty=1.0,
                grammar=grammar,
            )
            try:
                for token in generator:
                    if first_token_at is None:
                        first_token_at = time.perf_counter()
                    if capi.llama_vocab_is_eog(llm._model.vocab, token):
                        finish = "eos"
                        break
                    completion.append(token)
                    buffer += llm.detokenize([token], prev_tokens=tokens + completion[:-1])
                    if params.stop or streamed is not None:
                        decoded = buffer.decode("utf-8", errors="ignore")
                        hit = find_stop(decoded, params.stop, max(0, checked - longest_stop + 1))
                        checked = len(decoded)
                        if hit is not None:
                            finish, stop_string, text = "stop", hit[1], decoded[: hit[0]]
                            break
                        if streamed is not None:
                            streamed.update(decoded)
                    if len(completion) >= max_tokens:
                        break
            finally:
                generator.close()
            end = time.perf_counter()
            if text is None:
                text = buffer.decode("utf-8", errors="replace")
            if streamed is not None:
                streamed.finish(text)
            first = first_token_at or end
            self.last_stats = GenerationStats(
                prompt_tokens=len(tokens),
                reused_prompt_tokens=min(reused, len(tokens) - 1),  # a full match still replays one token
                completion_tokens=len(completion),
                prefill_ms=(first - locked) * 1000.0,
                decode_ms=(end - first) * 1000.0,
            )
        return ChatResponse(
            text=text,
            usage=Usage(prompt_tokens=len(tokens), completion_tokens=len(completion) + (finish == "eos")),
            latency_ms=(end - start) * 1000.0,
            finish_reason=finish,  # type: ignore[arg-type]
            stop_string=stop_string,
            model=self.name,
        )


def from_config(config: ModelConfig) -> RenderedChatModel:
    """The configured GGUF model through the chosen binding (:mod:`routerag.llm.llama_bindings`:
    ``config.binding``, else ``ROUTERAG_LLAMA_BINDING``, else xllamacpp when installed, else llama-cpp-python)."""
    from routerag.llm.llama_bindings import model_class
    from routerag.llm.resolve import resolve_model_file

    path = resolve_model_file(config.model or "")
    template = config.chat_format.read_text(encoding="utf-8") if config.chat_format else None
    return model_class(config.binding)(
        path, n_ctx=config.n_ctx, n_threads=config.n_threads, chat_template=template, name=config.model,
        lora_path=config.adapter_file(), lora_scale=config.lora_scale,
    )
