"""The episode engine's state machine and its two policy ports, with a scripted chat model, a
character-level codec (a test double of a tokenizer) and keyword sources."""

from __future__ import annotations

import dataclasses

import pytest

from routerag.episode.engine import EpisodeRules, State, run_episode
from routerag.episode.ports import ChatPolicy, TokenPolicy
from routerag.episode.segments import SegmentLog
from routerag.llm.base import GenerationParams, Message
from routerag.protocol.routerag_tags import SEARCH_R1, information_block
from routerag.strategies.prompts import FORCE_ANSWER, INVALID_ACTION
from routerag.strategies.routerag import ModeRouter, RouteRAGParams
from routerag.trace import ForcedAnswer, Trace
from test_strategies_support import make_context

P, G, T, V, F, X = State.PENDING, State.GENERATING, State.TOOL_CALLING, State.INVALID, State.FORCING, State.TERMINATED
Q = "Who is the mother of the director of film Polish-Russian War?"


class CharCodec:
    """One token per character: ids are code points."""

    def encode(self, text):
        return [ord(c) for c in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids)

    def render_prompt(self, user_text):
        return user_text


def rules(budget, **changes):
    base = EpisodeRules(protocol=SEARCH_R1, budget=budget, plan=ModeRouter(RouteRAGParams(k=1), Q), render=information_block,
                        invalid_message=INVALID_ACTION, force_answer=FORCE_ANSWER)
    return dataclasses.replace(base, **changes)


def chat_episode(outputs, budget, **changes):
    ctx, model, _ = make_context(outputs)
    trace = Trace(question=Q, strategy="test")
    seen = []
    policy = ChatPolicy(ctx, [Message(role="user", content="prompt")], GenerationParams(max_tokens=64))
    episode = run_episode(ctx, trace, policy, rules(budget, **changes), seen.append)
    return episode, trace, seen, model


def token_episode(outputs, budget, *, max_completion_tokens=10_000, max_observation_tokens=None, **changes):
    ctx, _, _ = make_context([])
    queue = list(outputs)

    def generate(ids, stops, max_new):
        out = [ord(c) for c in queue.pop(0)][:max_new]
        return out, [-0.5] * len(out)

    policy = TokenPolicy(CharCodec(), generate, "prompt", max_new_tokens=64, max_completion_tokens=max_completion_tokens,
                         max_observation_tokens=max_observation_tokens)
    trace = Trace(question=Q, strategy="test")
    return run_episode(ctx, trace, policy, rules(budget, **changes)), trace, policy


@pytest.mark.parametrize(("outputs", "budget", "states", "finish"), [
    (["<answer> x </answer>"], 3, [P, G, X], "answer"),
    (["<search> [passage] a </search>", "<answer> x </answer>"], 3, [P, G, T, G, X], "answer"),
    (["nothing", "<search> [graph] a </search>", "Braunek </answer>"], 2, [P, G, V, G, T, F, X], "forced"),
    (["x </answer>"], 0, [P, F, X], "forced"),
])
def test_states_visited(outputs, budget, states, finish):
    episode, trace, seen, _ = chat_episode(outputs, budget)
    assert episode.history == states and episode.finish == finish
    assert seen == trace.steps  # the step observer saw every step, as it was appended
    assert trace.segments is episode.log.segments


def test_chat_drops_text_after_the_action_and_tokens_keep_every_sampled_token():
    outputs = ["<search> [passage] mother <answer> trailing", "<answer> Braunek </answer>"]
    _, chat, _, model = chat_episode(outputs, 2)
    assert "trailing" not in "".join(s.text for s in chat.segments)
    assert "trailing" in chat.steps[0].raw_output and chat.steps[0].format_error == "unclosed_search; multiple_actions"
    assert model.calls[1].messages[-1].content.startswith("<search> [passage] mother </search>\n\n<information>")
    _, tokens, policy = token_episode(outputs, 2)
    model_text = "".join(chr(t) for t, m in zip(policy.completion, policy.mask) if m == 1)
    assert model_text == "".join(outputs)
    assert len(policy.completion) == len(policy.mask) == len(policy.logprobs)
    assert all(lp == (-0.5 if m else 0.0) for lp, m in zip(policy.logprobs, policy.mask))
    assert "".join(s.text for s in tokens.segments[1:]) == policy.codec.decode(policy.completion)


def test_observations_are_cut_by_the_token_port_only():
    _, trace, policy = token_episode(["<search> [passage] mother </search>", "nothing", "<answer> x </answer>"], 3,
                                     max_observation_tokens=40)
    obs = [s.text for s in trace.segments if s.kind == "observation"]
    assert len(obs[0]) <= 40 and obs[0].endswith(" ...\n</information>\n\n")
    assert trace.steps[0].observation != obs[0]  # the step keeps what the source returned
    assert obs[1] == INVALID_ACTION and len(INVALID_ACTION) > 40  # a repair is not evidence: never cut
    _, chat, _, _ = chat_episode(["<search> [passage] mother </search>", "<answer> x </answer>"], 2)
    assert [s.text for s in chat.segments if s.kind == "observation"][0] == chat.steps[0].observation  # chat: whole


def test_completion_room_truncates_before_a_turn_and_before_the_forced_answer():
    episode, trace, _ = token_episode(["<search> [passage] mother </search>"] * 3, 3, max_completion_tokens=30)
    assert episode.finish == "truncated" and episode.history[-2:] == [T, X]
    assert trace.answer == "" and all(s.kind == "search" for s in trace.steps)
    episode, trace, _ = token_episode(["nothing"], 1, max_completion_tokens=len("nothing") + len(INVALID_ACTION) + 5)
    assert episode.history == [P, G, V, F, X] and episode.finish == "truncated"
    assert trace.steps[-1].format_error == "truncated; empty_answer" and trace.steps[-1].forced == ForcedAnswer()


def test_prefix_is_parsed_with_the_first_turn_and_strict_modes_refuse_untagged_searches():
    episode, trace, _ = token_episode(["pass] q </search>", "<answer> x </answer>"], 2, prefix="<search> [", strict_modes=True)
    assert episode.history == [P, G, T, G, X]
    assert trace.steps[0].kind == "format_error" and "unknown_mode:pass" in trace.steps[0].format_error
    _, trace, _ = token_episode(["passage] q </search>", "<answer> x </answer>"], 2, prefix="<search> [", strict_modes=True)
    assert trace.steps[0].kind == "search" and trace.steps[0].query == "q"


def test_segments_merge_neighbours_of_one_kind():
    log = SegmentLog("p")
    for kind, text in [("model", "a"), ("model", "b"), ("observation", ""), ("observation", "c"), ("model", "d")]:
        log.add(kind, text)
    assert [(s.kind, s.text) for s in log.segments] == [("prompt", "p"), ("model", "ab"), ("observation", "c"), ("model", "d")]
