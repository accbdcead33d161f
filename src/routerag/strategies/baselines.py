"""Baselines, each following its paper or FlashRAG's pipeline of it (short-answer prompts but for the
chains of thought of ``ircot`` and ``iter-retgen``):

* ``direct``      — no retrieval, answer from the model's own knowledge. Revision 3
  (``instruction="short"``, the default): the answer alone, asked for with worked examples shown
  inside the instruction (:func:`~routerag.strategies.prompts.direct_short_system`); an answer that
  is an example's answer the question does not name is asked again with FlashRAG's instruction
  (no examples), so no example's answer reaches an answer (revision 2 had the examples in the
  instruction and still echoed "George Orwell" on 18 of 250 evaluation questions; revision 1 gave
  them as earlier turns); revision 0's FlashRAG instruction (``instruction="flashrag"``) made the
  0.5B write whole sentences ("No, X and Y are not ...");
* ``vanilla``     — one retrieval of ``k`` passages for the question, then answer: FlashRAG's
  standard RAG pipeline (its base prompt, the documents in the system role; see ``RAG_SYSTEM``);
* ``ircot``       — IRCoT (Trivedi et al., 2023), as its released code and FlashRAG's IRCoT pipeline
  run it: retrieve with the question, then one reasoning sentence per step (generation stops at the
  first sentence end), each sentence appended to the chain, which is the assistant's own turn the
  model continues; a sentence that does not give the answer is the next query and its new documents
  join the gathered ones (at most ``max_docs``, IRCoT's 15); the chain stops at a sentence with
  "So the answer is:" (IRCoT's extractor: "answer is", colon optional), an empty sentence or
  ``max_steps`` sentences. The prompt is FlashRAG's IRCoT instruction with a demonstration from
  IRCoT's released 2WikiMultihopQA prompts. As in the paper, a separate QA reader then answers over
  all documents gathered (``reader="direct"``, a short-answer call); ``reader="chain"`` takes the
  chain's own words after the mark (FlashRAG's way). Revision 2; revision 1 asked without a
  demonstration, with the chain inside the question turn, and its 0.5B wrote "So the answer is:" as
  its first thought on 99 of 100 2Wiki questions (1.01 searches a question);
* ``iter-retgen`` — Iter-RetGen (Shao et al., 2023): ``iterations`` rounds of retrieving with the
  question plus the previous round's generation, then generating from that round's documents. As
  in the paper each generation is a chain of thought (``round_output="cot"``, revision 1), which
  carries the bridge entities into the next query, and the answer is read after its "So the answer
  is:" (a short-answer reader call when the last round gives no mark). ``round_output="answer"`` is
  FlashRAG's simplification and revision 0: a short answer each round, so the next query is the
  question plus that answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from routerag.llm.base import GenerationParams, Message
from routerag.runtime.answer_stream import call_answer
from routerag.runtime.loop import LoopStrategy, add_step, call_model, generated_text, record_exchange, retrieve_step
from routerag.runtime.parsing import clean_answer, clean_query, settled_clean_answer
from routerag.strategies.prompts import (
    ANSWER_MARK,
    DIRECT_SYSTEM,
    IRCOT_SYSTEM,
    ITER_RETGEN_COT_SYSTEM,
    RAG_SYSTEM,
    SENTENCE_ENDS,
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
    max_steps: int = Field(default=5, ge=1, le=16, description="reasoning sentences at most (one model call each, "
                           "and a retrieval after each that does not give the answer)")
    max_tokens: int = Field(default=128, ge=1, le=4096, description="tokens per sentence")
    max_docs: int = Field(default=15, ge=1, le=200, description="documents gathered at most (IRCoT's cap); "
                          "retrievals past it add none")
    max_query_chars: int = Field(default=300, ge=16, le=2000)
    reader: Literal["direct", "chain"] = Field(
        default="direct",
        description="final answer: a short-answer reader call over the gathered documents (the paper) "
        "or the chain's words after 'So the answer is:'",
    )


class IterRetGenParams(VanillaParams):
    iterations: int = Field(default=3, ge=1, le=10, description="retrieve-generate rounds")
    max_query_chars: int = Field(default=600, ge=16, le=2000)
    round_output: Literal["cot", "answer"] = Field(
        default="cot",
        description="cot: each round writes a chain of thought ending 'So the answer is:' (the paper; revision 1); "
        "answer: a short answer each round (FlashRAG's; revision 0)",
    )
    max_cot_tokens: int = Field(default=192, ge=1, le=4096, description="tokens of a chain-of-thought generation")


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


# A cut after one of these ("St. Helena", "J. K. Rowling") ends no sentence: the step goes on.
_ABBREVIATION = re.compile(r"(?:\b[A-Z]|\b(?:St|Mt|Ft|Mr|Mrs|Ms|Dr|Prof|Jr|Sr|Gen|Col|Capt|Lt|Rev|Co|Corp|Inc|Ltd|vs|etc))\.$")
_MAX_CONTINUATIONS = 2
_THOUGHT_CUE = re.compile(r"^thought\s*:\s*", re.IGNORECASE)


def chain_answer(text: str) -> str | None:
    """The answer a chain-of-thought text gives after its first "answer is" (None: no mark), as
    IRCoT's extractor reads it: the short answer, without the sentence's own full stop."""
    mark = ANSWER_MARK.search(text)
    if mark is None:
        return None
    answer = clean_answer(mark.group(1))
    if answer.endswith(".") and not _ABBREVIATION.search(answer):  # the sentence's full stop, not "U.S."'s
        answer = answer[:-1].rstrip()
    return answer


def settled_chain_answer(text: str) -> str:
    """The part of :func:`chain_answer` of a text still being generated that no continuation can
    change (what is streamed): nothing before the mark, and never a last full stop."""
    mark = ANSWER_MARK.search(text)
    if mark is None or not mark.group(1):
        return ""
    return settled_clean_answer(mark.group(1)).rstrip(". ")


def _add_new(pool: list[Hit], hits: Sequence[Hit], limit: int) -> None:
    seen = {h.doc_id for h in pool}
    for hit in hits:
        if len(pool) >= limit:
            return
        if hit.doc_id not in seen:
            seen.add(hit.doc_id)
            pool.append(hit)


def _calls(calls: Sequence[ModelCall]) -> dict[str, Any]:
    return {"model_calls": list(calls), "latency_ms": sum(c.latency_ms for c in calls)}


class IRCoT(LoopStrategy):
    name: ClassVar[str] = "ircot"
    Params: ClassVar[type[BaseModel]] = IRCoTParams
    # 1: the paper's separate QA reader answers (was the chain's sentence); 2: one sentence per step,
    # the chain continued as the assistant's turn, IRCoT's demonstration in the prompt, IRCoT's answer
    # extractor, at most max_docs documents
    revision: ClassVar[int] = 2
    params: IRCoTParams

    def next_sentence(self, trace: Trace, pool: Sequence[Hit], chain: str) -> tuple[str, str, list[ModelCall]]:
        """The chain's next sentence (empty: the model wrote none), the text generated for it and
        its model calls: generation stops at the first sentence end; a stop after an abbreviation
        ("St.") is continued, at most twice."""
        p = self.params
        params = p.generation(stop=list(SENTENCE_ENDS))
        system = Message(role="system", content=IRCOT_SYSTEM)
        user = Message(role="user", content=ircot_user(trace.question, pool))
        sentence, raw, calls = "", "", []
        for _ in range(1 + _MAX_CONTINUATIONS):
            so_far = f"{chain} {sentence}".strip()
            messages = [system, user] + ([Message(role="assistant", content=so_far)] if so_far else [])
            response, call = call_model(self.context, messages, params, "policy", continue_final=bool(so_far))
            record_exchange(trace, messages, generated_text(response))
            calls.append(call)
            raw += generated_text(response)
            piece = first_sentence(response.text + (response.stop_string or "").rstrip())
            if not sentence:  # a new sentence; the model may repeat the cue it answers
                piece = _THOUGHT_CUE.sub("", piece)
            sentence = f"{sentence} {piece}".strip()
            if not (piece and response.stop_string == ". " and _ABBREVIATION.search(sentence)):
                break
        return sentence, raw, calls

    def execute(self, trace: Trace) -> None:
        p = self.params
        pool: list[Hit] = []
        _add_new(pool, retrieve_step(self.context, trace, trace.question, [p.source], p.k, wikipedia_docs).hits, p.max_docs)
        sentences: list[str] = []
        ending = "no_answer_within_budget"  # the chain ended without the mark: the reader is forced
        for _ in range(p.max_steps):
            sentence, raw, calls = self.next_sentence(trace, pool, " ".join(sentences))
            if not sentence:  # IRCoT stops on an empty generation
                add_step(trace, "think", raw_output=raw, **_calls(calls))
                ending = "empty_thought"
                break
            sentences.append(sentence)
            answer = chain_answer(sentence)
            if answer is not None:
                if p.reader == "chain":
                    trace.answer = answer
                    add_step(trace, "answer", answer=answer, raw_output=raw, reasoning=" ".join(sentences), **_calls(calls))
                    return
                add_step(trace, "answer", answer=answer, raw_output=raw, reasoning=" ".join(sentences), intermediate=True,
                         **_calls(calls))  # the chain's own answer
                ending = ""
                break
            query, errors = clean_query(sentence, trace.question, p.max_query_chars)
            step = retrieve_step(self.context, trace, query, [p.source], p.k, wikipedia_docs, model_calls=calls,
                                 reasoning=sentence, raw_output=raw, format_error="; ".join(errors) or None)
            _add_new(pool, step.hits, p.max_docs)
        # the QA reader over every gathered document; without the mark it is forced (a format error)
        answer, raw, call = _answer(self, trace, pool, p.model_copy(update={"max_tokens": 64}))
        if ending:
            finish_answer(trace, answer, raw, call, format_error=ending, forced=ForcedAnswer())
        else:
            finish_answer(trace, answer, raw, call)


class IterRetGen(LoopStrategy):
    name: ClassVar[str] = "iter-retgen"
    Params: ClassVar[type[BaseModel]] = IterRetGenParams
    revision: ClassVar[int] = 1  # 1: a chain of thought each round, as in the paper (was a short answer)
    params: IterRetGenParams

    def execute(self, trace: Trace) -> None:
        p = self.params
        generation = ""
        for iteration in range(p.iterations):
            last = iteration == p.iterations - 1
            query, _ = clean_query(f"{trace.question} {generation}", trace.question, p.max_query_chars)
            step = retrieve_step(self.context, trace, query, [p.source], p.k, format_docs, iteration=iteration)
            if p.round_output == "answer":
                generation, raw, call = _answer(self, trace, step.hits, p, final=last)
                add_step(trace, "answer", answer=generation, raw_output=raw, model_calls=[call], latency_ms=call.latency_ms,
                         iteration=iteration, intermediate=not last)
                trace.answer = generation
                continue
            generation, answer = self.reason(trace, step.hits, iteration, last)
            if not last:
                continue
            if answer is not None:
                trace.answer = answer
            else:  # no mark in the last round: a short-answer reader over its documents
                reader_answer, raw, call = _answer(self, trace, step.hits, p)
                finish_answer(trace, reader_answer, raw, call, iteration=iteration, format_error="no_answer_mark",
                              forced=ForcedAnswer())

    def reason(self, trace: Trace, hits: Sequence[Hit], iteration: int, last: bool) -> tuple[str, str | None]:
        """One round's chain of thought over its documents: (the generation, whitespace collapsed,
        and the answer after its mark, None without one), recorded as an answer step."""
        p = self.params
        messages = [Message(role="system", content=ITER_RETGEN_COT_SYSTEM.format(reference=format_docs(hits))),
                    Message(role="user", content=question_user(trace.question))]
        params = GenerationParams(max_tokens=p.max_cot_tokens, temperature=p.temperature, stop=["\n\n"])
        if last:  # the run's answer streams as it is generated
            response, call = call_answer(self.context, messages, params, settled_chain_answer)
        else:
            response, call = call_model(self.context, messages, params, "answer")
        record_exchange(trace, messages, response.text)
        generation = " ".join(response.text.split())
        answer = chain_answer(response.text) or None  # a mark with nothing after it gives no answer
        add_step(trace, "answer", answer=answer or "", raw_output=response.text, reasoning=generation,
                 model_calls=[call], latency_ms=call.latency_ms, iteration=iteration,
                 intermediate=not last or answer is None)
        return generation, answer
