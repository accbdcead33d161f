"""Ask a running `routerag serve` through LangChain's ChatOpenAI.

    ROUTERAG_URL=http://127.0.0.1:8700 ROUTERAG_API_KEY=... python langchain_chat.py "Who was Teutberga married to?"

Any LangChain chain or agent that takes a chat model can use routerag this way; the model name
picks the strategy (GET /v1/models lists them)."""

import os
import sys

from langchain_openai import ChatOpenAI

llm = ChatOpenAI(base_url=os.environ.get("ROUTERAG_URL", "http://127.0.0.1:8700") + "/v1",
                 api_key=os.environ.get("ROUTERAG_API_KEY") or "no-key",
                 model=os.environ.get("ROUTERAG_MODEL", "vanilla"))
question = sys.argv[1] if len(sys.argv) > 1 else "When did Lothair II's mother die?"
print(llm.invoke(question).content)
