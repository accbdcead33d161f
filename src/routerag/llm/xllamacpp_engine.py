"""Where an xllamacpp server runs: the settings it is built from (:class:`ServerSpec`), what a model
asks of it (:class:`Engine`), and the server held in this process (:class:`InProcess`).

:class:`~routerag.llm.xllamacpp_backend.XLlamaCppModel` renders prompts and reads replies; an engine
only builds the server and answers OpenAI-style completion requests (dicts), plain or streamed one
chunk at a time. The child-process engine is :mod:`routerag.llm.xllamacpp_process`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from routerag.llm.base import ModelError

ChunkHandler = Callable[[dict[str, Any]], bool]
"""Called with each streamed chunk; True stops the generation."""


class ServerSpec(BaseModel):
    """What an xllamacpp ``Server`` is built from (JSON, so a child process can build it too)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: str
    n_ctx: int
    n_threads: int
    verbosity: int  # llama.cpp's log level: -1 quiet, 1 on
    api_key: str  # the listener answers only callers that hold it
    lora_path: str | None = None
    lora_scale: float = 1.0

    def build(self) -> Any:
        """The server, loaded (a :class:`ModelError` when llama.cpp cannot load it)."""
        try:
            import xllamacpp as xlc
        except ImportError as exc:
            raise ModelError("the xllamacpp binding is not installed: pip install xllamacpp") from exc
        params = xlc.CommonParams()
        params.model.path = self.model_path
        params.n_ctx = self.n_ctx
        params.n_parallel = 1
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_threads
        params.warmup = False
        params.verbosity = self.verbosity
        params.api_keys = [self.api_key]
        if self.lora_path is not None:
            params.lora_adapters = [xlc.CommonAdapterLoraInfo(self.lora_path, self.lora_scale)]
        try:
            return xlc.Server(params)
        except Exception as exc:  # xllamacpp raises RuntimeError / ValueError from C++
            with_adapter = f" with {self.lora_path}" if self.lora_path else ""
            raise ModelError(f"llama.cpp could not load {self.model_path}{with_adapter}: {exc}") from exc


class Engine(Protocol):
    """A running server: its HTTP listener (``address``, ``api_key``) and its completions."""

    address: str
    api_key: str

    def completions(self, request: dict[str, Any], on_chunk: ChunkHandler | None = None) -> dict[str, Any]:
        """The reply to ``request``; streamed (``request["stream"]``) chunk by chunk to ``on_chunk``."""
        ...

    def close(self) -> None: ...


class InProcess:
    """The server in this process (``Server.handle_completions``, no HTTP round trip). Its build
    holds the GIL until the model is loaded."""

    def __init__(self, spec: ServerSpec) -> None:
        self._server = spec.build()
        self.address: str = self._server.listening_address
        self.api_key = spec.api_key

    def completions(self, request: dict[str, Any], on_chunk: ChunkHandler | None = None) -> dict[str, Any]:
        if on_chunk is None:
            reply: dict[str, Any] = self._server.handle_completions(request)
            return reply
        self._server.handle_completions(request, on_chunk)
        return {}

    def close(self) -> None:
        """Nothing to stop: the server is freed with this engine."""
