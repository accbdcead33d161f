"""routerag as a LangChain retriever: the top hits for a question, from a local index or a
retrieval server.

    ROUTERAG_INDEX=my-index python langchain_retriever.py "Who was Teutberga married to?"
    ROUTERAG_RETRIEVAL_URL=http://127.0.0.1:8765 python langchain_retriever.py "Lothair II"

ROUTERAG_MODE picks the source (default passage; bm25, graph, hybrid, triples), ROUTERAG_K the
number of hits, ROUTERAG_API_KEY the server's key. Needs ``pip install 'routerag[integrations]'``."""

import os
import sys

from routerag.integrations.langchain import RouteragRetriever

question = " ".join(sys.argv[1:]) or "Who was Teutberga married to?"
mode, k = os.environ.get("ROUTERAG_MODE", "passage"), int(os.environ.get("ROUTERAG_K", "5"))
if os.environ.get("ROUTERAG_RETRIEVAL_URL"):
    retriever = RouteragRetriever.from_url(os.environ["ROUTERAG_RETRIEVAL_URL"], mode=mode, k=k,
                                           api_key=os.environ.get("ROUTERAG_API_KEY"))
elif os.environ.get("ROUTERAG_INDEX"):
    retriever = RouteragRetriever.from_index(os.environ["ROUTERAG_INDEX"], mode=mode, k=k)
else:
    sys.exit("set ROUTERAG_INDEX (an index directory) or ROUTERAG_RETRIEVAL_URL (a routerag serve-retrieval server)")

for doc in retriever.invoke(question):
    meta = doc.metadata
    print(f"{meta['rank']}. {meta['title']} ({meta['source']}, score {meta['score']:.3f}): {doc.page_content[:100]}")
