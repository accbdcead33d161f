"""``ModelConfig``: which chat model to use, and how the model, endpoint and backend are resolved.

Resolution order: what the configuration names explicitly (a model path / id / ``bundled:``
name, a ``base_url``), then the environment (``ROUTERAG_MODEL``, ``ROUTERAG_BASE_URL``,
``ROUTERAG_BACKEND``), then the bundled Qwen2.5-Coder-0.5B-Instruct. Without an explicit backend,
a base URL means ``openai`` and anything else ``llamacpp``.

The environment is read at the front door (``routerag.api``, hence the CLI, the service and the
MCP server), once, and applied to each configuration it takes (:meth:`ModelConfig.with_environment`,
filling only what the configuration leaves unset); :meth:`ModelConfig.resolved` fills in the
defaults from the configuration alone and reads no environment. Code that builds a model below the
front door applies it itself: ``config.with_environment(model_environment())``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from routerag.config import NOT_IN_FINGERPRINT, OMIT_AT_DEFAULT
from routerag.errors import RouteragError
from routerag.llm.backends import BACKENDS
from routerag.llm.bundled import BUNDLED_PREFIX, DEFAULT_BUNDLED
from routerag.llm.environment import ENV_BACKEND, ENV_BASE_URL, ENV_MODEL, ModelEnvironment
from routerag.llm.llama_bindings import BINDINGS
from routerag.provenance import NameOrPath
from routerag.registry import RegisteredName, UnknownNameError

Backend = Annotated[str, RegisteredName(BACKENDS)]
Binding = Annotated[str, RegisteredName(BINDINGS)]
"""A registered llama.cpp binding (``routerag.llm.llama_bindings.BINDINGS``)."""
"""A registered model backend (``routerag.llm.backends.BACKENDS``) or a plugin's ``"pkg.mod:factory"``."""

DEFAULT_MODEL = BUNDLED_PREFIX + DEFAULT_BUNDLED

BUNDLED_POLICY = "routerag-sft-qwen2.5-coder-0.5b"
"""The default shipped policy adapter (``data/policies/<name>/``): ``bundled_policy_path``'s when none is named.
Which strategy applies which policy on which base: ``strategies.shipped``."""

POLICY_PREFIX = "policy:"
"""``policy:NAME`` names a shipped policy's adapter wherever an adapter path is taken (``model.lora_path``)."""


def policy_name_of(value: object) -> str | None:
    """NAME of a ``policy:NAME`` string; None for anything else (a path, another adapter)."""
    return value[len(POLICY_PREFIX):] if isinstance(value, str) and value.startswith(POLICY_PREFIX) else None
ADAPTER_FILE = "adapter.gguf"
PACKED_ADAPTER_FILE = ADAPTER_FILE + ".xz"
"""How a policy ships: its adapter GGUF xz-compressed, decompressed once into the cache on first use."""
ADAPTER_SHA_FILE = ADAPTER_FILE + ".sha256"
"""A policy whose adapter is kept outside the package (the tree's size limit) holds this instead: the
sha256 of its ``adapter.gguf`` (``sha256sum`` format); ``routerag policies install`` puts a copy with
that sha256 into the cache (:func:`installed_adapter`)."""


class MissingPolicyError(RouteragError, FileNotFoundError):
    """No policy of that name ships with the package."""


def policy_dir(name: str) -> Path:
    """The folder of a policy shipped inside the package (its adapter, README, training records)."""
    from importlib.resources import files

    if not name or Path(name).name != name or name.startswith("."):
        raise MissingPolicyError(f"{name!r} is not a policy name (a folder under data/policies)")
    return Path(str(files("routerag") / "data" / "policies" / name))


def policy_adapter(folder: Path) -> Path:
    """The plain adapter GGUF of the policy in ``folder``: its ``adapter.gguf`` when there is one (a
    developer's own export), else its ``adapter.gguf.xz`` decompressed into
    ``$ROUTERAG_HOME/policies/<sha256 of the .xz, 16 hex>/<folder name>/adapter.gguf`` (once; reused while
    its recorded size matches, so the adapter's sha256 is the plain file's wherever it comes from); for a
    policy that keeps its adapter outside the package, the copy ``routerag policies install`` put in the
    cache (:func:`installed_adapter`)."""
    plain = folder / ADAPTER_FILE
    if plain.is_file():
        return plain
    packed = folder / PACKED_ADAPTER_FILE
    if not packed.is_file():
        installed = installed_adapter(folder)
        if installed.is_file():
            return installed
        if (folder / ADAPTER_SHA_FILE).is_file():
            raise MissingPolicyError(
                f"the policy {folder.name!r} keeps its adapter outside the package and it is not installed: "
                f"`routerag policies install {folder.name} FILE` (docs/guides/models.md says where FILE comes from), "
                "or run untrained (--untrained)")
        raise MissingPolicyError(f"no shipped policy {folder.name!r} (expected {plain} or {packed})")
    from routerag.filehash import file_sha256
    from routerag.llm.bundled import unpack_xz

    key = file_sha256(packed, what="policy adapter")[:16]
    return unpack_xz(packed, _policy_cache() / key / folder.name / ADAPTER_FILE)


def installed_adapter(folder: Path) -> Path:
    """Where ``routerag policies install`` puts the adapter of a policy kept outside the package:
    ``$ROUTERAG_HOME/policies/installed/<name>/adapter.gguf`` (written only with the recorded sha256)."""
    return _policy_cache() / "installed" / folder.name / ADAPTER_FILE


def recorded_adapter_sha256(folder: Path) -> str | None:
    """The sha256 recorded for a policy whose adapter is kept outside the package; None for one that ships it."""
    record = folder / ADAPTER_SHA_FILE
    return record.read_text(encoding="utf-8").split()[0] if record.is_file() else None


def is_policy_folder(folder: Path) -> bool:
    """``folder`` is a policy's: it holds its adapter, packed or plain, or the record of one kept apart."""
    return any((folder / name).is_file() for name in (ADAPTER_FILE, PACKED_ADAPTER_FILE, ADAPTER_SHA_FILE))


def _policy_cache() -> Path:
    """Where shipped adapters are decompressed: ``<cache>/policies/<xz sha256, 16 hex>/<name>/adapter.gguf``."""
    from routerag.paths import cache_dir

    return cache_dir("policies")


def bundled_policy_path(name: str = BUNDLED_POLICY) -> Path:
    """The llama.cpp LoRA adapter GGUF (a plain file) of a policy shipped inside the package."""
    return policy_adapter(policy_dir(name))


def lora_path_of(value: str | Path) -> Path:
    """An adapter path as configured: ``policy:NAME`` is that shipped policy's GGUF, anything else a path."""
    name = policy_name_of(str(value))
    return bundled_policy_path(name) if name is not None else Path(value)


def shipped_policy_names() -> list[str]:
    """``policy:NAME`` of every policy shipped inside the package."""
    from importlib.resources import files

    root = Path(str(files("routerag") / "data" / "policies"))
    return sorted(POLICY_PREFIX + folder.name for folder in root.iterdir() if folder.is_dir()) if root.is_dir() else []


def _adapter_of(value: object) -> object:
    """``policy:NAME`` -> the shipped policy's adapter GGUF (decompressed on first use); else unchanged."""
    if isinstance(value, str) and value.startswith(POLICY_PREFIX):
        try:
            return lora_path_of(value)
        except MissingPolicyError as exc:
            raise ValueError(str(exc)) from None
    return value


AdapterPath = Annotated[Path, BeforeValidator(_adapter_of), NameOrPath("adapter", shipped_policy_names)]
"""A llama.cpp LoRA adapter GGUF, or ``policy:NAME`` for a shipped one, resolved to its GGUF when
validated (from a request: a shipped one or a file inside the service's data folder)."""


def _known_policy(value: object) -> object:
    """``policy:NAME`` stays that value when a shipped policy of that name exists (its folder holds an
    adapter: nothing is read, hashed or decompressed); anything else is left to the next type."""
    name = policy_name_of(value)
    if name is None:
        return value
    try:
        folder = policy_dir(name)
    except MissingPolicyError as exc:
        raise ValueError(str(exc)) from None
    if not is_policy_folder(folder):
        raise ValueError(f"no shipped policy {name!r} (expected {folder / ADAPTER_FILE} or {folder / PACKED_ADAPTER_FILE})")
    return PolicyName(value)


class PolicyName(str):
    """``policy:NAME``: a shipped policy, named; its adapter GGUF is found (and decompressed, once) only
    when a model is built or fingerprinted (:func:`lora_path_of`)."""

    @property
    def name(self) -> str:
        return policy_name_of(self) or ""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: object, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(cls, core_schema.str_schema(pattern=f"^{POLICY_PREFIX}"))


AdapterRef = Annotated[PolicyName | Path, BeforeValidator(_known_policy)]
"""A llama.cpp LoRA adapter GGUF, or ``policy:NAME`` (kept as a :class:`PolicyName` until used)."""


def shipped_policy_name(adapter: str | Path) -> str | None:
    """The name of the shipped policy whose adapter ``adapter`` is (``policy:NAME``, its package
    folder's file, or its decompressed copy in the cache); None for any other adapter."""
    named = policy_name_of(adapter)
    if named is not None:
        return named
    path = Path(adapter)
    try:
        folder = policy_dir(path.parent.name)
    except MissingPolicyError:
        return None
    where = path.resolve().parent
    if folder.is_dir() and (where == folder.resolve() or where.parent.parent == _policy_cache().resolve()):
        return folder.name
    return None


def policy_folder_of(adapter: str | Path) -> Path:
    """The folder holding an adapter's training records (``golden_stats.json``, ...): a shipped policy's
    package folder (also for its decompressed copy in the cache), else the adapter's own folder."""
    name = shipped_policy_name(adapter)
    return policy_dir(name) if name is not None else Path(adapter).parent


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
    binding: Binding | None = Field(
        default=None,
        description="llamacpp: the llama.cpp binding (xllamacpp | xllamacpp-process | llama-cpp-python); "
        "None: $ROUTERAG_LLAMA_BINDING, else the first installed of xllamacpp and llama-cpp-python",
        json_schema_extra=NOT_IN_FINGERPRINT,  # the bindings give the same answers (tests/model/test_llm_bindings.py)
    )
    lora_path: AdapterRef | None = Field(
        default=None,
        description="llamacpp: a llama.cpp LoRA adapter GGUF applied on top of the model (routerag export-lora-gguf "
        "writes one from a PEFT adapter), or policy:NAME for one shipped in the package "
        "(policy:routerag-sft-qwen2.5-coder-0.5b, kept as that name until a model is built); it must have been "
        "trained on this base model",
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

    def adapter_file(self) -> Path | None:
        """The adapter GGUF to apply: ``lora_path`` itself, or a shipped policy's (decompressed once)."""
        return None if self.lora_path is None else lora_path_of(self.lora_path)

    def with_environment(self, environment: ModelEnvironment) -> ModelConfig:
        """A copy with the model, base URL and backend the environment sets where this configuration
        leaves them unset (the front door's, :func:`routerag.api.environment.model_environment`);
        a ValueError for a backend from the environment that is not registered."""
        update: dict[str, str] = {}
        if not self.model and environment.model:
            update["model"] = environment.model
        if not self.base_url and environment.base_url:
            update["base_url"] = environment.base_url
        if self.backend is None and environment.backend:
            try:
                update["backend"] = BACKENDS.validate_name(environment.backend)
            except UnknownNameError as exc:
                raise ValueError(f"{exc} (from ${ENV_BACKEND})") from None
        return self.model_copy(update=update)

    def resolved(self) -> ModelConfig:
        """A copy with backend, model and base_url filled in from this configuration and the defaults
        alone (the environment is applied before, at the front door: :meth:`with_environment`)."""
        model = self.model or None
        base_url = self.base_url or None
        backend = self.backend or ("openai" if base_url else "llamacpp")
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
