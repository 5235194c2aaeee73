"""``python -m posenc_lib inspect CONFIG --crosscheck``: the report against a
tiny model of the config's class, built with the installed transformers."""

from __future__ import annotations

import builtins
import warnings

import pytest

pytest.importorskip("transformers")

from posenc_lib import config_reader, serving
from posenc_lib.tools import crosscheck, inspector


@pytest.mark.parametrize("name", ["lfm2-1.2b", "gpt-oss-20b", "deepseek-v3",
                                  "qwen2.5-7b-instruct-yarn", "smollm3-3b",
                                  "qwen2.5-vl-7b-instruct"])
def test_table_configs_pass(name, capsys):
    assert inspector.main([name, "--crosscheck"]) == 0
    out = capsys.readouterr().out
    assert "verdict            the report matches what transformers runs" in out
    assert "MISMATCH" not in out


def test_a_composite_is_built_small():
    """A composite config (Qwen2.5-VL) gets the tiny sizes in its text model
    and one layer in its other parts: the text model at full vocabulary and
    MLP width with a 32-block vision tower took about 50 s to build."""
    from transformers import CONFIG_MAPPING

    small = crosscheck.shrink(inspector.model_config("qwen2.5-vl-7b-instruct"))
    built = crosscheck._built(CONFIG_MAPPING[small["model_type"]],
                              {k: v for k, v in small.items() if k != "model_type"})
    assert built.text_config.vocab_size == crosscheck.SMALL["vocab_size"]
    assert built.text_config.intermediate_size == crosscheck.SMALL["intermediate_size"]
    assert built.vision_config.depth == 1


def test_every_layer_and_the_cache_are_compared():
    result = crosscheck.crosscheck(inspector.model_config("lfm2-1.2b"))
    assert len(result["layers"]) == 16
    assert sum(e["rope"] for e in result["layers"]) == 6  # conv layers: none
    # 6 attention layers x 2 x 2 heads x 64 dims x 4 bytes (float32) x 10 tokens
    assert result["cache"]["kv"] == result["cache"]["kv_predicted"] == 61440
    assert result["cache"]["state"] == 16 * 128 * 3 * 4  # hidden 128 after shrinking
    assert all(e["cos_sin_error"] <= e["tolerance"] for e in result["layers"]
               if e["rope"])


def test_a_wrong_report_is_caught(monkeypatch, capsys):
    real = serving.kv_cache_bytes

    def off_by_one_layer(config, **kwargs):
        out = real(config, **kwargs)
        out["bytes_at_length"] += out["bytes_per_token"] // max(out["kv_layers"], 1)
        return out

    monkeypatch.setattr(serving, "kv_cache_bytes", off_by_one_layer)
    assert inspector.main(["qwen3-8b", "--crosscheck"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH           cache after 10 tokens" in out
    assert "do not trust the report" in out


def test_wrong_frequencies_are_caught(monkeypatch):
    from posenc_lib import scaling

    real = scaling.rope_from_config

    def shifted(config, **kwargs):
        got = real(config, **kwargs)
        return None if got is None else (got[0] * (1 + 1e-4), got[1])

    monkeypatch.setattr(scaling, "rope_from_config", shifted)
    result = crosscheck.crosscheck(inspector.model_config("qwen3-8b"))
    assert not result["ok"]
    assert any("inv_freq differs" in p for p in result["problems"])


def test_clear_errors(monkeypatch, capsys):
    config = {"model_type": "mystery", "hidden_size": 64, "num_attention_heads": 2,
              "rope_theta": 1e4, "max_position_embeddings": 256}
    with pytest.raises(ValueError, match="does not know model_type 'mystery'"):
        crosscheck.crosscheck(config)
    real_import = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_transformers)
    assert inspector.main(["qwen3-8b", "--crosscheck"]) == 2
    err = capsys.readouterr().err
    assert "--crosscheck needs transformers" in err


def test_cos_sin_from_the_running_module_are_compared(monkeypatch):
    """A rotary module whose forward pass returns other cos and sin than its
    inv_freq implies (as a faulty kernel would) fails the cross-check."""
    from transformers.models.qwen3 import modeling_qwen3

    real = modeling_qwen3.Qwen3RotaryEmbedding.forward

    def off(self, x, position_ids):
        cos, sin = real(self, x, position_ids)
        return cos, sin * (1 + 2**-10)

    monkeypatch.setattr(modeling_qwen3.Qwen3RotaryEmbedding, "forward", off)
    result = crosscheck.crosscheck(inspector.model_config("qwen3-8b"))
    assert not result["ok"]
    assert any("cos/sin off by" in p for p in result["problems"])


def test_configs_without_rope_are_checked():
    """ALiBi (and NoPE, hybrids): no rotary layer, but the scale attention
    receives and the cache are compared, not refused."""
    result = crosscheck.crosscheck(inspector.model_config("bloom-560m"))
    assert not any(e["rope"] for e in result["layers"])
    assert result["cache"]["kv"] == result["cache"]["kv_predicted"] > 0
    assert result["ok"], result["problems"]


@pytest.mark.parametrize("model_type", ["llama4_text", "deepseek_v2", "minimax",
                                        "phimoe", "moshi", "open-llama", "gptj",
                                        "codegen", "aria_text"])
def test_rotary_modules_of_other_forms_are_compared(model_type):
    """Llama 4 and DeepSeek-V2 return one complex ``freqs_cis``, not
    ``(cos, sin)``; MiniMax's lightning layers take the cos/sin but never apply
    them, and keep their state in ``linear_cache``; PhiMoE's and Open-Llama's
    rotary modules take ``seq_len``, not positions (PhiMoE's has no
    ``inv_freq``), Moshi's sits in each attention, and Open-Llama returns the
    legacy tuple cache; an Aria text config is built as its own class, not
    as the multimodal one that ignores its sizes. Each stored generated config
    of these types (results/config_forms-4.json, the first that transformers
    accepted without a top-level original length the library refuses) is
    compared layer by layer with no problem."""
    import json
    from pathlib import Path

    stored = json.loads((Path(__file__).resolve().parent.parent / "results"
                         / "config_forms-4.json").read_text())
    accepted = [e for e in stored["entries"]
                if e["model_type"] == model_type and e.get("accepted")]
    raw = next((e["raw"] for e in accepted if e["kind"] in ("as-is", "sparse")),
               accepted[0]["raw"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = crosscheck.crosscheck(raw)
    assert result["problems"] == [], result["problems"]


@pytest.mark.parametrize("kind", ["partial:partial_rotary_factor",
                                  "window:max_window_layers"])
def test_open_llama_ignores_the_share_and_the_window(kind):
    """Open-Llama builds its rotary module over the whole head_dim and keeps a
    tuple cache: a stored generated config with a partial_rotary_factor, or
    with a sliding window, is reported as the model runs it."""
    import json
    from pathlib import Path

    stored = json.loads((Path(__file__).resolve().parent.parent / "results"
                         / "config_forms-4.json").read_text())
    raw = next(e["raw"] for e in stored["entries"]
               if e["model_type"] == "open-llama" and e["kind"] == kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = crosscheck.crosscheck(raw)
    assert result["problems"] == [], result["problems"]


def test_a_5x_rotary_module_of_several_layer_types_is_read_per_layer():
    """transformers 5.x keeps one rotary module for several layer types
    (``{type}_inv_freq`` buffers, ``forward(x, position_ids, layer_type)``;
    5.24.0 ``models/gemma3/modeling_gemma3.py`` lines 145-192). CI has 4.57.6
    only, so a module of that form stands in: each layer is read at its type."""
    from types import SimpleNamespace

    import torch

    class Shared(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("full_attention_inv_freq", torch.tensor([1.0, 0.01]))
            self.register_buffer("sliding_attention_inv_freq", torch.tensor([1.0, 0.1]))
            self.full_attention_attention_scaling = 1.5
            self.sliding_attention_attention_scaling = 1.0

        def forward(self, x, position_ids, layer_type=None):
            freq = getattr(self, f"{layer_type}_inv_freq")
            scale = getattr(self, f"{layer_type}_attention_scaling")
            angles = position_ids[..., None].float() * freq
            emb = torch.cat([angles, angles], -1)
            return emb.cos() * scale, emb.sin() * scale

    built = SimpleNamespace(layer_types=["sliding_attention", "full_attention"])
    positions = torch.arange(5)[None]
    for index, kind in enumerate(built.layer_types):
        module = crosscheck._readable(Shared(), built, index, 5)
        assert torch.equal(module.inv_freq, getattr(Shared(), f"{kind}_inv_freq"))
        cos, _ = module(torch.zeros(1), positions)
        expected = (positions[0, :, None].float() * module.inv_freq).cos()
        scale = module.attention_scaling
        assert torch.allclose(cos[0, :, :2], expected * scale, rtol=0, atol=1e-6)


def test_roformer_is_compared_layer_by_layer():
    """RoFormer (the RoPE paper's model) rotates in a static method of its
    self-attention, with one sinusoidal table of the encoder ([sin | cos] per
    position) and pairs of neighbouring features; as a causal LM it caches
    keys and values. Every layer's cos/sin and the cache match the report."""
    config = {"model_type": "roformer", "hidden_size": 768, "num_attention_heads": 12,
              "num_hidden_layers": 12, "max_position_embeddings": 1536}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = crosscheck.crosscheck(config)
    assert [e["rope"] for e in result["layers"]] == [True] * 12
    assert result["cache"]["kv"] == result["cache"]["kv_predicted"] > 0
    assert result["ok"], result["problems"]
    report = inspector.inspect_config(config)
    assert (report["base"], report["pair_layout"]) == (10000.0, "interleaved")


@pytest.mark.parametrize("model_type", sorted(config_reader.FIXED_BASE))
def test_a_sinusoidal_table_ends_at_its_length(model_type):
    """GPT-J, CodeGen and RoFormer look their angles up in a table of
    max_position_embeddings rows: transformers' tiny model runs L tokens and
    fails on L + 1, as the inspector's serving line says."""
    import torch

    from posenc_lib.tools import tiny_model

    cls, kw = tiny_model.shrunk(model_type)
    built, model = tiny_model.build(cls, kw)
    length = built.max_position_embeddings
    with torch.no_grad():
        model(input_ids=torch.full((1, length), 3))
        with pytest.raises((IndexError, RuntimeError), match="out of"):
            model(input_ids=torch.full((1, length + 1), 3))
    report = inspector.inspect_config({"model_type": model_type, **{
        k: v for k, v in built.to_dict().items() if k != "model_type"}})
    assert report["supported_length"] == length
    assert "a longer input fails in transformers" in report["serving_verdict"], (
        report["serving_verdict"])


@pytest.mark.parametrize("model_type", sorted(config_reader.FIXED_BASE))
def test_a_sinusoidal_table_reads_no_rope_scaling(model_type):
    """A rope_scaling block in a GPT-J, CodeGen or RoFormer config changes
    nothing in transformers' tiny model (its table is built from the base
    alone): the library's angles for the config with the block are the
    model's, and the block is named in an IgnoredKeyWarning."""
    import torch

    from posenc_lib import scaling
    from posenc_lib.tools import tiny_model

    cls, kw = tiny_model.shrunk(model_type)
    kw = {**kw, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built, model = tiny_model.build(cls, kw)
        observed = tiny_model.observe(model, built, model_type)["observed"]
    assert built.to_dict()["rope_scaling"]["factor"] == 4.0  # kept, never read
    with pytest.warns(config_reader.IgnoredKeyWarning, match="rope_scaling"):
        inv_freq, _ = scaling.rope_from_config(built.to_dict(), layer=0,
                                               dtype=torch.float64)
    cos = next(iter(observed["cos_sin"].values()))["cos"]
    ours = torch.cos(observed["position"] * inv_freq)
    # float32 angles up to `position` radians, rounded once each, then stored
    # with 8 significant digits: (position + 1) units of float32 roundoff
    atol = (observed["position"] + 1) * torch.finfo(torch.float32).eps
    assert torch.allclose(torch.tensor(cos[:len(ours)], dtype=torch.float64), ours,
                          rtol=0, atol=atol), (cos[:4], ours[:4].tolist())


#: Mllama's (Llama 3.2 Vision's) text model as a composite config.json nests it:
#: MllamaTextConfig's default sizes with a llama3 ``rope_scaling``. transformers
#: 4.57.6 registers no ``mllama_text_model`` config of its own, and neither
#: release has an AutoModel for it.
MLLAMA_TEXT = {"model_type": "mllama_text_model", "hidden_size": 4096,
               "intermediate_size": 14336, "num_attention_heads": 32,
               "num_key_value_heads": 8, "num_hidden_layers": 40,
               "cross_attention_layers": [3, 8, 13, 18, 23, 28, 33, 38],
               "max_position_embeddings": 131072, "rope_theta": 500000.0,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192},
               "rms_norm_eps": 1e-05, "vocab_size": 128256}


@pytest.mark.parametrize("extra", [{}, {"sliding_window": 6}], ids=["as-is", "window"])
def test_a_text_model_without_a_base_model_of_its_own_is_compared(extra):
    """Mllama's text model: the causal LM its config module defines
    (``MllamaForCausalLM``), and its decoder's layers; the 8 cross-attention
    layers apply no RoPE, the other 32 are compared, and the cache is the one
    the model fills (a window its class does not define still makes its
    ``DynamicCache`` slide)."""
    config = {"model_type": "mllama", "text_config": {**MLLAMA_TEXT, **extra},
              "vision_config": {}}
    result = crosscheck.crosscheck(config)
    assert result["ok"], result["problems"]
    assert result["class"] == "MllamaForCausalLM"
    rope = [e["index"] for e in result["layers"] if e["rope"]]
    assert len(result["layers"]) == 40 and len(rope) == 32
    assert not set(rope) & set(MLLAMA_TEXT["cross_attention_layers"])
    assert result["cache"]["kv"] == result["cache"]["kv_predicted"] > 0


def test_a_config_whose_model_transformers_cannot_build_is_a_clear_error():
    """4.57.6's Phi4MultimodalConfig() leaves vision_config None, and its model
    then reads ``config.vision_config.image_token_id``: the crosscheck says
    that transformers builds the config but no model, instead of a traceback
    from inside transformers."""
    transformers = pytest.importorskip("transformers")
    if not transformers.__version__.startswith("4."):
        pytest.skip("5.24.0's class default builds its model")
    from transformers import Phi4MultimodalConfig

    raw = Phi4MultimodalConfig().to_dict()
    with pytest.raises(ValueError, match="builds the config but not a model"):
        crosscheck.crosscheck(raw)
