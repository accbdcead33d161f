"""Joining Ray for the scale path (``--engine ray``, ``serve-retrieval --ray``): the cluster named by
``RAY_ADDRESS`` when set, else a local Ray on this machine. Ray is the ``scale`` extra."""

from __future__ import annotations

import os


def ensure_ray(num_cpus: int | None = None) -> None:
    """Connect to the running cluster (``RAY_ADDRESS``), or start Ray locally (``num_cpus``:
    default every core); does nothing when this process already joined Ray."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(f"the Ray path needs the scale extra: pip install 'routerag[scale]' ({exc})") from None
    if ray.is_initialized():
        return
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
