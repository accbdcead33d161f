"""Connect to `routerag mcp` over stdio with the MCP Python SDK, list its tools and search.

    ROUTERAG_INDEX=my-index python mcp_client.py "who directed The Cascaders?"

The server is started as `python -m routerag.cli.main mcp $ROUTERAG_INDEX` with this Python (the
same as the `routerag mcp` command); it gets this environment (ROUTERAG_* settings included)."""

import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client


async def main(index: str, query: str) -> None:
    server = StdioServerParameters(command=sys.executable, args=["-m", "routerag.cli.main", "mcp", index],
                                   env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        print("tools:", ", ".join(tool.name for tool in tools.tools))
        result = await session.call_tool("search", {"query": query, "k": 3})
        if result.is_error:
            raise SystemExit(f"search failed: {result.content[0].text}")
        found = result.structured_content or {}
        print(f"{len(found['hits'])} hits from {found['source']} for {query!r}:")
        for hit in found["hits"]:
            print(f"{hit['rank']}. {hit['title']} ({hit['score']:.3f}): {hit['text'][:100]}")


if __name__ == "__main__":
    anyio.run(main, os.environ["ROUTERAG_INDEX"], " ".join(sys.argv[1:]) or "Who directed the film?")
