"""Streamed chat completions (``stream: true`` on ``/v1/chat/completions``) over real HTTP: the
run's steps arrive as ``reasoning_content`` lines while it runs, the answer as ``content`` deltas
while its model call generates them, and the trace rides on the finishing chunk (the last chunk
with choices), with and without ``stream_options.include_usage``. Underneath, without a server:
the settled part of a growing answer, the stop-safe token sender, the step lines.

:class:`PausingModel` (a test double of a backend that streams) waits, before its first piece,
until the test has read the search step's line from the stream, and after it until the test has
read that piece: were steps or pieces only sent after the run, it would wait out its timeout and
answer ``too late`` (and the tests fail)."""

from __future__ import annotations

import json
import random
import threading

import httpx
import pytest

from routerag.edge.serving import BackgroundServer
from routerag.llm.base import ChatResponse, GenerationParams, Message, Usage
from routerag.llm.scripted import ScriptedModel, token_pieces
from routerag.llm.streaming import StopSafeText, token_sink, tokens_to
from routerag.runtime.answer_stream import AnswerDeltas
from routerag.runtime.parsing import clean_answer, settled_clean_answer
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.server.step_lines import step_line
from routerag.trace import Hit, Route, Step, Trace

QUESTION = "Who was Teutberga married to?"
USER = [{"role": "user", "content": QUESTION}]
VANILLA = {"model": "vanilla", "routerag": {"params": {"source": "bm25", "k": 2}}}


# ------------------------------------------------------------------ the pieces (no server)


@pytest.mark.unit
def test_a_settled_answer_is_always_a_prefix_of_the_final_one():
    texts = ['The answer is: "20 March 851"\nmore', "<answer>Paris</answer>", "Answer: 'Lothair' ", "  The capital is Paris.\nx",
             "final answer： x y", "<b>bold</b> text <unclosed", "the answer", "Answer\nnext", "a < b and c", "answeris:ok"]
    pieces = list("ab :\n<>'\"") + ["answer", "the ", "is", "final ", "：", "\t"]
    rng = random.Random(7)
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 10))) for _ in range(3000)]
    for text in texts:
        final = clean_answer(text)
        for end in range(len(text) + 1):
            assert final.startswith(settled_clean_answer(text[:end])), (text, end)
    assert settled_clean_answer("The answ") == "" and settled_clean_answer("The answer is: Par") == "Par"
    assert settled_clean_answer("Paris <ans") == "Paris" and settled_clean_answer('"Paris" ') == "Paris"


@pytest.mark.unit
def test_answer_deltas_send_what_is_settled_and_stop_when_it_no_longer_extends():
    sent: list[str] = []
    deltas = AnswerDeltas(sent.append, settled_clean_answer)
    for piece in ["The", " answer", " is:", " 20", " March", " 851", "\n", "ignored"]:
        deltas(piece)
    assert sent == ["20", " March", " 851"]
    odd: list[str] = []
    diverging = AnswerDeltas(odd.append, lambda raw: raw[::-1])  # a shape whose settled part does not grow
    for piece in ["ab", "c"]:
        diverging(piece)
    assert odd == ["ba"] and diverging.stopped


@pytest.mark.unit
def test_streamed_text_never_holds_a_stop_string():
    sent: list[str] = []
    stream = StopSafeText(sent.append, ["</search>", "\n"])
    text = ""
    for piece in ["<search>", "capital", " of France", "</sea"]:
        text += piece
        stream.update(text)
    stream.finish("<search>capital of France")  # the backend found the stop: the text ends before it
    assert "".join(sent) == "<search>capital of France" and all("</" not in piece for piece in sent)
    assert "".join(token_pieces(" 20 March, 851 ")) == " 20 March, 851 " and token_pieces("a b") == ["a", " b"]


@pytest.mark.unit
def test_a_scripted_call_streams_only_under_a_sink():
    model = ScriptedModel(["Lothair II of Lotharingia"], cycle=True)
    assert token_sink() is None
    got: list[str] = []
    with tokens_to(got.append):
        streamed = model.chat([Message(role="user", content="q")], GenerationParams(max_tokens=3))
    assert got == ["Lothair", " II", " of"] and streamed.text == "Lothair II of" and streamed.finish_reason == "length"
    model.chat([Message(role="user", content="q")])
    assert len(got) == 3  # no sink: nothing streamed


@pytest.mark.unit
def test_each_step_has_one_short_line_and_the_final_answer_none():
    hit = Hit(doc_id="d1", title="Teutberga", text="...", score=1.0, source="bm25", mode="bm25", rank=1)
    search = Step(index=0, kind="search", query="Teutberga husband " * 20, sources=["bm25"], hits=[hit])
    line = step_line(search)
    assert line is not None and line.startswith("search bm25: 'Teutberga husband") and "→ 1 hits (top: Teutberga)" in line
    assert "\n" not in line and len(line) < 160
    route = Step(index=1, kind="route", route=Route(choice="vanilla", chosen_by="keyword"))
    assert step_line(route) == "route: vanilla by keyword"
    assert step_line(Step(index=2, kind="answer", answer="Lothair II", intermediate=True)) == "intermediate answer: Lothair II"
    assert step_line(Step(index=3, kind="answer", answer="Lothair II")) is None


# ------------------------------------------------------------------ over HTTP


class PausingModel:
    """A backend that streams (test double): see the module notes."""

    name = "pausing"

    def __init__(self, first: str, rest: str) -> None:
        self.first, self.rest = first, rest
        self.step_seen = threading.Event()
        self.piece_seen = threading.Event()
        self.waited: list[bool] = []

    def chat(self, messages: list[Message], params: GenerationParams | None = None, *,
             continue_final: bool = False) -> ChatResponse:
        sink = token_sink()
        text = self.first + self.rest
        if sink is not None:
            self.waited.append(self.step_seen.wait(timeout=20))
            sink(self.first)
            self.waited.append(self.piece_seen.wait(timeout=20))
            text = self.first + (self.rest if all(self.waited) else " too late")
            sink(text[len(self.first):])
        return ChatResponse(text=text, usage=Usage(prompt_tokens=5, completion_tokens=3), latency_ms=1.0, finish_reason="eos")


def events_of(url: str, on_event=None, **body) -> list[dict | str]:
    """The stream's ``data:`` events (parsed; ``[DONE]`` as a string), ``on_event`` called with each as it arrives."""
    events: list[dict | str] = []
    with httpx.Client(base_url=url, timeout=60) as c, \
            c.stream("POST", "/v1/chat/completions", json={"messages": USER, "stream": True, **body}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                event = line[6:] if line == "data: [DONE]" else json.loads(line[6:])
                events.append(event)
                if on_event is not None:
                    on_event(event)
    return events


def delta_of(event: dict | str, field: str) -> str | None:
    if isinstance(event, str) or not event["choices"]:
        return None
    return event["choices"][0]["delta"].get(field)


@pytest.mark.service
def test_steps_then_the_answer_arrive_while_the_run_works(sources, tmp_path):
    model = PausingModel("Lothair", " II")

    def read(event) -> None:
        if (delta_of(event, "reasoning_content") or "").startswith("search bm25:"):
            model.step_seen.set()
        if delta_of(event, "content") == "Lothair":
            model.piece_seen.set()

    with BackgroundServer(create_app(model, sources, ServiceSettings(data_dir=tmp_path))) as running:
        events = events_of(running.url, read, **VANILLA)
    assert model.waited == [True, True]  # the line and the first piece were read while the model call ran
    assert delta_of(events[0], "role") == "assistant"
    reasoning = [i for i, e in enumerate(events) if delta_of(e, "reasoning_content")]
    contents = [i for i, e in enumerate(events) if delta_of(e, "content")]
    assert [delta_of(events[i], "content") for i in contents] == ["Lothair", " II"]
    assert reasoning and max(reasoning) < min(contents)  # every step line before the answer
    trace = Trace.model_validate(events[-2]["routerag"])
    assert delta_of(events[reasoning[0]], "reasoning_content") == step_line(trace.steps[0]) + "\n"
    assert trace.answer == "Lothair II"
    assert events[-2]["choices"][0]["finish_reason"] == "stop" and events[-1] == "[DONE]"


@pytest.mark.service
@pytest.mark.parametrize("include_usage", [False, True])
def test_the_trace_rides_on_the_last_chunk_with_choices(sources, tmp_path, include_usage):
    model = ScriptedModel(["Lothair II of Lotharingia, king"], cycle=True)
    options = {"stream_options": {"include_usage": True}} if include_usage else {}
    with BackgroundServer(create_app(model, sources, ServiceSettings(data_dir=tmp_path))) as running:
        events = events_of(running.url, model="passthrough", **options)
        plain = httpx.post(running.url + "/v1/chat/completions", json={"model": "passthrough", "messages": USER}, timeout=60).json()
    assert events[-1] == "[DONE]"
    chunks = [e for e in events[:-1] if isinstance(e, dict)]
    with_choices = [i for i, c in enumerate(chunks) if c["choices"]]
    finishing = chunks[with_choices[-1]]
    assert finishing["choices"][0]["finish_reason"] == "stop" and finishing["choices"][0]["delta"] == {}
    trace = Trace.model_validate(finishing["routerag"])
    assert [i for i, c in enumerate(chunks) if "routerag" in c] == [with_choices[-1]]  # on that chunk only
    contents = [delta_of(c, "content") for c in chunks if delta_of(c, "content")]
    assert len(contents) >= 2 and with_choices.index(max(i for i, c in enumerate(chunks) if delta_of(c, "content"))) < len(with_choices) - 1
    assert "".join(contents) == trace.answer == plain["choices"][0]["message"]["content"] == "Lothair II of Lotharingia, king"
    if include_usage:
        assert chunks[-1]["choices"] == [] and "routerag" not in chunks[-1] and with_choices[-1] == len(chunks) - 2
        assert chunks[-1]["usage"]["total_tokens"] == trace.prompt_tokens + trace.completion_tokens > 0
        assert all(c["usage"] is None for c in chunks[:-1])
    else:
        assert with_choices[-1] == len(chunks) - 1 and all("usage" not in c for c in chunks)


@pytest.mark.service
def test_an_answer_known_only_at_the_end_comes_in_one_delta(sources, tmp_path):
    """routerag's answer is read from the episode's ``<answer>`` tag once the episode ends."""
    model = ScriptedModel(["<answer>Lothair II of Lotharingia</answer>"], cycle=True)
    with BackgroundServer(create_app(model, sources, ServiceSettings(data_dir=tmp_path))) as running:
        events = events_of(running.url, model="routerag", routerag={"params": {"max_turns": 0}})
    contents = [delta_of(e, "content") for e in events if delta_of(e, "content")]
    trace = Trace.model_validate(events[-2]["routerag"])
    assert trace.error is None and trace.answer and contents == [trace.answer]
    assert events[-2]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.service
def test_the_openai_sdk_reads_the_steps_and_the_answer(sources, tmp_path):
    openai = pytest.importorskip("openai")
    model = ScriptedModel(["Lothair II"], cycle=True)
    with BackgroundServer(create_app(model, sources, ServiceSettings(data_dir=tmp_path))) as running:
        client = openai.OpenAI(base_url=running.url + "/v1", api_key="none", max_retries=0)
        chunks = list(client.chat.completions.create(model="vanilla", messages=USER, stream=True,
                                                     extra_body={"routerag": VANILLA["routerag"]}))
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert reasoning.startswith("search bm25: ") and reasoning.endswith("\n") and content == "Lothair II"
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0] is chunks[-1] and Trace.model_validate(finish[0].model_extra["routerag"]).answer == content
