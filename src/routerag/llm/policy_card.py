"""What a shipped policy scores: its evaluation card, read from the comparisons table that ships
beside its adapter (``data/policies/<name>/eval_comparisons.csv``: paired bootstrap and exact sign
test against vanilla RAG on the same base, written by ``routerag report``), as
``strategies.shipped.policy_card`` reads it for the policy a strategy runs with.

``routerag demo`` states the card of the policy it runs, so a newcomer knows what to expect from
it before reading any answer."""

from __future__ import annotations

from pydantic import BaseModel

DATASET_NAMES = {"2wiki": "2Wiki-100", "musique": "MuSiQue-50", "hotpotqa-distractor": "HotpotQA-distractor test-100"}
"""The standard evaluation sets, in the order the card lists them."""


class CardLine(BaseModel):
    """One set: open-answer EM of the policy and of vanilla RAG on the same base, paired."""

    dataset: str
    n: int
    baseline: float
    system: float
    delta: float
    ci: str
    sign_p: float

    @property
    def significant(self) -> bool:
        low, high = (float(x) for x in self.ci.strip("[]").split(","))
        return low > 0 or high < 0


class PolicyCard(BaseModel):
    name: str
    base: str
    lines: list[CardLine]

    def summary(self) -> str:
        """One line: open-answer EM against vanilla on each standard set, with what is significant."""
        parts = []
        for line in self.lines:
            verdict = "significant" if line.significant else "no significant difference"
            parts.append(f"{DATASET_NAMES.get(line.dataset, line.dataset)} {line.system:.1f} vs {line.baseline:.1f} "
                         f"({line.delta:+.1f} {line.ci}, {verdict})")
        return "open-answer EM, policy vs vanilla RAG on the same base: " + "; ".join(parts)
