"""Batched rollouts (the GPU backend): episodes in threads whose turns are decoded together.

Checked here on the CPU: the batcher routes every result to its own episode and shrinks the batch
as episodes end; a left-padded batch decodes exactly what one-at-a-time decoding gives (greedy, a
tiny Qwen2 with the real tokenizer); whole batched episodes over real BM25 sources equal the
sequential ones; and GRPO through TRL trains with the batched backend and DAPO's dynamic sampling."""

from __future__ import annotations

import copy
import json
import threading

import pytest

from routerag.corpus.schema import Document, Question
from routerag.train.batched import BatchSampler, EpisodeBatcher, TurnRequest, batched_rollouts
from routerag.train.env import EnvConfig, HFCodec, RouteRAGEnv
from routerag.train.fixtures import bm25_sourceset, tiny_qwen2
from routerag.train.generation import PolicySampler

pytestmark = pytest.mark.integration
DOCS = [
    Document.make("Paris", "Paris is the capital of France."),
    Document.make("Lyon", "Lyon is a city of France on the Rhone."),
    Document.make("Berlin", "Berlin is the capital of Germany."),
]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return bm25_sourceset({"passage": DOCS, "graph": DOCS, "hybrid": DOCS}, tmp_path_factory.mktemp("batched-src"))


@pytest.fixture(scope="module")
def tiny(tokenizer):
    import torch

    torch.set_num_threads(1)
    return tiny_qwen2(len(tokenizer), seed=3)


def test_batcher_routes_results_and_shrinks_the_batch():
    seen: list[list[int]] = []

    def sample(requests):  # a test double: echoes each prompt's last token + 1, as many times as the turn number
        seen.append([r.prompt_ids[0] for r in requests])
        return [([r.prompt_ids[-1] + 1], [-0.5]) for r in requests]

    batcher = EpisodeBatcher(sample, live=3)
    out: dict[int, list[int]] = {}

    def episode(owner: int, turns: int) -> None:
        ids = [owner * 100]
        try:
            for _ in range(turns):
                new, lps = batcher.generate(ids, ["</x>"], 4)
                assert lps == [-0.5]
                ids = ids + new
            out[owner] = ids
        finally:
            batcher.finished()

    threads = [threading.Thread(target=episode, args=(o, t)) for o, t in [(1, 1), (2, 3), (3, 2)]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert out == {1: [100, 101], 2: [200, 201, 202, 203], 3: [300, 301, 302]}
    assert batcher.batches == [3, 2, 1]
    assert sorted(seen[0]) == [100, 200, 300] and sorted(seen[1]) == [200, 300] and seen[2] == [200]


def test_a_sampler_error_reaches_every_waiting_episode():
    def sample(requests):
        raise RuntimeError("out of memory")

    batcher = EpisodeBatcher(sample, live=2)
    errors: list[str] = []

    def episode() -> None:
        try:
            batcher.generate([1, 2], [], 3)
        except RuntimeError as exc:
            errors.append(str(exc))
        finally:
            batcher.finished()

    threads = [threading.Thread(target=episode) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert errors == ["out of memory", "out of memory"]


def test_a_left_padded_batch_decodes_what_one_at_a_time_decoding_gives(tokenizer, tiny):
    prompts = [tokenizer("Question: where is Paris?")["input_ids"],
               tokenizer("Q: a much longer question about the capital city of a country in Europe, please?")["input_ids"],
               tokenizer("Hi")["input_ids"]]
    limits = [12, 7, 0]
    stops = [["</search>", "</answer>"], [], ["</answer>"]]
    batch = BatchSampler(tiny, tokenizer, temperature=0.0)
    got = batch([TurnRequest(p, s, m) for p, s, m in zip(prompts, stops, limits)])
    one = PolicySampler(tiny, tokenizer, temperature=0.0)
    for (ids, lps), p, s, m in zip(got, prompts, stops, limits):
        one.reset()
        ref_ids, ref_lps = one(list(p), s, m)
        assert ids == ref_ids
        assert lps == pytest.approx(ref_lps, abs=1e-4)
    assert [len(ids) for ids, _ in got] == [12, 7, 0]
    assert batch.rows == 3 and batch.decode_steps == 12
    assert batch.row_steps == 7 * 2 + 5  # the 0-token row never enters the batch, the 7-token row leaves after 7


def test_pruning_ended_rows_changes_no_token_and_saves_their_steps(tokenizer, tiny):
    """Rows leave the batch (KV cache included) as they end: the same greedy tokens and log-probs as
    a batch that keeps every row to the end, for fewer rows run through the model."""
    texts = ["Question: where is Paris?", "Q: who wrote it?", "A longer question about the Rhone and its delta, please",
             "Hi", "When was the Eiffel Tower built?"]
    requests = [TurnRequest(tokenizer(t)["input_ids"], [], m) for t, m in zip(texts, [3, 9, 1, 6, 9])]
    pruned = BatchSampler(tiny, tokenizer, temperature=0.0)
    full = BatchSampler(tiny, tokenizer, temperature=0.0, prune_finished=False)
    got, ref = pruned(requests), full(requests)
    assert [ids for ids, _ in got] == [ids for ids, _ in ref]
    for (_, lps), (_, ref_lps) in zip(got, ref):
        assert lps == pytest.approx(ref_lps, abs=1e-4)
    assert [len(ids) for ids, _ in got] == [3, 9, 1, 6, 9]
    assert full.row_steps == 5 * 9 and pruned.row_steps == 3 + 9 + 1 + 6 + 9
    assert pruned.decode_steps == full.decode_steps == 9


def test_sampled_rows_differ_and_carry_their_sampling_logprobs(tokenizer, tiny):
    prompt = tokenizer("Question: where is Paris?")["input_ids"]
    batch = BatchSampler(tiny, tokenizer, temperature=1.0, seed=7)
    got = batch([TurnRequest(list(prompt), [], 10) for _ in range(4)])
    assert len({tuple(ids) for ids, _ in got}) > 1  # the G episodes of a group differ
    assert all(len(ids) == len(lps) == 10 and all(lp <= 0 for lp in lps) for ids, lps in got)


def test_batched_episodes_equal_sequential_episodes(tokenizer, sources, tiny):
    codec = HFCodec(tokenizer)
    env = RouteRAGEnv(sources, codec, EnvConfig(k=1, max_turns=2, max_new_tokens_per_turn=10, max_completion_tokens=160,
                                                 max_observation_tokens=64))
    questions = ["What is the capital of France?", "Which city is on the Rhone?", "What is the capital of Germany?"]
    batch_sizes: list[int] = []
    batched = batched_rollouts(env, questions, BatchSampler(tiny, tokenizer, temperature=0.0), batcher_log=batch_sizes)
    one = PolicySampler(tiny, tokenizer, temperature=0.0)
    for q, b in zip(questions, batched):
        one.reset()
        s = env.rollout(q, one)
        assert b.trace.question == q
        assert b.completion_ids == s.completion_ids and b.env_mask == s.env_mask
        assert b.logprobs == pytest.approx(s.logprobs, abs=1e-4)
        assert b.trace.answer == s.trace.answer and b.finished == s.finished
    assert batch_sizes and batch_sizes[0] == 3 and sum(batch_sizes) >= 3


def test_grpo_trains_with_batched_rollouts_and_dynamic_sampling(tokenizer, sources, tiny, tmp_path):
    pytest.importorskip("trl")
    from routerag.train import grpo, runfiles
    from routerag.train.config import RouteRAGTwoStageConfig
    from routerag.train.rewards import RewardSchedule, Stage, WeightedReward

    cfg = RouteRAGTwoStageConfig(output_dir=str(tmp_path), model={"name": "tiny", "chat_template": False},
                      grpo={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 2, "learning_rate": 1e-2,
                            "beta": 0.0, "use_cpu": True, "save_steps": 100, "seed": 0, "torch_threads": 1,
                            "rollout_backend": "batched", "dynamic_sampling": True, "temperature": 1.0},
                      env=EnvConfig(k=1, max_turns=1, max_new_tokens_per_turn=6, max_completion_tokens=80,
                                    max_observation_tokens=32, prompt_template="Question: {question}\n"))
    env = RouteRAGEnv(sources, HFCodec(tokenizer, chat_template=False), cfg.env)
    pool = [Question(qid=f"q{i}", question=f"Question number {i}?", answers=["Paris"]) for i in range(6)]
    # a random model never closes its own answer: every group's format rewards are all 0, so dynamic sampling
    # redraws each group twice (max_tries), all of a round's replacement episodes decoded as one batch
    schedule = RewardSchedule(stages=[Stage(name="s", rewards=[WeightedReward(name="format")])])
    dynamic = grpo.DynamicSampling(schedule, pool, max_tries=2, seed=0)
    rows = [{"prompt": q.question, "answers": list(q.answers)} for q in pool[:2]]
    trainer = grpo.grpo_trainer(cfg, copy.deepcopy(tiny), tokenizer, rows, grpo.make_reward_funcs(schedule), tmp_path,
                                rollout_func=grpo.make_rollout_func(env, tokenizer, 1.0, 0, dynamic=dynamic, batched=True,
                                                                    trace_log=tmp_path / runfiles.ROLLOUTS_FILE))
    trainer.train()
    records = [r for r in runfiles.read_metrics(tmp_path / runfiles.METRICS_FILE) if "reward" in r]
    assert len(records) == 2 and all(r["reward"] == 0.0 and r["grad_norm"] == 0.0 for r in records)
    assert dynamic.skipped == 8 and dynamic.unresolved == 4  # 2 groups x 2 steps, each redrawn twice
    stats = [json.loads(line) for line in (tmp_path / runfiles.ROLLOUT_STATS_FILE).read_text().splitlines()]
    assert [s["step"] for s in stats] == [1, 2]
    for s in stats:  # three rounds of 8 episodes (the step's own, then two rounds of replacements), one turn each
        assert s["episodes_trained"] == 8 and s["largest_batch"] == 8
        assert s["decoded_batches"] == 3 and s["decoded_turns"] == 24
        # 6 tokens a turn at most; every decoding step runs at least one row, a pruned batch fewer than 8
        assert s["decode_steps"] <= 3 * 6 and s["decode_steps"] <= s["decoded_rows"] <= 24 * 6
    traces = [json.loads(line) for line in (tmp_path / runfiles.ROLLOUTS_FILE).read_text().splitlines()]
    assert len(traces) == 16 and {t["step"] for t in traces} == {1, 2}
