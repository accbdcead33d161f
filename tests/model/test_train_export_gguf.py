"""The PEFT LoRA -> llama.cpp adapter GGUF exporter, its checks, and the llamacpp backend's lora_path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gguf")
pytest.importorskip("peft")

from routerag.train.export_gguf import (
    HF_TO_GGUF,
    LoraExportError,
    LoraGGUFInfo,
    check_lora_gguf,
    export_lora_gguf,
    gguf_name,
)

HIDDEN, LAYERS, VOCAB = 64, 2, 320


def _fake_base(path: Path, hidden: int = HIDDEN, inter: int = HIDDEN * 2, kv: int = HIDDEN // 2, arch: str = "qwen2") -> Path:
    """A GGUF holding only the weights a tiny Qwen2 adapter touches, in llama.cpp's names and
    orientation (numpy shape (out, in), i.e. ggml ne = [in, out])."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), arch)
    out_in = {"attn_q": (hidden, hidden), "attn_k": (kv, hidden), "attn_v": (kv, hidden), "attn_output": (hidden, hidden),
              "ffn_gate": (inter, hidden), "ffn_up": (inter, hidden), "ffn_down": (hidden, inter)}
    for layer in range(LAYERS):
        for name, shape in out_in.items():
            writer.add_tensor(f"blk.{layer}.{name}.weight", np.zeros(shape, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tiny_adapter(tmp_path_factory) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model

    from routerag.train.fixtures import tiny_qwen2

    model = tiny_qwen2(VOCAB, layers=LAYERS, hidden=HIDDEN, heads=4)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=[m.split(".")[1] for m in HF_TO_GGUF],
                                                  task_type="CAUSAL_LM"))
    with torch.no_grad():  # B starts at zero; give it values so the round trip is checked on both
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_()
    out = tmp_path_factory.mktemp("adapter")
    peft_model.save_pretrained(str(out))
    return out


def test_peft_names_map_to_gguf_names():
    assert gguf_name("base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight") == ("blk.3.attn_q.weight", "A")
    assert gguf_name("base_model.model.model.layers.11.mlp.down_proj.lora_B.default.weight") == ("blk.11.ffn_down.weight", "B")
    with pytest.raises(LoraExportError, match="supported module"):
        gguf_name("base_model.model.model.embed_tokens.lora_embedding_A")


def test_export_round_trips_names_shapes_and_values(tiny_adapter, tmp_path):
    from gguf import GGUFReader
    from safetensors.numpy import load_file

    base = _fake_base(tmp_path / "base.gguf")
    info = export_lora_gguf(tiny_adapter, base, tmp_path / "adapter.gguf", dtype="f32")
    assert info.rank == 4 and info.alpha == 8.0 and info.architecture == "qwen2"
    assert info.tensors == 2 * 7 * LAYERS
    reader = GGUFReader(str(tmp_path / "adapter.gguf"))
    fields = {k: reader.fields[k] for k in ("general.type", "adapter.type", "adapter.lora.alpha", "general.architecture")}
    assert bytes(fields["general.type"].parts[-1]).decode() == "adapter"
    assert bytes(fields["adapter.type"].parts[-1]).decode() == "lora"
    assert float(fields["adapter.lora.alpha"].parts[-1][0]) == 8.0
    tensors = {t.name: t for t in reader.tensors}
    # llama.cpp: a.ne = [in, r], b.ne = [r, out]  (gguf's reader reports ne order)
    assert list(tensors["blk.0.attn_k.weight.lora_a"].shape) == [HIDDEN, 4]
    assert list(tensors["blk.0.attn_k.weight.lora_b"].shape) == [4, HIDDEN // 2]
    assert list(tensors["blk.1.ffn_down.weight.lora_a"].shape) == [HIDDEN * 2, 4]
    peft = load_file(str(tiny_adapter / "adapter_model.safetensors"))
    a = peft["base_model.model.model.layers.1.mlp.down_proj.lora_A.weight"]
    b = peft["base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"]
    np.testing.assert_array_equal(np.asarray(tensors["blk.1.ffn_down.weight.lora_a"].data).reshape(a.shape), a)
    np.testing.assert_array_equal(np.asarray(tensors["blk.1.ffn_down.weight.lora_b"].data).reshape(b.shape), b)
    checked = check_lora_gguf(tmp_path / "adapter.gguf", base)
    assert checked.rank == 4 and len(checked.targets) == 7 * LAYERS


def test_export_refuses_another_base_model(tiny_adapter, tmp_path):
    wider = _fake_base(tmp_path / "wider.gguf", hidden=HIDDEN * 2, inter=HIDDEN * 4, kv=HIDDEN)
    with pytest.raises(LoraExportError, match="another base model"):
        export_lora_gguf(tiny_adapter, wider, tmp_path / "x.gguf")
    llama = _fake_base(tmp_path / "llama.gguf", arch="llama")
    good = export_lora_gguf(tiny_adapter, _fake_base(tmp_path / "base.gguf"), tmp_path / "adapter.gguf")
    with pytest.raises(LoraExportError, match="architecture"):
        check_lora_gguf(good.path, llama)
    with pytest.raises(LoraExportError, match="another base model"):
        check_lora_gguf(good.path, wider)
    with pytest.raises(LoraExportError, match="not a LoRA adapter"):
        check_lora_gguf(wider, wider)
    with pytest.raises(LoraExportError, match="adapter_config.json"):
        export_lora_gguf(tmp_path, wider, tmp_path / "y.gguf")


def test_export_refuses_dora(tiny_adapter, tmp_path):
    import shutil

    dora = tmp_path / "dora"
    shutil.copytree(tiny_adapter, dora)
    config = json.loads((dora / "adapter_config.json").read_text())
    config["use_dora"] = True
    (dora / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(LoraExportError, match="DoRA"):
        export_lora_gguf(dora, _fake_base(tmp_path / "base.gguf"), tmp_path / "x.gguf")


def test_export_refuses_a_diverged_adapter(tiny_adapter, tmp_path):
    import shutil

    from safetensors.numpy import load_file, save_file

    nan = tmp_path / "nan"
    shutil.copytree(tiny_adapter, nan)
    weights = load_file(str(nan / "adapter_model.safetensors"))
    key = next(k for k in weights if "lora_B" in k)
    weights[key] = weights[key].copy()
    weights[key][0, 0] = np.nan
    save_file(weights, str(nan / "adapter_model.safetensors"))
    with pytest.raises(LoraExportError, match="NaN or infinite"):
        export_lora_gguf(nan, _fake_base(tmp_path / "base.gguf"), tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()


def test_a_non_finite_loss_or_gradient_stops_the_run():
    from routerag.errors import RouteragError
    from routerag.train.runfiles import DivergedTrainingError, check_finite

    check_finite(3, {"loss": 0.2, "grad_norm": 1.5, "learning_rate": 1e-4})
    with pytest.raises(DivergedTrainingError, match="step 20: grad_norm=nan") as caught:
        check_finite(20, {"loss": 0.2, "grad_norm": float("nan")})
    assert isinstance(caught.value, RouteragError)
    with pytest.raises(DivergedTrainingError, match="loss=inf"):
        check_finite(5, {"loss": float("inf")})


def test_lora_path_is_part_of_the_model_identity(tiny_adapter, tmp_path):
    from routerag.llm.config import ModelConfig
    from routerag.llm.factory import model_identity

    plain = ModelConfig(model="m.gguf").resolved()
    assert model_identity(plain) == "llamacpp|m.gguf||"  # unchanged without an adapter
    adapter = export_lora_gguf(tiny_adapter, _fake_base(tmp_path / "base.gguf"), tmp_path / "a.gguf").path
    one = model_identity(ModelConfig(model="m.gguf", lora_path=adapter).resolved())
    half = model_identity(ModelConfig(model="m.gguf", lora_path=adapter, lora_scale=0.5).resolved())
    assert one.startswith("llamacpp|m.gguf||") and "lora=" in one and one != half
    with pytest.raises(ValueError, match="llamacpp backend only"):
        ModelConfig(backend="transformers", lora_path=adapter).resolved()


# ---------------------------------------------------------------- real llama.cpp load (bundled 0.5B)


def _bundled_or_skip() -> Path:
    pytest.importorskip("llama_cpp")
    from routerag.llm.bundled import bundled_model_path

    try:
        return bundled_model_path()
    except Exception as exc:  # noqa: BLE001 - parts not installed
        pytest.skip(f"bundled model unavailable: {exc}")


def _random_adapter_for_bundled(folder: Path, base: Path, *, scale_b: float) -> Path:
    """A PEFT-layout rank-2 adapter on blk.0/1 q and down projections of the real base model."""
    from safetensors.numpy import save_file

    from routerag.train.export_gguf import base_tensor_shapes

    _, shapes = base_tensor_shapes(base)
    rng = np.random.default_rng(0)
    tensors = {}
    for layer in (0, 1):
        for module, gg in (("self_attn.q_proj", "attn_q"), ("mlp.down_proj", "ffn_down")):
            n_in, n_out = shapes[f"blk.{layer}.{gg}.weight"]
            key = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{key}.lora_A.weight"] = rng.normal(size=(2, n_in)).astype(np.float32) * 0.1
            tensors[f"{key}.lora_B.weight"] = rng.normal(size=(n_out, 2)).astype(np.float32) * scale_b
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 4}))
    return folder


def _logits(model, prompt: str) -> np.ndarray:
    return model.next_token_logits(prompt)


@pytest.mark.model
def test_llamacpp_loads_an_exported_adapter(tmp_path):
    from routerag.llm.base import ModelError
    from routerag.llm.llamacpp import LlamaCppModel

    base = _bundled_or_skip()
    zero = export_lora_gguf(_random_adapter_for_bundled(tmp_path / "zero", base, scale_b=0.0), base, tmp_path / "zero.gguf").path
    strong = export_lora_gguf(_random_adapter_for_bundled(tmp_path / "strong", base, scale_b=0.5), base, tmp_path / "strong.gguf").path
    prompt = "The capital of France is"
    plain = _logits(LlamaCppModel(base, n_ctx=256, n_threads=1), prompt)
    assert np.abs(plain).max() > 1.0  # real logits were read
    with_zero = _logits(LlamaCppModel(base, n_ctx=256, n_threads=1, lora_path=zero), prompt)
    np.testing.assert_allclose(with_zero, plain, atol=1e-3)  # B = 0: the adapter adds nothing
    adapted = LlamaCppModel(base, n_ctx=256, n_threads=1, lora_path=strong)
    assert adapted.lora is not None and adapted.lora.rank == 2
    assert np.abs(_logits(adapted, prompt) - plain).max() > 0.1
    off = _logits(LlamaCppModel(base, n_ctx=256, n_threads=1, lora_path=strong, lora_scale=0.0), prompt)
    np.testing.assert_allclose(off, plain, atol=1e-3)
    tiny_base = _fake_base(tmp_path / "tiny.gguf")
    with pytest.raises(ModelError, match="does not fit"):
        LlamaCppModel(base, n_ctx=256, n_threads=1, lora_path=_tiny_adapter_gguf(tmp_path, tiny_base))


def _tiny_adapter_gguf(tmp_path: Path, tiny_base: Path) -> str:
    from safetensors.numpy import save_file

    folder = tmp_path / "tinyadapter"
    folder.mkdir()
    key = "base_model.model.model.layers.0.self_attn.q_proj"
    save_file({f"{key}.lora_A.weight": np.ones((2, HIDDEN), np.float32), f"{key}.lora_B.weight": np.ones((HIDDEN, 2), np.float32)},
              str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 2}))
    return export_lora_gguf(folder, tiny_base, tmp_path / "tiny-adapter.gguf").path


def _checked_against_the_bundled_base(adapter: Path) -> LoraGGUFInfo:
    """``check_lora_gguf`` of ``adapter`` against the bundled 0.5B (skips when its parts are missing)."""
    try:
        from routerag.llm.bundled import bundled_model_path

        base = bundled_model_path()
    except Exception:  # noqa: BLE001
        pytest.skip("bundled model parts not installed")
    return check_lora_gguf(adapter, base)


@pytest.mark.model
def test_shipped_policy_is_a_valid_adapter_and_the_routerag_default_for_the_bundled_model():
    from routerag.llm.config import ModelConfig, bundled_policy_path
    from routerag.strategies.shipped import with_default_policy

    path = bundled_policy_path()
    assert path.stat().st_size < 16 * 2**20
    assert with_default_policy(ModelConfig(), "routerag").adapter_file() == path
    assert with_default_policy(ModelConfig(), "vanilla").lora_path is None
    assert with_default_policy(ModelConfig(model="other.gguf"), "routerag").lora_path is None
    own = ModelConfig(lora_path=path.parent / "x.gguf")
    assert with_default_policy(own, "routerag") is own
    info = _checked_against_the_bundled_base(path)
    assert info.rank == 8 and info.tensors == 336


@pytest.mark.model
def test_graphrag_r1_gets_its_own_shipped_policy_on_the_bundled_0p5b():
    """The GraphRAG-R1 stage-1 adapter is applied to `graphrag-r1` only, and only on the base it was
    trained on; `routerag` keeps its own policy on the same base."""
    from routerag.llm.config import BUNDLED_POLICY, ModelConfig, bundled_policy_path
    from routerag.strategies.shipped import GRAPHRAG_R1_POLICY, with_default_policy

    path = bundled_policy_path(GRAPHRAG_R1_POLICY)
    assert with_default_policy(ModelConfig(), "graphrag-r1").adapter_file() == path
    assert with_default_policy(ModelConfig(), "routerag").adapter_file() == bundled_policy_path(BUNDLED_POLICY) != path
    assert with_default_policy(ModelConfig(model="bundled:qwen2.5-coder-1.5b"), "graphrag-r1").lora_path is None
    info = _checked_against_the_bundled_base(path)
    assert info.rank == 16 and info.tensors == 336


@pytest.mark.model
def test_each_bundled_base_gets_its_own_shipped_policy():
    from routerag.llm.config import ModelConfig, bundled_policy_path
    from routerag.strategies.shipped import ROUTERAG_POLICIES as BUNDLED_POLICIES
    from routerag.strategies.shipped import with_default_policy

    assert len(BUNDLED_POLICIES) == 2
    paths = set()
    for model, name in BUNDLED_POLICIES.items():
        path = bundled_policy_path(name)
        paths.add(path)
        assert path.stat().st_size < 20 * 2**20
        assert with_default_policy(ModelConfig(model=model), "routerag").adapter_file() == path
        assert with_default_policy(ModelConfig(model=model), "vanilla").lora_path is None
        assert with_default_policy(ModelConfig(model=model, backend="openai", base_url="http://x"), "routerag").lora_path is None
    assert len(paths) == 2  # the 0.5B's adapter never lands on the 1.5B, nor the other way round
    try:
        from routerag.llm.bundled import bundled_model_path

        base = bundled_model_path("qwen2.5-coder-1.5b")
    except Exception:  # noqa: BLE001
        pytest.skip("bundled 1.5B model parts not installed")
    info = check_lora_gguf(bundled_policy_path(BUNDLED_POLICIES["bundled:qwen2.5-coder-1.5b"]), base)
    assert info.rank == 8 and info.tensors == 392
