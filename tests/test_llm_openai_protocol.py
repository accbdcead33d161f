"""openai backend protocol handling against a small in-process HTTP server (a test double of a
chat-only, vLLM-style endpoint): fallback from /completions, ``stop_reason`` extraction."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from routerag.llm.base import GenerationParams, Message
from routerag.llm.template import ChatTemplate

pytestmark = pytest.mark.service
fastapi = pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
Request = fastapi.Request  # module level: FastAPI resolves the handler's string annotations here

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
Q = [Message(role="user", content="Who directed Inception?")]


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[dict]]]:
    seen: list[dict] = []
    app = fastapi.FastAPI()

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": "served-model", "object": "model", "created": 0, "owned_by": "me"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict:
        body = await request.json()
        seen.append(body)
        return {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "stop_reason": "</search>",
                    "message": {"role": "assistant", "content": "<search>Inception director"},
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
        }

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(100):
        try:
            httpx.get(f"{url}/models", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.05)
    yield url, seen
    srv.should_exit = True
    thread.join(timeout=5)


def test_stop_reason_and_usage_are_read(server) -> None:
    from routerag.llm.openai_compat import OpenAICompatModel

    url, seen = server
    model = OpenAICompatModel(url)
    response = model.chat(Q, GenerationParams(max_tokens=20, stop=["</search>", "</answer>"], seed=3))
    assert (response.text, response.stop_string, response.finish_reason) == (
        "<search>Inception director",
        "</search>",
        "stop",
    )
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (12, 7)
    assert (
        seen[-1]["model"] == "served-model" and seen[-1]["stop"] == ["</search>", "</answer>"] and seen[-1]["seed"] == 3
    )


def test_missing_completions_endpoint_falls_back_to_chat_prefix(server) -> None:
    from routerag.llm.openai_compat import OpenAICompatModel

    url, seen = server
    model = OpenAICompatModel(url, "served-model", template=ChatTemplate(CHATML))
    assert model.continue_mode == "completions"
    convo = Q + [Message(role="assistant", content="<think>hm</think>")]
    response = model.chat(convo, GenerationParams(max_tokens=20, stop=["</search>"]), continue_final=True)
    assert model.continue_mode == "chat-prefix"
    assert response.stop_string == "</search>"
    assert seen[-1]["messages"][-1] == {"role": "assistant", "content": "<think>hm</think>"}


def test_forced_completions_mode_does_not_fall_back(server) -> None:
    from routerag.llm.openai_compat import EndpointNotFoundError, OpenAICompatModel

    url, _ = server
    model = OpenAICompatModel(url, "served-model", template=ChatTemplate(CHATML), completions_endpoint=True)
    with pytest.raises(EndpointNotFoundError, match="404"):
        model.chat(Q)
