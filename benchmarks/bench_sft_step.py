"""Where the time of one SFT step of the bundled 0.5B goes, and the CPU fast path (one run, ratios).

The same fixed batch of real grounded golden trajectories (the ``routerag-sft-cpu`` data: RouteRAG
prompt, real top-3 retrieval observations, prompt and observation tokens masked) is trained with
TRL's ``SFTTrainer`` (``train.sft.run_sft``, batch 1, one optimiser step per trajectory) under
each setting, in one process, one after the other:

=============  =========================================================================================
``before``     the recipe as it ran: LoRA on all 24 layers, TRL's default gradient checkpointing
``no-ckpt``    the same without gradient checkpointing
``top``        LoRA on the top ``--top`` layers; the 24 - top frozen lower layers under torch.no_grad
``top+cache``  the same, second epoch: the lower layers' output of each row comes from the cache
``top+cut``    ``top`` with each observation cut to ``--cut`` tokens (a different input: its own loss)
``bf16``       ``no-ckpt`` with the base weights in bfloat16 (the LoRA weights stay fp32, peft's default):
               on a CPU with AVX512-BF16 or AMX its matrix products run about twice as fast; its loss
               at the start shows what bf16 rounding costs (run last: the base model stays bf16)
=============  =========================================================================================

It prints, per setting, seconds per trajectory (mean optimiser-step wall time), tokens per second,
the ratio to ``before``; and the loss on the fixed batch: at the start with the same non-zero
adapter on the top layers (the functions are identical, so the losses must be equal), and after
one pass over the batch (how well each setting learns the batch it trained on).

    nice -n 5 python3 benchmarks/bench_sft_step.py [--rows 3] [--top 4] [--cut 160] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
import zlib
from pathlib import Path
from typing import Any


def _step_timer() -> Any:
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []
            self._t = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self._t = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.times.append(time.perf_counter() - self._t)

    return StepTimer()


def _seed_top_adapters(peft_model: Any, first_layer: int) -> None:
    """The same non-zero LoRA B on the layers >= first_layer in every setting (0 below), so that
    every setting starts from the same function."""
    import torch

    for name, p in peft_model.named_parameters():
        if "lora_B" not in name:
            continue
        layer = int(name.split(".layers.")[1].split(".")[0])
        g = torch.Generator().manual_seed(zlib.crc32(name.split(".layers.")[1].encode()))
        with torch.no_grad():
            if layer >= first_layer:
                p.copy_(torch.randn(p.shape, generator=g) * 1e-3)
            else:
                p.zero_()
    for name, p in peft_model.named_parameters():
        if "lora_A" in name:
            g = torch.Generator().manual_seed(zlib.crc32(name.split(".layers.")[1].encode()))
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/train/routerag-sft-cpu.yaml")
    parser.add_argument("--rows", type=int, default=3, help="trajectories in the fixed batch")
    parser.add_argument("--top", type=int, default=4, help="adapted top layers of the fast path")
    parser.add_argument("--cut", type=int, default=160, help="observation tokens kept by the top+cut setting")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-dir", default="/tmp/bench-sft-data", help="cache of the grounded trajectories")
    parser.add_argument("--skip", nargs="*", default=[], help="settings not to run")
    parser.add_argument("--sources", nargs="*", default=["musique"],
                        help="golden trajectory sources (their evaluation index is built and cached on first use)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from routerag.corpus.sampling import evenly_spaced
    from routerag.train.config import load_train_config
    from routerag.train.env import HFCodec
    from routerag.train.policy import load_policy, load_tokenizer_for
    from routerag.train.sft import sft_rows, sft_trajectories

    base_cfg = load_train_config(args.config, [f"sft.sources={args.sources}"])
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer_for(base_cfg.model)
    codec = HFCodec(tokenizer, chat_template=base_cfg.model.chat_template)
    trajectories = sft_trajectories(base_cfg, data_dir)

    full = sft_rows(trajectories, codec, 10**9)  # one row per trajectory, in order
    fitting = [i for i, r in enumerate(full) if len(r["input_ids"]) <= base_cfg.sft.max_length]
    chosen = [trajectories[i] for i in evenly_spaced(fitting, args.rows)]

    def rows_for(cut: int | None) -> list[dict[str, list[int]]]:
        return sft_rows(chosen, codec, 10**9, cut)

    t0 = time.perf_counter()
    model = load_policy(base_cfg.model, tokenizer)
    load_s = time.perf_counter() - t0
    n_layers = model.config.num_hidden_layers
    first_top = n_layers - args.top

    settings: list[tuple[str, dict[str, Any], dict[str, Any], int | None, int]] = [  # name, lora, sft, cut, epochs
        ("before", {"layers_top": None}, {"gradient_checkpointing": True, "frozen_no_grad": False, "cache_frozen": False}, None, 1),
        ("no-ckpt", {"layers_top": None}, {"gradient_checkpointing": False, "frozen_no_grad": False, "cache_frozen": False}, None, 1),
        ("top", {"layers_top": args.top}, {"gradient_checkpointing": False, "frozen_no_grad": True, "cache_frozen": True}, None, 2),
        ("top+cut", {"layers_top": args.top}, {"gradient_checkpointing": False, "frozen_no_grad": True, "cache_frozen": False}, args.cut, 1),
        ("bf16", {"layers_top": None}, {"gradient_checkpointing": False, "frozen_no_grad": False, "cache_frozen": False}, None, 1),
    ]
    results = []
    for name, lora_kw, sft_kw, cut, epochs in settings:
        if name in args.skip:
            continue
        rows = rows_for(cut)
        if name == "bf16":
            model = model.to(torch.bfloat16)
        cfg = base_cfg.model_copy(update={
            "lora": base_cfg.lora.model_copy(update={**lora_kw, "dropout": 0.0}),
            "sft": base_cfg.sft.model_copy(update={**sft_kw, "epochs": float(epochs), "warmup_steps": 0,
                                                   "lr_scheduler_type": "constant"}),
            "grpo": base_cfg.grpo.model_copy(update={"torch_threads": args.threads, "save_steps": 10**6}),
            "resume": False,
        })
        out = data_dir / f"run-{name}"
        timer = _step_timer()
        trainer = _trainer_with_seeded_adapters(cfg, model, tokenizer, rows, out, timer, first_top)
        start_loss = trainer.start_loss
        trainer.train()
        prefix = getattr(trainer, "frozen_prefix", None)
        if prefix is not None:
            prefix.remove()
        peft_model = trainer.model
        end_loss = _batch_loss_with(peft_model, rows, None)
        tokens = sum(len(r["input_ids"]) for r in rows)
        n = len(rows)
        for epoch in range(epochs):
            times = timer.times[epoch * n:(epoch + 1) * n]
            label = name if epoch == 0 else f"{name}+cache"
            results.append((label, statistics.mean(times), tokens / sum(times), tokens / n, start_loss if epoch == 0 else None,
                            end_loss if epoch == epochs - 1 else None))
        model = peft_model.unload()  # the base model back, without adapters
        if hasattr(model, "gradient_checkpointing_disable"):
            model.gradient_checkpointing_disable()

    base = results[0][1]
    print(f"\nmodel load {load_s:.0f} s; {args.rows} trajectories; {args.threads} torch thread(s); top = {args.top} of "
          f"{n_layers} layers; cut = {args.cut} observation tokens\n")
    print("| setting | s / trajectory | tokens / s | tokens / trajectory | speed-up vs before | loss at start | loss after the pass |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    def fmt(v):
        return "" if v is None else f"{v:.4f}"

    for label, sec, tps, tok, l0, l1 in results:
        print(f"| {label} | {sec:.1f} | {tps:.1f} | {tok:.0f} | {base / sec:.2f}x | {fmt(l0)} | {fmt(l1)} |")


def _trainer_with_seeded_adapters(cfg: Any, model: Any, tokenizer: Any, rows: list, out: Path, timer: Any, first_top: int) -> Any:
    """``sft_trainer``'s trainer, its adapters set to the common start, its loss at the start measured."""
    from routerag.train.sft import sft_trainer

    trainer = sft_trainer(cfg, model, tokenizer, rows, out)
    _seed_top_adapters(trainer.model, first_top)
    prefix = getattr(trainer, "frozen_prefix", None)
    trainer.start_loss = _batch_loss_with(trainer.model, rows, prefix)
    if prefix is not None:
        prefix._cache.clear()  # the timed pass starts cold
        prefix.hits = prefix.misses = 0
    trainer.add_callback(timer)
    return trainer


def _batch_loss_with(model: Any, rows: list, prefix: Any) -> float:
    import torch

    from routerag.train.sft import masked_loss

    total, count = 0.0, 0
    with torch.no_grad():
        for r in rows:
            ids = torch.tensor([r["input_ids"]])
            labels = torch.tensor([r["labels"]])
            n = int((labels[:, 1:] != -100).sum())
            total += float(masked_loss(model, {"input_ids": ids, "labels": labels}, prefix=prefix)) * n
            count += n
    return total / count


if __name__ == "__main__":
    main()
