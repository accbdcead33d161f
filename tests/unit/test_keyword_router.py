"""The ``keyword`` router: ordered regular-expression rules, the first match decides, else the
default; its refusals (an invalid pattern, a choice not offered, rules from a request) and its use
by a strategy (the route step names the rule that fired)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from routerag.provenance import FromRequest
from routerag.routing import ROUTERS, RouterDeps, build_router
from routerag.routing.base import RoutingError
from routerag.routing.keyword import KeywordRouter, load_rules, rules_fingerprint
from routerag.routing.keyword_rules import KeywordRules
from routerag.strategies import STRATEGIES
from routerag.strategies.sieve import SieveParams
from test_strategies_support import make_context

RULES = KeywordRules.model_validate({
    "rules": [{"pattern": r"\b(court|statute)s?\b", "choice": "law"},
              {"pattern": r"\bdrug|dose\b", "choice": "med"},
              {"pattern": r"court", "choice": "med"}],  # never fires before rule 1
    "default": "law",
})
CHOICES = {"law": "legal texts", "med": "medical texts"}


def _rules_file(tmp_path: Path, text: str, name: str = "rules.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_keyword_router_is_registered_and_needs_rules():
    assert "keyword" in ROUTERS.names()
    with pytest.raises(RoutingError, match="the keyword router needs rules"):
        build_router("keyword", RouterDeps())


def test_the_first_matching_rule_decides_case_insensitively_and_its_reason_names_it():
    router = build_router("keyword", RouterDeps(rules=RULES))
    result = router.route("Which COURTS heard the case?", CHOICES)
    assert result.choice == "law" and result.scores == {"law": 1.0, "med": 0.0}
    assert result.reason == r"keyword rule 1 /\b(court|statute)s?\b/ matched: law" and result.metadata["rule"] == 1
    dose = router.route("What dose of this drug?", CHOICES)
    assert dose.choice == "med" and dose.metadata["rule"] == 2 and "keyword rule 2" in dose.reason
    assert [c.name for c in dose.ranked] == ["med", "law"]
    route = dose.as_route(router.name)
    assert route.chosen_by == "keyword" and route.reason == dose.reason


def test_no_match_takes_the_default():
    result = KeywordRouter(RULES).route("Who wrote Hamlet?", CHOICES)
    assert result.choice == "law" and result.metadata["rule"] is None
    assert result.reason == "no keyword rule matched: the default law"


def test_an_invalid_pattern_is_refused_naming_the_rule(tmp_path):
    bad = KeywordRules.model_validate({"rules": [{"pattern": "ok", "choice": "law"}, {"pattern": "(unclosed", "choice": "med"}],
                                       "default": "law"})
    with pytest.raises(RoutingError, match=r"keyword rule 2 \('\(unclosed' -> med\): not a regular expression"):
        KeywordRouter(bad)
    path = _rules_file(tmp_path, "rules:\n  - {pattern: '[a-', choice: law}\ndefault: med\n")
    with pytest.raises(RoutingError, match="keyword rule 1 .*not a regular expression"):
        load_rules(path)


def test_a_malformed_or_missing_rules_file_is_refused(tmp_path):
    with pytest.raises(RoutingError, match="default: Field required"):
        load_rules(_rules_file(tmp_path, "rules:\n  - {pattern: court, choice: law}\n"))
    with pytest.raises(RoutingError, match="rules.0.choise: Extra inputs"):
        load_rules(_rules_file(tmp_path, "rules:\n  - {pattern: court, choise: law}\ndefault: med\n"))
    with pytest.raises(RoutingError, match="cannot be read"):
        load_rules(tmp_path / "none.yaml")


def test_a_rule_or_default_sending_to_a_choice_not_offered_is_refused():
    router = KeywordRouter(KeywordRules.model_validate({"rules": [{"pattern": "x", "choice": "graph"}], "default": "bm25"}))
    with pytest.raises(RoutingError, match=r"keyword rules send to 'graph', 'bm25', not among the choices law, med"):
        router.route("x", CHOICES)
    with pytest.raises(ValidationError, match="keyword rules send to 'graph'"):
        STRATEGIES.get("adaptive").Params.model_validate(
            {"router": "keyword", "router_rules": str(_write(router.rules)), "strategies": {"a": "direct", "b": "vanilla"}})


def _write(rules: KeywordRules, folder: Path | None = None) -> Path:
    import tempfile

    import yaml

    path = Path(tempfile.mkdtemp(dir=folder)) / "rules.yaml"
    path.write_text(yaml.safe_dump(rules.model_dump()), encoding="utf-8")
    return path


def test_a_request_cannot_set_rules_even_a_file_inside_the_data_folder(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    inside = _write(RULES, data)
    request = FromRequest(data_dir=data).context()
    for value in (str(inside), inside.name, "(a+)+$"):
        with pytest.raises(ValidationError, match="router rules .*a request cannot set them"):
            SieveParams.model_validate({"router": "keyword", "router_rules": value}, context=request)
    assert SieveParams.model_validate({"router": "llm"}, context=request).router_rules is None
    operator = SieveParams.model_validate({"router": "keyword", "router_rules": str(inside)})
    assert operator.router_rules == str(inside)


def test_router_keyword_needs_a_rules_file_and_the_fingerprint_follows_its_content(tmp_path):
    with pytest.raises(ValidationError, match="router=keyword needs router_rules"):
        SieveParams(router="keyword")
    path = _write(RULES, tmp_path)
    params = SieveParams(router="keyword", router_rules=str(path))
    before = params.fingerprint_inputs()
    path.write_text(path.read_text(encoding="utf-8").replace("default: law", "default: med"), encoding="utf-8")
    assert before["router_rules"].startswith("sha256:") and params.fingerprint_inputs() != before
    assert rules_fingerprint("llm", str(path)) == {}


def test_adaptive_routes_by_keyword_rules_and_records_the_rule(tmp_path):
    rules = KeywordRules.model_validate({"rules": [{"pattern": r"^(is|are|was|does)\b", "choice": "direct"}],
                                         "default": "vanilla"})
    ctx, _, sources = make_context(["Paris", "yes"], names=("passage",))
    adaptive = STRATEGIES.get("adaptive")(ctx, {"router": "keyword", "router_rules": str(_write(rules, tmp_path)),
                                                "strategies": {"direct": "direct", "vanilla": "vanilla"}})
    trace = adaptive.run("What is the capital of France?")
    assert trace.error is None and trace.steps[0].route.choice == "vanilla" and trace.steps[0].route.chosen_by == "keyword"
    assert trace.steps[0].route.reason == "no keyword rule matched: the default vanilla"
    assert sources["passage"].queries  # vanilla retrieved
    again = adaptive.run("Is Paris in France?")
    assert again.steps[0].route.choice == "direct" and "keyword rule 1" in again.steps[0].route.reason
