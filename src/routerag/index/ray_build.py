"""``routerag index --engine ray``: the dense component's passage vectors computed by a Ray Data
pipeline instead of in the building process.

The pipeline: the bundle's ``docs.jsonl`` (already written, deduplicated, row i = document i) is cut
into the row ranges of :func:`routerag.index.dense.embedding_shards` (byte ranges of the file, so a
task reads only its own lines) -> a pool of embedding actors (one CPU each, or one GPU each when the
cluster has GPUs) encodes one range per call with the index's embedder and writes it as a ``.npy``
vector shard on disk -> the driver checks every shard and streams them, in row order, into the
existing dense build (flat/HNSW add, or the IVF-PQ fp16 file and training). The driver holds
shard descriptors only, never the passages or the vectors of the whole corpus. For ``ivfpq`` the
add step (assign + encode, the longest step of a large build) runs on a second pool of actors, one
part of ``add_batch`` rows each on a copy of the trained index, and the driver merges the parts in
row order (:func:`ray_ivfpq_adder`): the same index, byte for byte, as the in-process add.

Because every range is encoded by the same embedder with one ``encode`` call, as the in-process
build does, the vectors are bit-identical to ``--engine local``'s. Ray is started in local mode when
no cluster is running (``RAY_ADDRESS`` unset): ``ray.init(num_cpus=...)`` on this machine.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from routerag.index.dense import VectorShards
from routerag.index.embedder import Embedder, EmbedderConfig, build_embedder
from routerag.index.ivfpq import Adder, add_in_batches, merge_parts, open_vectors, read_index, write_index
from routerag.raycluster import ensure_ray

EmbedderFactory = Callable[[EmbedderConfig], Embedder]


class ShardTask(BaseModel):
    """One vector shard to compute: rows ``[start, stop)`` = bytes ``[offset, offset + length)`` of docs.jsonl."""

    shard: int
    start: int
    stop: int
    offset: int
    length: int


class ShardResult(BaseModel):
    shard: int
    rows: int
    dim: int
    identity: str
    path: str


def plan_tasks(docs_path: Path, ranges: list[tuple[int, int]]) -> list[ShardTask]:
    """Byte ranges of ``docs_path`` (one JSON document a line) for the row ``ranges``: one pass
    over the file, keeping only the offsets of range boundaries."""
    cuts = {start for start, _ in ranges} | {stop for _, stop in ranges}
    offsets: dict[int, int] = {}
    row = at = 0
    with docs_path.open("rb") as handle:
        for line in handle:
            if row in cuts:
                offsets[row] = at
            at += len(line)
            row += 1
    if row in cuts:
        offsets[row] = at
    last = max((stop for _, stop in ranges), default=0)
    if row < last:
        raise ValueError(f"{docs_path}: {row} documents, the shard plan needs {last}")
    return [ShardTask(shard=i, start=a, stop=b, offset=offsets[a], length=offsets[b] - offsets[a])
            for i, (a, b) in enumerate(ranges)]


def read_passages(docs_path: Path, task: ShardTask) -> list[str]:
    """The passage strings (``Document.passage``) of one shard's rows."""
    from routerag.corpus.schema import Document

    with docs_path.open("rb") as handle:
        handle.seek(task.offset)
        data = handle.read(task.length)
    passages = [Document.model_validate(json.loads(line)).passage for line in data.decode("utf-8").splitlines()]
    if len(passages) != task.stop - task.start:
        raise ValueError(f"{docs_path}: shard {task.shard} holds {len(passages)} documents, expected {task.stop - task.start}")
    return passages


def shard_path(directory: Path, shard: int) -> Path:
    return directory / f"vectors-{shard:06d}.npy"


class EmbedShards:
    """The Ray Data actor: loads the embedder once, then embeds one shard per call and writes it."""

    def __init__(self, config_json: str, docs_path: str, out_dir: str, dtype: str, factory: EmbedderFactory) -> None:
        self.embedder = factory(EmbedderConfig.model_validate_json(config_json))
        self.docs_path = Path(docs_path)
        self.out_dir = Path(out_dir)
        self.dtype = np.dtype(dtype)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list[Any]]:
        results: list[ShardResult] = []
        for raw in batch["task"]:
            task = ShardTask.model_validate_json(str(raw))
            vectors = self.embedder.encode(read_passages(self.docs_path, task), is_query=False)
            path = shard_path(self.out_dir, task.shard)
            tmp = path.with_name(f".{path.name}.tmp.npy")
            np.save(tmp, np.asarray(vectors).astype(self.dtype, copy=False), allow_pickle=False)
            os.replace(tmp, path)
            results.append(ShardResult(shard=task.shard, rows=len(vectors), dim=int(vectors.shape[1]),
                                       identity=self.embedder.identity, path=str(path)))
        return {"result": [r.model_dump_json() for r in results]}


def on_actor_pool(tasks: Sequence[BaseModel], actor: type, kwargs: dict[str, Any], pool: int, *, gpu: bool = False) -> list[str]:
    """Run ``tasks`` (one a call, as JSON under ``"task"``) on ``pool`` Ray Data actors of class
    ``actor`` (built with ``kwargs``; one CPU each, or one GPU each with ``gpu``); the ``"result"``
    strings the actors return, in no particular order."""
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    dataset = ray.data.from_items([{"task": t.model_dump_json()} for t in tasks], override_num_blocks=len(tasks))
    mapped = dataset.map_batches(actor, fn_constructor_kwargs=kwargs, batch_size=1, concurrency=pool,
                                 num_cpus=0 if gpu else 1, num_gpus=1 if gpu else 0)
    return [str(row["result"]) for row in mapped.iter_rows()]


def embed_with_ray(
    docs_path: Path,
    ranges: list[tuple[int, int]],
    config: EmbedderConfig,
    out_dir: Path,
    *,
    dtype: str = "float32",
    actors: int | None = None,
    factory: EmbedderFactory = build_embedder,
) -> list[ShardResult]:
    """Embed ``ranges`` of ``docs_path`` on a pool of Ray actors into ``out_dir``; the shard results in row order."""
    import ray

    ensure_ray()
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = plan_tasks(docs_path, ranges)
    gpus = int(ray.cluster_resources().get("GPU", 0))
    pool = max(1, min(len(tasks), actors or gpus or int(ray.cluster_resources().get("CPU", 1))))
    embedded = on_actor_pool(tasks, EmbedShards, {"config_json": config.model_dump_json(), "docs_path": str(docs_path),
                                                  "out_dir": str(out_dir), "dtype": dtype, "factory": factory},
                             pool, gpu=gpus > 0)
    results = sorted((ShardResult.model_validate_json(raw) for raw in embedded), key=lambda r: r.shard)
    if [r.shard for r in results] != [t.shard for t in tasks]:
        raise RuntimeError(f"the Ray pipeline returned shards {[r.shard for r in results]}, expected 0..{len(tasks) - 1}")
    for task, result in zip(tasks, results):
        if result.rows != task.stop - task.start:
            raise RuntimeError(f"shard {task.shard}: {result.rows} vectors for {task.stop - task.start} documents")
    if len({(r.identity, r.dim) for r in results}) > 1:
        raise RuntimeError("the embedding actors disagree on the embedder (identity or dimension)")
    return results


class AddTask(BaseModel):
    """One part of the IVF-PQ add step: rows ``[start, stop)`` of the fp16 vector file."""

    part: int
    start: int
    stop: int


class AddParts:
    """The Ray Data actor of the IVF-PQ add step: a copy of the trained, empty index per part,
    filled with the part's rows of the fp16 file (one FAISS thread: one actor per CPU) and written
    to ``out_dir``."""

    def __init__(self, trained: np.ndarray, vectors_path: str, out_dir: str, batch: int) -> None:
        import faiss

        faiss.omp_set_num_threads(1)
        self.trained = trained
        self.vectors = open_vectors(Path(vectors_path))
        self.out_dir = Path(out_dir)
        self.batch = batch

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list[Any]]:
        import faiss

        done: list[str] = []
        for raw in batch["task"]:
            task = AddTask.model_validate_json(str(raw))
            index = faiss.deserialize_index(self.trained)
            add_in_batches(index, self.vectors, self.batch, task.start, task.stop)
            if index.ntotal != task.stop - task.start:
                raise RuntimeError(f"IVF-PQ part {task.part}: {index.ntotal} vectors added, expected {task.stop - task.start}")
            write_index(index, part_path(self.out_dir, task.part))
            done.append(task.model_dump_json())
        return {"result": done}


def part_path(directory: Path, part: int) -> Path:
    return directory / f"ivfpq-part-{part:06d}.index"


def ray_ivfpq_adder(work_dir: Path, *, actors: int | None = None) -> Adder:
    """An :class:`routerag.index.ivfpq.Adder` that runs the add step on a pool of Ray actors (one
    CPU each), one part of ``batch`` rows per call, then merges the parts in row order in this
    process, reading and deleting one at a time (:func:`routerag.index.ivfpq.merge_parts`). The
    actors read the fp16 file and write the parts under ``work_dir``: on a cluster both must be on
    storage every node sees, as for the embedding shards."""

    def add(index: Any, vectors_path: Path, batch: int) -> None:
        import faiss
        import ray

        ensure_ray()
        n = len(open_vectors(vectors_path))
        tasks = [AddTask(part=i, start=a, stop=min(a + batch, n)) for i, a in enumerate(range(0, n, batch))]
        if not tasks:
            return
        work_dir.mkdir(parents=True, exist_ok=True)
        pool = max(1, min(len(tasks), actors or int(ray.cluster_resources().get("CPU", 1))))
        added = on_actor_pool(tasks, AddParts, {"trained": faiss.serialize_index(index), "vectors_path": str(vectors_path),
                                                "out_dir": str(work_dir), "batch": batch}, pool)
        finished = sorted((AddTask.model_validate_json(raw) for raw in added), key=lambda t: t.part)
        if finished != tasks:
            raise RuntimeError(f"the Ray add step returned parts {[t.part for t in finished]}, expected 0..{len(tasks) - 1}")

        def parts() -> Iterator[tuple[int, Any]]:
            for task in tasks:
                path = part_path(work_dir, task.part)
                yield task.start, read_index(path, mmap=False)
                path.unlink()

        merge_parts(index, parts())

    return add


def ray_vectors(docs_path: Path, n_docs: int, settings: Any, work_dir: Path, **kwargs: Any) -> VectorShards:
    """The dense component's :class:`VectorShards` computed by Ray (``settings``: IndexSettings);
    shards of ivfpq bundles are stored as float16 (what the index keeps), others as float32."""
    from routerag.index.dense import embedding_shards

    ranges = embedding_shards(n_docs, settings.dense)
    dtype = "float16" if settings.dense.faiss == "ivfpq" else "float32"
    results = embed_with_ray(docs_path, ranges, settings.embedder, work_dir, dtype=dtype, **kwargs)

    def shards() -> Iterator[np.ndarray]:
        for result in results:
            yield np.load(result.path, mmap_mode="r", allow_pickle=False)

    return VectorShards(results[0].identity, results[0].dim, shards())


def remove_shards(work_dir: Path) -> None:
    shutil.rmtree(work_dir, ignore_errors=True)
