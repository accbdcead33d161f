"""A strategy router (``adaptive``'s) replayed over stored runs of its candidate strategies.

``adaptive`` answers a question by running the strategy its router chooses, on the same model
configuration as that strategy's own ``routerag eval`` run, so (greedy decoding, same index) its
record for the question equals the chosen strategy's stored record - checked on every question
of the stored ``adaptive`` runs (docs/concepts/routing.md). This script therefore scores a router on an
evaluation set without running a model: per question it asks the router, looks up the chosen
strategy's stored record, and reports, at each cost margin, EM (all and open-answer questions),
mean tokens and the share of each choice, against always-one-strategy and the oracle, with the
paired difference to the best single strategy (bootstrap CI, exact sign test).

It is a replay, not a run: it says what ``adaptive`` with that router would score, and is exact
only while the candidates' stored runs are what the strategies do now (their fingerprints match
the current code: ``tests/unit/test_runner_cli.py``). Confirm a result with ``STEP=eval bash docs/experiments/scripts/adaptive.sh``.

    python3 benchmarks/bench_strategy_router.py --router strategy \\
      --set musique=rule:docs/results/runs/musique-rule,direct:docs/results/runs/musique-direct,... \\
      --margins 0 0.05 0.1
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from routerag.corpus.question_types import question_form
from routerag.eval.bootstrap import paired_bootstrap
from routerag.eval.report import LoadedRun, load_run
from routerag.eval.signtest import sign_test
from routerag.routing.learned import LearnedRouter, resolve_model


def parse_set(spec: str) -> tuple[str, dict[str, Path]]:
    name, sep, rest = spec.partition("=")
    if not sep:
        raise SystemExit(f"--set {spec!r}: expected NAME=choice:run_dir,choice:run_dir,...")
    runs = {}
    for item in rest.split(","):
        choice, sep, path = item.partition(":")
        if not sep:
            raise SystemExit(f"--set {spec!r}: {item!r} is not choice:run_dir")
        runs[choice] = Path(path)
    return name, runs


FORMS = ("yes/no", "choice", "open")


def _row(label: str, em: np.ndarray, forms: np.ndarray, tokens: np.ndarray, share: str = "") -> list[str]:
    by_form = [f"{100 * em[forms == f].mean():.1f}" if (forms == f).any() else "-" for f in FORMS]
    return [label, f"{100 * em.mean():.1f}", *by_form, f"{tokens.mean():,.0f}", share]


def replay(name: str, runs: dict[str, Path], router: LearnedRouter, margins: list[float], metric: str) -> None:
    loaded: dict[str, LoadedRun] = {c: load_run(p) for c, p in runs.items()}
    first = next(iter(loaded.values()))
    records = {c: {r.qid: r for r in run.records} for c, run in loaded.items()}
    qids = [q for q in first.header.sample_qids if all(q in recs for recs in records.values())]
    questions = [records[next(iter(records))][q].question for q in qids]
    choices = list(runs)
    em = {c: np.array([records[c][q].metrics.get(metric, 0.0) or 0.0 for q in qids]) for c in choices}
    tokens = {c: np.array([records[c][q].cost.total_tokens for q in qids], dtype=float) for c in choices}
    forms = np.array([question_form(t) for t in questions])
    probs = router.predict(questions)
    print(f"\n### {name}: {len(qids)} questions (" + ", ".join(f"{int((forms == f).sum())} {f}" for f in FORMS) + f"), router {router.manifest.name} "
          f"({router.manifest.inputs}, C={router.manifest.hyperparameters.get('C')})\n")
    rows = [_row(f"always {c}", em[c], forms, tokens[c]) for c in choices]
    best = max(choices, key=lambda c: (em[c].mean(), -tokens[c].mean()))
    oracle_pick = [min((c for c in choices if em[c][i] > 0), key=lambda c: tokens[c][i], default=best) for i in range(len(qids))]
    rows.append(_row("oracle (cheapest correct)", np.array([em[c][i] for i, c in enumerate(oracle_pick)]), forms,
                     np.array([tokens[c][i] for i, c in enumerate(oracle_pick)])))
    paired = []
    for margin in margins:
        router.margin = margin
        picks = [router.decide(p, choices).choice for p in probs]
        got = np.array([em[c][i] for i, c in enumerate(picks)])
        spent = np.array([tokens[c][i] for i, c in enumerate(picks)])
        share = ", ".join(f"{c} {sum(p == c for p in picks)}" for c in choices)
        rows.append(_row(f"router, margin {margin:g}", got, forms, spent, share))
        diff = paired_bootstrap(list(em[best]), list(got), seed=0)
        sign = sign_test(list(em[best]), list(got))
        paired.append([f"margin {margin:g}", f"{100 * diff.diff:+.1f} [{100 * diff.low:+.1f}, {100 * diff.high:+.1f}]",
                       f"{sign.b_better} / {sign.a_better}", f"{sign.p_value:.2f}",
                       f"{100 * (spent.mean() / tokens[best].mean() - 1):+.0f} %" if tokens[best].mean() else "-"])
    print("| choice | EM | EM yes/no | EM choice | EM open | tokens / question | chosen |\n|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\nRouter vs the best single strategy on this set (always {best}), paired by question:\n")
    print("| router | EM difference [95% CI] | better / worse | sign p | tokens vs always " + best + " |\n|---|---|---|---:|---:|")
    for r in paired:
        print("| " + " | ".join(r) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--router", default="strategy", help="a shipped router's name or a model folder")
    parser.add_argument("--set", dest="sets", action="append", required=True,
                        help="NAME=choice:run_dir,choice:run_dir,... (one stored run per choice, same dataset)")
    parser.add_argument("--margins", type=float, nargs="+", default=[0.0, 0.05, 0.1])
    parser.add_argument("--metric", default="em")
    args = parser.parse_args()
    for spec in args.sets:
        name, runs = parse_set(spec)
        router = LearnedRouter.load(resolve_model(args.router, list(runs)))
        replay(name, runs, router, args.margins, args.metric)


if __name__ == "__main__":
    main()
