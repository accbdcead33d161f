"""Small real setups for CPU checks of the training stack: the leaf of ``routerag.train`` (it
imports no other training module), so the data and policy modules can serve the ``toy`` dataset
and the ``tiny`` model without importing the toy learning run (:mod:`routerag.train.toy`).

* :func:`bm25_sourceset` — a :class:`SourceSet` of real BM25 sources built over given documents
  (in a directory the caller owns), mounted under the RouteRAG mode names.
* :func:`toy_routing_task` — a routing task whose right source is learnable from the question
  text: every entity has a *people* fact ("Gustave Eiffel designed the Eiffel Tower.") and a
  *places* fact ("The Eiffel Tower is located in Paris."), in two sources. A "Who ...?" question is
  answered by the top hit of the people source, a "Where ...?" question by the places source; the
  other source's top hit names the wrong thing. The people source serves mode ``passage``, the
  places source mode ``graph``, so the policy routes with RouteRAG's own tags.
* :func:`tiny_qwen2` — a randomly initialised small ``Qwen2ForCausalLM`` over a given vocabulary
  size (model name ``tiny``), for tests that must train in seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from routerag.corpus.schema import Document, Question
from routerag.sources.sourceset import SourceSet

# (thing, person, verb, place)
TOY_FACTS: list[tuple[str, str, str, str]] = [
    ("the Eiffel Tower", "Gustave Eiffel", "designed", "Paris"),
    ("the Sydney Opera House", "Jorn Utzon", "designed", "Sydney"),
    ("the Guggenheim Bilbao", "Frank Gehry", "designed", "Bilbao"),
    ("the Sagrada Familia", "Antoni Gaudi", "designed", "Barcelona"),
    ("the Louvre Pyramid", "Ieoh Ming Pei", "designed", "Paris"),
    ("Microsoft", "Bill Gates", "founded", "Redmond"),
    ("Amazon", "Jeff Bezos", "founded", "Seattle"),
    ("Nintendo", "Fusajiro Yamauchi", "founded", "Kyoto"),
    ("Ikea", "Ingvar Kamprad", "founded", "Delft"),
    ("the Taj Mahal", "Ustad Ahmad Lahauri", "designed", "Agra"),
    ("the Burj Khalifa", "Adrian Smith", "designed", "Dubai"),
    ("Spotify", "Daniel Ek", "founded", "Stockholm"),
]


def bm25_sourceset(docs_by_source: Mapping[str, Iterable[Document]], directory: str | Path) -> SourceSet:
    """Build one BM25 index per named source under ``directory`` and mount them."""
    from routerag.index.bm25 import BM25Index
    from routerag.index.docstore import DocStore
    from routerag.index.settings import IndexSettings
    from routerag.sources.bm25 import BM25Source

    sources = SourceSet()
    for name, docs in docs_by_source.items():
        store = DocStore(docs)
        index = BM25Index.build(store, Path(directory) / name, IndexSettings())
        source = BM25Source(index, store, name=name)
        source.mode = name
        sources.mount(source)
    return sources


def toy_routing_task(directory: str | Path) -> tuple[SourceSet, list[Question]]:
    """The toy routing task: sources ``passage`` (people facts) and ``graph`` (places facts) and
    two questions per entity (who -> passage, where -> graph)."""
    people = [Document.make(person, f"{person} {verb} {thing}.") for thing, person, verb, _ in TOY_FACTS]
    places = [Document.make(place, f"{thing[0].upper() + thing[1:]} is located in {place}.") for thing, _, _, place in TOY_FACTS]
    sources = bm25_sourceset({"passage": people, "graph": places}, directory)
    questions: list[Question] = []
    for i, (thing, person, verb, place) in enumerate(TOY_FACTS):
        questions.append(Question(qid=f"who-{i}", question=f"Who {verb} {thing}?", answers=[person],
                                  dataset="toy", metadata={"type": "who", "gold_mode": "passage"}))
        questions.append(Question(qid=f"where-{i}", question=f"Where is {thing}?", answers=[place],
                                  dataset="toy", metadata={"type": "where", "gold_mode": "graph"}))
    return sources, questions


def tiny_qwen2(vocab_size: int, *, layers: int = 2, hidden: int = 64, heads: int = 4, seed: int = 0, tie: bool = True,
               **overrides: Any) -> Any:
    """A randomly initialised small ``Qwen2ForCausalLM`` (fp32); ``tie``: LM head = input embedding."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), max_position_embeddings=2048,
        tie_word_embeddings=tie, **overrides,
    )
    return Qwen2ForCausalLM(config)
