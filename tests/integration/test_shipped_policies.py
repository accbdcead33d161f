"""Shipped policy adapters: stored xz-compressed in the package, decompressed once into the cache,
reused, redone when damaged, and hashed as the plain GGUF they always were."""

from __future__ import annotations

import hashlib
import lzma
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import ValidationError

from routerag.filehash import read_sha256
from routerag.llm.bundled import BundledModelError, unpack_xz
from routerag.llm.config import (
    BUNDLED_POLICY,
    MissingPolicyError,
    ModelConfig,
    bundled_policy_path,
    installed_adapter,
    lora_path_of,
    policy_adapter,
    policy_dir,
    policy_folder_of,
    recorded_adapter_sha256,
    shipped_policy_name,
)
from routerag.strategies.shipped import SHIPPED_POLICIES

PLAIN = b"GGUF" + bytes(range(256)) * 400 + b"lora tensors" * 1000


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("ROUTERAG_HOME", str(home))
    return home


def _packed_policy(tmp_path: Path, name: str = "my-policy") -> Path:
    folder = tmp_path / "pkg" / name
    folder.mkdir(parents=True)
    (folder / "adapter.gguf.xz").write_bytes(lzma.compress(PLAIN, preset=9 | lzma.PRESET_EXTREME))
    return folder


def test_compressed_adapter_is_decompressed_into_the_cache_once(tmp_path: Path, _home: Path) -> None:
    folder = _packed_policy(tmp_path)
    path = policy_adapter(folder)
    assert path.read_bytes() == PLAIN
    assert read_sha256(path) == hashlib.sha256(PLAIN).hexdigest()  # the plain file's identity
    key = hashlib.sha256((folder / "adapter.gguf.xz").read_bytes()).hexdigest()[:16]
    assert path == _home / "policies" / key / "my-policy" / "adapter.gguf"
    assert path.parent.name == "my-policy"  # labels that name the adapter by its folder still read the policy
    assert path.with_name("adapter.gguf.sha256").read_text().split() == [hashlib.sha256(PLAIN).hexdigest(), str(len(PLAIN))]
    assert not list(path.parent.glob("*.tmp"))
    mtime = path.stat().st_mtime_ns
    assert policy_adapter(folder) == path
    assert path.stat().st_mtime_ns == mtime  # reused, not written again


def test_a_truncated_or_unrecorded_cached_copy_is_redone(tmp_path: Path) -> None:
    folder = _packed_policy(tmp_path)
    path = policy_adapter(folder)
    path.write_bytes(PLAIN[:1000])  # an interrupted copy, or damaged after the fact
    assert policy_adapter(folder).read_bytes() == PLAIN
    path.with_name("adapter.gguf.sha256").unlink()  # no record of a finished write
    path.write_bytes(PLAIN[:10])
    assert policy_adapter(folder).read_bytes() == PLAIN


def test_a_new_compressed_file_gets_its_own_cache_entry(tmp_path: Path) -> None:
    folder = _packed_policy(tmp_path)
    first = policy_adapter(folder)
    (folder / "adapter.gguf.xz").write_bytes(lzma.compress(PLAIN + b"retrained"))
    second = policy_adapter(folder)
    assert second != first and second.read_bytes() == PLAIN + b"retrained"
    assert first.read_bytes() == PLAIN


def test_concurrent_first_uses_all_get_the_whole_file(tmp_path: Path) -> None:
    folder = _packed_policy(tmp_path)
    with ThreadPoolExecutor(max_workers=4) as pool:
        paths = list(pool.map(lambda _: policy_adapter(folder), range(8)))
    assert len(set(paths)) == 1 and paths[0].read_bytes() == PLAIN


def test_a_plain_adapter_in_the_folder_wins(tmp_path: Path, _home: Path) -> None:
    folder = _packed_policy(tmp_path)
    (folder / "adapter.gguf").write_bytes(b"GGUF my own export")
    assert policy_adapter(folder) == folder / "adapter.gguf"
    assert not (_home / "policies").exists()


def test_missing_or_bad_policy_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MissingPolicyError, match="expected .*adapter.gguf or .*adapter.gguf.xz"):
        policy_adapter(empty)
    with pytest.raises(MissingPolicyError, match="no shipped policy 'no-such-policy'"):
        bundled_policy_path("no-such-policy")
    for bad in ("../policies", "a/b", ".hidden", ""):
        with pytest.raises(MissingPolicyError, match="not a policy name"):
            policy_dir(bad)


def test_a_damaged_compressed_file_leaves_nothing_in_the_cache(tmp_path: Path) -> None:
    packed = tmp_path / "adapter.gguf.xz"
    packed.write_bytes(lzma.compress(PLAIN)[:-40])
    target = tmp_path / "cache" / "adapter.gguf"
    with pytest.raises(BundledModelError, match="not a complete xz file"):
        unpack_xz(packed, target)
    assert not target.exists() and not list(target.parent.glob("*.tmp"))


def test_policy_names_resolve_in_model_config_and_adapter_paths(_home: Path) -> None:
    config = ModelConfig(lora_path=f"policy:{BUNDLED_POLICY}")
    assert config.lora_path == f"policy:{BUNDLED_POLICY}"  # a value while configs are parsed ...
    assert not (_home / "policies").exists()  # ... nothing read, hashed or unpacked
    assert ModelConfig.model_validate(config.model_dump(mode="json")) == config  # and it round-trips
    assert config.adapter_file() == bundled_policy_path()  # the file, once the model is built
    assert bundled_policy_path().is_file()
    assert lora_path_of(f"policy:{BUNDLED_POLICY}") == config.adapter_file()
    assert lora_path_of("runs/x/adapter.gguf") == Path("runs/x/adapter.gguf")
    with pytest.raises(ValidationError, match="no shipped policy 'nope'"):
        ModelConfig(lora_path="policy:nope")


def test_the_cached_copy_of_a_shipped_policy_points_back_to_its_records(tmp_path: Path) -> None:
    cached = bundled_policy_path()
    assert policy_folder_of(cached) == policy_dir(BUNDLED_POLICY)
    assert (policy_folder_of(cached) / "golden_stats.json").is_file()
    own = tmp_path / "runs" / "x" / "adapter.gguf"
    assert policy_folder_of(own) == own.parent
    assert shipped_policy_name(cached) == shipped_policy_name(policy_dir(BUNDLED_POLICY) / "adapter.gguf") == BUNDLED_POLICY
    assert shipped_policy_name(own) is None
    assert shipped_policy_name(tmp_path / BUNDLED_POLICY / "adapter.gguf") is None  # a folder that only has the name


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted({name for by_base in SHIPPED_POLICIES.values() for name in by_base.values()}))
def test_each_shipped_policy_has_the_sha256_its_card_states(name: str) -> None:
    """The decompressed adapter is byte for byte the file the policy was evaluated with: its card's
    sha256 (also what run identities ``lora=<sha16>`` and the results table check)."""
    assert not (policy_dir(name) / "adapter.gguf").exists(), "the shipped adapter is tracked as adapter.gguf.xz only"
    card = (policy_dir(name) / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"`adapter\.gguf`.*sha256 `([0-9a-f]{64})`", card)
    assert stated is not None
    recorded = recorded_adapter_sha256(policy_dir(name))
    if recorded is not None:  # kept outside the package: the record is the card's, and an installed copy is it
        assert recorded == stated.group(1)
        if not installed_adapter(policy_dir(name)).is_file():
            return
    assert read_sha256(bundled_policy_path(name)) == stated.group(1)


def test_adaptive_takes_a_shipped_policy_by_name_and_fingerprints_its_content() -> None:
    from routerag.config import fingerprint_dump
    from routerag.strategies.adaptive import AdaptiveParams

    params = AdaptiveParams(adapters={"routerag": f"policy:{BUNDLED_POLICY}"})
    assert params.adapters["routerag"] == bundled_policy_path()
    digest = hashlib.sha256(bundled_policy_path().read_bytes()).hexdigest()[:16]
    assert fingerprint_dump(params)["adapters"] == {"routerag": f"sha256:{digest}"}
    with pytest.raises(ValidationError, match="no shipped policy 'nope'"):
        AdaptiveParams(adapters={"routerag": "policy:nope"})
