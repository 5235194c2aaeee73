"""posenc_lib.tools.diagnose: a RoPE written here independently of the library, with
bugs planted one, two or three at a time, must get exactly the planted codes."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from posenc_lib import rope, scaling
from posenc_lib.tools.diagnose import CODES, diagnose_inv_freq, diagnose_rope, round_significand

ROOT = Path(__file__).resolve().parents[1]


def written_rope(dim, base=10000.0, layout="half", *, sign=1.0, exponent="2i/d",
                 rotary=None, position_dtype=None, noise=0.0, tables=None,
                 freq_dtype=None):
    """A RoPE as a reader would write it (not the library's code), with switches
    for the bugs: sign -1 (reversed), exponent "i/d" or "linspace", rotary <
    dim (partial), position_dtype (rounded positions), tables (cos and sin laid
    out for another layout than the pairs)."""
    rotary = dim if rotary is None else rotary
    tables = layout if tables is None else tables
    gen = torch.Generator().manual_seed(1)

    def fn(x, positions):
        i = torch.arange(rotary // 2, dtype=torch.float32)
        if exponent == "2i/d":
            inv_freq = 1.0 / base ** (2 * i / rotary)
        elif exponent == "i/d":
            inv_freq = 1.0 / base ** (i / rotary)
        elif exponent == "4i/d":
            inv_freq = 1.0 / base ** (4 * i / rotary)
        else:
            inv_freq = 1.0 / base ** torch.linspace(0, 1, rotary // 2)
        if freq_dtype is not None:
            inv_freq = inv_freq.to(freq_dtype).float()
        p = positions if position_dtype is None else positions.to(position_dtype)
        angles = p.float()[:, None] * inv_freq
        if tables == "half":
            emb = torch.cat([angles, angles], -1)
        else:
            emb = angles.repeat_interleave(2, -1)
        x_rot, x_pass = x[..., :rotary], x[..., rotary:]
        if layout == "half":
            a, b = x_rot.chunk(2, -1)
            quarter = torch.cat([-b, a], -1)
        else:
            a, b = x_rot[..., 0::2], x_rot[..., 1::2]
            quarter = torch.stack([-b, a], -1).flatten(-2)
        out = torch.cat([x_rot * emb.cos() + quarter * sign * emb.sin(), x_pass], -1)
        if noise:
            out = out + noise * torch.randn(out.shape, generator=gen)
        return out

    return fn


# -- correct implementations ----------------------------------------------------------

@pytest.mark.parametrize("layout", rope.LAYOUTS)
@pytest.mark.parametrize("dim, base", [(64, 1e4), (128, 5e5), (128, 1e6), (32, 1e4)])
def test_correct_written_rope_has_no_findings(layout, dim, base):
    result = diagnose_rope(written_rope(dim, base, layout), dim=dim, base=base,
                           layout=layout)
    assert result.findings == [], result.explanation
    assert "as intended" in result.explanation


@pytest.mark.parametrize("layout", rope.LAYOUTS)
def test_library_rope_with_float32_noise_has_no_findings(layout):
    gen = torch.Generator().manual_seed(0)
    inv = rope.inv_freq(128, 5e5, dtype=torch.float32)

    def fn(x, positions):
        out = rope.apply_rope(x, positions, inv, layout=layout)
        return out + 1e-6 * torch.randn(out.shape, generator=gen)

    assert diagnose_rope(fn, dim=128, base=5e5, layout=layout).findings == []


def test_meta_complex_form_is_interleaved():
    """Meta's Llama code (complex multiplication) is interleaved RoPE: no finding for
    layout='interleaved', "layout" for 'half'."""
    inv = rope.inv_freq(64, 5e5, dtype=torch.float32)

    def fn(x, positions):
        return rope.apply_rope_complex(x, positions, inv)

    assert diagnose_rope(fn, dim=64, base=5e5, layout="interleaved").findings == []
    assert diagnose_rope(fn, dim=64, base=5e5, layout="half").findings == ["layout"]


# -- single bugs --------------------------------------------------------------------

SINGLE = [
    ("layout", dict(layout="interleaved"), {}),
    ("rotation-reversed", dict(sign=-1.0), {}),
    ("frequency-exponent", dict(exponent="i/d"), {}),
    ("frequency-exponent", dict(exponent="linspace"), {}),
    ("frequency-exponent", dict(exponent="4i/d"), {}),
    ("base", dict(base=1e4), dict(base=5e5)),
    ("positions-precision", dict(position_dtype=torch.bfloat16), {}),
    ("positions-precision", dict(position_dtype=torch.float16, base=1e6), dict(base=1e6)),
    ("partial-rotary", dict(rotary=32), {}),
    ("partial-rotary", dict(), dict(rotary_dim=64)),
]


@pytest.mark.parametrize("code, bug, intended", SINGLE)
def test_each_bug_gives_exactly_its_code(code, bug, intended):
    made = dict(dim=128, base=intended.get("base", 1e4))
    made.update(bug)
    result = diagnose_rope(written_rope(**made), dim=128, **intended)
    assert result.findings == [code], result.explanation


FIXES = {"layout": "layout_permutation", "rotation-reversed": "(-b, a)",
         "frequency-exponent": "torch.arange(0, 128, 2) / 128",
         "base": "rope_theta", "positions-precision": "float32",
         "partial-rotary": "rotary_dim"}


@pytest.mark.parametrize("code, bug, intended", SINGLE[:-1])
def test_explanation_gives_evidence_and_fix(code, bug, intended):
    made = dict(dim=128, base=intended.get("base", 1e4))
    made.update(bug)
    text = diagnose_rope(written_rope(**made), dim=128, **intended).explanation
    assert "Fix:" in text and FIXES[code] in text, text


def test_explanation_evidence():
    text = diagnose_rope(written_rope(128, layout="interleaved"), dim=128).explanation
    assert "pairs (0, 1), (2, 3) rotate together" in text and "(0, 64)" in text
    text = diagnose_rope(written_rope(128, base=1e4), dim=128, base=5e5).explanation
    assert "fit base 10000 " in text
    text = diagnose_rope(written_rope(128, position_dtype=torch.bfloat16),
                         dim=128).explanation
    assert "8191 acts as 8192" in text and "bfloat16" in text
    text = diagnose_rope(written_rope(128, rotary=32), dim=128).explanation
    assert "rotates 32 of the 128 features" in text


# -- several bugs at once -----------------------------------------------------------

PAIRS = [
    (["layout", "rotation-reversed"], dict(layout="interleaved", sign=-1.0), {}),
    (["layout", "frequency-exponent"], dict(layout="interleaved", exponent="i/d"), {}),
    (["layout", "base"], dict(layout="interleaved", base=1e4), dict(base=1e6)),
    (["rotation-reversed", "positions-precision"],
     dict(sign=-1.0, position_dtype=torch.bfloat16), {}),
    (["frequency-exponent", "base"], dict(exponent="i/d", base=1e4), dict(base=5e5)),
    (["base", "positions-precision"], dict(base=1e4, position_dtype=torch.float16),
     dict(base=5e5)),
    (["layout", "partial-rotary"], dict(layout="interleaved", rotary=64), {}),
    (["frequency-exponent", "positions-precision"],
     dict(exponent="i/d", position_dtype=torch.float16, freq_dtype=torch.float16), {}),
    (["base", "positions-precision", "partial-rotary"],
     dict(base=1e6, position_dtype=torch.bfloat16, freq_dtype=torch.bfloat16,
          rotary=32), {}),
    (["rotation-reversed", "positions-precision", "partial-rotary"],
     dict(sign=-1.0, position_dtype=torch.float16, rotary=64), {}),
]


@pytest.mark.parametrize("codes, bugs, intended", PAIRS)
@pytest.mark.parametrize("layout", rope.LAYOUTS)
def test_combined_bugs_give_every_code(codes, bugs, intended, layout):
    made = dict(dim=128, base=intended.get("base", 1e4), layout=layout)
    made.update(bugs)
    if "layout" in codes:
        made["layout"] = "half" if layout == "interleaved" else "interleaved"
    result = diagnose_rope(written_rope(**made), dim=128, layout=layout, **intended)
    assert result.findings == [c for c in CODES if c in codes], result.explanation


def test_cos_sin_laid_out_for_the_other_layout():
    fn = written_rope(128, layout="interleaved", tables="half")
    assert diagnose_rope(fn, dim=128).findings == ["layout"]
    fn = written_rope(128, layout="half", tables="interleaved")
    assert diagnose_rope(fn, dim=128).findings == ["layout"]


def test_angles_in_bfloat16():
    """inv_freq, positions and angles all in bfloat16: positions-precision."""
    def fn(x, positions):
        inv = (1.0 / 1e4 ** (torch.arange(0, 64, 2).float() / 64)).bfloat16()
        angles = positions.bfloat16()[:, None] * inv
        return rope.apply_cos_sin(x, *(t.float() for t in (
            torch.cat([angles, angles], -1).float().cos(),
            torch.cat([angles, angles], -1).float().sin())))

    assert diagnose_rope(fn, dim=64).findings == ["positions-precision"]


@pytest.mark.parametrize("fn", [
    lambda x, p: x,                                           # no rotation at all
    lambda x, p: x + 0.1,                                     # not linear
    lambda x, p: 1.5 * x,                                     # changes x at position 0
])
def test_other_maps_are_not_rope(fn):
    assert diagnose_rope(fn, dim=64).findings == ["not-rope"]


def test_frequencies_not_geometric():
    """Exact rotations at constant frequencies that no ladder explains (YaRN's,
    where plain RoPE is intended): the finding is the frequencies."""
    freq = scaling.rope_parameters("yarn", 64, factor=4.0,
                                   original_max_position_embeddings=1024,
                                   dtype=torch.float32)[0]
    found = diagnose_rope(lambda x, p: rope.apply_rope(x, p, freq), dim=64)
    assert found.findings == ["frequency"], found.explanation
    assert "no base or exponent reproduces them" in found.explanation, found.explanation


def test_position_interpolation_is_named_as_a_rope():
    """Every frequency divided by 4 is a RoPE (position interpolation), named."""
    result = diagnose_rope(lambda x, p: rope.apply_rope(
        x, p, rope.inv_freq(64, dtype=torch.float32) / 4), dim=64)
    assert result.findings == ["scaling"]
    assert "position interpolation" in result.explanation


def test_round_significand_matches_torch_dtypes():
    p = torch.arange(0, 70000)
    assert torch.equal(round_significand(p, 8), p.to(torch.bfloat16).double())
    small = p[p < 65504]
    assert torch.equal(round_significand(small, 11), small.to(torch.float16).double())


# -- arguments and failing fns --------------------------------------------------------

def _ok(x, p):
    return x


@pytest.mark.parametrize("kwargs, name", [
    (dict(dim=63), "dim"), (dict(dim=64, base=1.0), "base"),
    (dict(dim=64, layout="halves"), "layout"), (dict(dim=64, rotary_dim=66), "rotary_dim"),
    (dict(dim=64, max_position=10), "max_position"), (dict(dim="64"), "dim"),
])
def test_bad_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        diagnose_rope(_ok, **kwargs)
    with pytest.raises(ValueError, match="^fn must be callable"):
        diagnose_rope(None, dim=64)


def test_failing_fn_gets_a_clear_message():
    def raises(x, p):
        raise RuntimeError("boom")

    with pytest.raises(ValueError, match=r"^fn raised RuntimeError: boom \(when called"):
        diagnose_rope(raises, dim=64)
    with pytest.raises(ValueError, match=r"^fn returned shape \(64, \d+, 32\)"):
        diagnose_rope(lambda x, p: x[..., :32], dim=64)
    with pytest.raises(ValueError, match="^fn returned NaN"):
        diagnose_rope(lambda x, p: x * float("nan"), dim=64)
    with pytest.raises(ValueError, match="^fn must return a tensor"):
        diagnose_rope(lambda x, p: "x", dim=64)


# -- the command line -----------------------------------------------------------------

def test_command_line(tmp_path):
    module = tmp_path / "myrope.py"
    module.write_text(textwrap.dedent("""
        import torch

        def rope(x, positions):
            inv = 1.0 / 500000.0 ** (torch.arange(0, 128, 2).float() / 128)
            angles = positions.to(torch.bfloat16).float()[:, None] * inv
            a, b = x[..., 0::2], x[..., 1::2]
            c, s = angles.cos(), angles.sin()
            return torch.stack([a * c - b * s, b * c + a * s], -1).flatten(-2)

        def broken(x, positions):
            return x[:, :1]
    """))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-m", "posenc_lib.tools.diagnose", f"{module}:rope",
                          "--dim", "128", "--base", "500000", "--layout", "half"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith("findings: layout, positions-precision"), run.stdout
    run = subprocess.run([sys.executable, "-m", "posenc_lib.tools.diagnose", f"{module}:rope",
                          "--dim", "128", "--base", "500000", "--layout", "interleaved"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.stdout.startswith("findings: positions-precision"), run.stdout
    for target, message in ((f"{module}:broken", "error: fn returned shape"),
                            (f"{module}:missing", "error: target:"),
                            ("nofile.py:rope", "error: target: no file")):
        run = subprocess.run([sys.executable, "-m", "posenc_lib.tools.diagnose", target,
                              "--dim", "128"], capture_output=True, text=True, env=env,
                             cwd=tmp_path)
        assert run.returncode == 2 and run.stderr.startswith(message), run.stderr
        assert "Traceback" not in run.stderr


# -- inv_freq against a config --------------------------------------------------------

LLAMA3 = {"rope_theta": 500000.0, "head_dim": 128, "hidden_size": 4096,
          "num_attention_heads": 32, "max_position_embeddings": 131072,
          "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 8192}}
YARN = {"rope_theta": 1000000.0, "head_dim": 128, "hidden_size": 4096,
        "num_attention_heads": 32, "max_position_embeddings": 32768,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                         "original_max_position_embeddings": 32768}}
NTK = {"rope_theta": 10000.0, "head_dim": 64, "hidden_size": 2048,
       "num_attention_heads": 32, "max_position_embeddings": 4096,
       "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}


def _plain(dim, base):
    return 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def test_inv_freq_correct():
    for config in (LLAMA3, YARN, NTK):
        inv, _ = scaling.rope_from_config(config, dtype=torch.float32)
        assert diagnose_inv_freq(inv, config).findings == []


def test_inv_freq_known_bugs():
    plain = _plain(128, 500000.0)
    wavelength = 2 * torch.pi / plain
    smooth = ((8192 / wavelength - 1.0) / 3.0).clamp(0, 1)
    swapped = plain * (1 - smooth) + plain / 8 * smooth
    assert diagnose_inv_freq(swapped, LLAMA3).findings == ["llama3-smoothing-inverted"]
    assert diagnose_inv_freq(plain, LLAMA3).findings == ["scaling-ignored"]
    # YaRN with the ramp inverted: weight 1 - w instead of w.
    low, high = scaling.yarn_correction_range(128, 1e6, 32768)
    w = ((torch.arange(64, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    base = _plain(128, 1e6)
    assert diagnose_inv_freq(base * w + base / 4 * (1 - w), YARN).findings == [
        "yarn-ramp-inverted"]
    # dynamic NTK at its own length: plain RoPE, so the NTK exponent bug needs ntk.
    ntk = dict(NTK, rope_scaling={"rope_type": "linear", "factor": 2.0})
    assert diagnose_inv_freq(_plain(64, 1e4) * 2, ntk).findings == [
        "linear-factor-multiplied"]
    plain_cfg = {"rope_theta": 500000.0, "head_dim": 128, "hidden_size": 4096,
                 "num_attention_heads": 32}
    result = diagnose_inv_freq(_plain(128, 1e4), plain_cfg)
    assert result.findings == ["base"] and "10000" in result.explanation
    assert diagnose_inv_freq(500000.0 ** (-torch.arange(64.0) / 128),
                             plain_cfg).findings == ["frequency-exponent"]
    assert diagnose_inv_freq(_plain(128, 500000.0) * 1.01, plain_cfg).findings == [
        "unknown"]


def test_inv_freq_arguments():
    with pytest.raises(ValueError, match="^inv_freq"):
        diagnose_inv_freq(torch.ones(2, 3), LLAMA3)
    with pytest.raises(ValueError, match="^config"):
        diagnose_inv_freq(torch.ones(64), [1, 2])


def test_layout_fix_reorders_the_checkpoint_the_right_way():
    """The fix the explanation gives for a fn in the interleaved layout and a
    half-layout checkpoint: rows W[argsort(perm)] per head keep every score."""
    text = diagnose_rope(written_rope(16, layout="interleaved"), dim=16).explanation
    assert "W[torch.argsort(perm)]" in text
    gen = torch.Generator().manual_seed(0)
    n_heads, head_dim, seq = 2, 16, 9
    w_q, w_k = (torch.randn(n_heads * head_dim, 8, generator=gen, dtype=torch.float64)
                for _ in range(2))
    x = torch.randn(seq, 8, generator=gen, dtype=torch.float64)
    inv, pos = rope.inv_freq(head_dim, dtype=torch.float64), torch.arange(seq)
    back = torch.argsort(rope.layout_permutation(head_dim))

    def scores(wq, wk, layout):
        q, k = ((x @ w.T).reshape(seq, n_heads, head_dim).transpose(0, 1)
                for w in (wq, wk))
        q, k = (rope.apply_rope(t, pos, inv, layout=layout) for t in (q, k))
        return q @ k.transpose(-1, -2)

    def reorder(w):
        return w.reshape(n_heads, head_dim, -1)[:, back].reshape(w.shape)

    assert torch.allclose(scores(reorder(w_q), reorder(w_k), "interleaved"),
                          scores(w_q, w_k, "half"), atol=1e-10)
    text = diagnose_rope(written_rope(16), dim=16, layout="interleaved").explanation
    assert "rope.interleaved_to_half(W, n_heads)" in text


def test_partial_rotary_spacing():
    """With rotary_dim given, frequencies spaced over the whole head are a wrong
    exponent; for a fn that rotates fewer features than intended they are the
    p-RoPE convention, and partial-rotary alone."""
    head = rope.inv_freq(128, dtype=torch.float32)[:16]

    def fn(x, positions):
        return rope.apply_rope(x, positions, head, rotary_dim=32)

    assert diagnose_rope(fn, dim=128, rotary_dim=32).findings == ["frequency-exponent"]
    assert diagnose_rope(fn, dim=128).findings == ["partial-rotary"]
    assert diagnose_rope(written_rope(128, rotary=32), dim=128,
                         rotary_dim=32).findings == []


ROPE_MUTANTS = {"rope-inv-freq-exponent": "frequency-exponent",
                "rope-layout-confusion": "layout",
                "rope-rotation-sign": "rotation-reversed",
                "rope-positions-bfloat16": "positions-precision"}


@pytest.mark.parametrize("mutant_id, code", ROPE_MUTANTS.items())
def test_catalogue_mutants_of_rope(mutant_id, code):
    """The mutation catalogue's RoPE bugs, planted in a copy of rope.py, get
    their code (the layout mutant in the half layout it breaks)."""
    import types
    from helpers.mutation import MUTANTS
    mutant = next(m for m in MUTANTS if m.id == mutant_id)
    source = (ROOT / mutant.path).read_text()
    assert source.count(mutant.old) == 1
    module = types.ModuleType("posenc_lib._rope_mutant")
    module.__package__ = "posenc_lib"
    exec(compile(source.replace(mutant.old, mutant.new), mutant.path, "exec"),
         module.__dict__)
    inv = module.inv_freq(64, dtype=torch.float32)

    def fn(x, positions):
        return module.apply_rope(x, positions, inv)

    assert diagnose_rope(fn, dim=64).findings == [code]


def test_readme_example_output_is_current(tmp_path, capsys):
    """The README's "Check your own RoPE" example: its code, run through the
    command line's main, prints exactly the output pasted under it."""
    from posenc_lib.tools.diagnose import main
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Check your own RoPE"):]
    code = section[section.index("```python\n") + 10:]
    code = code[:code.index("```")]
    shown = section[section.index("```console\n") + 11:]
    shown = shown[:shown.index("```")].splitlines()
    command = shown[0].removeprefix("$ python -m posenc_lib diagnose ").split()
    (tmp_path / "my_rope.py").write_text(code)
    command[0] = str(tmp_path / command[0])
    assert main(command) == 1
    assert capsys.readouterr().out.splitlines() == shown[1:]
