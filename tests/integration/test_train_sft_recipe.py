"""The routerag-sft recipe's parts: masked-logits loss, grounding of golden hops in real retrieval,
evaluation-sample exclusion."""

from __future__ import annotations

import pytest

from routerag.corpus.datasets import load_dataset
from routerag.sources.registry import bundle_sources
from routerag.train.golden import (
    Grounder,
    check_overlap,
    eval_set_questions,
    from_hops,
    from_musique,
    musique_hops,
)


def test_masked_loss_equals_the_full_logits_loss():
    torch = pytest.importorskip("torch")
    from routerag.train.fixtures import tiny_qwen2
    from routerag.train.sft import masked_loss

    model = tiny_qwen2(300, layers=2, hidden=32, heads=4)
    ids = torch.randint(0, 300, (2, 40))
    labels = ids.clone()
    labels[0, :25] = -100
    labels[1, :10] = -100
    labels[1, 30:] = -100
    full = model(input_ids=ids, labels=labels).loss
    masked = masked_loss(model, {"input_ids": ids, "labels": labels})
    assert torch.allclose(full, masked, atol=1e-5)
    masked.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


@pytest.mark.data
def test_eval_samples_are_excluded_like_routerag_eval_samples_them():
    musique = load_dataset("musique")
    sample = eval_set_questions(["musique:50"])
    assert [q.qid for q in sample] == [q.qid for q in musique.sample(50).questions]
    assert [q.qid for q in sample] == [musique.questions[i].qid for i in range(0, 100, 2)]
    report = check_overlap(musique.questions, ["musique:50"])
    assert {q.qid for q in sample} <= set(report.overlapping)
    assert set(report.reasons.values()) <= {"question+answer", "id", "hop"}
    with pytest.raises(ValueError, match="NAME:N"):
        eval_set_questions(["musique:x"])


@pytest.mark.data
def test_grpo_training_questions_drop_the_evaluated_ones(tmp_path, caplog):
    from routerag.train.config import RouteRAGTwoStageConfig
    from routerag.train.data import load_training_questions

    cfg = RouteRAGTwoStageConfig(data={"dataset": "musique", "eval_sets": ["musique:50"]})
    with caplog.at_level("WARNING"):
        questions, sources = load_training_questions(cfg, tmp_path)
    evaluated = {q.qid for q in load_dataset("musique").sample(50).questions}
    assert sources is None and len(questions) == 48 and not evaluated & {q.qid for q in questions}
    assert "dropped 52 of 100" in caplog.text
    kept = load_training_questions(cfg.model_copy(update={"data": cfg.data.model_copy(update={"allow_overlap": True})}), tmp_path)[0]
    assert len(kept) == 100
    with pytest.raises(ValueError, match="every training question"):
        load_training_questions(RouteRAGTwoStageConfig(data={"dataset": "musique", "eval_sets": ["musique"]}), tmp_path)


@pytest.fixture(scope="module")
def musique_bm25(tmp_path_factory, shared):
    """BM25 over 60 real MuSiQue passages, the first question's gold paragraphs among them."""
    from routerag.index.bundle import build_index, load_index

    musique = load_dataset("musique")
    q = musique.questions[0]
    docs = musique.documents()
    gold = {d for h in q.decomposition for d in h.supporting_doc_ids}
    chosen = [d for d in docs if d.doc_id in gold] + [d for d in docs if d.doc_id not in gold][:58]
    directory = tmp_path_factory.mktemp("musique-bm25") / "bundle"
    build_index(chosen, directory, components=("bm25",))
    return musique, bundle_sources(load_index(directory))


def test_grounder_keeps_gold_and_uses_real_hits(musique_bm25):
    musique, sources = musique_bm25
    docs = {d.doc_id: d for d in musique.documents()}
    q = musique.questions[0]
    grounder = Grounder(sources, k=3, mode_sources={"passage": "bm25"}, modes=["passage"])
    t = from_musique(q, docs, ground=grounder)
    assert t is not None
    stats = grounder.stats
    assert stats.hops == 2 and stats.retrieved_total + stats.injected == 2 and stats.retrieved_total >= 1
    obs = [s.text for s in t.segments if s.kind == "observation"]
    for hop, text in zip(q.decomposition, obs):
        assert docs[hop.supporting_doc_ids[0]].text[:40] in text  # the gold paragraph is always shown
        assert text.count("Doc ") == 3  # among k real hits
    assert "[passage]" in t.completion and "[graph]" not in t.completion  # the only mounted mode


def test_grounder_injects_gold_when_retrieval_misses_it(musique_bm25):
    musique, sources = musique_bm25
    docs = {d.doc_id: d for d in musique.documents()}
    q = musique.questions[10]  # its gold paragraphs are not in the 60-passage index
    grounder = Grounder(sources, k=3, mode_sources={"passage": "bm25"}, modes=["passage"])
    t = from_musique(q, docs, ground=grounder)
    if t is None:
        pytest.skip("question without full support")
    assert grounder.stats.injected == len(q.decomposition)
    obs = [s.text for s in t.segments if s.kind == "observation"]
    assert all(docs[h.supporting_doc_ids[0]].text[:40] in o for h, o in zip(q.decomposition, obs))


class _CountingSources:
    """The real SourceSet, counting how many search calls and queries reach it."""

    def __init__(self, inner):
        self.inner, self.calls, self.queries = inner, 0, 0

    def names(self):
        return self.inner.names()

    def search(self, queries, k, sources):
        self.calls += 1
        self.queries += len(queries)
        return self.inner.search(queries, k, sources)

    def search_one(self, query, k, source):
        return self.search([query], k, [source]).results[source][0]


def test_prefetched_grounding_is_batched_and_gives_the_same_trajectories(musique_bm25):
    musique, sources = musique_bm25
    docs = {d.doc_id: d for d in musique.documents()}
    questions = musique.questions[:12]
    serial = _CountingSources(sources)
    one_by_one = Grounder(serial, k=3, mode_sources={"passage": "bm25"}, modes=["passage"])
    expected = [from_musique(q, docs, ground=one_by_one) for q in questions]

    batched = _CountingSources(sources)
    grounder = Grounder(batched, k=3, mode_sources={"passage": "bm25"}, modes=["passage"])
    planned = [(q, musique_hops(q, docs)) for q in questions]
    searched = grounder.prefetch(((q.question, p[0]) for q, p in planned if p is not None), batch_size=8)
    assert batched.calls == -(-searched // 8) and searched == batched.queries > 8
    got = [from_hops(q, p, "musique", ground=grounder) for q, p in planned]
    assert [t.model_dump() if t else None for t in got] == [t.model_dump() if t else None for t in expected]
    assert grounder.stats == one_by_one.stats
    assert batched.calls == -(-searched // 8)  # only one mode is mounted: no fallback searches
    assert serial.calls == serial.queries == one_by_one.stats.hops


class _ScriptedSources:
    """Two sources answering each query with scripted hits (a test double of a SourceSet)."""

    def __init__(self, answers):
        self.answers = answers  # (source, query) -> [Hit]
        self.searched: list[tuple[str, str]] = []

    def names(self):
        return sorted({s for s, _ in self.answers})

    def search_one(self, query, k, source):
        from routerag.sources.base import QueryResult

        self.searched.append((source, query))
        return QueryResult(query=query, source=source, hits=list(self.answers.get((source, query), []))[:k], latency_ms=0.0)


def test_outcome_grounding_takes_the_cheapest_mode_that_finds_the_gold_and_skips_found_hops():
    from routerag.trace import Hit
    from routerag.train.golden import GoldenHop

    def hit(doc_id: str) -> Hit:
        return Hit(doc_id=doc_id, title=doc_id, text=f"text of {doc_id}", score=1.0, source="s", mode="s", rank=1)

    gold1, gold2, gold3 = hit("g1"), hit("g2"), hit("g3")
    question = "Which film by the director of X came first?"
    hops = [GoldenHop(think="a", mode="passage", query=question, evidence=[gold1]),
            GoldenHop(think="b", mode="graph", query="Director", evidence=[gold2]),
            GoldenHop(think="c", mode="graph", query="Film", evidence=[gold3])]
    answers = {
        # the passage source misses g1 and g3; the graph source finds g1 together with g2
        ("passage", question): [hit("d1"), hit("d2"), hit("d3")],
        ("graph", question): [hit("d4"), gold1, gold2],
        ("passage", "Director"): [gold2],
        ("passage", "Film"): [hit("d5")],
        ("graph", "Film"): [gold3, hit("d6")],
    }
    sources = _ScriptedSources(answers)
    grounder = Grounder(sources, k=3, modes=["graph", "passage"], routing="outcome")
    assert grounder.modes == ["passage", "graph"]  # cheapest first (passage 1 < graph 3), whatever the given order
    out = grounder(question, hops)
    # hop 1: passage misses the gold, graph finds it; hop 2 is left out (g2 came back in hop 1);
    # hop 3: the cheapest mode misses, graph finds it
    assert [(h.mode, h.query) for h in out] == [("graph", question), ("graph", "Film")]
    assert grounder.stats.skipped == 1 and grounder.stats.switched == 2 and grounder.stats.hops == 3
    assert ("passage", "Director") not in sources.searched and ("graph", "Director") not in sources.searched

    # the planned routing keeps every hop and searches its planned mode first
    planned = Grounder(_ScriptedSources(answers), k=3, modes=["passage", "graph"])
    assert [(h.mode, h.query) for h in planned(question, hops)] == [("graph", question), ("passage", "Director"),
                                                                     ("graph", "Film")]
    assert planned.stats.skipped == 0

    # prices decide the order: a table that makes graph cheaper tags hop 3 graph without trying passage
    cheap_graph = Grounder(_ScriptedSources(answers), k=3, modes=["passage", "graph"], routing="outcome",
                           mode_cost={"passage": 2.0, "graph": 1.0})
    assert cheap_graph.modes == ["graph", "passage"]
    assert [h.mode for h in cheap_graph(question, hops)] == ["graph", "graph"]


@pytest.mark.data
def test_sft_trains_on_a_stored_golden_set_checked_against_the_evaluation_sets(tmp_path):
    import json

    from routerag.train.config import RouteRAGSFTConfig
    from routerag.train.golden_set import build_golden_set
    from routerag.train.sft import SFT_STATS_FILE, sft_trajectories

    build_golden_set(["musique"], tmp_path / "golden", eval_sets=["musique:50"])  # no grounding: gold evidence only
    cfg = RouteRAGSFTConfig(sft={"golden_set": str(tmp_path / "golden"), "sources": ["hotpotqa"]},
                      data={"eval_sets": ["musique:50"]})
    got = sft_trajectories(cfg, tmp_path / "run")
    assert got and {t.source for t in got} == {"musique"}  # the stored set, not sft.sources
    stats = json.loads((tmp_path / "run" / SFT_STATS_FILE).read_text())
    assert stats["golden_set"] == str(tmp_path / "golden") and stats["overlap_checked"]["overlapping"] == []
    # a stored set that overlaps the run's evaluation sets is refused
    with pytest.raises(ValueError, match="overlap the evaluation sets"):
        sft_trajectories(cfg.model_copy(update={"data": cfg.data.model_copy(update={"eval_sets": ["musique"]})}),
                         tmp_path / "run2")


def test_golden_cli_refuses_an_unknown_routing(tmp_path) -> None:
    from typer.testing import CliRunner

    import routerag.cli.train_cmds  # noqa: F401 - registers the commands
    from routerag.cli.app import app

    result = CliRunner().invoke(app, ["golden", "--out", str(tmp_path / "g"), "--routing", "cheapest"])
    assert result.exit_code == 2 and "planned" in result.output and "outcome" in result.output
    assert not (tmp_path / "g").exists()  # refused before anything was built
