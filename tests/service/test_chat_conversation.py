"""The chat endpoint's rule for system messages and earlier turns, the ``passthrough`` model and
OpenAI's error shape, over real HTTP on loopback with a ScriptedModel: LangChain's standard
``create_retrieval_chain`` (``ChatOpenAI`` as its LLM, its retrieved context in the system
message) answered from that context; the pass-through model answering the messages as given;
earlier turns reaching the model; and the OpenAI SDK's typed errors for 401, 400/422 and 429,
streamed and not."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import httpx
import pytest
from tests.unit.test_strategies_support import KeywordSource

from routerag.edge.serving import BackgroundServer
from routerag.edge.settings import AdmissionSettings
from routerag.llm.base import GenerationParams, Message
from routerag.llm.conversation import INSTRUCTIONS_HEADING
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings
from routerag.sources.sourceset import SourceSet
from routerag.trace import Trace

pytestmark = pytest.mark.service

KEY = "conversation-key"
CONTEXT = "The vault code of the Aldebaran station is ZEBRA-42."
QUESTION = "What is the vault code of the Aldebaran station?"
CODE = re.compile(r"vault code of the Aldebaran station is ([A-Z]+-\d+)")


def context_reader(messages: list[Message], params: GenerationParams, continue_final: bool) -> str:
    """A reader that answers from what its prompt holds: the code when a message states it, else "No"
    (what routerag answered when the system message was dropped)."""
    for message in messages:
        found = CODE.search(message.content)
        if found:
            return found.group(1)
    return "No"


def served(tmp_path: Path, model: ScriptedModel, **settings) -> BackgroundServer:
    sources = SourceSet([KeywordSource("passage")])
    return BackgroundServer(create_app(model, sources, ServiceSettings(data_dir=tmp_path, api_key=KEY, **settings)))


def post(url: str, body: dict, key: str = KEY) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as c:
        return c.post("/v1/chat/completions", json=body)


def retrieval_chain(retriever, llm, prompt):
    """LangChain's ``create_retrieval_chain`` over ``create_stuff_documents_chain`` (from
    ``langchain_classic`` or ``langchain``, whichever is installed), else the same chain in LCEL."""
    try:
        from langchain_classic.chains import create_retrieval_chain
        from langchain_classic.chains.combine_documents import create_stuff_documents_chain
    except ImportError:
        try:
            from langchain.chains import create_retrieval_chain
            from langchain.chains.combine_documents import create_stuff_documents_chain
        except ImportError:
            from langchain_core.output_parsers import StrOutputParser
            from langchain_core.runnables import RunnablePassthrough

            def stuff(docs) -> str:
                return "\n\n".join(doc.page_content for doc in docs)

            return (RunnablePassthrough.assign(context=(lambda x: x["input"]) | retriever | stuff)
                    .assign(answer=prompt | llm | StrOutputParser()))
    return create_retrieval_chain(retriever, create_stuff_documents_chain(llm, prompt))


@pytest.mark.parametrize("model_name", ["passthrough", "direct", "vanilla"])
def test_create_retrieval_chain_is_answered_from_its_system_message(tmp_path, model_name):
    langchain_openai = pytest.importorskip("langchain_openai")
    from langchain_core.documents import Document
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever

    class FixedRetriever(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return [Document(page_content=CONTEXT, metadata={"source": "station-manual"})]

    prompt = ChatPromptTemplate.from_messages([  # the prompt of LangChain's retrieval-chain guide
        ("system", "Use the given context to answer the question. If you don't know the answer, say you don't know. "
                   "Use three sentence maximum and keep the answer concise. Context: {context}"),
        ("human", "{input}")])
    model = ScriptedModel(context_reader)
    with served(tmp_path, model) as running:
        llm = langchain_openai.ChatOpenAI(base_url=running.url + "/v1", api_key=KEY, model=model_name, max_retries=0)
        result = retrieval_chain(FixedRetriever(), llm, prompt).invoke({"input": QUESTION})
    assert result["answer"] == "ZEBRA-42", [call.messages for call in model.calls]
    assert [d.page_content for d in result["context"]] == [CONTEXT]
    [call] = model.calls  # one model call, which saw the system message's context and the question
    system = call.messages[0]
    assert system.role == "system" and CONTEXT in system.content and QUESTION in call.messages[-1].content
    if model_name == "passthrough":  # the client's messages as given, rendered by the model's chat template
        assert [m.role for m in call.messages] == ["system", "user"] and call.messages[-1].content == QUESTION
        assert system.content.startswith("Use the given context") and INSTRUCTIONS_HEADING not in system.content
    else:  # the strategy's own instruction first, the client's after it
        assert INSTRUCTIONS_HEADING in system.content and not system.content.startswith("Use the given context")


def test_passthrough_answers_the_messages_as_given(tmp_path):
    model = ScriptedModel(["  Line one of the reply.\nLine two.\n"])
    with served(tmp_path, model) as running:
        listed = httpx.get(running.url + "/v1/models", headers={"X-API-Key": KEY}).json()
        assert "passthrough" in [m["id"] for m in listed["data"]]
        sent = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say two lines."}]
        reply = post(running.url, {"model": "passthrough", "messages": sent, "max_tokens": 40})
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "Line one of the reply.\nLine two."  # the whole reply
    trace = Trace.model_validate(reply.json()["routerag"])
    assert trace.strategy == "passthrough" and trace.retrieval_turns == 0 and [s.kind for s in trace.steps] == ["answer"]
    assert trace.params["max_tokens"] == 40  # the request's cap lowered its 512
    [call] = model.calls
    assert [(m.role, m.content) for m in call.messages] == [(m["role"], m["content"]) for m in sent]
    assert call.params.max_tokens == 40 and call.params.stop == []


def test_earlier_turns_reach_every_model_call(tmp_path):
    model = ScriptedModel(["Berlin"])
    sent = [{"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "Which country is Paris the capital of?"},
            {"role": "assistant", "content": "France"},
            {"role": "user", "content": "And what is the capital of Germany?"}]
    with served(tmp_path, model) as running:
        reply = post(running.url, {"model": "vanilla", "messages": sent})
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "Berlin"
    [call] = model.calls
    assert [m.role for m in call.messages] == ["system", "user", "assistant", "user"]
    assert call.messages[1:3] == [Message(role="user", content="Which country is Paris the capital of?"),
                                  Message(role="assistant", content="France")]
    assert "Answer in one word." in call.messages[0].content and "Doc 1(Title:" in call.messages[0].content
    assert call.messages[-1].content.endswith("And what is the capital of Germany?")


def test_every_refusal_is_in_openai_shape(tmp_path):
    openai = pytest.importorskip("openai")
    entered, release = threading.Event(), threading.Event()

    def held(messages, params, continue_final) -> str:
        entered.set()
        release.wait(30)
        return "Paris"

    user = [{"role": "user", "content": "What is the capital of France?"}]
    with served(tmp_path, ScriptedModel(held), admission=AdmissionSettings(max_asks=1, retry_after_s=3),
                max_body_bytes=2048) as running:
        url = running.url
        for method, path, body in [("POST", "/v1/chat/completions", {"model": "vanilla", "messages": user}),
                                   ("POST", "/v1/chat/completions", {"model": "vanilla", "messages": user, "stream": True}),
                                   ("GET", "/v1/models", None), ("GET", "/v1/models/vanilla", None)]:
            r = httpx.request(method, url + path, json=body, headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401, (path, r.text)
            assert r.json() == {"error": {"message": "the API key is not valid", "type": "authentication_error",
                                          "param": None, "code": "invalid_api_key"}}, path
        assert httpx.post(url + "/v1/ask", json={"question": "q"}).json().keys() == {"detail"}  # other routes: unchanged
        refused = [
            ({"model": "vanilla", "messages": [*user, {"role": "assistant", "content": "Pa"}]}, 400, "messages"),
            ({"model": "vanilla", "messages": user, "n": 2}, 422, "n"),
            ({"model": "vanilla", "messages": [{"role": "user", "content": "x" * 3000}]}, 413, None),  # the front door's
        ]
        for body, status, param in refused:
            for stream in (False, True):
                r = post(url, {**body, "stream": stream})
                assert r.status_code == status, (body, r.text)
                error = r.json()["error"]
                assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"], error
        bad_json = httpx.post(url + "/v1/chat/completions", content=b"{not json", headers={
            "Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
        assert bad_json.status_code == 400 and bad_json.json()["error"]["type"] == "invalid_request_error"

        client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        with pytest.raises(openai.AuthenticationError) as wrong:
            openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0).models.list()
        assert wrong.value.code == "invalid_api_key"  # read from OpenAI's shape only
        with pytest.raises(openai.BadRequestError) as prefill:
            client.chat.completions.create(model="vanilla", messages=[*user, {"role": "assistant", "content": "Pa"}])
        assert prefill.value.param == "messages" and "follows the question" in prefill.value.message

        first = threading.Thread(target=post, args=(url, {"model": "vanilla", "messages": user}))
        first.start()
        try:
            assert entered.wait(30)  # the one ask the service admits is running
            for stream in (False, True):
                r = post(url, {"model": "vanilla", "messages": user, "stream": stream})
                assert r.status_code == 429 and r.headers["Retry-After"] == "3", r.text
                assert r.json()["error"]["code"] == "rate_limit_exceeded" and "asks=1" in r.json()["error"]["message"]
            with pytest.raises(openai.RateLimitError) as limited:
                client.chat.completions.create(model="vanilla", messages=user)
            assert limited.value.code == "rate_limit_exceeded"
        finally:
            release.set()
            first.join()
        client.close()
