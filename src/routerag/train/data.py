"""Training questions and retrieval sources of a run: questions checked against the evaluation
sets, sources from an index bundle or from the evaluation's cached index, the default reward
schedule of a recipe."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from routerag.corpus.schema import Question
from routerag.sources.sourceset import SourceSet
from routerag.train.config import TrainConfig
from routerag.train.rewards import RewardSchedule

log = logging.getLogger(__name__)


def load_training_questions(cfg: TrainConfig, sources_dir: Path) -> tuple[list[Question], SourceSet | None]:
    """Training questions (checked against the evaluation sets) and, for the toy task, its sources."""
    if cfg.data.dataset == "toy" or cfg.sources.toy:
        from routerag.train.fixtures import toy_routing_task

        sources, questions = toy_routing_task(sources_dir)
        return questions, sources
    from routerag.corpus.contamination import check_overlap
    from routerag.corpus.datasets import load_dataset

    questions = load_dataset(cfg.data.dataset, n_questions=cfg.data.n_questions).questions
    if cfg.data.eval_sets and not cfg.data.allow_overlap:
        report = check_overlap(questions, cfg.data.eval_sets)
        if report.overlapping:
            flagged = set(report.overlapping)
            kept = [q for q in questions if q.qid not in flagged]
            if not kept:
                raise ValueError(f"every training question of {cfg.data.dataset} overlaps the evaluation sets {cfg.data.eval_sets}; "
                                 "train on another dataset (or set data.allow_overlap, not recommended)")
            log.warning("dropped %d of %d training questions that overlap the evaluation sets %s (e.g. %s)",
                        len(flagged), len(questions), cfg.data.eval_sets, report.overlapping[:3])
            questions = kept
    return questions, None


def load_sources(cfg: TrainConfig) -> SourceSet:
    if cfg.sources.dataset is not None:
        return grounding_sources(cfg.sources.dataset, cfg.sources.components, cfg.sources.modes)
    if cfg.sources.index is None:
        raise ValueError("sources.index (an index bundle directory) or sources.dataset (the evaluation's cached index) "
                         "is required; or use sources.toy for the toy task")
    from routerag.index.bundle import load_index
    from routerag.sources.registry import mount_bundle

    sources, skipped = mount_bundle(load_index(cfg.sources.index), cfg.sources.modes)
    if not sources.names():
        raise ValueError(f"the index serves none of {cfg.sources.modes}: {skipped}")
    return sources


def grounding_sources(dataset: str, components: Sequence[str], modes: Sequence[str] | None = None) -> SourceSet:
    """The sources ``routerag eval --dataset DATASET --set components=[...]`` mounts (the same
    cached index, so training observations come from the index evaluation searches)."""
    from routerag.run.assemble import dataset_sources
    from routerag.run.config import RunConfig

    extra = {"modes": list(modes)} if modes else {}
    return dataset_sources(RunConfig(dataset=dataset, components=list(components), **extra))


def default_schedule(cfg: TrainConfig) -> RewardSchedule:
    """The configured reward schedule, else the recipe's own."""
    return cfg.schedule if cfg.schedule is not None else cfg.default_schedule()
