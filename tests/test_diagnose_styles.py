"""diagnose_rope against RoPEs written the ways real code writes them, independently
of posenc_lib: transformers' rotate_half, Meta's complex multiplication, an explicit
block-diagonal matrix, vLLM's fused cos/sin cache (NeoX and GPT-J) and an
elementwise loop. Each correct one (scaled ones too, with transformers' own
frequencies) must come back clean at every max_position; each planted bug must get
its code, naming the cause. The RoPEs and the bugs: tests/helpers/rope_styles.py."""

import pytest
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from posenc_lib.tools.diagnose import diagnose_rope

from helpers.rope_styles import (BASE, BUGS, DIM, SCALINGS, STYLES, hf_rotate_half,
                                 meta_complex, plain, transformers_rope,
                                 yarn_ramp_inverted)

MAX_POSITIONS = [2048, 8191]


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
