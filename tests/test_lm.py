"""The language model of chapter 7: causality, the cached path, shared initialisation."""

from __future__ import annotations

import pytest
import torch

from posenc_lib import attention, lm
from posenc_lib.tools import experiment

SMOKE = experiment.Config.smoke()


def _tokens(n=40, seed=0):
    return torch.randint(0, lm.VOCAB_SIZE, (2, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(experiment.MODELS))
def test_every_model_is_causal(name):
    model = experiment.build_model(SMOKE, name, 0).eval()
    tokens = _tokens(12, 1)
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 256
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :8], b[:, :8], atol=1e-6)
    assert not torch.allclose(a[:, 8:], b[:, 8:])


@pytest.mark.parametrize("name", list(experiment.MODELS))
def test_cached_generation_equals_one_pass(name):
    """Feeding a sequence in uneven pieces through the key-value cache gives the
    logits of one full pass (float32 tolerance): the cached path re-implements
    attention and positions, the full path uses MultiHeadAttention's hooks."""
    cache = _assert_cached_equals_one_pass(experiment.build_model(SMOKE, name, 0).eval())
    assert cache[0]["k"].shape[-2] == 40


def _assert_cached_equals_one_pass(model) -> list:
    """The logits of 40 tokens fed in uneven pieces through the cache against
    one full pass (float32 tolerance); returns the filled cache."""
    tokens = _tokens()
    with torch.no_grad():
        full = model(tokens)
        cache = []
        pieces = [model(tokens[:, a:b], cache=cache)
                  for a, b in [(0, 5), (5, 6), (6, 30), (30, 40)]]
    assert torch.allclose(torch.cat(pieces, 1), full, atol=1e-5)
    return cache


def test_cached_keys_keep_their_rotation():
    """With dynamic NTK the frequencies change with the length. In the cached
    path a key keeps the rotation it was cached with, so the logits differ from
    a pass that re-encodes the prefix, but only once the length exceeds
    max_position_embeddings."""
    model = experiment.build_model(SMOKE, "rope", 0).eval()
    model.scheme.set_scaling("dynamic", factor=1.0, max_position_embeddings=16)
    tokens = _tokens(32, 2)
    with torch.no_grad():
        cache = []
        model(tokens[:, :16], cache=cache)
        step = model(tokens[:, 16:17], cache=cache)[:, -1]
        reencoded = model(tokens[:, :17])[:, -1]
        assert not torch.allclose(step, reencoded, atol=1e-4)
        cache = []
        model(tokens[:, :15], cache=cache)
        step = model(tokens[:, 15:16], cache=cache)[:, -1]
        assert torch.allclose(step, model(tokens[:, :16])[:, -1], atol=1e-5)


def test_shared_weights_identical_across_encodings():
    models = {name: experiment.build_model(SMOKE, name, 3) for name in experiment.MODELS}
    reference = {k: v for k, v in models["nope"].state_dict().items()
                 if not k.startswith("scheme.")}
    for name, model in models.items():
        state = model.state_dict()
        for key, value in reference.items():
            assert torch.equal(state[key], value), (name, key)
    other_seed = experiment.build_model(SMOKE, "nope", 4).state_dict()
    assert not torch.equal(other_seed["embed.weight"], reference["embed.weight"])


def test_scheme_parameters_come_from_their_own_generator():
    a = experiment.build_model(SMOKE, "learned", 0).scheme.table.table.weight
    b = experiment.build_model(SMOKE, "learned", 1).scheme.table.table.weight
    assert not torch.equal(a, b)
    state = torch.random.get_rng_state()
    experiment.build_model(SMOKE, "t5", 0)
    assert torch.equal(state, torch.random.get_rng_state())   # the global stream is untouched


def test_attention_factor_override_scales_logits():
    """``attention_factor`` multiplies cos and sin, so every q·k by its square."""
    scheme = lm.RopeScheme(8)
    q = torch.randn(1, 1, 6, 8, generator=torch.Generator().manual_seed(5))
    k = torch.randn(1, 1, 6, 8, generator=torch.Generator().manual_seed(6))
    plain = [t for t in scheme.attention_hooks(6)["qk_transform"](q, k)]
    scheme.set_scaling("ntk", factor=2.0, attention_factor=1.5)
    ntk = lm.RopeScheme(8)
    ntk.set_scaling("ntk", factor=2.0)
    scaled = scheme.attention_hooks(6)["qk_transform"](q, k)
    unscaled = ntk.attention_hooks(6)["qk_transform"](q, k)
    assert torch.allclose(scaled[0] @ scaled[1].mT, 2.25 * unscaled[0] @ unscaled[1].mT,
                          atol=1e-5)
    assert not torch.allclose(unscaled[0], plain[0])
    with pytest.raises(ValueError, match="attention_factor"):
        scheme.set_scaling("ntk", factor=2.0, attention_factor=0.0)
    with pytest.raises(ValueError, match="rope_type"):
        scheme.set_scaling("no-such-method")


def test_linear_scaling_equals_scaled_positions():
    """PI with factor s is RoPE at positions m / s."""
    from posenc_lib import rope

    scheme = lm.RopeScheme(8)
    scheme.set_scaling("linear", factor=4.0)
    q = torch.randn(1, 2, 10, 8, generator=torch.Generator().manual_seed(4))
    k = torch.randn(1, 2, 10, 8, generator=torch.Generator().manual_seed(5))
    q_scaled, _ = scheme.attention_hooks(10)["qk_transform"](q, k)
    expected = rope.apply_rope(q, torch.arange(10) / 4.0, rope.inv_freq(8, dtype=torch.float32))
    assert torch.allclose(q_scaled, expected, atol=1e-6)


def test_bad_cache_argument():
    model = experiment.build_model(SMOKE, "nope", 0)
    with pytest.raises(ValueError, match="cache"):
        model(_tokens(4), cache={})


def _layer_inputs(n=40, seed=3):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, 4, n, 16, generator=g) for _ in range(3))
    return q, k, v


def test_rnope_swa_layers_match_the_reference_layer():
    # Each layer of the trained RNoPE-SWA scheme against
    # designs.rnope_swa_attention (itself checked against Cohere2's code):
    # layers 0 and 1 slide with RoPE, layer 2 sees everything without positions.
    from posenc_lib import designs

    scheme = lm.make_scheme("rnope-swa", d_model=64, n_heads=4, max_positions=64,
                            swa_window=8, full_every=3)
    q, k, v = _layer_inputs()
    inv_freq, _ = scheme.frequencies(q.shape[-2])
    kinds = designs.rnope_swa_layer_types(3, 3)
    assert kinds == ["sliding_attention", "sliding_attention", "full_attention"]
    for hooks, kind in zip(scheme.layer_hooks(q.shape[-2], 3), kinds):
        ours = attention._fused_attention(*_hooked(hooks, q, k), v,
                                          hooks.get("score_bias"), True)
        want = designs.rnope_swa_attention(q, k, v, kind, inv_freq=inv_freq, window=8,
                                           layout="half")
        assert torch.allclose(ours, want, atol=1e-5), kind


def _hooked(hooks, q, k):
    return hooks["qk_transform"](q, k) if "qk_transform" in hooks else (q, k)


def test_p_rope_scheme_rotates_as_the_proportional_plan():
    # The p-RoPE scheme's rotation against designs.apply_plan's "proportional"
    # plan (itself checked against transformers 5.x's frequencies).
    from posenc_lib import designs

    scheme = lm.make_scheme("p-rope", d_model=64, n_heads=4, max_positions=64,
                            p_rope_fraction=0.25)
    q, k, _ = _layer_inputs()
    plan = designs.rotation_plan(16, 0.25, "proportional")
    got_q, got_k = _hooked(scheme.attention_hooks(q.shape[-2]), q, k)
    positions = torch.arange(q.shape[-2])
    assert torch.allclose(got_q, designs.apply_plan(q, positions, plan).float(), atol=1e-5)
    assert torch.allclose(got_k, designs.apply_plan(k, positions, plan).float(), atol=1e-5)
    # two of eight pairs turn: the slow six leave their features unchanged
    assert int((scheme.inv_freq > 0).sum()) == 2


@pytest.mark.parametrize("name", lm.SCHEMES)
def test_every_scheme_caches_as_it_reads_in_one_pass(name):
    # Three layers (RNoPE-SWA: two sliding, one full) and a window shorter
    # than the sequence, built from lm alone (the study's models aside).
    torch.manual_seed(0)
    scheme = lm.make_scheme(name, d_model=32, n_heads=2, max_positions=64, swa_window=8,
                            full_every=3, xpos_scale_base=32.0)
    torch.manual_seed(1)
    _assert_cached_equals_one_pass(lm.DecoderLM(lm.VOCAB_SIZE, 32, 3, 2, scheme).eval())
