"""RealRoute's Adaptive Cap: per-source quotas on the candidate evidence.

The routing call names a preferred source; up to ``preferred_cap`` of its best hits and up to
``other_cap`` of each other source's best hits stay candidates. A source's best hits are its
highest-scoring ones (its own rank breaks ties), so the quota never depends on how scores of
different sources compare. The selector then orders the survivors and keeps ``keep_k``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from routerag.trace import Hit


class CapQuota(BaseModel):
    preferred_cap: int = Field(default=5, ge=0, description="hits kept from the preferred source")
    other_cap: int = Field(default=2, ge=0, description="hits kept from each other source")

    def quota(self, source: str, preferred: str | None) -> int:
        return self.preferred_cap if source == preferred else self.other_cap


def group_by_source(hits: list[Hit]) -> dict[str, list[Hit]]:
    """Hits per source, sources in order of first appearance, hits in input order."""
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        groups.setdefault(hit.source, []).append(hit)
    return groups


def best_first(hits: list[Hit]) -> list[Hit]:
    """One source's hits best first: higher score, then lower rank, then input order."""
    return sorted(hits, key=lambda h: (-h.score, h.rank))


def apply_cap(hits: list[Hit], preferred: str | None, quota: CapQuota) -> list[Hit]:
    """The candidates the quotas admit, grouped by source in input order, best first within one.

    With ``preferred=None`` (no routing decision) every source gets ``other_cap``."""
    kept: list[Hit] = []
    for source, group in group_by_source(hits).items():
        kept.extend(best_first(group)[: quota.quota(source, preferred)])
    return kept
