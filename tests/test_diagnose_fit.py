"""diagnose_rope's general fit on the ports of the diagnose-3 review: each row
comes back clean (the two correct ones) or with its cause named; internal
failures become a finding; probes reach the model's context. Kernels are
written here, from frequencies computed here (transformers' formulas), not by
posenc_lib."""

import math
import warnings

import pytest
import torch

from posenc_lib.tools import diagnose
from posenc_lib.tools.diagnose import cli, rope_fn
from posenc_lib.tools.diagnose import diagnose_rope

L31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}


def ladder(dim, base):
    return 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)


def llama3(dim, base, low=1.0, high=4.0, factor=8.0, original=8192, two_pi=True,
           reverse=False):
    inv = ladder(dim, base)
    wavelength = (2 * math.pi if two_pi else 1.0) / inv
    smooth = ((original / wavelength - low) / (high - low)).clamp(0, 1)
    if reverse:
        smooth = 1 - smooth
    mid = (1 - smooth) * inv / factor + smooth * inv
    return torch.where(wavelength < original / high, inv,
                       torch.where(wavelength > original / low, inv / factor, mid))


def yarn(dim, base, factor=4.0, original=4096):
    inv = ladder(dim, base)

    def correction(turns):
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = max(math.floor(correction(32)), 0), min(math.ceil(correction(1)), dim - 1)
    keep = 1 - ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return inv / factor * (1 - keep) + inv * keep, 0.1 * math.log(factor) + 1.0


def rotate_half(x):
    x1, x2 = x.chunk(2, -1)
    return torch.cat((-x2, x1), -1)


def kernel(inv, pos_map=None, att=1.0, dtype=None):
    inv = inv.float()

    def fn(x, positions):
        p = positions if pos_map is None else pos_map(positions)
        f = p.float()[:, None] * inv
        emb = torch.cat((f, f), -1)
        cos, sin = emb.cos() * att, emb.sin() * att
        if dtype is not None:
            xx = x.to(dtype)
            return (xx * cos.to(dtype) + rotate_half(xx) * sin.to(dtype)).float()
        return x * cos + rotate_half(x) * sin
    return fn


def cache(inv, rows, mode):
    f = torch.arange(rows, dtype=torch.float32)[:, None] * inv.float()
    emb = torch.cat((f, f), -1)
    cos, sin = emb.cos(), emb.sin()

    def fn(x, positions):
        p = positions % rows if mode == "wrap" else positions.clamp(max=rows - 1)
        return x * cos[p] + rotate_half(x) * sin[p]
    return fn


def body(dim, base, how):
    inv = ladder(dim, base).float()

    def fn(x, positions):
        return how(x, positions.float()[:, None] * inv)
    return fn


def sin_next(x, f):
    g = torch.roll(f, -1, -1)
    return x * torch.cat((f, f), -1).cos() + rotate_half(x) * torch.cat((g, g), -1).sin()


def sin_repeat_interleave(x, f):
    return x * torch.cat((f, f), -1).cos() + rotate_half(x) * f.repeat_interleave(2, -1).sin()


def missing_minus(x, f):
    emb = torch.cat((f, f), -1)
    x1, x2 = x.chunk(2, -1)
    return x * emb.cos() + torch.cat((x2, x1), -1) * emb.sin()


def outputs_swapped(x, f):
    c, s = f.cos(), f.sin()
    x1, x2 = x.chunk(2, -1)
    return torch.cat((x2 * c + x1 * s, x1 * c - x2 * s), -1)


def tiled(dim, base):
    inv = ladder(dim, base).float()

    def fn(x, positions):
        p = positions.clone()
        if len(p) > 128:        # every tile after the first restarts from the call's start
            p[128:] = p[0] + torch.arange(len(p) - 128)
        f = p.float()[:, None] * inv
        return x * torch.cat((f, f), -1).cos() + rotate_half(x) * torch.cat((f, f), -1).sin()
    return fn


def partial(dim, rotary, base, how):
    inv = ladder(rotary, base).float()

    def fn(x, positions):
        f = positions.float()[:, None] * inv
        emb = torch.cat((f, f), -1)
        return how(x, emb, rotary)
    return fn


def whole_head_rotate_half(x, emb, r):
    ones = torch.ones(emb.shape[0], x.shape[-1] - r)
    return x * torch.cat((emb.cos(), ones), -1) + rotate_half(x) * torch.cat(
        (emb.sin(), 0 * ones), -1)


def pass_times_cos(x, emb, r):
    xr, xp = x[..., :r], x[..., r:]
    return torch.cat((xr * emb.cos() + rotate_half(xr) * emb.sin(),
                      xp * emb.cos()[:, :1]), -1)


def factor_on_pass_through(x, emb, r, att=yarn(64, 1e4)[1]):
    xr, xp = x[..., :r], x[..., r:]      # YaRN's factor on cos/sin and on the rest
    return torch.cat((xr * emb.cos() * att + rotate_half(xr) * emb.sin() * att,
                      xp * att), -1)


def last_slice(x, emb, r):
    xp, xr = x[..., :-r], x[..., -r:]
    return torch.cat((xp, xr * emb.cos() + rotate_half(xr) * emb.sin()), -1)


def run(fn, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return diagnose_rope(fn, **kw)


ROWS = [
    # (name, fn, kwargs, findings, words in the explanation)
    ("cache of 4096 rows that wraps", lambda: cache(ladder(64, 1e4), 4096, "wrap"),
     dict(dim=64), ["position-map"], ["p mod 4096"]),
    ("cache of 2048 rows, clamped", lambda: cache(ladder(64, 1e4), 2048, "clamp"),
     dict(dim=64), ["position-map"], ["min(p, 2047)"]),
    ("linear scaling applied twice", lambda: kernel(ladder(64, 1e4) / 16),
     dict(dim=64, rope_scaling={"rope_type": "linear", "factor": 4.0}), ["scaling"],
     ["applied twice"]),
    ("frequencies truncated to int64", lambda: kernel(torch.floor(ladder(64, 1e4))),
     dict(dim=64), ["frequency-dtype"], ["integer dtype"]),
    ("sin of the next pair", lambda: body(64, 1e4, sin_next), dict(dim=64),
     ["pair-block"], ["sin of another pair", "offset +1"]),
    ("sin repeat_interleave, cos cat", lambda: body(64, 1e4, sin_repeat_interleave),
     dict(dim=64), ["pair-block"], ["repeat_interleave"]),
    ("rotate_half without its minus", lambda: body(64, 1e4, missing_minus),
     dict(dim=64), ["pair-block"], ["minus of the rotation is missing"]),
    ("pair outputs in the wrong order", lambda: body(64, 1e4, outputs_swapped),
     dict(dim=64), ["pair-block"], ["swapped order"]),
    ("rotate_half over the whole head", lambda: partial(64, 32, 1e4,
                                                        whole_head_rotate_half),
     dict(dim=64, rotary_dim=32), ["pair-block"], ["rotate-half over another width"]),
    ("pass-through multiplied by cos", lambda: partial(64, 32, 1e4, pass_times_cos),
     dict(dim=64, rotary_dim=32), ["pass-through"], ["multiplied by cos"]),
    ("YaRN factor applied to pass-through features",
     lambda: partial(64, 32, 1e4, factor_on_pass_through),
     dict(dim=64, rotary_dim=32),
     None, ["multiplied by"]),
    ("tiled kernel wrong past 128 tokens", lambda: tiled(64, 1e4), dict(dim=64),
     ["position-map"], ["sequence index 128", "tile"]),
    ("bf16 kernel with fp32 angles (correct)",
     lambda: kernel(ladder(64, 1e4), dtype=torch.bfloat16), dict(dim=64), [],
     ["bfloat16"]),
    ("last 32 of 96 rotated, as intended (correct)",
     lambda: partial(96, 32, 1e4, last_slice),
     dict(dim=96, rotary_dim=32, rotary_position="last"), [], ["last of 96"]),
    ("last 32 of 96 rotated, first intended", lambda: partial(96, 32, 1e4, last_slice),
     dict(dim=96, rotary_dim=32), ["partial-rotary"], ["rotary_position='last'"]),
]

def dynamic_dropped(dim=64, base=1e4, factor=2.0, longest=4096, length=10240):
    alpha = factor * length / longest - (factor - 1)
    return kernel(ladder(dim, base * alpha))     # the exponent d/(d-2) dropped


def exponent_over_head(dim=128, rotary=32, base=1e4):
    inv = (1.0 / base ** (torch.arange(0, rotary, 2, dtype=torch.float64) / dim)).float()

    def fn(x, positions):
        f = positions.float()[:, None] * inv
        emb = torch.cat((f, f), -1)
        xr, xp = x[..., :rotary], x[..., rotary:]
        return torch.cat((xr * emb.cos() + rotate_half(xr) * emb.sin(), xp), -1)
    return fn


ROWS += [
    ("dynamic NTK with the exponent dropped", dynamic_dropped,
     dict(dim=64, rope_scaling={"rope_type": "dynamic", "factor": 2.0},
          max_position_embeddings=4096, seq_len=10240), ["scaling"],
     ["without the exponent d/(d-2)", "L = 10240"]),
    ("partial 32 of 128, exponent over head_dim", exponent_over_head,
     dict(dim=128, rotary_dim=32), ["frequency-exponent"],
     ["is the whole head (head_dim)"]),
]
SLOW_ROWS = [
    ("Llama 3.1 with a cache of 8192 rows that wraps",
     lambda: cache(llama3(128, 5e5), 8192, "wrap"),
     dict(dim=128, base=5e5, rope_scaling=L31, max_position_embeddings=131072),
     ["position-map"], ["p mod 8192", "131072"]),
    ("PI x8 for Llama 3.1", lambda: kernel(ladder(128, 5e5) / 8),
     dict(dim=128, base=5e5, rope_scaling=L31, max_position_embeddings=131072),
     ["scaling"], ["plain position interpolation", "'llama3'"]),
    ("frequencies divided by 4", lambda: kernel(ladder(128, 5e5) / 4),
     dict(dim=128, base=5e5), ["scaling"], ["divided by 4"]),
    ("frequencies divided by 8", lambda: kernel(ladder(128, 5e5) / 8),
     dict(dim=128, base=5e5), ["scaling"], ["divided by 8"]),
    ("Llama 3 low/high swapped", lambda: kernel(llama3(128, 5e5, low=4.0, high=1.0)),
     dict(dim=128, base=5e5, rope_scaling=L31), ["scaling"], ["swapped"]),
    ("Llama 3 wavelength without 2 pi", lambda: kernel(llama3(128, 5e5, two_pi=False)),
     dict(dim=128, base=5e5, rope_scaling=L31), ["scaling"], ["1/θ_i"]),
    ("Llama 3 smoothing reversed", lambda: kernel(llama3(128, 5e5, reverse=True)),
     dict(dim=128, base=5e5, rope_scaling=L31), ["scaling"], ["smoothing weights"]),
    ("YaRN ramp from the extended length",
     lambda: kernel(*yarn(128, 5e5, original=16384)[:1], att=yarn(128, 5e5)[1]),
     dict(dim=128, base=5e5, rope_scaling=YARN), ["scaling"], ["extended length"]),
    ("Llama 3.1 correct", lambda: kernel(llama3(128, 5e5)),
     dict(dim=128, base=5e5, rope_scaling=L31, max_position_embeddings=131072), [],
     ["131071"]),
]


@pytest.mark.parametrize("name, make, kw, findings, words", ROWS,
                         ids=[row[0] for row in ROWS])
def test_review_rows(name, make, kw, findings, words):
    result = run(make(), **kw)
    if findings is None:        # the pass-through finding, whatever else is said
        assert "pass-through" in result.findings, str(result)
    else:
        assert result.findings == findings, str(result)
    for word in words:
        assert word in result.explanation, (word, str(result))


@pytest.mark.slow
@pytest.mark.parametrize("name, make, kw, findings, words", SLOW_ROWS,
                         ids=[row[0] for row in SLOW_ROWS])
def test_review_rows_long_context(name, make, kw, findings, words):
    test_review_rows(name, make, kw, findings, words)


def test_pi_scaled_rope_does_not_crash():
    """The case of the extend-and-serve review: linear x8 where llama3 is meant."""
    result = run(kernel(ladder(64, 5e5) / 8), dim=64, base=5e5,
                 rope_scaling=dict(L31, original_max_position_embeddings=1024))
    assert result.findings == ["scaling"], str(result)
    assert "factor 8" in result.explanation


def test_probes_reach_the_context():
    """A cache of 8192 rows is right below 8192 and wrong above: found only when
    the probes reach the context the config gives."""
    fn = cache(ladder(64, 1e4), 8192, "wrap")
    assert run(fn, dim=64).ok                      # default context 8192: not reached
    result = run(fn, dim=64, max_position_embeddings=32768)
    assert result.findings == ["position-map"]
    assert result.fitted["probed_positions"] == (0, 32767)


def test_internal_failure_becomes_a_finding(monkeypatch):
    """A planted failure inside the fit is reported as not-fitted, never raised."""
    def broken(*args, **kwargs):
        raise OverflowError("int too big to convert")
    monkeypatch.setattr(rope_fn, "_fit_general", broken)
    result = run(kernel(ladder(64, 1e4)), dim=64)
    assert result.findings == ["not-fitted"]
    assert "OverflowError" in result.explanation


def test_huge_fitted_base_does_not_crash():
    """A ladder so steep that every exponent implies a base beyond float range."""
    inv = torch.exp(-3.0 * torch.arange(32, dtype=torch.float64))
    result = run(kernel(inv), dim=64)
    assert result.findings and "not-fitted" not in result.findings or \
        result.findings == ["not-fitted"]


def test_fn_that_exits_or_hangs_or_returns_meta():
    def exits(x, positions):
        raise SystemExit(0)

    def hangs(x, positions):
        import time
        time.sleep(30)
        return x

    def meta(x, positions):
        return torch.empty(x.shape, device="meta")

    with pytest.raises(ValueError, match="SystemExit"):
        run(exits, dim=8)
    with pytest.raises(ValueError, match="timeout = 0.5 s"):
        run(hangs, dim=8, timeout=0.5)
    with pytest.raises(ValueError, match="meta device"):
        run(meta, dim=8)


def test_command_line_front_door(tmp_path, capsys, monkeypatch):
    """Every failure is one `error:` line and exit 2: fn exits, the module exits
    on import, the config nests too deep, and an internal failure (planted)."""
    (tmp_path / "port.py").write_text(
        "import sys\n"
        "def exits(x, positions):\n    sys.exit(0)\n")
    (tmp_path / "bad.py").write_text("import sys\nsys.exit(3)\n")
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    cases = [[f"{tmp_path}/port.py:exits", "--dim", "8"],
             [f"{tmp_path}/bad.py:fn", "--dim", "8"],
             [f"{tmp_path}/port.py:exits", "--config", str(tmp_path / "deep.json")]]
    for argv in cases:
        capsys.readouterr()
        assert diagnose.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
    monkeypatch.setattr(cli, "diagnose_rope",
                        lambda *a, **k: (_ for _ in ()).throw(OverflowError("planted")))
    assert diagnose.main([f"{tmp_path}/port.py:exits", "--dim", "8"]) == 2
    err = capsys.readouterr().err
    assert err == "error: OverflowError: planted\n"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from posenc_lib.tools.diagnose import fit as _diagnose_fit  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["identity", "offset", "scale", "wrap", "clamp"]),
       n=st.sampled_from([1000, 2048, 4096, 5000]), c=st.integers(-50, 50).filter(bool),
       dim=st.sampled_from([16, 64, 128]), base=st.sampled_from([1e4, 5e5, 1e6]))
def test_position_map_is_solved_and_classified(kind, n, c, dim, base):
    """Angles of a RoPE at q(p), with float32 rounding, give back q and its kind."""
    positions = _diagnose_fit.probe_positions(32767)
    p = positions.to(torch.float64)
    q = {"identity": p, "offset": p + c, "scale": p / 4, "wrap": torch.remainder(p, n),
         "clamp": p.clamp(max=n - 1), "reversed": -p}[kind]
    theta = ladder(dim, base)
    angles = (q.float()[:, None] * theta.float()).double()       # float32 angles
    angles = torch.atan2(angles.sin(), angles.cos())
    tol = _diagnose_fit.pair_tolerance(positions, theta, 0.0)
    solved, ok = _diagnose_fit.solve_positions(angles, theta, tol, 32767)
    assert bool(ok.all())
    qtol = 0.05 + 64 * 2.0 ** -23 * p
    got, value, _ = _diagnose_fit.classify_map(positions, solved, qtol)
    assert got == kind
    assert value == pytest.approx({"identity": 0, "offset": c, "scale": 0.25, "wrap": n,
                                   "clamp": n, "reversed": -1.0}[kind])


def test_reversed_rotation_is_classified_as_reversed():
    """q(p) = -p (every pair backwards) is not a scale: the older fit names it."""
    positions = _diagnose_fit.probe_positions(2047)
    theta = ladder(64, 1e4)
    angles = -(positions.to(torch.float64)[:, None] * theta)
    angles = torch.atan2(angles.sin(), angles.cos())
    tol = _diagnose_fit.pair_tolerance(positions, theta, 0.0)
    solved, ok = _diagnose_fit.solve_positions(angles, theta, tol, 2047)
    assert bool(ok.all())
    kind, value, _ = _diagnose_fit.classify_map(positions, solved, 0.05 + 0 * solved)
    assert (kind, value) == ("reversed", pytest.approx(-1.0))


@pytest.mark.parametrize("dim, kw", [(2, {}), (4, dict(max_position=64))])
def test_few_pairs_are_not_a_position_map(dim, kw):
    """With one or two pairs the angles repeat within the probed range: the
    position nearest the one given is taken, so a correct RoPE stays clean
    (planted: taking the first candidate called these position-map)."""
    result = run(kernel(ladder(dim, 1e4)), dim=dim, **kw)
    assert result.ok, str(result)
