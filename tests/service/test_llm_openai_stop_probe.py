"""How the openai backend finds the stop string that ended a turn on a server that does not say
(llama.cpp's): a test double of such a server, whose "model" writes fixed texts, cuts them at the
first stop string and reports only ``finish_reason``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from routerag.llm.base import GenerationParams, Message
from routerag.llm.config import ModelConfig

pytestmark = pytest.mark.service
fastapi = pytest.importorskip("fastapi")
Request = fastapi.Request  # module level: FastAPI resolves the handler's string annotations here
GRAMMAR = 'root ::= "<answer> " [^<]+ " </answer>"'

# (prompt, constrained by a grammar) -> what the model writes from there, unconstrained by stops
WRITES = {
    # a search closed by " </search>": the server cuts inside that token and keeps the space; sent
    # back, the text ends in a token the model never wrote and it continues with " </search>"
    ("Q1", False): "<search> Teutberga </search> more",
    ("Q1<search> Teutberga ", False): " </search> more",
    # under a grammar the closing tag is forced; free, the model would have gone on
    ("Q2", True): "<answer> Paris </answer>",
    ("Q2<answer> Paris ", False): "is the capital of France",
    # the grammar ends the turn by itself: nothing follows the text under it either
    ("Q3", True): "<answer> yes </answer>",
    ("Q3<answer> yes </answer>", False): "",
    # free text that ends at end-of-turn
    ("Q4", False): "Paris",
    ("Q4Paris", False): "",
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, list[dict]]]:
    from routerag.edge.serving import BackgroundServer

    bodies: list[dict] = []
    app = fastapi.FastAPI()

    @app.get("/v1/models")
    def models() -> dict:
        return {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "me"}]}

    @app.post("/v1/completions")
    async def completions(request: Request) -> dict:
        body = await request.json()
        bodies.append(body)
        full = WRITES[(body["prompt"], "grammar" in body)]
        text, finish = full[: body["max_tokens"]], "length" if len(full) > body["max_tokens"] else "stop"
        cuts = [text.index(s) for s in body.get("stop") or [] if s in text]
        if cuts:
            text, finish = text[: min(cuts)], "stop"
        return {"id": "c", "object": "text_completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
                "usage": {"prompt_tokens": 3, "completion_tokens": len(text), "total_tokens": 3 + len(text)}}

    with BackgroundServer(app) as running:
        yield running.url + "/v1", bodies


@pytest.fixture
def model(served, tmp_path):
    from routerag.llm.factory import build_model

    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}", encoding="utf-8")
    return build_model(ModelConfig(base_url=served[0], chat_format=template))


STOPS = ["</search>", "</answer>"]


@pytest.mark.parametrize("prompt,grammar,text,finish,stop,calls", [
    ("Q1", None, "<search> Teutberga ", "stop", "</search>", 2),  # the probe's " </search>" counts
    ("Q2", GRAMMAR, "<answer> Paris ", "stop", "</answer>", 3),  # free probe: nothing; again under the grammar: the stop
    ("Q3", GRAMMAR, "<answer> yes </answer>", "eos", None, 3),  # the grammar ended it (no stop string in the text)
    ("Q4", None, "Paris", "eos", None, 2),
])
def test_the_stop_that_ended_a_turn(model, served, prompt, grammar, text, finish, stop, calls) -> None:
    bodies = served[1]
    before = len(bodies)
    stops = STOPS if prompt != "Q3" else ["</search>"]
    response = model.chat([Message(role="user", content=prompt)], GenerationParams(max_tokens=64, stop=stops, grammar=grammar))
    assert (response.text, response.finish_reason, response.stop_string) == (text, finish, stop)
    assert len(bodies) - before == calls
    if grammar:  # the turn generated again: same prompt and grammar, no stop strings, a few tokens past the text
        again = bodies[-1]
        assert again["prompt"] == prompt and again["grammar"] == grammar and "stop" not in again
        assert again["max_tokens"] > len(text)
