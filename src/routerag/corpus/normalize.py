"""Answer normalisation shared by every answer metric (evaluation and training rewards).

The benchmark scripts this project is compared against (SQuAD v1.1, HotpotQA, 2WikiMultihopQA,
MuSiQue, FlashRAG, Search-R1, HippoRAG) all use the SQuAD recipe: lowercase, delete the ASCII
punctuation characters of ``string.punctuation``, delete the articles *a/an/the* as whole words,
collapse whitespace. :func:`normalize_answer` is that recipe, with one deliberate extension
(see ``docs/concepts/metrics.md``): the text is first NFKC-normalised and *every* Unicode punctuation
character (categories ``P*``) is deleted as well, so that a curly apostrophe or an en dash
produced by a model does not break a match that the ASCII characters would make. On pure ASCII
text the result is identical to the SQuAD function. Accents are kept (``Zürich`` != ``Zurich``):
answers copied from the Wikipedia-derived corpora keep their accents, and so do the golds.
"""

from __future__ import annotations

import re
import string
import unicodedata
from functools import lru_cache

_ASCII_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


@lru_cache(maxsize=4096)
def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def remove_punctuation(text: str) -> str:
    """Delete ASCII punctuation (``string.punctuation``, which includes symbols such as ``$+<=>^`|~``)
    and every Unicode punctuation character. Deleted, not replaced by a space: ``1,000`` -> ``1000``,
    ``Jean-Luc`` -> ``jeanluc`` (as in SQuAD)."""
    return "".join(ch for ch in text if not _is_punct(ch))


def normalize_answer(text: str) -> str:
    """SQuAD normalisation (+ NFKC and Unicode punctuation): lowercase, no punctuation, no articles,
    single spaces."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = remove_punctuation(text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())
