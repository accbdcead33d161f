"""openai backend protocol handling against a small in-process HTTP server (a test double of a
chat-only, vLLM-style endpoint): fallback from /completions, ``stop_reason`` extraction."""

from __future__ import annotations

import json
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

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> dict | fastapi.responses.StreamingResponse:
        body = await request.json()
        seen.append(body)
        if body.get("stream"):
            return fastapi.responses.StreamingResponse(_chat_stream(body), media_type="text/event-stream")
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


def _chat_stream(body: dict) -> Iterator[str]:
    """The reply streamed as vLLM streams it: a delta per token, ``stop_reason`` on the finishing
    choice, the usage in a last chunk without choices (``stream_options.include_usage``)."""
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
    pieces = ["<search>", "Inception", " director"]
    for i, piece in enumerate(pieces):
        choice = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
        if i == len(pieces) - 1:
            choice.update(finish_reason="stop", stop_reason="</search>")
        yield f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"
    if (body.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
        yield f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


def test_a_call_under_a_token_sink_is_streamed_from_the_server(server) -> None:
    from routerag.llm.openai_compat import OpenAICompatModel
    from routerag.llm.streaming import tokens_to

    url, seen = server
    model = OpenAICompatModel(url, "served-model")
    pieces: list[str] = []
    with tokens_to(pieces.append):
        response = model.chat(Q, GenerationParams(max_tokens=20, stop=["</search>"]))
    assert seen[-1]["stream"] is True and seen[-1]["stream_options"] == {"include_usage": True}
    assert pieces == ["<search>", "Inception", " director"] and response.text == "<search>Inception director"
    assert (response.stop_string, response.finish_reason) == ("</search>", "stop")
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (12, 3)
    model.chat(Q, GenerationParams(max_tokens=20))
    assert "stream" not in seen[-1]  # without a sink: a plain request


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
