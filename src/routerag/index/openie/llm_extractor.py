"""OpenIE with any ``ChatModel``, HippoRAG style: first named entities, then triples conditioned on
them, each prompt with a one-shot exemplar answered in JSON.

Small models break JSON in every way (code fences, prose around it, trailing commas, single
quotes, cut-off output). :func:`parse_json_payload` repairs what it can; when nothing usable is
left the passage gets an empty record with ``error`` set and :attr:`LLMOpenIE.errors` counts it.
A batch never aborts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from routerag.corpus.schema import Document
from routerag.index.openie.base import OpenIERecord, Triple, clean_entities, clean_triples
from routerag.jsontext import FENCE, loads_lenient
from routerag.llm.base import ChatModel, GenerationParams, Message, ModelError

NER_SYSTEM = (
    "Extract the named entities from the paragraph: people, places, organisations, works, dates, "
    "events and other specific things. Answer with JSON only, of the form "
    '{"named_entities": ["...", "..."]}.'
)
TRIPLES_SYSTEM = (
    "Build an RDF graph from the paragraph and its named entities. Answer with JSON only, of the "
    'form {"triples": [["subject", "relation", "object"], ...]}.\n'
    "- Each triple should contain at least one, preferably two, of the named entities.\n"
    "- Replace pronouns by the names they refer to."
)

_EXAMPLE_PARAGRAPH = (
    "Halvard Strand\n"
    "Halvard Strand (born 4 May 1931) is a Norwegian architect. He designed the Tromsø Public Library, "
    "which opened in 1979, and taught at the Oslo School of Architecture until 1996."
)
_EXAMPLE_ENTITIES = {
    "named_entities": [
        "Halvard Strand",
        "4 May 1931",
        "Norwegian",
        "Tromsø Public Library",
        "1979",
        "Oslo School of Architecture",
        "1996",
    ]
}
_EXAMPLE_TRIPLES = {
    "triples": [
        ["Halvard Strand", "born on", "4 May 1931"],
        ["Halvard Strand", "is", "Norwegian architect"],
        ["Halvard Strand", "designed", "Tromsø Public Library"],
        ["Tromsø Public Library", "opened in", "1979"],
        ["Halvard Strand", "taught at", "Oslo School of Architecture"],
        ["Halvard Strand", "taught until", "1996"],
    ]
}


def ner_messages(passage: str) -> list[Message]:
    return [
        Message(role="system", content=NER_SYSTEM),
        Message(role="user", content=f"Paragraph:\n```\n{_EXAMPLE_PARAGRAPH}\n```"),
        Message(role="assistant", content=json.dumps(_EXAMPLE_ENTITIES, ensure_ascii=False)),
        Message(role="user", content=f"Paragraph:\n```\n{passage}\n```"),
    ]


def triple_messages(passage: str, entities: list[str]) -> list[Message]:
    def frame(paragraph: str, ents: dict[str, Any]) -> str:
        return f"Paragraph:\n```\n{paragraph}\n```\n\n{json.dumps(ents, ensure_ascii=False)}"

    return [
        Message(role="system", content=TRIPLES_SYSTEM),
        Message(role="user", content=frame(_EXAMPLE_PARAGRAPH, _EXAMPLE_ENTITIES)),
        Message(role="assistant", content=json.dumps(_EXAMPLE_TRIPLES, ensure_ascii=False)),
        Message(role="user", content=frame(passage, {"named_entities": entities})),
    ]


_TRIPLE = re.compile(r'\[\s*"((?:[^"\\]|\\.)*)"\s*,\s*"((?:[^"\\]|\\.)*)"\s*,\s*"((?:[^"\\]|\\.)*)"\s*\]')


def parse_json_payload(text: str, key: str) -> Any:
    """The value under ``key`` in the first JSON object found in ``text`` (a bare JSON list counts
    as the value). Raises ``ValueError`` if there is none."""
    fenced = FENCE.search(text)
    candidates = [fenced.group(1)] if fenced else []
    candidates.append(text)
    for raw in candidates:
        raw = raw.strip()
        spans = []
        if raw.find("[") >= 0 and (raw.find("{") < 0 or raw.find("[") < raw.find("{")):
            raw = raw[raw.index("[") :]  # prose, then a bare list
        if "{" in raw and "}" in raw:
            spans.append(raw[raw.index("{") : raw.rindex("}") + 1])
        if "[" in raw and "]" in raw:
            spans.append(raw[raw.index("[") : raw.rindex("]") + 1])
        for span in [raw, *spans]:
            try:
                value = loads_lenient(span)
            except ValueError:
                continue
            if isinstance(value, dict) and key in value:
                return value[key]
            if isinstance(value, list) and not raw.startswith("{"):  # a bare list, not a list inside an object
                return value
    raise ValueError(f"no JSON with {key!r} in the model output")


def parse_entities(text: str) -> list[str]:
    value = parse_json_payload(text, "named_entities")
    if not isinstance(value, list):
        raise ValueError("named_entities is not a list")
    return clean_entities(value)


def parse_triples(text: str) -> list[Triple]:
    """Triples from the model output; when the JSON as a whole is broken (e.g. cut off at the token
    limit) every complete ``["s", "r", "o"]`` that can still be read is salvaged."""
    try:
        value = parse_json_payload(text, "triples")
        if not isinstance(value, list):
            raise ValueError("triples is not a list")
        return clean_triples(value)
    except ValueError:
        salvaged = [tuple(json.loads(f'"{g}"') for g in m.groups()) for m in _TRIPLE.finditer(text)]
        if not salvaged:
            raise
        return clean_triples(salvaged)


class LLMOpenIE:
    """NER then triple extraction per passage; ``workers`` passages are in flight at once."""

    def __init__(
        self,
        model: ChatModel,
        params: GenerationParams | None = None,
        *,
        workers: int = 1,
        max_passage_chars: int = 6_000,
    ) -> None:
        self.model = model
        self.params = params or GenerationParams(max_tokens=768, temperature=0.0)
        self.workers = max(1, workers)
        self.max_passage_chars = max_passage_chars
        self.identity = f"llm:{model.name}:v1"
        self.errors = 0
        self.error_log: list[str] = []

    def extract(self, docs: Sequence[Document]) -> list[OpenIERecord]:
        if self.workers == 1 or len(docs) < 2:
            records = [self._one(doc) for doc in docs]
        else:
            with ThreadPoolExecutor(max_workers=self.workers) as pool:
                records = list(pool.map(self._one, docs))
        failed = [r for r in records if r.error]
        self.errors += len(failed)
        self.error_log += [f"{r.doc_id}: {r.error}" for r in failed]
        return records

    def _one(self, doc: Document) -> OpenIERecord:
        passage = doc.passage[: self.max_passage_chars]
        try:
            entities = parse_entities(self.model.chat(ner_messages(passage), self.params).text)
        except ValueError as exc:
            return OpenIERecord(doc_id=doc.doc_id, passage=doc.passage, error=f"ner: {exc}")
        except ModelError as exc:
            return OpenIERecord(doc_id=doc.doc_id, passage=doc.passage, error=f"ner: model failed: {exc}")
        try:
            triples = parse_triples(self.model.chat(triple_messages(passage, entities), self.params).text)
        except ValueError as exc:
            return OpenIERecord(doc_id=doc.doc_id, passage=doc.passage, entities=entities, error=f"triples: {exc}")
        except ModelError as exc:
            return OpenIERecord(
                doc_id=doc.doc_id, passage=doc.passage, entities=entities, error=f"triples: model failed: {exc}"
            )
        return OpenIERecord(doc_id=doc.doc_id, passage=doc.passage, entities=entities, triples=triples)
