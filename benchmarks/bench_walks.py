"""How far one call travels through the package: the module walk of ``routerag.api.ask`` and
``routerag.api.evaluate``, measured by tracing a real call (BM25 over 50 demo passages, ``vanilla``,
the scripted backend, so no model weights load and the run takes about a second).

* **walk**: the ``routerag`` modules in the order the call first enters them (function calls only;
  frames that run while a module is imported are left out);
* **moves**: the walk's length minus one (each new module entered is a move);
* **climbs**: moves into a module of a higher layer than the one before it (the layers of the
  import-linter contract in ``pyproject.toml``, highest first);
* **edges**: distinct caller-module -> callee-module pairs; **up edges**: those whose callee sits in a
  higher layer (a callback or an injected function: the import graph cannot show them).

    python3 benchmarks/bench_walks.py                 # a table
    python3 benchmarks/bench_walks.py --json          # the walks too
    PYTHONPATH=/tmp/old/src python3 benchmarks/bench_walks.py --pyproject /tmp/old/pyproject.toml   # another tree

A shorter walk with fewer climbs is a call a reader can follow; compare two trees with the same
command, not with numbers measured some other way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any


def layer_ranks(pyproject: Path) -> dict[str, int]:
    """Top-level package -> its layer's position in the layers contract (0: the highest)."""
    contracts = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c.get("type") == "layers")
    return {name.strip(): i for i, entry in enumerate(layers) for name in entry.split("|")}


class Walk:
    """Trace one call and record the package modules it enters."""

    def __init__(self, src: str, ranks: dict[str, int]) -> None:
        self.src, self.ranks = src, ranks
        self.first: list[str] = []
        self.edges: set[tuple[str, str]] = set()

    def module(self, filename: str) -> str:
        rel = os.path.relpath(filename, self.src)[:-3].replace(os.sep, ".").removesuffix(".__init__")
        return "routerag" if rel == "__init__" else f"routerag.{rel}"

    def rank(self, module: str) -> int | None:
        parts = module.split(".")
        return self.ranks.get(parts[1]) if len(parts) > 1 else None

    def _ours(self, frame: Any) -> bool:
        return frame.f_code.co_filename.startswith(self.src)

    def _importing(self, frame: Any) -> bool:
        while frame is not None:
            code = frame.f_code
            if code.co_filename.startswith("<frozen importlib") or (code.co_name == "<module>" and self._ours(frame)):
                return True
            frame = frame.f_back
        return False

    def _trace(self, frame: Any, event: str, arg: object) -> None:
        if event != "call" or not self._ours(frame) or frame.f_code.co_name == "<module>" or self._importing(frame.f_back):
            return None
        callee = self.module(frame.f_code.co_filename)
        if callee not in self.first:
            self.first.append(callee)
        caller = frame.f_back
        while caller is not None and not self._ours(caller):
            caller = caller.f_back
        if caller is not None and (name := self.module(caller.f_code.co_filename)) != callee:
            self.edges.add((name, callee))
        return None

    def run(self, call: Callable[[], object]) -> dict[str, Any]:
        sys.settrace(self._trace)
        threading.settrace(self._trace)
        try:
            call()
        finally:
            sys.settrace(None)
            threading.settrace(None)  # type: ignore[arg-type]
        return self.summary()

    def _up(self, a: str, b: str) -> bool:
        ra, rb = self.rank(a), self.rank(b)
        return ra is not None and rb is not None and rb < ra

    def summary(self) -> dict[str, Any]:
        up = sorted(e for e in self.edges if self._up(*e))
        return {"modules": len(self.first), "moves": len(self.first) - 1,
                "climbs": sum(self._up(a, b) for a, b in zip(self.first, self.first[1:])),
                "edges": len(self.edges), "up_edges": len(up), "walk": self.first, "up": up}


def measure(pyproject: Path) -> dict[str, dict[str, Any]]:
    os.environ["ROUTERAG_HOME"] = home = tempfile.mkdtemp(prefix="bench-walks-")
    import routerag
    import routerag.api as api
    from routerag.api.asking import AskParams
    from routerag.api.evaluating import EvaluateParams
    from routerag.corpus.schema import Document
    from routerag.eval.config import EvalConfig
    from routerag.index.bundle import build_index
    from routerag.llm.config import ModelConfig
    from routerag.run.config import RunConfig

    src = str(Path(routerag.__file__).parent)
    ranks = layer_ranks(pyproject)
    rows = json.loads((Path(src) / "data" / "demo" / "2wiki_corpus.json").read_text())[:50]
    index = Path(home) / "index"
    build_index([Document.make(r["title"], r["text"]) for r in rows], index, components=("bm25",))
    model = ModelConfig(backend="scripted", scripted_outputs=["Answer: Lothair II"])
    params: dict[str, Any] = {"source": "bm25", "k": 3}
    ask = RunConfig(strategy="vanilla", params=params, model=model, components=["bm25"])
    evaluate = EvalConfig(dataset="demo", strategy="vanilla", params=params, model=model, components=["bm25"], limit=2)
    return {
        "api.ask": Walk(src, ranks).run(lambda: api.ask("Who was Teutberga married to?",
                                                        AskParams(config=ask, index_dir=index))),
        "api.evaluate": Walk(src, ranks).run(lambda: api.evaluate(
            EvaluateParams(config=evaluate, out=Path(home) / "run", progress=False))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pyproject", type=Path, default=Path(__file__).resolve().parents[1] / "pyproject.toml",
                        help="the pyproject.toml whose layers contract ranks the modules (the measured tree's)")
    parser.add_argument("--json", action="store_true", help="print the walks and up edges as JSON")
    args = parser.parse_args()
    found = measure(args.pyproject)
    if args.json:
        print(json.dumps(found, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="module walks (benchmarks/bench_walks.py)")
    for col in ("call", "modules", "moves", "climbs", "edges", "up edges"):
        table.add_column(col, justify="left" if col == "call" else "right")
    for call, w in found.items():
        table.add_row(call, *(str(w[k]) for k in ("modules", "moves", "climbs", "edges", "up_edges")))
    Console().print(table)
    for call, w in found.items():
        for a, b in w["up"]:
            print(f"{call}: up edge {a} -> {b}")


if __name__ == "__main__":
    main()
