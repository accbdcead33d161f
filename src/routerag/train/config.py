"""Typed configuration of a training run (``routerag train RECIPE --config run.yaml``).

One class per recipe (``RECIPE_CONFIGS``; :data:`AnyTrainConfig` tells them apart by ``recipe``),
each with only the sections its recipe reads and its invariants checked at load (a GRPO batch of
whole groups of G). Every field is documented; ``configs/train/*.yaml`` hold one file per recipe
or setup, an experiment's file may be a short override of another (``base: other.yaml``, see
:func:`routerag.config.config_data`), and the resolved configuration is written into the run
directory.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from routerag.config import OMIT_AT_DEFAULT, ConfigError, config_data
from routerag.registry import UnknownNameError
from routerag.train.env import EnvConfig
from routerag.train.rewards import RewardSchedule, Stage, WeightedReward, graphrag_r1_schedule, two_stage_schedule


class ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(
        default="bundled:qwen2.5-coder-0.5b",
        description="policy: an HF id or directory, a bundled:NAME / .gguf (dequantised to fp32), or 'tiny' "
        "(a random 2-layer Qwen2 over the tokenizer's vocabulary, for CPU checks)",
    )
    tokenizer: str | None = Field(default=None, description="tokenizer source; None = the model's (the bundled one for 'tiny')")
    dtype: Literal["auto", "float32", "bfloat16"] = Field(default="auto", description="weights dtype (auto: bf16 on GPU, fp32 on CPU)")
    chat_template: bool = Field(default=True, description="render prompts with the tokenizer's chat template")
    tiny_layers: int = Field(default=2, ge=1, description="layers of the 'tiny' model")
    tiny_hidden: int = Field(default=64, ge=8, description="hidden size of the 'tiny' model")


class LoraSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(default=False, description="train LoRA adapters (peft) instead of every weight")
    r: int = Field(default=16, ge=1, description="adapter rank")
    alpha: int = Field(default=32, ge=1, description="LoRA alpha (scale = alpha / r)")
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0, description="dropout on the adapter input")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        description="module names that get adapters (Qwen2 attention + MLP projections)",
    )
    layers_top: int | None = Field(
        default=None, ge=1,
        description="adapters on the top N decoder layers only (None: every layer); the layers below hold no trainable "
        "parameter, so the SFT fast path runs them without autograd and caches their output (train/frozen_prefix.py)",
    )
    init_from: str | None = Field(
        default=None,
        description="continue training a trained adapter instead of a fresh one: a PEFT adapter directory, a llama.cpp "
        "LoRA adapter GGUF of the base model, or policy:NAME for one shipped in the package (policy:routerag-sft-qwen2.5-coder-0.5b); "
        "its rank and alpha replace r and alpha; with grpo.beta > 0 TRL keeps a frozen copy of it as the reference policy",
    )


class DataSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dataset: str = Field(default="musique", description="training questions: a routerag dataset name or file:<path>, or 'toy'")
    n_questions: int | None = Field(default=None, ge=1, description="evenly spaced questions to keep (None: all)")
    eval_sets: list[str] = Field(
        default_factory=lambda: ["2wiki"],
        description="evaluation datasets the training questions must not overlap (normalised question + answer, ids, shared "
        "MuSiQue hops); NAME:N = the N evenly spaced questions routerag eval --limit N evaluates",
    )
    allow_overlap: bool = Field(default=False, description="keep training questions that overlap an evaluation set (by default they are dropped, with a warning)")


class SourcesSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: str | None = Field(default=None, description="index bundle directory (routerag index build) serving the modes")
    dataset: str | None = Field(
        default=None,
        description="instead of index: the cached index routerag eval builds for this dataset's corpus (same settings, "
        "so the policy trains on the retrieval it is evaluated with)",
    )
    components: list[str] = Field(
        default_factory=lambda: ["dense", "bm25", "graph"], description="index components, with sources.dataset (as routerag eval's)"
    )
    modes: list[str] = Field(default_factory=lambda: ["passage", "graph", "hybrid"], description="modes to mount from the bundle")
    toy: bool = Field(default=False, description="use the toy routing task's two BM25 sources instead of an index")


class GRPOSpec(BaseModel):
    """The GRPO settings; defaults follow RouteRAG's released two-stage script where it states them."""

    model_config = ConfigDict(extra="forbid")
    num_generations: int = Field(default=5, ge=2, description="group size G (RouteRAG: n_agent=5)")
    per_device_train_batch_size: int = Field(default=5, ge=1, description="completions per device per step (a multiple of G)")
    gradient_accumulation_steps: int = Field(default=1, ge=1, description="micro-batches per optimiser step")
    optim: str = Field(default="adamw_torch", description="transformers optimiser name (adamw_torch, sgd, ...)")
    max_steps: int = Field(default=40, ge=1, description="optimiser steps (RouteRAG: 40, switch at 20)")
    learning_rate: float = Field(default=1e-6, gt=0.0, description="AdamW learning rate (RouteRAG: 1e-6 full fine-tuning)")
    beta: float = Field(default=0.001, ge=0.0, description="KL coefficient to the reference policy (RouteRAG: 0.001); 0 loads no reference")
    temperature: float = Field(default=1.0, gt=0.0, description="sampling temperature of rollouts (also used to score them)")
    loss_type: str = Field(default="grpo", description="TRL loss aggregation: grpo, dapo, dr_grpo, bnpo")
    scale_rewards: str = Field(default="group", description="advantage scaling: group (GRPO), batch, none (Dr. GRPO)")
    logging_steps: int = Field(default=1, ge=1, description="steps between metric records")
    save_steps: int = Field(default=10, ge=1, description="steps between checkpoints (RouteRAG: 10)")
    save_total_limit: int | None = Field(default=3, ge=1, description="checkpoints kept")
    seed: int = Field(default=42, description="seed of data order, initialisation and sampling")
    torch_threads: int | None = Field(
        default=None, ge=1, description="torch CPU threads (1 makes tiny CPU runs ~100x faster on a loaded machine); None leaves torch's default"
    )
    use_cpu: bool = Field(default=False, description="force CPU even when a GPU is present")
    rollout_backend: Literal["policy", "llamacpp", "batched"] = Field(
        default="policy",
        description="who samples the rollouts: policy = the training model token by token (transformers); llamacpp = "
        "llama.cpp over the base GGUF with the current LoRA adapter, re-exported every optimiser step (GGUF base + LoRA; "
        "several times faster on a CPU); batched = the training model decoding every episode of the step as one batch "
        "(episodes in threads, routerag.train.batched: the GPU backend)",
    )
    rollout_threads: int | None = Field(default=None, ge=1, description="llama.cpp threads of the llamacpp rollout backend (None: all cores)")
    dynamic_sampling: bool = Field(
        default=False,
        description="DAPO's dynamic sampling: a group whose G rewards are all equal (no advantage, no gradient) is replaced by "
        "another training question's group; logged as dynamic/skipped_groups",
    )
    dynamic_max_tries: int = Field(default=4, ge=1, description="replacement groups tried before a group without variance is kept")
    extra: dict[str, Any] = Field(
        default_factory=dict, json_schema_extra=OMIT_AT_DEFAULT,
        description="further arguments of TRL's GRPOConfig, passed through as written (e.g. {max_grad_norm: 0.5, "
        "warmup_ratio: 0.1}); names are checked against trl.GRPOConfig when the configuration is loaded. Not allowed: "
        "the fields above and what routerag derives itself (GRPO_DERIVED)",
    )

    @field_validator("extra")
    @classmethod
    def _trl_fields(cls, extra: dict[str, Any]) -> dict[str, Any]:
        return check_trl_extra(extra, "GRPOConfig", "grpo", GRPO_DERIVED)


GoldenSource = Literal["musique", "hotpotqa", "hotpotqa-distractor-train", "r1router"]
DEFAULT_GOLDEN_SOURCES: tuple[GoldenSource, ...] = ("musique", "hotpotqa")


class SFTSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(default=False, description="run a supervised cold start before RL")
    sources: list[GoldenSource] = Field(default_factory=lambda: list(DEFAULT_GOLDEN_SOURCES), description="golden trajectory sources")
    golden_set: str | None = Field(
        default=None, json_schema_extra=OMIT_AT_DEFAULT,
        description="train on a stored golden set (``routerag golden --out DIR``: DIR or its golden.jsonl.gz) instead of "
        "building trajectories from ``sources``; its questions are checked against data.eval_sets again",
    )
    rows_files: list[str] = Field(
        default_factory=list, json_schema_extra=OMIT_AT_DEFAULT,
        description="JSONL files of token rows ({input_ids, labels}, e.g. an RFT round's kept.jsonl) trained on beside "
        "the golden trajectories, as they are (same tokenizer: the run's model)",
    )
    max_steps: int = Field(default=100, ge=1, description="SFT optimiser steps (ignored when epochs is set)")
    epochs: float | None = Field(default=None, gt=0.0, description="passes over the trajectories; None: max_steps decides")
    learning_rate: float = Field(default=1e-5, gt=0.0, description="SFT learning rate")
    lr_scheduler_type: str = Field(default="linear", description="transformers learning-rate schedule (linear, cosine, constant, ...)")
    warmup_steps: int = Field(default=0, ge=0, description="learning-rate warm-up steps")
    per_device_train_batch_size: int = Field(default=4, ge=1, description="trajectories per step")
    gradient_accumulation_steps: int = Field(default=1, ge=1, description="micro-batches per optimiser step")
    max_length: int = Field(default=2048, ge=16, description="token limit per trajectory")
    drop_longer: bool = Field(
        default=False, description="drop trajectories longer than max_length instead of cutting them (a cut one loses its answer)"
    )
    max_examples: int | None = Field(default=None, ge=1, description="keep this many evenly spaced trajectories (None: all)")
    answer_supported_only: bool = Field(
        default=False, json_schema_extra=OMIT_AT_DEFAULT,
        description="keep only the trajectories whose observations hold a gold answer (and the yes/no ones), before "
        "max_examples: a row whose retrieval missed the answer teaches answering without the evidence "
        "(counts per source in sft_data_stats.json: answer_support)",
    )
    ground: bool = Field(
        default=False,
        description="replace the gold-only evidence of MuSiQue/HotpotQA hops by real top-k retrieval over the dataset's "
        "evaluation index (same components as routerag eval), keeping the gold paragraph (see golden.Grounder)",
    )
    ground_components: list[str] = Field(
        default_factory=lambda: ["dense", "bm25", "graph"],
        description="index components of the grounding index (equal to the evaluation's, so the cached index is shared)",
    )
    logits_on_labels_only: bool = Field(
        default=False,
        description="compute the output layer only where the next token is labelled (same loss; ~25% less compute "
        "for multi-turn rows whose observations are masked, the saving that makes a CPU run feasible)",
    )
    gradient_checkpointing: bool = Field(
        default=False,
        description="recompute activations in the backward pass (TRL's SFTConfig default is on: it saves memory but runs the "
        "forward twice and, with LoRA, makes autograd track every layer; off is the CPU fast path)",
    )
    frozen_no_grad: bool = Field(
        default=True, description="run the decoder layers below the lowest adapted layer under torch.no_grad (same loss)"
    )
    cache_frozen: bool = Field(
        default=True,
        description="keep the frozen lower layers' output per row in memory, so a row seen again (another epoch, the golden "
        "rows of the next RFT round) skips them; same loss",
    )
    max_observation_tokens: int | None = Field(
        default=None, ge=16,
        description="cut each observation of an SFT row to this many tokens (the <information> block keeps its closing tag, "
        "as env.max_observation_tokens cuts rollouts); None: observations whole",
    )
    export_gguf: bool = Field(default=True, description="LoRA runs: also write the adapter as a llama.cpp LoRA GGUF (adapter.gguf)")
    extra: dict[str, Any] = Field(
        default_factory=dict, json_schema_extra=OMIT_AT_DEFAULT,
        description="further arguments of TRL's SFTConfig, passed through as written (e.g. {weight_decay: 0.01}); names "
        "are checked against trl.SFTConfig when the configuration is loaded. Not allowed: the fields above and what "
        "routerag derives itself (SFT_DERIVED)",
    )

    @field_validator("extra")
    @classmethod
    def _trl_fields(cls, extra: dict[str, Any]) -> dict[str, Any]:
        return check_trl_extra(extra, "SFTConfig", "sft", SFT_DERIVED)


GRPO_DERIVED: dict[str, str] = {
    **{name: f"grpo.{name}" for name in GRPOSpec.model_fields if name != "extra"},
    "output_dir": "output_dir", "use_cpu": "grpo.use_cpu", "max_completion_length": "env.max_completion_tokens",
}
"""TRL GRPOConfig arguments routerag sets (``train.grpo.grpo_arguments``) -> the setting they come from:
``grpo.extra`` may not name them. Other arguments routerag passes (``bf16``, ``report_to``,
``disable_tqdm``, ``mask_truncated_completions``) are defaults that ``grpo.extra`` overrides."""

SFT_DERIVED: dict[str, str] = {
    **{name: f"sft.{name}" for name in SFTSpec.model_fields if name != "extra"},
    "output_dir": "output_dir", "use_cpu": "grpo.use_cpu", "num_train_epochs": "sft.epochs",
    "logging_steps": "grpo.logging_steps", "save_steps": "grpo.save_steps", "seed": "grpo.seed",
}
"""TRL SFTConfig arguments routerag sets (``train.sft.sft_trainer``) -> the setting they come from:
``sft.extra`` may not name them."""


def check_trl_extra(extra: dict[str, Any], trl_class: str, section: str, derived: dict[str, str]) -> dict[str, Any]:
    """``extra`` when each name is an argument of ``trl.<trl_class>`` that routerag does not set
    itself; TRL is imported only when ``extra`` is not empty."""
    if not extra:
        return extra
    taken = [f"{name} (set by {derived[name]})" for name in sorted(set(extra) & set(derived))]
    if taken:
        raise ValueError(f"{section}.extra may not set what routerag sets from the configuration: {', '.join(taken)}")
    try:
        cls = getattr(importlib.import_module("trl"), trl_class)
    except ImportError as exc:
        raise ValueError(f"{section}.extra needs TRL to check its names ({exc}); install routerag's train extra") from None
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(extra) - fields)
    if unknown:
        hints = [f"{name} (did you mean {', '.join(close)}?)" if (close := difflib.get_close_matches(name, fields, 2)) else name
                 for name in unknown]
        raise ValueError(f"{section}.extra: not arguments of trl.{trl_class}: {'; '.join(hints)}")
    return extra


KeepRule = Literal["best", "correct"]
"""What an RFT round trains on per question (``rft.keep``)."""


class RFTSpec(BaseModel):
    """Rejection-sampling fine-tuning (expert iteration, STaR / ReST-EM): per round, sample G
    episodes per training question with llama.cpp and the current adapter, score them with the
    reward schedule (the round is the schedule's step), keep per question the best correct one,
    fine-tune an adapter on the kept + golden trajectories (the SFT fast path; a fresh one, or
    ``lora.init_from`` restored afresh every round), export it, evaluate."""

    model_config = ConfigDict(extra="forbid")
    rounds: int = Field(default=3, ge=1, description="rejection-sampling rounds")
    max_questions: int | None = Field(
        default=None, ge=1, description="evenly spaced training questions per round, after the evaluation overlap is dropped (None: all)"
    )
    num_generations: int = Field(default=4, ge=1, description="G: episodes sampled per question and round")
    temperature: float = Field(default=1.0, gt=0.0, description="sampling temperature of the episodes")
    lanes: int = Field(default=1, ge=1, description="parallel sampling lanes (one llama.cpp context each, questions spread over them)")
    threads_per_lane: int = Field(default=1, ge=1, description="llama.cpp threads of each lane")
    correct: Literal["em", "f1"] = Field(default="em", description="what makes an episode correct (kept): EM, or F1 >= f1_threshold")
    f1_threshold: float = Field(default=0.8, ge=0.0, le=1.0, description="F1 an episode needs to count as correct with correct: f1")
    keep: KeepRule = Field(
        default="best", json_schema_extra=OMIT_AT_DEFAULT,
        description="what a round trains on per question: the best correct episode (highest reward: with the efficiency "
        "stage the cheapest), or every distinct correct one (ReST-EM; the policy's own mix of short and long episodes)",
    )
    accumulate: bool = Field(
        default=True, description="train on the best kept episode per question over all rounds so far (False: this round's only, ReST-EM)"
    )
    golden: bool = Field(default=True, description="add the golden trajectories (sft.sources, grounded per sft.ground) to every round's training set")
    initial_adapter: str | None = Field(
        default="policy:routerag-sft-qwen2.5-coder-0.5b",
        description="adapter GGUF that samples round 1 (a .gguf path or policy:NAME); None: the base model",
    )
    eval_dataset: str | None = Field(default="musique", description="held-out questions evaluated after every round (greedy episodes)")
    eval_limit: int = Field(default=10, ge=1, description="evenly spaced evaluation questions (routerag eval --limit N's sample)")
    eval_initial: bool = Field(default=True, description="also evaluate the initial policy (round 0 of the curve)")
    stop_branches: int = Field(
        default=0, ge=0, json_schema_extra=OMIT_AT_DEFAULT,
        description="of the G episodes of a question, how many answer after their first search: the policy's second turn "
        "begins with stop_prefix as its own tokens (labelled as the policy's when kept), so that the efficiency stage "
        "sees the stop a policy that always searches twice never samples (0: every episode as the policy goes)",
    )
    stop_prefix: str = Field(
        default="<think> I have the answer. </think>\n<answer>", json_schema_extra=OMIT_AT_DEFAULT,
        description="what a stop branch's second turn begins with: the policy's own words for answering (the shipped "
        "policy's, from its golden trajectories)",
    )
    stop_needs_evidence: bool = Field(
        default=False, json_schema_extra=OMIT_AT_DEFAULT,
        description="keep a one-search episode only when its search's hits hold a gold answer (a yes/no question's never); "
        "else the question keeps its best longer correct episode: the stops a policy learns are the ones its evidence "
        "allowed, not the lucky ones",
    )
    stop_after: Literal["round", "sample"] = Field(
        default="round", json_schema_extra=OMIT_AT_DEFAULT,
        description="sample: stop a round once its episodes are sampled, scored and kept (round-N/train_kept.jsonl), so that "
        "the fine-tune runs elsewhere (a GPU: routerag-sft with sft.rows_files); the run goes on from that round "
        "once its final/ adapter is in place",
    )

    @model_validator(mode="after")
    def _branches_fit(self) -> "RFTSpec":
        if self.stop_branches > self.num_generations:
            raise ValueError(f"stop_branches ({self.stop_branches}) is more than num_generations ({self.num_generations})")
        return self


FLAT_DEFAULTS: dict[str, Any] = {"sft": SFTSpec, "rft": RFTSpec, "switch_step": 20, "pra_until": 20}
"""The sections every recipe had in the one flat configuration (before per-recipe classes) and
their defaults: a stored ``config.resolved.yaml`` of that time lists them all; a recipe without
one drops it when it holds the default (what the run used), so old run records load as they are."""


def _is_flat_default(name: str, value: Any) -> bool:
    default = FLAT_DEFAULTS[name]
    if not (isinstance(default, type) and issubclass(default, BaseModel)):
        return bool(value == default)
    try:
        return bool(default.model_validate(value) == default())
    except ValueError:
        return False


class TrainConfig(BaseModel):
    """What every recipe's run has; each recipe's class (``RECIPE_CONFIGS``) adds its own sections
    and checks its invariants. Build one with :func:`train_config` (a mapping, discriminated on
    ``recipe``) or :func:`load_train_config` (a YAML file with ``base:`` layering and overrides)."""

    model_config = ConfigDict(extra="forbid")
    recipe: str = Field(description="recipe name (routerag train --help lists them)")
    output_dir: str = Field(default="runs/train", description="run directory: config, metrics.jsonl, curves, checkpoints")
    resume: bool = Field(default=True, description="continue from the last checkpoint in output_dir when there is one")
    model: ModelSpec = Field(default_factory=ModelSpec, description="the policy model")
    lora: LoraSpec = Field(default_factory=LoraSpec, description="LoRA adapters (off: every weight trains)")
    data: DataSpec = Field(default_factory=DataSpec, description="training questions")
    sources: SourcesSpec = Field(default_factory=SourcesSpec, description="retrieval sources of the episodes")
    env: EnvConfig = Field(default_factory=EnvConfig, description="the rollout environment (episode rules, prompt, prices)")
    grpo: GRPOSpec = Field(default_factory=GRPOSpec, description="GRPO; its seed, threads, logging and saving steps serve every recipe")
    schedule: RewardSchedule | None = Field(default=None, description="reward stages; None = the recipe's default schedule")

    @model_validator(mode="before")
    @classmethod
    def _drop_flat_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        unused = [k for k in FLAT_DEFAULTS if k in data and k not in cls.model_fields and _is_flat_default(k, data[k])]
        return {k: v for k, v in data.items() if k not in unused} if unused else data

    @model_validator(mode="after")
    def _shared_invariants(self) -> TrainConfig:
        if type(self) is TrainConfig:
            raise ValueError("TrainConfig holds what every recipe shares: build a recipe's configuration "
                             "(train_config / load_train_config, or its class in RECIPE_CONFIGS)")
        if self.grpo.rollout_backend == "llamacpp" and not self.lora.enabled:
            raise ValueError("grpo.rollout_backend llamacpp samples with the LoRA adapter being trained: set lora.enabled: true")
        if self.lora.init_from and not self.lora.enabled:
            raise ValueError("lora.init_from needs lora.enabled: true (the restored adapter is what trains)")
        if self.lora.layers_top is not None and not self.lora.enabled:
            raise ValueError("lora.layers_top needs lora.enabled: true (it places the adapters)")
        return self

    @property
    def export_gguf(self) -> bool:
        """Whether a LoRA run's adapter is also written as a llama.cpp adapter GGUF."""
        return self.lora.enabled

    def default_schedule(self) -> RewardSchedule:
        """The recipe's reward schedule when ``schedule`` is not set."""
        raise NotImplementedError

    def _check_groups(self) -> None:
        """GRPO recipes: each generation batch holds whole groups of G completions."""
        g = self.grpo
        per_generation = g.extra.get("steps_per_generation", g.gradient_accumulation_steps)
        batch = int(g.extra.get("generation_batch_size", g.per_device_train_batch_size * per_generation))
        if batch % g.num_generations:
            raise ValueError(
                f"grpo: a generation batch of {batch} completions (per_device_train_batch_size {g.per_device_train_batch_size} "
                f"x {per_generation} steps) is not a multiple of the group size G = num_generations {g.num_generations}")


class WithSFT(TrainConfig):
    """A recipe with a supervised phase (``sft``)."""

    sft: SFTSpec = Field(default_factory=SFTSpec, description="the supervised fine-tuning phase")

    @property
    def export_gguf(self) -> bool:
        return self.lora.enabled and self.sft.export_gguf

    def _refuse_unread(self, *names: str) -> None:
        """Settings of ``sft`` this recipe does not read, refused when set (instead of silently ignored)."""
        defaults = SFTSpec()
        unread = [f"sft.{name}" for name in names if getattr(self.sft, name) != getattr(defaults, name)]
        if unread:
            raise ValueError(f"{', '.join(unread)}: not read by recipe {self.recipe}")
        if self.sft.golden_set is not None and self.sft.ground:
            raise ValueError("sft.ground grounds trajectories built from sft.sources; a stored sft.golden_set is grounded already")


class RouteRAGTwoStageConfig(TrainConfig):
    """RouteRAG: GRPO, EM through ``switch_step``, then accuracy–efficiency."""

    recipe: Literal["routerag-two-stage"] = Field(default="routerag-two-stage", description="recipe name")
    switch_step: int = Field(default=20, ge=0, description="RouteRAG: last step of the EM stage (release: 20 of 40)")

    @model_validator(mode="after")
    def _invariants(self) -> RouteRAGTwoStageConfig:
        self._check_groups()
        return self

    def default_schedule(self) -> RewardSchedule:
        return two_stage_schedule(self.switch_step)


class GraphRAGR1SFTSpec(SFTSpec):
    """GraphRAG-R1's stage 1 (Yu et al., 2025: lr 5e-6, 1 epoch, LoRA r 16 / alpha 32), on by
    default. The paper's sampling temperature and retrieval cap concern sampled trajectories;
    golden trajectories are rendered, not sampled, so they do not apply to this phase. The
    defaults before these (an alternative for a few rows, where 5e-6 for one epoch barely moves a
    fresh adapter): ``sft.epochs: null, sft.max_steps: 200, sft.learning_rate: 1.0e-5``."""

    enabled: bool = Field(default=True, description="run the stage-1 SFT cold start before GRPO")
    learning_rate: float = Field(default=5e-6, gt=0.0, description="SFT learning rate (GraphRAG-R1 stage 1: 5e-6)")
    epochs: float | None = Field(default=1.0, gt=0.0, description="passes over the trajectories (GraphRAG-R1 stage 1: 1); None: max_steps decides")
    dev_examples: int = Field(
        default=0, ge=0,
        description="hold out this many evenly spaced training trajectories as a dev slice (never trained on): its "
        "loss is measured before training, every dev_eval_steps and at the end (dev_loss.json), to choose the learning "
        "rate and passes on training questions, never on the evaluation sets",
    )
    dev_eval_steps: int = Field(default=50, ge=1, description="optimiser steps between two dev-slice losses")


class GraphRAGR1LoraSpec(LoraSpec):
    """LoRA adapters, on by default (GraphRAG-R1: r 16, alpha 32)."""

    enabled: bool = Field(default=True, description="train LoRA adapters (peft) instead of every weight")


class GraphRAGR1Config(WithSFT):
    """GraphRAG-R1: an SFT cold start on golden trajectories rendered in its own protocol
    (``sft``, on by default with the paper's stage-1 constants; observations from the
    ``graphrag-r1`` episode's retrieval over the run's ``sources``), then GRPO with format + PRA
    through ``pra_until``, then format + CAF; every rollout in the ``graphrag-r1`` strategy's
    episode (its own protocol, the one the trained policy is evaluated in). With a stored
    ``sft.golden_set`` the trajectories of ``sft.sources`` are kept."""

    recipe: Literal["graphrag-r1"] = Field(default="graphrag-r1", description="recipe name")
    lora: GraphRAGR1LoraSpec = Field(default_factory=GraphRAGR1LoraSpec, description="LoRA adapters (GraphRAG-R1: r 16, alpha 32)")
    sft: GraphRAGR1SFTSpec = Field(default_factory=GraphRAGR1SFTSpec,
                                   description="stage 1: SFT cold start on golden trajectories in GraphRAG-R1's protocol")
    pra_until: int = Field(default=20, ge=0, description="GraphRAG-R1: last step of the format+PRA stage")
    stop_after_sft: bool = Field(
        default=False,
        description="end the run after stage 1 (to evaluate its adapter first); the same run directory without it "
        "goes on with GRPO from the stage-1 adapter",
    )
    env: EnvConfig = Field(default_factory=lambda: EnvConfig(strategy="graphrag-r1"),
                           description="the rollout environment: the graphrag-r1 episode (its params), token limits")

    @model_validator(mode="before")
    @classmethod
    def _graphrag_r1_episode(cls, data: Any) -> Any:
        env = data.get("env") if isinstance(data, dict) else None
        if isinstance(env, dict) and "strategy" not in env:  # the episode this recipe trains, unless named
            data = {**data, "env": {**env, "strategy": "graphrag-r1"}}
        return data

    @model_validator(mode="after")
    def _invariants(self) -> GraphRAGR1Config:
        self._check_groups()
        if self.env.strategy != "graphrag-r1":
            raise ValueError(f"env.strategy {self.env.strategy!r}: recipe graphrag-r1 trains the graphrag-r1 episode "
                             "(the protocol its strategy is evaluated in)")
        # observations come from the episode's retrieval (no grounding) and are cut as rollouts cut them (env.max_observation_tokens)
        self._refuse_unread("rows_files", "ground", "max_observation_tokens")
        return self

    def default_schedule(self) -> RewardSchedule:
        return graphrag_r1_schedule(self.pra_until)


R1RouterStepType = Literal["ret", "ans", "final"]
R1_ROUTER_STEP_TYPES: list[R1RouterStepType] = ["ret", "ans", "final"]
_SIDE_HELP = ("trajectories whose steps are trained on: the train side of the fixed split by trajectory "
              "(routerag.corpus.r1router_split; dataset r1router-steps-heldout is never trained on), or all")
_GOLDEN_STEPS_HELP = (
    "step sets written by routerag golden-steps (a folder or its trajectories.jsonl) whose steps are trained on beside the "
    "released ones, on the training side only (the released split is unchanged); at load each synthesised trajectory is "
    "checked against data.eval_sets (required with it) and, with trajectories: train, the released held-out "
    "trajectories, and a run with one overlapping is refused (as a stored sft.golden_set is)"
)


def _golden_steps_field() -> Any:
    return Field(default_factory=list, json_schema_extra=OMIT_AT_DEFAULT, description=_GOLDEN_STEPS_HELP)


def _check_golden_steps(cfg: TrainConfig, golden_steps: list[str]) -> None:
    if golden_steps and not cfg.data.eval_sets:
        raise ValueError("golden_steps: name the evaluation sets its trajectories are checked against in data.eval_sets "
                         "(the step set's steps_stats.json lists those it was built without)")
    if len(set(golden_steps)) != len(golden_steps):
        raise ValueError("golden_steps: a step set is named twice")


class R1RouterGRPOSpec(GRPOSpec):
    """GRPO with R1-Router's Step-GRPO settings (Peng et al., 2025) as defaults: group size 8 and
    learning rate 1e-6; its clip epsilon 0.2 is TRL's ``GRPOConfig.epsilon`` default
    (``grpo.extra.epsilon`` changes it). The step reward's alpha = beta = 0.5 are ``r1_router_step``'s
    ``w_query`` / ``w_route`` defaults. RouteRAG's G = 5 with batches of 10 (``grpo: {num_generations: 5,
    per_device_train_batch_size: 10}``), this recipe's earlier setting, is the smaller alternative."""

    num_generations: int = Field(default=8, ge=2, description="group size G (R1-Router's Step-GRPO: 8)")
    per_device_train_batch_size: int = Field(default=8, ge=1, description="completions per device per step (a multiple of G)")


class R1RouterStepConfig(TrainConfig):
    """R1-Router Step-GRPO over the per-step prompts of the released golden trajectories (and of
    the synthesised ones of ``golden_steps``); the paper's settings by default (:class:`R1RouterGRPOSpec`)."""

    recipe: Literal["r1-router-step"] = Field(default="r1-router-step", description="recipe name")
    trajectories: Literal["train", "all"] = Field(default="train", description=_SIDE_HELP)
    golden_steps: list[str] = _golden_steps_field()
    step_types: list[R1RouterStepType] = Field(
        default_factory=lambda: list(R1_ROUTER_STEP_TYPES), min_length=1,
        description="step kinds whose prompts are trained on: ret (decompose and route), ans (intermediate answer), "
        "final (final answer); [ret] trains the routing decision alone",
    )
    grpo: R1RouterGRPOSpec = Field(default_factory=R1RouterGRPOSpec,
                                   description="GRPO, with R1-Router's group size 8 and lr 1e-6 as defaults (clip 0.2: TRL's)")

    @model_validator(mode="after")
    def _invariants(self) -> R1RouterStepConfig:
        self._check_groups()
        _check_golden_steps(self, self.golden_steps)
        return self

    def default_schedule(self) -> RewardSchedule:
        return RewardSchedule(stages=[Stage(name="step", rewards=[WeightedReward(name="r1_router_step")])])


class R1RouterSFTConfig(WithSFT):
    """An SFT cold start on the steps of R1-Router's released trajectories: each step's released
    prompt (system + user) and its gold output in R1-Router's format
    (:func:`~routerag.train.golden.r1router.r1_router_gold_completion`), the prompt masked; with
    ``golden_steps``, the steps of synthesised trajectories too."""

    recipe: Literal["r1-router-sft"] = Field(default="r1-router-sft", description="recipe name")
    trajectories: Literal["train", "all"] = Field(default="train", description=_SIDE_HELP)
    golden_steps: list[str] = _golden_steps_field()
    step_types: list[R1RouterStepType] = Field(
        default_factory=lambda: list(R1_ROUTER_STEP_TYPES),
        description="step kinds trained on: ret (decompose and route), ans (intermediate answer), final (final answer)",
    )
    max_per_type: dict[R1RouterStepType, int] = Field(
        default_factory=dict, json_schema_extra=OMIT_AT_DEFAULT,
        description="keep at most this many evenly spaced rows of a step kind (after sft.max_length / drop_longer); "
        "kinds not named keep all",
    )

    @model_validator(mode="after")
    def _invariants(self) -> R1RouterSFTConfig:
        # trained on the released steps, not golden trajectories or retrieval
        self._refuse_unread("sources", "golden_set", "ground", "rows_files", "max_observation_tokens")
        _check_golden_steps(self, self.golden_steps)
        return self

    def default_schedule(self) -> RewardSchedule:
        return RewardSchedule(stages=[Stage(name="step", rewards=[WeightedReward(name="r1_router_step")])])


class RouteRAGSFTConfig(WithSFT):
    """An SFT cold start only (``sft.enabled`` is implied)."""

    recipe: Literal["routerag-sft"] = Field(default="routerag-sft", description="recipe name")

    @model_validator(mode="after")
    def _invariants(self) -> RouteRAGSFTConfig:
        self._refuse_unread()
        return self

    def default_schedule(self) -> RewardSchedule:
        return two_stage_schedule(20)  # no reward is computed; the RouteRAG one for a record


class RouteRAGRFTConfig(WithSFT):
    """Rejection-sampling rounds (``rft``) scored by the two-stage schedule (the round is its step)."""

    recipe: Literal["routerag-rft"] = Field(default="routerag-rft", description="recipe name")
    rft: RFTSpec = Field(default_factory=RFTSpec, description="the rejection-sampling rounds")
    switch_step: int = Field(default=20, ge=0, description="last round scored by EM alone (the efficiency stage after)")

    @model_validator(mode="after")
    def _invariants(self) -> RouteRAGRFTConfig:
        self._refuse_unread("rows_files", "drop_longer")  # a round trains on its own kept rows (+ the golden ones), longer ones dropped
        return self

    def default_schedule(self) -> RewardSchedule:
        return two_stage_schedule(self.switch_step)


AnyTrainConfig = Annotated[
    RouteRAGTwoStageConfig | GraphRAGR1Config | R1RouterStepConfig | R1RouterSFTConfig | RouteRAGSFTConfig | RouteRAGRFTConfig,
    Field(discriminator="recipe"),
]
"""Any recipe's configuration, told apart by ``recipe``."""

RECIPE_CONFIGS: dict[str, type[TrainConfig]] = {
    cls.model_fields["recipe"].default: cls
    for cls in (RouteRAGTwoStageConfig, GraphRAGR1Config, R1RouterStepConfig, R1RouterSFTConfig, RouteRAGSFTConfig,
                RouteRAGRFTConfig)
}
"""recipe name -> its configuration class (tests/integration/test_train_recipes.py checks it against RECIPES)."""

DEFAULT_RECIPE = "routerag-two-stage"
"""The recipe of a configuration that names none (as when one class served every recipe)."""

_ADAPTER: TypeAdapter[TrainConfig] = TypeAdapter(AnyTrainConfig)


def train_config(data: Mapping[str, Any], where: str = "") -> TrainConfig:
    """The recipe configuration of ``data`` (its ``recipe`` picks the class); a
    :class:`~routerag.config.ConfigError` of one line per problem when it is not valid."""
    recipe = data.get("recipe", DEFAULT_RECIPE)
    if recipe not in RECIPE_CONFIGS:
        raise ConfigError(f"{where}unknown recipe {recipe!r}; valid: {', '.join(RECIPE_CONFIGS)}")
    try:
        return _ADAPTER.validate_python({**data, "recipe": recipe})
    except ValidationError as exc:
        raise ConfigError(f"{where}invalid {recipe} configuration: {_problems(exc, str(recipe))}") from None
    except UnknownNameError as exc:  # a reward name of the schedule
        if not where:
            raise
        raise type(exc)(f"{where}{exc}") from None


def _problems(exc: ValidationError, recipe: str) -> str:
    out = []
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]]
        if loc and loc[0] == recipe:
            loc = loc[1:]
        where = ".".join(loc)
        if error["type"] == "extra_forbidden":
            out.append(f"{where}: not a setting of recipe {recipe}")
        else:
            msg = str(error["msg"]).removeprefix("Value error, ")
            out.append(f"{where}: {msg}" if where else msg)
    return "; ".join(out)


def load_train_config(path: str | Path | None = None, overrides: list[str] | None = None,
                      updates: dict[str, Any] | None = None) -> TrainConfig:
    """A recipe's configuration from the YAML file at ``path`` (``base:`` layers resolved), then
    each ``key.path=value`` override, then ``updates``; one :class:`ConfigError` line when not valid."""
    data = config_data(path, overrides, updates)
    return train_config(data, f"{path}: " if path is not None else "")
