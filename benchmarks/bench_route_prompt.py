"""Routing accuracy of the source router (RealRoute's preferred source, hard-route's only
source) per router — the LLM call in each prompt wording, or the profile-embedding router — and
per order of the listed sources, on a dataset with gold sources.

    python3 benchmarks/bench_route_prompt.py                       # law-med, 50 evenly spaced, bundled 0.5B
    python3 benchmarks/bench_route_prompt.py --limit 20 --routers choice --set model.n_threads=2
    python3 benchmarks/bench_route_prompt.py --all --routers profile-embedding   # no model

Listing the sources in reverse order separates routing from position bias: a router that reads
the query keeps its accuracy, one that picks whichever source comes first does not. Prints a
markdown table (accuracy, share choosing the first listed source, format errors, ms per call).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import get_args

from routerag.config import load_config
from routerag.corpus.datasets import load_dataset
from routerag.llm.base import GenerationParams
from routerag.llm.config import ModelConfig
from routerag.llm.factory import build_model
from routerag.routing.source_routing import RoutePrompt, embedding_route, parse_route, route_messages
from routerag.runtime.loop import generated_text

EMBEDDING = "profile-embedding"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="law-med", help="a multi-source dataset with gold source labels")
    ap.add_argument("--limit", type=int, default=50, help="evenly spaced questions")
    ap.add_argument("--all", action="store_true", help="every question of the dataset")
    ap.add_argument("--routers", default=",".join([*get_args(RoutePrompt), EMBEDDING]),
                    help="comma-separated: choice, inline (LLM prompt wordings), profile-embedding")
    ap.add_argument("--set", action="append", default=[], metavar="model.KEY=VALUE", help="model settings (model.n_threads=1, ...)")
    ap.add_argument("--max-tokens", type=int, default=256, help="as SieveParams.max_new_tokens (the reply stops at '}')")
    args = ap.parse_args()

    data = load_dataset(args.dataset)
    data = data if args.all else data.sample(args.limit)
    questions = [q for q in data.questions if q.gold_source]
    if not data.multisource or not questions:
        raise SystemExit(f"{args.dataset}: needs named sources and questions with a gold source")
    profiles = {name: spec.profile for name, spec in data.sources.items()}
    orders = {"listed": profiles, "reversed": dict(reversed(list(profiles.items())))}
    routers = args.routers.split(",")
    model = None
    if any(r != EMBEDDING for r in routers):
        overrides = [s.removeprefix("model.") for s in args.set]
        model = build_model(load_config(ModelConfig, None, overrides).model_copy(update={"cache": False}))
    generation = GenerationParams(max_tokens=args.max_tokens, temperature=0.0, stop=["}"])

    rows = []
    for prompt in routers:
        for order, listed in orders.items():
            names = list(listed)
            correct = first = errors = 0
            ms: list[float] = []
            per_gold: dict[str, list[int]] = {}
            for q in questions:
                start = time.perf_counter()
                if prompt == EMBEDDING:
                    decision = embedding_route(q.question, listed)[0]
                else:
                    response = model.chat(route_messages(q.question, listed, prompt=prompt), generation)
                    decision = parse_route(generated_text(response), names)
                ms.append(1000 * (time.perf_counter() - start))
                hit = decision.source.casefold() == q.gold_source.casefold()
                correct += hit
                first += decision.source == names[0]
                errors += decision.format_error is not None
                per_gold.setdefault(q.gold_source, []).append(hit)
            by_gold = ", ".join(f"{g} {100 * sum(v) / len(v):.0f}" for g, v in sorted(per_gold.items()))
            rows.append([prompt, " > ".join(names), str(len(questions)), f"{100 * correct / len(questions):.1f}", by_gold,
                         f"{100 * first / len(questions):.1f}", f"{100 * errors / len(questions):.1f}", f"{statistics.median(ms):.0f}"])
            print(f"done: {prompt} {order}", flush=True)

    cols = ["Router", "Order", "n", "Routing acc. %", "Acc. by gold source %", "Chose first listed %", "Format errors %", "ms/call (median)"]
    print()
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(cols))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
