"""RoPE context extension against transformers' ROPE_INIT_FUNCTIONS and closed forms."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from posenc_lib import rope, scaling

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

transformers.logging.set_verbosity_error()  # its validators warn about our edge cases

HEADS = 2
# (head_dim, partial_rotary_factor): transformers rotates int(head_dim * factor) features.
SHAPES = [(64, 1.0), (128, 1.0), (80, 0.5), (128, 0.25)]
BASES = [10000.0, 500000.0]


def _config(head_dim, partial, base, rope_scaling, max_position_embeddings, **extra):
    return LlamaConfig(hidden_size=head_dim * HEADS, num_attention_heads=HEADS,
                       head_dim=head_dim, partial_rotary_factor=partial, rope_theta=base,
                       max_position_embeddings=max_position_embeddings,
                       rope_scaling=rope_scaling, **extra)


def _compare(rope_type, config, seq_len, dim, base, **params):
    ref_inv_freq, ref_factor = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)
    inv_freq, factor = scaling.rope_parameters(rope_type, dim, base, seq_len=seq_len,
                                               dtype=torch.float64, **params)
    # transformers computes in float32; we compute in float64.
    assert inv_freq.shape == ref_inv_freq.shape
    assert torch.allclose(inv_freq, ref_inv_freq.double(), rtol=3e-6, atol=0), rope_type
    assert math.isclose(factor, float(ref_factor), rel_tol=1e-12), (factor, ref_factor)
    return inv_freq, factor


def _grid(*lists):
    return list(itertools.product(SHAPES, BASES, *lists))


@pytest.mark.parametrize("shape, base", _grid())
def test_default_matches_transformers(shape, base):
    head_dim, partial = shape
    config = _config(head_dim, partial, base, None, 4096)
    _compare("default", config, None, int(head_dim * partial), base)


@pytest.mark.parametrize("shape, base, factor", _grid([1.0, 2.0, 4.5, 32.0]))
def test_linear_matches_transformers(shape, base, factor):
    head_dim, partial = shape
    config = _config(head_dim, partial, base, {"rope_type": "linear", "factor": factor}, 4096)
    _compare("linear", config, None, int(head_dim * partial), base, factor=factor)


@pytest.mark.parametrize("shape, base, factor, max_len", _grid([1.0, 2.0, 8.0], [2048, 4096]))
def test_dynamic_matches_transformers(shape, base, factor, max_len):
    head_dim, partial = shape
    dim = int(head_dim * partial)
    config = _config(head_dim, partial, base, {"rope_type": "dynamic", "factor": factor},
                     max_len)
    for seq_len in (None, 1, max_len - 1, max_len, max_len + 1, 3 * max_len,
                    torch.tensor(5 * max_len)):
        _compare("dynamic", config, seq_len, dim, base, factor=factor,
                 max_position_embeddings=max_len)
    # A pasted rope_scaling may carry original_max_position_embeddings, which
    # transformers 4.57 accepts as optional and does not use.
    rope_scaling = {"rope_type": "dynamic", "factor": factor,
                    "original_max_position_embeddings": max_len // 2}
    config = _config(head_dim, partial, base, rope_scaling, max_len)
    for seq_len in (None, max_len + 1, 3 * max_len):
        _compare("dynamic", config, seq_len, dim, base, factor=factor,
                 max_position_embeddings=max_len, original_max_position_embeddings=max_len // 2)


YARN_OPTIONS = [
    {},
    {"beta_fast": 16.0, "beta_slow": 2.0},
    {"beta_fast": 64.0, "beta_slow": 0.5, "truncate": False},
    {"truncate": False},
    {"mscale": 0.707, "mscale_all_dim": 0.707},     # DeepSeek-V2: attention_factor 1
    {"mscale": 1.0, "mscale_all_dim": 0.5},
    {"mscale": 1.0},                                 # mscale alone is ignored
    {"mscale": 1.0, "mscale_all_dim": 0.0},          # 0 counts as unset
    {"attention_factor": 1.3},
]


@pytest.mark.parametrize("shape, base, factor, original, options",
                         _grid([1.0, 4.0, 16.0, 40.0], [2048, 4096], YARN_OPTIONS))
def test_yarn_matches_transformers(shape, base, factor, original, options):
    head_dim, partial = shape
    dim = int(head_dim * partial)
    rope_scaling = {"rope_type": "yarn", "factor": factor,
                    "original_max_position_embeddings": original, **options}
    config = _config(head_dim, partial, base, rope_scaling, int(original * factor))
    _compare("yarn", config, None, dim, base, factor=factor,
             original_max_position_embeddings=original, **options)
    # transformers falls back to max_position_embeddings for the original length.
    del rope_scaling["original_max_position_embeddings"]
    config = _config(head_dim, partial, base, rope_scaling, original)
    _compare("yarn", config, None, dim, base, factor=factor,
             original_max_position_embeddings=original, **options)


@pytest.mark.parametrize("shape, base, factor, bands, original", _grid(
    [1.0, 8.0, 32.0], [(1.0, 4.0), (2.0, 8.0), (0.5, 1.5)], [2048, 8192]))
def test_llama3_matches_transformers(shape, base, factor, bands, original):
    head_dim, partial = shape
    low, high = bands
    params = {"factor": factor, "low_freq_factor": low, "high_freq_factor": high,
              "original_max_position_embeddings": original}
    config = _config(head_dim, partial, base, {"rope_type": "llama3", **params}, 131072)
    _compare("llama3", config, None, int(head_dim * partial), base, **params)


def _factor_lists(dim, seed):
    generator = torch.Generator().manual_seed(seed)
    short = (1 + torch.rand(dim // 2, generator=generator) * 0.2).tolist()
    long = (1 + torch.rand(dim // 2, generator=generator) * 40).sort().values.tolist()
    return short, long


@pytest.mark.parametrize("shape, base, factor, original", _grid([1.0, 8.0, 32.0], [4096]))
def test_longrope_matches_transformers(shape, base, factor, original):
    head_dim, partial = shape
    dim = int(head_dim * partial)
    short, long = _factor_lists(dim, seed=dim)
    params = {"short_factor": short, "long_factor": long, "factor": factor,
              "original_max_position_embeddings": original}
    lists = {"rope_type": "longrope", "short_factor": short, "long_factor": long}
    # Style 1: `factor` in rope_scaling, max_position_embeddings = the original length.
    config_1 = _config(head_dim, partial, base, {**lists, "factor": factor}, original)
    # Style 2 (Phi-3): both lengths at the top level, factor = their ratio.
    config_2 = _config(head_dim, partial, base, lists, int(original * factor),
                       original_max_position_embeddings=original)
    for config in (config_1, config_2):
        for seq_len in (None, original - 1, original, original + 1, 10 * original):
            inv_freq, _ = _compare("longrope", config, seq_len, dim, base, **params)
            uses_long = seq_len is not None and seq_len > original
            expected = rope.inv_freq(dim, base, dtype=torch.float64) / torch.tensor(
                long if uses_long else short, dtype=torch.float64)
            assert torch.allclose(inv_freq, expected, rtol=1e-12)
    config = _config(head_dim, partial, base, {**lists, "attention_factor": 0.9}, original)
    _compare("longrope", config, None, dim, base, short_factor=short, long_factor=long,
             original_max_position_embeddings=original, attention_factor=0.9)


def _meta_apply_scaling(freqs):
    """Meta's ``apply_scaling`` (meta-llama/llama-models, models/llama3/model.py), verbatim
    in its arithmetic: Llama 3.1's constants, float32, bands by wavelength."""
    scale_factor, low_freq_factor, high_freq_factor, old_context_len = 8, 1, 4, 8192
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * torch.pi / freqs
    new_freqs = torch.where(wavelen > low_freq_wavelen, freqs / scale_factor, freqs)
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    return torch.where((wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen),
                       (1 - smooth) * new_freqs / scale_factor + smooth * new_freqs, new_freqs)


@pytest.mark.parametrize("dim", [64, 128])
def test_llama3_matches_metas_reference_code(dim):
    base = 500000.0
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    reference = _meta_apply_scaling(freqs)
    ours, _ = scaling.rope_parameters("llama3", dim, base, factor=8.0, low_freq_factor=1.0,
                                      high_freq_factor=4.0,
                                      original_max_position_embeddings=8192,
                                      dtype=torch.float64)
    # Meta computes in float32: allow a few float32 ulps (base**x loses ~ln(base)·eps).
    eps32 = torch.finfo(torch.float32).eps
    assert torch.allclose(ours, reference.double(), rtol=32 * eps32, atol=0)
    # The three bands are all populated, so every branch is compared.
    wavelength = 2 * math.pi / freqs.double()
    assert (wavelength < 2048).any() and (wavelength > 8192).any()
    assert ((wavelength >= 2048) & (wavelength <= 8192)).any()


@pytest.mark.parametrize("mscale, mscale_all_dim", [(1.0, 1.0), (0.707, 0.707), (1.0, 0.5)])
def test_deepseek_softmax_scale_carries_yarns_temperature(mscale, mscale_all_dim):
    # DeepSeek-V2/V3 multiply every logit (rotary and non-rotary features) by
    # get_mscale(s, mscale_all_dim)**2 through the softmax scale, and cos/sin by the
    # ratio that rope_parameters returns; on the rotary part the two give
    # (0.1·mscale·ln s + 1)**2, YaRN's 1/t when mscale = 1.
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    factor, rope_dim, nope_dim = 40.0, 16, 32
    config = DeepseekV3Config(
        hidden_size=64, num_attention_heads=2, num_key_value_heads=2, q_lora_rank=None,
        kv_lora_rank=16, qk_rope_head_dim=rope_dim, qk_nope_head_dim=nope_dim,
        v_head_dim=16, num_hidden_layers=1, intermediate_size=32, moe_intermediate_size=16,
        max_position_embeddings=int(4096 * factor),
        rope_scaling={"type": "yarn", "factor": factor, "original_max_position_embeddings": 4096,
                      "beta_fast": 32, "beta_slow": 1, "mscale": mscale,
                      "mscale_all_dim": mscale_all_dim})
    attention = modeling_deepseek_v3.DeepseekV3Attention(config, 0)
    rotary = modeling_deepseek_v3.DeepseekV3RotaryEmbedding(config)
    inv_freq, attention_factor = scaling.rope_parameters(
        "yarn", rope_dim, config.rope_theta, factor=factor,
        original_max_position_embeddings=4096, mscale=mscale, mscale_all_dim=mscale_all_dim,
        dtype=torch.float64)
    assert math.isclose(attention_factor, rotary.attention_scaling, rel_tol=1e-12)
    assert torch.allclose(inv_freq, rotary.inv_freq.double(), rtol=3e-6)
    softmax_factor = attention.scaling * (rope_dim + nope_dim) ** 0.5
    expected_all = (0.1 * mscale_all_dim * math.log(factor) + 1) ** 2
    assert math.isclose(softmax_factor, expected_all, rel_tol=1e-12)
    rotary_logit_factor = attention_factor ** 2 * softmax_factor
    assert math.isclose(rotary_logit_factor, (0.1 * mscale * math.log(factor) + 1) ** 2,
                        rel_tol=1e-12)
    if mscale == 1.0:
        assert math.isclose(rotary_logit_factor, scaling.yarn_attention_factor(factor) ** 2,
                            rel_tol=1e-12)


def test_pasting_a_config_with_rope_type_works():
    llama31 = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    inv_freq, factor = scaling.rope_parameters(dim=128, base=500000.0, **llama31)
    assert inv_freq.shape == (64,) and factor == 1.0


# -- closed forms (no transformers needed) ----------------------------------------

@pytest.mark.parametrize("dim, factor", [(4, 2.0), (64, 4.0), (128, 8.0), (128, 1.0)])
def test_ntk_closed_form(dim, factor):
    base = 10000.0
    inv_freq, attention_factor = scaling.rope_parameters("ntk", dim, base, factor=factor,
                                                         dtype=torch.float64)
    new_base = base * factor ** (dim / (dim - 2))
    i = torch.arange(dim // 2, dtype=torch.float64)
    assert torch.allclose(inv_freq, new_base ** (-2 * i / dim), rtol=1e-14)
    original = rope.inv_freq(dim, base, dtype=torch.float64)
    assert inv_freq[0] == 1.0                                   # fastest pair unchanged
    assert torch.isclose(inv_freq[-1], original[-1] / factor, rtol=1e-13)  # slowest / s
    assert attention_factor == 1.0


def test_dynamic_is_default_up_to_the_trained_length_and_ntk_beyond():
    dim, base, length = 64, 10000.0, 2048
    default = rope.inv_freq(dim, base, dtype=torch.float64)
    assert torch.equal(scaling.rope_parameters("default", dim, base, dtype=torch.float64)[0],
                       default)
    for seq_len in (1, 100, length):
        inv_freq, _ = scaling.rope_parameters("dynamic", dim, base, factor=4.0, seq_len=seq_len,
                                              max_position_embeddings=length,
                                              dtype=torch.float64)
        assert torch.equal(inv_freq, default)
    # With factor 1 the dynamic base is the NTK base for s = seq_len / length.
    for s in (2, 3, 8):
        dynamic, _ = scaling.rope_parameters("dynamic", dim, base, factor=1.0,
                                             seq_len=s * length,
                                             max_position_embeddings=length,
                                             dtype=torch.float64)
        ntk, _ = scaling.rope_parameters("ntk", dim, base, factor=float(s),
                                         dtype=torch.float64)
        assert torch.allclose(dynamic, ntk, rtol=1e-13)
    # The slowest frequency falls as the sequence grows.
    slowest = [scaling.rope_parameters("dynamic", dim, base, factor=4.0, seq_len=n,
                                       max_position_embeddings=length)[0][-1].item()
               for n in (length, 2 * length, 4 * length)]
    assert slowest[0] > slowest[1] > slowest[2]


def test_linear_equals_scaling_the_positions(generator):
    dim, factor = 32, 4.0
    x = torch.randn(7, dim, generator=generator, dtype=torch.float64)
    positions = torch.tensor([0, 3, 100, 2047, 5000, 8191, 9000])
    inv_freq, _ = scaling.rope_parameters("linear", dim, factor=factor, dtype=torch.float64)
    by_frequency = rope.apply_rope(x, positions, inv_freq)
    by_position = rope.apply_rope(x, positions / factor, rope.inv_freq(dim, dtype=torch.float64))
    assert torch.allclose(by_frequency, by_position, atol=1e-12)


def test_yarn_ramp_is_linear_in_the_pair_index_between_the_rotation_thresholds():
    dim, base, length, factor = 128, 10000.0, 4096, 16.0
    original = rope.inv_freq(dim, base, dtype=torch.float64)
    inv_freq, attention_factor = scaling.rope_parameters(
        "yarn", dim, base, factor=factor, original_max_position_embeddings=length,
        truncate=False, dtype=torch.float64)
    weight = scaling.interpolation_weight(inv_freq, original, factor)
    r = scaling.rotations(original, length)
    one = torch.ones(1, dtype=torch.float64)
    assert torch.all(weight[r > 32] == 0) and torch.allclose(weight[r < 1], one)
    ramp = (r >= 1) & (r <= 32)
    i = torch.arange(dim // 2, dtype=torch.float64)
    # The fractional pair index where r = beta, read off the measured rotations (ln r
    # is linear in i), not from the library's closed form; the two must agree.
    def index_where(beta):
        return float(np.interp(-math.log(beta), -r.log().numpy(), i.numpy()))

    low, high = index_where(32.0), index_where(1.0)
    closed_form = scaling.yarn_correction_range(dim, base, length, truncate=False)
    assert np.allclose((low, high), closed_form, rtol=1e-12)
    assert torch.allclose(weight[ramp], (i[ramp] - low) / (high - low), atol=1e-12)
    # Temperature: sqrt(1/t) = 0.1 ln s + 1 multiplies cos and sin.
    assert math.isclose(attention_factor, 0.1 * math.log(factor) + 1)


def test_llama3_smooth_band_is_linear_in_the_rotations():
    dim, base, length, factor = 128, 500000.0, 8192, 8.0
    original = rope.inv_freq(dim, base, dtype=torch.float64)
    inv_freq, _ = scaling.rope_parameters("llama3", dim, base, factor=factor, low_freq_factor=1.0,
                                          high_freq_factor=4.0,
                                          original_max_position_embeddings=length,
                                          dtype=torch.float64)
    weight = scaling.interpolation_weight(inv_freq, original, factor)
    r = scaling.rotations(original, length)
    one = torch.ones(1, dtype=torch.float64)
    assert torch.all(weight[r > 4] == 0) and torch.allclose(weight[r < 1], one)
    band = (r >= 1) & (r <= 4)
    assert band.any()
    assert torch.allclose(weight[band], 1 - (r[band] - 1) / 3, atol=1e-12)


def test_pi_keeps_every_angle_in_range_and_default_does_not():
    dim, base, train = 128, 10000.0, 4096
    freqs = scaling.extension_inv_freqs(dim, base, factor=8.0,
                                        original_max_position_embeddings=train)
    original = freqs["default"]
    target = 8 * train
    assert scaling.angle_range_ratio(original, freqs["linear"], train, target).max() <= 1 + 1e-12
    for method in ("linear", "yarn", "llama3"):
        assert not scaling.out_of_range_pairs(original, freqs[method], train, target).any()
    default_out = scaling.out_of_range_pairs(original, original, train, target)
    unclosed = train * original < 2 * math.pi
    assert torch.equal(default_out, unclosed) and default_out.any()
    ntk_out = scaling.out_of_range_pairs(original, freqs["ntk"], train, target)
    assert 0 < ntk_out.sum() < default_out.sum()


def test_out_of_range_takes_many_lengths_at_once():
    """The vectorised form (a list of lengths, and dynamic NTK's frequencies one
    row per length) against one call per length."""
    dim, base, train = 64, 10000.0, 2048
    original = rope.inv_freq(dim, base, dtype=torch.float64)
    ntk = scaling.extension_inv_freqs(dim, base, 4.0, train)["ntk"]
    lengths = [1000, 2048, 2049, 5000, 8192, 65536]
    rows = torch.stack([scaling.rope_parameters(
        "dynamic", dim, base, factor=4.0, max_position_embeddings=train, seq_len=n,
        dtype=torch.float64)[0] for n in lengths])
    for freqs in (ntk, original, rows):
        many = scaling.out_of_range_pairs(original, freqs, train, lengths)
        ratio = scaling.angle_range_ratio(original, freqs, train, torch.tensor(lengths))
        assert many.shape == ratio.shape == (len(lengths), dim // 2)
        for k, n in enumerate(lengths):
            one = freqs[k] if freqs.dim() == 2 else freqs
            assert torch.equal(many[k], scaling.out_of_range_pairs(original, one, train, n))
            assert torch.equal(ratio[k], scaling.angle_range_ratio(original, one, train, n))
        assert many[0].sum() == 0 < many[-1].sum()  # shorter than training: nothing new
    # One length with a row per length: the length applies to every row.
    same = scaling.out_of_range_pairs(original, rows, train, 8192)
    assert torch.equal(same[3], scaling.out_of_range_pairs(original, rows[3], train, 8192))
    for bad, match in ((lambda: scaling.out_of_range_pairs(original, rows, train, [1, 2]),
                        "scaled_inv_freq has 6 rows but target_length has 2"),
                       (lambda: scaling.angle_range_ratio(original, ntk, train, []),
                        "non-empty 1-D"),
                       (lambda: scaling.angle_range_ratio(original, ntk, train, [10, -1]),
                        "target_length must be > 0"),
                       (lambda: scaling.angle_range_ratio(original, ntk, train, [[10]]),
                        "non-empty 1-D"),
                       (lambda: scaling.angle_range_ratio(original, ntk, train, "long"),
                        "target_length must be a number"),
                       (lambda: scaling.angle_range_ratio(original, rows[None], train, 10),
                        r"\(dim/2,\) or \(n, dim/2\)"),
                       (lambda: scaling.angle_range_ratio(original, ntk[:-1], train, 10),
                        "scaled_inv_freq has shape")):
        with pytest.raises(ValueError, match=match):
            bad()


def test_interpolation_bound_holds_for_random_fits():
    inv_freq = rope.inv_freq(128, dtype=torch.float64)
    for seed in range(3):
        _, _, h = scaling.random_score_fit(n_points=200, seed=seed, ridge=1e-6,
                                           dtype=torch.float64)
        for s1 in (0.0, 17.0, 1000.0):
            s = torch.linspace(s1, s1 + 1, 101, dtype=torch.float64)
            a = scaling.score_function(s, h, inv_freq)
            chord = a[0] + (a[-1] - a[0]) * (s - s1)
            bound = scaling.interpolation_bound(s, s1, s1 + 1, h, inv_freq)
            assert torch.all((a - chord).abs() <= bound + 1e-9)


def test_score_fit_interpolates_and_matches_a_dense_solve(generator):
    inv_freq = rope.inv_freq(16, dtype=torch.float64)
    positions = torch.rand(30, generator=generator, dtype=torch.float64) * 20
    targets = torch.rand(30, generator=generator, dtype=torch.float64) * 2 - 1
    h = scaling.fit_score_function(positions, targets, inv_freq, ridge=0.1)
    # Normal equations, written out with complex exponentials.
    a = torch.stack([torch.cos(positions[:, None] * inv_freq),
                     -torch.sin(positions[:, None] * inv_freq)], dim=1).flatten(1)
    solution = torch.linalg.solve(a.T @ a + 0.1 * torch.eye(16, dtype=torch.float64),
                                  a.T @ targets)
    assert torch.allclose(torch.cat([h.real, h.imag]), solution, atol=1e-10)
    direct = (h * torch.exp(1j * positions[:, None] * inv_freq)).sum(-1).real
    assert torch.allclose(scaling.score_function(positions, h, inv_freq), direct, atol=1e-12)


def test_qr_solve_matches_lapack_on_a_well_conditioned_fit(generator):
    inv_freq = rope.inv_freq(8, base=3.0, dtype=torch.float64)   # 8 unknowns, 40 points
    positions = torch.rand(40, generator=generator, dtype=torch.float64) * 60
    targets = torch.randn(40, generator=generator, dtype=torch.float64)
    h = scaling.fit_score_function(positions, targets, inv_freq)
    a = scaling._features(positions, inv_freq)
    reference = torch.linalg.lstsq(a, targets[:, None]).solution[:, 0]
    assert torch.linalg.cond(a) < 1e4
    assert torch.allclose(torch.cat([h.real, h.imag]), reference, atol=1e-10)
    with pytest.raises(ValueError, match="ridge must be > 0 with fewer points"):
        scaling.fit_score_function(positions[:5], targets[:5], inv_freq)


def test_random_fit_is_reproducible_on_an_ill_conditioned_problem():
    first = scaling.random_score_fit(n_points=256, seed=3, ridge=0.0, dtype=torch.float64)[2]
    torch.set_num_threads(max(1, torch.get_num_threads()))
    second = scaling.random_score_fit(n_points=256, seed=3, ridge=0.0, dtype=torch.float64)[2]
    assert torch.equal(first, second)


def test_llama4_defaults_match_transformers_config():
    from transformers import Llama4TextConfig

    for layers, interval in ((12, 4), (48, 4), (10, 3)):
        config = Llama4TextConfig(num_hidden_layers=layers, no_rope_layer_interval=interval)
        assert scaling.llama4_no_rope_layers(layers, interval) == config.no_rope_layers


def test_llama4_attention_temperature_matches_transformers(monkeypatch):
    from transformers import Llama4TextConfig
    from transformers.models.llama4 import modeling_llama4

    config = Llama4TextConfig(hidden_size=16, num_attention_heads=2, num_key_value_heads=1,
                              head_dim=8, num_hidden_layers=4, floor_scale=4, attn_scale=0.1,
                              attn_temperature_tuning=True, use_qk_norm=False)
    config._attn_implementation = "eager"
    layer = 3
    assert config.no_rope_layers[layer] == 0  # a NoPE layer
    torch.manual_seed(0)
    attention = modeling_llama4.Llama4TextAttention(config, layer)
    seen = {}

    def capture(module, query, key, value, attention_mask, **kwargs):
        seen["query"] = query
        return torch.zeros(query.shape[0], query.shape[2], query.shape[1], query.shape[3]), None

    monkeypatch.setattr(modeling_llama4, "eager_attention_forward", capture)
    n = 30
    x = torch.randn(1, n, 16)
    positions = torch.arange(n) + 5
    with torch.no_grad():
        attention(x, None, None, cache_position=positions)
        plain = attention.q_proj(x).view(1, n, 2, 8).transpose(1, 2)
    scales = scaling.llama4_attn_scales(positions, attn_scale=0.1, floor_scale=4)
    assert torch.allclose(seen["query"], plain * scales.float()[:, None], atol=1e-6)
    assert len(set(scales.tolist())) > 3


# -- validation -----------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: scaling.rope_parameters("xpos", 64), "rope_type must be one of"),
    (lambda: scaling.rope_parameters("linear", 64, factor=0.0), "factor must be > 0"),
    (lambda: scaling.rope_parameters("linear", 64), r"needs \['factor'\]"),
    (lambda: scaling.rope_parameters("linear", 64, factor=2.0, beta_fast=3.0),
     r"unknown parameter\(s\) \['beta_fast'\]"),
    (lambda: scaling.rope_parameters("default", 64, type="default"), "pass it as rope_type"),
    (lambda: scaling.rope_parameters("linear", 63, factor=2.0), "dim must be even"),
    (lambda: scaling.rope_parameters("ntk", 2, factor=2.0), "dim must be >= 4"),
    (lambda: scaling.rope_parameters("default", 64, base=1.0), "base must be > 1"),
    (lambda: scaling.rope_parameters("dynamic", 64, factor=2.0), "max_position_embeddings"),
    (lambda: scaling.rope_parameters("dynamic", 64, factor=2.0, max_position_embeddings=64,
                                     seq_len=0), "seq_len must be >= 1"),
    (lambda: scaling.rope_parameters("yarn", 64, factor=4.0), "original_max_position"),
    (lambda: scaling.rope_parameters("yarn", 64, factor=4.0, original_max_position_embeddings=4096,
                                     truncate="yes"), "truncate must be True or False"),
    (lambda: scaling.rope_parameters("yarn", 64, factor=4.0, original_max_position_embeddings=4096,
                                     attention_factor=-1.0), "attention_factor must be >= 0"),
    (lambda: scaling.rope_parameters("yarn", 64, factor=4.0, original_max_position_embeddings=4096,
                                     mscale=-1.0), "mscale must be >= 0"),
    (lambda: scaling.rope_parameters("longrope", 8, short_factor=[1.0] * 3,
                                     long_factor=[1.0] * 4, factor=2.0,
                                     original_max_position_embeddings=4096),
     r"short_factor must hold dim/2 = 4"),
    (lambda: scaling.rope_parameters("longrope", 8, short_factor=[1.0] * 4,
                                     long_factor=[1.0, 2.0, 0.0, 1.0], factor=2.0,
                                     original_max_position_embeddings=4096),
     "long_factor must hold finite numbers > 0"),
    (lambda: scaling.rope_parameters("longrope", 8, short_factor=[1.0] * 4,
                                     long_factor=[1.0] * 4, original_max_position_embeddings=4096),
     "longrope needs factor"),
    (lambda: scaling.interpolation_weight(rope.inv_freq(8), rope.inv_freq(8), 1.0),
     "factor must be > 1"),
    (lambda: scaling.out_of_range_pairs(rope.inv_freq(8), rope.inv_freq(6), 10, 20),
     "scaled_inv_freq has shape"),
    (lambda: scaling.fit_score_function(torch.arange(3.0), torch.arange(4.0), rope.inv_freq(8)),
     "positions and targets must be 1-D of one length"),
    (lambda: scaling.fit_score_function(torch.arange(3.0), torch.arange(3.0),
                                        rope.inv_freq(8).bfloat16(), ridge=1.0),
     "inv_freq must be float16, float32 or float64"),
    (lambda: scaling.random_score_fit(dtype=torch.bfloat16), "dtype must be float16, float32 or float64"),
    (lambda: scaling.llama4_attn_scales([-1, 2]), "positions must be >= 0"),
    (lambda: scaling.llama4_no_rope_layers(0), "num_hidden_layers must be >= 1"),
])
def test_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("head_dim, base, original, factor", [
    (128, 500.0, 4096, 4.0),      # a small base: every pair turns more than once in L
    (64, 1000.0, 8192, 8.0),
    (128, 10000.0, 131072, 4.0),  # a long original context
])
def test_yarn_ramp_reaching_past_the_last_pair_matches_transformers(head_dim, base,
                                                                    original, factor):
    """transformers clamps YaRN's upper correction index at dim - 1, not dim // 2 - 1;
    the two differ only when the index where a pair turns once in L (beta_slow = 1),
    rounded up, lies beyond the last pair, dim/2 - 1: a small base or a long L."""
    beyond = math.ceil(head_dim * math.log(original / (2 * math.pi)) / (2 * math.log(base)))
    assert head_dim // 2 - 1 < beyond < head_dim - 1  # the clamp decides here
    rope_scaling = {"rope_type": "yarn", "factor": factor,
                    "original_max_position_embeddings": original}
    config = _config(head_dim, 1.0, base, rope_scaling, int(original * factor))
    ours, _ = _compare("yarn", config, None, head_dim, base, factor=factor,
                       original_max_position_embeddings=original)
    # the slowest pair is only partly interpolated: ramp < 1 at the last pair
    plain = base ** (-(head_dim - 2) / head_dim)
    assert plain / factor * (1 + 1e-6) < ours[-1].item() < plain * (1 - 1e-6)
