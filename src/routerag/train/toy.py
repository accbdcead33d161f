"""The toy learning run: a CPU check that GRPO through the real environment learns to route.

The task and the tiny model live in :mod:`routerag.train.fixtures` (the training package's leaf,
imported by the data and policy modules); this module sits on top of the training modules
(nothing in the package imports it).

* :func:`task_tokenizer` — the bundled Qwen tokenizer cut down to the tokens a task's texts use
  (plus the 256 byte tokens and the special tokens): identical token sequences for those texts,
  ids renumbered ``0..V-1``, so a tiny model's embedding and LM head have 643 rows instead of
  151,936 and a GRPO step is tens of times cheaper.
* :func:`run_toy_learning` — SFT cold start then GRPO (TRL ``GRPOTrainer``, the real
  :class:`~routerag.train.env.RouteRAGEnv` as ``rollout_func``, EM reward) on the toy task
  (:func:`~routerag.train.fixtures.toy_routing_task`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from routerag.corpus.schema import Question
from routerag.protocol.routerag_tags import ANSWER_CLOSE, ANSWER_OPEN, SEARCH_OPEN, THINK_OPEN, render_search, render_think
from routerag.train.fixtures import tiny_qwen2, toy_routing_task

TOY_PROMPT = "Question: {question}\n"
TOY_PREFIX = SEARCH_OPEN + " ["  # prefilled: the policy's first token is the mode
TOY_THINK_PREFIX = THINK_OPEN
TOY_MODES = ("passage", "graph")


# ---------------------------------------------------------------- task vocabulary


def task_tokenizer(tokenizer: Any, texts: Iterable[str]) -> Any:
    """``tokenizer`` (a byte-level BPE fast tokenizer such as the bundled Qwen one) restricted to
    the tokens that ``texts`` use, with ids renumbered from 0.

    Kept: every token of the full tokenizer's encoding of ``texts``, every token an intermediate
    BPE merge produces on the way to them, the 256 byte tokens (so any text still encodes) and
    the special tokens (ids after the vocabulary). Merges are filtered to those whose parts and
    result are kept, in their original order, so BPE on a kept word takes exactly the full
    tokenizer's steps: the token sequences of ``texts`` are identical (checked here; a mismatch
    raises). Other text encodes into more, shorter tokens; any id sequence decodes.
    """
    from tokenizers import Tokenizer
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    model = spec["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"task_tokenizer needs a BPE tokenizer, got {model.get('type')}")
    vocab: dict[str, int] = model["vocab"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    producers: dict[str, list[tuple[str, str]]] = {}
    for a, b in merges:
        producers.setdefault(a + b, []).append((a, b))
    by_id = {i: t for t, i in vocab.items()}
    texts = list(texts)
    keep = set(ByteLevel.alphabet())
    for text in texts:
        keep.update(by_id[i] for i in tokenizer(text, add_special_tokens=False)["input_ids"] if i in by_id)
    stack = list(keep)
    while stack:  # every merge that can produce a kept token: its parts are kept too
        for a, b in producers.get(stack.pop(), []):
            for part in (a, b):
                if part not in keep:
                    keep.add(part)
                    stack.append(part)
    ordered = sorted(keep, key=lambda t: vocab[t])
    model["vocab"] = {t: i for i, t in enumerate(ordered)}
    model["merges"] = [[a, b] for a, b in merges if a in keep and b in keep and a + b in keep]
    for k, added in enumerate(spec.get("added_tokens", [])):
        added["id"] = len(ordered) + k
    small = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)), eos_token=tokenizer.eos_token,
        pad_token=tokenizer.pad_token or tokenizer.eos_token,
    )
    for text in texts:
        full, cut = tokenizer.tokenize(text), small.tokenize(text)
        if full != cut:
            raise ValueError(f"task tokenizer splits {text!r} differently: {cut} vs {full}")
    return small


# ---------------------------------------------------------------- the toy learning run


def toy_env_config(**overrides: Any) -> Any:
    """Routing-only episodes: one search whose mode the policy writes after the prefilled
    ``<search> [``; the first hit's title is the answer."""
    from routerag.train.env import EnvConfig

    values: dict[str, Any] = dict(
        k=1, max_turns=1, allowed_modes=["passage", "graph"], reader="top_hit_title", prompt_template=TOY_PROMPT,
        assistant_prefix=TOY_PREFIX, max_new_tokens_per_turn=6, max_completion_tokens=96, strict_modes=True,
    )
    values.update(overrides)
    return EnvConfig(**values)


def toy_prefix(cold_start: str) -> str:
    """The prefilled start of the assistant turn."""
    return TOY_THINK_PREFIX if cold_start == "think" else TOY_PREFIX


def toy_action(mode: str, question: str, cold_start: str) -> str:
    """The policy's text after the prefilled assistant prefix, for one mode."""
    if cold_start == "think":
        full = render_think(f"[{question_word(question)}]") + "\n" + render_search([mode], "")
    elif cold_start == "query":
        full = render_search([mode], question)
    else:
        full = render_search([mode], "")
    prefix = toy_prefix(cold_start)
    if not full.startswith(prefix):
        raise ValueError(f"the toy action {full!r} does not start with its prefilled prefix {prefix!r}")
    return full[len(prefix):]


def question_word(question: str) -> str:
    """The question's wh-word, lower-cased ("Who designed ...?" -> "who")."""
    return question.split()[0].lower().strip("?,.")


def decision_context(question: str, cold_start: str) -> str:
    """The assistant text up to the mode tag (``... <search> [``), as the cold start writes it."""
    action = toy_action("passage", question, cold_start)
    return toy_prefix(cold_start) + action[: action.index("passage")] if cold_start == "think" else TOY_PREFIX


def toy_cold_start_rows(questions: list[Question], codec: Any, *, cold_start: str = "think",
                        copies: int = 1) -> list[dict[str, list[int]]]:
    """SFT rows teaching the action format with *both* modes for every question, so the
    cold-started policy routes at chance (p = 1/2 per question and a GRPO group's samples differ).
    ``think`` first names the question's wh-word in the reasoning (``<think> [who] </think>``), so the
    model must read the question at a `` [`` position, the token the mode follows; ``format`` teaches
    the tag alone (the hidden state at the decision then hardly depends on the question: GRPO
    drifts onto one mode); ``query`` copies the question after the tag (a tiny model memorises
    instead of copying, so retrieval fails). See docs/guides/training-cpu.md."""
    from routerag.trace import Segment
    from routerag.train.golden import GoldenTrajectory
    from routerag.train.sft import sft_rows

    trajectories = []
    for _ in range(copies):
        for q, mode in ((q, m) for q in questions for m in TOY_MODES):
            trajectories.append(GoldenTrajectory(
                qid=q.qid, dataset="toy", question=q.question, answers=q.answers, source="toy",
                segments=[Segment(kind="prompt", text=TOY_PROMPT.format(question=q.question) + toy_prefix(cold_start)),
                          Segment(kind="model", text=toy_action(mode, q.question, cold_start))],
            ))
    rows = sft_rows(trajectories, codec, 128)
    return [{"input_ids": r["input_ids"][:-1], "labels": r["labels"][:-1]} for r in rows]  # no EOS: the env stops at </search>


def toy_texts(env: Any, questions: Sequence[Question], cold_start: str = "think") -> list[str]:
    """Every text a toy episode can contain: real episodes (both modes, every question) run with
    a scripted policy through ``env``, plus the environment's fixed messages."""
    from routerag.strategies.prompts import FORCE_ANSWER, INVALID_ACTION

    texts = [INVALID_ACTION, FORCE_ANSWER, ANSWER_OPEN + ANSWER_CLOSE]
    for q in questions:
        for mode in TOY_MODES:
            action = toy_action(mode, q.question, cold_start)

            def scripted(prompt_ids: list[int], stops: list[str], limit: int, _a: str = action) -> tuple[list[int], list[float]]:
                ids = env.codec.encode(_a)
                return ids, [0.0] * len(ids)

            r = env.rollout(q, scripted)
            texts += [env.prompt_text(q.question) + env.episode(q.question).rules.prefix, action, r.trace.answer or ""]
            texts += [s.text for s in r.trace.segments if s.kind == "observation"]
    return texts


def mode_probabilities(model: Any, env: Any, questions: Sequence[Question], cold_start: str = "think") -> list[float]:
    """Exact p(gold mode) per question under ``model`` (temperature 1), renormalised over the two
    modes: the probability of the tag's tokens right after the prefilled ``<search> [``."""
    import torch

    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.no_grad():
            for q in questions:
                prompt = env.codec.encode(env.prompt_text(q.question) + decision_context(q.question, cold_start))
                logp = {}
                for mode in TOY_MODES:
                    tag = env.codec.encode(f"{mode}]")
                    ids = torch.tensor([prompt + tag])
                    lp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
                    logp[mode] = sum(float(lp[len(prompt) - 1 + j, t]) for j, t in enumerate(tag))
                gold = q.metadata["gold_mode"]
                z = torch.logsumexp(torch.tensor(list(logp.values())), 0)
                out.append(float(torch.exp(torch.tensor(logp[gold]) - z)))
    finally:
        if was_training:
            model.train()
    return out


def evaluate_routing(env: Any, questions: list[Question], generate: Any) -> dict[str, float]:
    """Greedy episodes over ``questions``: EM, share routed to the gold mode, and format."""
    from routerag.eval.metrics import exact_match

    em = routed = fmt = 0.0
    for q in questions:
        r = env.rollout(q, generate)
        em += exact_match(r.trace.answer, q.answers)
        step = r.trace.search_steps[0] if r.trace.search_steps else None
        routed += float(step is not None and step.route is not None and step.route.mode == q.metadata.get("gold_mode"))
        fmt += float(step is not None and (not step.format_error or step.format_error == "empty_query"))
    n = max(len(questions), 1)
    return {"em": em / n, "routing_accuracy": routed / n, "format": fmt / n}


class ToySettings(BaseModel):
    """One toy learning run (cold start + GRPO)."""

    model_config = ConfigDict(extra="forbid")
    seed: int = Field(default=1, description="seed of the model initialisation, data order and sampling (seed 0: see docs/experiments/)")
    vocab: Literal["task", "full"] = Field(default="task", description="task: the tokenizer cut to the task's tokens; full: all 151,936")
    hidden: int = Field(default=64, ge=8, description="hidden size of the tiny Qwen2")
    layers: int = Field(default=2, ge=1, description="layers of the tiny Qwen2")
    cold_start: Literal["format", "think", "query"] = Field(
        default="think", description="cold-start target: 'format' = '<search> [' + 'MODE] </search>'; 'think' = '<think>' + "
        "' [WH] </think>\\n<search> [MODE] </search>' (WH: the question's wh-word); 'query' = 'MODE] QUESTION </search>'")
    sft_steps: int = Field(default=200, ge=1)
    sft_lr: float = Field(default=1e-2, gt=0)
    sft_batch: int = Field(default=8, ge=1)
    grpo_steps: int = Field(default=30, ge=1)
    grpo_lr: float = Field(default=3e-3, gt=0)
    optim: str = Field(default="adamw_torch", description="transformers optimiser name of the GRPO phase (adamw_torch, sgd)")
    num_generations: int = Field(default=8, ge=2, description="group size G")
    questions_per_step: int = Field(default=24, ge=1, description="distinct questions per GRPO step (batch = this x G); "
                                    "24 = every toy question once, as many who- as where-questions")
    temperature: float = Field(default=1.0, gt=0)
    loss_type: str = Field(default="grpo")
    scale_rewards: str = Field(default="group")
    beta: float = Field(default=0.0, ge=0)
    tie_embeddings: bool = Field(default=False, description="tie the LM head to the input embedding (Qwen2-0.5B does)")
    threads: int | None = Field(default=1, ge=1, description="torch CPU threads")


def run_toy_learning(out_dir: str | Path, settings: ToySettings | None = None, **overrides: Any) -> dict[str, Any]:
    """Cold start (format, chance routing) then GRPO with the EM reward on the toy routing task,
    through the real environment and TRL. Returns greedy routing and exact p(gold mode) before and
    after GRPO, the metrics file of the GRPO phase and the timings."""
    from routerag.train import data, grpo, policy, runfiles
    from routerag.train import sft as sft_mod
    from routerag.train.config import GraphRAGR1Config
    from routerag.train.env import HFCodec, RouteRAGEnv
    from routerag.train.generation import PolicySampler
    from routerag.train.rewards import two_stage_schedule

    s = (settings or ToySettings()).model_copy(update=overrides)
    s = ToySettings.model_validate(s.model_dump())
    out = Path(out_dir)
    max_tokens = {"query": 24, "think": 16, "format": 6}[s.cold_start]
    cfg = GraphRAGR1Config(  # an SFT cold start, then GRPO
        output_dir=str(out), model={"name": "tiny", "chat_template": False, "tiny_layers": s.layers, "tiny_hidden": s.hidden},
        data={"dataset": "toy", "eval_sets": []}, sources={"toy": True},
        env=toy_env_config(max_new_tokens_per_turn=max_tokens, max_completion_tokens=max_tokens + 64,
                           assistant_prefix=toy_prefix(s.cold_start)),
        grpo={"num_generations": s.num_generations, "per_device_train_batch_size": s.questions_per_step * s.num_generations,
              "max_steps": s.grpo_steps, "learning_rate": s.grpo_lr, "optim": s.optim, "beta": s.beta, "use_cpu": True,
              "save_steps": s.grpo_steps, "seed": s.seed, "torch_threads": s.threads, "loss_type": s.loss_type,
              "scale_rewards": s.scale_rewards, "temperature": s.temperature},
        sft={"per_device_train_batch_size": s.sft_batch, "max_steps": s.sft_steps, "learning_rate": s.sft_lr},
        schedule=two_stage_schedule(10_000),  # EM only: the task is about routing, not cost
    )
    runfiles.start_run(cfg)
    tokenizer = policy.load_tokenizer_for(cfg.model)
    sources, questions = toy_routing_task(out / "sources")
    if s.vocab == "task":
        full_env = RouteRAGEnv(sources, HFCodec(tokenizer, chat_template=False), cfg.env)
        tokenizer = task_tokenizer(tokenizer, toy_texts(full_env, questions, s.cold_start))
    env = RouteRAGEnv(sources, HFCodec(tokenizer, chat_template=False), cfg.env)
    model = tiny_qwen2(len(tokenizer), layers=s.layers, hidden=s.hidden, seed=s.seed, tie=s.tie_embeddings)
    t0 = time.perf_counter()
    sft = sft_mod.run_sft(cfg, model, tokenizer, toy_cold_start_rows(questions, env.codec, cold_start=s.cold_start), out / "sft")
    t_sft = time.perf_counter() - t0
    p_before = mode_probabilities(sft.model, env, questions, s.cold_start)
    before = evaluate_routing(env, questions, PolicySampler(sft.model, tokenizer, temperature=0))
    t0 = time.perf_counter()
    trainer = grpo.run_grpo(cfg, sft.model, tokenizer, env, questions, data.default_schedule(cfg), out / "grpo")
    t_grpo = time.perf_counter() - t0
    p_after = mode_probabilities(trainer.model, env, questions, s.cold_start)
    after = evaluate_routing(env, questions, PolicySampler(trainer.model, tokenizer, temperature=0))
    steps = int(trainer.state.global_step)
    return {"settings": s.model_dump(), "vocab_size": len(tokenizer), "before": before, "after": after,
            "p_gold_before": sum(p_before) / len(p_before), "p_gold_after": sum(p_after) / len(p_after),
            "p_gold_after_by_type": {t: sum(p for p, q in zip(p_after, questions) if q.metadata["type"] == t) / (len(questions) / 2)
                                     for t in ("who", "where")},
            "metrics": str(out / "grpo" / runfiles.METRICS_FILE), "steps": steps,
            "sft_seconds": round(t_sft, 1), "grpo_seconds": round(t_grpo, 1), "seconds_per_step": round(t_grpo / max(steps, 1), 2)}
