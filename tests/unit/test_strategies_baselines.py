"""Baselines: direct, vanilla, IRCoT and Iter-RetGen control flow with a scripted model."""

from __future__ import annotations

from routerag.llm.base import GenerationParams, Message
from routerag.runtime.base import strategy_retrieves, strategy_revision
from routerag.strategies import STRATEGIES
from routerag.strategies.baselines import (
    IRCoT,
    IRCoTParams,
    IterRetGen,
    IterRetGenParams,
    Vanilla,
    VanillaParams,
    chain_answer,
    settled_chain_answer,
)
from routerag.strategies.prompts import (
    DIRECT_SHORT_EXAMPLES,
    DIRECT_SHORT_SYSTEM,
    DIRECT_SYSTEM,
    IRCOT_SYSTEM,
    RAG_SYSTEM,
    SENTENCE_ENDS,
)
from routerag.trace import ForcedAnswer
from test_strategies_support import make_context

Q = "What is the capital of France?"


def test_direct_has_no_retrieval_and_asks_for_the_answer_alone():
    ctx, model, sources = make_context(["Answer: Paris\nbecause"], names=("passage",))
    direct = STRATEGIES.get("direct")
    trace = direct(ctx).run(Q)
    assert trace.answer == "Paris" and trace.retrieval_turns == 0 and not sources["passage"].queries
    messages = model.calls[0].messages
    # the worked examples are shown inside the instruction, as examples of the format: the call is
    # the instruction and the question, with no earlier turn a question could refer back to
    assert [m.role for m in messages] == ["system", "user"] and messages[-1].content == f"Question: {Q}"
    assert messages[0].content.startswith(DIRECT_SHORT_SYSTEM)
    for example, answer in DIRECT_SHORT_EXAMPLES:
        assert f"Question: {example}\nAnswer: {answer}\n" in messages[0].content + "\n"
    assert model.calls[0].params.stop == ["\n"]
    assert [s.kind for s in trace.segments] == ["prompt", "model"] and trace.model_calls[0].purpose == "answer"
    assert strategy_revision(direct) == 3 and strategy_retrieves(direct) is False
    assert strategy_retrieves(Vanilla) is True


def conversation_reader(messages: list[Message], params: GenerationParams, continue_final: bool) -> str:
    """A reader that, as a chat model does, resolves a question against the conversation: the
    reply to the earlier question that shares the most words with this one (two at least)."""
    asked = set(messages[-1].content.lower().split())
    replies = [(len(asked & set(m.content.lower().split())), messages[i + 1].content)
               for i, m in enumerate(messages[:-2]) if m.role == "user" and messages[i + 1].role == "assistant"]
    best = max(replies, default=(0, ""))
    return best[1] if best[0] >= 2 else "unknown"


def test_no_worked_example_reaches_an_answer():
    """A question about something the model was not told ("the book" of a context it lacks) is
    not answered with the worked example that shares its words: no example is a conversation turn."""
    ctx, model, _ = make_context(conversation_reader, names=("passage",))
    trace = STRATEGIES.get("direct")(ctx).run("Who wrote the book?")
    assert trace.answer == "unknown", model.calls[0].messages
    assert trace.answer not in {answer for _, answer in DIRECT_SHORT_EXAMPLES}
    assert not any(m.role == "assistant" for m in model.calls[0].messages)


def test_an_answer_that_echoes_a_worked_example_is_asked_again_without_the_examples():
    """The 0.5B copies an example's answer into answers ("George Orwell" for "Who wrote ...?")
    even from inside the instruction: such an answer is asked again with FlashRAG's instruction."""
    ctx, model, _ = make_context(["George Orwell", "Lewis Carroll"], names=("passage",))
    trace = STRATEGIES.get("direct")(ctx).run("Who wrote Alice's Adventures in Wonderland?")
    assert trace.answer == "Lewis Carroll" and len(model.calls) == 2
    assert [m.content for m in model.calls[1].messages][0] == DIRECT_SYSTEM
    echoed = [s for s in trace.steps if s.kind == "answer" and s.intermediate]
    assert [s.answer for s in echoed] == ["George Orwell"]


def test_an_example_answer_the_question_names_or_a_yes_is_kept():
    for question, reply in [("Which city is farther north, Madrid or Oslo?", "Oslo"), ("Is Paris in France?", "yes")]:
        ctx, model, _ = make_context([reply], names=("passage",))
        trace = STRATEGIES.get("direct")(ctx).run(question)
        assert trace.answer == reply and len(model.calls) == 1


def test_a_streamed_direct_answer_never_sends_an_echoed_example():
    from routerag.strategies.prompts import may_become_echo

    assert may_become_echo("George", "Who wrote it?") and not may_become_echo("George W", "Who wrote it?")
    assert not may_become_echo("Oslo", "Madrid or Oslo?")
    sent: list[str] = []
    ctx, model, _ = make_context(["George Orwell", "Lewis Carroll"], names=("passage",))
    ctx.on_answer = sent.append
    trace = STRATEGIES.get("direct")(ctx).run("Who wrote Alice's Adventures in Wonderland?")
    assert trace.answer == "Lewis Carroll" and "Orwell" not in "".join(sent)


def test_direct_flashrag_instruction_is_revision_0s_prompt():
    ctx, model, _ = make_context(["Paris"], names=("passage",))
    STRATEGIES.get("direct")(ctx, {"instruction": "flashrag"}).run(Q)
    assert [m.content for m in model.calls[0].messages] == [DIRECT_SYSTEM, f"Question: {Q}"]


def test_vanilla_retrieves_once_and_shows_the_documents():
    ctx, model, sources = make_context(["Paris"], names=("passage", "bm25"))
    trace = Vanilla(ctx, VanillaParams(k=2, source="bm25")).run(Q)
    assert trace.answer == "Paris" and [s.kind for s in trace.steps] == ["search", "answer"]
    assert sources["bm25"].queries == [Q] and not sources["passage"].queries
    assert len(trace.steps[0].hits) == 2
    assert "Doc 1(Title: Paris) Paris is the capital of France." in model.calls[0].messages[0].content
    assert trace.steps[0].observation in model.calls[0].messages[0].content


MOTHER_Q = "Who is the mother of the director of Polish-Russian War?"


def test_ircot_searches_once_per_sentence_until_the_answer_mark():
    """One sentence per step (generation stops at the first sentence end), each the next query;
    the chain is the assistant's turn the model continues; the mark ends it, the reader answers."""
    ctx, model, sources = make_context(
        ["The film was directed by Xawery Zulawski. His mother is Malgorzata Braunek.",  # one sentence kept
         "Xawery Zulawski is the son of Malgorzata Braunek.",
         "So the answer is: Malgorzata Braunek.", "Malgorzata Braunek"],
        names=("passage",),
    )
    trace = IRCoT(ctx, IRCoTParams(k=2)).run(MOTHER_Q)
    assert trace.error is None and trace.answer == "Malgorzata Braunek"
    assert sources["passage"].queries == [
        MOTHER_Q,
        "The film was directed by Xawery Zulawski.",  # the first sentence only
        "Xawery Zulawski is the son of Malgorzata Braunek.",
    ]
    assert trace.retrieval_turns == 3 and len(model.calls) == 4
    assert [s.kind for s in trace.steps] == ["search", "search", "search", "answer", "answer"]
    chain, reader = trace.steps[-2:]
    # the chain's sentence is kept as an intermediate answer; the paper's QA reader gives the answer
    assert chain.answer == "Malgorzata Braunek" and chain.intermediate is True
    assert chain.reasoning == ("The film was directed by Xawery Zulawski. Xawery Zulawski is the son of Malgorzata Braunek. "
                               "So the answer is: Malgorzata Braunek.")
    assert not reader.intermediate and reader.forced is None and reader.model_calls[0].purpose == "answer"
    thoughts = model.calls[:3]
    assert all(c.params.stop == list(SENTENCE_ENDS) for c in thoughts)
    assert all(c.messages[0].content == IRCOT_SYSTEM for c in thoughts)
    assert "So the answer is: no." in IRCOT_SYSTEM and "Wikipedia Title: Trojkrsti" in IRCOT_SYSTEM  # the demonstration
    # the first sentence answers the question turn; later ones continue the chain as the assistant's turn
    assert [m.role for m in thoughts[0].messages] == ["system", "user"] and not thoughts[0].continue_final
    assert thoughts[0].messages[1].content.endswith(f"Question: {MOTHER_Q}\nThought:")
    assert thoughts[2].continue_final and thoughts[2].messages[-1] == Message(
        role="assistant",
        content="The film was directed by Xawery Zulawski. Xawery Zulawski is the son of Malgorzata Braunek.")
    assert thoughts[2].messages[1].content.count("Wikipedia Title: Xawery Zulawski") == 1  # documents accumulate once
    assert [s.reasoning for s in trace.steps[1:3]] == sources["passage"].queries[1:]
    reader_system = model.calls[3].messages[0].content  # the reader sees every gathered document once
    assert reader_system.count("Xawery Zulawski)") == 1 and model.calls[3].messages[1].content == f"Question: {MOTHER_Q}"


def test_ircot_respects_its_step_limit_and_document_cap():
    """A chain that never gives the answer: max_steps sentences, a search after each, then a forced
    reader over at most max_docs documents."""
    thoughts = ["Paris is a city.", "Berlin is a city.", "Berlin is a city."]
    ctx, model, sources = make_context(lambda messages, params, cont: (thoughts + ["Paris"])[len(model.calls) - 1],
                                       names=("passage",))
    trace = IRCoT(ctx, IRCoTParams(k=2, max_steps=3, max_docs=3)).run(MOTHER_Q)
    assert trace.error is None and len(model.calls) == 3 + 1
    assert [c.purpose for c in trace.model_calls] == ["policy"] * 3 + ["answer"]
    assert sources["passage"].queries == [MOTHER_Q, *thoughts]
    assert trace.retrieval_turns == 4 and [s.kind for s in trace.steps] == ["search"] * 4 + ["answer"]
    assert model.calls[2].messages[-1].content == "Paris is a city. Berlin is a city."
    final = trace.steps[-1]
    assert final.format_error == "no_answer_within_budget" and final.forced == ForcedAnswer(reader="policy")
    assert len({h.doc_id for s in trace.steps for h in s.hits}) == 4
    assert model.calls[-1].messages[0].content.count("Doc ") == 3  # the cap, though the searches found 4 documents


def test_ircot_a_stop_after_an_abbreviation_continues_the_sentence():
    ctx, model, sources = make_context(
        ["Teutberga was born in St. Maurice. Then", " Maurice. Later", "So the answer is: St. Maurice.", " Maurice."],
        names=("passage",),
    )
    trace = IRCoT(ctx, IRCoTParams(k=1, reader="chain")).run("Where was Teutberga born?")
    assert sources["passage"].queries[1] == "Teutberga was born in St. Maurice."
    assert model.calls[1].continue_final and model.calls[1].messages[-1].content == "Teutberga was born in St."
    assert len(trace.steps[1].model_calls) == 2  # one sentence, two calls
    # the answer sentence, cut at "St.", is continued too: the chain's own answer is whole
    assert trace.answer == "St. Maurice" and len(model.calls) == 4 and trace.steps[-1].reasoning.endswith("St. Maurice.")


def test_ircot_reads_the_answer_mark_as_ircot_does():
    assert chain_answer("So the answer is: Paris.") == "Paris"
    assert chain_answer("So the answer is Paris.") == "Paris"  # the colon is optional
    assert chain_answer("Thus the answer is: the U.S.") == "the U.S."
    assert chain_answer("So the answer is: St. Maurice.") == "St. Maurice"
    assert chain_answer("The answer isn't in the documents.") is None
    assert chain_answer("Paris is the capital.") is None
    text = "Paris is the capital. So the answer is: Paris."
    for end in range(len(text) + 1):  # what streams is always a prefix of the answer
        assert "Paris".startswith(settled_chain_answer(text[:end]))


def test_ircot_a_repeated_thought_cue_is_not_part_of_the_sentence():
    ctx, model, sources = make_context(["Thought: Paris is in France.", "So the answer is: Paris.", "Paris"], names=("passage",))
    trace = IRCoT(ctx, IRCoTParams()).run(Q)
    assert sources["passage"].queries == [Q, "Paris is in France."] and trace.answer == "Paris"
    assert model.calls[1].messages[-1].content == "Paris is in France."


def test_ircot_an_empty_sentence_ends_the_chain():
    ctx, model, _ = make_context(["The film was directed by Xawery Zulawski.", "", "Malgorzata Braunek"], names=("passage",))
    trace = IRCoT(ctx, IRCoTParams()).run(MOTHER_Q)
    assert trace.answer == "Malgorzata Braunek" and len(model.calls) == 3 and trace.retrieval_turns == 2
    assert [s.kind for s in trace.steps] == ["search", "search", "think", "answer"]
    assert trace.steps[-1].format_error == "empty_thought" and trace.steps[-1].forced is not None


def test_ircot_chain_reader_takes_the_words_after_the_mark():
    ctx, model, _ = make_context(["So the answer is: Paris."], names=("passage",))
    trace = IRCoT(ctx, IRCoTParams(reader="chain")).run(Q)
    assert trace.answer == "Paris" and len(model.calls) == 1
    assert [s.kind for s in trace.steps] == ["search", "answer"]


def test_ircot_without_answer_mark_forces_a_final_answer():
    ctx, model, _ = make_context(["Thinking.", "Still thinking.", "Paris"], names=("passage",))
    trace = IRCoT(ctx, IRCoTParams(max_steps=2)).run(Q)
    assert trace.answer == "Paris" and len(model.calls) == 3
    assert trace.steps[-1].format_error == "no_answer_within_budget" and trace.steps[-1].forced == ForcedAnswer(reader="policy")
    assert trace.steps[-1].model_calls[0].purpose == "answer"


def test_iter_retgen_short_answers_query_with_the_previous_answer():
    ctx, model, sources = make_context(["Berlin", "Paris", "Paris"], names=("passage",))
    trace = IterRetGen(ctx, IterRetGenParams(iterations=3, k=1, round_output="answer")).run(Q)
    assert trace.answer == "Paris"
    assert sources["passage"].queries == [Q, f"{Q} Berlin", f"{Q} Paris"]
    assert [s.kind for s in trace.steps] == ["search", "answer"] * 3
    assert trace.retrieval_turns == 3 and len(trace.model_calls) == 3
    assert [s.intermediate for s in trace.steps if s.kind == "answer"] == [True, True, False]
    assert [s.iteration for s in trace.steps] == [0, 0, 1, 1, 2, 2]
    assert model.calls[0].messages[0].content.startswith(RAG_SYSTEM.split("{reference}")[0])


def test_iter_retgen_chains_of_thought_join_the_next_query():
    """The paper's rounds: each generation is a chain of thought, the next query is the question
    plus it, and the answer is read after the last round's mark."""
    first = "Berlin is the capital of Germany. So the answer is: Berlin."
    ctx, model, sources = make_context([first, "Paris is the capital of France. So the answer is: Paris."], names=("passage",))
    sent: list[str] = []
    ctx.on_answer = sent.append
    trace = IterRetGen(ctx, IterRetGenParams(iterations=2, k=1)).run(Q)
    assert trace.answer == "Paris" and trace.error is None
    assert sources["passage"].queries == [Q, f"{Q} {first}"]
    assert "So the answer is:" in model.calls[0].messages[0].content and model.calls[0].params.stop == ["\n\n"]
    answers = [s for s in trace.steps if s.kind == "answer"]
    assert [(s.answer, s.intermediate) for s in answers] == [("Berlin", True), ("Paris", False)]
    assert answers[0].reasoning == first
    assert "".join(sent) == "Paris"  # the last round's answer streamed, none of its reasoning


def test_iter_retgen_without_a_mark_in_the_last_round_asks_the_reader():
    ctx, model, _ = make_context(["Paris is the capital of France.", "Paris"], names=("passage",))
    trace = IterRetGen(ctx, IterRetGenParams(iterations=1)).run(Q)
    assert trace.answer == "Paris" and len(model.calls) == 2
    assert trace.steps[-1].format_error == "no_answer_mark" and trace.steps[-1].forced is not None
    assert model.calls[1].messages[0].content.startswith(RAG_SYSTEM.split("{reference}")[0])


def test_failures_are_recorded_not_raised():
    ctx, _, _ = make_context([], names=("passage",))
    for name in ("direct", "vanilla", "ircot", "iter-retgen"):
        trace = STRATEGIES.get(name)(ctx).run(Q)
        assert trace.error and trace.error.startswith("ModelError") and trace.strategy == name
