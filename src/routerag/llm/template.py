"""Render a conversation to a raw prompt with a model's own Jinja chat template.

``continue_final=True`` renders the conversation so that the last (assistant) message is left
open: no end-of-turn token after it, so the model continues that very text. The template is
rendered with a unique sentinel in place of the final message's content and the output is cut
right after the prefix text, which works for any template that copies the content verbatim.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from routerag.llm.base import Message, ModelError

_SENTINEL = "\u2063routerag-continue\u2063"


class TemplateError(ModelError):
    """The chat template cannot be compiled or cannot render this conversation."""


@functools.lru_cache(maxsize=16)
def _compile(source: str):
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(f"chat template refused the conversation: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(source)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"chat template does not compile: {exc}") from None


@dataclass(frozen=True)
class ChatTemplate:
    """A Jinja chat template (as shipped in GGUF metadata or ``tokenizer_config.json``)."""

    source: str
    bos_token: str = ""
    eos_token: str = ""

    def _render(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        try:
            return _compile(self.source).render(
                messages=messages,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
                tools=None,
            )
        except TemplateError:
            raise
        except Exception as exc:  # jinja raises many types at render time
            raise TemplateError(f"chat template failed to render: {type(exc).__name__}: {exc}") from None

    def render(self, messages: list[Message], *, continue_final: bool = False) -> str:
        """The raw prompt text. Without ``continue_final`` it ends with the generation prompt
        (``<|im_start|>assistant\\n`` for Qwen); with it, it ends with the last message's text."""
        if not messages:
            raise TemplateError("cannot render an empty conversation")
        dicts = [{"role": m.role, "content": m.content} for m in messages]
        if not continue_final:
            return self._render(dicts, add_generation_prompt=True)
        if messages[-1].role != "assistant":
            raise TemplateError("continue_final=True needs the last message to be the assistant's")
        prefix = messages[-1].content
        dicts[-1] = {"role": "assistant", "content": _SENTINEL}
        rendered = self._render(dicts, add_generation_prompt=False)
        at = rendered.rfind(_SENTINEL)
        if at < 0:
            raise TemplateError("chat template drops the final assistant message; cannot continue it")
        return rendered[:at] + prefix
