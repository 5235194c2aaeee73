"""rope_from_config against transformers 4.57.6 over the whole parameter space,
per rope type, including the regions where every clamp and guard binds.

Each property draws a config (bases 2 .. 1e9, original lengths 16 .. 2**20,
factors 0.01 .. 1000, equal and crossed beta / frequency factors), builds it
with transformers' own config class and compares ``ROPE_INIT_FUNCTIONS`` (or
the model's rotary module) with :func:`posenc_lib.scaling.rope_from_config`.
Tolerance as in ``test_models.py``: transformers computes ``base**x`` in
float32, relative error about ``ln(base)·ε32 <= 21·ε32`` for base <= 1e9.
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")

from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

from posenc_lib import scaling  # noqa: E402
from posenc_lib import config_reader  # noqa: E402
from helpers.hf_reference import assert_same, hf_config, hf_rope  # noqa: E402

SWEEP = settings(max_examples=40, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])

bases = st.one_of(st.sampled_from([2.0, 10000.0, 1e9]), st.floats(2.0, 1e9))
lengths = st.one_of(st.sampled_from([16, 2 ** 20]), st.integers(16, 2 ** 20))
# factors below 1 too: transformers computes them (and logs a warning)
factors = st.one_of(st.sampled_from([1.0, 1000.0, 0.5]), st.floats(1.0, 1000.0),
                    st.floats(0.01, 1.0))
head_dims = st.sampled_from([4, 8, 16, 64, 128, 256])


def llama(head_dim: int, base: float, max_len: int, block: dict | None) -> dict:
    return {"model_type": "llama", "hidden_size": 2 * head_dim,
            "num_attention_heads": 2, "head_dim": head_dim, "rope_theta": base,
            "max_position_embeddings": max_len, "rope_scaling": block}


def ours(config: dict, seq_len=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scaling.RopeConfigWarning)
        return scaling.rope_from_config(config, seq_len=seq_len, dtype=torch.float64)


@SWEEP
@given(head_dim=head_dims, base=bases, max_len=lengths, factor=factors,
       rope_type=st.sampled_from(["default", "linear", "dynamic"]),
       seq_len=st.one_of(st.none(), st.integers(1, 2 ** 22)))
def test_plain_linear_dynamic(head_dim, base, max_len, factor, rope_type, seq_len):
    block = None if rope_type == "default" else {"rope_type": rope_type,
                                                 "factor": factor}
    config = llama(head_dim, base, max_len, block)
    assert_same(ours(config, seq_len), hf_rope(config, seq_len),
                json.dumps(config))


@st.composite
def yarn_blocks(draw):
    beta_slow = draw(st.one_of(st.sampled_from([1.0, 32.0]), st.floats(0.25, 64.0)))
    beta_fast = draw(st.one_of(st.just(beta_slow),  # equal: the zero-width guard
                               st.sampled_from([32.0, 1.0]), st.floats(0.25, 64.0)))
    block = {"rope_type": "yarn", "factor": draw(factors),
             "beta_fast": beta_fast, "beta_slow": beta_slow,
             "original_max_position_embeddings": draw(lengths),
             "truncate": draw(st.booleans())}
    if draw(st.booleans()):
        mscale = draw(st.sampled_from([0.707, 1.0, 0.1]))
        block.update(mscale=mscale, mscale_all_dim=draw(st.sampled_from([mscale, 1.0])))
    return block


@SWEEP
@given(head_dim=head_dims, base=bases, block=yarn_blocks())
# The correction range lies past the last pair (high clamped to dim - 1).
@example(head_dim=16, base=2.0, block={
    "rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
    "original_max_position_embeddings": 2 ** 20, "truncate": True})
# ... and before the first (low clamped to 0).
@example(head_dim=128, base=1e9, block={
    "rope_type": "yarn", "factor": 8.0, "beta_fast": 64.0, "beta_slow": 32.0,
    "original_max_position_embeddings": 16, "truncate": True})
# Kimi K2's equal betas.
@example(head_dim=64, base=50000.0, block={
    "rope_type": "yarn", "factor": 32.0, "beta_fast": 1.0, "beta_slow": 1.0,
    "mscale": 1.0, "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096, "truncate": True})
def test_yarn(head_dim, base, block):
    config = llama(head_dim, base, 2 ** 21, block)
    assert_same(ours(config), hf_rope(config), json.dumps(config))


def test_yarn_guards_bind():
    """The examples above do reach the clamps and the guard they are named for."""
    past = scaling.yarn_correction_range(16, 2.0, 2 ** 20, 32.0, 1.0)
    before = scaling.yarn_correction_range(128, 1e9, 16, 64.0, 32.0)
    equal = scaling.yarn_correction_range(64, 50000.0, 4096, 1.0, 1.0)
    # transformers clamps low >= 0 and high <= dim - 1 only: past the last pair
    # low stays above dim/2 - 1; before the first, high stays below 0.
    assert past[0] > 16 // 2 - 1 and past[1] == 16 - 1
    assert before[0] == 0 and before[1] < 0
    assert equal[0] == math.floor(equal[1]) or equal[1] - equal[0] == 1
    with pytest.warns(scaling.RopeConfigWarning, match="beta_fast=1.0 < beta_slow"):
        scaling.yarn_correction_range(64, 50000.0, 4096, 1.0, 4.0)


@st.composite
def llama3_blocks(draw):
    low = draw(st.one_of(st.sampled_from([1.0, 4.0]), st.floats(0.25, 16.0)))
    high = draw(st.one_of(st.just(low),  # equal: Llama 4 Scout's clean cut
                          st.sampled_from([4.0, 1.0]), st.floats(0.25, 16.0)))
    return {"rope_type": "llama3", "factor": draw(factors), "low_freq_factor": low,
            "high_freq_factor": high, "original_max_position_embeddings": draw(lengths)}


@SWEEP
@given(head_dim=head_dims, base=bases, block=llama3_blocks())
@example(head_dim=128, base=500000.0, block={
    "rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
    "high_freq_factor": 1.0, "original_max_position_embeddings": 8192})
def test_llama3(head_dim, base, block):
    config = llama(head_dim, base, 2 ** 21, block)
    assert_same(ours(config), hf_rope(config), json.dumps(config))


def test_equal_llama3_factors_are_a_clean_cut():
    """Llama 4 Scout's factors (1.0, 1.0): every pair is either kept or divided
    by the full factor, the cut at wavelength L (an independent count)."""
    block = {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
             "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}
    config = llama(128, 500000.0, 2 ** 20, block)
    with pytest.warns(scaling.RopeConfigWarning, match="no band is smoothed"):
        inv_freq, _ = scaling.rope_from_config(config, dtype=torch.float64)
    plain = 500000.0 ** -(torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    ratio = plain / inv_freq
    divided = (2 * math.pi / plain) > 8192
    assert torch.allclose(ratio[divided], torch.tensor(16.0, dtype=torch.float64))
    assert torch.allclose(ratio[~divided], torch.tensor(1.0, dtype=torch.float64))
    assert 0 < int(divided.sum()) < 64


@SWEEP
@given(head_dim=st.sampled_from([8, 16, 64]), base=bases, original=lengths,
       ratio=st.sampled_from([1, 4, 32]), data=st.data())
def test_longrope(head_dim, base, original, ratio, data):
    factor_lists = st.lists(st.floats(1.0, 64.0, width=32), min_size=head_dim // 2,
                            max_size=head_dim // 2)
    config = llama(head_dim, base, original * ratio,
                   {"rope_type": "longrope", "short_factor": data.draw(factor_lists),
                    "long_factor": data.draw(factor_lists)})
    config["original_max_position_embeddings"] = original
    for seq_len in (None, original, original + 1):
        assert_same(ours(config, seq_len), hf_rope(config, seq_len),
                    json.dumps(config)[:300])


# -- Hunyuan's NTK alpha: its own rotary module is the reference ---------------------

def hunyuan_module(config: dict):
    from transformers.models.hunyuan_v1_dense import modeling_hunyuan_v1_dense as m

    return m.HunYuanDenseV1RotaryEmbedding(hf_config(config))


@SWEEP
@given(head_dim=st.sampled_from([4, 64, 128]), base=bases,
       alpha=st.one_of(st.sampled_from([1.0, 1000.0]), st.floats(1.0, 1e4)),
       max_len=st.integers(16, 2 ** 16))
def test_hunyuan_alpha(head_dim, base, alpha, max_len):
    config = {"model_type": "hunyuan_v1_dense", "hidden_size": 2 * head_dim,
              "num_attention_heads": 2, "head_dim": head_dim, "rope_theta": base,
              "max_position_embeddings": max_len,
              "rope_scaling": {"type": "dynamic", "alpha": alpha, "factor": 1.0}}
    module = hunyuan_module(config)
    assert_same(ours(config), (module.inv_freq, float(module.attention_scaling)))
    # The slowest pair turns alpha times slower than plain RoPE's (closed form).
    plain, _ = ours({**config, "rope_scaling": None})
    assert math.isclose(plain[-1] / ours(config)[0][-1], alpha, rel_tol=1e-12)
    # Beyond max_position_embeddings the module recomputes plain dynamic NTK.
    module(torch.zeros(1), torch.arange(max_len + 7)[None])
    assert_same(ours(config, max_len + 7), (module.inv_freq, 1.0))


def test_hunyuan_alpha_is_the_models_rule():
    """ROPE_INIT_FUNCTIONS alone would give dynamic NTK at factor 1 (plain
    RoPE): the model's own module differs by alpha on the slowest pair."""
    config = {"model_type": "hunyuan_v1_dense", "hidden_size": 4096,
              "num_attention_heads": 32, "head_dim": 128, "rope_theta": 10000.0,
              "max_position_embeddings": 32768,
              "rope_scaling": {"alpha": 1000.0, "beta_fast": 32, "beta_slow": 1,
                               "factor": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                               "type": "dynamic"}}
    generic, _ = ROPE_INIT_FUNCTIONS["dynamic"](hf_config(config), "cpu")
    got, _ = ours(config)
    assert math.isclose(generic[-1] / got[-1], 1000.0, rel_tol=1e-5)
    assert config_reader.parse_rope_config(config).ntk_alpha == 1000.0
    with pytest.raises(ValueError, match="head_dim"):
        ours({k: v for k, v in config.items() if k != "head_dim"})
    with pytest.raises(ValueError, match="alpha"):
        ours({**config, "rope_scaling": {"type": "dynamic", "factor": 2.0}})


# -- values transformers computes after a warning ------------------------------------

@pytest.mark.parametrize("block, seq_len", [
    ({"rope_type": "linear", "factor": 0.5}, None),
    ({"type": "dynamic", "factor": 0.25}, 20000),
    ({"rope_type": "yarn", "factor": 0.5, "original_max_position_embeddings": 1024},
     None),
    ({"rope_type": "yarn", "factor": 4.0, "attention_factor": 0.0,
      "original_max_position_embeddings": 1024}, None),
])
def test_values_transformers_warns_about_are_computed(block, seq_len):
    config = llama(64, 10000.0, 4096, block)
    with pytest.warns(scaling.RopeConfigWarning):
        got = scaling.rope_from_config(config, seq_len=seq_len, dtype=torch.float64)
    assert_same(got, hf_rope(config, seq_len), json.dumps(config))
    if "attention_factor" in block:
        assert got[1] == 0.0


# -- one error for every problem ------------------------------------------------------

def test_one_error_lists_every_problem():
    config = llama(64, 10000.0, 4096, {"rope_type": "llama3", "factor": -2.0,
                                       "low_freq_factor": 1.0,
                                       "original_max_position_embeddings": 1024})
    with pytest.raises(ValueError) as info:
        scaling.rope_from_config(config)
    message = str(info.value)
    assert "2 problems" in message
    assert "high_freq_factor" in message and "factor must be > 0" in message
    # the same for a direct call: the missing length and the NaN factor
    with pytest.raises(ValueError) as info:
        scaling.rope_parameters("dynamic", 64, factor=float("nan"),
                                original_max_position_embeddings=2048)
    message = str(info.value)
    assert "2 problems" in message, message
    assert "max_position_embeddings" in message and "factor must be finite" in message
    bad = {**config, "rope_theta": 0.5, "head_dim": 6, "partial_rotary_factor": 0.5,
           "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "beta_fast": -1.0,
                            "truncate": "yes"}}
    message = str(pytest.raises(ValueError, scaling.rope_from_config, bad).value)
    for words in ("rope_theta", "beta_fast", "truncate", "even"):
        assert words in message, message


def test_silent_defaults_are_reported():
    config = {"model_type": "gemma3_text", "hidden_size": 512,
              "num_attention_heads": 4, "max_position_embeddings": 1024}
    with pytest.warns(config_reader.DefaultValueWarning, match="rope_theta.*head_dim"):
        rope = config_reader.parse_rope_config(config)
    assert rope.defaults_used == ("rope_theta", "head_dim")
    from posenc_lib.tools import inspector as model_inspect

    report = model_inspect.inspect_config(config)
    assert any("leaves out" in w for w in report["warnings"])


def test_hunyuan_moe_reads_alpha_too():
    from transformers.models.hunyuan_v1_moe import modeling_hunyuan_v1_moe as m

    config = {"model_type": "hunyuan_v1_moe", "hidden_size": 256,
              "num_attention_heads": 2, "head_dim": 128, "rope_theta": 10000.0,
              "max_position_embeddings": 32768,
              "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}}
    module = m.HunYuanMoEV1RotaryEmbedding(hf_config(config))
    assert_same(ours(config), (module.inv_freq, float(module.attention_scaling)))
