"""Training recipes over TRL: GRPO through the rollout environment, SFT cold starts, LoRA.

=======================  ==========================================================================
``routerag-two-stage``   RouteRAG: GRPO (G = 5) with EM through ``switch_step``, then accuracy–efficiency
``graphrag-r1``          GraphRAG-R1: SFT cold start on golden trajectories, then GRPO with
                         format + PRA, then format + CAF
``r1-router-step``       R1-Router Step-GRPO: GRPO over per-step prompts of golden trajectories with
                         the format-gated step reward
``routerag-sft``         SFT cold start only (RouteRAG protocol, real-retrieval observations), LoRA
                         exported as a llama.cpp adapter GGUF for the fast backend
=======================  ==========================================================================

The GRPO recipes hand TRL a ``rollout_func`` that runs :class:`~routerag.train.env.RouteRAGEnv`
once per prompt entry (TRL repeats each prompt ``num_generations`` times before calling it) and
returns ``env_mask`` so that observation tokens get no loss. Each reward of the schedule is one TRL
reward function (TRL logs ``rewards/<name>/mean``); the active stage is read from
``trainer_state.global_step``. A run directory holds ``config.resolved.yaml``, ``metrics.jsonl``
(one record per logging step: reward and components, EM, retrieval turns and cost, completion
length, KL, loss), ``training_curves.png``, ``checkpoint-*`` and the final model; an existing
run directory is resumed from its last checkpoint.

TRL, transformers, peft and torch are imported inside the functions.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from routerag.config import atomic_write_text, write_resolved
from routerag.corpus.schema import Question
from routerag.registry import Registry
from routerag.sources.sourceset import SourceSet
from routerag.trace import Trace
from routerag.train.adapters import fresh_lora_config, restore_adapter
from routerag.train.config import TrainConfig
from routerag.train.env import HFCodec, RouteRAGEnv
from routerag.train.rewards import (
    RewardSample,
    RewardSchedule,
    Stage,
    WeightedReward,
    followed_protocol,
    get_reward,
    graphrag_r1_schedule,
    trajectory_cost,
    two_stage_schedule,
)

log = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
CURVES_FILE = "training_curves.png"
ADAPTER_GGUF = "adapter.gguf"


class RunSummary(BaseModel):
    recipe: str
    output_dir: str
    steps: int
    metrics_path: str
    curves_path: str | None
    final_model: str | None
    phases: list[str]


# ---------------------------------------------------------------- model, data, sources


def load_tokenizer_for(spec: Any) -> Any:
    from routerag.llm.hf_assets import load_tokenizer

    source = spec.tokenizer or ("bundled:qwen2.5-coder-0.5b" if spec.name == "tiny" else spec.name)
    tokenizer = load_tokenizer(source)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_policy(spec: Any, tokenizer: Any, *, seed: int = 0) -> Any:
    """The trainable policy: a tiny random Qwen2 ('tiny') or a pretrained causal LM in train mode."""
    if spec.name == "tiny":
        from routerag.train.toy import tiny_qwen2

        return tiny_qwen2(len(tokenizer), layers=spec.tiny_layers, hidden=spec.tiny_hidden, seed=seed)
    from routerag.llm.hf_assets import load_causal_lm
    from routerag.llm.transformers_backend import pick_device

    model = load_causal_lm(spec.name, dtype=spec.dtype, device=pick_device("auto"))
    unmark_gguf_quantization(model)
    model.train()
    return model


def load_trainable(cfg: TrainConfig, tokenizer: Any) -> Any:
    """The policy of the run; with ``lora.init_from``, wrapped with that trained adapter (trainable)."""
    model = load_trainable(cfg, tokenizer)
    if cfg.lora.enabled and cfg.lora.init_from:
        model = restore_adapter(model, cfg.lora, gguf_base_path(cfg.model.name))
    return model


def unmark_gguf_quantization(model: Any) -> Any:
    """A model loaded with ``gguf_file=`` holds plain dequantised fp32/bf16 weights, but
    transformers keeps its GGUF "quantizer" and marks it quantized, and ``Trainer`` then refuses to
    train it ("QuantizationMethod.GGUF ... do not support training"). Other quantizers are left alone."""
    quantizer = getattr(model, "hf_quantizer", None)
    method = str(getattr(getattr(quantizer, "quantization_config", None), "quant_method", "")).lower()
    if quantizer is None or ("gguf" not in method and "gguf" not in type(quantizer).__name__.lower()):
        return model
    quantizer.remove_quantization_config(model)  # transformers' own way: drops hf_quantizer, is_quantized=False
    return model


def load_training_questions(cfg: TrainConfig, sources_dir: Path) -> tuple[list[Question], SourceSet | None]:
    """Training questions (checked against the evaluation sets) and, for the toy task, its sources."""
    if cfg.data.dataset == "toy" or cfg.sources.toy:
        from routerag.train.toy import toy_routing_task

        sources, questions = toy_routing_task(sources_dir)
        return questions, sources
    from routerag.corpus.datasets import load_dataset
    from routerag.train.golden import check_overlap

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


def default_schedule(cfg: TrainConfig) -> RewardSchedule:
    if cfg.schedule is not None:
        return cfg.schedule
    if cfg.recipe == "graphrag-r1":
        return graphrag_r1_schedule(cfg.pra_until)
    if cfg.recipe == "r1-router-step":
        return RewardSchedule(stages=[Stage(name="step", rewards=[WeightedReward(name="r1_router_step")])])
    return two_stage_schedule(cfg.switch_step)


# ---------------------------------------------------------------- TRL glue


def samples_from(traces: Sequence[str | dict | Trace], answers: Sequence[Sequence[str]], extras: Sequence[dict] | None = None) -> list[RewardSample]:
    out = []
    for i, (t, golds) in enumerate(zip(traces, answers)):
        trace = t if isinstance(t, Trace) else Trace.model_validate_json(t) if isinstance(t, str) else Trace.model_validate(t)
        out.append(RewardSample(trace=trace, golds=list(golds or []), extra=dict(extras[i]) if extras else {}))
    return out


def batch_stats(samples: Sequence[RewardSample]) -> dict[str, float]:
    """Episode statistics of one batch, logged next to the rewards."""
    n = max(len(samples), 1)
    em = get_reward("em")(samples)
    return {
        "env/em": sum(em) / n,
        "env/retrieval_turns": sum(s.trace.retrieval_turns for s in samples) / n,
        "env/retrieval_cost": sum(trajectory_cost(s.trace, "mode_cost") for s in samples) / n,
        "env/retrieval_ms": sum(trajectory_cost(s.trace, "wall_ms") for s in samples) / n,
        "env/format_ok": sum(followed_protocol(s.trace) for s in samples) / n,
        "env/answered": sum(bool(s.trace.answer) for s in samples) / n,
    }


def make_reward_funcs(schedule: RewardSchedule, *, trace_key: str = "trace") -> list[Callable[..., list[float]]]:
    """One TRL reward function per reward name in the schedule. Each returns its weighted value
    when its stage is active and 0 otherwise; the first also logs the stage index, the episode
    statistics and every component's unweighted mean."""
    names = schedule.reward_names()

    def make(name: str, first: bool) -> Callable[..., list[float]]:
        def reward(prompts: list, completions: list, trainer_state: Any = None, log_metric: Any = None, **kw: Any) -> list[float]:
            step = (trainer_state.global_step if trainer_state is not None else 0) + 1
            stage = schedule.stage_at(step)
            samples = samples_from(kw[trace_key], kw.get("answers") or [[]] * len(prompts), kw.get("extra"))
            active = {wr.name: wr for wr in stage.rewards}
            if first and log_metric is not None:
                log_metric("stage", float(schedule.stages.index(stage) + 1))
                for key, value in batch_stats(samples).items():
                    log_metric(key, value)
                for wr in stage.rewards:
                    values = get_reward(wr.name)(samples, wr.params)
                    log_metric(f"raw/{wr.name}", sum(values) / max(len(values), 1))
            if name not in active:
                return [0.0] * len(prompts)
            wr = active[name]
            return [wr.weight * v for v in get_reward(name)(samples, wr.params)]

        reward.__name__ = name
        return reward

    return [make(name, i == 0) for i, name in enumerate(names)]


def make_rollout_func(env: RouteRAGEnv, tokenizer: Any, temperature: float, seed: int, *,
                      policy: Callable[[list[int], list[str], int], tuple[list[int], list[float]]] | None = None,
                      llamacpp: Any = None,
                      ) -> Callable[[list, Any], dict[str, list]]:
    """TRL ``rollout_func``: one environment episode per prompt entry (already repeated G times).
    The trainer's current model samples the episodes unless another ``policy`` is given (a
    generation server, or a scripted policy in tests) or a :class:`~routerag.train.generation.LlamaCppSampler`
    (``llamacpp``), which is synced to the trainer's adapter once per optimiser step."""
    from routerag.train.generation import PolicySampler

    state: dict[str, Any] = {}

    def rollout_func(prompts: list, trainer: Any) -> dict[str, list]:
        sampler = policy
        if llamacpp is not None:
            step = int(trainer.state.global_step)
            if llamacpp.synced_step != step:
                llamacpp.sync(trainer.accelerator.unwrap_model(trainer.model), step)
            sampler = llamacpp
        elif sampler is None:
            model = trainer.accelerator.unwrap_model(trainer.model)
            sampler = state.get("sampler")
            if sampler is None or sampler.model is not model:
                sampler = PolicySampler(model, tokenizer, temperature=temperature, seed=seed + trainer.state.global_step)
                state["sampler"] = sampler
        questions = [p if isinstance(p, str) else p[-1]["content"] for p in prompts]
        rollouts = [env.rollout(q, sampler) for q in questions]
        return {
            "prompt_ids": [r.prompt_ids for r in rollouts],
            "completion_ids": [r.completion_ids for r in rollouts],
            "logprobs": [r.logprobs for r in rollouts],
            "env_mask": [r.env_mask for r in rollouts],
            "trace": [r.trace.model_dump_json() for r in rollouts],
        }

    return rollout_func


def metrics_callback(path: Path) -> Any:
    from transformers import TrainerCallback

    class MetricsJSONL(TrainerCallback):
        """Appends every log record (with its global step) to ``metrics.jsonl``."""

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            if not logs or not state.is_world_process_zero:
                return
            record = {"step": state.global_step, **{k: v for k, v in logs.items() if isinstance(v, (int, float))}}
            with path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")

    return MetricsJSONL()


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def plot_curves(metrics_path: str | Path, png_path: str | Path, *, title: str = "") -> Path | None:
    """Reward, its components, EM, retrieval turns/cost and KL against the step."""
    records = [r for r in read_metrics(metrics_path) if "reward" in r]
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("reward", [k for k in records[-1] if k == "reward" or k.startswith("rewards/") and k.endswith("/mean")]),
        ("answer", [k for k in ("env/em", "env/format_ok") if k in records[-1]]),
        ("retrieval", [k for k in ("env/retrieval_turns", "env/retrieval_cost") if k in records[-1]]),
        ("kl / length", [k for k in ("kl", "completions/mean_length") if k in records[-1]]),
    ]
    panels = [(name, keys) for name, keys in panels if keys]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, (name, keys) in zip(axes, panels):
        for key in keys:
            pts = [(r["step"], r[key]) for r in records if key in r]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=key)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    return _save_figure(fig, png_path)


def _save_figure(fig: Any, png_path: str | Path) -> Path:
    """Lay out, write (creating the folder) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return png_path


def _last_checkpoint(directory: Path) -> str | None:
    if not directory.is_dir():
        return None
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(directory))


def grpo_trainer(
    cfg: TrainConfig,
    model: Any,
    tokenizer: Any,
    dataset_rows: list[dict[str, Any]],
    reward_funcs: list[Callable[..., list[float]]],
    out_dir: Path,
    *,
    rollout_func: Callable | None = None,
) -> Any:
    """A configured ``GRPOTrainer`` writing into ``out_dir`` (metrics callback attached)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOTrainer

    args = _grpo_args(cfg, out_dir)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=Dataset.from_list(dataset_rows),
        processing_class=tokenizer,
        rollout_func=rollout_func,
        peft_config=fresh_lora_config(cfg.lora),
        callbacks=[metrics_callback(out_dir / METRICS_FILE)],
    )
    return trainer


def _grpo_args(cfg: TrainConfig, out_dir: Path) -> Any:
    import torch
    from trl import GRPOConfig

    g = cfg.grpo
    cpu = g.use_cpu or not torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(out_dir),
        per_device_train_batch_size=g.per_device_train_batch_size,
        gradient_accumulation_steps=g.gradient_accumulation_steps,
        num_generations=g.num_generations,
        max_steps=g.max_steps,
        learning_rate=g.learning_rate,
        optim=g.optim,
        beta=g.beta,
        temperature=g.temperature,
        loss_type=g.loss_type,
        scale_rewards=g.scale_rewards,
        logging_steps=g.logging_steps,
        save_steps=g.save_steps,
        save_total_limit=g.save_total_limit,
        seed=g.seed,
        use_cpu=cpu,
        bf16=not cpu,
        report_to="none",
        max_completion_length=cfg.env.max_completion_tokens,
        mask_truncated_completions=False,
        disable_tqdm=True,
    )


def run_grpo(cfg: TrainConfig, model: Any, tokenizer: Any, env: RouteRAGEnv, questions: Sequence[Question],
             schedule: RewardSchedule, out_dir: Path) -> Any:
    rows = [{"prompt": q.question, "answers": list(q.answers)} for q in questions]
    llamacpp = None
    if cfg.grpo.rollout_backend == "llamacpp":
        from routerag.train.generation import LlamaCppSampler

        base = gguf_base_path(cfg.model.name)
        if base is None:
            raise ValueError("grpo.rollout_backend llamacpp needs a GGUF policy (model.name bundled:... or a .gguf path)")
        llamacpp = LlamaCppSampler(base, tokenizer, out_dir / "rollout_policy", temperature=cfg.grpo.temperature,
                                   seed=cfg.grpo.seed, n_threads=cfg.grpo.rollout_threads)
    trainer = grpo_trainer(
        cfg, model, tokenizer, rows, make_reward_funcs(schedule), out_dir,
        rollout_func=make_rollout_func(env, tokenizer, cfg.grpo.temperature, cfg.grpo.seed, llamacpp=llamacpp),
    )
    resume = _last_checkpoint(out_dir) if cfg.resume else None
    trainer.train(resume_from_checkpoint=resume)
    return trainer


# ---------------------------------------------------------------- SFT cold start


def sft_rows(trajectories: Sequence[Any], codec: HFCodec, max_length: int) -> list[dict[str, list[int]]]:
    """Token ids and labels of golden trajectories: prompt and observation tokens get label -100,
    so that SFT, like GRPO, learns only the policy's own tokens."""
    rows = []
    for traj in trajectories:
        ids: list[int] = []
        labels: list[int] = []
        for seg in traj.segments:
            text = codec.render_prompt(seg.text) if seg.kind == "prompt" else seg.text
            seg_ids = codec.encode(text)
            ids += seg_ids
            labels += seg_ids if seg.kind == "model" else [-100] * len(seg_ids)
        eos = codec.tokenizer.eos_token_id
        if eos is not None:
            ids.append(eos)
            labels.append(eos)
        rows.append({"input_ids": ids[:max_length], "labels": labels[:max_length]})
    return rows


def masked_loss(model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None) -> Any:
    """Causal-LM cross-entropy computing logits only at positions whose next token is labelled.

    SFT rows of multi-turn episodes label only the policy's tokens (~10-20% of a row); the
    152k-vocabulary output layer over every position is a quarter of a 0.5B model's forward
    cost on CPU. ``logits_to_keep`` (an index tensor) restricts the output layer to the
    positions that predict a labelled token; the loss equals the full-logits loss."""
    import torch
    import torch.nn.functional as F

    labels = inputs["labels"]
    targets = labels[:, 1:]
    positions = torch.nonzero((targets != -100).any(dim=0), as_tuple=False).flatten()
    outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"), logits_to_keep=positions)
    logits = outputs.logits.float()
    picked = targets[:, positions]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), picked.reshape(-1), ignore_index=-100, reduction="sum")
    count = num_items_in_batch if num_items_in_batch is not None else (picked != -100).sum()
    return loss / count


def masked_logits_sft_trainer() -> Any:
    """``SFTTrainer`` whose loss uses :func:`masked_loss` (no full-vocabulary logits, no entropy /
    token-accuracy metrics over them)."""
    from trl import SFTTrainer

    class MaskedLogitsSFTTrainer(SFTTrainer):
        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            # the Trainer divides by the accumulation steps itself unless the model takes loss kwargs
            loss = masked_loss(model, inputs, num_items_in_batch if self.model_accepts_loss_kwargs else None)
            return (loss, None) if return_outputs else loss

    return MaskedLogitsSFTTrainer


def run_sft(cfg: TrainConfig, model: Any, tokenizer: Any, rows: list[dict[str, list[int]]], out_dir: Path,
            *, max_steps: int | None = None, learning_rate: float | None = None) -> Any:
    """Supervised cold start with TRL's ``SFTTrainer`` on pre-tokenised rows (``input_ids``,
    ``labels``)."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    s = cfg.sft
    cpu = cfg.grpo.use_cpu or not torch.cuda.is_available()
    steps = max_steps or (-1 if s.epochs else s.max_steps)
    args = SFTConfig(
        output_dir=str(out_dir),
        per_device_train_batch_size=s.per_device_train_batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps,
        max_steps=steps,
        num_train_epochs=s.epochs or 1.0,
        learning_rate=learning_rate or s.learning_rate,
        lr_scheduler_type=s.lr_scheduler_type,
        warmup_steps=s.warmup_steps,
        logging_steps=cfg.grpo.logging_steps,
        save_steps=cfg.grpo.save_steps if steps < 0 else max(steps, 1),
        save_total_limit=1,
        seed=cfg.grpo.seed,
        use_cpu=cpu,
        bf16=not cpu,
        report_to="none",
        max_length=s.max_length,
        disable_tqdm=True,
    )
    trainer_cls = masked_logits_sft_trainer() if s.logits_on_labels_only else SFTTrainer
    trainer = trainer_cls(
        model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
        peft_config=fresh_lora_config(cfg.lora), callbacks=[metrics_callback(out_dir / METRICS_FILE)],
    )
    trainer.train(resume_from_checkpoint=_last_checkpoint(out_dir) if cfg.resume else None)
    return trainer


# ---------------------------------------------------------------- recipes


Recipe = Callable[[TrainConfig], RunSummary]
RECIPES: Registry[Recipe] = Registry("recipe")


def _start(cfg: TrainConfig) -> Path:
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_resolved(cfg, out)
    if cfg.grpo.torch_threads:
        import torch

        torch.set_num_threads(cfg.grpo.torch_threads)
    return out


def _prepare(cfg: TrainConfig) -> tuple[Path, Any, Any, list[Question], SourceSet | None]:
    out = _start(cfg)
    tokenizer = load_tokenizer_for(cfg.model)
    model = load_trainable(cfg, tokenizer)
    toy_dir = out / "toy_sources"
    questions, sources = load_training_questions(cfg, toy_dir)
    return out, tokenizer, model, questions, sources


def export_adapter_gguf(cfg: TrainConfig, final: Path, out: Path) -> dict[str, Any] | None:
    """For a LoRA run on a GGUF base model: the saved adapter as ``out/adapter.gguf`` for llama.cpp
    (``model.lora_path``); None when there is nothing to export."""
    if not (cfg.lora.enabled and cfg.sft.export_gguf):
        return None
    base = gguf_base_path(cfg.model.name)
    if base is None:
        return None
    from routerag.train.export_gguf import export_lora_gguf

    info = export_lora_gguf(final, base, out / ADAPTER_GGUF, name=f"{cfg.recipe}:{Path(cfg.output_dir).name}")
    return {**info.model_dump(exclude={"targets"}), "targets": len(info.targets)}


def _finish(cfg: TrainConfig, trainer: Any, out: Path, phases: list[str]) -> RunSummary:
    final = out / "final"
    trainer.save_model(str(final))
    exported = export_adapter_gguf(cfg, final, out)
    if exported is not None:
        atomic_write_text(out / "adapter_gguf.json", json.dumps(exported, indent=2))
    curves = plot_curves(out / "grpo" / METRICS_FILE if (out / "grpo").is_dir() else out / METRICS_FILE,
                         out / CURVES_FILE, title=cfg.recipe)
    metrics = out / "grpo" / METRICS_FILE if (out / "grpo").is_dir() else out / METRICS_FILE
    return RunSummary(recipe=cfg.recipe, output_dir=str(out), steps=int(trainer.state.global_step),
                      metrics_path=str(metrics), curves_path=str(curves) if curves else None,
                      final_model=str(final), phases=phases)


def _env_for(cfg: TrainConfig, tokenizer: Any, sources: SourceSet | None) -> RouteRAGEnv:
    return RouteRAGEnv(sources if sources is not None else load_sources(cfg), HFCodec(tokenizer, chat_template=cfg.model.chat_template), cfg.env)


@RECIPES.register("routerag-two-stage")
def routerag_two_stage(cfg: TrainConfig) -> RunSummary:
    """RouteRAG: GRPO (G = 5), EM until ``switch_step``, then accuracy–efficiency."""
    out, tokenizer, model, questions, sources = _prepare(cfg)
    env = _env_for(cfg, tokenizer, sources)
    trainer = run_grpo(cfg, model, tokenizer, env, questions, default_schedule(cfg), out / "grpo")
    return _finish(cfg, trainer, out, ["grpo"])


@RECIPES.register("graphrag-r1")
def graphrag_r1(cfg: TrainConfig) -> RunSummary:
    """GraphRAG-R1: SFT cold start on golden trajectories, then format+PRA, then format+CAF."""
    from routerag.train.golden import golden_trajectories

    out, tokenizer, model, questions, sources = _prepare(cfg)
    env = _env_for(cfg, tokenizer, sources)
    phases = []
    if cfg.sft.enabled:
        trajectories = golden_trajectories(cfg.sft.sources, exclude_eval=cfg.data.eval_sets)
        rows = sft_rows(trajectories, env.codec, cfg.sft.max_length)  # type: ignore[arg-type]
        sft = run_sft(cfg, model, tokenizer, rows, out / "sft")
        model = sft.model
        phases.append("sft")
    trainer = run_grpo(cfg, model, tokenizer, env, questions, default_schedule(cfg), out / "grpo")
    phases.append("grpo")
    return _finish(cfg, trainer, out, phases)


@RECIPES.register("r1-router-step")
def r1_router_step(cfg: TrainConfig) -> RunSummary:
    """R1-Router Step-GRPO over the per-step prompts of the released golden trajectories."""
    from routerag.train.golden import r1_router_step_rows

    out = _start(cfg)
    tokenizer = load_tokenizer_for(cfg.model)
    model = load_trainable(cfg, tokenizer)
    rows = r1_router_step_rows(limit=cfg.data.n_questions)
    schedule = default_schedule(cfg)
    funcs = make_reward_funcs(schedule, trace_key="trace")
    trainer = grpo_trainer(cfg, model, tokenizer, rows, [_step_adapter(f) for f in funcs], out / "grpo")
    trainer.train(resume_from_checkpoint=_last_checkpoint(out / "grpo") if cfg.resume else None)
    return _finish(cfg, trainer, out, ["grpo"])


def _step_adapter(fn: Callable[..., list[float]]) -> Callable[..., list[float]]:
    """Turns single-turn TRL completions into one-step traces for the step reward."""

    def reward(prompts: list, completions: list, **kw: Any) -> list[float]:
        from routerag.trace import Segment

        traces = []
        for p, c in zip(prompts, completions):
            text = c if isinstance(c, str) else c[-1]["content"]
            prompt = p if isinstance(p, str) else "\n\n".join(m["content"] for m in p)
            traces.append(Trace(question=prompt, strategy="r1-router-step",
                                segments=[Segment(kind="prompt", text=prompt), Segment(kind="model", text=text)]))
        extras = [json.loads(e) if isinstance(e, str) else e for e in kw.pop("step", [{}] * len(prompts))]
        kw["trace"] = traces
        kw["extra"] = extras
        return fn(prompts, completions, **kw)

    reward.__name__ = fn.__name__
    return reward


# ---------------------------------------------------------------- routerag-sft

SFT_DATA_FILE = "sft_data.jsonl"
SFT_STATS_FILE = "sft_data_stats.json"


def grounding_sources(dataset: str, components: Sequence[str], modes: Sequence[str] | None = None) -> SourceSet:
    """The sources ``routerag eval --dataset DATASET --set components=[...]`` mounts (the same
    cached index, so training observations come from the index evaluation searches)."""
    from routerag.corpus.datasets import load_dataset
    from routerag.eval.config import EvalConfig
    from routerag.eval.setup import build_sources

    extra = {"modes": list(modes)} if modes else {}
    sources, _ = build_sources(load_dataset(dataset), EvalConfig(dataset=dataset, components=list(components), **extra))
    return sources


def sft_trajectories(cfg: TrainConfig, out: Path) -> list[Any]:
    """Golden trajectories of ``cfg.sft.sources`` without the evaluation sets' questions,
    grounded in real retrieval when ``sft.ground``; cached in the run directory
    (``sft_data.jsonl`` + ``sft_data_stats.json``) so that a resumed run trains on the same data."""
    from routerag.corpus.sampling import evenly_spaced
    from routerag.train.golden import (
        GoldenTrajectory,
        Grounder,
        check_overlap,
        golden_trajectories,
    )

    path, stats_path = out / SFT_DATA_FILE, out / SFT_STATS_FILE
    if path.is_file():
        return [GoldenTrajectory.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    grounders: dict[str, Grounder] = {}

    def ground(name: str) -> Grounder:
        grounders[name] = Grounder(grounding_sources(name, cfg.sft.ground_components), k=cfg.env.k,
                                   mode_sources=dict(cfg.env.mode_sources), modes=list(cfg.env.allowed_modes),
                                   max_query_chars=cfg.env.max_query_chars)
        return grounders[name]

    trajectories = golden_trajectories(cfg.sft.sources, exclude_eval=cfg.data.eval_sets, ground=ground if cfg.sft.ground else None,
                                       few_shot=cfg.env.few_shot, prompt_template=cfg.env.prompt_template)
    questions = [Question(qid=t.qid, question=t.question, answers=t.answers, dataset=t.dataset) for t in trajectories]
    overlap = check_overlap(questions, cfg.data.eval_sets) if cfg.data.eval_sets else None
    if overlap is not None and overlap.overlapping:  # golden_trajectories filtered them; this is the recorded proof
        raise ValueError(f"training trajectories overlap the evaluation sets: {overlap.overlapping[:5]}")
    built = len(trajectories)
    trajectories = evenly_spaced(trajectories, cfg.sft.max_examples)
    stats = {
        "eval_sets": list(cfg.data.eval_sets),
        "overlap_checked": overlap.model_dump() if overlap is not None else None,
        "built": built,
        "kept": len(trajectories),
        "by_source": {src: sum(t.source == src for t in trajectories) for src in sorted({t.source for t in trajectories})},
        "grounding": {name: g.stats.model_dump() for name, g in grounders.items()},
    }
    # atomic, stats first: the data file is the resume cache, so it must never exist half-written
    atomic_write_text(stats_path, json.dumps(stats, indent=2))
    atomic_write_text(path, "".join(t.model_dump_json() + "\n" for t in trajectories))
    return trajectories


def fit_rows(rows: list[dict[str, list[int]]], max_length: int, drop_longer: bool) -> tuple[list[dict[str, list[int]]], int]:
    """Rows within ``max_length`` (dropping the longer ones when ``drop_longer``) and the number dropped."""
    if not drop_longer:
        return rows, 0
    kept = [r for r in rows if len(r["input_ids"]) <= max_length]
    return kept, len(rows) - len(kept)


def plot_loss(metrics_path: str | Path, png_path: str | Path, *, title: str = "") -> Path | None:
    """Training loss (and learning rate) of an SFT run against the step."""
    records = [r for r in read_metrics(metrics_path) if "loss" in r]
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.plot([r["step"] for r in records], [r["loss"] for r in records], marker=".", label="loss (model tokens)")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return _save_figure(fig, png_path)


@RECIPES.register("routerag-sft")
def routerag_sft(cfg: TrainConfig) -> RunSummary:
    """SFT cold start of a RouteRAG policy on golden trajectories (prompt and observations
    masked), LoRA adapter saved with PEFT and, for a GGUF base model, exported as a llama.cpp
    adapter GGUF (``adapter.gguf``) for ``model.lora_path``."""
    import time

    out = _start(cfg)
    tokenizer = load_tokenizer_for(cfg.model)
    codec = HFCodec(tokenizer, chat_template=cfg.model.chat_template)
    trajectories = sft_trajectories(cfg, out)
    rows, dropped = fit_rows(sft_rows(trajectories, codec, 10**9), cfg.sft.max_length, cfg.sft.drop_longer)
    rows = [{k: v[: cfg.sft.max_length] for k, v in r.items()} for r in rows]
    if not rows:
        raise ValueError("no SFT rows left (all trajectories longer than sft.max_length?)")
    model = load_trainable(cfg, tokenizer)
    t0 = time.perf_counter()
    trainer = run_sft(cfg, model, tokenizer, rows, out / "sft")
    wall = time.perf_counter() - t0
    final = out / "final"
    trainer.save_model(str(final))
    metrics = out / "sft" / METRICS_FILE
    curves = plot_loss(metrics, out / CURVES_FILE, title=f"{cfg.recipe}: {len(rows)} trajectories")
    summary: dict[str, Any] = {"rows": len(rows), "dropped_longer": dropped, "train_wall_s": round(wall, 1),
                               "steps": int(trainer.state.global_step),
                               "tokens": sum(len(r["input_ids"]) for r in rows),
                               "loss_tokens": sum(sum(x != -100 for x in r["labels"]) for r in rows)}
    exported = export_adapter_gguf(cfg, final, out)
    if exported is not None:
        summary["adapter_gguf"] = exported
    atomic_write_text(out / "sft_summary.json", json.dumps(summary, indent=2))
    return RunSummary(recipe=cfg.recipe, output_dir=str(out), steps=int(trainer.state.global_step),
                      metrics_path=str(metrics), curves_path=str(curves) if curves else None,
                      final_model=str(final), phases=["sft"])


def gguf_base_path(name: str) -> Path | None:
    """The GGUF file behind a ``bundled:`` name or a ``.gguf`` path (None for HF models)."""
    if name.startswith("bundled:") or name.endswith(".gguf"):
        from routerag.llm.resolve import resolve_model_file

        return Path(resolve_model_file(name))
    return None


def train(cfg: TrainConfig) -> RunSummary:
    """Run the configured recipe."""
    return RECIPES.get(cfg.recipe)(cfg)


def scratch_dir(prefix: str = "routerag-train-") -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
