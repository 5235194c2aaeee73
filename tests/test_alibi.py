"""ALiBi slopes and biases against the paper's reference rule and BLOOM."""

from __future__ import annotations

import math

import pytest
import torch

from posenc_lib import alibi, attention


def _reference_slopes(n):
    """The ALiBi repository's get_slopes, as published with the paper."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _reference_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_slopes_match_the_reference_rule(n_heads):
    ours = alibi.alibi_slopes(n_heads, dtype=torch.float64)
    assert torch.allclose(ours, torch.tensor(_reference_slopes(n_heads), dtype=torch.float64),
                          rtol=1e-14, atol=0)


def test_slopes_for_8_12_16_heads_by_hand():
    assert torch.allclose(alibi.alibi_slopes(8, dtype=torch.float64),
                          torch.tensor([2.0 ** -k for k in range(1, 9)], dtype=torch.float64))
    sixteen = torch.tensor([2.0 ** (-k / 2) for k in range(1, 17)], dtype=torch.float64)
    assert torch.allclose(alibi.alibi_slopes(16, dtype=torch.float64), sixteen)
    # 12 heads: the 8 slopes for 8 heads, then slopes 1, 3, 5, 7 of the 16-head set.
    twelve = torch.cat([alibi.alibi_slopes(8, dtype=torch.float64), sixteen[0:8:2]])
    assert torch.allclose(alibi.alibi_slopes(12, dtype=torch.float64), twelve)


@pytest.mark.parametrize("n_heads", [1, 2, 3, 5, 8, 12, 16, 24, 33, 40, 64])
def test_slopes_match_bloom(n_heads):
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    mask = torch.ones(1, 6)
    tensor = bloom.build_alibi_tensor(mask, n_heads, torch.float32).reshape(n_heads, 6)
    # BLOOM adds m_k * j (key position): column 1 holds the slopes.
    assert torch.allclose(tensor[:, 1], alibi.alibi_slopes(n_heads, dtype=torch.float32),
                          rtol=1e-6)
    assert torch.allclose(tensor, tensor[:, 1:2] * torch.arange(6.0), rtol=1e-6)


def test_bias_against_a_loop():
    n_heads, q_len, k_len = 5, 4, 9
    bias = alibi.alibi_bias(n_heads, q_len, k_len, dtype=torch.float64)
    slopes = alibi.alibi_slopes(n_heads, dtype=torch.float64)
    assert bias.shape == (n_heads, q_len, k_len)
    for h in range(n_heads):
        for row in range(q_len):
            i = k_len - q_len + row        # the queries are the last q_len positions
            for j in range(k_len):
                assert bias[h, row, j] == slopes[h] * (j - i)


def test_bias_depends_on_the_offset_only():
    bias = alibi.alibi_bias(8, 32)
    for d in range(-31, 32):
        assert torch.unique(torch.diagonal(bias, offset=d, dim1=-2, dim2=-1)[0]).numel() == 1


def test_key_position_form_gives_the_same_causal_attention(generator):
    # Adding m*j differs from -m*(i - j) by m*i, constant along each row.
    n_heads, n, d = 4, 10, 8
    q = torch.randn(n_heads, n, d, generator=generator, dtype=torch.float64)
    k = torch.randn(n_heads, n, d, generator=generator, dtype=torch.float64)
    v = torch.randn(n_heads, n, d, generator=generator, dtype=torch.float64)
    slopes = alibi.alibi_slopes(n_heads, dtype=torch.float64)
    key_form = slopes[:, None, None] * torch.arange(n, dtype=torch.float64)
    ours = attention.scaled_dot_product_attention(
        q, k, v, score_bias=alibi.alibi_bias(n_heads, n, dtype=torch.float64), causal=True)
    bloom_style = attention.scaled_dot_product_attention(q, k, v, score_bias=key_form,
                                                         causal=True)
    assert torch.allclose(ours, bloom_style, atol=1e-12)
    # A bias that is not a row shift (the wrong slopes 1/2^(8/k)) changes the output.
    wrong = torch.tensor([2.0 ** (-8 / k) for k in range(1, n_heads + 1)],
                         dtype=torch.float64)
    other = attention.scaled_dot_product_attention(
        q, k, v, score_bias=wrong[:, None, None] * torch.arange(n, dtype=torch.float64),
        causal=True)
    assert not torch.allclose(ours, other, atol=1e-3)


@pytest.mark.parametrize("call, match", [
    (lambda: alibi.alibi_slopes(0), "n_heads must be >= 1"),
    (lambda: alibi.alibi_slopes(2.5), "n_heads must be an integer"),
    (lambda: alibi.alibi_bias(4, 8, 4), "k_len must be >= q_len"),
    (lambda: alibi.alibi_bias(4, 0), "q_len must be >= 1"),
    (lambda: alibi.alibi_slopes(4, dtype=torch.int64), "dtype must be a floating-point"),
])
def test_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()
