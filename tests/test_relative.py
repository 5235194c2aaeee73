"""Relative encodings against naive loops, brute force and published implementations.

References: transformers (T5, Transformer-XL, DeBERTa-v2) and x-transformers
(CoPE, ALiBi), both pinned test dependencies.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from posenc_lib import alibi, attention, relative

# A grid, plus pairs where computing T5's logarithm in float64 instead of float32
# moves some distance to another bucket (found by a search over both).
T5_PARAMS = [(nb, md) for nb in (2, 3, 4, 5, 6, 8, 10, 16, 31, 32, 33, 64, 128)
             for md in (2, 3, 5, 7, 8, 9, 10, 16, 17, 20, 33, 64, 100, 128, 129, 500,
                        1000, 4096)] + [
    (9, 128), (10, 160), (17, 27), (19, 196), (19, 288), (16, 1461),
    (18, 128), (20, 160), (34, 27), (38, 196), (38, 288), (32, 1461)]


def _max_exact(bidirectional: bool, num_buckets: int) -> int:
    """Where T5's exact buckets end: half of the buckets of one direction."""
    return (num_buckets // 2 if bidirectional else num_buckets) // 2


def _valid_t5(bidirectional, num_buckets, max_distance) -> bool:
    exact = _max_exact(bidirectional, num_buckets)
    return exact >= 1 and max_distance > exact


def _reference_bucket():
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    return t5.T5Attention._relative_position_bucket


class _LargestTensor(TorchDispatchMode):
    """Records the largest tensor (in elements) any operation returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(value, torch.Tensor):
                self.largest = max(self.largest, value.numel())
        return out


# -- relative positions and Shaw et al. ----------------------------------------------

def test_relative_positions_put_queries_last():
    rel = relative.relative_positions(3, 7)
    for i, j in itertools.product(range(3), range(7)):
        assert rel[i, j].item() == j - (4 + i)
    assert torch.equal(relative.relative_positions(4), relative.relative_positions(4, 4))


def _naive_shaw(q, k, v, table_k, table_v, max_relative_position, causal=False):
    """Shaw et al.'s equations, one pair at a time, for one head: q (n_q, d)."""
    n_q, n_k, d = q.shape[0], k.shape[0], q.shape[1]
    offset = n_k - n_q
    z = torch.zeros(n_q, v.shape[1], dtype=q.dtype)
    for i in range(n_q):
        scores = []
        for j in range(n_k):
            clipped = max(-max_relative_position,
                          min(max_relative_position, j - (offset + i)))
            e = float(q[i] @ (k[j] + table_k[clipped + max_relative_position]))
            e /= math.sqrt(d)
            scores.append(e if not causal or j <= offset + i else -math.inf)
        alpha = torch.softmax(torch.tensor(scores, dtype=q.dtype), dim=0)
        for j in range(n_k):
            clipped = max(-max_relative_position,
                          min(max_relative_position, j - (offset + i)))
            z[i] += alpha[j] * (v[j] + table_v[clipped + max_relative_position])
    return z


@pytest.mark.parametrize("implementation", relative.SHAW_IMPLEMENTATIONS)
@pytest.mark.parametrize("n_q, n_k, k_clip, causal", [
    (6, 6, 2, False), (4, 9, 3, False), (5, 5, 0, False), (3, 8, 10, True),
    (7, 7, 1, True), (1, 5, 2, False)])
def test_shaw_hooks_equal_the_naive_double_loop(generator, implementation, n_q, n_k,
                                               k_clip, causal):
    d = 5
    shaw = relative.ShawRelativePosition(k_clip, d, implementation=implementation,
                                         std=1.0, generator=generator).double()
    q = torch.randn(2, n_q, d, generator=generator, dtype=torch.float64)
    k = torch.randn(2, n_k, d, generator=generator, dtype=torch.float64)
    v = torch.randn(2, n_k, d, generator=generator, dtype=torch.float64)
    out = attention.scaled_dot_product_attention(
        q, k, v, score_bias=shaw.score_bias, value_term=shaw.value_term, causal=causal)
    with torch.no_grad():
        for b in range(2):
            expected = _naive_shaw(q[b], k[b], v[b], shaw.table_k, shaw.table_v,
                                   k_clip, causal)
            assert torch.allclose(out[b], expected, atol=1e-12)


def test_shaw_tables_are_shared_by_heads(generator):
    """Multi-head queries: every head uses the same table (one call per head agrees)."""
    shaw = relative.ShawRelativePosition(2, 4, std=1.0, generator=generator).double()
    q = torch.randn(3, 2, 6, 4, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        together = shaw.score_bias(q, q)
        for h in range(2):
            assert torch.equal(together[:, h], shaw.score_bias(q[:, h], q[:, h]))


def test_shaw_memory_of_the_three_implementations():
    """Only the gather materialises an (n_q, n_k, d) tensor."""
    n, d, k_clip = 64, 32, 4
    q = torch.randn(1, n, d, generator=torch.Generator().manual_seed(0))
    largest = {}
    for implementation in relative.SHAW_IMPLEMENTATIONS:
        shaw = relative.ShawRelativePosition(k_clip, d, implementation=implementation)
        with torch.no_grad(), _LargestTensor() as mode:
            shaw.score_bias(q, q)
        largest[implementation] = mode.largest
    assert largest["gather"] >= n * n * d
    assert largest["project"] <= n * n          # P is n(2κ+1) < n², the bias n²
    assert largest["skew"] <= n * (2 * n) + n   # padded (n, 2n): n(2n - 1) + n


def test_shaw_labels_and_attainable_weight():
    rel = torch.arange(-6, 7)
    assert relative.shaw_labels(rel, 2).tolist() == [0] * 5 + [1, 2, 3] + [4] * 5
    assert relative.shaw_labels(rel, 0).tolist() == [0] * 13
    # The supremum over tables is approached by a huge score on the target's label.
    n_keys, k_clip = 12, 3
    labels = relative.shaw_labels(relative.relative_positions(1, n_keys)[0], k_clip)
    bound = relative.shaw_attainable_weight(n_keys, k_clip)
    for distance in range(n_keys):
        target = labels[n_keys - 1 - distance]
        weights = torch.softmax(torch.where(labels == target, 60.0, 0.0).double(), dim=0)
        assert weights[n_keys - 1 - distance].item() == pytest.approx(
            bound[distance].item())
    assert bound[:k_clip].tolist() == [1.0] * k_clip
    assert bound[k_clip:].tolist() == [1 / (n_keys - k_clip)] * (n_keys - k_clip)


# -- T5 buckets -----------------------------------------------------------------------

@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bucket_matches_transformers_exhaustively(bidirectional):
    reference = _reference_bucket()
    rel = torch.arange(-2000, 2001)
    checked = 0
    for num_buckets, max_distance in T5_PARAMS:
        if not _valid_t5(bidirectional, num_buckets, max_distance):
            continue
        ours = relative.t5_bucket(rel, bidirectional, num_buckets, max_distance)
        ref = reference(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                        max_distance=max_distance)
        assert torch.equal(ours, ref), (num_buckets, max_distance)
        checked += 1
    assert checked > 150


@settings(max_examples=300, deadline=None, derandomize=True)
@given(bidirectional=st.booleans(), num_buckets=st.integers(2, 200),
       max_distance=st.integers(1, 5000))
def test_t5_bucket_accepts_exactly_the_configurations_transformers_defines(
        bidirectional, num_buckets, max_distance):
    """Valid: identical to transformers. Degenerate: a ValueError naming the parameter."""
    rel = torch.arange(-3 * max_distance - 5, 3 * max_distance + 6)
    if _valid_t5(bidirectional, num_buckets, max_distance):
        ref = _reference_bucket()(rel, bidirectional=bidirectional,
                                  num_buckets=num_buckets, max_distance=max_distance)
        ours = relative.t5_bucket(rel, bidirectional, num_buckets, max_distance)
        assert torch.equal(ours, ref)
    else:
        with pytest.raises(ValueError, match="num_buckets|max_distance"):
            relative.t5_bucket(rel, bidirectional, num_buckets, max_distance)


def test_t5_bucket_examples_from_the_chapter():
    reference = _reference_bucket()
    rel = torch.arange(-40, 41)
    for bidirectional, num_buckets, max_distance in [(True, 32, 10), (True, 32, 9),
                                                     (True, 5, 2), (False, 3, 2)]:
        assert torch.equal(
            relative.t5_bucket(rel, bidirectional, num_buckets, max_distance),
            reference(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                      max_distance=max_distance))
    # Causal (N, D) = (16, 9), (32, 17), (64, 33): the last bucket starts at D itself.
    for num_buckets, max_distance in [(16, 9), (32, 17), (64, 33)]:
        last = relative.t5_bucket_ranges(False, num_buckets, max_distance)[-1]
        assert (last.bucket, -last.last) == (num_buckets - 1, max_distance)


def test_t5_bucket_matches_transformers_on_huge_positions():
    reference = _reference_bucket()
    rel = torch.tensor([-(2 ** 40), -10 ** 7, -10 ** 6 - 1, 10 ** 6, 2 ** 40])
    for bidirectional in (True, False):
        assert torch.equal(relative.t5_bucket(rel, bidirectional),
                           reference(rel, bidirectional=bidirectional))


def test_t5_bucket_semantics_by_hand():
    """Exact small distances, one shared last bucket, causal folding of the right side."""
    rel = torch.arange(-300, 301)
    bi = relative.t5_bucket(rel, True, 32, 128)
    assert bi[300 - 7: 300 + 8].tolist() == [7, 6, 5, 4, 3, 2, 1, 0,
                                             17, 18, 19, 20, 21, 22, 23]
    assert set(bi[rel <= -128].tolist()) == {15} and set(bi[rel >= 128].tolist()) == {31}
    assert 16 not in bi.tolist()
    causal = relative.t5_bucket(rel, False, 32, 128)
    assert set(causal[rel >= 0].tolist()) == {0}
    assert causal[300 - 15: 301].tolist() == list(range(15, -1, -1))
    assert set(causal[rel <= -128].tolist()) == {31}
    # Never decreasing with the distance, on either side.
    assert torch.all(torch.diff(bi[:301]) <= 0) and torch.all(torch.diff(bi[301:]) >= 0)


def _closed_form_start(b, n, n0, max_distance):
    """Smallest integer δ with δ^(N-N0) N0^(b-N0) >= D^(b-N0) N0^(N-N0), exactly."""
    def reached(delta):
        return (delta ** (n - n0) * n0 ** (b - n0)
                >= max_distance ** (b - n0) * n0 ** (n - n0))
    delta = math.ceil(n0 * (max_distance / n0) ** ((b - n0) / (n - n0)))
    while delta > n0 and reached(delta - 1):
        delta -= 1
    while not reached(delta):
        delta += 1
    return delta


def test_t5_closed_form_starts_use_n_minus_max_exact():
    """δ_b = ceil(N0 (D/N0)^((b - N0)/(N - N0))), also for odd N (where N - N0 != N0)."""
    checked = 0
    for per_side, max_distance in itertools.product(range(3, 40, 2),
                                                    (9, 40, 100, 1000, 4096)):
        n0 = per_side // 2
        if max_distance <= n0:
            continue
        ranges = {r.bucket: r for r in relative.t5_bucket_ranges(False, per_side,
                                                                 max_distance)}
        for b in range(n0, per_side):
            start = _closed_form_start(b, per_side, n0, max_distance)
            if b in ranges:
                assert -ranges[b].last == start, (per_side, max_distance, b)
                checked += 1
    assert checked > 300


def _brute_force_ranges(bidirectional, num_buckets, max_distance, reach):
    """Group the relative positions -reach..reach by bucket; +-inf past the search."""
    rel = torch.arange(-reach, reach + 1)
    buckets = relative.t5_bucket(rel, bidirectional, num_buckets, max_distance)
    found = {}
    for r, b in zip(rel.tolist(), buckets.tolist()):
        lo, hi = found.get(b, (r, r))
        found[b] = (min(lo, r), max(hi, r))
    return {b: (-math.inf if lo == -reach else lo, math.inf if hi == reach else hi)
            for b, (lo, hi) in found.items()}


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bucket_ranges_match_brute_force(bidirectional):
    for num_buckets, max_distance in T5_PARAMS:
        if not _valid_t5(bidirectional, num_buckets, max_distance):
            continue
        ranges = relative.t5_bucket_ranges(bidirectional, num_buckets, max_distance)
        reach = 2 * max_distance + 2  # beyond it only the two last buckets continue
        brute = _brute_force_ranges(bidirectional, num_buckets, max_distance, reach)
        assert {r.bucket: (r.first, r.last) for r in ranges} == brute, \
            (num_buckets, max_distance)
        assert [r.bucket for r in ranges] == sorted(brute)
        for r in ranges:  # each range is contiguous
            lo, hi = max(r.first, -reach), min(r.last, reach)
            inside = relative.t5_bucket(torch.arange(lo, hi + 1), bidirectional,
                                        num_buckets, max_distance)
            assert torch.all(inside == r.bucket)


def test_t5_bucket_ranges_handle_empty_buckets_and_huge_max_distance():
    # 8 log buckets squeezed between distances 8 and 10: most are empty.
    ranges = relative.t5_bucket_ranges(False, 16, 10)
    assert len(ranges) < 16
    brute = _brute_force_ranges(False, 16, 10, 40)
    assert {r.bucket: (r.first, r.last) for r in ranges} == brute
    # A huge max_distance costs a bisection, not an enumeration.
    ranges = relative.t5_bucket_ranges(True, 32, 10 ** 9)
    last = ranges[-1]
    assert last.bucket == 31 and last.last == math.inf and 10 ** 7 < last.first < 10 ** 9
    edge = torch.tensor([last.first - 1, last.first])
    assert relative.t5_bucket(edge, True, 32, 10 ** 9).tolist() == [30, 31]


def test_t5_bias_matches_transformers_compute_bias():
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    from transformers import T5Config

    for is_decoder in (False, True):
        config = T5Config(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2,
                          relative_attention_num_buckets=16,
                          relative_attention_max_distance=40, is_decoder=is_decoder)
        ref = t5.T5Attention(config, has_relative_attention_bias=True).double()
        ours = relative.T5RelativeBias(4, num_buckets=16, max_distance=40,
                                       bidirectional=not is_decoder).double()
        with torch.no_grad():
            ours.relative_attention_bias.weight.copy_(ref.relative_attention_bias.weight)
        for n_q, n_k in [(9, 9), (50, 50), (1, 70)]:
            expected = ref.compute_bias(n_k, n_k)[0, :, -n_q:, :]
            assert torch.equal(ours(n_q, n_k), expected)


def test_t5_computes_its_bias_once_and_shares_it_across_layers():
    pytest.importorskip("transformers.models.t5.modeling_t5")
    from transformers import T5Config, T5Model

    torch.manual_seed(0)
    config = T5Config(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=3,
                      relative_attention_num_buckets=8, relative_attention_max_distance=20)
    model = T5Model(config).eval()
    owners = sorted(name for name, _ in model.named_parameters()
                    if "relative_attention_bias" in name)
    assert owners == [
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
    seen = []
    for block in model.encoder.block:
        block.layer[0].register_forward_hook(lambda m, a, out: seen.append(out[1]))
    model.encoder(input_ids=torch.tensor([[3, 1, 4, 1, 5, 9]]))
    # Every layer receives the very same tensor, and it is layer 0's T5RelativeBias.
    assert len(seen) == 3 and all(s is seen[0] for s in seen)
    ours = relative.T5RelativeBias(4, num_buckets=8, max_distance=20)
    with torch.no_grad():
        ours.relative_attention_bias.weight.copy_(
            model.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight)
    assert torch.allclose(ours(6, 6), seen[0][0])


def test_t5_bias_as_hook_in_attention(generator):
    bias = relative.T5RelativeBias(2, num_buckets=8, max_distance=16, std=1.0,
                                   generator=generator).double()
    q = torch.randn(3, 2, 5, 4, generator=generator, dtype=torch.float64)
    k = torch.randn(3, 2, 7, 4, generator=generator, dtype=torch.float64)
    v = torch.randn(3, 2, 7, 4, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        via_hook = attention.scaled_dot_product_attention(q, k, v, score_bias=bias.score_bias)
        via_module = attention.scaled_dot_product_attention(q, k, v, score_bias=bias)
        via_tensor = attention.scaled_dot_product_attention(q, k, v, score_bias=bias(5, 7))
        table = bias.relative_attention_bias.weight
        manual = torch.empty(2, 5, 7, dtype=torch.float64)
        for h, i, j in itertools.product(range(2), range(5), range(7)):
            b = relative.t5_bucket(torch.tensor(j - (2 + i)), True, 8, 16)
            manual[h, i, j] = table[b, h]
    assert torch.equal(via_hook, via_tensor) and torch.equal(via_module, via_tensor)
    assert torch.allclose(via_tensor, attention.scaled_dot_product_attention(
        q, k, v, score_bias=manual))


def test_t5_buckets_match_x_transformers():
    xt = pytest.importorskip("x_transformers.x_transformers")
    rel = torch.arange(-600, 601)
    for causal in (True, False):
        ref = xt.RelativePositionBias._relative_position_bucket(
            rel, causal=causal, num_buckets=32, max_distance=128)
        assert torch.equal(relative.t5_bucket(rel, not causal, 32, 128), ref)


# -- Transformer-XL -------------------------------------------------------------------

def test_transformer_xl_embedding_matches_transformers_and_the_formula():
    txl = pytest.importorskip("transformers.models.deprecated.transfo_xl.modeling_transfo_xl")
    pos_seq = torch.arange(40 - 1, -1, -1.0, dtype=torch.float64)
    ref = txl.PositionalEmbedding(16).double()(pos_seq)[:, 0, :]
    ours = relative.transformer_xl_embedding(pos_seq, 16, dtype=torch.float64)
    assert torch.allclose(ours, ref, atol=1e-12)
    for t, i in itertools.product((0.0, 3.0, 39.0), range(8)):
        omega = 10000.0 ** (-2 * i / 16)
        row = ours[39 - int(t)]
        assert row[i].item() == pytest.approx(math.sin(t * omega), abs=1e-12)
        assert row[8 + i].item() == pytest.approx(math.cos(t * omega), abs=1e-12)


def _naive_gather(x_by_distance, n_q, n_k):
    """out[i, j] = the column of x for distance i' - j, with i' = n_k - n_q + i."""
    out = torch.empty(*x_by_distance.shape[:-1], n_k, dtype=x_by_distance.dtype)
    n_r = x_by_distance.shape[-1]
    for i, j in itertools.product(range(n_q), range(n_k)):
        distance = n_k - n_q + i - j
        out[..., i, j] = x_by_distance[..., i, n_r - 1 - distance] if distance >= 0 \
            else float("nan")
    return out


@pytest.mark.parametrize("n_q, mem_len", [(1, 0), (5, 0), (5, 3), (4, 11), (6, 1)])
def test_rel_shift_equals_a_naive_gather(generator, n_q, mem_len):
    n_k = n_q + mem_len
    x = torch.randn(2, 3, n_q, n_k, generator=generator, dtype=torch.float64)
    shifted = relative.rel_shift(x)
    naive = _naive_gather(x, n_q, n_k)
    causal = attention.causal_mask(n_q, n_k)
    assert torch.equal(shifted[..., causal], naive[..., causal])
    # Just right of the causal region, the padded zero; beyond, another row's entries.
    for i in range(n_q):
        if mem_len + i + 1 < n_k:
            assert torch.all(shifted[..., i, mem_len + i + 1] == 0)


def test_rel_shift_is_pad_reshape_drop_of_transformers(generator):
    txl = pytest.importorskip("transformers.models.deprecated.transfo_xl.modeling_transfo_xl")
    layer = txl.RelPartialLearnableMultiHeadAttn(2, 8, 4, 0.0)
    x = torch.randn(5, 9, 2, 3, generator=generator)  # transformers: (qlen, klen, bsz, heads)
    ours = relative.rel_shift(x.permute(2, 3, 0, 1)).permute(2, 3, 0, 1)
    assert torch.equal(ours, layer._rel_shift(x))


def _txl_pair(generator, d_model=16, n_heads=2, bidirectional=False):
    torch.manual_seed(0)
    mha = attention.MultiHeadAttention(d_model, n_heads).double()
    pos = relative.TransformerXLRelativePosition(d_model, n_heads, std=0.3,
                                                 generator=generator,
                                                 bidirectional=bidirectional).double()
    return mha, pos


@pytest.mark.parametrize("bidirectional", [False, True])
def test_transformer_xl_four_terms_equal_the_shifted_score(generator, bidirectional):
    _, pos = _txl_pair(generator, bidirectional=bidirectional)
    n_q, mem_len = 6, 4
    q = torch.randn(3, 2, n_q, 8, generator=generator, dtype=torch.float64)
    k = torch.randn(3, 2, n_q + mem_len, 8, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        terms = pos.terms(q, k)
        bias = pos.score_bias(q, k)
        expanded = torch.empty_like(bias)
        u, v, w_r = pos.r_w_bias, pos.r_r_bias, pos.r_net.weight.view(2, 8, 16)
        for i, j in itertools.product(range(n_q), range(n_q + mem_len)):
            r = relative.transformer_xl_embedding(torch.tensor(mem_len + i - j), 16,
                                                  dtype=torch.float64)
            for h in range(2):
                # The product form: (q + u)·k + (q + v)·W_R R, minus the content term q·k.
                full = ((q[:, h, i] + u[h]) * k[:, h, j]).sum(-1) + \
                    ((q[:, h, i] + v[h]) * (w_r[h] @ r)).sum(-1)
                expanded[:, h, i, j] = full - (q[:, h, i] * k[:, h, j]).sum(-1)
    total = sum(terms.values())
    assert torch.allclose(total, terms["a"] + expanded, atol=1e-12)
    assert torch.allclose(terms["a"], q @ k.transpose(-1, -2))
    region = torch.ones(n_q, n_q + mem_len, dtype=torch.bool) if bidirectional \
        else attention.causal_mask(n_q, n_q + mem_len)
    scaled = (terms["b"] + terms["c"] + terms["d"]) / math.sqrt(8)
    assert torch.allclose(bias[..., region], scaled[..., region], atol=1e-12)


def test_transformer_xl_matches_transformers_with_memory(generator):
    txl = pytest.importorskip("transformers.models.deprecated.transfo_xl.modeling_transfo_xl")
    d_model, n_heads, head_dim, qlen, mlen = 16, 2, 8, 5, 3
    mha, pos = _txl_pair(generator, d_model, n_heads)
    # transformers' layer masks with float64's minimum cast to float32: run it in float32.
    ref = txl.RelPartialLearnableMultiHeadAttn(n_heads, d_model, head_dim, 0.0).eval()
    with torch.no_grad():
        ref.qkv_net.weight.copy_(torch.cat([mha.w_q.weight, mha.w_k.weight,
                                            mha.w_v.weight]))
        ref.o_net.weight.copy_(mha.w_o.weight)
        ref.r_net.weight.copy_(pos.r_net.weight)
        ref.r_w_bias.copy_(pos.r_w_bias)
        ref.r_r_bias.copy_(pos.r_r_bias)
    x = torch.randn(1, qlen, d_model, generator=generator, dtype=torch.float64)
    memory = torch.randn(1, mlen, d_model, generator=generator, dtype=torch.float64)
    klen = qlen + mlen
    r = txl.PositionalEmbedding(d_model)(torch.arange(klen - 1, -1, -1.0))
    # transformers' model passes a (qlen, klen, 1) mask, 1 = hidden.
    mask = torch.triu(torch.ones(qlen, klen, dtype=torch.uint8),
                      diagonal=1 + mlen)[:, :, None]
    with torch.no_grad():
        out_ref, prob_ref = ref(x.transpose(0, 1).float(), r, attn_mask=mask,
                                mems=memory.transpose(0, 1).float(),
                                output_attentions=True)
        out, weights = mha(x, memory=memory, score_bias=pos.score_bias, causal=True,
                           return_weights=True)
    # transformers: probabilities (qlen, klen, bsz, heads); output LayerNorm(x + attn).
    # It runs in float32 (ours in float64): tolerances of float32 rounding.
    prob_ref = prob_ref.permute(2, 3, 0, 1).double()
    assert torch.allclose(weights, prob_ref, atol=1e-6)
    assert torch.allclose(ref.layer_norm.double()(x + out),
                          out_ref.transpose(0, 1).double(), atol=1e-5)


def test_transformer_xl_bias_is_translation_invariant(generator):
    """The window test, bidirectional: re-encoding from position 0 changes nothing."""
    mha, pos = _txl_pair(generator, bidirectional=True)
    x = torch.randn(1, 14, 16, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        q, k = mha._split(mha.w_q(x)), mha._split(mha.w_k(x))
        full = pos.score_bias(q, k)
        window = pos.score_bias(q[..., 4:10, :], k[..., 4:10, :])
    assert torch.allclose(window, full[..., 4:10, 4:10], atol=1e-12)


# -- DeBERTa and TUPE ---------------------------------------------------------------

def test_deberta_matches_transformers_disentangled_attention(generator):
    deberta = pytest.importorskip("transformers.models.deberta_v2.modeling_deberta_v2")
    from transformers import DebertaV2Config

    k_max, n_heads, d_model, n = 4, 2, 16, 11
    config = DebertaV2Config(hidden_size=d_model, num_attention_heads=n_heads,
                             relative_attention=True, max_relative_positions=k_max,
                             position_buckets=-1, pos_att_type=["c2p", "p2c"],
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    ref = deberta.DisentangledSelfAttention(config).eval().double()
    x = torch.randn(1, n, d_model, generator=generator, dtype=torch.float64)
    rel_embeddings = torch.randn(2 * k_max, d_model, generator=generator,
                                 dtype=torch.float64)
    q = ref.transpose_for_scores(ref.query_proj(x), n_heads)       # (h, n, d)
    k = ref.transpose_for_scores(ref.key_proj(x), n_heads)
    ours = relative.DisentangledRelativePosition(k_max, n_heads, d_model // n_heads)
    ours = ours.double()
    with torch.no_grad():
        expected = ref.disentangled_attention_bias(
            q, k, deberta.build_relative_position(q, k), rel_embeddings, 3)
        pos_key = ref.transpose_for_scores(ref.pos_key_proj(rel_embeddings[None]),
                                           n_heads)
        pos_query = ref.transpose_for_scores(ref.pos_query_proj(rel_embeddings[None]),
                                             n_heads)
        ours.pos_key.copy_(pos_key)
        ours.pos_query.copy_(pos_query)
        got = ours.score_bias(q, k)
    # transformers takes sqrt(3d) in float32; relative rounding 2**-24 of the scale.
    assert torch.allclose(got, expected, rtol=1e-6, atol=1e-12)


def test_deberta_index_and_the_papers_p2c_index_differ(generator):
    """transformers indexes p2c by δ(i, j), the paper's Eq. 4 writes δ(j, i)."""
    ours = relative.DisentangledRelativePosition(3, 1, 4, std=1.0,
                                                generator=generator).double()
    q = torch.randn(1, 1, 7, 4, generator=generator, dtype=torch.float64)
    k = torch.randn(1, 1, 7, 4, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        terms = ours.terms(q, k)
        for i, j in itertools.product(range(7), range(7)):
            delta_ij = min(max(i - j + 3, 0), 5)
            assert terms["c2p"][0, 0, i, j].item() == pytest.approx(
                (q[0, 0, i] @ ours.pos_key[0, delta_ij]).item(), abs=1e-12)
            assert terms["p2c"][0, 0, i, j].item() == pytest.approx(
                (k[0, 0, j] @ ours.pos_query[0, delta_ij]).item(), abs=1e-12)


def test_tupe_equals_its_formula_with_the_cls_reset(generator):
    tupe = relative.UntiedPositionBias(12, 8, 2, std=1.0, generator=generator).double()
    n_q, n_k = 4, 9
    with torch.no_grad():
        got = tupe(n_q, n_k)
        p = tupe.position_embeddings
        u_q = tupe.u_q.weight.view(2, 4, 8)
        u_k = tupe.u_k.weight.view(2, 4, 8)
        for h, i, j in itertools.product(range(2), range(n_q), range(n_k)):
            position = n_k - n_q + i
            if position == 0:
                expected = tupe.cls_theta[h, 0]
            elif j == 0:
                expected = tupe.cls_theta[h, 1]
            else:
                expected = (u_q[h] @ p[position]) @ (u_k[h] @ p[j]) / math.sqrt(8)
            assert got[h, i, j].item() == pytest.approx(expected.item(), abs=1e-12)
        cls_rows = tupe(n_k, n_k)
        assert torch.equal(cls_rows[:, 0, :], tupe.cls_theta[:, :1].expand(2, n_k))


# -- Kerple, FIRE and CoPE -----------------------------------------------------------

@pytest.mark.parametrize("kernel", relative.KERPLE_KERNELS)
def test_kerple_equals_its_formula(kernel):
    r1, r2 = [0.5, 1.5, 2.0], [0.3, 1.0, 1.9]
    got = relative.kerple_bias(torch.tensor(r1), torch.tensor(r2), 4, 7, kernel=kernel)
    for h, i, j in itertools.product(range(3), range(4), range(7)):
        distance = abs(j - (3 + i))
        expected = -r1[h] * distance ** r2[h] if kernel == "power" \
            else -r1[h] * math.log(1 + r2[h] * distance)
        assert got[h, i, j].item() == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_kerple_power_one_is_alibi_as_in_x_transformers():
    xt = pytest.importorskip("x_transformers.x_transformers")
    n_heads, n = 8, 12
    slopes = alibi.alibi_slopes(n_heads, dtype=torch.float64)
    ours = relative.kerple_bias(slopes, 1.0, n, kernel="power", dtype=torch.float64)
    ref = xt.AlibiPositionalBias(heads=n_heads, total_heads=n_heads)(n, n).double()
    causal = attention.causal_mask(n)
    # x-transformers keeps its slopes in float32.
    assert torch.allclose(ours[:, causal], ref[:, causal], rtol=1e-6, atol=0)
    assert torch.allclose(ours[:, causal], alibi.alibi_bias(n_heads, n)[:, causal].double())


@settings(max_examples=60, deadline=None, derandomize=True)
@given(r1=st.floats(0.01, 10.0), r2=st.floats(0.05, 2.0),
       kernel=st.sampled_from(relative.KERPLE_KERNELS))
def test_kerple_kernels_are_conditionally_positive_definite(r1, r2, kernel):
    """cᵀ B c >= 0 whenever Σ c = 0: the eigenvalues of P B P are >= -tolerance."""
    n = 24
    bias = relative.kerple_bias(r1, r2, n, kernel=kernel, dtype=torch.float64)[0]
    centre = torch.eye(n, dtype=torch.float64) - 1.0 / n
    eigenvalues = torch.linalg.eigvalsh(centre @ bias @ centre)
    tolerance = 64 * n * torch.finfo(torch.float64).eps * bias.abs().max().item()
    assert eigenvalues.min().item() >= -tolerance


def test_kerple_power_above_two_is_not_conditionally_positive_definite():
    """Why r2 <= 2: -|x|^3 fails the condition (so the library refuses r2 > 2)."""
    n = 24
    distance = relative.relative_positions(n).abs().double()
    centre = torch.eye(n, dtype=torch.float64) - 1.0 / n
    assert torch.linalg.eigvalsh(centre @ (-distance ** 3) @ centre).min() < -1.0
    with pytest.raises(ValueError, match="r2 must be <= 2"):
        relative.kerple_bias(1.0, 3.0, n, kernel="power")


def test_fire_equals_the_papers_formula(generator):
    fire = relative.FIREBias(3, mlp_width=8, init_c=0.3, init_L=6.0,
                             generator=generator).double()
    with torch.no_grad():
        fire.L_multiplier.fill_(1.5)   # L = 9
        got = fire(5, 14)
        for i, j in itertools.product(range(5), range(14)):
            position = 14 - 5 + i
            x = math.log(abs(0.3 * (position - j)) + 1) / (
                math.log(abs(0.3 * max(position, 9.0)) + 1) + 1e-6)
            expected = fire.mlp(torch.tensor([x], dtype=torch.float64))
            assert torch.allclose(got[:, i, j], expected, atol=1e-12)


def test_fire_contains_t5_and_alibi(generator):
    """With L >= every position, f = g∘ψ⁻¹(·Z) turns FIRE into any g(i - j)."""
    n, c, threshold, eps = 40, 0.1, 64.0, 1e-6
    scale = math.log(c * threshold + 1) + eps          # the constant normaliser Z

    def distance_of(x):                                # ψ⁻¹(x·Z), rounded
        return torch.round(torch.expm1(x * scale) / c)

    slopes = alibi.alibi_slopes(4, dtype=torch.float64)
    as_alibi = relative.fire_bias(lambda x: -slopes * distance_of(x), n, c=c,
                                  threshold=threshold, eps=eps, dtype=torch.float64)
    causal = attention.causal_mask(n)
    assert torch.allclose(as_alibi[:, causal], alibi.alibi_bias(4, n)[:, causal].double())
    t5 = relative.T5RelativeBias(4, num_buckets=16, max_distance=20, bidirectional=False,
                                 std=1.0, generator=generator).double()

    def t5_like(x):
        buckets = relative.t5_bucket(-distance_of(x[..., 0]).long(), False, 16, 20)
        return t5.relative_attention_bias(buckets)

    with torch.no_grad():
        as_t5 = relative.fire_bias(t5_like, n, c=c, threshold=threshold, eps=eps,
                                   dtype=torch.float64)
        assert torch.equal(as_t5[:, causal], t5(n)[:, causal])


def test_fire_inputs_stay_in_the_unit_interval_beyond_the_threshold():
    x = relative.fire_normalized_distance(300, c=0.1, threshold=32.0,
                                          dtype=torch.float64)
    causal = attention.causal_mask(300)
    assert x[causal].min() >= 0 and x[causal].max() <= 1
    # Below the threshold the value depends on i - j alone; beyond, not.
    assert torch.equal(x[10, 5], x[20, 15])
    assert x[200, 100] != x[250, 150]


def test_cope_positions_count_the_gates():
    gates = torch.tensor([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [1.0, 0.25, 1.0]])
    assert torch.equal(relative.cope_positions(gates),
                       torch.tensor([[1.0, 0.0, 0.0], [1.5, 1.0, 0.0],
                                     [2.25, 1.25, 1.0]]))
    ones = attention.causal_mask(6).double()
    expected = (-relative.relative_positions(6) + 1).clamp_min(0).double()
    assert torch.equal(relative.cope_positions(ones), expected)


@pytest.mark.parametrize("n_q, n_k, npos_max", [(7, 7, 4), (3, 10, 16), (1, 5, 3)])
def test_cope_matches_x_transformers(generator, n_q, n_k, npos_max):
    xt = pytest.importorskip("x_transformers.x_transformers")
    head_dim, n_heads = 8, 2
    ours = relative.ContextualPosition(head_dim, npos_max, std=1.0,
                                       generator=generator).double()
    ref = xt.CoPE(dim=head_dim, heads=n_heads, max_pos=npos_max).double()
    q = 2 * torch.randn(2, n_heads, n_q, head_dim, generator=generator,
                        dtype=torch.float64)
    k = 2 * torch.randn(2, n_heads, n_k, head_dim, generator=generator,
                        dtype=torch.float64)
    logits = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
    hidden = ~attention.causal_mask(n_q, n_k)
    logits = logits.masked_fill(hidden, -torch.finfo(logits.dtype).max)
    with torch.no_grad():
        ref.pos_emb.copy_(ours.pos_emb)
        assert torch.allclose(ours.score_bias(q, k), ref(q, logits), atol=1e-12)


def test_cope_equals_a_literal_loop(generator):
    cope = relative.ContextualPosition(4, 5, std=1.0, generator=generator).double()
    q = 3 * torch.randn(6, 4, generator=generator, dtype=torch.float64)
    k = 3 * torch.randn(6, 4, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        got = cope.score_bias(q, k)
        for i, j in itertools.product(range(6), range(6)):
            if j > i:
                continue
            p = sum(torch.sigmoid(q[i] @ k[t] / 2).item() for t in range(j, i + 1))
            p = min(p, 4.0)
            lo, hi = math.floor(p), math.ceil(p)
            e = cope.pos_emb[lo] * (1 - (p - lo)) + cope.pos_emb[hi] * (p - lo)
            assert got[i, j].item() == pytest.approx((q[i] @ e).item(), abs=1e-12)


# -- validation -----------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: relative.t5_bucket(torch.arange(3), num_buckets=1), "num_buckets must be >= 2"),
    (lambda: relative.t5_bucket(torch.arange(3), True, 3, 8), "num_buckets must be >= 4"),
    (lambda: relative.t5_bucket(torch.arange(3), True, 32, 8), "max_distance must be > 8"),
    (lambda: relative.t5_bucket(torch.arange(3), False, 8, 4), "max_distance must be > 4"),
    (lambda: relative.t5_bucket(torch.arange(3.0)), "relative_position must hold integers"),
    (lambda: relative.t5_bucket(torch.arange(3), bidirectional=1), "bidirectional"),
    (lambda: relative.t5_bucket_ranges(True, 32, 8), "max_distance"),
    (lambda: relative.T5RelativeBias(4, num_buckets=0), "num_buckets"),
    (lambda: relative.T5RelativeBias(0), "n_heads"),
    (lambda: relative.T5RelativeBias(2)(5, 3), "n_k must be >= n_q"),
    (lambda: relative.ShawRelativePosition(-1, 8), "max_relative_position must be >= 0"),
    (lambda: relative.ShawRelativePosition(2, 0), "head_dim"),
    (lambda: relative.ShawRelativePosition(2, 8, implementation="fast"), "implementation"),
    (lambda: relative.shaw_labels(torch.arange(3), -2), "max_relative_position"),
    (lambda: relative.shaw_labels(torch.arange(3.0), 2),
     "relative_position must be an integer"),
    (lambda: relative.ShawRelativePosition(2, 8).score_bias(torch.zeros(3, 4),
                                                            torch.zeros(3, 4)),
     "q must have last dimension 8"),
    (lambda: relative.TransformerXLRelativePosition(15, 3), "d_model must be even"),
    (lambda: relative.TransformerXLRelativePosition(16, 3), "divisible"),
    (lambda: relative.TransformerXLRelativePosition(16, 2, base=1.0), "base must be > 1"),
    (lambda: relative.TransformerXLRelativePosition(16, 2).score_bias(
        torch.zeros(1, 3, 4, 8), torch.zeros(1, 3, 4, 8)), "n_heads=2"),
    (lambda: relative.rel_shift(torch.zeros(4, 3)), "at least as many columns"),
    (lambda: relative.relative_positions(0), "n_q must be >= 1"),
    (lambda: relative.deberta_relative_index(torch.arange(3), 0),
     "max_relative_positions must be >= 1"),
    (lambda: relative.DisentangledRelativePosition(2, 2, 4).score_bias(
        torch.zeros(1, 3, 4, 4), torch.zeros(1, 3, 4, 4)), "n_heads=2"),
    (lambda: relative.UntiedPositionBias(8, 16, 2)(4, 9), "max_position_embeddings"),
    (lambda: relative.UntiedPositionBias(8, 15, 2), "divisible"),
    (lambda: relative.kerple_bias(1.0, 0.5, 4, kernel="cubic"), "kernel"),
    (lambda: relative.kerple_bias(-1.0, 0.5, 4), "r1 must be positive"),
    (lambda: relative.kerple_bias(1.0, [0.5, float("nan")], 4), "r2 must be positive"),
    (lambda: relative.kerple_bias([1.0, 2.0], [0.5, 0.5, 0.5], 4), "one value per head"),
    (lambda: relative.fire_normalized_distance(4, c=0.0), "c must be positive"),
    (lambda: relative.fire_normalized_distance(4, threshold=-1.0), "threshold"),
    (lambda: relative.fire_bias(3, 4), "f must be callable"),
    (lambda: relative.fire_bias(lambda x: x[..., 0], 4), "f must map"),
    (lambda: relative.FIREBias(0), "n_heads"),
    (lambda: relative.FIREBias(2, init_L=0.0), "init_L"),
    (lambda: relative.ContextualPosition(4, 0), "npos_max"),
    (lambda: relative.ContextualPosition(4, 3).score_bias(torch.zeros(5, 4),
                                                          torch.zeros(3, 4)),
     "n_k must be >= n_q"),
    (lambda: relative.cope_positions(torch.ones(3, 3, dtype=torch.long)), "gates"),
])
def test_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()
