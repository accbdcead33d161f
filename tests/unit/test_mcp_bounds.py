"""The MCP ``ask`` tool's bounds, over the SDK's in-process client: asks are admitted like the
service's ``/v1/ask`` (one beyond ``admission.max_asks`` is an error result naming the bound),
run on threads of their own (``list_sources`` answers while asks wait), and a cancelled ask stops
at its next model call; arguments that fail a tool's schema are one readable sentence."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from routerag.corpus.schema import Document  # noqa: E402
from routerag.llm.config import ModelConfig  # noqa: E402
from routerag.llm.scripted import ScriptedModel  # noqa: E402

pytestmark = pytest.mark.unit

DOCS = [("Appeals court", "An appeals court reviews the ruling of a lower court judge."),
        ("Contract law", "A contract is an agreement a court will enforce.")]
THOUGHT = "The appeals court reviews a ruling."  # never "So the answer is:": ircot thinks max_steps times
LONG_ASK = {"question": "Which court reviews a ruling?", "strategy": "ircot",
            "params": {"source": "law", "k": 1, "max_steps": 16}}
CALL_S = 0.25


class SlowModel:
    """A scripted model whose every call takes ``CALL_S``; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

        def slowly(messages: object, params: object, continue_final: bool) -> str:
            with self._lock:
                self.calls += 1
            time.sleep(CALL_S)
            return THOUGHT

        self.model = ScriptedModel(slowly)


def _tools(tmp_path, slow: SlowModel, **settings: Any):
    from routerag.index.bundle import build_index
    from routerag.integrations.mcp_tools import McpSettings, McpTools
    from routerag.llm.pool import ModelPool
    from routerag.sources.bm25 import BM25Source
    from routerag.sources.sourceset import SourceSet

    bundle = build_index([Document.make(t, x) for t, x in DOCS], tmp_path / "law", components=["bm25"])
    config = McpSettings(model=ModelConfig(backend="scripted", scripted_outputs=["unused"]), **settings)
    tools = McpTools(SourceSet([BM25Source.from_bundle(bundle, name="law", profile="law texts")]), config,
                     index_dir=tmp_path, documents=len(DOCS))
    tools.answerer.pool = ModelPool(config.model, slow.model)
    return tools


def _calls(tools, body) -> None:
    from mcp import Client

    from routerag.integrations.mcp_server import build_server

    async def run() -> None:
        async with Client(build_server(tools)) as session:  # the SDK's client, connected in-process
            await body(session)

    anyio.run(run)


async def _until(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await anyio.sleep(0.02)


def test_a_cancelled_ask_stops_at_its_next_model_call(tmp_path):
    slow = SlowModel()
    seen: dict[str, int] = {}

    async def body(session) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(session.call_tool, "ask", LONG_ASK)
            await _until(lambda: slow.calls >= 2)
            group.cancel_scope.cancel()  # the client abandons the call: it sends notifications/cancelled
        seen["at_cancel"] = slow.calls
        await anyio.sleep(CALL_S * 8)  # an ask left running would make 8 more calls meanwhile
        seen["later"] = slow.calls
        listed = await session.call_tool("list_sources", {})
        assert not listed.is_error

    _calls(_tools(tmp_path, slow), body)
    assert seen["later"] - seen["at_cancel"] <= 1, seen  # at most the call under way when it was cancelled
    assert seen["later"] < 17  # 16 thoughts and a reader call when nothing stops it


def test_an_ask_beyond_the_bound_is_refused_and_the_other_tools_keep_answering(tmp_path):
    slow = SlowModel()
    tools = _tools(tmp_path, slow, admission={"max_asks": 2}, ask_threads=2)
    seen: dict[str, Any] = {}

    async def body(session) -> None:
        async with anyio.create_task_group() as group:
            for _ in range(2):
                group.start_soon(session.call_tool, "ask", LONG_ASK)
            await _until(lambda: slow.calls >= 2)
            refused = await session.call_tool("ask", {"question": "And a third?", "strategy": "direct"})
            seen["refused"] = refused
            start = time.monotonic()
            seen["listed"] = await session.call_tool("list_sources", {})
            seen["list_s"] = time.monotonic() - start
            group.cancel_scope.cancel()
        calls = slow.calls
        await anyio.sleep(CALL_S * 4)
        seen["after_cancel"] = slow.calls - calls

    _calls(tools, body)
    refused = seen["refused"]
    assert refused.is_error
    assert "too much work queued" in refused.content[0].text and "asks=2" in refused.content[0].text
    assert not seen["listed"].is_error and seen["list_s"] < 2.0
    assert seen["after_cancel"] <= 2  # each of the two stopped at its next call


def test_a_finished_ask_gives_its_place_back(tmp_path):
    slow = SlowModel()
    tools = _tools(tmp_path, slow, admission={"max_asks": 1}, ask_threads=1)
    answers: list[Any] = []

    async def body(session) -> None:
        for _ in range(2):  # one after the other: the first one's ticket was given back
            answers.append(await session.call_tool("ask", {"question": "Which court?", "strategy": "direct"}))

    _calls(tools, body)
    assert [a.is_error for a in answers] == [False, False], [a.content for a in answers]
    assert answers[0].structured_content["answer"] == THOUGHT


def test_rejected_arguments_are_one_readable_sentence(tmp_path):
    tools = _tools(tmp_path, SlowModel())
    seen: dict[str, str] = {}

    async def body(session) -> None:
        for name, arguments in (("search", {"k": 0}), ("ask", {}), ("route", {"query": "", "k": 101}),
                                ("search", {"query": "court", "k": "many"})):
            result = await session.call_tool(name, arguments)
            assert result.is_error
            seen[f"{name} {sorted(arguments)}"] = result.content[0].text

    _calls(tools, body)
    assert seen["search ['k']"] == "search: query: field required; k: must be ≥ 1"
    assert seen["ask []"] == "ask: question: field required"
    assert seen["route ['k', 'query']"] == "route: query: must not be empty; k: must be ≤ 100"
    assert seen["search ['k', 'query']"] == "search: k: must be an integer"
    for text in seen.values():
        assert "pydantic" not in text and "http" not in text and "\n" not in text

