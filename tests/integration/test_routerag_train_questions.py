"""RouteRAG's released training questions (verl / Search-R1 parquet, no passages): loaded as a
dataset and written back by ``routerag export-verl`` without the evaluation questions."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerag.corpus.datasets import load_dataset
from routerag.corpus.loaders import (
    CorpusFormatError,
    detect_question_format,
    load_questions,
)

pq = pytest.importorskip("pyarrow.parquet")


@pytest.mark.data
def test_the_released_questions_load(shared: Path) -> None:
    data = load_dataset("routerag-train")
    assert len(data.questions) == 10_000 and data.documents() == []
    first = data.questions[0]
    assert first.qid == "5a88d89f554299206df2b37b" and first.answers == ["NBA Inside Stuff"]
    assert first.question.startswith("What show does a retired Orlando Magic player") and first.question.endswith("host?")
    assert first.metadata["supporting_titles"] == ["2003–04 Orlando Magic season", "Grant Hill"]
    assert len({q.qid for q in data.questions}) == 10_000
    assert all(q.question and "<search>" not in q.question for q in data.questions)
    assert len(load_dataset("routerag-train-dev").questions) == 100


def test_bad_parquet_rows_are_named(shared: Path, tmp_path: Path) -> None:
    table = pq.read_table(shared / "routerag_train" / "dev.parquet").slice(0, 2)
    rows = table.to_pylist()
    rows[1]["prompt"] = [{"role": "user", "content": "no question mark here"}]
    import pyarrow as pa

    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)
    assert detect_question_format(path) == "searchr1-parquet"
    with pytest.raises(CorpusFormatError, match=r"bad\.parquet: record 1: field 'prompt': the user prompt has no 'Question: \.\.\.'"):
        load_questions(path)
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(CorpusFormatError, match="not a readable parquet file"):
        load_questions(tmp_path / "junk.parquet")


@pytest.mark.data
def test_export_verl_drops_the_evaluation_overlap(shared: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    import routerag.cli.train_cmds  # noqa: F401 - registers the commands
    from routerag.cli.app import app

    out = tmp_path / "rt.parquet"
    result = CliRunner().invoke(app, ["export-verl", "--dataset", "routerag-train-dev", "--out", str(out),
                                      "--exclude", "hotpotqa", "--exclude", "hotpotqa-distractor"])
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out).to_pylist()
    dev = load_dataset("routerag-train-dev").questions
    assert f"wrote {len(rows)} rows" in result.output and len(rows) <= 100
    assert rows[0]["extra_info"]["qid"] in {q.qid for q in dev}
    assert rows[0]["prompt"][0]["content"].rstrip().endswith(rows[0]["extra_info"]["question"])
