"""Every grader of posenc_lib.exercises: a right answer passes, the starter gets
"not written yet", and each planted wrong answer gets a message naming its bug."""

import math

import pytest
import torch

from posenc_lib import exercises, multidim, relative, rope, scaling


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
        r, bi, n, d).clamp_max(n - 2), "differs from"),
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
