"""``train``: a policy trained with one of the recipes (GRPO / SFT / RFT over TRL) — the job of
``routerag train``. The run directory is the configuration's ``output_dir`` (an existing one is
resumed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from routerag.errors import RouteragError

if TYPE_CHECKING:
    from routerag.train.config import TrainConfig
    from routerag.train.recipes import TrainRunSummary


class TrainRequestError(RouteragError, ValueError):
    """A training run that cannot start as configured (its data, its recipe's requirements)."""


def train(config: TrainConfig) -> TrainRunSummary:
    """Run the configured recipe (an unknown recipe raises ``UnknownNameError``, listing the valid
    ones); a recipe's refusal (``ValueError``, a missing file) is a :class:`TrainRequestError`."""
    from routerag.train.recipes import RECIPES
    from routerag.train.recipes import train as run_recipe

    RECIPES.get(config.recipe)
    try:
        return run_recipe(config)
    except RouteragError:
        raise
    except (ValueError, FileNotFoundError) as exc:
        raise TrainRequestError(str(exc)) from None
