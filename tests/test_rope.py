"""RoPE against independent implementations: complex numbers and transformers."""

from __future__ import annotations

import pytest
import torch

from posenc_lib import rope


def _complex_rope(x, positions, base=10000.0):
    """Interleaved RoPE as Meta's Llama code writes it: pairs as complex numbers."""
    dim = x.shape[-1]
    theta = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.as_tensor(positions, dtype=torch.float64)[:, None] * theta
    z = torch.view_as_complex(x.to(torch.float64).unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def test_inv_freq_formula():
    f = rope.inv_freq(8, 100.0, dtype=torch.float64)
    assert torch.allclose(f, torch.tensor([1.0, 100 ** -0.25, 100 ** -0.5, 100 ** -0.75],
                                          dtype=torch.float64))


def test_interleaved_equals_complex_multiplication(generator):
    x = torch.randn(2, 3, 11, 16, generator=generator, dtype=torch.float64)
    positions = torch.arange(11) * 37
    ours = rope.apply_rope(x, positions, rope.inv_freq(16, dtype=torch.float64),
                           layout="interleaved")
    assert torch.allclose(ours, _complex_rope(x, positions), atol=1e-12)


def test_half_matches_transformers_llama(generator):
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=64, num_attention_heads=2, rope_theta=500000.0,
                         max_position_embeddings=4096)
    rotary = llama.LlamaRotaryEmbedding(config=config)
    q = torch.randn(1, 2, 9, 32, generator=generator)
    k = torch.randn(1, 2, 9, 32, generator=generator)
    position_ids = torch.tensor([[0, 1, 2, 5, 8, 13, 100, 1000, 4000]])
    cos, sin = rotary(q, position_ids)
    q_ref, k_ref = llama.apply_rotary_pos_emb(q, k, cos, sin)
    # Same frequencies up to float32 rounding (transformers computes them in float32).
    f = rope.inv_freq(32, 500000.0, dtype=torch.float32)
    assert torch.allclose(f, rotary.inv_freq, rtol=1e-6, atol=0)
    # Given the very same frequencies, the rotations agree to float32 precision.
    assert torch.allclose(rope.apply_rope(q, position_ids, rotary.inv_freq), q_ref, atol=1e-5)
    assert torch.allclose(rope.apply_rope(k, position_ids, rotary.inv_freq), k_ref, atol=1e-5)


def test_attention_factor_scales_the_output(generator):
    x = torch.randn(5, 8, generator=generator, dtype=torch.float64)
    f = rope.inv_freq(8, dtype=torch.float64)
    assert torch.allclose(rope.apply_rope(x, torch.arange(5), f, attention_factor=1.5),
                          1.5 * rope.apply_rope(x, torch.arange(5), f))


@pytest.mark.parametrize("call, match", [
    (lambda: rope.inv_freq(7), "dim must be even"),
    (lambda: rope.inv_freq(8, base=0.5), "base must be > 1"),
    (lambda: rope.apply_rope(torch.randn(4, 8), torch.arange(4), rope.inv_freq(6)),
     "inv_freq has 3 frequencies"),
    (lambda: rope.apply_rope(torch.randn(4, 7), torch.arange(4), rope.inv_freq(6)),
     "must be even"),
    (lambda: rope.apply_rope(torch.randn(4, 8), torch.tensor([0.0, 1, float("nan"), 3]),
                             rope.inv_freq(8)), "positions must be finite"),
    (lambda: rope.apply_rope(torch.randn(4, 8), torch.arange(5), rope.inv_freq(8)),
     "do not broadcast"),
    (lambda: rope.apply_rope(torch.randn(4, 8), torch.arange(4), rope.inv_freq(8),
                             layout="neox"), "layout must be one of"),
])
def test_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()
