"""The knowledge-graph index component (HippoRAG 2 style).

Nodes: entity (phrase) nodes — the normalised subjects/objects of the extracted triples plus the
passage's named entities, deduplicated — and one passage node per document (row ``i`` of the
bundle's DocStore). Undirected weighted edges:

* fact edges between a triple's subject and object (weight = how many passage-level triples
  link the pair),
* passage-entity edges (weight 1) between a passage and every entity extracted from it,
* synonym edges between entities whose embeddings are each other's nearest neighbours
  (FAISS top ``synonym_topk``, cosine >= ``synonym_threshold``; weight = cosine).

Vectors: entity, fact (``str((s, r, o))``) and passage embeddings, all L2-normalised.

Files (no pickle anywhere): ``manifest.json``; ``openie.json`` (the extraction per passage, in
HippoRAG's OpenIE format); ``graph.json`` (entity names, facts, which passages each fact came
from); ``graph.npz`` (vectors and edge arrays: an uncompressed ``np.savez``, which ``np.load``
cannot memory-map); ``csr_indptr.npy``, ``csr_indices.npy``, ``csr_probs.npy`` (the transition
probabilities as CSR rows for the local PPR: plain ``.npy`` files opened with ``mmap_mode="r"``;
an index saved before they existed gets them built in memory at first use). The igraph graph is
rebuilt at load.

Incremental ``add``: new passages are extracted, their entities and facts appended, and synonym
edges computed only for the new entities (against all entities).
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from routerag import progress
from routerag.config import atomic_write_text
from routerag.index.embedder import Embedder, EmbedderConfig, build_embedder
from routerag.index.manifest import IndexLoadError, Manifest, read_manifest, write_manifest
from routerag.index.openie.base import OpenIEExtractor, OpenIERecord, Triple, normalise_phrase
from routerag.index.openie.cache import OpenIECache, entry_from_record, read_openie_file, record_from_entry
from routerag.index.settings import GraphSettings, IndexSettings

if TYPE_CHECKING:
    import igraph

    from routerag.corpus.schema import Document
    from routerag.index.docstore import DocStore
    from routerag.index.local_ppr import LocalPPR
    from routerag.index.ppr import PowerPPR
    from routerag.index.vector_topk import VectorTopK

OPENIE_NAME = "openie.json"
GRAPH_JSON = "graph.json"
GRAPH_NPZ = "graph.npz"
_ARRAYS = (
    "entity_vecs",
    "fact_vecs",
    "passage_vecs",
    "fact_edges",
    "fact_edge_weights",
    "passage_entity",
    "synonym_edges",
    "synonym_weights",
)


def fact_text(triple: Triple) -> str:
    """What a fact embedding embeds (HippoRAG embeds the tuple's repr)."""
    return str(tuple(triple))


def _embedder_key(config: EmbedderConfig) -> dict[str, Any]:
    return config.model_dump(include={"backend", "model", "base_url", "query_prefix", "passage_prefix"})


def resolve_openie_file(name: str) -> Path:
    """An OpenIE file path as given, else relative to the shared benchmark folder."""
    path = Path(name).expanduser()
    if path.is_file() or path.is_absolute():
        return path
    from routerag.corpus.datasets import DataNotFoundError, data_root

    try:
        candidate = data_root() / name
    except DataNotFoundError:
        return path
    return candidate if candidate.is_file() else path


def make_extractor(settings: GraphSettings) -> OpenIEExtractor:
    """The extractor named by ``settings.extractor``. The ``llm`` extractor needs a chat model:
    construct ``LLMOpenIE(model)`` yourself and pass it to :meth:`GraphIndex.build`. Any other
    registered extractor (or a plugin's ``pkg.mod:Class``) is constructed with the graph settings."""
    if settings.extractor == "precomputed":
        if not settings.openie_file:
            raise ValueError("graph.extractor=precomputed needs graph.openie_file (a HippoRAG OpenIE JSON)")
        from routerag.index.openie.precomputed import PrecomputedOpenIE

        return PrecomputedOpenIE(resolve_openie_file(settings.openie_file))
    if settings.extractor == "spacy":
        from routerag.index.openie.spacy_extractor import SpacyOpenIE

        return SpacyOpenIE(n_process=settings.spacy_processes)
    if settings.extractor == "llm":
        raise ValueError(
            "graph.extractor=llm needs a chat model: build with "
            "GraphIndex.build(store, dir, settings, extractor=LLMOpenIE(model))"
        )
    from routerag.index.openie.base import EXTRACTORS

    return EXTRACTORS.get(settings.extractor)(settings)  # another registered one or a plugin: built from the settings


def _global_cache(identity: str) -> OpenIECache | None:
    """A per-extractor cache under the routerag home, so a rebuild never re-extracts a passage."""
    if identity.startswith("precomputed:"):
        return None
    from routerag.paths import cache_dir

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in identity)
    return OpenIECache(cache_dir("openie") / f"{safe}.json")


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    tmp = path.with_name(f".{path.name}.tmp.npz")
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass
class GraphData:
    """The graph's content, independent of igraph: names, facts and arrays."""

    entities: list[str] = field(default_factory=list)
    facts: list[Triple] = field(default_factory=list)
    fact_docs: list[list[int]] = field(default_factory=list)  # store rows each fact came from
    entity_vecs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    fact_vecs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    passage_vecs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    fact_edges: dict[tuple[int, int], float] = field(default_factory=dict)  # (a, b) with a < b
    passage_entity: set[tuple[int, int]] = field(default_factory=set)  # (row, entity)
    synonym_edges: dict[tuple[int, int], float] = field(default_factory=dict)  # (a, b) with a < b

    def arrays(self) -> dict[str, np.ndarray]:
        def pairs(keys) -> np.ndarray:
            return np.asarray(sorted(keys), dtype=np.int64).reshape(-1, 2)

        fact_keys = sorted(self.fact_edges)
        syn_keys = sorted(self.synonym_edges)
        return {
            "entity_vecs": self.entity_vecs,
            "fact_vecs": self.fact_vecs,
            "passage_vecs": self.passage_vecs,
            "fact_edges": pairs(fact_keys),
            "fact_edge_weights": np.asarray([self.fact_edges[k] for k in fact_keys], dtype=np.float64),
            "passage_entity": pairs(self.passage_entity),
            "synonym_edges": pairs(syn_keys),
            "synonym_weights": np.asarray([self.synonym_edges[k] for k in syn_keys], dtype=np.float64),
        }


class GraphIndex:
    """Entity + passage graph with fact/entity/passage embeddings; see the module docstring."""

    kind: ClassVar[str] = "graph"

    def __init__(
        self,
        store: "DocStore",
        settings: IndexSettings,
        data: GraphData,
        records: list[OpenIERecord],
        manifest: Manifest,
        directory: Path | None = None,
    ) -> None:
        self.store = store
        self.directory = directory  # where it was loaded from or saved to (the CSR files live there)
        self.settings = settings
        self.data = data
        self.records = records
        self.manifest = manifest
        self._embedder: Embedder | None = None
        self._entity_row = {name: i for i, name in enumerate(data.entities)}
        self._graph: "igraph.Graph | None" = None
        self._power: "PowerPPR | None" = None
        self._local: "LocalPPR | None" = None
        self._searches: "dict[str, VectorTopK]" = {}
        self._entity_doc_count: np.ndarray | None = None
        self._fact_entities: np.ndarray | None = None

    # ---------------------------------------------------------------- sizes and lookups
    @property
    def n_entities(self) -> int:
        return len(self.data.entities)

    @property
    def n_passages(self) -> int:
        return int(self.data.passage_vecs.shape[0])

    @property
    def n_nodes(self) -> int:
        return self.n_entities + self.n_passages

    def entity_row(self, phrase: str) -> int | None:
        return self._entity_row.get(normalise_phrase(phrase))

    def passage_node(self, row: int) -> int:
        """Vertex id of the passage in store row ``row`` (entities come first)."""
        return self.n_entities + row

    def node_label(self, vertex: int) -> tuple[str, str]:
        """``("entity", name)`` or ``("passage", doc_id)``."""
        if vertex < self.n_entities:
            return "entity", self.data.entities[vertex]
        return "passage", self.store.docs[vertex - self.n_entities].doc_id

    @property
    def entity_doc_count(self) -> np.ndarray:
        """How many passages each entity was extracted from (HippoRAG divides seed weights by it)."""
        if self._entity_doc_count is None:
            counts = np.zeros(self.n_entities, dtype=np.float64)
            for _, ent in self.data.passage_entity:
                counts[ent] += 1
            self._entity_doc_count = counts
        return self._entity_doc_count

    @property
    def fact_entities(self) -> np.ndarray:
        """``(n_facts, 2)`` entity rows of each fact's subject and object."""
        if self._fact_entities is None:
            rows = [(self._entity_row[s], self._entity_row[o]) for s, _, o in self.data.facts]
            self._fact_entities = np.asarray(rows, dtype=np.int64).reshape(-1, 2)
        return self._fact_entities

    def stats(self) -> dict[str, int]:
        return {
            "passages": self.n_passages,
            "entities": self.n_entities,
            "facts": len(self.data.facts),
            "fact_edges": len(self.data.fact_edges),
            "passage_entity_edges": len(self.data.passage_entity),
            "synonym_edges": len(self.data.synonym_edges),
            "extraction_errors": sum(1 for r in self.records if r.error),
        }

    # ---------------------------------------------------------------- embedder
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            embedder = build_embedder(self.settings.embedder)
            dim = self.manifest.params.get("dim")
            if dim is not None and embedder.dim != dim:
                raise IndexLoadError(f"embedder {embedder.identity!r} gives {embedder.dim}-d vectors; the graph holds {dim}-d")
            self._embedder = embedder
        return self._embedder

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self.embedder.encode(list(queries), is_query=True)

    # ---------------------------------------------------------------- igraph / PPR
    @property
    def graph(self) -> "igraph.Graph":
        """The undirected weighted igraph graph (vertices: entities, then passages)."""
        if self._graph is None:
            import igraph

            edges, weights = self.edge_arrays()
            graph = igraph.Graph(n=self.n_nodes, edges=edges.tolist(), directed=False)
            graph.es["weight"] = weights.tolist()
            self._graph = graph
        return self._graph

    @property
    def power_ppr(self) -> "PowerPPR":
        if self._power is None:
            from routerag.index.ppr import PowerPPR

            edges, weights = self.edge_arrays()
            self._power = PowerPPR(self.n_nodes, edges, weights, self.settings.graph.damping)
        return self._power

    @property
    def local_ppr(self) -> "LocalPPR":
        """The push solver over the CSR arrays: memory-mapped from the index directory when it has
        them, else built in memory from the edges (an index saved before they existed)."""
        if self._local is None:
            from routerag.index.local_ppr import LocalPPR, csr_from_edges, load_csr

            cfg = self.settings.graph
            arrays = None
            if self.directory is not None:
                try:
                    arrays = load_csr(self.directory)
                except (ValueError, OSError) as exc:
                    raise IndexLoadError(f"{self.directory}: corrupt CSR arrays ({exc}); rebuild the graph") from None
            if arrays is not None and arrays[0].shape[0] != self.n_nodes + 1:
                raise IndexLoadError(f"{self.directory}: CSR arrays for {arrays[0].shape[0] - 1} nodes, graph has {self.n_nodes}")
            if arrays is None:
                arrays = csr_from_edges(self.n_nodes, *self.edge_arrays())
            self._local = LocalPPR(*arrays, damping=cfg.damping, tol=cfg.local_ppr_tol)
        return self._local

    def vector_search(self, what: str) -> "VectorTopK":
        """Top-k search over the ``"facts"`` or ``"passages"`` vectors, of the kind ``graph.ann``."""
        if what not in self._searches:
            from routerag.index.vector_topk import VectorTopK

            vectors = {"facts": self.data.fact_vecs, "passages": self.data.passage_vecs}[what]
            cfg = self.settings.graph
            self._searches[what] = VectorTopK(vectors, cfg.ann, cfg.ann_nprobe)
        return self._searches[what]

    def edge_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All edges as vertex pairs, with weights: fact, passage-entity, synonym."""
        arrays = self.data.arrays()
        pe = arrays["passage_entity"].copy()
        pe[:, 0] += self.n_entities
        edges = np.concatenate([arrays["fact_edges"], pe, arrays["synonym_edges"]]).astype(np.int64)
        weights = np.concatenate(
            [arrays["fact_edge_weights"], np.ones(len(pe)), arrays["synonym_weights"]]
        ).astype(np.float64)
        return edges.reshape(-1, 2), weights

    def _invalidate(self) -> None:
        self._graph = None
        self._power = None
        self._local = None
        self._searches = {}
        self._entity_doc_count = None
        self._fact_entities = None
        self._entity_row = {name: i for i, name in enumerate(self.data.entities)}

    # ---------------------------------------------------------------- build / load / add
    @classmethod
    def build(
        cls,
        store: "DocStore",
        directory: Path,
        settings: IndexSettings,
        *,
        extractor: OpenIEExtractor | None = None,
    ) -> "GraphIndex":
        """Extract, embed and link every document of ``store``. ``extractor`` overrides the one
        named in ``settings.graph.extractor`` (required for ``llm``)."""
        if len(store) == 0:
            raise ValueError("cannot build a graph over zero documents")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        extractor = extractor or make_extractor(settings.graph)
        embedder = build_embedder(settings.embedder)
        manifest = Manifest(
            kind=cls.kind,
            corpus_hash=store.corpus_hash(),
            n_docs=len(store),
            embedder=embedder.identity,
            extractor=extractor.identity,
            params={
                "dim": embedder.dim,
                "embedder_config": _embedder_key(settings.embedder),
                "extractor_kind": settings.graph.extractor,
                "synonym_threshold": settings.graph.synonym_threshold,
                "synonym_topk": settings.graph.synonym_topk,
            },
        )
        data = GraphData(
            entity_vecs=np.zeros((0, embedder.dim), np.float32),
            fact_vecs=np.zeros((0, embedder.dim), np.float32),
            passage_vecs=np.zeros((0, embedder.dim), np.float32),
        )
        self = cls(store, settings, data, [], manifest)
        self._embedder = embedder
        self._extend(list(store.docs), extractor, passage_vecs=_dense_vectors(directory, store, settings))
        self._save(directory)
        return self

    @classmethod
    def load(cls, directory: Path, store: "DocStore", settings: IndexSettings) -> "GraphIndex":
        directory = Path(directory)
        manifest = read_manifest(directory, kind=cls.kind, corpus_hash=store.corpus_hash())
        built_with = manifest.params.get("embedder_config")
        if built_with != _embedder_key(settings.embedder):
            raise IndexLoadError(
                f"{directory}: built with embedder {built_with}, configured {_embedder_key(settings.embedder)}; rebuild it"
            )
        for name in (GRAPH_JSON, GRAPH_NPZ, OPENIE_NAME):
            if not (directory / name).is_file():
                raise IndexLoadError(f"{directory / name}: missing; the graph index is incomplete, rebuild it")
        try:
            meta = json.loads((directory / GRAPH_JSON).read_text(encoding="utf-8"))
            entities = [str(e) for e in meta["entities"]]
            facts = [(str(s), str(r), str(o)) for s, r, o in meta["facts"]]
            fact_docs = [[int(x) for x in rows] for rows in meta["fact_docs"]]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
            raise IndexLoadError(f"{directory / GRAPH_JSON}: corrupt graph file: {exc}") from None
        try:
            with np.load(directory / GRAPH_NPZ, allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in _ARRAYS}
        except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:  # truncated: BadZipFile/EOFError
            raise IndexLoadError(f"{directory / GRAPH_NPZ}: corrupt graph arrays ({type(exc).__name__}: {exc}); rebuild it") from None
        try:
            entries = read_openie_file(directory / OPENIE_NAME)
        except ValueError as exc:
            raise IndexLoadError(str(exc)) from None
        records = [record_from_entry(e, str(e.get("doc_id", ""))) for e in entries]
        problems = []
        if arrays["entity_vecs"].shape[0] != len(entities):
            problems.append(f"{arrays['entity_vecs'].shape[0]} entity vectors for {len(entities)} entities")
        if arrays["fact_vecs"].shape[0] != len(facts) or len(fact_docs) != len(facts):
            problems.append(f"{arrays['fact_vecs'].shape[0]} fact vectors for {len(facts)} facts")
        if arrays["passage_vecs"].shape[0] != len(store) or len(records) != len(store):
            problems.append(f"{arrays['passage_vecs'].shape[0]} passage vectors / {len(records)} records for {len(store)} documents")
        if problems:
            raise IndexLoadError(f"{directory}: inconsistent graph index ({'; '.join(problems)}); rebuild it")
        data = GraphData(
            entities=entities,
            facts=facts,
            fact_docs=fact_docs,
            entity_vecs=arrays["entity_vecs"].astype(np.float32),
            fact_vecs=arrays["fact_vecs"].astype(np.float32),
            passage_vecs=arrays["passage_vecs"].astype(np.float32),
            fact_edges={(int(a), int(b)): float(w) for (a, b), w in zip(arrays["fact_edges"], arrays["fact_edge_weights"])},
            passage_entity={(int(a), int(b)) for a, b in arrays["passage_entity"]},
            synonym_edges={(int(a), int(b)): float(w) for (a, b), w in zip(arrays["synonym_edges"], arrays["synonym_weights"])},
        )
        return cls(store, settings, data, records, manifest, directory)

    def add(
        self, new_docs: "list[Document]", directory: Path, *, extractor: OpenIEExtractor | None = None
    ) -> None:
        """Extract and link only ``new_docs`` (already at the tail of the store), then persist."""
        if not new_docs:
            return
        start = self.n_passages
        if start + len(new_docs) != len(self.store):
            raise ValueError(f"graph holds {start} passages and got {len(new_docs)} new docs, but the store has {len(self.store)}")
        for offset, doc in enumerate(new_docs):
            if self.store.row(doc.doc_id) != start + offset:
                raise ValueError(f"document {doc.doc_id} is not at the tail of the store")
        built_kind = self.manifest.params.get("extractor_kind")
        if extractor is None:
            if built_kind != self.settings.graph.extractor:
                raise IndexLoadError(
                    f"{directory}: built with the {built_kind!r} extractor, configured {self.settings.graph.extractor!r}"
                )
            extractor = make_extractor(self.settings.graph)
        self._extend(new_docs, extractor)
        self.manifest = self.manifest.model_copy(
            update={"corpus_hash": self.store.corpus_hash(), "n_docs": self.n_passages}
        )
        self._save(Path(directory))

    # ---------------------------------------------------------------- internals
    def _extend(self, docs: "list[Document]", extractor: OpenIEExtractor, passage_vecs: np.ndarray | None = None) -> None:
        from routerag.index.openie.cache import CachedExtractor

        cache = _global_cache(extractor.identity)
        source = CachedExtractor(extractor, cache) if cache is not None else extractor
        records = source.extract(docs)
        if len(records) != len(docs):
            raise RuntimeError(f"extractor {extractor.identity} returned {len(records)} records for {len(docs)} documents")
        data = self.data
        first_row = self.n_passages
        n_old_entities = self.n_entities
        new_entities: list[str] = []
        new_facts: list[Triple] = []
        fact_row = {f: i for i, f in enumerate(data.facts)}

        def entity(phrase: str) -> int | None:
            key = normalise_phrase(phrase)
            if not key:
                return None
            if key not in self._entity_row:
                self._entity_row[key] = len(data.entities)
                data.entities.append(key)
                new_entities.append(key)
            return self._entity_row[key]

        for offset, record in enumerate(records):
            row = first_row + offset
            for name in record.entities:
                ent = entity(name)
                if ent is not None:
                    data.passage_entity.add((row, ent))
            for subject, relation, obj in record.triples:
                s, o = entity(subject), entity(obj)
                if s is None or o is None or s == o:
                    continue
                data.passage_entity.update({(row, s), (row, o)})
                key = (min(s, o), max(s, o))
                data.fact_edges[key] = data.fact_edges.get(key, 0.0) + 1.0
                triple = (data.entities[s], normalise_phrase(relation) or relation.strip().lower(), data.entities[o])
                if triple not in fact_row:
                    fact_row[triple] = len(data.facts)
                    data.facts.append(triple)
                    data.fact_docs.append([])
                    new_facts.append(triple)
                rows = data.fact_docs[fact_row[triple]]
                if row not in rows:
                    rows.append(row)

        embedder = self.embedder
        if passage_vecs is None or passage_vecs.shape[0] != len(docs):
            passage_vecs = embedder.encode([d.passage for d in docs], is_query=False)
        data.passage_vecs = np.concatenate([data.passage_vecs, passage_vecs.astype(np.float32)])
        # one call for both: one length sort and one worker pool over ~116k short strings (2Wiki)
        with progress.step(f"graph: embedding {len(new_entities):,} entities and {len(new_facts):,} facts"):
            vectors = embedder.encode(new_entities + [fact_text(f) for f in new_facts])
        data.entity_vecs = np.concatenate([data.entity_vecs, vectors[: len(new_entities)]])
        data.fact_vecs = np.concatenate([data.fact_vecs, vectors[len(new_entities) :]])
        del vectors
        self.records.extend(records)
        with progress.step(f"graph: synonym edges among {self.n_entities:,} entities"):
            self._add_synonym_edges(list(range(n_old_entities, self.n_entities)))
        self._invalidate()

    def _add_synonym_edges(self, queries: list[int]) -> None:
        """Synonym edges from each entity in ``queries`` to its nearest entities (all of them)."""
        if not queries or self.n_entities < 2:
            return
        import faiss

        cfg = self.settings.graph
        vecs = np.ascontiguousarray(self.data.entity_vecs, dtype=np.float32)
        index = faiss.IndexFlatIP(vecs.shape[1])
        index.add(vecs)
        k = min(cfg.synonym_topk + 1, self.n_entities)
        names = self.data.entities
        for start in range(0, len(queries), 4096):
            chunk = queries[start : start + 4096]
            scores, rows = index.search(vecs[chunk], k)
            for q, q_scores, q_rows in zip(chunk, scores, rows):
                if sum(c.isalnum() for c in names[q]) <= 2:  # too short to be a synonym of anything
                    continue
                for score, other in zip(q_scores.tolist(), q_rows.tolist()):
                    if score < cfg.synonym_threshold:
                        break
                    if other < 0 or other == q or sum(c.isalnum() for c in names[other]) <= 2:
                        continue
                    key = (min(q, other), max(q, other))
                    self.data.synonym_edges[key] = max(self.data.synonym_edges.get(key, 0.0), float(score))

    def _save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.manifest = self.manifest.model_copy(
            update={"params": {**self.manifest.params, **self.stats()}}
        )
        openie = {"docs": [entry_from_record(r) for r in self.records], "ents_by_doc": [r.entities for r in self.records]}
        atomic_write_text(directory / OPENIE_NAME, json.dumps(openie, ensure_ascii=False))
        meta = {
            "entities": self.data.entities,
            "facts": [list(f) for f in self.data.facts],
            "fact_docs": self.data.fact_docs,
        }
        atomic_write_text(directory / GRAPH_JSON, json.dumps(meta, ensure_ascii=False))
        _save_npz(directory / GRAPH_NPZ, self.data.arrays())
        from routerag.index.local_ppr import csr_from_edges, save_csr

        save_csr(directory, *csr_from_edges(self.n_nodes, *self.edge_arrays()))
        self.directory = directory
        self._local = None
        write_manifest(directory, self.manifest)


def _dense_vectors(directory: Path, store: "DocStore", settings: IndexSettings) -> np.ndarray | None:
    """Passage vectors of a sibling ``dense`` component built with the same embedder, if any
    (saves embedding the corpus twice inside a bundle); ``None`` otherwise."""
    sibling = directory.parent / "dense"
    if not (sibling / "manifest.json").is_file():
        return None
    try:
        from routerag.index.dense import DenseIndex

        dense = DenseIndex.load(sibling, store, settings)
        return dense.vectors()
    except (IndexLoadError, ImportError, ValueError, RuntimeError):
        return None

