"""The scripted test double behaves like a backend: stops, length cut, usage, exhaustion."""

from __future__ import annotations

import pytest

from routerag.llm import ChatModel, GenerationParams, Message, ModelError
from routerag.llm.scripted import ScriptedModel, cut_at_stop, rough_token_count

USER = [Message(role="user", content="What is the capital of France?")]


def test_is_a_chat_model_and_answers_in_order() -> None:
    model = ScriptedModel(["one", "two"])
    assert isinstance(model, ChatModel)
    assert model.chat(USER).text == "one"
    assert model.chat(USER).text == "two"
    with pytest.raises(ModelError, match="ran out"):
        model.chat(USER)
    assert len(model.calls) == 3


def test_stop_string_cuts_and_is_reported() -> None:
    model = ScriptedModel(["<search>paris</search> rest"])
    response = model.chat(USER, GenerationParams(stop=["</search>", "</answer>"]))
    assert response.text == "<search>paris"
    assert response.stop_string == "</search>"
    assert response.finish_reason == "stop"


def test_earliest_stop_wins() -> None:
    assert cut_at_stop("a</b>c</a>", ["</a>", "</b>"]) == ("a", "</b>")
    assert cut_at_stop("abc", ["x"]) == ("abc", None)


def test_max_tokens_truncates_with_length_reason() -> None:
    model = ScriptedModel(["one two three four five"])
    response = model.chat(USER, GenerationParams(max_tokens=2))
    assert response.text == "one two"
    assert response.finish_reason == "length"
    assert response.usage.completion_tokens == 2


def test_callable_sees_request_and_usage_counts() -> None:
    def respond(messages, params, continue_final):
        return f"{len(messages)}:{continue_final}"

    model = ScriptedModel(respond)
    convo = USER + [Message(role="assistant", content="<think>")]
    response = model.chat(convo, continue_final=True)
    assert response.text == "2:True"
    assert response.finish_reason == "eos"
    assert response.usage.prompt_tokens > rough_token_count("What is the capital of France?")


def test_continue_final_needs_assistant_last() -> None:
    with pytest.raises(ModelError, match="assistant"):
        ScriptedModel(["x"]).chat(USER, continue_final=True)


def test_cycle() -> None:
    model = ScriptedModel(["a"], cycle=True)
    assert [model.chat(USER).text for _ in range(3)] == ["a", "a", "a"]
