"""Chapter 10's numerics (bounds, temperature, remap) against independent computations.

RoPE's base (Liu et al.'s critical dimension, Men et al.'s cosine sum and base
bound) against brute-force counts and float64 scans in numpy; log-n scaling
against Qwen-1's ``logn_list``; the entropy against its definition; and the
re-mapped positions of ReRoPE, Self-Extend and attention sinks against literal
loops with dense rotation matrices and against transcriptions of the authors'
reference code (bojone/rerope, datamllab/LongLM, mit-han-lab/streaming-llm).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posenc_lib import bounds, remap, rope, temperature

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True)
F64 = torch.float64
EPS64 = torch.finfo(F64).eps


# -- Liu et al.: critical dimension and extrapolation bound -------------------------

def _count_full_turns(dim, base, length):
    """Pairs whose wavelength 2π·base^(2i/dim) fits in ``length``, counted one by one."""
    return sum(2 * math.pi * base ** (2 * i / dim) <= length for i in range(dim // 2))


def test_critical_dimension_of_llama2_is_92():
    assert bounds.critical_dimension(128, 10000.0, 4096) == 92


@PROPERTY
@given(dim=st.integers(2, 128).map(lambda h: 2 * h),
       base=st.floats(2.0, 1e7), length=st.floats(1.0, 1e6))
def test_critical_dimension_counts_the_pairs_that_turn(dim, base, length):
    _critical_dimension_agrees_with_the_count(dim, base, length)


def _critical_dimension_agrees_with_the_count(dim, base, length):
    half = (dim / 2) * math.log(length / (2 * math.pi)) / math.log(base)
    # The two sides round differently only where a wavelength equals the length
    # to rounding. `half` carries ~6u·|half| from its four roundings; the count
    # compares 2π·base^(2i/dim), off by (|ln λ| + 4)·u relative, which moves i by
    # that over (2/dim)·ln base. Doubled: pairs closer than this are skipped.
    u = EPS64 / 2
    near = 2 * u * (6 * abs(half) + (dim / 2) * (abs(math.log(length)) + 4) / math.log(base))
    if abs(half - round(half)) < near:
        return False
    assert bounds.critical_dimension(dim, base, length) == 2 * _count_full_turns(
        dim, base, length), (dim, base, length, half)
    return True


@pytest.mark.parametrize("dim", [2, 8, 64, 128, 256])
@pytest.mark.parametrize("base", [2.0, 10000.0, 5e5, 1e7])
@pytest.mark.parametrize("side", [-1, 1])
def test_critical_dimension_just_beside_a_wavelength(dim, base, side):
    # Lengths a relative 1e-11 beside a pair's wavelength 2π·base^(2k/dim): far
    # above rounding (which `near` skips), so the count must agree there too.
    checked = 0
    for k in range(1, dim // 2):
        length = 2 * math.pi * base ** (2 * k / dim) * (1 + side * 1e-11)
        if 1.0 <= length <= 1e12:
            checked += _critical_dimension_agrees_with_the_count(dim, base, length)
    assert checked or dim == 2


@pytest.mark.parametrize("base", [2e4, 5e5, 1e6, 1e8])
@pytest.mark.parametrize("dim, train", [(128, 4096), (64, 2048), (128, 16384)])
def test_extrapolation_bound_is_the_wavelength_of_the_first_unturned_pair(base, dim, train):
    d_extra = bounds.critical_dimension(dim, 10000.0, train)
    theta = rope.inv_freq(dim, base, dtype=F64)
    bound = bounds.extrapolation_bound(dim, base, train)
    assert math.isclose(bound, 2 * math.pi / theta[d_extra // 2].item(), rel_tol=1e-12)


@pytest.mark.parametrize("train, tune", [(4096, 4096), (4096, 16384), (2048, 100000)])
def test_critical_base_gives_the_critical_pair_the_tuning_wavelength(train, tune):
    beta0 = bounds.critical_base(train, tune)
    fraction = math.log(train / (2 * math.pi)) / math.log(10000.0)   # 2i/d at the edge
    assert math.isclose(2 * math.pi * beta0 ** fraction, tune, rel_tol=1e-12)
    # Below the critical base the bound is the tuning length itself.
    assert bounds.extrapolation_bound(128, beta0 * 0.999, train, tune) == tune
    assert bounds.extrapolation_bound(128, beta0 * 1.001, train, tune) > 2 * math.pi


# -- Men et al.: the cosine sum and the bound on the base --------------------------

@pytest.mark.parametrize("dim, base", [(8, 10.0), (16, 10000.0), (64, 5e5)])
def test_cos_sum_is_half_the_trace_of_the_rotation(dim, base):
    theta = rope.inv_freq(dim, base, dtype=F64)
    for m in (0, 1, 7, 1234, 10 ** 5):
        trace = torch.diagonal(rope.rotation_matrix(m, theta)).sum().item()
        direct = math.fsum(math.cos(m * t) for t in theta.tolist())
        value = bounds.rope_cos_sum(m, dim, base).item()
        assert math.isclose(value, trace / 2, rel_tol=0, abs_tol=1e3 * EPS64 * dim)
        assert math.isclose(value, direct, rel_tol=0, abs_tol=1e3 * EPS64 * dim)


def test_similar_key_margin_is_twice_sigma_squared_times_the_cos_sum(generator):
    # Men et al.'s Theorem: E[q·R k*] - E[q·R k] = 2σ² B_m for k* = q + ε.
    dim, base, sigma, mean, draws = 16, 100.0, 0.7, 0.3, 40_000
    theta = rope.inv_freq(dim, base, dtype=F64)
    q = mean + sigma * torch.randn(draws, dim, generator=generator, dtype=F64)
    k = mean + sigma * torch.randn(draws, dim, generator=generator, dtype=F64)
    eps = torch.randn(draws, dim, generator=generator, dtype=F64)
    for m in (0, 3, 40):
        rotation = rope.rotation_matrix(m, theta)
        similar = ((q @ rotation) * (q + eps)).sum(-1)      # qᵀ R k*, k* = q + ε
        random = ((q @ rotation) * k).sum(-1)
        difference = similar - random
        expected = 2 * sigma ** 2 * bounds.rope_cos_sum(m, dim, base).item()
        standard_error = difference.std().item() / math.sqrt(draws)
        assert abs(difference.mean().item() - expected) < 5 * standard_error


def _numpy_first_negative(dim, base, limit):
    theta = base ** (-np.arange(0, dim, 2) / dim)
    values = np.cos(np.outer(np.arange(limit + 1, dtype=np.float64), theta)).sum(1)
    negative = np.flatnonzero(values < 0)
    return None if negative.size == 0 else int(negative[0])


@pytest.mark.parametrize("dim, base", [(128, 1e4), (128, 5e5), (64, 3e4), (16, 500.0)])
def test_supported_length_matches_a_numpy_scan(dim, base):
    first = _numpy_first_negative(dim, base, 40000)
    assert first is not None
    assert bounds.rope_supported_length(dim, base) == first - 1
    assert bounds.rope_supported_length(dim, base, max_length=first - 1) == first - 1


def test_model_bases_against_their_context_lengths():
    # The numbers the chapter quotes, from a plain numpy scan.
    for base, context, holds in ((1e4, 4096, False), (5e5, 8192, True),
                                 (1e6, 32768, False)):
        first = _numpy_first_negative(128, base, 40000)
        assert (first > context) == holds
        assert bounds.rope_supported_length(128, base) == first - 1


def _grid_bound(dim, length, low, step):
    """The smallest base ``low·e^(j·step)`` with no negative B up to ``length``."""
    x = np.arange(0, dim, 2) / dim
    m = np.arange(length + 1, dtype=np.float64)
    for block in range(100000):
        bases = low * np.exp(step * np.arange(64 * block, 64 * block + 64))
        values = np.cos(m[None, :, None] * bases[:, None, None] ** -x).sum(-1)
        valid = np.flatnonzero(values.min(1) >= 0)
        if valid.size:
            return bases[valid[0]]
    raise AssertionError("no valid base on the grid")


@pytest.mark.parametrize("dim, length, low", [(8, 64, 2.0), (16, 200, 2.0),
                                              (32, 300, 2.0), (128, 1024, 3000.0)])
def test_base_bound_against_a_fine_grid(dim, length, low):
    # (The chapter scans d = 128 from base 1000 with a coarser step.)
    bound = bounds.rope_base_bound(length, dim, lowest=low)
    # No base of the grid below the bound is valid: the search skipped no window
    # of valid bases wider than the grid step (a grid can miss narrower ones).
    assert _grid_bound(dim, length, low, 1e-3) >= bound * (1 - 1e-12)
    # The bound itself is valid and is an edge: just below it some B < 0.
    x = np.arange(0, dim, 2) / dim
    m = np.arange(length + 1, dtype=np.float64)
    at_bound = np.cos(np.outer(m, bound ** -x)).sum(1)
    below = np.cos(np.outer(m, (bound * (1 - 1e-7)) ** -x)).sum(1)
    assert at_bound.min() >= -1e-9 and below.min() < 0


def test_base_bound_is_not_a_threshold():
    # For L = 1024 (d = 128) the valid bases start at the bound and stop again.
    bound = bounds.rope_base_bound(1024)
    assert math.isclose(bound, 4293.44, rel_tol=1e-5)
    assert bounds.rope_supported_length(128, 5000.0) < 1024 <= bounds.rope_supported_length(
        128, 4300.0)


# -- log-n scaling and entropy -------------------------------------------------------

@pytest.mark.parametrize("train_length", [2, 512, 2048, 8192])
def test_logn_scale_matches_qwen_logn_list(train_length):
    # QWenAttention: logn_list[i - 1] = log(i, seq_length) if i > seq_length else 1.
    count = 4 * train_length
    logn_list = [math.log(i, train_length) if i > train_length else 1
                 for i in range(1, count + 1)]
    ours = temperature.logn_attention_scale(torch.arange(count), train_length)
    assert torch.allclose(ours, torch.tensor(logn_list, dtype=F64), rtol=8 * EPS64, atol=0)


def _entropy_reference(scores):
    out = []
    for row in scores.reshape(-1, scores.shape[-1]).tolist():
        finite = [s for s in row if s != -math.inf]
        top = max(finite)
        weights = [math.exp(s - top) for s in finite]
        total = math.fsum(weights)
        out.append(-math.fsum(w / total * math.log(w / total) for w in weights if w > 0))
    return torch.tensor(out, dtype=F64).reshape(scores.shape[:-1])


def test_entropy_against_its_definition(generator):
    scores = 3 * torch.randn(4, 5, 37, generator=generator, dtype=F64)
    scores[0, :, 20:] = -math.inf
    assert torch.allclose(temperature.attention_entropy(scores), _entropy_reference(scores),
                          rtol=1e-12, atol=1e-12)
    assert torch.allclose(temperature.attention_entropy(scores.transpose(-1, -2), dim=-2),
                          _entropy_reference(scores), rtol=1e-12, atol=1e-12)


@PROPERTY
@given(n=st.integers(2, 300), bound=st.floats(0.01, 20.0), scale=st.floats(0.0, 5.0),
       seed=st.integers(0, 10 ** 6))
def test_entropy_dilution_bound_and_monotone_scale(n, bound, scale, seed):
    # Bounded logits |s| <= B: ln n - 2λB <= H(λ s) <= ln n, and H decreases with λ.
    g = torch.Generator().manual_seed(seed)
    s = (2 * torch.rand(n, generator=g, dtype=F64) - 1) * bound
    h = temperature.attention_entropy(scale * s).item()
    assert math.log(n) - 2 * scale * bound - 1e-12 <= h <= math.log(n) + 1e-12
    assert temperature.attention_entropy((scale + 0.5) * s).item() <= h + 1e-12


def test_random_entropy_against_a_direct_sum_and_one_call_for_several_scales():
    """-Σ p ln p from the seeded draws, computed here with numpy; the list form of
    ``train_length`` gives exactly the separate calls."""
    lengths, dim, n_queries, sigma, seed = [3, 10, 40], 8, 3, 1.3, 5
    got = temperature.random_attention_entropy(lengths, sigma=sigma, dim=dim,
                                           n_queries=n_queries, seed=seed,
                                           train_length=[None, 4, 16])
    assert got.shape == (3, 3, n_queries)
    for k, train_length in enumerate([None, 4, 16]):
        alone = temperature.random_attention_entropy(lengths, sigma=sigma, dim=dim,
                                                 n_queries=n_queries, seed=seed,
                                                 train_length=train_length)
        assert torch.equal(got[k], alone)
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, dim, generator=generator, dtype=torch.float64)
    q = q / q.norm(dim=-1, keepdim=True) * sigma * math.sqrt(dim)
    keys = torch.randn(max(lengths), dim, generator=generator, dtype=torch.float64)
    theta = rope.inv_freq(dim, dtype=torch.float64)
    keys = rope.apply_rope(keys, torch.arange(max(lengths)), theta).numpy()
    for i, n in enumerate(lengths):
        rotated = rope.apply_rope(q, torch.full((n_queries,), n - 1), theta).numpy()
        logits = rotated @ keys[:n].T / math.sqrt(dim)
        for k, train_length in enumerate([None, 4, 16]):
            scale = 1.0 if train_length is None else max(1.0, math.log(n) / math.log(
                train_length))
            p = np.exp(scale * logits - (scale * logits).max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            np.testing.assert_allclose(got[k, i].numpy(), -(p * np.log(p)).sum(-1),
                                       rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="train_length"):
        temperature.random_attention_entropy(lengths, train_length=[None, 1])
    with pytest.raises(ValueError, match="train_length"):
        temperature.random_attention_entropy(lengths, train_length=[])


def test_random_entropy_is_deterministic_and_scaled_is_lower():
    lengths = torch.tensor([8, 64, 512, 2048])
    a = temperature.random_attention_entropy(lengths, sigma=1.5, dim=16, n_queries=4)
    b = temperature.random_attention_entropy(lengths, sigma=1.5, dim=16, n_queries=4)
    scaled = temperature.random_attention_entropy(lengths, sigma=1.5, dim=16, n_queries=4,
                                              train_length=64)
    assert torch.equal(a, b) and a.shape == (4, 4)
    assert torch.all(a <= torch.log(lengths.double())[:, None] + 1e-12)
    assert torch.equal(scaled[:2], a[:2])          # within L the scale is 1
    assert torch.all(scaled[2:] < a[2:])            # beyond it, λ > 1 lowers H


# -- re-mapped positions ---------------------------------------------------------------

def _literal_scores(q, k, theta, rule, layout):
    """Score (m, n) = q_m · R(r) k_n with the dense rotation matrix, r from ``rule``."""
    n_q, n_k = q.shape[0], k.shape[0]
    out = torch.full((n_q, n_k), -math.inf, dtype=F64)
    for m in range(n_q):
        for n in range(n_k):
            r = rule(m, n)
            if r is not None:
                matrix = rope.rotation_matrix(torch.tensor(float(r), dtype=F64), theta,
                                              layout=layout)
                out[m, n] = q[m] @ (matrix @ k[n])
    return out


def _rerope_rule(w, leak=None):
    def rule(m, n):
        d = m - n
        if abs(d) < w:
            return -d
        return -(w if leak is None else w + (d - w) / leak)
    return rule


def _self_extend_rule(g, w):
    def rule(m, n):
        d = m - n
        return -d if d < w else -((m // g + w - w // g) - n // g)
    return rule


def _sink_rule(s, r):
    def rule(m, n):
        if n > m:
            return None
        first_recent = max(s, m - r + 1)
        if n >= first_recent:
            return n - m
        if n < s:
            return n - (m - first_recent + s)
        return None                                   # evicted
    return rule


CASES = [
    ("rerope", dict(window=5), _rerope_rule(5)),
    ("rerope", dict(window=1), _rerope_rule(1)),
    ("rerope", dict(window=7, leaky_factor=3.0), _rerope_rule(7, 3.0)),
    ("rerope", dict(window=4, leaky_factor=1.5), _rerope_rule(4, 1.5)),
    ("self_extend", dict(group_size=3, neighbor_window=7), _self_extend_rule(3, 7)),
    ("self_extend", dict(group_size=4, neighbor_window=8), _self_extend_rule(4, 8)),
    ("self_extend", dict(group_size=1, neighbor_window=3), _self_extend_rule(1, 3)),
    ("sink", dict(start_size=2, recent_size=9), _sink_rule(2, 9)),
    ("sink", dict(start_size=0, recent_size=4), _sink_rule(0, 4)),
    ("sink", dict(start_size=4, recent_size=1), _sink_rule(4, 1)),
]
SCORES = {"rerope": remap.rerope_scores, "self_extend": remap.self_extend_scores,
          "sink": remap.sink_scores}


def _maps(kind, params, positions):
    if kind == "rerope":
        return remap.rerope_relative_positions(positions, **params), None
    if kind == "self_extend":
        return remap.self_extend_relative_positions(positions, **params), None
    return remap.sink_cache_positions(positions, **params)


@pytest.mark.parametrize("layout", rope.LAYOUTS)
@pytest.mark.parametrize("kind, params, rule", CASES)
def test_two_pass_scores_match_a_literal_loop(kind, params, rule, layout, generator):
    n, dim = 20, 8
    q = torch.randn(n, dim, generator=generator, dtype=F64)
    k = torch.randn(n, dim, generator=generator, dtype=F64)
    theta = rope.inv_freq(dim, 10.0, dtype=F64)
    literal = _literal_scores(q, k, theta, rule, layout)
    fast = SCORES[kind](q, k, theta, layout=layout, **params)
    seen = torch.isfinite(literal)
    if kind != "sink":
        seen &= torch.tril(torch.ones(n, n, dtype=torch.bool))   # causal part
    else:
        assert torch.equal(torch.isfinite(fast), seen)
    tol = 1e3 * EPS64 * q.norm(dim=-1).max() * k.norm(dim=-1).max()
    assert (fast[seen] - literal[seen]).abs().max() <= tol
    # The map itself, through the generic scorer, gives the same scores.
    relative, kept = _maps(kind, params, torch.arange(n))
    generic = remap.relative_map_scores(q, k, relative.double(), theta, layout=layout)
    assert (generic[seen] - literal[seen]).abs().max() <= tol
    if kept is not None:
        assert torch.equal(kept, seen)


@PROPERTY
@given(n=st.integers(2, 60), w=st.integers(1, 40), g=st.integers(1, 9))
def test_self_extend_is_leaky_rerope_up_to_rounding(n, w, g):
    # With k = G, Self-Extend's grouped distance minus Leaky ReRoPE's lies in (-1, 2).
    positions = torch.arange(n)
    se = remap.self_extend_relative_positions(positions, group_size=g, neighbor_window=w)
    if g == 1:
        assert torch.equal(se, positions[None, :] - positions[:, None])
        return
    leaky = remap.rerope_relative_positions(positions, window=w, leaky_factor=float(g))
    beyond = (positions[:, None] - positions[None, :]) >= w
    gap = (leaky - se.double())[beyond]          # = (grouped D) - (leaky D)
    assert torch.all((gap > -1) & (gap < 2))


@PROPERTY
@given(n=st.integers(1, 80), s=st.integers(0, 6), r=st.integers(1, 30))
def test_sink_positions_stay_inside_the_cache(n, s, r):
    relative, kept = remap.sink_cache_positions(torch.arange(n), start_size=s,
                                                  recent_size=r)
    assert torch.all(kept.sum(1) <= s + r)
    assert torch.all(relative[kept] <= 0) and torch.all(relative[kept] > -(s + r))
    assert torch.all(relative[~kept] == 0)


# -- against transcriptions of the reference code ------------------------------------

def _tables(theta, count, factor=1.0):
    """cos and sin tables as transformers' rotary embedding builds them (rotate-half)."""
    angles = torch.arange(count, dtype=F64)[:, None] / factor * theta
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _apply(x, cos, sin, position_ids):
    return x * cos[position_ids] + _rotate_half(x) * sin[position_ids]


@pytest.mark.parametrize("window, leak", [(6, None), (6, 2), (3, 4)])
def test_rerope_matches_the_reference_forward(window, leak, generator):
    # bojone/rerope, rerope_patch.py and leaky_rerope_patch.py, prefill (q_len > 1).
    n, dim = 25, 8
    theta = rope.inv_freq(dim, 100.0, dtype=F64)
    q = torch.randn(n, dim, generator=generator, dtype=F64)
    k = torch.randn(n, dim, generator=generator, dtype=F64)
    pos = torch.arange(n)
    if leak is None:
        cos, sin = _tables(theta, max(n, window + 1))
        attn1 = _apply(q, cos, sin, pos) @ _apply(k, cos, sin, pos).T
        attn2 = _apply(q, cos, sin, pos * 0 + window) @ k.T
    else:
        offset = window * (leak - 1)
        cos, sin = _tables(theta, n)
        cos2, sin2 = _tables(theta, n + offset, factor=leak)
        attn1 = _apply(q, cos, sin, pos) @ _apply(k, cos, sin, pos).T
        attn2 = _apply(q, cos2, sin2, pos + offset) @ _apply(k, cos2, sin2, pos).T
    rectified = (pos[:, None] - pos[None]).abs() < window
    reference = torch.where(rectified, attn1, attn2)
    ours = remap.rerope_scores(q, k, theta, window=window,
                                 leaky_factor=None if leak is None else float(leak))
    assert torch.allclose(ours, reference, rtol=0, atol=1e-12)
    if leak is None:
        # Decoding (q_len == 1): keys cached unrotated, rotated by -min(m - n, w).
        rel = (pos[-1] - pos).clip(max=window)
        keys = k * cos[rel] - _rotate_half(k) * sin[rel]
        assert torch.allclose(q[-1] @ keys.T, ours[-1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("group, window", [(4, 8), (3, 7), (2, 30)])
def test_self_extend_matches_the_reference_forward(group, window, generator):
    # datamllab/LongLM, self_extend_patch/Llama_4_40.py (``//`` since commit 715c1e3).
    n, dim = 40, 8
    theta = rope.inv_freq(dim, 100.0, dtype=F64)
    q = torch.randn(n, dim, generator=generator, dtype=F64)
    k = torch.randn(n, dim, generator=generator, dtype=F64)
    cos, sin = _tables(theta, n)
    pos = torch.arange(n)
    shift = 0 if pos.max() < window else window
    group_q, group_k = pos // group + shift - shift // group, pos // group
    neighbour = _apply(q, cos, sin, pos) @ _apply(k, cos, sin, pos).T
    grouped = _apply(q, cos, sin, group_q) @ _apply(k, cos, sin, group_k).T
    mask = torch.tril(torch.ones(n, n))
    if n - window > 0:
        mask[window:, :-window] -= torch.tril(torch.ones(n - window, n - window))
    reference = torch.where(mask.bool(), neighbour, grouped)
    ours = remap.self_extend_scores(q, k, theta, group_size=group, neighbor_window=window)
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    assert torch.allclose(ours[causal], reference[causal], rtol=0, atol=1e-12)
    # Decoding (q_len == 1): the last `window` keys are neighbours.
    last = torch.zeros(n, dtype=torch.bool)
    last[-window:] = True
    decode = torch.where(last, neighbour[-1], grouped[-1])
    assert torch.allclose(ours[-1], decode, rtol=0, atol=1e-12)


@pytest.mark.parametrize("start, recent", [(4, 8), (1, 5), (0, 6)])
def test_sinks_match_a_streaming_decode(start, recent, generator):
    # mit-han-lab/streaming-llm: StartRecentKVCache.evict_for_space keeps the first
    # `start` and the last `recent - 1` cached keys, the new token is appended, keys
    # are rotated at their slots (arange(kv_seq_len)) and the query at the last slot.
    n, dim = 30, 8
    theta = rope.inv_freq(dim, 100.0, dtype=F64)
    q = torch.randn(n, dim, generator=generator, dtype=F64)
    k = torch.randn(n, dim, generator=generator, dtype=F64)
    cos, sin = _tables(theta, n)
    ours = remap.sink_scores(q, k, theta, start_size=start, recent_size=recent)
    cache = []                                   # original indices of cached keys
    for step in range(n):
        if len(cache) + 1 > start + recent:
            cache = cache[:start] + cache[len(cache) - recent + 1:]
        cache.append(step)
        slots = torch.arange(len(cache))
        keys = _apply(k[cache], cos, sin, slots)
        scores = _apply(q[step:step + 1], cos, sin, slots[-1:]) @ keys.T
        row = torch.full((n,), -math.inf, dtype=F64)
        row[cache] = scores[0]
        assert torch.equal(torch.isfinite(ours[step]), torch.isfinite(row)), step
        seen = torch.isfinite(row)
        assert torch.allclose(ours[step][seen], row[seen], rtol=0, atol=1e-12), step


# -- bad input -------------------------------------------------------------------------

@pytest.mark.parametrize("call, name", [
    (lambda: bounds.critical_dimension(7, 1e4, 4096), "dim"),
    (lambda: bounds.critical_dimension(128, 1.0, 4096), "base"),
    (lambda: bounds.critical_dimension(128, 1e4, 0), "train_length"),
    (lambda: bounds.critical_base(4.0, 4096), "train_length"),
    (lambda: bounds.critical_base(4096, 1000), "tune_length"),
    (lambda: bounds.critical_base(4096, 8192, original_base=0.5), "original_base"),
    (lambda: bounds.extrapolation_bound(128, 0.5, 4096), "base"),
    (lambda: bounds.rope_cos_sum([1.0, float("nan")], 8), "distances"),
    (lambda: bounds.rope_cos_sum(3, 5), "dim"),
    (lambda: bounds.rope_supported_length(2, 1e4), "dim"),
    (lambda: bounds.rope_supported_length(8, 1e4, max_length=0), "max_length"),
    (lambda: bounds.rope_base_bound(0), "context_length"),
    (lambda: bounds.rope_base_bound(100, 2), "dim"),
    (lambda: bounds.rope_base_bound(100, lowest=1.0), "lowest"),
    (lambda: bounds.rope_base_bound(100, highest=1.5), "highest"),
    (lambda: temperature.logn_attention_scale([-1], 512), "positions"),
    (lambda: temperature.logn_attention_scale([3], 1), "train_length"),
    (lambda: temperature.attention_entropy(torch.tensor([1, 2])), "scores"),
    (lambda: temperature.attention_entropy(torch.full((3,), -math.inf)), "scores"),
    (lambda: remap.rerope_relative_positions([0, 1], window=0), "window"),
    (lambda: remap.rerope_relative_positions([0, 1], window=2, leaky_factor=1.0),
     "leaky_factor"),
    (lambda: remap.rerope_relative_positions([0, -1], window=2), "query_positions"),
    (lambda: remap.rerope_relative_positions([0, 1], [0.5], window=2), "key_positions"),
    (lambda: remap.self_extend_relative_positions([0, 1], group_size=0,
                                                    neighbor_window=2), "group_size"),
    (lambda: remap.self_extend_relative_positions([0, 1], group_size=2,
                                                    neighbor_window=0), "neighbor_window"),
    (lambda: remap.sink_cache_positions([0, 1], start_size=-1, recent_size=2),
     "start_size"),
    (lambda: remap.sink_cache_positions([0, 1], start_size=1, recent_size=0),
     "recent_size"),
    (lambda: remap.relative_map_scores(torch.ones(3, 4), torch.ones(2, 4),
                                         torch.zeros(2, 3), torch.ones(2)),
     "relative_positions"),
    (lambda: remap.relative_map_scores(torch.ones(3, 4), torch.ones(2, 4),
                                         torch.zeros(3, 2), torch.ones(3)), "q"),
    (lambda: remap.rerope_scores(torch.ones(3, 4), torch.ones(3, 4), torch.ones(2),
                                   window=2, query_positions=[0, 1]), "query_positions"),
    (lambda: remap.self_extend_scores(torch.ones(3, 4), torch.ones(3, 4), torch.ones(2),
                                        group_size=2, neighbor_window=-1),
     "neighbor_window"),
    (lambda: remap.sink_scores(torch.ones(3, 4), torch.ones(3, 5), torch.ones(2),
                                 start_size=1, recent_size=2), "k"),
    (lambda: temperature.random_attention_entropy([0, 4]), "lengths"),
    (lambda: temperature.random_attention_entropy([4], sigma=0.0), "sigma"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


@pytest.mark.parametrize("group, window", [(4, 8), (3, 7), (2, 31), (5, 12)])
def test_self_extend_divide_matches_longlm_prefill(group, window, generator):
    # datamllab/LongLM at cdbbb06, self_extend_patch/Llama.py:132-138 (the
    # prefill path SelfExtend.apply installs for Llama): the group query position
    # is ``query_position // group_size_1 + _re_group_size_2 - _re_group_size_2 /
    # group_size_1``, a float, and the rotary module takes cos and sin of
    # inv_freq * position at that float position.
    n, dim = 40, 8
    theta = rope.inv_freq(dim, 100.0, dtype=F64)
    q = torch.randn(n, dim, generator=generator, dtype=F64)
    k = torch.randn(n, dim, generator=generator, dtype=F64)
    pos = torch.arange(n)
    shift = 0 if pos.max() < window else window
    group_q = pos // group + shift - shift / group

    def rotate(x, positions):
        emb = torch.cat([positions.double()[:, None] * theta] * 2, dim=-1)
        return x * emb.cos() + _rotate_half(x) * emb.sin()

    neighbour = rotate(q, pos) @ rotate(k, pos).T
    grouped = rotate(q, group_q) @ rotate(k, pos // group).T
    mask = torch.tril(torch.ones(n, n))
    mask[window:, :-window] -= torch.tril(torch.ones(n - window, n - window))
    reference = torch.where(mask.bool(), neighbour, grouped)
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    ours = remap.self_extend_scores(q, k, theta, group_size=group,
                                    neighbor_window=window, query_shift="divide")
    assert torch.allclose(ours[causal], reference[causal], rtol=0, atol=1e-12)
    floor = remap.self_extend_scores(q, k, theta, group_size=group, neighbor_window=window)
    # the two codes differ exactly where G does not divide w
    assert torch.allclose(floor[causal], reference[causal], rtol=0, atol=1e-12) == \
        (window % group == 0)
    # the distances: the floor formula's minus the divide code's is (w mod G)/G
    # beyond the window, 0 inside it
    d_floor = remap.self_extend_relative_positions(pos, group_size=group,
                                                   neighbor_window=window)
    d_divide = remap.self_extend_relative_positions(pos, group_size=group,
                                                    neighbor_window=window,
                                                    query_shift="divide")
    beyond = pos[:, None] - pos[None, :] >= window
    gap = d_divide - d_floor.double()
    # (up to the float32 rounding of the group query positions, < 64 here)
    assert torch.all((gap[beyond] - (window % group) / group).abs() <= 64 * 2.0**-24)
    assert torch.all(gap[~beyond] == 0)


@PROPERTY
@given(n=st.integers(2, 60), w=st.integers(1, 40), g=st.integers(2, 9))
def test_self_extend_divide_is_leaky_rerope_within_one(n, w, g):
    # LongLM's prefill shift w - w/G: the grouped distance minus Leaky ReRoPE's
    # with k = G is (⌊m/G⌋ - m/G) - (⌊n/G⌋ - n/G), in (-1, 1)
    positions = torch.arange(n)
    se = remap.self_extend_relative_positions(positions, group_size=g, neighbor_window=w,
                                              query_shift="divide")
    leaky = remap.rerope_relative_positions(positions, window=w, leaky_factor=float(g))
    beyond = (positions[:, None] - positions[None, :]) >= w
    gap = (leaky - se)[beyond]
    assert torch.all((gap > -1 - 1e-12) & (gap < 1 + 1e-12))


def test_self_extend_query_shift_is_checked():
    with pytest.raises(ValueError, match="query_shift"):
        remap.self_extend_relative_positions([3], group_size=2, neighbor_window=2,
                                             query_shift="round")
