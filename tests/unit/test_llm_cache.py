"""Response cache: hits and misses, what is part of the key, threads, corrupt databases."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from routerag.llm.base import GenerationParams, Message
from routerag.llm.cache import CachedModel, CacheError, ResponseCache, cache_key
from routerag.llm.concurrency import LimitedModel
from routerag.llm.scripted import ScriptedModel

Q = [Message(role="user", content="Capital of France?")]


def _counting(tmp_path: Path) -> tuple[CachedModel, ScriptedModel]:
    inner = ScriptedModel(lambda m, p, c: f"answer {p.max_tokens} {c}")
    return CachedModel(inner, tmp_path / "cache.sqlite"), inner


def test_miss_then_hit(tmp_path: Path) -> None:
    model, inner = _counting(tmp_path)
    first = model.chat(Q)
    second = model.chat(Q)
    assert not first.cached and second.cached
    assert second.text == first.text and second.usage == first.usage
    assert len(inner.calls) == 1


def test_key_covers_params_continue_final_and_model(tmp_path: Path) -> None:
    model, inner = _counting(tmp_path)
    model.chat(Q, GenerationParams(max_tokens=5))
    model.chat(Q, GenerationParams(max_tokens=6))
    model.chat(Q, GenerationParams(max_tokens=5, stop=["x"]))
    model.chat(Q, GenerationParams(max_tokens=5, grammar='root ::= "a"'))
    model.chat(Q, GenerationParams(max_tokens=5, temperature=0.7, seed=1))
    model.chat(Q, GenerationParams(max_tokens=5, temperature=0.7, seed=2))
    model.chat(Q + [Message(role="assistant", content="<a>")], continue_final=True)
    model.chat(Q + [Message(role="assistant", content="<a>")], continue_final=False)
    assert len(inner.calls) == 8
    assert cache_key("a", Q, GenerationParams(), False) != cache_key("b", Q, GenerationParams(), False)


def test_unseeded_sampling_is_never_cached(tmp_path: Path) -> None:
    model, inner = _counting(tmp_path)
    params = GenerationParams(temperature=0.8, seed=None)
    assert not model.chat(Q, params).cached
    assert not model.chat(Q, params).cached
    assert len(inner.calls) == 2


def test_persists_across_instances(tmp_path: Path) -> None:
    model, _ = _counting(tmp_path)
    model.chat(Q)
    again, inner = _counting(tmp_path)
    assert again.chat(Q).cached and not inner.calls


def test_threads_share_one_cache(tmp_path: Path) -> None:
    model, inner = _counting(tmp_path)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(10):
                model.chat([Message(role="user", content=f"q{j % 5}")])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(model.cache) == 5
    assert 5 <= len(inner.calls) <= 5 * 8  # misses may race, but every answer is stored once


def test_corrupt_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a sqlite database at all" * 100)
    with pytest.raises(CacheError, match="delete it"):
        ResponseCache(path)


def test_limited_model_bounds_concurrency() -> None:
    running = 0
    peak = 0
    lock = threading.Lock()
    gate = threading.Event()

    def slow(messages, params, continue_final):
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        gate.wait(0.05)
        with lock:
            running -= 1
        return "ok"

    model = LimitedModel(ScriptedModel(slow), 2)
    threads = [threading.Thread(target=model.chat, args=(Q,)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 2
