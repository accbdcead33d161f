"""Does a policy stop searching for the right reason? Per run, the questions with an answer string
(yes/no golds left out: "yes" is in every text) split by whether a gold answer is already in the
first search's hits, and by whether the episode answered after that one search: counts, EM of
each cell, and Fisher's exact test of "the stop rate does not depend on it". A policy that reads
its evidence stops more often when the answer came back; one that stops by the question's form
alone does not. (Containment of the gold string is a proxy for "the evidence suffices"; questions
whose answer comes back at once are also easier, so a dependence is necessary, not sufficient.)
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from routerag.eval.metrics import cover_em
from routerag.eval.runs import QuestionRecord
from routerag.trace import Hit


class StopCell(BaseModel):
    n: int = 0  # questions in the cell
    stopped: int = 0  # of them, answered after the first search
    em_stopped: float | None = None  # mean EM of those that stopped
    em_went_on: float | None = None  # mean EM of those that searched again


class StopEvidence(BaseModel):
    label: str
    dataset: str
    answer_back: StopCell  # a gold answer string was in the first search's hits
    answer_missing: StopCell  # it was not
    p_value: float | None  # Fisher's exact test, two-sided; None when a row of the 2x2 table is empty


def answer_strings(golds: Sequence[str]) -> list[str]:
    """The golds that can be looked for in a text: yes/no golds left out ("yes" is in every text)."""
    return [g for g in golds if g.strip().lower() not in ("yes", "no")]


def answer_in(hits: Sequence[Hit], golds: Sequence[str]) -> bool:
    """A gold answer covers the titles + texts of ``hits`` (cover-EM: a normalised gold as a run of
    whole tokens, so gold "1" is not in "1990")."""
    return cover_em(" ".join(f"{h.title} {h.text}" for h in hits), list(golds)) > 0


def _cell(rows: list[tuple[bool, float]]) -> StopCell:
    stop = [em for stopped, em in rows if stopped]
    go = [em for stopped, em in rows if not stopped]
    return StopCell(n=len(rows), stopped=len(stop), em_stopped=sum(stop) / len(stop) if stop else None,
                    em_went_on=sum(go) / len(go) if go else None)


def stop_evidence(label: str, dataset: str, records: Sequence[QuestionRecord]) -> StopEvidence | None:
    """The stop-vs-evidence table of one run; None when it never searched twice (a fixed pipeline
    such as vanilla, or a policy that always stops at once: nothing to tell apart)."""
    from scipy.stats import fisher_exact

    back: list[tuple[bool, float]] = []
    missing: list[tuple[bool, float]] = []
    longest = 0
    for rec in records:
        searches = [s for s in rec.trace.steps if s.kind == "search"]
        longest = max(longest, len(searches))
        golds = answer_strings(rec.golds)
        if not golds or not searches:
            continue
        row = (len(searches) == 1, float(rec.metrics.get("em") or 0.0))
        (back if answer_in(searches[0].hits, golds) else missing).append(row)
    if longest < 2:
        return None
    a, b = _cell(back), _cell(missing)
    table = [[a.stopped, a.n - a.stopped], [b.stopped, b.n - b.stopped]]
    p = float(fisher_exact(table).pvalue) if a.n and b.n else None
    return StopEvidence(label=label, dataset=dataset, answer_back=a, answer_missing=b, p_value=p)


def stop_evidence_rows(rows: Sequence[StopEvidence]) -> tuple[list[str], list[list[str]]]:
    cols = ["Method", "Dataset", "Answer in 1st search", "n", "Stopped after 1", "Stop rate", "EM stopped", "EM went on",
            "Fisher p"]

    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.1f}"

    out = []
    for r in rows:
        for name, cell in (("yes", r.answer_back), ("no", r.answer_missing)):
            rate = cell.stopped / cell.n if cell.n else None
            p = "" if name == "no" else ("–" if r.p_value is None else f"{r.p_value:.3f}")
            out.append([r.label, r.dataset, name, str(cell.n), str(cell.stopped), pct(rate), pct(cell.em_stopped),
                        pct(cell.em_went_on), p])
    return cols, out
