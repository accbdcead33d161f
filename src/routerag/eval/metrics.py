"""Answer metrics: one module for evaluation tables and training rewards.

Every lexical metric is a pure function ``(prediction, golds) -> float`` in ``[0, 1]`` that takes
the maximum over the gold aliases; they are registered in :data:`METRICS` by name. The semantic
similarity (GraphRAG-R1's SBERT score) has the same signature and loads the bundled sentence
embedder on first use. The LLM judge needs a model and the question, so it is a class
(:class:`LLMJudge`) rather than a registry entry.

A question whose answers are not aliases names an **answer scheme** (``Question.answer_scheme``,
registered in :data:`ANSWER_SCHEMES`): ``wtq``, WikiTableQuestions' list answers, scores ``em``
as its official evaluator does (:mod:`routerag.eval.wtq`). :func:`score_answer` applies it.

Choices where the reference scripts disagree (details and hand-checked cases in
``docs/concepts/metrics.md``):

* normalisation: SQuAD's, plus NFKC and Unicode punctuation (:mod:`routerag.corpus.normalize`);
* F1 special-cases *yes/no/noanswer* as HotpotQA, 2Wiki and FlashRAG do: if either side
  normalises to one of them and the two differ, F1 is 0 (SQuAD and MuSiQue do not);
* an answer that normalises to nothing: F1 = 1 only if both sides are empty (SQuAD 2.0), where
  HotpotQA returns 0;
* cover-EM matches the gold as a whole-token span of the prediction; FlashRAG's ``acc`` and
  Search-R1's ``subem`` test raw substring containment, so gold ``1`` is "covered" by ``1990``;
* F1-recall (R1-Router) is the token recall of the gold, without the yes/no special case (a long
  "yes, because ..." answer is the case it is meant to be lenient with).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel

from routerag.corpus.normalize import normalize_answer
from routerag.errors import RouteragError
from routerag.llm.base import ChatModel, GenerationParams, Message
from routerag.registry import Registry, callables_taking, instances_of
from routerag.trace import ModelCall

if TYPE_CHECKING:
    from routerag.index.embedder import Embedder

Golds = Sequence[str] | str
AnswerMetric = Callable[[str, Golds], float]

SPECIAL_ANSWERS = frozenset({"yes", "no", "noanswer"})


class NoGoldAnswerError(RouteragError, ValueError):
    """A metric was asked to score against an empty list of gold answers."""


def _golds(golds: Golds) -> list[str]:
    items = [golds] if isinstance(golds, str) else list(golds)
    if not items:
        raise NoGoldAnswerError("no gold answers to score against")
    return items


class TokenScores(BaseModel):
    """Token overlap of one prediction against one gold answer."""

    precision: float
    recall: float
    f1: float


def token_scores(prediction: str, gold: str, *, special_case_yes_no: bool = True) -> TokenScores:
    """Multiset token overlap of the normalised strings (SQuAD F1 for one gold)."""
    pred_norm, gold_norm = normalize_answer(prediction), normalize_answer(gold)
    if special_case_yes_no and pred_norm != gold_norm and (pred_norm in SPECIAL_ANSWERS or gold_norm in SPECIAL_ANSWERS):
        return TokenScores(precision=0.0, recall=0.0, f1=0.0)
    pred_tokens, gold_tokens = pred_norm.split(), gold_norm.split()
    if not pred_tokens or not gold_tokens:
        same = float(pred_tokens == gold_tokens)
        return TokenScores(precision=same, recall=same, f1=same)
    overlap = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if overlap == 0:
        return TokenScores(precision=0.0, recall=0.0, f1=0.0)
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return TokenScores(precision=precision, recall=recall, f1=2 * precision * recall / (precision + recall))


def exact_match(prediction: str, golds: Golds) -> float:
    """1.0 if the normalised prediction equals a normalised gold alias."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _golds(golds)))


def token_f1(prediction: str, golds: Golds) -> float:
    """Token F1, maximised over the gold aliases."""
    return max(token_scores(prediction, g).f1 for g in _golds(golds))


def token_precision(prediction: str, golds: Golds) -> float:
    """Token precision of the prediction, maximised over the gold aliases."""
    return max(token_scores(prediction, g).precision for g in _golds(golds))


def f1_recall(prediction: str, golds: Golds) -> float:
    """R1-Router's F1-recall: the share of the gold's tokens found in the prediction (max over
    aliases). No yes/no special case."""
    return max(token_scores(prediction, g, special_case_yes_no=False).recall for g in _golds(golds))


def cover_em(prediction: str, golds: Golds) -> float:
    """Cover-EM / accuracy: 1.0 if a normalised gold occurs in the normalised prediction as a
    run of whole tokens. A gold that normalises to nothing only covers an empty prediction."""
    pred = normalize_answer(prediction)
    padded = f" {pred} "
    for gold in _golds(golds):
        g = normalize_answer(gold)
        if (g and f" {g} " in padded) or (not g and not pred):
            return 1.0
    return 0.0


def semantic_similarity(prediction: str, golds: Golds, embedder: "Embedder | None" = None) -> float:
    """Cosine similarity of sentence embeddings (GraphRAG-R1's SBERT score), max over aliases.
    Uses the bundled all-MiniLM-L6-v2 unless an embedder is given; an empty prediction scores 0."""
    items = _golds(golds)
    if not prediction.strip():
        return 0.0
    if embedder is None:
        from routerag.index.embedder import build_embedder

        embedder = build_embedder()
    vectors = np.asarray(embedder.encode([prediction, *items]), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    vectors = vectors / norms[:, None]
    return float(np.clip(vectors[1:] @ vectors[0], -1.0, 1.0).max())


METRICS: Registry[AnswerMetric] = Registry("metric", callables_taking("prediction", "golds"))
METRICS.register("em", exact_match)
METRICS.register("f1", token_f1)
METRICS.register("precision", token_precision)
METRICS.register("f1_recall", f1_recall)
METRICS.register("cover_em", cover_em)
METRICS.register("semantic", semantic_similarity)

DEFAULT_METRICS: tuple[str, ...] = ("em", "f1", "cover_em", "f1_recall")


# ---------------------------------------------------------------- answer schemes


@dataclass(frozen=True)
class AnswerScheme:
    """How the gold ``answers`` of a question are read when they are not aliases
    (``Question.answer_scheme`` names one): the metrics it scores its own way, by metric name,
    and the golds every other metric is given (``other_golds(answers)``)."""

    description: str
    metrics: Mapping[str, AnswerMetric]
    other_golds: Callable[[list[str]], list[str]]


ANSWER_SCHEMES: Registry[AnswerScheme] = Registry("answer scheme", instances_of(AnswerScheme))
ANSWER_SCHEMES.register("wtq", "routerag.eval.wtq:WTQ_SCHEME")


def check_schemes(schemes: Iterable[str | None]) -> None:
    """Every answer scheme named is registered (:class:`~routerag.registry.UnknownNameError`
    listing the valid ones); ``None`` is the aliases rule."""
    for name in {s for s in schemes if s is not None}:
        ANSWER_SCHEMES.get(name)


def metric_score(name: str, prediction: str, golds: Golds, scheme: str | None = None) -> float:
    """Metric ``name`` of one prediction; with ``scheme``, as that answer scheme scores it."""
    if scheme is None:
        return METRICS.get(name)(prediction, golds)
    entry = ANSWER_SCHEMES.get(scheme)
    own = entry.metrics.get(name)
    if own is not None:
        return own(prediction, golds)
    return METRICS.get(name)(prediction, entry.other_golds(_golds(golds)))


def score_answer(prediction: str, golds: Golds, names: Sequence[str] = DEFAULT_METRICS,
                 scheme: str | None = None) -> dict[str, float]:
    """Every named metric for one prediction (``scheme``: the question's answer scheme)."""
    return {name: metric_score(name, prediction, golds, scheme) for name in names}


# ---------------------------------------------------------------- LLM as judge

JUDGE_PROMPT = """You are grading the answer of a question-answering system.
Question: {question}
Gold answer(s): {golds}
Predicted answer: {prediction}

Does the predicted answer mean the same as one of the gold answers? Reply with one word: yes or no."""

_VERDICT = re.compile(r"\b(yes|no|correct|incorrect|true|false|right|wrong)\b")
_POSITIVE = {"yes", "correct", "true", "right"}
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


def parse_judgement(text: str) -> bool | None:
    """Read a yes/no verdict from a judge's reply; ``None`` when there is none.

    Ignores ``<think>`` blocks, markdown and the echoed phrase "yes or no"; takes the first verdict
    word; a verdict directly preceded by "not" is negated ("not correct" -> no)."""
    body = _THINK.sub(" ", text).lower()
    body = re.sub(r"[*_`#>\"']", " ", body)
    body = re.sub(r"\byes\s*(or|/)\s*no\b", " ", body)
    match = _VERDICT.search(body)
    if match is None:
        return None
    positive = match.group(1) in _POSITIVE
    if re.search(r"\bnot\s*$", body[: match.start()]):
        positive = not positive
    return positive


class JudgeResult(BaseModel):
    verdict: bool | None  # None: the reply held no verdict
    raw: str
    call: ModelCall

    @property
    def score(self) -> float | None:
        return None if self.verdict is None else float(self.verdict)


class LLMJudge:
    """LLM-as-judge through any :class:`~routerag.llm.base.ChatModel` (greedy, a few tokens)."""

    def __init__(self, model: ChatModel, params: GenerationParams | None = None) -> None:
        self.model = model
        self.params = params or GenerationParams(max_tokens=16, temperature=0.0)

    def judge(self, question: str, prediction: str, golds: Golds) -> JudgeResult:
        prompt = JUDGE_PROMPT.format(question=question, golds=" | ".join(_golds(golds)), prediction=prediction)
        response = self.model.chat([Message(role="user", content=prompt)], self.params)
        call = ModelCall(
            purpose="judge",
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            latency_ms=response.latency_ms,
            cached=response.cached,
        )
        return JudgeResult(verdict=parse_judgement(response.text), raw=response.text, call=call)

