"""RealRoute and hard-route driven by the real bundled model (Qwen2.5-Coder-0.5B via llama.cpp)
over real law-med passages. Slow (a few model calls per question on CPU): ``pytest -m slow``."""

from __future__ import annotations

import pytest

from routerag.runtime.base import StrategyContext
from routerag.strategies import STRATEGIES

pytestmark = [pytest.mark.slow, pytest.mark.model]

KINDS = {"decompose", "route", "search", "select", "answer", "reflect", "fuse"}


@pytest.fixture(scope="module")
def context(tmp_path_factory, shared):
    pytest.importorskip("llama_cpp")
    from routerag.corpus.datasets import load_dataset
    from routerag.index.bm25 import BM25Index
    from routerag.index.docstore import DocStore
    from routerag.index.settings import IndexSettings
    from routerag.llm.base import ModelError
    from routerag.llm.config import ModelConfig
    from routerag.llm.factory import build_model
    from routerag.sources.bm25 import BM25Source
    from routerag.sources.sourceset import SourceSet

    try:
        model = build_model(ModelConfig(backend="llamacpp", n_ctx=8192))
    except ModelError as exc:
        pytest.skip(f"bundled model unavailable: {exc}")
    data = load_dataset("law-med")
    root = tmp_path_factory.mktemp("law-med-real")
    sources = []
    for name, spec in data.sources.items():
        store = DocStore(spec.docs[:50])
        sources.append(BM25Source(BM25Index.build(store, root / name, IndexSettings()), store, name=name, profile=spec.profile))
    return StrategyContext(model=model, sources=SourceSet(sources)), [data.questions[0], data.questions[200]]


@pytest.mark.parametrize("name", ["realroute", "hard-route"])
def test_real_model_run_is_well_formed(context, name):
    ctx, questions = context
    small = {"max_reflections": 1, "passage_chars": 400, "max_new_tokens": 96}
    strategy = STRATEGIES.get(name)(ctx, small)
    for question in questions:
        trace = strategy.run(question)
        assert trace.error is None, trace.error
        assert {s.kind for s in trace.steps} <= KINDS
        routes = [s for s in trace.steps if s.kind == "route"]
        assert routes and all(r.sources[0] in {"law", "med"} for r in routes)
        assert all(c.prompt_tokens > 0 for c in trace.model_calls)
        assert trace.fallback_answer is not None
        assert trace.answer or all(not s.answer for s in trace.steps if s.kind == "answer")
