"""An OpenAI-compatible face of the ask service: ``POST /v1/chat/completions`` and
``GET /v1/models`` (``GET /v1/models/{model}``), so that any OpenAI client (the ``openai`` SDK,
LangChain's ``ChatOpenAI``, LlamaIndex's ``OpenAILike``, ...) uses routerag as a model.

**The model name picks the pipeline.** Every registered strategy is a model of that name
(``routerag``: the routerag strategy with the shipped policy of the configured base, as
``routerag ask`` and ``/v1/ask`` resolve it; ``vanilla``; ``adaptive``; ...). ``GET /v1/models``
lists the ones this service can run with their default params: a strategy whose optional
dependency is missing, or whose defaults name sources this service does not mount (``r1-router``
without ``passage``/``table``), is not listed. ``routerag-1.5b`` (the routerag strategy on the
bundled 1.5B with its shipped policy) is listed only when the service runs the bundled 0.5B through
llama.cpp without an adapter of its own and the 1.5B's packages (the ``model-1p5b`` extra) are
installed: the service's model pool then builds it on its first request, next to the 0.5B (about
1.1 GB more memory, and several times slower on a CPU). An unknown model gets 404
(``model_not_found``).

**The request.** The messages are read by one rule (:mod:`routerag.server.chat_messages`): the
question is the text of the *last* ``user`` message, checked like ``/v1/ask``'s question (empty or
too long: 422); system and developer messages are the instructions and the context the strategy
answers from, and earlier user and assistant turns the conversation so far — every model call of
the run sees both (:class:`~routerag.llm.conversation.ConversationModel`); tool messages, tool
calls, messages after the question and non-text parts are refused (400). The ``passthrough``
model answers the messages as given, with no retrieval. ``max_completion_tokens`` (or ``max_tokens``) caps each model call of the
run: every ``max_*tokens*`` parameter of the strategy is lowered to it (never raised); above the
service's ``max_new_tokens`` it is refused (422). ``n`` must be 1. ``temperature``, ``top_p``,
``stop``, ``seed``, ``tools``, ``response_format`` and any other field a client sends are accepted
and ignored: a strategy's generation settings are its params (its stop sequences belong to its
protocol). The ``routerag`` extension field (``extra_body={"routerag": {...}}`` in the SDK) carries
the strategy's ``params`` and the uploaded ``sources`` to mount, validated as ``/v1/ask`` validates
them.

**The answer.** The strategy's answer is the assistant message; ``usage`` holds the run's real
token counts (every model call of the trace); the full :class:`~routerag.trace.Trace` is under
``routerag``. With ``stream: true`` the reply is server-sent events (:mod:`routerag.server.chat_stream`):
a chunk with the assistant role as soon as the run starts; a ``reasoning_content`` line per step
of the run as it happens; ``content`` deltas of the answer as its model call generates it (the
strategies whose answer is one call's text — ``direct``, ``vanilla``, ``passthrough``, ... — on a
backend that streams), else the answer in one delta when the run ends; ``: keep-alive`` comments
in the silences; a chunk with ``finish_reason: "stop"`` and the trace under ``routerag`` (the last
chunk with choices); a chunk with ``usage`` and no choices when ``stream_options.include_usage`` is
set (as OpenAI sends it); then ``data: [DONE]``. A client that disconnects stops the run at its
next model call or retrieval, as on ``/v1/ask``.

**Errors** use OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, on every
OpenAI route, the front door's refusals (a wrong API key: 401) and the admission's (429) included,
so that the SDK raises its typed errors (:mod:`routerag.server.openai_errors` maps them all). A run
that fails (its trace records an error) is an HTTP error too, not an empty answer, with the trace
under ``routerag``; the trace's ``error_kind`` gives the status: 422 (``run_failed``) when the run
asked for a source this service cannot serve, 502 when the model or a remote source failed, 500
otherwise (with ``x-should-retry: false``: the SDK would otherwise repeat the run). In a stream,
which has already answered 200, the failure is a ``data: {"error": {...}, "routerag": trace}``
event before ``[DONE]``; the SDK raises it as an ``APIError``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from routerag.edge.asks import Ask, StrategyConfig
from routerag.edge.refusals import RequestRefused
from routerag.server.admitted import AdmittedAsk, AdmittedStream
from routerag.server.chat_messages import ChatMessage, read_messages
from routerag.server.chat_models import UnknownModelError
from routerag.server.chat_schema import AssistantMessage, ChatCompletion, ChatCompletionChunk, Choice, CompletionUsage
from routerag.server.chat_stream import ChunkWriter, stream_completion
from routerag.server.deps import admit_ask, get_service
from routerag.server.live import Watch
from routerag.server.openai_errors import OPENAI_ERRORS, ChatRequestError, OpenAIRoute, failed_run_reply
from routerag.server.service import Service

__all__ = ["ChatCompletion", "ChatCompletionChunk", "ChatCompletionRequest", "ModelList", "router"]

OWNER = "routerag"
KEEP_ALIVE_S = 10.0  # a comment line when a streamed run has sent nothing else for this long


# ------------------------------------------------------------------ the request


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = Field(False, description="end the stream with a chunk holding the run's token usage")


class RouteragOptions(BaseModel):
    """The ``routerag`` extension field: what ``/v1/ask`` takes besides the question."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, Any] = Field(default_factory=dict, description="the strategy's parameters (GET /v1/strategies)")
    sources: list[str] = Field(default_factory=list, max_length=16, description="uploaded custom sources to mount")


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat-completion request. Fields this model does not name are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200, description="a strategy (GET /v1/models)")
    messages: list[ChatMessage] = Field(min_length=1, max_length=1_000,
                                        description="the last user message is the question; system messages are the "
                                                    "instructions and context, earlier turns the conversation so far")
    stream: bool | None = Field(False, description="answer as server-sent events")
    stream_options: StreamOptions | None = None
    max_completion_tokens: int | None = Field(None, ge=1, description="caps every model call of the run")
    max_tokens: int | None = Field(None, ge=1, description="the older name of max_completion_tokens")
    n: int | None = Field(1, description="answers to give: only 1")
    temperature: float | None = Field(None, description="accepted and ignored (a strategy's params set its own)")
    top_p: float | None = Field(None, description="accepted and ignored")
    stop: str | list[str] | None = Field(None, description="accepted and ignored (a strategy's protocol has its own)")
    routerag: RouteragOptions | None = Field(None, description="routerag's extension: the strategy's params and sources")

    @field_validator("n")
    @classmethod
    def _one_answer(cls, n: int | None) -> int | None:
        if n is not None and n != 1:
            raise ValueError(f"n={n} is not supported: a strategy gives one answer per question")
        return n

    @property
    def token_cap(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


# ------------------------------------------------------------------ the reply


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = OWNER


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


# ------------------------------------------------------------------ the routes

router = APIRouter(tags=["openai"], route_class=OpenAIRoute)
COMPLETION_REPLY: dict[int | str, dict[str, Any]] = {200: {
    "content": {"text/event-stream": {}},
    "description": "a chat completion; with `stream: true`, chat.completion.chunk events then [DONE]"}}


def _check(service: Service, body: ChatCompletionRequest) -> None:
    cap, limit = body.token_cap, service.settings.max_new_tokens
    if cap is not None and cap > limit:
        raise ChatRequestError(422, f"max_tokens: {cap} is above this service's limit of {limit} tokens",
                               param="max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens")


@router.get("/v1/models", response_model=ModelList, responses={401: OPENAI_ERRORS[401]},
            summary="the models (strategies) this service answers with, in OpenAI's shape")
async def list_models(service: Service = Depends(get_service)) -> ModelList:
    names = await anyio.to_thread.run_sync(service.chat_models.names)
    return ModelList(data=[ModelCard(id=name, created=service.chat_models.started) for name in names])


@router.get("/v1/models/{model}", response_model=ModelCard, responses={k: OPENAI_ERRORS[k] for k in (401, 404, 422)},
            summary="one model (strategy) in OpenAI's shape")
async def get_model(model: str, service: Service = Depends(get_service)) -> ModelCard:
    if model not in await anyio.to_thread.run_sync(service.chat_models.names):
        raise UnknownModelError(model)
    return ModelCard(id=model, created=service.chat_models.started)


@router.post("/v1/chat/completions", response_model=ChatCompletion, responses={**COMPLETION_REPLY, **OPENAI_ERRORS},
             summary="answer the last user message with the strategy the model name picks (OpenAI-compatible)")
async def chat_completions(request: Request, body: ChatCompletionRequest, admitted: AdmittedAsk = Depends(admit_ask),
                           service: Service = Depends(get_service)) -> ChatCompletion | Response:
    asked = read_messages(body.messages)  # the one rule for system messages and earlier turns
    try:
        service.answerer.check_question(asked.question, f"messages[{asked.index}] (the last user message)")
    except RequestRefused as exc:
        raise ChatRequestError(422, str(exc), param="messages") from None
    _check(service, body)
    options = body.routerag or RouteragOptions()  # the strategy is the model name's, prepared as /v1/ask prepares one
    config = StrategyConfig(params=options.params, sources=options.sources)
    prepared = await service.prepare(config, model=body.model, token_cap=body.token_cap)
    ask = Ask(prepared, asked.question, asked.conversation)
    meta = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": body.model}
    if body.stream:
        writer = ChunkWriter(meta, include_usage=bool(body.stream_options and body.stream_options.include_usage))
        items = service.stream(ask, request.receive, Watch(answer=True, keep_alive_s=KEEP_ALIVE_S))
        return AdmittedStream(stream_completion(items, writer), admitted)
    trace = await service.run(ask, request.receive)
    admitted.replied()
    if trace is None:
        return Response(status_code=499)  # the client left: nobody reads it
    if trace.error is not None:
        return failed_run_reply(trace)
    return ChatCompletion(**meta, choices=[Choice(message=AssistantMessage(content=trace.answer or ""))],
                          usage=CompletionUsage.of(trace), routerag=trace)
