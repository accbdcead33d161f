"""Joining Ray for the scale path (``--engine ray``, ``serve-retrieval --ray``): the cluster named by
``RAY_ADDRESS`` when set, else a local Ray on this machine. Ray is the ``scale`` extra."""

from __future__ import annotations

import os
from typing import Any

from routerag.errors import RouteragError


class MissingExtraError(RouteragError, ImportError):
    """Ray (the ``scale`` extra) is not installed; the message says what to install."""


def require_ray() -> None:
    """Fail with the install command when Ray (the ``scale`` extra) is missing; imports nothing."""
    import importlib.util

    for module in ("ray", "pyarrow"):  # top-level names: looked up, not imported
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(f"the Ray path needs the scale extra: pip install 'routerag[scale]' (no module named {module!r})")


def ensure_ray(num_cpus: int | None = None) -> None:
    """Connect to the running cluster (``RAY_ADDRESS``), or start Ray locally (``num_cpus``:
    default every core); does nothing when this process already joined Ray."""
    require_ray()
    import ray

    if ray.is_initialized():
        return
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=False)
    else:  # "local": a new Ray, never the head named in /tmp/ray/ray_current_cluster (`ray start`
        # leaves it behind when its process is killed, and plain ray.init() then waits on it forever)
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)


def _free_ports(n: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _drain(stream: Any) -> None:
    """Read a child's output to the end, so a full pipe never blocks it."""
    for _ in stream:
        pass


# `ray start` run so that its agents start in Ray's minimal mode (the mode of a plain `ray` install
# without the dashboard's dependencies): they publish their ports right away instead of after
# importing every dashboard module, which on a loaded machine takes longer than the raylet waits
_RAY_START_MINIMAL_AGENT = (
    "import sys; sys.modules['ray.dashboard.optional_deps'] = None; "
    "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()"
)


class LocalHead:
    """A Ray head on this machine, run by ``ray start --head --block`` in a child process with every
    agent port assigned up front, and this process connected to it.

    Plain ``ray.init()`` lets the agents pick their ports and the raylet then waits a fixed 15 s
    for their port files; on a loaded machine (slow Python imports) it aborts with "Timed out
    waiting for file .../metrics_agent_port_...". Here the agents run in Ray's minimal mode (they
    publish their ports before loading the dashboard modules), every port is assigned up front,
    and a failed start is retried. Used by the
    ``ray`` tests and the Ray benchmarks; ``stop()`` ends the child (and with it its Ray processes)."""

    def __init__(self, num_cpus: int, *, attempts: int = 5) -> None:
        """Create it before this process imports ``ray``: Ray reads the token settings once."""
        import secrets
        import sys

        if "ray" in sys.modules:
            raise RuntimeError("start LocalHead before importing ray (Ray reads RAY_AUTH_* at import)")
        # a token of this head's own, for the head (inherited) and this driver: the default token
        # file (~/.ray/auth_token) is shared by every Ray user of the machine
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
        import ray

        for attempt in range(1, attempts + 1):
            if self._start(num_cpus):
                ray.init(address=self.address, log_to_driver=False)
                return
            if attempt == attempts:
                tail = "\n".join(self.output)
                raise RuntimeError(f"`ray start --head` failed {attempts} times; the last one said:\n{tail}")

    def _start(self, num_cpus: int) -> bool:
        """One ``ray start --head --block``; True once it reports the runtime started, False if it exited."""
        import subprocess
        import sys
        import threading

        gcs, node_manager, object_manager, agent_grpc, agent_listen, runtime_env, metrics, client = _free_ports(8)
        command = [
            sys.executable, "-c", _RAY_START_MINIMAL_AGENT, "start", "--head", "--block", f"--num-cpus={num_cpus}", "--include-dashboard=false",
            "--disable-usage-stats", "--include-log-monitor=false", f"--ray-client-server-port={client}",
            "--node-ip-address=127.0.0.1", f"--port={gcs}",
            f"--node-manager-port={node_manager}", f"--object-manager-port={object_manager}",
            f"--dashboard-agent-grpc-port={agent_grpc}", f"--dashboard-agent-listen-port={agent_listen}",
            f"--runtime-env-agent-port={runtime_env}", f"--metrics-export-port={metrics}",
        ]
        self.address = f"127.0.0.1:{gcs}"
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        self.output: list[str] = []
        for line in self.process.stdout:
            self.output = [*self.output[-20:], line.rstrip()]
            if "Ray runtime started" in line:
                threading.Thread(target=_drain, args=(self.process.stdout,), daemon=True).start()
                return True
        self.process.wait()
        return False

    def stop(self) -> None:
        import ray

        ray.shutdown()
        self.process.terminate()
        try:
            self.process.wait(timeout=120)
        except Exception:  # noqa: BLE001
            self.process.kill()
            self.process.wait()
        self._forget_address()

    def _forget_address(self) -> None:
        """Remove the file in which ``ray start`` named this head as the machine's current cluster
        (``ray stop`` would; ending the child does not), so that a later plain ``ray.init()``
        on this machine does not wait for a head that is gone. Ray's own path for it (private)."""
        try:
            from ray._private.utils import get_ray_address_file

            path = get_ray_address_file(None)
            with open(path, encoding="utf-8") as handle:
                named = handle.read().strip()
            if named.rpartition(":")[2] == self.address.rpartition(":")[2]:
                os.remove(path)
        except (ImportError, OSError):
            pass
