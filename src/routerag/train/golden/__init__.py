"""Golden trajectories for supervised cold starts, one module per source.

Sources, each rendered in the RouteRAG protocol (``<think>``, ``<search> [mode] q </search>``,
``<information>…</information>``, ``<answer>``) as typed :class:`~routerag.trace.Segment`s, so
that SFT masks prompt and observation tokens exactly as GRPO does (:func:`.render.rerender` renders
them in GraphRAG-R1's protocol, observations from the ``graphrag-r1`` episode's own retrieval):

* :mod:`.musique`: MuSiQue gold decompositions, one search per hop, the hop's answer in the next
  ``<think>``;
* :mod:`.hotpotqa`: HotpotQA supporting facts (HotpotQA and the HotpotQA-distractor pool);
* :mod:`.r1router`: R1-Router's released step-wise trajectories, and their per-step Step-GRPO rows;
* :mod:`.r1router_synth`: grounded step-wise R1-Router trajectories synthesised in the released
  format (WikiTableQuestions table steps, MuSiQue text hops; ``routerag golden-steps``);
* :mod:`.rejection`: rejection sampling of policy rollouts that reach the gold answer.

Shared: :mod:`.schema` (the records), :mod:`.render` (hops -> segments, per protocol), :mod:`.grounding` (real
retrieval as observations), :mod:`.collect` (trajectories of named sources). The overlap check
with evaluation sets lives in :mod:`routerag.corpus.contamination` and is re-exported here.
"""

from routerag.corpus.contamination import (
    OverlapReport,
    assert_disjoint,
    check_overlap,
    eval_set_questions,
    question_key,
)
from routerag.train.golden.collect import GOLDEN_HOPS, GOLDEN_SOURCES, golden_trajectories
from routerag.train.golden.grounding import Grounder, GroundingStats, same_doc
from routerag.train.golden.hotpotqa import from_hotpotqa, hotpotqa_hops
from routerag.train.golden.musique import from_musique, musique_hops
from routerag.train.golden.r1router import (
    R1_ROUTER_MODES,
    from_r1_router,
    r1_router_path,
    r1_router_step_rows,
    read_r1_router,
)
from routerag.train.golden.rejection import rejection_sample
from routerag.train.golden.render import (
    EpisodeReplay,
    Rendered,
    ReplayPolicy,
    from_hops,
    graphrag_r1_turns,
    planned_of,
    render_golden,
    render_routerag,
    rerender,
)
from routerag.train.golden.schema import GOLDEN_PROTOCOLS, GoldenHop, GoldenProtocol, GoldenTrajectory, ModePolicy, gold_hit

__all__ = [
    "GOLDEN_HOPS", "GOLDEN_PROTOCOLS", "GOLDEN_SOURCES", "R1_ROUTER_MODES", "EpisodeReplay", "GoldenHop", "GoldenProtocol",
    "GoldenTrajectory", "Grounder", "GroundingStats", "ModePolicy", "Rendered", "ReplayPolicy", "graphrag_r1_turns",
    "planned_of", "render_golden", "rerender", "OverlapReport", "gold_hit", "same_doc", "assert_disjoint", "check_overlap",
    "eval_set_questions", "from_hops", "from_hotpotqa", "from_musique", "from_r1_router", "golden_trajectories",
    "hotpotqa_hops", "musique_hops", "question_key", "r1_router_path", "r1_router_step_rows", "read_r1_router",
    "rejection_sample", "render_routerag",
]
