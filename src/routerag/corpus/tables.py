"""Tables as a knowledge base (R1-Router's Table Retriever): a table schema, linearisation of rows
into retrievable :class:`Document` s, and loaders for CSV tables and a JSON table format.

JSON table format — one table object, a list of them, or ``{"tables": [...]}``::

    {"table_id": "summer_olympics", "title": "Summer Olympic Games", "caption": "Host cities",
     "header": ["Year", "City"], "rows": [["1896", "Athens"], ...], "source": "https://..."}

``table_id``, ``section_title``, ``caption`` and ``source`` are optional; numbers in cells are
kept as their text. A CSV table is a header row plus data rows; its title is the file name
(``olympic_hosts.csv`` -> "Olympic hosts") unless given.

Two linearisations:

* ``rows`` (default; one document per row or per group of ``rows_per_doc`` rows)::

      Title: Summer Olympic Games | Year: 1896 | City: Athens

* ``r1router`` (the whole table in one document, as R1-Router's table retriever returns it)::

      [Title]Summer Olympic Games[Caption]Host cities[Table name]summer_olympics[Header]Year[sep]City[Rows][Row]1896[sep]Athens...
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from routerag.corpus.loaders import CorpusFormat, RawPassage
from routerag.corpus.readers import CorpusFormatError, Where, iter_csv, iter_json, json_top_kind, open_checked
from routerag.corpus.schema import Document

Style = Literal["rows", "r1router"]


class Table(BaseModel):
    """A table of facts: a title, a header and rows of cells (all cells are text)."""

    title: str
    header: list[str] = Field(min_length=1)
    rows: list[list[str]]
    table_id: str = ""
    section_title: str = ""
    caption: str = ""
    source: str = ""  # where the facts come from (URL or citation)

    @field_validator("rows", mode="before")
    @classmethod
    def _cells_as_text(cls, rows: Any) -> Any:
        if not isinstance(rows, list):
            return rows
        return [
            [str(c) if isinstance(c, int | float) and not isinstance(c, bool) else c for c in row]
            if isinstance(row, list)
            else row
            for row in rows
        ]

    @model_validator(mode="after")
    def _rectangular(self) -> "Table":
        if not self.title.strip() and not self.caption.strip():
            raise ValueError("a table needs a title or a caption")
        width = len(self.header)
        for i, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"row {i} has {len(row)} cells; the header has {width}")
        return self

    @property
    def name(self) -> str:
        return self.title or self.caption


def linearize_row(table: Table, row: Sequence[str]) -> str:
    """``Title: <title> | <col>: <val> | ...`` (empty cells left out)."""
    cells = [f"{col}: {val.strip()}" for col, val in zip(table.header, row) if val.strip()]
    return " | ".join([f"Title: {table.name}", *cells])


def linearize_r1router(table: Table) -> str:
    """The whole table in R1-Router's bracketed form."""
    parts = [f"[Title]{table.title}"]
    if table.section_title:
        parts.append(f"[Section title]{table.section_title}")
    if table.caption:
        parts.append(f"[Caption]{table.caption}")
    if table.table_id:
        parts.append(f"[Table name]{table.table_id}")
    parts.append("[Header]" + "[sep]".join(table.header))
    parts.append("[Rows]" + "".join("[Row]" + "[sep]".join(row) for row in table.rows))
    return "".join(parts)


def table_documents(
    table: Table, *, rows_per_doc: int = 1, style: Style = "rows", source: str = "default"
) -> list[Document]:
    """Retrievable documents for a table: one per ``rows_per_doc`` rows (style ``rows``, one
    linearised row per line) or one for the whole table (style ``r1router``)."""
    if rows_per_doc < 1:
        raise ValueError("rows_per_doc must be at least 1")
    base = {"kind": "table", "table_id": table.table_id or table.name, "header": list(table.header)}
    if style == "r1router":
        meta = {**base, "row_start": 0, "row_end": len(table.rows)}
        return [Document.make(table.name, linearize_r1router(table), source=source, metadata=meta)]
    docs = []
    for start in range(0, len(table.rows), rows_per_doc):
        group = table.rows[start : start + rows_per_doc]
        text = "\n".join(linearize_row(table, row) for row in group)
        if not text.strip():
            continue
        meta = {**base, "row_start": start, "row_end": start + len(group)}
        docs.append(Document.make(table.name, text, source=source, metadata=meta))
    return docs


def _table(value: Any, where: Where) -> Table:
    if not isinstance(value, dict):
        raise CorpusFormatError(where, "expected a table object {title, header, rows}")
    try:
        return Table.model_validate(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        raise CorpusFormatError(where, err["msg"], field=field) from None


def iter_tables_json(path: str | Path) -> Iterator[Table]:
    """Tables from a JSON file: one table object, a list of them, or ``{"tables": [...]}``."""
    path = open_checked(path)
    if json_top_kind(path) == "list":
        for where, value in iter_json(path):
            yield _table(value, where)
        return
    top: dict[str, Any] = {}
    for where, value in iter_json(path):
        top[where.key or ""] = value
    if "tables" in top:
        if not isinstance(top["tables"], list):
            raise CorpusFormatError(Where(str(path), key="tables"), "expected a list of tables", field="tables")
        for i, value in enumerate(top["tables"]):
            yield _table(value, Where(str(path), record=i, key="tables"))
    else:
        yield _table(top, Where(str(path), record=0))


def load_tables_json(path: str | Path) -> list[Table]:
    return list(iter_tables_json(path))


def load_table_csv(path: str | Path, *, title: str | None = None, source: str = "") -> Table:
    """A CSV (or TSV) table: the header row names the columns; the title defaults to the file name."""
    path = open_checked(path)
    header: list[str] | None = None
    rows = []
    for _, row in iter_csv(path):
        header = header or list(row)
        rows.append(list(row.values()))
    if header is None:
        raise CorpusFormatError(Where(str(path), line=2), "the table has no rows")
    name = title or path.stem.replace("_", " ").replace("-", " ").strip().capitalize()
    return _table({"title": name, "table_id": path.stem, "header": header, "rows": rows, "source": source}, Where(str(path)))


def _passages(tables: Iterator[Table] | list[Table], where: Where) -> Iterator[RawPassage]:
    for table in tables:
        for doc in table_documents(table):
            yield RawPassage(where, doc.title, doc.text, doc.metadata)


def _read_table_csv(path: Path) -> Iterator[RawPassage]:
    yield from _passages([load_table_csv(path)], Where(str(path)))


def _read_table_json(path: Path) -> Iterator[RawPassage]:
    yield from _passages(iter_tables_json(path), Where(str(path)))


TABLE_CSV_FORMAT = CorpusFormat("table-csv", "a CSV table; one document per linearised row", _read_table_csv)
TABLE_JSON_FORMAT = CorpusFormat("table-json", "JSON tables {title, header, rows}; one document per linearised row", _read_table_json)


def bundled_tables_path() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "tables" / "tables.json"


def load_bundled_tables() -> list[Table]:
    """The small factual table set shipped with routerag (see ``data/tables/ATTRIBUTION.md``)."""
    return load_tables_json(bundled_tables_path())
