"""p-RoPE, the partial-RoPE conventions, RNoPE-SWA, DroPE, FoPE and PoPE against their
references.

References, each independent of :mod:`posenc_lib.designs`:

* ``proportional``: a transcription of transformers 5.24.0's
  ``_compute_proportional_rope_parameters`` (``src/transformers/modeling_rope_utils.py``,
  lines 240–267 of the v5.24.0 release), in Python floats; ``scripts/check_designs_v5.py``
  checks the transcription against the real function in a separate venv.
* the ``partial`` convention: transformers 4.57.6's GLM-4.5 (``glm4_moe``) rotary
  embedding and ``apply_rotary_pos_emb``, which split off the first ``rotary_dim``
  features themselves.
* the ``trailing`` convention: transformers 4.57.6's DeepSeek-V3 attention
  (``modeling_deepseek_v3.py``: ``q_pass, q_rot = split([nope, rope])``, then
  ``apply_rotary_pos_emb_interleave``, then ``cat((q_pass, q_rot))``), the layout that
  Mistral 4 (``mistral4`` in 5.24.0) copies; the script checks Mistral 4 itself.
* RNoPE-SWA: transformers 4.57.6's ``Cohere2Attention`` (Command A), which rotates
  only in its sliding-window layers.
* FoPE: a transcription of vLLM's ``FourierRotaryEmbedding``
  (vllm-project/vllm at c215d1e62d7394f965f92676143fc9c5b4913ad2,
  ``vllm/model_executor/layers/rotary_embedding/fope.py``), cited line by line below,
  and of the authors' ``FourierEmbedding`` (TsinghuaC3I/Fourier-Position-Embedding at
  bd94b20d82bf11240ad3584c515c790d255da919, ``olmo/model.py``).
* PoPE: the paper's score (arXiv 2509.10534, Section 3), summed term by term in Python
  floats, and a transcription of lucidrains/PoPE-pytorch (an independent
  implementation; the authors' repository is not available to these tests), file
  ``PoPE_pytorch/pope.py`` at ee11cab0dda8361b02fec56975e84e419ea6a631 (2026-01-27),
  cited line by line below.
* DroPE: transformers 4.57.6's ``LlamaAttention`` given ``cos = 1, sin = 0``, as the
  authors' ``custom_models/attention.py`` does (SakanaAI/DroPE at
  260a8bb9f4fda0673266ddfee7668915aade8b33, lines 57–62), and their QK-norm (lines
  128–133 and 166–175: ``nn.RMSNorm`` over ``heads · head_dim``, before the split
  into heads).
"""

from __future__ import annotations

import math

import einops
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc_lib import designs, rope

transformers = pytest.importorskip("transformers")

EPS64 = torch.finfo(torch.float64).eps
EPS32 = torch.finfo(torch.float32).eps


def proportional_524(head_dim: int, base: float, p: float, factor: float) -> list:
    """transformers 5.24.0, modeling_rope_utils.py, _compute_proportional_rope_parameters.

    L247 ``rope_angles = int(rope_proportion * head_dim // 2)``
    L249-252 ``inv_freq_rotated = 1 / base ** (arange(0, 2 * rope_angles, 2) / head_dim)``
    L254-262 ``nope_angles = head_dim // 2 - rope_angles``; zeros appended if > 0
    L266 ``inv_freq /= factor``
    """
    rope_angles = int(p * head_dim // 2)
    rotated = [1.0 / base ** (i / head_dim) for i in range(0, 2 * rope_angles, 2)]
    nope_angles = head_dim // 2 - rope_angles
    return [f / factor for f in rotated + [0.0] * max(nope_angles, 0)]


@pytest.mark.parametrize("head_dim, p, base, factor", [
    (512, 0.25, 1e6, 1.0),   # Gemma 4's full-attention layers
    (256, 0.25, 1e6, 1.0), (128, 0.5, 1e4, 4.0), (64, 1.0, 5e5, 2.0), (128, 0.1, 1e4, 1.0),
    (96, 0.3, 1e4, 1.0), (128, 0.01, 1e4, 1.0)])
def test_proportional_matches_transformers_5(head_dim, p, base, factor):
    ours = designs.proportional_inv_freq(head_dim, p, base, factor=factor,
                                         dtype=torch.float64)
    reference = torch.tensor(proportional_524(head_dim, base, p, factor),
                             dtype=torch.float64)
    assert ours.shape == (head_dim // 2,)
    # one rounding of base**(-2i/d) in each: a few ulps of the exponent's size
    tol = 4 * EPS64 * (1 + math.log(base))
    assert torch.allclose(ours, reference, rtol=tol, atol=0)
    assert int((ours > 0).sum()) == int(p * head_dim // 2)


@settings(max_examples=60, deadline=None)
@given(half=st.integers(1, 256), p=st.floats(1e-3, 1.0), length=st.integers(1, 10**6))
def test_removed_pairs_are_the_slowest(half, p, length):
    head_dim, base = 2 * half, 1e4
    info = designs.removed_pairs(head_dim, p, base, length)
    theta = rope.inv_freq(head_dim, base, dtype=torch.float64)
    brute = [i for i in range(half) if 2 * math.pi / theta[i].item() > length]
    assert info["kept"] + info["removed"] == half
    assert info["unclosed"] == len(brute)
    assert info["unclosed_removed"] == sum(1 for i in brute if i >= info["kept"])
    # p-RoPE removes unclosed pairs first: every removed pair that closed the circle
    # comes after every unclosed pair has been removed
    assert info["unclosed_removed"] == min(info["removed"], info["unclosed"])


@settings(max_examples=60, deadline=None)
@given(half=st.integers(1, 64), p=st.floats(0.01, 1.0),
       convention=st.sampled_from(designs.LAYOUTS))
def test_every_plan_pairs_each_feature_once(half, p, convention):
    head_dim = 2 * half
    try:
        plan = designs.rotation_plan(head_dim, p, convention)
    except ValueError:
        assert convention != "proportional" and (int(head_dim * p) < 2
                                                 or int(head_dim * p) % 2)
        return
    features = torch.cat([plan.first, plan.second]).sort().values
    assert torch.equal(features, torch.arange(head_dim))
    turning = int((plan.theta > 0).sum())
    expected = (int(p * head_dim // 2) if convention == "proportional"
                else int(head_dim * p) // 2)
    assert turning == expected


def softmax_tol(largest_score: float, n: int) -> float:
    """transformers' eager attention takes the softmax in float32: scores rounded to
    float32 (|s|·eps32/2 each), exp (one rounding), a sum of n terms and a division."""
    return (largest_score + n + 4) * EPS32


def _random(generator, *shape):
    return torch.randn(*shape, generator=generator, dtype=torch.float64)


@pytest.mark.parametrize("head_dim, p", [(64, 0.5), (128, 0.25), (32, 1.0), (48, 0.5)])
def test_partial_convention_matches_glm4_moe(head_dim, p):
    from transformers import Glm4MoeConfig
    from transformers.models.glm4_moe import modeling_glm4_moe as glm

    config = Glm4MoeConfig(hidden_size=head_dim * 2, num_attention_heads=2,
                           head_dim=head_dim, partial_rotary_factor=p, rope_theta=1e4)
    n = 24
    positions = torch.arange(n)[None]
    g = torch.Generator().manual_seed(head_dim)
    q, k = _random(g, 1, 2, n, head_dim), _random(g, 1, 2, n, head_dim)
    cos, sin = glm.Glm4MoeRotaryEmbedding(config)(q, positions)
    q_ref, k_ref = glm.apply_rotary_pos_emb(q, k, cos, sin)
    plan = designs.rotation_plan(head_dim, p, "partial", 1e4)
    q_ours, k_ours = designs.apply_plan(q, positions[0], plan), designs.apply_plan(
        k, positions[0], plan)
    # transformers computes the angles in float32: each is off by <= (n-1)·eps32
    tol = 2 * n * EPS32 * float(q.abs().max())
    assert (q_ours - q_ref).abs().max() <= tol and (k_ours - k_ref).abs().max() <= tol
    # the planted wrong convention is far off
    wrong = designs.apply_plan(q, positions[0], designs.rotation_plan(
        head_dim, p, "trailing", 1e4))
    assert (wrong - q_ref).abs().max() > 100 * tol


@pytest.mark.parametrize("nope, rope_dim", [(64, 32), (128, 64), (16, 16)])
def test_trailing_convention_matches_deepseek_v3_attention(nope, rope_dim):
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds

    config = DeepseekV3Config(qk_rope_head_dim=rope_dim, qk_nope_head_dim=nope,
                              rope_theta=1e4, rope_interleave=True)
    head_dim, n = nope + rope_dim, 20
    positions = torch.arange(n)[None]
    g = torch.Generator().manual_seed(nope)
    q, k = _random(g, 1, 1, n, head_dim), _random(g, 1, 1, n, head_dim)
    cos, sin = ds.DeepseekV3RotaryEmbedding(config)(q, positions)
    # DeepseekV3Attention.forward: split [nope, rope], rotate the rope part, cat back
    q_pass, q_rot = torch.split(q, [nope, rope_dim], dim=-1)
    k_pass, k_rot = torch.split(k, [nope, rope_dim], dim=-1)
    q_rot, k_rot = ds.apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin)
    scores_ref = torch.cat((q_pass, q_rot), -1) @ torch.cat((k_pass, k_rot), -1).mT
    plan = designs.rotation_plan(head_dim, rope_dim / head_dim, "trailing", 1e4)
    scores = (designs.apply_plan(q, positions[0], plan)
              @ designs.apply_plan(k, positions[0], plan).mT)
    # the reference reorders the rotated features; scores are what both must agree on
    norms = float(q.norm(dim=-1).max() * k.norm(dim=-1).max())
    tol = 4 * n * EPS32 * norms
    assert (scores - scores_ref).abs().max() <= tol
    other = designs.rotation_plan(head_dim, rope_dim / head_dim, "partial", 1e4)
    wrong = (designs.apply_plan(q, positions[0], other)
             @ designs.apply_plan(k, positions[0], other).mT)
    assert (wrong - scores_ref).abs().max() > 100 * tol


@pytest.mark.parametrize("head_dim, p", [(64, 0.25), (128, 0.5), (32, 1.0)])
def test_proportional_convention_rotates_half_pairs_over_the_head(head_dim, p):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    n = 16
    g = torch.Generator().manual_seed(head_dim)
    q, k = _random(g, 1, 1, n, head_dim), _random(g, 1, 1, n, head_dim)
    inv = torch.tensor(proportional_524(head_dim, 1e4, p, 1.0), dtype=torch.float64)
    freqs = torch.arange(n, dtype=torch.float64)[:, None] * inv  # as a 5.x model: emb =
    emb = torch.cat((freqs, freqs), dim=-1)[None]                # cat(freqs, freqs)
    q_ref, _ = apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
    ours = designs.apply_plan(q, torch.arange(n), designs.rotation_plan(
        head_dim, p, "proportional", 1e4))
    assert (ours - q_ref).abs().max() <= 4 * n * EPS64 * float(q.abs().max())


def test_conventions_disagree_where_a_kernel_would_err():
    """A kernel that assumes another convention rotates other features."""
    plans = {c: designs.rotation_plan(128, 0.25, c, 1e4) for c in designs.CONVENTIONS}
    freq = {c: designs.feature_frequencies(p) for c, p in plans.items()}
    assert torch.equal(freq["partial"][32:], torch.zeros(96))
    assert torch.equal(freq["trailing"][:96], torch.zeros(96))
    moving = freq["proportional"] > 0
    assert moving[:16].all() and moving[64:80].all() and int(moving.sum()) == 32
    # partial and trailing share the 16 frequencies, proportional keeps the whole
    # head's fastest 16 (spaced 4x more coarsely)
    assert torch.equal(plans["partial"].theta[plans["partial"].theta > 0],
                       plans["trailing"].theta[plans["trailing"].theta > 0])
    assert torch.allclose(plans["proportional"].theta[:16],
                          rope.inv_freq(128, 1e4, dtype=torch.float64)[:16])


@pytest.mark.parametrize("n_layers, every", [(8, 4), (12, 3), (5, 1), (3, 4)])
def test_rnope_swa_layout_matches_cohere2(n_layers, every):
    from transformers import Cohere2Config

    config = Cohere2Config(num_hidden_layers=n_layers, sliding_window_pattern=every)
    assert designs.rnope_swa_layer_types(n_layers, every) == config.layer_types


def _cohere2(layer_type):
    from transformers import Cohere2Config
    from transformers.models.cohere2 import modeling_cohere2 as c2

    config = Cohere2Config(hidden_size=64, num_attention_heads=2, num_key_value_heads=2,
                           head_dim=32, intermediate_size=32, vocab_size=16,
                           num_hidden_layers=2, sliding_window=5,
                           layer_types=[layer_type, layer_type], rope_theta=1e4)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    attention = c2.Cohere2Attention(config, layer_idx=0).double().eval()
    return config, attention, c2.Cohere2RotaryEmbedding(config)


@pytest.mark.parametrize("layer_type", ["sliding_attention", "full_attention"])
def test_rnope_swa_attention_matches_cohere2(layer_type):
    from transformers.masking_utils import (
        causal_mask_function,
        sliding_window_causal_mask_function,
    )

    config, attention, rotary = _cohere2(layer_type)
    n, heads, d = 14, 2, 32
    g = torch.Generator().manual_seed(1)
    hidden = _random(g, 1, n, 64)
    positions = torch.arange(n)[None]
    allow = (sliding_window_causal_mask_function(config.sliding_window)
             if layer_type == "sliding_attention" else causal_mask_function)
    allowed = torch.tensor([[bool(allow(0, 0, torch.tensor(i), torch.tensor(j)))
                             for j in range(n)] for i in range(n)])
    mask = torch.zeros(1, 1, n, n, dtype=torch.float64).masked_fill(~allowed, -math.inf)
    with torch.no_grad():
        cos, sin = rotary(hidden, positions)
        _, weights_ref = attention(hidden, (cos, sin), mask)
        q = attention.q_proj(hidden).view(1, n, heads, d).transpose(1, 2)
        k = attention.k_proj(hidden).view(1, n, heads, d).transpose(1, 2)
        v = attention.v_proj(hidden).view(1, n, heads, d).transpose(1, 2)
    _, weights = designs.rnope_swa_attention(
        q, k, v, layer_type, inv_freq=rope.inv_freq(d, 1e4, dtype=torch.float64),
        window=config.sliding_window, return_weights=True)
    # The reference computes the angles in float32 (each <= n·eps32 off) and the
    # softmax in float32 (SOFTMAX_TOL); softmax is 1-Lipschitz from scores (max norm)
    # to weights.
    norms = float(q.norm(dim=-1).max() * k.norm(dim=-1).max()) / math.sqrt(d)
    angles = 4 * n * EPS32 * norms if layer_type == "sliding_attention" else 0.0
    assert (weights - weights_ref).abs().max() <= angles + softmax_tol(norms, n)


@pytest.mark.parametrize("qk_norm", [None, "qk", "q", "k"])
def test_drope_matches_llama_attention_with_identity_rotation(qk_norm):
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as ll

    heads, d, n = 2, 16, 12
    config = LlamaConfig(hidden_size=heads * d, num_attention_heads=heads,
                         num_key_value_heads=heads, head_dim=d, intermediate_size=16,
                         vocab_size=16, rms_norm_eps=1e-6)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    attention = ll.LlamaAttention(config, layer_idx=0).double().eval()
    g = torch.Generator().manual_seed(2)
    hidden = _random(g, 1, n, heads * d)
    q_weight, k_weight = 1 + _random(g, heads * d), 1 + _random(g, heads * d)
    # SakanaAI/DroPE custom_models/attention.py L128-133: nn.RMSNorm(heads·head_dim)
    q_norm = torch.nn.RMSNorm(heads * d, 1e-6).double()
    k_norm = torch.nn.RMSNorm(heads * d, 1e-6).double()
    with torch.no_grad():
        q_norm.weight.copy_(q_weight)
        k_norm.weight.copy_(k_weight)
        q_flat, k_flat = attention.q_proj(hidden), attention.k_proj(hidden)
        # L166-175: the norm is applied to the projection, before .view(heads)
        q_in = q_norm(q_flat) if qk_norm and "q" in qk_norm else q_flat
        k_in = k_norm(k_flat) if qk_norm and "k" in qk_norm else k_flat
        q_ref = q_in.view(1, n, heads, d).transpose(1, 2)
        k_ref = k_in.view(1, n, heads, d).transpose(1, 2)
        v = attention.v_proj(hidden).view(1, n, heads, d).transpose(1, 2)
        # L57-62: cos = 1, sin = 0 through the model's own apply_rotary_pos_emb
        ones, zeros = torch.ones(1, n, d, dtype=torch.float64), torch.zeros(
            1, n, d, dtype=torch.float64)
        q_ref, k_ref = ll.apply_rotary_pos_emb(q_ref, k_ref, ones, zeros)
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        mask = torch.zeros(1, 1, n, n, dtype=torch.float64).masked_fill(~causal, -math.inf)
        out_ref, weights_ref = ll.eager_attention_forward(
            attention, q_ref, k_ref, v, mask, scaling=attention.scaling)
        q = attention.q_proj(hidden).view(1, n, heads, d).transpose(1, 2)
        k = attention.k_proj(hidden).view(1, n, heads, d).transpose(1, 2)
    out, weights = designs.drope_attention(q, k, v, qk_norm=qk_norm, q_weight=q_weight,
                                           k_weight=k_weight, eps=1e-6,
                                           return_weights=True)
    norms = float(q_ref.norm(dim=-1).max() * k_ref.norm(dim=-1).max()) / math.sqrt(d)
    tol = softmax_tol(norms, n)
    assert (weights - weights_ref).abs().max() <= tol
    # out = weights @ v: each row's error is at most n·tol·max|v| (plus float64 sums)
    assert (out - out_ref.transpose(1, 2)).abs().max() <= 2 * n * tol * float(v.abs().max())
    # and it is not RoPE: the rotated model's weights differ
    theta = rope.inv_freq(d, 1e4, dtype=torch.float64)
    _, rotated = designs.rnope_swa_attention(q_ref, k_ref, v, "sliding_attention",
                                             inv_freq=theta, window=n, layout="half",
                                             return_weights=True)
    assert (rotated - weights_ref).abs().max() > 100 * tol


def test_drope_norm_spans_heads_not_one_head():
    """The authors' norm divides by the RMS over all heads: a per-head norm differs."""
    g = torch.Generator().manual_seed(3)
    q = _random(g, 2, 5, 8)
    q[1] *= 10  # heads of different size
    k, v = _random(g, 2, 5, 8), _random(g, 2, 5, 8)
    _, w = designs.drope_attention(q, k, v, qk_norm="q", return_weights=True)
    per_head = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + 1e-6)
    _, w_head = designs.drope_attention(per_head, k, v, return_weights=True)
    assert (w - w_head).abs().max() > 1e-3


class VllmFope:
    """vLLM's FourierRotaryEmbedding (fope.py at c215d1e6), transcribed.

    _compute_inv_freq: ``inv_freq = 1 / base ** (arange(0, rotary_dim, 2) / rotary_dim)``;
    kept: the first ``num_inv_freq`` if given, else ``inv_freq > 2π / max_position``.
    _compute_cos_sin_cache: ``freqs = einsum("j,i -> ji", t, inv_freq)``;
    ``sin = einsum("tD, Dd -> td", freqs.sin(), sin_coef)`` (``"htD, hDd -> thd"``
    per head), the same for cos; both ``F.pad(..., value=1)`` to ``head_size // 2``;
    then ``cat((sin, sin))`` and ``cat((cos, cos))``.
    forward_native: ``query * cos + rotate_neox(query) * sin``.
    """

    def __init__(self, head_size, rotary_dim, max_position, base, num_inv_freq,
                 cos_coef, sin_coef, sin_pad=1):
        self.head_size, self.max_position, self.sin_pad = head_size, max_position, sin_pad
        inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64)
                                   / rotary_dim))
        selected = torch.ones_like(inv_freq, dtype=torch.bool)
        if num_inv_freq is not None:
            selected[num_inv_freq:] = False
        else:
            selected = inv_freq > (2.0 * torch.pi / max_position)
        self.inv_freq = inv_freq[selected]
        self.cos_coef, self.sin_coef = cos_coef, sin_coef

    def cache(self):
        t = torch.arange(self.max_position, dtype=torch.float64)
        freqs = torch.einsum("j,i -> ji", t, self.inv_freq)
        if self.cos_coef.dim() == 3:
            heads = self.cos_coef.shape[0]
            pos_cos = freqs.cos().unsqueeze(0).expand(heads, -1, -1)
            pos_sin = freqs.sin().unsqueeze(0).expand(heads, -1, -1)
            sin = torch.einsum("htD, hDd -> thd", pos_sin, self.sin_coef)
            cos = torch.einsum("htD, hDd -> thd", pos_cos, self.cos_coef)
        else:
            sin = torch.einsum("tD, Dd -> td", freqs.sin(), self.sin_coef)
            cos = torch.einsum("tD, Dd -> td", freqs.cos(), self.cos_coef)
        pad = (0, self.head_size // 2 - sin.size(-1))
        sin = torch.nn.functional.pad(sin, pad, mode="constant", value=self.sin_pad)
        cos = torch.nn.functional.pad(cos, pad, mode="constant", value=1)
        return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)

    def forward(self, positions, query):  # query: (seq, heads, head_size)
        cos, sin = (c.index_select(0, positions) for c in self.cache())
        if cos.dim() == 2:
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        x1, x2 = query[..., : self.head_size // 2], query[..., self.head_size // 2:]
        return query * cos + torch.cat((-x2, x1), dim=-1) * sin  # rotate_neox


@pytest.mark.parametrize("head_dim, rotary_dim, length, num_inv_freq, per_head", [
    (64, 64, 512, None, False), (64, 64, 2048, None, True), (128, 96, 4096, None, False),
    (32, 32, 64, 5, True)])
def test_fope_matches_vllm(head_dim, rotary_dim, length, num_inv_freq, per_head):
    heads, n = 2, 40
    inv_freq = designs.fope_inv_freq(rotary_dim, 1e4, length, num_inv_freq=num_inv_freq,
                                     dtype=torch.float64)
    theta = rope.inv_freq(rotary_dim, 1e4, dtype=torch.float64)
    expected = (num_inv_freq if num_inv_freq is not None
                else int((theta > 2 * math.pi / length).sum()))
    assert inv_freq.shape == (expected,) and expected < rotary_dim // 2
    g = torch.Generator().manual_seed(head_dim + length)
    shape = (heads, expected, expected) if per_head else (expected, expected)
    cos_coef = torch.eye(expected) + 0.1 * _random(g, *shape)
    sin_coef = torch.eye(expected) + 0.1 * _random(g, *shape)
    reference = VllmFope(head_dim, rotary_dim, length, 1e4, num_inv_freq, cos_coef,
                         sin_coef)
    assert torch.allclose(reference.inv_freq, inv_freq, rtol=4 * EPS64 * (1 + math.log(1e4)),
                          atol=0)
    positions = torch.randint(0, length, (n,), generator=g)
    q = _random(g, n, heads, head_dim)
    ref = reference.forward(positions, q)
    cos, sin = designs.fope_cos_sin(positions, inv_freq, cos_coef, sin_coef, head_dim)
    ours = designs.apply_fope(q.transpose(0, 1), cos, sin).transpose(0, 1)
    # angles up to length rad, each off by <= length·eps64, in sums of `expected` terms
    tol = 4 * length * expected * EPS64 * float(q.abs().max()) * 2
    assert (ours - ref).abs().max() <= tol
    # the padded pairs are position-free: their part of q·k is the same at any offset
    still = torch.zeros(head_dim, dtype=torch.bool)
    still[expected:head_dim // 2] = True
    still[head_dim // 2 + expected:] = True
    k = _random(g, 1, heads, head_dim).expand(n, -1, -1)
    k_rot = designs.apply_fope(k.transpose(0, 1), cos, sin).transpose(0, 1)
    part = (ours[..., still] * k_rot[..., still]).sum(-1)
    plain = 2 * (q[..., still] * k[..., still]).sum(-1)  # x + rotate(x): twice q·k
    assert torch.allclose(part, plain, rtol=0, atol=64 * EPS64 * float(
        q.abs().max() * k.abs().max()) * head_dim)


@pytest.mark.parametrize("head_dim, length", [(64, 512), (128, 4096)])
def test_fope_matches_vllm_padding_sin_with_zero(head_dim, length):
    """vLLM at 151a2c744af6eb59678be10f3cc13a6eb0a138e3, the same file: L112-117
    ``sin = F.pad(..., value=0)`` (cos still 1), and without ``fope_sep_head`` L105-106
    ``einsum("tD, Dd -> td", pos_sin, self.sin_coef[0])`` (the first head's coefficients,
    a shared ``(D, d)`` matrix here). The padded pairs pass through: ``q·k`` once, not
    twice as with the padding of 1."""
    heads, n = 2, 24
    inv_freq = designs.fope_inv_freq(head_dim, 1e4, length, dtype=torch.float64)
    basis = inv_freq.shape[0]
    g = torch.Generator().manual_seed(head_dim)
    cos_coef = torch.eye(basis) + 0.1 * _random(g, basis, basis)
    sin_coef = torch.eye(basis) + 0.1 * _random(g, basis, basis)
    reference = VllmFope(head_dim, head_dim, length, 1e4, None, cos_coef, sin_coef,
                         sin_pad=0)
    positions = torch.randint(0, length, (n,), generator=g)
    q = _random(g, n, heads, head_dim)
    cos, sin = designs.fope_cos_sin(positions, inv_freq, cos_coef, sin_coef, head_dim,
                                    sin_padding=0.0)
    ours = designs.apply_fope(q.transpose(0, 1), cos, sin).transpose(0, 1)
    tol = 8 * length * basis * EPS64 * float(q.abs().max())
    assert (ours - reference.forward(positions, q)).abs().max() <= tol
    still = torch.zeros(head_dim, dtype=torch.bool)
    still[basis:head_dim // 2] = True
    still[head_dim // 2 + basis:] = True
    assert torch.equal(ours[..., still], q[..., still])  # q·k once on those pairs
    # the padding of 1 (the authors', vLLM 0.33.0's) differs there
    cos1, sin1 = designs.fope_cos_sin(positions, inv_freq, cos_coef, sin_coef, head_dim)
    other = designs.apply_fope(q.transpose(0, 1), cos1, sin1).transpose(0, 1)
    assert (other[..., still] - q[..., still]).abs().max() > 0.1


def _softplus(x: float) -> float:
    return math.log1p(math.exp(x))


def pope_brute_force(q, k, theta, bias, q_positions, k_positions):
    """The paper's score, term by term in Python floats:
    a(m, n) = sum_c softplus(q_m,c) softplus(k_n,c) cos((n - m) theta_c + delta_c)."""
    d = len(theta)
    return [[sum(_softplus(q[i][c]) * _softplus(k[j][c])
                 * math.cos((n - m) * theta[c] + bias[c]) for c in range(d))
             for j, n in enumerate(k_positions)] for i, m in enumerate(q_positions)]


def pope_tol(q, k, positions, d):
    """Each phase p·θ_c + δ_c is rounded once or twice (|p|θ_c <= |p|, |δ| <= 2π), cos
    and sin once more, in d terms of size <= max μ_q · max μ_k: an error per term of at
    most 2(max|p| + 2π + 2)·eps64 times that size."""
    mu = float(torch.nn.functional.softplus(q).max() * torch.nn.functional.softplus(k).max())
    return 2 * d * (2 * (float(positions.abs().max()) + 2 * math.pi + 2)) * EPS64 * mu


@pytest.mark.parametrize("d, n_q, n_k, base",
                         [(6, 4, 5, 1e4), (16, 3, 9, 5e5), (1, 2, 2, 1e4)])
def test_pope_scores_are_the_papers_sum(d, n_q, n_k, base):
    g = torch.Generator().manual_seed(10 * d + n_k)
    q, k = _random(g, n_q, d), _random(g, n_k, d)
    theta = designs.pope_inv_freq(d, base, dtype=torch.float64)
    reference_theta = [base ** (-c / d) for c in range(d)]  # θ_c = base^(-(c-1)/d), c >= 1
    assert torch.allclose(theta, torch.tensor(reference_theta, dtype=torch.float64),
                          rtol=4 * EPS64 * (1 + math.log(base)), atol=0)
    bias = -2 * math.pi * torch.rand(d, generator=g, dtype=torch.float64)
    q_pos = torch.randint(0, 5000, (n_q,), generator=g)
    k_pos = torch.randint(0, 5000, (n_k,), generator=g)
    ours = designs.pope_scores(q, k, theta, q_positions=q_pos, k_positions=k_pos, bias=bias)
    brute = torch.tensor(pope_brute_force(q.tolist(), k.tolist(), reference_theta,
                                          bias.tolist(), q_pos.tolist(), k_pos.tolist()),
                         dtype=torch.float64)
    tol = pope_tol(q, k, torch.cat([q_pos, k_pos]), d)
    assert ours.shape == (n_q, n_k)
    assert (ours - brute).abs().max() <= tol
    # the bias sits on the keys: on the queries it would turn the other way
    wrong = designs.apply_pope(q, q_pos, theta, bias=bias) @ designs.apply_pope(
        k, k_pos, theta).mT
    assert (wrong - brute).abs().max() > 100 * tol


class LucidrainsPope:
    """lucidrains/PoPE-pytorch, PoPE_pytorch/pope.py at ee11cab0 (2026-01-27), transcribed.

    ``PoPE.__init__``: L107 ``inv_freqs = theta ** -(arange(dim).float() / dim)`` (float64
    here); L113 ``self.bias = Parameter(torch.zeros(heads, dim))``.
    ``PoPE.forward``: L141 ``freqs = einsum(pos, self.inv_freqs, '... i, j -> ... i j')``;
    L145 ``bias = self.bias.clamp(-2. * pi, 0.)``.
    ``apply_pope_to_qk`` (``return_complex=False``, full rotation): L56
    ``freqs_with_bias = freqs + rearrange(bias, 'h d -> h 1 d')``; L60
    ``q, k = to_magnitude(q), to_magnitude(k)`` (L34: ``F.softplus``); L64
    ``freqs = slice_right_at_dim(freqs, q_len, dim = -2)`` (the last ``q_len`` rows,
    torch_einops_utils); L69-70 ``q = rearrange([q * qcos, q * qsin],
    'two ... d -> ... (d two)')``; L77-78 the same for ``k`` with ``freqs_with_bias``.
    """

    def __init__(self, dim, heads, theta, bias):
        self.inv_freqs = theta ** -(torch.arange(dim, dtype=torch.float64) / dim)
        self.bias = bias  # (heads, dim), the learned parameter before the clamp

    def forward(self, seq_len):
        pos = torch.arange(seq_len, dtype=self.inv_freqs.dtype)
        freqs = einops.einsum(pos, self.inv_freqs, "... i, j -> ... i j")
        return freqs, self.bias.clamp(-2.0 * math.pi, 0.0)

    @staticmethod
    def apply_pope_to_qk(pope, q, k):
        freqs, bias = pope
        q_len = q.shape[-2]
        freqs_with_bias = freqs + einops.rearrange(bias, "h d -> h 1 d")
        q, k = torch.nn.functional.softplus(q), torch.nn.functional.softplus(k)
        freqs = freqs[..., -q_len:, :]  # slice_right_at_dim(freqs, q_len, dim=-2)
        qcos, qsin = freqs.cos(), freqs.sin()
        q = einops.rearrange([q * qcos, q * qsin], "two ... d -> ... (d two)")
        kcos, ksin = freqs_with_bias.cos(), freqs_with_bias.sin()
        k = einops.rearrange([k * kcos, k * ksin], "two ... d -> ... (d two)")
        return q, k


@pytest.mark.parametrize("d, heads, n, n_q", [(64, 2, 12, 12), (32, 3, 20, 1), (8, 1, 7, 3)])
def test_pope_matches_pope_pytorch(d, heads, n, n_q):
    g = torch.Generator().manual_seed(d + n)
    q, k = _random(g, 1, heads, n_q, d), _random(g, 1, heads, n, d)
    bias = -2 * math.pi * torch.rand(heads, d, generator=g, dtype=torch.float64)
    reference = LucidrainsPope(d, heads, 1e4, bias)
    q_ref, k_ref = reference.apply_pope_to_qk(reference.forward(n), q, k)
    theta = designs.pope_inv_freq(d, 1e4, dtype=torch.float64)
    assert torch.allclose(theta, reference.inv_freqs, rtol=4 * EPS64 * (1 + math.log(1e4)),
                          atol=0)
    q_pos = torch.arange(n - n_q, n)  # queries last, as its inference path slices them
    q_ours = designs.apply_pope(q, q_pos, theta)
    k_ours = designs.apply_pope(k, torch.arange(n), theta, bias=bias)
    # the same features, real and imaginary parts interleaved there, in halves here
    interleave = torch.stack([torch.arange(d), d + torch.arange(d)], -1).flatten()
    tol = 8 * (n + 2 * math.pi) * EPS64 * float(torch.nn.functional.softplus(
        torch.cat([q.flatten(), k.flatten()])).max())
    assert (q_ours[..., interleave] - q_ref).abs().max() <= tol
    assert (k_ours[..., interleave] - k_ref).abs().max() <= tol
    scores = designs.pope_scores(q, k, theta, q_positions=q_pos, bias=bias)
    assert (scores - q_ref @ k_ref.mT).abs().max() <= pope_tol(q, k, torch.arange(n), d)


@settings(max_examples=40, deadline=None)
@given(d=st.integers(1, 48), shift=st.integers(-10**5, 10**5), seed=st.integers(0, 2**31))
def test_pope_scores_depend_on_positions_through_n_minus_m_only(d, shift, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = _random(g, 2, 5, d), _random(g, 2, 6, d)
    theta = designs.pope_inv_freq(d, 1e4, dtype=torch.float64)
    bias = -2 * math.pi * torch.rand(2, d, generator=g, dtype=torch.float64)
    q_pos, k_pos = torch.randint(0, 4096, (5,), generator=g), torch.arange(6) * 700
    here = designs.pope_scores(q, k, theta, q_positions=q_pos, k_positions=k_pos, bias=bias)
    there = designs.pope_scores(q, k, theta, q_positions=q_pos + shift,
                                k_positions=k_pos + shift, bias=bias)
    positions = torch.cat([q_pos, k_pos]).abs() + abs(shift)
    assert (here - there).abs().max() <= 2 * pope_tol(q, k, positions, d)


@settings(max_examples=40, deadline=None)
@given(d=st.integers(2, 32).filter(lambda v: v % 2 == 0), seed=st.integers(0, 2**31))
def test_pope_angle_is_content_free_and_ropes_is_not(d, seed):
    """Feature c of any content at position p points at angle p·θ_c + δ_c."""
    g = torch.Generator().manual_seed(seed)
    x = 3 * _random(g, 4, 9, d)  # four contents, nine positions
    positions = torch.arange(9) * 37
    theta = designs.pope_inv_freq(d, 1e4, dtype=torch.float64)
    bias = -2 * math.pi * torch.rand(d, generator=g, dtype=torch.float64)
    out = designs.apply_pope(x, positions, theta, bias=bias)
    turned = torch.complex(out[..., :d], out[..., d:])
    expected = torch.polar(torch.ones(9, d, dtype=torch.float64),
                           positions[:, None] * theta + bias)
    direction = turned / turned.abs()
    assert (direction - expected).abs().max() <= 8 * (9 * 37 + 2 * math.pi) * EPS64
    # RoPE: a pair's direction is its position's angle plus the content's own angle
    rotated = rope.apply_rope(x, positions, rope.inv_freq(d, 1e4, dtype=torch.float64),
                              layout="half")
    pair = torch.complex(rotated[..., : d // 2], rotated[..., d // 2:])
    spread = (pair / pair.abs() - (pair / pair.abs())[:1]).abs().max()
    assert spread > 1e-3  # contents disagree


class AuthorsFope:
    """The authors' FoPE, TsinghuaC3I/Fourier-Position-Embedding at bd94b20d, olmo/model.py,
    transcribed for their configuration (``rope_clamp_floor_freq``,
    ``rope_clamp_floor_to_zero``, ``fourier_ignore_zero``, ``fourier_separate_basis``,
    ``fourier_separate_head``, no ``fourier_norm``; the released configs' flags).

    ``RotaryEmbedding.__init__``: L333 ``floor_freq = 2π / max_sequence_length ·
    floor_freq_ratio`` (ratio 1.0 by default); L336 ``clamp_floor_value = 0.0``.
    ``get_inv_freq``: L432-434 ``inv_freq = 1 / rope_theta ** (arange(0, dim, 2) / dim)``;
    L446 ``inv_freq[inv_freq < floor_freq] = clamp_floor_value``; L502
    ``inv_freq = inv_freq[inv_freq != 0.0]``.
    ``get_rotary_embedding``: L560 ``seq = arange(seq_len)``; L565 ``freqs =
    einsum("t, hd -> htd", seq, inv_freq)``; L570 ``positions = freqs.unsqueeze(0)``;
    L574 ``pos_sin, pos_cos = positions.sin(), positions.cos()``.
    ``FourierEmbedding``: L659-660 ``input_dim = inv_freq.size(-1)``, ``output_dim =
    min(input_dim, head_dim // 4)``; L702-703 ``fourier_sin = einsum("bhtD, hDd ->
    bhtd", pos_sin, sin_coef)``, the same for cos; L713-714 ``F.pad(..., pad=(0,
    head_dim // 2 - size), value=1)``; L716-717 ``cat((fourier_sin, fourier_sin))``;
    L720 ``t * fourier_cos + rotate_half(t) * fourier_sin``, with L589-592
    ``rotate_half``: ``cat((-x2, x1))`` of the two halves.
    """

    def __init__(self, head_dim, base, max_sequence_length, cos_coef, sin_coef):
        floor_freq = 2 * torch.pi / max_sequence_length * 1.0
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64)
                                   / head_dim))
        inv_freq[inv_freq < floor_freq] = 0.0
        self.inv_freq = inv_freq[inv_freq != 0.0][None, :]  # (1, D)
        self.head_dim, self.cos_coef, self.sin_coef = head_dim, cos_coef, sin_coef

    def output_dim(self):
        return min(self.inv_freq.size(-1), self.head_dim // 4)

    def forward(self, t):  # t: (batch, heads, seq, head_dim)
        seq = torch.arange(t.shape[-2], dtype=torch.float64)
        freqs = torch.einsum("t, hd -> htd", seq, self.inv_freq)
        positions = freqs.unsqueeze(0)
        pos_sin, pos_cos = positions.sin(), positions.cos()
        fourier_sin = torch.einsum("bhtD, hDd -> bhtd", pos_sin, self.sin_coef)
        fourier_cos = torch.einsum("bhtD, hDd -> bhtd", pos_cos, self.cos_coef)
        pad = (0, self.head_dim // 2 - fourier_sin.size(-1))
        fourier_sin = torch.nn.functional.pad(fourier_sin, pad, mode="constant", value=1)
        fourier_cos = torch.nn.functional.pad(fourier_cos, pad, mode="constant", value=1)
        fourier_sin = torch.cat((fourier_sin, fourier_sin), dim=-1)
        fourier_cos = torch.cat((fourier_cos, fourier_cos), dim=-1)
        x1, x2 = t.view(*t.shape[:-1], 2, self.head_dim // 2).unbind(dim=-2)
        return t * fourier_cos + torch.cat((-x2, x1), dim=-1) * fourier_sin


@pytest.mark.parametrize("head_dim, base, length", [
    (128, 1e4, 512),    # the 1.2B configs/c4/length-512 model (d_model 2048, 16 heads)
    (128, 1e4, 1024), (64, 1e4, 512), (64, 5e5, 4096)])
def test_fope_matches_the_authors_code(head_dim, base, length):
    heads, n = 2, 48
    inv_freq = designs.fope_inv_freq(head_dim, base, length, dtype=torch.float64)
    g = torch.Generator().manual_seed(head_dim + length)
    basis, out = inv_freq.shape[0], min(inv_freq.shape[0], head_dim // 4)
    cos_coef = _random(g, heads, basis, out) * 0.3
    sin_coef = _random(g, heads, basis, out) * 0.3
    reference = AuthorsFope(head_dim, base, length, cos_coef, sin_coef)
    assert torch.allclose(reference.inv_freq[0], inv_freq,
                          rtol=4 * EPS64 * (1 + math.log(base)), atol=0)
    assert reference.output_dim() == out
    q = _random(g, 1, heads, n, head_dim)
    cos, sin = designs.fope_cos_sin(torch.arange(n), inv_freq, cos_coef, sin_coef, head_dim)
    ours = designs.apply_fope(q, cos, sin)
    # angles up to n rad, each off by <= n·eps64, in sums of `basis` terms
    tol = 4 * n * basis * EPS64 * float(q.abs().max() * (cos_coef.abs().sum(-2).max()
                                                          + sin_coef.abs().sum(-2).max()))
    assert (ours - reference.forward(q)).abs().max() <= tol + 8 * EPS64 * float(q.abs().max())


@pytest.mark.parametrize("call, match", [
    (lambda: designs.proportional_inv_freq(63, 0.5), "head_dim"),
    (lambda: designs.proportional_inv_freq(64, 1.5), "partial_rotary_factor"),
    (lambda: designs.proportional_inv_freq(64, 0.0), "partial_rotary_factor"),
    (lambda: designs.proportional_inv_freq(64, 0.5, factor=0.5), "factor"),
    (lambda: designs.rotation_plan(64, 0.5, "last"), "convention"),
    (lambda: designs.rotation_plan(64, 0.01, "partial"), "rotary_dim"),
    (lambda: designs.removed_pairs(64, 0.5, 1e4, 0), "train_length"),
    (lambda: designs.rnope_swa_layer_types(0), "num_layers"),
    (lambda: designs.rnope_swa_layer_types(4, 0), "full_every"),
    (lambda: designs.apply_plan(torch.zeros(3, 8), torch.arange(3),
                                designs.rotation_plan(16, 0.5)), "head_dim"),
    (lambda: designs.rnope_swa_attention(torch.zeros(3, 8), torch.zeros(3, 8),
                                         torch.zeros(3, 8), "global",
                                         inv_freq=torch.ones(4), window=2), "layer_type"),
    (lambda: designs.drope_attention(torch.zeros(1, 3, 8), torch.zeros(1, 3, 8),
                                     torch.zeros(1, 3, 8), qk_norm="v"), "qk_norm"),
    (lambda: designs.drope_attention(torch.zeros(1, 3, 8), torch.zeros(1, 3, 8),
                                     torch.zeros(1, 3, 8), scaling=-1.0), "scaling"),
    (lambda: designs.fope_inv_freq(64, 1e4, 0), "max_position_embeddings"),
    (lambda: designs.fope_inv_freq(64, 1e4, 512, num_inv_freq=0), "num_inv_freq"),
    (lambda: designs.fope_cos_sin(torch.arange(3), torch.ones(4), torch.ones(3, 4),
                                  torch.ones(4, 4), 16), "cos_coef"),
    (lambda: designs.fope_cos_sin(torch.arange(3), torch.ones(4), torch.ones(4, 4),
                                  torch.ones(4, 9), 16), "sin_coef"),
    (lambda: designs.pope_inv_freq(0), "head_dim"),
    (lambda: designs.pope_inv_freq(8, base=1.0), "base"),
    (lambda: designs.apply_pope(torch.zeros(3, 8), torch.arange(3), torch.ones(4)),
     "inv_freq"),
    (lambda: designs.apply_pope(torch.zeros(3, 8), torch.arange(3), torch.ones(8),
                                bias=torch.zeros(4)), "bias"),
    (lambda: designs.apply_pope(torch.zeros(3, 8), torch.arange(3), torch.ones(8),
                                bias=torch.full((8,), math.nan)), "bias"),
    (lambda: designs.apply_pope(torch.zeros(3, 8), torch.arange(5), torch.ones(8)),
     "positions"),
    (lambda: designs.pope_scores(torch.zeros(8), torch.zeros(3, 8), torch.ones(8)), "q"),
])
def test_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()
