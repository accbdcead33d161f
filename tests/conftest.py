"""Fixtures shared by several test modules: the shared benchmark data folder, the bundled 0.5B's
tokenizer, and for the service tests (HTTP API and browser UI) a small real BM25 source set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routerag.corpus.datasets import DataNotFoundError, data_root
from routerag.sources.registry import bundle_sources

# a tiny custom source that the 2Wiki slice knows nothing about, uploaded by the service tests
NOTES_CSV = (
    "title,text\n"
    "Zorblax,\"Zorblax is a fictional moon of Neptune discovered by Ada Quill in 2031.\"\n"
    "Ada Quill,Ada Quill is an astronomer born in Leeds who found the moon Zorblax.\n"
    "Leeds,Leeds is a city in West Yorkshire.\n"
)


@pytest.fixture(scope="session")
def tokenizer():
    """The bundled 0.5B's Hugging Face tokenizer (converted from its GGUF once, then cached, ~1 s)."""
    from routerag.llm.hf_assets import load_tokenizer

    return load_tokenizer("bundled:qwen2.5-coder-0.5b")


@pytest.fixture(scope="module")
def shared() -> Path:
    """The shared benchmark data folder (``data_root()``); tests that need it skip without it."""
    try:
        return data_root()
    except DataNotFoundError:
        pytest.skip("shared benchmark data not available")


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """BM25 over the first 50 real 2Wiki passages: one fresh SourceSet per test module (the
    service tests mount uploaded sources into it)."""
    from routerag.corpus.schema import Document
    from routerag.index.bundle import build_index, load_index

    corpus = data_root() / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
    rows = json.loads(corpus.read_text(encoding="utf-8"))[:50]
    directory = tmp_path_factory.mktemp("svc-idx") / "bundle"
    build_index([Document.make(r["title"], r["text"]) for r in rows], directory, components=("bm25",))
    return bundle_sources(load_index(directory))


@pytest.fixture(scope="module")
def retrieval(sources):
    """The retrieval server over ``sources`` on loopback (Search-R1 endpoint answering from bm25)."""
    from routerag.server.retrieval_app import create_retrieval_app
    from routerag.server.serving import BackgroundServer
    from routerag.server.settings import SearchR1Settings, ServerSettings

    settings = ServerSettings(searchr1=SearchR1Settings(default_source="bm25"))
    with BackgroundServer(create_retrieval_app(sources, settings)) as running:
        yield running


@pytest.fixture(scope="session")
def ray_local():
    """Ray started once per test session on this machine with 2 CPUs (the ``ray``-marked tests):
    a local head with pre-assigned ports (``routerag.raycluster.LocalHead``), stopped at the end."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:  # not imported here: LocalHead must come first
        pytest.skip("Ray is the `scale` extra")
    from routerag.raycluster import LocalHead

    head = LocalHead(num_cpus=2)
    yield head
    try:
        from ray import serve

        serve.shutdown()
    except ImportError:
        pass
    head.stop()
