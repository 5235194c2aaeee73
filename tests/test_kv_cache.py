"""The KV-cache size against the cache a tiny transformers model fills.

For every family :mod:`posenc_lib.per_layer` handles, with the layer pattern
left to the config class where the class has one, a tiny model (random
weights, bfloat16, no download) runs a forward pass of N tokens with
``use_cache=True``; the bytes of the tensors its cache then holds are summed
and compared, exactly, with :func:`posenc_lib.serving.kv_cache_bytes` (keys
and values) and :func:`posenc_lib.serving.fixed_state_bytes` (the state of
linear-attention, convolution and Mamba layers).
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")

from transformers import AutoModel  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from posenc_lib import serving  # noqa: E402
from posenc_lib import config_reader  # noqa: E402
from posenc_lib.tools import crosscheck, inspector  # noqa: E402
from helpers.tiny_models import CLASS_TYPE  # noqa: E402

#: The tiny sizes of the issue's table: 8 layers, 2 KV heads of 16 dims.
HEADS = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 16, "intermediate_size": 32, "vocab_size": 16,
         "pad_token_id": 0, "num_hidden_layers": 8, "max_position_embeddings": 256}
MOE = {"num_local_experts": 2, "num_experts": 2, "num_experts_per_tok": 1,
       "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16}
FAMILIES = {
    "llama": {"model_type": "llama"},
    "qwen2": {"model_type": "qwen2"},
    "qwen2 sliding": {"model_type": "qwen2", "use_sliding_window": True,
                      "sliding_window": 4, "max_window_layers": 3},
    "mistral": {"model_type": "mistral", "sliding_window": 4},
    # classes without layer_types: DynamicCache slides on every layer
    "phi3 sliding": {"model_type": "phi3", "sliding_window": 4},
    "qwen2_moe sliding": {"model_type": "qwen2_moe", **MOE, "use_sliding_window": True,
                          "sliding_window": 4, "max_window_layers": 3},
    "gemma2": {"model_type": "gemma2", "sliding_window": 4},
    "gemma3": {"model_type": "gemma3_text", "sliding_window": 4},
    "gemma without head_dim": {"model_type": "gemma", "head_dim": None},
    "lfm2": {"model_type": "lfm2", "full_attn_idxs": [2, 5]},
    "qwen3_next": {"model_type": "qwen3_next", **MOE, "linear_num_key_heads": 2,
                   "linear_num_value_heads": 2, "linear_key_head_dim": 16,
                   "linear_value_head_dim": 16},
    "llama4": {"model_type": "llama4_text", **MOE, "intermediate_size_mlp": 32,
               "attention_chunk_size": 4},
    "cohere2": {"model_type": "cohere2", "sliding_window": 4},
    "olmo3": {"model_type": "olmo3", "sliding_window": 4},
    "gpt_oss": {"model_type": "gpt_oss", **MOE, "sliding_window": 4},
    "exaone4": {"model_type": "exaone4", "sliding_window": 4},
    "smollm3": {"model_type": "smollm3"},
    "deepseek_v3": {"model_type": "deepseek_v3", **MOE, "n_routed_experts": 2,
                    "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
                    "first_k_dense_replace": 1, "q_lora_rank": 8, "kv_lora_rank": 8,
                    "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 6,
                    "num_key_value_heads": 4, "head_dim": None},
    # classes without layer_types, given the key: DynamicCache follows it
    "starcoder2 typed": {"model_type": "starcoder2", "sliding_window": 4,
                         "layer_types": ["sliding_attention", "full_attention"] * 4},
    "glm4 typed": {"model_type": "glm4", "sliding_window": 4,
                   "layer_types": ["full_attention"] * 3 + ["sliding_attention"] * 5},
    "mistral typed": {"model_type": "mistral", "sliding_window": 4,
                      "layer_types": ["sliding_attention"] * 7 + ["full_attention"]},
    "granitemoehybrid": {"model_type": "granitemoehybrid", **MOE,
                         "layer_types": ["mamba", "attention"] * 4,
                         "position_embedding_type": "rope", "mamba_n_heads": 2,
                         "mamba_d_state": 8, "mamba_n_groups": 1,
                         "shared_intermediate_size": 32, "head_dim": None},
}


def family(name: str) -> dict:
    config = {**HEADS, "rope_theta": 1e4, **FAMILIES[name]}
    return {k: v for k, v in config.items() if v is not None}


def build(config: dict):
    fields = copy.deepcopy(config)
    model_type = fields.pop("model_type")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # Qwen3-Next: no fast kernels installed
    try:
        built = CONFIG_MAPPING[CLASS_TYPE.get(model_type, model_type)](**fields)
        torch.manual_seed(0)
        return AutoModel.from_config(built, dtype=torch.bfloat16).eval(), built
    finally:
        hf_logging.set_verbosity(verbosity)


def filled(config: dict, tokens: int) -> tuple[int, int]:
    """(bytes of keys and values, bytes of other state) the model's cache
    holds after a forward pass of ``tokens`` tokens."""
    return crosscheck.filled_cache_bytes(*build(config), tokens)


def ours(config: dict, tokens: int) -> tuple[int, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        cache = serving.kv_cache_bytes(config, length=tokens)
    state = cache["fixed_state"]["bytes"] if cache["fixed_state"] else 0
    return cache["bytes_at_length"], state


@pytest.mark.parametrize("tokens", [3, 10])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_kv_bytes_equal_the_filled_cache(name, tokens):
    config = family(name)
    assert ours(config, tokens) == filled(config, tokens)


@st.composite
def falcon_h1_fields(draw) -> dict:
    """Falcon-H1's Mamba sizes as its config class accepts them: the inner
    width given (``mamba_d_ssm``) or ``mamba_expand x hidden_size`` (null),
    ``mamba_d_head`` "auto" or the explicit quotient, and a ``sliding_window``
    the model does not use, or none."""
    heads = draw(st.sampled_from([2, 4]))
    inner = draw(st.sampled_from([None, 32 * heads, 64 * heads]))
    expand = draw(st.sampled_from([1, 2]))
    width = expand * HEADS["hidden_size"] if inner is None else inner
    fields = {"model_type": "falcon_h1", "mamba_n_heads": heads, "mamba_d_ssm": inner,
              "mamba_expand": expand,
              "mamba_d_head": draw(st.sampled_from(["auto", width // heads])),
              "mamba_n_groups": draw(st.sampled_from([1, 2])),
              "mamba_d_state": draw(st.sampled_from([4, 8])),
              "mamba_d_conv": draw(st.sampled_from([2, 4])),
              "mamba_chunk_size": 8, "num_hidden_layers": draw(st.integers(1, 3))}
    if draw(st.booleans()):
        fields["sliding_window"] = 4
    return fields


@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(falcon_h1_fields())
def test_falcon_h1_keys_and_mamba_state_equal_the_filled_cache(fields):
    """Every Falcon-H1 layer keeps its keys and values (no window, whatever
    ``sliding_window`` says) and a Mamba convolution and SSM state, in the
    model's dtype (``FalconHybridMambaAttentionDynamicCache``; before it was
    sized, the library said 0 bytes of state and slid every layer's keys)."""
    config = {**HEADS, "rope_theta": 1e4, **fields}
    assert ours(config, 10) == filled(config, 10)


@settings(max_examples=6, deadline=None, derandomize=True, database=None)
@given(lru=st.sampled_from([None, 48, 96]), window=st.sampled_from([4, 8, 32]),
       conv=st.integers(2, 4), blocks=st.sampled_from([
           ["recurrent", "attention"], ["recurrent", "recurrent", "attention"],
           ["attention", "recurrent"]]), layers=st.integers(2, 4),
       tokens=st.sampled_from([3, 10]))
def test_recurrent_gemma_window_buffer_and_states_equal_the_filled_cache(
        lru, window, conv, blocks, layers, tokens):
    """RecurrentGemma (4.57.6) allocates each attention layer's keys and values
    for ``attention_window_size`` tokens at the first token, and keeps per
    recurrent layer an RG-LRU state in float32 and a convolution state of
    ``lru_width`` channels (before, the library let the keys grow with the
    tokens and did not size the states)."""
    config = {**HEADS, "rope_theta": 1e4, "model_type": "recurrent_gemma",
              "lru_width": lru, "attention_window_size": window,
              "conv1d_width": conv, "block_types": blocks,
              "num_hidden_layers": layers}
    config = {k: v for k, v in config.items() if v is not None}
    assert ours(config, tokens) == filled(config, tokens)


#: The issue's table, measured in transformers 4.57.6 (8 layers, 2 KV heads of
#: 16 dims, 2 bytes a value, 10 tokens).
MEASURED = {"lfm2": 2560, "qwen3_next": 2560, "llama4": 4864, "cohere2": 4864,
            "olmo3": 4864, "gpt_oss": 6656}


@pytest.mark.parametrize("name", list(MEASURED))
def test_the_published_measurements(name):
    config = family(name)
    assert ours(config, 10)[0] == MEASURED[name]


def test_lfm2_caches_only_its_attention_layers():
    cache = serving.kv_cache_bytes(inspector.model_config("lfm2-1.2b"), length=1)
    # 6 attention layers x 2 (keys, values) x 8 KV heads x 64 dims x 2 bytes
    assert cache["bytes_per_token"] == 6 * 2 * 8 * 64 * 2 == 12 * 1024
    assert cache["by_layer_type"]["conv"] == {
        "layers": 10, "bytes_per_token": 0, "window": None, "cap": None, "kv": False,
        "tokens_at_length": 0}
    text = inspector.format_report(inspector.inspect_config(
        inspector.model_config("lfm2-1.2b")))
    assert "12 KiB per token" in text


def test_gemma_without_head_dim_uses_one_head_dim():
    """GemmaConfig's head_dim defaults to 256 for RoPE and for the cache alike,
    not hidden_size / heads."""
    config = {"model_type": "gemma", "hidden_size": 3072, "num_attention_heads": 16,
              "num_key_value_heads": 16, "num_hidden_layers": 28,
              "max_position_embeddings": 8192, "rope_theta": 1e4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        report = inspector.inspect_config(config)
    assert report["head_dim"] == report["kv_cache"]["key_dim"] == 256
    assert report["kv_cache"]["bytes_per_token"] == 2 * 28 * 16 * 256 * 2


def test_layer_typed_classes_are_transformers():
    """The config classes that carry layer_types, against transformers."""
    for model_type in sorted(serving.LAYER_TYPED):
        cls = CONFIG_MAPPING[CLASS_TYPE.get(model_type, f"{model_type}_text")
                             if f"{model_type}_text" in CONFIG_MAPPING
                             else model_type]
        assert getattr(cls(), "layer_types", None) is not None, model_type
    others = {"llama", "mistral", "mixtral", "phi3", "qwen2_moe", "qwen3_moe",
              "deepseek_v3", "gemma", "glm4_moe", "ernie4_5", "qwen3_vl_text",
              "granite", "olmo2", "starcoder2", "gpt_neox"}
    for model_type in others:
        assert model_type not in serving.LAYER_TYPED
        assert getattr(CONFIG_MAPPING[model_type](), "layer_types", None) is None, \
            model_type


def test_state_defaults_are_the_classes():
    import inspect as std_inspect

    stored = json.loads((Path(__file__).resolve().parents[1] / "results"
                         / "class-defaults-5.json").read_text())
    stored5 = {**stored["state_types"], **stored["types"]}
    for model_type, defaults in serving.STATE_DEFAULTS.items():
        if model_type not in CONFIG_MAPPING:  # a 5.x class: its stored defaults
            name = next(t for t in (f"{model_type}_text", model_type) if t in stored5)
            for key, value in defaults.items():
                assert stored5[name]["config"][key] == value, (model_type, key)
            continue
        params = std_inspect.signature(CONFIG_MAPPING[model_type].__init__).parameters
        for key, value in defaults.items():
            assert params[key].default == value, (model_type, key)
    # the 5.x-only sizes of the indexer and of MiMo's values, likewise
    for model_type, dim in serving.INDEXER_DEFAULTS.items():
        field = serving.INDEXER_FIELD.get(model_type, "index_head_dim")
        config = stored5[model_type]["config"]
        config = config if field in config else config["text_config"]
        assert config[field] == dim, (model_type, field, config[field])
    for model_type, dim in serving.V_HEAD_DIM_DEFAULTS.items():
        assert stored5[model_type]["config"]["v_head_dim"] == dim, model_type
    params = std_inspect.signature(CONFIG_MAPPING["deepseek_v3"].__init__).parameters
    for key, value in serving.MLA_DEFAULTS.items():
        assert params[key].default == value, key


# ---- vLLM's conventions (a transcription of its source, cited in serving) ----------


def test_vllm_caches_the_mla_latent():
    config = inspector.model_config("deepseek-v3")
    text = config.get("text_config", config)
    text.setdefault("num_hidden_layers", 61)
    theirs = serving.kv_cache_bytes(config, engine="vllm", length=16)
    ours_ = serving.kv_cache_bytes(config, length=16)
    # (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers x 2 bytes
    assert theirs["bytes_per_token"] == 576 * 61 * 2 == 70272
    # transformers: 128 heads x (128 + 64 + 128) x 61 x 2 bytes, ~71 times more
    assert ours_["bytes_per_token"] == 128 * 320 * 61 * 2
    assert round(ours_["bytes_per_token"] / theirs["bytes_per_token"]) == 71


@pytest.mark.parametrize("length, blocks", [(1, 1), (16, 1), (17, 2), (1000, 63)])
def test_vllm_full_layers_take_whole_blocks(length, blocks):
    config = family("llama")
    cache = serving.kv_cache_bytes(config, engine="vllm", length=length)
    assert cache["bytes_at_length"] == blocks * 16 * cache["bytes_per_token"]


def test_vllm_sliding_and_chunked_reserve_what_its_manager_reserves():
    # SlidingWindowSpec.max_memory_usage_bytes: cdiv(min(w - 1 + t, n), B) + 1
    # blocks; w = 4096, t = 1, B = 16: cdiv(4096, 16) + 1 = 257 blocks
    config = {**family("mistral"), "sliding_window": 4096}
    cache = serving.kv_cache_bytes(config, engine="vllm", length=100_000)
    assert cache["bytes_at_length"] == 257 * 16 * cache["bytes_per_token"]
    # ChunkedLocalAttentionSpec: cdiv(min(chunk + t, n), B); chunk 8192:
    # cdiv(8193, 16) = 513 blocks on each of 6 chunked layers, 6250 on 2 full
    llama4 = {**family("llama4"), "attention_chunk_size": 8192}
    cache = serving.kv_cache_bytes(llama4, engine="vllm", length=100_000)
    per_layer = 2 * 2 * 16 * 2
    assert cache["bytes_at_length"] == per_layer * 16 * (6 * 513 + 2 * 6250)


def test_engine_must_be_known():
    with pytest.raises(ValueError, match="engine must be one of transformers, vllm"):
        serving.kv_cache_bytes(family("llama"), engine="sglang")


# ---- the inspector's serving lines -------------------------------------------------


def _deepseek():
    config = inspector.model_config("deepseek-v3")
    config.setdefault("num_hidden_layers", 61)
    return config


def test_deepseek_kv_line_states_the_sizes_its_number_uses():
    text = inspector.format_report(inspector.inspect_config(_deepseek()))
    line = next(x for x in text.splitlines() if x.strip().startswith("KV cache"))
    # 61 layers x 128 heads x (128 + 64 + 128) x 2 bytes = 4,880 KiB
    assert "4,880 KiB per token" in line
    assert "61 layers x 128 KV heads x (key 128 + 64 + value 128) x 2 bytes" in line
    vllm = inspector.format_report(inspector.inspect_config(_deepseek(), engine="vllm"))
    line = next(x for x in vllm.splitlines() if x.strip().startswith("KV cache"))
    assert "68.62 KiB per token (vllm: 61 layers x (kv_lora_rank 512 + " \
        "qk_rope_head_dim 64)" in line


def test_angle_error_uses_the_configured_frequencies():
    """Linear x4: the angles at p are plain RoPE's at p/4. The error line must
    be the one of those frequencies, computed here from scratch."""
    config = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4,
              "num_hidden_layers": 2, "max_position_embeddings": 8192,
              "rope_theta": 1e4, "rope_scaling": {"rope_type": "linear",
                                                  "factor": 4.0}}
    report = inspector.inspect_config(config, target_length=32768)
    freq = 1e4 ** -(torch.arange(0, 128, 2, dtype=torch.float64) / 128) / 4
    p = torch.arange(32768 - 256, 32768)
    for name, dtype in serving.ANGLE_DTYPES.items():
        if name == "float16":
            continue
        angles = p.to(dtype)[:, None] * freq.to(dtype)
        exact = p.double()[:, None] * freq
        expected = max(float((f(angles).double() - f(exact)).abs().max())
                       for f in (torch.cos, torch.sin))
        assert report["angle_error"][name] == expected, name
    plain = serving.angle_errors(128, 1e4, 32768)
    assert report["angle_error"] != plain
    assert "position interpolation (PI) frequencies" in inspector.format_report(report)


def test_kv_at_the_supported_length_and_a_verdict():
    """Without an extension the KV cache is sized at max_position_embeddings,
    not at twice it (GLM-4.5: 131,072)."""
    config = {"model_type": "glm4_moe", "hidden_size": 5120, "head_dim": 128,
              "num_attention_heads": 96, "num_key_value_heads": 8,
              "num_hidden_layers": 92, "max_position_embeddings": 131072,
              "rope_theta": 1e6, "partial_rotary_factor": 0.5,
              "num_nextn_predict_layers": 1}
    report = inspector.inspect_config(config)
    assert report["kv_cache"]["length"] == report["supported_length"] == 131072
    assert report["angle_error_length"] == 131072  # pairs are probed at 2L
    assert report["target_length"] == 262144
    assert report["angle_error"] == serving.angle_errors(64, 1e6, 131072)
    assert report["kv_cache"]["bytes_at_length"] == 2 * 92 * 8 * 128 * 2 * 131072
    assert report["serving_verdict"].startswith(
        "supported up to 131,072 tokens (max_position_embeddings, no extension")
    assert "46 GiB per sequence at 131,072" in report["serving_verdict"]
    [mtp] = report["engine_needs"]
    assert mtp.startswith("1 multi-token-prediction layer(s)")
    assert "4 KiB per token more" in mtp  # one layer: 2 x 8 x 128 x 2 bytes
    text = inspector.format_report(report)
    assert "  serving            supported up to 131,072" in text


def test_engine_needs_sinks_and_state():
    gpt = inspector.inspect_config(inspector.model_config("gpt-oss-20b"))
    assert any(n.startswith("learned attention sinks") for n in gpt["engine_needs"])
    lfm = inspector.inspect_config(inspector.model_config("lfm2-1.2b"))
    [state] = lfm["engine_needs"]
    assert "192 KiB per sequence" in state  # 16 layers x 2048 x 3 x 2 bytes
    assert state.startswith("keep the fixed state of layers without KV")
    plain = inspector.inspect_config(inspector.model_config("qwen3-8b"))
    assert plain["engine_needs"] == []


def test_engine_flag(capsys):
    assert inspector.main(["deepseek-v3", "--engine", "vllm", "--json"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    if report["kv_cache"] is not None:
        assert report["kv_cache"]["engine"] == "vllm"
    with pytest.raises(SystemExit):  # an engine the inspector does not know
        inspector.main(["deepseek-v3", "--engine", "tgi"])
    # SGLang: its RoPE is reported, its KV cache is not sized
    assert inspector.main(["deepseek-v3", "--engine", "sglang", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "kv_cache" not in report and report["engine_rope"]["engine"] == "sglang"
    with pytest.raises(ValueError, match="engine must be one of"):
        inspector.inspect_config(inspector.model_config("qwen3-8b"), engine="tgi")


# ---- at full scale ---------------------------------------------------------------

#: Fields of two published config.json files (copies: Qwen/Qwen3-Next-80B-A3B-
#: Thinking in ai-dynamo/aiconfigurator, src/aiconfigurator/model_configs/
#: Qwen--Qwen3-Next-80B-A3B-Thinking_config.json @ 1b7cfb10a6fa06880ad7911db5d
#: db949882ff76a; meta-llama/Llama-4-Scout-17B-16E-Instruct's text_config in
#: inference-sim/inference-sim, model_configs/llama-4-scout-17b-16e-instruct/
#: config.json @ 59649ee4320aa98bbc5607a84df1f09f1e80eedf).
QWEN3_NEXT_80B = {"model_type": "qwen3_next", "hidden_size": 2048,
                  "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
                  "num_hidden_layers": 48, "full_attention_interval": 4,
                  "max_position_embeddings": 262144, "rope_theta": 10000000,
                  "partial_rotary_factor": 0.25, "linear_conv_kernel_dim": 4,
                  "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                  "linear_num_key_heads": 16, "linear_num_value_heads": 32}
SCOUT = {"model_type": "llama4", "text_config": {
    "model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40,
    "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 48,
    "attention_chunk_size": 8192, "no_rope_layers": [],
    "max_position_embeddings": 10485760, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192,
                     "rope_type": "llama3"}}}


def test_full_scale_figures():
    qwen = serving.kv_cache_bytes(QWEN3_NEXT_80B, length=1_000_000)
    # 12 full-attention layers of 48 x 2 x 2 KV heads x 256 x 2 bytes
    assert qwen["bytes_per_token"] == 12 * 2 * 2 * 256 * 2 == 24 * 1024
    assert qwen["bytes_at_length"] == 24 * 1024 * 1_000_000  # about 22.9 GiB
    # per linear layer: conv (2·16·128 + 32·128) x 4 x 2 bytes, state 32·128·128 x 4
    per = (2 * 16 * 128 + 32 * 128) * 4 * 2 + 32 * 128 * 128 * 4
    assert qwen["fixed_state"]["bytes"] == 36 * per
    scout = serving.kv_cache_bytes(SCOUT, length=10_485_760)
    per_layer = 2 * 8 * 128 * 2
    # 12 full (NoPE) layers keep every token, 36 chunked ones 8,191
    assert scout["bytes_at_length"] == per_layer * (12 * 10_485_760 + 36 * 8191)
    assert 481 < scout["bytes_at_length"] / 2**30 < 481.2


def test_verdict_names_the_extension():
    yarn = inspector.inspect_config(inspector.model_config("qwen2.5-7b-instruct-yarn"))
    assert yarn["serving_verdict"].startswith(
        "supported up to 131,072 tokens (YaRN x4 from L = 32,768); beyond, needs a "
        "larger factor")
    linear = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4,
              "num_hidden_layers": 2, "max_position_embeddings": 131072,
              "rope_theta": 1e6, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    assert inspector.inspect_config(linear)["serving_verdict"].startswith(
        "supported up to 131,072 tokens (max_position_embeddings, with position "
        "interpolation (PI) x8)")
    dynamic = dict(linear, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    assert "dynamic NTK raises the base" in \
        inspector.inspect_config(dynamic)["serving_verdict"]


def test_vllm_fixed_state():
    """vLLM's state shapes (MambaStateShapeCalculator, transcribed): a
    convolution keeps kernel - 1 steps, only layers without attention keep
    one, everything in the model's dtype."""
    lfm = serving.kv_cache_bytes(inspector.model_config("lfm2-1.2b"), engine="vllm")
    assert lfm["fixed_state"]["bytes"] == 10 * (3 - 1) * 2048 * 2  # 10 conv layers
    qwen = serving.kv_cache_bytes(QWEN3_NEXT_80B, engine="vllm")
    per = ((4 - 1) * (2 * 16 * 128 + 32 * 128) + 32 * 128 * 128) * 2
    assert qwen["fixed_state"]["bytes"] == 36 * per
    granite = family("granitemoehybrid")  # hidden 64, 2 heads, state 8, 4 Mamba
    cache = serving.kv_cache_bytes(granite, engine="vllm")
    conv = (4 - 1) * (2 * 64 + 2 * 1 * 8)
    ssm = 2 * (2 * 64 // 2) * 8
    assert cache["fixed_state"]["bytes"] == 4 * (conv + ssm) * 2
    with pytest.raises(ValueError, match="engine must be one of"):
        serving.fixed_state_bytes(granite, engine="tgi")


@pytest.mark.parametrize("model_type", ["mistral", "qwen2", "gemma2", "qwen3", "ernie4_5",
                                        "starcoder2", "helium", "bitnet"])
def test_omitted_kv_heads_take_the_class_default(model_type):
    """A config without ``num_key_value_heads``: its class fills in its own
    default (Mistral 8, Qwen2 32, ...), not the query heads; the filled cache
    of the tiny model says which."""
    from posenc_lib import _validate_config

    default = _validate_config.KV_HEADS_DEFAULTS[model_type]
    config = {"model_type": model_type, "hidden_size": 32 * default,
              "num_attention_heads": 2 * default, "head_dim": 16,
              "num_hidden_layers": 2, "intermediate_size": 32, "vocab_size": 64,
              "rope_theta": 1e4, "max_position_embeddings": 64}
    assert serving.cache_head(config)["kv_heads"] == default
    assert ours(config, 5) == filled(config, 5)
    with pytest.raises(ValueError, match="num_key_value_heads is missing.*fills in"):
        serving.cache_head({**config, "num_attention_heads": default + 1,
                            "hidden_size": 32 * (default + 1)})


def test_cache_walk_classifies_by_name():
    """cache_walk.walk: keys/values of a DynamicCache and of the legacy tuple form
    are kv, conv/recurrent states held in dicts (5.x LinearAttentionLayer) are
    state, a shared tensor is counted once, integer bookkeeping not at all."""
    from transformers import DynamicCache

    from posenc_lib.tools.cache_walk import walk

    k, v = torch.zeros(1, 2, 5, 8), torch.zeros(1, 2, 5, 8)
    cache = DynamicCache()
    cache.update(k, v, 0)
    kv_bytes = 2 * k.numel() * 4
    assert (walk(cache).kv, walk(cache).state) == (kv_bytes, 0)
    assert (walk(((k, v), (k, v))).kv) == kv_bytes  # same storage: counted once

    class LinearLayer:  # the shape of 5.x cache_utils.LinearAttentionLayer
        __module__ = "transformers.cache_utils"

        def __init__(self):
            self.conv_states = {0: torch.zeros(1, 4, 3)}
            self.recurrent_states = {0: torch.zeros(1, 2, 4, 4)}
            self.conv_kernel_size = {0: 3}
            self.cumulative_length = torch.tensor(5)

    found = walk([LinearLayer()])
    assert (found.kv, found.state) == (0, (12 + 32) * 4)


def test_zamba_head_is_its_class_default_without_the_field():
    """ZambaConfig fills in attention_head_dim = 2 x hidden_size // heads (its
    attention reads the hidden state beside the original embeddings): a config
    without the field is read with the class's value (4.57.6, live)."""
    from transformers import ZambaConfig

    for hidden, heads in ((3712, 16), (128, 4), (96, 3)):
        fields = {"hidden_size": hidden, "num_attention_heads": heads,
                  "num_key_value_heads": heads, "num_hidden_layers": 6}
        built = ZambaConfig(**fields)
        head = serving.cache_head({"model_type": "zamba", **fields})
        assert head["key_dim"] == head["value_dim"] == built.attention_head_dim


#: A tiny LongCat-Flash (MLA, two attention sublayers per decoder layer).
LONGCAT = {"model_type": "longcat_flash", "hidden_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": 4, "ffn_hidden_size": 32,
           "expert_ffn_hidden_size": 16, "n_routed_experts": 2, "moe_topk": 2,
           "zero_expert_num": 2, "q_lora_rank": 16, "kv_lora_rank": 16,
           "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "head_dim": 4, "v_head_dim": 8,
           "vocab_size": 16, "pad_token_id": 0, "max_position_embeddings": 256,
           "rope_theta": 1e4}


@pytest.mark.parametrize("layers", [{"num_layers": 3},
                                    {"num_layers": 3, "num_hidden_layers": 6}])
def test_longcat_caches_two_attention_layers_per_decoder_layer(layers):
    """LongcatFlashModel builds num_layers decoder layers of two attention
    sublayers each; its cache holds 2 x num_layers layers (4.57.6 overwrites
    num_hidden_layers with that; the library once refused the two counts)."""
    config = {**LONGCAT, **layers}
    with warnings.catch_warnings():
        warnings.simplefilter("error", config_reader.VersionDependentWarning)
        assert config_reader.num_layers(config) == 6
    assert ours(config, 10) == filled(config, 10)


def test_longcat_counts_that_the_releases_read_differently_warn():
    """num_hidden_layers alone, or not twice num_layers: 4.57.6 keeps
    num_layers (default 28), 5.x halves num_hidden_layers."""
    for layers, four, five in (({"num_hidden_layers": 10}, 56, 10),
                               ({"num_layers": 3, "num_hidden_layers": 10}, 6, 10)):
        with pytest.warns(config_reader.VersionDependentWarning, match="num_layers"):
            got = config_reader.num_layers({**LONGCAT, **layers})
        installed = transformers_major()
        assert got == (five if installed >= 5 else four), (layers, got)


def transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def test_a_type_only_5x_registers_is_sized_as_5x_fills_it():
    """With no release named and 4.57.6 installed, a type that only 5.x
    registers (4.57.6 cannot build it) is sized as 5.24.0 fills its cache: GLM-5
    (``glm_moe_dsa``) caches its MLA latent and indexer keys (5.24.0's tiny
    model agrees: results/conformance-5.json), about 450 MB at 4,096 tokens for
    its class defaults, not the 21 GB of decompressed keys a 4.57.6 reading
    gave. Every such type of the stored 5.x class defaults."""
    stored = json.loads((Path(__file__).resolve().parents[1] / "results"
                         / "class-defaults-5.json").read_text())["types"]
    sized = 0
    for model_type, entry in sorted(stored.items()):
        if config_reader._only_release(model_type) != 5 or \
                model_type in config_reader.MODEL_TYPE_ALIASES:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                five = serving.kv_cache_bytes(entry["config"], length=4096,
                                              transformers_version="5.24.0")
            except ValueError:
                continue  # refused under either reading
            plain = serving.kv_cache_bytes(entry["config"], length=4096)
        assert plain == five, model_type
        sized += plain is not None
    assert sized >= 40, sized
    glm = serving.kv_cache_bytes(stored["glm_moe_dsa"]["config"], length=4096)
    assert glm["transformers_version"] == "5.24.0"
