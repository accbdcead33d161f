"""Restoring a trained LoRA adapter (PEFT directory or llama.cpp adapter GGUF) as a trainable policy,
so that GRPO continues from an SFT cold start (``lora.init_from``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gguf")
pytest.importorskip("peft")
torch = pytest.importorskip("torch")

from tests.model.test_train_export_gguf import HIDDEN, LAYERS, VOCAB, _fake_base

from routerag.llm.lora_gguf import LoraExportError, read_lora_gguf
from routerag.train.adapters import fresh_lora_config, resolve_adapter, restore_adapter
from routerag.train.config import LoraSpec, RouteRAGRFTConfig, RouteRAGTwoStageConfig
from routerag.train.export_gguf import export_lora_gguf

pytestmark = pytest.mark.integration
def _tiny(seed: int = 0):
    from routerag.train.fixtures import tiny_qwen2

    return tiny_qwen2(VOCAB, layers=LAYERS, hidden=HIDDEN, heads=4, seed=seed)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, object]:
    """A saved PEFT adapter with non-zero A and B, and the peft model that saved it."""
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(_tiny(), LoraConfig(r=4, lora_alpha=8, task_type="CAUSAL_LM",
                                                    target_modules=["q_proj", "v_proj", "down_proj"]))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.normal_(std=0.2)
    out = tmp_path_factory.mktemp("peft")
    peft_model.save_pretrained(str(out))
    return out, peft_model


def _lora_weights(model) -> dict[str, np.ndarray]:
    return {n.split("layers.", 1)[1]: p.detach().numpy().copy() for n, p in model.named_parameters() if "lora_" in n}


def _logits(model, ids=(1, 5, 9, 33, 70)) -> np.ndarray:
    model.eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor([list(ids)])).logits[0].numpy()


def test_gguf_adapter_restores_the_same_policy(trained, tmp_path):
    folder, original = trained
    base = _fake_base(tmp_path / "base.gguf")
    gguf = export_lora_gguf(folder, base, tmp_path / "adapter.gguf", dtype="f32").path
    matrices = read_lora_gguf(gguf, base)
    assert matrices.info.rank == 4 and len(matrices.pairs) == 3 * LAYERS
    a, b = matrices.pairs["blk.1.ffn_down.weight"]
    assert a.shape == (4, HIDDEN * 2) and b.shape == (HIDDEN, 4)

    restored = restore_adapter(_tiny(), LoraSpec(enabled=True, init_from=gguf, dropout=0.0), base)
    want, got = _lora_weights(original), _lora_weights(restored)
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])
    np.testing.assert_allclose(_logits(restored), _logits(original), atol=1e-5)  # same base seed + same adapter
    trainable = [n for n, p in restored.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)


def test_peft_directory_restores_trainable(trained):
    folder, original = trained
    restored = restore_adapter(_tiny(), LoraSpec(enabled=True, init_from=str(folder)), None)
    np.testing.assert_allclose(_logits(restored), _logits(original), atol=1e-6)
    assert any(p.requires_grad for n, p in restored.named_parameters() if "lora_" in n)


def test_bad_adapter_sources_say_what_is_wrong(trained, tmp_path):
    folder, _ = trained
    with pytest.raises(LoraExportError, match="does not exist"):
        resolve_adapter(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="no shipped policy"):
        resolve_adapter("policy:nope")
    base = _fake_base(tmp_path / "base.gguf")
    gguf = export_lora_gguf(folder, base, tmp_path / "adapter.gguf").path
    with pytest.raises(LoraExportError, match="GGUF base"):
        restore_adapter(_tiny(), LoraSpec(enabled=True, init_from=gguf), None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(LoraExportError, match="adapter_config.json"):
        restore_adapter(_tiny(), LoraSpec(enabled=True, init_from=str(tmp_path / "empty")), None)
    wider = _fake_base(tmp_path / "wider.gguf", hidden=HIDDEN * 2, inter=HIDDEN * 4, kv=HIDDEN)
    with pytest.raises(LoraExportError, match="another base model"):
        restore_adapter(_tiny(), LoraSpec(enabled=True, init_from=gguf), wider)


def test_config_rules_for_a_restored_adapter():
    assert fresh_lora_config(LoraSpec(enabled=True, init_from="x")) is None  # the restored adapter trains, no new one
    assert fresh_lora_config(LoraSpec(enabled=False)) is None
    assert fresh_lora_config(LoraSpec(enabled=True, r=4)).r == 4
    with pytest.raises(ValueError, match="lora.enabled"):
        RouteRAGTwoStageConfig(lora={"init_from": "policy:routerag-sft-qwen2.5-coder-0.5b"})
    assert resolve_adapter("policy:routerag-sft-qwen2.5-coder-0.5b").name == "adapter.gguf"


def test_a_run_policy_starts_from_the_configured_adapter(trained):
    from routerag.train.policy import load_trainable

    folder, original = trained
    cfg = RouteRAGTwoStageConfig(model={"name": "tiny", "tiny_layers": LAYERS, "tiny_hidden": HIDDEN},
                                 lora={"enabled": True, "init_from": str(folder)}, grpo={"seed": 0})
    model = load_trainable(cfg, tokenizer=[None] * VOCAB)  # the tiny policy only needs the vocabulary size
    np.testing.assert_allclose(_logits(model), _logits(original), atol=1e-6)
    assert {n for n, p in model.named_parameters() if p.requires_grad} == {
        n for n, p in original.named_parameters() if "lora_" in n}


def test_layers_top_trains_only_the_top_layers_of_a_restored_adapter(trained):
    folder, original = trained
    restored = restore_adapter(_tiny(), LoraSpec(enabled=True, init_from=str(folder), layers_top=1), None)
    np.testing.assert_allclose(_logits(restored), _logits(original), atol=1e-6)  # freezing changes no weight
    trainable = {int(n.split(".layers.", 1)[1].split(".", 1)[0]) for n, p in restored.named_parameters() if p.requires_grad}
    assert trainable == {LAYERS - 1}
    out = restored(input_ids=torch.tensor([[1, 5, 9]])).logits.sum()
    out.backward()
    grads = {n: p.grad for n, p in restored.named_parameters() if "lora_" in n}
    assert all(g is None for n, g in grads.items() if f".layers.{LAYERS - 1}." not in n)
    assert any(g is not None and g.abs().sum() > 0 for n, g in grads.items() if f".layers.{LAYERS - 1}." in n)


def test_rft_rounds_restart_from_the_configured_adapter(trained):
    """With lora.init_from every rejection-sampling round fine-tunes that adapter restored afresh
    (its top layers only with layers_top), not a fresh adapter and not the previous round's weights."""
    from routerag.train.rft import round_policy

    folder, original = trained
    cfg = RouteRAGRFTConfig(model={"name": "tiny", "tiny_layers": LAYERS, "tiny_hidden": HIDDEN},
                            lora={"enabled": True, "init_from": str(folder), "layers_top": 1}, grpo={"seed": 0})
    state: dict = {}
    first = round_policy(cfg, [None] * VOCAB, state)
    np.testing.assert_allclose(_logits(first), _logits(original), atol=1e-6)
    trainable = {int(n.split(".layers.", 1)[1].split(".", 1)[0]) for n, p in first.named_parameters() if p.requires_grad}
    assert trainable == {LAYERS - 1}
    with torch.no_grad():  # round 1 trains its copy
        for p in first.parameters():
            if p.requires_grad:
                p.add_(1.0)
    second = round_policy(cfg, [None] * VOCAB, state)
    assert second is not first
    want = _lora_weights(original)
    got = _lora_weights(second)
    assert got.keys() == want.keys()
    for name, value in got.items():
        np.testing.assert_allclose(value, want[name], atol=1e-6)
    assert "model" not in state  # nothing of a restored run is shared across rounds but the frozen cache


def test_rft_rounds_without_init_share_the_base_model():
    from routerag.train.rft import round_policy

    cfg = RouteRAGRFTConfig(model={"name": "tiny", "tiny_layers": LAYERS, "tiny_hidden": HIDDEN}, grpo={"seed": 0})
    state: dict = {}
    base = round_policy(cfg, [None] * VOCAB, state)
    assert round_policy(cfg, [None] * VOCAB, state) is base
    assert not any("lora_" in n for n, _ in base.named_parameters())
