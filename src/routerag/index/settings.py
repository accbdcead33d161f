"""Typed settings for building and loading an index: embedder, dense (FAISS), BM25 and graph.

One ``IndexSettings`` object is resolved per index (YAML + ``key=value`` overrides through
:func:`routerag.config.load_config`) and written next to it as ``config.resolved.yaml``.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from routerag.config import OMIT_AT_DEFAULT
from routerag.index.embedder import EmbedderConfig
from routerag.index.openie.base import EXTRACTORS
from routerag.registry import RegisteredName


class IVFPQSettings(BaseModel):
    """FAISS IVF-PQ for corpora beyond RAM (``dense.faiss: ivfpq``): ``nlist`` inverted lists over
    a coarse k-means, each vector stored as ``m`` codes of ``nbits`` bits (after an optional OPQ
    rotation), searched over ``nprobe`` lists; the top ``rescore`` candidates are re-scored
    exactly from the stored fp16 vectors. The index and the vectors are memory-mapped read-only.

    ``nlist``, ``m``, ``nbits``, ``opq``, ``train_size`` and ``seed`` fix the trained structure
    (checked against the manifest at load); ``nprobe`` and ``rescore`` are search-time knobs
    that may be changed when loading."""

    model_config = ConfigDict(extra="forbid")

    nlist: int = Field(1024, ge=1, description="inverted lists (coarse k-means centroids); <= the training sample")
    m: int = Field(48, ge=1, description="PQ sub-quantizers (bytes per vector at nbits=8); must divide the dimension")
    nbits: int = Field(8, ge=1, le=16, description="bits per PQ code")
    opq: bool = Field(False, description="learn an OPQ rotation before PQ (slower training, better codes)")
    nprobe: int = Field(32, ge=1, description="inverted lists visited per query; <= nlist")
    rescore: int = Field(
        100, ge=0, description="candidates re-scored exactly from the stored fp16 vectors (0 = PQ scores only)"
    )
    train_size: int = Field(
        100_000, ge=1, description="vectors sampled (seeded, without replacement) to train the quantizers"
    )
    add_batch: int = Field(65_536, ge=1, description="vectors embedded and added per shard while building")
    seed: int = Field(0, ge=0, description="seed of the training sample and the k-means")

    @model_validator(mode="after")
    def _check(self) -> IVFPQSettings:
        if self.nprobe > self.nlist:
            raise ValueError(f"ivfpq.nprobe={self.nprobe} exceeds ivfpq.nlist={self.nlist}; lists visited cannot exceed the lists")
        if self.nlist > self.train_size:
            raise ValueError(
                f"ivfpq.nlist={self.nlist} exceeds ivfpq.train_size={self.train_size}; k-means needs at least one training vector per list"
            )
        return self

    # the fields that fix what was trained; the rest may differ between build and load
    STRUCTURE: ClassVar[tuple[str, ...]] = ("nlist", "m", "nbits", "opq", "train_size", "seed")

    def check_for(self, dim: int, n_vectors: int) -> None:
        """Raise ``ValueError`` (with the fix) when these settings cannot index ``n_vectors``
        vectors of dimension ``dim``."""
        if dim % self.m:
            divisors = [d for d in range(1, min(dim, 128) + 1) if dim % d == 0]
            raise ValueError(
                f"ivfpq.m={self.m} does not divide the dimension {dim}; pick one of {divisors}"
            )
        sample = min(self.train_size, n_vectors)
        if self.nlist > sample:
            raise ValueError(
                f"ivfpq.nlist={self.nlist} exceeds the training sample ({sample} vectors = min(train_size, "
                f"{n_vectors} documents)); lower nlist (about sqrt(N) to 4*sqrt(N): {_suggest_nlist(n_vectors)}) "
                "or use dense.faiss=flat for a small corpus"
            )
        if (1 << self.nbits) > sample:
            raise ValueError(
                f"ivfpq.nbits={self.nbits} means {1 << self.nbits} centroids per sub-quantizer, more than the "
                f"{sample} training vectors; lower nbits or use dense.faiss=flat"
            )


def _suggest_nlist(n: int) -> int:
    return max(1, int(2 * n**0.5))


class DenseSettings(BaseModel):
    """FAISS over L2-normalised vectors with inner product (= cosine)."""

    model_config = ConfigDict(extra="forbid")

    faiss: Literal["flat", "hnsw", "ivfpq"] = Field(
        "flat", description="exact IndexFlatIP, approximate IndexHNSWFlat, or memory-mapped IVF-PQ (beyond RAM)"
    )
    hnsw_m: int = Field(32, ge=4, le=128, description="HNSW graph degree M")
    hnsw_ef_construction: int = Field(80, ge=8, description="HNSW efConstruction at build time")
    hnsw_ef_search: int = Field(64, ge=1, description="HNSW efSearch at query time")
    ivfpq: IVFPQSettings = Field(default_factory=IVFPQSettings, description="settings of faiss=ivfpq",
                                 json_schema_extra=OMIT_AT_DEFAULT)  # added after runs and indexes were stored


class BM25Settings(BaseModel):
    """Okapi BM25 (bm25s) over ``title\\ntext``."""

    model_config = ConfigDict(extra="forbid")

    k1: float = Field(1.5, gt=0, description="term-frequency saturation")
    b: float = Field(0.75, ge=0, le=1, description="length normalisation")
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    stemming: bool = Field(True, description="Snowball English stemming (needs PyStemmer; off if missing)")
    stopwords: Literal["en", "none"] = Field("en", description="stopword list to drop")


class GraphSettings(BaseModel):
    """Knowledge-graph settings consumed by ``routerag.index.graph`` (HippoRAG 2 style)."""

    model_config = ConfigDict(extra="forbid")

    extractor: Annotated[str, RegisteredName(EXTRACTORS)] = Field(
        "spacy", description="precomputed | spacy | llm (EXTRACTORS), or a plugin's pkg.mod:Class"
    )
    openie_file: str | None = Field(None, description="precomputed OpenIE JSON (HippoRAG format)")
    spacy_processes: int = Field(
        0, ge=0, description="worker processes for the spaCy extractor; 0 = one per CPU core for corpora of 500+ passages"
    )
    synonym_threshold: float = Field(0.8, ge=0, le=1, description="cosine above which entities get a synonym edge")
    synonym_topk: int = Field(100, ge=1, description="neighbours considered per entity for synonym edges")
    passage_node_weight: float = Field(0.05, ge=0, description="reset weight of passage nodes in PPR")
    damping: float = Field(0.5, gt=0, lt=1, description="PPR damping factor")
    fact_topk: int = Field(5, ge=1, description="facts kept after fact retrieval")
    recognition_filter: bool = Field(False, description="LLM recognition-memory filter over facts")
    # the approximations for graphs at scale (docs/guides/scaling.md); the defaults keep the exact path,
    # and are left out of fingerprints, so indexes and runs stored before them keep their keys
    ppr: Literal["power", "local"] = Field(
        "power", description="PPR solver: power iteration over the whole graph (exact), or forward push "
        "from the seeds over the CSR arrays (local; work bounded by the seeds' neighbourhood)",
        json_schema_extra=OMIT_AT_DEFAULT,
    )
    local_ppr_tol: float = Field(
        1e-6, gt=0, lt=1, description="local PPR: push a node while its residual is >= tol x its neighbour count "
        "(reset normalised to 1); smaller is closer to exact and touches more nodes", json_schema_extra=OMIT_AT_DEFAULT,
    )
    prior_topk: int = Field(
        0, ge=0, description="passages given the dense prior in the PPR reset: 0 = every passage (exact), "
        "else only the top prior_topk by dense score", json_schema_extra=OMIT_AT_DEFAULT,
    )
    ann: Literal["exact", "ivf"] = Field(
        "exact", description="fact matching (and the prior's top passages when prior_topk > 0): a product with "
        "every vector, or a FAISS IVF-Flat index (about sqrt(N) lists, ann_nprobe probed)",
        json_schema_extra=OMIT_AT_DEFAULT,
    )
    ann_nprobe: int = Field(16, ge=1, description="inverted lists probed when ann=ivf", json_schema_extra=OMIT_AT_DEFAULT)


class IndexSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    dense: DenseSettings = Field(default_factory=DenseSettings)
    bm25: BM25Settings = Field(default_factory=BM25Settings)
    graph: GraphSettings = Field(default_factory=GraphSettings)
    docstore: Literal["jsonl", "arrow"] = Field(
        "jsonl",
        description="how the bundle stores its documents: JSON lines read into memory, or one memory-mapped "
        "Arrow file read by row (corpora beyond RAM; needs pyarrow)",
        json_schema_extra=OMIT_AT_DEFAULT,  # added after runs and indexes were stored
    )
