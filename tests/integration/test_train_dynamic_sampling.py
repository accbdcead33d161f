"""DAPO dynamic sampling in the GRPO rollout function: a group whose rewards are all equal is
replaced by another question's group, so every step has a gradient (tiny Qwen2 through TRL, real
BM25 sources, a scripted policy whose answers are right on one question and mixed on the other)."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("trl")

from routerag.corpus.schema import Document, Question  # noqa: E402
from routerag.train import grpo, runfiles  # noqa: E402
from routerag.train.config import RouteRAGTwoStageConfig  # noqa: E402
from routerag.train.env import EnvConfig, HFCodec, RouteRAGEnv  # noqa: E402
from routerag.train.fixtures import bm25_sourceset, tiny_qwen2  # noqa: E402
from routerag.train.rewards import RewardSchedule, Stage, WeightedReward  # noqa: E402

pytestmark = pytest.mark.integration
DOCS = [Document.make("Paris", "Paris is the capital of France."), Document.make("Lyon", "Lyon is a city of France.")]
EASY = Question(qid="easy", question="What is the capital of France?", answers=["Paris"])  # always right: no variance
MIXED = Question(qid="mixed", question="Which other city is in France?", answers=["Lyon"])  # right half the time


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    from routerag.llm.hf_assets import load_tokenizer

    tok = load_tokenizer("bundled:qwen2.5-coder-0.5b")
    sources = bm25_sourceset({"passage": DOCS, "graph": DOCS, "hybrid": DOCS}, tmp_path_factory.mktemp("dyn-src"))
    return tok, sources, tiny_qwen2(len(tok), seed=0)


def _run(setup, tmp_path, dynamic: bool):
    tok, sources, base = setup
    cfg = RouteRAGTwoStageConfig(output_dir=str(tmp_path), model={"name": "tiny", "chat_template": False},
                      grpo={"num_generations": 4, "per_device_train_batch_size": 4, "max_steps": 5, "learning_rate": 1e-2,
                            "beta": 0.0, "use_cpu": True, "save_steps": 100, "seed": 0, "torch_threads": 1},
                      env=EnvConfig(k=1, max_turns=1, max_new_tokens_per_turn=8, max_completion_tokens=120,
                                    max_observation_tokens=48, prompt_template="Question: {question}\n"))
    codec = HFCodec(tok, chat_template=False)
    env = RouteRAGEnv(sources, codec, cfg.env)
    calls = {"n": 0}

    def policy(prompt_ids, stops, max_new):
        text = codec.decode(prompt_ids)
        if EASY.question in text:
            answer = "Paris"
        else:
            calls["n"] += 1
            answer = "Lyon" if calls["n"] % 2 else "Nice"
        ids = codec.encode(f"<answer> {answer} </answer>")
        return ids, [-1.0] * len(ids)

    schedule = RewardSchedule(stages=[Stage(name="em", rewards=[WeightedReward(name="em")])])
    sampler = grpo.DynamicSampling(schedule, [EASY, MIXED], max_tries=3, seed=0) if dynamic else None
    trainer = grpo.grpo_trainer(cfg, copy.deepcopy(base), tok, [{"prompt": EASY.question, "answers": EASY.answers}],
                                grpo.make_reward_funcs(schedule), tmp_path,
                                rollout_func=grpo.make_rollout_func(env, tok, 1.0, 0, policy=policy, dynamic=sampler))
    trainer.train()
    return [r for r in runfiles.read_metrics(tmp_path / runfiles.METRICS_FILE) if "reward" in r], sampler


def test_without_dynamic_sampling_an_all_correct_group_has_no_gradient(setup, tmp_path):
    records, _ = _run(setup, tmp_path, dynamic=False)
    assert len(records) == 5
    assert all(r["reward"] == 1.0 and r["grad_norm"] == 0.0 for r in records)


def test_dynamic_sampling_replaces_groups_without_variance(setup, tmp_path):
    records, sampler = _run(setup, tmp_path, dynamic=True)
    assert len(records) == 5
    assert all(r["grad_norm"] > 0 for r in records)  # five consecutive steps with a gradient
    assert all(r["reward"] == 0.5 for r in records)  # the MIXED group: 2 of 4 right, scored with its own golds
    assert all(r["dynamic/skipped_groups"] >= 1 for r in records)
    assert sampler.skipped == sum(r["dynamic/skipped_groups"] for r in records) and sampler.unresolved == 0


def test_replacements_depend_on_the_step_so_a_resumed_run_does_not_repeat_them():
    pool = [Question(qid=f"q{i}", question=f"question {i}?", answers=["a"]) for i in range(20)]
    schedule = RewardSchedule(stages=[Stage(name="em", rewards=[WeightedReward(name="em")])])

    def draws(sampler, step):
        sampler.start_step(step)
        return [sampler.draw().qid for _ in range(3)]

    straight = grpo.DynamicSampling(schedule, pool, seed=0)
    run = {step: draws(straight, step) for step in (1, 2, 3, 4)}
    resumed = grpo.DynamicSampling(schedule, pool, seed=0)  # a new process, resumed at step 4
    assert draws(resumed, 4) == run[4]
    assert run[4] != run[1]
