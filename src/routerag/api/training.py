"""``train``: a policy trained with one of the recipes (GRPO / SFT / RFT over TRL) — the job of
``routerag train``. The run directory is the configuration's ``output_dir`` (an existing one is
resumed)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from routerag.errors import RouteragError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from routerag.llm.lora_gguf import LoraGGUFInfo
    from routerag.train.config import TrainConfig
    from routerag.train.export_peft import PeftExportInfo
    from routerag.train.golden import Grounder
    from routerag.train.golden.grounding import GroundingRouting
    from routerag.train.golden_set import GoldenSetStats
    from routerag.train.golden_steps import StepSetStats
    from routerag.train.recipes import TrainRunSummary


class TrainRequestError(RouteragError, ValueError):
    """A training run that cannot start as configured (its data, its recipe's requirements)."""


def train(config: TrainConfig) -> TrainRunSummary:
    """Run the configured recipe (an unknown recipe raises ``UnknownNameError``, listing the valid
    ones); a recipe's refusal (``ValueError``, a missing file) is a :class:`TrainRequestError`."""
    from routerag.train.recipes import RECIPES
    from routerag.train.recipes import train as run_recipe

    RECIPES.get(config.recipe)
    try:
        return run_recipe(config)
    except RouteragError:
        raise
    except (ValueError, FileNotFoundError) as exc:
        raise TrainRequestError(str(exc)) from None


def build_golden(sources: Sequence[str], out: Path, *, eval_sets: Sequence[str], k: int = 3, ground: bool = True,
                 routing: GroundingRouting = "planned", command: str = "") -> GoldenSetStats:
    """Golden RouteRAG trajectories (``routerag golden``): from the gold decompositions of
    ``sources``, questions of ``eval_sets`` dropped; with ``ground``, observations from real top-k
    retrieval (dense + BM25 + graph) over each dataset's cached evaluation index; ``routing``
    "outcome" tags each hop with the cheapest mode that returned its gold paragraph and leaves out
    hops whose gold already came back (:class:`~routerag.train.golden.Grounder`). A refusal (an
    unknown source, an overlap with evaluation data) is a :class:`TrainRequestError`."""
    from routerag.train.data import grounding_sources
    from routerag.train.golden import GOLDEN_SOURCES, Grounder
    from routerag.train.golden_set import build_golden_set

    unknown = [s for s in sources if s not in GOLDEN_SOURCES]
    if unknown:
        raise TrainRequestError(f"unknown golden source(s) {', '.join(unknown)}; valid: {', '.join(GOLDEN_SOURCES)}")

    def grounder(name: str) -> Grounder:
        return Grounder(grounding_sources(name, ["dense", "bm25", "graph"]), k=k, routing=routing)

    chosen: Callable[[str], Grounder] | None = grounder if ground else None
    try:
        return build_golden_set(list(sources), out, eval_sets=list(eval_sets), ground=chosen, command=command)
    except RouteragError:
        raise
    except ValueError as exc:
        raise TrainRequestError(str(exc)) from None


def build_golden_steps(sources: Sequence[str], out: Path, *, eval_sets: Sequence[str], k: int = 5,
                       command: str = "") -> StepSetStats:
    """Grounded step-wise R1-Router trajectories (``routerag golden-steps``) from ``sources``
    (``NAME`` or ``NAME:N``: N evenly spaced questions), questions of ``eval_sets`` dropped at load,
    each hop kept only when BM25 top ``k`` returns its evidence; written as trajectories, the step
    rows ``r1-router-sft`` / ``r1-router-step`` train on, and statistics. A refusal (an unknown
    source, an overlap with evaluation data) is a :class:`TrainRequestError`."""
    from routerag.train.golden_steps import build_step_set

    try:
        return build_step_set(list(sources), out, eval_sets=list(eval_sets), k=k, command=command)
    except RouteragError:
        raise
    except ValueError as exc:
        raise TrainRequestError(str(exc)) from None


def rerender_golden(stored_set: Path, out: Path, *, protocol: str = "graphrag-r1", params: dict[str, Any] | None = None,
                    components: Sequence[str] = ("dense", "bm25", "graph"), eval_sets: Sequence[str],
                    command: str = "") -> GoldenSetStats:
    """A stored golden set rendered in another tag protocol (``routerag golden --rerender``): same
    questions, reasoning, queries and answers; each trajectory's observations from ``protocol``'s
    episode (with ``params``, e.g. its evidence mix) over its own dataset's cached evaluation index
    (``components``), as that strategy is evaluated. A refusal (an unknown protocol or parameter,
    a missing set, an overlap with ``eval_sets``) is a :class:`TrainRequestError`."""
    from routerag.strategies.agentic import tag_strategy
    from routerag.train.data import grounding_sources
    from routerag.train.golden import GOLDEN_PROTOCOLS, EpisodeReplay
    from routerag.train.golden_set import rerender_golden_set

    if protocol not in GOLDEN_PROTOCOLS or protocol == "routerag":
        raise TrainRequestError(f"--protocol {protocol!r}: a stored set is re-rendered in graphrag-r1 (it is stored in routerag)")
    try:
        strategy = tag_strategy(protocol)
        episode = strategy.Params.model_validate(params or {})
        modes = strategy.search_sources(episode)

        def replay_for(name: str) -> EpisodeReplay:
            return EpisodeReplay(grounding_sources(name, components, modes), protocol, episode)

        return rerender_golden_set(stored_set, out, replay_for, protocol=protocol, eval_sets=list(eval_sets),  # type: ignore[arg-type]
                                   command=command)
    except RouteragError:
        raise
    except (ValueError, FileNotFoundError) as exc:
        raise TrainRequestError(str(exc)) from None


def export_verl(dataset: str, out: Path | None = None, *, out_dir: Path | None = None, split: str = "train",
                limit: int | None = None, exclude: Sequence[str] = ("2wiki",)) -> tuple[Path, int, int]:
    """Training questions in the verl / Search-R1 parquet schema (``routerag export-verl``); for the
    train split, questions overlapping the ``exclude`` evaluation sets are dropped. Returns the
    file, the rows written and the questions dropped."""
    from routerag.corpus.contamination import check_overlap
    from routerag.corpus.datasets import load_dataset
    from routerag.train.export_verl import export_parquet, verl_data_path

    questions = load_dataset(dataset, n_questions=limit).questions
    dropped = 0
    if exclude and split == "train":
        bad = set(check_overlap(questions, list(exclude)).overlapping)
        dropped = len(bad)
        questions = [q for q in questions if q.qid not in bad]
    path = export_parquet(questions, out or verl_data_path(dataset, out_dir), dataset, split=split)
    return path, len(questions), dropped


def export_lora_gguf(adapter: Path, out: Path, *, base: str = "bundled:qwen2.5-coder-0.5b", dtype: str = "f16") -> LoraGGUFInfo:
    """A PEFT LoRA adapter folder as a llama.cpp LoRA adapter GGUF over the ``base`` model's GGUF
    (a path or ``bundled:`` name)."""
    from routerag.llm.resolve import resolve_model_file
    from routerag.train.export_gguf import export_lora_gguf as export

    return export(adapter, resolve_model_file(base), out, dtype=dtype)


def export_lora_peft(adapter: str, out: Path, *, base: str = "bundled:qwen2.5-coder-0.5b",
                     base_model: str = "Qwen/Qwen2.5-Coder-0.5B-Instruct") -> PeftExportInfo:
    """A llama.cpp LoRA adapter GGUF (or ``policy:NAME``, a shipped policy) as a PEFT adapter
    folder (what vLLM serves); ``base_model`` is recorded as ``base_model_name_or_path``."""
    from routerag.llm.resolve import resolve_model_file
    from routerag.train.adapters import resolve_adapter
    from routerag.train.export_peft import export_peft_adapter

    return export_peft_adapter(resolve_adapter(adapter), resolve_model_file(base), out, base_model=base_model)
