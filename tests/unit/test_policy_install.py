"""A policy kept outside the package: its folder records the adapter's sha256, `routerag policies
install` accepts only a file with that content, and the model layer then finds it by name."""

from __future__ import annotations

import hashlib
import lzma
from pathlib import Path

import pytest

from routerag.llm import config, policy_install
from routerag.llm.config import (
    ADAPTER_SHA_FILE,
    MissingPolicyError,
    installed_adapter,
    is_policy_folder,
    policy_adapter,
    recorded_adapter_sha256,
)
from routerag.llm.policy_install import PolicyInstallError, install_policy

ADAPTER = b"GGUF" + bytes(range(256)) * 40


@pytest.fixture()
def kept_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A policy folder holding only the record of its adapter, and an empty cache."""
    monkeypatch.setenv("ROUTERAG_HOME", str(tmp_path / "home"))
    folder = tmp_path / "policies" / "toy-policy"
    folder.mkdir(parents=True)
    (folder / ADAPTER_SHA_FILE).write_text(f"{hashlib.sha256(ADAPTER).hexdigest()}  adapter.gguf\n")
    monkeypatch.setattr(policy_install, "policy_dir", lambda name: folder.parent / name)
    return folder


def test_a_policy_kept_apart_names_its_install_until_installed(kept_apart: Path) -> None:
    assert is_policy_folder(kept_apart) and recorded_adapter_sha256(kept_apart) == hashlib.sha256(ADAPTER).hexdigest()
    with pytest.raises(MissingPolicyError, match="routerag policies install toy-policy"):
        policy_adapter(kept_apart)


@pytest.mark.parametrize("packed", [False, True])
def test_install_takes_the_recorded_adapter_plain_or_xz(kept_apart: Path, tmp_path: Path, packed: bool) -> None:
    source = tmp_path / ("a.gguf.xz" if packed else "a.gguf")
    source.write_bytes(lzma.compress(ADAPTER) if packed else ADAPTER)
    target = install_policy("toy-policy", source)
    assert target == installed_adapter(kept_apart) and target.read_bytes() == ADAPTER
    assert policy_adapter(kept_apart) == target
    assert config.shipped_policy_name(target) is None  # the toy folder is not in the package


def test_install_refuses_other_content_and_leaves_nothing(kept_apart: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.gguf"
    other.write_bytes(ADAPTER + b"!")
    with pytest.raises(PolicyInstallError, match="not the adapter the policy 'toy-policy' was evaluated with"):
        install_policy("toy-policy", other)
    assert not installed_adapter(kept_apart).exists()
    with pytest.raises(PolicyInstallError, match="no such file"):
        install_policy("toy-policy", tmp_path / "missing.gguf")


def test_install_refuses_a_policy_that_ships_its_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERAG_HOME", str(tmp_path / "home"))
    with pytest.raises(PolicyInstallError, match="ships its adapter inside the package"):
        install_policy("routerag-sft-qwen2.5-coder-0.5b", tmp_path / "x.gguf")


def test_the_1p5b_policy_records_the_adapter_its_card_names() -> None:
    folder = config.policy_dir("routerag-sft-outcome-qwen2.5-coder-1.5b")
    sha = recorded_adapter_sha256(folder)
    assert sha is not None and sha in (folder / "README.md").read_text(encoding="utf-8")
