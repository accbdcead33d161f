"""xllamacpp in a child process (binding ``xllamacpp-process``): the model is loaded and run by a
server in a child, and :class:`ChildProcess` sends it the requests the in-process engine would
hand to ``Server.handle_completions``, to the child's ``/v1/completions`` (streamed as
server-sent events). The replies are the same dicts, so :class:`XLlamaCppProcessModel` is the
in-process model with another engine.

Why: xllamacpp's ``Server`` constructor holds the GIL until the model is loaded (2.4 s for the
bundled 0.5B, 4.3 s with its policy adapter), so in a service every thread, the event loop
included, stops while a model is built. Here the parent only waits on a pipe (the GIL free) for
the child's one line: the listener's address, or why the model could not be loaded. The child
exits when the parent closes the pipe, or dies (the pipe closes with it).

Run as ``python -m routerag.llm.xllamacpp_process``, the module is the child: it reads one
:class:`~routerag.llm.xllamacpp_engine.ServerSpec` line from stdin.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import weakref
from typing import Any

from routerag.llm.base import ModelError
from routerag.llm.xllamacpp_backend import XLlamaCppModel
from routerag.llm.xllamacpp_engine import ChunkHandler, Engine, ServerSpec

START_TIMEOUT_S = 600.0  # a first load may join the bundled model's parts
REQUEST_TIMEOUT_S = 900.0  # one completion on a slow CPU; a child that dies ends the request at once


class XLlamaCppProcessModel(XLlamaCppModel):
    """:class:`XLlamaCppModel` whose llama.cpp server runs in a child process."""

    binding = "xllamacpp-process"
    where = ", child process"

    @staticmethod
    def _start(spec: ServerSpec) -> Engine:
        return ChildProcess(spec)


class ChildProcess:
    """A child process holding an xllamacpp server, reached over its loopback listener."""

    def __init__(self, spec: ServerSpec, *, start_timeout_s: float = START_TIMEOUT_S) -> None:
        import httpx

        self.api_key = spec.api_key
        self._proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._stop = weakref.finalize(self, _stop, self._proc)
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(spec.model_dump_json().encode() + b"\n")
            self._proc.stdin.flush()
            said = json.loads(_first_line(self._proc, start_timeout_s))
        except (OSError, ValueError, ModelError) as exc:
            self._stop()
            raise ModelError(f"the llama.cpp child process did not start: {exc}") from None
        if "error" in said:
            self._stop()
            raise ModelError(str(said["error"]))
        self.address: str = said["address"]
        self._client = httpx.Client(base_url=self.address, headers={"Authorization": f"Bearer {spec.api_key}"},
                                    timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0))

    @property
    def pid(self) -> int:
        return self._proc.pid

    def completions(self, request: dict[str, Any], on_chunk: ChunkHandler | None = None) -> dict[str, Any]:
        import httpx

        if not self._stop.alive:
            raise ModelError(f"the llama.cpp child process {self._proc.pid} was stopped (the model was closed)")
        try:
            if on_chunk is None:
                reply: dict[str, Any] = self._client.post("/v1/completions", json=request).json()
                return reply  # a refusal is {"error": {...}}, as in process
            with self._client.stream("POST", "/v1/completions", json=request) as response:
                if response.status_code != 200:
                    response.read()
                    on_chunk(response.json())
                    return {}
                for line in response.iter_lines():
                    kind, _, data = line.partition(": ")
                    if kind == "data" and data == "[DONE]":
                        break
                    if kind in ("data", "error") and data:
                        chunk = json.loads(data)
                        if on_chunk(chunk if kind == "data" else {"error": chunk}):
                            break  # leaving the stream closes it: the child stops generating
            return {}
        except (httpx.HTTPError, ValueError) as exc:
            raise ModelError(f"the llama.cpp child process {self._proc.pid} did not answer: {exc}"
                             f"{_exit_note(self._proc)}") from None

    def close(self) -> None:
        if hasattr(self, "_client"):
            self._client.close()
        self._stop()


def _first_line(proc: subprocess.Popen[bytes], timeout_s: float) -> bytes:
    """The child's first line on stdout, read without holding the GIL (select on the pipe)."""
    assert proc.stdout is not None
    fd, seen, deadline = proc.stdout.fileno(), b"", time.monotonic() + timeout_s
    while b"\n" not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ModelError(f"no answer in {timeout_s:.0f} s")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ModelError(f"it exited before its model was loaded{_exit_note(proc, wait=True)}")
            seen += chunk
    return seen.split(b"\n", 1)[0]


def _exit_note(proc: subprocess.Popen[bytes], *, wait: bool = False) -> str:
    try:
        code = proc.wait(5) if wait else proc.poll()
    except subprocess.TimeoutExpired:
        code = None
    return "" if code is None else f" (exit code {code})"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Close the child's stdin (it exits), then kill it if it is still there after 5 s."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(5)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def main() -> int:
    """The child: build the server named on stdin, say its address on stdout, serve until stdin closes."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever llama.cpp prints goes to stderr: stdout carries the one line only
    try:
        server = ServerSpec.model_validate_json(sys.stdin.buffer.readline()).build()
    except (ModelError, ValueError) as exc:
        out.write(json.dumps({"error": str(exc)}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"address": server.listening_address}) + "\n")
    out.flush()
    sys.stdin.buffer.read()  # until the parent closes the pipe or exits
    os._exit(0)  # the server's threads are not joined


if __name__ == "__main__":
    sys.exit(main())
