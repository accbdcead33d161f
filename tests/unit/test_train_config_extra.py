"""``grpo.extra`` / ``sft.extra``: further TRL arguments passed through, their names checked against
TRL's own ``GRPOConfig`` / ``SFTConfig`` when the configuration is loaded, so ``GRPOSpec`` need
not mirror TRL."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("trl")

from routerag.config import ConfigError  # noqa: E402
from routerag.train.config import (  # noqa: E402
    GRPO_DERIVED,
    SFT_DERIVED,
    RouteRAGSFTConfig,
    RouteRAGTwoStageConfig,
    TrainConfig,
    load_train_config,
)
from routerag.train.grpo import grpo_arguments  # noqa: E402


def _load(tmp_path: Path, data: dict) -> TrainConfig:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_train_config(path)


def test_extra_trl_arguments_are_checked_at_load_and_passed_through(tmp_path: Path) -> None:
    from trl import GRPOConfig

    cfg = _load(tmp_path, {"grpo": {"extra": {"max_grad_norm": 0.5, "report_to": "tensorboard"}}})
    args = grpo_arguments(cfg, tmp_path / "out", cpu=True)
    assert args["max_grad_norm"] == 0.5 and args["report_to"] == "tensorboard"  # a routerag default overridden
    built = GRPOConfig(**args)
    assert built.max_grad_norm == 0.5 and built.learning_rate == cfg.grpo.learning_rate
    with pytest.raises(ConfigError, match=r"grpo.extra: not arguments of trl.GRPOConfig: max_grad_nrom \(did you mean max_grad_norm"):
        _load(tmp_path, {"grpo": {"extra": {"max_grad_nrom": 0.5}}})
    with pytest.raises(ConfigError, match=r"grpo.extra may not set .*learning_rate \(set by grpo.learning_rate\)"):
        _load(tmp_path, {"grpo": {"extra": {"learning_rate": 1.0}}})
    with pytest.raises(ConfigError, match=r"sft.extra may not set .*seed \(set by grpo.seed\)"):
        _load(tmp_path, {"recipe": "routerag-sft", "sft": {"extra": {"weight_decay": 0.1, "seed": 3}}})
    sft = _load(tmp_path, {"recipe": "routerag-sft", "sft": {"extra": {"weight_decay": 0.1}}})
    assert isinstance(sft, RouteRAGSFTConfig) and sft.sft.extra == {"weight_decay": 0.1}


def test_the_derived_names_are_what_routerag_passes(tmp_path: Path) -> None:
    """What routerag passes to GRPOConfig is derived from the configuration (GRPO_DERIVED, which
    extra may not name) or one of the four defaults extra may override; every name is TRL's."""
    import dataclasses

    from trl import GRPOConfig, SFTConfig

    passed = set(grpo_arguments(RouteRAGTwoStageConfig(), tmp_path, cpu=True))
    assert passed - set(GRPO_DERIVED) == {"bf16", "report_to", "disable_tqdm", "mask_truncated_completions"}
    assert passed <= {f.name for f in dataclasses.fields(GRPOConfig)}
    sft_fields = {f.name for f in dataclasses.fields(SFTConfig)}
    assert {"output_dir", "use_cpu", "num_train_epochs", "logging_steps", "save_steps", "seed"} <= sft_fields & set(SFT_DERIVED)
