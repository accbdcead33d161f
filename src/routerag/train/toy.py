"""Small real retrieval setups for CPU checks of the training stack.

* :func:`bm25_sourceset` — a :class:`SourceSet` of real BM25 sources built over given documents
  (in a directory the caller owns), mounted under the RouteRAG mode names.
* :func:`toy_routing_task` — a routing task whose right source is learnable from the question
  text: every entity has a *people* fact ("Gustave Eiffel designed the Eiffel Tower.") and a
  *places* fact ("The Eiffel Tower is located in Paris."), in two sources. A "Who ...?" question is
  answered by the top hit of the people source, a "Where ...?" question by the places source; the
  other source's top hit names the wrong thing. The people source serves mode ``passage``, the
  places source mode ``graph``, so the policy routes with RouteRAG's own tags.
* :func:`tiny_qwen2` — a randomly initialised 2-layer ``Qwen2ForCausalLM`` (hidden 64) over a
  given tokenizer's vocabulary, for tests that must train in seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from routerag.corpus.schema import Document, Question
from routerag.sources.sourceset import SourceSet

# (thing, person, verb, place)
TOY_FACTS: list[tuple[str, str, str, str]] = [
    ("the Eiffel Tower", "Gustave Eiffel", "designed", "Paris"),
    ("the Sydney Opera House", "Jorn Utzon", "designed", "Sydney"),
    ("the Guggenheim Bilbao", "Frank Gehry", "designed", "Bilbao"),
    ("the Sagrada Familia", "Antoni Gaudi", "designed", "Barcelona"),
    ("the Louvre Pyramid", "Ieoh Ming Pei", "designed", "Paris"),
    ("Microsoft", "Bill Gates", "founded", "Redmond"),
    ("Amazon", "Jeff Bezos", "founded", "Seattle"),
    ("Nintendo", "Fusajiro Yamauchi", "founded", "Kyoto"),
    ("Ikea", "Ingvar Kamprad", "founded", "Delft"),
    ("the Taj Mahal", "Ustad Ahmad Lahauri", "designed", "Agra"),
    ("the Burj Khalifa", "Adrian Smith", "designed", "Dubai"),
    ("Spotify", "Daniel Ek", "founded", "Stockholm"),
]


def bm25_sourceset(docs_by_source: Mapping[str, Iterable[Document]], directory: str | Path) -> SourceSet:
    """Build one BM25 index per named source under ``directory`` and mount them."""
    from routerag.index.bm25 import BM25Index
    from routerag.index.docstore import DocStore
    from routerag.index.settings import IndexSettings
    from routerag.sources.bm25 import BM25Source

    sources = SourceSet()
    for name, docs in docs_by_source.items():
        store = DocStore(docs)
        index = BM25Index.build(store, Path(directory) / name, IndexSettings())
        source = BM25Source(index, store, name=name)
        source.mode = name
        sources.mount(source)
    return sources


def toy_routing_task(directory: str | Path) -> tuple[SourceSet, list[Question]]:
    """The toy routing task: sources ``passage`` (people facts) and ``graph`` (places facts) and
    two questions per entity (who -> passage, where -> graph)."""
    people = [Document.make(person, f"{person} {verb} {thing}.") for thing, person, verb, _ in TOY_FACTS]
    places = [Document.make(place, f"{thing[0].upper() + thing[1:]} is located in {place}.") for thing, _, _, place in TOY_FACTS]
    sources = bm25_sourceset({"passage": people, "graph": places}, directory)
    questions: list[Question] = []
    for i, (thing, person, verb, place) in enumerate(TOY_FACTS):
        questions.append(Question(qid=f"who-{i}", question=f"Who {verb} {thing}?", answers=[person],
                                  dataset="toy", metadata={"type": "who", "gold_mode": "passage"}))
        questions.append(Question(qid=f"where-{i}", question=f"Where is {thing}?", answers=[place],
                                  dataset="toy", metadata={"type": "where", "gold_mode": "graph"}))
    return sources, questions


TOY_PROMPT = "Question: {question}\n"
TOY_PREFIX = "<search> ["


def tiny_qwen2(vocab_size: int, *, layers: int = 2, hidden: int = 64, heads: int = 4, seed: int = 0, **overrides: Any) -> Any:
    """A randomly initialised small ``Qwen2ForCausalLM`` (fp32)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), max_position_embeddings=2048,
        tie_word_embeddings=True, **overrides,
    )
    return Qwen2ForCausalLM(config)


# ---------------------------------------------------------------- the toy learning run


def toy_env_config(**overrides: Any) -> Any:
    """Routing-only episodes: one search whose mode the policy writes after the prefilled
    ``<search> [``; the first hit's title is the answer."""
    from routerag.train.env import EnvConfig

    values: dict[str, Any] = dict(
        k=1, max_turns=1, allowed_modes=["passage", "graph"], reader="top_hit_title", prompt_template=TOY_PROMPT,
        assistant_prefix=TOY_PREFIX, max_new_tokens_per_turn=6, max_completion_tokens=96, strict_modes=True,
    )
    values.update(overrides)
    return EnvConfig(**values)


def toy_cold_start_rows(questions: list[Question], codec: Any, *, copies: int = 1) -> list[dict[str, list[int]]]:
    """SFT rows teaching the action format with both modes for every question: the cold-started
    policy follows the protocol but routes at chance (p = 1/2 per question, so a GRPO group of
    samples differs and carries a learning signal)."""
    from routerag.train.golden import GoldenTrajectory
    from routerag.train.recipes import sft_rows
    from routerag.trace import Segment

    trajectories = []
    for _ in range(copies):
        for q, mode in ((q, m) for q in questions for m in ("passage", "graph")):
            trajectories.append(GoldenTrajectory(
                qid=q.qid, dataset="toy", question=q.question, answers=q.answers, source="toy",
                segments=[Segment(kind="prompt", text=TOY_PROMPT.format(question=q.question) + TOY_PREFIX),
                          Segment(kind="model", text=f"{mode}] </search>")],
            ))
    rows = sft_rows(trajectories, codec, 128)
    return [{"input_ids": r["input_ids"][:-1], "labels": r["labels"][:-1]} for r in rows]  # no EOS: the env stops at </search>


def evaluate_routing(env: Any, questions: list[Question], generate: Any) -> dict[str, float]:
    """Greedy episodes over ``questions``: EM, share routed to the gold mode, and format."""
    from routerag.eval.metrics import exact_match

    em = routed = fmt = 0.0
    for q in questions:
        r = env.rollout(q, generate)
        em += exact_match(r.trace.answer, q.answers)
        step = r.trace.search_steps[0] if r.trace.search_steps else None
        routed += float(step is not None and step.metadata.get("mode") == q.metadata.get("gold_mode"))
        fmt += float(step is not None and not step.format_error or (step is not None and step.format_error == "empty_query"))
    n = max(len(questions), 1)
    return {"em": em / n, "routing_accuracy": routed / n, "format": fmt / n}


def run_toy_learning(out_dir: str | Path, *, sft_steps: int = 100, grpo_steps: int = 30, sft_lr: float = 1e-2,
                     grpo_lr: float = 3e-3, num_generations: int = 4, batch: int = 32, seed: int = 0,
                     threads: int | None = 1, loss_type: str = "grpo", scale_rewards: str = "group",
                     temperature: float = 1.0) -> dict[str, Any]:
    """Cold start (format, chance routing) then GRPO with the EM reward on the toy routing task,
    through the real environment and TRL. Returns greedy routing before and after GRPO and the
    metrics file of the GRPO phase."""
    from routerag.train import recipes
    from routerag.train.config import TrainConfig
    from routerag.train.env import HFCodec, RouteRAGEnv
    from routerag.train.generation import PolicySampler

    out = Path(out_dir)
    cfg = TrainConfig(
        output_dir=str(out), model={"name": "tiny", "chat_template": False}, data={"dataset": "toy", "eval_sets": []},
        sources={"toy": True}, env=toy_env_config(),
        grpo={"num_generations": num_generations, "per_device_train_batch_size": batch, "max_steps": grpo_steps,
              "learning_rate": grpo_lr, "beta": 0.0, "use_cpu": True, "save_steps": max(grpo_steps, 1), "seed": seed,
              "torch_threads": threads, "loss_type": loss_type, "scale_rewards": scale_rewards,
              "temperature": temperature},
        sft={"per_device_train_batch_size": 8, "max_steps": sft_steps, "learning_rate": sft_lr},
        switch_step=10_000,  # EM only: the task is about routing, not cost
    )
    recipes._start(cfg)
    tokenizer = recipes.load_tokenizer_for(cfg.model)
    model = recipes.load_policy(cfg.model, tokenizer, seed=seed)
    sources, questions = toy_routing_task(out / "sources")
    env = RouteRAGEnv(sources, HFCodec(tokenizer, chat_template=False), cfg.env)
    sft = recipes.run_sft(cfg, model, tokenizer, toy_cold_start_rows(questions, env.codec), out / "sft")
    before = evaluate_routing(env, questions, PolicySampler(sft.model, tokenizer, temperature=0))
    trainer = recipes.run_grpo(cfg, sft.model, tokenizer, env, questions, recipes.default_schedule(cfg), out / "grpo")
    after = evaluate_routing(env, questions, PolicySampler(trainer.model, tokenizer, temperature=0))
    return {"before": before, "after": after, "metrics": str(out / "grpo" / recipes.METRICS_FILE),
            "steps": int(trainer.state.global_step)}
