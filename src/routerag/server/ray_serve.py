"""``routerag serve-retrieval INDEX_DIR --ray --replicas N``: the retrieval app on Ray Serve.

Two deployments:

* ``QueryEncoder`` holds the index's embedder and encodes queries with ``@serve.batch``: the queries
  of every request waiting at that moment (from every retrieval replica) go through one model call.
* ``RetrievalReplica`` (``N`` replicas) each open the same bundle (an ``ivfpq`` dense index and its
  fp16 vectors are memory-mapped, so replicas on one node share the page cache) and serve the
  unchanged FastAPI app of :func:`routerag.server.retrieval_app.create_retrieval_app` (``/retrieve``,
  ``/sources``, ``/health``, the Search-R1 endpoint) through ``@serve.ingress``. Their dense index
  encodes queries through the encoder deployment instead of loading the model.

Ray Serve's HTTP proxy listens on the configured host and port and spreads requests over the
replicas. ``routerag serve-retrieval`` without ``--ray`` does not import this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from ray import serve

from routerag.index.embedder import EmbedderConfig, build_embedder
from routerag.server.settings import ServerSettings

APP_NAME = "routerag-retrieval"


class RayServeSettings(BaseModel):
    """How the retrieval app is spread over Ray Serve."""

    replicas: int = Field(1, ge=1, description="retrieval replicas (each opens the bundle)")
    encoder_replicas: int = Field(1, ge=1, description="query-encoder replicas (each loads the model)")
    replica_cpus: float = Field(0.5, gt=0, description="logical CPUs Ray reserves per retrieval replica")
    encoder_cpus: float = Field(1.0, ge=0, description="logical CPUs Ray reserves per encoder replica (GPUs: none)")
    max_batch: int = Field(64, ge=1, description="most requests whose queries the encoder embeds in one call")
    batch_wait_ms: float = Field(2.0, ge=0, description="how long the encoder waits for a batch to fill")
    max_ongoing_requests: int = Field(256, ge=1, description="requests one retrieval replica accepts at once")


class EncodeRequest(BaseModel):
    texts: list[str]
    is_query: bool = True


class QueryEncoder:
    """The index's embedder as a deployment; concurrent calls are merged into one ``encode``."""

    def __init__(self, config_json: str, max_batch: int, batch_wait_s: float) -> None:
        self.embedder = build_embedder(EmbedderConfig.model_validate_json(config_json))
        self.encode_batch.set_max_batch_size(max_batch)
        self.encode_batch.set_batch_wait_timeout_s(batch_wait_s)

    def describe(self) -> tuple[str, int]:
        return self.embedder.identity, int(self.embedder.dim)

    async def encode(self, request: EncodeRequest) -> np.ndarray:
        return await self.encode_batch(request)

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.002)
    async def encode_batch(self, requests: list[EncodeRequest]) -> list[np.ndarray]:
        out: list[np.ndarray | None] = [None] * len(requests)
        for is_query in (True, False):  # queries and passages take different prefixes
            members = [i for i, r in enumerate(requests) if r.is_query is is_query]
            if not members:
                continue
            texts = [t for i in members for t in requests[i].texts]
            vectors = await asyncio.to_thread(self.embedder.encode, texts, is_query=is_query)
            at = 0
            for i in members:
                out[i] = vectors[at : at + len(requests[i].texts)]
                at += len(requests[i].texts)
        return [v if v is not None else np.zeros((0, self.embedder.dim), np.float32) for v in out]


class ServedEmbedder:
    """The :class:`~routerag.index.embedder.Embedder` of a retrieval replica: each call goes to the
    encoder deployment (from a retrieval worker thread, so blocking on the answer is allowed)."""

    def __init__(self, handle: Any, identity: str, dim: int) -> None:
        self.handle = handle
        self.identity = identity
        self.dim = dim

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self.handle.encode.remote(EncodeRequest(texts=list(texts), is_query=is_query)).result())


@serve.ingress()
class RetrievalReplica:
    """One replica: the bundle opened read-only and the retrieval FastAPI app over its sources."""

    async def __init__(self, index_dir: str, modes: list[str] | None, settings: ServerSettings, encoder: Any) -> None:  # type: ignore[misc]  # Serve awaits it
        from routerag.index.bundle import load_index
        from routerag.sources.registry import mount_bundle

        bundle = await asyncio.to_thread(load_index, Path(index_dir))
        if encoder is not None and bundle.has("dense"):
            identity, dim = await encoder.describe.remote()
            bundle.component("dense").use_embedder(ServedEmbedder(encoder, identity, dim))
        self.sources, unmounted = mount_bundle(bundle, modes)
        if not self.sources.names():
            raise RuntimeError(f"{index_dir}: no source could be mounted ({unmounted})")
        self.settings = settings

    def __serve_build_asgi_app__(self) -> Any:
        from routerag.server.retrieval_app import create_retrieval_app

        return create_retrieval_app(self.sources, self.settings)


def build_application(index_dir: Path, modes: list[str] | None, settings: ServerSettings, ray_settings: RayServeSettings) -> Any:
    """The Serve application: ``ray_settings.replicas`` retrieval replicas bound to one encoder deployment
    (none when the bundle has no dense component)."""
    from routerag.config import load_config
    from routerag.index.bundle import CONFIG_NAME, read_bundle_manifest
    from routerag.index.settings import IndexSettings

    encoder = None
    if "dense" in read_bundle_manifest(index_dir).components:
        index_settings = load_config(IndexSettings, Path(index_dir) / CONFIG_NAME)
        encoder = serve.deployment(QueryEncoder, name="QueryEncoder").options(
            num_replicas=ray_settings.encoder_replicas,
            ray_actor_options={"num_cpus": ray_settings.encoder_cpus},
        ).bind(index_settings.embedder.model_dump_json(), ray_settings.max_batch, ray_settings.batch_wait_ms / 1000)
    replica = serve.deployment(RetrievalReplica, name="RetrievalReplica").options(
        num_replicas=ray_settings.replicas,
        max_ongoing_requests=ray_settings.max_ongoing_requests,
        ray_actor_options={"num_cpus": ray_settings.replica_cpus},
    )
    return replica.bind(str(index_dir), modes, settings, encoder)


def serve_on_ray(
    index_dir: Path,
    modes: list[str] | None,
    settings: ServerSettings,
    ray_settings: RayServeSettings,
    *,
    blocking: bool = True,
) -> None:
    """Start (or join) Ray, start Serve's HTTP proxy on ``settings.host:port`` and run the app."""
    from routerag.raycluster import ensure_ray

    ensure_ray()
    serve.start(http_options={"host": settings.host, "port": settings.port})
    serve.run(build_application(index_dir, modes, settings, ray_settings), name=APP_NAME, route_prefix="/", blocking=blocking)
