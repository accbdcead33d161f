"""fingerprint_dump: a setting added later (OMIT_AT_DEFAULT) leaves fingerprints unchanged at its
default, at any depth, and changes them when it is set."""

from __future__ import annotations

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
