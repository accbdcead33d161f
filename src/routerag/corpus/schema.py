"""The canonical document and question schema every loader produces."""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


def doc_id_for(title: str, text: str) -> str:
    """Stable content id: the same title and text always give the same id, across runs and machines."""
    digest = hashlib.sha1(f"{title.strip()}\n{text.strip()}".encode()).hexdigest()
    return f"d{digest[:16]}"


class Document(BaseModel):
    """One retrievable unit (a passage, a linearised table, an image caption)."""

    model_config = ConfigDict(frozen=True)

    doc_id: str
    title: str = ""
    text: str
    source: str = "default"  # the named corpus it belongs to (multi-source setups)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("text")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("document text is empty")
        return value

    @classmethod
    def make(cls, title: str, text: str, **kwargs: Any) -> "Document":
        return cls(doc_id=doc_id_for(title, text), title=title, text=text, **kwargs)

    @property
    def passage(self) -> str:
        """HippoRAG's passage string: ``title\\ntext``."""
        return f"{self.title}\n{self.text}" if self.title else self.text


class SubQuestion(BaseModel):
    """One hop of a gold decomposition (MuSiQue, R1-Router trajectories)."""

    question: str
    answer: str = ""
    supporting_doc_ids: list[str] = Field(default_factory=list)
    source: str | None = None  # gold knowledge base / retriever for this hop, when known


class Question(BaseModel):
    """A benchmark question with every accepted answer alias."""

    qid: str
    question: str
    answers: list[str]  # first entry is the canonical answer, the rest are aliases (unless answer_scheme says otherwise)
    dataset: str = ""
    decomposition: list[SubQuestion] = Field(default_factory=list)
    supporting_doc_ids: list[str] = Field(default_factory=list)
    gold_source: str | None = None  # e.g. RealRoute law-med: which source holds the answer
    # how ``answers`` are read and scored: None, aliases (any one is the answer); else a registered
    # answer scheme (``routerag.eval.metrics.ANSWER_SCHEMES``), e.g. "wtq": the items of one list answer
    answer_scheme: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def answer(self) -> str:
        return self.answers[0] if self.answers else ""
