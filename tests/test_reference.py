"""``reference="transformers"``: transformers 4.57.6's float32 ``inv_freq``, bit for bit.

Each draw builds a config in transformers' 4.x layout, computes the frequencies
with ``ROPE_INIT_FUNCTIONS`` (from a ``LlamaConfig`` built from the same dict)
and with :func:`posenc_lib.scaling.rope_from_config`, and compares the bits.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc_lib import scaling

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

transformers.logging.set_verbosity_error()  # its validators warn on odd draws

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
bases = st.one_of(st.sampled_from([10000.0, 500000.0, 1e6, 1e4 / 3]),
                  st.floats(2.0, 1e7, allow_nan=False))
head_dims = st.sampled_from([(64, 1.0), (128, 1.0), (80, 0.5), (96, 0.25), (256, 1.0)])
lengths = st.sampled_from([2048, 4096, 8192, 32768, 131072])
factors = st.one_of(st.sampled_from([1.0, 2.0, 4.0, 8.0, 32.0]),
                    st.floats(1.0, 64.0, allow_nan=False))
seq_lens = st.one_of(st.none(), st.integers(1, 300000))


def _blocks(rope_type):
    if rope_type == "default":
        return st.none()
    if rope_type in ("linear", "dynamic"):
        return st.builds(lambda f: {"rope_type": rope_type, "factor": f}, factors)
    if rope_type == "yarn":
        return st.builds(
            lambda f, original, fast, slow, truncate, mscale: {
                "rope_type": "yarn", "factor": f,
                "original_max_position_embeddings": original,
                "beta_fast": fast, "beta_slow": slow, "truncate": truncate,
                **({"mscale": mscale, "mscale_all_dim": mscale} if mscale else {})},
            factors, lengths, st.sampled_from([32.0, 16.0, 8.0]),
            st.sampled_from([1.0, 2.0]), st.booleans(), st.sampled_from([None, 1.0]))
    if rope_type == "llama3":
        return st.builds(
            lambda f, original, low, high: {
                "rope_type": "llama3", "factor": f, "low_freq_factor": low,
                "high_freq_factor": high, "original_max_position_embeddings": original},
            factors, lengths, st.sampled_from([1.0, 0.5]), st.sampled_from([4.0, 8.0]))
    raise AssertionError(rope_type)


def _bits_equal(ours, theirs):
    assert ours.dtype == theirs.dtype == torch.float32
    assert ours.shape == theirs.shape
    assert torch.equal(ours.view(torch.int32), theirs.view(torch.int32)), (
        int((ours != theirs).sum()), ours.shape)


def _check(config_dict, seq_len, rope_type):
    ours, factor = scaling.rope_from_config(config_dict, seq_len=seq_len,
                                            dtype=torch.float32,
                                            reference="transformers")
    if rope_type == "dynamic" and seq_len is not None and \
            seq_len > config_dict["max_position_embeddings"]:
        # what dynamic_rope_update passes: max(position_ids) + 1, a tensor (the
        # running module is checked directly below)
        seq_len = torch.tensor(seq_len)
    theirs, their_factor = ROPE_INIT_FUNCTIONS[rope_type](
        LlamaConfig(**config_dict), "cpu", seq_len=seq_len)
    _bits_equal(ours, theirs)
    assert factor == float(their_factor)


@pytest.mark.parametrize("rope_type", ["default", "linear", "dynamic", "yarn", "llama3"])
@SETTINGS
@given(data=st.data())
def test_bit_exact_against_rope_init_functions(rope_type, data):
    (head_dim, partial) = data.draw(head_dims)
    config = {"hidden_size": head_dim * 4, "num_attention_heads": 4,
              "head_dim": head_dim, "partial_rotary_factor": partial,
              "rope_theta": data.draw(bases),
              "max_position_embeddings": data.draw(lengths),
              "rope_scaling": data.draw(_blocks(rope_type))}
    _check(config, data.draw(seq_lens), rope_type)


@SETTINGS
@given(data=st.data())
def test_longrope_bit_exact_on_both_sides_of_the_switch(data):
    (head_dim, partial) = data.draw(head_dims)
    pairs = int(head_dim * partial) // 2
    factor_lists = st.lists(st.floats(1.0, 80.0, allow_nan=False), min_size=pairs,
                            max_size=pairs)
    original = data.draw(lengths)
    config = {"hidden_size": head_dim * 4, "num_attention_heads": 4,
              "head_dim": head_dim, "partial_rotary_factor": partial,
              "rope_theta": data.draw(bases),
              "max_position_embeddings": original * 32,
              "original_max_position_embeddings": original,
              "rope_scaling": {"rope_type": "longrope",
                               "short_factor": data.draw(factor_lists),
                               "long_factor": data.draw(factor_lists)}}
    for seq_len in (None, original, original + 1):
        _check(config, seq_len, "longrope")


#: 36 lengths from just past L = 4,096 to 39,000 (the module recomputes its
#: frequencies at each length beyond L).
DYNAMIC_LENGTHS = [4097 + round(i * (39000 - 4097) / 35) for i in range(36)]


@pytest.mark.parametrize("base, factor, head_dim", [
    (10000.0, 2.0, 64), (500000.0, 8.0, 128), (1e6, 4, 128), (10000.0, 0.5, 80)])
def test_dynamic_reference_is_what_a_running_module_holds(base, factor, head_dim):
    # LlamaRotaryEmbedding.forward runs dynamic_rope_update: beyond
    # max_position_embeddings it recomputes inv_freq with seq_len =
    # max(position_ids) + 1, a tensor, so the base is rescaled in float32.
    config = {"hidden_size": head_dim * 4, "num_attention_heads": 4,
              "head_dim": head_dim, "rope_theta": base,
              "max_position_embeddings": 4096,
              "rope_scaling": {"rope_type": "dynamic", "factor": factor}}
    x = torch.zeros(1, 1, head_dim)
    differs = 0
    for length in [1, 4096] + DYNAMIC_LENGTHS:
        module = LlamaRotaryEmbedding(LlamaConfig(**config))
        module(x, torch.arange(length)[None])
        with pytest.warns() if factor < 1 else warnings.catch_warnings():
            ours, _ = scaling.rope_from_config(config, seq_len=length,
                                               dtype=torch.float32,
                                               reference="transformers")
        _bits_equal(ours, module.inv_freq)
        ints, _ = ROPE_INIT_FUNCTIONS["dynamic"](LlamaConfig(**config), "cpu",
                                                 seq_len=length)
        differs += not torch.equal(ints, module.inv_freq)
    # an int seq_len (Python arithmetic) is not what the module runs
    assert differs > 0


def test_qwen25_frequencies_differ_from_the_float64_reference_by_an_ulp():
    # The example: the default reference rounds exact frequencies
    # once; transformers' float32 arithmetic is off by an ulp on some pairs.
    config = {"hidden_size": 3584, "num_attention_heads": 28,
              "rope_theta": 1000000.0, "max_position_embeddings": 32768}
    exact, _ = scaling.rope_from_config(config, dtype=torch.float32)
    ours, _ = scaling.rope_from_config(config, dtype=torch.float32,
                                       reference="transformers")
    theirs, _ = ROPE_INIT_FUNCTIONS["default"](LlamaConfig(**config), "cpu")
    _bits_equal(ours, theirs)
    ulps = (exact.view(torch.int32) - ours.view(torch.int32)).abs()
    assert int((ulps > 0).sum()) > 0 and int(ulps.max()) <= 2


def test_reference_is_validated():
    with pytest.raises(ValueError, match="reference"):
        scaling.rope_parameters("default", 64, reference="float32")
    with pytest.raises(ValueError, match="reference 'transformers' has no rope_type"):
        scaling.rope_parameters("ntk", 64, factor=2.0, reference="transformers")
