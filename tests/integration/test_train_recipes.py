"""Recipes end to end on CPU: configs, CLI, run directory (metrics, curves, checkpoints), resume."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("trl")

from routerag.train.config import RECIPE_CONFIGS, R1RouterStepConfig, load_train_config  # noqa: E402
from routerag.train.data import default_schedule  # noqa: E402
from routerag.train.recipes import RECIPES, train  # noqa: E402
from routerag.train.runfiles import read_metrics  # noqa: E402

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "configs" / "train" / "toy-cpu.yaml"


def test_every_shipped_config_validates():
    """Each file in configs/train/ loads (tests/unit/test_train_configs.py: every YAML), trains a
    registered recipe and has a reward schedule; the recipes and their configuration classes agree."""
    assert sorted(RECIPE_CONFIGS) == sorted(RECIPES.names())
    files = sorted(glob.glob(str(ROOT / "configs" / "train" / "*.yaml")))
    assert len(files) >= 4
    for f in files:
        cfg = load_train_config(f)
        assert cfg.recipe in RECIPES and isinstance(cfg, RECIPE_CONFIGS[cfg.recipe])
        schedule = default_schedule(cfg)
        assert schedule.stages
    two = load_train_config(ROOT / "configs" / "train" / "routerag-two-stage.yaml")
    s = default_schedule(two)
    assert s.stage_at(20).rewards[0].name == "em" and s.stage_at(21).rewards[0].name == "accuracy_efficiency"
    assert two.grpo.num_generations == 5 and two.grpo.max_steps == 40
    gpu = load_train_config(ROOT / "configs" / "train" / "routerag-grpo-gpu.yaml")  # the GPU run's settings
    assert gpu.grpo.rollout_backend == "batched" and not gpu.grpo.use_cpu and gpu.grpo.dynamic_sampling
    episodes = gpu.grpo.per_device_train_batch_size * gpu.grpo.gradient_accumulation_steps
    assert episodes == 64 and episodes % gpu.grpo.num_generations == 0
    gs = default_schedule(gpu)
    assert gs.stage_at(6).rewards[0].name == "em" and gs.stage_at(7).rewards[0].name == "accuracy_efficiency"
    g = default_schedule(load_train_config(ROOT / "configs" / "train" / "graphrag-r1.yaml"))
    assert [r.name for r in g.stage_at(1).rewards] == ["format", "pra"]
    assert [r.name for r in g.stage_at(51).rewards] == ["format", "caf"]


def test_config_fields_are_documented():
    from routerag.train.config import DataSpec, GRPOSpec, LoraSpec, ModelSpec, SFTSpec, SourcesSpec
    from routerag.train.env import EnvConfig

    for model in (GRPOSpec, LoraSpec, ModelSpec, SFTSpec, SourcesSpec, DataSpec, EnvConfig):
        missing = [name for name, f in model.model_fields.items() if not f.description]
        assert not missing, f"{model.__name__}: {missing}"


def test_cli_dry_run_and_unknown_recipe():
    from typer.testing import CliRunner

    import routerag.cli.train_cmds  # noqa: F401  (registers the commands)
    from routerag.cli.app import app

    runner = CliRunner()
    result = runner.invoke(app, ["train", "routerag-two-stage", "--config", str(TOY), "--set", "grpo.max_steps=3", "--dry-run"])
    assert result.exit_code == 0, result.output
    resolved = yaml.safe_load(result.output)
    assert resolved["grpo"]["max_steps"] == 3 and resolved["recipe"] == "routerag-two-stage"
    bad = runner.invoke(app, ["train", "nope", "--dry-run"])
    assert bad.exit_code != 0 and "unknown recipe" in bad.output


def test_cli_help_names_every_registered_recipe():
    """The help text is written out (no training import at CLI start); it must not drift from RECIPES."""
    from routerag.cli.train_cmds import RECIPE_HELP

    assert sorted(RECIPE_HELP.split(" | ")) == sorted(RECIPES.names())


@pytest.mark.data
def test_export_verl_cli(tmp_path):
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    import routerag.cli.train_cmds  # noqa: F401
    from routerag.cli.app import app

    out = tmp_path / "demo.parquet"
    result = CliRunner().invoke(app, ["export-verl", "--dataset", "demo", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert pq.read_table(out).num_rows == 0 and "dropped as overlapping 2wiki" in result.output  # demo is a 2Wiki slice
    result = CliRunner().invoke(app, ["export-verl", "--dataset", "musique", "--out", str(out), "--limit", "7"])
    assert result.exit_code == 0 and pq.read_table(out).num_rows == 7


def test_toy_recipe_writes_the_run_directory_and_resumes(tmp_path):
    cfg = load_train_config(TOY, [f"output_dir={tmp_path}", "grpo.max_steps=2", "grpo.save_steps=1",
                                         "grpo.per_device_train_batch_size=8", "grpo.num_generations=4"])
    summary = train(cfg)
    assert summary.steps == 2 and summary.phases == ["grpo"]
    assert (tmp_path / "config.resolved.yaml").is_file() and (tmp_path / "final").is_dir()
    assert (tmp_path / "grpo" / "checkpoint-2").is_dir()
    assert summary.curves_path and Path(summary.curves_path).stat().st_size > 1000
    records = [r for r in read_metrics(summary.metrics_path) if "reward" in r]
    assert [r["step"] for r in records] == [1, 2]
    assert {"env/em", "env/retrieval_turns", "env/retrieval_cost", "rewards/em/mean", "completions/mean_length", "stage"} <= set(records[0])
    assert records[0]["stage"] == 1 and records[1]["stage"] == 1  # switch_step 2 in toy-cpu.yaml
    resolved = yaml.safe_load((tmp_path / "config.resolved.yaml").read_text())
    assert resolved["grpo"]["max_steps"] == 2
    # the same command with more steps resumes from checkpoint-2
    cfg2 = cfg.model_copy(update={"grpo": cfg.grpo.model_copy(update={"max_steps": 3})})
    again = train(cfg2)
    assert again.steps == 3
    steps = [r["step"] for r in read_metrics(again.metrics_path) if "reward" in r]
    assert steps == [1, 2, 3]
    last = [r for r in read_metrics(again.metrics_path) if "reward" in r][-1]
    assert last["stage"] == 2  # past the switch: accuracy-efficiency
    assert json.dumps(last)  # plain JSON numbers


@pytest.mark.data
def test_r1_router_step_recipe_runs(tmp_path):
    cfg = R1RouterStepConfig(
        output_dir=str(tmp_path), model={"name": "tiny"}, data={"n_questions": 4, "eval_sets": []},
        env={"max_completion_tokens": 12},
        grpo={"num_generations": 2, "per_device_train_batch_size": 4, "max_steps": 1, "use_cpu": True, "torch_threads": 1,
              "beta": 0.0, "learning_rate": 1e-3},
        schedule={"stages": [{"name": "step", "rewards": [{"name": "r1_router_step", "params": {"similarity": "token_f1"}}]}]},
    )
    summary = train(cfg)
    assert summary.steps == 1
    record = [r for r in read_metrics(summary.metrics_path) if "reward" in r][0]
    assert "rewards/r1_router_step/mean" in record and record["completions/mean_length"] <= 12


@pytest.mark.data
def test_r1_router_step_rows_keep_the_asked_step_kinds_of_the_train_side():
    from routerag.train.recipes import r1_router_step_prompts

    every = r1_router_step_prompts(R1RouterStepConfig(model={"name": "tiny"}, data={"eval_sets": []}))
    routes = r1_router_step_prompts(R1RouterStepConfig(model={"name": "tiny"}, data={"eval_sets": []}, step_types=["ret"]))
    kinds = [json.loads(r["step"])["step_type"] for r in every]
    assert {json.loads(r["step"])["step_type"] for r in routes} == {"ret"} and len(routes) == kinds.count("ret") == 259
    assert {"ans", "final"} <= set(kinds) and len(every) == 259 + 220 + 89  # the train side's 568 steps
    few = r1_router_step_prompts(R1RouterStepConfig(model={"name": "tiny"}, data={"eval_sets": [], "n_questions": 5},
                                                    step_types=["ret"]))
    positions = [routes.index(r) for r in few]
    assert len(few) == 5 and positions[0] == 0 and positions[-1] > 200  # evenly spaced over the route steps
    with pytest.raises(ValueError):
        R1RouterStepConfig(model={"name": "tiny"}, step_types=[])


@pytest.mark.data
def test_r1_router_sft_recipe_trains_on_train_trajectories_only(tmp_path):
    from routerag.corpus.r1router_split import split_ids
    from routerag.train.config import R1RouterSFTConfig

    cfg = R1RouterSFTConfig(
        output_dir=str(tmp_path), model={"name": "tiny"}, lora={"enabled": True, "r": 2, "alpha": 4},
        data={"eval_sets": []}, max_per_type={"ret": 3, "ans": 1, "final": 2},
        sft={"enabled": True, "max_steps": 2, "max_length": 640, "drop_longer": True, "per_device_train_batch_size": 1,
             "learning_rate": 1e-3},
        grpo={"use_cpu": True, "torch_threads": 1},
    )
    summary = train(cfg)
    assert summary.steps == 2 and summary.phases == ["sft"] and Path(summary.final_model or "").is_dir()
    record = json.loads((tmp_path / "sft_summary.json").read_text())
    assert record["rows"] == 6 and record["by_step_type"] == {"ret": 3, "ans": 1, "final": 2}
    assert record["dropped_longer"] > 0  # the long intermediate-answer prompts
    assert record["trajectory_ids"] and not set(record["trajectory_ids"]) & set(split_ids("heldout"))
    losses = [r["loss"] for r in read_metrics(summary.metrics_path) if "loss" in r]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
