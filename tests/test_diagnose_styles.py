"""diagnose_rope against RoPEs written the ways real code writes them, independently
of posenc_lib: transformers' rotate_half, Meta's complex multiplication, an explicit
block-diagonal matrix, vLLM's fused cos/sin cache (NeoX and GPT-J) and an
elementwise loop. Each correct one (scaled ones too, with transformers' own
frequencies) must come back clean at every max_position; each planted bug must get
its code, naming the cause."""

import math

import pytest
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from posenc_lib.tools.diagnose import diagnose_rope

DIM = 64
BASE = 10000.0


def plain(dim=DIM, base=BASE, denominator=None):
    d = dim if denominator is None else denominator
    return 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float32) / d)


# -- five styles: fn(x, positions) from inv_freq, with switches for the bugs -----------

def _positions(positions, x, bug):
    if bug == "offset":
        return positions + 1
    if bug == "ignored":
        return torch.arange(x.shape[1])
    return positions


def _cos_sin(angles, bug, att):
    cos, sin = angles.cos() * att, angles.sin() * att
    if bug == "swap":
        cos, sin = sin, cos
    if bug == "sign":
        sin = -sin
    return cos, sin


def hf_rotate_half(inv, bug=None, att=1.0):
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def fn(x, positions):
        t = _positions(positions, x, bug).float()
        freqs = t[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = _cos_sin(emb, bug, att)
        return x * cos + rotate_half(x) * sin

    return fn


def meta_complex(inv, bug=None, att=1.0):
    def fn(x, positions):
        t = _positions(positions, x, bug).float()
        freqs = torch.outer(t, inv)
        cos, sin = _cos_sin(freqs, bug, att)
        freqs_cis = torch.complex(cos, sin)
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs_cis).flatten(-2)

    return fn


def block_matrix(inv, bug=None, att=1.0):
    def fn(x, positions):
        t = _positions(positions, x, bug).float()
        cos, sin = _cos_sin(t[:, None] * inv[None, :], bug, att)
        n = inv.shape[0]
        r = torch.zeros(t.shape[0], 2 * n, 2 * n)
        i = torch.arange(n)
        r[:, i, i] = cos
        r[:, i + n, i + n] = cos
        r[:, i, i + n] = -sin
        r[:, i + n, i] = sin
        return torch.einsum("sij,bsj->bsi", r, x)

    return fn


def vllm_cache(inv, bug=None, att=1.0, neox=True, max_len=32768 + 64):
    t = torch.arange(max_len, dtype=torch.float32)
    cos, sin = _cos_sin(torch.einsum("i,j->ij", t, inv), bug if bug != "offset"
                        else None, att)
    cache = torch.cat((cos, sin), dim=-1)

    def fn(x, positions):
        if bug == "offset":
            positions = positions + 1
        cs = cache[:x.shape[1]] if bug == "ignored" else cache.index_select(0, positions)
        c, s = cs.chunk(2, dim=-1)
        if neox:
            x1, x2 = torch.chunk(x, 2, dim=-1)
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)

    return fn


def vllm_gptj(inv, bug=None, att=1.0):
    return vllm_cache(inv, bug, att, neox=False)


def loop(inv, bug=None, att=1.0):
    def fn(x, positions):
        t = _positions(positions, x, bug).float()
        out = x.clone()
        n = inv.shape[0]
        for i in range(n):
            c, s = _cos_sin(t * inv[i], bug, att)
            a, b = x[..., i], x[..., i + n]
            out[..., i] = a * c - b * s
            out[..., i + n] = b * c + a * s
        return out

    return fn


STYLES = {"hf_rotate_half": (hf_rotate_half, "half"),
          "meta_complex": (meta_complex, "interleaved"),
          "block_matrix": (block_matrix, "half"),
          "vllm_neox": (vllm_cache, "half"),
          "vllm_gptj": (vllm_gptj, "interleaved"),
          "loop": (loop, "half")}
MAX_POSITIONS = [2048, 8191]


# -- scaled frequencies from transformers itself ---------------------------------------

SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 2048},
}


def transformers_rope(rope_scaling, base=BASE, dim=DIM, max_len=8192):
    config = LlamaConfig(hidden_size=dim, num_attention_heads=1, head_dim=dim,
                         rope_theta=base, rope_scaling=dict(rope_scaling),
                         max_position_embeddings=max_len)
    inv, att = ROPE_INIT_FUNCTIONS[rope_scaling["rope_type"]](config, "cpu")
    return inv.float(), float(att)


def yarn_ramp_inverted(rope_scaling, base=BASE, dim=DIM):
    """YaRN written by hand with the ramp's weights the wrong way round."""
    factor = rope_scaling["factor"]
    length = rope_scaling["original_max_position_embeddings"]
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)

    def correction(turns):
        return dim * math.log(length / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction(32)), 0)
    high = min(math.ceil(correction(1)), dim - 1)
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    extrapolation = 1 - ramp
    inverted = 1 - extrapolation
    inv = (1 / (factor * pos_freqs)) * (1 - inverted) + (1 / pos_freqs) * inverted
    return inv.float()


# -- correct ones ---------------------------------------------------------------------

@pytest.mark.parametrize("max_position", MAX_POSITIONS)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("base", [1e4, 5e5])
def test_correct_styles_are_clean(style, max_position, base):
    make, layout = STYLES[style]
    result = diagnose_rope(make(plain(base=base)), dim=DIM, base=base, layout=layout,
                           max_position=max_position)
    assert result.findings == [], result.explanation
    assert f"fitted {layout} layout" in result.explanation
    assert f"fitted base {base:g}" in result.explanation


@pytest.mark.parametrize("max_position", MAX_POSITIONS)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("kind", SCALINGS)
def test_correct_scaled_styles_are_clean(style, kind, max_position):
    make, layout = STYLES[style]
    inv, att = transformers_rope(SCALINGS[kind])
    result = diagnose_rope(make(inv, att=att), dim=DIM, base=BASE, layout=layout,
                           rope_scaling=SCALINGS[kind], max_position=max_position)
    assert result.findings == [], result.explanation


def test_success_sentence_reports_the_fitted_values():
    """A correct interleaved fn, diagnosed for the half layout, is reported as
    interleaved (a finding), and the fitted base is fn's, not the caller's."""
    result = diagnose_rope(meta_complex(plain(base=5e5)), dim=DIM, base=5e5,
                           layout="interleaved")
    assert "fitted interleaved layout ((0, 1), (2, 3)" in result.explanation
    assert "fitted base 500000" in result.explanation


# -- bugs -----------------------------------------------------------------------------

BUGS = [
    # (name, inv_freq, bug switch, code, words the explanation must hold)
    ("integer division", 1.0 / BASE ** (torch.arange(0, DIM, 2) // DIM), None,
     "frequency-exponent", "integer division"),
    ("rising ladder", BASE ** (torch.arange(0, DIM, 2).float() / DIM), None,
     "frequency-exponent", "rise"),
    ("reversed ladder", plain().flip(0), None, "frequency-reversed", "flip"),
    ("hidden_size in the exponent", plain(denominator=4096), None,
     "frequency-exponent", "4096"),
    ("wrong base", plain(base=5e5), None, "base", "500000"),
    ("cos/sin swapped", plain(), "swap", "cos-sin-swapped", "swapped"),
    ("positions + 1", plain(), "offset", "position-offset", "p + 1"),
    ("positions ignored", plain(), "ignored", "positions-ignored", "KV cache"),
    ("rotation reversed", plain(), "sign", "rotation-reversed", "backwards"),
]


@pytest.mark.parametrize("max_position", MAX_POSITIONS)
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("name, inv, bug, code, words", BUGS, ids=[b[0] for b in BUGS])
def test_each_bug_is_named(style, name, inv, bug, code, words, max_position):
    make, layout = STYLES[style]
    result = diagnose_rope(make(inv.float(), bug), dim=DIM, base=BASE, layout=layout,
                           max_position=max_position)
    assert result.findings == [code], (name, result.explanation)
    assert words in result.explanation and "Fix" in result.explanation


@pytest.mark.parametrize("max_position", [64, 100, 2048, 4096, 8191, 20000])
@pytest.mark.parametrize("dim", [4, 8, 16, 64, 128, 256])
def test_integer_division_is_never_clean(dim, max_position):
    inv = 1.0 / BASE ** (torch.arange(0, dim, 2) // dim)
    result = diagnose_rope(hf_rotate_half(inv.float()), dim=dim, base=BASE,
                           max_position=max_position)
    assert not result.ok, result.explanation


@pytest.mark.parametrize("style", STYLES)
def test_attention_factor_missing_or_doubled(style):
    make, layout = STYLES[style]
    inv, att = transformers_rope(SCALINGS["yarn"])
    assert att > 1.1
    for wrong, word in ((1.0, "missing"), (att * att, "twice")):
        result = diagnose_rope(make(inv, att=wrong), dim=DIM, base=BASE, layout=layout,
                               rope_scaling=SCALINGS["yarn"])
        assert result.findings == ["attention-factor"], result.explanation
        assert word in result.explanation


@pytest.mark.parametrize("style", ["hf_rotate_half", "vllm_neox"])
def test_scaling_bugs_are_named(style):
    make, layout = STYLES[style]
    ramp = yarn_ramp_inverted(SCALINGS["yarn"])
    _, att = transformers_rope(SCALINGS["yarn"])
    result = diagnose_rope(make(ramp, att=att), dim=DIM, base=BASE, layout=layout,
                           rope_scaling=SCALINGS["yarn"])
    assert result.findings == ["scaling"] and "yarn-ramp-inverted" in result.explanation
    # Llama 3 served as plain RoPE (the scaling ignored).
    result = diagnose_rope(make(plain()), dim=DIM, base=BASE, layout=layout,
                           rope_scaling=SCALINGS["llama3"])
    assert result.findings == ["scaling"] and "scaling-ignored" in result.explanation


def test_config_json_on_the_command_line(tmp_path):
    """--config reads dim, base, partial rotary, scaling and layout."""
    import json
    import textwrap

    from posenc_lib.tools.diagnose import main
    inv, att = transformers_rope(SCALINGS["yarn"])
    config = {"model_type": "llama", "hidden_size": 4 * DIM, "num_attention_heads": 4,
              "head_dim": DIM, "rope_theta": BASE, "max_position_embeddings": 8192,
              "rope_scaling": SCALINGS["yarn"]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "port.py").write_text(textwrap.dedent(f"""
        import torch
        INV = torch.tensor({inv.tolist()})

        def rope(x, positions, att={att!r}):
            freqs = positions.float()[:, None] * INV
            emb = torch.cat([freqs, freqs], -1)
            a, b = x.chunk(2, -1)
            return (x * emb.cos() + torch.cat([-b, a], -1) * emb.sin()) * att

        def no_factor(x, positions):
            return rope(x, positions, att=1.0)
    """))
    assert main([f"{tmp_path}/port.py:rope", "--config", str(tmp_path / "config.json")]) == 0
    assert main([f"{tmp_path}/port.py:no_factor", "--config",
                 str(tmp_path / "config.json")]) == 1
    assert main([f"{tmp_path}/port.py:rope", "--dim", str(DIM), "--rope-scaling",
                 json.dumps(SCALINGS["yarn"])]) == 0


@pytest.mark.parametrize("dtype, name", [(torch.bfloat16, "bfloat16"),
                                         (torch.float16, "float16")])
def test_tables_rounded_to_a_low_precision_dtype_are_recognised(dtype, name):
    """A documented limit: tables rounded to bfloat16/float16 are no float32 RoPE
    (not-rope), but the explanation says what they are."""
    inv = plain()

    def fn(x, positions):
        freqs = positions.float()[:, None] * inv
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(dtype).float(), emb.sin().to(dtype).float()
        x1, x2 = x.chunk(2, -1)
        return x * cos + torch.cat((-x2, x1), -1) * sin

    result = diagnose_rope(fn, dim=DIM, base=BASE)
    assert result.findings == ["not-rope"]
    assert f"rounds its cos and sin tables to {name}" in result.explanation


def test_dynamic_at_a_given_length_and_partial_rotary():
    """Dynamic NTK at a length beyond max_position_embeddings, and a partial head
    (rotary_dim 32 of 64) with YaRN, from transformers' own frequencies."""
    config = LlamaConfig(hidden_size=DIM, num_attention_heads=1, head_dim=DIM,
                         rope_theta=BASE, max_position_embeddings=2048,
                         rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    inv, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, "cpu", seq_len=6000)
    kw = dict(dim=DIM, base=BASE, rope_scaling={"rope_type": "dynamic", "factor": 2.0},
              max_position_embeddings=2048)
    assert diagnose_rope(hf_rotate_half(inv.float()), seq_len=6000, **kw).ok
    result = diagnose_rope(hf_rotate_half(inv.float()), seq_len=4000, **kw)
    assert result.findings == ["scaling"], result.explanation
    assert "sequence length about 6000" in result.explanation
    half = dict(SCALINGS["yarn"])
    config = LlamaConfig(hidden_size=DIM, num_attention_heads=1, head_dim=DIM,
                         rope_theta=BASE, max_position_embeddings=8192,
                         partial_rotary_factor=0.5, rope_scaling=half)
    inv, att = ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
    inner = hf_rotate_half(inv.float(), att=att)

    def fn(x, positions):
        return torch.cat((inner(x[..., :32], positions), x[..., 32:]), -1)

    result = diagnose_rope(fn, dim=DIM, base=BASE, rotary_dim=32, rope_scaling=half)
    assert result.ok, result.explanation


@pytest.mark.parametrize("style", ["hf_rotate_half", "meta_complex", "loop"])
def test_combined_new_findings(style):
    """A reversed ladder with another base, and with an offset as well: every
    cause named (without the reversal read first, the fit saw a 'fastest pair'
    at 3e-6 rad per position and called it position interpolation)."""
    make, layout = STYLES[style]
    result = diagnose_rope(make(plain(base=5e5).flip(0)), dim=DIM, base=BASE,
                           layout=layout)
    assert result.findings == ["frequency-reversed", "base"], result.explanation
    result = diagnose_rope(make(plain(base=5e5).flip(0), "offset"), dim=DIM, base=BASE,
                           layout=layout)
    assert result.findings == ["position-offset", "frequency-reversed", "base"], \
        result.explanation


def test_unknown_scaling_bug_names_the_pair():
    """YaRN with beta_fast 16 instead of 32: no known bug; the pair is named."""
    inv, att = transformers_rope(dict(SCALINGS["yarn"], beta_fast=16.0))
    result = diagnose_rope(hf_rotate_half(inv, att=att), dim=DIM, base=BASE,
                           rope_scaling=SCALINGS["yarn"])
    assert result.findings == ["scaling"]
    assert "The largest difference is at pair" in result.explanation
    assert "Fitted pair by pair" in result.explanation


def test_bad_scaling_arguments_name_the_parameter(tmp_path):
    from posenc_lib.tools.diagnose import main
    fn = hf_rotate_half(plain())
    for kwargs, name in ((dict(rope_scaling=[1, 2]), "rope_scaling"),
                         (dict(seq_len=100), "seq_len"),
                         (dict(max_position_embeddings=0), "max_position_embeddings"),
                         (dict(rope_scaling={"rope_type": "yarn"}), "rope_scaling"),
                         (dict(config={"head_dim": 32, "rope_theta": 1e4,
                                       "hidden_size": 64, "num_attention_heads": 2}),
                          "dim")):
        with pytest.raises(ValueError, match=f"^{name}"):
            diagnose_rope(fn, **dict(dict(dim=DIM), **kwargs))
    module = tmp_path / "port.py"
    module.write_text("def rope(x, positions):\n    return x\n")
    assert main([f"{module}:rope", "--dim", "64", "--rope-scaling", "{bad"]) == 2
    assert main([f"{module}:rope", "--config", str(tmp_path / "missing.json")]) == 2


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=20, deadline=None)
@given(pair=st.integers(0, DIM // 2 - 1),
       factor=st.one_of(st.floats(1.05, 4.0), st.floats(0.25, 0.95)),
       max_position=st.sampled_from([64, 2048, 4096, 8191]),
       style=st.sampled_from(sorted(STYLES)))
def test_a_wrong_frequency_is_never_clean(pair, factor, max_position, style):
    """One pair's frequency off by 5 % or more, in any style, at any probed
    range: never clean (its angle at the last probed position is off by far
    more than float32 rounding)."""
    make, layout = STYLES[style]
    inv = plain().clone()
    inv[pair] *= factor
    if float(abs(factor - 1) * inv[pair] / factor * max_position) < 1e-2:
        return        # below what the probed range can see
    result = diagnose_rope(make(inv), dim=DIM, base=BASE, layout=layout,
                           max_position=max_position)
    assert not result.ok, result.explanation
