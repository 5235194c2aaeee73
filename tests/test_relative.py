"""Relative encodings against naive loops, brute force and transformers' references."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from posenc_lib import absolute, attention, relative

# A grid, plus pairs where computing T5's logarithm in float64 instead of float32
# moves some distance to another bucket (found by a search over both).
T5_PARAMS = [(nb, md) for nb in (2, 3, 4, 5, 6, 8, 10, 16, 31, 32, 64, 128)
             for md in (2, 3, 5, 7, 8, 9, 16, 20, 33, 64, 100, 128, 129, 500, 1000, 4096)
             if md > nb / 2] + [
    (9, 128), (10, 160), (17, 27), (19, 196), (19, 288), (16, 1461),
    (18, 128), (20, 160), (34, 27), (38, 196), (38, 288), (32, 1461)]


def _reference_bucket():
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    return t5.T5Attention._relative_position_bucket


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
            clipped = max(-max_relative_position, min(max_relative_position, j - (offset + i)))
            e = float(q[i] @ (k[j] + table_k[clipped + max_relative_position])) / math.sqrt(d)
            scores.append(e if not causal or j <= offset + i else -math.inf)
        alpha = torch.softmax(torch.tensor(scores, dtype=q.dtype), dim=0)
        for j in range(n_k):
            clipped = max(-max_relative_position, min(max_relative_position, j - (offset + i)))
            z[i] += alpha[j] * (v[j] + table_v[clipped + max_relative_position])
    return z


@pytest.mark.parametrize("n_q, n_k, k_clip, causal", [
    (6, 6, 2, False), (4, 9, 3, False), (5, 5, 0, False), (3, 8, 10, True), (7, 7, 1, True)])
def test_shaw_hooks_equal_the_naive_double_loop(generator, n_q, n_k, k_clip, causal):
    d = 5
    shaw = relative.ShawRelativePosition(k_clip, d, std=1.0, generator=generator).double()
    q = torch.randn(2, n_q, d, generator=generator, dtype=torch.float64)
    k = torch.randn(2, n_k, d, generator=generator, dtype=torch.float64)
    v = torch.randn(2, n_k, d, generator=generator, dtype=torch.float64)
    out = attention.scaled_dot_product_attention(
        q, k, v, score_bias=shaw.score_bias, value_term=shaw.value_term, causal=causal)
    with torch.no_grad():
        for b in range(2):
            expected = _naive_shaw(q[b], k[b], v[b], shaw.table_k, shaw.table_v, k_clip, causal)
            assert torch.allclose(out[b], expected, atol=1e-12)


def test_shaw_inside_multi_head_attention_is_translation_invariant(generator):
    """A window of the sequence, re-encoded from position 0, gives the same scores."""
    torch.manual_seed(0)
    mha = attention.MultiHeadAttention(16, 4).double()
    shaw = relative.ShawRelativePosition(3, 4, std=1.0, generator=generator).double()
    x = torch.randn(1, 20, 16, generator=generator, dtype=torch.float64)
    _, full = mha(x, score_bias=shaw.score_bias, value_term=shaw.value_term,
                  return_weights=True, causal=True)
    for start in (1, 5, 11):
        _, window = mha(x[:, start:], score_bias=shaw.score_bias, value_term=shaw.value_term,
                        return_weights=True, causal=True)
        # Same scores, so the window's weights are the full weights renormalised
        # over the keys that the window keeps.
        kept = full[..., start:, start:]
        assert torch.allclose(window, kept / kept.sum(-1, keepdim=True), atol=1e-12)


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
        assert weights[n_keys - 1 - distance].item() == pytest.approx(bound[distance].item())
    assert bound[:k_clip].tolist() == [1.0] * k_clip
    assert bound[k_clip:].tolist() == [1 / (n_keys - k_clip)] * (n_keys - k_clip)


def test_shaw_parameters_are_shared_by_heads():
    shaw = relative.ShawRelativePosition(8, 64)
    assert sum(p.numel() for p in shaw.parameters()) == 2 * (2 * 8 + 1) * 64


# -- T5 buckets -----------------------------------------------------------------------

@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bucket_matches_transformers_exhaustively(bidirectional):
    reference = _reference_bucket()
    rel = torch.arange(-2000, 2001)
    checked = 0
    for num_buckets, max_distance in T5_PARAMS:
        if bidirectional and num_buckets < 4:
            continue  # transformers divides by zero there
        ours = relative.t5_bucket(rel, bidirectional, num_buckets, max_distance)
        ref = reference(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                        max_distance=max_distance)
        assert torch.equal(ours, ref), (num_buckets, max_distance)
        checked += 1
    assert checked > 100


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
    assert bi[300 - 7: 300 + 8].tolist() == [7, 6, 5, 4, 3, 2, 1, 0, 17, 18, 19, 20, 21, 22, 23]
    assert set(bi[rel <= -128].tolist()) == {15} and set(bi[rel >= 128].tolist()) == {31}
    assert 16 not in bi.tolist()
    causal = relative.t5_bucket(rel, False, 32, 128)
    assert set(causal[rel >= 0].tolist()) == {0}
    assert causal[300 - 15: 301].tolist() == list(range(15, -1, -1))
    assert set(causal[rel <= -128].tolist()) == {31}
    # Never decreasing with the distance, on either side.
    assert torch.all(torch.diff(bi[:301]) <= 0) and torch.all(torch.diff(bi[301:]) >= 0)


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
        if bidirectional and num_buckets < 4:
            continue
        ranges = relative.t5_bucket_ranges(bidirectional, num_buckets, max_distance)
        reach = 2 * max_distance + 2  # beyond it only the two last buckets continue
        brute = _brute_force_ranges(bidirectional, num_buckets, max_distance, reach)
        assert {r.bucket: (r.first, r.last) for r in ranges} == brute, \
            (num_buckets, max_distance)
        assert [r.bucket for r in ranges] == sorted(brute)
        # Each range is contiguous: every position inside maps to its bucket.
        for r in ranges:
            lo = max(r.first, -reach)
            hi = min(r.last, reach)
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
    assert owners == ["decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
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


# -- Transformer-XL -------------------------------------------------------------------

def test_transformer_xl_embedding_matches_transformers_and_permutes_sinusoid():
    txl = pytest.importorskip("transformers.models.deprecated.transfo_xl.modeling_transfo_xl")
    pos_seq = torch.arange(40 - 1, -1, -1.0, dtype=torch.float64)
    ref = txl.PositionalEmbedding(16).double()(pos_seq)[:, 0, :]
    ours = relative.transformer_xl_embedding(pos_seq, 16, dtype=torch.float64)
    assert torch.allclose(ours, ref, atol=1e-12)
    interleaved = absolute.sinusoidal_rows(pos_seq, 16, dtype=torch.float64)
    permutation = list(range(0, 16, 2)) + list(range(1, 16, 2))
    assert torch.equal(ours, interleaved[:, permutation])


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
    pos = relative.TransformerXLRelativePosition(d_model, n_heads, std=0.3, generator=generator,
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
        ref.qkv_net.weight.copy_(torch.cat([mha.w_q.weight, mha.w_k.weight, mha.w_v.weight]))
        ref.o_net.weight.copy_(mha.w_o.weight)
        ref.r_net.weight.copy_(pos.r_net.weight)
        ref.r_w_bias.copy_(pos.r_w_bias)
        ref.r_r_bias.copy_(pos.r_r_bias)
    x = torch.randn(1, qlen, d_model, generator=generator, dtype=torch.float64)
    memory = torch.randn(1, mlen, d_model, generator=generator, dtype=torch.float64)
    klen = qlen + mlen
    r = txl.PositionalEmbedding(d_model)(torch.arange(klen - 1, -1, -1.0))
    # transformers' model passes a (qlen, klen, 1) mask, 1 = hidden.
    mask = torch.triu(torch.ones(qlen, klen, dtype=torch.uint8), diagonal=1 + mlen)[:, :, None]
    with torch.no_grad():
        out_ref, prob_ref = ref(x.transpose(0, 1).float(), r, attn_mask=mask,
                                mems=memory.transpose(0, 1).float(), output_attentions=True)
        out, weights = mha(x, memory=memory, score_bias=pos.score_bias, causal=True,
                           return_weights=True)
    # transformers: probabilities (qlen, klen, bsz, heads); output LayerNorm(x + attention).
    # It runs in float32 (ours in float64), hence the tolerance.
    prob_ref = prob_ref.permute(2, 3, 0, 1).double()
    assert torch.allclose(weights, prob_ref, atol=1e-6)
    assert torch.allclose(ref.layer_norm.double()(x + out), out_ref.transpose(0, 1).double(),
                          atol=1e-5)
    assert (weights - prob_ref).abs().max() > 0  # two computations, not one


def test_transformer_xl_bias_is_translation_invariant(generator):
    """The window test, bidirectional: re-encoding from position 0 changes nothing."""
    mha, pos = _txl_pair(generator, bidirectional=True)
    x = torch.randn(1, 14, 16, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        q, k = mha._split(mha.w_q(x)), mha._split(mha.w_k(x))
        full = pos.score_bias(q, k)
        window = pos.score_bias(q[..., 4:10, :], k[..., 4:10, :])
    assert torch.allclose(window, full[..., 4:10, 4:10], atol=1e-12)


# -- validation -----------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: relative.t5_bucket(torch.arange(3), num_buckets=1), "num_buckets must be >= 2"),
    (lambda: relative.t5_bucket(torch.arange(3), True, 3, 8), "num_buckets must be >= 4"),
    (lambda: relative.t5_bucket(torch.arange(3), True, 32, 16), "max_distance must be >"),
    (lambda: relative.t5_bucket(torch.arange(3), False, 8, 4), "max_distance must be >"),
    (lambda: relative.t5_bucket(torch.arange(3.0)), "relative_position must hold integers"),
    (lambda: relative.t5_bucket(torch.arange(3), bidirectional=1), "bidirectional"),
    (lambda: relative.t5_bucket_ranges(True, 32, 10), "max_distance"),
    (lambda: relative.T5RelativeBias(4, num_buckets=0), "num_buckets"),
    (lambda: relative.T5RelativeBias(0), "n_heads"),
    (lambda: relative.T5RelativeBias(2)(5, 3), "n_k must be >= n_q"),
    (lambda: relative.ShawRelativePosition(-1, 8), "max_relative_position must be >= 0"),
    (lambda: relative.ShawRelativePosition(2, 0), "head_dim"),
    (lambda: relative.shaw_labels(torch.arange(3), -2), "max_relative_position"),
    (lambda: relative.shaw_labels(torch.arange(3.0), 2), "relative_position must be an integer"),
    (lambda: relative.ShawRelativePosition(2, 8).score_bias(torch.zeros(3, 4), torch.zeros(3, 4)),
     "q must have last dimension 8"),
    (lambda: relative.TransformerXLRelativePosition(15, 3), "d_model must be even"),
    (lambda: relative.TransformerXLRelativePosition(16, 3), "divisible"),
    (lambda: relative.TransformerXLRelativePosition(16, 2, base=1.0), "base must be > 1"),
    (lambda: relative.TransformerXLRelativePosition(16, 2).score_bias(
        torch.zeros(1, 3, 4, 8), torch.zeros(1, 3, 4, 8)), "n_heads=2"),
    (lambda: relative.rel_shift(torch.zeros(4, 3)), "at least as many columns"),
    (lambda: relative.relative_positions(0), "n_q must be >= 1"),
])
def test_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()
