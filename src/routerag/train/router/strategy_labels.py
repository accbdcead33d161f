"""Strategy labels (Adaptive-RAG's query-complexity labels, from outcomes): which strategies
answered a TRAINING question correctly, and at what cost, read from ``routerag eval`` runs of each
candidate strategy over the same questions (e.g. ``direct``, ``vanilla``, ``routerag`` on
``hotpotqa-distractor-train``).

A strategy succeeds on a question when its record's metric (default ``em``) is at least the
threshold; a record with an error counts as a failure. Its cost is the question's total model
tokens; the price the cost-aware router uses is each strategy's mean tokens per question over the
label rows. Questions answered by some runs only are dropped (the label needs every strategy's
outcome), and so are questions overlapping the evaluation sets (:func:`routerag.corpus.contamination.check_overlap`).
The file is the usual label file (:mod:`routerag.train.router.labels`), ``kind="strategy"``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from routerag.routing.base import RoutingError
from routerag.train.router.labels import DEFAULT_EVAL_SETS, LabelProvenance, RouteLabel, git_commit


def _read_run(path: Path):
    from routerag.eval.runs import RunDir, RunError

    run = RunDir(path)
    if not run.header_path.is_file():
        raise RoutingError(f"{path}: not a run folder (no {run.header_path.name})")
    try:
        return run.read_header(), run.read_records()
    except RunError as exc:
        raise RoutingError(str(exc)) from None


def policy_training_sources(run_dir: Path) -> list[str]:
    """The datasets whose questions trained the policy adapter a run used: the ``by_source`` of the
    ``golden_stats.json`` beside its ``model.lora_path`` (a shipped policy's folder has one, as does
    a ``routerag golden`` set copied there); empty when the run used no adapter or none is recorded.
    An adapter that cannot be found (a relative path read from another directory) is an error, not
    a pass."""
    import json

    import yaml

    from routerag.eval.runs import RunDir

    config = RunDir(run_dir).config_path
    if not config.is_file():
        return []
    try:
        model = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("model") or {}
    except yaml.YAMLError:
        return []
    lora = model.get("lora_path") if isinstance(model, dict) else None
    if not lora:
        return []
    from routerag.llm.config import PACKED_ADAPTER_FILE, POLICY_PREFIX, policy_folder_of

    adapter: str | Path = Path(lora)
    # a shipped policy named (policy:NAME) has its records in the package; a relative path is relative to where
    # the run was made; a shipped policy's plain adapter.gguf recorded by an older run now ships compressed
    if str(lora).startswith(POLICY_PREFIX):
        adapter = str(lora)
    elif not Path(lora).is_file() and not Path(lora).with_name(PACKED_ADAPTER_FILE).is_file():
        raise RoutingError(f"run {run_dir}: its policy adapter {lora} is not found from {Path.cwd()}, so what it was "
                           "trained on cannot be checked; run this where the evaluation ran, or pass --allow-trained-on")
    stats = policy_folder_of(adapter) / "golden_stats.json"
    if not stats.is_file():
        return []
    try:
        by_source = json.loads(stats.read_text(encoding="utf-8")).get("by_source") or {}
    except (json.JSONDecodeError, AttributeError):
        raise RoutingError(f"{stats}: not a golden statistics file") from None
    return sorted(by_source)


def strategy_labels(runs: Mapping[str, str | Path], *, metric: str = "em", threshold: float = 1.0,
                    eval_sets: Sequence[str] = DEFAULT_EVAL_SETS,
                    allow_trained_on: bool = False) -> tuple[LabelProvenance, list[RouteLabel]]:
    """Labels from one run folder per choice (``choice name -> run folder``); the choice names
    are the labels the router learns (the ``adaptive`` strategy maps them to strategies). A run
    whose policy adapter was trained on the labelled dataset's questions is refused (its success
    there is recall of its training data, not an outcome a new question would see) unless
    ``allow_trained_on``."""
    if len(runs) < 2:
        raise RoutingError(f"strategy labels need runs of at least two strategies, got {list(runs)}")
    headers, records = {}, {}
    for choice, path in runs.items():
        header, recs = _read_run(Path(path))
        headers[choice] = header
        records[choice] = {r.qid: r for r in recs}
    datasets = {h.dataset for h in headers.values()}
    if len(datasets) != 1:
        raise RoutingError(f"the runs are over different datasets {sorted(datasets)}; label one dataset at a time")
    dataset = datasets.pop()
    if not allow_trained_on:
        for choice, path in runs.items():
            if dataset in (seen := policy_training_sources(Path(path))):
                raise RoutingError(f"run {choice}={path}: its policy adapter was trained on golden trajectories of {dataset}'s "
                                   f"questions (golden_stats.json: {', '.join(seen)}), so its successes there are not outcomes "
                                   "on new questions; label questions it never saw (e.g. 2wiki-train)")
    missing = [c for c, recs in records.items() if recs and any(metric not in r.metrics for r in recs.values())]
    if missing:
        raise RoutingError(f"runs {missing} did not record the metric {metric!r}")
    shared = [qid for qid in next(iter(records.values())) if all(qid in recs for recs in records.values())]
    if not shared:
        raise RoutingError("the runs share no question")
    excluded = 0
    if eval_sets:
        from routerag.corpus.contamination import check_overlap
        from routerag.corpus.schema import Question

        first = next(iter(records.values()))
        questions = [Question(qid=q, question=first[q].question, answers=first[q].golds or [""], dataset=dataset) for q in shared]
        bad = set(check_overlap(questions, list(eval_sets)).overlapping)
        excluded = len(bad)
        shared = [q for q in shared if q not in bad]
    rows = []
    for qid in shared:
        per = {c: records[c][qid] for c in runs}
        success = {c: r.error is None and (r.metrics.get(metric) or 0.0) >= threshold for c, r in per.items()}
        rows.append(RouteLabel(
            qid=qid, dataset=dataset, query=per[next(iter(per))].question, success=success,
            wall_ms={c: round(r.cost.latency_ms, 1) for c, r in per.items()},
            tokens={c: int(r.cost.total_tokens) for c, r in per.items()},
        ))
    prices = {c: round(float(np.mean([r.tokens[c] for r in rows])), 1) for c in runs} if rows else {}
    rows = [r.model_copy(update={"mode_cost": prices}) for r in rows]
    provenance = LabelProvenance(
        kind="strategy", dataset=dataset, k=0, choices=list(runs),
        label_rule=f"a strategy succeeds when its run's {metric} >= {threshold:g} on the question (errors fail); "
                   "its price is its mean total model tokens per question over these rows",
        index={"runs": {c: {"path": str(runs[c]), "strategy": h.strategy, "label": h.label, "fingerprint": h.fingerprint,
                            "created_at": str(h.created_at)} for c, h in headers.items()}},
        mode_cost=prices, excluded_eval_sets=list(eval_sets), excluded_questions=excluded,
        questions=len(rows), git_commit=git_commit(), created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    return provenance, rows
