"""The verl configs (configs/train/verl/) and the parquet they read, checked without verl: the
file `routerag export-verl` writes for RouteRAG's own training questions has verl's schema and
the prompts the agent loop builds; the agent-loop entry and the reward settings validate against
routerag's own settings models and agree with each other; stage 1 is EM, stage 2 the batch
accuracy-efficiency reward resumed from stage 1's step 20."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

from routerag.train.rewards import get_reward
from routerag.train.verl.agent_loop import AgentLoopSettings, question_of
from routerag.train.verl.reward import VerlRewardSettings

pq = pytest.importorskip("pyarrow.parquet")
CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train" / "verl"


def load(name: str) -> dict:
    return yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))


@pytest.mark.data
def test_export_verl_writes_verl_parquet_for_routerag_train(shared: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    import routerag.cli.train_cmds  # noqa: F401 - registers the commands
    from routerag.cli.app import app
    from routerag.corpus.datasets import load_dataset
    from routerag.strategies.prompts import routerag_prompt

    result = CliRunner().invoke(app, ["export-verl", "--dataset", "routerag-train-dev", "--out-dir", str(tmp_path),
                                      "--split", "validation"])
    assert result.exit_code == 0, result.output
    table = pq.read_table(tmp_path / "routerag-train-dev.parquet")  # the name the stage configs read
    assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    schema = table.schema
    assert str(schema.field("prompt").type) == "list<element: struct<role: string, content: string>>"
    assert str(schema.field("reward_model").type) == "struct<style: string, ground_truth: struct<target: list<element: string>>>"
    assert {f.name for f in schema.field("extra_info").type} == {"split", "index", "qid", "question"}
    rows = table.to_pylist()
    dev = {q.qid: q for q in load_dataset("routerag-train-dev").questions}
    assert len(rows) == len(dev) == 100
    for i, row in enumerate(rows):
        assert row["data_source"] == "routerag-train-dev" and row["extra_info"]["index"] == i
        assert row["extra_info"]["split"] == "validation"
        (message,) = row["prompt"]
        assert message == {"role": "user", "content": routerag_prompt(row["extra_info"]["question"])}
        question = question_of(row)  # what the agent loop reads from the row
        assert question.answers == dev[question.qid].answers == row["reward_model"]["ground_truth"]["target"]


def test_default_output_follows_the_dataset_name(monkeypatch, tmp_path: Path) -> None:
    from routerag.train.export_verl import verl_data_path

    monkeypatch.delenv("ROUTERAG_VERL_DATA", raising=False)
    assert verl_data_path("routerag-train") == Path("data/verl/routerag-train.parquet")
    monkeypatch.setenv("ROUTERAG_VERL_DATA", str(tmp_path))
    assert verl_data_path("routerag-train") == tmp_path / "routerag-train.parquet"
    assert verl_data_path("file:/x/my_qs.jsonl", "out") == Path("out/my_qs.parquet")
    stage1 = load("routerag-stage1.yaml")
    assert stage1["data"]["train_files"].endswith("}/routerag-train.parquet")
    assert stage1["data"]["val_files"].endswith("}/routerag-train-dev.parquet")
    assert "ROUTERAG_VERL_DATA" in stage1["data"]["train_files"]


def test_agent_loop_entry_and_rewards_agree() -> None:
    (entry,) = load("agent_loop.yaml")
    stage1, stage2 = load("routerag-stage1.yaml"), load("routerag-stage2.yaml")
    rollout = stage1["actor_rollout_ref"]["rollout"]
    assert rollout["agent"]["default_agent_loop"] == entry["name"]
    assert rollout["agent"]["agent_loop_config_path"] == "configs/train/verl/agent_loop.yaml"
    assert rollout["skip_tokenizer_init"] is False and rollout["n"] == 5
    module, _, attr = entry["_target_"].rpartition(".")
    assert attr == "RouteRAGAgentLoop" and hasattr(importlib.import_module(module), "agent_loop_class")
    settings = AgentLoopSettings.model_validate({k: v for k, v in entry.items() if k not in ("name", "_target_")})
    assert settings.env.strategy == "routerag" and (settings.env.params["k"], settings.env.params["max_turns"]) == (3, 4)
    assert settings.env.max_completion_tokens == stage1["data"]["max_response_length"]

    reward_fn = stage1["custom_reward_function"]
    assert reward_fn["path"] == "pkg://routerag.train.verl.reward"
    assert callable(getattr(importlib.import_module(reward_fn["path"].removeprefix("pkg://")), reward_fn["name"]))
    assert stage1["reward_model"] == {"enable": False, "use_reward_loop": False, "reward_manager": "batch"}
    first = VerlRewardSettings.model_validate(reward_fn["reward_kwargs"])
    assert first.reward == "em" and "env" not in reward_fn["reward_kwargs"]  # the reward reads the agent loop's record

    assert stage2["defaults"][0] == "routerag-stage1"
    merged = {**reward_fn["reward_kwargs"], **stage2["custom_reward_function"]["reward_kwargs"]}
    second = VerlRewardSettings.model_validate(merged)
    assert second.reward == "accuracy_efficiency" and get_reward(second.reward).batch_level
    get_reward(second.reward).Params.model_validate(second.params)  # the parameters are the reward's own
    assert second.params["cap"] == 0.5 and second.params["normaliser"] == "p95"
    steps1, steps2 = stage1["trainer"]["total_training_steps"], stage2["trainer"]["total_training_steps"]
    assert (steps1, steps2) == (20, 40) and stage1["trainer"]["save_freq"] == steps1
    assert stage2["trainer"]["resume_from_path"].endswith(f"/{stage1['trainer']['experiment_name']}/global_step_{steps1}")
