"""Baselines with FlashRAG-style short-answer prompts:

* ``direct``      — no retrieval, answer from the model's own knowledge. Revision 3
  (``instruction="short"``, the default): the answer alone, asked for with worked examples shown
  inside the instruction (:func:`~routerag.strategies.prompts.direct_short_system`); an answer that
  is an example's answer the question does not name is asked again with FlashRAG's instruction
  (no examples), so no example's answer reaches an answer (revision 2 had the examples in the
  instruction and still echoed "George Orwell" on 18 of 250 evaluation questions; revision 1 gave
  them as earlier turns); revision 0's FlashRAG instruction (``instruction="flashrag"``) made the
  0.5B write whole sentences ("No, X and Y are not ...");
* ``vanilla``     — one retrieval of ``k`` passages for the question, then answer;
* ``ircot``       — IRCoT (Trivedi et al., 2023): retrieve with the question, then each generated
  chain-of-thought sentence is the next query (new documents are added to the context), up to
  ``max_steps`` thoughts; the chain stops when a thought says "So the answer is:". As in the
  paper, a separate QA reader then answers over all documents gathered (``reader="direct"``, a
  short-answer call); ``reader="chain"`` takes the chain's own words after the mark (FlashRAG's
  simplification: a small model writes a whole sentence there);
* ``iter-retgen`` — Iter-RetGen (Shao et al., 2023): ``iterations`` rounds of retrieving with the
  question plus the previous generation, then generating.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from routerag.llm.base import GenerationParams, Message
from routerag.runtime.answer_stream import call_answer
from routerag.runtime.loop import LoopStrategy, add_step, call_model, record_exchange, retrieve_step
from routerag.runtime.parsing import clean_answer, clean_query, settled_clean_answer
from routerag.strategies.prompts import (
    DIRECT_SYSTEM,
    IRCOT_ANSWER_MARK,
    IRCOT_SYSTEM,
    RAG_SYSTEM,
    direct_short_system,
    example_echo,
    format_docs,
    ircot_user,
    may_become_echo,
    question_user,
    wikipedia_docs,
)
from routerag.trace import ForcedAnswer, Hit, ModelCall, Step, Trace


class DirectParams(BaseModel):
    max_tokens: int = Field(default=64, ge=1, le=4096, description="tokens of the answer")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)

    def generation(self, stop: Sequence[str] = ()) -> GenerationParams:
        return GenerationParams(max_tokens=self.max_tokens, temperature=self.temperature, stop=list(stop))


class ClosedBookParams(DirectParams):
    instruction: Literal["short", "flashrag"] = Field(
        default="short",
        description="short: the answer alone, with worked examples in the instruction (revision 2); flashrag: FlashRAG's "
        "'Only give me the answer' instruction (revision 0's prompt)",
    )


class VanillaParams(DirectParams):
    k: int = Field(default=5, ge=1, le=50, description="documents retrieved per query")
    source: str = Field(default="passage", description="mounted source to retrieve from")


class IRCoTParams(VanillaParams):
    k: int = Field(default=3, ge=1, le=50)
    max_steps: int = Field(default=5, ge=1, le=16, description="chain-of-thought sentences at most")
    max_tokens: int = Field(default=128, ge=1, le=4096, description="tokens per thought")
    max_query_chars: int = Field(default=300, ge=16, le=2000)
    reader: Literal["direct", "chain"] = Field(
        default="direct",
        description="final answer: a short-answer reader call over the gathered documents (the paper) "
        "or the chain's words after 'So the answer is:'",
    )


class IterRetGenParams(VanillaParams):
    iterations: int = Field(default=3, ge=1, le=10, description="retrieve-generate rounds")
    max_query_chars: int = Field(default=600, ge=16, le=2000)


def _answer(strategy: LoopStrategy, trace: Trace, hits: Sequence[Hit] | None, params: DirectParams, *,
            final: bool = True) -> tuple[str, str, ModelCall]:
    """One short-answer call, with the hits as FlashRAG's reference block (none: direct);
    ``final``: its answer is the run's, streamed as it is generated (``StrategyContext.on_answer``)."""
    system = DIRECT_SYSTEM if hits is None else RAG_SYSTEM.format(reference=format_docs(hits))
    messages = [Message(role="system", content=system), Message(role="user", content=question_user(trace.question))]
    if final:
        response, call = call_answer(strategy.context, messages, params.generation(), settled_clean_answer)
    else:
        response, call = call_model(strategy.context, messages, params.generation(), "answer")
    record_exchange(trace, messages, response.text)
    return clean_answer(response.text), response.text, call


def _closed_book_messages(question: str, instruction: str) -> list[Message]:
    if instruction == "flashrag":
        return [Message(role="system", content=DIRECT_SYSTEM), Message(role="user", content=question_user(question))]
    return [Message(role="system", content=direct_short_system()), Message(role="user", content=question_user(question))]


def finish_answer(trace: Trace, answer: str, raw: str, call: ModelCall, **fields) -> Step:
    """The answer of a one-call strategy: the trace's answer and its answer step."""
    trace.answer = answer
    return add_step(trace, "answer", answer=answer, raw_output=raw, model_calls=[call], latency_ms=call.latency_ms, **fields)


class Direct(LoopStrategy):
    name: ClassVar[str] = "direct"
    Params: ClassVar[type[BaseModel]] = ClosedBookParams
    # 1: the short-answer instruction with worked examples (was FlashRAG's); 2: the examples inside
    # the instruction, not as earlier turns (an example's answer leaked into answers); 3: an answer
    # that echoes an example is asked again without the examples
    revision: ClassVar[int] = 3
    retrieves: ClassVar[bool] = False
    params: ClosedBookParams

    def execute(self, trace: Trace) -> None:
        question = trace.question
        messages = _closed_book_messages(question, self.params.instruction)

        def settled(text: str) -> str:  # an answer that may still echo an example is held back
            answer = settled_clean_answer(text)
            return "" if may_become_echo(answer, question) else answer

        response, call = call_answer(self.context, messages, self.params.generation(stop=["\n"]), settled)
        record_exchange(trace, messages, response.text)
        answer = clean_answer(response.text)
        if self.params.instruction == "short" and example_echo(answer, question):
            add_step(trace, "answer", answer=answer, raw_output=response.text, model_calls=[call], latency_ms=call.latency_ms,
                     intermediate=True, reasoning="an example's answer, which the question does not name: asked again without the examples")
            messages = _closed_book_messages(question, "flashrag")
            response, call = call_answer(self.context, messages, self.params.generation(stop=["\n"]), settled_clean_answer)
            record_exchange(trace, messages, response.text)
            answer = clean_answer(response.text)
        finish_answer(trace, answer, response.text, call)


class Vanilla(LoopStrategy):
    name: ClassVar[str] = "vanilla"
    Params: ClassVar[type[BaseModel]] = VanillaParams
    params: VanillaParams

    def execute(self, trace: Trace) -> None:
        p = self.params
        step = retrieve_step(self.context, trace, trace.question, [p.source], p.k, format_docs)
        finish_answer(trace, *_answer(self, trace, step.hits, p))


def first_sentence(text: str) -> str:
    text = " ".join(text.split())
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text, maxsplit=1)
    return parts[0] if parts else ""


def _add_new(pool: list[Hit], hits: Sequence[Hit]) -> None:
    seen = {h.doc_id for h in pool}
    pool.extend(h for h in hits if h.doc_id not in seen)


class IRCoT(LoopStrategy):
    name: ClassVar[str] = "ircot"
    Params: ClassVar[type[BaseModel]] = IRCoTParams
    revision: ClassVar[int] = 1  # 1: the paper's separate QA reader answers (was the chain's sentence)
    params: IRCoTParams

    def execute(self, trace: Trace) -> None:
        p = self.params
        pool: list[Hit] = []
        _add_new(pool, retrieve_step(self.context, trace, trace.question, [p.source], p.k, wikipedia_docs).hits)
        thoughts: list[str] = []
        marked = False  # a thought said "So the answer is:"
        for _ in range(p.max_steps):
            messages = [Message(role="system", content=IRCOT_SYSTEM),
                        Message(role="user", content=ircot_user(trace.question, pool, thoughts))]
            response, call = call_model(self.context, messages, p.generation(stop=["\n"]), "policy")
            record_exchange(trace, messages, response.text)
            thought = first_sentence(response.text)
            thoughts.append(thought)
            at = thought.lower().find(IRCOT_ANSWER_MARK.lower())
            if at >= 0:
                answer = clean_answer(thought[at + len(IRCOT_ANSWER_MARK):])
                if answer.endswith(".") and "." not in answer[:-1]:  # the sentence's full stop
                    answer = answer[:-1]
                if p.reader == "chain":
                    finish_answer(trace, answer, response.text, call, reasoning=" ".join(thoughts))
                    return
                add_step(trace, "answer", answer=answer, raw_output=response.text, model_calls=[call], latency_ms=call.latency_ms,
                         reasoning=" ".join(thoughts), intermediate=True)  # the chain's own answer
                marked = True
                break
            query, errors = clean_query(thought, trace.question, p.max_query_chars)
            step = retrieve_step(self.context, trace, query, [p.source], p.k, wikipedia_docs, model_calls=[call],
                                 reasoning=thought, raw_output=response.text, format_error="; ".join(errors) or None)
            _add_new(pool, step.hits)
        # the QA reader over every gathered document; without the mark it is forced (a format error)
        answer, raw, call = _answer(self, trace, pool, p.model_copy(update={"max_tokens": 64}))
        if marked:
            finish_answer(trace, answer, raw, call)
        else:
            finish_answer(trace, answer, raw, call, format_error="no_answer_within_budget", forced=ForcedAnswer())


class IterRetGen(LoopStrategy):
    name: ClassVar[str] = "iter-retgen"
    Params: ClassVar[type[BaseModel]] = IterRetGenParams
    params: IterRetGenParams

    def execute(self, trace: Trace) -> None:
        p = self.params
        generation = ""
        for iteration in range(p.iterations):
            query, _ = clean_query(f"{trace.question} {generation}", trace.question, p.max_query_chars)
            step = retrieve_step(self.context, trace, query, [p.source], p.k, format_docs, iteration=iteration)
            generation, raw, call = _answer(self, trace, step.hits, p, final=iteration == p.iterations - 1)
            add_step(trace, "answer", answer=generation, raw_output=raw, model_calls=[call], latency_ms=call.latency_ms,
                     iteration=iteration, intermediate=iteration < p.iterations - 1)
        trace.answer = generation
