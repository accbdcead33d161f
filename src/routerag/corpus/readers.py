"""Streaming record readers for JSON, JSON lines and CSV files, with errors that say where.

Every reader yields ``(where, record)`` pairs, where ``where`` is a :class:`Where` naming the file
and the line (JSONL, CSV) or the record index (JSON). A file that is not valid UTF-8, a truncated
or malformed JSON document, or a CSV without a header raises :class:`CorpusFormatError` with
that location; loaders raise the same error for missing fields and wrong types.

A top-level JSON array or object is parsed one element at a time (``json.JSONDecoder.raw_decode``
over a growing buffer), so a corpus of millions of records is never held as one parsed tree.
"""

from __future__ import annotations

import codecs
import csv
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routerag.errors import RouteragError

CHUNK_CHARS = 1 << 20  # bytes read per step by the JSON reader (module-level so tests can shrink it)
_WHITESPACE = " \t\n\r"
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*")


@dataclass(frozen=True)
class Where:
    """A place in a file: ``line`` (1-based) for line formats, ``record`` (0-based) for JSON."""

    path: str
    line: int | None = None
    record: int | None = None
    key: str | None = None  # the key of a record in a top-level JSON object

    def __str__(self) -> str:
        if self.record is not None:
            key = f" ({self.key!r})" if self.key is not None else ""
            line = f", line {self.line}" if self.line is not None else ""
            return f"{self.path}: record {self.record}{key}{line}"
        if self.line is not None:
            return f"{self.path}: line {self.line}"
        return self.path


class CorpusFormatError(RouteragError, ValueError):
    """A corpus or question file that cannot be read as its format; the message names the file,
    the line or record, and the field."""

    def __init__(self, where: Where | str | Path, message: str, *, field: str | None = None) -> None:
        self.where = where if isinstance(where, Where) else Where(str(where))
        self.field = field
        self.reason = message
        prefix = f"{self.where}: field {field!r}: " if field else f"{self.where}: "
        super().__init__(prefix + message)


def open_checked(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise CorpusFormatError(path, "no such file")
    if path.is_dir():
        raise CorpusFormatError(path, "is a directory, not a file")
    return path


def _decode_line(raw: bytes, where: Where) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusFormatError(
            where, f"not valid UTF-8 (byte {raw[exc.start]:#04x} at column {exc.start + 1})"
        ) from None


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Decoded lines with 1-based numbers; a byte-order mark on the first line is dropped."""
    path = open_checked(path)
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            yield lineno, _decode_line(raw, Where(str(path), line=lineno))


def iter_jsonl(path: str | Path) -> Iterator[tuple[Where, Any]]:
    """One JSON value per non-blank line."""
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        where = Where(str(path), line=lineno)
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusFormatError(where, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        yield where, value


def iter_csv(path: str | Path, *, delimiter: str | None = None) -> Iterator[tuple[Where, dict[str, str]]]:
    """Rows of a CSV (or, for ``.tsv`` files, tab-separated) file with a header row, as dicts."""
    path = open_checked(path)
    if delimiter is None:
        delimiter = "\t" if path.suffix.lower() in {".tsv", ".tab"} else ","
    # passages can be long; the stdlib default of 128 KiB per field is too small for some corpora
    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 1 << 30)))
    reader = csv.reader((line for _, line in iter_lines(path)), delimiter=delimiter)
    try:
        header = next(reader, None)
        if header is None:
            raise CorpusFormatError(Where(str(path), line=1), "empty file: a header row is required")
        header = [h.strip() for h in header]
        if len(set(header)) != len(header):
            raise CorpusFormatError(Where(str(path), line=1), f"repeated column names in header {header}")
        for row in reader:
            where = Where(str(path), line=reader.line_num)
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != len(header):
                raise CorpusFormatError(where, f"has {len(row)} fields; the header has {len(header)}")
            yield where, dict(zip(header, row))
    except csv.Error as exc:
        raise CorpusFormatError(Where(str(path), line=reader.line_num), f"malformed CSV: {exc}") from None


class _JsonStream:
    """Incremental reader of one top-level JSON array or object."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle = path.open("rb")
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.json = json.JSONDecoder()
        self.buf = ""
        self.pos = 0
        self.lines_before = 0  # newlines before buf[counted]
        self.counted = 0  # buffer position up to which newlines are counted (kept monotonic: O(n) overall)
        self.bytes_read = 0
        self.eof = False
        self.bad_utf8: int | None = None  # byte offset of the first invalid byte, once reached
        self.record = 0
        self.key: str | None = None

    def close(self) -> None:
        self.handle.close()

    def where(self, at: int | None = None) -> Where:
        at = self.pos if at is None else at
        if at >= self.counted:
            self.lines_before += self.buf.count("\n", self.counted, at)
            self.counted = at
            line = self.lines_before + 1
        else:
            line = self.lines_before - self.buf.count("\n", at, self.counted) + 1
        return Where(str(self.path), line=line, record=self.record, key=self.key)

    def fail(self, message: str, at: int | None = None) -> CorpusFormatError:
        return CorpusFormatError(self.where(at), message)

    def more(self, size: int | None = None) -> bool:
        """Append at least one more chunk to the buffer; False at the end of the file."""
        size = size or CHUNK_CHARS
        if self.eof:
            if self.bad_utf8 is not None:
                raise self.fail(f"not valid UTF-8 (invalid byte at offset {self.bad_utf8})", len(self.buf))
            return False
        chunk = self.handle.read(size)
        final = not chunk
        try:
            text = self.decoder.decode(chunk, final=final)
        except UnicodeDecodeError as exc:
            pending = len(exc.object) - len(chunk)
            self.bad_utf8 = self.bytes_read - pending + exc.start
            text = exc.object[: exc.start].decode("utf-8", errors="ignore")
            final = True
        self.bytes_read += len(chunk)
        if self.pos:
            self.where(self.pos)  # count the newlines about to be dropped
            self.buf = self.buf[self.pos :]
            self.counted -= self.pos
            self.pos = 0
        self.buf += text
        self.eof = final
        # after an invalid byte, report "more" once so that the next call raises the UTF-8 error
        return bool(text) or not final or self.bad_utf8 is not None

    def skip_ws(self) -> str:
        """The next non-whitespace character ('' at the end of the file), not consumed."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def value(self) -> Any:
        size = CHUNK_CHARS
        while True:
            try:
                value, end = self.json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # an error at the end of the buffer may only mean the value continues in the next chunk
                incomplete = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.buf) - 6
                if not incomplete:
                    raise self.fail(f"not valid JSON ({exc.msg})", exc.pos) from None
                if self.more(size):
                    size *= 2  # a value larger than the buffer: grow geometrically, not one chunk at a time
                    continue
                raise self.fail(f"truncated JSON ({exc.msg})", exc.pos) from None
            if not self.eof and type(value) in (int, float) and _NUMBER_TAIL.fullmatch(self.buf, end):
                self.more(size)  # "12" of "12.5e3": a number may continue in the next chunk
                continue
            self.pos = end
            return value

    def expect(self, chars: str, what: str) -> str:
        char = self.skip_ws()
        if char == "":
            raise self.fail(f"truncated JSON (expected {what})")
        if char not in chars:
            raise self.fail(f"not valid JSON (expected {what}, found {char!r})")
        self.pos += 1
        return char

    def items(self) -> Iterator[tuple[Where, Any]]:
        opener = self.skip_ws()
        if opener == "":
            raise self.fail("empty file")
        if opener not in "[{":
            raise self.fail("the top level must be a JSON list or object")
        self.pos += 1
        closer = "]" if opener == "[" else "}"
        first = True
        while True:
            char = self.skip_ws()
            if char == closer:
                self.pos += 1
                break
            if not first:
                self.expect(",", f"',' or '{closer}'")
            first = False
            if opener == "{":
                if self.skip_ws() != '"':
                    if self.skip_ws() == "":
                        raise self.fail("truncated JSON (expected a key)")
                    raise self.fail("not valid JSON (expected a quoted key)")
                self.key = self.value()
                self.expect(":", "':'")
            if self.skip_ws() == "":
                raise self.fail("truncated JSON (expected a value)")
            where = self.where()
            value = self.value()
            yield where, value
            self.record += 1
            self.key = None
        if self.skip_ws() != "":
            raise self.fail("extra data after the top-level JSON value")


def iter_json(path: str | Path) -> Iterator[tuple[Where, Any]]:
    """The elements of a top-level JSON list, or the values of a top-level JSON object (the key is
    in ``where.key``), parsed one at a time."""
    stream = _JsonStream(open_checked(path))
    try:
        yield from stream.items()
    finally:
        stream.close()


def json_top_kind(path: str | Path) -> str:
    """'list' or 'object' for a JSON file, read from its first non-blank character."""
    path = open_checked(path)
    with path.open("rb") as handle:
        head = handle.read(4096).lstrip(codecs.BOM_UTF8).lstrip()
    if head[:1] == b"[":
        return "list"
    if head[:1] == b"{":
        return "object"
    raise CorpusFormatError(Where(str(path), record=0), "the top level must be a JSON list or object")
