"""The GraphRAG-R1 protocol, in one place: its tags, prompt texts and observation format.

GraphRAG-R1 (Yu et al., 2025) adopts R1-Searcher's rollout-with-thinking format (Song et al.,
2025). One episode, as the policy writes it and the environment answers::

    <think> reasoning </think>
    <|begin_of_query|> keyword_1 keyword_2 <|end_of_query|>       (the policy)
    <|begin_of_documents|>
    Facts:
    (1) subject | relation | object
    Passages:
    Doc 1(Title: t) text
    <|end_of_documents|>                                          (the environment's observation)
    <think> ... </think>
    <answer> final answer </answer>

Used by the GraphRAG-R1 strategy (:mod:`routerag.strategies.graphrag_r1`) and, through it, the
training environment (:mod:`routerag.train.env`). Like :mod:`.routerag_tags`, this module imports
only pydantic-level types and :class:`routerag.trace.Hit`, so every layer can use it.
"""

from __future__ import annotations

from collections.abc import Sequence

from routerag.protocol.routerag_tags import TagProtocol, format_docs
from routerag.trace import Hit

QUERY_OPEN, QUERY_CLOSE = "<|begin_of_query|>", "<|end_of_query|>"
DOCUMENTS_OPEN, DOCUMENTS_CLOSE = "<|begin_of_documents|>", "<|end_of_documents|>"

# R1-Searcher's tags: its own search tags, Search-R1's <think> and <answer>
R1_SEARCHER = TagProtocol(search_open=QUERY_OPEN, search_close=QUERY_CLOSE)

# The system prompt of R1-Searcher, whose action format GraphRAG-R1 adopts; the evidence sentence
# is ours (GraphRAG-R1 returns facts and passages).
GRAPHRAG_R1_SYSTEM = """The User asks a question, and the Assistant solves it. \
The Assistant first thinks about the reasoning process in the mind and then provides the User with the final answer. \
The output format of reasoning process and final answer are enclosed within <think> </think> and <answer> </answer> tags, \
respectively, i.e., "<think> reasoning process here </think><answer> final answer here </answer>". \
During the thinking process, **the Assistant can perform searching** for uncertain knowledge if necessary with the format of \
"<|begin_of_query|> search query (only list keywords, such as "keyword_1 keyword_2 ...")<|end_of_query|>". \
**A query must involve only a single triple**. \
Then, the search system will provide the Assistant with the retrieval information with the format of \
"<|begin_of_documents|> ...search results... <|end_of_documents|>". \
The search results contain knowledge-graph facts (subject | relation | object) and passages."""

# the system prompt's placeholder query; the untrained 0.5B copied it into 28% of its 2Wiki searches
GRAPHRAG_R1_INSTRUCTIONS = ('search query (only list keywords, such as "keyword_1 keyword_2 ...")',)

GRAPHRAG_R1_INVALID = (
    "\nMy previous action is invalid. If I want to search, I should write the query between "
    f"{QUERY_OPEN} and {QUERY_CLOSE}. If I want to give the final answer, I should put it "
    "between <answer> and </answer>. Let me try again.\n"
)


def render_query(query: str) -> str:
    """``<|begin_of_query|> query <|end_of_query|>``: one search of the policy."""
    return f"{QUERY_OPEN} {query} {QUERY_CLOSE}"


def graph_and_text_block(facts: Sequence[Hit], passages: Sequence[Hit]) -> str:
    """GraphRAG-R1 observation: facts first, then passages, inside the documents tags."""
    parts: list[str] = []
    if facts:
        parts.append("Facts:\n" + "".join(f"({i}) {h.text}\n" for i, h in enumerate(facts, start=1)))
    if passages:
        parts.append("Passages:\n" + format_docs(passages))
    body = "\n".join(parts) or "No results.\n"
    return f"\n\n{DOCUMENTS_OPEN}\n{body}{DOCUMENTS_CLOSE}\n\n"
