"""Golden trajectories, the train/eval overlap check, the verl export and the SFT labels."""

from __future__ import annotations

import json

import pytest

from routerag.corpus.datasets import load_dataset
from routerag.corpus.schema import Question
from routerag.train.export_verl import compute_score, export_parquet, extract_answer
from routerag.train.golden import (
    assert_disjoint,
    check_overlap,
    from_hotpotqa,
    from_musique,
    from_r1_router,
    golden_trajectories,
    question_key,
    r1_router_step_rows,
    read_r1_router,
)


@pytest.fixture(scope="module")
def musique(shared):
    return load_dataset("musique")


def test_musique_trajectory_follows_the_decomposition(musique):
    docs = {d.doc_id: d for d in musique.documents()}
    q = musique.questions[0]
    t = from_musique(q, docs)
    assert t is not None and t.source == "musique"
    model = [s.text for s in t.segments if s.kind == "model"]
    obs = [s.text for s in t.segments if s.kind == "observation"]
    assert len(obs) == len(q.decomposition) == 2
    assert "<search> [passage] What company published Journal of Psychotherapy Integration? </search>" in model[0]
    # "#1" is replaced by the first hop's answer; a bridge hop goes to the graph
    assert "<search> [graph] Who was the first president of American Psychological Association ? </search>" in model[1]
    assert docs[q.decomposition[1].supporting_doc_ids[0]].text[:40] in obs[1]
    assert model[-1].endswith(f"<answer> {q.answer} </answer>")
    assert t.segments[0].kind == "prompt" and "Question: " + q.question in t.segments[0].text
    plain = from_musique(q, docs, mode_policy="passage")
    assert "[graph]" not in plain.completion


@pytest.mark.data
def test_hotpotqa_and_r1router_trajectories():
    data = load_dataset("hotpotqa")
    docs = {d.doc_id: d for d in data.documents()}
    built = [from_hotpotqa(q, docs) for q in data.questions]
    ok = [t for t in built if t is not None]
    assert len(ok) >= 90
    t = ok[0]
    assert t.completion.count("<search>") == len(data.questions[0].metadata["supporting_titles"])
    records = read_r1_router()
    r = from_r1_router(records[0], 0)
    assert r is not None and r.answers == ["9 December 1899"]
    assert r.completion.count("<search> [passage]") == 2 and "Frank Wisbar" in r.completion
    assert r.completion.rstrip().endswith("<answer> 9 December 1899 </answer>")


@pytest.mark.data
def test_r1_router_step_rows():
    rows = r1_router_step_rows(limit=5)
    assert len(rows) == 5
    first = json.loads(rows[0]["step"])
    assert first == {"step_type": "ret", "gold_query": 'who is the director of the film "strangler of the swamp"?',
                     "gold_retriever": "text retriever"}
    assert rows[0]["prompt"][0]["role"] == "system" and "Origin question:" in rows[0]["prompt"][1]["content"]
    assert json.loads(rows[1]["step"])["step_type"] == "ans"
    all_rows = r1_router_step_rows()
    kinds = {json.loads(r["step"])["step_type"] for r in all_rows}
    assert kinds == {"ret", "ans", "final"} and len(all_rows) == 758


@pytest.mark.data
def test_overlap_check_detects_eval_questions():
    demo = load_dataset("demo").questions  # a slice of the 2Wiki evaluation set
    report = check_overlap(demo, ["2wiki"])
    assert len(report.overlapping) == len(demo) and set(report.reasons.values()) == {"question+answer"}
    with pytest.raises(ValueError):
        assert_disjoint(demo, ["2wiki"])
    # normalisation: case, punctuation and articles do not hide a duplicate
    q = demo[0]
    twin = Question(qid="x", question=q.question.upper() + " ", answers=["The " + q.answers[0] + "."])
    assert check_overlap([twin], ["2wiki"]).overlapping == ["x"]
    assert question_key("Who is the  Mother?", "A Paris") == question_key("who is mother", "paris")
    # ids (MuSiQue): the same id is an overlap even when the text differs
    mq = Question(qid="2hop__150763_14904", question="reworded", answers=["z"])
    assert check_overlap([mq], ["musique"]).reasons == {"2hop__150763_14904": "id"}


def test_training_sources_are_disjoint_from_2wiki(musique):
    assert check_overlap(musique.questions, ["2wiki"]).clean
    trajectories = golden_trajectories(["musique", "hotpotqa", "r1router"], exclude_eval=["2wiki"])
    as_q = [Question(qid=t.qid, question=t.question, answers=t.answers) for t in trajectories]
    assert check_overlap(as_q, ["2wiki"]).clean and len(trajectories) > 250


def test_verl_export_round_trip(tmp_path, musique):
    import pyarrow.parquet as pq

    qs = musique.questions[:5]
    path = export_parquet(qs, tmp_path / "train.parquet", "musique")
    table = pq.read_table(path)
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    rows = table.to_pylist()
    assert rows[0]["data_source"] == "musique" and rows[0]["ability"] == "fact-reasoning"
    assert rows[0]["prompt"][0]["role"] == "user" and qs[0].question in rows[0]["prompt"][0]["content"]
    assert rows[0]["reward_model"] == {"style": "rule", "ground_truth": {"target": qs[0].answers}}
    assert rows[3]["extra_info"]["qid"] == qs[3].qid and rows[3]["extra_info"]["index"] == 3
    gt = rows[0]["reward_model"]["ground_truth"]
    response = "<|im_start|>assistant\n<think> x </think><search> [passage] q </search>\n<information>" \
               "<answer> no </answer></information><answer> Stanley Hall </answer>"
    assert compute_score("musique", response, gt, rows[0]["extra_info"]) == 1.0
    assert compute_score("musique", "<answer> Hall </answer>", gt) == 0.0
    assert compute_score("musique", "<answer> Hall </answer>", gt, metric="f1") == pytest.approx(2 / 3)
    assert compute_score("musique", "no tags", gt) == 0.0
    assert extract_answer("<answer>a</answer> then <answer> b </answer>") == "b"


def test_sft_rows_mask_prompt_and_observations(musique):
    from routerag.llm.hf_assets import load_tokenizer
    from routerag.train.env import HFCodec
    from routerag.train.sft import sft_rows

    codec = HFCodec(load_tokenizer("bundled:qwen2.5-coder-0.5b"))
    docs = {d.doc_id: d for d in musique.documents()}
    t = from_musique(musique.questions[0], docs)
    row = sft_rows([t], codec, 4096)[0]
    assert len(row["input_ids"]) == len(row["labels"])
    trained = codec.decode([i for i, lab in zip(row["input_ids"], row["labels"]) if lab != -100])
    model_text = "".join(s.text for s in t.segments if s.kind == "model")
    assert trained == model_text + codec.tokenizer.eos_token
    assert "<information>" not in trained and "Answer the given question" not in trained
