"""Ask a running `routerag serve` through LangChain and keep the provenance: which searches ran and
which passages the answer came from.

    ROUTERAG_URL=http://127.0.0.1:8700 ROUTERAG_API_KEY=... python langchain_trace.py "Who was Teutberga married to?"

RouteragChatModel is LangChain's ChatOpenAI that also keeps routerag's trace (plain ChatOpenAI
drops it): in reply.response_metadata["routerag"], streamed replies included."""

import os
import sys

from routerag.integrations.langchain_chat import RouteragChatModel, trace_documents, trace_of

llm = RouteragChatModel(base_url=os.environ.get("ROUTERAG_URL", "http://127.0.0.1:8700") + "/v1",
                        api_key=os.environ.get("ROUTERAG_API_KEY") or "no-key",
                        model=os.environ.get("ROUTERAG_MODEL", "vanilla"))
question = sys.argv[1] if len(sys.argv) > 1 else "When did Lothair II's mother die?"
reply = llm.invoke(question)
print(reply.content)
trace = trace_of(reply)  # a routerag.trace.Trace
for step in trace.steps:
    print(f"step {step.index} {step.kind}: {step.query or ''} -> {len(step.hits)} hits from {', '.join(step.sources)}",
          file=sys.stderr)
for document in trace_documents(reply):  # every passage the run retrieved, as LangChain Documents
    print(f"  [{document.metadata['source']}] {document.metadata['title']}", file=sys.stderr)
