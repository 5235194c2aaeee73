"""posenc_lib.attention against torch's own implementations, plus its hooks."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from posenc_lib import attention


def _qkv(generator, n_q=5, n_k=7, d=8, batch=(2, 3), dtype=torch.float64):
    q = torch.randn(*batch, n_q, d, generator=generator, dtype=dtype)
    k = torch.randn(*batch, n_k, d, generator=generator, dtype=dtype)
    v = torch.randn(*batch, n_k, d + 2, generator=generator, dtype=dtype)
    return q, k, v


def test_matches_torch_sdpa(generator):
    q, k, v = _qkv(generator)
    ours = attention.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(ours, F.scaled_dot_product_attention(q, k, v))


def test_bias_matches_torch_sdpa_float_mask(generator):
    q, k, v = _qkv(generator)
    bias = torch.randn(3, 5, 7, generator=generator, dtype=torch.float64)
    ours = attention.scaled_dot_product_attention(q, k, v, score_bias=bias)
    assert torch.allclose(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    from_callable = attention.scaled_dot_product_attention(q, k, v,
                                                           score_bias=lambda q, k: bias)
    assert torch.equal(ours, from_callable)


def test_causal_square_matches_torch(generator):
    q, k, v = _qkv(generator, n_q=6, n_k=6)
    ours = attention.scaled_dot_product_attention(q, k, v, causal=True)
    assert torch.allclose(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_causal_with_more_keys_puts_queries_last(generator):
    q, k, v = _qkv(generator, n_q=3, n_k=7)
    _, weights = attention.scaled_dot_product_attention(q, k, v, causal=True,
                                                        return_weights=True)
    for i in range(3):  # query i sits at absolute position 4 + i
        assert torch.all(weights[..., i, 5 + i:] == 0)
        assert torch.all(weights[..., i, : 5 + i] > 0)
    # Equals full causal attention over all 7 positions, restricted to the last 3 rows.
    q_full = torch.cat([torch.zeros_like(k[..., :4, :]), q], dim=-2)
    full = attention.scaled_dot_product_attention(q_full, k, v, causal=True)
    ours = attention.scaled_dot_product_attention(q, k, v, causal=True)
    assert torch.allclose(ours, full[..., 4:, :])


def test_weights_are_a_softmax(generator):
    q, k, v = _qkv(generator)
    out, w = attention.scaled_dot_product_attention(q, k, v, return_weights=True)
    manual = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
    assert torch.allclose(w, manual)
    assert torch.allclose(out, manual @ v)


def test_value_term_is_added(generator):
    q, k, v = _qkv(generator)
    extra = torch.randn(2, 3, 5, 10, generator=generator, dtype=torch.float64)
    base = attention.scaled_dot_product_attention(q, k, v)
    out = attention.scaled_dot_product_attention(q, k, v, value_term=lambda w: extra)
    assert torch.allclose(out, base + extra)


def test_mha_matches_torch_multihead_attention(generator):
    torch.manual_seed(0)
    d_model, n_heads, n = 12, 3, 6
    ours = attention.MultiHeadAttention(d_model, n_heads, bias=True).double()
    ref = torch.nn.MultiheadAttention(d_model, n_heads, bias=True, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        ref.out_proj.weight.copy_(ours.w_o.weight)
        ref.out_proj.bias.copy_(ours.w_o.bias)
    x = torch.randn(2, n, d_model, generator=generator, dtype=torch.float64)
    mask = ~attention.causal_mask(n)  # torch: True means "masked out"
    for causal, ref_mask in ((False, None), (True, mask)):
        out, w = ours(x, causal=causal, return_weights=True)
        ref_out, ref_w = ref(x, x, x, attn_mask=ref_mask, average_attn_weights=False)
        assert torch.allclose(out, ref_out)
        assert torch.allclose(w, ref_w)


def test_mha_hooks(generator):
    torch.manual_seed(0)
    mha = attention.MultiHeadAttention(8, 2).double()
    x = torch.randn(4, 8, generator=generator, dtype=torch.float64)
    pe = torch.randn(4, 8, generator=generator, dtype=torch.float64)
    assert torch.allclose(mha(x, input_encoding=pe), mha(x + pe))

    seen = {}

    def transform(q, k):
        seen["shapes"] = (tuple(q.shape), tuple(k.shape))
        return 2 * q, k

    out = mha(x, qk_transform=transform)
    assert seen["shapes"] == ((1, 2, 4, 4), (1, 2, 4, 4))
    # Doubling q is the same as doubling the scores' scale.
    q = mha._split(mha.w_q(x[None]))
    k = mha._split(mha.w_k(x[None]))
    v = mha._split(mha.w_v(x[None]))
    manual = attention.scaled_dot_product_attention(q, k, v, scale=2 / math.sqrt(4))
    assert torch.allclose(out, mha.w_o(manual.transpose(1, 2).reshape(1, 4, 8))[0])


def test_mha_memory_equals_concatenated_keys(generator):
    torch.manual_seed(0)
    mha = attention.MultiHeadAttention(8, 2).double()
    mem = torch.randn(1, 3, 8, generator=generator, dtype=torch.float64)
    x = torch.randn(1, 4, 8, generator=generator, dtype=torch.float64)
    out, w = mha(x, memory=mem, causal=True, return_weights=True)
    assert w.shape == (1, 2, 4, 7)
    full = mha(torch.cat([mem, x], dim=1), causal=True)
    assert torch.allclose(out, full[:, 3:])


@pytest.mark.parametrize("kwargs, match", [
    (dict(d_model=10, n_heads=3), "divisible"),
    (dict(d_model=0, n_heads=1), "d_model"),
    (dict(d_model=8, n_heads=2.0), "n_heads"),
])
def test_mha_constructor_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        attention.MultiHeadAttention(**kwargs)


def test_mha_input_errors():
    mha = attention.MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match="x must have last dimension 8"):
        mha(torch.randn(3, 5))
    with pytest.raises(ValueError, match="x has dtype"):
        mha(torch.randn(3, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="input_encoding"):
        mha(torch.randn(3, 8), input_encoding=torch.randn(4, 8))
    with pytest.raises(ValueError, match="score_bias"):
        mha(torch.randn(3, 8), score_bias=torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="qk_transform"):
        mha(torch.randn(3, 8), qk_transform=lambda q, k: (q[..., :1], k))
    with pytest.raises(ValueError, match="memory"):
        mha(torch.randn(2, 3, 8), memory=torch.randn(1, 3, 8))


def test_sdpa_shape_errors(generator):
    q, k, v = _qkv(generator)
    with pytest.raises(ValueError, match="k must have last dimension"):
        attention.scaled_dot_product_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="v must have as many rows"):
        attention.scaled_dot_product_attention(q, k, v[..., :2, :])
    with pytest.raises(ValueError, match="n_k must be >= n_q"):
        attention.causal_mask(5, 3)


@pytest.mark.parametrize("bias_kind", [None, "tensor", "callable"])
@pytest.mark.parametrize("n", [1, 7, 33])
def test_fused_path_equals_the_readable_one_to_rounding(bias_kind, n):
    # torch's fused kernel against this module's softmax(q kᵀ s + b) v, causal.
    # Bound: each score carries at most d·u·|q||k|·s of rounding per path,
    # which moves a softmax weight by at most 2·that relatively, plus n·u
    # for the normalising sum; the output then by that times max |v|.
    torch.manual_seed(n)
    layer = attention.MultiHeadAttention(16, 2)
    x = torch.randn(3, n, 16)
    bias = None
    if bias_kind == "tensor":
        bias = torch.randn(2, n, n)
    elif bias_kind == "callable":
        bias = lambda q, k: torch.randn(q.shape[-2], k.shape[-2],  # noqa: E731
                                        generator=torch.Generator().manual_seed(0))
    slow = layer(x, score_bias=bias, causal=True)
    fast = layer(x, score_bias=bias, causal=True, fused=True)
    with torch.no_grad():
        q = layer._split(layer.w_q(x))
        k = layer._split(layer.w_k(x))
        v = layer._split(layer.w_v(x))
        u, d = torch.finfo(torch.float32).eps / 2, layer.head_dim
        score = q.norm(dim=-1).max() * k.norm(dim=-1).max() / d ** 0.5
        rel = 2 * 2 * d * u * score + 2 * n * u
        bound = rel * v.abs().max() * layer.w_o.weight.abs().sum(1).max() * 2
    assert (fast - slow).abs().max() <= bound
    # fused never returns weights: asking for them takes the readable path
    out, weights = layer(x, score_bias=bias, causal=True, fused=True, return_weights=True)
    assert torch.equal(out, slow) and weights.shape == (3, 2, n, n)
