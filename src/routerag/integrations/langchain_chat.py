"""A LangChain chat model over a running ``routerag serve`` that keeps the provenance:
:class:`RouteragChatModel` is LangChain's ``ChatOpenAI`` pointed at the service's OpenAI-compatible
endpoint, which also copies the run's trace (the ``routerag`` field of the completion, or of the
last streamed chunk with choices) into the message's ``response_metadata["routerag"]`` (and the
generation's ``generation_info``); plain ``ChatOpenAI`` drops that field::

    llm = RouteragChatModel(base_url="http://127.0.0.1:8700/v1", api_key="...", model="routerag")
    reply = llm.invoke("Who was Teutberga married to?")
    trace = trace_of(reply)             # routerag.trace.Trace: steps, hits, routing decisions
    documents = trace_documents(reply)  # the passages the answer came from, as Documents

``trace_documents`` gives every hit of the trace's steps once (by source and ``doc_id``, in step
order), with the metadata :class:`~routerag.integrations.langchain.RouteragRetriever` gives a hit
plus ``step`` (the index of the step that retrieved it). Needs the ``integrations`` extra."""

from __future__ import annotations

from typing import Any

import openai
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI

from routerag.integrations.langchain import to_document
from routerag.trace import Trace

__all__ = ["TRACE_KEY", "RouteragChatModel", "trace_documents", "trace_of"]

TRACE_KEY = "routerag"  # the completion's field, and the response_metadata key, that hold the trace


def _raw_trace(response: dict[str, Any] | openai.BaseModel) -> dict[str, Any] | None:
    raw = response.get(TRACE_KEY) if isinstance(response, dict) else (response.model_extra or {}).get(TRACE_KEY)
    return raw if isinstance(raw, dict) else None


class RouteragChatModel(ChatOpenAI):
    """``ChatOpenAI`` whose messages carry routerag's trace in ``response_metadata["routerag"]``."""

    def _create_chat_result(self, response: dict[str, Any] | openai.BaseModel,
                            generation_info: dict[str, Any] | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        raw = _raw_trace(response)
        if raw is not None:
            for generation in result.generations:
                generation.message.response_metadata[TRACE_KEY] = raw
                generation.generation_info = {**(generation.generation_info or {}), TRACE_KEY: raw}
        return result

    def _convert_chunk_to_generation_chunk(self, chunk: dict[str, Any], default_chunk_class: type,
                                           base_generation_info: dict[str, Any] | None) -> ChatGenerationChunk | None:
        converted = super()._convert_chunk_to_generation_chunk(chunk, default_chunk_class, base_generation_info)
        raw = _raw_trace(chunk)
        if converted is not None and raw is not None:  # the last chunk with choices carries it
            converted.message.response_metadata[TRACE_KEY] = raw
            converted.generation_info = {**(converted.generation_info or {}), TRACE_KEY: raw}
        return converted


def trace_of(message: BaseMessage) -> Trace | None:
    """The routerag trace a :class:`RouteragChatModel` message carries (None: it carries none)."""
    raw = message.response_metadata.get(TRACE_KEY)
    return Trace.model_validate(raw) if isinstance(raw, dict) else None


def trace_documents(message_or_trace: BaseMessage | Trace) -> list[Document]:
    """The trace's hits as LangChain documents, each once, in the order its steps retrieved them."""
    trace = message_or_trace if isinstance(message_or_trace, Trace) else trace_of(message_or_trace)
    if trace is None:
        return []
    seen: set[tuple[str, str]] = set()
    documents = []
    for step in trace.steps:
        for hit in step.hits:
            if (hit.source, hit.doc_id) in seen:
                continue
            seen.add((hit.source, hit.doc_id))
            document = to_document(hit)
            document.metadata["step"] = step.index
            documents.append(document)
    return documents
