"""The records of a background run (:mod:`routerag.server.jobs`): what a client sends
(:class:`RunQuestion`), what it reads back (:class:`RunStatus`, :class:`RunReport`), a
configuration ready to answer (:class:`PreparedConfig`), the state the run queue and the run store
share while a run lives (:class:`RunEntry`), and the run's domain errors."""

from __future__ import annotations

import platform
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from routerag import __version__
from routerag.corpus.schema import Question
from routerag.edge.admission import Ticket
from routerag.errors import RouteragError
from routerag.eval.metrics import DEFAULT_METRICS
from routerag.eval.runs import QuestionRecord, RunHeader, Versions
from routerag.eval.summary import RunSummary
from routerag.runtime.base import Strategy
from routerag.server.packed import PackedQuestions

RunState = Literal["queued", "running", "done", "cancelled", "failed", "interrupted"]
RESUMABLE: tuple[RunState, ...] = ("interrupted", "cancelled")

class RunQuestion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1)
    qid: str | None = None
    answers: list[str] = Field(default_factory=list, description="gold answers; with them EM/F1 are computed")


class ConfigInfo(BaseModel):
    label: str
    strategy: str
    params: dict[str, Any]  # resolved (validated, with defaults)
    sources: list[str] = Field(default_factory=list)  # custom sources mounted
    adapter: str | None = None  # the policy adapter that answers (name@sha256:prefix)


class RunStatus(BaseModel):
    run_id: str
    strategy: str  # the first configuration's strategy
    params: dict[str, Any]  # the first configuration's params
    configs: list[ConfigInfo]
    dataset: str | None = None
    n_questions: int
    state: RunState
    total: int  # questions x configurations
    done: int  # answers finished (including ones whose trace has an error)
    errors: int  # traces with ``error`` set
    skipped: int  # answers not run because the run was cancelled
    created_at: float
    resumed: int = 0  # times the run was resumed (POST /v1/runs/{id}/resume)
    started_at: float | None = None
    finished_at: float | None = None  # set once the run has ended (done, cancelled, failed) or was found interrupted
    error: str | None = None  # why the run failed (state "failed")


class ConfigSummary(BaseModel):
    """One row of the comparison table."""

    label: str
    strategy: str
    n_done: int
    n_errors: int
    em: float | None  # None: no question has gold answers
    f1: float | None
    latency_ms: float
    total_tokens: float
    retrieval_turns: float
    summary: RunSummary


class Answer(BaseModel):
    label: str
    prediction: str | None  # None: not answered (yet, or skipped)
    em: float | None = None
    f1: float | None = None
    latency_ms: float | None = None
    tokens: int | None = None
    turns: int | None = None
    error: str | None = None


class QuestionRow(BaseModel):
    position: int
    qid: str
    question: str
    golds: list[str]
    answers: list[Answer]
    disagree: bool  # the configurations answered differently (normalised) or scored different EM


class RunReport(BaseModel):
    status: RunStatus
    summaries: list[ConfigSummary]
    questions: list[QuestionRow]
    disagreements: int


class UnknownRunError(RouteragError, KeyError):
    """No run has this id (the message names it)."""

    def __str__(self) -> str:
        return str(self.args[0])


class RunNotResumableError(RouteragError, ValueError):
    """The run is not interrupted or cancelled (it runs, or it ended with every answer)."""


@dataclass
class PreparedConfig:
    """A validated configuration; ``make()`` builds a fresh strategy (one per answer)."""

    info: ConfigInfo
    make: Callable[[], Strategy]
    request: dict[str, Any] = field(default_factory=dict)  # as the client sent it: rebuilt from it on resume


@dataclass(eq=False)
class RunEntry:
    """A run as the queue and the store hold it (its fields change under the runs' lock)."""

    status: RunStatus
    questions: PackedQuestions  # packed: a queued run of 5,000 questions is two allocations, freed when it ends
    records: list[list[QuestionRecord | None]]  # [config][question]
    requests: list[dict[str, Any]] = field(default_factory=list)  # PreparedConfig.request of each configuration
    cancel: threading.Event = field(default_factory=threading.Event)
    write_lock: threading.Lock = field(default_factory=threading.Lock)  # one appender per run's logs
    store_error: str | None = None  # the store could not take the run or an answer: the run ends "failed"
    halted: bool = False  # an answer could not be appended: the rest is not run, what is saved is kept
    ticket: Ticket | None = None  # its answers' admission: one unit given back per answer answered or skipped
    configs: tuple[PreparedConfig, ...] = ()  # while it runs: the configurations answering
    next_answer: int = 0  # while it runs: the next answer (position x configurations + configuration) to look at
    in_flight: int = 0  # answers being worked on now
    stored: bool = False  # ended: its questions and answers are on disk only (read back when asked for)



def _versions() -> Versions:
    return Versions(routerag=__version__, python=sys.version.split()[0], platform=platform.platform())


def run_header(status: RunStatus, info: ConfigInfo, questions: Sequence[Question]) -> RunHeader:
    """One configuration of a service run as a run of ``routerag eval`` (its ``run.json``)."""
    return RunHeader(name=status.run_id, dataset=status.dataset or "custom", strategy=info.strategy,
                     label=info.label, metrics=list(DEFAULT_METRICS), sample_qids=[q.qid for q in questions],
                     fingerprint=status.run_id, versions=_versions())


def to_question(q: RunQuestion, position: int, dataset: str = "") -> Question:
    return Question(qid=q.qid or f"q{position}", question=q.question, answers=q.answers, dataset=dataset)

