"""Backend for OpenAI-compatible HTTP servers (vLLM, llama.cpp server, SGLang, OpenAI itself).

Plain turns use ``/chat/completions``. ``continue_final=True`` needs the model to continue the
last assistant message; two ways are supported and ``continue_mode`` says which one is used:

* ``"completions"``: render the conversation with the model's chat template (from
  ``chat_format``, or the GGUF header when ``model`` is a local GGUF / ``bundled:`` name) and
  send the raw prompt to ``/completions`` — exact, works with vLLM and llama.cpp servers;
* ``"chat-prefix"``: send the conversation with the assistant prefix as the last message to
  ``/chat/completions``. Servers differ here: some continue the message, some open a new turn.

With ``completions_endpoint=None`` the backend uses ``completions`` when it has a template and
falls back to ``chat-prefix`` (for good) when the server rejects ``/completions``.

When a template is known, every call goes through ``/completions`` with the prompt rendered
here, so the model sees exactly what the llama.cpp backend would give it.

Stop strings are applied by the server. Which one ended the text is read from the response
(``stop_reason`` from vLLM, ``matched_stop`` from SGLang). Servers that do not say (llama.cpp's,
OpenAI) are asked, in ``completions`` mode, for a short greedy continuation of the text (see
``_probe_stop``); in ``chat-prefix`` mode the answer stays ``finish_reason="stop"`` with
``stop_string=None``.
GBNF grammars are sent as the ``grammar`` field, which llama.cpp servers honour.

A call made under :func:`routerag.llm.streaming.tokens_to` is streamed from the server
(``stream: true`` with ``stream_options.include_usage``; :mod:`routerag.llm.openai_stream`), each
text delta handed to the sink as it arrives; every other call is a plain request.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Literal

from routerag.llm.base import ChatResponse, GenerationParams, Message, ModelError, Usage, check_conversation
from routerag.llm.config import ModelConfig
from routerag.llm.openai_stream import read_stream, stream_kwargs
from routerag.llm.streaming import token_sink
from routerag.llm.template import ChatTemplate

log = logging.getLogger(__name__)

ContinueMode = Literal["completions", "chat-prefix"]


def _finish(raw_reason: str | None, stop_string: str | None, stops: list[str]) -> str:
    if raw_reason == "length":
        return "length"
    if stop_string is not None or stops:
        return "stop"
    return "eos"


def _matched_stop(choice: Any, stops: list[str]) -> str | None:
    for field in ("stop_reason", "matched_stop"):  # extra fields the openai client keeps
        value = getattr(choice, field, None)
        if isinstance(value, str) and value in stops:
            return value
    return None


def _stop_at_start(continuation: str, stops: list[str], *, cut: bool) -> str | None:
    """The stop string ``continuation`` starts with, after whitespace or not (the longest first);
    when the continuation was ``cut`` at its token limit, one it is the start of."""
    ordered = sorted(stops, key=len, reverse=True)
    for text in dict.fromkeys((continuation, continuation.lstrip())):
        for stop in ordered:
            if text.startswith(stop):
                return stop
        if cut:
            for stop in ordered:
                if text and stop.startswith(text):
                    return stop
    return None


class EndpointNotFoundError(ModelError):
    """The server answered 404 (for instance a chat-only server asked for ``/completions``)."""


class OpenAICompatModel:
    """A model behind an OpenAI-compatible endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        template: ChatTemplate | None = None,
        completions_endpoint: bool | None = None,
    ) -> None:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a dependency
            raise ModelError("the openai backend needs the openai package: pip install openai") from exc
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=1
        )
        self.base_url = base_url
        self._model = model
        self.template = template
        if completions_endpoint and template is None:
            raise ModelError(
                "completions_endpoint=True needs a chat template (set chat_format, or model to a local GGUF)"
            )
        self.continue_mode: ContinueMode = (
            "completions" if template is not None and completions_endpoint is not False else "chat-prefix"
        )
        self._may_fall_back = completions_endpoint is None
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        """The served model name; asked from ``/models`` when not configured."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    models = self._call(lambda: self._client.models.list())
                    ids = [m.id for m in models.data]
                    if not ids:
                        raise ModelError(f"{self.base_url} serves no models")
                    self._model = ids[0]
        return self._model

    @property
    def name(self) -> str:
        return self._model or self.base_url

    def _call(self, fn):
        openai = self._openai
        try:
            return fn()
        except openai.APIConnectionError as exc:
            raise ModelError(f"cannot reach {self.base_url}: {exc}") from exc
        except openai.NotFoundError as exc:
            raise EndpointNotFoundError(f"{self.base_url} answered 404: {exc.message}") from exc
        except openai.APIStatusError as exc:
            raise ModelError(f"{self.base_url} answered {exc.status_code}: {exc.message}") from exc

    @staticmethod
    def _sampling(params: GenerationParams) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.stop:
            kwargs["stop"] = params.stop
        if params.seed is not None:
            kwargs["seed"] = params.seed
        if params.grammar:
            kwargs["extra_body"] = {"grammar": params.grammar}
        return kwargs

    def chat(
        self,
        messages: list[Message],
        params: GenerationParams | None = None,
        *,
        continue_final: bool = False,
    ) -> ChatResponse:
        params = params or GenerationParams()
        check_conversation(messages, continue_final)
        if self.continue_mode == "completions":
            assert self.template is not None
            prompt = self.template.render(messages, continue_final=continue_final)
            try:
                return self._complete(prompt, params)
            except EndpointNotFoundError:
                if not self._may_fall_back:
                    raise
                log.warning(
                    "%s has no /completions endpoint; continuing assistant messages via chat instead", self.base_url
                )
                self.continue_mode = "chat-prefix"
        return self._chat(messages, params)

    def complete(self, prompt: str, params: GenerationParams | None = None) -> ChatResponse:
        """Continue a raw, already rendered prompt through ``/completions``."""
        return self._complete(prompt, params or GenerationParams())

    def _complete(self, prompt: str, params: GenerationParams) -> ChatResponse:
        start = time.perf_counter()
        text, choice, usage = self._create("completions", model=self.model, prompt=prompt, **self._sampling(params))
        response = self._response(text, choice, usage, params, start)
        if response.finish_reason == "stop" and response.stop_string is None:
            stop_string = self._probe_stop(prompt + text, params.stop)
            if stop_string is None and params.grammar:
                stop_string = self._probe_grammar(prompt, text, params, response.usage.completion_tokens)
            response = response.model_copy(
                update={
                    "stop_string": stop_string,
                    "finish_reason": "stop" if stop_string else "eos",
                    "latency_ms": (time.perf_counter() - start) * 1000.0,
                }
            )
        return response

    def _probe_stop(self, prefix: str, stops: list[str]) -> str | None:
        """The server stopped on a stop string or on end-of-turn but did not say which (llama.cpp
        servers, OpenAI). Ask for the greedy continuation of the text so far (a few tokens, prefix
        cached by the server): a stop string there is the one that ended the text, nothing means
        end-of-turn. Exact for greedy decoding; for sampled text the likeliest explanation.

        Whitespace before the stop string in the continuation counts as none: the server cuts
        the text inside the token that held the stop (`` </search>`` leaves the text ending in a
        space), so the prefix sent back ends in a token the model never produced, and llama.cpp's
        server then continues it with `` </search>``."""
        longest = max(len(s) for s in stops)
        probe = self._call(
            lambda: self._client.completions.create(
                model=self.model, prompt=prefix, max_tokens=min(16, longest + 2), temperature=0.0
            )
        )
        return _stop_at_start(probe.choices[0].text or "", stops, cut=probe.choices[0].finish_reason == "length")

    def _probe_grammar(self, prompt: str, text: str, params: GenerationParams, tokens: int) -> str | None:
        """A grammar-constrained turn whose stop the free continuation did not show (the grammar
        forced a closing tag the model would not have written): generate the turn again under the
        grammar without stop strings, a few tokens past ``text``; what follows ``text`` there
        starts with the stop that ended it, or is nothing when the grammar ended the turn.
        Exact for greedy decoding; None when the text is not reproduced."""
        longest = max(len(s) for s in params.stop)
        again = params.model_copy(update={"stop": [], "max_tokens": tokens + min(16, longest + 2)})
        result = self._call(lambda: self._client.completions.create(model=self.model, prompt=prompt, **self._sampling(again)))
        choice = result.choices[0]
        regenerated = choice.text or ""
        if not regenerated.startswith(text):
            return None
        return _stop_at_start(regenerated[len(text):], params.stop, cut=choice.finish_reason == "length")

    def _chat(self, messages: list[Message], params: GenerationParams) -> ChatResponse:
        start = time.perf_counter()
        payload = [{"role": m.role, "content": m.content} for m in messages]
        text, choice, usage = self._create("chat", model=self.model, messages=payload, **self._sampling(params))
        return self._response(text, choice, usage, params, start)

    def _create(self, kind: Literal["completions", "chat"], **request: Any) -> tuple[str, Any, Any]:
        """One ``/completions`` or ``/chat/completions`` call: (text, finishing choice, usage).
        Streamed, each delta to the call's token sink, when it has one (:mod:`routerag.llm.streaming`)."""
        endpoint = self._client.completions if kind == "completions" else self._client.chat.completions
        sink = token_sink()
        if sink is None:
            result = self._call(lambda: endpoint.create(**request))
            choice = result.choices[0]
            return (choice.text if kind == "completions" else choice.message.content) or "", choice, result.usage
        reply = self._call(lambda: read_stream(endpoint.create(**request, **stream_kwargs()), sink, kind))
        return reply.text, reply.choice, reply.usage

    def _response(self, text: str, choice: Any, usage: Any, params: GenerationParams, start: float) -> ChatResponse:
        stop_string = _matched_stop(choice, params.stop)
        return ChatResponse(
            text=text,
            usage=Usage(
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            ),
            latency_ms=(time.perf_counter() - start) * 1000.0,
            finish_reason=_finish(getattr(choice, "finish_reason", None), stop_string, params.stop),  # type: ignore[arg-type]
            stop_string=stop_string,
            model=self.name,
        )


def _template_for(config: ModelConfig) -> tuple[ChatTemplate | None, bool]:
    """(template, whether ``model`` named a local file rather than a served model)."""
    if config.chat_format is not None:
        try:
            return ChatTemplate(config.chat_format.read_text(encoding="utf-8")), False
        except OSError as exc:
            raise ModelError(f"cannot read chat_format {config.chat_format}: {exc}") from None
    model = config.model or ""
    from routerag.llm.bundled import BUNDLED_PREFIX

    if model.startswith(BUNDLED_PREFIX) or model.endswith(".gguf"):
        from routerag.llm.gguf_meta import gguf_chat_template
        from routerag.llm.resolve import resolve_model_file

        source, bos, eos = gguf_chat_template(resolve_model_file(model))
        return (ChatTemplate(source, bos, eos) if source else None), True
    return None, False


def from_config(config: ModelConfig) -> OpenAICompatModel:
    if not config.base_url:
        raise ModelError("the openai backend needs base_url (or $ROUTERAG_BASE_URL)")
    template, local_model = _template_for(config)
    return OpenAICompatModel(
        config.base_url,
        config.served_model or (None if local_model else config.model),
        api_key=os.environ.get(config.api_key_env),
        timeout_s=config.timeout_s,
        template=template,
        completions_endpoint=config.completions_endpoint,
    )
