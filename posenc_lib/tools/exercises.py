"""Graders for the exercises at the end of chapters 2 to 6.

Each ``check_*`` function calls the reader's function, compares it with an
independent reference (the library, or a property the answer must have, or
:func:`posenc_lib.tools.diagnose.diagnose_rope`), and returns a :class:`Report`
whose message says what is wrong: a known mistake by name when one of them
reproduces the answer, else the first entry that differs. A function that
still raises ``NotImplementedError`` (the starter) gets "not done yet", not an
error, so the grader cells run before the exercise is solved.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from .. import absolute, multidim, relative, rope, scaling
from .diagnose import diagnose_inv_freq, diagnose_rope

__all__ = ["Report", "check_sinusoidal", "check_shift_matrix", "check_t5_bucket",
           "check_shaw_labels", "check_rope_interleaved", "check_layout_conversion",
           "check_mrope_axis_map", "check_axial_inv_freq", "check_ntk_base",
           "check_yarn_inv_freq", "check_prediction", "PREDICTIONS"]


@dataclass(frozen=True)
class Report:
    """A grader's verdict.

    Attributes:
        passed: whether the answer is right.
        message: what was checked, and what is wrong if anything.
        hint: for a wrong answer, a nudge towards the method (not the
            solution): the level between the verdict and the worked solution.
    """

    passed: bool
    message: str
    hint: str = ""

    def __str__(self) -> str:
        text = ("Correct. " if self.passed else "Not yet. ") + self.message
        if not self.passed and self.hint:
            text += "\nHint: " + self.hint
        return text


class _Stop(Exception):
    """Raised inside a grader to return a report early."""

    def __init__(self, report: Report):
        super().__init__(report.message)
        self.report = report


def _first_failure(reports) -> Report | None:
    """The first failing report of an iterable (evaluated lazily, so the checks
    after a failure do not run), or ``None`` when every one passes."""
    return next((report for report in reports if not report.passed), None)


def _call(name: str, fn: Callable, *args):
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {type(fn).__name__}")
    try:
        return fn(*args)
    except NotImplementedError:
        raise _Stop(Report(False, f"{name} is not written yet (it raises "
                                  f"NotImplementedError): fill in its body, run "
                                  f"its cell, then this one.")) from None
    except Exception as error:
        raise _Stop(Report(False, f"{name}{args_text(args)} raised "
                                  f"{type(error).__name__}: {error}")) from None


def _snapshot(value):
    """A copy of an argument, to tell afterwards whether the call changed it."""
    if isinstance(value, Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return list(value)
    return None


def _unchanged(before, after) -> bool:
    if isinstance(before, Tensor):
        return (before.shape == after.shape and before.dtype == after.dtype
                and bool(torch.equal(before, after.detach())))
    return before is None or before == after


def _call_pure(name: str, fn: Callable, *args, arg_names: tuple = ()):
    """:func:`_call`, then a report if ``fn`` changed one of its (tensor or list)
    arguments in place: the caller's tensor would then hold the answer, not the
    input, and a second call would see different data."""
    before = [_snapshot(a) for a in args]
    out = _call(name, fn, *args)
    for i, (b, a) in enumerate(zip(before, args)):
        if not _unchanged(b, a):
            arg = arg_names[i] if i < len(arg_names) else f"argument {i + 1}"
            raise _Stop(Report(False, f"{name} changes its argument {arg} in place "
                                      f"(its values differ after the call): the "
                                      f"caller's data is overwritten. Build the "
                                      f"result in a new tensor and leave {arg} as "
                                      f"it was."))
    return out


def args_text(args) -> str:
    shown = []
    for a in args:
        shown.append(f"tensor of shape {tuple(a.shape)}" if isinstance(a, Tensor)
                     else repr(a))
    return "(" + ", ".join(shown) + ")"


def _graded(check):
    """Turn an early :class:`_Stop` into the report it carries, and give a
    failing report the exercise's hint (:data:`HINTS`)."""
    @functools.wraps(check)
    def wrapper(*args, **kwargs):
        try:
            report = check(*args, **kwargs)
        except _Stop as stop:
            report = stop.report
        hint = HINTS.get(check.__name__, "")
        if not report.passed and hint and not report.hint and \
                "not written yet" not in report.message:
            report = Report(False, report.message, hint)
        return report
    return wrapper


#: The hint level of each grader: how to go about the exercise, without the
#: answer. Shown under a wrong answer's verdict, before the solution.
HINTS = {
    "check_sinusoidal": "the table is an outer product: positions (n, 1) times the "
                        "d/2 frequencies (1, d/2) give every angle p·ω_i; each angle "
                        "fills two columns. Test it on a tiny case (n = 3, d = 4) "
                        "against values you compute by hand.",
    "check_shift_matrix": "PE[p + k] only mixes the two features of each frequency: "
                          "write the angle-addition formulas for sin(a + b) and "
                          "cos(a + b) and read off one 2x2 block per frequency.",
    "check_t5_bucket": "handle the direction first (which half of the buckets), "
                       "then the distance: exact buckets for small distances, a "
                       "logarithmic map for the rest, clamped to the last bucket.",
    "check_shaw_labels": "clip the relative position to [-κ, κ], then shift it so "
                         "the smallest label is 0.",
    "check_rope_interleaved": "work on one pair (x[..., 2i], x[..., 2i + 1]) at a "
                              "time on paper: the angle is position times the pair's "
                              "frequency, and the 2x2 block is a rotation by it.",
    "check_layout_conversion": "write, for one head of 8 features, which row of the "
                               "interleaved weight each half-layout row must hold.",
    "check_mrope_axis_map": "the map has one entry per frequency pair: count how many "
                            "pairs each axis owns, then lay them out in order.",
    "check_axial_inv_freq": "treat each axis as its own small RoPE head: find the "
                            "pairs that belong to it, and give them a ladder of their "
                            "own, in the order they appear.",
    "check_ntk_base": "write the slowest pair's frequency base^(-(d-2)/d) for the "
                      "new base and ask that it be factor times smaller; solve for "
                      "the new base.",
    "check_prediction": "decide from the formula the chapter has just given, with "
                        "the question's numbers, before you run anything.",
    "check_yarn_inv_freq": "compute the plain and the interpolated (divided by "
                           "factor) frequencies, then the number of turns each pair "
                           "makes in the original context; the ramp between the two "
                           "depends only on those turns.",
}


def _as_tensor(name: str, value, shape: tuple, arguments: dict | None = None) -> Tensor:
    """The answer as a CPU tensor of ``shape``, or a report saying why not:
    not a tensor, a complex or bool tensor, on another device (``meta`` holds
    no values), the wrong shape (naming an argument whose value the shape
    ignores), NaN or inf (with the first index)."""
    try:
        value = torch.as_tensor(value)
    except Exception:
        raise _Stop(Report(False, f"{name} must return a tensor, got "
                                  f"{type(value).__name__}")) from None
    if value.is_complex():
        raise _Stop(Report(False, f"{name} returned a complex tensor ({value.dtype}); "
                                  f"return real numbers (the real and imaginary parts "
                                  f"go in separate entries)."))
    if value.dtype == torch.bool:
        raise _Stop(Report(False, f"{name} returned a bool tensor; return numbers."))
    if value.device.type != "cpu":
        if value.device.type == "meta":
            raise _Stop(Report(False, f"{name} returned a tensor on the meta device, "
                                      f"which holds no values; compute real values."))
        try:
            value = value.detach().cpu()
        except Exception as error:
            raise _Stop(Report(False, f"{name} returned a tensor on {value.device} that "
                                      f"could not be moved to the CPU: {error}")) from None
    if tuple(value.shape) != tuple(shape):
        why = ""
        for arg, (asked, sizes) in (arguments or {}).items():
            for size, used in sizes:
                if tuple(value.shape) == tuple(size):
                    why = f" (the {arg} argument is ignored? {used} used, {asked} asked for)"
                    break
            if why:
                break
        raise _Stop(Report(False, f"{name} returned shape {tuple(value.shape)}; "
                                  f"expected {tuple(shape)}{why}."))
    if value.is_floating_point():
        bad = ~torch.isfinite(value)
        if bool(bad.any()):
            index = tuple(int(i) for i in torch.nonzero(bad)[0])
            raise _Stop(Report(False, f"{name} returned {value[index].item()} at index "
                                      f"{index}: every entry must be a finite number."))
    return value


def _compare(name: str, got: Tensor, expected: Tensor, mistakes: dict, *,
             atol, what: str, diagnose: Callable | None = None) -> Report:
    """Right, a named mistake, a finding of ``diagnose(got)`` (a message or
    ``None``), or the first entry that differs. ``atol`` is a number or a tensor
    of per-entry tolerances (broadcast against ``expected``)."""
    got = got.to(torch.float64) if got.is_floating_point() else got
    expected = expected.to(got.dtype) if got.is_floating_point() else expected

    def same(a, b):
        if a.shape != b.shape:
            return False
        if got.is_floating_point():
            gap = (a.to(torch.float64) - b.to(torch.float64)).abs()
            return bool((gap <= atol).all())
        return bool(torch.equal(a.to(torch.int64), b.to(torch.int64)))

    if same(got, expected):
        return Report(True, f"{name} matches {what}.")
    for mistake, candidate in mistakes.items():
        if same(got, candidate):
            return Report(False, f"{name}: {mistake}")
    finding = diagnose(got) if diagnose is not None else None
    if finding:
        return Report(False, f"{name}: {finding}")
    diff = (got.to(torch.float64) - expected.to(torch.float64)).abs()
    if diff.numel() == 0:
        return Report(False, f"{name} differs from {what}.")
    diff = torch.nan_to_num(diff, nan=math.inf)
    where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
    return Report(False, f"{name} differs from {what}: at index {where} it gives "
                         f"{got[where].item():.6g}, the reference "
                         f"{expected[where].item():.6g} (largest difference "
                         f"{float(diff.max()):.3g}).")


# -- chapter 2 -----------------------------------------------------------------------

#: The settings every chapter-2 grader runs, besides the one the caller names:
#: two bases other than 10000 (so an answer that ignores ``base`` fails), odd
#: sizes, and 1,000 positions (so a table cached for 64 rows fails).
_SINUSOIDAL_CASES = ((64, 16, 10000.0), (40, 12, 500.0), (33, 8, 1e6),
                     (1000, 24, 10000.0))


def _integer_labels(name: str, got: Tensor) -> None:
    """Labels index an embedding table (``nn.Embedding``): integers only."""
    if got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
        raise _Stop(Report(False, f"{name} returned {got.dtype} values; labels index "
                                  f"a table of embeddings (nn.Embedding accepts only "
                                  f"integer indices), so return an integer tensor "
                                  f"(int64, as .long() gives)."))


@_graded
def check_sinusoidal(fn: Callable, *, n_positions: int = 64, dim: int = 16,
                     base: float = 10000.0) -> Report:
    """Grade ``fn(n_positions, dim, base) -> (n_positions, dim)``: the sinusoidal table.

    Run at the given ``(n_positions, dim, base)`` and at (64, 16, 10000),
    (40, 12, 500), (33, 8, 1e6) and (1000, 24, 10000). The reference is the float64 table of :func:`posenc_lib.absolute.sinusoidal_encoding`; the named
    mistakes are sin and cos swapped, the sines in the first half and the
    cosines in the second (instead of interleaved), the exponent ``i/d``
    instead of ``2i/d``, and the base ignored (10000 used); otherwise what the
    table itself shows: a position offset, the frequencies fitted from row 1, or
    an error that grows with the position. A table computed in float32 passes
    (``_sinusoidal_tolerance``). The messages name no library call: the
    exercise is written without the library.
    """
    cases = list(dict.fromkeys(((n_positions, dim, base),) + _SINUSOIDAL_CASES))
    failed = _first_failure(_check_sinusoidal_once(fn, n, d, b) for n, d, b in cases)
    if failed:
        return failed
    shown = ", ".join(f"({n}, {d}, {b:g})" for n, d, b in cases)
    return Report(True, f"sinusoidal_table matches the float64 sinusoidal table for "
                        f"(n_positions, dim, base) = {shown}.")


def _check_sinusoidal_once(fn, n_positions, dim, base) -> Report:
    name = f"sinusoidal_table({n_positions}, {dim}, {base:g})"
    got = _as_tensor(name, _call("sinusoidal_table", fn, n_positions, dim, base),
                     (n_positions, dim),
                     {"n_positions": (n_positions, [((64, dim), 64)]),
                      "dim": (dim, [((n_positions, 16), 16)])})
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]
    i = torch.arange(dim // 2, dtype=torch.float64)
    expected = absolute.sinusoidal_encoding(n_positions, dim, base, dtype=torch.float64)

    def table(first, second, omega, halves=False):
        out = torch.empty(n_positions, dim, dtype=torch.float64)
        if halves:
            out[:, :dim // 2], out[:, dim // 2:] = first(p * omega), second(p * omega)
        else:
            out[:, 0::2], out[:, 1::2] = first(p * omega), second(p * omega)
        return out

    omega = base ** (-2 * i / dim)
    mistakes = {
        "sin and cos are swapped: feature 2i must hold sin(p·ω_i), 2i+1 cos(p·ω_i).":
            table(torch.cos, torch.sin, omega),
        "the sines fill the first half and the cosines the second; this table "
        "interleaves them (sin at 2i, cos at 2i+1).":
            table(torch.sin, torch.cos, omega, halves=True),
        "the frequencies use the exponent i/d; they must be base^(-2i/d), so that "
        "they fall from 1 to base^(-(d-2)/d) over the pairs (with i/d they stop "
        "near base^(-1/2)).":
            table(torch.sin, torch.cos, base ** (-i / dim)),
        f"the base argument is ignored (10000 used, {base:g} asked for).":
            table(torch.sin, torch.cos, 10000.0 ** (-2 * i / dim)),
        "integer division in the exponent: (2i) // d is 0 for every pair, so every "
        "frequency is 1; divide as floats (torch.arange(0, d, 2) / d with a float "
        "tensor, or 2.0 * i / d).":
            table(torch.sin, torch.cos, torch.ones_like(omega)),
    }
    if base == 10000.0:     # then a base ignored is no mistake at this setting
        mistakes = {k: v for k, v in mistakes.items() if "ignored" not in k}
    tol = _sinusoidal_tolerance(p, omega)
    return _compare(name, got, expected, mistakes, atol=tol,
                    what="the float64 sinusoidal table",
                    diagnose=lambda g: _sinusoidal_finding(g, p, omega, tol, base, dim))


#: Unit roundoff of float32: a table computed in float32 is a right answer.
_U32 = 2.0 ** -24


def _sinusoidal_tolerance(p: Tensor, omega: Tensor) -> Tensor:
    """Per-entry tolerance of a table computed in float32 (or better).

    ω_i = base^(-2i/d) in float32 has a relative error of at most about
    (2|ln ω_i| + 3)u (the exponent 2i/d and ln(base) rounded, then exp or
    pow); the product p·ω_i adds u, so the angle is off by at most
    p·ω_i·(2|ln ω_i| + 4)u, and sin or cos add a few u of their own. Twice
    that bound, plus 1e-6, is accepted: every named bug is off by far more.
    """
    angle_error = p * omega * (2 * omega.log().abs() + 4) * _U32
    per_pair = 1e-6 + 2 * (angle_error + 4 * _U32)
    return per_pair.repeat_interleave(2, dim=1)


def _exponent_scale(fitted: Tensor, omega: Tensor, dim: int) -> str | None:
    """If the fitted frequencies are ``base^(-c·2i/d)`` for one ``c != 1`` (pair 0
    still at 1), say so in the reader's terms; else ``None``."""
    if omega.numel() < 3 or abs(float(fitted[0]) - 1) > 1e-6 or bool((fitted <= 0).any()):
        return None
    scale = fitted[1:].log() / omega[1:].log()
    c = float(scale.mean())
    if abs(c - 1) < 1e-4 or not bool(((scale - c).abs() < 1e-4 * abs(c)).all()):
        return None
    known = {2.0: " (as if the feature index 2i stood where i belongs: "
                  "ω_i = base^(-2·(2i)/d))",
             0.5: " (i/d instead of 2i/d)",
             dim / (dim - 2): " (2i/(d - 2): the denominator must be d)"}
    why = next((text for value, text in known.items() if abs(c - value) < 1e-4 * value),
               "")
    return (f"the frequencies are wrong: yours are ω_i = base^(-{c:.4g}·2i/d), the "
            f"exponent {c:.4g} times what it should be{why}; they must be "
            f"ω_i = base^(-2i/d), from 1 down to base^(-(d-2)/d).")


def _sinusoidal_finding(got, p, omega, tol, base, dim) -> str | None:
    """What a wrong table does, read from the table itself: positions
    shifted, frequencies other than base^(-2i/d) (fitted from row 1), or
    right at small positions only."""
    n = got.shape[0]
    if got.shape[1] < 2 or n < 3:
        return None
    sin_part, cos_part = got[:, 0::2], got[:, 1::2]

    def table(positions, freqs):
        out = torch.empty_like(got)
        out[:, 0::2] = torch.sin(positions * freqs)
        out[:, 1::2] = torch.cos(positions * freqs)
        return out

    def fits(candidate):
        return bool(((candidate - got).abs() <= tol).all())

    # row 0: position 0 gives sin 0 = 0 and cos 0 = 1 in every pair
    start = math.atan2(float(sin_part[0, 0]), float(cos_part[0, 0]))  # ω_0 = 1
    if abs(start) > 1e-3 and round(start) != 0 and fits(table(p + round(start), omega)):
        return (f"row p holds position p + {round(start)}: row 0 must be position 0 "
                f"(sin 0 = 0 and cos 0 = 1 in every pair).")
    # the frequencies, read from row 1 (each pair turns by ω_i between rows)
    fitted = torch.atan2(sin_part[1], cos_part[1])
    if bool((fitted > 0).all()) and fits(table(p, fitted)):
        if torch.allclose(fitted, omega.flip(0), rtol=1e-6, atol=0):
            return ("the frequency ladder is reversed: pair 0 must turn fastest "
                    "(ω_0 = base^0 = 1) and the last pair slowest.")
        scaled = _exponent_scale(fitted, omega, dim)
        if scaled:
            return scaled
        first = int(torch.nonzero((fitted - omega).abs() > 1e-6 * omega)[0])
        return (f"the frequencies are wrong: pair {first} turns {float(fitted[first]):.6g} "
                f"rad per position, and ω_{first} = base^(-2·{first}/d) = "
                f"{float(omega[first]):.6g}.")
    # right at small positions only
    bad_rows = ((got - table(p, omega)).abs() > tol).any(dim=1)
    first_bad = int(torch.nonzero(bad_rows)[0]) if bool(bad_rows.any()) else n
    error = (got - table(p, omega)).abs().max(dim=1).values
    if 0 < first_bad < n and float(error[n // 2:].max()) > float(error[:n // 2].max()):
        worst = int(error.argmax())
        right_rows = "row 0 is right" if first_bad == 1 else \
            f"rows 0 to {first_bad - 1} are right"
        return (f"{right_rows}, but from row {first_bad} on "
                f"the entries drift from sin(p·ω_i) and cos(p·ω_i), and the error "
                f"grows with the position p (largest {float(error[worst]):.3g}, at row "
                f"{worst}). An approximation of sin or cos that holds only for small "
                f"angles, or angles p·ω_i rounded to low precision (float16, "
                f"bfloat16), does this: compute the angles in float32 or float64 and "
                f"take sin and cos of them.")
    return None


#: Offsets and bases of :func:`check_shift_matrix`: negative offsets and zero,
#: two bases besides 10000.
_SHIFT_KS = (1, 5, 17, 0, -1, -3, -12)
_SHIFT_CASES = ((16, 10000.0), (12, 100.0), (8, 1e6))


@_graded
def check_shift_matrix(fn: Callable, *, dim: int = 16, base: float = 10000.0) -> Report:
    """Grade ``fn(k, dim, base) -> (dim, dim)`` with ``PE[p + k] = M_k @ PE[p]``.

    Checked on the property itself, for 64 rows of a float64 table, offsets
    ``k`` in 1, 5, 17, 0, -1, -3, -12 and ``(dim, base)`` the given one,
    (16, 10000), (12, 100) and (8, 1e6). Named: a transposed matrix (it shifts
    by ``-k``), ``|k|`` used for a negative ``k``, and the base ignored. The
    messages name no library call.
    """
    cases = list(dict.fromkeys(((dim, base),) + _SHIFT_CASES))
    for d, b in cases:
        table = absolute.sinusoidal_encoding(128, d, b, dtype=torch.float64)
        rows = table[32:96]
        for k in _SHIFT_KS:
            name = f"shift_matrix({k}, {d}, {b:g})"
            got = _as_tensor(name, _call("shift_matrix", fn, k, d, b),
                             (d, d), {"dim": (d, [((16, 16), 16)])}).to(torch.float64)
            moved = rows @ got.T
            wanted = table[32 + k:96 + k]
            if torch.allclose(moved, wanted, atol=1e-6):
                continue
            if k < 0 and torch.allclose(moved, table[32 - k:96 - k], atol=1e-6):
                return Report(False, f"{name} shifts rows by +{-k}, the same as "
                                     f"shift_matrix({-k}, ...): a negative k must "
                                     f"shift backwards (is k replaced by abs(k)?). "
                                     f"M_(-k) is the inverse of M_k.")
            if torch.allclose(table[32 + k:96 + k] @ got.T, rows, atol=1e-6):
                return Report(False, f"{name} moves rows by {-k}: it is the transpose "
                                     f"(inverse) of M_k. Check the sign of the sin "
                                     f"entries of each 2x2 block.")
            if b != 10000.0:
                plain = absolute.sinusoidal_encoding(128, d, 10000.0,
                                                     dtype=torch.float64)
                if torch.allclose(plain[32:96] @ got.T, plain[32 + k:96 + k],
                                  atol=1e-6):
                    return Report(False, f"{name} is the shift matrix for base "
                                         f"10000: the base argument is ignored.")
            error = float((moved - wanted).abs().max())
            finding = _shift_finding(got, k, d, b)
            return Report(False, f"{name} @ PE[p] differs from PE[p + {k}] by up to "
                                 f"{error:.3g}" + (f": {finding}" if finding else "."))
    shown = ", ".join(f"(dim {d}, base {b:g})" for d, b in cases)
    return Report(True, f"M_k @ PE[p] equals PE[p + k] for every p, k in "
                        f"{', '.join(map(str, _SHIFT_KS))} and {shown}.")


def _shift_finding(m: Tensor, k: int, dim: int, base: float) -> str | None:
    """What a wrong shift matrix does, read from its entries: features of
    different pairs mixed, or each pair turned by an angle other than k·ω_i."""
    blocks = torch.block_diag(*[torch.ones(2, 2, dtype=torch.float64)] * (dim // 2))
    outside = (m * (1 - blocks)).abs()
    if bool((outside > 1e-9).any()):
        r, c = (int(i) for i in torch.nonzero(outside == outside.max())[0])
        return (f"entry ({r}, {c}) is {float(m[r, c]):.3g}, but it links features of "
                f"different pairs: feature pair i of PE[p + k] depends only on pair i "
                f"of PE[p], so M_k is block diagonal with 2x2 blocks.")
    i = torch.arange(dim // 2)
    cos, sin = m[2 * i, 2 * i], m[2 * i, 2 * i + 1]
    is_rotation = (torch.allclose(m[2 * i + 1, 2 * i + 1], cos, atol=1e-9)
                   and torch.allclose(m[2 * i + 1, 2 * i], -sin, atol=1e-9)
                   and torch.allclose(cos**2 + sin**2, torch.ones_like(cos), atol=1e-9))
    if not is_rotation:
        return ("its 2x2 blocks are not rotations [[cos a, sin a], [-sin a, cos a]] "
                "of one angle a per pair.")
    turned = torch.atan2(sin, cos)
    omega = base ** (-2 * i.to(torch.float64) / dim)
    wanted = torch.remainder(k * omega + math.pi, 2 * math.pi) - math.pi
    # the offset the blocks implement, read from the slowest pair (no wrap there)
    times = float(turned[-1] / omega[-1])
    if round(times) != k and abs(times - round(times)) < 1e-6:
        as_offset = torch.remainder(round(times) * omega + math.pi, 2 * math.pi) - math.pi
        if torch.allclose(turned, as_offset, atol=1e-9):
            return (f"each pair turns by {round(times)}·ω_i, the shift by "
                    f"{round(times)} positions, not by k = {k}: is k ignored or "
                    f"replaced?")
    calm = (turned.abs() < math.pi / 2) & ((k * omega).abs() < math.pi / 2)
    if k != 0 and bool(calm.all()):
        scaled = _exponent_scale(turned / k, omega, dim)
        if scaled:
            return scaled
    first = int(torch.nonzero((turned - wanted).abs() > 1e-9)[0])
    return (f"pair {first}'s block turns by {float(turned[first]):.6g} rad; a shift by "
            f"k = {k} turns pair {first} by k·ω_{first} = {k}·base^(-2·{first}/d) = "
            f"{float(k * omega[first]):.6g} rad.")


# -- chapter 3 -----------------------------------------------------------------------

#: ``(num_buckets, max_distance)`` settings of :func:`check_t5_bucket`, besides
#: the caller's: T5's own and two others, so an answer that ignores them fails.
_T5_CASES = ((32, 128), (16, 64), (64, 256))


@_graded
def check_t5_bucket(fn: Callable, *, num_buckets: int = 32, max_distance: int = 128) -> Report:
    """Grade ``fn(relative_position, bidirectional, num_buckets, max_distance)``.

    The reference is :func:`posenc_lib.relative.t5_bucket` (transformers'
    arithmetic) for relative positions -300..300, both directions, at the given
    setting and at (32, 128), (16, 64) and (64, 256); named mistakes: past and future on the
    wrong side, the exact buckets ending at ``N/4`` instead of ``N/2``, query
    minus key instead of key minus query, the far buckets not clamped to the
    last one, and ``num_buckets`` / ``max_distance`` ignored (T5's 32 and 128
    used).
    """
    for bidirectional in (True, False):     # a bad setting is the caller's error
        relative.t5_bucket(torch.zeros(1, dtype=torch.int64), bidirectional,
                           num_buckets, max_distance)
    r = torch.arange(-300, 301)
    cases = list(dict.fromkeys(((num_buckets, max_distance),) + _T5_CASES))
    for n, d in cases:
        for bidirectional in (True, False):
            got = _as_tensor("t5_bucket", _call_pure("t5_bucket", fn, r.clone(),
                                                     bidirectional, n, d,
                                                     arg_names=("relative_position",)),
                             r.shape)
            _integer_labels("t5_bucket", got)
            report = _check_t5_once(got, r, bidirectional, n, d)
            if not report.passed:
                return report
    shown = ", ".join(f"({n}, {d})" for n, d in cases)
    return Report(True, f"t5_bucket matches relative.t5_bucket for relative positions "
                        f"-300..300, bidirectional and causal, (num_buckets, "
                        f"max_distance) = {shown}.")


def _check_t5_once(got, r, bidirectional, num_buckets, max_distance) -> Report:
    expected = relative.t5_bucket(r, bidirectional, num_buckets, max_distance)
    per_direction = num_buckets // 2 if bidirectional else num_buckets

    def other(n, d):
        """T5's buckets at another setting, or None where T5's rule rejects it."""
        try:
            return relative.t5_bucket(r, bidirectional, n, d)
        except ValueError:
            return None

    flipped = ("past and future are on the wrong sides: keys to the right "
               "(key minus query > 0) take the upper half of the buckets "
               "(or relative_position was taken as query minus key)."
               if bidirectional else
               "relative_position is query minus key here; T5 uses key minus "
               "query (memory_position - query_position).")
    mistakes = {
        flipped: relative.t5_bucket(-r, bidirectional, num_buckets, max_distance),
        "the far buckets are not clamped: distances beyond max_distance must "
        "all share the last bucket.": _t5_unclamped(r, bidirectional, num_buckets,
                                                    max_distance),
    }
    if per_direction >= 4 and max_distance > per_direction // 4:
        mistakes["the exact buckets end at N/4; they cover distances below N/2 (N the "
                 "buckets per direction)."] = _t5_exact(r, bidirectional, num_buckets,
                                                       max_distance, 4)
    rounding = {"ceil": "rounded up", "round": "rounded to the nearest integer"}
    for how, said in rounding.items():
        mistakes[f"the logarithmic buckets are {said}; T5 truncates: the bucket is "
                 f"N/2 + floor((N - N/2)·ln(δ/(N/2))/ln(max_distance/(N/2))), the "
                 f"integer part (N the buckets per direction)."] = _t5_variant(
            r, bidirectional, num_buckets, max_distance, rounding=how)
    exact = per_direction // 2
    for e in (exact - 1, exact + 1):
        if 0 < e < per_direction and max_distance > e:
            mistakes[f"the exact buckets cover distances below {e}; they must cover "
                     f"distances below N/2 = {exact} (N = {per_direction} buckets per "
                     f"direction), each distance its own bucket."] = _t5_variant(
                r, bidirectional, num_buckets, max_distance, exact=e)
    if bidirectional:
        mistakes["in the bidirectional case each direction gets half of the buckets "
                 "(num_buckets // 2, the upper half for keys to the right); here each "
                 "direction uses all of them."] = _t5_variant(
            r, True, num_buckets, max_distance, halve=False)
    else:
        mistakes["bidirectional=False is ignored: causal buckets give every key to the "
                 "right (key minus query > 0) distance 0, bucket 0, and use all "
                 "num_buckets for the past; this is the bidirectional answer."] = \
            relative.t5_bucket(r, True, num_buckets, max_distance)
    if (num_buckets, max_distance) != (32, 128):
        mistakes[f"num_buckets and max_distance are ignored: these are T5's 32 and "
                 f"128, not the {num_buckets} and {max_distance} asked for."] = \
            other(32, 128)
        if num_buckets != 32:
            mistakes[f"num_buckets is ignored (32 used, {num_buckets} asked for)."] = \
                other(32, max_distance)
        if max_distance != 128:
            mistakes[f"max_distance is ignored (128 used, {max_distance} asked for)."] \
                = other(num_buckets, 128)
    mistakes = {k: v for k, v in mistakes.items() if v is not None}
    def log_range(g, distance):
        """Exact buckets right, logarithmic ones not: where each reaches the last
        bucket, and the first distance that differs."""
        wrong = g.to(torch.int64) != expected
        at = int(torch.nonzero(wrong & (distance == distance[wrong].min()))[0])
        inner = expected % per_direction if bidirectional else expected
        mine = g.to(torch.int64) % per_direction if bidirectional else g.to(torch.int64)
        side = (r > 0) == (r[at] > 0)

        def reaches(labels):
            hit = distance[side & (labels == per_direction - 1)]
            return f"at distance {int(hit.min())}" if hit.numel() else "nowhere up to 300"

        return (f"the exact buckets are right, the logarithmic ones are not: relative "
                f"position {int(r[at])} (distance {int(distance[at])}) gets "
                f"{int(g[at])}, T5 gives {int(expected[at])}; yours reach the last "
                f"bucket {reaches(mine)}, T5's {reaches(inner)}. T5's "
                f"bucket for a distance δ >= N/2 is N/2 + floor((N - N/2)·ln(δ/(N/2))"
                f"/ln(max_distance/(N/2))), capped at N - 1 (N the buckets per "
                f"direction): the logarithm spans N/2 .. max_distance.")

    def off_by_one(g):
        """Wrong by one bucket, only where the logarithmic branch applies."""
        gap = g.to(torch.int64) - expected
        distance = r.abs() if bidirectional else (-r).clamp_min(0)
        if bool((gap[distance < exact] != 0).any()):
            return None
        if not bool((gap.abs() <= 1).all()):
            return log_range(g, distance)
        at = int(torch.nonzero(gap)[0])
        last = (expected % per_direction) == per_direction - 1
        if bool((gap[~last] == 0).all()) and bool((gap[last] >= -1).all()) and \
                bool((gap[last] <= 0).all()):
            return (f"the last bucket of a direction (N - 1 = {per_direction - 1}, N the "
                    f"buckets per direction) is never used: relative position "
                    f"{int(r[at])} gets {int(g[at])}, T5 gives {int(expected[at])}. "
                    f"The far distances are capped at N - 1, the last bucket itself.")
        sign = {1: "high", -1: "low"}[int(gap[at])]
        return (f"in the logarithmic range some buckets are one too {sign}: relative "
                f"position {int(r[at])} gets {int(g[at])}, T5 gives {int(expected[at])}. "
                f"T5 takes the integer part (truncation) of (N - N/2)·ln(δ/(N/2))/"
                f"ln(max_distance/(N/2)), adds N/2 and caps the sum at N - 1 (N the "
                f"buckets per direction); no rounding up and no + 1.")

    return _compare(f"t5_bucket(bidirectional={bidirectional}, num_buckets="
                    f"{num_buckets}, max_distance={max_distance})", got, expected,
                    mistakes, atol=0, what="relative.t5_bucket", diagnose=off_by_one)


def _t5_exact(r, bidirectional, num_buckets, max_distance, divisor, clamp=True):
    """T5's bucket, with the exact range ``N // divisor`` and an optional clamp."""
    buckets = torch.zeros_like(r)
    n = num_buckets
    if bidirectional:
        n //= 2
        buckets += (r > 0).to(torch.int64) * n
        distance = r.abs()
    else:
        distance = (-r).clamp_min(0)
    exact = n // divisor
    large = exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact)
                     * (n - exact)).to(torch.int64)
    if clamp:
        large = large.clamp_max(n - 1)
    return buckets + torch.where(distance < exact, distance, large)


def _t5_variant(r, bidirectional, num_buckets, max_distance, *, exact=None,
                rounding="trunc", halve=True):
    """T5's bucket with one rule changed: the end of the exact range, how the
    logarithmic branch is rounded, or the halving of the buckets per direction;
    ``None`` where the changed rule divides by zero or takes a log of 0."""
    buckets = torch.zeros_like(r)
    n = num_buckets
    if bidirectional:
        if halve:
            n //= 2
        buckets += (r > 0).to(torch.int64) * n
        distance = r.abs()
    else:
        distance = (-r).clamp_min(0)
    exact = n // 2 if exact is None else exact
    if exact <= 0 or max_distance <= exact:
        return None
    steps = (torch.log(distance.float() / exact) / math.log(max_distance / exact)
             * (n - exact))
    steps = {"trunc": steps, "ceil": steps.ceil(), "round": steps.round()}[rounding]
    large = (exact + steps.clamp_min(0).to(torch.int64)).clamp_max(n - 1)
    return buckets + torch.where(distance < exact, distance, large)


def _t5_unclamped(r, bidirectional, num_buckets, max_distance):
    return _t5_exact(r, bidirectional, num_buckets, max_distance, 2, clamp=False)


@_graded
def check_shaw_labels(fn: Callable, *, max_relative_position: int = 4) -> Report:
    """Grade ``fn(relative_position, max_relative_position)``: Shaw et al.'s row labels.

    Reference :func:`posenc_lib.relative.shaw_labels`, for ``κ`` the given one
    and 0, 1, 7, on the relative positions of 12 tokens and on seeded random
    ones in -50..50; labels must be integers (they index an ``nn.Embedding``).
    Named mistakes: no shift by ``κ`` (negative labels), no clipping, query
    minus key, and ``κ`` ignored.
    """
    gen = torch.Generator().manual_seed(0)
    inputs = (relative.relative_positions(12), torch.randint(-50, 51, (5, 7),
                                                             generator=gen))
    ks = list(dict.fromkeys((max_relative_position, 0, 1, 7)))
    for k in ks:
        for r in inputs:
            name = f"shaw_labels(..., {k})"
            got = _as_tensor(name, _call_pure("shaw_labels", fn, r.clone(), k,
                                              arg_names=("relative_position",)),
                             r.shape)
            _integer_labels(name, got)
            expected = relative.shaw_labels(r, k)
            mistakes = {
                "the labels are not shifted by κ: clip(j - i, -κ, κ) runs from -κ to "
                "κ, and rows of a table are 0..2κ.": r.clamp(-k, k),
                "the distances are not clipped: everything beyond κ must share label "
                "0 or 2κ.": r + k,
                "the sign is flipped: the label of key j for query i uses j - i.":
                    relative.shaw_labels(-r, k),
            }
            if k != max_relative_position:
                mistakes[f"max_relative_position is ignored ({max_relative_position} "
                         f"used, {k} asked for)."] = relative.shaw_labels(
                    r, max_relative_position)
            report = _compare(name, got, expected, mistakes, atol=0,
                              what="relative.shaw_labels",
                              diagnose=lambda g, r=r, k=k: _shaw_finding(g, r, k))
            if not report.passed:
                return report
    return Report(True, f"shaw_labels matches relative.shaw_labels for κ in "
                        f"{', '.join(map(str, ks))}, on 12 tokens and on random "
                        f"relative positions in -50..50, with integer labels.")


def _shaw_finding(got: Tensor, r: Tensor, k: int) -> str | None:
    """The labels' range, and whether the window inside is right: a wrong clip
    or a shift applied in the wrong place."""
    got = got.to(torch.int64)
    expected = relative.shaw_labels(r, k)
    low, high = int(got.min()), int(got.max())
    want_low, want_high = int(expected.min()), int(expected.max())
    if (low, high) == (want_low, want_high):
        return None
    text = (f"your labels run from {low} to {high}; here they must run from "
            f"{want_low} to {want_high} (rows 0 to 2κ = {2 * k}: every position <= -κ "
            f"gets 0, every position >= κ gets 2κ).")
    inside = r.abs() < k
    if bool(torch.equal(got[inside], expected[inside])):
        text += (f" Inside the window (|j - i| < κ) yours are right, so the clipping "
                 f"is off: yours acts as a clip to [{low - k}, {high - k}], and it "
                 f"must be [-κ, κ] = [{-k}, {k}], both ends included.")
    else:
        text += " Clip to [-κ, κ] first, then shift by κ."
    return text


# -- chapter 4 -----------------------------------------------------------------------

#: Hints for exercise 4.1, which is written without the library: what to change
#: in one's own code, per finding of :func:`~posenc_lib.tools.diagnose.diagnose_rope`.
_ROPE_HINTS = {
    "positions-ignored": "compute the angles from the positions argument "
                         "(positions.float()[:, None] * inv_freq), not from "
                         "torch.arange(seq_len).",
    "layout": "pair i is features (2i, 2i + 1): a = x[..., 0::2], b = x[..., 1::2], "
              "and the rotated pairs go back in that order "
              "(torch.stack([a', b'], -1).flatten(-2)).",
    "cos-sin-swapped": "cos multiplies a feature itself and sin its partner: "
                       "(a, b) -> (a cos - b sin, b cos + a sin).",
    "rotation-reversed": "(a, b) -> (a cos - b sin, b cos + a sin): the sin term "
                         "of a is subtracted, that of b added.",
    "position-offset": "rotate by the positions as given: position 0 must leave x "
                       "unchanged.",
    "frequency-reversed": "pair 0 turns fastest: inv_freq[i] = 10000 ** (-2i / 64) "
                          "for i = 0, 1, ..., 31, in that order.",
    "frequency-exponent": "inv_freq[i] = 10000 ** (-2i / 64) for i = 0..31, divided "
                          "as floats (torch.arange(0, 64, 2).float() / 64; integer "
                          "// gives 0).",
    "base": "the exercise fixes the base: 10000, in 10000 ** (-2i / 64).",
    "scaling": "plain RoPE: inv_freq[i] = 10000 ** (-2i / 64), nothing rescaled.",
    "attention-factor": "a rotation keeps lengths: multiply by cos and sin only.",
    "positions-precision": "compute inv_freq and the angles in float32 "
                           "(positions.float()), never in bfloat16 or float16.",
    "partial-rotary": "rotate all 64 features (32 pairs).",
    "position-map": "compute each token's angles from its own position, for every "
                    "position the model can see (no table of a fixed number of rows, "
                    "no clamping, the same formula in every chunk of the sequence).",
    "frequency-dtype": "keep inv_freq a float tensor: multiply positions.float() by "
                       "it (an integer inv_freq is 1, 0, 0, ...).",
    "frequency": "every pair i takes 10000 ** (-2i / 64), from one formula.",
    "pair-block": "each pair (a, b) becomes (a cos - b sin, b cos + a sin), with cos "
                  "and sin of that pair's own angle, written back in that order.",
    "pass-through": "rotate all 64 features; nothing is left over to multiply.",
}


#: The context :func:`check_rope_interleaved` probes: positions up to 32,767
#: (a cos/sin cache of 8,192 rows that wraps or clamps fails) and one call of
#: 2,048 consecutive positions (a kernel right only in short calls fails).
_ROPE_CONTEXT = 32768


@_graded
def check_rope_interleaved(fn: Callable, *, dim: int = 64, base: float = 10000.0) -> Report:
    """Grade ``fn(x, positions)``: RoPE in the interleaved layout, with ``dim`` and
    ``base`` fixed, by :func:`posenc_lib.tools.diagnose.diagnose_rope`.

    Positions are probed up to 32,767, and one call rotates 2,048 consecutive
    positions. The findings and their evidence are diagnose's; the fixes are
    replaced by hints in terms of the reader's own code (``_ROPE_HINTS``), since the
    exercise is written without the library and fixes ``base``.
    """
    changed = []

    def watched(x, positions):
        """fn, noting whether it writes into x or positions."""
        before = (_snapshot(x), _snapshot(positions))
        out = fn(x, positions)
        for arg, was, now in zip(("x", "positions"), before, (x, positions)):
            if not _unchanged(was, now) and arg not in changed:
                changed.append(arg)
        return out

    try:
        result = diagnose_rope(watched, dim=dim, base=base, layout="interleaved",
                               max_position_embeddings=_ROPE_CONTEXT)
    except ValueError as error:
        if isinstance(error.__cause__, NotImplementedError):
            return Report(False, "rope_interleaved is not written yet (it raises "
                                 "NotImplementedError): fill in its body, run its "
                                 "cell, then this one.")
        return Report(False, str(error))
    if changed:
        arg = changed[0]
        return Report(False, f"rope_interleaved changes its argument {arg} in place "
                             f"(its values differ after the call): the caller's "
                             f"{arg} is overwritten, and a model that reuses it "
                             f"(a residual connection, a second head) reads rotated "
                             f"values. Build the result in a new tensor and leave "
                             f"{arg} as it was.")
    if result.ok:
        return Report(True, f"diagnose_rope finds nothing wrong: {result.explanation}")
    evidence = " ".join(line.split(" Fix:")[0] for line in
                        result.explanation.split("\n")
                        if not line.startswith("The rest was not fitted"))
    hints = [f"{code}: {_ROPE_HINTS[code]}" for code in result.findings
             if code in _ROPE_HINTS]
    # the findings' own hints, in the reader's terms, replace the general one
    return Report(False, f"diagnose_rope finds {', '.join(result.findings)}. "
                         f"{evidence}", " ".join(hints))


@_graded
def check_layout_conversion(fn: Callable, *, n_heads: int = 2, head_dim: int = 16) -> Report:
    """Grade ``fn(weight, n_heads) -> weight``: rows of ``W_q``/``W_k`` reordered so
    that half-layout RoPE gives the scores interleaved RoPE gave.

    Checked on the scores themselves: seeded random weights and inputs,
    ``apply_rope(x @ W.T, layout="interleaved")`` against
    ``apply_rope(x @ fn(W).T, layout="half")`` per head, for the given
    ``(n_heads, head_dim)`` and for (3, 8) and (1, 32). Named mistakes: the
    inverse permutation, and one permutation over all rows instead of per head.
    """
    shapes = list(dict.fromkeys(((n_heads, head_dim), (3, 8), (1, 32))))
    failed = _first_failure(_check_layout_once(fn, h, d) for h, d in shapes)
    if failed:
        return failed
    shown = ", ".join(f"{h} x {d}" for h, d in shapes)
    return Report(True, f"half-layout RoPE on the converted weights gives the "
                        f"interleaved scores of the original ones, for every head "
                        f"(heads x head_dim = {shown}).")


def _check_layout_once(fn, n_heads, head_dim) -> Report:
    gen = torch.Generator().manual_seed(0)
    d_model, seq = 24, 10
    w_q = torch.randn(n_heads * head_dim, d_model, generator=gen, dtype=torch.float64)
    w_k = torch.randn(n_heads * head_dim, d_model, generator=gen, dtype=torch.float64)
    x = torch.randn(seq, d_model, generator=gen, dtype=torch.float64)
    inv = rope.inv_freq(head_dim, dtype=torch.float64)
    pos = torch.arange(seq)

    def scores(wq, wk, layout):
        q = (x @ wq.T).reshape(seq, n_heads, head_dim).transpose(0, 1)
        k = (x @ wk.T).reshape(seq, n_heads, head_dim).transpose(0, 1)
        q, k = (rope.apply_rope(t, pos, inv, layout=layout) for t in (q, k))
        return q @ k.transpose(-1, -2)

    new_q, new_k = (_as_tensor("to_half_layout",
                               _call_pure("to_half_layout", fn, w.clone(), n_heads,
                                          arg_names=("weight",)),
                               w.shape).to(torch.float64) for w in (w_q, w_k))
    wanted = scores(w_q, w_k, "interleaved")
    got = scores(new_q, new_k, "half")
    if torch.allclose(got, wanted, atol=1e-9):
        return Report(True, "")
    perm = rope.layout_permutation(head_dim)
    inverse = torch.argsort(perm)
    per_head = w_q.reshape(n_heads, head_dim, -1)
    if torch.allclose(new_q, per_head[:, inverse].reshape(w_q.shape)):
        return Report(False, "to_half_layout applies the inverse permutation: it "
                             "moves the rows the other way round: where half-layout row "
                             "i must hold interleaved row s(i), yours puts interleaved "
                             "row i at position s(i). Decide, for each half-layout row i, which "
                             "interleaved row it must hold, and take that row.")
    whole = rope.layout_permutation(n_heads * head_dim)
    if torch.allclose(new_q, w_q[whole]):
        return Report(False, "to_half_layout permutes all rows at once; the "
                             "permutation must be applied within each head "
                             "(reshape to (n_heads, head_dim, ...)).")
    if torch.allclose(new_q, w_q):
        return Report(False, "to_half_layout returns the weight unchanged.")
    finding = _layout_finding(new_q, w_q, n_heads, head_dim)
    if finding:
        return Report(False, f"to_half_layout: {finding}")
    error = float((got - wanted).abs().max())
    return Report(False, f"with {n_heads} heads of {head_dim} features the scores "
                         f"differ from the interleaved ones by up to {error:.3g}.")


def _layout_finding(new: Tensor, old: Tensor, n_heads: int, head_dim: int) -> str | None:
    """Which rows (or columns) of the weight the answer moved where."""
    def sources(a, b):
        """For each row of a, the row of b it equals, or None for all."""
        found = []
        for row in a:
            match = torch.nonzero((b == row).all(dim=1))
            if match.numel() == 0:
                return None
            found.append(int(match[0]))
        return found

    rows = sources(new, old)
    if rows is None:
        if sources(new.T, old.T) is not None:
            return ("it reorders the columns (the d_model inputs) of the weight; the "
                    "features of a head are its rows (q = x @ W_q.T), so reorder the "
                    "rows.")
        return ("its rows are not rows of the weight: the conversion only reorders "
                "rows, it changes no value.")
    head_of = [r // head_dim for r in rows]
    for i, h in enumerate(head_of):
        if h != i // head_dim:
            return (f"row {i} (head {i // head_dim}) takes row {rows[i]}, which belongs "
                    f"to head {h}: each head's rows must stay in that head.")
    within = [r % head_dim for r in rows[:head_dim]]
    if within == [j ^ 1 for j in range(head_dim)]:
        return ("it swaps the two features of every interleaved pair (2i <-> 2i + 1) "
                "and leaves the pairs where they are, in the interleaved layout: a "
                "swap inside a pair turns the rotation the other way. The half layout "
                "pairs feature i with feature i + head_dim/2.")
    shown = ", ".join(map(str, within[:8])) + (", ..." if head_dim > 8 else "")
    return (f"in head 0 your half-layout features 0, 1, 2, ... hold interleaved "
            f"features {shown}. Half-layout features i and i + head_dim/2 rotate "
            f"together as pair i; for every score to stay the same they must hold "
            f"interleaved pair i, features 2i and 2i + 1, in that order.")


# -- chapter 5 -----------------------------------------------------------------------

@_graded
def check_mrope_axis_map(fn: Callable) -> Report:
    """Grade ``fn(sections) -> axis_of_freq``: M-RoPE's contiguous axis map.

    Reference :func:`posenc_lib.multidim.mrope_axis_map`, on Qwen2-VL's
    ``[16, 24, 24]`` and on ``[2, 3, 1]``, ``[3, 5]`` and ``[1, 2, 3, 2]`` (any
    number of axes); integers only. Named mistakes: the sections taken
    in reverse order, and the axes visited round-robin (Qwen3-VL's interleaved
    map, not the contiguous one).
    """
    cases = ([16, 24, 24], [2, 3, 1], [3, 5], [1, 2, 3, 2])
    for sections in cases:
        name = f"axis_map({sections})"
        try:
            answer = _call_pure("axis_map", fn, list(sections), arg_names=("sections",))
        except _Stop as stop:
            if len(sections) == 3 or "not written yet" in stop.report.message:
                raise
            raise _Stop(Report(False, stop.report.message + f" (sections may have any "
                                      f"number of axes; here {len(sections)})."))
        got = _as_tensor(name, answer, (sum(sections),),
                         {"sections": (sections, [((64,), [16, 24, 24])])})
        if got.is_floating_point() or got.dtype == torch.bool:
            return Report(False, f"{name} returned {got.dtype} values; the axis map "
                                 f"holds axis numbers that index the position ids "
                                 f"(one row per axis), so return integers (int64).")
        expected = multidim.mrope_axis_map(sections)
        rev = multidim.mrope_axis_map(sections[::-1])
        mistakes = {
            "the sections are assigned in reverse order (width first); axis 0 (time) "
            "takes the first sections[0] pairs.": (len(sections) - 1) - rev,
            "the axes are visited round-robin (t, h, w, t, ...): that is Qwen3-VL's "
            "interleaved map; Qwen2-VL's takes each axis's pairs in one block.":
                multidim.mrope_axis_map(sections, interleaved=True),
        }
        report = _compare(name, got, expected, mistakes, atol=0,
                          what="multidim.mrope_axis_map",
                          diagnose=lambda g, s=sections: _axis_map_finding(g, s))
        if not report.passed:
            return report
    shown = ", ".join(map(str, cases))
    return Report(True, f"axis_map matches multidim.mrope_axis_map on {shown}.")


def _axis_map_finding(got: Tensor, sections: list) -> str | None:
    """The axis numbers used, the pairs each axis gets, and whether each axis's
    pairs form one block."""
    got = got.to(torch.int64)
    used = sorted(set(got.tolist()))
    if used and (used[0] < 0 or used[-1] >= len(sections)):
        return (f"your map uses the axis numbers {used}; with {len(sections)} sections "
                f"the axes are numbered 0 to {len(sections) - 1}, from 0 (axis 0 is "
                f"time, the first section).")
    for a in range(len(sections)):
        where = torch.nonzero(got == a).flatten()
        if where.numel() and int(where[-1] - where[0]) + 1 != where.numel():
            return (f"axis {a}'s pairs are not one contiguous block (pairs "
                    f"{where.tolist()[:6]}...; the axes take turns, as in an "
                    f"interleaved map): in Qwen2-VL's "
                    f"map axis 0 takes the first sections[0] pairs, axis 1 the next "
                    f"sections[1], and so on.")
    counts = [int((got == a).sum()) for a in range(len(sections))]
    if counts != list(sections):
        a = next(i for i, (c, n) in enumerate(zip(counts, sections)) if c != n)
        return (f"axis {a} drives {counts[a]} pairs, and sections[{a}] = {sections[a]}: "
                f"each axis a must drive exactly sections[a] pairs (yours: {counts}); "
                f"look at the first and last pair of each block.")
    return None


@_graded
def check_axial_inv_freq(fn: Callable, *, base: float = 10000.0) -> Report:
    """Grade ``fn(axis_of_freq, base) -> (dim/2,)``: a 1D RoPE ladder per axis.

    Reference :func:`posenc_lib.multidim.axial_inv_freq`, on contiguous maps
    and on interleaved ones (Qwen3-VL's round-robin, where an axis's pairs
    are not adjacent); named mistakes: one ladder over the whole head (``rope.inv_freq(dim)``), and each axis's
    ladder spaced over the whole head.
    """
    failed = _first_failure(_check_axial_once(fn, multidim.mrope_axis_map(
        sections, interleaved=interleaved), b)
                            for sections, interleaved in (([4, 6, 6], False),
                                                          ([2, 1, 5], False),
                                                          ([24, 20, 20], True),
                                                          ([3, 2, 2], True))
                            for b in dict.fromkeys((base, 500000.0)))
    if failed:
        return failed
    return Report(True, f"axial_frequencies matches multidim.axial_inv_freq for the "
                        f"contiguous maps of [4, 6, 6] and [2, 1, 5] and the "
                        f"interleaved (Qwen3-VL) maps of [24, 20, 20] and [3, 2, 2], "
                        f"bases {base:g} and 500000.")


def _check_axial_once(fn, axis, base) -> Report:
    got = _as_tensor("axial_frequencies",
                     _call_pure("axial_frequencies", fn, axis.clone(), base,
                                arg_names=("axis_of_freq",)), axis.shape)
    expected = multidim.axial_inv_freq(axis, base, dtype=torch.float64)
    dim = 2 * axis.shape[0]
    whole = rope.inv_freq(dim, base, dtype=torch.float64)
    spaced = torch.empty_like(expected)
    for a in axis.unique():
        n = int((axis == a).sum())
        spaced[axis == a] = whole[:n]
    mistakes = {
        "one ladder runs over the whole head: every axis must restart at θ = 1 "
        "with its own ladder base^(-2k/(2·n_a)).": whole,
        "each axis restarts at θ = 1 but its ladder is spaced over the whole head "
        "(base^(-2k/dim)); it must span 1 .. base over the axis's own pairs.": spaced,
    }
    blocks = torch.cat([expected[axis == a] for a in axis.unique()])
    if not torch.equal(blocks, expected):
        mistakes["the ladders are written one axis after the other (all of axis 0's, "
                 "then axis 1's, ...), but this map interleaves the axes: the k-th pair "
                 "of an axis sits where the map lists it, so each value goes to its "
                 "axis's k-th position in the map."] = blocks
    if base != 10000.0:
        mistakes["the base argument is ignored (10000 used)."] = \
            multidim.axial_inv_freq(axis, 10000.0, dtype=torch.float64)
    # a ladder computed in float32 is right: base^(-k/n_a) has a relative error of
    # about (2|ln θ| + 3)u there (the exponent and ln(base) rounded, then pow);
    # twice that is accepted, and every named bug is off by far more
    tol = 2 * (2 * expected.log().abs() + 3) * _U32 * expected
    return _compare(f"axial_frequencies(..., {base:g})", got, expected, mistakes,
                    atol=tol, what="multidim.axial_inv_freq",
                    diagnose=lambda g: _axial_finding(g, axis, base, tol))


def _axial_finding(got: Tensor, axis: Tensor, base: float, tol: Tensor) -> str | None:
    """Per axis: the ladder's first value, its spacing (fitted), and the order."""
    expected = multidim.axial_inv_freq(axis, base, dtype=torch.float64)
    for a in axis.unique().tolist():
        mine = axis == a
        g, e = got[mine], expected[mine]
        if bool(((g - e).abs() <= tol[mine]).all()):
            continue
        if torch.allclose(g.sort().values, e.sort().values, rtol=1e-5, atol=0):
            return (f"axis {a} has the right frequencies in the wrong order: its pairs "
                    f"sit at {torch.nonzero(mine).flatten().tolist()[:6]}... of the map, "
                    f"and its k-th pair (in the order the map lists them) must turn at "
                    f"base^(-k/n_a), k = 0, 1, ...")
        n_a = int(mine.sum())
        if abs(float(g[0]) - 1) > 1e-6:
            return (f"the first pair of axis {a} turns at {float(g[0]):.6g}; each axis's "
                    f"ladder starts at base^0 = 1 (k = 0) for its first pair.")
        if n_a >= 2 and bool((g > 0).all()):
            spacing = -g[1:].log() / (torch.arange(1, n_a, dtype=torch.float64)
                                      * math.log(base))
            step = float(spacing.mean())
            if bool(((spacing - step).abs() < 1e-5 * step).all()):
                return (f"axis {a} owns n_a = {n_a} pairs, but its ladder is spaced as "
                        f"if it had {1 / step:.4g}: base^(-k/{1 / step:.4g}) instead "
                        f"of base^(-k/{n_a}), an exponent {n_a * step:.4g} times "
                        f"-k/n_a; the k-th of an axis's own n_a pairs turns at "
                        f"base^(-k/n_a).")
        return (f"axis {a}'s pair k = {int(torch.nonzero((g - e).abs() > tol[mine])[0])} "
                f"differs from base^(-k/n_a) with n_a = {n_a}.")
    return None


# -- chapter 6 -----------------------------------------------------------------------

@_graded
def check_ntk_base(fn: Callable) -> Report:
    """Grade ``fn(base, factor, dim) -> float``: the static NTK-aware base.

    Reference :func:`posenc_lib.scaling.ntk_base`, and the property that
    defines it: the slowest pair turns exactly ``factor`` times slower while
    pair 0 keeps ``θ_0 = 1``, at (base, factor, dim) = (10000, 4, 128),
    (500000, 8, 64), (10000, 1, 128) and (10000, 2.5, 6). Named mistakes: the
    exponent ``d/(d-2)`` dropped (or integer division), inverted, the base left
    out, a base smaller than the old one, an argument ignored; otherwise the
    answer's own exponent of ``factor`` is shown.
    """
    cases = ((10000.0, 4.0, 128), (500000.0, 8.0, 64), (10000.0, 1.0, 128),
             (10000.0, 2.5, 6))
    for base, factor, dim in cases:
        got = _call("ntk_base", fn, base, factor, dim)
        try:
            got = float(got)
        except (TypeError, ValueError):
            return Report(False, f"ntk_base must return a number, got "
                                 f"{type(got).__name__}")
        head = f"ntk_base({base:g}, {factor:g}, {dim})"
        if not math.isfinite(got):
            return Report(False, f"{head} returned {got}: the new base must be a finite "
                                 f"number" + (" (with factor 1 nothing is slowed, so "
                                              "the base stays as it was)."
                                              if factor == 1 else "."))
        expected = scaling.ntk_base(base, factor, dim)
        slowdown = (got / base) ** ((dim - 2) / dim) if got > 0 else math.nan
        if (math.isclose(got, expected, rel_tol=1e-9)
                and math.isclose(slowdown, factor, rel_tol=1e-9)):
            continue
        for name, other in (("dim", (base, factor, 128)), ("factor", (base, 4.0, dim)),
                            ("base", (10000.0, factor, dim))):
            if other != (base, factor, dim) and math.isclose(
                    got, scaling.ntk_base(*other), rel_tol=1e-9):
                asked = {"dim": dim, "factor": factor, "base": base}[name]
                used = {"dim": 128, "factor": 4.0, "base": 10000.0}[name]
                return Report(False, f"{head}: the {name} "
                                     f"argument is ignored ({used:g} used, {asked:g} "
                                     f"asked for).")
        if factor != 1 and math.isclose(got, base * factor, rel_tol=1e-9):
            return Report(False, f"{head} = base·factor: the exponent d/(d-2) is missing "
                                 f"(or computed with integer division: {dim} // "
                                 f"{dim - 2} = {dim // (dim - 2)}, where {dim} / "
                                 f"{dim - 2} = {dim / (dim - 2):.4g}), so the slowest "
                                 f"pair turns factor^((d-2)/d) times slower, not factor "
                                 f"times.")
        if factor != 1 and got > 0 and math.isclose(got, expected / base, rel_tol=1e-9):
            return Report(False, f"{head} = {got:.6g} = factor^(d/(d-2)) without the "
                                 f"base: the new base is the old one multiplied by "
                                 f"that.")
        text = (f"{head} = {got:.6g}; the base that slows the slowest pair exactly "
                f"{factor:g} times is {expected:.6g}.")
        if factor != 1 and got > 0:
            exponent = math.log(got / base) / math.log(factor)
            if math.isclose(exponent, (dim - 2) / dim, rel_tol=1e-9):
                text += (" Yours is base·factor^((d-2)/d): the exponent is inverted; "
                         "the slowest pair's frequency is base^(-(d-2)/d), so the base "
                         "must grow by factor^(d/(d-2)).")
            elif exponent < 0:
                text += (f" Yours is smaller than base (base·factor^{exponent:.4g}): a "
                         f"smaller base makes every pair but the first turn faster; "
                         f"slowing them takes a larger base.")
            elif math.isfinite(exponent) and abs(got / base) > 1e-300:
                text += (f" Yours is base·factor^{exponent:.6g}, so the slowest pair "
                         f"slows factor^({exponent:.6g}·(d-2)/d) = "
                         f"{factor ** (exponent * (dim - 2) / dim):.6g} times; the "
                         f"exponent must make that exactly factor.")
        return Report(False, text)
    return Report(True, "ntk_base slows the slowest pair exactly factor times "
                        "(checked for dim 128, 64 and 6, factors 1, 2.5, 4 and 8).")


@_graded
def check_yarn_inv_freq(fn: Callable, *, dim: int = 128, base: float = 10000.0,
                        factor: float = 8.0,
                        original_max_position_embeddings: int = 4096) -> Report:
    """Grade ``fn(dim, base, factor, original_max_position_embeddings)``: YaRN's
    ``inv_freq``, by :func:`posenc_lib.tools.diagnose.diagnose_inv_freq` against the
    config transformers would read (``beta_fast=32``, ``beta_slow=1``), at the
    given setting, (64, 500000, 4, 2048) and (128, 10000, 4, 65536) (whose ramp
    ends past ``dim/2 - 1``). Before diagnose's own findings: the betas swapped,
    the slow pairs multiplied by ``factor``, every pair divided; where diagnose
    finds nothing known, where the answer's ramp starts and ends."""
    # the third setting's ramp ends past dim/2 - 1, so a clamp there shows
    settings = list(dict.fromkeys(((dim, base, factor, original_max_position_embeddings),
                                   (64, 500000.0, 4.0, 2048), (128, 10000.0, 4.0, 65536))))
    failed = _first_failure(_check_yarn_once(fn, *setting) for setting in settings)
    if failed:
        return failed
    shown = ", ".join(f"({d}, {b:g}, {f:g}, {n})" for d, b, f, n in settings)
    return Report(True, f"diagnose_inv_freq: inv_freq matches the config within "
                        f"float32 rounding at (dim, base, factor, "
                        f"original_max_position_embeddings) = {shown}.")


def _check_yarn_once(fn, dim, base, factor, original_max_position_embeddings) -> Report:
    got = _as_tensor("yarn_inv_freq", _call("yarn_inv_freq", fn, dim, base, factor,
                                            original_max_position_embeddings), (dim // 2,),
                     {"dim": (dim, [((64,), 128)])})
    config = _yarn_config(dim, base, factor, original_max_position_embeddings)
    result = diagnose_inv_freq(got.to(torch.float64), config)
    if result.ok:
        return Report(True, result.explanation)
    head = (f"yarn_inv_freq({dim}, {base:g}, {factor:g}, "
            f"{original_max_position_embeddings})")
    found = _yarn_mistake(got.to(torch.float64), dim, base, factor,
                          original_max_position_embeddings)
    if found:
        return Report(False, f"{head}: {found}")
    # an argument the answer ignores: the defaults of the first setting used
    for name, changed in (("base", dict(base=10000.0)), ("factor", dict(factor=8.0)),
                          ("original_max_position_embeddings",
                           dict(original_max_position_embeddings=4096))):
        setting = dict(dim=dim, base=base, factor=factor,
                       original_max_position_embeddings=original_max_position_embeddings)
        asked = setting[name]
        setting.update(changed)
        if setting[name] == asked:
            continue
        other, _ = scaling.rope_from_config(_yarn_config(**setting), dtype=torch.float64)
        if bool(((other - got.to(torch.float64)).abs() <= 1e-5 * other.abs()).all()):
            return Report(False, f"yarn_inv_freq({dim}, {base:g}, {factor:g}, "
                                 f"{original_max_position_embeddings}): the {name} "
                                 f"argument is ignored ({setting[name]:g} used, "
                                 f"{asked:g} asked for).")
    if set(result.findings) <= {"unknown"}:
        found = _yarn_ramp_finding(got.to(torch.float64), dim, base, factor,
                                   original_max_position_embeddings)
        if found:
            return Report(False, f"{head}: {found}")
    # the finding and its evidence, without the library call that would replace
    # the exercise
    text = result.explanation.split(" Fix:")[0]
    return Report(False, f"yarn_inv_freq({dim}, {base:g}, {factor:g}, "
                         f"{original_max_position_embeddings}): "
                         f"{', '.join(result.findings)}. {text}")


def _yarn_mistake(got, dim, base, factor, original_max_position_embeddings) -> str | None:
    """Mistakes diagnose_inv_freq does not name, tried on the answer: the two
    betas swapped, the slow pairs multiplied by factor, every pair divided."""
    length = original_max_position_embeddings
    plain = rope.inv_freq(dim, base, dtype=torch.float64)
    right, _ = scaling.rope_parameters("yarn", dim, base, factor=factor,
                                       original_max_position_embeddings=length,
                                       dtype=torch.float64)
    right = right.to(torch.float64)
    ramp = (plain - right) / (plain - plain / factor)   # 1: interpolated
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        swapped, _ = scaling.rope_parameters("yarn", dim, base, factor=factor,
                                             original_max_position_embeddings=length,
                                             beta_fast=1.0, beta_slow=32.0,
                                             dtype=torch.float64)
    candidates = {
        "beta_fast and beta_slow are swapped: the ramp must start (keep θ_i) at the "
        "pair that turns beta_fast = 32 times within the original context and end "
        "(θ_i / factor) at the pair that turns beta_slow = 1 time.":
            swapped.to(torch.float64),
        "the slow pairs are multiplied by factor, which makes them faster; "
        "interpolating divides θ_i by factor, so that they turn more slowly.":
            plain * (1 - ramp) + plain * factor * ramp,
        "every pair is divided by factor (plain position interpolation); YaRN keeps "
        "the fast pairs, those that turn at least beta_fast times within the "
        "original context, and ramps only between beta_fast and beta_slow turns.":
            plain / factor,
    }
    for text, candidate in candidates.items():
        if not torch.allclose(candidate, right, rtol=1e-6, atol=0) and bool(
                ((candidate - got).abs() <= 1e-5 * candidate.abs()).all()):
            return text
    return None


def _yarn_ramp_finding(got, dim, base, factor, original_max_position_embeddings):
    """A ramp between θ_i and θ_i / factor that runs between other pairs than
    YaRN's: where it starts and ends, against where YaRN's does."""
    plain = rope.inv_freq(dim, base, dtype=torch.float64)
    right, _ = scaling.rope_parameters("yarn", dim, base, factor=factor,
                                       original_max_position_embeddings=(
                                           original_max_position_embeddings),
                                       dtype=torch.float64)
    ramp = (plain - right.to(torch.float64)) / (plain - plain / factor)
    yours = (plain - got) / (plain - plain / factor)
    if factor != 1 and bool((yours > -1e-5).all()) and bool((yours < 1 + 1e-5).all()) \
            and bool((yours[1:] >= yours[:-1] - 1e-5).all()):
        def ends(w):
            kept = torch.nonzero(w < 1e-5).flatten()
            divided = torch.nonzero(w > 1 - 1e-5).flatten()
            return (f"keeps θ_i up to pair {int(kept[-1])}" if kept.numel()
                    else "keeps no pair",
                    f"divides it by factor from pair {int(divided[0])} on"
                    if divided.numel() else "divides no pair fully")

        (a, b), (want_a, want_b) = ends(yours), ends(ramp)
        if (a, b) != (want_a, want_b):
            return (f"your ramp {a} and {b}; YaRN's {want_a} and {want_b}. The ramp runs from the pair that turns beta_fast = "
                    f"32 times within the original context (index rounded down) to the "
                    f"one that turns beta_slow = 1 time (rounded up); pair i turns "
                    f"L·θ_i/(2π) times, θ_i = base^(-2i/d).")
    return None


def _yarn_config(dim, base, factor, original_max_position_embeddings):
    return {"rope_theta": base, "head_dim": dim, "hidden_size": dim,
            "num_attention_heads": 1,
            "max_position_embeddings": int(factor * original_max_position_embeddings),
            "rope_scaling": {"rope_type": "yarn", "factor": factor,
                             "original_max_position_embeddings":
                                 original_max_position_embeddings}}


# -- predict, then check ----------------------------------------------------------------

def _sinusoid_question():
    table = absolute.sinusoidal_encoding(64, 64, 10000.0, dtype=torch.float64)
    at12, at11 = float(table[20] @ table[32]), float(table[20] @ table[31])
    return at12 > at11, (f"PE(p)·PE(p + 12) = {at12:.4f} and PE(p)·PE(p + 11) = "
                         f"{at11:.4f} (d = 64, base 10000, any p): the similarity "
                         f"ripples as k grows, it does not fall steadily.")


def _t5_question():
    r = torch.arange(0, 200)
    buckets = relative.t5_bucket(r, True, 32, 128)

    def span(b):
        members = r[buckets == b]
        return f"+{int(members.min())}..+{int(members.max())}"

    b20, b23 = int(buckets[20]), int(buckets[23])
    return b20 == b23, (f"+20 is in bucket {b20} ({span(b20)}) and +23 in bucket "
                        f"{b23} ({span(b23)}), with 32 buckets, max_distance 128, "
                        f"bidirectional: past distance 8 the buckets widen "
                        f"logarithmically.")


def _pairs_turning(dim: int, base: float, length: int) -> int:
    """How many pairs of a RoPE head have a wavelength ``2π/θ_i`` of at most
    ``length``: the pairs that complete a full turn within ``length`` positions."""
    wavelengths = 2 * math.pi / rope.inv_freq(dim, base, dtype=torch.float64)
    return int((wavelengths <= length).sum())


def _rope_question():
    before = _pairs_turning(128, 10000.0, 4096)
    after = _pairs_turning(128, 500000.0, 8192)
    share_before = math.log(4096 / (2 * math.pi)) / math.log(10000.0)
    share_after = math.log(8192 / (2 * math.pi)) / math.log(500000.0)
    return after > before, (
        f"with base 10000, {before} of the 64 pairs of a 128-feature head complete a "
        f"turn within 4096 positions; with base 500000, {after} within 8192. The "
        f"share of pairs that turn is about log_base(L/2π): {share_before:.3f} "
        f"before, {share_after:.3f} after. Doubling L adds ln 2 to the numerator; "
        f"the 50 times larger base multiplies the denominator by "
        f"{math.log(500000.0) / math.log(10000.0):.2f}.")


def _mrope_question():
    theta = rope.inv_freq(128, 1e6, dtype=torch.float64)
    width = multidim.mrope_axis_map([16, 24, 24], dim=128) == 2
    fastest = float(theta[width].max())
    turn = 15 * fastest
    return turn > 0.01, (f"Qwen2-VL's width pairs are pairs 40 to 63 of the ladder; the "
                         f"fastest turns θ_40 = (10^6)^(-80/128) = {fastest:.3g} rad per id, "
                         f"so 15 columns turn it by {turn:.4f} rad: the language "
                         f"model barely sees where a patch sits in its row.")


def _yarn_question():
    plain = rope.inv_freq(128, 10000.0, dtype=torch.float64)
    yarn, _ = scaling.rope_parameters("yarn", 128, 10000.0, factor=4.0,
                                      original_max_position_embeddings=4096,
                                      dtype=torch.float64)
    ratio = (yarn.to(torch.float64) / plain)
    unchanged = int((ratio == 1).sum())
    return bool(ratio[0] == 1), (
        f"YaRN leaves the {unchanged} fastest pairs exactly as they were (ratio 1), "
        f"interpolates the slowest by 1/4 (ratio {float(ratio[-1]):.3f}) and ramps "
        f"between: pairs that turn many times within 4096 positions never see an "
        f"angle they were not trained on.")


#: The predict-then-check questions, each ``(question, truth)`` where ``truth()``
#: returns the answer and the numbers behind it.
PREDICTIONS = {
    "2.3": ("Is the similarity PE(p)·PE(p + k) of the sinusoidal table larger at "
            "k = 12 than at k = 11?", _sinusoid_question),
    "3.3": ("Do relative positions +20 and +23 share a T5 bucket (32 buckets, "
            "max_distance 128, bidirectional)?", _t5_question),
    "4.3": ("Llama 3 raised RoPE's base from 10000 to 500000 and its training length "
            "from 4096 to 8192 positions (head 128). Do more of the 64 pairs complete "
            "a full turn within the training length than with base 10000 and 4096 "
            "positions?", _rope_question),
    "5.3": ("In Qwen2-VL's M-RoPE (head 128, base 10^6, sections [16, 24, 24]), does "
            "moving a key 15 columns to the right turn its fastest width pair by more "
            "than 0.01 rad?", _mrope_question),
    "6.3": ("With YaRN (factor 4, original context 4096, head 128, base 10000), is the "
            "fastest pair's frequency left exactly as it was?", _yarn_question),
}


#: The hint of each prediction: how to reach the answer from the chapter's
#: formula, for a prediction that missed (the report gives the numbers).
_PREDICTION_HINTS = {
    "2.3": "the similarity is the sum over pairs of cos(k·ω_i) (the theorem just "
           "above the exercise): compare the terms at k = 11 and k = 12 pair by "
           "pair. The fastest pairs (ω_0 = 1 radian per position) change most; the "
           "slow ones barely move.",
    "3.3": "both distances are past the exact buckets (below N_0 = 8 per "
           "direction): put δ = 20 and δ = 23 into the logarithmic branch, "
           "N_0 + floor((N - N_0)·ln(δ/N_0)/ln(D/N_0)), and compare the floors.",
    "4.3": "pair i turns within L when 2π·base^(2i/d) <= L, that is when "
           "i <= (d/2)·log_base(L/2π): compare ln(L/2π)/ln(base) for the two "
           "settings, a numerator and a denominator that both grow.",
    "5.3": "count which pairs the width axis owns (the last sections[2] of the "
           "64), take the fastest of them, θ_i = base^(-2i/d), and multiply it "
           "by 15 columns.",
    "6.3": "YaRN keeps a pair's frequency when the pair turns at least "
           "beta_fast = 32 times within the original context: count the turns of "
           "pair 0 (θ_0 = 1) in 4096 positions.",
}


def _as_bool(answer) -> bool:
    """A prediction as a Python bool: ``True``/``False``, numpy's ``bool_`` and a
    one-element bool array or tensor are accepted; anything else is a report (a string
    is not, since ``"False"`` is a true value)."""
    if isinstance(answer, (bool, np.bool_)):
        return bool(answer)
    if isinstance(answer, np.ndarray) and answer.dtype == np.bool_ and answer.size == 1:
        return bool(answer.item())
    if isinstance(answer, Tensor) and answer.dtype == torch.bool and answer.numel() == 1:
        return bool(answer.item())
    if isinstance(answer, str):
        raise _Stop(Report(False, f"predict() returned the string {answer!r}; return "
                                  f"the value True or False, without quotes (any "
                                  f"non-empty string, \"False\" too, counts as true)."))
    if answer is None:
        raise _Stop(Report(False, "predict() returned None: is its return statement "
                                  "missing? Return True or False."))
    raise _Stop(Report(False, f"predict() must return True or False, got "
                              f"{type(answer).__name__} {answer!r}."))


@_graded
def check_prediction(question: str, fn: Callable) -> Report:
    """Grade ``fn() -> bool``, a prediction for one of :data:`PREDICTIONS`.

    The truth is computed here (the library's table, buckets or frequency), and
    the report gives the numbers behind it whether the prediction was right
    or not.

    Raises:
        ValueError: for a ``question`` not in :data:`PREDICTIONS`.
    """
    if question not in PREDICTIONS:
        raise ValueError(f"question must be one of {sorted(PREDICTIONS)}, got "
                         f"{question!r}")
    answer = _as_bool(_call("predict", fn))
    truth, numbers = PREDICTIONS[question][1]()
    if answer == truth:
        return Report(True, f"Predicting {answer} is right: {numbers}")
    return Report(False, f"Predicting {answer} is not what happens: {numbers}",
                  _PREDICTION_HINTS[question])
