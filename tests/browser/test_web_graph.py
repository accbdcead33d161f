"""The graph view in real headless Chromium: a real graph index (MuSiQue paragraphs, the
precomputed OpenIE released with HippoRAG, the bundled MiniLM embedder) served by a real uvicorn
server; a graph retrieval's seed entities and top PPR nodes are drawn as an SVG subgraph."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from routerag.edge.serving import BackgroundServer
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium for the browser tests")]
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright python package is not installed")

# screenshots go to a scratch folder; ROUTERAG_SCREENSHOT_DIR=docs/img refreshes the docs' images
IMG = Path(os.environ.get("ROUTERAG_SCREENSHOT_DIR") or Path(tempfile.gettempdir()) / "routerag-screenshots")
IMG.mkdir(parents=True, exist_ok=True)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MUSIQUE = "musique_train100"
OPENIE = f"{MUSIQUE}/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"


@pytest.fixture(scope="module")
def server(tmp_path_factory, shared):
    from routerag.corpus.schema import Document
    from routerag.index.docstore import DocStore
    from routerag.index.graph import GraphIndex
    from routerag.index.settings import GraphSettings, IndexSettings
    from routerag.sources.graph import GraphSource
    from routerag.sources.sourceset import SourceSet

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROUTERAG_HOME", str(tmp_path_factory.mktemp("home")))
        raw = json.loads((shared / MUSIQUE / "musique_train.json").read_text())
        paragraphs = raw[0]["paragraphs"]
        chosen = [p for p in paragraphs if p["is_supporting"]] + [p for p in paragraphs if not p["is_supporting"]][:6]
        store = DocStore([Document.make(p["title"], p["paragraph_text"]) for p in chosen])
        settings = IndexSettings(graph=GraphSettings(extractor="precomputed", openie_file=OPENIE))
        graph = GraphIndex.build(store, tmp_path_factory.mktemp("gidx") / "graph", settings)
        sources = SourceSet([GraphSource(graph)])
        app = create_app(ScriptedModel(["an answer"], cycle=True), sources,
                         ServiceSettings(data_dir=tmp_path_factory.mktemp("gdata")))
        with BackgroundServer(app) as running:
            yield running, raw[0]["question"]


def test_graph_retrieval_is_drawn_as_a_subgraph(server):
    running, question = server
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(running.url + "/")
            page.wait_for_selector("body[data-ready='1']")
            page.select_option("#strategy", "vanilla")
            page.select_option("#param-source", "graph")
            page.fill("#param-k", "3")
            page.fill("#ask-question", question)
            page.click("#run")
            page.wait_for_selector("#trace[data-done='1']")
            figure = page.locator("[data-testid=graph-view]")
            assert figure.count() == 1
            seeds = figure.locator("circle.seed").count()
            tops = figure.locator("circle.entity, circle.passage").count()
            assert seeds >= 1 and tops >= 3
            assert figure.locator("line.edge").count() == seeds * tops
            assert f"{seeds} seed entities" in figure.locator("figcaption").text_content()
            assert page.locator(".source-hits[data-source='graph'] tr").count() == 3
            figure.screenshot(path=str(IMG / "ui-graph.png"))
        finally:
            browser.close()
