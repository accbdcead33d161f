"""Configuration is checked when it is loaded, before any model or index is built: reward and
strategy parameters against their registered ``Params``, names against their registries. Parts a
plugin provides — a strategy, a reward, a model backend, a router, defined in this very module and
named by import path (``"pkg.mod:Attr"``) or registered at run time — are accepted without any edit
of routerag's own code."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from typer.testing import CliRunner

from routerag.config import ConfigError, load_config
from routerag.corpus.schema import Question
from routerag.eval.config import EvalConfig
from routerag.llm.scripted import ScriptedModel
from routerag.registry import PluginError, UnknownNameError
from routerag.routing.base import RouteResult, ranked_by_score
from routerag.strategies import StrategyContext
from routerag.trace import Trace
from routerag.train.config import load_train_config
from routerag.train.rewards import RewardSample, RewardSpec

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = __name__  # this module, importable by name as an installed plugin package would be


# ------------------------------------------------------------------ a plugin's parts


class EchoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prefix: str = Field(default=">", description="put before the question")
    times: int = Field(default=1, ge=1, le=3, description="how many prefixes")


class EchoStrategy:
    """Answers with the question behind a prefix (no search, no model call)."""

    name: ClassVar[str] = "echo"
    Params: ClassVar[type[BaseModel]] = EchoParams
    retrieves: ClassVar[bool] = False

    def __init__(self, context: StrategyContext, params: BaseModel | None = None) -> None:
        self.params = params if isinstance(params, EchoParams) else EchoParams()

    def run(self, question: str | Question) -> Trace:
        text = question if isinstance(question, str) else question.question
        return Trace(question=text, strategy=self.name, answer=self.params.prefix * self.params.times + text)


class BrevityParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_words: int = Field(default=5, ge=1)


def _brevity(samples: Sequence[RewardSample], params: BrevityParams) -> list[float]:
    return [float(0 < len(s.trace.answer.split()) <= params.max_words) for s in samples]


brevity = RewardSpec("brevity", _brevity, BrevityParams, "1 for an answer of 1..max_words words")


def echo_backend(config: Any) -> ScriptedModel:
    return ScriptedModel(["plugged in"], name="echo-backend")


class _KeywordRouter:
    name = "keyword"

    def route(self, query: str, choices: Mapping[str, str]) -> RouteResult:
        words = set(query.lower().split())
        scores = {n: float(len(words & set(p.lower().split()))) for n, p in choices.items()}
        return RouteResult(ranked=ranked_by_score(scores), reason="shared words")


def keyword_router(deps: Any) -> _KeywordRouter:
    return _KeywordRouter()


def _cli() -> Any:
    from routerag.cli.app import app
    from routerag.cli.main import _load

    _load()  # registers the commands
    return app


def _write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


# ------------------------------------------------------------------ rewards


def _schedule(*rewards: dict[str, Any]) -> dict[str, Any]:
    return {"recipe": "routerag-two-stage", "schedule": {"stages": [{"name": "only", "rewards": list(rewards)}]}}


def test_a_bad_reward_parameter_fails_when_the_yaml_is_loaded(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.yaml", _schedule({"name": "em"}, {"name": "format", "params": {"score": "lots"}}))
    with pytest.raises(ConfigError, match=r"(?s)bad.yaml.*schedule.stages.0.rewards.1.*invalid params for reward 'format': score"):
        load_train_config(bad)
    typo = _write(tmp_path, "typo.yaml", _schedule({"name": "format", "params": {"scroe": 1.0}}))
    with pytest.raises(ConfigError, match="invalid params for reward 'format': scroe: Extra inputs are not permitted"):
        load_train_config(typo)
    metric = _write(tmp_path, "metric.yaml", _schedule({"name": "em", "params": {"metric": "bleu"}}))
    with pytest.raises(ConfigError, match="invalid params for reward 'em': metric: Value error, unknown metric 'bleu'; valid: "):
        load_train_config(metric)
    unknown = _write(tmp_path, "unknown.yaml", _schedule({"name": "emm"}))
    with pytest.raises(UnknownNameError, match=r"unknown.yaml: unknown reward 'emm'; valid: .*accuracy_efficiency"):
        load_train_config(unknown)


def test_a_bad_reward_parameter_fails_before_anything_heavy_is_imported(tmp_path: Path) -> None:
    """In a fresh interpreter, as ``routerag train`` runs: the error comes from loading the YAML,
    and neither torch, transformers, TRL nor llama.cpp has been imported by then."""
    bad = _write(tmp_path, "bad.yaml", _schedule({"name": "accuracy_efficiency", "params": {"cap": -1}}))
    script = (
        "import sys\nfrom routerag.config import ConfigError\nfrom routerag.train.config import load_train_config\n"
        f"try:\n    load_train_config({str(bad)!r})\nexcept ConfigError as exc:\n    print('refused:', 'cap' in str(exc))\n"
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'llama_cpp') if m in sys.modules))\n"
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["refused: True", "[]"]


def test_routerag_train_refuses_the_file_with_exit_code_2(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.yaml", _schedule({"name": "format", "params": {"score": "lots"}}))
    result = CliRunner().invoke(_cli(), ["train", "routerag-two-stage", "--config", str(bad), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "invalid params for reward 'format'" in result.output
    assert not (tmp_path / "run").exists()


def test_a_plugin_reward_by_import_path(tmp_path: Path) -> None:
    good = _write(tmp_path, "good.yaml", _schedule({"name": f"{PLUGIN}:brevity", "params": {"max_words": 2}}))
    schedule = load_train_config(good).schedule
    assert schedule is not None
    samples = [RewardSample(trace=Trace(question="q", strategy="s", answer=a)) for a in ("Paris", "the city of Paris")]
    assert schedule.score(samples, step=1).total == [1.0, 0.0]
    bad = _write(tmp_path, "bad.yaml", _schedule({"name": f"{PLUGIN}:brevity", "params": {"max_words": 0}}))
    with pytest.raises(ConfigError, match="max_words: Input should be greater than or equal to 1"):
        load_train_config(bad)
    wrong_kind = _write(tmp_path, "kind.yaml", _schedule({"name": f"{PLUGIN}:BrevityParams"}))
    with pytest.raises(PluginError, match="is not a reward"):
        load_train_config(wrong_kind)


def test_the_stored_training_configurations_load_unchanged() -> None:
    """Every field of a stored training run's configuration keeps its name and value."""
    stored = [p for p in (ROOT / "docs" / "results").rglob("config.resolved.yaml") if "recipe" in yaml.safe_load(p.read_text())]
    assert len(stored) >= 2
    for path in stored:
        written = yaml.safe_load(path.read_text())
        cfg = load_train_config(path)
        # a run of the one flat configuration lists every recipe's sections: the recipe's own are kept
        assert set(written) - set(type(cfg).model_fields) <= {"sft", "rft", "switch_step", "pra_until"}, path
        written = {k: v for k, v in written.items() if k in type(cfg).model_fields}
        dumped = cfg.model_dump(mode="json")
        assert _common(dumped, written) == written, path


def _common(dumped: Any, written: Any) -> Any:
    """``dumped`` limited to the keys ``written`` has (settings added since are left out)."""
    if isinstance(written, dict) and isinstance(dumped, dict):
        return {k: _common(dumped.get(k), v) for k, v in written.items()}
    return dumped


# ------------------------------------------------------------------ strategies


def test_a_bad_strategy_parameter_fails_when_the_yaml_is_loaded(tmp_path: Path) -> None:
    bad = _write(tmp_path, "eval.yaml", {"strategy": "vanilla", "params": {"k": "many"}})
    with pytest.raises(ConfigError, match="invalid params for strategy 'vanilla': k: Input should be a valid integer"):
        load_config(EvalConfig, bad)
    with pytest.raises(ConfigError, match="invalid params for strategy 'routerag': max_turns"):
        load_config(EvalConfig, None, ["strategy=routerag", "params.max_turns=33"])
    with pytest.raises(UnknownNameError, match="eval.yaml: unknown strategy 'magic'; valid: "):
        load_config(EvalConfig, _write(tmp_path, "eval.yaml", {"strategy": "magic"}))
    assert load_config(EvalConfig, None, ["strategy=routerag", "params.max_turns=3"]).params == {"max_turns": 3}


def test_routerag_eval_refuses_bad_params_before_building_anything(tmp_path: Path) -> None:
    bad = _write(tmp_path, "eval.yaml", {"dataset": "demo", "strategy": "vanilla", "params": {"k": 0}})
    result = CliRunner().invoke(_cli(), ["eval", "--config", str(bad), "--out", str(tmp_path / "run")])
    assert result.exit_code == 1 and "invalid params for strategy 'vanilla': k" in result.output
    assert not (tmp_path / "run").exists()


def test_a_plugin_strategy_by_import_path(tmp_path: Path) -> None:
    from routerag.api import resolve_strategy
    from routerag.sources.sourceset import SourceSet

    path = _write(tmp_path, "eval.yaml", {"strategy": f"{PLUGIN}:EchoStrategy", "params": {"prefix": ">>"}})
    cfg = load_config(EvalConfig, path)
    resolved = resolve_strategy(cfg.strategy, cfg.params, shipped_policy=False)
    strategy = resolved.build(StrategyContext(model=ScriptedModel(["unused"]), sources=SourceSet()))
    assert strategy.run("who?").answer == ">>who?" and not resolved.retrieves
    with pytest.raises(ConfigError, match="invalid params for strategy .*EchoStrategy': times"):
        load_config(EvalConfig, _write(tmp_path, "bad.yaml", {"strategy": f"{PLUGIN}:EchoStrategy", "params": {"times": 9}}))
    with pytest.raises(PluginError, match="has no attribute 'Missing'"):
        load_config(EvalConfig, _write(tmp_path, "missing.yaml", {"strategy": f"{PLUGIN}:Missing"}))
    with pytest.raises(PluginError, match="is not a strategy"):
        EvalConfig(strategy=f"{PLUGIN}:EchoParams")


# ------------------------------------------------------------------ backends and routers


def test_a_plugin_backend_registered_or_by_import_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from routerag.llm.base import Message
    from routerag.llm.config import ModelConfig
    from routerag.llm.factory import BACKENDS, build_model

    with pytest.raises(ValidationError, match="unknown model backend 'echo-test'"):
        ModelConfig(backend="echo-test")
    monkeypatch.setitem(BACKENDS._entries, "echo-test", echo_backend)  # as BACKENDS.register would; undone after
    for name in ("echo-test", f"{PLUGIN}:echo_backend"):
        config = ModelConfig(backend=name)
        assert config.resolved().concurrency == 1  # a plugin backend: one request at a time unless configured
        assert build_model(config).chat([Message(role="user", content="hi")]).text == "plugged in"


def test_a_plugin_router_is_accepted_by_the_strategies_that_take_one() -> None:
    from routerag.routing import build_router
    from routerag.strategies.hard_route import HardRouteParams
    from routerag.strategies.realroute import RealRouteParams

    params = HardRouteParams(router=f"{PLUGIN}:keyword_router")
    chosen = build_router(params.router).route("law of contracts", {"law": "contracts law courts", "med": "drugs"})
    assert chosen.choice == "law"
    with pytest.raises(ValidationError, match="router\n  Value error, unknown router 'nope'; valid: .*keyword, learned, llm"):
        HardRouteParams(router="nope")
    with pytest.raises(ValidationError, match="unknown selector 'best'; valid: llm, norm_score"):
        RealRouteParams(selector="best")
    schema = HardRouteParams.model_json_schema()["properties"]["router"]
    assert {"learned", "llm", "profile-embedding"} <= set(schema["enum"])  # the web UI's choices
