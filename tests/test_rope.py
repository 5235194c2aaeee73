"""RoPE against independent implementations: complex numbers and transformers."""

from __future__ import annotations

import cmath
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

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


# -- the fast path against the plain formula and against other libraries ------------------

def _plain_rope(x, positions, inv_freq, layout):
    """``x ⊙ cos + rotate(x) ⊙ sin`` spelled out with torch.cat, in float64."""
    positions = torch.as_tensor(positions, dtype=torch.float64)
    angles = positions[..., None] * inv_freq.double()
    half = x.shape[-1] // 2
    if layout == "half":
        cos = torch.cat([angles.cos()] * 2, -1)
        sin = torch.cat([angles.sin()] * 2, -1)
        turned = torch.cat([-x[..., half:], x[..., :half]], -1)
    else:
        cos = angles.cos().repeat_interleave(2, -1)
        sin = angles.sin().repeat_interleave(2, -1)
        turned = torch.stack([-x[..., 1::2], x[..., 0::2]], -1).flatten(-2)
    return x.double() * cos + turned.double() * sin


@pytest.mark.parametrize("layout", rope.LAYOUTS)
@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-5),
                                         (torch.bfloat16, 5e-2), (torch.float16, 5e-3)])
def test_apply_rope_matches_the_plain_formula(layout, dtype, atol, generator):
    x = torch.randn(2, 3, 17, 32, generator=generator).to(dtype)
    positions = torch.arange(17) * 13
    f = rope.inv_freq(32, dtype=torch.float64)
    out = rope.apply_rope(x, positions, f, layout=layout)
    assert out.dtype == dtype and out.shape == x.shape
    assert torch.allclose(out.double(), _plain_rope(x, positions, f, layout), atol=atol)


@pytest.mark.parametrize("layout", rope.LAYOUTS)
def test_non_contiguous_and_broadcast_inputs(layout, generator):
    f = rope.inv_freq(16, dtype=torch.float64)
    base = torch.randn(2, 11, 3, 16, generator=generator, dtype=torch.float64)
    x = base.transpose(1, 2)                                 # (2, 3, 11, 16), not contiguous
    positions = torch.randint(0, 1000, (2, 1, 11), generator=generator)  # per batch row
    out = rope.apply_rope(x, positions, f, layout=layout)
    for b in range(2):
        expected = _plain_rope(x[b].contiguous(), positions[b, 0], f, layout)
        assert torch.allclose(out[b], expected, atol=1e-12)
    # A slice with an odd storage offset cannot be viewed as complex numbers.
    wide = torch.randn(5, 17, generator=generator, dtype=torch.float64)
    odd = wide[:, 1:]
    assert torch.allclose(rope.apply_rope(odd, torch.arange(5), f, layout=layout),
                          _plain_rope(odd, torch.arange(5), f, layout), atol=1e-12)
    # An expanded (stride-0) input.
    row = torch.randn(1, 16, generator=generator, dtype=torch.float64).expand(6, 16)
    assert torch.allclose(rope.apply_rope(row, torch.arange(6), f, layout=layout),
                          _plain_rope(row.contiguous(), torch.arange(6), f, layout), atol=1e-12)


@pytest.mark.parametrize("layout", rope.LAYOUTS)
def test_autograd_path_is_differentiable_and_agrees(layout, generator):
    f = rope.inv_freq(8, dtype=torch.float64)
    x = torch.randn(3, 5, 8, generator=generator, dtype=torch.float64, requires_grad=True)
    positions = torch.arange(5) * 3
    with torch.no_grad():
        fast = rope.apply_rope(x, positions, f, layout=layout)
    slow = rope.apply_rope(x, positions, f, layout=layout)
    assert slow.requires_grad and torch.allclose(fast, slow, atol=1e-14)
    assert torch.autograd.gradcheck(lambda t: rope.apply_rope(t, positions, f, layout=layout),
                                    (x,))
    partial = rope.inv_freq(4, dtype=torch.float64)
    assert torch.autograd.gradcheck(
        lambda t: rope.apply_rope(t, positions, partial, layout=layout, rotary_dim=4), (x,))
    # Gradients also flow into learned frequencies.
    learned = f.clone().requires_grad_()
    rope.apply_rope(x.detach(), positions, learned, layout=layout).sum().backward()
    assert learned.grad is not None and learned.grad.abs().sum() > 0


def test_interleaved_matches_rotary_embedding_torch(generator):
    ret = pytest.importorskip("rotary_embedding_torch")
    lucid = ret.RotaryEmbedding(dim=32, theta=10000)
    q = torch.randn(2, 4, 50, 32, generator=generator)
    ours = rope.apply_rope(q, torch.arange(50), rope.inv_freq(32, dtype=torch.float32),
                           layout="interleaved")
    assert torch.allclose(ours, lucid.rotate_queries_or_keys(q), atol=1e-4)


def test_partial_interleaved_matches_rotary_embedding_torch(generator):
    ret = pytest.importorskip("rotary_embedding_torch")
    lucid = ret.RotaryEmbedding(dim=16, theta=10000)          # rotates the first 16 of 40
    q = torch.randn(1, 2, 30, 40, generator=generator)
    ours = rope.apply_rope(q, torch.arange(30), rope.inv_freq(16, dtype=torch.float32),
                           layout="interleaved", rotary_dim=16)
    assert torch.allclose(ours, lucid.rotate_queries_or_keys(q), atol=1e-5)


def test_partial_half_matches_transformers_gpt_neox(generator):
    neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")
    from transformers import GPTNeoXConfig

    config = GPTNeoXConfig(hidden_size=256, num_attention_heads=4, rotary_pct=0.25,
                           rotary_emb_base=10000, max_position_embeddings=2048)
    rotary = neox.GPTNeoXRotaryEmbedding(config=config)
    head_dim, rotary_dim = 64, 16
    q = torch.randn(1, 4, 12, head_dim, generator=generator)
    k = torch.randn(1, 4, 12, head_dim, generator=generator)
    position_ids = torch.tensor([[0, 1, 2, 3, 10, 20, 50, 100, 500, 1000, 1500, 2000]])
    cos, sin = rotary(q, position_ids)
    assert cos.shape[-1] == rotary_dim
    q_ref, k_ref = neox.apply_rotary_pos_emb(q, k, cos, sin)
    assert torch.allclose(rotary.inv_freq, rope.inv_freq(rotary_dim, dtype=torch.float32),
                          rtol=1e-6)
    for x, ref in ((q, q_ref), (k, k_ref)):
        ours = rope.apply_rope(x, position_ids, rotary.inv_freq, rotary_dim=rotary_dim)
        assert torch.allclose(ours, ref, atol=1e-5)
        assert torch.equal(ours[..., rotary_dim:], x[..., rotary_dim:])


def test_partial_interleaved_matches_transformers_gptj(generator):
    gptj = pytest.importorskip("transformers.models.gptj.modeling_gptj")
    rotary_dim, n = 16, 40
    table = gptj.create_sinusoidal_positions(n, rotary_dim)      # (n, rotary_dim): sin, cos
    sin, cos = table[None].split(rotary_dim // 2, dim=-1)
    x = torch.randn(2, n, 3, 48, generator=generator)           # GPT-J: (b, seq, heads, dim)
    expected = torch.cat([gptj.apply_rotary_pos_emb(x[..., :rotary_dim], sin, cos),
                          x[..., rotary_dim:]], -1)
    ours = rope.apply_rope(x, torch.arange(n)[:, None], rope.inv_freq(rotary_dim),
                           layout="interleaved", rotary_dim=rotary_dim)
    assert torch.allclose(ours, expected, atol=1e-5)


def test_apply_cos_sin_matches_apply_rope_and_transformers(generator):
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=128, num_attention_heads=4, max_position_embeddings=512)
    rotary = llama.LlamaRotaryEmbedding(config=config)
    q = torch.randn(2, 4, 20, 32, generator=generator)
    k = torch.randn(2, 4, 20, 32, generator=generator)
    position_ids = torch.arange(20)[None].expand(2, -1) * 7
    cos, sin = rotary(q, position_ids)                           # (2, 20, 32), half layout
    q_ref, k_ref = llama.apply_rotary_pos_emb(q, k, cos, sin)
    assert torch.allclose(rope.apply_cos_sin(q, cos[:, None], sin[:, None]), q_ref, atol=1e-6)
    assert torch.allclose(rope.apply_cos_sin(k, cos[:, None], sin[:, None]), k_ref, atol=1e-6)
    f = rope.inv_freq(32, dtype=torch.float64)
    for layout in rope.LAYOUTS:
        for rotary_dim in (None, 16):
            ff = f if rotary_dim is None else rope.inv_freq(16, dtype=torch.float64)
            c, s = rope.cos_sin(torch.arange(20), ff, layout=layout, attention_factor=1.2)
            assert torch.allclose(
                rope.apply_cos_sin(q, c, s, layout=layout, rotary_dim=rotary_dim),
                rope.apply_rope(q, torch.arange(20), ff, layout=layout, attention_factor=1.2,
                                rotary_dim=rotary_dim), atol=1e-6)


def test_rotate_is_a_quarter_turn(generator):
    x = torch.randn(4, 10, generator=generator)
    half = rope.rotate(x, layout="half")
    assert torch.equal(half, torch.cat([-x[:, 5:], x[:, :5]], -1))
    inter = rope.rotate(x, layout="interleaved")
    assert torch.equal(inter[:, 0::2], -x[:, 1::2]) and torch.equal(inter[:, 1::2], x[:, 0::2])
    for layout in rope.LAYOUTS:          # rotating twice is a half turn
        assert torch.equal(rope.rotate(rope.rotate(x, layout=layout), layout=layout), -x)
    y = x.clone().requires_grad_()
    rope.rotate(y).sum().backward()
    assert y.grad is not None


# -- dense and complex forms, layouts and conversion ---------------------------------------

def _loop_rotation_matrix(m, dim, base, layout):
    """The rotation matrix entry by entry, from the definition, in Python floats."""
    matrix = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        angle = m * base ** (-2 * i / dim)
        a, b = (i, i + dim // 2) if layout == "half" else (2 * i, 2 * i + 1)
        matrix[a, a], matrix[a, b] = math.cos(angle), -math.sin(angle)
        matrix[b, a], matrix[b, b] = math.sin(angle), math.cos(angle)
    return matrix


@pytest.mark.parametrize("layout", rope.LAYOUTS)
def test_rotation_matrix_is_the_definition_and_matches_apply_rope(layout, generator):
    f = rope.inv_freq(12, 500.0, dtype=torch.float64)
    for m in (0, 1, 7, 1234.5):
        matrix = rope.rotation_matrix(m, f, layout=layout)
        assert torch.allclose(matrix, _loop_rotation_matrix(m, 12, 500.0, layout), atol=1e-12)
        x = torch.randn(3, 12, generator=generator, dtype=torch.float64)
        assert torch.allclose(rope.apply_rope(x, [m] * 3, f, layout=layout), x @ matrix.T,
                              atol=1e-12)
    batched = rope.rotation_matrix(torch.tensor([[1, 2], [3, 4]]), f, layout=layout)
    assert batched.shape == (2, 2, 12, 12)
    assert torch.allclose(batched[1, 0], rope.rotation_matrix(3, f, layout=layout))


def test_rotation_matrices_compose_and_are_orthogonal():
    f = rope.inv_freq(16, dtype=torch.float64)
    for m, n in [(3, 10), (250, 17), (0, 4096)]:
        r_m, r_n = rope.rotation_matrix(m, f), rope.rotation_matrix(n, f)
        assert torch.allclose(r_m.T @ r_n, rope.rotation_matrix(n - m, f), atol=1e-10)
        assert torch.allclose(r_m @ r_n, rope.rotation_matrix(m + n, f), atol=1e-10)
        assert torch.allclose(r_m.T @ r_m, torch.eye(16, dtype=torch.float64), atol=1e-12)


def test_apply_rope_complex_equals_dense(generator):
    f = rope.inv_freq(20, dtype=torch.float64)
    x = torch.randn(6, 20, generator=generator, dtype=torch.float64)
    positions = torch.tensor([0, 3, 99, 1000, 2 ** 20, 7])
    dense = torch.einsum("pij,pj->pi", rope.rotation_matrix(positions, f), x)
    assert torch.allclose(rope.apply_rope_complex(x, positions, f), dense, atol=1e-10)
    assert torch.allclose(rope.apply_rope_complex(x, positions, f, attention_factor=0.5),
                          0.5 * dense, atol=1e-10)


def test_layout_permutation_relates_the_layouts(generator):
    perm = rope.layout_permutation(10)
    assert perm.tolist() == [0, 2, 4, 6, 8, 1, 3, 5, 7, 9]
    f = rope.inv_freq(10, dtype=torch.float64)
    x = torch.randn(2, 7, 10, generator=generator, dtype=torch.float64)
    p = torch.arange(7) * 31
    assert torch.allclose(rope.apply_rope(x[..., perm], p, f, layout="half"),
                          rope.apply_rope(x, p, f, layout="interleaved")[..., perm], atol=1e-12)
    back = torch.argsort(perm)
    assert torch.allclose(rope.apply_rope(x[..., back], p, f, layout="interleaved"),
                          rope.apply_rope(x, p, f, layout="half")[..., back], atol=1e-12)


def _published_permute(w, n_heads, dim1, dim2):
    """Hugging Face's convert_llama_weights_to_hf.py: ``permute`` for sliced rotary."""
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def test_interleaved_to_half_is_the_published_conversion(generator):
    w = torch.randn(48, 20, generator=generator)
    assert torch.equal(rope.interleaved_to_half(w, 3), _published_permute(w, 3, 48, 20))
    bias = torch.randn(48, generator=generator)
    assert torch.equal(rope.interleaved_to_half(bias, 3),
                       _published_permute(bias[:, None], 3, 48, 1)[:, 0])


def test_converted_checkpoint_has_identical_attention(generator):
    from posenc_lib.attention import MultiHeadAttention

    torch.manual_seed(0)
    d_model, n_heads = 48, 3
    meta = MultiHeadAttention(d_model, n_heads, bias=True).double()
    hf = MultiHeadAttention(d_model, n_heads, bias=True).double()
    hf.load_state_dict(meta.state_dict())
    with torch.no_grad():
        for name in ("w_q", "w_k"):
            layer = getattr(hf, name)
            layer.weight.copy_(rope.interleaved_to_half(layer.weight, n_heads))
            layer.bias.copy_(rope.interleaved_to_half(layer.bias, n_heads))
    x = torch.randn(2, 9, d_model, generator=generator, dtype=torch.float64)
    f = rope.inv_freq(d_model // n_heads, dtype=torch.float64)
    p = torch.arange(9) + 100
    out_a, w_a = meta(x, qk_transform=rope.qk_transform(p, f, layout="interleaved"),
                      return_weights=True)
    out_b, w_b = hf(x, qk_transform=rope.qk_transform(p, f, layout="half"), return_weights=True)
    assert torch.allclose(w_a, w_b, atol=1e-12) and torch.allclose(out_a, out_b, atol=1e-12)
    _, w_wrong = meta(x, qk_transform=rope.qk_transform(p, f, layout="half"),
                      return_weights=True)
    assert not torch.allclose(w_a, w_wrong, atol=1e-3)


def test_qk_transform_scores_depend_on_offsets_only(generator):
    from posenc_lib.attention import MultiHeadAttention

    torch.manual_seed(1)
    layer = MultiHeadAttention(32, 2).double()
    x = torch.randn(1, 6, 32, generator=generator, dtype=torch.float64)
    f = rope.inv_freq(16, dtype=torch.float64)
    _, w0 = layer(x, qk_transform=rope.qk_transform(torch.arange(6), f), return_weights=True)
    _, w1 = layer(x, qk_transform=rope.qk_transform(torch.arange(6) + 5000, f),
                  return_weights=True)
    assert torch.allclose(w0, w1, atol=1e-9)
    # Keys may sit at other positions than queries (a cache): queries are the last ones.
    q = torch.randn(1, 1, 2, 16, generator=generator, dtype=torch.float64)
    k = torch.randn(1, 1, 5, 16, generator=generator, dtype=torch.float64)
    rq, rk = rope.qk_transform(torch.arange(3, 5), f, key_positions=torch.arange(5))(q, k)
    assert torch.allclose(rq, rope.apply_rope(q, torch.arange(3, 5), f))
    assert torch.allclose(rk, rope.apply_rope(k, torch.arange(5), f))


def test_relative_score_is_the_rotated_dot_product(generator):
    f = rope.inv_freq(12, 100.0, dtype=torch.float64)
    q = torch.randn(4, 12, generator=generator, dtype=torch.float64)
    k = torch.randn(4, 12, generator=generator, dtype=torch.float64)
    distances = torch.tensor([0, 1, -3, 17, 1000])
    for layout in rope.LAYOUTS:
        scores = rope.relative_score(q, k, distances, f, layout=layout)
        for j, r in enumerate(distances.tolist()):
            m = 41
            direct = (rope.apply_rope(q, [m] * 4, f, layout=layout)
                      * rope.apply_rope(k, [m + r] * 4, f, layout=layout)).sum(-1)
            assert torch.allclose(scores[:, j], direct, atol=1e-10)


# -- long-range bound and numerics -----------------------------------------------------------

def _brute_decay_bound(distance, dim, base):
    phases = [cmath.exp(1j * distance * base ** (-2 * i / dim)) for i in range(dim // 2)]
    return sum(abs(sum(phases[:j])) for j in range(1, dim // 2 + 1)) / (dim // 2)


@pytest.mark.parametrize("dim, base", [(2, 10000.0), (16, 100.0), (128, 10000.0),
                                       (64, 500000.0)])
def test_decay_bound_against_a_direct_sum(dim, base):
    distances = torch.tensor([0.0, 1.0, 2.5, 40.0, 777.0, 123456.0])
    bound = rope.decay_bound(distances, dim, base)
    for d, b in zip(distances.tolist(), bound.tolist()):
        assert b == pytest.approx(_brute_decay_bound(d, dim, base), rel=1e-10)
    assert bound[0].item() == pytest.approx(dim / 4 + 0.5, rel=1e-14)
    assert torch.allclose(rope.decay_bound(-distances, dim, base), bound)
    assert rope.decay_bound(distances.reshape(2, 3), dim, base).shape == (2, 3)


def test_decay_bound_bounds_random_scores(generator):
    dim = 32
    f = rope.inv_freq(dim, dtype=torch.float64)
    distances = torch.arange(0, 3000, 3)
    total = rope.decay_bound(distances, dim) * (dim // 2)
    for _ in range(10):
        q = torch.randn(dim, generator=generator, dtype=torch.float64)
        k = torch.randn(dim, generator=generator, dtype=torch.float64)
        h = torch.complex(q[::2], q[1::2]) * torch.complex(k[::2], k[1::2]).conj()
        step = (torch.cat([h, torch.zeros(1)])[1:] - h).abs().max()
        score = rope.relative_score(q, k, distances, f, layout="interleaved")
        assert torch.all(score.abs() <= step * total + 1e-9)


def test_cos_sin_error_against_direct_computation():
    positions = torch.tensor([1, 10, 1000, 123457, 10 ** 6])
    error = rope.cos_sin_error(positions, 8, 100.0, angle_dtype=torch.float32,
                               cos_sin_dtype=torch.bfloat16)
    exact = [[m * 100.0 ** (-2 * i / 8) for i in range(4)] for m in positions.tolist()]
    f32 = torch.tensor(1.0) / torch.tensor(100.0, dtype=torch.float64) ** (
        torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    angles = positions.float()[:, None] * f32.float()
    for row, (m_angles, computed) in enumerate(zip(exact, angles)):
        worst = max(max(abs(float(fn(a).to(torch.bfloat16)) - ref(e))
                        for a, e in zip(computed, m_angles))
                    for fn, ref in ((torch.cos, math.cos), (torch.sin, math.sin)))
        assert error[row].item() == pytest.approx(worst, rel=1e-6, abs=1e-12)
    # float64 throughout: only the reference's own rounding is left.
    assert rope.cos_sin_error(positions, 8, angle_dtype=torch.float64).max() < 1e-9


def test_bfloat16_positions_collide():
    angles = rope.rope_angles(torch.tensor([256, 257]), rope.inv_freq(8, dtype=torch.bfloat16))
    assert torch.equal(angles[0], angles[1])


@pytest.mark.parametrize("call, match", [
    (lambda: rope.apply_rope(torch.randn(4, 8), torch.arange(4), rope.inv_freq(4),
                             rotary_dim=6), "rotary_dim must be 4"),
    (lambda: rope.apply_rope(torch.randn(4, 8), torch.arange(4), rope.inv_freq(10),
                             rotary_dim=10), "rotary_dim must be <= x.shape"),
    (lambda: rope.apply_rope(torch.randn(4, 8), torch.arange(4), rope.inv_freq(4),
                             rotary_dim=3), "rotary_dim must be even"),
    (lambda: rope.apply_rope(torch.randn(4, 8), torch.arange(4), rope.inv_freq(8),
                             attention_factor=0.0), "attention_factor must be > 0"),
    (lambda: rope.apply_rope(torch.randn(4, 8), 3, rope.inv_freq(8)), "at least one dimension"),
    (lambda: rope.apply_rope(torch.randn(4, 8, dtype=torch.float64).long(), torch.arange(4),
                             rope.inv_freq(8)), "floating-point"),
    (lambda: rope.apply_cos_sin(torch.randn(4, 8), torch.ones(4, 8), torch.ones(4, 6)),
     "same shape"),
    (lambda: rope.apply_cos_sin(torch.randn(4, 8), torch.ones(4, 6), torch.ones(4, 6)),
     "cos must have last dimension rotary_dim = 8"),
    (lambda: rope.apply_cos_sin(torch.randn(4, 8), torch.rand(4, 8), torch.rand(4, 8)),
     "cos must repeat every angle"),
    (lambda: rope.apply_cos_sin(torch.randn(4, 8), *rope.cos_sin(torch.arange(5),
                                                                 rope.inv_freq(8))),
     "does not broadcast"),
    (lambda: rope.rotate(torch.randn(3, 5)), "must be even"),
    (lambda: rope.rotation_matrix(float("inf"), rope.inv_freq(8)), "position must be finite"),
    (lambda: rope.rotation_matrix(1, rope.inv_freq(8), layout="neox"), "layout must be one of"),
    (lambda: rope.layout_permutation(7), "dim must be even"),
    (lambda: rope.interleaved_to_half(torch.randn(10, 4), 3), "n_heads=3 does not divide"),
    (lambda: rope.interleaved_to_half(torch.randn(9, 4), 3), "head_dim"),
    (lambda: rope.decay_bound([0.0, float("nan")], 8), "distances must be finite"),
    (lambda: rope.decay_bound([0.0], 9), "dim must be even"),
    (lambda: rope.decay_bound([0.0], 8, base=1.0), "base must be > 1"),
    (lambda: rope.relative_score(torch.randn(8), torch.randn(6), [0], rope.inv_freq(8)),
     "k must have last dimension 8"),
    (lambda: rope.cos_sin_error([[1, 2]], 8), "positions must be a real 1-D"),
    (lambda: rope.apply_rope_complex(torch.randn(3, 8), torch.arange(3), rope.inv_freq(6)),
     "inv_freq has 3 frequencies"),
])
def test_new_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_static_figures_render_with_labelled_axes():
    from posenc_lib.figures import rope as figures

    for fig in (figures.rotation_matrices(position=3, dim=8, base=10.0),
                figures.numerics_error(10 ** 4, 16, n_points=30)):
        assert fig._repr_png_().startswith(b"\x89PNG")
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>":
                continue
            assert ax.get_xlabel() and ax.get_ylabel(), ax


# -- partial rotary: two conventions -------------------------------------------------------

# Bases other than 10^4 too: a partial slice built with the default base whatever
# rope_theta says agrees with transformers at 10^4 alone.
@pytest.mark.parametrize("base", [10000.0, 500000.0, 1e6])
@pytest.mark.parametrize("head_dim, factor", [(64, 0.25), (80, 0.4), (128, 0.5), (32, 1.0)])
def test_rotary_dim_spacing_is_transformers_partial_rotary_factor(head_dim, factor, base):
    utils = pytest.importorskip("transformers.modeling_rope_utils")
    from transformers import PhiConfig

    config = PhiConfig(hidden_size=2 * head_dim, num_attention_heads=2,
                       partial_rotary_factor=factor, rope_theta=base)
    reference, _ = utils.ROPE_INIT_FUNCTIONS["default"](config, "cpu")
    ours = rope.partial_inv_freq(head_dim, factor, base, dtype=torch.float32)
    assert ours.shape == reference.shape == (int(head_dim * factor) // 2,)
    assert torch.allclose(ours, reference, rtol=1e-6, atol=0)


def test_rotary_dim_spacing_matches_transformers_phi_and_gpt_neox(generator):
    phi = pytest.importorskip("transformers.models.phi.modeling_phi")
    neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")
    from transformers import GPTNeoXConfig, PhiConfig

    # Phi: head_dim 80, partial_rotary_factor 0.4 (Phi-2's values), so 32 features rotate.
    config = PhiConfig(hidden_size=160, num_attention_heads=2, partial_rotary_factor=0.4)
    rotary = phi.PhiRotaryEmbedding(config=config)
    q = torch.randn(1, 2, 10, 80, generator=generator)
    k = torch.randn(1, 2, 10, 80, generator=generator)
    position_ids = torch.tensor([[0, 1, 2, 7, 30, 99, 500, 1000, 1500, 2047]])
    cos, sin = rotary(q, position_ids)
    q_rot, k_rot = phi.apply_rotary_pos_emb(q[..., :32], k[..., :32], cos, sin)
    f = rope.partial_inv_freq(80, 0.4, dtype=torch.float32)
    for x, rotated in ((q, q_rot), (k, k_rot)):
        expected = torch.cat([rotated, x[..., 32:]], -1)
        ours = rope.apply_rope(x, position_ids, f, rotary_dim=2 * f.shape[0])
        assert torch.allclose(ours, expected, atol=1e-5)
    # GPT-NeoX: rotary_pct 0.25 of head_dim 64.
    neox_rotary = neox.GPTNeoXRotaryEmbedding(
        config=GPTNeoXConfig(hidden_size=256, num_attention_heads=4, rotary_pct=0.25))
    assert torch.allclose(neox_rotary.inv_freq,
                          rope.partial_inv_freq(64, 0.25, dtype=torch.float32), rtol=1e-6)


def _proportional_inv_freq(head_dim, factor, base):
    """The "head_dim" convention from its definition, in Python floats: the first
    ``int(factor * head_dim // 2)`` pairs keep ``base**(-2i/head_dim)``, the rest are 0."""
    kept = int(factor * head_dim // 2)
    return [base ** (-2 * i / head_dim) if i < kept else 0.0 for i in range(head_dim // 2)]


@pytest.mark.parametrize("head_dim, factor, kept", [(512, 0.25, 64), (128, 0.75, 48),
                                                    (64, 0.1, 3), (16, 1.0, 8)])
def test_head_dim_spacing_drops_the_lowest_frequencies(head_dim, factor, kept, generator):
    f = rope.partial_inv_freq(head_dim, factor, 1e6, spacing="head_dim",
                              dtype=torch.float64)
    expected = torch.tensor(_proportional_inv_freq(head_dim, factor, 1e6),
                            dtype=torch.float64)
    assert torch.allclose(f, expected, rtol=1e-14, atol=0)
    assert int((f > 0).sum()) == kept
    # The kept pairs are the fastest ones of full RoPE, unchanged.
    assert torch.equal(f[:kept], rope.inv_freq(head_dim, 1e6, dtype=torch.float64)[:kept])
    # Half layout over the whole head: features i and i + head_dim/2 rotate for i < kept,
    # every other feature passes through at any position.
    x = torch.randn(3, head_dim, generator=generator, dtype=torch.float64)
    positions = torch.tensor([5, 12345, 10 ** 7])
    out = rope.apply_rope(x, positions, f)
    half = head_dim // 2
    still = torch.cat([torch.arange(kept, half), torch.arange(half + kept, head_dim)])
    assert torch.equal(out[:, still], x[:, still])
    for row, m in enumerate(positions.tolist()):
        matrix = _loop_rotation_matrix(m, head_dim, 1e6, "half")
        matrix[still] = 0.0
        matrix[still, still] = 1.0
        assert torch.allclose(out[row], matrix @ x[row], atol=1e-9)


def test_partial_rotary_scores_split_into_relative_and_content_parts(generator):
    head_dim, half = 32, 16
    q = torch.randn(head_dim, generator=generator, dtype=torch.float64)
    k = torch.randn(head_dim, generator=generator, dtype=torch.float64)
    for spacing in rope.PARTIAL_SPACINGS:
        f = rope.partial_inv_freq(head_dim, 0.5, spacing=spacing, dtype=torch.float64)
        moving = torch.zeros(head_dim, dtype=torch.bool)
        if spacing == "rotary_dim":
            rotary_dim = 2 * f.shape[0]
            options = {"rotary_dim": rotary_dim}
            moving[:rotary_dim] = True

            def relative(r):
                return rope.relative_score(q[:rotary_dim], k[:rotary_dim], [r], f).item()
        else:
            options = {}
            pairs = (f > 0).nonzero().flatten()
            moving[pairs] = moving[pairs + half] = True

            def relative(r):
                return rope.relative_score(q * moving, k * moving, [r], f).item()
        content = (q[~moving] @ k[~moving]).item()       # no position enters this part

        def score(m, n):
            return (rope.apply_rope(q[None], [m], f, **options)
                    @ rope.apply_rope(k[None], [n], f, **options)[0]).item()

        for m, n, shift in [(0, 9, 1000), (40, 3, 77777)]:
            assert score(m, n) == pytest.approx(relative(n - m) + content, abs=1e-9)
            assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-9)


@pytest.mark.parametrize("call, match", [
    (lambda: rope.partial_inv_freq(64, 0.0), "partial_rotary_factor must be > 0"),
    (lambda: rope.partial_inv_freq(64, 1.5), "partial_rotary_factor must be <= 1"),
    (lambda: rope.partial_inv_freq(64, 0.3), "rotary_dim = int"),
    (lambda: rope.partial_inv_freq(63, 0.5), "head_dim must be even"),
    (lambda: rope.partial_inv_freq(64, 0.5, spacing="proportional"), "spacing must be one"),
    (lambda: rope.rope_basis(torch.randn(4, 6)), "square matrix"),
    (lambda: rope.rope_basis(torch.zeros(3, 3)), "must be even"),
    (lambda: rope.rope_basis(torch.eye(4)), "skew-symmetric"),
    (lambda: rope.rope_basis(torch.zeros(4, 4, dtype=torch.int64)), "floating-point"),
])
def test_partial_and_basis_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# -- RoPE as the general solution: exp(pA) with A skew-symmetric ---------------------------

def _random_generator(dim, kernel_pairs, repeat, seed):
    """A skew-symmetric matrix Q B Qᵀ with chosen blocks, in a random orthogonal basis."""
    g = torch.Generator().manual_seed(seed)
    theta = torch.rand(dim // 2, generator=g, dtype=torch.float64) * 3 + 0.05
    if repeat:
        theta[1:] = theta[0]
    theta[dim // 2 - kernel_pairs:] = 0.0
    block = torch.zeros(dim, dim, dtype=torch.float64)
    block[0::2, 1::2] = torch.diag(-theta)
    block[1::2, 0::2] = torch.diag(theta)
    basis, _ = torch.linalg.qr(torch.randn(dim, dim, generator=g, dtype=torch.float64))
    return basis @ block @ basis.T, theta


@settings(max_examples=40, deadline=None)
@given(half=st.integers(1, 6), kernel_pairs=st.integers(0, 2), repeat=st.booleans(),
       seed=st.integers(0, 2 ** 31 - 1))
def test_rope_basis_recovers_the_blocks(half, kernel_pairs, repeat, seed):
    dim = 2 * half
    kernel_pairs = min(kernel_pairs, half)
    a, theta = _random_generator(dim, kernel_pairs, repeat, seed)
    basis, freqs = rope.rope_basis(a)
    assert torch.allclose(basis.T @ basis, torch.eye(dim, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(freqs, theta.sort(descending=True).values, atol=1e-9)
    for p in (1.0, -2.5, 17.0):
        assert torch.allclose(torch.linalg.matrix_exp(p * a),
                              basis @ rope.rotation_matrix(p, freqs) @ basis.T, atol=1e-9)


def test_rope_basis_agrees_with_scipy_real_schur(generator):
    scipy_linalg = pytest.importorskip("scipy.linalg")
    raw = torch.randn(10, 10, generator=generator, dtype=torch.float64)
    a = raw - raw.T
    basis, freqs = rope.rope_basis(a)
    schur, _ = scipy_linalg.schur(a.numpy(), output="real")
    # 2x2 blocks [[0, b], [-b, 0]] on the diagonal: |b| are the frequencies.
    blocks = sorted((abs(schur[j, j + 1]) for j in range(0, 10, 2)), reverse=True)
    assert torch.allclose(freqs, torch.tensor(blocks, dtype=torch.float64), atol=1e-10)
    # The theorem: scores through exp(pA) and projections equal RoPE's with Qᵀ absorbed.
    w_q = torch.randn(10, 6, generator=generator, dtype=torch.float64)
    w_k = torch.randn(10, 6, generator=generator, dtype=torch.float64)
    x, y = torch.randn(2, 6, generator=generator, dtype=torch.float64)
    for m, n in [(0, 4), (3, 1), (2.5, 40.0)]:
        direct = (torch.linalg.matrix_exp(m * a) @ w_q @ x) @ (
            torch.linalg.matrix_exp(n * a) @ w_k @ y)
        q_rope = rope.apply_rope((basis.T @ w_q @ x)[None], [m], freqs, layout="interleaved")
        k_rope = rope.apply_rope((basis.T @ w_k @ y)[None], [n], freqs, layout="interleaved")
        assert torch.isclose(direct, q_rope[0] @ k_rope[0], atol=1e-9)


def test_rope_basis_keeps_float32_and_the_zero_matrix():
    basis, freqs = rope.rope_basis(torch.zeros(6, 6))
    assert basis.dtype == freqs.dtype == torch.float32
    assert torch.equal(freqs, torch.zeros(3))
    assert torch.allclose(basis.T @ basis, torch.eye(6), atol=1e-6)


def test_new_figures_render_with_labelled_axes():
    from posenc_lib.figures import rope as figures

    for fig in (figures.rotation_clocks(3, 11, dim=8, base=10.0),
                figures.partial_rotary(0.5, head_dim=32, max_distance=1000),
                figures.decay_bound(16, 100.0, max_distance=500)):
        assert fig._repr_png_().startswith(b"\x89PNG")
        for ax in fig.axes:
            if ax.get_label() == "<colorbar>" or not ax.axison:
                continue
            assert ax.get_xlabel() and ax.get_ylabel(), ax
