"""``routing-report.md``: a :class:`~routerag.train.router.report.RoutingReport` as Markdown, the
verdict first, then the table of every row, the keyword rules and the notes."""

from __future__ import annotations

from routerag.eval.bootstrap import RecoveredShare
from routerag.eval.report import markdown_table
from routerag.routing.keyword_rules import KeywordRules
from routerag.train.router.report import ReportRow, RoutingReport

COLUMNS = ["choice / router", "recall@{k}", "ms", "evidence tokens", "cost vs best fixed", "headroom recovered (95 % CI)", "sent to", "note"]


def _share(share: RecoveredShare) -> str:
    if share.share is None:
        return "-"
    text = f"{100 * share.share:.0f} %"
    if share.low is not None and share.high is not None:
        text += f" ({100 * share.low:.0f} to {100 * share.high:.0f} %)"
    return text


def _picks(row: ReportRow) -> str:
    return ", ".join(f"{name} {100 * share:.0f} %" for name, share in row.picks.items() if share)


def row_cells(row: ReportRow) -> list[str]:
    ratio = f"{row.cost_ratio:.2f}x" if row.cost_ratio is not None else "-"
    return [row.name, f"{100 * row.recall:.1f}", f"{row.ms:.2f}", f"{row.tokens:.0f}", ratio, _share(row.recovered),
            _picks(row), row.note]


def rules_line(name: str, rules: KeywordRules) -> str:
    """One rule set as a list item: its rules in order, then the default."""
    listed = "; ".join(f"`{r.pattern}` -> {r.choice}" for r in rules.rules) or "no rule"
    return f"- {name}: {listed}; otherwise {rules.default}"


def render_markdown(report: RoutingReport) -> str:
    s = report.settings
    lines = [
        "# Is routing worth it on this data?",
        "",
        f"**Verdict:** {report.verdict}.",
        "",
        f"Dataset `{s.dataset}`, index `{s.index}`, {report.questions} questions with gold answers"
        + (f" ({report.skipped_no_gold} without one left out)" if report.skipped_no_gold else "")
        + f"; choices {', '.join(f'`{c}`' for c in s.choices)}; a choice succeeds when its top {s.k} hits hold a gold answer.",
        "",
        f"Headroom (oracle - best fixed choice `{report.best_fixed}`): {100 * report.headroom:+.1f} recall@{s.k}.",
        "",
        markdown_table([c.format(k=s.k) for c in COLUMNS], [row_cells(r) for r in report.rows]),
        "",
        "ms: mean retrieval milliseconds per question; evidence tokens: mean tokens of the hits' titles and texts per "
        "question; cost vs best fixed: evidence tokens against the best fixed choice's; headroom recovered: "
        "(row - best fixed) / (oracle - best fixed) in recall, with a paired bootstrap interval over the questions.",
    ]
    if report.keyword_rules:
        lines += ["", "## Keyword rules", "", "In order, the first match decides (regular expressions, case-insensitive); "
                  "a fold's rules route only the questions it held out.", "",
                  *(rules_line(name, rules) for name, rules in report.keyword_rules.items())]
    if report.notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in report.notes)]
    return "\n".join(lines) + "\n"
