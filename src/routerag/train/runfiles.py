"""A training run's directory: :func:`start_run` creates it (with ``config.resolved.yaml``); what
a run writes besides checkpoints: per-step metrics (``metrics.jsonl``, a TRL callback),
training-curve plots, and the last checkpoint to resume from."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routerag.config import write_resolved
from routerag.errors import RouteragError

if TYPE_CHECKING:
    from routerag.train.config import TrainConfig

METRICS_FILE = "metrics.jsonl"
CURVES_FILE = "training_curves.png"
ROLLOUTS_FILE = "rollouts.jsonl"  # every GRPO episode's Trace, with its step
ROLLOUT_STATS_FILE = "rollout_stats.jsonl"  # per GRPO step: episodes, decoded batches and turns, decoding steps and rows (batched), rollout seconds


def start_run(cfg: TrainConfig) -> Path:
    """The run directory ``cfg.output_dir``, created, with the resolved configuration written into
    it; sets torch's CPU threads when ``grpo.torch_threads`` asks. Every recipe starts here."""
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_resolved(cfg, out)
    if cfg.grpo.torch_threads:
        import torch

        torch.set_num_threads(cfg.grpo.torch_threads)
    return out


class DivergedTrainingError(RouteragError, ValueError):
    """A training run whose loss or gradient norm became NaN or infinite: stopped, not exported."""


NON_FINITE_KEYS = ("loss", "grad_norm")


def check_finite(step: int, logs: dict[str, Any]) -> None:
    """Raise :class:`DivergedTrainingError` when a logged loss or gradient norm is not finite
    (the Trainer would go on stepping with NaN weights, and the logged loss would read 0)."""
    bad = {k: logs[k] for k in NON_FINITE_KEYS if isinstance(logs.get(k), (int, float)) and not math.isfinite(logs[k])}
    if bad:
        raise DivergedTrainingError(
            f"training diverged at step {step}: {', '.join(f'{k}={v}' for k, v in bad.items())}; the run is stopped "
            "(lower the learning rate, or train without padding: per_device_train_batch_size 1 with gradient accumulation)")


def metrics_callback(path: Path) -> Any:
    from transformers import TrainerCallback

    class MetricsJSONL(TrainerCallback):
        """Appends every log record (with its global step) to ``metrics.jsonl``; stops the run with
        :class:`DivergedTrainingError` at the first non-finite loss or gradient norm (logged first)."""

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            if not logs or not state.is_world_process_zero:
                return
            record = {"step": state.global_step, **{k: v for k, v in logs.items() if isinstance(v, (int, float))}}
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
            check_finite(state.global_step, logs)

    return MetricsJSONL()


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def plot_curves(metrics_path: str | Path, png_path: str | Path, *, title: str = "") -> Path | None:
    """Reward, its components, EM, retrieval turns/cost and KL against the step."""
    records = [r for r in read_metrics(metrics_path) if "reward" in r]
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: list[tuple[str, list[str]]] = [
        ("reward", [k for k in records[-1] if k == "reward" or k.startswith("rewards/") and k.endswith("/mean")]),
        ("answer", [k for k in ("env/em", "env/format_ok") if k in records[-1]]),
        ("retrieval", [k for k in ("env/retrieval_turns", "env/retrieval_cost") if k in records[-1]]),
        ("kl / length", [k for k in ("kl", "completions/mean_length") if k in records[-1]]),
    ]
    panels = [(name, keys) for name, keys in panels if keys]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
    axes_list: list[Any] = [axes] if len(panels) == 1 else list(axes)
    for ax, (name, keys) in zip(axes_list, panels):
        plot_series(ax, records, {key: key for key in keys}, xlabel="step", title=name)
    if title:
        fig.suptitle(title)
    return save_figure(fig, png_path)


def plot_loss(metrics_path: str | Path, png_path: str | Path, *, title: str = "") -> Path | None:
    """Training loss (and learning rate) of an SFT run against the step."""
    records = [r for r in read_metrics(metrics_path) if "loss" in r]
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    plot_series(ax, records, {"loss": "loss (model tokens)"}, xlabel="optimiser step", title=title)
    ax.set_ylabel("loss")
    return save_figure(fig, png_path)


def plot_series(ax: Any, records: list[dict[str, float]], series: dict[str, str], *, xlabel: str, title: str = "") -> None:
    """One line per metric key (``{key: legend label}``) against the step, on ``ax``."""
    for key, label in series.items():
        pts = [(r["step"], r[key]) for r in records if key in r]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=label)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


def save_figure(fig: Any, png_path: str | Path) -> Path:
    """Lay out, write (creating the folder) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return png_path


def last_checkpoint(directory: Path) -> str | None:
    if not directory.is_dir():
        return None
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(directory))
