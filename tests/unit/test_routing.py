"""Routers behind one registry; the learned router's features, weights, training and decisions."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from routerag.routing import ROUTERS, RouterDeps, build_router
from routerag.routing.features import FEATURE_NAMES, FEATURES_VERSION, entity_count, query_features, question_word
from routerag.routing.learned import LearnedRouter, cost_aware_choice
from routerag.routing.model import RouterManifest, RouterWeights, load_model, save_model
from routerag.train.router.labels import LabelProvenance, RouteLabel, read_labels, write_labels


class ToyEmbedder:
    """Two dimensions: mentions of 'graph' words and of 'passage' words."""

    identity = "toy"
    dim = 2

    def encode(self, texts, *, is_query=False):
        rows = [[t.lower().count("related"), t.lower().count("define")] for t in texts]
        return np.asarray(rows, dtype=np.float32)


def test_registry_lists_the_routers_and_the_llm_router_needs_a_model():
    assert {"llm", "profile-embedding", "learned"} <= set(ROUTERS.names())
    with pytest.raises(ValueError, match="needs a model"):
        build_router("llm", RouterDeps())


def test_profile_router_ranks_every_choice_with_its_similarity(monkeypatch):
    import routerag.index.embedder as embedder_module

    class Words:
        identity = "words"
        dim = 2

        def encode(self, texts, *, is_query=False):
            return np.asarray([[t.count("court"), t.count("drug")] for t in texts], dtype=np.float32) + 1e-3

    monkeypatch.setattr(embedder_module, "build_embedder", lambda config=None: Words())
    result = build_router("profile-embedding").route("which drug drug?", {"law": "court", "med": "drug"})
    assert result.choice == "med" and [c.name for c in result.ranked] == ["med", "law"]
    assert result.scores["med"] > result.scores["law"] and result.metadata["router"] == "profile-embedding"


def test_cost_aware_choice_takes_the_cheapest_within_the_margin():
    probs = {"passage": 0.60, "graph": 0.70, "hybrid": 0.72}
    costs = {"passage": 1.0, "graph": 3.0, "hybrid": 4.0}
    assert cost_aware_choice(probs, costs, 0.0) == "hybrid"
    assert cost_aware_choice(probs, costs, 0.05) == "graph"
    assert cost_aware_choice(probs, costs, 0.2) == "passage"
    assert cost_aware_choice({"a": 0.5, "b": 0.5}, {}, 0.0) == "a"  # equal cost: the first given


def test_query_features():
    assert question_word("Who directed Phoolwari?".split()) == "who"
    assert question_word("Is Paris older than Rome?".split()) == "yes_no"
    assert question_word("Phoolwari".split()) == "statement"
    assert entity_count("Who is the mother of Lothair II of Lotharingia?") == 1
    assert entity_count('Which film came first, "Blind Shaft" or The Mask of Fu Manchu?') == 2
    feats = query_features("Who was born first, Ann Smith or Bob Jones?")
    assert feats.shape == (len(FEATURE_NAMES),)
    named = dict(zip(FEATURE_NAMES, feats))
    assert named["form_who"] == 1 and named["comparison_cue"] == 1 and named["question_mark"] == 1


def test_features_v2_add_the_answer_form_and_v1_is_still_computed():
    from routerag.routing.features import feature_names

    v1, v2 = feature_names(1), feature_names(2)
    assert v2[: len(v1)] == v1 and v2[len(v1):] == ("answer_yes_no", "answer_choice", "answer_open")
    named = dict(zip(v2, query_features("Was Ann Smith or Bob Jones born first?", 2)))
    assert named["answer_choice"] == 1 and named["answer_yes_no"] == 0 and named["form_yes_no"] == 1
    assert dict(zip(v2, query_features("Is Paris in France?", 2)))["answer_yes_no"] == 1
    assert dict(zip(v2, query_features("Who directed Phoolwari?", 2)))["answer_open"] == 1
    assert query_features("Who directed Phoolwari?", 1).shape == (len(v1),)
    assert np.array_equal(query_features("Who directed Phoolwari?", 2)[: len(v1)], query_features("Who directed Phoolwari?", 1))
    with pytest.raises(ValueError, match="unknown to this code"):
        query_features("x", 99)


def test_a_router_trained_on_v1_features_is_served_v1_features():
    from routerag.routing.learned import shipped_dir

    manifest, _ = load_model(shipped_dir() / "mode")
    assert manifest.features_version == 1  # shipped before v2
    router = LearnedRouter.load(shipped_dir() / "mode")
    assert router.inputs(["Who directed Phoolwari?"], np.zeros((1, manifest.embed_dim), np.float32)).shape == \
        (1, manifest.embed_dim + len(manifest.features))


def test_a_router_on_the_features_alone_needs_no_embedder(tmp_path):
    from routerag.train.router.fit import train_router

    class NoEmbedder(ToyEmbedder):
        def encode(self, texts, *, is_query=False):
            raise AssertionError("a features-only router must not embed")

    rows = [RouteLabel(qid=f"q{i}", dataset="toy", query=(f"Is item {i} red?" if i % 2 else f"Who made item {i}?"),
                       success={"rule": i % 2 == 1, "search": i % 2 == 0}, mode_cost={"rule": 0.0, "search": 100.0})
            for i in range(40)]
    prov = LabelProvenance(kind="strategy", dataset="toy", k=0, choices=["rule", "search"], label_rule="toy",
                           mode_cost={"rule": 0.0, "search": 100.0})
    path = write_labels(tmp_path / "strategy-toy.jsonl.gz", prov, rows)
    manifest = train_router([path], tmp_path / "router", "toy", embedder=ToyEmbedder(), folds=4,
                            inputs=["embedding+features", "features"], c=[0.1, 1.0])
    assert set(manifest.cv["grid"]) == {"embedding+features, C=0.1", "embedding+features, C=1", "features, C=0.1", "features, C=1"}
    assert manifest.inputs == "features" and manifest.embed_dim == 0 and manifest.features_version == FEATURES_VERSION
    assert manifest.cv["learned"]["0"]["accuracy"] == 1.0  # the answer form separates them
    router = LearnedRouter.load(tmp_path / "router", embedder=NoEmbedder())
    assert router.route("Is item 99 blue?", {"rule": "", "search": ""}).choice == "rule"
    assert router.route("Who made item 99?", {"rule": "", "search": ""}).choice == "search"
    with pytest.raises(ValueError, match="inputs must be among"):
        train_router([path], tmp_path / "r2", "toy", embedder=ToyEmbedder(), inputs=["tokens"])


def test_weights_round_trip_without_pickle_and_bad_files_are_refused(tmp_path):
    manifest = RouterManifest(name="t", kind="mode", labels=["a", "b"], embedder="toy", embed_dim=2,
                              features=list(FEATURE_NAMES), features_version=FEATURES_VERSION)
    d = 2 + len(FEATURE_NAMES)
    weights = RouterWeights(np.zeros(d), np.ones(d), np.arange(2 * d, dtype=np.float32).reshape(2, d), np.zeros(2))
    save_model(tmp_path / "m", manifest, weights)
    back_manifest, back = load_model(tmp_path / "m")
    assert back_manifest == manifest and np.array_equal(back.coef, weights.coef)
    with np.load(tmp_path / "m" / "weights.npz", allow_pickle=False) as arrays:  # plain arrays only
        assert sorted(arrays.files) == ["coef", "intercept", "mean", "scale"]
    bad = manifest.model_copy(update={"embed_dim": 5})
    (tmp_path / "m" / "manifest.json").write_text(bad.model_dump_json(), encoding="utf-8")
    with pytest.raises(ValueError, match="weights are"):
        load_model(tmp_path / "m")
    with pytest.raises(ValueError, match="not a router model"):
        load_model(tmp_path / "nothing")


def _labels(n_questions: int = 40) -> list[RouteLabel]:
    rows = []
    for i in range(n_questions):
        graphy = i % 2 == 0
        for hop in range(2):
            query = f"who is related to person {i}?" if graphy else f"define term {i} {hop}"
            rows.append(RouteLabel(qid=f"q{i}", dataset="toy", hop=hop, query=query, question=query,
                                   success={"passage": not graphy, "graph": graphy, "hybrid": hop == 0},
                                   wall_ms={"passage": 1.0, "graph": 3.0, "hybrid": 4.0},
                                   mode_cost={"passage": 1.0, "graph": 3.0, "hybrid": 4.0}))
    return rows


def test_labels_file_round_trip_and_errors(tmp_path):
    prov = LabelProvenance(kind="mode", dataset="toy", k=5, choices=["passage", "graph", "hybrid"], label_rule="toy",
                           mode_cost={"passage": 1.0, "graph": 3.0, "hybrid": 4.0})
    path = write_labels(tmp_path / "mode-toy.jsonl.gz", prov, _labels(3))
    back_prov, rows = read_labels(path)
    assert back_prov.rows == 6 and rows[0].label == ["graph", "hybrid"] and rows[1].label == ["graph"]
    broken = tmp_path / "broken.jsonl.gz"
    with gzip.open(broken, "wt") as handle:
        handle.write(json.dumps({"rows": 1}) + "\n")
    with pytest.raises(ValueError, match="provenance"):
        read_labels(broken)


def test_training_cross_validates_by_question_and_the_router_routes(tmp_path):
    from routerag.train.router.fit import train_router

    prov = LabelProvenance(kind="mode", dataset="toy", k=5, choices=["passage", "graph", "hybrid"], label_rule="toy",
                           mode_cost={"passage": 1.0, "graph": 3.0, "hybrid": 4.0})
    path = write_labels(tmp_path / "mode-toy.jsonl.gz", prov, _labels())
    manifest = train_router([path], tmp_path / "router", "toy-mode", embedder=ToyEmbedder(), folds=4)
    cv = manifest.cv
    assert cv["grouped_by"] == "question" and cv["questions"] == 40 and cv["rows"] == 80
    assert cv["learned"]["0"]["accuracy"] >= 0.95 > cv["always"]["passage"]["accuracy"]
    assert cv["oracle"]["accuracy"] == 1.0 and manifest.mode_cost["graph"] == 3.0

    router = LearnedRouter.load(tmp_path / "router", embedder=ToyEmbedder())
    choices = {"passage": "", "graph": "", "hybrid": ""}
    assert router.route("who is related to person 99?", choices).choice == "graph"
    result = router.route("define term 99 1", choices)
    assert result.choice == "passage" and set(result.scores) == set(choices) and result.metadata["router"] == "learned"
    assert router.route("who is related to person 99?", {"passage": "", "hybrid": ""}).choice in {"passage", "hybrid"}
    with pytest.raises(ValueError, match="knows"):
        router.route("x", {"bm25": ""})

    class Other(ToyEmbedder):
        identity = "other"

    with pytest.raises(ValueError, match="expects the embedder"):
        LearnedRouter.load(tmp_path / "router", embedder=Other()).route("x", choices)


def test_a_grid_of_c_is_chosen_by_the_grouped_cross_validation(tmp_path):
    from routerag.routing.base import RoutingError
    from routerag.train.router.fit import train_router

    prov = LabelProvenance(kind="mode", dataset="toy", k=5, choices=["passage", "graph", "hybrid"], label_rule="toy",
                           mode_cost={"passage": 1.0, "graph": 3.0, "hybrid": 4.0})
    path = write_labels(tmp_path / "mode-toy.jsonl.gz", prov, _labels())
    manifest = train_router([path], tmp_path / "router", "toy-mode", embedder=ToyEmbedder(), folds=4, c=[1e-6, 1.0])
    grid = manifest.cv["c_grid"]
    assert set(grid) == {"1e-06", "1"} and grid["1"] > grid["1e-06"]  # a vanishing C cannot separate the forms
    assert manifest.hyperparameters["C"] == 1.0 and manifest.cv["learned"]["0"]["accuracy"] == grid["1"]
    with pytest.raises(RoutingError, match="positive"):
        train_router([path], tmp_path / "r2", "toy-mode", embedder=ToyEmbedder(), folds=4, c=[0.0])


def _toy_router(tmp_path, choices, rows):
    from routerag.train.router.fit import train_router

    prov = LabelProvenance(kind="source", dataset="toy", k=5, choices=choices, label_rule="toy")
    path = write_labels(tmp_path / "toy.jsonl.gz", prov, rows)
    train_router([path], tmp_path / "router", "toy", embedder=ToyEmbedder(), folds=2)
    return tmp_path / "router"


def test_hard_route_with_the_learned_router_routes_without_a_model_call(tmp_path, monkeypatch):
    from tests.integration.test_hard_route import FILMS, PEOPLE, KeywordSource, responder

    import routerag.index.embedder as embedder_module
    from routerag.llm.scripted import ScriptedModel
    from routerag.routing.source_routing import ROUTE_SYSTEM
    from routerag.runtime.base import StrategyContext
    from routerag.sources.sourceset import SourceSet
    from routerag.strategies.hard_route import HardRoute, HardRouteParams

    rows = [RouteLabel(qid=f"q{i}", dataset="toy", query=("who is related to x" if i % 2 else "define x"),
                       success={"films": i % 2 == 0, "people": i % 2 == 1}) for i in range(20)]
    model_dir = _toy_router(tmp_path, ["films", "people"], rows)
    monkeypatch.setattr(embedder_module, "build_embedder", lambda config=None: ToyEmbedder())
    films = KeywordSource("films", FILMS.docs, "court judge")
    people = KeywordSource("people", PEOPLE.docs, "patient drug")
    model = ScriptedModel(responder)
    params = HardRouteParams(top_k=3, router="learned", router_model=str(model_dir), decomposition=False, max_reflections=0)
    trace = HardRoute(StrategyContext(model=model, sources=SourceSet([films, people])), params).run("Who is related to Ann?")
    route = next(s for s in trace.steps if s.kind == "route")
    assert route.decision() == ["people"] and route.model_calls == [] and route.route.chosen_by == "learned"
    assert set(route.route.scores) == {"films", "people"}
    assert all(c.messages[0].content != ROUTE_SYSTEM for c in model.calls)


def test_routerag_mode_router_learned_overrides_the_policy_tag(tmp_path, monkeypatch):
    import routerag.index.embedder as embedder_module
    from routerag.runtime.parsing import ParsedAction
    from routerag.strategies.routerag import ModeRouter, RouteRAGParams

    rows = [RouteLabel(qid=f"q{i}", dataset="toy", query=("who is related to x" if i % 2 else "define x"),
                       success={"passage": i % 2 == 0, "graph": i % 2 == 1, "hybrid": False}) for i in range(20)]
    model_dir = _toy_router(tmp_path, ["passage", "graph", "hybrid"], rows)
    monkeypatch.setattr(embedder_module, "build_embedder", lambda config=None: ToyEmbedder())
    params = RouteRAGParams(mode_router="learned", mode_router_model=str(model_dir))
    plan = ModeRouter(params, "q")(ParsedAction(kind="search", query="[passage] who is related to Ann"), "q")
    assert plan.sources == ["graph"] and plan.route.proposed == "passage" and "learned router" in plan.route.reason
    only = RouteRAGParams(mode_router="learned", mode_router_model=str(model_dir), allowed_modes=["passage", "hybrid"])
    plan = ModeRouter(only, "q")(ParsedAction(kind="search", query="[graph] who is related to Ann"), "q")
    assert plan.sources[0] in {"passage", "hybrid"}


def test_hard_route_with_the_default_learned_router_fingerprints_every_shipped_router(tmp_path, monkeypatch):
    """Without ``router_model`` the router is chosen once the sources are mounted, so the run's
    fingerprint holds every shipped router: retraining one makes a new fingerprint."""
    import routerag.routing.learned as learned
    from routerag.eval.config import EvalConfig
    from routerag.eval.setup import answer_fingerprint
    from routerag.strategies.hard_route import HardRouteParams
    from routerag.train.router.fit import train_router

    rows = [RouteLabel(qid=f"q{i}", dataset="toy", query=("who is related to x" if i % 2 else "define x"),
                       success={"films": i % 2 == 0, "people": i % 2 == 1}) for i in range(20)]
    prov = LabelProvenance(kind="source", dataset="toy", k=5, choices=["films", "people"], label_rule="toy")
    path = write_labels(tmp_path / "toy.jsonl.gz", prov, rows)
    shipped = tmp_path / "routers"
    train_router([path], shipped / "toy", "toy", embedder=ToyEmbedder(), folds=2)
    monkeypatch.setattr(learned, "shipped_dir", lambda: shipped)
    params = HardRouteParams(router="learned")
    config = EvalConfig(dataset="toy", strategy="hard-route", params=params.model_dump())
    first = answer_fingerprint(config, params, "model")
    assert params.fingerprint_inputs()["router_models"].startswith("sha256:")
    assert answer_fingerprint(config, params, "model") == first
    train_router([path], shipped / "toy", "toy", embedder=ToyEmbedder(), folds=2, c=0.01)
    assert answer_fingerprint(config, params, "model") != first
    assert HardRouteParams().fingerprint_inputs() == {}
    (shipped / "toy" / "manifest.json").unlink()
    with pytest.raises(learned.RoutingError, match="no shipped router"):
        params.fingerprint_inputs()


def test_new_router_params_stay_out_of_the_fingerprint_at_their_defaults():
    from routerag.eval.setup import fingerprint_params
    from routerag.strategies.hard_route import HardRouteParams
    from routerag.strategies.routerag import RouteRAGParams

    assert not {"router", "router_model", "router_margin"} & set(fingerprint_params(HardRouteParams()))
    assert not {"mode_router", "mode_router_model", "mode_router_margin"} & set(fingerprint_params(RouteRAGParams()))
    assert fingerprint_params(RouteRAGParams(mode_router="learned"))["mode_router"] == "learned"


def test_the_shipped_mode_router_matches_the_label_files_its_train_command_uses():
    """`routerag router train --name mode` over the shipped labels reproduces the shipped model's
    training data: the same label sets, row counts and questions (mode-hotpotqa-distractor is a
    shipped label set the shipped model is deliberately not trained on, docs/concepts/routing.md)."""
    from routerag.api.routing import ROUTER_LABELS, label_files
    from routerag.routing.learned import shipped_dir

    assert "mode-hotpotqa-distractor.jsonl.gz" not in ROUTER_LABELS["mode"]
    files = label_files("mode", shipped_dir() / "labels")
    assert [f.name for f in files] == sorted(ROUTER_LABELS["mode"])
    manifest, weights = load_model(shipped_dir() / "mode")
    heads = [read_labels(f)[0] for f in files]
    assert sorted((p.dataset, p.rows, p.questions) for p in heads) == \
        sorted((t["dataset"], t["rows"], t["questions"]) for t in manifest.training)
    assert manifest.rows == sum(p.rows for p in heads)
    assert weights.coef.shape == (len(manifest.labels), manifest.embed_dim + len(manifest.features))
