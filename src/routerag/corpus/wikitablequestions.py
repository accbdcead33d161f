"""WikiTableQuestions (Pasupat & Liang, ACL 2015) as questions and as a table knowledge base.

The release (``<data_root>/wikitablequestions/``, README there) holds 2,108 Wikipedia tables
(``csv/2xx-csv/N.csv``, first row the header; ``\\"`` and ``\\\\`` escaped inside quoted cells), each
page's title (``page/2xx-page/N.json``) and questions as TSV ``id, utterance, context,
targetValue``: ``context`` is the table's csv path, ``targetValue`` the answer, a ``|``-separated
list with ``\\n``, ``\\p`` (a pipe) and ``\\\\`` escaped.

As an open-domain benchmark the table must first be found: every table becomes documents (page
title, header and rows, :class:`TableLayout`) and a question's ``supporting_doc_ids`` are the
documents of its table. A question's ``answers`` are the items of its target list, *all* of
which the answer must give; ``answer_scheme="wtq"`` has them scored as WikiTableQuestions' own
evaluator scores them (:mod:`routerag.eval.wtq`).

Datasets (registered in :mod:`routerag.corpus.datasets`): ``wtq`` (the 4,344 test questions over
tables never seen in training), ``wtq-train`` (the 14,152 ``training.tsv`` questions), both over
all 2,108 tables; ``2wiki-wtq``, text + tables as two named sources (:func:`text_tables_mix`).
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from routerag.corpus.readers import CorpusFormatError, Where, open_checked
from routerag.corpus.schema import Document, Question
from routerag.corpus.tables import Style, Table, table_documents

WTQ_FOLDER = "wikitablequestions"
Split = Literal["train", "test"]
SPLIT_FILES: dict[str, str] = {"train": "training.tsv", "test": "pristine-unseen-tables.tsv"}
ANSWER_SCHEME = "wtq"
"""The answer scheme of every WikiTableQuestions question (``routerag.eval.metrics.ANSWER_SCHEMES``)."""
_TSV_ESCAPE = re.compile(r"\\(.)")
_TSV_CODES = {"n": "\n", "p": "|", "\\": "\\"}
_TABLE_PATH = re.compile(r"^csv/(\d+)-csv/(\d+)\.csv$")


class TableLayout(BaseModel):
    """How a table becomes documents: groups of ``rows_per_doc`` rows under the page title and the
    header, or the whole table in one document (``rows_per_doc=None``); with ``max_chars``, a
    document is closed before it grows past that many characters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows_per_doc: int | None = Field(None, ge=1, description="rows per document (title and header repeated in each); "
                                     "None: the whole table in one document")
    max_chars: int | None = Field(None, ge=200, description="a document is closed before its text passes this many "
                                  "characters (a long table becomes several, each with title and header); None: no limit")
    style: Style = Field("grid", description="grid: the header once above the rows; rows: 'column: value' per cell")


DEFAULT_LAYOUT = TableLayout(max_chars=2000)
"""Whole tables, a long one (a third of them) cut into consecutive row groups of at most 2,000
characters, each under the page title and the header. Measured on 300 ``wtq-train`` questions
(``docs/experiments/scripts/wtq_table_layouts.py``; recall of the gold table in the top 5): BM25
53.3 against 52.0 for uncut whole tables, 52.3 for groups of 10 rows, 55.0 for groups of 5 and
50.0 for single rows; a gold answer item in the top 5 for 65.0 against 67.0 / 59.0 / 51.7 / 29.0
(row groups miss the rows a count or a comparison needs); 1.8k evidence tokens in the top 5
against 4.8k for uncut tables, so that five hits fit a 4,096-token context. Dense
(all-MiniLM-L6-v2, which reads the first 256 word pieces) finds 40.7 whole, 36.7 in 10-row groups."""


class WTQExample(BaseModel):
    """One line of a WikiTableQuestions TSV file."""

    qid: str
    question: str
    table_id: str  # the ``context`` column: ``csv/204-csv/590.csv``
    targets: list[str] = Field(min_length=1)  # the target list, unescaped


def tsv_unescape(text: str) -> str:
    """Undo the release's TSV escapes: ``\\n`` newline, ``\\p`` pipe, ``\\\\`` backslash (one pass,
    so ``\\\\p`` is a backslash and a ``p``)."""
    return _TSV_ESCAPE.sub(lambda m: _TSV_CODES.get(m.group(1), m.group(0)), text)


def tsv_unescape_list(text: str) -> list[str]:
    """A ``|``-separated TSV list, each item unescaped."""
    return [tsv_unescape(item) for item in text.split("|")]


def read_examples(path: str | Path) -> list[WTQExample]:
    """The questions of a WikiTableQuestions TSV file (header ``id utterance context targetValue``)."""
    path = open_checked(path)
    with path.open(encoding="utf-8", newline="") as handle:
        lines = handle.read().split("\n")
    header = lines[0].rstrip("\r").split("\t")
    if header[:4] != ["id", "utterance", "context", "targetValue"]:
        raise CorpusFormatError(Where(str(path), line=1), f"expected the header id, utterance, context, targetValue; got {header}")
    out = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.rstrip("\r").split("\t")
        if len(fields) != 4:
            raise CorpusFormatError(Where(str(path), line=number), f"has {len(fields)} fields; expected 4")
        qid, utterance, context, target = fields
        targets = [t for t in tsv_unescape_list(target) if t.strip()]
        if not targets:
            raise CorpusFormatError(Where(str(path), line=number), "empty targetValue", field="targetValue")
        out.append(WTQExample(qid=qid, question=tsv_unescape(utterance), table_id=context, targets=targets))
    return out


def page_title(root: Path, table_id: str) -> str:
    """The Wikipedia page title of a table (``page/2xx-page/N.json``); '' when there is none."""
    match = _TABLE_PATH.match(table_id)
    if match is None:
        raise CorpusFormatError(table_id, "not a WikiTableQuestions table path (csv/2xx-csv/N.csv)")
    path = root / "page" / f"{match.group(1)}-page" / f"{match.group(2)}.json"
    if not path.is_file():
        return ""
    title = json.loads(path.read_text(encoding="utf-8")).get("title", "")
    return title if isinstance(title, str) else ""


def read_table(root: str | Path, table_id: str) -> Table:
    """One table: its csv (first row the header; the release's ``\\"`` and ``\\\\`` escapes) and its
    page title; ``table_id`` is the csv path relative to ``root`` (the TSV ``context``)."""
    root = Path(root)
    path = open_checked(root / table_id)
    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 1 << 30)))
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            grid = [row for row in csv.reader(handle, escapechar="\\", doublequote=False) if row]
    except (csv.Error, UnicodeDecodeError) as exc:
        raise CorpusFormatError(path, f"malformed table: {exc}") from None
    if not grid:
        raise CorpusFormatError(path, "empty table: a header row is required")
    header = [" ".join(h.split()) for h in grid[0]]
    width = len(header)
    rows = [(row + [""] * width)[:width] for row in grid[1:]]  # ragged rows padded (none in 1.0.2)
    title = page_title(root, table_id) or f"Table {table_id}"
    return Table(title=title, header=header, rows=rows, table_id=table_id, source=f"WikiTableQuestions {table_id}")


def _table_order(path: Path) -> tuple[int, int]:
    return int(path.parent.name.split("-")[0]), int(path.stem)


@lru_cache(maxsize=2)
def load_tables(root: str | Path) -> tuple[Table, ...]:
    """Every table of the release under ``root``, in folder and number order (read once per root)."""
    root = Path(root)
    paths = sorted((root / "csv").glob("*-csv/*.csv"), key=_table_order)
    if not paths:
        raise CorpusFormatError(root, "no tables (csv/2xx-csv/N.csv)")
    return tuple(read_table(root, p.relative_to(root).as_posix()) for p in paths)


class TableCorpus(BaseModel):
    """The documents of a set of tables, and which documents each table became."""

    docs: list[Document]
    doc_ids: dict[str, list[str]]  # table id -> its documents' ids


def table_corpus(tables: Iterable[Table], layout: TableLayout = DEFAULT_LAYOUT, *, source: str = "default") -> TableCorpus:
    """Every table's documents; a document with the same content as an earlier one (a table
    repeated on two pages) is kept once and shared."""
    docs: list[Document] = []
    seen: set[str] = set()
    by_table: dict[str, list[str]] = {}
    for table in tables:
        made = table_documents(table, rows_per_doc=layout.rows_per_doc, max_chars=layout.max_chars, style=layout.style,
                               source=source)
        by_table[table.table_id] = [d.doc_id for d in made]
        for doc in made:
            if doc.doc_id not in seen:
                seen.add(doc.doc_id)
                docs.append(doc)
    return TableCorpus(docs=docs, doc_ids=by_table)


def to_questions(examples: Sequence[WTQExample], corpus: TableCorpus, *, dataset: str) -> list[Question]:
    """Questions with their target lists as ``answers`` (scored by the ``wtq`` scheme), their
    table's documents as ``supporting_doc_ids`` and the table id in ``metadata``."""
    out = []
    for ex in examples:
        if ex.table_id not in corpus.doc_ids:
            raise CorpusFormatError(ex.table_id, f"question {ex.qid}: its table is not in the corpus")
        out.append(Question(qid=ex.qid, question=" ".join(ex.question.split()), answers=list(ex.targets), dataset=dataset,
                            supporting_doc_ids=list(corpus.doc_ids[ex.table_id]), answer_scheme=ANSWER_SCHEME,
                            metadata={"table_id": ex.table_id}))
    return out


def read_split(root: str | Path, split: Split) -> list[WTQExample]:
    return read_examples(Path(root) / "data" / SPLIT_FILES[split])
