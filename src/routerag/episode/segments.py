"""The transcript of one episode as typed :class:`~routerag.trace.Segment`s, merged in one place
(the episode engine, golden trajectories)."""

from __future__ import annotations

from typing import Literal

from routerag.trace import Segment

SegmentKind = Literal["prompt", "model", "observation"]


class SegmentLog:
    """Segments after a prompt; neighbours of one kind merge (fewer, longer segments), so
    ``"".join(s.text for s in segments)`` is the prompt plus exactly what entered the context."""

    def __init__(self, prompt_text: str) -> None:
        self.segments: list[Segment] = [Segment(kind="prompt", text=prompt_text)]

    def add(self, kind: SegmentKind, text: str) -> None:
        if not text:
            return
        last = self.segments[-1]
        if last.kind == kind:
            self.segments[-1] = Segment(kind=last.kind, text=last.text + text)
        else:
            self.segments.append(Segment(kind=kind, text=text))
