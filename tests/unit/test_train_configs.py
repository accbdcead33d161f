"""Training configurations: one class per recipe (discriminated on ``recipe``) with its invariants
checked at load, ``base:`` layering of YAML files, and every file in ``configs/`` loading."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from routerag.config import ConfigError, read_config_file
from routerag.train.config import (
    RECIPE_CONFIGS,
    GraphRAGR1Config,
    R1RouterStepConfig,
    RouteRAGRFTConfig,
    RouteRAGTwoStageConfig,
    TrainConfig,
    load_train_config,
    train_config,
)
from routerag.train.data import default_schedule

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
VERL = CONFIGS / "train" / "verl"  # verl's own (Hydra) configurations, checked by tests/integration/test_train_verl_configs.py
HAS_TRL = importlib.util.find_spec("trl") is not None


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _needs_trl(data: dict[str, Any]) -> bool:
    """``grpo.extra`` / ``sft.extra`` names are checked against TRL's classes at load."""
    return any(isinstance(data.get(s), dict) and data[s].get("extra") for s in ("grpo", "sft"))


@pytest.mark.parametrize("path", sorted(CONFIGS.rglob("*.yaml")), ids=lambda p: str(p.relative_to(CONFIGS)))
def test_every_yaml_in_configs_loads(path: Path) -> None:
    if VERL in path.parents:
        assert yaml.safe_load(path.read_text(encoding="utf-8"))  # not routerag's: verl reads it
        return
    if _needs_trl(read_config_file(path)) and not HAS_TRL:
        pytest.skip("its grpo.extra / sft.extra names are checked against TRL")
    cfg = load_train_config(path)
    assert isinstance(cfg, RECIPE_CONFIGS[cfg.recipe])
    assert default_schedule(cfg).stages


def test_the_run_records_of_past_runs_load() -> None:
    """The configurations that only recorded past runs left configs/: their resolved copies stay
    with the run records and load as they are (the one flat layout of that time included)."""
    resolved = [p for p in (ROOT / "docs" / "results").rglob("config.resolved.yaml")
                if "recipe" in (yaml.safe_load(p.read_text(encoding="utf-8")) or {})]
    names = {p.parent.name for p in resolved}
    assert {"grpo-outcome", "grpo-dynamic", "rft-2wiki", "rft-outcome"} <= names
    for path in resolved:
        if _needs_trl(read_config_file(path)) and not HAS_TRL:
            continue
        assert load_train_config(path).recipe == yaml.safe_load(path.read_text(encoding="utf-8"))["recipe"]


def test_the_gpu_run_config_is_a_short_override_that_resolves_to_the_run_record() -> None:
    layered = CONFIGS / "train" / "routerag-grpo-gpu.yaml"
    assert yaml.safe_load(layered.read_text(encoding="utf-8"))["base"] == "routerag-grpo-cpu.yaml"
    merged = read_config_file(layered)
    record = read_config_file(ROOT / "docs" / "results" / "grpo-gpu" / "train" / "config.resolved.yaml")
    for data in (merged, record):
        data["grpo"].pop("extra")  # {tf32: true} in both; checked against TRL when it is installed
        data.pop("output_dir")
    assert record["data"].pop("eval_sets") == []  # the GPU node had no benchmark data: set on its command line
    merged["data"].pop("eval_sets")
    assert train_config(merged) == train_config(record)


def test_base_layers_deep_merge_relative_to_the_file(tmp_path: Path) -> None:
    _write(tmp_path / "root.yaml", {"recipe": "routerag-two-stage", "output_dir": "runs/root",
                                    "grpo": {"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 3},
                                    "data": {"eval_sets": ["2wiki", "musique:50"]}})
    _write(tmp_path / "mid.yaml", {"base": "root.yaml", "grpo": {"max_steps": 5}})
    leaf = _write(tmp_path / "exp" / "leaf.yaml", {"base": "../mid.yaml", "data": {"eval_sets": ["2wiki"]}, "switch_step": 2})
    cfg = load_train_config(leaf, ["grpo.learning_rate=0.01"])
    assert isinstance(cfg, RouteRAGTwoStageConfig)
    assert (cfg.grpo.num_generations, cfg.grpo.per_device_train_batch_size, cfg.grpo.max_steps) == (4, 8, 5)  # merged
    assert cfg.data.eval_sets == ["2wiki"]  # a list replaces the base's
    assert cfg.output_dir == "runs/root" and cfg.switch_step == 2 and cfg.grpo.learning_rate == 0.01
    assert "base" not in cfg.model_dump()  # the resolved configuration has no layers


def _error(path: Path, overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_train_config(path, overrides)
    message = str(info.value)
    assert "\n" not in message, message  # one line
    return message


def test_a_bad_configuration_is_one_clear_line(tmp_path: Path) -> None:
    wrong = _write(tmp_path / "wrong.yaml", {"recipe": "routerag-grpo"})
    assert _error(wrong) == (f"{wrong}: unknown recipe 'routerag-grpo'; valid: routerag-two-stage, graphrag-r1, "
                             "r1-router-step, r1-router-sft, routerag-sft, routerag-rft")
    groups = _write(tmp_path / "groups.yaml", {"recipe": "routerag-two-stage",
                                               "grpo": {"num_generations": 5, "per_device_train_batch_size": 8}})
    assert "not a multiple of the group size G = num_generations 5" in _error(groups)
    assert "a generation batch of 16 completions" in _error(groups, ["grpo.gradient_accumulation_steps=2"])
    assert isinstance(load_train_config(groups, ["grpo.gradient_accumulation_steps=5"]), RouteRAGTwoStageConfig)  # 40 = 8 x 5
    missing = _write(tmp_path / "exp.yaml", {"base": "nowhere.yaml", "recipe": "routerag-two-stage"})
    assert _error(missing) == f"{tmp_path / 'nowhere.yaml'}: no such configuration file (base of {missing})"
    _write(tmp_path / "a.yaml", {"base": "b.yaml"})
    _write(tmp_path / "b.yaml", {"base": "a.yaml"})
    assert "base layers form a cycle" in _error(tmp_path / "a.yaml")
    foreign = _write(tmp_path / "foreign.yaml", {"recipe": "routerag-two-stage", "rft": {"rounds": 2}})
    assert _error(foreign).endswith("invalid routerag-two-stage configuration: rft: not a setting of recipe routerag-two-stage")
    typo = _write(tmp_path / "typo.yaml", {"recipe": "routerag-rft", "rft": {"roundz": 3}})
    assert _error(typo).endswith("rft.roundz: not a setting of recipe routerag-rft")
    lora = _write(tmp_path / "lora.yaml", {"recipe": "routerag-rft", "lora": {"layers_top": 4}})
    assert "lora.layers_top needs lora.enabled: true" in _error(lora)
    unread = _write(tmp_path / "unread.yaml", {"recipe": "graphrag-r1", "sft": {"enabled": True, "ground": True, "rows_files": ["r"]}})
    assert _error(unread).endswith("sft.rows_files, sft.ground: not read by recipe graphrag-r1")
    grounded = _write(tmp_path / "grounded.yaml", {"recipe": "routerag-sft", "sft": {"golden_set": "g", "ground": True}})
    assert "a stored sft.golden_set is grounded already" in _error(grounded)


def test_routerag_train_refuses_a_bad_file_with_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    import routerag.cli.train_cmds  # noqa: F401  (registers the commands)
    from routerag.cli.app import app

    bad = _write(tmp_path / "bad.yaml", {"grpo": {"num_generations": 3, "per_device_train_batch_size": 4}})
    result = CliRunner().invoke(app, ["train", "routerag-two-stage", "--config", str(bad), "--dry-run"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "group size G = num_generations 3" in result.output


def test_a_flat_run_record_drops_the_sections_its_recipe_lacks_only_at_their_defaults() -> None:
    flat = {"recipe": "routerag-two-stage", "sft": {"enabled": False}, "rft": {}, "pra_until": 20, "switch_step": 4}
    assert train_config(flat) == RouteRAGTwoStageConfig(switch_step=4)
    with pytest.raises(ConfigError, match="sft: not a setting of recipe routerag-two-stage"):
        train_config({**flat, "sft": {"enabled": True}})


def test_the_recipe_classes() -> None:
    with pytest.raises(ValueError, match="build a recipe's configuration"):
        TrainConfig(recipe="routerag-two-stage")
    assert isinstance(train_config({"recipe": "graphrag-r1", "sft": {"enabled": True}}), GraphRAGR1Config)
    rft = RouteRAGRFTConfig(lora={"enabled": True})
    assert rft.export_gguf and not rft.model_copy(update={"sft": rft.sft.model_copy(update={"export_gguf": False})}).export_gguf
    assert not hasattr(RouteRAGTwoStageConfig(), "sft") and not hasattr(GraphRAGR1Config(), "rft")
    for cls in RECIPE_CONFIGS.values():  # every field documented (routerag train --dry-run users read them)
        assert not [name for name, f in cls.model_fields.items() if not f.description], cls.__name__


def test_r1_router_step_defaults_are_the_papers(tmp_path: Path) -> None:
    # R1-Router's Step-GRPO: group 8, lr 1e-6, clip 0.2 (TRL's default), alpha = beta = 0.5 in the step reward
    for cfg in (R1RouterStepConfig(), train_config({"recipe": "r1-router-step", "grpo": {"max_steps": 3}})):
        assert isinstance(cfg, R1RouterStepConfig) and cfg.trajectories == "train"
        assert (cfg.grpo.num_generations, cfg.grpo.per_device_train_batch_size, cfg.grpo.learning_rate) == (8, 8, 1e-6)
        (reward,) = cfg.default_schedule().stages[0].rewards
        assert (reward.resolved.w_query, reward.resolved.w_route) == (0.5, 0.5)
    # the earlier G = 5 remains a valid choice when named
    five = train_config({"recipe": "r1-router-step", "grpo": {"num_generations": 5, "per_device_train_batch_size": 10}})
    assert (five.grpo.num_generations, five.grpo.per_device_train_batch_size) == (5, 10)
    bad = _write(tmp_path / "bad.yaml", {"recipe": "r1-router-step", "grpo": {"per_device_train_batch_size": 12}})
    assert "not a multiple of the group size G = num_generations 8" in _error(bad)
    if HAS_TRL:
        from trl import GRPOConfig

        from routerag.train.grpo import grpo_arguments

        args = GRPOConfig(**{**grpo_arguments(R1RouterStepConfig(), tmp_path, cpu=True), "use_cpu": True})
        assert (args.epsilon, args.num_generations, args.learning_rate) == (0.2, 8, 1e-6)
