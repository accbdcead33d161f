"""Fixtures shared by several test modules: the shared benchmark data folder, the bundled 0.5B's
tokenizer, for the service tests (HTTP API and browser UI) a small real BM25 source set, and
:func:`wait_until_serving` for the tests that start a server in a subprocess.

Markers (registered in pyproject.toml; docs/guides/testing.md): every test gets a kind, ``unit``
when nothing else applies, and the fixtures a test uses add the resources it needs (``shared`` ->
``data``, ``tokenizer`` -> ``model``, ``retrieval`` -> ``service``, ``ray_local`` -> ``ray``).
Each test module lies in the folder of the heaviest kind among its tests (``tests/unit``,
``tests/integration``, ``tests/model``, ``tests/service``, ``tests/browser``); a test of a kind
heavier than its folder, or a module outside these folders, stops the collection.
Without the benchmark folder the ``data`` tests are skipped with one reason; every other test runs
as it would on such a clone (``ROUTERAG_DATA_DIR`` points nowhere while it runs), so a test that
reads the folder without the marker fails here even where the folder exists."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from routerag.corpus.datasets import DataNotFoundError, data_root
from routerag.sources.registry import bundle_sources

NO_DATA = (
    "needs the benchmark data folder: set ROUTERAG_DATA_DIR to it "
    "(or place it at shared/data in a folder above the checkout)"
)
# the kinds of test, lightest first, and the folders under tests/ named after them: each test has at
# least one kind (when none is set: ``integration`` for a test that needs the data folder or Ray, else
# ``unit``), and a module lies in the folder of its heaviest test's kind
KINDS = ("unit", "integration", "model", "service", "browser")
# fixture -> the markers a test using it (directly or through another fixture) gets
FIXTURE_MARKS = {
    "shared": ("data",),
    "tokenizer": ("model",),
    "retrieval": ("service",),
    "ray_local": ("ray",),
}
# what ROUTERAG_DATA_DIR is while a test without the ``data`` marker runs
NOWHERE = "/nonexistent/routerag-tests-without-data"
HERE = Path(__file__).resolve().parent


def _data_missing() -> bool:
    try:
        data_root()
    except DataNotFoundError:
        return True
    return False


def _misplaced(item: pytest.Item) -> str | None:
    """Why ``item`` is not in the right folder under tests/, or None when it is."""
    try:
        folder = item.path.relative_to(HERE).parts[0]
    except ValueError:  # a test outside tests/ (a path given on the command line)
        return None
    if folder not in KINDS:
        return f"{item.nodeid}: test modules lie in tests/<kind>/ (one of {', '.join(KINDS)})"
    heaviest = max((kind for kind in KINDS if item.get_closest_marker(kind)), key=KINDS.index)
    if KINDS.index(heaviest) > KINDS.index(folder):
        return f"{item.nodeid}: a {heaviest} test in tests/{folder}/ (move the module to tests/{heaviest}/)"
    return None


@pytest.hookimpl(tryfirst=True)  # before -m selects: the markers given here count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = _data_missing()
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            for name in FIXTURE_MARKS.get(fixture, ()):
                item.add_marker(name)
        if not any(item.get_closest_marker(kind) for kind in KINDS):
            heavy = item.get_closest_marker("data") or item.get_closest_marker("ray")
            item.add_marker("integration" if heavy else "unit")
        if missing and item.get_closest_marker("data"):
            item.add_marker(pytest.mark.skip(reason=NO_DATA))
    misplaced = sorted({message for item in items if (message := _misplaced(item))})
    if misplaced:
        raise pytest.UsageError("tests outside their kind's folder:\n" + "\n".join(misplaced))
    if "slow" not in (config.option.markexpr or ""):  # `-m unit`, `-m "not model"`: still without `slow`
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """A test without the ``data`` marker runs as on a clone without the folder."""
    if item.get_closest_marker("data"):
        return (yield)
    before = os.environ.get("ROUTERAG_DATA_DIR")
    os.environ["ROUTERAG_DATA_DIR"] = NOWHERE
    try:
        return (yield)
    finally:
        if before is None:
            os.environ.pop("ROUTERAG_DATA_DIR", None)
        else:
            os.environ["ROUTERAG_DATA_DIR"] = before


def wait_until_serving(url: str, process: subprocess.Popen, *, timeout_s: float = 180, log: Path | None = None) -> None:
    """Poll ``GET url`` until it answers 200, for a server started in ``process``. The default
    deadline allows a cold start under load (the server imports a lot); a process that exits fails
    the test at once with its output (its piped stdout, or ``log`` when it writes to a file)."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=10) as client:
        while True:
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if process.poll() is not None:
                output = log.read_text(errors="replace") if log is not None else process.stdout.read() if process.stdout else ""
                pytest.fail(f"the server exited with {process.returncode} before {url} answered:\n{output[-4000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"{url} did not answer 200 within {timeout_s:g} s")
            time.sleep(0.2)


class FirstChoice:
    """A router test double (``ROUTERS.register(name, FirstChoice)``) for tests where adaptive's
    router is not what is tested: it ranks the choices in the order given."""

    name = "first-choice"

    def __init__(self, deps) -> None:
        self.deps = deps

    def route(self, query, choices):
        from routerag.routing import RouteChoice, RouteResult

        return RouteResult(ranked=[RouteChoice(name=choice, score=1.0) for choice in choices])


# a tiny custom source that the 2Wiki slice knows nothing about, uploaded by the service tests
NOTES_CSV = (
    "title,text\n"
    "Zorblax,\"Zorblax is a fictional moon of Neptune discovered by Ada Quill in 2031.\"\n"
    "Ada Quill,Ada Quill is an astronomer born in Leeds who found the moon Zorblax.\n"
    "Leeds,Leeds is a city in West Yorkshire.\n"
)


def _set_warm_up_default(value: bool) -> bool:
    from routerag.server.settings import ServiceSettings

    field = ServiceSettings.model_fields["warm_up"]
    before, field.default = field.default, value
    ServiceSettings.model_rebuild(force=True)
    return bool(before)


@pytest.fixture(autouse=True, scope="session")
def _services_warm_up_only_when_asked():
    """A service a test builds in-process does not warm up (load its default strategy's real model
    in a background thread) unless the test sets ``warm_up=True``: the service's default is on, and
    hundreds of test apps each loading the bundled model beside the test would cost minutes. The
    ``routerag serve`` subprocesses keep the default; :func:`service_defaults` restores it."""
    shipped = _set_warm_up_default(False)
    yield shipped
    _set_warm_up_default(shipped)


@pytest.fixture(scope="module")
def service_defaults(_services_warm_up_only_when_asked):
    """The service settings' shipped defaults, for the tests that document them."""
    _set_warm_up_default(_services_warm_up_only_when_asked)
    yield
    _set_warm_up_default(False)


@pytest.fixture(scope="session")
def tokenizer():
    """The bundled 0.5B's Hugging Face tokenizer (converted from its GGUF once, then cached, ~1 s)."""
    from routerag.llm.hf_assets import load_tokenizer

    return load_tokenizer("bundled:qwen2.5-coder-0.5b")


@pytest.fixture(scope="session")
def shared() -> Path:
    """The shared benchmark data folder (``data_root()``); a test using it is marked ``data`` and
    skipped without the folder."""
    try:
        return data_root()
    except DataNotFoundError:
        pytest.skip(NO_DATA)


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, shared) -> Path:
    """An index directory of BM25 over the first 50 real 2Wiki passages, built once per test module
    (the service, CLI and front-door tests serve it; a module may define its own)."""
    from routerag.corpus.schema import Document
    from routerag.index.bundle import build_index

    corpus = shared / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
    rows = json.loads(corpus.read_text(encoding="utf-8"))[:50]
    directory = tmp_path_factory.mktemp("bm25-idx") / "bundle"
    build_index([Document.make(r["title"], r["text"]) for r in rows], directory, components=("bm25",))
    return directory


@pytest.fixture(scope="module")
def sources(index_dir):
    """``index_dir`` mounted: one fresh SourceSet per test module (the service tests mount uploaded
    sources into it)."""
    from routerag.index.bundle import load_index

    return bundle_sources(load_index(index_dir))


@pytest.fixture(scope="module")
def retrieval(sources):
    """The retrieval server over ``sources`` on loopback (Search-R1 endpoint answering from bm25)."""
    from routerag.edge.serving import BackgroundServer
    from routerag.server.retrieval_app import create_retrieval_app
    from routerag.server.settings import SearchR1Settings, ServerSettings

    settings = ServerSettings(searchr1=SearchR1Settings(default_source="bm25"))
    with BackgroundServer(create_retrieval_app(sources, settings)) as running:
        yield running


@pytest.fixture(scope="session")
def ray_local():
    """Ray started once per test session on this machine with 2 CPUs (the ``ray``-marked tests):
    a local head with pre-assigned ports (``routerag.raycluster.LocalHead``), stopped at the end."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:  # not imported here: LocalHead must come first
        pytest.skip("Ray is the `scale` extra")
    from routerag.raycluster import LocalHead

    head = LocalHead(num_cpus=2)
    yield head
    try:
        from ray import serve

        serve.shutdown()
    except ImportError:
        pass
    head.stop()
