"""GRPO rollouts sampled by llama.cpp with the policy's current LoRA adapter
(``grpo.rollout_backend: llamacpp``): token-level sampling with log-probs on the real bundled
model, adapter sync, and the rollout function's once-per-step sync."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from routerag.train.config import RouteRAGTwoStageConfig

pytestmark = pytest.mark.model
def _bundled():
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gguf")
    from routerag.llm.bundled import bundled_model_path

    try:
        return bundled_model_path()
    except Exception as exc:  # noqa: BLE001 - parts not installed
        pytest.skip(f"bundled model unavailable: {exc}")


@pytest.fixture(scope="module")
def base_and_tokenizer():
    base = _bundled()
    from routerag.llm.hf_assets import load_tokenizer

    return base, load_tokenizer("bundled:qwen2.5-coder-0.5b")


def test_sample_ids_greedy_matches_complete_and_reuses_the_prefix(base_and_tokenizer):
    from routerag.llm.base import GenerationParams, Message
    from routerag.llm.llamacpp import LlamaCppModel

    base, tok = base_and_tokenizer
    model = LlamaCppModel(base, n_ctx=512, n_threads=1)
    prompt = model.render([Message(role="user", content="Name three primary colours.")])
    ids = model.tokenize(prompt)
    greedy, logprobs = model.sample_ids(ids, ["</answer>"], 12, temperature=0.0, decode=tok.decode)
    assert 1 < len(greedy) == len(logprobs) <= 12 and all(lp <= 0.0 for lp in logprobs)
    reference = model.complete(prompt, GenerationParams(max_tokens=12, temperature=0.0))
    text = tok.decode(greedy)
    if reference.finish_reason == "eos":  # the end token is part of the sample (a trainer learns to stop)
        assert text.endswith("<|im_end|>")
        text = text.removesuffix("<|im_end|>")
    assert text == reference.text
    # the second call shares the prompt: only the new tokens are evaluated, same result
    again, again_lp = model.sample_ids(ids, [], 12, temperature=0.0, decode=tok.decode)
    assert again == greedy and np.allclose(again_lp, logprobs, atol=1e-3)
    # a stop string ends the sample (the token that completes it is kept)
    word = text.split()[1]
    stopped, _ = model.sample_ids(ids, [word], 12, temperature=0.0, decode=tok.decode)
    assert len(stopped) < len(greedy) and tok.decode(stopped).endswith(word)
    # sampling at temperature 1: log-probs are those of the full softmax of the logits
    rng = np.random.default_rng(0)
    sampled, lps = model.sample_ids(ids, [], 6, temperature=1.0, rng=rng, decode=tok.decode)
    assert len(sampled) == 6 and all(-50 < lp <= 0 for lp in lps)
    logits = model.next_token_logits(prompt).astype(np.float64)
    log_softmax = logits - logits.max() - math.log(np.exp(logits - logits.max()).sum())
    assert math.isclose(lps[0], log_softmax[sampled[0]], abs_tol=1e-4)


class _SavedAdapter:
    """Stands in for a peft model: ``save_pretrained`` writes a fixed rank-2 adapter of the bundled model."""

    def __init__(self, base: Path, scale_b: float) -> None:
        self.base, self.scale_b, self.saves = base, scale_b, 0

    def save_pretrained(self, folder: str) -> None:
        from tests.model.test_train_export_gguf import _random_adapter_for_bundled

        self.saves += 1
        _random_adapter_for_bundled(Path(folder), self.base, scale_b=self.scale_b)


def test_sampler_syncs_the_adapter_and_samples_from_it(base_and_tokenizer, tmp_path):
    from routerag.llm.llamacpp import LlamaCppModel
    from routerag.train.generation import LlamaCppSampler

    base, tok = base_and_tokenizer
    sampler = LlamaCppSampler(base, tok, tmp_path, temperature=0.0, n_ctx=512, n_threads=1)
    with pytest.raises(RuntimeError, match="sync"):
        sampler([1, 2, 3], [], 2)
    ids = tok("The capital of France is")["input_ids"]
    plain, _ = LlamaCppModel(base, n_ctx=512, n_threads=1).sample_ids(ids, [], 8, temperature=0.0, decode=tok.decode)
    sampler.sync(_SavedAdapter(base, 0.0), step=0)
    assert sampler.synced_step == 0 and (tmp_path / "adapter.gguf").is_file()
    assert sampler(ids, [], 8)[0] == plain  # B = 0: the adapter changes nothing
    sampler.sync(_SavedAdapter(base, 0.5), step=1)
    assert sampler(ids, [], 8)[0] != plain  # the synced adapter is what samples
    assert sampler.calls == 2


def test_rollout_func_syncs_once_per_optimiser_step(tmp_path):
    from routerag.train.grpo import make_rollout_func

    class Env:
        def rollout(self, question, generate):
            ids, lps = generate([1, 2], [], 3)
            return SimpleNamespace(prompt_ids=[1, 2], completion_ids=ids, logprobs=lps, env_mask=[1] * len(ids),
                                   trace=SimpleNamespace(model_dump_json=lambda: "{}", model_dump=lambda mode: {"q": question}))

    class Sampler:
        synced_step = None

        def __init__(self):
            self.synced = []

        def sync(self, model, step):
            self.synced.append((model, step))
            self.synced_step = step

        def __call__(self, ids, stops, n):
            return [7] * n, [-0.5] * n

    sampler = Sampler()
    log = tmp_path / "grpo" / "rollouts.jsonl"
    fn = make_rollout_func(Env(), tokenizer=None, temperature=1.0, seed=0, llamacpp=sampler, trace_log=log)
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0), model="M",
                              accelerator=SimpleNamespace(unwrap_model=lambda m: "unwrapped-" + m))
    out = fn(["q1", "q1"], trainer)
    fn(["q2", "q2"], trainer)  # same step: no new export
    trainer.state.global_step = 1
    fn(["q3", "q3"], trainer)
    assert sampler.synced == [("unwrapped-M", 0), ("unwrapped-M", 1)]
    assert out["completion_ids"] == [[7, 7, 7]] * 2 and out["env_mask"] == [[1, 1, 1]] * 2
    import json

    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["step"], r["trace"]["q"]) for r in logged] == [(1, "q1"), (1, "q1"), (1, "q2"), (1, "q2"), (2, "q3"), (2, "q3")]


def test_llamacpp_rollouts_need_lora():
    with pytest.raises(ValueError, match="lora.enabled"):
        RouteRAGTwoStageConfig(grpo={"rollout_backend": "llamacpp"})
    assert RouteRAGTwoStageConfig(grpo={"rollout_backend": "llamacpp"}, lora={"enabled": True}).grpo.rollout_threads is None


def test_policy_sampler_reuses_the_kv_cache_without_changing_the_samples():
    pytest.importorskip("torch")
    from routerag.train.fixtures import tiny_qwen2
    from routerag.train.generation import PolicySampler

    class Tok:  # ids only: no stop strings are used
        eos_token_id = None
        pad_token_id = None

        def decode(self, ids):
            return " ".join(map(str, ids))

    model = tiny_qwen2(300, layers=2, hidden=64, seed=3)
    prompt = list(range(5, 45))
    cached = PolicySampler(model, Tok(), temperature=0)
    fresh = lambda ids, n: PolicySampler(model, Tok(), temperature=0)(ids, [], n)  # noqa: E731
    first, lp1 = cached(prompt, [], 6)
    assert (first, lp1) == fresh(prompt, 6)
    turn2 = prompt + first + [7, 8, 9]  # an observation appended, as the environment does
    second, lp2 = cached(turn2, [], 6)
    assert cached.reused_tokens == len(prompt) + len(first) - 1
    want, want_lp = fresh(turn2, 6)
    assert second == want and np.allclose(lp2, want_lp, atol=1e-4)
    again = cached(prompt, [], 6)  # a shorter context (next group member): the cache is cropped
    assert again[0] == first
    cached.reset()
    cached(prompt, [], 2)
    assert cached.reused_tokens == len(prompt) + len(first) - 1 + len(prompt) - 1
