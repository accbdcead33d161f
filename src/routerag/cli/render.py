"""Readable rich rendering of a Trace: each step's reasoning, routing decision, query, evidence
with scores, time and tokens; then the answer and the totals."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from routerag.corpus.schema import Question
from routerag.llm.config import ModelConfig, shipped_policy_name
from routerag.llm.policy_card import PolicyCard
from routerag.run.config import RunConfig
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
    chosen = [step.route.choice] if step.route is not None and not step.sources else step.sources
    if chosen:
        line = Text("route → ", style="bold")
        line.append(", ".join(chosen), style=_STYLE.get(step.kind, "white"))
        if step.route is not None and step.route.reason:
            line.append(f"  ({_clip(step.route.reason, 160)})", style="dim")
        parts.append(line)
    if step.query:
        parts.append(Text.assemble(("query: ", "bold"), _clip(step.query, 300)))
    if step.hits:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for column in ("#", "score", "source", "title", "kept"):
            table.add_column(column)
        kept = set(step.selection.kept) if step.selection is not None else set()
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


@dataclass
class DemoRow:
    question: Question
    trace: Trace
    em: float
    f1: float

    @classmethod
    def of(cls, question: Question, trace: Trace) -> DemoRow:
        from routerag.api.asking import answer_scores

        return cls(question, trace, *answer_scores(trace.answer, question.answers))


def _model_words(model: ModelConfig) -> str:
    resolved = model.resolved()
    words = f"{resolved.model} on {resolved.backend}"
    if resolved.lora_path is not None:
        words += f" with the adapter {shipped_policy_name(resolved.lora_path) or Path(resolved.lora_path).parent.name}"
    return words


def _what_it_did(rows: list[DemoRow], config: RunConfig) -> Text:
    """What the strategy did over the demo questions: routing, cost, failures, the policy's card."""
    n = len(rows)
    traces = [r.trace for r in rows]
    searches = sum(t.retrieval_turns for t in traces)
    by_source: dict[str, int] = {}
    for t in traces:
        for name, count in t.retrieval_calls_by_source().items():
            by_source[name] = by_source.get(name, 0) + count
    no_search = sum(1 for t in traces if t.retrieval_turns == 0)
    format_errors = sum(t.format_errors for t in traces)
    prompt = sum(t.prompt_tokens for t in traces)
    completion = sum(t.completion_tokens for t in traces)
    total_s = sum(t.latency_ms for t in traces) / 1000
    model_s = sum(t.model_ms for t in traces) / 1000
    retrieval_s = sum(t.retrieval_ms for t in traces) / 1000
    errors = [t for t in traces if t.error]

    did = Text()
    did.append(f"{config.strategy}", style="bold")
    did.append(f" ({_model_words(config.model)}) answered {n} question{'s' * (n != 1)}.\n")
    did.append("Routing: ", style="bold")
    modes = ", ".join(f"{name} ×{count}" for name, count in sorted(by_source.items(), key=lambda kv: -kv[1]))
    did.append(f"{searches} search{'es' * (searches != 1)} in all" + (f" ({modes})" if modes else ""))
    did.append(f"; {no_search} answered without searching" if no_search else "")
    did.append(f"; {format_errors} reply/replies that broke the action format (recovered)" if format_errors else "; no format errors")
    did.append(".\n")
    did.append("Cost: ", style="bold")
    did.append(
        f"{prompt + completion:,} tokens ({prompt:,} read, {completion:,} written), {total_s:.1f} s "
        f"(model {model_s:.1f} s, retrieval {retrieval_s:.2f} s) — {total_s / max(n, 1):.1f} s a question on this machine's CPU."
    )
    if errors:
        did.append(f"\n{len(errors)} question(s) failed: {errors[0].error}", style="red")
    card = _policy_card(config)
    if card is not None:
        did.append("\nWhat this policy scores ", style="bold")
        did.append(f"({card.name}, from its evaluation runs): {card.summary()}.")
    return did


STRONGER_BASE = "bundled:qwen2.5-coder-1.5b"
"""The bundled base whose shipped policy scores highest (docs/experiments/2026-11-29-shipped-policies-side-by-side.md)."""


def render_demo_summary(rows: list[DemoRow], config: RunConfig, index_dir: Path | None) -> RenderableType:
    """What a newcomer needs after the traces: what the policy did, what it cost, how each answer
    compares with the gold, what the scores mean, and where to go next."""
    n = len(rows)
    did = _what_it_did(rows, config)

    table = Table(title="How the answers compare with the gold", title_justify="left", show_lines=False)
    for column, justify in (("#", "right"), ("question", "left"), ("answer", "left"), ("gold", "left"),
                            ("EM", "right"), ("F1", "right"), ("searches", "right"), ("tokens", "right"), ("s", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for i, row in enumerate(rows, start=1):
        t = row.trace
        style = "green" if row.em == 1 else ("yellow" if row.f1 > 0 else "red")
        table.add_row(
            str(i), _clip(row.question.question, 48), Text(_clip(t.answer or "(none)", 28), style=style),
            _clip(" | ".join(row.question.answers), 28), f"{row.em:.0f}", f"{row.f1:.2f}", str(t.retrieval_turns),
            f"{t.prompt_tokens + t.completion_tokens:,}", f"{t.latency_ms / 1000:.1f}",
        )
    em = sum(r.em for r in rows) / max(n, 1)
    f1 = sum(r.f1 for r in rows) / max(n, 1)
    meaning = Text(
        f"Mean EM {em:.2f}, F1 {f1:.2f} over {n} question{'s' * (n != 1)}. EM is 1 when the answer equals a gold answer "
        "after normalisation (case, articles, punctuation); F1 is their word overlap (0-1). A handful of questions "
        "says nothing about a method: the README's results table has 50-100-question runs with paired confidence "
        "intervals (docs/guides/evaluation.md).",
        style="dim",
    )

    lora = config.model.lora_path
    eval_cmd = f'routerag eval --dataset {config.dataset} --strategy {config.strategy} --limit 20 --set "components=[{",".join(config.components)}]"'
    if lora is not None:
        name = shipped_policy_name(lora)
        eval_cmd += f" --set model.lora_path={f'policy:{name}' if name else lora}"
    eval_cmd += f" --out runs/demo-{config.strategy}"
    nxt = Table.grid(padding=(0, 2))
    nxt.add_column(style="bold cyan", no_wrap=True)
    nxt.add_column()
    nxt.add_row(f"routerag demo -n 10 --strategy {config.strategy}", "more questions (strategies: routerag, vanilla, ircot, graphrag-r1, r1-router, realroute, ...)")
    nxt.add_row(eval_cmd, "a resumable evaluation: one JSON record per question and a summary")
    nxt.add_row(f"routerag report runs/demo-{config.strategy} --out report", "tables with EM/F1, cost and routing, plots")
    if index_dir is not None:
        nxt.add_row(f"routerag serve {index_dir}", "the web UI and HTTP API over this demo index; then open http://127.0.0.1:8700/")
    if config.strategy != "vanilla":
        nxt.add_row(f"routerag demo --strategy {config.strategy} --compare vanilla", "the same questions with vanilla RAG beside: what the policy changes")
    if config.model.resolved().model != STRONGER_BASE:
        nxt.add_row(escape(f"pip install 'routerag[model-1p5b]' && routerag demo --set model.model={STRONGER_BASE}"),
                    "the 1.5B base and its policy: more accurate (README results table), ~1.2x the seconds, 2x the memory")
    nxt.add_row("docs/guides/evaluation.md, docs/guides/strategies.md", "what the numbers and the strategies mean")
    return Panel(
        Group(did, Text(""), table, meaning, Text(""), Text("Where to go next", style="bold"), nxt),
        title="[bold]demo summary[/]",
        border_style="bright_black",
    )


def _policy_card(config: RunConfig) -> PolicyCard | None:
    """The evaluation card of the shipped policy this run applies (None for any other adapter)."""
    from routerag.strategies.shipped import policy_card

    lora = config.model.lora_path
    if lora is None:
        return None
    card = policy_card(config.model, config.strategy)
    return card if card is not None and shipped_policy_name(lora) == card.name else None


def render_demo_compare(rows: list[DemoRow], other: list[DemoRow], config: RunConfig, other_config: RunConfig) -> RenderableType:
    """The same questions answered by two strategies: what the first one changes (answers,
    searches, sources, tokens, seconds)."""
    a, b = config.strategy, other_config.strategy
    table = Table(title=f"{a} beside {b} on the same questions, model and index", title_justify="left")
    for column, justify in (("#", "right"), ("gold", "left"), (f"{a} answer", "left"), (f"{b} answer", "left"),
                            ("searches", "right"), ("sources", "left"), ("tokens", "right"), ("s", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]

    def answer(row: DemoRow) -> Text:
        return Text(_clip(row.trace.answer or "(none)", 24), style="green" if row.em == 1 else ("yellow" if row.f1 > 0 else "red"))

    def sources(row: DemoRow) -> str:
        return ",".join(f"{k}×{v}" for k, v in sorted(row.trace.retrieval_calls_by_source().items())) or "-"

    for i, (x, y) in enumerate(zip(rows, other), start=1):
        table.add_row(
            str(i), _clip(" | ".join(x.question.answers), 20), answer(x), answer(y),
            f"{x.trace.retrieval_turns} / {y.trace.retrieval_turns}", f"{sources(x)} / {sources(y)}",
            f"{x.trace.prompt_tokens + x.trace.completion_tokens:,} / {y.trace.prompt_tokens + y.trace.completion_tokens:,}",
            f"{x.trace.latency_ms / 1000:.1f} / {y.trace.latency_ms / 1000:.1f}",
        )
    n = max(len(rows), 1)
    em_a, em_b = sum(r.em for r in rows) / n, sum(r.em for r in other) / n
    changed = sum(1 for x, y in zip(rows, other) if (x.trace.answer or "") != (y.trace.answer or ""))
    better = sum(1 for x, y in zip(rows, other) if x.em > y.em)
    worse = sum(1 for x, y in zip(rows, other) if x.em < y.em)
    words = Text(
        f"{a} changed {changed} of {len(rows)} answers ({better} right where {b} was wrong, {worse} the other way); "
        f"EM {em_a:.2f} vs {em_b:.2f}. A handful of questions shows what changes, not which is better: the results "
        "table in the README compares them on 50-100 questions with paired confidence intervals.",
        style="dim",
    )
    return Panel(Group(table, words), title=f"[bold]{a} vs {b}[/]", border_style="bright_black")
