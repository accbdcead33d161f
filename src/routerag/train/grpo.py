"""GRPO through TRL: the environment as TRL's ``rollout_func`` (one episode per prompt entry,
``env_mask`` = TRL's tool mask so observation tokens carry no loss), one TRL reward function per
reward of the schedule (the stage read from ``trainer_state.global_step``), the configured
``GRPOTrainer``. TRL, transformers and torch are imported inside the functions."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from routerag.corpus.schema import Question
from routerag.trace import Trace
from routerag.train.adapters import fresh_lora_config, num_layers_of
from routerag.train.config import TrainConfig
from routerag.train.env import RouteRAGEnv
from routerag.train.policy import gguf_base_path
from routerag.train.rewards import (
    RewardSample,
    RewardSchedule,
    followed_protocol,
    get_reward,
    trajectory_cost,
)
from routerag.train.runfiles import METRICS_FILE, ROLLOUT_STATS_FILE, ROLLOUTS_FILE, last_checkpoint, metrics_callback


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
    # the last batch's samples and unweighted active rewards: TRL calls every reward function with
    # the same traces list, so the batch's rewards are computed once and each function serves its own
    last: dict[str, Any] = {"traces": None, "step": None, "samples": [], "raw": {}}

    def batch(traces: list, golds: list, extra: Any, step: int, stage: Any) -> tuple[list, dict[str, list[float]]]:
        if last["traces"] is not traces or last["step"] != step:
            samples = samples_from(traces, golds, extra)
            last.update(traces=traces, step=step, samples=samples,
                        raw={wr.name: get_reward(wr.name)(samples, wr.params) for wr in stage.rewards})
        return last["samples"], last["raw"]

    def make(name: str, first: bool) -> Callable[..., list[float]]:
        def reward(prompts: list, completions: list, trainer_state: Any = None, log_metric: Any = None, **kw: Any) -> list[float]:
            step = (trainer_state.global_step if trainer_state is not None else 0) + 1
            stage = schedule.stage_at(step)
            # golds of the episode's own question (dynamic sampling may have replaced the prompt's)
            golds = kw.get("golds") or kw.get("answers") or [[]] * len(prompts)
            samples, raw = batch(kw[trace_key], golds, kw.get("extra"), step, stage)
            active = {wr.name: wr for wr in stage.rewards}
            if first and log_metric is not None:
                log_metric("stage", float(schedule.stages.index(stage) + 1))
                for key, value in batch_stats(samples).items():
                    log_metric(key, value)
                if samples and "dynamic_skipped" in samples[0].extra:
                    log_metric("dynamic/skipped_groups", float(sum(s.extra["dynamic_skipped"] for s in samples)))
                    log_metric("dynamic/unresolved_groups", float(sum(s.extra.get("dynamic_unresolved", 0) for s in samples)))
                for wr in stage.rewards:
                    values = raw[wr.name]
                    log_metric(f"raw/{wr.name}", sum(values) / max(len(values), 1))
            if name not in active:
                return [0.0] * len(prompts)
            wr = active[name]
            return [wr.weight * v for v in raw[name]]

        reward.__name__ = name
        return reward

    return [make(name, i == 0) for i, name in enumerate(names)]


class DynamicSampling:
    """DAPO's dynamic sampling for the rollout function: a group whose G rewards (the active
    stage's total, scored over the group) are all equal carries no advantage, so it is replaced by
    the group of another question drawn from ``pool`` (up to ``max_tries`` draws; a group still
    without variance then is kept and counted as unresolved). ``skipped`` counts the replaced groups.
    Each step draws from its own shuffle of the pool (seeded by ``seed`` and the step), so a run
    resumed from a checkpoint draws what the uninterrupted run would have, not the first step's
    replacements again."""

    def __init__(self, schedule: RewardSchedule, pool: Sequence[Question], *, max_tries: int = 4, seed: int = 0) -> None:
        import random

        if not pool:
            raise ValueError("dynamic sampling needs a question pool")
        self.schedule = schedule
        self.pool = list(pool)
        self.golds = {q.question: list(q.answers) for q in self.pool}
        self.max_tries = max_tries
        self.seed = seed
        self._rng = random.Random(seed)
        self._order: list[int] = []
        self._step: int | None = None
        self.skipped = 0
        self.unresolved = 0

    def start_step(self, step: int) -> None:
        """Draw the replacements of optimiser step ``step`` (1-based) from that step's own shuffle."""
        if step != self._step:
            self._step = step
            import random

            self._rng = random.Random(f"{self.seed}:{step}")
            self._order = []

    def draw(self) -> Question:
        if not self._order:
            self._order = list(range(len(self.pool)))
            self._rng.shuffle(self._order)
        return self.pool[self._order.pop()]

    def has_variance(self, traces: Sequence[Trace], golds: Sequence[str], step: int) -> bool:
        totals = self.schedule.score([RewardSample(trace=t, golds=list(golds)) for t in traces], step).total
        return max(totals) - min(totals) > 1e-9


def make_rollout_func(env: RouteRAGEnv, tokenizer: Any, temperature: float, seed: int, *,
                      policy: Callable[[list[int], list[str], int], tuple[list[int], list[float]]] | None = None,
                      llamacpp: Any = None, trace_log: Path | None = None, dynamic: DynamicSampling | None = None,
                      batched: bool = False) -> Callable[[list, Any], dict[str, list]]:
    """TRL ``rollout_func``: one environment episode per prompt entry (already repeated G times).
    The trainer's current model samples the episodes unless another ``policy`` is given (a
    generation server, or a scripted policy in tests) or a :class:`~routerag.train.generation.LlamaCppSampler`
    (``llamacpp``), which is synced to the trainer's adapter once per optimiser step. With
    ``trace_log`` every episode's full Trace is appended to that JSONL (``{"step", "trace"}``), so
    that training rollouts can be inspected like evaluation runs. With ``dynamic``, groups (runs of
    equal prompts) without reward variance are replaced (:class:`DynamicSampling`); every entry
    then carries its question's ``golds`` and ``extra`` with the group's skip count. With
    ``batched``, all the episodes of a call (and each round of replacement groups) are sampled
    together by the trainer's model (:mod:`routerag.train.batched`: the GPU backend)."""
    from routerag.train.batched import BatchSampler, batched_rollouts
    from routerag.train.generation import PolicySampler

    state: dict[str, Any] = {}

    def sequential_sampler(trainer: Any) -> Any:
        if llamacpp is not None:
            step = int(trainer.state.global_step)
            if llamacpp.synced_step != step:
                llamacpp.sync(trainer.accelerator.unwrap_model(trainer.model), step)
            return llamacpp
        if policy is not None:
            return policy
        model = trainer.accelerator.unwrap_model(trainer.model)
        sampler = state.get("sampler")
        if sampler is None or sampler.model is not model:
            sampler = PolicySampler(model, tokenizer, temperature=temperature, seed=seed + trainer.state.global_step)
            state["sampler"] = sampler
        sampler.reset()  # the weights changed since the last call: no stale keys/values
        return sampler

    def rollout_func(prompts: list, trainer: Any) -> dict[str, list]:
        questions = [p if isinstance(p, str) else p[-1]["content"] for p in prompts]
        batch_sizes: list[int] = []
        if batched:
            batch = BatchSampler(trainer.accelerator.unwrap_model(trainer.model), tokenizer, temperature=temperature,
                                 seed=seed + int(trainer.state.global_step))

            def run(qs: list[str]) -> list[Any]:
                return batched_rollouts(env, qs, batch, batcher_log=batch_sizes)
        else:
            sampler = sequential_sampler(trainer)

            def run(qs: list[str]) -> list[Any]:
                return [env.rollout(q, sampler) for q in qs]
        extra: dict[str, list] = {}
        step_no = int(trainer.state.global_step) + 1
        t0 = time.perf_counter()
        if dynamic is None:
            rollouts = run(questions)
        else:
            rollouts, extra = _dynamic_groups(run, questions, dynamic, step_no)
        seconds = time.perf_counter() - t0
        if trace_log is not None:
            trace_log.parent.mkdir(parents=True, exist_ok=True)
            with trace_log.open("a", encoding="utf-8") as handle:  # one whole line per episode
                handle.write("".join(json.dumps({"step": step_no, "trace": r.trace.model_dump(mode="json")}) + "\n"
                                     for r in rollouts))
            with (trace_log.parent / ROLLOUT_STATS_FILE).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps({"step": step_no, "episodes_trained": len(rollouts),
                                         "decoded_batches": len(batch_sizes), "largest_batch": max(batch_sizes, default=0),
                                         "decoded_turns": sum(batch_sizes),
                                         "decode_steps": batch.decode_steps if batched else None,
                                         "decoded_rows": batch.row_steps if batched else None,
                                         "rollout_s": round(seconds, 2)}) + "\n")
        return {
            "prompt_ids": [r.prompt_ids for r in rollouts],
            "completion_ids": [r.completion_ids for r in rollouts],
            "logprobs": [r.logprobs for r in rollouts],
            "env_mask": [r.env_mask for r in rollouts],
            "trace": [r.trace.model_dump_json() for r in rollouts],
            **extra,
        }

    return rollout_func


def _dynamic_groups(run: Callable[[list[str]], list[Any]], questions: list[str], dynamic: DynamicSampling,
                    step: int) -> tuple[list[Any], dict[str, list]]:
    """The episodes of each group (a run of equal prompts), replaced while they have no reward variance.
    ``run`` samples one episode per listed question (one by one, or all as one batch); the groups
    still without variance are redrawn together, round after round."""
    groups: list[list[int]] = []
    for i, q in enumerate(questions):
        if groups and questions[groups[-1][0]] == q:
            groups[-1].append(i)
        else:
            groups.append([i])
    dynamic.start_step(step)
    rollouts: list[Any] = [None] * len(questions)
    golds: list[list[str]] = [[] for _ in questions]
    extras: list[dict[str, int]] = [{"dynamic_skipped": 0, "dynamic_unresolved": 0} for _ in questions]
    current = {g: (questions[members[0]], dynamic.golds.get(questions[members[0]], [])) for g, members in enumerate(groups)}
    skipped = {g: 0 for g in range(len(groups))}
    open_groups = list(range(len(groups)))
    while open_groups:
        episodes = run([current[g][0] for g in open_groups for _ in groups[g]])
        still_open: list[int] = []
        offset = 0
        for g in open_groups:
            members = groups[g]
            mine, offset = episodes[offset:offset + len(members)], offset + len(members)
            question, answers = current[g]
            for i, r in zip(members, mine):
                rollouts[i] = r
                golds[i] = list(answers)
            if dynamic.has_variance([r.trace for r in mine], answers, step):
                continue
            if skipped[g] >= dynamic.max_tries:
                dynamic.unresolved += 1
                extras[members[0]]["dynamic_unresolved"] = 1
                continue
            skipped[g] += 1
            dynamic.skipped += 1
            replacement = dynamic.draw()
            current[g] = (replacement.question, list(replacement.answers))
            still_open.append(g)
        open_groups = still_open
    for g, members in enumerate(groups):
        extras[members[0]]["dynamic_skipped"] = skipped[g]
    return rollouts, {"golds": golds, "extra": extras}


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
        peft_config=fresh_lora_config(cfg.lora, num_layers_of(model)),
        callbacks=[metrics_callback(out_dir / METRICS_FILE)],
    )
    return trainer


def _grpo_args(cfg: TrainConfig, out_dir: Path) -> Any:
    import torch
    from trl import GRPOConfig

    return GRPOConfig(**grpo_arguments(cfg, out_dir, cpu=cfg.grpo.use_cpu or not torch.cuda.is_available()))


def grpo_arguments(cfg: TrainConfig, out_dir: Path, *, cpu: bool) -> dict[str, Any]:
    """The arguments of TRL's ``GRPOConfig``: routerag's, then ``grpo.extra`` (checked when the
    configuration was loaded: it names none of ``GRPO_DERIVED``)."""
    g = cfg.grpo
    args: dict[str, Any] = dict(
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
    return {**args, **g.extra}


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
    dynamic = (DynamicSampling(schedule, questions, max_tries=cfg.grpo.dynamic_max_tries, seed=cfg.grpo.seed)
               if cfg.grpo.dynamic_sampling else None)
    trainer = grpo_trainer(
        cfg, model, tokenizer, rows, make_reward_funcs(schedule), out_dir,
        rollout_func=make_rollout_func(env, tokenizer, cfg.grpo.temperature, cfg.grpo.seed, llamacpp=llamacpp,
                                       trace_log=out_dir / ROLLOUTS_FILE, dynamic=dynamic,
                                       batched=cfg.grpo.rollout_backend == "batched"),
    )
    resume = last_checkpoint(out_dir) if cfg.resume else None
    trainer.train(resume_from_checkpoint=resume)
    return trainer
