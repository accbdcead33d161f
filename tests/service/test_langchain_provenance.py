"""Provenance through LangChain: :class:`RouteragChatModel` (``ChatOpenAI`` pointed at a real ask
service on loopback, answering with a ScriptedModel over a BM25 index of the packaged demo corpus)
carries the run's trace in ``response_metadata["routerag"]``: invoke, stream and ainvoke; its
sources come back as LangChain documents. Plain ``ChatOpenAI`` drops the trace."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langchain_openai")

from routerag.edge.serving import BackgroundServer  # noqa: E402
from routerag.integrations.langchain_chat import TRACE_KEY, RouteragChatModel, trace_documents, trace_of  # noqa: E402
from routerag.llm.scripted import ScriptedModel  # noqa: E402
from routerag.server.app import create_app  # noqa: E402
from routerag.server.settings import ServiceSettings  # noqa: E402
from routerag.sources.sourceset import SourceSet  # noqa: E402

pytestmark = pytest.mark.service

KEY = "lc-key"
SNIPPET = Path(__file__).resolve().parents[2] / "docs" / "guides" / "snippets" / "langchain_trace.py"
QUESTION = "When did Lothair II's mother die?"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from routerag.corpus.datasets import load_dataset
    from routerag.index.bundle import build_index
    from routerag.sources.bm25 import BM25Source

    bundle = build_index(load_dataset("demo", n_questions=1).corpus, tmp_path_factory.mktemp("lc-idx") / "bundle",
                         components=["bm25"])
    sources = SourceSet([BM25Source.from_bundle(bundle, name="passage")])
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("lc-svc"), api_key=KEY, ui=False, warm_up=False)
    with BackgroundServer(create_app(ScriptedModel(lambda *_: "20 March 851"), sources, settings)) as server:
        yield server.url


def chat_model(url: str) -> RouteragChatModel:
    return RouteragChatModel(base_url=url + "/v1", api_key=KEY, model="vanilla", max_retries=0)


def check_provenance(message) -> None:
    trace = trace_of(message)
    assert trace is not None and trace.strategy == "vanilla" and trace.answer == "20 March 851"
    assert trace.steps and trace.steps[0].hits and trace.steps[0].sources == ["passage"]
    documents = trace_documents(message)
    assert [d.id for d in documents] == [hit.doc_id for hit in trace.steps[0].hits]
    first = documents[0]
    assert first.page_content == trace.steps[0].hits[0].text
    assert first.metadata["source"] == "passage" and first.metadata["rank"] == 1 and first.metadata["step"] == 0


def test_invoke_carries_the_trace_in_response_metadata(served):
    reply = chat_model(served).invoke(QUESTION)
    assert reply.content == "20 March 851"
    assert isinstance(reply.response_metadata[TRACE_KEY], dict)
    assert reply.response_metadata["finish_reason"] == "stop"  # ChatOpenAI's own metadata is kept
    check_provenance(reply)


def test_generate_puts_the_trace_in_generation_info(served):
    from langchain_core.messages import HumanMessage

    result = chat_model(served).generate([[HumanMessage(QUESTION)]])
    generation = result.generations[0][0]
    assert generation.generation_info is not None and generation.generation_info[TRACE_KEY]["strategy"] == "vanilla"


def test_a_stream_carries_the_trace_on_its_merged_message(served):
    chunks = list(chat_model(served).stream(QUESTION))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert "20 March 851" in str(merged.content)
    assert sum(TRACE_KEY in chunk.response_metadata for chunk in chunks) == 1  # the finishing chunk only
    check_provenance(merged)


def test_ainvoke_carries_the_trace(served):
    check_provenance(asyncio.run(chat_model(served).ainvoke(QUESTION)))


def test_plain_chat_openai_drops_it_and_a_message_without_a_trace_has_no_documents(served):
    from langchain_openai import ChatOpenAI

    plain = ChatOpenAI(base_url=served + "/v1", api_key=KEY, model="vanilla", max_retries=0).invoke(QUESTION)
    assert TRACE_KEY not in plain.response_metadata
    assert trace_of(plain) is None and trace_documents(plain) == []


def test_the_documented_snippet_prints_the_answer_its_steps_and_its_passages(served):
    env = {**os.environ, "ROUTERAG_URL": served, "ROUTERAG_API_KEY": KEY}
    done = subprocess.run([sys.executable, str(SNIPPET), QUESTION], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "20 March 851"
    assert "step 0 search" in done.stderr and "hits from passage" in done.stderr and "  [passage] " in done.stderr
