"""``routerag router labels | train | show``: routing labels from retrieval outcomes, the learned
router fitted on them (cross-validated by question), and what a trained router holds."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from routerag.cli.app import RouteragTyper, app

router_app = RouteragTyper(help="The learned router: labels from outcomes, training, inspection.", no_args_is_help=True)
app.add_typer(router_app, name="router")


@router_app.command("labels")
def labels_command(
    sets: list[str] = typer.Option(None, "--set", help="label sets to build (default: all; see routerag.train.router.labels.LABEL_SETS)"),
    out: Path = typer.Option(None, "--out", "-o", help="folder of the label files (default: the package's shipped labels)"),
    k: int = typer.Option(5, "-k", help="a choice succeeds when its top k holds the gold"),
    eval_sets: list[str] = typer.Option(None, "--eval-set", help="evaluation sets whose questions are excluded (default: 2wiki:100, musique:50, law-med:50, hotpotqa-distractor)"),
) -> None:
    """Build routing labels (training questions only) by searching every mode / source."""
    from routerag.api.routing import build_labels

    for path in build_labels(sets, out, k=k, eval_sets=eval_sets):
        typer.echo(f"wrote {path}")


@router_app.command("strategy-labels")
def strategy_labels_command(
    runs: list[str] = typer.Option(..., "--run", help="CHOICE=RUN_FOLDER, one per strategy (e.g. direct=runs/hp-direct); "
                                   "the runs of `routerag eval` over the same TRAINING questions"),
    out: Path = typer.Option(None, "--out", "-o", help="the label file (default: the shipped labels' strategy-<dataset>.jsonl.gz)"),
    metric: str = typer.Option("em", "--metric", help="the run metric that decides success"),
    threshold: float = typer.Option(1.0, "--threshold", help="success: metric >= threshold"),
    eval_sets: list[str] = typer.Option(None, "--eval-set", help="evaluation sets whose questions are excluded (default: "
                                        "2wiki:100, musique:50, law-med:50, hotpotqa-distractor)"),
    allow_trained_on: bool = typer.Option(False, "--allow-trained-on", help="accept a run whose policy adapter was trained "
                                          "on these questions (refused by default: its successes are not held-out outcomes)"),
) -> None:
    """Strategy labels (for `adaptive`): which strategies answered each training question, at what cost."""
    from routerag.api.routing import build_strategy_labels, run_plan

    made = build_strategy_labels(run_plan(runs), out, metric=metric, threshold=threshold, eval_sets=eval_sets,
                                 allow_trained_on=allow_trained_on)
    path, provenance, rows = made.path, made.provenance, made.rows
    rates = ", ".join(f"{c} {sum(r.success[c] for r in rows) / max(len(rows), 1):.2f}" for c in provenance.choices)
    typer.echo(f"wrote {path}: {len(rows)} questions ({provenance.excluded_questions} excluded); success rate {rates}; "
               f"mean tokens {provenance.mode_cost}")


@router_app.command("train")
def train_command(
    names: list[str] = typer.Option(None, "--name", help="routers to train (default: mode, source-law-med, source-2wiki-multisource, strategy)"),
    labels: Path = typer.Option(None, "--labels", help="folder of label files (default: the shipped labels)"),
    files: list[Path] = typer.Option(None, "--file", help="train one router (--name) on these label files instead"),
    out: Path = typer.Option(None, "--out", "-o", help="folder of router models (default: the package's shipped routers)"),
    c: list[float] = typer.Option([1.0], "--C", help="inverse L2 strength of the logistic regressions; repeat it for a grid "
                                  "chosen by the grouped cross-validation (recorded in the manifest)"),
    folds: int = typer.Option(5, "--folds", help="cross-validation folds (grouped by question)"),
    k: int = typer.Option(None, "-k", help="mode labels: success = gold within the top k (default: the label files' k)"),
    inputs: list[str] = typer.Option(["embedding+features"], "--inputs", help="what the classifier reads: "
                                     "'embedding+features' (the query embedding + cheap features) or 'features' (the "
                                     "cheap features alone, for a few dozen labels); repeat it to let the CV choose"),
) -> None:
    """Fit, cross-validate (grouped by question) and save learned routers."""
    from routerag.api.routing import router_plan, train_routers

    for name, folder, manifest in train_routers(router_plan(names, labels, files), out, c=c, folds=folds, k=k, inputs=inputs):
        cv = manifest.cv
        best = cv["learned"]["0"]
        typer.echo(f"{name}: {manifest.rows} rows, {manifest.questions} questions, labels {manifest.labels}; "
                   f"fit {manifest.train_seconds:.2f} s; CV ({cv['folds']} folds by question) accuracy {best['accuracy']:.3f} "
                   f"vs oracle {cv['oracle']['accuracy']:.3f}; inputs {manifest.inputs}, C {manifest.hyperparameters['C']:g}"
                   + (f" of {cv['c_grid']}" if "c_grid" in cv else "") + (f" of {cv['grid']}" if "grid" in cv else "")
                   + f"; saved {folder}")


@router_app.command("show")
def show_command(model: str = typer.Argument(..., help="a shipped router's name or a model folder")) -> None:
    """Print a router's manifest (embedder, features, labels, training provenance, cross-validation)."""
    from routerag.api.routing import router_manifest

    typer.echo(json.dumps(router_manifest(model).model_dump(mode="json"), indent=2))
