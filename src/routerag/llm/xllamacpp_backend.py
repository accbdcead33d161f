"""In-process llama.cpp through xllamacpp, a prebuilt binding (one AVX2 wheel, no compile).

xllamacpp runs llama.cpp's own server code in this process: :meth:`Server.handle_completions`
takes an OpenAI-style request (a dict) and returns the reply, with no HTTP round trip. The
conversation is rendered here with the GGUF's chat template (as in :mod:`routerag.llm.llamacpp`),
so ``continue_final`` is exact, and the raw prompt is sent with greedy or seeded sampling, the stop
strings, a GBNF grammar and ``cache_prompt`` (the KV cache of the previous call is reused for the
longest common prefix; ``last_stats.reused_prompt_tokens`` says how much). A LoRA adapter GGUF (a
shipped policy) is checked with :func:`routerag.llm.lora_gguf.check_lora_gguf` and applied at load.

``Server`` also opens an HTTP listener on 127.0.0.1 (a random port). It is given a random API
key, so nothing else on the machine can use it; this module calls it only for ``tokenize``.
A call made under :func:`routerag.llm.streaming.tokens_to` is streamed (``stream: true`` with a
callback per chunk), each text piece handed to the sink as it is decoded.
Training rollouts (:class:`routerag.train.generation.LlamaCppSampler`) need the raw logits of every
step and keep to llama-cpp-python. The binding is chosen by :mod:`routerag.llm.llama_bindings`.

Where the server runs is the engine's business: :class:`InProcess` (binding ``xllamacpp``) holds it
in this process, :class:`~routerag.llm.xllamacpp_process.ChildProcess` (binding
``xllamacpp-process``) starts it in a child process and sends the same requests to its listener's
``/v1/completions``, which answers them with the same replies. xllamacpp's ``Server`` constructor
holds the GIL for the whole load (2.4 s for the bundled 0.5B, 4.3 s with its policy adapter), so a
long-running service (``routerag serve``) builds its models in a child, where a build never stalls
its event loop.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from pathlib import Path
from typing import Any

from routerag import progress
from routerag.llm.base import ChatResponse, GenerationParams, ModelError, RenderedChatModel, Usage
from routerag.llm.config import available_cores
from routerag.llm.llamacpp import GenerationStats, checked_model_and_adapter, native_logging_enabled
from routerag.llm.streaming import TokenSink, token_sink
from routerag.llm.template import ChatTemplate
from routerag.llm.xllamacpp_engine import Engine, InProcess, ServerSpec

_FINISH = {"word": "stop", "eos": "eos", "limit": "length"}


class XLlamaCppModel(RenderedChatModel):
    """A GGUF model run by llama.cpp (the xllamacpp wheel) in this process."""

    binding = "xllamacpp"
    where = ""  # in the progress line: where the server runs

    @staticmethod
    def _start(spec: ServerSpec) -> Engine:
        return InProcess(spec)

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
        from routerag.llm.gguf_meta import gguf_chat_template

        source, bos, eos = gguf_chat_template(path)
        source = chat_template or source
        if not source:
            raise ModelError(f"{path} carries no chat template; set chat_format to a Jinja template file")
        spec = ServerSpec(
            model_path=str(path), n_ctx=n_ctx, n_threads=n_threads or available_cores(),
            verbosity=1 if native_logging_enabled() else -1, api_key=secrets.token_hex(16),
            lora_path=str(lora_path) if lora is not None else None, lora_scale=float(lora_scale),
        )
        adapter = f" + adapter {Path(lora_path).parent.name}" if lora_path is not None else ""
        with progress.step(f"llama.cpp (xllamacpp{self.where}): loading {path.stem}{adapter}"):
            self._engine = self._start(spec)
        self.path = path
        self.lora = lora
        self.lora_scale = lora_scale
        self.name = name or path.name
        self.n_ctx = n_ctx
        self.template = ChatTemplate(source, bos, eos)
        self._lock = threading.Lock()
        self._reuse = False  # the first call (and the one after reset) starts from an empty KV cache
        self.last_stats: GenerationStats | None = None

    def close(self) -> None:
        """Stop the server (a child process exits; an in-process one is freed with the model)."""
        self._engine.close()

    def reset(self) -> None:
        """Forget the KV cache: the next call evaluates its whole prompt."""
        with self._lock:
            self._reuse = False

    def tokenize(self, text: str) -> list[int]:
        """Token ids of a raw prompt (special tokens recognised), from the in-process server."""
        import httpx

        reply = httpx.post(
            f"{self._engine.address}/tokenize",
            json={"content": text, "add_special": True, "parse_special": True},
            headers={"Authorization": f"Bearer {self._engine.api_key}"},
            timeout=60,
        )
        reply.raise_for_status()
        return [int(t) for t in reply.json()["tokens"]]

    def complete(self, prompt: str, params: GenerationParams | None = None) -> ChatResponse:
        """Continue a raw, already rendered prompt."""
        params = params or GenerationParams()
        request: dict[str, Any] = {
            "prompt": prompt,
            "n_predict": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": 0,
            "min_p": 0.0,
            "repeat_penalty": 1.0,
            "seed": params.seed if params.seed is not None else random.randrange(2**31),
            "stop": list(params.stop),
            "verbose": True,  # the reply's __verbose says which stop ended the text
        }
        if params.grammar:
            request["grammar"] = params.grammar
        start = time.perf_counter()
        with self._lock:
            request["cache_prompt"] = self._reuse
            sink = token_sink()
            reply = self._engine.completions(request) if sink is None else _streamed(self._engine, request, sink)
            end = time.perf_counter()
            if "error" in reply:
                raise ModelError(_error_text(reply["error"], params.grammar))
            self._reuse = True
            timings = reply.get("timings", {})
            verbose = reply.get("__verbose", {})
            usage = reply.get("usage", {})
            finish = _FINISH.get(verbose.get("stop_type", ""), "length")
            completion = int(usage.get("completion_tokens", timings.get("predicted_n", 0)))
            prompt_tokens = int(usage.get("prompt_tokens", timings.get("prompt_n", 0)))
            self.last_stats = GenerationStats(
                prompt_tokens=prompt_tokens,
                reused_prompt_tokens=int(timings.get("cache_n", 0)),
                completion_tokens=completion - (finish == "eos"),  # as llama-cpp-python's: without the end-of-turn token
                prefill_ms=float(timings.get("prompt_ms", 0.0)),
                decode_ms=float(timings.get("predicted_ms", 0.0)),
            )
        return ChatResponse(
            text=reply["choices"][0]["text"],
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion),
            latency_ms=(end - start) * 1000.0,
            finish_reason=finish,  # type: ignore[arg-type]
            stop_string=(verbose.get("stopping_word") or None) if finish == "stop" else None,
            model=self.name,
        )


def _streamed(engine: Engine, request: dict[str, Any], sink: TokenSink) -> dict[str, Any]:
    """The completion streamed (``stream: true``), each text piece sent to ``sink`` as llama.cpp
    decodes it (the server holds back what may begin a stop string), read back into the reply a
    plain request gives: the pieces' text, and the last chunk's usage, timings and stop."""
    pieces: list[str] = []
    last: dict[str, Any] = {}

    def on_chunk(chunk: dict[str, Any]) -> bool:  # True stops the generation
        nonlocal last
        last = chunk
        if "error" in chunk:
            return True
        text = (chunk.get("choices") or [{}])[0].get("text") or ""
        if text:
            pieces.append(text)
            sink(text)
        return False

    engine.completions({**request, "stream": True}, on_chunk)
    if "error" in last or not last.get("choices"):
        return last if "error" in last else {"error": {"message": "the stream ended without a reply"}}
    return {**last, "choices": [{**last["choices"][0], "text": "".join(pieces)}]}


def _error_text(error: Any, grammar: str | None) -> str:
    message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
    if "exceed" in message and "context" in message:
        return f"prompt does not fit the context: {message}"
    if grammar and "grammar" in message:
        return f"invalid GBNF grammar (llama.cpp could not parse it; it needs a 'root' rule): {message}"
    return f"llama.cpp (xllamacpp) refused the request: {message}"
