"""Routing inside LangChain and LlamaIndex: the routing retrievers route each query across real
BM25 sources (two tiny corpora, law and med) with routerag's ``keyword`` router and return the
routed source's hits with the decision; a ``create_retrieval_chain`` with LangChain's
``FakeListChatModel`` answers from them; LlamaIndex's own ``RouterRetriever`` and
``RouterQueryEngine`` choose with routerag's selector (with ``MockLLM``). No model loads."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from routerag.corpus.schema import Document  # noqa: E402
from routerag.routing.keyword_rules import KeywordRules  # noqa: E402
from routerag.sources.sourceset import SourceSet  # noqa: E402

pytestmark = pytest.mark.unit

LAW = [("Contract law", "A contract is an agreement a court will enforce between parties."),
       ("Appeals court", "An appeals court reviews the ruling of a lower court judge."),
       ("Statute of limitations", "A statute of limitations bars claims filed after a deadline.")]
MED = [("Aspirin", "Aspirin is a drug that lowers fever and relieves pain in a patient."),
       ("Insulin", "Insulin is a hormone drug given to a patient with diabetes."),
       ("Fever", "A fever is a body temperature above normal, a symptom of infection.")]
PROFILES = {"law": "legal texts: contracts, courts, statutes", "med": "medical texts: drugs, patients, symptoms"}
RULES = KeywordRules.model_validate({"rules": [{"pattern": r"\b(drug|patient|fever)s?\b", "choice": "med"}],
                                     "default": "law"})
MED_QUESTION = "Which drug lowers a patient's fever?"
LAW_QUESTION = "Which court reviews a judge's ruling?"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> SourceSet:
    from routerag.index.bundle import build_index
    from routerag.sources.bm25 import BM25Source

    root = tmp_path_factory.mktemp("routing-sources")
    mounted = []
    for name, docs in (("law", LAW), ("med", MED)):
        bundle = build_index([Document.make(t, x) for t, x in docs], root / name, components=["bm25"])
        mounted.append(BM25Source.from_bundle(bundle, name=name, profile=PROFILES[name]))
    return SourceSet(mounted)


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    from routerag.index.bundle import build_index

    out = tmp_path_factory.mktemp("routing-idx") / "bundle"
    build_index([Document.make(t, x) for t, x in LAW + MED], out, components=["bm25"])
    return out


def direct_hits(sources: SourceSet, name: str, query: str, k: int = 2):
    return sources.search([query], k, [name]).results[name][0].hits


# ---------------------------------------------------------------- LangChain


def test_the_langchain_routing_retriever_returns_the_routed_sources_hits_with_the_decision(sources):
    from routerag.integrations.langchain import RouteragRoutingRetriever

    with pytest.raises(ValueError, match="the keyword router needs rules"):
        RouteragRoutingRetriever(sources=sources, router="keyword", k=2)
    from routerag.integrations.routed import make_router

    retriever = RouteragRoutingRetriever(sources=sources, router=make_router("keyword", rules=RULES), k=2)
    for question, chosen, other in ((MED_QUESTION, "med", "law"), (LAW_QUESTION, "law", "med")):
        docs = retriever.invoke(question)
        expected = direct_hits(sources, chosen, question)
        assert [d.page_content for d in docs] == [h.text for h in expected] and len(docs) == 2
        assert [d.metadata["score"] for d in docs] == pytest.approx([h.score for h in expected])
        assert {d.metadata["source"] for d in docs} == {chosen}
        route = docs[0].metadata["route"]
        assert route["choice"] == chosen and route["router"] == "keyword" and route["ranked"] == [chosen, other]
        assert route["scores"] == {chosen: 1.0, other: 0.0}
        assert route["reason"] == ("keyword rule 1 /\\b(drug|patient|fever)s?\\b/ matched: med" if chosen == "med"
                                   else "no keyword rule matched: the default law")
    assert asyncio.run(retriever.ainvoke(MED_QUESTION)) == retriever.invoke(MED_QUESTION)


def test_create_retrieval_chain_answers_from_the_routed_source(sources):
    from langchain_classic.chains import create_retrieval_chain
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda

    from routerag.integrations.langchain import RouteragRoutingRetriever
    from routerag.integrations.routed import make_router

    retriever = RouteragRoutingRetriever(sources=sources, router=make_router("keyword", rules=RULES), k=2)
    prompt = ChatPromptTemplate.from_messages([("system", "Answer from this context:\n{context}"), ("human", "{input}")])
    shown: list[str] = []
    llm = RunnableLambda(lambda value: shown.append(value.to_string()) or value) | FakeListChatModel(responses=["Aspirin"])
    chain = create_retrieval_chain(retriever, create_stuff_documents_chain(llm, prompt))
    result = chain.invoke({"input": MED_QUESTION})
    assert result["answer"] == "Aspirin"
    assert [d.metadata["title"] for d in result["context"]] == [h.title for h in direct_hits(sources, "med", MED_QUESTION)]
    assert all(d.metadata["source"] == "med" and d.metadata["route"]["choice"] == "med" for d in result["context"])
    assert "Aspirin is a drug" in shown[0] and "court" not in shown[0]


def test_the_routing_retriever_over_an_index_routes_across_its_modes(index_dir, tmp_path):
    from routerag.integrations.langchain import RouteragRoutingRetriever

    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: []\ndefault: bm25\n")
    retriever = RouteragRoutingRetriever.from_index(index_dir, "keyword", rules=rules, k=3)
    docs = retriever.invoke(MED_QUESTION)
    assert len(docs) == 3 and docs[0].metadata["title"] == "Aspirin"
    assert {(d.metadata["source"], d.metadata["mode"]) for d in docs} == {("bm25", "bm25")}
    assert docs[0].metadata["route"]["reason"] == "no keyword rule matched: the default bm25"
    with pytest.raises(ValueError, match="unknown router 'no-such-router'"):
        RouteragRoutingRetriever.from_index(index_dir, "no-such-router")
    with pytest.raises(ValueError, match="cannot serve mode 'graph'"):
        RouteragRoutingRetriever.from_index(index_dir, "keyword", rules=rules, modes=["graph"])


def test_a_router_that_chooses_an_unoffered_source_is_refused(sources):
    from routerag.integrations.langchain import RouteragRoutingRetriever
    from routerag.routing import RouteChoice, RouteResult
    from routerag.routing.base import RoutingError

    class Elsewhere:
        name = "elsewhere"

        def route(self, query, choices):
            return RouteResult(ranked=[RouteChoice(name="web", score=1.0)])

    retriever = RouteragRoutingRetriever(sources=sources, router=Elsewhere())
    with pytest.raises(RoutingError, match="router 'elsewhere' chose 'web', which is not among the choices law, med"):
        retriever.invoke(MED_QUESTION)
    with pytest.raises(ValueError, match="unknown source 'web'; mounted: law, med"):
        RouteragRoutingRetriever(sources=sources, router=Elsewhere(), choices=["web"])


# ---------------------------------------------------------------- LlamaIndex


def _tools(sources: SourceSet):
    from llama_index.core.tools import RetrieverTool

    from routerag.integrations.llamaindex import RouteragLlamaRetriever

    return [RetrieverTool.from_defaults(RouteragLlamaRetriever(sources.get(name), 2), name=name,
                                        description=PROFILES[name]) for name in ("law", "med")]


def test_llamaindex_router_retriever_chooses_with_the_routerag_selector(sources):
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import RouterRetriever

    from routerag.integrations.llamaindex import RouteragSelector

    selector = RouteragSelector("keyword", rules=RULES)
    retriever = RouterRetriever(selector=selector, retriever_tools=_tools(sources), llm=MockLLM())
    for question, chosen in ((MED_QUESTION, "med"), (LAW_QUESTION, "law")):
        nodes = retriever.retrieve(question)
        assert [n.node.get_content() for n in nodes] == [h.text for h in direct_hits(sources, chosen, question)]
        assert {n.node.metadata["source"] for n in nodes} == {chosen}
    picked = selector.select([tool.metadata for tool in _tools(sources)], MED_QUESTION)
    assert picked.ind == 1 and picked.reason.startswith("keyword rule 1")
    both = RouteragSelector("keyword", rules=RULES, max_outputs=2).select(
        [tool.metadata for tool in _tools(sources)], MED_QUESTION)
    assert both.inds == [1, 0] and both.reasons[1] == "ranked 2 by keyword (score 0)"
    assert asyncio.run(selector.aselect([tool.metadata for tool in _tools(sources)], LAW_QUESTION)).ind == 0


def test_the_selector_routes_by_the_choices_descriptions(sources):
    """Unnamed choices: routed as ``choice N`` with their descriptions as profiles (a toy
    embedder stands in for the sentence embedder of the profile-embedding router)."""
    import numpy as np

    from routerag.integrations.llamaindex import RouteragSelector
    from routerag.routing.profile import ProfileEmbeddingRouter

    class Words:
        identity, dim = "toy-words", 4
        vocab = ["court", "contract", "drug", "patient"]

        def encode(self, texts, *, is_query=False):
            return np.array([[float(w in t.lower()) for w in self.vocab] for t in texts])

    selector = RouteragSelector(ProfileEmbeddingRouter(Words()))
    picked = selector.select(["courts and contracts", "drugs given to a patient"], MED_QUESTION)
    assert picked.ind == 1 and "choice 2" in picked.reason and "profile similarity" in picked.reason
    with pytest.raises(ValueError, match="distinct names; repeated: law, med"):
        selector.select([tool.metadata for tool in _tools(sources)] * 2, MED_QUESTION)


def test_llamaindex_router_query_engine_with_mock_llm(sources):
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine, RouterQueryEngine
    from llama_index.core.tools import QueryEngineTool

    from routerag.integrations.llamaindex import RouteragLlamaRetriever, RouteragSelector

    engines = [QueryEngineTool.from_defaults(RetrieverQueryEngine.from_args(RouteragLlamaRetriever(sources.get(name), 2),
                                                                            llm=MockLLM()),
                                             name=name, description=PROFILES[name]) for name in ("law", "med")]
    engine = RouterQueryEngine(selector=RouteragSelector("keyword", rules=RULES), query_engine_tools=engines,
                               llm=MockLLM())
    response = engine.query(MED_QUESTION)
    assert {n.node.metadata["source"] for n in response.source_nodes} == {"med"}
    assert "Aspirin is a drug" in str(response)  # MockLLM echoes its prompt: the routed passages
    assert response.metadata["selector_result"].ind == 1


def test_the_llamaindex_routing_retriever_in_a_query_engine(sources):
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from routerag.integrations.llamaindex import HIDDEN_KEYS, RouteragRoutingLlamaRetriever
    from routerag.integrations.routed import make_router

    retriever = RouteragRoutingLlamaRetriever(sources, make_router("keyword", rules=RULES), 2)
    nodes = retriever.retrieve(LAW_QUESTION)
    expected = direct_hits(sources, "law", LAW_QUESTION)
    assert [n.node.node_id for n in nodes] == [h.doc_id for h in expected]
    assert [n.score for n in nodes] == pytest.approx([h.score for h in expected])
    route = nodes[0].node.metadata["route"]
    assert route["choice"] == "law" and route["ranked"] == ["law", "med"] and "route" in HIDDEN_KEYS
    response = RetrieverQueryEngine.from_args(retriever, llm=MockLLM()).query(MED_QUESTION)
    assert {n.node.metadata["route"]["choice"] for n in response.source_nodes} == {"med"}
    assert "keyword rule" not in str(response)  # the decision is metadata, not shown to the LLM
    assert asyncio.run(retriever.aretrieve(LAW_QUESTION))[0].node.node_id == nodes[0].node.node_id


def test_the_guides_routing_snippet_runs(index_dir, tmp_path):
    import os
    import subprocess
    import sys

    snippet = Path(__file__).resolve().parents[2] / "docs" / "guides" / "snippets" / "routing_retrievers.py"
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: [{pattern: drug, choice: bm25}]\ndefault: bm25\n")
    env = {**os.environ, "ROUTERAG_INDEX": str(index_dir), "ROUTERAG_ROUTER": "keyword",
           "ROUTERAG_ROUTER_RULES": str(rules), "ROUTERAG_K": "2"}
    done = subprocess.run([sys.executable, str(snippet), MED_QUESTION], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "langchain: keyword chose bm25 of ['bm25']: keyword rule 1 /drug/ matched: bm25"
    assert lines[1].startswith("  1. Aspirin (bm25, ") and lines[2].startswith("  2. ")
    assert lines[3].startswith("llamaindex: bm25: ['Aspirin', ")
    assert lines[4].startswith("selector: bm25 (keyword rule 1 /drug/ matched: bm25): ['Aspirin', ")
