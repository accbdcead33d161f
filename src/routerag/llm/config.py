"""``ModelConfig``: which chat model to use, and how the model, endpoint and backend are resolved.

Resolution order (:meth:`ModelConfig.resolved`): what the configuration names explicitly
(a model path / id / ``bundled:`` name, a ``base_url``), then the environment
(``ROUTERAG_MODEL``, ``ROUTERAG_BASE_URL``, ``ROUTERAG_BACKEND``), then the bundled
Qwen2.5-Coder-0.5B-Instruct. Without an explicit backend, a base URL means ``openai`` and
anything else ``llamacpp``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from routerag.config import OMIT_AT_DEFAULT
from routerag.errors import RouteragError
from routerag.llm.backends import BACKENDS
from routerag.llm.bundled import BUNDLED_PREFIX, DEFAULT_BUNDLED
from routerag.registry import RegisteredName, UnknownNameError

Backend = Annotated[str, RegisteredName(BACKENDS)]
"""A registered model backend (``routerag.llm.backends.BACKENDS``) or a plugin's ``"pkg.mod:factory"``."""

ENV_MODEL = "ROUTERAG_MODEL"
ENV_BASE_URL = "ROUTERAG_BASE_URL"
ENV_BACKEND = "ROUTERAG_BACKEND"
DEFAULT_MODEL = BUNDLED_PREFIX + DEFAULT_BUNDLED

BUNDLED_POLICY = "routerag-sft-qwen2.5-coder-0.5b"
"""The shipped RouteRAG policy adapter for the bundled 0.5B, the default base (``data/policies/<name>/adapter.gguf``)."""

BUNDLED_POLICIES: dict[str, str] = {
    DEFAULT_MODEL: BUNDLED_POLICY,
    BUNDLED_PREFIX + "qwen2.5-coder-1.5b": "routerag-sft-outcome-qwen2.5-coder-1.5b",
}
"""The shipped policy of each bundled base model (``bundled:`` name -> ``data/policies/<name>``): the
``routerag`` strategy on that base applies it unless told otherwise (docs/guides/models.md)."""


class MissingPolicyError(RouteragError, FileNotFoundError):
    """No policy of that name ships with the package."""


def bundled_policy_path(name: str = BUNDLED_POLICY) -> Path:
    """The llama.cpp LoRA adapter GGUF of a policy shipped inside the package."""
    from importlib.resources import files

    path = Path(str(files("routerag") / "data" / "policies" / name / "adapter.gguf"))
    if not path.is_file():
        raise MissingPolicyError(f"no shipped policy {name!r} (expected {path})")
    return path


def with_default_policy(config: ModelConfig, strategy: str) -> ModelConfig:
    """``config`` with the shipped RouteRAG policy adapter of its base when it runs the ``routerag``
    strategy on a bundled model that has one (``BUNDLED_POLICIES``) through llama.cpp and names no
    adapter of its own; else unchanged."""
    resolved = config.resolved()
    policy = BUNDLED_POLICIES.get(resolved.model or "")
    if strategy != "routerag" or config.lora_path is not None or resolved.backend != "llamacpp" or policy is None:
        return config
    return config.model_copy(update={"lora_path": bundled_policy_path(policy)})


_DEFAULT_CONCURRENCY: dict[str, int] = {"llamacpp": 1, "openai": 8, "transformers": 1, "scripted": 8}
"""Per built-in backend; any other (a plugin) defaults to 1 concurrent request."""


def available_cores() -> int:
    """CPU cores this process may run on (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


class ModelConfig(BaseModel):
    """How to build a :class:`~routerag.llm.base.ChatModel`."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    backend: Backend | None = Field(
        default=None,
        description="llamacpp | openai | transformers | scripted (BACKENDS), or a plugin's pkg.mod:factory; "
        "None: openai if a base_url is set, else llamacpp",
    )
    model: str | None = Field(
        default=None,
        description="a GGUF path, an HF model id/dir, a served model name, or bundled:qwen2.5-coder-0.5b "
        f"(default) / bundled:qwen2.5-coder-1.5b; None: ${ENV_MODEL}, else the bundled 0.5B",
    )
    base_url: str | None = Field(default=None, description=f"OpenAI-compatible endpoint (…/v1); None: ${ENV_BASE_URL}")
    served_model: str | None = Field(
        default=None,
        description="openai backend: the model name sent to the server, when `model` names a local GGUF / bundled: model "
        "that only supplies the chat template (e.g. a vLLM LoRA module: --lora-modules routerag-policy=DIR); "
        "None: `model` itself, or the server's first model when `model` is a local file",
        json_schema_extra=OMIT_AT_DEFAULT,
    )
    api_key_env: str = Field(
        default="OPENAI_API_KEY", description="environment variable holding the API key (optional for local servers)"
    )
    n_ctx: int = Field(default=4096, ge=256, le=131_072, description="context window (llama.cpp)")
    n_threads: int | None = Field(
        default=None, ge=1, description="CPU threads (llama.cpp, transformers); None: all available cores"
    )
    lora_path: Path | None = Field(
        default=None,
        description="llamacpp: a llama.cpp LoRA adapter GGUF applied on top of the model (routerag export-lora-gguf "
        "writes one from a PEFT adapter); it must have been trained on this base model",
    )
    lora_scale: float = Field(
        default=1.0, ge=0.0, le=16.0, description="llamacpp: adapter scale (1 = the trained alpha / r; 0 = off)"
    )
    chat_format: Path | None = Field(
        default=None,
        description="a Jinja chat-template file overriding the model's own "
        "(also used by the openai backend to render prompts)",
    )
    cache: bool | Path = Field(
        default=False, description="response cache: False, True (default location) or a SQLite path"
    )
    concurrency: int | None = Field(
        default=None, ge=1, le=256, description="max concurrent requests; None: backend default (llamacpp 1, openai 8)"
    )
    timeout_s: float = Field(default=120.0, gt=0, description="request timeout (openai backend)")
    completions_endpoint: bool | None = Field(
        default=None,
        description="openai backend, continue_final: True use /completions with the rendered prompt, False use chat "
        "with an assistant prefix message, None: try /completions when a template is known, fall back to chat",
    )
    device: str = Field(default="auto", description="transformers: auto | cpu | cuda | cuda:N")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="transformers weights dtype"
    )
    scripted_outputs: list[str] = Field(
        default_factory=list, description="scripted backend: the canned outputs, in order (cycled)"
    )

    def resolved(self) -> ModelConfig:
        """A copy with backend, model and base_url filled in from the environment and defaults."""
        model = self.model or os.environ.get(ENV_MODEL) or None
        base_url = self.base_url or os.environ.get(ENV_BASE_URL) or None
        backend = self.backend or os.environ.get(ENV_BACKEND) or ("openai" if base_url else "llamacpp")
        try:
            BACKENDS.validate_name(backend)
        except UnknownNameError as exc:
            raise ValueError(f"{exc} (from ${ENV_BACKEND})") from None
        if self.lora_path is not None and backend != "llamacpp":
            raise ValueError(f"lora_path applies to the llamacpp backend only, not {backend!r}")
        if self.served_model is not None and backend != "openai":
            raise ValueError(f"served_model applies to the openai backend only, not {backend!r}")
        if model is None and backend in ("llamacpp", "transformers"):
            model = DEFAULT_MODEL
        return self.model_copy(
            update={
                "backend": backend,
                "model": model,
                "base_url": base_url,
                "n_threads": self.n_threads or available_cores(),
                "concurrency": self.concurrency or _DEFAULT_CONCURRENCY.get(backend, 1),
            }
        )
