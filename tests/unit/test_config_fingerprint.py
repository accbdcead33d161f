"""fingerprint_dump: a setting added later (OMIT_AT_DEFAULT) leaves fingerprints unchanged at its
default, at any depth, and changes them when it is set; a NOT_IN_FINGERPRINT one never shows."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from routerag.config import OMIT_AT_DEFAULT, fingerprint_dump
from routerag.index.settings import IndexSettings


class Inner(BaseModel):
    a: int = 1
    late: int = Field(0, json_schema_extra=OMIT_AT_DEFAULT)


class Outer(BaseModel):
    inner: Inner = Field(default_factory=Inner)
    later: Inner = Field(default_factory=Inner, json_schema_extra=OMIT_AT_DEFAULT)


def test_omitted_at_default_at_any_depth():
    assert fingerprint_dump(Outer()) == {"inner": {"a": 1}}
    assert fingerprint_dump(Outer(inner=Inner(late=3))) == {"inner": {"a": 1, "late": 3}}
    assert fingerprint_dump(Outer(later=Inner(a=2))) == {"inner": {"a": 1}, "later": {"a": 2}}


def test_the_ivfpq_block_stays_out_of_index_keys_until_it_is_set():
    plain = fingerprint_dump(IndexSettings())
    assert "ivfpq" not in plain["dense"]
    tuned = IndexSettings.model_validate({"dense": {"faiss": "ivfpq", "ivfpq": {"nlist": 64}}})
    assert fingerprint_dump(tuned)["dense"]["ivfpq"]["nlist"] == 64


def test_the_graph_scale_settings_stay_out_of_index_keys_until_set():
    scale = ("ppr", "local_ppr_tol", "prior_topk", "ann", "ann_nprobe")
    plain = fingerprint_dump(IndexSettings())["graph"]
    assert not set(scale) & set(plain)
    assert set(plain) == set(IndexSettings().graph.model_dump()) - set(scale)  # the stored keys are unchanged
    tuned = IndexSettings.model_validate({"graph": {"ppr": "local", "prior_topk": 200}})
    dumped = fingerprint_dump(tuned)["graph"]
    assert dumped["ppr"] == "local" and dumped["prior_topk"] == 200 and "ann" not in dumped


def test_file_content_fields_are_fingerprinted_by_content_not_path(tmp_path):
    from pathlib import Path

    from routerag.config import FILE_CONTENT

    class Params(BaseModel):
        adapters: dict[str, Path] = Field(default_factory=dict, json_schema_extra={**OMIT_AT_DEFAULT, **FILE_CONTENT})
        one: Path | None = Field(None, json_schema_extra=FILE_CONTENT)

    a, b = tmp_path / "a.gguf", tmp_path / "copy" / "b.gguf"
    b.parent.mkdir()
    a.write_bytes(b"weights v1")
    b.write_bytes(b"weights v1")
    assert "adapters" not in fingerprint_dump(Params())  # still omitted at its default
    first = fingerprint_dump(Params(adapters={"routerag": a}, one=a))
    assert first["adapters"]["routerag"].startswith("sha256:") and first["one"] == first["adapters"]["routerag"]
    assert fingerprint_dump(Params(adapters={"routerag": b}, one=b)) == first  # moved: same content, same fingerprint
    a.write_bytes(b"weights v2, retrained")
    assert fingerprint_dump(Params(adapters={"routerag": a}, one=a)) != first  # rewritten in place: new fingerprint
    with pytest.raises(ValueError, match="does not exist"):
        fingerprint_dump(Params(adapters={"routerag": tmp_path / "missing.gguf"}))


def test_where_a_model_runs_is_never_in_its_fingerprint():
    from routerag.llm.config import ModelConfig

    plain = fingerprint_dump(ModelConfig())
    assert "binding" not in plain
    for binding in ("xllamacpp", "xllamacpp-process", "llama-cpp-python"):
        assert fingerprint_dump(ModelConfig(binding=binding)) == plain
