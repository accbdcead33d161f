"""The rollout environment over token ids, with the real tokenizer and real BM25 sources:
masks, segments, budget, repairs, and equality with the RouteRAG strategy's own trace."""

from __future__ import annotations

import sys

import pytest

from routerag.corpus.schema import Document
from routerag.llm.scripted import ScriptedModel
from routerag.runtime.base import StrategyContext
from routerag.strategies.prompts import FORCE_ANSWER, INVALID_ACTION
from routerag.strategies.routerag import RouteRAG
from routerag.train.env import EnvConfig, HFCodec, RouteRAGEnv
from routerag.train.fixtures import bm25_sourceset

DOCS = [
    Document.make("Polish-Russian War (film)", "Polish-Russian War is a 2009 Polish film directed by Xawery Zulawski."),
    Document.make("Xawery Zulawski", "Xawery Zulawski is the son of actress Malgorzata Braunek and director Andrzej Zulawski."),
    Document.make("Paris", "Paris is the capital of France."),
]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("env-sources")
    return bm25_sourceset({"passage": DOCS, "graph": DOCS[:2], "hybrid": DOCS}, root)


def scripted(codec, outputs, logprob=-0.25):
    """A token-level policy that replays texts (each call returns the next one's token ids)."""
    queue = list(outputs)
    calls = []

    def generate(prompt_ids, stops, max_new):
        calls.append((list(prompt_ids), list(stops), max_new))
        ids = codec.encode(queue.pop(0))[:max_new]
        return ids, [logprob] * len(ids)

    generate.calls = calls
    return generate


def test_multi_turn_episode_masks_and_segments(tokenizer, sources):
    codec = HFCodec(tokenizer)
    env = RouteRAGEnv(sources, codec, EnvConfig(k=2, max_turns=3))
    outputs = ["<think> first the director </think>\n<search> [passage] director Polish-Russian War </search>",
               "<think> now his mother </think>\n<search> [graph] Xawery Zulawski mother </search>",
               "<answer> Malgorzata Braunek </answer>"]
    gen = scripted(codec, outputs)
    r = env.rollout("Who is the mother of the director of film Polish-Russian War?", gen)
    assert r.finished == "answer" and r.trace.answer == "Malgorzata Braunek"
    assert len(r.completion_ids) == len(r.env_mask) == len(r.logprobs)
    # model tokens are exactly the generated ids; observation tokens have mask 0 and logprob 0
    model_ids = [t for t, m in zip(r.completion_ids, r.env_mask) if m == 1]
    assert model_ids == sum((codec.encode(o) for o in outputs), [])
    assert all(lp == 0.0 for lp, m in zip(r.logprobs, r.env_mask) if m == 0)
    assert all(lp == -0.25 for lp, m in zip(r.logprobs, r.env_mask) if m == 1)
    # each generation call sees prompt + everything so far
    assert gen.calls[1][0] == r.prompt_ids + r.completion_ids[: len(gen.calls[1][0]) - len(r.prompt_ids)]
    assert gen.calls[0][1] == ["</search>", "</answer>"]
    # segments rebuild the decoded completion, observations are the evidence blocks
    kinds = [s.kind for s in r.trace.segments]
    assert kinds == ["prompt", "model", "observation", "model", "observation", "model"]
    assert codec.decode(r.completion_ids) == "".join(s.text for s in r.trace.segments[1:])
    obs = [s.text for s in r.trace.segments if s.kind == "observation"]
    assert obs == [st.observation for st in r.trace.search_steps]
    assert "Xawery Zulawski" in obs[0] and "Malgorzata Braunek" in obs[1]
    # retrieval really went to the chosen sources; cost recorded
    assert [st.sources for st in r.trace.search_steps] == [["passage"], ["graph"]]
    assert r.cost.retrieval_turns == 2 and r.cost.by_mode == {"passage": 1, "graph": 1}
    assert r.cost.mode_cost == 1.0 + 3.0 and r.cost.retrieval_ms > 0
    assert [st.route.mode for st in r.trace.search_steps] == ["passage", "graph"]


def test_same_trace_as_the_routerag_strategy(tokenizer, sources):
    """The environment and the evaluated strategy parse and route identically."""
    outputs = ["<search> [graph][passage] director </search>", "no action here", "<search> Paris </search>",
               "<answer> Paris </answer>"]
    codec = HFCodec(tokenizer)
    env = RouteRAGEnv(sources, codec, EnvConfig(k=2, max_turns=4))
    r = env.rollout("Q?", scripted(codec, outputs))
    strategy = RouteRAG(StrategyContext(model=ScriptedModel(outputs), sources=sources), {"k": 2, "max_turns": 4}).run("Q?")
    assert strategy.error is None
    fields = ("kind", "query", "sources", "format_error", "answer", "observation", "route")
    assert [[getattr(s, f) for f in fields] for s in r.trace.steps] == [[getattr(s, f) for f in fields] for s in strategy.steps]
    assert r.trace.answer == strategy.answer == "Paris"
    assert [s.kind for s in r.trace.steps] == ["search", "format_error", "search", "answer"]
    assert r.trace.steps[0].sources == ["hybrid"] and r.trace.steps[2].format_error == "missing_mode"
    assert INVALID_ACTION in [s.text for s in r.trace.segments if s.kind == "observation"]


def test_budget_forces_an_answer_and_unclosed_tags_are_closed_by_the_env(tokenizer, sources):
    codec = HFCodec(tokenizer)
    env = RouteRAGEnv(sources, codec, EnvConfig(k=1, max_turns=1))
    gen = scripted(codec, ["<search> [passage] capital of France", " Paris </answer>"])
    r = env.rollout("What is the capital of France?", gen)
    assert r.finished == "forced" and r.trace.answer == "Paris"
    assert r.trace.steps[0].format_error == "unclosed_search"
    obs = [s.text for s in r.trace.segments if s.kind == "observation"]
    # neighbouring observation pieces merge into one segment: close tag + evidence + cue
    assert len(obs) == 1 and obs[0].startswith("</search>\n\n<information>") and obs[0].endswith(FORCE_ANSWER)
    assert gen.calls[1][1] == ["</answer>"]
    assert r.trace.steps[-1].forced and "no_answer_within_budget" in r.trace.steps[-1].format_error


def test_completion_budget_truncates(tokenizer, sources):
    codec = HFCodec(tokenizer)
    env = RouteRAGEnv(sources, codec, EnvConfig(k=3, max_turns=4, max_completion_tokens=40, max_observation_tokens=16))
    gen = scripted(codec, ["<search> [passage] Paris </search>"] * 4 + ["x"])
    r = env.rollout("Q?", gen)
    assert r.truncated and r.finished == "truncated" and r.trace.answer == ""
    assert len(r.completion_ids) <= 40 + 16
    assert all(call[2] <= 40 for call in gen.calls)


def test_top_hit_reader_and_prefix(tokenizer, sources):
    codec = HFCodec(tokenizer, chat_template=False)
    cfg = EnvConfig(k=1, max_turns=1, allowed_modes=["passage", "graph"], reader="top_hit_title",
                    prompt_template="Question: {question}\n", assistant_prefix="<search> [")
    env = RouteRAGEnv(sources, codec, cfg)
    r = env.rollout("Who directed Polish-Russian War?", scripted(codec, ["passage] </search>"]))
    assert r.prompt_ids == codec.encode("Question: Who directed Polish-Russian War?\n<search> [")
    assert r.trace.steps[0].query == "Who directed Polish-Russian War?"  # empty query -> the question
    assert r.trace.answer == "Polish-Russian War (film)" and r.finished == "forced"
    assert sum(r.env_mask) == len(codec.encode("passage] </search>"))


def test_config_checks(tokenizer, sources):
    with pytest.raises(ValueError):
        EnvConfig(allowed_modes=["graph"], mode_sources={"passage": "passage"})
    with pytest.raises(ValueError, match="not mounted"):
        RouteRAGEnv(sources, HFCodec(tokenizer), EnvConfig(mode_sources={"passage": "nope", "graph": "graph", "hybrid": "hybrid"}))


def test_env_does_not_import_trl():
    import subprocess

    code = "import sys, routerag.train.env, routerag.train.rewards; print('trl' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "False"


def test_strict_modes_makes_an_untagged_search_invalid(tokenizer, sources):
    codec = HFCodec(tokenizer, chat_template=False)
    cfg = EnvConfig(k=1, max_turns=1, allowed_modes=["passage", "graph"], reader="top_hit_title",
                    prompt_template="Question: {question}\n", assistant_prefix="<search> [", strict_modes=True)
    env = RouteRAGEnv(sources, codec, cfg)
    r = env.rollout("Who directed Polish-Russian War?", scripted(codec, ["pass] </search>"]))
    assert r.trace.steps[0].kind == "format_error" and "unknown_mode:pass" in r.trace.steps[0].format_error
    assert r.trace.retrieval_turns == 0 and r.trace.answer == ""
    ok = env.rollout("Who directed Polish-Russian War?", scripted(codec, ["passage] </search>"]))
    assert ok.trace.retrieval_turns == 1 and ok.trace.answer == "Polish-Russian War (film)"


def test_a_cut_observation_keeps_its_closing_tag(tokenizer):
    from routerag.strategies.prompts import information_block
    from routerag.trace import Hit
    from routerag.train.env import cut_observation

    codec = HFCodec(tokenizer)
    hits = [Hit(doc_id=str(i), title=f"Doc {i}", text="word " * 200, score=1.0, source="passage", mode="passage", rank=i + 1)
            for i in range(3)]
    text = information_block(hits)
    ids = cut_observation(codec, text, 120)
    cut = codec.decode(ids)
    assert len(ids) <= 120 and len(codec.encode(text)) > 120
    assert cut.startswith("\n\n<information>") and cut.endswith(" ...\n</information>\n\n")
    assert cut_observation(codec, "no tags here " * 50, 10) == codec.encode("no tags here " * 50)[:10]
    short = information_block(hits[:1])
    assert codec.decode(cut_observation(codec, short, 10_000)) == short  # nothing to cut


PARITY_EPISODES = [
    # searches with every tag form, an invalid turn, a missing mode, the answer
    (4, ["<search> [graph][passage] director </search>", "no action here", "<search> Paris </search>",
         "<answer> Paris </answer>"]),
    # an unclosed search closed by the engine, then the budget spent: the forced answer
    (1, ["<think> look </think>\n<search> [passage] capital of France", " Paris </answer>"]),
    # an empty answer is an invalid turn; a forced answer left unclosed
    (2, ["<answer> </answer>", "<search> [graph] Xawery Zulawski mother </search>", " Malgorzata Braunek"]),
    # no budget at all: straight to the forced answer
    (0, [" Paris </answer>"]),
]


@pytest.mark.parametrize(("budget", "outputs"), PARITY_EPISODES)
def test_evaluation_and_training_run_the_same_engine(tokenizer, sources, budget, outputs):
    """By construction (one engine, two ports) the episode is the same in evaluation and training:
    every step field but the chat port's accounting (model calls, timings), and every segment
    after the prompt; the step observer sees the same steps."""
    from routerag.episode.engine import run_episode
    from routerag.episode.ports import ChatPolicy
    from routerag.llm.base import GenerationParams, Message
    from routerag.strategies.prompts import routerag_prompt
    from routerag.trace import Trace

    codec = HFCodec(tokenizer)
    env = RouteRAGEnv(sources, codec, EnvConfig(k=2, max_turns=budget))
    r = env.rollout("Q?", scripted(codec, outputs))
    ctx = StrategyContext(model=ScriptedModel(outputs), sources=sources)
    strategy = RouteRAG(ctx, {"k": 2, "max_turns": budget}).run("Q?")
    # the strategy's episode, rerun by hand through the engine with the environment's rules
    seen = []
    trace = Trace(question="Q?", strategy="routerag")
    policy = ChatPolicy(StrategyContext(model=ScriptedModel(outputs), sources=sources),
                        [Message(role="user", content=routerag_prompt("Q?"))], GenerationParams(max_tokens=512))
    rules = env.episode("Q?").rules  # the strategy's own rules, as the environment builds them
    episode = run_episode(ctx, trace, policy, rules, seen.append)
    assert strategy.error is None and episode.finish == r.finished
    assert seen == trace.steps and [s.index for s in seen] == list(range(len(seen)))

    def comparable(step):
        return step.model_dump(exclude={"model_calls", "latency_ms", "retrieval_ms"})

    assert [comparable(s) for s in r.trace.steps] == [comparable(s) for s in strategy.steps]
    assert [comparable(s) for s in trace.steps] == [comparable(s) for s in strategy.steps]
    assert [s.model_dump() for s in r.trace.segments[1:]] == [s.model_dump() for s in strategy.segments[1:]]
    assert r.trace.answer == strategy.answer == trace.answer
    assert all(s.model_calls for s in strategy.steps)  # the chat port accounts every call in its step
    assert not any(s.model_calls for s in r.trace.steps)  # the token port accounts in the Rollout
