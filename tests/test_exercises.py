"""Every grader of posenc_lib.tools.exercises: a right answer passes, the starter gets
"not written yet", and each planted wrong answer gets a message naming its bug."""

import math

import pytest
import torch

from posenc_lib import multidim, relative, rope, scaling
from posenc_lib.tools import exercises


def starter(*args):
    raise NotImplementedError


# -- right answers, written here independently of the library where short -------------

def sinusoidal(n, dim, base):
    p = torch.arange(n, dtype=torch.float64)[:, None]
    omega = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    out = torch.empty(n, dim, dtype=torch.float64)
    out[:, 0::2], out[:, 1::2] = torch.sin(p * omega), torch.cos(p * omega)
    return out


def shift(k, dim, base):
    omega = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    m = torch.zeros(dim, dim, dtype=torch.float64)
    for i, w in enumerate(omega):
        c, s = math.cos(k * w), math.sin(k * w)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    return m


def rope_interleaved(x, positions):
    inv = 1.0 / 10000.0 ** (torch.arange(0, 64, 2).float() / 64)
    angles = positions.float()[:, None] * inv
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = angles.cos(), angles.sin()
    return torch.stack([a * c - b * s, b * c + a * s], -1).flatten(-2)


def to_half(weight, n_heads):
    head_dim = weight.shape[0] // n_heads
    perm = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])
    return weight.reshape(n_heads, head_dim, -1)[:, perm].reshape(weight.shape)


def yarn(dim, base, factor, length):
    return scaling.rope_parameters("yarn", dim, base, factor=factor,
                                   original_max_position_embeddings=length,
                                   dtype=torch.float64)[0]


RIGHT = [
    (exercises.check_sinusoidal, sinusoidal),
    (exercises.check_shift_matrix, shift),
    (exercises.check_t5_bucket, relative.t5_bucket),
    (exercises.check_shaw_labels, lambda r, k: r.clamp(-k, k) + k),
    (exercises.check_rope_interleaved, rope_interleaved),
    (exercises.check_layout_conversion, to_half),
    (exercises.check_mrope_axis_map,
     lambda s: torch.repeat_interleave(torch.arange(len(s)), torch.tensor(s))),
    (exercises.check_axial_inv_freq, lambda a, b: multidim.axial_inv_freq(a, b)),
    (exercises.check_ntk_base, lambda b, f, d: b * f ** (d / (d - 2))),
    (exercises.check_yarn_inv_freq, yarn),
]


@pytest.mark.parametrize("check, answer", RIGHT, ids=lambda v: getattr(v, "__name__", ""))
def test_right_answer_passes_and_starter_is_not_done(check, answer):
    report = check(answer)
    assert report.passed, report.message
    assert str(report).startswith("Correct.")
    report = check(starter)
    assert not report.passed and "not written yet" in report.message


def _sin_halves(n, dim, base):
    t = sinusoidal(n, dim, base)
    return torch.cat([t[:, 0::2], t[:, 1::2]], -1)


def _t5_sides(r, bidirectional, n, d):
    return relative.t5_bucket(-r, bidirectional, n, d) if bidirectional else \
        relative.t5_bucket(r, bidirectional, n, d)


WRONG = [
    (exercises.check_sinusoidal, lambda n, d, b: sinusoidal(n, d, b)[:, [
        j ^ 1 for j in range(d)]], "sin and cos are swapped"),
    (exercises.check_sinusoidal, _sin_halves, "first half"),
    (exercises.check_sinusoidal, lambda n, d, b: sinusoidal(n, d, b ** 0.5),
     "exponent i/d"),
    (exercises.check_sinusoidal, lambda n, d, b: sinusoidal(n, d, b)[:, :d - 1],
     "returned shape"),
    (exercises.check_shift_matrix, lambda k, d, b: shift(k, d, b).T, "transpose"),
    (exercises.check_shift_matrix, lambda k, d, b: torch.eye(d), "differs from"),
    (exercises.check_t5_bucket, lambda r, bi, n, d: relative.t5_bucket(
        -r, bi, n, d) if bi else relative.t5_bucket(r, bi, n, d), "wrong sides"),
    (exercises.check_t5_bucket, lambda r, bi, n, d: relative.t5_bucket(
        r if bi else -r, bi, n, d), "query minus key"),
    (exercises.check_t5_bucket, lambda r, bi, n, d: relative.t5_bucket(
        r, bi, n, d).clamp_max(n - 2), "never used"),
    (exercises.check_t5_bucket, lambda r, bi, n, d: exercises._t5_exact(
        r, bi, n, d, 4), "end at N/4"),
    (exercises.check_t5_bucket, lambda r, bi, n, d: exercises._t5_exact(
        r, bi, n, d, 2, clamp=False), "not clamped"),
    (exercises.check_shaw_labels, lambda r, k: r.clamp(-k, k), "not shifted"),
    (exercises.check_shaw_labels, lambda r, k: r + k, "not clipped"),
    (exercises.check_rope_interleaved, lambda x, p: rope.apply_rope(
        x, p, rope.inv_freq(64, dtype=torch.float32)), "finds layout"),
    (exercises.check_rope_interleaved, lambda x, p: rope_interleaved(x, -p),
     "rotation-reversed"),
    (exercises.check_rope_interleaved, lambda x, p: rope_interleaved(
        x, p.to(torch.bfloat16).long()), "positions-precision"),
    (exercises.check_rope_interleaved, lambda x, p: x[..., :3], "fn returned shape"),
    (exercises.check_layout_conversion, lambda w, h: w, "unchanged"),
    (exercises.check_layout_conversion, lambda w, h: w[rope.layout_permutation(
        w.shape[0])], "all rows at once"),
    (exercises.check_layout_conversion, lambda w, h: w.reshape(
        h, -1, w.shape[1])[:, torch.argsort(rope.layout_permutation(
            w.shape[0] // h))].reshape(w.shape), "inverse permutation"),
    (exercises.check_mrope_axis_map, lambda s: multidim.mrope_axis_map(
        s, interleaved=True), "round-robin"),
    (exercises.check_mrope_axis_map, lambda s: 2 - multidim.mrope_axis_map(s[::-1]),
     "reverse order"),
    (exercises.check_axial_inv_freq, lambda a, b: rope.inv_freq(2 * len(a), b,
                                                                dtype=torch.float64),
     "whole head: every axis"),
    (exercises.check_ntk_base, lambda b, f, d: b * f, "exponent d/(d-2) is missing"),
    (exercises.check_ntk_base, lambda b, f, d: "x", "must return a number"),
    (exercises.check_yarn_inv_freq, lambda d, b, f, n: rope.inv_freq(
        d, b, dtype=torch.float64), "scaling-ignored"),
]


@pytest.mark.parametrize("check, answer, named", WRONG)
def test_wrong_answer_names_the_bug(check, answer, named):
    report = check(answer)
    assert not report.passed and named in report.message, report.message
    assert str(report).startswith("Not yet.")


def test_yarn_inverted_ramp_is_named():
    low, high = scaling.yarn_correction_range(128, 10000.0, 4096)
    w = ((torch.arange(64, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    plain = rope.inv_freq(128, dtype=torch.float64)
    report = exercises.check_yarn_inv_freq(
        lambda d, b, f, n: plain * w + plain / f * (1 - w))
    assert "yarn-ramp-inverted" in report.message


def test_exception_in_answer_is_reported():
    report = exercises.check_shaw_labels(lambda r, k: 1 / 0)
    assert not report.passed and "ZeroDivisionError" in report.message


CHAPTERS = ["02_absolute", "03_relative", "04_rope", "05_multidim", "06_extension"]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_ends_with_graded_exercises(chapter):
    """The last block of each chapter: a heading, then per exercise a statement,
    a starter that raises NotImplementedError, a grader cell, and a hidden
    solution that the same grader passes (run here as well as in the build)."""
    import json
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "book" / f"{chapter}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    start = max(i for i, c in enumerate(cells)
                if c["cell_type"] == "markdown" and "## Exercises" in "".join(c["source"]))
    block = cells[start + 1:]
    solutions = [c for c in block if "hide-cell" in c["metadata"].get("tags", [])]
    starters = [c for c in block if "raise NotImplementedError" in "".join(c["source"])]
    assert 2 <= len(solutions) == len(starters) <= 3
    namespace = {"torch": torch, "math": math}
    for cell in block:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            # ruff formats the notebooks to the book's 88-character column
            assert all(len(line) <= 88 for line in source.splitlines())
            exec(compile(source.replace("print(", "str("), str(path), "exec"), namespace)


# -- graders vary their arguments ------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

LIBRARY_CALL = r"(posenc_lib|absolute\.|rope\.\w|scaling\.|rope_theta)"


def sinusoidal_stacked(n, dim, base):
    """The table written another way: sin and cos stacked, then flattened."""
    p = torch.arange(n, dtype=torch.float64)[:, None]
    w = torch.exp(-math.log(base) * torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    return torch.stack([torch.sin(p * w), torch.cos(p * w)], -1).flatten(1)


def shift_complex(k, dim, base):
    """M_k from the complex form: sin/cos pairs rotate by e^{-i k w}."""
    w = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    z = torch.exp(-1j * k * w)
    m = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor(
            [[z[i].real, -z[i].imag], [z[i].imag, z[i].real]])
    return m


def t5_written(r, bidirectional=True, num_buckets=32, max_distance=128):
    """T5's bucket, written as in the chapter's solution (float32 logarithm)."""
    n = num_buckets // 2 if bidirectional else num_buckets
    out = (r > 0).long() * n if bidirectional else torch.zeros_like(r)
    distance = r.abs() if bidirectional else (-r).clamp_min(0)
    exact = n // 2
    steps = torch.log(distance.float() / exact) / math.log(max_distance / exact)
    large = (exact + (steps * (n - exact)).long()).clamp_max(n - 1)
    return out + torch.where(distance < exact, distance, large)


def test_graders_reject_answers_that_ignore_an_argument():
    report = exercises.check_sinusoidal(lambda n, d, b: sinusoidal(n, d, 10000.0))
    assert not report.passed and "base argument is ignored" in report.message
    report = exercises.check_sinusoidal(lambda n, d, b: sinusoidal_stacked(n, d, b) * 0
                                        + sinusoidal(n, d, b) if b == 1e4 else
                                        sinusoidal(n, d, b ** 0.5))
    assert not report.passed and "exponent i/d" in report.message
    report = exercises.check_shift_matrix(lambda k, d, b: shift(k, d, 10000.0))
    assert not report.passed and "base argument is ignored" in report.message
    report = exercises.check_shift_matrix(lambda k, d, b: shift(abs(k), d, b))
    assert not report.passed and "abs(k)" in report.message
    report = exercises.check_t5_bucket(lambda r, bi, n, d: relative.t5_bucket(r, bi))
    assert not report.passed and "are ignored" in report.message
    report = exercises.check_t5_bucket(lambda r, bi, n, d: relative.t5_bucket(r, bi, n))
    assert not report.passed and "max_distance is ignored" in report.message
    report = exercises.check_shaw_labels(lambda r, k: r.clamp(-4, 4) + 4)
    assert not report.passed and "max_relative_position is ignored" in report.message


def test_graders_reject_wrong_types():
    report = exercises.check_shaw_labels(lambda r, k: (r.clamp(-k, k) + k).float())
    assert not report.passed and "nn.Embedding" in report.message
    report = exercises.check_t5_bucket(lambda r, bi, n, d: relative.t5_bucket(
        r, bi, n, d).double())
    assert not report.passed and "integer" in report.message


def test_integer_division_sinusoid_is_named_without_the_library():
    def intdiv(n, d, b):
        p = torch.arange(n, dtype=torch.float64)[:, None]
        w = b ** -(torch.arange(0, d, 2) // d).double()
        return torch.stack([torch.sin(p * w), torch.cos(p * w)], -1).flatten(1)

    report = exercises.check_sinusoidal(intdiv)
    assert not report.passed and "integer division" in report.message


WRONG_TABLES = [
    lambda n, d, b: sinusoidal(n, d, b)[:, [j ^ 1 for j in range(d)]],
    _sin_halves, lambda n, d, b: sinusoidal(n, d, b ** 0.5),
    lambda n, d, b: sinusoidal(n, d, 10000.0), lambda n, d, b: sinusoidal(n, d, b) * 2]


@pytest.mark.parametrize("answer", WRONG_TABLES)
def test_chapter_2_hints_name_no_library_call(answer):
    import re
    report = exercises.check_sinusoidal(answer)
    assert not report.passed and not re.search(LIBRARY_CALL, report.message), \
        report.message
    report = exercises.check_shift_matrix(lambda k, d, b: shift(k, d, b).T)
    assert not re.search(LIBRARY_CALL, report.message), report.message


def _rope_answer(inv_of, *, positions=lambda p, x: p, swap=False):
    def fn(x, positions_):
        inv = inv_of()
        t = positions(positions_, x).float()
        angles = t[:, None] * inv
        c, s = angles.cos(), angles.sin()
        if swap:
            c, s = s, c
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * c - b * s, b * c + a * s], -1).flatten(-2)
    return fn


def _inv(denominator=64, step=None):
    i = torch.arange(0, 64, 2)
    exponent = (i // 64).float() if step == "int" else i.float() / denominator
    return 1.0 / 10000.0 ** exponent


ROPE_WRONG = [
    ("integer division", _rope_answer(lambda: _inv(step="int")), "frequency-exponent"),
    ("hidden_size", _rope_answer(lambda: _inv(4096)), "frequency-exponent"),
    ("reversed ladder", _rope_answer(lambda: _inv().flip(0)), "frequency-reversed"),
    ("offset", _rope_answer(_inv, positions=lambda p, x: p + 1), "position-offset"),
    ("ignored", _rope_answer(_inv, positions=lambda p, x: torch.arange(x.shape[1])),
     "positions-ignored"),
    ("swapped", _rope_answer(_inv, swap=True), "cos-sin-swapped"),
    ("base", _rope_answer(lambda: 1.0 / 500000.0 ** (torch.arange(0, 64, 2) / 64)),
     "base"),
    ("half layout", lambda x, p: rope.apply_rope(x, p, rope.inv_freq(
        64, dtype=torch.float32)), "layout"),
]


@pytest.mark.parametrize("name, answer, code", ROPE_WRONG, ids=[w[0] for w in ROPE_WRONG])
def test_exercise_4_1_names_the_bug_with_a_hint_in_the_readers_terms(name, answer, code):
    import re
    report = exercises.check_rope_interleaved(answer)
    assert not report.passed and f"finds {code}" in report.message, report.message
    text = str(report)
    assert text.count("Hint: ") == 1 and f"Hint: {code}: " in text, text
    assert not re.search(LIBRARY_CALL, text), text
    assert "Fix:" not in text


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 40), half=st.integers(1, 12),
       base=st.floats(2.0, 1e7, allow_nan=False))
def test_sinusoidal_grader_at_drawn_arguments(n, half, base):
    dim = 2 * half
    assert exercises.check_sinusoidal(sinusoidal_stacked, n_positions=n, dim=dim,
                                      base=base).passed
    assert not exercises.check_sinusoidal(lambda n_, d, b: sinusoidal(n_, d, b) + 1e-3,
                                          n_positions=n, dim=dim, base=base).passed


@settings(max_examples=10, deadline=None)
@given(half=st.integers(1, 10), base=st.floats(10.0, 1e7, allow_nan=False))
def test_shift_grader_at_drawn_arguments(half, base):
    assert exercises.check_shift_matrix(shift_complex, dim=2 * half, base=base).passed
    report = exercises.check_shift_matrix(lambda k, d, b: shift_complex(abs(k), d, b),
                                          dim=2 * half, base=base)
    assert not report.passed and "abs(k)" in report.message


@settings(max_examples=15, deadline=None)
@given(quarter=st.integers(1, 16), extra=st.integers(1, 300))
def test_t5_grader_at_drawn_arguments(quarter, extra):
    num_buckets = 4 * quarter
    max_distance = 2 * quarter + extra    # beyond the exact range (causal: N/2)
    assert exercises.check_t5_bucket(t5_written, num_buckets=num_buckets,
                                     max_distance=max_distance).passed
    report = exercises.check_t5_bucket(lambda r, bi, n, d: t5_written(r, bi),
                                       num_buckets=num_buckets,
                                       max_distance=max_distance)
    assert not report.passed


@settings(max_examples=15, deadline=None)
@given(k=st.integers(0, 60))
def test_shaw_grader_at_drawn_arguments(k):
    assert exercises.check_shaw_labels(lambda r, k_: torch.where(
        r.abs() > k_, torch.sign(r) * k_, r) + k_, max_relative_position=k).passed
    assert not exercises.check_shaw_labels(lambda r, k_: r.clamp(-k_, k_) + k_ + 1,
                                           max_relative_position=k).passed


def test_other_graders_vary_their_arguments():
    report = exercises.check_axial_inv_freq(
        lambda a, b: multidim.axial_inv_freq(a, 10000.0))
    assert not report.passed and "base argument is ignored" in report.message
    report = exercises.check_yarn_inv_freq(lambda d, b, f, n: yarn(128, 1e4, 8.0, 4096)[
        :d // 2])
    assert not report.passed
    report = exercises.check_layout_conversion(lambda w, h: w.reshape(2, -1, w.shape[1])[
        :, rope.layout_permutation(w.shape[0] // 2)].reshape(w.shape))
    assert not report.passed


def _pairs_turning(dim, base, length):
    """Chapter 4's count of the pairs that turn within ``length`` (closed form)."""
    turning = math.floor(dim / 2 * math.log(length / (2 * math.pi), base)) + 1
    return min(dim // 2, turning)


def test_predictions_are_graded_against_independent_truths():
    """The truths, computed here another way: the sinusoidal similarity is
    sum_i cos(k w_i) (times 1, per pair); T5's buckets from the written
    bucket function; the slowest RoPE pair's angle at 4096 positions; M-RoPE's
    fastest width pair from the sections; YaRN's ramp rule for pair 0."""
    w = 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    truths = {
        "2.3": bool(torch.cos(12 * w).sum() > torch.cos(11 * w).sum()),
        "3.3": bool(t5_written(torch.tensor([20]))[0] == t5_written(torch.tensor([23]))[0]),
        # chapter 4's closed form n(d) = min(d/2, floor(d/2 log_base(L/2 pi)) + 1)
        "4.3": _pairs_turning(128, 5e5, 8192) > _pairs_turning(128, 1e4, 4096),
        # contiguous sections [16, 24, 24]: width owns pairs 40..63, the fastest 40
        "5.3": 15 * 1e6 ** (-80 / 128) > 0.01,
        # YaRN's ramp: pair 0 turns 4096 / (2 pi) = 652 times in the original
        # context, above beta_fast = 32, so it keeps its frequency
        "6.3": 4096 / (2 * math.pi) > 32,
    }
    assert set(truths) == set(exercises.PREDICTIONS)
    for question, truth in truths.items():
        right = exercises.check_prediction(question, lambda t=truth: t)
        wrong = exercises.check_prediction(question, lambda t=truth: not t)
        assert right.passed and not wrong.passed, (right, wrong)
        assert "not what happens" in wrong.message
        # a sentence after "Correct." / "Not yet.", and a hint only for a miss
        assert right.message.startswith(f"Predicting {truth} is right")
        assert str(wrong).count("\nHint: ") == 1 and "Hint" not in str(right)
        report = exercises.check_prediction(question, lambda: "yes")
        assert not report.passed and "True or False" in report.message
        assert "not written yet" in exercises.check_prediction(question, starter).message
    with pytest.raises(ValueError, match="^question"):
        exercises.check_prediction("9.9", lambda: True)


# -- graders that cannot be fooled or crashed ------------------------------------------

def test_non_finite_complex_bool_and_meta_answers_are_reported():
    def with_nan(n, d, b):
        out = sinusoidal(n, d, b)
        out[3, 1] = math.nan
        return out

    report = exercises.check_sinusoidal(with_nan)
    assert not report.passed and "nan at index (3, 1)" in report.message, report.message
    report = exercises.check_sinusoidal(lambda n, d, b: sinusoidal(n, d, b) + 5j)
    assert not report.passed and "complex" in report.message
    report = exercises.check_sinusoidal(lambda n, d, b: sinusoidal(n, d, b) > 0)
    assert not report.passed and "bool" in report.message
    report = exercises.check_sinusoidal(
        lambda n, d, b: torch.empty(n, d, device="meta"))
    assert not report.passed and "meta device" in report.message
    report = exercises.check_axial_inv_freq(lambda a, b: torch.full(a.shape, math.inf))
    assert not report.passed and "inf at index (0,)" in report.message
    report = exercises.check_rope_interleaved(
        lambda x, p: torch.empty(x.shape, device="meta"))
    assert not report.passed and "meta device" in report.message


def test_empty_answer_does_not_crash():
    report = exercises.check_mrope_axis_map(lambda s: torch.zeros(0, dtype=torch.int64))
    assert not report.passed and "shape" in report.message


def _cached(fn, rows, mode):
    """A RoPE answer that looks positions up in a table of ``rows`` rows."""
    def answer(x, positions):
        p = positions % rows if mode == "wrap" else positions.clamp(max=rows - 1)
        return fn(x, p)
    return answer


def _short_calls_only(x, positions):
    if x.shape[1] > 128:          # a kernel right only for calls of up to 128 tokens
        positions = positions.clone()
        positions[128:] = positions[0] + torch.arange(x.shape[1] - 128)
    return rope_interleaved(x, positions)


@pytest.mark.parametrize("answer, words", [
    (_cached(rope_interleaved, 8192, "wrap"), "p mod 8192"),
    (_cached(rope_interleaved, 8192, "clamp"), "min(p, 8191)"),
    (_short_calls_only, "sequence index 128"),
])
def test_rope_grader_probes_long_positions_and_calls(answer, words):
    report = exercises.check_rope_interleaved(answer)
    assert not report.passed and "position-map" in report.message, report.message
    assert words in report.message


def test_axial_grader_checks_an_interleaved_map():
    """Right on contiguous maps, wrong where an axis's pairs are not adjacent
    (ladders from each axis's first pair onwards by position in the head)."""
    def contiguous_only(axis, base):
        out = torch.empty(axis.shape[0], dtype=torch.float64)
        for a in axis.unique().tolist():
            where = torch.nonzero(axis == a).flatten()
            n = len(where)
            out[where] = base ** (-(where - where[0]).double() / n)
        return out

    assert contiguous_only(multidim.mrope_axis_map([4, 6, 6]), 1e4).allclose(
        multidim.axial_inv_freq(multidim.mrope_axis_map([4, 6, 6]), 1e4,
                                dtype=torch.float64))
    report = exercises.check_axial_inv_freq(contiguous_only)
    assert not report.passed


def test_sinusoidal_grader_asks_for_more_than_64_positions():
    table = sinusoidal(64, 24, 10000.0)

    def cached(n, d, b):
        if d != 24 or b != 10000.0:
            return sinusoidal(n, d, b)
        return table[torch.arange(n) % 64]

    report = exercises.check_sinusoidal(cached)
    assert not report.passed and "(1000, 24, 10000)" in report.message, report.message


@pytest.mark.parametrize("answer, name", [
    (lambda d, b, f, n: yarn(d, b, 8.0, n), "factor"),
    (lambda d, b, f, n: yarn(d, b, f, 4096), "original_max_position_embeddings"),
    (lambda d, b, f, n: yarn(d, 10000.0, f, n), "base"),
])
def test_yarn_grader_names_an_ignored_argument(answer, name):
    report = exercises.check_yarn_inv_freq(answer)
    assert not report.passed and f"the {name} argument is ignored" in report.message, \
        report.message


def test_ignored_dim_is_named_from_the_shape():
    report = exercises.check_sinusoidal(lambda n, d, b: sinusoidal(n, 16, b))
    assert not report.passed and "dim argument is ignored" in report.message
    report = exercises.check_yarn_inv_freq(lambda d, b, f, n: yarn(128, b, f, n))
    assert not report.passed and "dim argument is ignored" in report.message


def test_yarn_feedback_does_not_point_to_the_library():
    plain = rope.inv_freq(128, dtype=torch.float64)
    report = exercises.check_yarn_inv_freq(lambda d, b, f, n: rope.inv_freq(
        d, b, dtype=torch.float64) * 0.9)
    assert not report.passed
    assert "rope_from_config" not in str(report) and "scaling." not in str(report)
    del plain


def test_exponent_feedback_does_not_say_two_pi_base():
    report = exercises.check_sinusoidal(lambda n, d, b: sinusoidal(n, d, b ** 0.5))
    assert not report.passed and "exponent i/d" in report.message
    assert "2π·base" not in report.message


def test_a_hint_sits_between_the_verdict_and_the_solution():
    report = exercises.check_sinusoidal(lambda n, d, b: sinusoidal(n, d, b) * 2)
    text = str(report)
    assert text.startswith("Not yet.") and "\nHint: " in text
    assert report.hint == exercises.HINTS["check_sinusoidal"]
    assert "Hint" not in str(exercises.check_sinusoidal(sinusoidal))
    assert "Hint" not in str(exercises.check_sinusoidal(starter))
    for check in ("check_sinusoidal", "check_shift_matrix", "check_t5_bucket",
                  "check_shaw_labels", "check_rope_interleaved",
                  "check_layout_conversion", "check_mrope_axis_map",
                  "check_axial_inv_freq", "check_ntk_base", "check_yarn_inv_freq"):
        assert check in exercises.HINTS


@pytest.mark.parametrize("answer, name", [
    (lambda b, f, d: b * f ** (128 / 126), "dim"),
    (lambda b, f, d: b * 4.0 ** (d / (d - 2)), "factor"),
    (lambda b, f, d: 10000.0 * f ** (d / (d - 2)), "base"),
])
def test_ntk_grader_names_an_ignored_argument(answer, name):
    report = exercises.check_ntk_base(answer)
    assert not report.passed and f"the {name} argument is ignored" in report.message, \
        report.message


def test_the_rope_prediction_counts_both_heads(monkeypatch):
    """Exercise 4.3 compares two counts that the grader computes: the numbers in
    its report are chapter 4's closed form for both heads, and they follow the
    frequencies (with every pair turning once per position, all 64 turn)."""
    report = exercises.check_prediction("4.3", lambda: False)
    before, after = _pairs_turning(128, 1e4, 4096), _pairs_turning(128, 5e5, 8192)
    assert (before, after) == (46, 35)
    assert f"{before} of the 64 pairs" in report.message
    assert f"with base 500000, {after} within 8192" in report.message
    monkeypatch.setattr(exercises.rope, "inv_freq",
                        lambda dim, base, dtype: torch.ones(dim // 2, dtype=dtype))
    report = exercises.check_prediction("4.3", lambda: False)
    assert "64 of the 64 pairs" in report.message and "64 within 8192" in report.message


def test_every_grader_and_prediction_has_a_hint():
    graders = [name for name in exercises.__all__ if name.startswith("check_")]
    assert graders and set(graders) <= set(exercises.HINTS)
    assert set(exercises._PREDICTION_HINTS) == set(exercises.PREDICTIONS)


SOLUTION_PRINTS_ONLY_A_LINE = list(CHAPTERS)


@pytest.mark.parametrize("chapter", SOLUTION_PRINTS_ONLY_A_LINE)
def test_solution_cells_do_not_print_a_verdict(chapter):
    """After Run All in JupyterLab a solution cell's output shows (executing a
    cell reveals hidden outputs), right under the reader's own verdict. So a
    solution cell prints no verdict (no "Correct. ...", which would also give a
    prediction away), only that the worked solution passes, after asserting it;
    its source is folded in JupyterLab."""
    import json
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "book" / f"{chapter}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    solutions = [c for c in cells if c["cell_type"] == "code"
                 and "hide-cell" in c["metadata"].get("tags", [])
                 and "_solution)" in "".join(c["source"])]
    assert len(solutions) >= 3
    for cell in solutions:
        lines = "".join(cell["source"]).splitlines()
        assert lines[-2:] == ["assert report.passed, report.message",
                              'print("The worked solution passes the same grader.")'], \
            (cell["id"], lines[-2:])
        assert cell["metadata"].get("jupyter", {}).get("source_hidden"), cell["id"]
