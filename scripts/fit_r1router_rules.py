"""Keyword rules for R1-Router's knowledge-base decision, fitted on the training steps of the fixed
split only (``r1router-steps-train``; refused if a held-out trajectory's step is among them), and
written as a rules file for ``router: keyword`` (``r1-router-step`` / ``r1-router``).

    python3 scripts/fit_r1router_rules.py --out src/routerag/data/rules/r1router-fitted.yaml
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    from routerag.corpus.datasets import load_dataset
    from routerag.routing.keyword import write_rules
    from routerag.train.router.keyword_fit import KeywordSettings
    from routerag.train.router.step_rules import fit_step_rules

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--min-support", type=int, default=3)
    parser.add_argument("--min-precision", type=float, default=0.6)
    parser.add_argument("--max-rules", type=int, default=3)
    args = parser.parse_args()
    steps = load_dataset("r1router-steps-train").questions
    settings = KeywordSettings(min_support=args.min_support, min_precision=args.min_precision, max_rules=args.max_rules)
    rules = fit_step_rules(steps, settings)
    write_rules(rules, args.out, (
        f"R1-Router's knowledge-base decision: keyword rules fitted on the {len(steps)} training steps of the fixed split\n"
        f"(r1router-steps-train) only, no model (min_support {settings.min_support}, min_precision "
        f"{settings.min_precision}, max_rules {settings.max_rules}), by\n"
        f"  python3 scripts/fit_r1router_rules.py --out {args.out}"))
    print(args.out.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
