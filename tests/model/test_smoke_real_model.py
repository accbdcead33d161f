"""CI smoke test: the real bundled model (Qwen2.5-Coder-0.5B via llama.cpp) answers real demo
questions through the routerag strategy over a real BM25 index (mounted as the passage mode).
Budgets are small so it stays within a minute or two on 2 CPU cores."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.model
pytest.importorskip("llama_cpp")


def test_routerag_with_bundled_model_produces_a_full_trace(tmp_path):
    from routerag.corpus.datasets import load_dataset
    from routerag.index.bundle import build_index
    from routerag.llm import ModelConfig, build_model
    from routerag.sources.bm25 import BM25Source
    from routerag.sources.sourceset import SourceSet
    from routerag.strategies import STRATEGIES, StrategyContext

    try:
        model = build_model(ModelConfig(n_ctx=2048))
    except Exception as exc:  # the parts packages are an extra ([local])
        pytest.skip(f"bundled model unavailable: {exc}")
    data = load_dataset("demo", n_questions=2)
    bundle = build_index(data.corpus, tmp_path / "idx", components=["bm25"])
    # serve the passage mode from BM25 in this smoke test (no embedding cost)
    sources = SourceSet([BM25Source.from_bundle(bundle, name="passage")])
    cls = STRATEGIES.get("routerag-passage")
    strategy = cls(StrategyContext(model=model, sources=sources), {"max_turns": 1, "max_tokens_per_turn": 96})
    for question in data.questions:
        trace = strategy.run(question)
        assert trace.error is None, trace.error
        assert trace.answer.strip(), "the forced final answer must not be empty"
        calls = trace.model_calls
        assert calls and all(c.completion_tokens > 0 for c in calls)
        assert trace.retrieval_turns <= 1
        assert "".join(s.text for s in trace.segments)  # the policy transcript is recorded
