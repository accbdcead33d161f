"""Rejection-sampling fine-tuning (expert iteration: STaR, ReST-EM) of a RouteRAG policy on a CPU.

One round (``routerag train routerag-rft``)::

    sample   G episodes per training question: RouteRAGEnv + LlamaCppSampler (base GGUF + the
             previous round's adapter, temperature > 0), questions spread over parallel lanes,
             one JSONL line per finished question (a restart samples only the missing ones);
             with ``rft.stop_branches`` the last of the G answer after their first search
             (:class:`AnswerAfterFirstSearch`), the stop a policy that always searches twice
             would never sample for the efficiency stage to prefer
    score    the reward schedule at step = round (RouteRAG: EM, then accuracy–efficiency with the
             cost normalised over the round's episodes)
    keep     per question the best correct episode (highest reward, then cheapest, then shortest;
             ``rft.keep: best``) or every distinct correct one (``rft.keep: correct``, as ReST-EM)
    train    a LoRA on the kept episodes (+ the golden trajectories) with the SFT fast path
             (upper layers only; the frozen layers' output cached across rounds): a fresh one,
             or the ``lora.init_from`` adapter restored afresh every round
    export   the adapter as a llama.cpp adapter GGUF (the next round samples with it)
    evaluate greedy episodes on held-out questions with the exported adapter

With ``rft.stop_after: sample`` a round stops after ``keep`` (its kept rows in
``round-N/train_kept.jsonl``) so that the fine-tune runs on a GPU (``routerag-sft`` with
``sft.rows_files``); once that adapter is in ``round-N/final/`` the next run exports it, evaluates
it and goes on.

Per round ``metrics.jsonl`` gets one record (pass@1, pass@G, kept, reward, retrieval turns, mode
mix by question kind, evaluation EM/F1, wall and CPU seconds); ``rft_curves.png`` plots them. A
finished round is never redone; an interrupted one resumes at the step it stopped in.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from routerag.config import atomic_write_text
from routerag.corpus.question_types import question_form
from routerag.corpus.schema import Question
from routerag.sources.sourceset import SourceSet
from routerag.trace import Trace
from routerag.train.config import KeepRule, RouteRAGRFTConfig
from routerag.train.env import EnvConfig, HFCodec, Rollout, RouteRAGEnv
from routerag.train.rewards import RewardSample, RewardSchedule, get_reward, trajectory_cost
from routerag.train.runfiles import METRICS_FILE, read_metrics
from routerag.train.sft import read_kept_rows

log = logging.getLogger(__name__)

SAMPLES_FILE = "samples.jsonl"
KEPT_FILE = "kept.jsonl"
TRAIN_KEPT_FILE = "train_kept.jsonl"  # rft.stop_after=sample: the kept rows a fine-tune elsewhere trains on
EVAL_FILE = "eval.jsonl"
RFT_CURVES_FILE = "rft_curves.png"

class SampledEpisode(BaseModel):
    """One sampled episode as stored: the tokens the loss needs, the trace, the cost."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    trace: Trace
    mode_cost: float
    retrieval_turns: int
    model_tokens: int

    @classmethod
    def of(cls, r: Rollout) -> SampledEpisode:
        return cls(prompt_ids=r.prompt_ids, completion_ids=r.completion_ids, env_mask=r.env_mask, trace=r.trace,
                   mode_cost=r.cost.mode_cost, retrieval_turns=r.cost.retrieval_turns, model_tokens=r.model_tokens)

    def sft_row(self, eos_token_id: int | None) -> dict[str, list[int]]:
        """Token ids and labels: only the policy's own tokens are labelled (as SFT and GRPO train)."""
        ids = list(self.prompt_ids) + list(self.completion_ids)
        labels = [-100] * len(self.prompt_ids) + [t if m else -100 for t, m in zip(self.completion_ids, self.env_mask)]
        if eos_token_id is not None and (not ids or ids[-1] != eos_token_id):
            ids.append(eos_token_id)
            labels.append(eos_token_id)
        return {"input_ids": ids, "labels": labels}


class QuestionSamples(BaseModel):
    """The G episodes of one question in one round (one line of ``samples.jsonl``)."""

    qid: str
    question: str
    answers: list[str]
    episodes: list[SampledEpisode]
    seconds: float = 0.0


class Scored(BaseModel):
    qid: str
    rewards: list[float]
    correct: list[bool]
    kept: int | None = Field(default=None, description="index of the best correct episode (None: no correct one)")
    correct_distinct: list[int] = Field(
        default_factory=list, description="indices of the correct episodes, one per distinct completion (rft.keep: correct)"
    )

    def kept_indices(self, keep: KeepRule) -> list[int]:
        """The episodes a round trains on: the best correct one (``best``) or every distinct correct one (``correct``)."""
        if keep == "correct":
            return list(self.correct_distinct)
        return [] if self.kept is None else [self.kept]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by a kill: that question is sampled again
                continue
    return out


# ---------------------------------------------------------------------------------- sampling


class AnswerAfterFirstSearch:
    """A stop branch: the wrapped policy, except that its second turn (the one after its first
    search, or after an invalid first turn) begins with ``prefix`` as if it had written it, and
    goes on from there. The prefix is
    returned as the policy's tokens (log-probability 0: not sampled), so the episode ends as the
    policy's own answer would, and a kept one teaches the policy to answer at that point."""

    def __init__(self, generate: Any, prefix_ids: Sequence[int]) -> None:
        self.generate = generate
        self.prefix_ids = list(prefix_ids)
        self.turns = 0

    def __call__(self, prompt_ids: list[int], stop_strings: list[str], max_new_tokens: int) -> tuple[list[int], list[float]]:
        self.turns += 1
        if self.turns != 2 or max_new_tokens <= len(self.prefix_ids):
            return self.generate(prompt_ids, stop_strings, max_new_tokens)
        ids, logprobs = self.generate(list(prompt_ids) + self.prefix_ids, stop_strings, max_new_tokens - len(self.prefix_ids))
        return self.prefix_ids + list(ids), [0.0] * len(self.prefix_ids) + list(logprobs)


class Lanes:
    """Parallel samplers: one llama.cpp context (base GGUF + adapter) and one environment per lane."""

    def __init__(self, base_gguf: Path, tokenizer: Any, sources: SourceSet, env_cfg: EnvConfig, *, lanes: int,
                 threads: int, temperature: float, adapter: Path | None, chat_template: bool = True) -> None:
        from routerag.train.generation import LlamaCppSampler

        self.samplers = []
        self.envs = []
        for i in range(lanes):
            sampler = LlamaCppSampler(base_gguf, tokenizer, Path("."), temperature=temperature, seed=i, n_threads=threads)
            sampler.load(adapter, 0)
            self.samplers.append(sampler)
            self.envs.append(RouteRAGEnv(sources, HFCodec(tokenizer, chat_template=chat_template), env_cfg))
        self._free = list(range(lanes))
        self._lock = threading.Lock()

    def run(self, items: Sequence[tuple[int, Question]], episodes: int, seed: int, out: Path, *, temperature: float,
            stop_branches: int = 0, stop_prefix_ids: Sequence[int] = ()) -> None:
        """``episodes`` episodes per (index, question), appended to ``out`` one question per line, in
        parallel lanes; the index seeds the question's episodes (the same on a resumed run). The last
        ``stop_branches`` of them are stop branches (:class:`AnswerAfterFirstSearch`)."""
        import numpy as np

        write_lock = threading.Lock()

        def one(item: tuple[int, Question]) -> None:
            index, q = item
            with self._lock:
                lane = self._free.pop()
            try:
                sampler, env = self.samplers[lane], self.envs[lane]
                sampler.temperature = temperature
                sampler.rng = np.random.default_rng([seed, index])  # the same episodes whichever lane runs them
                t0 = time.perf_counter()
                eps = [SampledEpisode.of(env.rollout(q, AnswerAfterFirstSearch(sampler, stop_prefix_ids)
                                                     if j >= episodes - stop_branches else sampler))
                       for j in range(episodes)]
                record = QuestionSamples(qid=q.qid, question=q.question, answers=list(q.answers), episodes=eps,
                                         seconds=round(time.perf_counter() - t0, 2))
                with write_lock, out.open("a", encoding="utf-8") as handle:
                    handle.write(record.model_dump_json() + "\n")
            finally:
                with self._lock:
                    self._free.append(lane)

        todo = list(items)
        if len(self.samplers) == 1:
            for item in todo:
                one(item)
            return
        with ThreadPoolExecutor(max_workers=len(self.samplers)) as pool:
            list(pool.map(one, todo))


def sample_round(lanes: Lanes, questions: Sequence[Question], g: int, seed: int, path: Path, temperature: float,
                 *, stop_branches: int = 0, stop_prefix_ids: Sequence[int] = ()) -> list[QuestionSamples]:
    """The round's samples, sampling only the questions not yet in ``path``; in question order."""
    done = {r["qid"] for r in _jsonl(path)}
    todo = [(i, q) for i, q in enumerate(questions) if q.qid not in done]
    if todo:
        lanes.run(todo, g, seed, path, temperature=temperature, stop_branches=stop_branches, stop_prefix_ids=stop_prefix_ids)
    by_qid = {r["qid"]: QuestionSamples.model_validate(r) for r in _jsonl(path)}
    return [by_qid[q.qid] for q in questions if q.qid in by_qid]


# ---------------------------------------------------------------------------------- scoring


def evidenced_stop(episode: SampledEpisode, golds: Sequence[str]) -> bool:
    """A one-search episode whose search's hits hold a gold answer, as the evaluation's stop table
    tells it (:mod:`routerag.eval.stopping`: yes/no golds never count)."""
    from routerag.eval.stopping import answer_in, answer_strings

    searches, strings = episode.trace.search_steps, answer_strings(golds)
    return len(searches) == 1 and bool(strings) and answer_in(searches[0].hits, strings)


def score_round(samples: Sequence[QuestionSamples], schedule: RewardSchedule, step: int, correct: str = "em",
                f1_threshold: float = 0.8, *, stop_needs_evidence: bool = False) -> list[Scored]:
    """Rewards of every episode (the whole round is the batch the efficiency cost is normalised
    over), which are correct, and per question the kept one: the highest reward among the correct,
    then the lowest mode cost, then the fewest policy tokens. With ``stop_needs_evidence`` a
    correct episode of at most one search is kept only when :func:`evidenced_stop`."""
    flat = [(qs, e) for qs in samples for e in qs.episodes]
    reward_samples = [RewardSample(trace=e.trace, golds=list(qs.answers)) for qs, e in flat]
    totals = schedule.score(reward_samples, step).total if flat else []
    if correct == "em":
        ok = [v > 0 for v in get_reward("em")(reward_samples)]
    else:
        ok = [v >= f1_threshold for v in get_reward("f1")(reward_samples)]
    out, i = [], 0
    for qs in samples:
        n = len(qs.episodes)
        rewards, right = totals[i:i + n], ok[i:i + n]
        i += n
        candidates = [j for j in range(n) if right[j] and not (
            stop_needs_evidence and qs.episodes[j].retrieval_turns <= 1 and not evidenced_stop(qs.episodes[j], qs.answers))]
        kept = min(candidates, key=lambda j: (-rewards[j], qs.episodes[j].mode_cost, qs.episodes[j].model_tokens)) if candidates else None
        distinct: dict[tuple[int, ...], int] = {}
        for j in candidates:
            distinct.setdefault(tuple(qs.episodes[j].completion_ids), j)
        out.append(Scored(qid=qs.qid, rewards=[round(r, 6) for r in rewards], correct=right, kept=kept,
                          correct_distinct=sorted(distinct.values())))
    return out


def round_stats(samples: Sequence[QuestionSamples], scored: Sequence[Scored], keep: KeepRule = "best") -> dict[str, Any]:
    """pass@1 (mean fraction correct), pass@G, kept, reward, retrieval turns, mode mix per question form (yes/no, choice, open: the evaluation's classifier)."""
    n = max(len(samples), 1)
    eps = [e for qs in samples for e in qs.episodes]
    rewards = [r for s in scored for r in s.rewards]
    mix: dict[str, Counter] = {}
    kinds: Counter = Counter()
    for qs in samples:
        kind = question_form(qs.question)
        kinds[kind] += 1
        counter = mix.setdefault(kind, Counter())
        for e in qs.episodes:
            for step in e.trace.search_steps:
                counter[step.route.mode if step.route is not None and step.route.mode else "?"] += 1
            if not e.trace.search_steps:
                counter["none"] += 1
    groups_with_variance = sum(len(set(s.rewards)) > 1 for s in scored)
    return {
        "questions": len(samples),
        "episodes": len(eps),
        "pass@1": round(sum(sum(s.correct) / max(len(s.correct), 1) for s in scored) / n, 4),
        "pass@G": round(sum(any(s.correct) for s in scored) / n, 4),
        "kept": sum(s.kept is not None for s in scored),
        "kept_episodes": sum(len(s.kept_indices(keep)) for s in scored),
        "kept_retrieval_turns": _mean([qs.episodes[j].retrieval_turns for qs, s in zip(samples, scored) for j in s.kept_indices(keep)]),
        "reward": round(sum(rewards) / max(len(rewards), 1), 4),
        "groups_with_reward_variance": groups_with_variance,
        "retrieval_turns": round(sum(e.retrieval_turns for e in eps) / max(len(eps), 1), 3),
        "mode_cost": round(sum(e.mode_cost for e in eps) / max(len(eps), 1), 3),
        "model_tokens": round(sum(e.model_tokens for e in eps) / max(len(eps), 1), 1),
        "answered": round(sum(bool(e.trace.answer) for e in eps) / max(len(eps), 1), 4),
        "question_kinds": dict(kinds),
        "mode_mix": {k: dict(v) for k, v in sorted(mix.items())},
    }


# ---------------------------------------------------------------------------------- evaluation


def evaluate(lanes: Lanes, questions: Sequence[Question], path: Path) -> dict[str, Any]:
    """Greedy episodes on held-out questions (resumable per question): EM, F1, retrieval turns."""
    done = {r["qid"] for r in _jsonl(path)}
    todo = [(i, q) for i, q in enumerate(questions) if q.qid not in done]
    if todo:
        lanes.run(todo, 1, 0, path, temperature=0.0)
    records = [QuestionSamples.model_validate(r) for r in _jsonl(path)]
    samples = [RewardSample(trace=r.episodes[0].trace, golds=list(r.answers)) for r in records]
    n = max(len(samples), 1)
    return {
        "eval_n": len(samples),
        "eval_em": round(100 * sum(get_reward("em")(samples)) / n, 2),
        "eval_f1": round(100 * sum(get_reward("f1")(samples)) / n, 2),
        "eval_retrieval_turns": round(sum(s.trace.retrieval_turns for s in samples) / n, 3),
        "eval_mode_cost": round(sum(trajectory_cost(s.trace, "mode_cost") for s in samples) / n, 3),
    }


# ---------------------------------------------------------------------------------- the run


def _adapter_path(init: str | None) -> Path | None:
    if init is None:
        return None
    from routerag.train.adapters import resolve_adapter

    path = resolve_adapter(init)
    if path.is_dir():
        raise ValueError(f"rft.initial_adapter {init}: give the adapter GGUF (export a PEFT directory with routerag export-lora-gguf)")
    return path


def run_rft(cfg: RouteRAGRFTConfig, out: Path) -> list[dict[str, Any]]:
    """The rounds of ``cfg.rft`` into ``out`` (resumable); returns the metrics records."""
    from routerag.train.data import default_schedule, grounding_sources, load_sources, load_training_questions
    from routerag.train.policy import gguf_base_path, load_tokenizer_for

    r = cfg.rft
    base = gguf_base_path(cfg.model.name)
    if base is None:
        raise ValueError("routerag-rft samples with llama.cpp: model.name must be a GGUF (bundled:... or a .gguf path)")
    tokenizer = load_tokenizer_for(cfg.model)
    questions, _ = load_training_questions(cfg, out / "toy_sources")
    if r.max_questions is not None:
        from routerag.corpus.sampling import evenly_spaced

        questions = evenly_spaced(questions, r.max_questions)
    sources = load_sources(cfg)
    eval_questions: list[Question] = []
    eval_sources = sources
    if r.eval_dataset:
        from routerag.corpus.datasets import load_dataset

        eval_questions = load_dataset(r.eval_dataset).sample(r.eval_limit).questions
        if r.eval_dataset != cfg.sources.dataset:
            eval_sources = grounding_sources(r.eval_dataset, cfg.sources.components, cfg.sources.modes)
    schedule = default_schedule(cfg)
    metrics_path = out / METRICS_FILE
    records = read_metrics(metrics_path)
    done_rounds = {int(rec["round"]) for rec in records}
    trainer_state: dict[str, Any] = {}

    def lanes_for(adapter: Path | None, srcs: SourceSet) -> Lanes:
        return Lanes(base, tokenizer, srcs, cfg.env, lanes=r.lanes, threads=r.threads_per_lane, temperature=r.temperature,
                     adapter=adapter, chat_template=cfg.model.chat_template)

    adapter = _adapter_path(r.initial_adapter)
    if r.eval_initial and eval_questions and 0 not in done_rounds:
        t0, c0 = time.perf_counter(), time.process_time()
        stats = evaluate(lanes_for(adapter, eval_sources), eval_questions, _round_dir(out, 0) / EVAL_FILE)
        rec = {"round": 0, "step": 0, "adapter": str(adapter) if adapter else None, **stats,
               "eval_s": round(time.perf_counter() - t0, 1), "cpu_s": round(time.process_time() - c0, 1)}
        _append(metrics_path, rec)
        records.append(rec)
    for rnd in range(1, r.rounds + 1):
        rdir = _round_dir(out, rnd)
        if rnd in done_rounds:
            adapter = rdir / "adapter.gguf"
            continue
        t_round, c_round = time.perf_counter(), time.process_time()
        t0 = time.perf_counter()
        samples = sample_round(lanes_for(adapter, sources), questions, r.num_generations, cfg.grpo.seed * 1000 + rnd, rdir / SAMPLES_FILE,
                               r.temperature, stop_branches=r.stop_branches, stop_prefix_ids=tokenizer.encode(r.stop_prefix, add_special_tokens=False))
        sample_s = time.perf_counter() - t0
        scored = score_round(samples, schedule, rnd, r.correct, r.f1_threshold, stop_needs_evidence=r.stop_needs_evidence)
        stage = schedule.stage_at(rnd).name
        atomic_write_text(rdir / "scored.jsonl", "".join(s.model_dump_json() + "\n" for s in scored))
        stats = round_stats(samples, scored, r.keep)
        kept = _kept_rows(out, rnd, samples, scored, tokenizer, accumulate=r.accumulate, keep=r.keep)
        if r.stop_after == "sample" and not (rdir / "final" / "adapter_config.json").is_file():
            # the round's whole kept training set (with accumulate: the latest round's kept episodes per question)
            rows_file = rdir / TRAIN_KEPT_FILE
            atomic_write_text(rows_file, "".join(json.dumps(row) + "\n" for row in kept))
            log.warning("round %d sampled, scored and kept: %d rows in %s. rft.stop_after=sample: fine-tune elsewhere "
                        "(routerag train routerag-sft --set 'sft.rows_files=[%s]' plus the golden set), put its final/ "
                        "adapter in %s and run again to export it, evaluate and go on", rnd, len(kept), rows_file,
                        rows_file, rdir / "final")
            return records
        t0 = time.perf_counter()
        train_info = _train_round(cfg, out, rdir, kept, tokenizer, trainer_state)
        train_s = time.perf_counter() - t0
        adapter = rdir / "adapter.gguf"
        t0 = time.perf_counter()
        ev = evaluate(lanes_for(adapter, eval_sources), eval_questions, rdir / EVAL_FILE) if eval_questions else {}
        eval_s = time.perf_counter() - t0
        rec = {"round": rnd, "step": rnd, "stage": stage, **stats, **train_info, **ev, "sample_s": round(sample_s, 1),
               "train_s": round(train_s, 1), "eval_s": round(eval_s, 1),
               "wall_s": round(time.perf_counter() - t_round, 1), "cpu_s": round(time.process_time() - c_round, 1)}
        _append(metrics_path, rec)
        records.append(rec)
        plot_rft(metrics_path, out / RFT_CURVES_FILE, title=f"routerag-rft: {len(questions)} questions, G = {r.num_generations}")
    return records


def _round_dir(out: Path, rnd: int) -> Path:
    d = out / f"round-{rnd}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def _kept_rows(out: Path, rnd: int, samples: Sequence[QuestionSamples], scored: Sequence[Scored], tokenizer: Any,
               *, accumulate: bool, keep: KeepRule = "best") -> list[dict[str, list[int]]]:
    """This round's kept episodes as SFT rows (written to ``kept.jsonl``), with the earlier rounds'
    for questions this round kept nothing for when ``accumulate``."""
    eos = tokenizer.eos_token_id
    rows: dict[str, list[dict[str, list[int]]]] = {}
    if accumulate:
        for prev in range(1, rnd):
            path = out / f"round-{prev}" / KEPT_FILE
            if path.is_file():
                earlier: dict[str, list[dict[str, list[int]]]] = {}
                for qid, row in read_kept_rows(path):
                    earlier.setdefault(qid, []).append(row)
                rows.update(earlier)  # a later round's rows for a question replace an earlier round's
    current: list[dict[str, Any]] = []
    for qs, s in zip(samples, scored):
        picked = [qs.episodes[j].sft_row(eos) for j in s.kept_indices(keep)]
        if picked:
            rows[qs.qid] = picked
            current.extend({"qid": qs.qid, **row} for row in picked)
    atomic_write_text(out / f"round-{rnd}" / KEPT_FILE, "".join(json.dumps(c) + "\n" for c in current))
    return [row for group in rows.values() for row in group]


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def round_policy(cfg: RouteRAGRFTConfig, tokenizer: Any, state: dict[str, Any]) -> Any:
    """The model a round's fine-tune starts from. With ``lora.init_from``: that adapter, restored
    afresh every round (each round restarts from the initial policy, as ReST-EM restarts from its
    base; with ``lora.layers_top`` only its top layers train). Without: the base model, loaded once
    and shared by the rounds, which put a fresh adapter on it."""
    from routerag.train.policy import load_policy, load_trainable

    if cfg.lora.init_from:
        return load_trainable(cfg, tokenizer)
    if "model" not in state:
        state["model"] = load_policy(cfg.model, tokenizer, seed=cfg.grpo.seed)
    return state["model"]


def _train_round(cfg: RouteRAGRFTConfig, out: Path, rdir: Path, kept: list[dict[str, list[int]]], tokenizer: Any,
                 state: dict[str, Any]) -> dict[str, Any]:
    """An adapter trained on the kept + golden rows (SFT fast path; fresh, or from ``lora.init_from``:
    :func:`round_policy`), saved and exported."""
    from routerag.train.export_gguf import export_adapter_gguf
    from routerag.train.runfiles import read_metrics as _read
    from routerag.train.sft import fit_rows, run_sft, sft_rows, sft_trajectories

    golden: list[dict[str, list[int]]] = []
    if cfg.rft.golden:
        codec = HFCodec(tokenizer, chat_template=cfg.model.chat_template)
        trajectories = sft_trajectories(cfg, out)
        golden, _ = fit_rows(sft_rows(trajectories, codec, 10**9, cfg.sft.max_observation_tokens), cfg.sft.max_length, True)
    kept_fit, dropped = fit_rows(kept, cfg.sft.max_length, True)
    rows = golden + kept_fit
    final = rdir / "final"
    if not (final / "adapter_config.json").is_file():
        if not rows:
            raise ValueError("nothing to train on: no kept episode and no golden trajectory")
        trainer = run_sft(cfg, round_policy(cfg, tokenizer, state), tokenizer, rows, rdir / "sft",
                          frozen_store=state.setdefault("store", {}))
        trainer.save_model(str(final))
        prefix = getattr(trainer, "frozen_prefix", None)
        if prefix is not None:
            prefix.remove()
        if not cfg.lora.init_from:
            state["model"] = trainer.model.unload()  # the base model again, for the next round's fresh adapter
    export_adapter_gguf(cfg, final, rdir)
    losses = [m["loss"] for m in _read(rdir / "sft" / METRICS_FILE) if "loss" in m]
    # no SFT metrics here: the adapter was trained elsewhere (rft.stop_after=sample) and put in place
    here = (rdir / "sft" / METRICS_FILE).is_file()
    return {"trained_here": here, "train_rows": len(rows), "train_golden": len(golden), "train_kept": len(kept_fit),
            "train_dropped_longer": dropped,
            "train_tokens": sum(len(x["input_ids"]) for x in rows),
            "train_loss": round(sum(losses) / len(losses), 4) if losses else None}


def plot_rft(metrics_path: Path, png_path: Path, *, title: str = "") -> Path | None:
    """pass@1, pass@G and evaluation EM/F1; retrieval turns; reward — against the round."""
    records = read_metrics(metrics_path)
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from routerag.train.runfiles import plot_series, save_figure

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    plot_series(axes[0], records, {"pass@1": "pass@1 (train)", "pass@G": "pass@G (train)"}, xlabel="round", title="training questions")
    ev = [{**rec, "eval_em": rec["eval_em"] / 100, "eval_f1": rec["eval_f1"] / 100} for rec in records if "eval_em" in rec]
    plot_series(axes[1], ev, {"eval_em": "EM (held-out, greedy)", "eval_f1": "F1 (held-out, greedy)"}, xlabel="round",
                 title="evaluation")
    plot_series(axes[2], records, {"retrieval_turns": "retrieval turns (train)", "eval_retrieval_turns": "retrieval turns (eval)",
                                    "reward": "reward (train)"}, xlabel="round", title="cost / reward")
    if title:
        fig.suptitle(title)
    return save_figure(fig, png_path)
