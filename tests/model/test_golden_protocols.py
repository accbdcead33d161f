"""Golden trajectories in GraphRAG-R1's protocol: the stored (RouteRAG-protocol) golden sets
re-rendered through the graphrag-r1 episode, parsed back by that episode's parser turn by turn,
and tokenised for SFT exactly as the rollout environment tokenises the same turns.

The golden rows are the tracked sets in docs/results (real MuSiQue / HotpotQA questions and
queries); retrieval is BM25 over in-test documents (the real sources, parser, planner and
renderer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerag.corpus.schema import Document
from routerag.protocol.graphrag_r1_tags import DOCUMENTS_CLOSE, DOCUMENTS_OPEN, GRAPHRAG_R1_SYSTEM
from routerag.protocol.routerag_tags import INFORMATION_OPEN, SEARCH_OPEN, parse_action
from routerag.strategies.graphrag_r1 import GraphRAGR1
from routerag.train.env import EnvConfig, HFCodec, RolloutEnv
from routerag.train.fixtures import bm25_sourceset
from routerag.train.golden import (
    EpisodeReplay,
    GoldenHop,
    GoldenTrajectory,
    planned_of,
    render_golden,
    rerender,
)
from routerag.train.golden_set import read_golden_set

ROOT = Path(__file__).resolve().parents[2]
SETS = [ROOT / "docs" / "results" / "golden-planned", ROOT / "docs" / "results" / "golden-outcome"]
DOCS = [
    Document.make("Aschenbrödel", "Aschenbrödel is a ballet written by Johann Strauss II."),
    Document.make("Johann Strauss II", "Johann Strauss II was an Austrian composer, a citizen of Austria."),
    Document.make("Austria", "The Chancellor of Austria leads the government of Austria."),
]
PARAMS = {"evidence": "text1+graph10"}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    return bm25_sourceset({"passage": DOCS, "triples": DOCS[1:]}, tmp_path_factory.mktemp("golden-protocol-sources"))


def golden_rows(per_source: int = 3) -> list[GoldenTrajectory]:
    """The first rows of each source of both tracked golden sets."""
    rows: list[GoldenTrajectory] = []
    for folder in SETS:
        stored = read_golden_set(folder)
        for source in sorted({t.source for t in stored}):
            rows += [t for t in stored if t.source == source][:per_source]
    return rows


def test_rendered_turns_parse_back_through_the_graphrag_r1_episode_parser(sources):
    replay = EpisodeReplay(sources, "graphrag-r1", PARAMS)
    protocol = GraphRAGR1.episode(replay.params, "q").rules.protocol  # the parser's tags, as the episode uses them
    rows = golden_rows()
    assert len({t.source for t in rows}) == 3 and len(rows) == 18
    rendered = 0
    for row in rows:
        hops, final_think, answer = planned_of(row)
        out = rerender(row, "graphrag-r1", replay=replay)
        if len(hops) >= replay.params.max_turns:  # the budget is spent: the episode forces the answer, not a golden episode
            assert out is None
            continue
        assert out is not None and out.protocol == "graphrag-r1" and out.system == GRAPHRAG_R1_SYSTEM
        assert (out.qid, out.question, out.answers, out.source) == (row.qid, row.question, row.answers, row.source)
        assert out.segments[0].kind == "prompt" and out.segments[0].text == row.question  # the episode's user message
        turns = [s.text for s in out.segments if s.kind == "model"]
        actions = [parse_action(t, protocol) for t in turns]
        assert [(a.kind, a.query, a.errors) for a in actions[:-1]] == [("search", h.query, []) for h in hops]
        assert [a.reasoning for a in actions[:-1]] == [h.think for h in hops]
        said = final_think if final_think != "I have the answer." else f"The answer is {answer}."  # a last think says what it found
        assert (actions[-1].kind, actions[-1].answer, actions[-1].reasoning) == ("answer", answer, said)
        observations = [s.text for s in out.segments if s.kind == "observation"]
        assert len(observations) == len(hops)
        assert all(o.strip().startswith(DOCUMENTS_OPEN) and o.strip().endswith(DOCUMENTS_CLOSE) for o in observations)
        text = out.text
        assert SEARCH_OPEN not in text and INFORMATION_OPEN not in text and "[passage]" not in text
        rendered += 1
    assert rendered >= 12 and replay.dropped == len(rows) - rendered


def test_observations_are_the_episodes_facts_and_passages(sources):
    replay = EpisodeReplay(sources, "graphrag-r1", PARAMS)
    hop = GoldenHop(think="Who wrote the ballet?", mode="graph", query="Aschenbrödel composer Strauss")
    out = render_golden("Who led the country of the composer of Aschenbrödel?", [hop], "the Chancellor",
                        protocol="graphrag-r1", replay=replay)
    assert out is not None
    observation = out.segments[2].text
    assert "Facts:\n(1) " in observation and "Passages:\nDoc 1(Title: " in observation
    assert observation.index("Facts:") < observation.index("Passages:")
    assert observation.count("Doc ") == 1  # text1+graph10: one passage
    assert replay.searches == 1
    with pytest.raises(ValueError, match="pass replay"):
        render_golden("q", [hop], "a", protocol="graphrag-r1")
    routerag = render_golden("q", [hop], "a")  # the same interface, RouteRAG's protocol
    assert routerag is not None and routerag.system is None and "<search> [graph] Aschenbrödel" in routerag.segments[1].text


def test_sft_rows_are_the_tokens_the_rollout_of_the_same_turns_trains(tokenizer, sources):
    from routerag.train.sft import sft_rows

    env = RolloutEnv(sources, HFCodec(tokenizer), EnvConfig(strategy="graphrag-r1", params=PARAMS, max_observation_tokens=64))
    replay = EpisodeReplay(sources, "graphrag-r1", env.params)
    row = next(t for t in golden_rows() if t.source == "musique" and 2 <= len(planned_of(t)[0]) < env.params.max_turns)
    golden = rerender(row, "graphrag-r1", replay=replay)
    assert golden is not None
    turns = [s.text for s in golden.segments if s.kind == "model"]
    queue = list(turns)

    def generate(prompt_ids, stops, max_new):  # the golden turns as a token policy (test double)
        ids = env.codec.encode(queue.pop(0))
        return ids, [0.0] * len(ids)

    rollout = env.rollout(golden.question, generate)
    assert rollout.finished == "answer" and not queue
    (sft,) = sft_rows([golden], env.codec, 10**9, env.config.max_observation_tokens)
    assert sft["input_ids"][:-1] == rollout.prompt_ids + rollout.completion_ids  # the EOS after the answer is SFT's own
    assert sft["labels"][:-1] == [-100] * len(rollout.prompt_ids) + [
        tok if own else -100 for tok, own in zip(rollout.completion_ids, rollout.env_mask)]


def test_graphrag_r1_recipe_trains_stage_1_with_the_paper_constants():
    from routerag.config import ConfigError
    from routerag.train.config import load_train_config, train_config

    cfg = train_config({"recipe": "graphrag-r1"})
    assert cfg.sft.enabled and cfg.sft.learning_rate == 5e-6 and cfg.sft.epochs == 1.0
    assert cfg.lora.enabled and (cfg.lora.r, cfg.lora.alpha) == (16, 32)
    partial = train_config({"recipe": "graphrag-r1", "sft": {"max_examples": 8}, "lora": {"layers_top": 4}})
    assert partial.sft.learning_rate == 5e-6 and partial.sft.enabled and partial.lora.enabled
    previous = train_config({"recipe": "graphrag-r1", "sft": {"epochs": None, "max_steps": 200, "learning_rate": 1e-5}})
    assert previous.sft.epochs is None and previous.sft.max_steps == 200  # the documented alternative
    assert not train_config({"recipe": "graphrag-r1", "sft": {"enabled": False}}).sft.enabled
    with pytest.raises(ConfigError, match="sft.ground: not read by recipe graphrag-r1"):
        train_config({"recipe": "graphrag-r1", "sft": {"ground": True}})
    for name in ("graphrag-r1.yaml", "graphrag-r1-cpu.yaml"):
        shipped = load_train_config(ROOT / "configs" / "train" / name)
        assert shipped.sft.enabled and shipped.sft.learning_rate == 5e-6 and shipped.sft.epochs == 1.0
        assert shipped.sft.golden_set and shipped.sft.sources == ["musique"] and shipped.env.strategy == "graphrag-r1"


def test_a_stored_set_rerenders_each_source_over_its_own_index(tmp_path, sources):
    """``rerender_golden_set``: each source's rows replayed over the sources ``replay_for`` gives
    that source, counted per source (rendered, dropped and why), written as a golden set that
    reads back in GraphRAG-R1's protocol."""
    import gzip

    from routerag.train.golden_set import STATS_FILE, TRAJECTORIES_FILE, GoldenSetStats, rerender_golden_set

    stored = golden_rows(per_source=2)[:6]  # the planned set's first two rows of each source
    folder = tmp_path / "stored"
    folder.mkdir()
    with gzip.open(folder / TRAJECTORIES_FILE, "wt", encoding="utf-8") as handle:
        handle.writelines(t.model_dump_json() + "\n" for t in stored)
    asked: list[str] = []

    def replay_for(name: str) -> EpisodeReplay:
        asked.append(name)
        return EpisodeReplay(sources, "graphrag-r1", {**PARAMS, "max_turns": 1})  # a budget of 1: two-hop rows drop

    stats = rerender_golden_set(folder, tmp_path / "out", replay_for, eval_sets=[])
    assert asked == sorted({t.source for t in stored}, key=[t.source for t in stored].index)  # one replay per source, in order
    assert stats.protocol == "graphrag-r1" and stats.rendered_from == str(folder)
    for name in asked:
        r = stats.rendering[name]
        assert r.stored == 2 and r.rendered + sum(r.dropped.values()) == 2
        assert set(r.dropped) <= {"forced", "truncated", "turns left after the answer"}
    assert sum(r.dropped.get("forced", 0) for r in stats.rendering.values()) > 0  # more searches than the budget: forced
    back = read_golden_set(tmp_path / "out")
    assert len(back) == stats.trajectories == sum(r.rendered for r in stats.rendering.values())
    assert all(t.protocol == "graphrag-r1" and t.system for t in back)
    assert GoldenSetStats.model_validate_json((tmp_path / "out" / STATS_FILE).read_text()).rendering == stats.rendering


def test_graphrag_r1_stage_1_holds_out_a_dev_slice_and_can_stop_after_it():
    from routerag.train.config import train_config

    cfg = train_config({"recipe": "graphrag-r1", "sft": {"dev_examples": 16, "dev_eval_steps": 40}, "stop_after_sft": True})
    assert (cfg.sft.dev_examples, cfg.sft.dev_eval_steps, cfg.stop_after_sft) == (16, 40, True)
    default = train_config({"recipe": "graphrag-r1"})
    assert default.sft.dev_examples == 0 and not default.stop_after_sft
