"""``evaluate``: a fingerprinted, resumable evaluation run — the job of ``routerag eval``. The run
directory holds ``run.json``, ``results.jsonl`` (one record per question) and ``summary.json``
(the format of :mod:`routerag.eval.runs`, read by ``routerag report``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from routerag.eval.config import EvalConfig
from routerag.eval.runner import ENGINES, Engine, RunOutcome
from routerag.progress import Listener


class EvaluateParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: EvalConfig
    out: Path | None = Field(None, description="the run directory (default: default_run_dir); an existing one is resumed")
    concurrency: int = Field(1, ge=1, description="questions answered in parallel")
    retry_errors: bool = Field(False, description="on resume, answer again the questions that failed with an error")
    progress: bool = Field(True, description="show the runner's progress bar")
    order: Literal["spread", "sample"] = Field("spread", description="spread: bit-reversed sample order; sample: in order")
    engine: Engine = Field("thread", description="thread: in this process (a thread pool when concurrency > 1); "
                                             "ray: a Ray Data pipeline over `concurrency` actors (the scale extra)")
    actor_cpus: float = Field(1.0, ge=0, description="engine ray: CPUs reserved per actor (fractions for served models)")


class EvaluateResult(BaseModel):
    run_dir: Path
    outcome: RunOutcome

    @property
    def results_path(self) -> Path:
        """The run's record file (``results.jsonl``, or its compressed form)."""
        return results_path(self.run_dir)


__all__ = ["ENGINES", "EvaluateParams", "EvaluateResult", "default_run_dir", "eval_config", "evaluate", "results_path"]


def eval_config(path: Path | None, overrides: Sequence[str] = ()) -> EvalConfig:
    """An evaluation configuration (a YAML file and ``key.path=value`` overrides) whose dataset,
    strategy and metric names are known (``UnknownNameError`` otherwise)."""
    from routerag.config import load_config
    from routerag.eval.setup import check_names

    config = load_config(EvalConfig, path, list(overrides))
    check_names(config)
    return config


def results_path(run_dir: Path) -> Path:
    """The record file of the run in ``run_dir``."""
    from routerag.eval.runs import RunDir

    return RunDir(run_dir).results.path


def default_run_dir(config: EvalConfig) -> Path:
    """``runs/<dataset>-<strategy>-<limit or all>``."""
    return Path("runs") / f"{config.dataset.replace(':', '_').replace('/', '_')}-{config.strategy}-{config.limit or 'all'}"


def evaluate(params: EvaluateParams, *, listener: Listener | None = None) -> EvaluateResult:
    """Check the names, refuse a folder that cannot be resumed, apply the model environment, build
    the setup (index, model; reported to ``listener``), write the resolved configuration of a new
    run, run or resume it. An evaluation runs exactly what its configuration names (no shipped policy)."""
    from contextlib import nullcontext

    from routerag.api.environment import model_environment
    from routerag.config import write_resolved
    from routerag.eval.metrics import LLMJudge
    from routerag.eval.runner import run_evaluation
    from routerag.eval.runs import RunDir
    from routerag.eval.setup import build_setup, check_names
    from routerag.progress import reporting

    cfg = params.config
    check_names(cfg)
    if params.engine == "ray":
        from routerag.raycluster import require_ray

        require_ray()
    run_path = params.out or default_run_dir(cfg)
    RunDir(run_path).check_adoptable()  # before building anything or writing there
    cfg = cfg.with_environment(model_environment())
    with reporting(listener) if listener is not None else nullcontext():  # index build, model load
        setup = build_setup(cfg, name=run_path.name, engine=params.engine)
    judge = LLMJudge(setup.judge_model) if setup.judge_model is not None else None  # type: ignore[arg-type]
    if not RunDir(run_path).exists():
        write_resolved(cfg.model_copy(update={"model": cfg.model.resolved()}), run_path)
    outcome = run_evaluation(setup.spec, setup.questions, setup.factory, run_path, judge=judge,
                             concurrency=params.concurrency, progress=params.progress,
                             retry_errors=params.retry_errors, order=params.order, engine=params.engine,
                             actor_cpus=params.actor_cpus)
    return EvaluateResult(run_dir=run_path, outcome=outcome)
