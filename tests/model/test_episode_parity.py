"""Train/eval parity per tag strategy: the rollout environment built from (strategy name, params)
and the strategy itself run one episode under identical rules, with identical prompts,
observations, steps and answers for the same scripted model outputs.

The evaluated side is the strategy over a scripted chat model (the chat port); the trained side
is :class:`~routerag.train.env.RolloutEnv` over the real tokenizer replaying the same texts as
token ids (the token port). Parsing, planning, retrieval (BM25 over in-test documents) and
rendering are the real code."""

from __future__ import annotations

import functools

import pytest

from routerag.corpus.schema import Document
from routerag.llm.scripted import ScriptedModel
from routerag.protocol.graphrag_r1_tags import DOCUMENTS_OPEN, GRAPHRAG_R1_SYSTEM
from routerag.protocol.routerag_tags import INFORMATION_OPEN
from routerag.runtime.base import StrategyContext
from routerag.strategies.agentic import tag_strategy
from routerag.train.env import EnvConfig, HFCodec, RolloutEnv
from routerag.train.fixtures import bm25_sourceset

Q = "Who is the mother of the director of film Polish-Russian War?"
DOCS = [
    Document.make("Polish-Russian War (film)", "Polish-Russian War is a 2009 Polish film directed by Xawery Zulawski."),
    Document.make("Xawery Zulawski", "Xawery Zulawski is the son of actress Malgorzata Braunek and director Andrzej Zulawski."),
    Document.make("Paris", "Paris is the capital of France."),
]

CASES = {
    # RouteRAG with every rule training used to set alone: a prefilled <think>, strict mode tags, own prices
    "routerag": (
        {"k": 2, "max_turns": 3, "assistant_prefix": "<think>", "strict_modes": True,
         "mode_cost": {"passage": 2.0, "graph": 5.0, "hybrid": 7.0}, "prompt_template": "Q: {question}\nA:"},
        [" the director first </think>\n<search> [passage] director Polish-Russian War </search>",
         "<think> no tag </think>\n<search> Xawery mother </search>",  # strict: refused, no retrieval
         "<think> his mother </think>\n<search> [graph] Xawery Zulawski mother </search>",
         " Malgorzata Braunek </answer>"],  # the budget is spent: the forced answer
        INFORMATION_OPEN,
    ),
    "routerag-passage": (
        {"k": 1, "max_turns": 2, "few_shot": True},
        ["<search> [graph] Polish-Russian War director </search>", "<answer> Xawery Zulawski </answer>"],
        INFORMATION_OPEN,
    ),
    "graphrag-r1": (
        {"evidence": "text1+graph10", "max_turns": 2},
        ["<think> who directed </think><|begin_of_query|> Polish-Russian War director<|end_of_query|>",
         "I am not sure.",  # no action: the GraphRAG-R1 invalid-action repair
         "Malgorzata Braunek </answer>"],
        DOCUMENTS_OPEN,
    ),
}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("parity-sources")
    return bm25_sourceset({"passage": DOCS, "graph": DOCS[:2], "hybrid": DOCS, "triples": DOCS[:2]}, root)


def replay(codec, outputs):
    """A token-level policy replaying texts (each call returns the next one's token ids)."""
    queue = list(outputs)

    def generate(prompt_ids, stops, max_new):
        ids = codec.encode(queue.pop(0))[:max_new]
        return ids, [-0.25] * len(ids)

    return generate


def describe(rules) -> dict:
    """Rules as comparable values: callables by what they are and what they hold."""

    def part(obj):
        if isinstance(obj, functools.partial):
            return (obj.func, obj.args, obj.keywords)
        if hasattr(obj, "params"):  # a planner or renderer object over the strategy's params
            return (type(obj), obj.params.model_dump())
        if hasattr(obj, "graph_source"):
            return (type(obj), obj.graph_source)
        return obj

    return {name: part(getattr(rules, name)) for name in rules.__dataclass_fields__}


def comparable(step) -> dict:
    return step.model_dump(exclude={"model_calls", "latency_ms", "retrieval_ms"})  # the chat port's accounting


@pytest.mark.parametrize("name", list(CASES))
def test_training_runs_the_episode_the_strategy_evaluates(name, tokenizer, sources):
    params, outputs, evidence_open = CASES[name]
    codec = HFCodec(tokenizer, chat_template=False)
    env = RolloutEnv(sources, codec, EnvConfig(strategy=name, params=params, max_observation_tokens=16384))
    strategy_cls = tag_strategy(name)
    strategy = strategy_cls(StrategyContext(model=ScriptedModel(outputs), sources=sources), params)
    assert env.params == strategy.params  # the same typed Params, defaults included

    evaluated = strategy_cls.episode(strategy.params, Q)
    trained = env.episode(Q)
    assert describe(trained.rules) == describe(evaluated.rules)
    assert trained.messages == evaluated.messages

    rollout = env.rollout(Q, replay(codec, outputs))
    trace = strategy.run(Q)
    assert trace.error is None and rollout.trace.answer == trace.answer != ""
    assert rollout.finished == ("forced" if trace.steps[-1].forced else "answer")
    # the same prompt, observations and model text, segment for segment
    assert [s.model_dump() for s in rollout.trace.segments] == [s.model_dump() for s in trace.segments]
    assert evidence_open in "".join(s.text for s in trace.segments if s.kind == "observation")
    # the same steps: queries, routes, hits, charges, repairs, format errors, the answer
    assert [comparable(s) for s in rollout.trace.steps] == [comparable(s) for s in trace.steps]
    assert rollout.cost.retrieval_turns == trace.retrieval_turns > 0


def test_graphrag_r1_trains_with_its_system_prompt_through_the_chat_template(tokenizer, sources):
    env = RolloutEnv(sources, HFCodec(tokenizer), EnvConfig(strategy="graphrag-r1"))
    text = env.prompt_text(Q)
    assert GRAPHRAG_R1_SYSTEM in text and text.index(GRAPHRAG_R1_SYSTEM) < text.index(Q)
    assert text == tokenizer.apply_chat_template(
        [{"role": "system", "content": GRAPHRAG_R1_SYSTEM}, {"role": "user", "content": Q}], tokenize=False, add_generation_prompt=True)
    assert env.user_prompt(Q) == Q
    r = env.rollout(Q, replay(env.codec, ["<|begin_of_query|> Xawery Zulawski<|end_of_query|>", "<answer> x </answer>"]))
    assert r.trace.strategy == "graphrag-r1" and r.trace.search_steps[0].sources == ["passage", "triples"]
    assert r.cost.by_mode == {"passage+triples": 1}
