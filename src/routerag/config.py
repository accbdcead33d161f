"""Typed configuration: a pydantic model filled from a YAML file plus ``key.path=value``
command-line overrides; the resolved configuration is written next to every index and run.

Everything a configuration names is checked when it is loaded, before a model or an index is
built: registry names (``registry.RegisteredName``: unknown ones raise ``UnknownNameError``, listing
the valid ones), and the parameters of the strategy and of every reward against their ``Params``.

Suffixes (docs/architecture.md): ``*Params`` are the typed parameters of one call or part (a
strategy's, a reward's, generation); ``*Config`` configures a run or a service (``EvalConfig``,
``TrainConfig``, ``ModelConfig``) and its sections; ``*Settings`` are persisted with what they
built (``IndexSettings`` in an index manifest, ``ServerSettings``)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from routerag.errors import RouteragError
from routerag.registry import UnknownNameError

M = TypeVar("M", bound=BaseModel)

# ``json_schema_extra`` of a params field added after runs were stored, whose default keeps the old
# behaviour: the evaluation fingerprint leaves it out while it has its default (eval.setup).
OMIT_AT_DEFAULT: dict[str, Any] = {"fingerprint": "omit-at-default"}
# ``json_schema_extra`` of a field that says where or how a computation runs, never what it answers
# (which llama.cpp binding, in which process): fingerprints never see it.
NOT_IN_FINGERPRINT: dict[str, Any] = {"fingerprint": "omit"}
# ``json_schema_extra`` of a field holding file paths (a path, or a mapping or list of paths) whose
# CONTENT decides the answers (LoRA adapters): fingerprints see each file's content hash, not its
# path, so a file rewritten in place makes a new fingerprint and a moved one keeps it. Combine
# with ``OMIT_AT_DEFAULT`` by merging the two dicts.
FILE_CONTENT: dict[str, Any] = {"fingerprint_files": "content"}


def fingerprint(payload: Any) -> str:
    """A stable hash of a JSON-serialisable payload (keys sorted): of a run's answers, of a cached index."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def fingerprint_dump(model: BaseModel, exclude: set[str] | None = None) -> dict[str, Any]:
    """``model.model_dump(mode="json")`` as fingerprints see it: a field marked ``NOT_IN_FINGERPRINT``
    is left out, one marked ``OMIT_AT_DEFAULT`` while it has its default, at any depth (a setting added to a nested model, such as
    ``index.dense.ivfpq``, orphans neither stored runs nor cached indexes); a field marked
    ``FILE_CONTENT`` shows its files' content hashes (``sha256:<16 hex>``) instead of their paths."""
    dumped = model.model_dump(mode="json", exclude=exclude)
    _fingerprint_fields(model, dumped)
    return dumped


def _fingerprint_fields(model: BaseModel, dumped: dict[str, Any]) -> None:
    for name, field in type(model).model_fields.items():
        if name not in dumped:
            continue
        value = getattr(model, name)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        if extra.get("fingerprint") == "omit" or (
                extra.get("fingerprint") == "omit-at-default" and value == field.get_default(call_default_factory=True)):
            dumped.pop(name)
        elif extra.get("fingerprint_files") == "content":
            dumped[name] = _content_hashes(value, f"{type(model).__name__}.{name}")
        elif isinstance(value, BaseModel) and isinstance(dumped[name], dict):
            _fingerprint_fields(value, dumped[name])


def _content_hashes(value: Any, where: str) -> Any:
    from routerag.filehash import file_sha256

    if value is None:
        return None
    if isinstance(value, dict):
        return {key: _content_hashes(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_content_hashes(item, where) for item in value]
    return "sha256:" + file_sha256(value, what=f"{where}: the file")[:16]


class ConfigError(RouteragError, ValueError):
    """A configuration file or override that cannot be used; the message says where and why."""


def validation_reasons(exc: ValidationError) -> str:
    """A pydantic error as one line: ``loc: message; loc: message``."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors())


def validated(model: type[M], **fields: Any) -> M:
    """``model(**fields)``, with a refusal as one-line :class:`ConfigError` (``loc: message; ...``)."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise ConfigError(validation_reasons(exc)) from None


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[keys[-1]] = value


def parse_override(item: str) -> tuple[str, Any]:
    """``a.b=3`` -> ("a.b", 3). Values are parsed as YAML scalars/lists (``k=[1,2]``, ``x=true``)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} is not of the form key.path=value")
    key, _, raw = item.partition("=")
    key = key.strip()
    if not key:
        raise ConfigError(f"override {item!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


BASE_KEY = "base"
"""A configuration file's key naming the file it overrides (resolved relative to it)."""


def read_config_file(path: str | Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The mapping of the YAML file at ``path`` with its ``base:`` layers resolved: ``base: other.yaml``
    (relative to the file) is read first (its own base first, and so on) and the file's keys are
    deep-merged over it (mappings merge key by key; any other value, a list included, replaces).
    A missing base, a cycle or a top level that is not a mapping is a one-line :class:`ConfigError`."""
    path = Path(path)
    where = " (base of " + " <- ".join(str(p) for p in reversed(_chain)) + ")" if _chain else ""
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file{where}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping, not {type(loaded).__name__}")
    data: dict[str, Any] = dict(loaded or {})
    base = data.pop(BASE_KEY, None)
    if base is None:
        return data
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{path}: base must name one YAML file, not {base!r}")
    base_path = (path.parent / base).resolve()
    chain = (*_chain, path.resolve())
    if base_path in chain:
        cycle = " -> ".join(str(p) for p in (*chain[chain.index(base_path):], base_path))
        raise ConfigError(f"{path}: base layers form a cycle: {cycle}")
    return deep_merge(read_config_file(base_path, chain), data)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base`` (new dicts): mappings merge key by key, other values replace."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def config_data(path: str | Path | None = None, overrides: list[str] | None = None,
                updates: dict[str, Any] | None = None, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The unvalidated mapping :func:`load_config` validates: the top-level ``defaults`` (a
    command's own defaults, under everything else), the file at ``path`` (``base:`` layers resolved),
    then each ``key.path=value`` override, then the top-level ``updates``."""
    data = {**(defaults or {}), **(read_config_file(path) if path is not None else {})}
    for item in overrides or []:
        key, value = parse_override(item)
        _set_path(data, key, value)
    data.update(updates or {})
    return data


def load_config(model: type[M], path: str | Path | None = None, overrides: list[str] | None = None,
                updates: dict[str, Any] | None = None, defaults: dict[str, Any] | None = None) -> M:
    """``model`` from the YAML file at ``path`` (``base:`` layers resolved), then each
    ``key.path=value`` override, then the top-level ``updates`` (values a command sets from its
    own options), validated once; ``defaults`` (a command's defaults) apply where the file is silent."""
    data = config_data(path, overrides, updates, defaults)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where = f"{path}: " if path else ""
        raise ConfigError(f"{where}invalid configuration:\n{exc}") from None
    except UnknownNameError as exc:
        if path is None:
            raise
        raise type(exc)(f"{path}: {exc}") from None


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write via a temporary file in the same directory and rename: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """:func:`atomic_write_bytes` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_resolved(config: BaseModel, directory: str | Path, name: str = "config.resolved.yaml") -> Path:
    target = Path(directory) / name
    atomic_write_text(target, yaml.safe_dump(json.loads(config.model_dump_json()), sort_keys=False))
    return target
