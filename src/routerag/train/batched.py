"""The episodes of a GRPO step sampled as one batch (the GPU rollout backend, ``grpo.rollout_backend: batched``).

Token-by-token sampling of one episode at a time leaves a GPU idle: a 0.5B model's decoding step
costs about the same for 1 sequence as for 64. Here every episode of a step runs in its own thread
through the one episode engine (:meth:`~routerag.train.env.RouteRAGEnv.rollout`, so the protocol,
recoveries and retrieval are exactly those of evaluation), and each episode's ``generate`` call
only queues a request. When every live episode is waiting, :class:`EpisodeBatcher` hands all the
queued turns to :class:`BatchSampler`, which decodes them as one left-padded batch (each row with
its own stop strings and token limit) and wakes the episodes with their results. Retrieval runs in
the episodes' threads between turns.

:class:`BatchSampler` follows :class:`~routerag.train.generation.PolicySampler`'s contract row by
row: log-probabilities of the sampling distribution (after temperature), a row stops at an EOS
token, at a stop string or at its token limit, and every sampled token up to that point is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from routerag.corpus.schema import Question
from routerag.train.generation import end_token_ids, turn_ended

if TYPE_CHECKING:
    from routerag.train.env import Rollout, RouteRAGEnv


@dataclass
class TurnRequest:
    """One policy turn waiting to be decoded: the episode's tokens so far, its stops and limit."""

    prompt_ids: list[int]
    stops: list[str]
    max_new_tokens: int


SampleBatch = Callable[[Sequence[TurnRequest]], list[tuple[list[int], list[float]]]]


class BatchSampler:
    """Samples many turns at once from a transformers causal LM (a ``SampleBatch``).

    Prompts are left-padded; only the last position's logits are computed (``logits_to_keep=1``),
    so a batch of 64 prompts of 2,000 tokens never materialises 64 x 2,000 x vocabulary logits.
    With ``prune_finished`` (the default) a row that has ended leaves the batch at once: its KV
    cache, mask and position rows are dropped, so the decoding steps after it cost what the rows
    still running cost instead of the whole batch waiting on its slowest row. ``row_steps`` counts
    the rows run through the model, summed over decoding steps (the work pruning saves).
    ``temperature`` 0 is greedy. The generator lives on the model's device and advances from call
    to call, so the ``G`` episodes of a group differ."""

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float = 1.0, seed: int = 0,
                 eos_token_ids: Sequence[int] | None = None, pad_token_id: int | None = None,
                 prune_finished: bool = True) -> None:
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.prune_finished = prune_finished
        eos = end_token_ids(tokenizer, eos_token_ids)
        self.eos_token_ids = eos
        pad = pad_token_id if pad_token_id is not None else getattr(tokenizer, "pad_token_id", None)
        self.pad_token_id = int(pad) if isinstance(pad, int) else (min(eos) if eos else 0)
        device = next(model.parameters()).device
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.calls = 0
        self.rows = 0
        self.decode_steps = 0
        self.row_steps = 0

    def __call__(self, requests: Sequence[TurnRequest]) -> list[tuple[list[int], list[float]]]:
        import torch

        if not requests:
            return []
        self.calls += 1
        self.rows += len(requests)
        model = self.model
        device = next(model.parameters()).device
        width = max(len(r.prompt_ids) for r in requests)
        n = len(requests)
        ids = torch.full((n, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, r in enumerate(requests):
            if not r.prompt_ids:
                raise ValueError("a turn request has no prompt tokens")
            ids[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids, dtype=torch.long)
            mask[i, width - len(r.prompt_ids):] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        limits = [max(0, r.max_new_tokens) for r in requests]
        out_ids: list[list[int]] = [[] for _ in requests]
        out_lp: list[list[float]] = [[] for _ in requests]
        done = [limit == 0 for limit in limits]
        # live[j] is the request index of batch row j; rows leave the batch when they end
        live = [i for i in range(n) if not done[i]] if self.prune_finished else list(range(n))
        if len(live) < n and live:
            keep = torch.tensor(live, device=device)
            ids, mask, positions = ids[keep], mask[keep], positions[keep]
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                step_in, step_pos, cache = ids, positions, None
                while not all(done):
                    out = model(input_ids=step_in, attention_mask=mask, position_ids=step_pos, past_key_values=cache,
                                use_cache=True, logits_to_keep=1)
                    cache = out.past_key_values
                    self.decode_steps += 1
                    self.row_steps += len(live)
                    logits = out.logits[:, -1].float()
                    if self.temperature > 0:
                        logits = logits / self.temperature
                    log_probs = torch.log_softmax(logits, dim=-1)
                    if self.temperature > 0:
                        tokens = torch.multinomial(log_probs.exp(), 1, generator=self.generator)[:, 0]
                    else:
                        tokens = torch.argmax(log_probs, dim=-1)
                    chosen = log_probs.gather(1, tokens[:, None])[:, 0]
                    token_list, lp_list = tokens.tolist(), chosen.tolist()
                    for j, i in enumerate(live):
                        if done[i]:
                            continue
                        out_ids[i].append(int(token_list[j]))
                        out_lp[i].append(float(lp_list[j]))
                        if len(out_ids[i]) >= limits[i] or turn_ended(out_ids[i], requests[i].stops, self.eos_token_ids,
                                                                      self.tokenizer.decode):
                            done[i] = True
                    step_in = tokens[:, None]
                    step_pos = step_pos[:, -1:] + 1
                    mask = torch.cat([mask, torch.ones((len(live), 1), dtype=mask.dtype, device=device)], dim=1)
                    if self.prune_finished and any(done[i] for i in live) and not all(done):
                        rows = [j for j, i in enumerate(live) if not done[i]]
                        keep = torch.tensor(rows, device=device)
                        cache.batch_select_indices(keep)  # drops the ended rows' keys and values in every layer
                        step_in, step_pos, mask = step_in[keep], step_pos[keep], mask[keep]
                        live = [live[j] for j in rows]
        finally:
            if was_training:
                model.train()
        return list(zip(out_ids, out_lp))


@dataclass
class _Pending:
    request: TurnRequest
    result: tuple[list[int], list[float]] | None = None
    error: BaseException | None = None


class EpisodeBatcher:
    """Collects the turns of concurrently running episodes and decodes them together.

    ``live`` episodes run in threads; each calls :meth:`generate` (the ``Generate`` port) and
    :meth:`finished` when its episode ends. A batch is decoded as soon as every live episode is
    waiting, so the batch shrinks as episodes answer. An error in the sampler is raised in every
    episode of that batch."""

    def __init__(self, sample_batch: SampleBatch, live: int) -> None:
        self._sample = sample_batch
        self._live = live
        self._pending: list[_Pending] = []
        self._cond = threading.Condition()
        self.batches: list[int] = []  # size of every decoded batch, in order

    def generate(self, prompt_ids: list[int], stop_strings: list[str], max_new_tokens: int) -> tuple[list[int], list[float]]:
        item = _Pending(TurnRequest(list(prompt_ids), list(stop_strings), int(max_new_tokens)))
        with self._cond:
            self._pending.append(item)
            self._dispatch_if_ready()
            while item.result is None and item.error is None:
                self._cond.wait()
        if item.error is not None:
            raise item.error
        assert item.result is not None
        return item.result

    def finished(self) -> None:
        with self._cond:
            self._live -= 1
            self._dispatch_if_ready()

    def _dispatch_if_ready(self) -> None:
        """Decode the queued turns once no live episode can add another (called holding the lock)."""
        if not self._pending or len(self._pending) < self._live:
            return
        batch, self._pending = self._pending, []
        self.batches.append(len(batch))
        try:
            results = self._sample([p.request for p in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"the batch sampler returned {len(results)} results for {len(batch)} turns")
            for p, r in zip(batch, results):
                p.result = r
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting episode
            for p in batch:
                p.error = exc
        self._cond.notify_all()


def batched_rollouts(env: RouteRAGEnv, questions: Sequence[str | Question], sample_batch: SampleBatch,
                     *, batcher_log: list[int] | None = None) -> list[Rollout]:
    """One episode per entry of ``questions``, all sampled together; returns the
    :class:`~routerag.train.env.Rollout` list in the same order. ``batcher_log`` receives the
    size of every decoded batch."""
    if not questions:
        return []
    batcher = EpisodeBatcher(sample_batch, live=len(questions))

    def one(question: str | Question) -> Rollout:
        try:
            return env.rollout(question, batcher.generate)
        finally:
            batcher.finished()

    with ThreadPoolExecutor(max_workers=len(questions), thread_name_prefix="routerag-episode") as pool:
        futures = [pool.submit(one, q) for q in questions]
        rollouts = [f.result() for f in futures]
    if batcher_log is not None:
        batcher_log.extend(batcher.batches)
    return rollouts
