"""The adaptive strategy (a router picks direct / vanilla / multi-step per question) and strategy
labels from eval runs. The classifier is a test double registered in the router registry."""

from __future__ import annotations

import gzip
import json
from typing import ClassVar

import pytest

from routerag.routing import ROUTERS, RouteResult
from routerag.routing.base import ranked_by_score
from routerag.strategies import STRATEGIES
from routerag.train.router.labels import read_labels, write_labels
from test_strategies_support import make_context

Q = "What is the capital of France?"


class ScriptedRouter:
    """Always the scores it was given; records what it was asked."""

    name = "scripted-strategy"
    scores: ClassVar[dict[str, float]] = {"rule": 0.1, "direct": 0.2, "vanilla": 0.9, "routerag": 0.5}
    asked: ClassVar[list] = []

    def __init__(self, deps) -> None:
        self.deps = deps

    def route(self, query, choices):
        ScriptedRouter.asked.append((query, dict(choices), self.deps.margin))
        scores = {c: self.scores[c] for c in choices}
        return RouteResult(ranked=ranked_by_score(scores), reason="scripted", metadata={"router": self.name, "scores": scores})


@pytest.fixture(autouse=True)
def scripted_router():
    if "scripted-strategy" not in ROUTERS:
        ROUTERS.register("scripted-strategy", ScriptedRouter)
    ScriptedRouter.asked = []
    ScriptedRouter.scores = {"rule": 0.1, "direct": 0.2, "vanilla": 0.9, "routerag": 0.5}
    yield


def test_adaptive_is_registered_and_runs_the_chosen_strategy_with_the_choice_in_the_trace():
    ctx, _, sources = make_context(["Paris"], names=("passage",))
    adaptive = STRATEGIES.get("adaptive")(ctx, {"router": "scripted-strategy", "router_margin": 0.1,
                                                 "strategy_params": {"vanilla": {"k": 2}}})
    trace = adaptive.run(Q)
    assert trace.error is None and trace.answer == "Paris" and trace.strategy == "adaptive"
    assert ScriptedRouter.asked == [(Q, {"direct": "", "vanilla": "", "routerag": ""}, 0.1)]  # the rule is no default choice
    assert [s.kind for s in trace.steps] == ["route", "search", "answer"]
    assert [s.index for s in trace.steps] == [0, 1, 2]
    route = trace.steps[0]
    assert route.decision() == ["vanilla"] and route.route.choice == "vanilla" and trace.params["strategies"]["vanilla"] == "vanilla"
    assert route.route.scores == {"vanilla": 0.9, "routerag": 0.5, "direct": 0.2}
    assert trace.params["strategy_params"]["vanilla"]["k"] == 2
    assert sources["passage"].queries == [Q] and len(trace.steps[1].hits) == 2  # vanilla with its params
    assert trace.segments and trace.segments[0].kind == "prompt"


def test_the_chosen_strategys_steps_reach_the_step_observer_as_they_happen_renumbered():
    from dataclasses import replace

    ctx, _, _ = make_context(["Paris"], names=("passage",))
    seen: list[tuple[int, str]] = []
    adaptive = STRATEGIES.get("adaptive")(replace(ctx, on_step=lambda s: seen.append((s.index, s.kind))), {
        "router": "scripted-strategy", "strategy_params": {"vanilla": {"k": 2}}})
    trace = adaptive.run(Q)
    assert trace.error is None
    assert seen == [(s.index, s.kind) for s in trace.steps] == [(0, "route"), (1, "search"), (2, "answer")]


def test_choices_are_resolved_through_the_contexts_resolver():
    """The front door injects its resolver; adaptive asks it for each choice's strategy."""
    from dataclasses import replace

    from routerag.runtime.base import registry_resolver

    ctx, _, _ = make_context(["Paris"], names=("passage",))
    asked: list[tuple[str, dict | None]] = []

    def resolver(name, params, context):
        asked.append((name, params))
        return registry_resolver(name, params, context)

    STRATEGIES.get("adaptive")(replace(ctx, resolve=resolver), {"router": "scripted-strategy",
                                                                 "strategy_params": {"vanilla": {"k": 2}}})
    assert asked == [("direct", None), ("vanilla", {"k": 2}), ("routerag", None)]


def test_adaptive_direct_choice_does_not_retrieve():
    ScriptedRouter.scores = {"rule": 0.1, "direct": 0.95, "vanilla": 0.4, "routerag": 0.5}
    ctx, _, sources = make_context(["Paris"], names=("passage",))
    trace = STRATEGIES.get("adaptive")(ctx, {"router": "scripted-strategy"}).run(Q)
    assert trace.answer == "Paris" and [s.kind for s in trace.steps] == ["route", "answer"]
    assert not sources["passage"].queries and trace.steps[0].route.choice == "direct"


def test_a_yes_no_question_is_never_answered_without_looking_by_default():
    ScriptedRouter.scores = {"rule": 0.9, "direct": 0.5, "vanilla": 0.4, "routerag": 0.5}
    ctx, _, _ = make_context(["Paris"], names=("passage",))
    trace = STRATEGIES.get("adaptive")(ctx, {"router": "scripted-strategy"}).run("Is Paris in France?")
    assert trace.steps[0].route.choice != "rule" and "rule" not in trace.steps[0].route.scores


def test_adaptive_rule_choice_when_opted_in_answers_from_the_question_without_a_model_call():
    ScriptedRouter.scores = {"rule": 0.9, "direct": 0.5, "vanilla": 0.4, "routerag": 0.5}
    ctx, model, sources = make_context(["Paris"], names=("passage",))
    choices = {"rule": "rule", "direct": "direct", "vanilla": "vanilla", "routerag": "routerag"}
    trace = STRATEGIES.get("adaptive")(ctx, {"router": "scripted-strategy", "strategies": choices}).run("Is Paris in France?")
    assert trace.steps[0].route.choice == "rule" and trace.answer.lower() == "yes"
    assert not sources["passage"].queries and model.calls == []
    assert sum(c.prompt_tokens for s in trace.steps for c in s.model_calls) == 0


def test_adaptive_maps_choices_to_other_strategies():
    ctx, _, _ = make_context(["So the answer is: Paris."], names=("passage",))  # iter-retgen's chain of thought
    params = {"router": "scripted-strategy", "strategies": {"direct": "direct", "vanilla": "iter-retgen"},
              "strategy_params": {"vanilla": {"iterations": 1}}}
    trace = STRATEGIES.get("adaptive")(ctx, params).run(Q)
    assert trace.params["strategies"][trace.steps[0].route.choice] == "iter-retgen" and trace.answer == "Paris"
    assert ScriptedRouter.asked[0][1] == {"direct": "", "vanilla": ""}


def test_adaptive_refuses_bad_parameters_early():
    ctx, _, _ = make_context(["Paris"], names=("passage",))
    cls = STRATEGIES.get("adaptive")
    with pytest.raises(ValueError, match="no-such-strategy"):
        cls(ctx, {"router": "scripted-strategy", "strategies": {"a": "direct", "b": "no-such-strategy"}})
    with pytest.raises(ValueError, match="cannot run itself"):
        cls(ctx, {"router": "scripted-strategy", "strategies": {"a": "direct", "b": "adaptive"}})
    with pytest.raises(ValueError, match="unknown choices"):
        cls(ctx, {"router": "scripted-strategy", "strategy_params": {"ircot": {"k": 2}}})
    with pytest.raises(ValueError):  # vanilla's own Params check its values
        cls(ctx, {"router": "scripted-strategy", "strategy_params": {"vanilla": {"k": 0}}})
    with pytest.raises(ValueError, match="router"):
        cls(ctx, {"router": "no-such-router"})


def test_adaptive_records_a_sub_strategy_error():
    ctx, _, _ = make_context([], names=("passage",))  # the scripted model has no answer left
    trace = STRATEGIES.get("adaptive")(ctx, {"router": "scripted-strategy"}).run(Q)
    assert trace.error and trace.error_kind == "model" and trace.steps[0].kind == "route"


# ---------------------------------------------------------------- strategy labels from runs


def _run(folder, strategy, rows, dataset="hotpotqa-distractor-train"):
    folder.mkdir(parents=True)
    header = {"name": folder.name, "dataset": dataset, "strategy": strategy, "label": strategy, "metrics": ["em", "f1"],
              "sample_qids": [r[0] for r in rows], "fingerprint": "f" * 20,
              "versions": {"routerag": "0", "python": "3", "platform": "x"}}
    (folder / "run.json").write_text(json.dumps(header))
    with gzip.open(folder / "results.jsonl.gz", "wt") as handle:
        for i, (qid, question, em, tokens, error) in enumerate(rows):
            record = {"position": i, "qid": qid, "question": question, "dataset": dataset, "golds": ["x"], "prediction": "x",
                      "metrics": {"em": em, "f1": em}, "cost": {"total_tokens": tokens, "latency_ms": 10.0 * tokens},
                      "error": error, "trace": {"question": question, "strategy": strategy}}
            handle.write(json.dumps(record) + "\n")
    return folder


def test_strategy_labels_from_runs_and_a_learned_strategy_router(tmp_path):
    from routerag.train.router.strategy_labels import strategy_labels

    direct = _run(tmp_path / "d", "direct", [("q1", "Who is A?", 1.0, 100, None), ("q2", "Who is B?", 0.0, 100, None),
                                             ("q3", "Who is C?", 0.0, 120, None)])
    vanilla = _run(tmp_path / "v", "vanilla", [("q1", "Who is A?", 1.0, 800, None), ("q2", "Who is B?", 1.0, 900, None),
                                               ("q3", "Who is C?", 1.0, 700, "boom")])  # an error fails
    prov, rows = strategy_labels({"direct": direct, "vanilla": vanilla}, eval_sets=())
    assert prov.kind == "strategy" and prov.choices == ["direct", "vanilla"] and prov.questions == 3
    assert [r.success for r in rows] == [{"direct": True, "vanilla": True}, {"direct": False, "vanilla": True},
                                        {"direct": False, "vanilla": False}]
    assert prov.mode_cost == {"direct": pytest.approx(106.7), "vanilla": 800.0} and rows[0].tokens == {"direct": 100, "vanilla": 800}
    assert prov.index["runs"]["vanilla"]["strategy"] == "vanilla"
    path = write_labels(tmp_path / "strategy-x.jsonl.gz", prov, rows)
    back_prov, back = read_labels(path)
    assert back_prov.kind == "strategy" and back == rows
    # a run without the question is left out; different datasets are refused
    short = _run(tmp_path / "s", "routerag", [("q2", "Who is B?", 1.0, 2000, None)])
    assert [r.qid for r in strategy_labels({"direct": direct, "routerag": short}, eval_sets=())[1]] == ["q2"]
    other = _run(tmp_path / "o", "vanilla", [("q1", "Who is A?", 1.0, 1, None)], dataset="musique")
    with pytest.raises(ValueError, match="different datasets"):
        strategy_labels({"direct": direct, "vanilla": other}, eval_sets=())
    with pytest.raises(ValueError, match="not a run folder"):
        strategy_labels({"direct": direct, "vanilla": tmp_path / "none"}, eval_sets=())
    with pytest.raises(ValueError, match="at least two"):
        strategy_labels({"direct": direct}, eval_sets=())


def test_strategy_labels_refuse_a_policy_trained_on_the_labelled_questions(tmp_path):
    """A routerag run whose adapter was trained on these questions' golden trajectories (its folder's
    golden_stats.json names the dataset) would label recall of training data as success."""
    from routerag.train.router.strategy_labels import policy_training_sources, strategy_labels

    direct = _run(tmp_path / "d", "direct", [("q1", "Who is A?", 0.0, 100, None)])
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "golden_stats.json").write_text(json.dumps({"by_source": {"hotpotqa-distractor-train": 600, "musique": 48}}))
    (policy / "adapter.gguf").write_bytes(b"GGUF")
    routerag = _run(tmp_path / "r", "routerag", [("q1", "Who is A?", 1.0, 2000, None)])
    (routerag / "config.resolved.yaml").write_text(f"model:\n  lora_path: {policy / 'adapter.gguf'}\n")
    lost = _run(tmp_path / "l", "routerag", [("q1", "Who is A?", 1.0, 2000, None)])
    (lost / "config.resolved.yaml").write_text("model:\n  lora_path: runs/elsewhere/adapter.gguf\n")
    with pytest.raises(ValueError, match="is not found from"):  # unknown provenance is not a pass
        policy_training_sources(lost)
    assert policy_training_sources(routerag) == ["hotpotqa-distractor-train", "musique"]
    assert policy_training_sources(direct) == []  # no configuration, no adapter
    with pytest.raises(ValueError, match="trained on golden trajectories of hotpotqa-distractor-train"):
        strategy_labels({"direct": direct, "routerag": routerag}, eval_sets=())
    _, rows = strategy_labels({"direct": direct, "routerag": routerag}, eval_sets=(), allow_trained_on=True)
    assert rows[0].success == {"direct": False, "routerag": True}
    # a policy trained on other datasets' questions is accepted
    (policy / "golden_stats.json").write_text(json.dumps({"by_source": {"musique": 48}}))
    assert len(strategy_labels({"direct": direct, "routerag": routerag}, eval_sets=())[1]) == 1


def test_a_shipped_policy_run_is_checked_against_the_records_in_the_package(tmp_path, monkeypatch):
    """The shipped adapter runs from its decompressed copy in the cache (or, in an older run's record,
    from the package's plain adapter.gguf, now shipped as adapter.gguf.xz): either way its training
    sources come from the golden_stats.json in the package."""
    from routerag.llm.config import ModelConfig, bundled_policy_path, policy_dir
    from routerag.train.router.strategy_labels import policy_training_sources

    monkeypatch.setenv("ROUTERAG_HOME", str(tmp_path / "home"))
    named = ModelConfig(lora_path="policy:routerag-sft-qwen2.5-coder-0.5b")
    cached = named.adapter_file()
    assert cached == bundled_policy_path() and not (cached.parent / "golden_stats.json").exists()
    recorded = policy_dir("routerag-sft-qwen2.5-coder-0.5b") / "adapter.gguf"
    for name, lora in (("named", named.lora_path), ("cached", cached), ("older", recorded)):
        run = _run(tmp_path / name, "routerag", [("q1", "Who is A?", 1.0, 2000, None)])
        (run / "config.resolved.yaml").write_text(f"model:\n  lora_path: {lora}\n")
        assert policy_training_sources(run) == ["hotpotqa", "hotpotqa-distractor-train", "musique"]


def test_adaptive_with_a_learned_strategy_router_trained_on_strategy_labels(tmp_path, monkeypatch):
    import routerag.index.embedder as embedder_module
    from routerag.train.router.fit import train_router
    from routerag.train.router.labels import LabelProvenance, RouteLabel
    from test_routing import ToyEmbedder

    # "related" questions need retrieval (vanilla succeeds, direct fails); "define" ones do not
    rows = [RouteLabel(qid=f"q{i}", dataset="toy", query=("who is related to x" if i % 2 else "define x"),
                       success={"direct": i % 2 == 0, "vanilla": True}, tokens={"direct": 100, "vanilla": 900})
            for i in range(20)]
    prov = LabelProvenance(kind="strategy", dataset="toy", k=0, choices=["direct", "vanilla"], label_rule="toy",
                           mode_cost={"direct": 100.0, "vanilla": 900.0})
    path = write_labels(tmp_path / "strategy-toy.jsonl.gz", prov, rows)
    manifest = train_router([path], tmp_path / "router", "strategy-toy", embedder=ToyEmbedder(), folds=2)
    assert manifest.kind == "strategy" and manifest.mode_cost == {"direct": 100.0, "vanilla": 900.0}
    monkeypatch.setattr(embedder_module, "build_embedder", lambda config=None: ToyEmbedder())
    params = {"strategies": {"direct": "direct", "vanilla": "vanilla"}, "router_model": str(tmp_path / "router"),
              "router_margin": 0.1}
    ctx, _, sources = make_context(["Paris", "Ann"], names=("passage",))
    adaptive = STRATEGIES.get("adaptive")(ctx, params)
    easy, hard = adaptive.run("define x"), adaptive.run("who is related to x")
    assert easy.steps[0].route.choice == "direct" and [s.kind for s in easy.steps] == ["route", "answer"]
    assert hard.steps[0].route.choice == "vanilla" and hard.steps[1].kind == "search"
    assert hard.steps[0].model_calls == [] and set(hard.steps[0].route.scores) == {"direct", "vanilla"}
    assert sources["passage"].queries == ["who is related to x"]

    # the run's fingerprint holds the router's weights: retraining it (same folder) makes a new one
    from routerag.eval.config import EvalConfig
    from routerag.eval.setup import answer_fingerprint

    config = EvalConfig(dataset="toy", strategy="adaptive", params=params)
    validated = STRATEGIES.get("adaptive").Params.model_validate(params)
    first = answer_fingerprint(config, validated, "model")
    assert answer_fingerprint(config, validated, "model") == first
    train_router([path], tmp_path / "router", "strategy-toy", embedder=ToyEmbedder(), folds=2, c=0.01)
    assert answer_fingerprint(config, validated, "model") != first
