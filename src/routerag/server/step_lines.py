"""One short line of text per step of a run, for a chat client that shows a model's reasoning
(the ``reasoning_content`` deltas of a streamed chat completion). A line says what the step did —
a search and its best hit, a route and who chose it, a sub-question, a draft answer — never the
whole step; the trace on the finishing chunk has everything. The run's final answer step has no
line: its answer is the message's content."""

from __future__ import annotations

from routerag.trace import Step

__all__ = ["step_line"]

WIDTH = 80  # characters of a query, a title or an answer in a line


def _short(text: str, width: int = WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _search(step: Step) -> str:
    where = ", ".join(step.sources) or "sources"
    line = f"search {where}: {_short(step.query or '')!r} → {len(step.hits)} hits"
    return line + (f" (top: {_short(step.hits[0].title, 60)})" if step.hits and step.hits[0].title else "")


def _route(step: Step) -> str:
    route = step.route
    if route is None:
        return "route"
    mode = f" [{route.mode}]" if route.mode else ""
    by = f" by {route.chosen_by}" if route.chosen_by else ""
    return f"route: {route.choice}{mode}{by}"


def _body(step: Step) -> str | None:
    if step.kind == "search":
        return _search(step)
    if step.kind == "route":
        return _route(step)
    if step.kind == "reflect":
        return "reflect" + (f" → {step.route.choice}" if step.route is not None else "")
    if step.kind == "decompose":
        return f"decompose: {len(step.plan)} sub-questions" + (f" ({_short('; '.join(p.query for p in step.plan))})"
                                                               if step.plan else "")
    if step.kind == "answer":
        return f"intermediate answer: {_short(step.answer or '')}" if step.intermediate else None
    if step.kind == "select":
        return f"select: {len(step.hits)} passages kept"
    if step.kind == "fuse":
        return f"fuse: {_short(step.answer or '')}"
    if step.kind == "format_error":
        return f"format error: {step.format_error or 'unknown'}"
    return f"{step.kind}: {_short(step.reasoning)}" if step.reasoning else step.kind


def step_line(step: Step) -> str | None:
    """The step's line (without a newline), or None for the run's final answer step."""
    line = _body(step)
    if line is None:
        return None
    if step.format_error and step.kind != "format_error":
        line += f" [format error: {_short(step.format_error, 40)}]"
    return line
