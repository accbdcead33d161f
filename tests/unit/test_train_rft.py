"""routerag-rft's scoring and keeping: the best correct episode per question (cheapest among the
correct under the efficiency stage), pass@1 / pass@G, the kept episode as an SFT row."""

from __future__ import annotations

from routerag.corpus.question_types import question_form
from routerag.trace import Route, Step, Trace
from routerag.train.rewards import two_stage_schedule
from routerag.train.rft import QuestionSamples, SampledEpisode, round_stats, score_round


def _episode(answer: str, modes: list[str], tokens: int = 10) -> SampledEpisode:
    cost = {"passage": 1.0, "graph": 3.0, "hybrid": 4.0}
    steps = [Step(index=i, kind="search", query="q", sources=[m], route=Route(choice=m, mode=m), retrieval_cost=cost[m])
             for i, m in enumerate(modes)]
    steps.append(Step(index=len(modes), kind="answer", answer=answer))
    trace = Trace(question="q", strategy="routerag", steps=steps, answer=answer)
    return SampledEpisode(prompt_ids=[1, 2, 3], completion_ids=list(range(10, 10 + tokens)) + [7, 8],
                   env_mask=[1] * tokens + [0, 0], trace=trace, mode_cost=sum(cost[m] for m in modes),
                   retrieval_turns=len(modes), model_tokens=tokens)


def _samples() -> list[QuestionSamples]:
    return [
        QuestionSamples(qid="a", question="Who founded the company that made X?", answers=["Paris"], episodes=[
            _episode("Paris", ["passage", "graph"]), _episode("Paris", ["passage"]), _episode("Rome", ["passage"]),
            _episode("Paris", ["graph", "graph"], tokens=5)]),
        QuestionSamples(qid="b", question="Is X older than Y?", answers=["yes"], episodes=[
            _episode("no", ["passage"]), _episode("no", []), _episode("no", ["graph"]), _episode("", [])]),
    ]


def test_em_stage_keeps_a_correct_episode_and_the_cheapest_on_ties():
    scored = score_round(_samples(), two_stage_schedule(1), step=1)
    assert scored[0].correct == [True, True, False, True]
    assert scored[0].rewards == [1.0, 1.0, 0.0, 1.0]
    assert scored[0].kept == 1  # equal EM: the lowest mode cost (one passage search)
    assert scored[1].kept is None and not any(scored[1].correct)


def test_efficiency_stage_ranks_correct_episodes_by_reward():
    scored = score_round(_samples(), two_stage_schedule(1), step=2)
    a = scored[0]
    assert a.kept == 1 and a.rewards[1] == max(a.rewards) and a.rewards[2] == 0.0
    assert a.rewards[1] > a.rewards[0] > a.rewards[3]  # cheaper correct episodes earn more


def test_round_stats():
    samples = _samples()
    stats = round_stats(samples, score_round(samples, two_stage_schedule(1), step=1))
    assert stats["pass@1"] == 0.375 and stats["pass@G"] == 0.5 and stats["kept"] == 1
    assert stats["groups_with_reward_variance"] == 1
    assert stats["question_kinds"] == {"open": 1, "yes/no": 1}
    assert stats["mode_mix"]["open"] == {"passage": 3, "graph": 3}
    assert stats["mode_mix"]["yes/no"] == {"passage": 1, "graph": 1, "none": 2}


def test_kept_episode_row_labels_only_the_policy_tokens():
    row = _samples()[0].episodes[1].sft_row(eos_token_id=0)
    assert row["input_ids"] == [1, 2, 3] + list(range(10, 20)) + [7, 8, 0]
    assert row["labels"] == [-100] * 3 + list(range(10, 20)) + [-100, -100, 0]


def test_round_stats_group_by_the_evaluation_question_form():
    # one classifier for the per-round mode mix and the evaluation breakdown
    assert question_form("Is the Eiffel Tower in Paris?") == "yes/no"
    assert question_form("Which came first, Xavier or Yolanda?") == "choice"
    assert question_form("Who designed the Eiffel Tower?") == "open"


def test_token_rows_files_are_read_and_checked(tmp_path):
    import json

    import pytest

    from routerag.train.config import RouteRAGRFTConfig, RouteRAGSFTConfig
    from routerag.train.sft import read_kept_rows, read_token_rows

    good = tmp_path / "kept.jsonl"
    good.write_text(json.dumps({"qid": "q1", "input_ids": [5, 6, 7, 8], "labels": [-100, -100, 7, 8]}) + "\n\n")
    assert read_token_rows(good) == [{"input_ids": [5, 6, 7, 8], "labels": [-100, -100, 7, 8]}]
    bad = {
        "not JSON": "{oops",
        "two non-empty lists of one length": json.dumps({"input_ids": [1, 2], "labels": [1]}),
        "must be integers": json.dumps({"input_ids": [1, 2.5], "labels": [1, -100]}),
        "neither -100 nor the token": json.dumps({"input_ids": [1, 2], "labels": [-100, 3]}),
        "no labelled token": json.dumps({"input_ids": [1, 2], "labels": [-100, -100]}),
    }
    for message, line in bad.items():
        path = tmp_path / "bad.jsonl"
        path.write_text(good.read_text() + line + "\n")
        with pytest.raises(ValueError, match=message) as info:
            read_token_rows(path)
        assert "bad.jsonl:3" in str(info.value)  # the file and the line
    # an earlier round's kept.jsonl (read back when rounds accumulate) must also name each row's question
    assert read_kept_rows(good) == [("q1", {"input_ids": [5, 6, 7, 8], "labels": [-100, -100, 7, 8]})]
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"input_ids": [1, 2], "labels": [-100, 2]}) + "\n")
    assert read_token_rows(path) == [{"input_ids": [1, 2], "labels": [-100, 2]}]
    with pytest.raises(ValueError, match="bad.jsonl:1: a kept row must name its question"):
        read_kept_rows(path)
    # the rows of a round stopped after sampling train on a GPU with routerag-sft's sft.rows_files
    assert RouteRAGSFTConfig(sft={"rows_files": [str(good)]}).sft.rows_files == [str(good)]
    assert RouteRAGRFTConfig(rft={"stop_after": "sample"}).rft.stop_after == "sample"
    with pytest.raises(ValueError, match="sft.rows_files: not read by recipe routerag-rft"):
        RouteRAGRFTConfig(sft={"rows_files": [str(good)]})
    with pytest.raises(ValueError, match="stop_after"):
        RouteRAGRFTConfig(rft={"stop_after": "train"})


def _distinct_samples() -> list[QuestionSamples]:
    # four episodes with distinct completions (the token counts differ), two of them the same completion
    a = [_episode("Paris", ["passage", "graph"], tokens=12), _episode("Paris", ["passage"], tokens=9),
         _episode("Rome", ["passage"], tokens=8), _episode("Paris", ["passage"], tokens=9)]
    return [QuestionSamples(qid="a", question="Who founded the company that made X?", answers=["Paris"], episodes=a),
            QuestionSamples(qid="b", question="Where is Y?", answers=["Oslo"], episodes=[_episode("Bergen", ["passage"])])]


def test_keep_correct_trains_on_every_distinct_correct_episode(tmp_path):
    """rft.keep=correct (ReST-EM): every correct episode once, the long one too; best: the cheapest only."""
    from types import SimpleNamespace

    from routerag.train.rft import _kept_rows

    samples = _distinct_samples()
    scored = score_round(samples, two_stage_schedule(1), step=2)
    assert scored[0].kept == 1 and scored[0].kept_indices("best") == [1]
    assert scored[0].kept_indices("correct") == [0, 1]  # episode 3 repeats episode 1's completion
    assert scored[1].kept_indices("correct") == [] and scored[1].kept_indices("best") == []
    stats = round_stats(samples, scored, "correct")
    assert stats["kept"] == 1 and stats["kept_episodes"] == 2 and stats["kept_retrieval_turns"] == 1.5
    assert round_stats(samples, scored)["kept_retrieval_turns"] == 1.0
    tok = SimpleNamespace(eos_token_id=0)
    (tmp_path / "round-1").mkdir()
    rows = _kept_rows(tmp_path, 1, samples, scored, tok, accumulate=True, keep="correct")
    assert [len(r["input_ids"]) for r in rows] == [3 + 14 + 1, 3 + 11 + 1]
    assert (tmp_path / "round-1" / "kept.jsonl").read_text().count('"qid": "a"') == 2
    # round 2 keeps nothing for "a": with accumulate both of round 1's rows for it stay
    (tmp_path / "round-2").mkdir()
    none = score_round(samples[1:], two_stage_schedule(1), step=2)
    assert len(_kept_rows(tmp_path, 2, samples[1:], none, tok, accumulate=True, keep="correct")) == 2
    assert _kept_rows(tmp_path, 2, samples[1:], none, tok, accumulate=False, keep="correct") == []


def test_a_stop_branch_answers_after_its_first_search_in_the_policys_own_tokens():
    from routerag.episode.engine import run_episode
    from routerag.episode.ports import TokenPolicy
    from routerag.train.rft import AnswerAfterFirstSearch
    from test_episode_engine import CharCodec, Q, rules
    from test_strategies_support import make_context

    prefix = "<think> I have the answer. </think>\n<answer>"
    queue = ["<search> [passage] mother </search>", " Braunek </answer>"]
    prompts = []

    def generate(ids, stops, max_new):
        prompts.append(CharCodec().decode(ids))
        out = [ord(c) for c in queue.pop(0)][:max_new]
        return out, [-0.5] * len(out)

    ctx, _, _ = make_context([])
    branch = AnswerAfterFirstSearch(generate, CharCodec().encode(prefix))
    policy = TokenPolicy(CharCodec(), branch, "prompt", max_new_tokens=64, max_completion_tokens=10_000)
    trace = Trace(question=Q, strategy="test")
    episode = run_episode(ctx, trace, policy, rules(3))
    assert episode.finish == "answer" and trace.answer == "Braunek" and trace.retrieval_turns == 1
    assert prompts[1].endswith(prefix) and not prompts[0].endswith(prefix)  # the policy goes on from the prefix
    text = CharCodec().decode(policy.completion)
    start = text.index(prefix)
    assert all(policy.mask[start:start + len(prefix)])  # the prefix is the policy's: a kept stop teaches it
    assert policy.logprobs[start:start + len(prefix)] == [0.0] * len(prefix)


def test_stop_branches_cannot_outnumber_the_group():
    import pytest

    from routerag.train.config import RFTSpec

    assert RFTSpec(num_generations=4, stop_branches=2).stop_branches == 2
    with pytest.raises(ValueError, match="more than num_generations"):
        RFTSpec(num_generations=2, stop_branches=3)


def test_a_stop_is_kept_only_when_its_search_found_the_answer():
    from routerag.trace import Hit

    def with_hits(episode: SampledEpisode, text: str) -> SampledEpisode:
        episode.trace.steps[0].hits = [Hit(doc_id="d", title="t", text=text, score=1.0, source="passage", mode="passage", rank=0)]
        return episode

    lucky = [QuestionSamples(qid="a", question="Where was X born?", answers=["Paris"], episodes=[
        _episode("Paris", ["passage", "graph"]), with_hits(_episode("Paris", ["passage"]), "X lived in Rome.")])]
    read = [QuestionSamples(qid="a", question="Where was X born?", answers=["Paris"], episodes=[
        _episode("Paris", ["passage", "graph"]), with_hits(_episode("Paris", ["passage"]), "X was born in Paris.")])]
    assert score_round(lucky, two_stage_schedule(0), step=1)[0].kept == 1  # the paper's reward alone: the cheaper one
    assert score_round(lucky, two_stage_schedule(0), step=1, stop_needs_evidence=True)[0].kept == 0
    assert score_round(read, two_stage_schedule(0), step=1, stop_needs_evidence=True)[0].kept == 1
