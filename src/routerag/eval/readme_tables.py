"""The README's generated tables, written in one pass: the results table
(:mod:`routerag.eval.results_table`) and the training table (:mod:`routerag.eval.training_table`),
each between its own markers (``routerag docs results-table``)."""

from __future__ import annotations

from pathlib import Path

from routerag.config import atomic_write_text
from routerag.eval import training_table
from routerag.eval.results_table import load_spec, render_table, replace_block


def update_readme(readme: str | Path, spec_path: str | Path, *, check: bool = False,
                  training_spec: str | Path | None = None) -> bool:
    """Regenerate the results block in ``readme`` (and the training block from ``training_spec``);
    True when it changed (``check``: nothing is written)."""
    readme = Path(readme)
    text = readme.read_text(encoding="utf-8")
    new = replace_block(text, render_table(load_spec(spec_path), Path(spec_path).parent))
    if training_spec is not None:
        spec = training_table.load_training_spec(training_spec)
        block = training_table.render_training_table(spec, Path(training_spec).parent)
        new = replace_block(new, block, (training_table.START_MARKER, training_table.END_MARKER))
    if new == text:
        return False
    if not check:
        atomic_write_text(readme, new)
    return True


__all__ = ["update_readme"]
