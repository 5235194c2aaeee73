"""Chapter 6's out-of-range claims over generated settings, not only the book's.

The chapter checks its statements at the settings of its figures; these tests draw
head sizes, bases, factors and lengths with hypothesis and assert the same
statements, which hold for every setting:

* at ``factor · L`` tokens PI, YaRN (``beta_slow = 1``) and Llama 3
  (``low_freq_factor = 1``) leave no pair out of its trained angle range, while
  NTK-aware scaling leaves exactly the unclosed pairs but the slowest;
* dynamic NTK with ``factor = 1`` at any length ``n > L`` is NTK-aware with
  ``s = n / L`` at ``n`` tokens (the same unclosed pairs but the slowest), and with
  ``factor = 4`` no pair of a 128-dimensional head with base 10^4 leaves its range up
  to ``32 L`` (the properties table's row);
* ``mscale`` without ``mscale_all_dim`` is ignored, as by transformers, checked with
  values other than 1 (with 1 the two readings agree).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc_lib import rope, scaling

PROPERTY = settings(max_examples=150, deadline=None, derandomize=True, database=None)

dims = st.integers(4, 256).map(lambda half: 2 * half)
bases = st.floats(100.0, 1e7)
factors = st.floats(1.5, 128.0)  # s >= 1.5: NTK's smallest overshoot s^(2/(d-2)) > 1 + 1e-9
lengths = st.integers(64, 2**20)


@PROPERTY
@given(dim=dims, base=bases, factor=factors, train=lengths)
def test_interpolating_methods_stay_in_range_and_ntk_does_not(dim, base, factor, train):
    methods = scaling.extension_inv_freqs(dim, base, factor, train)
    theta, target = methods["default"], factor * train
    for method in ("linear", "yarn", "llama3"):
        out = scaling.out_of_range_pairs(theta, methods[method], train, target)
        assert not out.any(), (method, out.nonzero().flatten().tolist())
    unclosed = train * theta < 2 * torch.pi
    not_slowest = torch.arange(dim // 2) < dim // 2 - 1
    ntk_out = scaling.out_of_range_pairs(theta, methods["ntk"], train, target)
    assert torch.equal(ntk_out, unclosed & not_slowest), ntk_out.nonzero().flatten()


@PROPERTY
@given(ratio=st.integers(1, 31 * 4096))
def test_dynamic_ntk_at_every_length_up_to_32_l(ratio):
    dim, base, train = 128, 10000.0, 4096
    n = train + ratio  # every length in (L, 32 L]
    theta = rope.inv_freq(dim, base, dtype=torch.float64)

    def dynamic(factor):
        return scaling.rope_parameters("dynamic", dim, base, factor=factor,
                                       max_position_embeddings=train, seq_len=n,
                                       dtype=torch.float64)[0]

    unclosed = train * theta < 2 * torch.pi
    not_slowest = torch.arange(dim // 2) < dim // 2 - 1
    out_1 = scaling.out_of_range_pairs(theta, dynamic(1.0), train, n)
    assert torch.equal(out_1, unclosed & not_slowest), (n, out_1.nonzero().flatten())
    assert int(out_1.sum()) == 17, (n, int(out_1.sum()))
    assert not scaling.out_of_range_pairs(theta, dynamic(4.0), train, n).any(), n


@pytest.mark.parametrize("mscale", [0.707, 2.0])
def test_mscale_alone_is_ignored_as_by_transformers(mscale):
    # mscale = 1 alone gives 0.1 ln s + 1 whether or not it is read: other values tell.
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rope_scaling = {"rope_type": "yarn", "factor": 40.0, "mscale": mscale,
                    "original_max_position_embeddings": 4096}
    config = LlamaConfig(hidden_size=128, num_attention_heads=2, head_dim=64,
                         max_position_embeddings=40 * 4096, rope_scaling=rope_scaling)
    _, theirs = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    _, ours = scaling.rope_parameters(dim=64, base=config.rope_theta, **rope_scaling)
    assert math.isclose(ours, float(theirs), rel_tol=1e-12), (ours, theirs)
    assert math.isclose(ours, 0.1 * math.log(40.0) + 1, rel_tol=1e-12), ours
