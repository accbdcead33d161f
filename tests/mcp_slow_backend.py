"""A model backend for the MCP tests' server subprocesses (``model.backend=mcp_slow_backend:from_config``):
every call takes ``CALL_S`` and appends a line to the file ``$MCP_SLOW_CALLS``, so a test sees
how many calls a run made, and whether it stopped."""

from __future__ import annotations

import os
import time

from routerag.llm.config import ModelConfig
from routerag.llm.scripted import ScriptedModel

CALL_S = 0.25
THOUGHT = "The film was made in a city."  # never "So the answer is:": ircot thinks max_steps times


def from_config(config: ModelConfig) -> ScriptedModel:
    def slowly(messages: object, params: object, continue_final: bool) -> str:
        with open(os.environ["MCP_SLOW_CALLS"], "a", encoding="utf-8") as calls:
            calls.write("call\n")
        time.sleep(CALL_S)
        return THOUGHT

    return ScriptedModel(slowly, name="slow")
