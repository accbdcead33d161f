"""GRPO through TRL with the real rollout environment over real BM25 sources and a tiny Qwen2
(2 layers, hidden 64) over the bundled tokenizer: parameters change, losses are finite,
observation tokens carry no loss weight, logged reward components equal hand-computed values."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from pydantic import BaseModel

pytest.importorskip("trl")

from routerag.corpus.schema import Document  # noqa: E402
from routerag.train import grpo, runfiles  # noqa: E402
from routerag.train.config import RouteRAGTwoStageConfig  # noqa: E402
from routerag.train.env import EnvConfig, HFCodec, RouteRAGEnv  # noqa: E402
from routerag.train.fixtures import bm25_sourceset, tiny_qwen2  # noqa: E402
from routerag.train.rewards import REWARDS, RewardSchedule, RewardSpec, Stage, WeightedReward, two_stage_schedule  # noqa: E402

pytestmark = pytest.mark.integration
DOCS = [
    Document.make("Paris", "Paris is the capital and largest city of France."),
    Document.make("Lyon", "Lyon is the third-largest city of France."),
    Document.make("Berlin", "Berlin is the capital of Germany."),
]
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    from routerag.llm.hf_assets import load_tokenizer

    tok = load_tokenizer("bundled:qwen2.5-coder-0.5b")
    sources = bm25_sourceset({"passage": DOCS, "graph": DOCS[:1], "hybrid": DOCS}, tmp_path_factory.mktemp("trl-src"))
    model = tiny_qwen2(len(tok), seed=0)
    return tok, sources, model


def config(tmp_path, **grpo) -> RouteRAGTwoStageConfig:
    values = dict(num_generations=4, per_device_train_batch_size=4, max_steps=2, learning_rate=1e-2, beta=0.0,
                  use_cpu=True, save_steps=1, seed=0, torch_threads=1)
    values.update(grpo)
    return RouteRAGTwoStageConfig(output_dir=str(tmp_path), model={"name": "tiny", "chat_template": False}, grpo=values,
                       env=EnvConfig(k=1, max_turns=2, max_new_tokens_per_turn=8, max_completion_tokens=240,
                                     max_observation_tokens=48, prompt_template="Question: {question}\n"),
                       switch_step=1)


def record_losses(trainer):
    """Wrap compute_loss to keep every batch's masks and loss."""
    seen = []
    original = trainer.compute_loss

    def compute_loss(model, inputs, *args, **kwargs):
        loss = original(model, inputs, *args, **kwargs)
        seen.append({"loss": float(loss.detach()), "completion_mask": inputs["completion_mask"].tolist(),
                     "tool_mask": inputs["tool_mask"].tolist() if "tool_mask" in inputs else None})
        return loss

    trainer.compute_loss = compute_loss
    return seen


class AnswerLengthParams(BaseModel):
    pass


def answer_length(samples, params):
    """A plugin reward that varies even for a random policy (EM of a random model is always 0,
    which gives GRPO no advantage and no gradient)."""
    return [min(len(s.trace.answer), 40) / 40 for s in samples]


REWARDS.register("test_answer_length", RewardSpec("test_answer_length", answer_length, AnswerLengthParams, "test"), replace=True)


def test_grpo_with_the_sampled_policy_changes_parameters(setup, tmp_path):
    tok, sources, base = setup
    model = copy.deepcopy(base)
    cfg = config(tmp_path)
    env = RouteRAGEnv(sources, HFCodec(tok, chat_template=False), cfg.env)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rows = [{"prompt": QUESTION, "answers": ["Paris"]}]
    schedule = RewardSchedule(stages=[Stage(name="s", rewards=[WeightedReward(name="em"), WeightedReward(name="test_answer_length")])])
    trainer = grpo.grpo_trainer(cfg, model, tok, rows, grpo.make_reward_funcs(schedule), tmp_path,
                                   rollout_func=grpo.make_rollout_func(env, tok, 1.0, 0))
    seen = record_losses(trainer)
    trainer.train()
    assert trainer.state.global_step == 2
    assert seen and all(math.isfinite(s["loss"]) for s in seen)
    changed = [n for n, p in trainer.model.named_parameters() if not np.allclose(p.detach().numpy(), before[n].numpy())]
    assert changed and "model.embed_tokens.weight" in changed and any("layers.1" in n for n in changed)
    records = runfiles.read_metrics(tmp_path / runfiles.METRICS_FILE)
    assert [r["step"] for r in records if "reward" in r] == [1, 2]
    assert all("env/retrieval_turns" in r and "completions/mean_length" in r for r in records if "reward" in r)
    assert any(r.get("reward_std", 0) > 0 for r in records)
    assert (tmp_path / "checkpoint-2").is_dir()


def test_logged_components_and_env_mask_with_a_scripted_policy(setup, tmp_path):
    """Four fixed episodes per step: [passage] -> Paris, [graph] -> Paris, [passage] -> Lyon,
    a direct answer Paris. Step 1 is the EM stage, step 2 accuracy–efficiency."""
    tok, sources, base = setup
    model = copy.deepcopy(base)
    cfg = config(tmp_path)
    codec = HFCodec(tok, chat_template=False)
    env = RouteRAGEnv(sources, codec, cfg.env)
    episodes = [["<search> [passage] capital of France </search>", "<answer> Paris </answer>"],
                ["<search> [graph] capital of France </search>", "<answer> Paris </answer>"],
                ["<search> [passage] France </search>", "<answer> Lyon </answer>"],
                ["<answer> Paris </answer>"]]
    script = [text for ep in episodes for text in ep]
    state = {"i": 0}

    def policy(prompt_ids, stops, max_new):
        text = script[state["i"] % len(script)]
        state["i"] += 1
        ids = codec.encode(text)
        return ids, [-1.0] * len(ids)

    rollout = grpo.make_rollout_func(env, tok, 1.0, 0, policy=policy)
    captured = []

    def rollout_func(prompts, trainer):
        out = rollout(prompts, trainer)
        captured.append(out)
        return out

    schedule = two_stage_schedule(1, mode_cost={"passage": 1.0, "graph": 3.0})
    trainer = grpo.grpo_trainer(cfg, model, tok, [{"prompt": QUESTION, "answers": ["Paris"]}],
                                   grpo.make_reward_funcs(schedule), tmp_path, rollout_func=rollout_func)
    seen = record_losses(trainer)
    trainer.train()
    records = [r for r in runfiles.read_metrics(tmp_path / runfiles.METRICS_FILE) if "reward" in r]
    step1, step2 = records
    # stage 1: EM of [Paris, Paris, Lyon, Paris]
    assert step1["stage"] == 1 and step1["rewards/em/mean"] == pytest.approx(0.75) and step1["reward"] == pytest.approx(0.75)
    assert step1["env/retrieval_turns"] == pytest.approx(0.75) and step1["env/retrieval_cost"] == pytest.approx(5 / 4)
    # stage 2 by hand: costs 1, 3, 1, 0; p95 = 2.7; T = 2.7 / 0.5; scaled costs clipped at 0.5
    costs = [1.0, 3.0, 1.0, 0.0]
    T = np.percentile(costs, 95) / 0.5
    s = [min(c / T, 0.5) for c in costs]
    m = sum(s) / 4
    expected = [1 + m - s[0], 1 + m - s[1], 0.0, 1 + m - s[3]]
    assert step2["stage"] == 2 and step2["rewards/em/mean"] == 0.0
    assert step2["rewards/accuracy_efficiency/mean"] == pytest.approx(sum(expected) / 4, abs=1e-4)
    assert step2["rewards/accuracy_efficiency/mean"] == pytest.approx(0.7419, abs=1e-3)
    assert step2["raw/accuracy_efficiency"] == pytest.approx(sum(expected) / 4, abs=1e-4)
    # observation tokens (evidence blocks) have tool_mask 0 in the loss; model tokens 1
    # (TRL shuffles the generation batch before the loss, so rows are matched as a multiset)
    for out, batch in zip(captured, seen):
        assert batch["tool_mask"] is not None
        used = [tuple(t * c for t, c in zip(tm, cm)) for tm, cm in zip(batch["tool_mask"], batch["completion_mask"])]
        expected_rows = [tuple(m) for m in out["env_mask"]]
        width = len(used[0])
        assert sorted(used) == sorted(r + (0,) * (width - len(r)) for r in expected_rows)
        assert sum(0 in r for r in expected_rows) == 3  # three episodes searched: evidence tokens weigh 0
    assert all(math.isfinite(b["loss"]) for b in seen)


def test_lora_trains_adapters_only(setup, tmp_path):
    tok, sources, base = setup
    model = copy.deepcopy(base)
    cfg = config(tmp_path, max_steps=1)
    cfg.lora.enabled = True
    cfg.lora.target_modules = ["q_proj", "v_proj"]
    env = RouteRAGEnv(sources, HFCodec(tok, chat_template=False), cfg.env)
    trainer = grpo.grpo_trainer(cfg, model, tok, [{"prompt": QUESTION, "answers": ["Paris"]}],
                                   grpo.make_reward_funcs(two_stage_schedule(1)), tmp_path,
                                   rollout_func=grpo.make_rollout_func(env, tok, 1.0, 0))
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    trainer.train()
    assert trainer.state.global_step == 1
