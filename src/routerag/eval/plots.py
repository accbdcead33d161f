"""PNG figures of the papers' kind (matplotlib, Agg backend, no display needed):

* accuracy vs average retrieval turns, one point per run (RouteRAG's efficiency figure);
* per-dataset grouped bars of one metric;
* mode/source usage per retrieval turn (the routing figures of RouteRAG and GraphRAG-R1);
* recall against evidence cost, one point per routing choice and router, the oracle marked
  (``routerag routing-report``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from routerag.eval.report import METRIC_TITLES, MainTable
from routerag.eval.summary import RunSummary

_MARKERS = "os^Dv<>p*h"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=150, bbox_inches="tight")
    tmp.replace(path)
    return path


def _method_colours(plt, n: int):
    """Colour of the i-th method: tab10 for up to ten; beyond that tab20's strong shades first and
    its pale shades after (tab20 in its own order pairs neighbours in near-identical hues)."""
    if n <= 10:
        cmap = plt.get_cmap("tab10")
        return lambda i: cmap(i % 10)
    cmap = plt.get_cmap("tab20")
    return lambda i: cmap((2 * i) % 20 if i % 20 < 10 else (2 * (i % 20 - 10) + 1))


def plot_accuracy_vs_turns(summaries: Sequence[RunSummary], path: str | Path, metric: str = "em") -> Path:
    """One point per run: x = mean retrieval turns, y = metric (%); colour = method, marker = dataset.

    Methods are named in a legend beside the axes rather than next to their points: runs of
    different methods often sit on the same spot (the same turns and accuracy), where point
    labels would be printed over each other; runs on the same spot are set side by side.
    """
    plt = _pyplot()
    labels = list(dict.fromkeys(s.label for s in summaries))
    datasets = list(dict.fromkeys(s.dataset for s in summaries))
    colour = _method_colours(plt, len(labels))
    fig, ax = plt.subplots(figsize=(8.4, 4.6), layout="constrained")
    span = max((s.cost.retrieval_turns for s in summaries), default=0.0) + 1.0
    seen: dict[tuple[int, int], int] = {}
    for s in summaries:
        x, y = s.cost.retrieval_turns, 100 * s.metrics.get(metric, 0.0)
        # runs on the same spot (e.g. two modes with the same EM and turns) are set side by side
        # instead of hiding one another; the shift is small next to the x range
        spot = (round(x / (0.015 * span)), round(y / 0.5))
        k = seen.get(spot, 0)
        seen[spot] = k + 1
        ax.scatter(
            x + k * 0.015 * span,
            y,
            color=colour(labels.index(s.label)),
            marker=_MARKERS[datasets.index(s.dataset) % len(_MARKERS)],
            s=70,
            edgecolor="black",
            linewidth=0.5,
            alpha=0.85,
            zorder=3,
            clip_on=False,  # a run at 0% shows whole on the axis
        )
    method_handles = [
        ax.scatter([], [], marker="o", color=colour(i), edgecolor="black", linewidth=0.5, label=label)
        for i, label in enumerate(labels)
    ]
    dataset_handles = [ax.scatter([], [], marker=_MARKERS[i % len(_MARKERS)], color="grey", label=ds) for i, ds in enumerate(datasets)]
    ax.set_xlabel("average retrieval turns per question")
    ax.set_ylabel(f"{METRIC_TITLES.get(metric, metric)} (%)")
    ax.set_title(f"{METRIC_TITLES.get(metric, metric)} vs retrieval turns")
    ax.grid(alpha=0.3, zorder=0)
    right = max((s.cost.retrieval_turns for s in summaries), default=0.0)
    ax.set_xlim(-0.1, right * 1.05 + 0.15)  # whole markers at both ends
    top = max((100 * s.metrics.get(metric, 0.0) for s in summaries), default=0.0)
    ax.set_ylim(0, min(100.0, max(10.0, top * 1.2 + 2)))  # from zero: differences are not exaggerated
    fig.legend(handles=method_handles, title="method", fontsize=8, loc="outside right upper")
    fig.legend(handles=dataset_handles, title="dataset", fontsize=8, loc="outside right lower")
    path = _save(fig, path)
    plt.close(fig)
    return path


def plot_dataset_bars(table: MainTable, path: str | Path, metric: str = "em") -> Path:
    """Grouped bars: one group per dataset, one bar per method."""
    plt = _pyplot()
    n = max(1, len(table.rows))
    width = 0.8 / n
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(table.datasets) + 2), 4.2))
    for i, row in enumerate(table.rows):
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(table.datasets))]
        ys = [row.scores[ds].get(metric) or 0.0 for ds in table.datasets]
        bars = ax.bar(xs, ys, width=width, label=row.label, edgecolor="black", linewidth=0.4)
        ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=2)
    ax.set_xticks(range(len(table.datasets)), table.datasets)
    ax.set_ylabel(f"{METRIC_TITLES.get(metric, metric)} (%)")
    ax.set_ylim(0, max(10.0, ax.get_ylim()[1] * 1.1))
    ax.set_title(f"{METRIC_TITLES.get(metric, metric)} per dataset")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="method")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    path = _save(fig, path)
    plt.close(fig)
    return path


def plot_mode_usage(summaries: Sequence[RunSummary], path: str | Path, max_turns: int = 6, columns: int = 5) -> Path:
    """Per run, stacked bars of the share of each mode/source at retrieval turn 1, 2, ...;
    the number above a bar is how many source calls were made at that turn. One panel per run,
    ``columns`` panels to a row."""
    plt = _pyplot()
    runs = [s for s in summaries if s.mode_usage_by_turn]
    if not runs:
        raise ValueError("no run has retrieval turns to plot")
    modes = sorted({m for s in runs for counts in s.mode_usage_by_turn.values() for m in counts})
    colours = plt.get_cmap("tab10")
    cols = max(1, min(columns, len(runs)))
    rows = -(-len(runs) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(3.2 * cols + 1.6, 3.3 * rows), squeeze=False, sharey=True)
    axes = [ax for row in grid for ax in row]
    for ax in axes[len(runs):]:
        ax.set_visible(False)
    for ax, s in zip(axes, runs):
        turns = [t for t in sorted(s.mode_usage_by_turn) if t <= max_turns]
        bottoms = [0.0] * len(turns)
        totals = [sum(s.mode_usage_by_turn[t].values()) for t in turns]
        for k, mode in enumerate(modes):
            shares = [100 * s.mode_usage_by_turn[t].get(mode, 0) / total if total else 0.0 for t, total in zip(turns, totals)]
            ax.bar([str(t) for t in turns], shares, bottom=bottoms, color=colours(k % 10), label=mode, edgecolor="white", linewidth=0.5)
            bottoms = [b + v for b, v in zip(bottoms, shares)]
        for x, total in enumerate(totals):
            ax.text(x, 101, str(total), ha="center", va="bottom", fontsize=7)
        ax.set_title(f"{s.label} · {s.dataset}", fontsize=9)
        ax.set_xlabel("retrieval turn")
        ax.set_ylim(0, 110)
    for row in grid:
        row[0].set_ylabel("share of calls (%)")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="center right", fontsize=8, title="mode / source")
    fig.tight_layout(rect=(0, 0, 1 - 1.4 / (3.2 * cols + 1.6), 1))
    path = _save(fig, path)
    plt.close(fig)
    return path


def plot_all(summaries: Sequence[RunSummary], table: MainTable, out_dir: str | Path, metric: str = "em") -> list[Path]:
    out = Path(out_dir)
    paths = [
        plot_accuracy_vs_turns(summaries, out / f"{metric}_vs_turns.png", metric),
        plot_dataset_bars(table, out / f"{metric}_per_dataset.png", metric),
    ]
    if any(s.mode_usage_by_turn for s in summaries):
        paths.append(plot_mode_usage(summaries, out / "mode_usage.png"))
    return paths


class CostPoint(BaseModel):
    """One system of a recall-against-cost figure."""

    label: str
    kind: str  # "fixed", "all", "oracle" or "router": the marker
    cost: float  # mean evidence tokens per question
    recall: float  # in [0, 1]


_KIND_STYLE = {"fixed": ("o", "tab:blue", 60), "all": ("s", "tab:grey", 60), "oracle": ("*", "gold", 220),
               "router": ("D", "tab:red", 60)}
_KIND_TITLES = {"fixed": "fixed choice", "all": "retrieve from all", "oracle": "oracle (per question)", "router": "router"}


def plot_recall_vs_cost(points: Sequence[CostPoint], path: str | Path, *, k: int, title: str = "") -> Path:
    """One labelled point per system: x = mean evidence tokens per question, y = recall@k (%)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.6), layout="constrained")
    span = max((p.cost for p in points), default=1.0) or 1.0
    for kind, (marker, colour, size) in _KIND_STYLE.items():
        mine = [p for p in points if p.kind == kind]
        if mine:
            ax.scatter([p.cost for p in mine], [100 * p.recall for p in mine], marker=marker, color=colour, s=size,
                       edgecolor="black", linewidth=0.5, zorder=3, label=_KIND_TITLES[kind], clip_on=False)
    spots: list[list[CostPoint]] = []  # points near one another share one label, not printed over each other
    for p in points:
        near = next((g for g in spots if abs(g[0].cost - p.cost) <= 0.05 * span and abs(g[0].recall - p.recall) <= 0.03), None)
        if near is None:
            spots.append([p])
        else:
            near.append(p)
    for same in spots:
        ax.annotate(", ".join(p.label for p in same), (same[0].cost, 100 * same[0].recall), textcoords="offset points",
                    xytext=(6, 4), fontsize=8)
    ax.set_xlabel("mean evidence tokens per question")
    ax.set_ylabel(f"recall@{k} (%)")
    ax.set_title(title or f"recall@{k} against evidence cost")
    ax.set_xlim(0, max((p.cost for p in points), default=1.0) * 1.25 + 1)
    ax.set_ylim(0, 105)  # from zero: differences are not exaggerated
    ax.grid(alpha=0.3, zorder=0)
    ax.legend(fontsize=8, loc="best")
    path = _save(fig, path)
    plt.close(fig)
    return path
