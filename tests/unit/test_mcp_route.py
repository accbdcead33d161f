"""The MCP ``route`` tool over the SDK's in-process client: a routerag router (``keyword``, rules
from the operator's settings) chooses one of two real BM25 sources and the tool returns that
source's hits with the decision; the names a call may give (registered routers, shipped router
models; no plugin, no path); ``ask`` returns its evidence with passages, scores and sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from routerag.corpus.schema import Document  # noqa: E402
from routerag.llm.config import ModelConfig  # noqa: E402
from routerag.sources.sourceset import SourceSet  # noqa: E402

pytestmark = pytest.mark.unit

DOCS = {"law": [("Appeals court", "An appeals court reviews the ruling of a lower court judge."),
                ("Contract law", "A contract is an agreement a court will enforce.")],
        "med": [("Aspirin", "Aspirin is a drug that lowers fever in a patient."),
                ("Insulin", "Insulin is a drug given to a patient with diabetes.")]}
RULES = "rules:\n  - {pattern: '\\b(drug|patient)s?\\b', choice: med}\ndefault: law\n"
MED_QUESTION = "Which drug lowers a patient's fever?"


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    from routerag.index.bundle import build_index
    from routerag.integrations.mcp_tools import McpSettings, McpTools
    from routerag.sources.bm25 import BM25Source

    root = tmp_path_factory.mktemp("mcp-route")
    mounted = [BM25Source.from_bundle(build_index([Document.make(t, x) for t, x in docs], root / name,
                                                  components=["bm25"]), name=name, profile=f"{name} texts")
               for name, docs in DOCS.items()]
    (root / "rules.yaml").write_text(RULES)
    settings = McpSettings(router="keyword", router_rules=str(root / "rules.yaml"),
                           model=ModelConfig(backend="scripted", scripted_outputs=["Aspirin"]))
    return McpTools(SourceSet(mounted), settings, index_dir=root, documents=4)


def _calls(tools, body) -> None:
    from mcp import Client

    from routerag.integrations.mcp_server import build_server

    async def run() -> None:
        async with Client(build_server(tools)) as session:  # the SDK's client, connected in-process
            await body(session)

    anyio.run(run)


def test_the_route_tool_returns_the_routed_sources_hits_and_the_decision(tools):
    seen: dict[str, Any] = {}

    async def body(session) -> None:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert list(listed) == ["search", "route", "ask", "list_sources"]
        schema = listed["route"].input_schema
        assert schema["required"] == ["query"] and "keyword" in schema["properties"]["router"]["description"]
        assert {"hits", "route", "ranked", "source"} <= set(listed["route"].output_schema["properties"])
        for query in (MED_QUESTION, "Which court reviews a ruling?"):
            result = await session.call_tool("route", {"query": query, "k": 2})
            assert not result.is_error, result.content
            seen[query] = result.structured_content

    _calls(tools, body)
    med = seen[MED_QUESTION]
    assert med["source"] == "med" and med["route"]["choice"] == "med" and med["route"]["chosen_by"] == "keyword"
    assert med["route"]["reason"].startswith("keyword rule 1") and med["route"]["scores"] == {"med": 1.0, "law": 0.0}
    assert [c["name"] for c in med["ranked"]] == ["med", "law"]
    direct = tools.sources.search([MED_QUESTION], 2, ["med"]).results["med"][0].hits
    assert [(h["title"], h["text"], h["source"]) for h in med["hits"]] == [(h.title, h.text, "med") for h in direct]
    assert [h["score"] for h in med["hits"]] == pytest.approx([h.score for h in direct])
    law = seen["Which court reviews a ruling?"]
    assert law["source"] == "law" and law["route"]["reason"] == "no keyword rule matched: the default law"
    assert {h["source"] for h in law["hits"]} == {"law"}


def test_the_route_tool_takes_registered_routers_and_shipped_models_only(tools, tmp_path: Path):
    import sys

    outside = tmp_path / "router"
    outside.mkdir()
    (outside / "manifest.json").write_text("{}")
    errors: dict[str, str] = {}

    async def body(session) -> None:
        for label, args in {"plugin": {"router": "this:x"}, "exit": {"router": "sys:exit"},
                            "unknown": {"router": "no-such-router"}, "path": {"router_model": str(outside)},
                            "etc": {"router_model": "/etc/passwd"}, "llm": {"router": "llm"},
                            "empty": {"query": "   "}, "k": {"k": 0}}.items():
            result = await session.call_tool("route", {"query": MED_QUESTION, **args})
            assert result.is_error, (label, result.structured_content)
            errors[label] = result.content[0].text

    _calls(tools, body)
    assert "this" not in sys.modules
    assert "router 'this:x'" in errors["plugin"] and "a request names a registered router" in errors["plugin"]
    assert "'sys:exit'" in errors["exit"] and "unknown router 'no-such-router'" in errors["unknown"]
    for label in ("path", "etc"):
        assert "router_model" in errors[label] and "other paths are the operator's to configure" in errors[label]
    assert "the llm router needs a model" in errors["llm"]
    assert "the query is empty" in errors["empty"] and errors["k"] == "route: k: must be ≥ 1"


def test_ask_returns_its_evidence_with_passages_scores_and_sources(tools):
    seen: dict[str, Any] = {}

    async def body(session) -> None:
        result = await session.call_tool("ask", {"question": MED_QUESTION, "strategy": "vanilla",
                                                 "params": {"source": "med", "k": 2}})
        assert not result.is_error, result.content
        seen.update(result.structured_content)

    _calls(tools, body)
    assert seen["answer"] == "Aspirin"
    [search] = seen["searches"]
    direct = tools.sources.search([MED_QUESTION], 2, ["med"]).results["med"][0].hits
    assert search["sources"] == ["med"] and search["titles"] == [h.title for h in direct]
    assert [(h["text"], h["source"], h["rank"]) for h in search["hits"]] == [(h.text, "med", h.rank) for h in direct]
    assert [h["score"] for h in search["hits"]] == pytest.approx([h.score for h in direct])


def test_ask_refuses_a_blank_or_overlong_question_as_the_service_does(tools):
    errors: dict[str, str] = {}
    limit = tools.settings.max_question_chars

    async def body(session) -> None:
        for label, question in {"blank": "   ", "long": "x" * (limit + 1)}.items():
            result = await session.call_tool("ask", {"question": question, "strategy": "direct"})
            assert result.is_error, (label, result.structured_content)
            errors[label] = result.content[0].text

    _calls(tools, body)
    assert "question is empty" in errors["blank"]
    assert f"question has {limit + 1} characters; the limit is {limit}" in errors["long"]
