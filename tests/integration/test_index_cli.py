"""``routerag index`` / ``routerag retrieve`` through Typer's CliRunner on a real 2Wiki slice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from routerag.cli.app import app
from routerag.cli.main import _load

_load()
runner = CliRunner()


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory, shared) -> tuple[Path, Path, list[dict]]:
    records = json.loads((shared / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").read_text())
    folder = tmp_path_factory.mktemp("corpus")
    first, second = folder / "first.json", folder / "second.json"
    first.write_text(json.dumps(records[:40]))
    second.write_text(json.dumps(records[35:45]))  # 5 overlap, 5 new
    return first, second, records[:45]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory, corpus_files) -> Path:
    out = tmp_path_factory.mktemp("cli") / "idx"
    result = runner.invoke(app, ["index", str(corpus_files[0]), "--out", str(out), "--components", "bm25"])
    assert result.exit_code == 0, result.output
    assert "indexed 40 documents" in result.output
    return out


def test_retrieve_json(index_dir, corpus_files):
    record = corpus_files[2][12]
    result = runner.invoke(app, ["retrieve", str(index_dir), record["title"], "-k", "3", "--json"])
    assert result.exit_code == 0, result.output
    response = json.loads(result.stdout)
    hits = response["results"]["bm25"][0]["hits"]
    assert hits[0]["title"] == record["title"] and [h["rank"] for h in hits] == list(range(1, len(hits) + 1))


def test_retrieve_table_output(index_dir, corpus_files):
    result = runner.invoke(app, ["retrieve", str(index_dir), corpus_files[2][3]["title"], "--mode", "bm25", "-k", "2"])
    assert result.exit_code == 0, result.output
    assert "bm25" in result.output and corpus_files[2][3]["title"][:20] in result.output


def test_retrieve_errors(index_dir, tmp_path):
    result = runner.invoke(app, ["retrieve", str(index_dir), "x", "--mode", "graph"])
    assert result.exit_code == 2
    assert "unknown mode graph; mounted: bm25" in result.output and "no graph component" in result.output
    result = runner.invoke(app, ["retrieve", str(index_dir), "   "])
    assert result.exit_code == 2 and "query 0 is empty" in result.output
    result = runner.invoke(app, ["retrieve", str(index_dir), "y" * 2001])
    assert result.exit_code == 2 and "limit is 2000" in result.output
    result = runner.invoke(app, ["retrieve", str(tmp_path / "none"), "x"])
    assert result.exit_code == 1 and "no such index directory" in result.output
    (tmp_path / "empty").mkdir()
    result = runner.invoke(app, ["retrieve", str(tmp_path / "empty"), "x"])
    assert result.exit_code == 1 and "not an index (no manifest.json)" in result.output


def test_index_errors(index_dir, corpus_files, tmp_path):
    first = str(corpus_files[0])
    result = runner.invoke(app, ["index", first, "--out", str(index_dir)])
    assert result.exit_code == 1 and "already exists" in result.output
    result = runner.invoke(app, ["index", first, "--out", str(tmp_path / "a"), "--set", "bm25.k1=-1"])
    assert result.exit_code == 1 and "bm25.k1" in result.output
    result = runner.invoke(app, ["index", first, "--out", str(tmp_path / "b"), "--components", "bm25,nope"])
    assert result.exit_code == 1 and "unknown index component 'nope'" in result.output
    result = runner.invoke(app, ["index", str(tmp_path / "missing.json"), "--out", str(tmp_path / "c")])
    assert result.exit_code == 1 and "missing.json" in result.output
    result = runner.invoke(app, ["index", first, "--out", str(tmp_path / "d"), "--add"])
    assert result.exit_code == 1 and "no index to add to" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_index_add(index_dir, corpus_files, tmp_path):
    import shutil

    target = tmp_path / "idx"
    shutil.copytree(index_dir, target)
    result = runner.invoke(app, ["index", str(corpus_files[1]), "--out", str(target), "--add"])
    assert result.exit_code == 0, result.output
    assert "added 5 new documents (5 already indexed)" in result.output and "45 documents" in result.output
    record = corpus_files[2][43]
    result = runner.invoke(app, ["retrieve", str(target), record["title"], "--json", "-k", "1"])
    assert json.loads(result.stdout)["results"]["bm25"][0]["hits"][0]["title"] == record["title"]


def test_index_named_dataset(tmp_path):
    out = tmp_path / "demo"
    result = runner.invoke(app, ["index", "demo", "--out", str(out), "--components", "bm25", "--set", "bm25.k1=1.2"])
    assert result.exit_code == 0, result.output
    assert "dataset demo" in result.output and "(bm25)" in result.output
    assert "k1: 1.2" in (out / "config.resolved.yaml").read_text()
    result = runner.invoke(app, ["index", "no-such-dataset", "--out", str(tmp_path / "x")])
    assert result.exit_code == 1 and "unknown dataset 'no-such-dataset'; valid:" in result.output


def test_verify_index_names_a_corrupt_file(index_dir, tmp_path):
    import shutil

    result = runner.invoke(app, ["verify-index", str(index_dir)])
    assert result.exit_code == 0, result.output
    assert "files intact" in result.output
    broken = tmp_path / "broken"
    shutil.copytree(index_dir, broken)
    arrays = sorted((broken / "bm25").rglob("*.npy"))[0]
    data = bytearray(arrays.read_bytes())
    data[-1] ^= 0x01
    arrays.write_bytes(bytes(data))
    result = runner.invoke(app, ["verify-index", str(broken)])
    assert result.exit_code == 1
    assert f"{arrays.name}: corrupt" in result.output and "rebuild the index" in result.output
