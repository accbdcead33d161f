"""The verl agent loop's verl-free parts against a real retrieval server: a fake async token
server (a test double of verl's ``server_manager``) replays policy texts; retrieval goes over HTTP
to ``create_retrieval_app`` serving real BM25 sources. Masks, routing, forced answer, max turns,
malformed output, concurrency, and the cost the reward recounts from the text."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import types

import pytest

from routerag.corpus.schema import Document, Question
from routerag.protocol.routerag_tags import INFORMATION_OPEN
from routerag.strategies.prompts import FORCE_ANSWER, INVALID_ACTION
from routerag.train.env import DEFAULT_MODE_COST, EnvConfig, HFCodec
from routerag.train.fixtures import bm25_sourceset
from routerag.train.rewards import trajectory_cost
from routerag.train.verl.agent_loop import (
    AgentLoopSettings,
    build_agent,
    episode_output,
    plain,
    question_of,
    server_sampling,
)
from routerag.train.verl.reward import compute_score_batch, episode_record

pytestmark = pytest.mark.service
DOCS = [
    Document.make("Polish-Russian War (film)", "Polish-Russian War is a 2009 Polish film directed by Xawery Zulawski."),
    Document.make("Xawery Zulawski", "Xawery Zulawski is the son of actress Malgorzata Braunek and director Andrzej Zulawski."),
    Document.make("Paris", "Paris is the capital of France."),
]
Q = Question(qid="q1", question="Who is the mother of the director of film Polish-Russian War?", answers=["Malgorzata Braunek"])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from routerag.edge.serving import BackgroundServer
    from routerag.server.retrieval_app import create_retrieval_app

    sources = bm25_sourceset({"passage": DOCS, "graph": DOCS[:2], "hybrid": DOCS}, tmp_path_factory.mktemp("verl-src"))
    with BackgroundServer(create_retrieval_app(sources)) as running:
        yield running


class FakeTokenServer:
    """Replays texts as token ids, one per call, after yielding to the event loop."""

    def __init__(self, codec, outputs, logprob=-0.5):
        self.codec, self.queue, self.logprob, self.calls = codec, list(outputs), logprob, []

    async def __call__(self, prompt_ids, stops, max_new):
        self.calls.append((len(prompt_ids), list(stops), max_new))
        await asyncio.sleep(0.001)
        ids = self.codec.encode(self.queue.pop(0))[:max_new]
        return ids, [self.logprob] * len(ids)


def agent_for(server, tokenizer, **env):
    settings = AgentLoopSettings(retrieval_url=server.url, env=EnvConfig(**env), episode_threads=8)
    return build_agent(settings, HFCodec(tokenizer), response_length=2048)


def observation_text(codec, rollout):
    return codec.decode([t for t, m in zip(rollout.completion_ids, rollout.env_mask) if m == 0])


def test_episode_routes_retrieves_over_http_and_masks_observations(server, tokenizer):
    agent = agent_for(server, tokenizer, k=2, max_turns=3)
    codec = agent.env.codec
    fake = FakeTokenServer(codec, [
        "<think> the director </think>\n<search> [passage] director Polish-Russian War </search>",
        "<think> his mother </think>\n<search> [graph] Xawery Zulawski mother </search>",
        "<answer> Malgorzata Braunek </answer>",
    ])
    rollout = asyncio.run(agent.run(Q, fake))
    assert rollout.finished == "answer" and rollout.trace.answer == "Malgorzata Braunek"
    searches = rollout.trace.search_steps
    assert [s.sources for s in searches] == [["passage"], ["graph"]]
    assert searches[1].hits[0].title == "Xawery Zulawski" and searches[1].hits[0].source == "graph"
    assert rollout.cost.by_mode == {"passage": 1, "graph": 1} and rollout.cost.mode_cost == 4.0
    # every policy token has mask 1 and its logprob; every observation token mask 0, logprob 0
    model_text = codec.decode([t for t, m in zip(rollout.completion_ids, rollout.env_mask) if m == 1])
    assert INFORMATION_OPEN not in model_text and "Malgorzata Braunek </answer>" in model_text
    obs = observation_text(codec, rollout)
    assert obs.count(INFORMATION_OPEN) == 2 and "Doc 1(Title: Xawery Zulawski)" in obs
    assert all((lp == -0.5) == (m == 1) for lp, m in zip(rollout.logprobs, rollout.env_mask))
    assert [c[1] for c in fake.calls] == [["</search>", "</answer>"]] * 3
    out = episode_output(rollout, response_length=2048, with_logprobs=True)
    assert out.response_mask == rollout.env_mask and len(out.response_logprobs or []) == len(out.response_ids)
    assert out.num_turns == 6  # prompt, (model, observation) x 2, model
    assert out.extra_fields["routerag_retrieval_turns"] == 2 and out.extra_fields["routerag_mode_cost"] == 4.0
    assert out.metrics["tool_calls"] > 0
    # the reward reads the episode the agent loop recorded: the same steps, cost and answer
    extra = {"question": Q.question, **out.extra_fields}
    recorded = episode_record(extra).trace(Q.question)
    assert [s.route.mode for s in recorded.search_steps if s.route] == ["passage", "graph"]
    assert trajectory_cost(recorded) == rollout.cost.mode_cost and recorded.answer == "Malgorzata Braunek"
    assert [(s.kind, s.format_error, s.forced) for s in recorded.steps] == [(s.kind, s.format_error, s.forced) for s in rollout.trace.steps]
    score = compute_score_batch(["x"], [""], [{"target": Q.answers}], [extra], reward="accuracy_efficiency")[0]
    assert score["retrieval_cost"] == 4.0 and score["retrieval_turns"] == 2.0


def test_max_turns_forces_an_answer(server, tokenizer):
    agent = agent_for(server, tokenizer, k=1, max_turns=1)
    codec = agent.env.codec
    fake = FakeTokenServer(codec, ["<search> [graph][passage] Paris </search>", " Paris </answer>"])
    rollout = asyncio.run(agent.run(Q, fake))
    assert rollout.finished == "forced" and rollout.trace.answer == "Paris"
    assert rollout.trace.steps[-1].forced is not None
    assert FORCE_ANSWER in observation_text(codec, rollout)
    assert fake.calls[-1][1] == ["</answer>"] and len(fake.calls) == 2
    recorded = episode_record(episode_output(rollout, response_length=2048, with_logprobs=False).extra_fields).trace()
    assert recorded.search_steps[0].route is not None and recorded.search_steps[0].route.mode == "hybrid"
    assert trajectory_cost(recorded) == DEFAULT_MODE_COST["hybrid"] and recorded.answer == "Paris" and recorded.steps[-1].forced


def test_malformed_turns_get_masked_repairs(server, tokenizer):
    agent = agent_for(server, tokenizer, k=1, max_turns=3)
    codec = agent.env.codec
    fake = FakeTokenServer(codec, ["I am not sure what to do.", "<search> [passage] capital of France", "<answer> Paris </answer>"])
    rollout = asyncio.run(agent.run(Q, fake))
    kinds = [s.kind for s in rollout.trace.steps]
    assert kinds == ["format_error", "search", "answer"] and rollout.trace.answer == "Paris"
    obs = observation_text(codec, rollout)
    assert obs.startswith(INVALID_ACTION) and obs[len(INVALID_ACTION):].startswith("</search>")  # the tag the env closed
    assert rollout.trace.steps[1].format_error == "unclosed_search"
    recorded = episode_record(episode_output(rollout, response_length=2048, with_logprobs=False).extra_fields).trace()
    assert recorded.retrieval_turns == 1 and trajectory_cost(recorded) == 1.0  # the invalid turn retrieved nothing
    assert recorded.format_errors == 2  # the turn with no action and the unclosed search


def test_response_length_cuts_and_logprobs_are_optional(server, tokenizer):
    agent = agent_for(server, tokenizer, k=3, max_turns=2)
    fake = FakeTokenServer(agent.env.codec, ["<search> [passage] director Polish-Russian War </search>", "<answer> x </answer>"])
    rollout = asyncio.run(agent.run(Q, fake))
    out = episode_output(rollout, response_length=20, with_logprobs=False)
    assert len(out.response_ids) == len(out.response_mask) == 20 and out.response_logprobs is None
    # the env's own completion limit follows verl's response_length
    small = build_agent(AgentLoopSettings(retrieval_url=server.url, episode_threads=2), agent.env.codec, response_length=64)
    assert small.env.config.max_completion_tokens == 64


def test_episodes_run_concurrently_in_one_event_loop(server, tokenizer):
    agent = agent_for(server, tokenizer, k=1, max_turns=2)
    codec = agent.env.codec

    async def many():
        fakes = [FakeTokenServer(codec, [f"<search> [passage] query {i} Paris </search>", f"<answer> a{i} </answer>"]) for i in range(16)]
        return await asyncio.gather(*(agent.run(Q, f) for f in fakes))

    rollouts = asyncio.run(many())
    assert [r.trace.answer for r in rollouts] == [f"a{i}" for i in range(16)]
    assert all(r.cost.retrieval_turns == 1 for r in rollouts)


def test_rows_prompts_and_sampling(server, tokenizer):
    agent = agent_for(server, tokenizer)
    row = {"extra_info": {"question": Q.question, "qid": "q1"}, "reward_model": {"ground_truth": {"target": ["A", "B"]}}}
    question = question_of(row)
    assert (question.qid, question.question, question.answers) == ("q1", Q.question, ["A", "B"])
    with pytest.raises(ValueError, match="export-verl"):
        question_of({"extra_info": {}})
    agent.check_row_prompt(question, [{"role": "user", "content": agent.env.user_prompt(Q.question)}])
    with pytest.raises(ValueError, match="not the prompt"):
        agent.check_row_prompt(question, [{"role": "user", "content": "Question: " + Q.question}])
    base = {"temperature": 1.0, "top_p": 1.0, "logprobs": True}
    params = server_sampling(base, ["</search>", "</answer>"], 256)
    assert params == {**base, "stop": ["</search>", "</answer>"], "include_stop_str_in_output": True, "max_tokens": 256}
    assert "stop" not in base
    assert plain({"env": {"allowed_modes": ("passage",)}}) == {"env": {"allowed_modes": ["passage"]}}
    with pytest.raises(ValueError):
        AgentLoopSettings.model_validate({"retrieval_url": server.url, "env": {"max_turn": 3}})  # misspelt key


class _FakeVerl:
    """Test doubles of the three verl names the glue uses (their constructor contracts)."""

    @staticmethod
    def install(monkeypatch):
        module = types.ModuleType("verl.experimental.agent_loop.agent_loop")

        class AgentLoopMetrics(dict):
            def __init__(self, **kw):
                super().__init__(**kw)

        class AgentLoopOutput:
            def __init__(self, **kw):
                self.__dict__.update(kw)

        class AgentLoopBase:
            def __init__(self, trainer_config, server_manager, tokenizer, processor, **kwargs):
                self.config, self.server_manager, self.tokenizer = trainer_config.config, server_manager, tokenizer
                self.init_kwargs = kwargs

        module.AgentLoopBase, module.AgentLoopOutput, module.AgentLoopMetrics = AgentLoopBase, AgentLoopOutput, AgentLoopMetrics
        for name in ("verl", "verl.experimental", "verl.experimental.agent_loop"):
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
        monkeypatch.setitem(sys.modules, "verl.experimental.agent_loop.agent_loop", module)


@pytest.mark.skipif(importlib.util.find_spec("verl") is not None, reason="verl is installed: the real class is used")
def test_the_verl_class_is_built_lazily(server, tokenizer, monkeypatch):
    import routerag.train.verl.verl_loop as glue

    glue.agent_loop_class.cache_clear()
    with pytest.raises(ModuleNotFoundError):
        glue.RouteRAGAgentLoop  # noqa: B018 - the lookup itself imports verl
    _FakeVerl.install(monkeypatch)
    try:
        cls = glue.RouteRAGAgentLoop
        codec = HFCodec(tokenizer)
        fake = FakeTokenServer(codec, ["<search> [graph] Xawery Zulawski </search>", "<answer> Malgorzata Braunek </answer>"])
        seen = []

        class Manager:
            async def generate(self, *, request_id, prompt_ids, sampling_params):
                seen.append((request_id, sampling_params))
                ids, lps = await fake(prompt_ids, sampling_params["stop"], sampling_params["max_tokens"])
                return types.SimpleNamespace(token_ids=ids, log_probs=lps)

        rollout_cfg = types.SimpleNamespace(response_length=1024)
        trainer = types.SimpleNamespace(config=types.SimpleNamespace(actor_rollout_ref=types.SimpleNamespace(rollout=rollout_cfg)))
        loop = cls(trainer, Manager(), tokenizer, None, name="routerag_agent", dataset_cls=object, dataset_config=None,
                   retrieval_url=server.url, env={"k": 1, "max_turns": 2}, episode_threads=2)
        assert set(loop.init_kwargs) == {"dataset_cls", "dataset_config"}
        prompt = loop.agent.env.user_prompt(Q.question)
        row = {"raw_prompt": [{"role": "user", "content": prompt}], "extra_info": {"question": Q.question, "qid": "q1"},
               "reward_model": {"ground_truth": {"target": Q.answers}}}
        out = asyncio.run(loop.run({"temperature": 1.0, "logprobs": False}, **row))
        assert len({rid for rid, _ in seen}) == 1  # one sticky request id for every turn of the episode
        assert all(p["stop"] and p["temperature"] == 1.0 for _, p in seen)
        assert out.response_logprobs is None and 0 in out.response_mask and out.extra_fields["routerag_by_mode"] == {"graph": 1}
        assert out.metrics["tool_calls"] >= 0 and out.num_turns == 4
    finally:
        glue.agent_loop_class.cache_clear()
