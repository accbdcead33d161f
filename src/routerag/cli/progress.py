"""The CLI's listener for :mod:`routerag.progress`: one rich line per slow step — a spinner (✓
when done, ✗ when it failed), the step, a bar and bytes or counts when its size is known, and
the time it took. Drawn on stderr, so ``--json`` output on stdout stays clean; the lines stay on
screen after each step as a record of where the time went."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, ProgressColumn, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.text import Text

from routerag.progress import Task, Unit


class _State(SpinnerColumn):
    def render(self, task: Any) -> Any:
        state = task.fields.get("state")
        if state == "ok":
            return Text("✓", style="green")
        if state == "failed":
            return Text("✗", style="red")
        return super().render(task)


class _Amount(ProgressColumn):
    _bytes = DownloadColumn()

    def render(self, task: Any) -> Text:
        if task.total is None or not task.fields.get("unit"):
            return Text("")
        if task.fields["unit"] == "bytes":
            return self._bytes.render(task)
        return Text(f"{int(task.completed):,}/{int(task.total):,} {task.fields.get('label', '')}", style="progress.download")


class _RichTask:
    def __init__(self, view: "RichProgress", progress: Progress, task_id: TaskID) -> None:
        self.view, self.progress, self.task_id = view, progress, task_id

    def advance(self, amount: float = 1) -> None:
        self.progress.update(self.task_id, advance=amount)

    def describe(self, description: str) -> None:
        self.progress.update(self.task_id, description=description)


class RichProgress:
    """A :class:`routerag.progress.Listener`; the display runs while any step is running."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._progress: Progress | None = None
        self._running = 0

    def _display(self) -> Progress:
        if self._progress is None:
            self._progress = Progress(
                _State(),
                TextColumn("{task.description}", table_column=Column(min_width=60, no_wrap=True, overflow="ellipsis")),
                BarColumn(bar_width=24),
                _Amount(table_column=Column(no_wrap=True)),
                TimeElapsedColumn(table_column=Column(no_wrap=True)),
                console=self.console,
            )
            self._progress.start()
        return self._progress

    def start(self, description: str, total: float | None, unit: Unit, label: str) -> _RichTask:
        progress = self._display()
        self._running += 1
        task_id = progress.add_task(description, total=total, unit=unit, label=label, state="running")
        return _RichTask(self, progress, task_id)

    def finish(self, task: Task, ok: bool) -> None:
        assert isinstance(task, _RichTask), "a task this listener started"
        progress = task.progress
        state = next(t for t in progress.tasks if t.id == task.task_id)
        done = state.total if state.total is not None else 1
        progress.update(task.task_id, total=done, completed=done if ok else state.completed, state="ok" if ok else "failed")
        progress.stop_task(task.task_id)
        self._running -= 1
        if self._running == 0 and self._progress is progress:
            progress.stop()
            self._progress = None
