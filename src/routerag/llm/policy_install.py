"""Installing the adapter of a policy that is kept outside the package.

A policy folder (``data/policies/<name>/``) normally ships its adapter, xz-compressed. One that does
not (the tracked tree's size limit) holds the sha256 of its ``adapter.gguf`` instead; this puts a
copy with exactly that sha256 where :func:`~routerag.llm.config.policy_adapter` finds it, so the
policy named is always the adapter that was evaluated."""

from __future__ import annotations

from pathlib import Path

from routerag.errors import RouteragError
from routerag.llm.bundled import BundledModelError, install_verified
from routerag.llm.config import installed_adapter, is_policy_folder, policy_dir, recorded_adapter_sha256


class PolicyInstallError(RouteragError):
    """A policy adapter could not be installed: unknown policy, one that ships its adapter, or a file of other content."""


def install_policy(name: str, source: Path) -> Path:
    """Install ``source`` (an ``adapter.gguf``, or its ``.xz``) as the adapter of the policy ``name``;
    refused unless its content has the sha256 that policy records. Returns the installed path."""
    folder = policy_dir(name)
    if not is_policy_folder(folder):
        raise PolicyInstallError(f"no policy {name!r} under {folder.parent}")
    expected = recorded_adapter_sha256(folder)
    if expected is None:
        raise PolicyInstallError(f"the policy {name!r} ships its adapter inside the package: nothing to install")
    if not source.is_file():
        raise PolicyInstallError(f"{source}: no such file")
    try:
        return install_verified(source, installed_adapter(folder), sha256=expected,
                                hint=f"it is not the adapter the policy {name!r} was evaluated with")
    except BundledModelError as exc:
        raise PolicyInstallError(str(exc)) from None
