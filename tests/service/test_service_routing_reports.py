"""``/v1/routing-reports``: the routing reports the operator wrote under the service's data folder
are listed, read and their figure served over a real loopback server; a request only names one
(nothing outside ``data_dir/reports`` is opened), a damaged one is refused with a reason, and the
API key guards them like the runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from routerag.edge.serving import BackgroundServer
from routerag.llm.scripted import ScriptedModel
from routerag.server.app import create_app
from routerag.server.settings import ServiceSettings

pytestmark = pytest.mark.service
STORED = Path(__file__).resolve().parents[2] / "docs" / "results" / "routing-report"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def data_dir(tmp_path) -> Path:
    data = tmp_path / "service"
    for name in ("law-med", "2wiki-wtq"):  # real reports, as `routerag routing-report --out` wrote them
        shutil.copytree(STORED / name, data / "reports" / name)
    return data


def serve(sources, data_dir: Path, **settings):
    return BackgroundServer(create_app(ScriptedModel(lambda *a: "x"), sources,
                                       ServiceSettings(data_dir=data_dir, warm_up=False, **settings)))


def test_reports_are_listed_read_and_their_figure_served(sources, data_dir):
    with serve(sources, data_dir) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        listed = client.get("/v1/routing-reports").json()
        assert [r["name"] for r in listed] == ["2wiki-wtq", "law-med"]
        law = next(r for r in listed if r["name"] == "law-med")
        assert law["choices"] == ["law", "med"] and law["best_fixed"] == "law" and law["plot"] is True
        assert law["verdict"].startswith("routing can add at most +49.3 recall@5")
        report = client.get("/v1/routing-reports/law-med").json()
        assert {r["name"] for r in report["rows"]} >= {"oracle", "law", "med", "retrieve all", "learned"}
        assert report["headroom"] == pytest.approx(law["headroom"])
        plot = client.get("/v1/routing-reports/law-med/plot")
        assert plot.status_code == 200 and plot.headers["content-type"] == "image/png"
        assert plot.content.startswith(PNG_MAGIC)


@pytest.mark.parametrize("name", ["nope", "..", "%2e%2e", "..%2f..%2fetc", ".hidden", "a" * 81])
def test_a_name_outside_the_reports_folder_is_not_found(sources, data_dir, name):
    with serve(sources, data_dir) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        for path in (f"/v1/routing-reports/{name}", f"/v1/routing-reports/{name}/plot"):
            r = client.get(path)
            assert r.status_code == 404, (path, r.status_code, r.text)


def test_a_link_out_of_the_folder_is_not_followed(sources, data_dir, tmp_path):
    outside = tmp_path / "elsewhere"
    shutil.copytree(STORED / "law-med", outside)
    os.symlink(outside, data_dir / "reports" / "linked")
    with serve(sources, data_dir) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/v1/routing-reports/linked").status_code == 404
        assert "linked" not in [r["name"] for r in client.get("/v1/routing-reports").json()]


def test_a_damaged_report_is_refused_with_its_reason_and_left_out_of_the_list(sources, data_dir):
    (data_dir / "reports" / "law-med" / "routing-report.json").write_text('{"rows": [', encoding="utf-8")
    (data_dir / "reports" / "2wiki-wtq" / "routing-report.png").unlink()
    with serve(sources, data_dir) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        r = client.get("/v1/routing-reports/law-med")
        assert r.status_code == 503 and "cannot be read" in r.json()["detail"]
        listed = client.get("/v1/routing-reports").json()
        assert [(e["name"], e["plot"]) for e in listed] == [("2wiki-wtq", False)]
        missing = client.get("/v1/routing-reports/2wiki-wtq/plot")
        assert missing.status_code == 404 and "no figure" in missing.json()["detail"]


def test_no_reports_folder_is_an_empty_list_and_the_key_guards_them(sources, tmp_path):
    with serve(sources, tmp_path / "empty", api_key="s3cret") as server, httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/v1/routing-reports").status_code == 401
        assert client.get("/v1/routing-reports", headers={"X-API-Key": "s3cret"}).json() == []
