"""Tables as a knowledge base (R1-Router's Table Retriever): a table schema, linearisation of rows
into retrievable :class:`Document` s, and loaders for CSV tables and a JSON table format.

JSON table format — one table object, a list of them, or ``{"tables": [...]}``::

    {"table_id": "summer_olympics", "title": "Summer Olympic Games", "caption": "Host cities",
     "header": ["Year", "City"], "rows": [["1896", "Athens"], ...], "source": "https://..."}

``table_id``, ``section_title``, ``caption`` and ``source`` are optional; numbers in cells are
kept as their text. A CSV table is a header row plus data rows; its title is the file name
(``olympic_hosts.csv`` -> "Olympic hosts") unless given.

Three linearisations:

* ``rows`` (default; one document per row or per group of ``rows_per_doc`` rows)::

      Title: Summer Olympic Games | Year: 1896 | City: Athens

* ``grid`` (a group of ``rows_per_doc`` rows, or the whole table, under its header once)::

      Title: Summer Olympic Games
      Year | City
      1896 | Athens

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

Style = Literal["rows", "grid", "r1router"]


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


def _cell(text: str) -> str:
    return " ".join(text.split())


def linearize_grid(table: Table, rows: Sequence[Sequence[str]]) -> str:
    """``Title: <title>``, the header and one line per row, cells joined by `` | `` (whitespace
    inside a cell collapsed)."""
    lines = [f"Title: {table.name}", " | ".join(_cell(c) for c in table.header)]
    lines += [" | ".join(_cell(c) for c in row) for row in rows]
    return "\n".join(lines)


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


def _row_line(table: Table, row: Sequence[str], style: Style) -> str:
    return " | ".join(_cell(c) for c in row) if style == "grid" else linearize_row(table, row)


def row_groups(table: Table, *, rows_per_doc: int | None = 1, max_chars: int | None = None,
               style: Style = "rows") -> list[tuple[int, int]]:
    """``(start, end)`` row ranges of a table's documents: ``rows_per_doc`` rows each (``None``:
    all), a group closed early when its text would pass ``max_chars`` (a row longer than that is
    a document of its own)."""
    step = rows_per_doc or max(1, len(table.rows))
    base = len(linearize_grid(table, [])) if style == "grid" else 0
    groups: list[tuple[int, int]] = []
    start, size = 0, base
    for i, row in enumerate(table.rows):
        line = len(_row_line(table, row, style)) + 1
        if i > start and (i - start >= step or (max_chars is not None and size + line > max_chars)):
            groups.append((start, i))
            start, size = i, base
        size += line
    if start < len(table.rows):
        groups.append((start, len(table.rows)))
    return groups


def table_documents(
    table: Table, *, rows_per_doc: int | None = 1, style: Style = "rows", source: str = "default",
    max_chars: int | None = None,
) -> list[Document]:
    """Retrievable documents for a table: one per ``rows_per_doc`` rows (``None``: all rows in
    one document; ``max_chars``: a group is closed before its text passes that length) — style
    ``rows`` one linearised row per line, style ``grid`` the header once above the rows — or one
    for the whole table (style ``r1router``)."""
    if rows_per_doc is not None and rows_per_doc < 1:
        raise ValueError("rows_per_doc must be at least 1 (or None: the whole table)")
    base = {"kind": "table", "table_id": table.table_id or table.name, "header": list(table.header)}
    if style == "r1router":
        meta = {**base, "row_start": 0, "row_end": len(table.rows)}
        return [Document.make(table.name, linearize_r1router(table), source=source, metadata=meta)]
    docs = []
    for start, end in row_groups(table, rows_per_doc=rows_per_doc, max_chars=max_chars, style=style):
        group = table.rows[start:end]
        if style == "grid":
            text = linearize_grid(table, group) if any(c.strip() for row in group for c in row) else ""
        else:
            text = "\n".join(linearize_row(table, row) for row in group)
        if not text.strip():
            continue
        meta = {**base, "row_start": start, "row_end": end}
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
