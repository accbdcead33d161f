"""routerag's routers inside LangChain and LlamaIndex: each question routed across the modes of an
index, then searched where the router sent it.

    ROUTERAG_INDEX=my-index python routing_retrievers.py "Who was Teutberga married to?"

ROUTERAG_ROUTER names the router (default learned, the shipped mode router; profile-embedding;
keyword with the rules file ROUTERAG_ROUTER_RULES; a plugin), ROUTERAG_K the number of hits.
Needs ``pip install 'routerag[integrations]'``."""

import os
import sys

from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import RouterRetriever
from llama_index.core.tools import RetrieverTool

from routerag.integrations.langchain import RouteragRoutingRetriever
from routerag.integrations.llamaindex import RouteragLlamaRetriever, RouteragRoutingLlamaRetriever, RouteragSelector

question = " ".join(sys.argv[1:]) or "Who was Teutberga married to?"
index, k = os.environ["ROUTERAG_INDEX"], int(os.environ.get("ROUTERAG_K", "3"))
router, rules = os.environ.get("ROUTERAG_ROUTER", "learned"), os.environ.get("ROUTERAG_ROUTER_RULES")

# LangChain: a retriever that routes; every document carries the decision in metadata["route"]
docs = RouteragRoutingRetriever.from_index(index, router, rules=rules, k=k).invoke(question)
route = docs[0].metadata["route"]
print(f"langchain: {route['router']} chose {route['choice']} of {route['ranked']}: {route['reason']}")
for doc in docs:
    print(f"  {doc.metadata['rank']}. {doc.metadata['title']} ({doc.metadata['source']}, {doc.metadata['score']:.3f})")

# LlamaIndex: the same as a retriever (nodes carry metadata["route"]) ...
routing = RouteragRoutingLlamaRetriever.from_index(index, router, rules=rules, k=k)
nodes = routing.retrieve(question)
print(f"llamaindex: {nodes[0].node.metadata['route']['choice']}: {[n.node.metadata['title'] for n in nodes]}")

# ... or as the selector of LlamaIndex's own RouterRetriever, over one tool per mode (no LLM call)
tools = [RetrieverTool.from_defaults(RouteragLlamaRetriever(routing.sources.get(name), k), name=name,
                                     description=routing.sources.get(name).profile)
         for name in routing.sources.names()]
selector = RouteragSelector(router, rules=rules)
chosen = selector.select([tool.metadata for tool in tools], question)
nodes = RouterRetriever(selector=selector, retriever_tools=tools, llm=MockLLM()).retrieve(question)
print(f"selector: {tools[chosen.ind].metadata.name} ({chosen.reason}): {[n.node.metadata['title'] for n in nodes]}")
