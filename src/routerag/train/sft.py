"""Supervised cold starts through TRL's ``SFTTrainer``: golden trajectories tokenised with prompt
and observation tokens labelled -100 (SFT trains exactly the tokens GRPO trains), an optional loss
that computes the output layer only on labelled positions, the cached trajectory data of a run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from routerag.config import atomic_write_text
from routerag.corpus.schema import Question
from routerag.llm.base import Message
from routerag.train.adapters import fresh_lora_config
from routerag.train.config import WithSFT
from routerag.train.data import grounding_sources
from routerag.train.env import HFCodec, cut_observation
from routerag.train.runfiles import METRICS_FILE, last_checkpoint, metrics_callback

SFT_DATA_FILE = "sft_data.jsonl"
SFT_STATS_FILE = "sft_data_stats.json"


def sft_rows(trajectories: Sequence[Any], codec: HFCodec, max_length: int,
             max_observation_tokens: int | None = None) -> list[dict[str, list[int]]]:
    """Token ids and labels of golden trajectories: prompt and observation tokens get label -100,
    so that SFT, like GRPO, learns only the policy's own tokens. ``max_observation_tokens`` cuts
    each observation as the rollout environment cuts it (``env.cut_observation``)."""
    rows = []
    for traj in trajectories:
        ids: list[int] = []
        labels: list[int] = []
        for seg in traj.segments:
            text = _prompt_text(codec, traj, seg.text) if seg.kind == "prompt" else seg.text
            if seg.kind == "observation" and max_observation_tokens is not None:
                seg_ids = cut_observation(codec, text, max_observation_tokens)
            else:
                seg_ids = codec.encode(text)
            ids += seg_ids
            labels += seg_ids if seg.kind == "model" else [-100] * len(seg_ids)
        eos = codec.tokenizer.eos_token_id
        if eos is not None:
            ids.append(eos)
            labels.append(eos)
        rows.append({"input_ids": ids[:max_length], "labels": labels[:max_length]})
    return rows


def chat_sft_rows(examples: Sequence[tuple[Sequence[Any], str]], codec: HFCodec) -> list[dict[str, list[int]]]:
    """Token ids and labels of single-turn examples ``(prompt messages, completion)``: the prompt
    rendered as the policy sees it (:meth:`HFCodec.render_messages`, generation prompt added) and
    labelled -100, the completion and the end-of-sequence token labelled."""

    rows = []
    eos = codec.tokenizer.eos_token_id
    for messages, completion in examples:
        prompt = [m if isinstance(m, Message) else Message(role=m["role"], content=m["content"]) for m in messages]
        prompt_ids = codec.encode(codec.render_messages(prompt))
        out_ids = codec.encode(completion) + ([eos] if eos is not None else [])
        rows.append({"input_ids": prompt_ids + out_ids, "labels": [-100] * len(prompt_ids) + out_ids})
    return rows


def _prompt_text(codec: HFCodec, trajectory: Any, user_text: str) -> str:
    """The prompt of a trajectory as its episode shows it: the user message, after the episode's
    system message when it has one (GraphRAG-R1's), through the codec's chat template."""
    system = getattr(trajectory, "system", None)
    if not system:
        return codec.render_prompt(user_text)
    return codec.render_messages([Message(role="system", content=system), Message(role="user", content=user_text)])


def masked_loss(model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None, prefix: Any = None) -> Any:
    """Causal-LM cross-entropy computing logits only at positions whose next token is labelled.

    SFT rows of multi-turn episodes label only the policy's tokens (~10-20% of a row); the
    152k-vocabulary output layer over every position is a quarter of a 0.5B model's forward
    cost on CPU. ``logits_to_keep`` (an index tensor) restricts the output layer to the
    positions that predict a labelled token; the loss equals the full-logits loss. With a
    :class:`~routerag.train.frozen_prefix.FrozenPrefix` the forward runs inside its ``batch``
    context (cached lower layers)."""
    from contextlib import nullcontext

    import torch
    import torch.nn.functional as F

    labels = inputs["labels"]
    targets = labels[:, 1:]
    positions = torch.nonzero((targets != -100).any(dim=0), as_tuple=False).flatten()
    context = prefix.batch(inputs["input_ids"], inputs.get("attention_mask")) if prefix is not None else nullcontext()
    with context:
        outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"), logits_to_keep=positions)
    logits = outputs.logits.float()
    picked = targets[:, positions]
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), picked.reshape(-1), ignore_index=-100, reduction="sum")
    count = num_items_in_batch if num_items_in_batch is not None else (picked != -100).sum()
    return loss / count


def masked_logits_sft_trainer() -> Any:
    """``SFTTrainer`` whose loss uses :func:`masked_loss` (no full-vocabulary logits, no entropy /
    token-accuracy metrics over them)."""
    from trl import SFTTrainer

    class MaskedLogitsSFTTrainer(SFTTrainer):
        frozen_prefix: Any = None  # a FrozenPrefix installed after peft wrapped the model (run_sft)

        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            # the Trainer divides by the accumulation steps itself unless the model takes loss kwargs
            loss = masked_loss(model, inputs, num_items_in_batch if self.model_accepts_loss_kwargs else None,
                               prefix=self.frozen_prefix)
            return (loss, None) if return_outputs else loss

    return MaskedLogitsSFTTrainer


def sft_trainer(cfg: WithSFT, model: Any, tokenizer: Any, rows: list[dict[str, list[int]]], out_dir: Path,
                *, max_steps: int | None = None, learning_rate: float | None = None,
                frozen_store: dict[str, Any] | None = None, dev_rows: list[dict[str, list[int]]] | None = None,
                dev_eval_steps: int = 50) -> Any:
    """TRL's ``SFTTrainer`` over pre-tokenised rows (``input_ids``, ``labels``), configured, not
    yet trained. The CPU fast path (``sft.frozen_no_grad``, ``sft.cache_frozen``, no gradient
    checkpointing, adapters on ``lora.layers_top``) is on by default; ``frozen_store`` shares the
    frozen layers' cache between trainers of the same base model. The trainer's ``frozen_prefix``
    stays installed until the caller removes it (``trainer.frozen_prefix.remove()``). With
    ``dev_rows`` their loss (``eval_loss``) is measured before training and every ``dev_eval_steps``."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from routerag.train.adapters import num_layers_of
    from routerag.train.frozen_prefix import FrozenPrefix

    s = cfg.sft
    cpu = cfg.grpo.use_cpu or not torch.cuda.is_available()
    steps = max_steps or (-1 if s.epochs else s.max_steps)
    args = SFTConfig(**{**dict(
        output_dir=str(out_dir),
        per_device_train_batch_size=s.per_device_train_batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps,
        max_steps=steps,
        num_train_epochs=s.epochs or 1.0,
        learning_rate=learning_rate or s.learning_rate,
        lr_scheduler_type=s.lr_scheduler_type,
        warmup_steps=s.warmup_steps,
        logging_steps=cfg.grpo.logging_steps,
        save_steps=cfg.grpo.save_steps if steps < 0 else max(steps, 1),
        save_total_limit=1,
        seed=cfg.grpo.seed,
        use_cpu=cpu,
        bf16=not cpu,
        report_to="none",
        max_length=s.max_length,
        disable_tqdm=True,
        gradient_checkpointing=s.gradient_checkpointing,
        **(dict(eval_strategy="steps", eval_steps=dev_eval_steps, eval_on_start=True, per_device_eval_batch_size=1,
                prediction_loss_only=True) if dev_rows else {}),
    ), **s.extra})  # sft.extra: further TRL arguments (checked at load, see SFT_DERIVED)
    fast = s.logits_on_labels_only or s.frozen_no_grad
    trainer_cls = masked_logits_sft_trainer() if fast else SFTTrainer
    trainer = trainer_cls(
        model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
        eval_dataset=Dataset.from_list(dev_rows) if dev_rows else None,
        peft_config=fresh_lora_config(cfg.lora, num_layers_of(model)), callbacks=[metrics_callback(out_dir / METRICS_FILE)],
    )
    if s.frozen_no_grad:
        trainer.frozen_prefix = FrozenPrefix(trainer.model, cache=s.cache_frozen, store=frozen_store)
    return trainer


def run_sft(cfg: WithSFT, model: Any, tokenizer: Any, rows: list[dict[str, list[int]]], out_dir: Path,
            *, max_steps: int | None = None, learning_rate: float | None = None,
            frozen_store: dict[str, Any] | None = None, dev_rows: list[dict[str, list[int]]] | None = None,
            dev_eval_steps: int = 50) -> Any:
    """Supervised cold start with TRL's ``SFTTrainer`` (:func:`sft_trainer`), resumed from the
    last checkpoint in ``out_dir`` when ``cfg.resume``; with ``dev_rows``, their loss is measured
    once more after the last step."""
    trainer = sft_trainer(cfg, model, tokenizer, rows, out_dir, max_steps=max_steps, learning_rate=learning_rate,
                          frozen_store=frozen_store, dev_rows=dev_rows, dev_eval_steps=dev_eval_steps)
    trainer.train(resume_from_checkpoint=last_checkpoint(out_dir) if cfg.resume else None)
    if dev_rows and trainer.state.global_step % dev_eval_steps:
        trainer.evaluate()
    return trainer


def sft_trajectories(cfg: WithSFT, out: Path, *, replay: Any = None) -> list[Any]:
    """Golden trajectories of ``cfg.sft.sources`` without the evaluation sets' questions,
    grounded in real retrieval when ``sft.ground``; cached in the run directory
    (``sft_data.jsonl`` + ``sft_data_stats.json``) so that a resumed run trains on the same data.

    With ``replay`` (a :class:`~routerag.train.golden.EpisodeReplay` of the ``graphrag-r1``
    episode) they are rendered in GraphRAG-R1's protocol instead: the trajectories of a stored
    set (those of ``sft.sources``) or built from ``sft.sources``, same questions, reasoning and
    queries, each observation the episode's own retrieval over the replay's sources."""
    from routerag.train.golden import GoldenTrajectory, Grounder, golden_trajectories

    path, stats_path = out / SFT_DATA_FILE, out / SFT_STATS_FILE
    if path.is_file():
        return [GoldenTrajectory.model_validate_json(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    grounders: dict[str, Grounder] = {}
    if replay is not None:
        return _replayed_trajectories(cfg, replay, path, stats_path)

    from routerag.strategies.routerag import RouteRAGParams

    episode = cfg.env.params_as(RouteRAGParams)  # golden trajectories are rendered in RouteRAG's protocol

    def ground(name: str) -> Grounder:
        grounders[name] = Grounder(grounding_sources(name, cfg.sft.ground_components), k=episode.k,
                                   mode_sources=dict(episode.mode_sources), modes=list(episode.allowed_modes),
                                   max_query_chars=episode.max_query_chars)
        return grounders[name]

    source_note: dict[str, Any] = {}
    if cfg.sft.golden_set is not None:  # a stored set (routerag golden): built and grounded already
        from routerag.train.golden_set import read_golden_set

        trajectories = read_golden_set(cfg.sft.golden_set)
        source_note["golden_set"] = cfg.sft.golden_set
    else:
        trajectories = golden_trajectories(cfg.sft.sources, exclude_eval=cfg.data.eval_sets,
                                           ground=ground if cfg.sft.ground else None,
                                           few_shot=episode.few_shot, prompt_template=episode.prompt_template)
    return _keep_trajectories(cfg, trajectories, path, stats_path,
                              {**source_note, "grounding": {name: g.stats.model_dump() for name, g in grounders.items()}})


def _replayed_trajectories(cfg: WithSFT, replay: Any, path: Path, stats_path: Path) -> list[Any]:
    """The golden trajectories re-rendered through ``replay`` (see :func:`sft_trajectories`)."""
    from routerag.train.golden import golden_trajectories, rerender

    note: dict[str, Any] = {"protocol": replay.strategy.name, "params": replay.params.model_dump(mode="json")}
    if cfg.sft.golden_set is not None:
        from routerag.train.golden_set import read_golden_set

        stored = [t for t in read_golden_set(cfg.sft.golden_set) if t.source in cfg.sft.sources]
        note["golden_set"] = cfg.sft.golden_set
    else:
        stored = golden_trajectories(cfg.sft.sources, exclude_eval=cfg.data.eval_sets)
    rendered = [t for t in stored if t.protocol == replay.strategy.name]  # a set rendered already (routerag golden --rerender)
    stored = [t for t in stored if t.protocol == "routerag"]
    kept = rendered + [r for t in stored if (r := rerender(t, "graphrag-r1", replay=replay)) is not None]
    note["replayed"] = {"trajectories": len(stored), "rendered": len(kept) - len(rendered), "dropped_over_budget": replay.dropped,
                        "searches": replay.searches, "rendered_already": len(rendered)}
    return _keep_trajectories(cfg, kept, path, stats_path, note)


def _keep_trajectories(cfg: WithSFT, trajectories: list[Any], path: Path, stats_path: Path,
                       note: dict[str, Any]) -> list[Any]:
    """The overlap check (recorded), ``sft.max_examples`` evenly spaced, the run's cache written."""
    from routerag.corpus.sampling import evenly_spaced
    from routerag.train.golden import check_overlap
    from routerag.train.golden.support import keep_supported, support_stats

    questions = [Question(qid=t.qid, question=t.question, answers=t.answers, dataset=t.dataset) for t in trajectories]
    overlap = check_overlap(questions, cfg.data.eval_sets) if cfg.data.eval_sets else None
    if overlap is not None and overlap.overlapping:  # golden_trajectories filtered them; this is the recorded proof
        raise ValueError(f"training trajectories overlap the evaluation sets: {overlap.overlapping[:5]}")
    built = len(trajectories)
    support = support_stats(trajectories)
    if cfg.sft.answer_supported_only:
        trajectories = keep_supported(trajectories)
    trajectories = evenly_spaced(trajectories, cfg.sft.max_examples)
    stats = {
        **{k: v for k, v in note.items() if k != "grounding"},
        "eval_sets": list(cfg.data.eval_sets),
        "overlap_checked": overlap.model_dump() if overlap is not None else None,
        "built": built,
        "answer_support": support.by_source,
        "answer_supported_only": cfg.sft.answer_supported_only,
        "kept": len(trajectories),
        "by_source": {src: sum(t.source == src for t in trajectories) for src in sorted({t.source for t in trajectories})},
        "grounding": note.get("grounding", {}),
    }
    # atomic, stats first: the data file is the resume cache, so it must never exist half-written
    atomic_write_text(stats_path, json.dumps(stats, indent=2))
    atomic_write_text(path, "".join(t.model_dump_json() + "\n" for t in trajectories))
    return trajectories


def fit_rows(rows: list[dict[str, list[int]]], max_length: int, drop_longer: bool) -> tuple[list[dict[str, list[int]]], int]:
    """Rows within ``max_length`` (dropping the longer ones when ``drop_longer``) and the number dropped."""
    if not drop_longer:
        return rows, 0
    kept = [r for r in rows if len(r["input_ids"]) <= max_length]
    return kept, len(rows) - len(kept)


def read_token_rows(path: str | Path) -> list[dict[str, list[int]]]:
    """The ``{input_ids, labels}`` rows of a JSONL file (an RFT round's ``train_kept.jsonl``), checked:
    equal lengths, integer ids, each label -100 or the id at its position; other keys are ignored.
    A malformed line is a :class:`ValueError` naming the file and line."""
    return [row for _, row in _token_rows(path, need_qid=False)]


def read_kept_rows(path: str | Path) -> list[tuple[str, dict[str, list[int]]]]:
    """``(qid, {input_ids, labels})`` per line of an RFT round's ``kept.jsonl``, checked as
    :func:`read_token_rows` checks, and each line must name its question (``qid``, a string)."""
    return _token_rows(path, need_qid=True)


def _token_rows(path: str | Path, *, need_qid: bool) -> list[tuple[str, dict[str, list[int]]]]:
    rows = []
    path = Path(path)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not JSON ({exc.msg})") from None
        ids, labels = (rec.get("input_ids"), rec.get("labels")) if isinstance(rec, dict) else (None, None)
        if not (isinstance(ids, list) and isinstance(labels, list) and ids and len(ids) == len(labels)):
            raise ValueError(f"{where}: a row needs input_ids and labels, two non-empty lists of one length")
        if not all(type(x) is int for x in ids + labels):
            raise ValueError(f"{where}: input_ids and labels must be integers")
        if any(lab not in (-100, tok) for tok, lab in zip(ids, labels)):
            raise ValueError(f"{where}: a label is neither -100 nor the token at its position")
        if all(lab == -100 for lab in labels):
            raise ValueError(f"{where}: no labelled token (nothing to learn from this row)")
        qid = rec.get("qid", "")
        if need_qid and not (isinstance(qid, str) and qid):
            raise ValueError(f"{where}: a kept row must name its question (qid, a non-empty string)")
        rows.append((qid if isinstance(qid, str) else "", {"input_ids": ids, "labels": labels}))
    return rows

