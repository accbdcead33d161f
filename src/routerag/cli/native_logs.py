"""How much the native model libraries log on the console, for the commands that load a model
(``routerag ask``, ``demo``, ``mcp``)."""

from __future__ import annotations

import logging
import os

__all__ = ["quiet_native_logs"]


def quiet_native_logs(verbose: bool) -> None:
    """llama.cpp's own log lines and the Hugging Face loading bars only with ``--verbose`` (the
    rich progress lines say what is loading); see ``set_native_logging``."""
    from routerag.llm.llamacpp import set_native_logging

    set_native_logging(verbose)
    if not verbose:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when transformers is imported (later)
    else:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
