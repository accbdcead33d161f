"""What a shipped policy scores: its evaluation card, read from the comparisons table that ships
beside its adapter (``data/policies/<name>/eval_comparisons.csv``: paired bootstrap and exact sign
test against vanilla RAG on the same base, written by ``routerag report``).

``routerag demo`` states the card of the policy it runs, so a newcomer knows what to expect from
it before reading any answer."""

from __future__ import annotations

import csv

from pydantic import BaseModel

from routerag.llm.config import ModelConfig, policy_dir, shipped_policy_for

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


def policy_card(model: str | ModelConfig, strategy: str = "routerag") -> PolicyCard | None:
    """The card of the policy shipped for ``strategy`` on a bundled base (``bundled:qwen2.5-coder-0.5b``),
    or None when it has none or its table is missing."""
    base = model.resolved().model if isinstance(model, ModelConfig) else model
    name = shipped_policy_for(strategy, base)
    if name is None:
        return None
    table = policy_dir(name) / "eval_comparisons.csv"
    if not table.is_file():
        return None
    with table.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh)
                if r["Questions"] == "open" and r["Metric"] == "EM" and r["Baseline"].startswith("vanilla")]
    order = list(DATASET_NAMES)
    rows.sort(key=lambda r: order.index(r["Dataset"]) if r["Dataset"] in order else len(order))
    lines = [CardLine(dataset=r["Dataset"], n=int(r["n"]), baseline=float(r["Baseline score"]), system=float(r["System score"]),
                      delta=float(r["Δ"]), ci=r["95% CI"], sign_p=float(r["p (sign test)"])) for r in rows]
    return PolicyCard(name=name, base=base or "", lines=lines)
