"""xPos against rotary-embedding-torch, and its relative-position property."""

from __future__ import annotations

import math

import pytest
import torch

from posenc_lib import attention, rope, xpos


def test_zeta_matches_the_formula():
    zeta = xpos.xpos_zeta(8, 0.4, dtype=torch.float64)
    expected = torch.tensor([(2 * i / 8 + 0.4) / 1.4 for i in range(4)], dtype=torch.float64)
    assert torch.allclose(zeta, expected) and zeta.max() < 1


def test_matches_rotary_embedding_torch(generator):
    ret = pytest.importorskip("rotary_embedding_torch")
    dim, n = 32, 50
    rotary = ret.RotaryEmbedding(dim, use_xpos=True, xpos_scale_base=512)
    q = torch.randn(2, 3, n, dim, generator=generator)
    k = torch.randn(2, 3, n, dim, generator=generator)
    q_ref, k_ref = rotary.rotate_queries_and_keys(q, k)
    f = rope.inv_freq(dim, dtype=torch.float32)
    positions = torch.arange(n)
    # rotary-embedding-torch pairs features (2i, 2i+1) and centres the scale at n // 2.
    options = dict(layout="interleaved", center=n // 2)
    q_ours = xpos.apply_xpos(q, positions, f, kind="query", **options)
    k_ours = xpos.apply_xpos(k, positions, f, kind="key", **options)
    assert torch.allclose(q_ours, q_ref, atol=1e-5) and torch.allclose(k_ours, k_ref, atol=1e-5)
    # Without the centre each vector differs, the logits do not.
    q_0 = xpos.apply_xpos(q, positions, f, kind="query", layout="interleaved")
    k_0 = xpos.apply_xpos(k, positions, f, kind="key", layout="interleaved")
    assert not torch.allclose(q_0, q_ref, atol=1e-3)
    assert torch.allclose(q_0 @ k_0.transpose(-1, -2), q_ref @ k_ref.transpose(-1, -2),
                          atol=1e-4)
    # The qk_transform hook reproduces it too.
    q_hook, k_hook = xpos.xpos_qk_transform(f, layout="interleaved")(q, k)
    assert torch.allclose(q_hook, q_ref, atol=1e-5) and torch.allclose(k_hook, k_ref, atol=1e-5)


@pytest.mark.parametrize("layout", rope.LAYOUTS)
def test_logit_depends_on_the_offset_only(generator, layout):
    dim = 16
    f = rope.inv_freq(dim, dtype=torch.float64)
    q = torch.randn(dim, generator=generator, dtype=torch.float64)
    k = torch.randn(dim, generator=generator, dtype=torch.float64)

    def logit(m, n):
        qm = xpos.apply_xpos(q[None], [m], f, kind="query", layout=layout)[0]
        kn = xpos.apply_xpos(k[None], [n], f, kind="key", layout=layout)[0]
        return qm @ kn

    for m, n in [(5, 2), (100, 40), (700, 10), (3, 3)]:
        for shift in (1, 37, 1000):
            assert torch.isclose(logit(m, n), logit(m + shift, n + shift), rtol=1e-10)
    # Closed form per pair: zeta^((m-n)/512) times the RoPE logit of the pair.
    zeta = xpos.xpos_zeta(dim, dtype=torch.float64)
    m, n = 300, 20
    qr = rope.apply_rope(q[None], [m], f, layout=layout)[0]
    kr = rope.apply_rope(k[None], [n], f, layout=layout)[0]
    per_feature = qr * kr
    if layout == "half":
        per_pair = per_feature[: dim // 2] + per_feature[dim // 2:]
    else:
        per_pair = per_feature[0::2] + per_feature[1::2]
    assert torch.isclose(logit(m, n), (zeta ** ((m - n) / 512) * per_pair).sum(), rtol=1e-12)


def test_uncentred_key_scale_overflows_float32_just_past_the_predicted_position():
    # zeta_0^(-n/512) reaches float32's maximum at n* = 512 ln(max) / ln(1/zeta_0),
    # about 36 260.7 for gamma = 0.4; one position either side of n* decides.
    zeta_0 = xpos.xpos_zeta(128, dtype=torch.float64)[0].item()
    n_star = 512 * math.log(torch.finfo(torch.float32).max) / math.log(1 / zeta_0)
    positions = [math.floor(n_star), math.ceil(n_star)]
    key = xpos.xpos_scale(positions, 128, kind="key", dtype=torch.float32)[:, 0]
    assert torch.isfinite(key[0]) and torch.isinf(key[1])
    query = xpos.xpos_scale(positions, 128, kind="query", dtype=torch.float32)[:, 0]
    assert torch.all((query > 0) & (query < 1))      # queries shrink instead
    # A centre near the positions keeps both finite.
    centred = xpos.xpos_scale(positions, 128, kind="key", center=36000.0,
                              dtype=torch.float32)
    assert torch.isfinite(centred).all()


def test_qk_transform_with_cached_keys_matches_the_full_sequence(generator):
    dim, n, n_q = 16, 12, 3
    f = rope.inv_freq(dim, dtype=torch.float64)
    q = torch.randn(1, 2, n, dim, generator=generator, dtype=torch.float64)
    k = torch.randn(1, 2, n, dim, generator=generator, dtype=torch.float64)
    hook = xpos.xpos_qk_transform(f)
    q_full, k_full = hook(q, k)
    q_last, k_cached = hook(q[..., -n_q:, :], k)
    assert torch.allclose(q_last @ k_cached.transpose(-1, -2),
                          (q_full @ k_full.transpose(-1, -2))[..., -n_q:, :], atol=1e-12)
    torch.manual_seed(0)
    layer = attention.MultiHeadAttention(32, 2).double()
    x = torch.randn(n, 32, generator=generator, dtype=torch.float64)
    out = layer(x, qk_transform=hook, causal=True)
    assert out.shape == (n, 32)


@pytest.mark.parametrize("call, match", [
    (lambda: xpos.xpos_zeta(7), "dim must be even"),
    (lambda: xpos.xpos_zeta(8, gamma=0.0), "gamma must be > 0"),
    (lambda: xpos.apply_xpos(torch.randn(3, 8), torch.arange(3), rope.inv_freq(8), kind="value"),
     "kind must be one of"),
    (lambda: xpos.apply_xpos(torch.randn(3, 8), torch.arange(3), rope.inv_freq(8), kind="key",
                             scale_base=0), "scale_base must be > 0"),
    (lambda: xpos.xpos_qk_transform(rope.inv_freq(8), layout="gptj"), "layout must be one of"),
    (lambda: xpos.xpos_qk_transform(rope.inv_freq(8))(torch.randn(5, 8), torch.randn(3, 8)),
     "at least as many keys as queries"),
])
def test_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()
