"""OpenIE providers (precomputed HippoRAG files, offline spaCy, LLM prompts) and their cache."""

from routerag.index.openie.base import (
    EXTRACTORS,
    OpenIEExtractor,
    OpenIERecord,
    Triple,
    normalise_phrase,
    passage_hash,
)

__all__ = ["EXTRACTORS", "OpenIEExtractor", "OpenIERecord", "Triple", "normalise_phrase", "passage_hash"]
