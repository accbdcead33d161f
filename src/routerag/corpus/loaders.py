"""Loaders for the public corpus and question formats, producing :class:`Document` / :class:`Question`.

Corpus formats (``load_corpus(path, format=...)``; ``"auto"`` detects from the file):

============== =====================================================================================
``hipporag``   JSON list of ``{title, text}`` (HippoRAG / RouteRAG / RealRoute corpora)
``jsonl``      JSON lines of ``{text[, title]}``
``flashrag``   JSON lines of ``{id, contents}``, ``contents`` = ``"Title"\\ntext`` (FlashRAG, Search-R1)
``csv``        CSV/TSV with a ``text`` column and an optional ``title`` column
``hotpotqa-corpus`` JSON object ``title -> [sentences]``
``openie``     a HippoRAG OpenIE results file ``{"docs": [{title, text, ...}]}`` (its passages)
``musique`` / ``hotpotqa`` / ``popqa``  the passages embedded in a question file of that format
``table-csv`` / ``table-json``  tables, one document per linearised row (see :mod:`.tables`)
============== =====================================================================================

Question formats (``load_questions(path, format=...)``): ``qa`` (JSON/JSONL ``{question, answer |
answers | golden_answers}``: 2Wiki as released with HippoRAG 2, FlashRAG), ``musique``, ``hotpotqa``,
``realroute`` (``law-med_qa.json``), ``popqa`` (as published with RouteRAG: ``possible_answers`` is a
JSON *string*), ``searchr1-parquet`` (verl / Search-R1 training parquet, RouteRAG's released
training questions: the question is the end of the prompt, the answers ``reward_model``'s targets).

Loading is explicit about what it drops: documents with the same title and text (hence the same
``doc_id``) after the first are counted as duplicates, blank texts as empty, and both are reported
in the :class:`LoadReport` returned with the documents. Anything malformed raises
:class:`CorpusFormatError` naming the file, the line or record and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel

from routerag.corpus.readers import (
    CorpusFormatError,
    Where,
    iter_csv,
    iter_json,
    iter_jsonl,
    json_top_kind,
    open_checked,
)
from routerag.corpus.schema import Document, Question, SubQuestion, doc_id_for
from routerag.registry import Registry, instances_of

__all__ = [
    "CORPUS_FORMATS",
    "QUESTION_FORMATS",
    "CorpusFormat",
    "CorpusFormatError",
    "LoadReport",
    "LoadedCorpus",
    "QuestionFormat",
    "RawPassage",
    "attach_supporting_docs",
    "detect_corpus_format",
    "detect_question_format",
    "iter_documents",
    "iter_questions",
    "load_corpus",
    "load_questions",
]


class RawPassage(NamedTuple):
    """A passage as read from a file, before empty/duplicate handling."""

    where: Where
    title: str
    text: str
    metadata: dict[str, Any]


class LoadReport(BaseModel):
    """What a corpus load kept and what it skipped, and why."""

    path: str
    format: str
    source: str = "default"
    loaded: int = 0
    duplicates: int = 0  # same title and text (same doc_id) as an earlier record
    empty: int = 0  # blank text

    @property
    def records(self) -> int:
        return self.loaded + self.duplicates + self.empty

    def summary(self) -> str:
        return (
            f"{self.path} ({self.format}): {self.loaded} documents loaded, "
            f"{self.duplicates} duplicates and {self.empty} empty texts skipped"
        )


class LoadedCorpus(NamedTuple):
    docs: list[Document]
    report: LoadReport


@dataclass(frozen=True)
class CorpusFormat:
    name: str
    description: str
    read: Callable[[Path], Iterator[RawPassage]]


@dataclass(frozen=True)
class QuestionFormat:
    name: str
    description: str
    read: Callable[[Path, str], Iterator[Question]]  # (path, dataset name) -> questions


CORPUS_FORMATS: Registry[CorpusFormat] = Registry("corpus format", instances_of(CorpusFormat))
QUESTION_FORMATS: Registry[QuestionFormat] = Registry("question format", instances_of(QuestionFormat))


# ---------------------------------------------------------------------------------------------
# field access with located errors


def _record(value: Any, where: Where) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CorpusFormatError(where, f"expected a JSON object, got {_type(value)}")
    return value


def _type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer", float: "a number"}
    return names.get(type(value), "null" if value is None else f"a {type(value).__name__}")


def _missing(rec: dict[str, Any], name: str, where: Where) -> CorpusFormatError:
    keys = ", ".join(sorted(map(str, rec))) or "none"
    return CorpusFormatError(where, f"missing (the record has: {keys})", field=name)


def _str(rec: dict[str, Any], name: str, where: Where, *, required: bool = True, default: str = "") -> str:
    if name not in rec:
        if required:
            raise _missing(rec, name, where)
        return default
    value = rec[name]
    if not isinstance(value, str):
        raise CorpusFormatError(where, f"expected a string, got {_type(value)}", field=name)
    return value


def _list(rec: dict[str, Any], name: str, where: Where, *, required: bool = True) -> list[Any]:
    if name not in rec:
        if required:
            raise _missing(rec, name, where)
        return []
    value = rec[name]
    if not isinstance(value, list):
        raise CorpusFormatError(where, f"expected a list, got {_type(value)}", field=name)
    return value


def _answer_text(value: Any, where: Where, field: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise CorpusFormatError(where, f"expected a string answer, got {_type(value)}", field=field)
    return str(value)


def _clean_answer(answer: str) -> str:
    """Trim whitespace and a stray double quote left on a line of its own (RealRoute's law-med
    answers include ``'Urinary output\\n"'``); quotes that belong to the answer (``5'10"``) stay."""
    cleaned = answer.strip()
    if cleaned.count('"') % 2 == 1:
        cleaned = re.sub(r'\s+"$', "", cleaned)
    return cleaned


def _answers(rec: dict[str, Any], where: Where, keys: Iterable[str] = ("answer", "answers", "golden_answers")) -> list[str]:
    """Canonical answer first, then aliases (``answer_aliases``), deduplicated in order."""
    found: list[str] = []
    present = False
    for key in (*keys, "answer_aliases"):
        if key not in rec:
            continue
        present = present or key != "answer_aliases"
        value = rec[key]
        items = value if isinstance(value, list) else [value]
        for item in items:
            found.append(_answer_text(item, where, key))
    if not present:
        raise _missing(rec, next(iter(keys)), where)
    answers = list(dict.fromkeys(a for a in map(_clean_answer, found) if a))
    if not answers:
        raise CorpusFormatError(where, "no non-empty answer", field=next(iter(keys)))
    return answers


def _qid(rec: dict[str, Any], where: Where, dataset: str) -> str:
    for key in ("id", "_id", "qid"):
        if key in rec:
            value = rec[key]
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise CorpusFormatError(where, f"expected a string or integer id, got {_type(value)}", field=key)
            return str(value)
    index = where.record if where.record is not None else (where.line or 1) - 1
    return f"{dataset}-{index}"


def _records(path: Path) -> Iterator[tuple[Where, Any]]:
    """JSON lines for ``.jsonl`` files, else the elements of a top-level JSON list."""
    if path.suffix.lower() in {".jsonl", ".ndjson"}:
        yield from iter_jsonl(path)
        return
    if json_top_kind(path) != "list":
        raise CorpusFormatError(Where(str(path)), "expected a JSON list of records at the top level")
    yield from iter_json(path)


# ---------------------------------------------------------------------------------------------
# corpus formats


def _read_title_text(path: Path) -> Iterator[RawPassage]:
    for where, value in _records(path):
        rec = _record(value, where)
        if "text" not in rec and "contents" in rec:
            raise CorpusFormatError(where, "missing; this looks like FlashRAG JSONL (use format='flashrag')", field="text")
        rid = rec.get("id")
        meta = {"orig_id": str(rid)} if isinstance(rid, str | int) and not isinstance(rid, bool) else {}
        yield RawPassage(where, _str(rec, "title", where, required=False), _str(rec, "text", where), meta)


def _read_flashrag(path: Path) -> Iterator[RawPassage]:
    for where, value in _records(path):
        rec = _record(value, where)
        contents = _str(rec, "contents", where)
        title, sep, text = contents.partition("\n")
        if not sep:  # no title line
            title, text = "", contents
        title = title.strip()
        if len(title) >= 2 and title[0] == title[-1] == '"':
            title = title[1:-1]
        meta = {"orig_id": str(rec["id"])} if "id" in rec else {}
        yield RawPassage(where, title, text, meta)


def _read_csv(path: Path) -> Iterator[RawPassage]:
    columns: dict[str, str] | None = None
    for where, row in iter_csv(path):
        if columns is None:
            columns = {name.lower(): name for name in row}
            if "text" not in columns:
                hint = " (for a table of facts use format='table-csv')" if len(row) > 1 else ""
                raise CorpusFormatError(
                    Where(str(path), line=1),
                    f"no 'text' column; the header has: {', '.join(row)}{hint}",
                    field="text",
                )
        text = row[columns["text"]]
        title = row[columns["title"]] if "title" in columns else ""
        meta = {k: v for k, v in row.items() if k.lower() not in {"text", "title"} and v != ""}
        yield RawPassage(where, title, text, meta)


def _read_hotpotqa_corpus(path: Path) -> Iterator[RawPassage]:
    if json_top_kind(path) != "object":
        raise CorpusFormatError(Where(str(path)), "expected a JSON object mapping title -> [sentences]")
    for where, value in iter_json(path):
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise CorpusFormatError(where, f"expected a list of sentence strings, got {_type(value)}", field=where.key)
        yield RawPassage(where, where.key or "", "".join(value), {})


def _read_openie(path: Path) -> Iterator[RawPassage]:
    if json_top_kind(path) != "object":
        raise CorpusFormatError(Where(str(path)), "expected a JSON object with a 'docs' list (HippoRAG OpenIE results)")
    for where, value in iter_json(path):
        if where.key != "docs":
            continue
        if not isinstance(value, list):
            raise CorpusFormatError(where, f"expected a list, got {_type(value)}", field="docs")
        for i, item in enumerate(value):
            at = Where(where.path, record=i, key="docs")
            rec = _record(item, at)
            yield RawPassage(at, _str(rec, "title", at, required=False), _str(rec, "text", at), {})
        return
    raise CorpusFormatError(Where(str(path)), "no 'docs' list", field="docs")


def _musique_paragraph(item: Any, where: Where, i: int) -> tuple[int, str, str, bool]:
    at = Where(where.path, line=where.line, record=where.record, key=f"paragraphs[{i}]")
    rec = _record(item, at)
    idx = rec.get("idx", i)
    if isinstance(idx, bool) or not isinstance(idx, int):
        raise CorpusFormatError(at, f"expected an integer, got {_type(idx)}", field="idx")
    text_key = "paragraph_text" if "paragraph_text" in rec or "text" not in rec else "text"
    supporting = rec.get("is_supporting", False)
    return idx, _str(rec, "title", at), _str(rec, text_key, at), supporting is True


def _read_musique_passages(path: Path) -> Iterator[RawPassage]:
    for where, value in _records(path):
        rec = _record(value, where)
        for i, item in enumerate(_list(rec, "paragraphs", where)):
            _, title, text, _ = _musique_paragraph(item, where, i)
            yield RawPassage(where, title, text, {})


def _hotpot_contexts(rec: dict[str, Any], where: Where) -> list[tuple[str, str]]:
    """``context`` as (title, text), in either serialisation of HotpotQA: the original list of
    ``[title, [sentences]]`` or the HF ``hotpot_qa`` columns ``{title: [...], sentences: [[...]]}``.
    HotpotQA sentences carry their own leading spaces and are joined with ``""``;
    2WikiMultihopQA's (recognised by its ``evidences`` field) are joined with ``" "``."""
    joiner = " " if "evidences" in rec else ""
    return [(title, joiner.join(sentences)) for title, sentences in _hotpot_paragraphs(rec, where)]


def _hotpot_paragraphs(rec: dict[str, Any], where: Where) -> list[tuple[str, list[str]]]:
    """``context`` as (title, sentences), from the list or the HF column serialisation."""
    raw = rec.get("context")
    if isinstance(raw, dict):
        titles, sentences = _list(raw, "title", where), _list(raw, "sentences", where)
        if len(titles) != len(sentences):
            raise CorpusFormatError(where, f"{len(titles)} titles but {len(sentences)} sentence lists", field="context")
        items: list[Any] = [[t, s] for t, s in zip(titles, sentences)]
    else:
        items = _list(rec, "context", where)
    paragraphs = []
    for i, item in enumerate(items):
        if (
            not isinstance(item, list)
            or len(item) != 2
            or not isinstance(item[0], str)
            or not isinstance(item[1], list)
            or not all(isinstance(s, str) for s in item[1])
        ):
            raise CorpusFormatError(where, f"entry {i}: expected [title, [sentences]]", field="context")
        paragraphs.append((item[0], item[1]))
    return paragraphs


def _hotpot_supporting_facts(rec: dict[str, Any], where: Where) -> list[tuple[str, int]]:
    """``supporting_facts`` as (title, sentence index): the original ``[[title, i], ...]`` or the HF
    columns ``{title: [...], sent_id: [...]}``."""
    raw = rec.get("supporting_facts")
    if isinstance(raw, dict):
        titles, sent_ids = _list(raw, "title", where), _list(raw, "sent_id", where)
        if len(titles) != len(sent_ids):
            raise CorpusFormatError(where, f"{len(titles)} titles but {len(sent_ids)} sentence ids", field="supporting_facts")
        items: list[Any] = [[t, i] for t, i in zip(titles, sent_ids)]
    else:
        items = _list(rec, "supporting_facts", where)
    facts = []
    for i, fact in enumerate(items):
        if (
            not isinstance(fact, list)
            or len(fact) != 2
            or not isinstance(fact[0], str)
            or isinstance(fact[1], bool)
            or not isinstance(fact[1], int)
        ):
            raise CorpusFormatError(where, f"entry {i}: expected [title, sentence_index]", field="supporting_facts")
        facts.append((fact[0], fact[1]))
    return facts


def _read_hotpotqa_passages(path: Path) -> Iterator[RawPassage]:
    for where, value in _records(path):
        for title, text in _hotpot_contexts(_record(value, where), where):
            yield RawPassage(where, title, text, {})


def _popqa_paragraphs(rec: dict[str, Any], where: Where) -> list[tuple[str, str, bool]]:
    out = []
    for i, item in enumerate(_list(rec, "paragraphs", where)):
        at = Where(where.path, line=where.line, record=where.record, key=f"paragraphs[{i}]")
        para = _record(item, at)
        text_key = "text" if "text" in para or "paragraph_text" not in para else "paragraph_text"
        # RouteRAG's gold documents: every paragraph not explicitly marked unsupporting
        out.append((_str(para, "title", at, required=False), _str(para, text_key, at), para.get("is_supporting", True) is not False))
    return out


def _read_popqa_passages(path: Path) -> Iterator[RawPassage]:
    for where, value in _records(path):
        for title, text, _ in _popqa_paragraphs(_record(value, where), where):
            yield RawPassage(where, title, text, {})


# ---------------------------------------------------------------------------------------------
# question formats


def _read_qa(path: Path, dataset: str) -> Iterator[Question]:
    for where, value in _records(path):
        rec = _record(value, where)
        meta = {k: rec[k] for k in ("type", "level") if isinstance(rec.get(k), str)}
        yield Question(
            qid=_qid(rec, where, dataset),
            question=_str(rec, "question", where),
            answers=_answers(rec, where),
            dataset=dataset,
            metadata=meta,
        )


def _read_musique(path: Path, dataset: str) -> Iterator[Question]:
    for where, value in _records(path):
        rec = _record(value, where)
        by_idx: dict[int, str] = {}
        supporting: list[str] = []
        for i, item in enumerate(_list(rec, "paragraphs", where)):
            idx, title, text, is_supporting = _musique_paragraph(item, where, i)
            by_idx[idx] = doc_id_for(title, text)
            if is_supporting:
                supporting.append(by_idx[idx])
        hops = []
        for i, item in enumerate(_list(rec, "question_decomposition", where, required=False)):
            at = Where(where.path, line=where.line, record=where.record, key=f"question_decomposition[{i}]")
            step = _record(item, at)
            support = step.get("paragraph_support_idx")
            if support is not None and (isinstance(support, bool) or not isinstance(support, int)):
                raise CorpusFormatError(at, f"expected an integer or null, got {_type(support)}", field="paragraph_support_idx")
            if support is not None and support not in by_idx:
                raise CorpusFormatError(at, f"{support} is not the idx of any paragraph", field="paragraph_support_idx")
            hops.append(
                SubQuestion(
                    question=_str(step, "question", at),
                    answer=_answer_text(step.get("answer", ""), at, "answer"),
                    supporting_doc_ids=[by_idx[support]] if support is not None else [],
                )
            )
        meta: dict[str, Any] = {"hops": len(hops)}
        if isinstance(rec.get("answerable"), bool):
            meta["answerable"] = rec["answerable"]
        yield Question(
            qid=_qid(rec, where, dataset),
            question=_str(rec, "question", where),
            answers=_answers(rec, where, keys=("answer",)),
            dataset=dataset,
            decomposition=hops,
            supporting_doc_ids=supporting,
            metadata=meta,
        )


def _read_hotpotqa(path: Path, dataset: str) -> Iterator[Question]:
    """HotpotQA questions (original or HF ``hotpot_qa`` serialisation). ``supporting_doc_ids`` are
    the context paragraphs the supporting facts name; ``metadata`` keeps ``type``/``level``, the
    supporting titles and the facts themselves (``[[title, sentence index], ...]``)."""
    for where, value in _records(path):
        rec = _record(value, where)
        contexts = _hotpot_contexts(rec, where)
        ids_by_title: dict[str, list[str]] = {}
        for title, text in contexts:
            ids_by_title.setdefault(title, []).append(doc_id_for(title, text))
        facts = _hotpot_supporting_facts(rec, where)
        titles = list(dict.fromkeys(title for title, _ in facts))
        supporting = [doc_id for t in titles for doc_id in ids_by_title.get(t, [])]
        meta: dict[str, Any] = {k: rec[k] for k in ("type", "level") if isinstance(rec.get(k), str)}
        meta["supporting_titles"] = titles
        meta["supporting_facts"] = [[title, index] for title, index in facts]
        yield Question(
            qid=_qid(rec, where, dataset),
            question=_str(rec, "question", where),
            answers=_answers(rec, where, keys=("answer",)),
            dataset=dataset,
            supporting_doc_ids=list(dict.fromkeys(supporting)),
            metadata=meta,
        )


def _read_realroute(path: Path, dataset: str) -> Iterator[Question]:
    """RealRoute / DeepSieve multi-source questions. ``type`` such as ``singlehop_law`` names the
    source that holds the answer (``law``); ``context`` titles name the supporting documents, which
    :func:`attach_supporting_docs` resolves against the loaded sources."""
    for where, value in _records(path):
        rec = _record(value, where)
        kind = _str(rec, "type", where, required=False)
        titles = []
        for i, item in enumerate(_list(rec, "context", where, required=False)):
            if not isinstance(item, list) or not item or not isinstance(item[0], str):
                raise CorpusFormatError(where, f"entry {i}: expected [title, [sentences]]", field="context")
            titles.append(item[0])
        meta: dict[str, Any] = {"supporting_titles": titles}
        if kind:
            meta["type"] = kind
        yield Question(
            qid=_qid(rec, where, dataset),
            question=_str(rec, "question", where),
            answers=_answers(rec, where),
            dataset=dataset,
            gold_source=kind.rsplit("_", 1)[-1] if "_" in kind else None,
            metadata=meta,
        )


def _read_popqa(path: Path, dataset: str) -> Iterator[Question]:
    for where, value in _records(path):
        rec = _record(value, where)
        raw = rec.get("possible_answers")
        if raw is None:
            raise _missing(rec, "possible_answers", where)
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError:
                raise CorpusFormatError(where, "expected a JSON-encoded list of strings", field="possible_answers") from None
        if not isinstance(raw, list):
            raise CorpusFormatError(where, f"expected a list of answers, got {_type(raw)}", field="possible_answers")
        obj = [rec["obj"]] if isinstance(rec.get("obj"), str) else []
        answers = _answers({"possible_answers": [*obj, *raw]}, where, keys=("possible_answers",))
        supporting = [doc_id_for(t, x) for t, x, gold in _popqa_paragraphs(rec, where) if gold]
        meta = {k: rec[k] for k in ("subj", "prop", "obj") if isinstance(rec.get(k), str)}
        if isinstance(rec.get("s_pop"), int):
            meta["s_pop"] = rec["s_pop"]
        yield Question(
            qid=_qid(rec, where, dataset),
            question=_str(rec, "question", where),
            answers=answers,
            dataset=dataset,
            supporting_doc_ids=list(dict.fromkeys(supporting)),
            metadata=meta,
        )


def _read_r1router_steps(path: Path, dataset: str) -> Iterator[Question]:
    """R1-Router Step-GRPO trajectories ``{images, steps: [{step_type, system, problem, answer}]}``:
    one question per decompose-and-route step (``step_type: ret``). ``question`` is the step's
    user prompt (origin question + sub-questions and answers so far), ``answers`` the gold
    sub-question, ``gold_source`` the gold retriever ("Text Retriever", ...; "None" where the gold
    step ends the decomposition)."""
    for where, value in _records(path):
        rec = _record(value, where)
        steps = _list(rec, "steps", where)
        index = where.record if where.record is not None else (where.line or 1) - 1
        for i, raw in enumerate(steps):
            if not isinstance(raw, dict):
                raise CorpusFormatError(where, f"step {i}: expected a JSON object, got {_type(raw)}", field="steps")
            if raw.get("step_type") != "ret":
                continue
            gold = raw.get("answer")
            if not isinstance(gold, dict):
                raise CorpusFormatError(where, f"step {i}: expected answer {{query, retriever}}, got {_type(gold)}", field="steps")
            query = gold.get("query")
            retrievers = gold.get("retriever") or []
            if not isinstance(query, str) or not isinstance(retrievers, list) or not all(isinstance(r, str) for r in retrievers):
                raise CorpusFormatError(where, f"step {i}: expected answer.query a string and answer.retriever a list of strings", field="steps")
            problem = raw.get("problem")
            if not isinstance(problem, str) or not problem.strip():
                raise CorpusFormatError(where, f"step {i}: expected a non-empty problem string", field="steps")
            retriever = retrievers[0].strip() if retrievers else "None"
            query = " ".join(query.split())
            yield Question(
                qid=f"{dataset}-{index}-{i}",
                question=problem.strip(),
                answers=[query or "None"],
                dataset=dataset,
                # the released labels are lower case ("text retriever"); the prompt offers title case
                gold_source="None" if retriever.lower() in {"", "none"} else retriever.title(),
                metadata={"trajectory": index, "step": i, "images": len(rec.get("images") or [])},
            )


def _read_searchr1_parquet(path: Path, dataset: str) -> Iterator[Question]:
    """verl / Search-R1 parquet rows ``{data_source, prompt[{role, content}], reward_model{ground_truth
    {target[]}}, extra_info{index, original_id, split, supporting_facts (JSON string)}}``: the
    question is the text after the last ``Question:`` of the user prompt (RouteRAG's released
    prompts end with it). Needs ``pyarrow`` (the ``train`` extra)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the install
        raise CorpusFormatError(Where(str(path)), "reading parquet needs pyarrow: pip install 'routerag[train]'") from None
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise CorpusFormatError(Where(str(path)), f"not a readable parquet file ({exc})") from None
    for i, rec in enumerate(table.to_pylist()):
        where = Where(str(path), record=i)
        prompt = _list(rec, "prompt", where)
        users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        if not users or not isinstance(users[-1], str):
            raise CorpusFormatError(where, "no user message with text content", field="prompt")
        _, mark, question = users[-1].rpartition("Question:")
        if not mark or not question.strip():
            raise CorpusFormatError(where, "the user prompt has no 'Question: ...'", field="prompt")
        reward = rec.get("reward_model") if isinstance(rec.get("reward_model"), dict) else {}
        truth = reward.get("ground_truth") if isinstance(reward.get("ground_truth"), dict) else {}
        answers = _answers({"answers": truth.get("target")}, where, keys=("answers",)) if truth.get("target") else None
        if answers is None:
            raise CorpusFormatError(where, "no answer targets", field="reward_model")
        extra = rec.get("extra_info") if isinstance(rec.get("extra_info"), dict) else {}
        meta: dict[str, Any] = {k: extra[k] for k in ("split", "index") if isinstance(extra.get(k), str)}
        if isinstance(rec.get("data_source"), str):
            meta["data_source"] = rec["data_source"]
        facts_raw = extra.get("supporting_facts")
        if isinstance(facts_raw, str) and facts_raw:
            try:
                facts = json.loads(facts_raw)
            except json.JSONDecodeError:
                raise CorpusFormatError(where, "expected a JSON-encoded list of [title, sentence]", field="supporting_facts") from None
            meta["supporting_facts"] = facts
            meta["supporting_titles"] = list(dict.fromkeys(f[0] for f in facts if isinstance(f, list) and f and isinstance(f[0], str)))
        qid = extra.get("original_id") if isinstance(extra.get("original_id"), str) and extra.get("original_id") else f"{dataset}-{i}"
        yield Question(qid=qid, question=" ".join(question.split()), answers=answers, dataset=dataset, metadata=meta)


def _register_builtins() -> None:
    corpus = [
        ("hipporag", "JSON list of {title, text}", _read_title_text),
        ("jsonl", "JSON lines of {text[, title]}", _read_title_text),
        ("flashrag", 'JSON lines of {id, contents}; contents = "Title"\\ntext', _read_flashrag),
        ("csv", "CSV/TSV with a header, a 'text' column and an optional 'title' column", _read_csv),
        ("hotpotqa-corpus", "JSON object title -> [sentences]", _read_hotpotqa_corpus),
        ("openie", "HippoRAG OpenIE results {docs: [{title, text, ...}]}", _read_openie),
        ("musique", "the paragraphs of a MuSiQue question file", _read_musique_passages),
        ("hotpotqa", "the context passages of a HotpotQA question file", _read_hotpotqa_passages),
        ("popqa", "the paragraphs of a PopQA question file", _read_popqa_passages),
    ]
    for name, description, read in corpus:
        CORPUS_FORMATS.register(name, CorpusFormat(name, description, read))
    CORPUS_FORMATS.register("table-csv", "routerag.corpus.tables:TABLE_CSV_FORMAT")
    CORPUS_FORMATS.register("table-json", "routerag.corpus.tables:TABLE_JSON_FORMAT")
    questions = [
        ("qa", "JSON/JSONL {question, answer | answers | golden_answers[, id]}", _read_qa),
        ("musique", "MuSiQue {id, question, answer, answer_aliases, question_decomposition, paragraphs}", _read_musique),
        ("hotpotqa", "HotpotQA {question, answer, supporting_facts, context}, original or HF hotpot_qa columns", _read_hotpotqa),
        ("realroute", "RealRoute/DeepSieve {_id, type, question, answer, context}", _read_realroute),
        ("popqa", "PopQA as published with RouteRAG {question, possible_answers (JSON string), paragraphs}", _read_popqa),
        ("r1router-steps", "R1-Router step-wise trajectories {images, steps}: one question per retrieval step", _read_r1router_steps),
        ("searchr1-parquet", "verl / Search-R1 parquet {prompt, reward_model.ground_truth.target, extra_info} (no passages)",
         _read_searchr1_parquet),
    ]
    for name, description, read in questions:
        QUESTION_FORMATS.register(name, QuestionFormat(name, description, read))


_register_builtins()


# ---------------------------------------------------------------------------------------------
# detection


def _first_record(path: Path) -> tuple[str, Any]:
    """('jsonl' | 'list' | 'object', first record or (key, value)) of a JSON/JSONL file."""
    if path.suffix.lower() in {".jsonl", ".ndjson"}:
        for _, value in iter_jsonl(path):
            return "jsonl", value
        raise CorpusFormatError(path, "empty file")
    kind = json_top_kind(path)
    items = iter_json(path)
    try:
        for where, value in items:
            return kind, (where.key, value) if kind == "object" else value
    finally:
        items.close()
    raise CorpusFormatError(path, f"empty JSON {kind}")


def _question_format_of(rec: dict[str, Any]) -> str | None:
    if "question" not in rec and isinstance(rec.get("steps"), list) and any(
        isinstance(st, dict) and "step_type" in st for st in rec["steps"]
    ):
        return "r1router-steps"
    if "question" not in rec:
        return None
    if "question_decomposition" in rec or any(isinstance(p, dict) and "paragraph_text" in p for p in rec.get("paragraphs", []) or []):
        return "musique"
    if "supporting_facts" in rec and "context" in rec:
        return "hotpotqa"
    if "possible_answers" in rec:
        return "popqa"
    if "type" in rec and "context" in rec:
        return "realroute"
    return "qa"


def _describe(rec: Any) -> str:
    return f"keys {sorted(rec)}" if isinstance(rec, dict) else _type(rec)


def detect_corpus_format(path: str | Path) -> str:
    """The corpus format of a file, from its extension and first record."""
    path = open_checked(path)
    suffix = path.suffix.lower()
    if suffix in {".csv", ".tsv", ".tab"}:
        return "csv"
    if suffix not in {".json", ".jsonl", ".ndjson"}:
        raise CorpusFormatError(path, f"cannot detect the format of a {suffix or 'suffix-less'} file; name one of: {', '.join(CORPUS_FORMATS.names())}")
    kind, first = _first_record(path)
    if kind == "object":
        key, value = first
        if key == "docs":
            return "openie"
        if key in {"tables", "header", "rows", "caption", "table_name", "section_title"} or (key == "title" and isinstance(value, str)):
            return "table-json"
        if isinstance(value, list) and all(isinstance(s, str) for s in value):
            return "hotpotqa-corpus"
        raise CorpusFormatError(path, "unrecognised JSON object (expected title -> [sentences], an OpenIE file or a table)")
    if isinstance(first, dict):
        qformat = _question_format_of(first)
        if qformat is not None:
            if qformat in CORPUS_FORMATS and qformat != "qa":
                return qformat
            raise CorpusFormatError(path, f"is a question file ({qformat}) without passages; load it with load_questions")
        if "contents" in first:
            return "flashrag"
        if "header" in first and "rows" in first:
            return "table-json"
        if "text" in first:
            return "jsonl" if kind == "jsonl" else "hipporag"
    raise CorpusFormatError(path, f"unrecognised corpus records ({_describe(first)}); expected {{title, text}}, {{id, contents}} or a question file with passages")


def detect_question_format(path: str | Path) -> str:
    """The question format of a JSON/JSONL file, from its first record (a ``.parquet`` file:
    ``searchr1-parquet``)."""
    path = open_checked(path)
    if path.suffix.lower() == ".parquet":
        return "searchr1-parquet"
    kind, first = _first_record(path)
    if kind != "object" and isinstance(first, dict):
        qformat = _question_format_of(first)
        if qformat is not None:
            return qformat
    raise CorpusFormatError(path, f"not a question file: the first record has {_describe(first if kind != 'object' else dict([first]))}; a 'question' field is required")


# ---------------------------------------------------------------------------------------------
# public API


def iter_documents(
    path: str | Path, format: str = "auto", *, source: str = "default", report: LoadReport | None = None
) -> Iterator[Document]:
    """Stream the documents of a corpus file, skipping (and counting in ``report``) empty texts and
    repeated title+text pairs."""
    path = open_checked(path)
    name = detect_corpus_format(path) if format == "auto" else format
    fmt = CORPUS_FORMATS.get(name)
    if report is None:
        report = LoadReport(path=str(path), format=name, source=source)
    seen: set[str] = set()
    for passage in fmt.read(path):
        if not passage.text.strip():
            report.empty += 1
            continue
        doc_id = doc_id_for(passage.title, passage.text)
        if doc_id in seen:
            report.duplicates += 1
            continue
        seen.add(doc_id)
        report.loaded += 1
        yield Document(doc_id=doc_id, title=passage.title, text=passage.text, source=source, metadata=passage.metadata)


def load_corpus(path: str | Path, format: str = "auto", *, source: str = "default") -> LoadedCorpus:
    """All documents of a corpus file and the :class:`LoadReport` of what was kept and skipped.

    ``format`` is a name from :data:`CORPUS_FORMATS` or ``"auto"``; ``source`` is written into every
    ``Document.source`` (the corpus name in multi-source setups)."""
    path = open_checked(path)
    name = detect_corpus_format(path) if format == "auto" else format
    report = LoadReport(path=str(path), format=name, source=source)
    docs = list(iter_documents(path, name, source=source, report=report))
    return LoadedCorpus(docs, report)


def iter_questions(path: str | Path, format: str = "auto", *, dataset: str | None = None) -> Iterator[Question]:
    path = open_checked(path)
    name = detect_question_format(path) if format == "auto" else format
    yield from QUESTION_FORMATS.get(name).read(path, dataset or path.stem)


def load_questions(path: str | Path, format: str = "auto", *, dataset: str | None = None) -> list[Question]:
    """The questions of a file; ``dataset`` (default: the file's stem) is written into each question
    and prefixes generated ids (``<dataset>-<index>``) for records without one."""
    return list(iter_questions(path, format, dataset=dataset))


def attach_supporting_docs(questions: Iterable[Question], docs: Iterable[Document]) -> list[Question]:
    """Fill empty ``supporting_doc_ids`` from ``metadata['supporting_titles']`` by looking the titles
    up in ``docs`` (RealRoute questions name their evidence by title only)."""
    by_title: dict[str, list[str]] = {}
    for doc in docs:
        by_title.setdefault(doc.title, []).append(doc.doc_id)
    out = []
    for q in questions:
        titles = q.metadata.get("supporting_titles") or []
        if q.supporting_doc_ids or not titles:
            out.append(q)
            continue
        ids = [doc_id for title in titles for doc_id in by_title.get(title, [])]
        out.append(q.model_copy(update={"supporting_doc_ids": list(dict.fromkeys(ids))}))
    return out
