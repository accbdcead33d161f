"""``routerag mcp``: the MCP tools over a small real index (BM25 over the bundled demo passages),
driven by the MCP SDK's own client over stdio (the server started as the client configuration in
docs/guides/snippets/mcp_config.json says) and over streamable HTTP (a subprocess on a free
port, with an API key), plus the runnable client snippet."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = ROOT / "docs" / "guides" / "snippets"
N_DOCS = 40


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, str]]:
    from routerag.corpus.datasets import bundled_data_dir

    return json.loads((bundled_data_dir() / "demo" / "2wiki_corpus.json").read_text(encoding="utf-8"))[:N_DOCS]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, corpus) -> Path:
    from routerag.corpus.schema import Document
    from routerag.index.bundle import build_index

    directory = tmp_path_factory.mktemp("mcp-idx") / "bundle"
    build_index([Document.make(r["title"], r["text"]) for r in corpus], directory, components=("bm25",))
    return directory


def _env(**extra: str) -> dict[str, str]:
    src = str(ROOT / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


def _server_from_config(index_dir: Path, *extra: str) -> Any:
    """The snippet's client configuration, with this checkout's Python standing in for `routerag`."""
    from mcp import StdioServerParameters

    entry = json.loads((SNIPPETS / "mcp_config.json").read_text())["mcpServers"]["routerag"]
    assert entry["command"] == "routerag" and entry["args"][0] == "mcp"
    args = [str(index_dir) if arg == "/path/to/my-index" else arg for arg in entry["args"]]
    assert str(index_dir) in args
    return StdioServerParameters(command=sys.executable, args=["-m", "routerag.cli.main", *args, *extra],
                                 env=_env(**entry.get("env", {})))


def _over_stdio(index_dir: Path, body: Callable[[Any], Awaitable[None]]) -> None:
    from mcp import ClientSession, stdio_client

    async def run() -> None:
        with open(os.devnull, "w") as quiet:  # the server's stderr (its announcements)
            async with stdio_client(_server_from_config(index_dir), errlog=quiet) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await body(session)

    anyio.run(run)


def _error_text(result: Any) -> str:
    assert result.is_error, result
    return result.content[0].text


async def _check_tools(session: Any, corpus: list[dict[str, str]]) -> None:
    """What every transport must give: the four tools with their schemas, hits from the corpus,
    the source list, and refusals as error results that say why."""
    titles = {row["title"] for row in corpus}
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"search", "route", "ask", "list_sources"}
    search_schema = tools["search"].input_schema
    assert search_schema["required"] == ["query"]
    assert search_schema["properties"]["k"]["minimum"] == 1 and search_schema["properties"]["k"]["default"] == 5
    assert "bm25" in search_schema["properties"]["source"]["description"]
    assert tools["ask"].input_schema["properties"]["strategy"]["default"] == "routerag"
    assert tools["ask"].input_schema["required"] == ["question"]
    assert tools["list_sources"].input_schema["properties"] == {}
    assert "hits" in tools["search"].output_schema["properties"]

    result = await session.call_tool("search", {"query": corpus[3]["title"], "k": 3})
    assert not result.is_error, result.content
    found = result.structured_content
    assert found["source"] == "bm25" and 1 <= len(found["hits"]) <= 3
    assert found["hits"][0]["title"] == corpus[3]["title"]
    assert {hit["title"] for hit in found["hits"]} <= titles
    assert {"title", "text", "score", "source"} <= set(found["hits"][0])

    listed = (await session.call_tool("list_sources", {})).structured_content
    assert listed["default"] == "bm25" and listed["documents"] == N_DOCS
    assert [(s["name"], s["mode"]) for s in listed["sources"]] == [("bm25", "bm25")]
    assert f"over {N_DOCS} passages" in listed["sources"][0]["profile"]

    message = _error_text(await session.call_tool("search", {"query": "film", "source": "graph"}))
    assert "unknown source 'graph'; mounted: bm25" in message
    message = _error_text(await session.call_tool("search", {"query": "film", "k": 0}))
    assert message == "search: k: must be ≥ 1"
    message = _error_text(await session.call_tool("search", {"query": "   "}))
    assert "the query is empty" in message
    message = _error_text(await session.call_tool("ask", {"question": "Who?", "strategy": "no-such-strategy"}))
    assert "unknown strategy 'no-such-strategy'" in message
    message = _error_text(await session.call_tool("ask", {"question": "Who?", "strategy": "vanilla",
                                                          "params": {"source": "graph"}}))
    assert "params.source: unknown source 'graph'" in message
    message = _error_text(await session.call_tool("ask", {"question": "Who?", "strategy": "vanilla",
                                                          "params": {"k": "three"}}))
    assert "invalid params for strategy 'vanilla'" in message


@pytest.mark.integration
def test_stdio_tools(index_dir, corpus) -> None:
    async def body(session: Any) -> None:
        await _check_tools(session, corpus)

    _over_stdio(index_dir, body)


class _RawStdio:
    """``routerag mcp`` over stdio driven line by line (for what the SDK's client cannot send)."""

    def __init__(self, index_dir: Path, *args: str, **env: str) -> None:
        command = [sys.executable, "-m", "routerag.cli.main", "mcp", str(index_dir), *args]
        self.proc = subprocess.Popen(command, env=_env(**env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.exchange(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}))
        self.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def send(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
        self.proc.stdin.flush()

    def exchange(self, line: str | bytes) -> dict[str, Any]:
        self.send(line)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        assert ready, f"no reply to {line!r}"
        return json.loads(self.proc.stdout.readline())

    def close(self, timeout_s: float = 60) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.mark.integration
def test_stdio_answers_a_malformed_request_with_an_error(index_dir) -> None:
    """A lone surrogate is not JSON text to the SDK's parser: the request still gets an answer
    (an error with its id), and the server goes on serving."""
    stdio = _RawStdio(index_dir)
    try:
        surrogate = stdio.exchange(b'{"jsonrpc":"2.0","id":2,"method":"tools/call",'
                                   b'"params":{"name":"search","arguments":{"query":"\\ud800"}}}')
        garbage = stdio.exchange("this is not json")
        ping = stdio.exchange('{"jsonrpc":"2.0","id":3,"method":"ping"}')
    finally:
        stdio.close()
    assert surrogate["id"] == 2 and surrogate["error"]["code"] == -32600
    assert "malformed message" in surrogate["error"]["message"]
    assert garbage["id"] is None and garbage["error"]["code"] == -32700
    assert ping == {"jsonrpc": "2.0", "id": 3, "result": {}}


def _slow_ask(index_dir: Path, tmp_path: Path) -> tuple[_RawStdio, Callable[[], int]]:
    """A stdio server whose model takes 0.25 s a call, with an ask under way (16 thoughts, then a
    reader call: 17 model calls when nothing stops it) that has made two calls; and the call count."""
    calls = tmp_path / "calls"

    def count() -> int:
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    stdio = _RawStdio(index_dir, "--set", "model.backend=mcp_slow_backend:from_config", MCP_SLOW_CALLS=str(calls),
                      PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    ask = {"question": "Where was the film made?", "strategy": "ircot",
           "params": {"source": "bm25", "k": 1, "max_steps": 16}}
    stdio.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask", "arguments": ask}}))
    deadline = time.monotonic() + 60
    while count() < 2:
        if time.monotonic() > deadline or stdio.proc.poll() is not None:
            stdio.close()
            raise AssertionError("the ask did not start")
        time.sleep(0.05)
    return stdio, count


@pytest.mark.integration
def test_stdio_ask_stops_when_its_client_goes_away(index_dir, tmp_path) -> None:
    """The client closes stdin while an ask runs: the run stops at its next model call and the
    server exits, instead of making every call first."""
    stdio, count = _slow_ask(index_dir, tmp_path)
    at_close = count()
    stdio.close()
    assert count() - at_close <= 1 and count() < 17, (at_close, count())


@pytest.mark.integration
def test_stdio_ask_stops_when_its_client_cancels_it(index_dir, tmp_path) -> None:
    """``notifications/cancelled`` for a running ask: it stops at its next model call, and the
    server answers the next request at once."""
    stdio, count = _slow_ask(index_dir, tmp_path)
    try:
        stdio.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": 1, "reason": "the user gave up"}}))
        at_cancel = count()
        time.sleep(0.25 * 8)  # an ask left running would make 8 more calls meanwhile
        later = count()
        started = time.monotonic()
        listed = stdio.exchange('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_sources","arguments":{}}}')
        assert listed["id"] == 2 and time.monotonic() - started < 5  # the cancelled ask was never answered
    finally:
        stdio.close()
    assert later - at_cancel <= 1, (at_cancel, later)


@pytest.mark.integration
def test_an_unknown_prompt_or_method_logs_one_line(index_dir, tmp_path) -> None:
    from mcp import ClientSession, stdio_client
    from mcp.shared.exceptions import MCPError

    codes: list[int] = []

    async def run() -> None:
        with (tmp_path / "stderr.log").open("w") as log:
            async with stdio_client(_server_from_config(index_dir), errlog=log) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    for _ in range(2):
                        with pytest.raises(MCPError) as refused:
                            await session.get_prompt("no-such-prompt")
                        codes.append(refused.value.error.code)

    anyio.run(run)
    logged = (tmp_path / "stderr.log").read_text(errors="replace")
    assert codes == [-32602, -32602]  # invalid params: the name is not a prompt of this server
    lines = [line for line in logged.splitlines() if "prompt" in line.lower()]
    assert lines == ["routerag mcp: prompts/get refused (-32602): Unknown prompt: no-such-prompt"] * 2, logged
    assert "Traceback" not in logged and "╭" not in logged


@pytest.mark.integration
@pytest.mark.model
def test_stdio_ask_with_the_bundled_model(index_dir, corpus) -> None:
    """One real answer: vanilla over BM25 with the bundled 0.5B (loaded on this first ask)."""
    seen: dict[str, Any] = {}

    async def body(session: Any) -> None:
        result = await session.call_tool("ask", {"question": f"What is {corpus[3]['title']}?", "strategy": "vanilla",
                                                 "params": {"source": "bm25", "k": 2, "max_tokens": 16}})
        assert not result.is_error, result.content
        seen.update(result.structured_content)

    _over_stdio(index_dir, body)
    assert seen["strategy"] == "vanilla" and seen["error"] is None and seen["answer"].strip()
    [search] = seen["searches"]
    assert search["sources"] == ["bm25"] and search["titles"][0] == corpus[3]["title"] and len(search["titles"]) == 2
    assert [hit["title"] for hit in search["hits"]] == search["titles"] and search["hits"][0]["text"]
    assert seen["prompt_tokens"] > 0 and 0 < seen["completion_tokens"] <= 16 and seen["latency_ms"] > 0
    assert seen["model"] == "bundled:qwen2.5-coder-0.5b"


def _start_http(index_dir: Path, log: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    command = [sys.executable, "-m", "routerag.cli.main", "mcp", str(index_dir), "--transport", "http", "--port", "0", *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=_env(MCP_TEST_KEY="k3y-for-tests"), stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = re.search(r"at (http://127\.0\.0\.1:\d+/mcp) ", log.read_text(errors="replace"))
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"the server did not start:\n{log.read_text(errors='replace')}")


@pytest.mark.service
def test_streamable_http_with_an_api_key(index_dir, corpus, tmp_path) -> None:
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    proc, url = _start_http(index_dir, tmp_path / "server.log", "--api-key-env", "MCP_TEST_KEY")
    try:
        async def run() -> None:
            async with create_mcp_http_client(headers={"Authorization": "Bearer k3y-for-tests"}) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        await _check_tools(session, corpus)

        anyio.run(run)
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        accept = {"Accept": "application/json, text/event-stream"}
        for headers in ({}, {"X-API-Key": "wrong"}):
            refused = httpx.post(url, json=ping, headers={**accept, **headers}, timeout=10)
            assert refused.status_code == 401, refused.text
        assert httpx.get(url, headers=accept, timeout=10).status_code == 401  # the event stream needs the key too
        rebound = httpx.post(url, json=ping, headers={**accept, "X-API-Key": "k3y-for-tests", "Host": "evil.example"},
                             timeout=10)
        assert rebound.status_code == 400 and "Host" in rebound.json()["detail"]
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.service
def test_streamable_http_closes_a_connection_whose_headers_are_late(index_dir, tmp_path) -> None:
    """The connection limits of `routerag serve`: a client that never finishes its headers is
    disconnected after ``security.header_timeout_s``."""
    import socket
    from urllib.parse import urlsplit

    proc, url = _start_http(index_dir, tmp_path / "server.log", "--set", "security.header_timeout_s=1")
    try:
        where = urlsplit(url)
        slow = [socket.create_connection((where.hostname, where.port), timeout=10) for _ in range(5)]
        for sock in slow:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the rest
        time.sleep(2.5)
        for sock in slow:
            sock.settimeout(5)
            assert sock.recv(1024) == b""  # closed by the server
            sock.close()
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.integration
def test_client_snippet_runs(index_dir, corpus) -> None:
    query = corpus[5]["title"]
    done = subprocess.run([sys.executable, str(SNIPPETS / "mcp_client.py"), query], capture_output=True, text=True,
                          env=_env(ROUTERAG_INDEX=str(index_dir)), timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "tools: search, route, ask, list_sources"
    assert lines[1].startswith("3 hits from bm25 for ")
    assert lines[2].startswith(f"1. {query} (")


def test_exposed_http_needs_an_api_key(tmp_path) -> None:
    from typer.testing import CliRunner

    from routerag.cli.app import app
    from routerag.cli.main import _load

    _load()
    result = CliRunner().invoke(app, ["mcp", str(tmp_path), "--transport", "http", "--host", "0.0.0.0"])
    assert result.exit_code == 1
    assert "exposes the server beyond this machine; set an API key" in result.output
    result = CliRunner().invoke(app, ["mcp", str(tmp_path), "--transport", "carrier-pigeon"])
    assert result.exit_code == 1 and "transport" in result.output


def test_missing_sdk_names_the_extra(monkeypatch) -> None:
    from routerag.integrations import mcp_server

    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)  # what an environment without the SDK gives
    with pytest.raises(mcp_server.McpUnavailableError, match=re.escape("pip install 'routerag[integrations]'")):
        mcp_server._sdk()
