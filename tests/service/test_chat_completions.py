"""The OpenAI-compatible endpoints of the ask service (``/v1/chat/completions``, ``/v1/models``):
request parsing without a model; the service over real HTTP on loopback with a ScriptedModel
(failures, token caps, keep-alive, abandoned runs); and, with the REAL bundled 0.5B over a BM25
index of the packaged demo corpus, the ``openai`` SDK (sync, async, streaming), LangChain's
``ChatOpenAI`` and the documented snippets as clients."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from routerag.edge.serving import BackgroundServer
from routerag.llm.base import Message, ModelError
from routerag.llm.bundled import BundledModelError
from routerag.llm.config import MissingPolicyError, ModelConfig, bundled_policy_path
from routerag.llm.conversation import INSTRUCTIONS_HEADING, Conversation
from routerag.llm.scripted import ScriptedModel
from routerag.runtime.loop import run_safely
from routerag.server.app import create_app
from routerag.server.chat_messages import ChatMessage, ConversationRefused, read_messages
from routerag.server.chat_models import larger_policy_model
from routerag.server.openai_api import ChatCompletionRequest
from routerag.server.openai_errors import is_openai_path, refusal_body, run_failure
from routerag.server.settings import ServiceSettings
from routerag.sources.base import RetrievalError
from routerag.sources.remote import RemoteSourceError
from routerag.sources.sourceset import SourceSet
from routerag.strategies.shipped import ROUTERAG_POLICIES
from routerag.trace import Trace

KEY = "chat-key"
SNIPPETS = Path(__file__).resolve().parents[2] / "docs" / "guides" / "snippets"
QUESTION = "When did Lothair II's mother die?"  # the demo slice's first question (gold: 20 March 851)
USER = [{"role": "user", "content": QUESTION}]


def messages(*items: dict) -> list[ChatMessage]:
    return [ChatMessage.model_validate(m) for m in items]


# ------------------------------------------------------------------ request parsing (no model)


@pytest.mark.unit
def test_system_messages_are_instructions_and_earlier_turns_the_conversation():
    asked = read_messages(messages(
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "an answer"}, {"role": "developer", "content": [{"type": "text", "text": "Context: X"}]},
        {"role": "user", "content": "the question"}))
    assert (asked.index, asked.question) == (4, "the question")
    assert asked.conversation == Conversation(instructions="Be brief.\n\nContext: X", history=(
        Message(role="user", content="first question"), Message(role="assistant", content="an answer")))


@pytest.mark.unit
def test_text_parts_are_joined_and_other_parts_refused():
    asked = read_messages(messages({"role": "user", "content": [{"type": "text", "text": "Who was"},
                                                                {"type": "text", "text": "Teutberga married to?"}]}))
    assert (asked.index, asked.question, asked.conversation.empty) == (0, "Who was\nTeutberga married to?", True)
    for where in (0, 1):  # in the question or in an earlier turn: never dropped, refused
        sent = [{"role": "user", "content": "q"}, {"role": "user", "content": "the question"}]
        sent[where] = {"role": "user", "content": [{"type": "text", "text": "what is this"},
                                                   {"type": "image_url", "image_url": {"url": "x"}}]}
        with pytest.raises(ConversationRefused, match=rf"messages\[{where}\]: a content part of type 'image_url'"):
            read_messages(messages(*sent))


@pytest.mark.unit
@pytest.mark.parametrize(("sent", "reason"), [
    ([{"role": "system", "content": "q"}, {"role": "assistant", "content": "a"}], "no user message"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a prefill"}], r"messages\[1\] \(assistant\) follows the question"),
    ([{"role": "user", "content": "q"}, {"role": "tool", "content": "out", "tool_call_id": "t"}], "follows the question"),
    ([{"role": "tool", "content": "out", "tool_call_id": "t"}, {"role": "user", "content": "q"}], "tool messages are not supported"),
    ([{"role": "assistant", "content": None, "tool_calls": [{"id": "t"}]}, {"role": "user", "content": "q"}],
     "tool_calls are not supported"),
])
def test_conversations_the_rule_does_not_answer_are_refused(sent, reason):
    with pytest.raises(ConversationRefused, match=reason):
        read_messages(messages(*sent))


@pytest.mark.unit
def test_the_conversation_goes_around_every_strategy_prompt():
    conversation = Conversation(instructions="Context: the code is 7.", history=(
        Message(role="user", content="hi"), Message(role="assistant", content="hello")))
    own = [Message(role="system", content="Answer briefly."), Message(role="user", content="Question: q"),
           Message(role="assistant", content="<think>")]
    assert conversation.around(own) == [
        Message(role="system", content=f"Answer briefly.\n\n{INSTRUCTIONS_HEADING}\nContext: the code is 7."),
        *conversation.history, *own[1:]]
    # without a system message of its own (passthrough): the caller's messages as given
    assert conversation.around([Message(role="user", content="q")]) == [
        Message(role="system", content="Context: the code is 7."), *conversation.history, Message(role="user", content="q")]
    assert Conversation().around(own) == own


@pytest.mark.unit
def test_front_door_refusals_take_openai_shape_on_openai_paths():
    for path in ("/v1/chat/completions", "/v1/models", "/v1/models/vanilla", "/v1/chat/completions/"):
        assert is_openai_path(path)
        assert refusal_body(path, 401, "the API key is not valid") == {"error": {
            "message": "the API key is not valid", "type": "authentication_error", "param": None, "code": "invalid_api_key"}}
    for path in ("/v1/ask", "/v1/runs", "/retrieval/retrieve", "/v1/modelsx"):
        assert not is_openai_path(path) and refusal_body(path, 401, "no") == {"detail": "no"}


@pytest.mark.unit
def test_unknown_fields_are_accepted_and_n_above_one_refused():
    body = ChatCompletionRequest.model_validate({"model": "vanilla", "messages": USER, "temperature": 0.7, "seed": 3,
                                                 "tools": [], "response_format": {"type": "text"}, "user": "u"})
    assert body.model == "vanilla" and body.token_cap is None
    assert ChatCompletionRequest.model_validate({"model": "m", "messages": USER, "max_tokens": 9,
                                                 "max_completion_tokens": 5}).token_cap == 5
    with pytest.raises(ValueError, match="n=2 is not supported"):
        ChatCompletionRequest.model_validate({"model": "m", "messages": USER, "n": 2})
    with pytest.raises(ValueError, match="routerag.bogus"):  # the extension itself is strict
        ChatCompletionRequest.model_validate({"model": "m", "messages": USER, "routerag": {"bogus": 1}})
    with pytest.raises(ValueError, match="role"):
        ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "robot", "content": "q"}]})


@pytest.mark.unit
@pytest.mark.parametrize(("raised", "status", "kind"), [
    (RetrievalError("unknown source 'passage'; mounted: bm25"), 422, "invalid_request_error"),
    (ModelError("the endpoint answered 503"), 502, "upstream_error"),
    (BundledModelError("parts missing"), 502, "upstream_error"),  # a subclass counts as its base
    (RemoteSourceError("connection refused"), 502, "upstream_error"),
    (KeyError("x"), 500, "server_error"),
])
def test_failed_runs_map_to_statuses(raised, status, kind):
    def fail(trace: Trace) -> None:
        raise raised

    trace = run_safely("vanilla", ModelConfig(), "q", fail)  # the run's exception, as every strategy records it
    got, reply = run_failure(trace)
    assert (got, reply.type, reply.code) == (status, kind, "run_failed")
    assert reply.message == f"the vanilla run failed: {type(raised).__name__}: {raised}"


@pytest.mark.unit
def test_a_trace_without_an_error_kind_is_a_server_error():
    """A trace stored before ``error_kind`` loads without one; its text is not parsed for a class name."""
    stored = Trace.model_validate({"question": "q", "strategy": "vanilla", "error": "RetrievalError: unknown source"})
    assert stored.error_kind is None
    got, reply = run_failure(stored)
    assert (got, reply.type) == (500, "server_error")


@pytest.mark.unit
def test_the_larger_policy_model_is_offered_only_on_the_bundled_base(tmp_path, monkeypatch):
    for name in ("ROUTERAG_MODEL", "ROUTERAG_BASE_URL", "ROUTERAG_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    assert larger_policy_model(None) is None
    assert larger_policy_model(ModelConfig(base_url="http://127.0.0.1:1/v1")) is None
    assert larger_policy_model(ModelConfig(lora_path=tmp_path / "own.gguf")) is None
    assert larger_policy_model(ModelConfig(model="bundled:qwen2.5-coder-1.5b")) is None
    from routerag.llm.bundled import BundledModelError, bundled_spec, find_parts

    try:
        find_parts(bundled_spec("bundled:qwen2.5-coder-1.5b"))
    except BundledModelError:
        assert larger_policy_model(ModelConfig()) is None
    else:
        larger = larger_policy_model(ModelConfig(n_ctx=2048))
        try:
            bundled_policy_path(ROUTERAG_POLICIES["bundled:qwen2.5-coder-1.5b"])
        except MissingPolicyError:  # its adapter is kept outside the package and is not installed here
            assert larger is None
        else:
            assert larger is not None and larger.model == "bundled:qwen2.5-coder-1.5b" and larger.n_ctx == 2048


# ------------------------------------------------------------------ the service with a scripted model


@pytest.fixture(scope="module")
def demo_bundle(tmp_path_factory):
    """A BM25 index of the packaged demo corpus (350 2Wiki passages; no data folder needed)."""
    from routerag.corpus.datasets import load_dataset
    from routerag.index.bundle import build_index

    return build_index(load_dataset("demo", n_questions=1).corpus, tmp_path_factory.mktemp("chat-idx") / "bundle",
                       components=["bm25"])


@pytest.fixture(scope="module")
def demo_sources(demo_bundle):
    """BM25 mounted as ``passage`` (the mode strategies default to) and as ``bm25``."""
    from routerag.sources.bm25 import BM25Source

    return SourceSet([BM25Source.from_bundle(demo_bundle, name="passage"), BM25Source.from_bundle(demo_bundle, name="bm25")])


def scripted_server(sources, tmp_path: Path, reply, **settings) -> BackgroundServer:
    return BackgroundServer(create_app(ScriptedModel(reply), sources,
                                       ServiceSettings(data_dir=tmp_path, api_key=KEY, **settings)))


def chat(url: str, **body) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {KEY}"}) as c:
        return c.post("/v1/chat/completions", json={"messages": USER, **body})


def sse_lines(url: str, **body) -> list[str]:
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {KEY}"}) as c, \
            c.stream("POST", "/v1/chat/completions", json={"messages": USER, "stream": True, **body}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        return [line for line in r.iter_lines() if line]


@pytest.mark.service
def test_models_list_what_this_service_can_run(demo_sources, tmp_path):
    with scripted_server(demo_sources, tmp_path, "x") as running, \
            httpx.Client(base_url=running.url, headers={"Authorization": f"Bearer {KEY}"}) as c:
        listed = c.get("/v1/models").json()
        assert listed["object"] == "list"
        ids = [m["id"] for m in listed["data"]]
        assert {"routerag", "vanilla", "adaptive", "direct"} <= set(ids)
        assert "r1-router" in ids  # one of its default retrievers' sources (passage) is mounted
        assert "routerag-1.5b" not in ids  # no model configuration: only the model the service was given
        assert all(m["object"] == "model" and m["owned_by"] == "routerag" and m["created"] > 0 for m in listed["data"])
        assert c.get("/v1/models/vanilla").json()["id"] == "vanilla"
        missing = c.get("/v1/models/nope")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
        unauthorised = httpx.get(running.url + "/v1/models")
        assert unauthorised.status_code == 401 and unauthorised.json()["error"]["type"] == "authentication_error"
    only_bm25 = SourceSet([demo_sources.get("bm25")])
    with scripted_server(only_bm25, tmp_path / "bm25", "x") as running:
        ids = [m["id"] for m in httpx.get(running.url + "/v1/models", headers={"X-API-Key": KEY}).json()["data"]]
        assert "vanilla" in ids and "r1-router" not in ids  # none of its retrievers' sources is mounted


@pytest.mark.service
def test_refusals_are_in_openai_shape(demo_sources, tmp_path):
    with scripted_server(demo_sources, tmp_path, "x") as running:
        cases = [
            ({"model": "nope"}, 404, "model", "does not exist"),
            ({"model": "vanilla", "n": 3}, 422, "n", "n=3 is not supported"),
            ({"model": "vanilla", "messages": [{"role": "system", "content": "q"}]}, 400, "messages", "no user message"),
            ({"model": "vanilla", "messages": [*USER, {"role": "assistant", "content": "prefill"}]}, 400, "messages",
             "follows the question"),
            ({"model": "vanilla", "messages": [{"role": "user", "content": " "}]}, 422, "messages", "is empty"),
            ({"model": "vanilla", "messages": [{"role": "user", "content": "x" * 4001}]}, 422, "messages", "limit is 4000"),
            ({"model": "vanilla", "max_tokens": 10**6}, 422, "max_tokens", "above this service's limit"),
            ({"model": "vanilla", "routerag": {"params": {"k": 0}}}, 422, "routerag", "invalid params for strategy 'vanilla'"),
            ({"model": "vanilla", "routerag": {"params": {"source": "nope"}}}, 422, "routerag", "unknown source 'nope'"),
            ({"model": "vanilla", "routerag": {"sources": ["nope"]}}, 422, "routerag.sources", "unknown source 'nope'"),
            ({"model": 3}, 422, "model", "valid string"),
            # found while the run builds the strategies adaptive chooses from
            ({"model": "adaptive", "routerag": {"params": {"strategy_params": {"direct": {"bogus": 1}}}}}, 422,
             "routerag.params", "unknown params for strategy 'direct'"),
        ]
        for body, status, param, reason in cases:
            r = chat(running.url, **body)
            assert r.status_code == status, (body, r.text)
            error = r.json()["error"]
            assert error["param"] == param and reason in error["message"] and error["type"] == "invalid_request_error", error
        lines = sse_lines(running.url, model="adaptive", routerag={"params": {"strategy_params": {"direct": {"bogus": 1}}}})
        assert '"role":"assistant"' in lines[0] and "unknown params for strategy 'direct'" in lines[1]
        assert lines[1].startswith('data: {"error":') and lines[2:] == ["data: [DONE]"]


@pytest.mark.service
def test_a_token_cap_lowers_the_strategys_limits(demo_sources, tmp_path):
    with scripted_server(demo_sources, tmp_path, "<answer>20 March 851</answer>") as running:
        vanilla = chat(running.url, model="vanilla", max_tokens=7).json()["routerag"]
        assert vanilla["params"]["max_tokens"] == 7
        assert chat(running.url, model="vanilla", max_tokens=4000).json()["routerag"]["params"]["max_tokens"] == 64  # never raised
        routerag = chat(running.url, model="routerag", max_completion_tokens=50,
                        routerag={"params": {"max_turns": 0}}).json()
        assert routerag["routerag"]["params"]["max_tokens_per_turn"] == 50 and routerag["routerag"]["params"]["max_turns"] == 0
        assert routerag["choices"][0]["message"]["content"] == routerag["routerag"]["answer"]


@pytest.mark.service
@pytest.mark.parametrize(("raised", "status"), [(ModelError("the backend went away"), 502), (KeyError("bug"), 500)])
def test_a_failed_run_is_an_http_error_with_its_trace(demo_sources, tmp_path, raised, status):
    def fail(messages, params, continue_final) -> str:
        raise raised

    with scripted_server(demo_sources, tmp_path, fail) as running:
        r = chat(running.url, model="direct")
        assert r.status_code == status, r.text
        assert r.json()["error"]["code"] == "run_failed" and type(raised).__name__ in r.json()["error"]["message"]
        trace = Trace.model_validate(r.json()["routerag"])
        assert trace.error.startswith(type(raised).__name__) and trace.error_kind == ("model" if status == 502 else "other")
        assert (r.headers.get("x-should-retry") == "false") == (status == 500)
        lines = sse_lines(running.url, model="direct")
        assert '"role":"assistant"' in lines[0] and '"error":' in lines[1] and lines[2:] == ["data: [DONE]"]


@pytest.mark.service
def test_a_stream_keeps_the_connection_alive_while_the_run_works(demo_sources, tmp_path, monkeypatch):
    monkeypatch.setattr("routerag.server.openai_api.KEEP_ALIVE_S", 0.05)

    def slow(messages, params, continue_final) -> str:
        time.sleep(0.5)
        return "20 March 851"

    with scripted_server(demo_sources, tmp_path, slow) as running:
        lines = sse_lines(running.url, model="vanilla", stream_options={"include_usage": True})
    kinds = ["keep-alive" if line.startswith(":") else line for line in lines]
    first_data = [k for k in kinds if k != "keep-alive"]
    assert kinds[0].startswith("data: ") and '"delta":{"role":"assistant","content":""}' in kinds[0]
    assert '"reasoning_content":"search passage:' in kinds[1]  # the search step, as it happens
    assert kinds.count("keep-alive") >= 3 and kinds.index("keep-alive") == 2  # while the model works
    assert ['"content":"20"' in first_data[2], '"content":" March"' in first_data[3],
            '"content":" 851"' in first_data[4]] == [True] * 3  # the answer as the model call generates it
    assert '"finish_reason":"stop"' in first_data[5]
    assert '"routerag":{' in first_data[5] and '"choices":[]' in first_data[6] and '"total_tokens":' in first_data[6]
    assert first_data[7:] == ["data: [DONE]"]


@pytest.mark.service
def test_abandoned_chat_completions_stop_their_runs(demo_sources, tmp_path):
    """Clients that leave (streamed or not) while both worker threads are busy: only the runs
    already inside a model call make it, the waiting ones never call the model."""
    calls: list[float] = []

    def slow(messages, params, continue_final) -> str:
        calls.append(time.monotonic())
        time.sleep(1.0)
        return "20 March 851"

    def leave_stream(url: str) -> None:
        with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {KEY}"}) as c, \
                c.stream("POST", "/v1/chat/completions", json={"model": "vanilla", "messages": USER, "stream": True}) as r:
            assert '"role":"assistant"' in next(r.iter_lines())
            time.sleep(0.3)

    def leave_wait(url: str) -> None:
        with httpx.Client(base_url=url, timeout=0.3, headers={"Authorization": f"Bearer {KEY}"}) as c, \
                pytest.raises(httpx.ReadTimeout):
            c.post("/v1/chat/completions", json={"model": "vanilla", "messages": USER})

    with scripted_server(demo_sources, tmp_path, slow, ask_threads=2) as running:
        clients = [threading.Thread(target=fn, args=(running.url,)) for fn in [leave_stream, leave_wait] * 4]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        assert chat(running.url, model="vanilla").json()["choices"][0]["message"]["content"] == "20 March 851"
        assert 2 <= len(calls) <= 3, len(calls)  # at most the two runs already in a model call, and this one


# ------------------------------------------------------------------ the real bundled model


@pytest.fixture(scope="module")
def live(demo_sources, tmp_path_factory):
    """``routerag serve`` as it runs: the bundled 0.5B through llama.cpp with its model
    configuration (so ``routerag`` gets the shipped policy), with an API key."""
    pytest.importorskip("llama_cpp")
    from routerag.llm.factory import build_model

    config = ModelConfig(n_ctx=4096)
    try:
        model = build_model(config)
    except Exception as exc:  # noqa: BLE001 — the parts packages are an extra
        pytest.skip(f"bundled model unavailable: {exc}")
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("chat-live"), api_key=KEY)
    with BackgroundServer(create_app(model, demo_sources, settings, model_config=config)) as running:
        yield running


@pytest.fixture(scope="module")
def client(live):
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0) as c:
        yield c


@pytest.mark.model
def test_openai_sdk_answers_with_the_real_model(client):
    import openai

    completion = client.chat.completions.create(
        model="vanilla", messages=[{"role": "system", "content": "Answer briefly."}, *USER], max_tokens=32,
        extra_body={"routerag": {"params": {"max_tokens": 24}}})  # the prompt of the tests below (llama.cpp reuses it)
    trace = Trace.model_validate(completion.model_extra["routerag"])
    assert completion.object == "chat.completion" and completion.model == "vanilla" and completion.id.startswith("chatcmpl-")
    assert completion.choices[0].message.content.strip() and completion.choices[0].message.content == trace.answer
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.prompt_tokens == trace.prompt_tokens > 0
    assert completion.usage.completion_tokens == trace.completion_tokens > 0
    assert trace.params["max_tokens"] == 24 and len(trace.steps[0].hits) == 5  # the cap never raises a limit
    ids = {m.id for m in client.models.list()}
    assert {"routerag", "vanilla", "adaptive"} <= ids
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=USER)
    with openai.OpenAI(base_url=client.base_url, api_key="wrong", max_retries=0) as wrong:
        with pytest.raises(openai.AuthenticationError):
            wrong.chat.completions.create(model="vanilla", messages=USER)
        with pytest.raises(openai.AuthenticationError):
            wrong.models.list()


@pytest.mark.model
def test_async_openai_and_streaming_with_usage(live):
    openai = pytest.importorskip("openai")

    async def both() -> tuple:
        async with openai.AsyncOpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0) as c:
            completion = await c.chat.completions.create(model="vanilla", messages=USER, max_tokens=32)
            stream = await c.chat.completions.create(model="vanilla", messages=USER, max_tokens=32, stream=True,
                                                     stream_options={"include_usage": True})
            chunks = [chunk async for chunk in stream]  # the SDK stops at [DONE]
            return completion, chunks

    completion, chunks = asyncio.run(both())
    assert completion.choices[0].message.content.strip()
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() and text == completion.choices[0].message.content  # greedy: the same answer
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finish] == ["stop"]
    assert Trace.model_validate(finish[0].model_extra["routerag"]).answer == text
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == completion.usage.total_tokens > 0


@pytest.mark.model
@pytest.mark.slow  # the policy model's build and a two-search run; .ci/run runs it
def test_routerag_answers_with_the_shipped_policy(client):
    from routerag.llm.config import bundled_policy_path
    from routerag.llm.factory import adapter_label

    completion = client.chat.completions.create(
        model="routerag", messages=USER, max_tokens=96, extra_body={"routerag": {"params": {"max_turns": 1}}})
    trace = Trace.model_validate(completion.model_extra["routerag"])
    assert trace.strategy == "routerag" and trace.error is None, trace.error
    assert trace.params["adapter"] == adapter_label(ModelConfig(lora_path=bundled_policy_path()))
    assert trace.params["max_tokens_per_turn"] == 96 and trace.retrieval_turns <= 1
    assert completion.choices[0].message.content == trace.answer and trace.answer.strip()
    assert completion.usage.total_tokens == trace.prompt_tokens + trace.completion_tokens


@pytest.mark.model
def test_langchain_chat_openai_invokes_routerag(live):
    langchain_openai = pytest.importorskip("langchain_openai")

    llm = langchain_openai.ChatOpenAI(base_url=live.url + "/v1", api_key=KEY, model="vanilla", max_retries=0)
    reply = llm.invoke(QUESTION)
    assert isinstance(reply.content, str) and reply.content.strip()
    assert reply.usage_metadata["total_tokens"] > 0


@pytest.mark.model
@pytest.mark.parametrize("snippet", ["openai_sdk.py", "langchain_chat.py", "langchain_trace.py"])
def test_the_documented_snippets_print_an_answer(live, snippet):
    env = {**os.environ, "ROUTERAG_URL": live.url, "ROUTERAG_API_KEY": KEY}
    done = subprocess.run([sys.executable, str(SNIPPETS / snippet), QUESTION], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip(), done.stderr[-2000:]


@pytest.mark.model
@pytest.mark.slow
def test_routerag_1_5b_answers_with_its_own_policy(client):
    """Where the 1.5B's packages are installed, the service's model pool builds it on this first
    request (about 1.1 GB more) and the routerag strategy runs on it with its shipped policy."""
    from routerag.llm.config import bundled_policy_path
    from routerag.llm.factory import adapter_label
    from routerag.strategies.shipped import ROUTERAG_POLICIES

    if "routerag-1.5b" not in {m.id for m in client.models.list()}:
        pytest.skip("the bundled 1.5B (the model-1p5b extra) or its policy adapter (routerag policies install) is not installed")
    completion = client.chat.completions.create(
        model="routerag-1.5b", messages=USER, max_tokens=64, extra_body={"routerag": {"params": {"max_turns": 1}}})
    trace = Trace.model_validate(completion.model_extra["routerag"])
    assert completion.model == "routerag-1.5b" and trace.strategy == "routerag" and trace.error is None, trace.error
    own = adapter_label(ModelConfig(lora_path=bundled_policy_path(ROUTERAG_POLICIES["bundled:qwen2.5-coder-1.5b"])))
    assert trace.params["adapter"] == own != adapter_label(ModelConfig(lora_path=bundled_policy_path()))
    assert completion.choices[0].message.content == trace.answer and trace.answer.strip()
