"""Bound how many requests run at once against one backend (``ModelConfig.concurrency``)."""

from __future__ import annotations

import threading

from routerag.llm.base import ChatModel, ChatResponse, GenerationParams, Message


class LimitedModel:
    """At most ``max_concurrency`` calls of ``inner.chat`` run at the same time; the rest wait."""

    def __init__(self, inner: ChatModel, max_concurrency: int) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.inner = inner
        self.name = inner.name
        self.max_concurrency = max_concurrency
        self._slots = threading.BoundedSemaphore(max_concurrency)

    def chat(
        self,
        messages: list[Message],
        params: GenerationParams | None = None,
        *,
        continue_final: bool = False,
    ) -> ChatResponse:
        with self._slots:
            return self.inner.chat(messages, params, continue_final=continue_final)
