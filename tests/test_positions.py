"""Positions in a running model, checked against transformers' own model code.

Every equivalence of chapter 8 runs here on tiny, randomly initialised models
built from configs (Llama, GPT-2, Phi-3, Qwen2-VL from transformers 4.57.6):
padded batches, packed documents, the KV cache, re-rotated keys, dynamic NTK
and LongRoPE during generation, and M-RoPE's ``rope_deltas``. Property tests
(hypothesis) draw random masks, document lengths and shifts.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from posenc_lib import multidim, positions, rope, scaling  # noqa: E402

transformers = pytest.importorskip("transformers")
transformers.logging.set_verbosity_error()
from transformers.cache_utils import DynamicCache  # noqa: E402

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True)
MODEL_PROPERTY = settings(max_examples=5, deadline=None, derandomize=True)
U32 = 2.0 ** -24                     # float32 unit roundoff
F64_TOL = 1e-10                      # float64 results of a few thousand operations

# -- tiny models --------------------------------------------------------------------

TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, initializer_range=0.2,
            pad_token_id=0, bos_token_id=1, eos_token_id=63)


def _llama(**overrides):
    """A fresh tiny Llama in float64 with SDPA attention (weights seeded)."""
    config = transformers.LlamaConfig(**{**TINY, "max_position_embeddings": 64,
                                         "attn_implementation": "sdpa", **overrides})
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).double().eval()


@functools.lru_cache(maxsize=1)
def _shared_llama():
    """The plain-RoPE Llama, shared by tests that do not change its state."""
    return _llama()


def _tokens(n, seed, vocab=64):
    return torch.randint(2, vocab - 1, (n,), generator=torch.Generator().manual_seed(seed))


def _left_padded(seqs, pad=0):
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, width - len(s):], mask[b, width - len(s):] = s, 1
    return ids, mask


class _Float64Rotary(torch.nn.Module):
    """LlamaRotaryEmbedding's interface, with angles computed in float64."""

    def __init__(self, inv_freq):
        super().__init__()
        self.inv_freq = inv_freq

    def forward(self, x, position_ids):
        cos, sin = rope.cos_sin(position_ids, self.inv_freq)
        return cos.to(x.dtype), sin.to(x.dtype)


def _rotation_tol(x, *max_positions):
    """Float32 rotation error bound (chapter 4's rounding lemma), summed over computations.

    A float32 angle ``m·θ`` (``θ <= 1``, itself rounded) is off by at most about
    ``4u·m``, cos and sin add ``2u``; a pair moves by its norm times the angle error.
    """
    angle = sum(4 * U32 * m + 2 * U32 for m in max_positions)
    return math.sqrt(2) * x.abs().max().item() * angle


def _layer0_keys(model, ids):
    """Unrotated layer-0 keys ``(batch, kv_heads, seq, head_dim)``, computed by hand."""
    layer = model.model.layers[0]
    hidden = layer.input_layernorm(model.model.embed_tokens(ids))
    heads = model.config.num_key_value_heads
    return layer.self_attn.k_proj(hidden).unflatten(-1, (heads, -1)).transpose(1, 2)


# -- position_ids_from_mask ---------------------------------------------------------


def _positions_by_loop(mask):
    """Count the real tokens before each slot, one slot at a time; padding gets 1."""
    out = torch.ones(mask.shape, dtype=torch.long)
    for b in range(mask.shape[0]):
        seen = 0
        for j in range(mask.shape[1]):
            if mask[b, j]:
                out[b, j] = seen
                seen += 1
    return out


masks = st.integers(1, 4).flatmap(lambda b: st.integers(1, 12).flatmap(
    lambda n: st.lists(st.lists(st.integers(0, 1), min_size=n, max_size=n),
                       min_size=b, max_size=b))).map(lambda rows: torch.tensor(rows))


@PROPERTY
@given(masks)
def test_position_ids_from_mask_counts_real_tokens(mask):
    ours = positions.position_ids_from_mask(mask)
    assert ours.dtype == torch.int64
    assert torch.equal(ours, _positions_by_loop(mask))
    for dtype in (torch.bool, torch.float32, torch.int32):
        assert torch.equal(positions.position_ids_from_mask(mask.to(dtype)), ours)


@MODEL_PROPERTY
@given(masks)
def test_position_ids_match_transformers_generation(mask):
    """GenerationMixin.prepare_inputs_for_generation builds the same ids from the mask."""
    model = _shared_llama()
    ids = torch.ones(mask.shape, dtype=torch.long)
    inputs = model.prepare_inputs_for_generation(ids, attention_mask=mask,
                                                 cache_position=torch.arange(mask.shape[1]))
    assert torch.equal(positions.position_ids_from_mask(mask), inputs["position_ids"])


@pytest.mark.parametrize("bad, message", [
    (torch.tensor([[0, 2, 1]]), "0 \\(padding\\) and 1"),
    (torch.tensor([[0.5, 1.0]]), "0 \\(padding\\) and 1"),
    (torch.tensor([1, 1, 0]), "2-D"),
    (torch.ones(1, 2, 3), "2-D"),
    ([[1, 1]], "torch.Tensor"),
])
def test_position_ids_from_mask_rejects_bad_masks(bad, message):
    with pytest.raises(ValueError, match="attention_mask") as error:
        positions.position_ids_from_mask(bad)
    assert error.match(message)


# -- padding: transformers' models --------------------------------------------------


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_batch_equals_each_sequence_alone(side):
    model = _shared_llama()
    seqs = [_tokens(n, seed) for seed, n in enumerate((7, 3, 5, 1))]
    ids, mask = _left_padded(seqs)
    if side == "right":
        ids, mask = ids.flip(-1), mask.flip(-1)
        seqs = [s.flip(0) for s in seqs]
    with torch.no_grad():
        batch = model(ids, attention_mask=mask,
                      position_ids=positions.position_ids_from_mask(mask)).logits
        for b, s in enumerate(seqs):
            alone = model(s[None]).logits[0]
            assert (batch[b][mask[b] == 1] - alone).abs().max() < F64_TOL


def test_arange_positions_with_left_padding_are_a_shift():
    """Naive arange gives row b the positions P_b, P_b + 1, ...: a shift by its padding.

    With RoPE a shift changes nothing but rounding: exactly nothing once the
    angles are computed in float64, and about float32's resolution with
    transformers' float32 angles. With learned absolute positions (GPT-2) it
    changes the logits at order 1.
    """
    model = _shared_llama()
    seqs = [_tokens(n, 10 + n) for n in (9, 2, 6)]
    ids, mask = _left_padded(seqs)
    width = ids.shape[1]
    with torch.no_grad():
        naive = model(ids, attention_mask=mask).logits[:, -1]          # arange positions
        for b, s in enumerate(seqs):
            pad = width - len(s)
            shifted = model(s[None], position_ids=torch.arange(pad, width)[None]).logits[0, -1]
            assert (naive[b] - shifted).abs().max() < F64_TOL
        scrambled = model(seqs[0][None], position_ids=torch.arange(9).flip(0)[None]).logits
        sensitivity = (scrambled[0, -1] - model(seqs[0][None]).logits[0, -1]).abs().max()
        assert sensitivity > 0.1                                      # positions matter
        exact = _llama()
        exact.model.rotary_emb = _Float64Rotary(rope.inv_freq(8, dtype=torch.float64))
        for b, s in enumerate(seqs):
            pad = width - len(s)
            at_zero = exact(s[None]).logits[0, -1]
            moved = exact(s[None], position_ids=torch.arange(pad, width)[None]).logits[0, -1]
            assert (at_zero - moved).abs().max() < F64_TOL


def test_gpt2_needs_position_ids_from_the_mask():
    config = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4,
                                     n_positions=64, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).double().eval()
    seqs = [_tokens(n, 20 + n) for n in (8, 3)]
    ids, mask = _left_padded(seqs)
    with torch.no_grad():
        right = model(ids, attention_mask=mask,
                      position_ids=positions.position_ids_from_mask(mask)).logits[:, -1]
        naive = model(ids, attention_mask=mask).logits[:, -1]
        alone = torch.stack([model(s[None]).logits[0, -1] for s in seqs])
    assert (right - alone).abs().max() < F64_TOL
    assert (naive[1] - alone[1]).abs().max() > 0.01        # the padded row is wrong
    assert (naive[0] - alone[0]).abs().max() < F64_TOL     # the unpadded row is not


def test_generate_on_a_left_padded_batch_matches_each_prompt_alone():
    """generate() builds position ids from the mask and extends them while decoding."""
    model = _shared_llama()
    seqs = [_tokens(n, 30 + n) for n in (6, 2, 4)]
    ids, mask = _left_padded(seqs)
    options = dict(max_new_tokens=5, do_sample=False, output_logits=True,
                   return_dict_in_generate=True)
    with torch.no_grad():
        batch = model.generate(ids, attention_mask=mask, **options)
        for b, s in enumerate(seqs):
            alone = model.generate(s[None], attention_mask=torch.ones(1, len(s)), **options)
            assert torch.equal(batch.sequences[b, ids.shape[1]:], alone.sequences[0, len(s):])
            full = model(alone.sequences[:, :-1]).logits[0, len(s) - 1:]     # float64
            for step, logits in enumerate(batch.logits):
                # generate() stores float32 copies: one rounding of the float64 logits.
                bound = U32 * full[step].abs() + 1e-12
                assert torch.all((logits[b].double() - full[step]).abs() <= bound)


# -- packing ------------------------------------------------------------------------

lengths_strategy = st.lists(st.integers(1, 7), min_size=1, max_size=5)


def _mask_by_loop(lengths):
    document = [d for d, n in enumerate(lengths) for _ in range(n)]
    total = len(document)
    return torch.tensor([[document[i] == document[j] and j <= i for j in range(total)]
                         for i in range(total)])


@PROPERTY
@given(lengths_strategy)
def test_packed_positions_and_mask(lengths):
    from transformers.masking_utils import find_packed_sequence_indices

    ids = positions.packed_position_ids(lengths)
    allowed = positions.packed_causal_mask(lengths)
    assert ids.dtype == torch.int64 and allowed.dtype == torch.bool
    assert torch.equal(ids, torch.tensor([p for n in lengths for p in range(n)]))
    assert torch.equal(allowed, _mask_by_loop(lengths))
    # transformers recovers the documents from the restarting position ids alone.
    document = find_packed_sequence_indices(ids[None])[0]
    causal = torch.ones_like(allowed).tril()
    assert torch.equal(allowed, causal & (document[:, None] == document[None, :]))
    assert torch.equal(positions.packed_position_ids(torch.tensor(lengths)), ids)


@pytest.mark.parametrize("bad", [[], [3, 0], [2, -1], [2.0, 3], torch.tensor([1.0, 2.0]),
                                 torch.tensor([[1, 2]]), "12", 5, [True, 2]])
@pytest.mark.parametrize("function", [positions.packed_position_ids,
                                      positions.packed_causal_mask])
def test_packing_rejects_bad_lengths(function, bad):
    with pytest.raises(ValueError, match="lengths"):
        function(bad)


def _additive(allowed, dtype=torch.float64):
    """A 4D mask transformers passes through unchanged: 0 where allowed, very negative else."""
    bias = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return bias[None, None]


@MODEL_PROPERTY
@given(st.lists(st.integers(1, 6), min_size=2, max_size=4))
def test_packed_row_equals_documents_run_separately(lengths):
    model = _shared_llama()
    docs = [_tokens(n, 40 + d) for d, n in enumerate(lengths)]
    packed = torch.cat(docs)[None]
    ids = positions.packed_position_ids(lengths)[None]
    with torch.no_grad():
        separate = torch.cat([model(d[None]).logits[0] for d in docs])
        ours = model(packed, position_ids=ids,
                     attention_mask=_additive(positions.packed_causal_mask(lengths))).logits[0]
    assert (ours - separate).abs().max() < F64_TOL


def test_restarted_positions_without_the_mask_leak():
    """Position ids alone do not separate documents, unless transformers infers the mask.

    transformers 4.57 builds the block mask from restarting position ids
    (masking_utils.find_packed_sequence_indices) only when attention_mask is
    None *and* no cache is passed; a forward call creates a DynamicCache by
    default (use_cache=True), and then the documents see each other.
    """
    model = _shared_llama()
    lengths = [5, 3, 4]
    docs = [_tokens(n, 50 + d) for d, n in enumerate(lengths)]
    packed, ids = torch.cat(docs)[None], positions.packed_position_ids(lengths)[None]
    first = slice(0, 5)
    with torch.no_grad():
        separate = torch.cat([model(d[None]).logits[0] for d in docs])
        leaky = model(packed, position_ids=ids).logits[0]
        ones = model(packed, position_ids=ids, use_cache=False,
                     attention_mask=torch.ones_like(packed)).logits[0]
        inferred = model(packed, position_ids=ids, use_cache=False).logits[0]
    for out in (leaky, ones):
        assert (out[first] - separate[first]).abs().max() < F64_TOL   # doc 1 sees only itself
        assert (out[5:] - separate[5:]).abs().max() > 0.1              # docs 2, 3 see doc 1
    assert (inferred - separate).abs().max() < F64_TOL


# -- the KV cache -------------------------------------------------------------------


def test_cache_holds_rotated_keys_and_decoding_equals_one_pass():
    model = _shared_llama()
    ids = _tokens(20, 60)[None]
    f32 = rope.inv_freq(8, dtype=torch.float32)          # transformers' float32 angles
    with torch.no_grad():
        full = model(ids).logits[0]
        cache = DynamicCache(config=model.config)
        steps = [model(ids[:, :8], past_key_values=cache).logits[0]]
        for t in range(8, 20):
            steps.append(model(ids[:, t:t + 1], past_key_values=cache).logits[0])
        expected = rope.apply_rope(_layer0_keys(model, ids), torch.arange(20), f32)
    assert (torch.cat(steps) - full).abs().max() < F64_TOL
    assert (cache.layers[0].keys - expected).abs().max() < F64_TOL


@PROPERTY
@given(st.integers(-5000, 5000), st.sampled_from(rope.LAYOUTS), st.integers(0, 2 ** 16))
def test_rerotate_moves_keys(delta, layout, seed):
    generator = torch.Generator().manual_seed(seed)
    f = rope.inv_freq(16, dtype=torch.float64)
    k = torch.randn(2, 3, 7, 16, generator=generator, dtype=torch.float64)
    p = torch.randint(0, 5000, (7,), generator=generator)
    moved = rope.rerotate(rope.apply_rope(k, p, f, layout=layout), delta, f, layout=layout)
    # Lemma on rounding: angles up to 10^4 radians carry errors of about 10^4 · u64.
    assert (moved - rope.apply_rope(k, p + delta, f, layout=layout)).abs().max() < F64_TOL
    back = rope.rerotate(moved, torch.tensor(-delta), f, layout=layout)
    assert (back - rope.apply_rope(k, p, f, layout=layout)).abs().max() < F64_TOL
    per_key = torch.randint(-100, 100, (7,), generator=generator)
    dense = torch.einsum("sij,...sj->...si",
                         rope.rotation_matrix(per_key, f, layout=layout), k)
    assert (rope.rerotate(k, per_key, f, layout=layout) - dense).abs().max() < F64_TOL


@PROPERTY
@given(st.integers(-300, 300), st.integers(0, 2 ** 16))
def test_rerotate_equals_transformers_rotation_by_delta(delta, seed):
    """Rotating a cached key with transformers' own cos/sin at position δ."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    model = _shared_llama()
    k = torch.randn(1, 2, 5, 8, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64)
    cos, sin = model.model.rotary_emb(k, torch.full((1, 5), delta))
    _, reference = apply_rotary_pos_emb(k, k, cos, sin)
    f32 = model.model.rotary_emb.inv_freq.float()        # float32 angles, as transformers
    assert (rope.rerotate(k, delta, f32) - reference).abs().max() < F64_TOL


def test_evicted_cache_keys_are_moved_by_rerotate():
    """Evict keys from a real DynamicCache and move the kept ones: as if rotated fresh."""
    model = _shared_llama()
    ids = _tokens(30, 61)[None]
    sinks, evicted = 4, 10
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        model(ids, past_key_values=cache)
        raw = _layer0_keys(model, ids)
    keys = cache.layers[0].keys
    f32 = model.model.rotary_emb.inv_freq.float()
    kept = torch.cat([torch.arange(sinks), torch.arange(sinks + evicted, 30)])
    shift = torch.where(torch.arange(kept.numel()) < sinks, 0, -evicted)
    moved = rope.rerotate(keys[:, :, kept], shift, f32)
    fresh = rope.apply_rope(raw[:, :, kept], torch.arange(kept.numel()), f32)
    assert (moved - fresh).abs().max() < _rotation_tol(keys, 29, evicted, 19)
    unmoved_error = (keys[:, :, kept] - fresh).abs().max()
    assert unmoved_error > 0.1


@pytest.mark.parametrize("bad, name", [
    (dict(k=torch.ones(4, 8, dtype=torch.long)), "k"),
    (dict(k=torch.ones(8)), "k"),
    (dict(k=torch.ones(3, 6)), "k"),
    (dict(delta=True), "delta"),
    (dict(delta=1.5), "delta"),
    (dict(delta=torch.tensor([1, 2])), "delta"),
    (dict(delta=torch.tensor([1j])), "delta"),
    (dict(inv_freq=torch.ones(2, 4)), "inv_freq"),
    (dict(layout="zigzag"), "layout"),
])
def test_rerotate_rejects_bad_input(bad, name):
    args = dict(k=torch.ones(3, 8), delta=2, inv_freq=rope.inv_freq(8), layout="half")
    args.update(bad)
    with pytest.raises(ValueError, match=name):
        rope.rerotate(args["k"], args["delta"], args["inv_freq"], layout=args["layout"])


def test_expected_score_mismatch_matches_monte_carlo():
    generator = torch.Generator().manual_seed(7)
    dim, n = 32, 40_000
    f = rope.inv_freq(dim, dtype=torch.float64)
    q, k = torch.randn(2, n, dim, generator=generator, dtype=torch.float64)
    true = (q * k).sum(-1)
    assert abs(true.pow(2).mean() - dim) < 4 * true.pow(2).std() / math.sqrt(n)
    for delta in (1, 7, 300):
        error = (q * rope.apply_rope(k, [delta], f)).sum(-1) - true
        closed = positions.expected_score_mismatch(delta * f) ** 2 * dim   # E[error²]
        se = error.pow(2).std() / math.sqrt(n)
        assert abs(error.pow(2).mean() - closed) < 4 * se
    assert positions.expected_score_mismatch(torch.zeros(5)) == 0
    assert torch.isclose(positions.expected_score_mismatch(torch.full((5,), math.pi)),
                         torch.tensor(2.0, dtype=torch.float32))
    for bad in (torch.tensor(1.0), torch.zeros(0), torch.tensor([float("nan")])):
        with pytest.raises(ValueError, match="phase_error"):
            positions.expected_score_mismatch(bad)


# -- frequencies that change during generation --------------------------------------


def _decode(model, ids, prefill):
    cache = DynamicCache(config=model.config)
    steps = [model(ids[:, :prefill], past_key_values=cache).logits[0]]
    for t in range(prefill, ids.shape[1]):
        steps.append(model(ids[:, t:t + 1], past_key_values=cache).logits[0])
    return torch.cat(steps), cache


def _dynamic_f32(seq_len, length=16, factor=4.0):
    return scaling.rope_parameters("dynamic", 8, 10000.0, factor=factor,
                                   max_position_embeddings=length, seq_len=seq_len,
                                   dtype=torch.float32)[0]


def test_dynamic_ntk_cached_keys_keep_the_frequencies_of_their_step():
    length, prefill, n = 16, 8, 40
    model = _llama(max_position_embeddings=length,
                   rope_scaling={"rope_type": "dynamic", "factor": 4.0})
    ids = _tokens(n, 70)[None]
    with torch.no_grad():
        decoded, cache = _decode(model, ids, prefill)
        per_prefix = [_llama(max_position_embeddings=length, rope_scaling={
            "rope_type": "dynamic", "factor": 4.0})(ids[:, :t + 1]).logits[0, -1]
            for t in (length - 1, length, n - 1)]
        raw = _layer0_keys(model, ids)
    assert (decoded[length - 1] - per_prefix[0]).abs().max() < F64_TOL   # within L: equal
    assert (decoded[length] - per_prefix[1]).abs().max() > 0.01          # stale keys
    assert (decoded[n - 1] - per_prefix[2]).abs().max() > 0.01
    keys = cache.layers[0].keys
    for j in range(n):
        at_step = rope.apply_rope(raw[:, :, j:j + 1], [j], _dynamic_f32(max(j + 1, prefill)))
        at_end = rope.apply_rope(raw[:, :, j:j + 1], [j], _dynamic_f32(n))
        assert (keys[:, :, j:j + 1] - at_step).abs().max() < _rotation_tol(raw, j, j)
        if length <= j < n - 2:
            assert (keys[:, :, j:j + 1] - at_end).abs().max() > 1e-3
    # The correction is one more rotation: by j·(θ_new - θ_old) in every pair.
    old = torch.stack([_dynamic_f32(max(j + 1, prefill)) for j in range(n)]).double()
    new = _dynamic_f32(n).double()
    fixed = torch.cat([rope.rerotate(keys[:, :, j:j + 1], j, new - old[j]) for j in range(n)], 2)
    fresh = rope.apply_rope(raw, torch.arange(n), new.float())
    assert (fixed - fresh).abs().max() < _rotation_tol(raw, n - 1, n - 1)


def test_dynamic_ntk_frequencies_depend_on_what_ran_before():
    """transformers only grows inv_freq; it resets below max_position_embeddings only."""
    model = _llama(max_position_embeddings=16,
                   rope_scaling={"rope_type": "dynamic", "factor": 4.0})
    ids = _tokens(40, 71)[None]
    with torch.no_grad():
        fresh = model(ids[:, :30]).logits[0, -1]
        model(ids)                                            # a longer input first
        after = model(ids[:, :30]).logits[0, -1]
        model(ids[:, :10])                                    # below 16: reset
        reset = model(ids[:, :30]).logits[0, -1]
    assert (fresh - after).abs().max() > 0.01
    assert (fresh - reset).abs().max() < F64_TOL


@pytest.mark.parametrize("family", ["llama", "phi3"])
def test_longrope_switch_during_generation(family):
    """Llama keeps short-factor keys after the switch; Phi-3 recomputes the cache once."""
    length = 16
    factors = dict(short_factor=[1.0] * 4, long_factor=[1.0, 2.0, 4.0, 8.0])
    if family == "phi3":
        config = transformers.Phi3Config(
            **TINY, original_max_position_embeddings=length, max_position_embeddings=4 * length,
            rope_scaling={"type": "longrope", **factors}, attn_implementation="sdpa")
        torch.manual_seed(0)
        model = transformers.Phi3ForCausalLM(config).double().eval()
    else:
        model = _llama(max_position_embeddings=length,
                       rope_scaling={"rope_type": "longrope", "factor": 4.0, **factors})
    prompt_length, new = 12, 8
    prompt = _tokens(prompt_length, 72)[None]
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new,
                             do_sample=False, output_logits=True, return_dict_in_generate=True)
        per_prefix = torch.stack([model(out.sequences[:, :t], use_cache=False).logits[0, -1]
                                  for t in range(prompt_length, prompt_length + new)])
    error = (torch.stack(out.logits)[:, 0].double() - per_prefix).abs()
    bound = U32 * per_prefix.abs() + 1e-12         # generate() keeps float32 logits
    switch = length - prompt_length + 1            # first step that reads position 16
    assert torch.all(error[:switch] <= bound[:switch])
    if family == "phi3":
        assert torch.all(error <= bound)
    else:
        assert error[switch:].amax() > 0.01


# -- M-RoPE during generation -------------------------------------------------------

_IMAGE, _VIDEO, _START = 100, 101, 102


def _vl_config(m=2):
    return transformers.Qwen2VLConfig(
        text_config=dict(vocab_size=128, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         initializer_range=0.2, max_position_embeddings=256,
                         rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]}),
        vision_config=dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, patch_size=2,
                           temporal_patch_size=2, spatial_merge_size=m, in_channels=3),
        image_token_id=_IMAGE, video_token_id=_VIDEO, vision_start_token_id=_START,
        vision_end_token_id=103, attn_implementation="sdpa")


def _vl_prompt(segments, m=2, seed=0):
    generator = torch.Generator().manual_seed(seed)
    tokens, images, videos = [], [], []
    for kind, size in segments:
        if kind == "text":
            tokens += torch.randint(2, 90, (size,), generator=generator).tolist()
            continue
        tokens[-1] = _START
        tokens += [_IMAGE if kind == "image" else _VIDEO] * (size[0] * (size[1] // m)
                                                             * (size[2] // m))
        (images if kind == "image" else videos).append(list(size))
    grids = [torch.tensor(g) if g else None for g in (images, videos)]
    return torch.tensor([tokens]), grids[0], grids[1]


def _deltas_closed_form(segments, m, pad):
    """-P - Σ over blocks of (tokens in the block - ids it spans)."""
    saved = 0
    for kind, size in segments:
        if kind != "text":
            t, h, w = size[0], size[1] // m, size[2] // m
            saved += t * h * w - max(t, h, w)
    return -pad - saved


VL_PROMPTS = [
    [("text", 4), ("image", (1, 6, 8)), ("text", 5)],
    [("text", 3), ("video", (4, 4, 6)), ("text", 2)],
    [("text", 5), ("image", (1, 8, 6)), ("text", 2), ("video", (6, 4, 4)), ("text", 3)],
    [("text", 6)],
]


@pytest.mark.parametrize("pad", [0, 3])
@pytest.mark.parametrize("segments", VL_PROMPTS, ids=range(len(VL_PROMPTS)))
def test_rope_deltas_closed_form_matches_get_rope_index(segments, pad):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    config = _vl_config()
    ids, images, videos = _vl_prompt(segments)
    ids = torch.cat([torch.zeros(1, pad, dtype=torch.long), ids], 1)
    mask = (torch.arange(ids.shape[1]) >= pad).long()[None]
    position_ids, deltas = Qwen2VLModel.get_rope_index(SimpleNamespace(config=config), ids,
                                                      images, videos, attention_mask=mask)
    ours = multidim.mrope_position_ids(segments)
    assert torch.equal(position_ids[:, 0, pad:], ours)
    assert int(deltas) == int(ours.max()) + 1 - ids.shape[1]
    assert int(deltas) == _deltas_closed_form(segments, 2, pad)


def test_qwen2_vl_decoding_continues_with_rope_deltas():
    """Prefill with an image, then decode: the same logits as one pass over everything."""
    torch.manual_seed(0)
    model = transformers.Qwen2VLForConditionalGeneration(_vl_config()).double().eval()
    segments = [("text", 3), ("image", (1, 4, 6)), ("text", 4)]
    ids, grid, _ = _vl_prompt(segments, seed=3)
    pixels = torch.randn(24, 24, generator=torch.Generator().manual_seed(4),
                         dtype=torch.float64)
    n = ids.shape[1]
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             pixel_values=pixels, image_grid_thw=grid, max_new_tokens=5,
                             do_sample=False, output_logits=True, return_dict_in_generate=True)
        assert int(model.model.rope_deltas) == _deltas_closed_form(segments, 2, 0)
        full = model(input_ids=out.sequences, pixel_values=pixels, image_grid_thw=grid,
                     use_cache=False).logits[0, n - 1:-1]
        generated = torch.stack(out.logits)[:, 0].double()
        assert torch.all((generated - full).abs() <= U32 * full.abs() + 1e-12)
        # The model's forward takes the same path when given the cache position.
        model.model.rope_deltas = None
        cache = DynamicCache(config=model.config)
        steps = [model(input_ids=ids, pixel_values=pixels, image_grid_thw=grid,
                       past_key_values=cache, cache_position=torch.arange(n)).logits[0, -1]]
        for t in range(n, out.sequences.shape[1] - 1):
            steps.append(model(input_ids=out.sequences[:, t:t + 1], past_key_values=cache,
                               cache_position=torch.tensor([t])).logits[0, -1])
    assert (torch.stack(steps) - full).abs().max() < F64_TOL
