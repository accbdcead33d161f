"""What every routing choice retrieves for each question (``routerag routing-report``): whether a
gold answer is in its top ``k`` (the answer-outcome rule of the source labels,
:func:`~routerag.train.router.labels.answer_rank`), its retrieval milliseconds and its evidence
tokens; the same for retrieving from every choice at once, and the choice of each router that
needs no training (``profile-embedding``).

The records are appended one per question to a crash-safe JSONL log
(:class:`~routerag.eval.runs.RecordLog`) beside the settings they were measured with, so that a
rerun measures only the questions not yet done and never mixes two settings in one log.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from routerag.config import atomic_write_text
from routerag.corpus.schema import Question
from routerag.eval.runs import RecordLog
from routerag.llm.scripted import rough_token_count
from routerag.routing.base import Router, RoutingError
from routerag.sources.base import MAX_QUERY_CHARS, QueryResult
from routerag.sources.sourceset import SourceSet
from routerag.trace import Hit
from routerag.train.router.labels import answer_rank, search_batched

OUTCOMES_NAME = "outcomes.jsonl"
SETTINGS_NAME = "outcomes.settings.json"


class ChoiceOutcome(BaseModel):
    """One choice's retrieval for one question."""

    found: bool  # a gold answer string is in the top k
    rank: int | None = None  # 1-based rank of the first hit holding one (None: not found, or retrieve-all)
    ms: float  # retrieval wall time of the question (its share of a batched search)
    tokens: int  # evidence tokens: the hits' titles and texts (``rough_token_count``)


class QuestionOutcome(BaseModel):
    position: int  # the question's index in the sample
    qid: str
    question: str
    golds: list[str]
    choices: dict[str, ChoiceOutcome]  # every mode or source
    every: ChoiceOutcome  # retrieve from all choices: the distinct hits of their top k, their summed time
    routed: dict[str, str] = Field(default_factory=dict)  # router -> the choice it made (routers without training)


class OutcomeSettings(BaseModel):
    """What decides the outcomes: a log is resumed only under the same settings."""

    dataset: str
    index: str  # the index searched: a prebuilt folder, or ``cache:<name>`` for a dataset's cached index
    index_manifest: str | None = None  # sha256 of its manifest(s): a rebuilt index is not resumed
    choices: list[str]
    k: int
    routers: list[str]


def evidence_tokens(hits: Sequence[Hit]) -> int:
    """Tokens of the evidence a model would read: each hit's title and text."""
    return sum(rough_token_count(f"{hit.title} {hit.text}") for hit in hits)


def distinct_hits(results: Sequence[QueryResult]) -> list[Hit]:
    """The hits of several results, each document once (the first time it comes)."""
    seen: set[str] = set()
    out = []
    for result in results:
        for hit in result.hits:
            if hit.doc_id not in seen:
                seen.add(hit.doc_id)
                out.append(hit)
    return out


def choice_outcome(result: QueryResult, answers: Sequence[str], k: int) -> ChoiceOutcome:
    hits = result.hits[:k]
    rank = answer_rank(hits, answers)
    return ChoiceOutcome(found=rank is not None, rank=rank, ms=round(result.latency_ms, 3), tokens=evidence_tokens(hits))


def every_outcome(results: Sequence[QueryResult], answers: Sequence[str], k: int) -> ChoiceOutcome:
    """Retrieving from every choice: their top ``k`` pooled (each document once), their times summed."""
    hits = distinct_hits([r.model_copy(update={"hits": r.hits[:k]}) for r in results])
    return ChoiceOutcome(found=answer_rank(hits, answers) is not None, ms=round(sum(r.latency_ms for r in results), 3),
                         tokens=evidence_tokens(hits))


def measure(sources: SourceSet, questions: Sequence[tuple[int, Question]], choices: Sequence[str], k: int, *,
            routers: Mapping[str, Router] | None = None, batch: int = 16) -> Iterator[QuestionOutcome]:
    """The outcome of every question of ``questions`` (``(position, question)``), searched in
    batches of ``batch`` per choice; each batch's records are yielded as soon as it is searched.
    The first batch is preceded by one warm-up search per choice (loading is not timed)."""
    profiles = {name: sources.get(name).profile for name in choices}
    for start in range(0, len(questions), batch):
        part = questions[start:start + batch]
        queries = [q.question[:MAX_QUERY_CHARS] for _, q in part]
        results = {c: search_batched(sources, queries, k, c, batch, warm_up=start == 0) for c in choices}
        for i, (position, q) in enumerate(part):
            per_choice = [results[c][i] for c in choices]
            yield QuestionOutcome(
                position=position, qid=q.qid, question=q.question, golds=list(q.answers),
                choices={c: choice_outcome(r, q.answers, k) for c, r in zip(choices, per_choice)},
                every=every_outcome(per_choice, q.answers, k),
                routed={name: router.route(queries[i], profiles).choice for name, router in (routers or {}).items()},
            )


class OutcomeStore:
    """The outcome log of one report folder under one :class:`OutcomeSettings`."""

    def __init__(self, folder: str | Path, settings: OutcomeSettings) -> None:
        self.folder = Path(folder)
        self.settings = settings
        self.log = RecordLog(self.folder / OUTCOMES_NAME, QuestionOutcome)
        self.settings_path = self.folder / SETTINGS_NAME

    def open(self) -> dict[str, QuestionOutcome]:
        """The outcomes measured before (by question id), after cutting a tail a crash left; a log
        made under other settings, or without its settings file, is refused and left unchanged."""
        if self.settings_path.is_file():
            stored = OutcomeSettings.model_validate_json(self.settings_path.read_text(encoding="utf-8"))
            if stored != self.settings:
                differ = "; ".join(f"{f} {getattr(stored, f)} then, {getattr(self.settings, f)} now"
                                   for f in OutcomeSettings.model_fields if getattr(stored, f) != getattr(self.settings, f))
                raise RoutingError(f"{self.folder}: its outcomes were measured with other settings ({differ}); nothing "
                                   "was changed. Give another --out, or the same settings to resume.")
        elif self.log.read():
            raise RoutingError(f"{self.log.path} holds outcomes but {SETTINGS_NAME} is missing, so nothing shows how they "
                               "were measured; nothing was changed. Give another --out.")
        self.log.recover()
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.settings_path, self.settings.model_dump_json(indent=2))
        return {r.qid: r for r in self.log.read()}

    def append(self, record: QuestionOutcome) -> None:
        self.log.append(record)


def best_fixed(records: Sequence[QuestionOutcome], choices: Sequence[str]) -> str:
    """The best fixed choice over ``records``: the most questions with a gold answer found (ties:
    fewer mean evidence tokens, then the order of ``choices``)."""
    if not records:
        raise RoutingError("no outcomes to choose a fixed choice from")

    def key(c: str) -> tuple[float, float, int]:
        found = sum(r.choices[c].found for r in records) / len(records)
        tokens = sum(r.choices[c].tokens for r in records) / len(records)
        return found, -tokens, -choices.index(c)

    return max(choices, key=key)
