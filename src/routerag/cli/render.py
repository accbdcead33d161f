"""Readable rich rendering of a Trace: each step's reasoning, routing decision, query, evidence
with scores, time and tokens; then the answer and the totals."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from routerag.trace import Step, Trace

_STYLE = {
    "search": "cyan",
    "route": "magenta",
    "decompose": "blue",
    "select": "blue",
    "answer": "green",
    "reflect": "yellow",
    "fuse": "green",
    "think": "white",
    "format_error": "red",
}


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_step(step: Step, *, max_hits: int = 5) -> RenderableType:
    parts: list[RenderableType] = []
    if step.reasoning:
        parts.append(Text(_clip(step.reasoning, 400), style="dim"))
    if step.sources:
        line = Text("route → ", style="bold")
        line.append(", ".join(step.sources), style=_STYLE.get(step.kind, "white"))
        if step.routing_reason:
            line.append(f"  ({_clip(step.routing_reason, 160)})", style="dim")
        parts.append(line)
    if step.query:
        parts.append(Text.assemble(("query: ", "bold"), _clip(step.query, 300)))
    if step.hits:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for column in ("#", "score", "source", "title", "kept"):
            table.add_column(column)
        kept = set(step.kept_doc_ids)
        for hit in step.hits[:max_hits]:
            table.add_row(
                str(hit.rank), f"{hit.score:.3f}", hit.source, _clip(hit.title or hit.text, 60), "✓" if hit.doc_id in kept else ""
            )
        if len(step.hits) > max_hits:
            table.add_row("…", "", "", f"{len(step.hits) - max_hits} more", "")
        parts.append(table)
    if step.answer is not None:
        parts.append(Text.assemble(("answer: ", "bold green"), step.answer))
    if step.format_error:
        parts.append(Text(f"format error: {step.format_error}", style="red"))
    tokens = sum(c.prompt_tokens + c.completion_tokens for c in step.model_calls)
    footer = f"{step.latency_ms:.0f} ms · retrieval {step.retrieval_ms:.0f} ms · {tokens} tokens"
    return Panel(
        Group(*parts) if parts else Text(""),
        title=f"[{_STYLE.get(step.kind, 'white')}]{step.index}. {step.kind}[/]",
        subtitle=footer,
        subtitle_align="right",
        border_style=_STYLE.get(step.kind, "white"),
    )


def render_trace(trace: Trace, *, gold: list[str] | None = None) -> RenderableType:
    body: list[RenderableType] = [Text.assemble(("Q: ", "bold"), trace.question)]
    body.extend(render_step(step) for step in trace.steps)
    answer = Text.assemble(("A: ", "bold green"), trace.answer or "(no answer)")
    if trace.fallback_answer and trace.fallback_answer != trace.answer:
        answer.append(f"   fallback: {trace.fallback_answer}", style="dim")
    if gold:
        answer.append(f"   gold: {' | '.join(gold)}", style="yellow")
    body.append(answer)
    if trace.error:
        body.append(Text(f"error: {trace.error}", style="bold red"))
    s = trace.summary()
    body.append(
        Text(
            f"{s['retrieval_turns']} retrieval turns · retrieval {s['retrieval_ms']:.0f} ms · model {s['model_ms']:.0f} ms · "
            f"{s['prompt_tokens']}+{s['completion_tokens']} tokens · {s['format_errors']} format errors · "
            f"{trace.latency_ms / 1000:.1f} s",
            style="dim",
        )
    )
    return Panel(Group(*body), title=f"[bold]{trace.strategy}[/]", border_style="bright_black")
