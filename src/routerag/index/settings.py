"""Typed settings for building and loading an index: embedder, dense (FAISS), BM25 and graph.

One ``IndexSettings`` object is resolved per index (YAML + ``key=value`` overrides through
:func:`routerag.config.load_config`) and written next to it as ``config.resolved.yaml``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from routerag.index.embedder import EmbedderConfig


class DenseSettings(BaseModel):
    """FAISS over L2-normalised vectors with inner product (= cosine)."""

    model_config = ConfigDict(extra="forbid")

    faiss: Literal["flat", "hnsw"] = Field("flat", description="exact IndexFlatIP, or approximate IndexHNSWFlat")
    hnsw_m: int = Field(32, ge=4, le=128, description="HNSW graph degree M")
    hnsw_ef_construction: int = Field(80, ge=8, description="HNSW efConstruction at build time")
    hnsw_ef_search: int = Field(64, ge=1, description="HNSW efSearch at query time")


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

    extractor: Literal["precomputed", "spacy", "llm"] = "spacy"
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


class IndexSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    dense: DenseSettings = Field(default_factory=DenseSettings)
    bm25: BM25Settings = Field(default_factory=BM25Settings)
    graph: GraphSettings = Field(default_factory=GraphSettings)
