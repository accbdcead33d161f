"""Prompt texts and evidence renderings of the strategies, in one place.

Texts taken from the papers and their public releases are marked with their source; the rest
is ours. Renderers turn hits into exactly the text the model is shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# GraphRAG-R1's texts and the RouteRAG protocol's renderers and grammar live in the protocol modules
from routerag.protocol.graphrag_r1_tags import GRAPHRAG_R1_INVALID as GRAPHRAG_R1_INVALID
from routerag.protocol.graphrag_r1_tags import GRAPHRAG_R1_SYSTEM as GRAPHRAG_R1_SYSTEM
from routerag.protocol.graphrag_r1_tags import graph_and_text_block as graph_and_text_block
from routerag.protocol.routerag_tags import format_docs as format_docs
from routerag.protocol.routerag_tags import information_block as information_block
from routerag.protocol.routerag_tags import routerag_grammar as routerag_grammar
from routerag.trace import Hit

# ---------------------------------------------------------------- evidence renderings


def wikipedia_docs(hits: Sequence[Hit]) -> str:
    """IRCoT's document format (as in FlashRAG): ``Wikipedia Title: t\\ntext`` blocks."""
    return "".join(f"Wikipedia Title: {h.title}\n{h.text}\n\n" for h in hits)


# ---------------------------------------------------------------- RouteRAG (PilotRAG)

# RouteRAG's policy prompt (Guo et al., 2025, Table 7; as released in github.com/YucanGuo/RouteRAG):
# the Search-R1 prompt extended with retrieval-mode tags inside <search>.
ROUTERAG_PROMPT = """Answer the given question. \
You must conduct reasoning inside <think> and </think> first every time you get new information. \
After reasoning, if you find you lack some knowledge, you can call a search engine using the following strict format:
1. You MUST first decide which retrieval mode to use (both modes will return relevant documents, but use different retrieval methods):
   - Use [passage] to find documents using semantic similarity-based dense retrieval
   - Use [graph] to find documents through graph-based retrieval, which performs retrieval on a structured knowledge graph constructed from documents using fact ranking and graph reasoning
   - You can combine them as [graph][passage] to get documents from both retrieval methods
2. Then formulate your specific search query based on what information you need
3. Finally, wrap everything in <search> and </search> tags
For example:
- Using dense retrieval: <search> [passage] the capital of France </search>
- Using graph-based retrieval: <search> [graph] the capital of France </search>
- Using both methods: <search> [graph][passage] the capital of France </search>
The search results (relevant documents) will be returned between <information> and </information> tags. \
You can search as many times as you want. \
If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, \
without detailed illustrations. For example, <answer> Paris </answer>.{examples} Question: {question}
"""

# Our exemplar (few_shot=True): one two-hop episode in the protocol, evidence abridged.
ROUTERAG_EXAMPLE = """

Here is an example of the format:
Question: Who is the mother of the director of film Polish-Russian War?
<think> I need the director of Polish-Russian War first. </think>
<search> [passage] director of the film Polish-Russian War </search>

<information>Doc 1(Title: Polish-Russian War (film)) Polish-Russian War is a 2009 Polish film directed by Xawery Żuławski.
</information>

<think> The director is Xawery Żuławski. Now I need his mother; relations between people suit the graph. </think>
<search> [graph] Xawery Żuławski mother </search>

<information>Doc 1(Title: Xawery Żuławski) Xawery Żuławski is the son of actress Małgorzata Braunek and director Andrzej Żuławski.
</information>

<think> His mother is Małgorzata Braunek. </think>
<answer> Małgorzata Braunek </answer>
"""

# Search-R1's observation for an output with no valid action (Jin et al., 2025; also used by RouteRAG).
INVALID_ACTION = (
    "\nMy previous action is invalid. "
    "If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again.\n"
)

FORCE_ANSWER = "\n\nThe search budget is used up. Now give the answer in <answer></answer>.\n<answer>"


def routerag_prompt(question: str, few_shot: bool = False) -> str:
    return ROUTERAG_PROMPT.format(question=question, examples=ROUTERAG_EXAMPLE if few_shot else "")


# ---------------------------------------------------------------- GraphRAG-R1: routerag.protocol.graphrag_r1_tags

# ---------------------------------------------------------------- R1-Router

# R1-Router (Peng et al., 2025) step prompts, byte for byte as they appear in its released Step-GRPO
# trajectories (``r1router/stepgrpo_valid.jsonl``; typos included, a stray leading quote dropped: the released model was trained
# on them); the retriever list is filled in from Params.
R1_ROUTER_RET_SYSTEM = """You are a professional question decomposition expert for multi-hop QA systems. \
Your task is to decompose complex questions into **strictly single-hop** sub-questions and select appropriate retrievers.

**Strict Output Format:**
<think>
[Analyze the original question and determine the next required sub-question. Do NOT reveal answers or perform multi-hop reasoning.]
</think>
<sub-question>
[Exactly ONE single-hop question one time. If no further information is needed to answer the origin question, write 'None'.]
</sub-question>
<ret> 
[Choose 1 retriever from: {names}. Write 'None' if <sub-question> is 'None'.]
</ret>

### Critical Rules:
1. **Atomic Sub-question Definition**:
   - A sub-question is "atomic" only if: 
     a) It cannot be further decomposed into simpler questions
     b) It requires exactly **one retrieval action** to answer
     c) Does NOT depend on answers to previous sub-questions
     d) It can be helpful to answer the origin question
   - Example: ❌ "Find the capital and population of France" → ✅ Split into two sub-questions

2. **Retriever Selection Guidelines**:
{guidelines}

3. **Strict Prohibitions**:
   - Never combine multiple questions in <sub-question>
   - Never mention retrieved content in <think>
   - Never select retrievers for non-atomic questions



"""

R1_ROUTER_GUIDELINES = {
    "Text Retriever": 'For non-visual commonsense knowledge (e.g., "Define photosynthesis")',
    "Text Image Retriever": 'When sub-question explicitly references visual elements (e.g., "Describe the painting style of...")',
    "Table Retriever": 'For numerical/statistical queries (e.g., "GDP of Japan in 2020")',
}

R1_ROUTER_STEP_ANSWER_SYSTEM = """You are a professional question answering model. \
Your task is to carefully think through the question based on the information retrieved and then provide the final answer.

Strict Output Format: 
<think> 
[Analyze the original question and the retrieved information. Break down the reasoning process step by step. Do NOT provide the final answer yet.] 
</think> 
<answer> 
[Provide the final answer based solely on the retrieved information.]
</answer>
"""

R1_ROUTER_FINAL_SYSTEM = """You are a professional question answering model. \
Your task is to carefully think through the question based on the sub-quetsions and its answers and then provide the final answer.

Strict Output Format: 
<think> 
[Analyze the original question and sub-questions with its answers. Break down the reasoning process step by step. Do NOT provide the final answer yet.] 
</think> 
<answer> 
[Provide the final answer based solely on the information before.]
</answer>
"""


def r1_router_ret_system(retrievers: Mapping[str, str]) -> str:
    """The decomposition prompt listing the configured retrievers; ``retrievers`` maps each name
    to a guideline (a source profile when R1-Router has none for it)."""
    # byte-exact with the released prompt (whose first entry alone has a space before the newline)
    guidelines = "\n".join(
        f"   - `{name}`:{' ' if i == 0 else ''}\n     - {text}" for i, (name, text) in enumerate(retrievers.items())
    )
    return R1_ROUTER_RET_SYSTEM.format(names=", ".join(retrievers), guidelines=guidelines)


def r1_router_history(question: str, steps: Sequence[tuple[str, str]]) -> str:
    lines = [f"Origin question: {question}"]
    for i, (sub, answer) in enumerate(steps, start=1):
        lines += [f"Sub-question{i}: {sub}", f"Answer{i}: {answer}"]
    return "\n".join(lines) + "\n"


def r1_router_evidence(question: str, blocks: Sequence[tuple[str, Sequence[Hit]]], legend: Mapping[str, str]) -> str:
    """The intermediate-answer prompt: hits labelled ``<abbr>-<i>`` (``ter-0`` = Text Retriever)."""
    legend_text = ", ".join(f"`{abbr}` means this info is from {name.lower()}" for name, abbr in legend.items())
    lines = [f"{abbr}-{i}: {h.title} {h.text}".strip() for abbr, hits in blocks for i, h in enumerate(hits)]
    return (
        f"According to the related information searched, {legend_text}:"
        + "\n".join(lines)
        + f"\n\n\n Give me the answer(with the format <answer></answer>) to the Question: {question}"
    )


def r1_router_final(question: str, steps: Sequence[tuple[str, str]]) -> str:
    return r1_router_history(question, steps) + f"Now, give me the final answer of the origin question: {question}"


# ---------------------------------------------------------------- baselines (FlashRAG-style)

# FlashRAG's default short-answer prompts (Jin et al., 2024, flashrag/prompt/base_prompt.py).
DIRECT_SYSTEM = "Answer the question based on your own knowledge. Only give me the answer and do not output any other words."
# direct, revision 1 and later: the closed-book reader asked for the answer alone, shown with six worked
# examples (general facts, none from a benchmark set; two yes/no, two choices answered with the
# first and with the second option, so that no answer position is taught).
DIRECT_SHORT_SYSTEM = (
    "Answer the question from your own knowledge. Reply with the answer alone, in as few words as possible: "
    "a name, a title, a place, a date, a number, or yes or no. Never write a sentence, never repeat the question, "
    "never explain."
)
DIRECT_SHORT_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("Who wrote the novel Nineteen Eighty-Four?", "George Orwell"),
    ("Are the Amazon and the Nile on the same continent?", "no"),
    ("Which city is farther north, Madrid or Oslo?", "Oslo"),
    ("When did the Berlin Wall fall?", "9 November 1989"),
    ("Was Isaac Newton or Albert Einstein born first?", "Isaac Newton"),
    ("Is Mount Everest taller than Mont Blanc?", "yes"),
)


def direct_short_system() -> str:
    """direct's instruction, revision 2: the worked examples shown inside it, as examples of the
    format. Revision 1 gave them as earlier user/assistant turns, and a model reads earlier turns
    as the conversation so far: a question that shares words with one ("Who wrote the book?") was
    answered with that example's answer ("George Orwell")."""
    examples = "\n".join(f"Question: {question}\nAnswer: {answer}" for question, answer in DIRECT_SHORT_EXAMPLES)
    return (f"{DIRECT_SHORT_SYSTEM}\n\nExamples of the format only; they are not part of the conversation and "
            f"say nothing about the question you are asked:\n{examples}")


def example_echo(answer: str, question: str) -> bool:
    """Whether ``answer`` is one of direct's worked examples' answers that the question does not
    name (yes / no excepted: they answer any yes-no question): the model copied an example."""
    norm = " ".join(answer.lower().split())
    if norm in ("", "yes", "no"):
        return False
    asked = " ".join(question.lower().split())
    return any(norm == example.lower() and example.lower() not in asked for _, example in DIRECT_SHORT_EXAMPLES)


def may_become_echo(answer: str, question: str) -> bool:
    """Whether a growing answer can still end as an :func:`example_echo` (so it is not streamed yet)."""
    norm = " ".join(answer.lower().split())
    asked = " ".join(question.lower().split())
    return any(example.lower().startswith(norm) and example.lower() not in asked
               for _, example in DIRECT_SHORT_EXAMPLES if example not in ("yes", "no"))


# FlashRAG's standard RAG prompt (PromptTemplate.base_system_prompt in flashrag/prompt/base_prompt.py),
# in the system role as FlashRAG sends it, with the reference block in its format (format_docs); the space
# FlashRAG's string concatenation drops ("document.Only") is kept, and a blank line, not one newline,
# comes before the documents' heading.
RAG_SYSTEM = (
    "Answer the question based on the given document. Only give me the answer and do not output any other words."
    "\n\nThe following are given documents.\n\n{reference}"
)

# IRCoT (Trivedi et al., 2023). The instruction as FlashRAG's IRCoT pipeline words it for chat models
# (flashrag/pipeline/active_pipeline.py); the demonstration is the first one of IRCoT's released
# 2WikiMultihopQA prompts (github.com/StonyBrookNLP/ircot, prompts/2wikimultihopqa/, the one FlashRAG
# shows too), abridged to its two gold paragraphs and one distractor, in the format of the question turn.
# Without a demonstration the 0.5B writes "So the answer is:" as its first thought (99 of 100 2Wiki
# questions under revision 1): the paper's method is few-shot, and the example shows fact sentences first.
IRCOT_INSTRUCTION = (
    "You serve as an intelligent assistant, adept at facilitating users through complex, multi-hop "
    "reasoning across multiple documents. This task is illustrated through demonstrations, each consisting "
    "of a document set paired with a relevant question and its multi-hop reasoning thoughts. Your task is "
    "to generate one thought for current step, DON'T generate the whole thoughts at once! If you reach what "
    'you believe to be the final step, start with "So the answer is:".'
)
IRCOT_DEMONSTRATION = (
    "Wikipedia Title: Satellite tournament\n"
    "A satellite tournament is either a minor tournament or event on a competitive sporting tour or one of a "
    "group of such tournaments that form a series played in the same country or region.\n\n"
    "Wikipedia Title: Kurram Garhi\n"
    "Kurram Garhi is a small village located near the city of Bannu, which is the part of Khyber Pakhtunkhwa "
    "province of Pakistan. Its population is approximately 35000.\n\n"
    "Wikipedia Title: Trojkrsti\n"
    "Trojkrsti is a village in Municipality of Prilep, Republic of Macedonia.\n\n"
    "Question: Are both Kurram Garhi and Trojkrsti located in the same country?\n"
    "Thought: Kurram Garhi is located in the country of Pakistan. Trojkrsti is located in the country of "
    "Republic of Macedonia. Thus, they are not in the same country. So the answer is: no."
)
IRCOT_SYSTEM = f"{IRCOT_INSTRUCTION}\n\n{IRCOT_DEMONSTRATION}"
IRCOT_ANSWER_MARK = "So the answer is:"
# A sentence that gives the answer: IRCoT's answer extractor (".* answer is:? (.*)") reads what
# follows "answer is", with or without the colon; "isn't" is not a mark.
ANSWER_MARK = re.compile(r"\banswer is\b\s*:?\s*(.*)", re.IGNORECASE | re.DOTALL)
# Where a generated sentence ends: one thought per step. Four strings, the most OpenAI's API takes.
SENTENCE_ENDS = (". ", ".\n", "? ", "! ")

# Iter-RetGen (Shao et al., 2023) generates a chain of thought each round (its Figure 1: "... So
# the answer is ..."), and that generation joins the next round's query. Ours: FlashRAG's reference
# block and short-answer wording, asked for reasoning sentences before the mark, with IRCoT's
# demonstration as the example of the format.
ITER_RETGEN_COT_SYSTEM = (
    "Answer the question based on the given documents. Reason step by step in a few short sentences, "
    'then write "So the answer is:" followed by the answer alone.'
    "\n\nAn example of the format:\n"
    "Question: Are both Kurram Garhi and Trojkrsti located in the same country?\n"
    "Answer: Kurram Garhi is located in the country of Pakistan. Trojkrsti is located in the country of "
    "Republic of Macedonia. Thus, they are not in the same country. So the answer is: no."
    "\n\nThe following are given documents.\n\n{reference}"
)


def question_user(question: str) -> str:
    return f"Question: {question}"


def ircot_user(question: str, hits: Sequence[Hit]) -> str:
    """IRCoT's question turn: the gathered documents, the question and the cue; the chain so far
    is the assistant's own turn, which the model continues (as FlashRAG sends it to chat models,
    and as IRCoT's prompt ends in ``A: <the chain so far>``)."""
    return f"{wikipedia_docs(hits)}Question: {question}\nThought:"
