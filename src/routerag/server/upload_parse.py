"""Parse and validate an uploaded corpus file in memory: a JSON list of ``{title, text}`` objects
(or of plain strings), or a CSV with a ``text`` column and an optional ``title`` column.

Nothing is executed or unpickled: bytes are decoded as strict UTF-8 and read with ``json`` /
``csv``. Every problem is reported with its line (and record, for JSON) so the UI can show it
next to the row; a file with any bad row is refused as a whole.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field

from routerag.corpus.schema import Document
from routerag.errors import RouteragError

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,40}$"
_NAME = re.compile(NAME_PATTERN)
_SURROGATE = re.compile("[\ud800-\udfff]")
# names a request could confuse with a retrieval mode or a Search-R1 tag: refused for uploads even
# when the service does not mount a source of that name
RESERVED_NAMES = frozenset({"passage", "bm25", "graph", "hybrid", "triples", "table", "tables", "dense", "remote",
                            "web", "all", "none", "default"})

JSON_TYPES = frozenset({"application/json", "text/json"})
CSV_TYPES = frozenset({"text/csv", "application/csv", "text/comma-separated-values", "application/vnd.ms-excel"})
# a client that does not know the type (curl -F without ;type=) sends this; the file name decides
GENERIC_TYPES = frozenset({"application/octet-stream", "text/plain", ""})


class UploadSettings(BaseModel):
    """Limits on uploaded custom sources."""

    model_config = ConfigDict(extra="forbid")

    max_bytes: int = Field(5_000_000, ge=1, description="largest uploaded file (bytes); larger gets 413")
    max_rows: int = Field(20_000, ge=1, description="most passages in one upload; more gets 422")
    max_text_chars: int = Field(20_000, ge=1, description="longest passage text")
    max_title_chars: int = Field(500, ge=1, description="longest passage title")
    max_profile_chars: int = Field(500, ge=1, description="longest source profile")
    max_errors: int = Field(50, ge=1, description="row errors reported at most")
    max_sources: int = Field(50, ge=1, description="custom sources kept at most")


class RowError(BaseModel):
    line: int | None = None  # 1-based line in the file
    record: int | None = None  # 0-based record (JSON list element / CSV data row)
    field: str | None = None
    message: str

    def text(self) -> str:
        where = f"line {self.line}" if self.line is not None else "file"
        if self.record is not None:
            where += f" (record {self.record})"
        field = f", {self.field}" if self.field else ""
        return f"{where}{field}: {self.message}"


class UploadRejected(RouteragError, ValueError):
    """An upload, or a request naming one, that cannot be used (a bad name, not UTF-8, invalid rows,
    too many sources, a source not ready); ``errors`` lists the bad rows. The narrower kinds below
    say why; each kind's HTTP status is in :mod:`routerag.server.domain_errors`."""

    def __init__(self, detail: str, errors: list[RowError] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or []


class UnknownUploadError(UploadRejected):
    """No uploaded source has this name."""


class UploadConflictError(UploadRejected):
    """The name is taken (an uploaded source, one of the service's own, a retrieval mode), or the
    source is still being indexed."""


class UploadTooLargeError(UploadRejected):
    """The file is larger than the limit."""


class UnsupportedUploadError(UploadRejected):
    """Not a JSON or CSV file."""


class ParsedUpload(BaseModel):
    format: str  # "json" | "csv"
    docs: list[Document]
    rows: int
    duplicates: int


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):  # fullmatch: "$" alone lets a trailing newline through
        raise UploadRejected(
            f"invalid source name {name!r}: use 1-41 characters a-z, 0-9, '_' or '-', starting with a letter or digit"
        )
    return name


def detect_format(filename: str, content_type: str) -> str:
    media = content_type.split(";")[0].strip().lower()
    suffix = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    if media in JSON_TYPES:
        return "json"
    if media in CSV_TYPES:
        return "csv"
    if media in GENERIC_TYPES and suffix in {"json", "csv"}:
        return suffix
    raise UnsupportedUploadError(
        f"unsupported file type {media or '(none)'!r} for {filename!r}: upload a JSON list (application/json, .json) "
        "or a CSV with a 'text' column (text/csv, .csv)",
    )


def decode_utf8(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UploadRejected(
            f"the file is not UTF-8: invalid byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line})",
            [RowError(line=line, message="not UTF-8")],
        ) from None
    return text.removeprefix("\ufeff")


class _Collector:
    def __init__(self, settings: UploadSettings) -> None:
        self.settings = settings
        self.errors: list[RowError] = []
        self.error_count = 0
        self.docs: dict[str, Document] = {}
        self.rows = 0
        self.duplicates = 0

    def error(self, line: int | None, record: int | None, field: str | None, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < self.settings.max_errors:
            self.errors.append(RowError(line=line, record=record, field=field, message=message))

    def count_row(self) -> None:
        self.rows += 1
        if self.rows > self.settings.max_rows:
            raise UploadRejected(f"too many rows: more than {self.settings.max_rows} passages (the limit)")

    def add(self, line: int, record: int, title: str, text: str) -> None:
        s = self.settings
        ok = True
        if _SURROGATE.search(title) or _SURROGATE.search(text):
            self.error(line, record, "title" if _SURROGATE.search(title) else "text",
                       "holds a lone surrogate (such as \\ud800), which is not valid Unicode text")
            ok = False
        elif not text.strip():
            self.error(line, record, "text", "empty text")
            ok = False
        elif len(text) > s.max_text_chars:
            self.error(line, record, "text", f"{len(text)} characters; the limit is {s.max_text_chars}")
            ok = False
        if len(title) > s.max_title_chars:
            self.error(line, record, "title", f"{len(title)} characters; the limit is {s.max_title_chars}")
            ok = False
        if ok:
            doc = Document.make(title.strip(), text.strip())
            if doc.doc_id in self.docs:
                self.duplicates += 1
            else:
                self.docs[doc.doc_id] = doc

    def result(self, fmt: str) -> ParsedUpload:
        if self.error_count:
            first = self.errors[0].text()
            raise UploadRejected(
                f"{self.error_count} invalid row(s); the first: {first}", self.errors,
            )
        if not self.docs:
            raise UploadRejected("the file holds no passages")
        if not _searchable(self.docs.values()):
            raise UploadRejected("no passage has a searchable word: every word is a stop word, a number "
                                      "sign or punctuation, so nothing could ever be retrieved from this source")
        return ParsedUpload(format=fmt, docs=list(self.docs.values()), rows=self.rows, duplicates=self.duplicates)


def _searchable(docs: Iterable[Document], chunk: int = 256) -> bool:
    """True when some passage leaves a token after the BM25 tokenizer (stop words removed)."""
    from routerag.index.bm25 import BM25Tokenizer
    from routerag.index.settings import BM25Settings

    tokenize = BM25Tokenizer(BM25Settings())
    batch: list[str] = []
    for doc in docs:
        batch.append(doc.passage)
        if len(batch) == chunk:
            if any(tokenize(batch)):
                return True
            batch = []
    return bool(batch) and any(tokenize(batch))


def _parse_json(text: str, out: _Collector) -> None:
    decoder = json.JSONDecoder()
    n = len(text)
    line = 1
    counted = 0

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, pos)
        counted = pos
        return line

    def skip(pos: int) -> int:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        return pos

    def syntax(pos: int, message: str) -> UploadRejected:
        at = line_at(pos)
        return UploadRejected(f"invalid JSON at line {at}: {message}", [RowError(line=at, message=message)])

    i = skip(0)
    if i >= n or text[i] != "[":
        raise syntax(i, "expected a JSON list of {title, text} objects or strings at the top level")
    i = skip(i + 1)
    if i < n and text[i] == "]":
        i = skip(i + 1)
    else:
        record = 0
        while True:
            start = i
            try:
                value, end = decoder.raw_decode(text, i)
            except json.JSONDecodeError as exc:
                raise syntax(exc.pos, exc.msg) from None
            except RecursionError:
                raise syntax(i, "a record is nested too deeply") from None
            except ValueError as exc:  # an integer of more than 4,300 digits
                raise syntax(i, f"a value cannot be read ({exc})") from None
            at = line_at(start)
            out.count_row()
            if isinstance(value, str):
                out.add(at, record, "", value)
            elif isinstance(value, dict):
                title, body = value.get("title", ""), value.get("text")
                if body is None:
                    out.error(at, record, "text", "missing")
                elif not isinstance(body, str):
                    out.error(at, record, "text", f"expected a string, got {type(body).__name__}")
                elif not isinstance(title, str):
                    out.error(at, record, "title", f"expected a string, got {type(title).__name__}")
                else:
                    out.add(at, record, title, body)
            else:
                out.error(at, record, None, f"expected an object or a string, got {type(value).__name__}")
            record += 1
            i = skip(end)
            if i < n and text[i] == ",":
                i = skip(i + 1)
                continue
            if i < n and text[i] == "]":
                i = skip(i + 1)
                break
            raise syntax(i, "expected ',' or ']' after a record")
    if i != n:
        raise syntax(i, "extra data after the list")


def _parse_csv(text: str, out: _Collector) -> None:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None or not any(h.strip() for h in header):
            raise UploadRejected("empty CSV: a header row with a 'text' column is required",
                                 [RowError(line=1, message="no header")])
        columns = {h.strip().lower(): i for i, h in enumerate(header)}
        if "text" not in columns:
            raise UploadRejected(
                f"missing 'text' column: the header (line 1) has {', '.join(map(repr, header))}",
                [RowError(line=1, field="text", message="missing column")],
            )
        text_at, title_at = columns["text"], columns.get("title")
        record = 0
        line = reader.line_num + 1
        for row in reader:
            at = line
            line = reader.line_num + 1
            if not row or not any(cell.strip() for cell in row):
                continue  # blank line
            out.count_row()
            if len(row) != len(header):
                out.error(at, record, None, f"{len(row)} fields; the header has {len(header)}")
            else:
                out.add(at, record, row[title_at] if title_at is not None else "", row[text_at])
            record += 1
    except csv.Error as exc:
        raise UploadRejected(f"malformed CSV at line {reader.line_num}: {exc}",
                             [RowError(line=reader.line_num, message=str(exc))]) from None


def parse_upload(data: bytes, filename: str, content_type: str, settings: UploadSettings) -> ParsedUpload:
    """Validate an upload completely; raises :class:`UploadRejected` with the reason."""
    if len(data) > settings.max_bytes:
        raise UploadTooLargeError(f"the file is {len(data)} bytes; the limit is {settings.max_bytes}")
    fmt = detect_format(filename, content_type)
    text = decode_utf8(data)
    out = _Collector(settings)
    (_parse_json if fmt == "json" else _parse_csv)(text, out)
    return out.result(fmt)
