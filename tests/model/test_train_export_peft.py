"""llama.cpp adapter GGUF -> PEFT folder (what vLLM's --lora-modules loads): PEFT's keys and
config, and a round trip back through the PEFT -> GGUF exporter gives the same matrices. The fast
tests use a small synthetic base and adapter; the shipped policy's round trip is `slow` (reading the
bundled base GGUF's header takes minutes on a loaded 2-core machine)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("safetensors")
pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def base():
    from routerag.llm.resolve import resolve_model_file

    try:
        return resolve_model_file("bundled:qwen2.5-coder-0.5b")
    except Exception as exc:  # noqa: BLE001 - the bundled model parts are optional
        pytest.skip(f"bundled model not available: {exc}")


LAYERS, HIDDEN, KV, INTER, R = 2, 64, 32, 128, 4
OUT_IN = {"attn_q": (HIDDEN, HIDDEN), "attn_k": (KV, HIDDEN), "attn_v": (KV, HIDDEN), "attn_output": (HIDDEN, HIDDEN),
          "ffn_gate": (INTER, HIDDEN), "ffn_up": (INTER, HIDDEN), "ffn_down": (HIDDEN, INTER)}


def _write(path, tensors, adapter_alpha=None):
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "qwen2")
    if adapter_alpha is not None:
        writer.add_type("adapter")
        writer.add_string("adapter.type", "lora")
        writer.add_float32("adapter.lora.alpha", adapter_alpha)
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("layers", [[0, 1], [1]])
def test_synthetic_adapter_round_trips(tmp_path, layers):
    from routerag.llm.lora_gguf import read_lora_gguf
    from routerag.train.export_gguf import export_lora_gguf, read_peft_adapter
    from routerag.train.export_peft import export_peft_adapter

    rng = np.random.default_rng(0)
    base = _write(tmp_path / "base.gguf", {f"blk.{i}.{n}.weight": np.zeros(s, np.float32) for i in range(LAYERS) for n, s in OUT_IN.items()})
    adapter = {}
    for i in layers:
        for n, (out_dim, in_dim) in OUT_IN.items():
            adapter[f"blk.{i}.{n}.weight.lora_a"] = rng.standard_normal((R, in_dim)).astype(np.float16)
            adapter[f"blk.{i}.{n}.weight.lora_b"] = rng.standard_normal((out_dim, R)).astype(np.float16)
    gguf = _write(tmp_path / "adapter.gguf", adapter, adapter_alpha=8.0)
    info = export_peft_adapter(gguf, base, tmp_path / "peft", base_model="tiny/qwen2")
    assert (info.rank, info.alpha, info.layers, info.tensors) == (R, 8.0, layers, 14 * len(layers))
    config, tensors = read_peft_adapter(tmp_path / "peft")
    assert config["target_modules"] == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
    assert config.get("layers_to_transform") == (None if layers == [0, 1] else [1])
    a = tensors[f"base_model.model.model.layers.{layers[0]}.mlp.down_proj.lora_A.weight"]
    assert a.shape == (R, INTER) and np.array_equal(a, adapter[f"blk.{layers[0]}.ffn_down.weight.lora_a"].astype(np.float32))
    back = read_lora_gguf(export_lora_gguf(tmp_path / "peft", base, tmp_path / "again.gguf").path, base)
    original = read_lora_gguf(gguf, base)
    assert back.info.alpha == 8.0 and back.pairs.keys() == original.pairs.keys()
    for name, (a0, b0) in original.pairs.items():
        assert np.array_equal(back.pairs[name][0], a0) and np.array_equal(back.pairs[name][1], b0)


@pytest.mark.slow
@pytest.mark.model
def test_shipped_policy_round_trips_through_peft(base, tmp_path):
    from typer.testing import CliRunner

    import routerag.cli.train_cmds  # noqa: F401 - registers the commands
    from routerag.cli.app import app
    from routerag.llm.config import bundled_policy_path
    from routerag.llm.lora_gguf import read_lora_gguf
    from routerag.train.export_gguf import export_lora_gguf, read_peft_adapter

    out = tmp_path / "peft"
    result = CliRunner().invoke(app, ["export-lora-peft", "--out", str(out)])  # default: the shipped policy
    assert result.exit_code == 0, result.output
    assert "336 tensors, rank 8, alpha 16" in result.output and "layers 0-23" in result.output
    config, tensors = read_peft_adapter(out)
    assert config["peft_type"] == "LORA" and config["r"] == 8 and config["lora_alpha"] == 16.0
    assert config["target_modules"] == ["down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"]
    assert config["base_model_name_or_path"] == "Qwen/Qwen2.5-Coder-0.5B-Instruct" and "layers_to_transform" not in config
    a = tensors["base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight"]
    b = tensors["base_model.model.model.layers.3.self_attn.q_proj.lora_B.weight"]
    assert a.shape == (8, 896) and b.shape == (896, 8)
    original = read_lora_gguf(bundled_policy_path(), base)
    back = read_lora_gguf(export_lora_gguf(out, base, tmp_path / "again.gguf").path, base)
    assert back.info.alpha == original.info.alpha and back.pairs.keys() == original.pairs.keys()
    for name, (a0, b0) in original.pairs.items():
        assert np.array_equal(back.pairs[name][0], a0) and np.array_equal(back.pairs[name][1], b0)
    assert json.loads((out / "adapter_config.json").read_text())["inference_mode"] is True
