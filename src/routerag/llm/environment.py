"""``ModelEnvironment``: the model defaults an operator sets in the environment, as a value.

``ROUTERAG_MODEL``, ``ROUTERAG_BASE_URL`` and ``ROUTERAG_BACKEND`` stand for a configuration's
``model``, ``base_url`` and ``backend`` where it leaves them unset. The model layer reads no
environment: the front door (:func:`routerag.api.environment.model_environment`, which the CLI,
the service and the MCP server go through) reads them and applies them to each model
configuration it takes (:meth:`~routerag.llm.config.ModelConfig.with_environment`), so that
:meth:`~routerag.llm.config.ModelConfig.resolved` depends on the configuration alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ENV_MODEL = "ROUTERAG_MODEL"
ENV_BASE_URL = "ROUTERAG_BASE_URL"
ENV_BACKEND = "ROUTERAG_BACKEND"


@dataclass(frozen=True)
class ModelEnvironment:
    """What the environment says of the model; None (or an empty variable): nothing. The backend is
    checked against the registry when it is applied to a configuration that names none."""

    model: str | None = None
    base_url: str | None = None
    backend: str | None = None

    @classmethod
    def read(cls, environ: Mapping[str, str]) -> ModelEnvironment:
        """The model environment in ``environ`` (the front door passes ``os.environ``)."""
        return cls(model=environ.get(ENV_MODEL) or None, base_url=environ.get(ENV_BASE_URL) or None,
                   backend=environ.get(ENV_BACKEND) or None)
