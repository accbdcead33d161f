"""The SFT fast path: LoRA on the top layers, the frozen lower layers run without autograd and
cached; same loss and gradients as the full graph with the same trainable set."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration
torch = pytest.importorskip("torch")
pytest.importorskip("peft")


def _model_and_batch(layers: int = 4, top: int = 2):
    from peft import get_peft_model

    from routerag.train.adapters import fresh_lora_config
    from routerag.train.config import LoraSpec
    from routerag.train.fixtures import tiny_qwen2

    model = tiny_qwen2(300, layers=layers, hidden=32, heads=4, seed=3)
    peft_model = get_peft_model(model, fresh_lora_config(LoraSpec(enabled=True, r=4, alpha=8, dropout=0.0, layers_top=top), layers))
    for name, p in peft_model.named_parameters():  # B starts at 0: make the adapters non-trivial
        if "lora_B" in name:
            with torch.no_grad():
                p.normal_(0, 0.05)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 300, (1, 48), generator=g)
    labels = ids.clone()
    labels[0, :30] = -100
    return peft_model, ids, labels


def _grads(model):
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad and p.grad is not None}


def test_adapters_only_on_the_top_layers():
    from routerag.train.frozen_prefix import first_trainable_layer

    model, _, _ = _model_and_batch(layers=4, top=2)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".layers.2." in n or ".layers.3." in n for n in trainable)
    assert first_trainable_layer(model) == 2


def test_loss_and_gradients_equal_the_full_graph_and_the_cache_skips_the_lower_layers():
    from routerag.train.frozen_prefix import FrozenPrefix
    from routerag.train.sft import masked_loss

    model, ids, labels = _model_and_batch()
    batch = {"input_ids": ids, "labels": labels}
    full = model(input_ids=ids, labels=labels).loss  # plain forward, autograd everywhere
    full.backward()
    ref = _grads(model)
    model.zero_grad()

    calls = []
    lower = model.get_base_model().model.layers[0]
    hook = lower.register_forward_hook(lambda *a: calls.append(1))
    prefix = FrozenPrefix(model, cache=True)
    assert prefix.boundary == 2
    for expect_hit in (False, True):  # first pass computes and caches, second reads the cache
        loss = masked_loss(model, batch, prefix=prefix)
        assert torch.allclose(loss, full, atol=1e-6)
        loss.backward()
        got = _grads(model)
        assert got.keys() == ref.keys()
        assert all(torch.allclose(got[k], ref[k], atol=1e-6) for k in ref)
        model.zero_grad()
        assert prefix.hits == int(expect_hit)
    assert len(calls) == 2  # the hook fires on both passes (the patched forward is called) ...
    assert len(prefix) == 1  # ... but the second returned the cached state
    hook.remove()
    prefix.remove()
    assert "forward" not in vars(lower)


def test_lower_layers_record_no_graph_even_with_input_gradients():
    from routerag.train.frozen_prefix import FrozenPrefix

    model, ids, _ = _model_and_batch()
    model.enable_input_require_grads()  # what a trainer does for gradient checkpointing
    seen = []
    lower = model.get_base_model().model.layers[1]
    prefix = FrozenPrefix(model, cache=False)
    lower.register_forward_hook(lambda mod, inp, out: seen.append(out.requires_grad))
    model(input_ids=ids)
    assert seen == [False]
    prefix.remove()


def test_sft_trains_the_top_layers_and_leaves_the_lower_ones(tmp_path):
    from routerag.train.config import RouteRAGSFTConfig
    from routerag.train.fixtures import tiny_qwen2
    from routerag.train.policy import load_tokenizer_for
    from routerag.train.sft import run_sft

    tok = load_tokenizer_for(RouteRAGSFTConfig(model={"name": "tiny"}).model)
    model = tiny_qwen2(len(tok), layers=4, hidden=32, heads=4, seed=1)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    cfg = RouteRAGSFTConfig(model={"name": "tiny"}, lora={"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "layers_top": 2},
                      sft={"enabled": True, "max_steps": 3, "learning_rate": 5e-2, "per_device_train_batch_size": 1,
                           "epochs": 3},
                      grpo={"use_cpu": True, "torch_threads": 1, "save_steps": 100})
    g = torch.Generator().manual_seed(0)
    rows = []
    for _ in range(2):
        ids = torch.randint(0, len(tok), (40,), generator=g).tolist()
        rows.append({"input_ids": ids, "labels": [-100] * 30 + ids[30:]})
    trainer = run_sft(cfg, model, tok, rows, tmp_path / "sft")
    prefix = trainer.frozen_prefix
    assert prefix.boundary == 2 and prefix.misses == 2 and prefix.hits == 4  # 3 epochs of 2 rows
    peft_model = trainer.model
    lora = {n: p for n, p in peft_model.named_parameters() if "lora_" in n}
    assert lora and all(".layers.2." in n or ".layers.3." in n for n in lora)
    assert any("lora_B" in n and p.abs().sum() > 0 for n, p in lora.items())  # B left 0: the top adapters trained
    base = peft_model.get_base_model()
    for name, p in base.named_parameters():
        if "lora_" not in name:
            assert torch.equal(p, before[name.replace(".base_layer", "")]), name
    prefix.remove()
