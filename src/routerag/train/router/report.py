"""Is routing worth it on this data? The comparison of ``routerag routing-report`` over measured
outcomes (:mod:`routerag.train.router.outcomes`):

* each **fixed choice** (always that mode or source) and **retrieve from all** (every choice's top
  ``k``, at their summed cost);
* the per-question **oracle**: a choice that finds a gold answer when any does (the cheapest such
  choice in evidence tokens; the cheapest choice when none does) - the ceiling of any router;
* the routers: each router without training (its recorded choices), the **keyword rules** (the
  no-model yardstick: rules fitted per fold on the training questions,
  :mod:`routerag.train.router.keyword_fit`, and the operator's own rules file, if given) and the
  **learned router** cross-validated by question (the folds, fit and decisions of ``routerag router
  train``, :func:`routerag.train.router.fit.cross_validate`: every question is routed by a model
  that never saw it).

Each row has its recall@k, mean retrieval milliseconds and evidence tokens, its cost against the
best fixed choice, and the share of the headroom (oracle - best fixed) it recovers, with a paired
bootstrap interval (:func:`routerag.eval.bootstrap.recovered_share`); the verdict is one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from routerag.eval.bootstrap import RecoveredShare, recovered_share
from routerag.routing.keyword import KeywordRouter
from routerag.routing.keyword_rules import KeywordRules
from routerag.train.router.keyword_fit import KeywordSettings
from routerag.train.router.outcomes import ChoiceOutcome, OutcomeSettings, QuestionOutcome, best_fixed

RowKind = Literal["fixed", "all", "oracle", "router"]
LEARNED = "learned"
KEYWORD = "keyword"  # the rules fitted per fold
KEYWORD_FILE = "keyword (rules file)"  # the operator's rules
Inputs = Literal["embedding+features", "features"]


MARKDOWN_NAME = "routing-report.md"  # the files of a report folder (routerag.api.routing_report writes them)
JSON_NAME = "routing-report.json"
PLOT_NAME = "routing-report.png"


class LearnedSettings(BaseModel):
    """How the learned router is cross-validated (``routerag router train``'s options)."""

    folds: int = Field(5, ge=2)
    c: float = Field(1.0, gt=0)
    inputs: Inputs = "embedding+features"


class ReportRow(BaseModel):
    name: str
    kind: RowKind
    recall: float  # recall@k: the share of questions whose evidence holds a gold answer
    ms: float  # mean retrieval milliseconds per question
    tokens: float  # mean evidence tokens per question
    cost_ratio: float | None  # tokens / the best fixed choice's tokens (None: it retrieves nothing)
    recovered: RecoveredShare  # of the headroom oracle - best fixed, paired over the questions
    picks: dict[str, float] = Field(default_factory=dict)  # oracle and routers: the share of questions sent to each choice
    note: str = ""


class RoutingReport(BaseModel):
    """``routing-report.json``."""

    settings: OutcomeSettings
    questions: int  # questions compared (each with a gold answer)
    skipped_no_gold: int = 0  # questions of the sample without a gold answer, left out
    best_fixed: str
    headroom: float  # oracle recall - best fixed recall
    rows: list[ReportRow]
    keyword_rules: dict[str, KeywordRules] = Field(default_factory=dict)  # "fold 1" ... (fitted), "rules file"
    notes: list[str] = Field(default_factory=list)
    verdict: str


def _row(name: str, kind: RowKind, picked: Sequence[ChoiceOutcome], *, base: np.ndarray, top: np.ndarray, base_tokens: float,
         resamples: int, seed: int, choices: Sequence[str] | None = None, note: str = "") -> ReportRow:
    """One row: ``picked`` is the outcome the system got on each question; ``base`` / ``top`` the
    best fixed choice's and the oracle's successes; ``choices`` where the system sent each one."""
    found = np.array([o.found for o in picked], dtype=np.float64)
    tokens = float(np.mean([o.tokens for o in picked]))
    picks = {c: round(sum(x == c for x in choices) / len(choices), 4) for c in dict.fromkeys(choices)} if choices else {}
    return ReportRow(name=name, kind=kind, recall=float(found.mean()), ms=round(float(np.mean([o.ms for o in picked])), 3),
                     tokens=round(tokens, 1), cost_ratio=round(tokens / base_tokens, 3) if base_tokens else None,
                     recovered=recovered_share(base, found, top, resamples=resamples, seed=seed), picks=picks, note=note)


def oracle_choices(records: Sequence[QuestionOutcome], choices: Sequence[str]) -> list[str]:
    """Per question, the cheapest choice (evidence tokens, then ms, then order) among those that
    find a gold answer, or among all when none does."""
    out = []
    for r in records:
        pool = [c for c in choices if r.choices[c].found] or list(choices)
        out.append(min(pool, key=lambda c: (r.choices[c].tokens, r.choices[c].ms, choices.index(c))))
    return out


def learned_choices(records: Sequence[QuestionOutcome], choices: Sequence[str], costs: dict[str, float],
                    settings: LearnedSettings, embedder=None) -> list[str]:
    """The learned router's held-out choice for every question: ``routerag router train``'s
    cross-validation (folds grouped by question) over these outcomes as labels, each question
    decided by the fold that did not train on it (margin 0: the most probable choice, ties the
    cheapest)."""
    from routerag.train.router.fit import cross_validate, decisions, design_matrix, embed_queries

    queries = [r.question for r in records]
    embeddings = embed_queries(queries, embedder) if settings.inputs == "embedding+features" else None
    x = design_matrix(queries, embeddings, settings.inputs)
    y = np.array([[r.choices[c].found for c in choices] for r in records], dtype=bool)
    groups = np.array([r.qid for r in records])
    _, probs = cross_validate(x, y, groups, list(choices), costs, folds=settings.folds, c=settings.c, margins=(0.0,))
    return decisions(probs, list(choices), costs, 0.0)


def _learned_row_or_note(records, choices, costs, learned: LearnedSettings | None, embedder) -> tuple[list[str] | None, str]:
    if learned is None:
        return None, "the learned router was not cross-validated (asked not to)"
    if len(records) < 4:
        return None, f"the learned router needs at least 4 questions to cross-validate; there are {len(records)}"
    try:
        return learned_choices(records, choices, costs, learned, embedder), ""
    except ImportError:
        return None, "the learned router was not cross-validated: it needs scikit-learn (`pip install 'routerag[router]'`)"


def _keyword_or_note(records, choices, keyword: KeywordSettings | None) -> tuple[list[str] | None, list[KeywordRules], str]:
    if keyword is None:
        return None, [], "the keyword rules were not fitted (asked not to)"
    if len(records) < 4:
        return None, [], f"the keyword rules need at least 4 questions to cross-validate; there are {len(records)}"
    from routerag.train.router.keyword_fit import cross_validated_choices

    try:
        chosen, fitted = cross_validated_choices(records, choices, keyword)
    except ImportError:
        return None, [], "the keyword rules were not cross-validated: the folds need scikit-learn (`pip install 'routerag[router]'`)"
    return chosen, fitted, ""


def _percent(value: float) -> str:
    return f"{100 * value:.0f} %"


def verdict(rows: Sequence[ReportRow], best: ReportRow, headroom: float, k: int) -> str:
    """One plain sentence: what routing can add here, what the best router recovers of it and, beside
    it, what the best keyword rules recover (the no-model yardstick)."""
    routers = [r for r in rows if r.kind == "router"]
    router = next((r for r in routers if r.name == LEARNED), routers[0] if routers else None)
    rules = max((r for r in routers if r.name in (KEYWORD, KEYWORD_FILE) and r is not router),
                key=lambda r: r.recall, default=None)
    if headroom <= 0:
        return (f"routing cannot add recall@{k} here: {best.name} alone finds a gold answer wherever any choice does "
                f"({100 * best.recall:.1f}); a router could only save cost")
    head = f"routing can add at most +{100 * headroom:.1f} recall@{k} here over {best.name} ({100 * best.recall:.1f})"
    if router is None:
        return head + "; no router was measured"
    text = (f"{head}; the {router.name} router recovers {_recovered(router.recovered)} of it "
            f"at {_times(router)} the evidence tokens of the best fixed choice")
    if rules is not None:
        whose = "fitted no-model keyword rules" if rules.name == KEYWORD else "operator's keyword rules"
        text += f"; the {whose} recover {_recovered(rules.recovered)} at {_times(rules)}"
    return text


def _times(row: ReportRow) -> str:
    return f"{row.cost_ratio:.1f}x" if row.cost_ratio is not None else "an unknown multiple of"


def _recovered(share: RecoveredShare) -> str:
    interval = f" (95 % CI {_percent(share.low)} to {_percent(share.high)})" if share.low is not None and share.high is not None else ""
    return _percent(share.share or 0.0) + interval


def build_report(records: Sequence[QuestionOutcome], settings: OutcomeSettings, *, learned: LearnedSettings | None = None,
                 keyword: KeywordSettings | None = None, rules: KeywordRules | None = None, rules_name: str = "",
                 skipped_no_gold: int = 0, resamples: int = 10_000, seed: int = 0, embedder=None,
                 notes: Sequence[str] = ()) -> RoutingReport:
    """Every row of the comparison over ``records`` (the outcomes of the questions compared);
    ``rules`` (the operator's, from the file ``rules_name``) route every question as written."""
    choices = settings.choices
    if not records:
        raise ValueError("no outcomes to compare")
    fixed = {c: np.array([r.choices[c].found for r in records], dtype=np.float64) for c in choices}
    mean_tokens = {c: float(np.mean([r.choices[c].tokens for r in records])) for c in choices}
    best = best_fixed(records, choices)
    oracle = oracle_choices(records, choices)
    base = fixed[best]
    top = np.array([r.choices[c].found for r, c in zip(records, oracle)], dtype=np.float64)
    common = {"base": base, "top": top, "base_tokens": mean_tokens[best], "resamples": resamples, "seed": seed}
    rows = [_row(c, "fixed", [r.choices[c] for r in records], **common,
                 note="best fixed choice" if c == best else "") for c in choices]
    rows.append(_row("retrieve all", "all", [r.every for r in records], **common,
                     note=f"every choice's top {settings.k}, each passage once; times summed"))
    rows.append(_row("oracle", "oracle", [r.choices[c] for r, c in zip(records, oracle)],
                     choices=oracle, **common, note="per question, the cheapest choice that finds a gold answer"))
    for name in settings.routers:
        picked = [r.routed[name] for r in records]
        rows.append(_row(name, "router", [r.choices[c] for r, c in zip(records, picked)],
                         choices=picked, **common, note="no training; routes on the choices' profiles"))
    all_notes = list(notes)
    keyword_rules: dict[str, KeywordRules] = {}
    if rules is not None:
        router = KeywordRouter(rules)
        picked = [router.decide(r.question) for r in records]
        rows.append(_row(KEYWORD_FILE, "router", [r.choices[c] for r, c in zip(records, picked)], choices=picked, **common,
                         note=f"the operator's rules {rules_name}: {len(rules.rules)} rules, default {rules.default}; not fitted"))
        keyword_rules["rules file"] = rules
    fitted_choices, fitted, why = _keyword_or_note(records, choices, keyword)
    if fitted_choices is not None and keyword is not None:
        rows.append(_row(KEYWORD, "router", [r.choices[c] for r, c in zip(records, fitted_choices)], choices=fitted_choices,
                         **common, note=f"cross-validated: words fitted per fold on its training questions, {len(fitted)} "
                         f"folds grouped by question, at most {keyword.max_rules} rules a choice, support {keyword.min_support}+, "
                         f"precision {keyword.min_precision:g}+"))
        keyword_rules.update({f"fold {i}": r for i, r in enumerate(fitted, 1)})
    else:
        all_notes.append(why)
    chosen, why = _learned_row_or_note(records, choices, mean_tokens, learned, embedder)
    if chosen is not None and learned is not None:
        rows.append(_row(LEARNED, "router", [r.choices[c] for r, c in zip(records, chosen)],
                         choices=chosen, **common,
                         note=f"cross-validated: {learned.folds} folds grouped by question, inputs {learned.inputs}, C {learned.c:g}"))
    else:
        all_notes.append(why)
    headroom = float(top.mean() - base.mean())
    best_row = next(r for r in rows if r.kind == "fixed" and r.name == best)
    return RoutingReport(settings=settings, questions=len(records), skipped_no_gold=skipped_no_gold, best_fixed=best,
                         headroom=headroom, rows=rows, keyword_rules=keyword_rules, notes=all_notes,
                         verdict=verdict(rows, best_row, headroom, settings.k))
