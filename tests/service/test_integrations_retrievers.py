"""The LangChain and LlamaIndex retrievers over a real index built from the bundled demo corpus
(dense + BM25, no benchmark data folder), locally and through a real ``serve-retrieval`` app on
loopback; a LangChain LCEL chain and a LlamaIndex query engine with their frameworks' fake LLMs;
the runnable snippets of the guide."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

import routerag  # noqa: E402

pytestmark = pytest.mark.integration  # a real dense index (the bundled embedder); tests using server_url: service too
SRC = Path(routerag.__file__).resolve().parents[1]
SNIPPETS = SRC.parent / "docs" / "guides" / "snippets"
QUESTION = "Who was Teutberga married to?"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    from routerag.api.indexing import index_documents
    from routerag.corpus.datasets import load_dataset

    docs = load_dataset("demo").documents()[:60]  # Teutberga and Lothair II are among them
    out = tmp_path_factory.mktemp("integrations-idx") / "demo"
    index_documents(docs, out, ("dense", "bm25"))
    return out


@pytest.fixture(scope="module")
def server_url(index_dir):
    """``routerag serve-retrieval``'s app (api.serving.retrieval_app) over the index, on loopback."""
    from routerag.api.serving import ServeParams, retrieval_app
    from routerag.edge.serving import BackgroundServer
    from routerag.server.settings import ServerSettings

    app, _ = retrieval_app(ServeParams(index_dir=index_dir), ServerSettings(max_k=8))
    with BackgroundServer(app) as running:
        yield running.url


def expected_hits(index_dir: Path, mode: str, k: int, query: str = QUESTION):
    """The hits ``routerag retrieve`` gives for the query."""
    from routerag.api.indexing import retrieve

    return retrieve(index_dir, query, k, [mode]).results[mode][0].hits


# ---------------------------------------------------------------- LangChain


def test_langchain_invoke_returns_the_index_hits_as_documents(index_dir):
    from langchain_core.documents import Document

    from routerag.integrations.langchain import RouteragRetriever

    retriever = RouteragRetriever.from_index(index_dir, mode="passage", k=3)
    docs = retriever.invoke(QUESTION)
    hits = expected_hits(index_dir, "passage", 3)
    assert all(isinstance(d, Document) for d in docs) and len(docs) == 3
    assert docs[0].metadata["title"] == "Teutberga"
    assert [d.id for d in docs] == [d.metadata["doc_id"] for d in docs] == [h.doc_id for h in hits]
    assert [d.page_content for d in docs] == [h.text for h in hits]
    assert [d.metadata["rank"] for d in docs] == [1, 2, 3]
    assert [d.metadata["score"] for d in docs] == pytest.approx([h.score for h in hits])
    assert {(d.metadata["source"], d.metadata["mode"]) for d in docs} == {("passage", "passage")}
    # the async path (a worker thread) and a batch give the same documents
    assert asyncio.run(retriever.ainvoke(QUESTION)) == docs
    assert retriever.batch([QUESTION, "Lothair II"])[0] == docs


def test_lcel_chain_puts_the_retrieved_titles_in_the_prompt(index_dir):
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models import FakeListLLM
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import PromptTemplate
    from langchain_core.runnables import RunnablePassthrough

    from routerag.integrations.langchain import RouteragRetriever

    class Prompts(BaseCallbackHandler):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def on_llm_start(self, serialized, prompts, **kwargs) -> None:
            self.seen.extend(prompts)

    def format_docs(docs) -> str:
        return "\n\n".join(f"[{d.metadata['title']}] {d.page_content}" for d in docs)

    retriever = RouteragRetriever.from_index(index_dir, mode="bm25", k=2)
    prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}\nAnswer:")
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | \
        FakeListLLM(responses=["Lothair II"]) | StrOutputParser()
    prompts = Prompts()
    assert chain.invoke(QUESTION, config={"callbacks": [prompts]}) == "Lothair II"
    titles = [h.title for h in expected_hits(index_dir, "bm25", 2)]
    assert "Teutberga" in titles
    (seen,) = prompts.seen
    assert all(f"[{title}]" in seen for title in titles) and seen.endswith(f"Question: {QUESTION}\nAnswer:")


@pytest.mark.service
def test_remote_server_gives_the_local_hits(index_dir, server_url):
    from routerag.integrations.langchain import RouteragRetriever
    from routerag.integrations.llamaindex import RouteragLlamaRetriever

    for mode in ("passage", "bm25"):
        local = RouteragRetriever.from_index(index_dir, mode=mode, k=4).invoke(QUESTION)
        remote_lc = RouteragRetriever.from_url(server_url, mode=mode, k=4)
        remote_li = RouteragLlamaRetriever.from_url(server_url, mode=mode, k=4)
        try:
            remote = remote_lc.invoke(QUESTION)
            nodes = asyncio.run(remote_li.aretrieve(QUESTION))
        finally:
            remote_lc.close()
            remote_li.close()
        assert [d.id for d in remote] == [d.id for d in local] == [n.node.node_id for n in nodes]
        assert [d.page_content for d in remote] == [d.page_content for d in local]
        assert [d.metadata["score"] for d in remote] == pytest.approx([d.metadata["score"] for d in local], abs=1e-5)
        assert [d.metadata["source"] for d in remote] == [mode] * 4


# ---------------------------------------------------------------- LlamaIndex


def test_llamaindex_retrieve_returns_nodes_with_scores(index_dir):
    from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

    from routerag.integrations.llamaindex import RouteragLlamaRetriever

    retriever = RouteragLlamaRetriever.from_index(index_dir, mode="bm25", k=3)
    nodes = retriever.retrieve(QUESTION)
    hits = expected_hits(index_dir, "bm25", 3)
    assert all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    assert [n.node.node_id for n in nodes] == [h.doc_id for h in hits]
    assert [n.score for n in nodes] == pytest.approx([h.score for h in hits])
    first = nodes[0].node
    assert "Teutberga" in [n.node.metadata["title"] for n in nodes]
    assert (first.metadata["title"], first.metadata["rank"], first.metadata["source"]) == (hits[0].title, 1, "bm25")
    assert first.text == hits[0].text
    # the LLM sees the title and the passage, not the scores and ids
    shown = first.get_content(metadata_mode=MetadataMode.LLM)
    assert hits[0].title in shown and first.metadata["doc_id"] not in shown and "score" not in shown
    assert [n.node.node_id for n in asyncio.run(retriever.aretrieve(QUESTION))] == [h.doc_id for h in hits]


def test_llamaindex_query_engine_answers_from_routerag_hits(index_dir):
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from routerag.integrations.llamaindex import RouteragLlamaRetriever

    retriever = RouteragLlamaRetriever.from_index(index_dir, mode="passage", k=2)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUESTION)
    hits = expected_hits(index_dir, "passage", 2)
    assert [n.node.node_id for n in response.source_nodes] == [h.doc_id for h in hits]
    assert [n.node.metadata["title"] for n in response.source_nodes][0] == "Teutberga"
    assert "Teutberga" in str(response)  # MockLLM echoes its prompt: the hit reached it


# ---------------------------------------------------------------- refusals


@pytest.mark.service
@pytest.mark.parametrize("cls_name", ["langchain:RouteragRetriever", "llamaindex:RouteragLlamaRetriever"])
def test_bad_mode_and_k_are_clear_value_errors(index_dir, server_url, cls_name):
    import importlib

    module, name = cls_name.split(":")
    cls = getattr(importlib.import_module(f"routerag.integrations.{module}"), name)
    with pytest.raises(ValueError, match="unknown mode 'nope'; an index serves passage, bm25"):
        cls.from_index(index_dir, mode="nope")
    with pytest.raises(ValueError, match="cannot serve mode 'graph' \\(not serving graph: the index has no graph component\\)"):
        cls.from_index(index_dir, mode="graph")
    for k in (0, -1, 101, 2.5, True):
        with pytest.raises(ValueError, match=f"k must be an integer from 1 to 100, got {k!r}"):
            cls.from_index(index_dir, k=k)
    with pytest.raises(ValueError, match="has no source 'nope'; it serves: passage, bm25"):
        cls.from_url(server_url, mode="nope")
    with pytest.raises(ValueError, match="k must be an integer from 1 to 8, got 9"):  # the server's max_k
        cls.from_url(server_url, mode="bm25", k=9)
    with pytest.raises(ValueError, match="must start with http"):
        cls.from_url("localhost:1", mode="bm25")
    with pytest.raises(ValueError, match="expected a routerag source"):
        cls(source="passage") if module == "langchain" else cls("passage")
    retriever = cls.from_index(index_dir, mode="bm25", k=1)
    with pytest.raises(ValueError, match="query 0 is empty"):
        retriever.invoke("  ") if module == "langchain" else retriever.retrieve("  ")


def test_importing_routerag_imports_neither_framework():
    code = ("import sys, routerag, routerag.api, routerag.integrations, routerag.integrations.searching\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'langchain_core', 'llama_index'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)})
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------- the guide's snippets


@pytest.mark.service
@pytest.mark.parametrize("snippet,where", [("langchain_retriever.py", "index"), ("llamaindex_retriever.py", "url")])
def test_snippets_print_the_top_hits(index_dir, server_url, snippet, where):
    env = {**os.environ, "PYTHONPATH": str(SRC), "ROUTERAG_MODE": "bm25", "ROUTERAG_K": "2"}
    env.pop("ROUTERAG_INDEX", None)
    env.pop("ROUTERAG_RETRIEVAL_URL", None)
    env["ROUTERAG_INDEX" if where == "index" else "ROUTERAG_RETRIEVAL_URL"] = str(index_dir) if where == "index" else server_url
    out = subprocess.run([sys.executable, str(SNIPPETS / snippet), QUESTION], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    titles = [h.title for h in expected_hits(index_dir, "bm25", 2)]
    assert [line.split(" (bm25, score ")[0] for line in lines] == [f"1. {titles[0]}", f"2. {titles[1]}"]
