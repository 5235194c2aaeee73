"""Answers to every graded exercise (chapters 2 to 6), written from the statements alone.

Each case is a learner's function: ``RIGHT`` ones are correct in a style the statement
allows (numpy, float32, lists, complex numbers, loops, another formula); ``WRONG`` ones
carry one subtle bug, with ``names``: a regular expression that the grader's feedback
(message and hint) must match for it to name the bug in the learner's terms.

``FRESH`` holds a second sample, written after the graders were fixed, that the fixes
never saw. ``measure`` grades a list of cases and returns the figures.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from posenc_lib.tools import exercises


@dataclass
class Case:
    exercise: str  # "2.1", ..., "6.3"
    name: str
    fn: Callable
    right: bool
    names: str = ""  # regex the feedback of a wrong answer must match
    tags: tuple = field(default_factory=tuple)


def grade(exercise: str, fn: Callable):
    graders = {
        "2.1": exercises.check_sinusoidal,
        "2.2": exercises.check_shift_matrix,
        "3.1": exercises.check_shaw_labels,
        "3.2": exercises.check_t5_bucket,
        "4.1": exercises.check_rope_interleaved,
        "4.2": exercises.check_layout_conversion,
        "5.1": exercises.check_mrope_axis_map,
        "5.2": exercises.check_axial_inv_freq,
        "6.1": exercises.check_ntk_base,
        "6.2": exercises.check_yarn_inv_freq,
    }
    if exercise in graders:
        return graders[exercise](fn)
    return exercises.check_prediction(exercise, fn)


def run_case(case: Case):
    """(passed, feedback text, crashed) for one case."""
    try:
        report = grade(case.exercise, case.fn)
    except Exception as err:  # a grader must report, never raise
        return False, f"grader raised {type(err).__name__}: {err}", True
    # the bug must be named in the message: the hint is the same for every answer
    return bool(report.passed), report.message, False


def measure(cases, verbose=False):
    right = [c for c in cases if c.right]
    wrong = [c for c in cases if not c.right]
    out = {
        "right_ok": [],
        "right_bad": [],
        "wrong_ok": [],
        "wrong_unnamed": [],
        "wrong_accepted": [],
        "crashed": [],
    }
    for c in cases:
        passed, text, crashed = run_case(c)
        if crashed:
            out["crashed"].append((c, text))
        if c.right:
            out["right_ok" if passed else "right_bad"].append((c, text))
        elif passed:
            out["wrong_accepted"].append((c, text))
        elif re.search(c.names, text, re.IGNORECASE | re.DOTALL):
            out["wrong_ok"].append((c, text))
        else:
            out["wrong_unnamed"].append((c, text))
    summary = (
        f"right accepted {len(out['right_ok'])}/{len(right)}; "
        f"wrong rejected {len(wrong) - len(out['wrong_accepted'])}/{len(wrong)}; "
        f"wrong named {len(out['wrong_ok'])}/{len(wrong)}; "
        f"grader raised {len(out['crashed'])}"
    )
    if verbose:
        for key in ("right_bad", "wrong_accepted", "wrong_unnamed", "crashed"):
            for c, text in out[key]:
                print(f"[{key}] {c.exercise} {c.name}: {text[:400]!r}")
    return summary, out


# ---------------------------------------------------------------------------------------
# 2.1 sinusoidal table: row p, sin(p w_i) at 2i, cos(p w_i) at 2i + 1, w_i = base^(-2i/d)


def _sin_torch64(n, d, base=10000.0):
    p = torch.arange(n, dtype=torch.float64)[:, None]
    w = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    t = torch.zeros(n, d, dtype=torch.float64)
    t[:, 0::2], t[:, 1::2] = torch.sin(p * w), torch.cos(p * w)
    return t


def sin_numpy(n_positions, dim, base=10000.0):
    p = np.arange(n_positions)[:, None]
    w = np.power(base, -np.arange(0, dim, 2) / dim)
    t = np.empty((n_positions, dim))
    t[:, 0::2], t[:, 1::2] = np.sin(p * w), np.cos(p * w)
    return t


def sin_float32(n_positions, dim, base=10000.0):
    p = torch.arange(n_positions, dtype=torch.float32)[:, None]
    w = torch.exp(-torch.arange(0, dim, 2, dtype=torch.float32) / dim * math.log(base))
    return torch.stack([torch.sin(p * w), torch.cos(p * w)], dim=-1).reshape(
        n_positions, dim
    )


def sin_lists(n_positions, dim, base=10000.0):
    rows = []
    for p in range(n_positions):
        row = []
        for i in range(dim // 2):
            w = base ** (-2 * i / dim)
            row += [math.sin(p * w), math.cos(p * w)]
        rows.append(row)
    return rows


def sin_complex(n_positions, dim, base=10000.0):
    w = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    z = torch.exp(1j * torch.arange(n_positions, dtype=torch.float64)[:, None] * w)
    return torch.stack([z.imag, z.real], dim=-1).flatten(1)


def sin_divide(n_positions, dim, base=10000.0):
    # p / base^(2i/d): the paper's form
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]
    denom = torch.tensor(
        [base ** (2 * i / dim) for i in range(dim // 2)], dtype=torch.float64
    )
    a = p / denom
    return torch.stack([a.sin(), a.cos()], -1).flatten(1)


def sin_swapped(n_positions, dim, base=10000.0):
    t = _sin_torch64(n_positions, dim, base)
    return t[:, [j ^ 1 for j in range(dim)]]


def sin_over_d(n_positions, dim, base=10000.0):  # w_i = base^(-i/d)
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]
    w = base ** (-torch.arange(dim // 2, dtype=torch.float64) / dim)
    return torch.stack([torch.sin(p * w), torch.cos(p * w)], -1).flatten(1)


def sin_feature_index(n_positions, dim, base=10000.0):  # w_i = base^(-2j/d), j = 2i
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]
    w = base ** (-2 * torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    return torch.stack([torch.sin(p * w), torch.cos(p * w)], -1).flatten(1)


def sin_fixed_base(n_positions, dim, base=10000.0):
    return _sin_torch64(n_positions, dim, 10000.0)


def sin_halves(n_positions, dim, base=10000.0):
    t = _sin_torch64(n_positions, dim, base)
    return torch.cat([t[:, 0::2], t[:, 1::2]], dim=1)


def sin_from_one(n_positions, dim, base=10000.0):
    return _sin_torch64(n_positions + 1, dim, base)[1:]


def sin_transposed(n_positions, dim, base=10000.0):
    return _sin_torch64(n_positions, dim, base).T.contiguous()


def sin_nan(n_positions, dim, base=10000.0):
    t = _sin_torch64(n_positions, dim, base)
    t[n_positions // 2, 3] = float("nan")
    return t


def sin_half16(n_positions, dim, base=10000.0):  # angles in float16: right near p = 0
    p = torch.arange(n_positions, dtype=torch.float16)[:, None]
    w = (base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)).half()
    a = (p * w).double()
    return torch.stack([a.sin(), a.cos()], -1).flatten(1)


def sin_small_angle(n_positions, dim, base=10000.0):  # sin x ~ x: right at small x
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]
    w = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    a = p * w
    return torch.stack([a, 1 - a**2 / 2], -1).flatten(1)


def sin_base_minus_one(n_positions, dim, base=10000.0):  # w_i = base^(-2i/(d - 2))
    p = torch.arange(n_positions, dtype=torch.float64)[:, None]
    w = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / (dim - 2))
    return torch.stack([torch.sin(p * w), torch.cos(p * w)], -1).flatten(1)


# ---------------------------------------------------------------------------------------
# 2.2 shift matrix M_k: PE(p + k) = M_k PE(p)


def _blocks(k, dim, base, sign=1.0, transpose=False, kind="float"):
    m = np.zeros((dim, dim))
    for i in range(dim // 2):
        w = base ** (-2 * i / dim)
        c, s = math.cos(k * w), sign * math.sin(k * w)
        block = np.array([[c, s], [-s, c]])
        if transpose:
            block = block.T
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = block
    return m


def shift_numpy(k, dim, base=10000.0):
    return _blocks(k, dim, base)


def shift_float32(k, dim, base=10000.0):
    return torch.tensor(_blocks(k, dim, base), dtype=torch.float32)


def shift_complex(k, dim, base=10000.0):
    # multiply z = cos + i sin by e^{i k w}: in the (sin, cos) basis
    w = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    z = torch.exp(1j * k * w)
    blocks = [torch.tensor([[u.real, u.imag], [-u.imag, u.real]]) for u in z]
    return torch.block_diag(*blocks)


def shift_by_solving(k, dim, base=10000.0):
    # M = PE(p + k) PE(p)^+ over enough rows: an equivalent (least squares) route
    t = _sin_torch64(4 * dim + 2 * abs(k) + 1, dim, base)
    a, b = t[abs(k) : abs(k) + 4 * dim], t[abs(k) + k : abs(k) + k + 4 * dim]
    return torch.linalg.lstsq(a, b).solution.T


def shift_lists(k, dim, base=10000.0):
    return _blocks(k, dim, base).tolist()


def shift_transposed(k, dim, base=10000.0):
    return _blocks(k, dim, base, transpose=True)


def shift_abs_k(k, dim, base=10000.0):  # right only for k >= 0
    return _blocks(abs(k), dim, base)


def shift_fixed_base(k, dim, base=10000.0):
    return _blocks(k, dim, 10000.0)


def shift_identity_k(k, dim, base=10000.0):  # ignores k
    return _blocks(1, dim, base)


def shift_over_d(k, dim, base=10000.0):
    m = np.zeros((dim, dim))
    for i in range(dim // 2):
        w = base ** (-i / dim)
        c, s = math.cos(k * w), math.sin(k * w)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
    return m


def shift_mutating_nothing_wrong_shape(k, dim, base=10000.0):  # (dim/2, 2, 2) blocks
    m = _blocks(k, dim, base)
    return np.stack([m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] for i in range(dim // 2)])


def shift_nan(k, dim, base=10000.0):
    m = _blocks(k, dim, base)
    if k == 0:
        m[0, 0] = float("nan")
    return m


# ---------------------------------------------------------------------------------------
# 3.1 Shaw labels: clip to [-kappa, kappa], shift to [0, 2 kappa], integers


def shaw_torch(relative_position, max_relative_position):
    k = max_relative_position
    return torch.clamp(relative_position, -k, k) + k


def shaw_numpy(relative_position, max_relative_position):
    k = max_relative_position
    return np.clip(np.asarray(relative_position), -k, k) + k


def shaw_where(relative_position, max_relative_position):
    r, k = relative_position, max_relative_position
    r = torch.as_tensor(r)
    return torch.where(r > k, k, torch.where(r < -k, -k, r)) + k


def shaw_loop(relative_position, max_relative_position):
    r = torch.as_tensor(relative_position)
    flat = [
        min(max(int(v), -max_relative_position), max_relative_position)
        + max_relative_position
        for v in r.flatten()
    ]
    return torch.tensor(flat, dtype=torch.int64).reshape(r.shape)


def shaw_int32(relative_position, max_relative_position):
    k = max_relative_position
    return (torch.as_tensor(relative_position).clamp(-k, k) + k).to(torch.int32)


def shaw_no_shift(relative_position, max_relative_position):
    k = max_relative_position
    return torch.as_tensor(relative_position).clamp(-k, k)


def shaw_shift_then_clip(relative_position, max_relative_position):
    k = max_relative_position
    return (torch.as_tensor(relative_position) + k).clamp(0, k)


def shaw_off_by_one(relative_position, max_relative_position):
    k = max_relative_position
    return torch.as_tensor(relative_position).clamp(-k + 1, k - 1) + k


def shaw_sign(relative_position, max_relative_position):  # query minus key
    k = max_relative_position
    return (-torch.as_tensor(relative_position)).clamp(-k, k) + k


def shaw_float(relative_position, max_relative_position):
    k = max_relative_position
    return torch.as_tensor(relative_position).double().clamp(-k, k) + k


def shaw_mutates(relative_position, max_relative_position):
    k = max_relative_position
    relative_position.clamp_(-k, k)
    relative_position += k
    return relative_position


def shaw_fixed_kappa(relative_position, max_relative_position):
    return torch.as_tensor(relative_position).clamp(-4, 4) + 4


def shaw_no_clip(relative_position, max_relative_position):
    return torch.as_tensor(relative_position) + max_relative_position


# ---------------------------------------------------------------------------------------
# 3.2 T5 bucket (transformers' arithmetic)


def t5_reference_style(
    relative_position,
    bidirectional=True,
    num_buckets=32,
    max_distance=128,
    log_dtype=torch.float32,
    sign=1,
    round_up=False,
    clamp=True,
    exact_of=None,
    half=True,
):
    r = torch.as_tensor(relative_position).to(torch.int64) * sign
    out = torch.zeros_like(r)
    n = num_buckets
    if bidirectional:
        if half:
            n //= 2
        out += (r > 0).to(torch.int64) * n
        dist = r.abs()
    else:
        dist = -torch.minimum(r, torch.zeros_like(r))
    exact = n // 2 if exact_of is None else exact_of(n)
    is_small = dist < exact
    val = (
        exact
        + (
            torch.log(dist.to(log_dtype) / exact)
            / math.log(max_distance / exact)
            * (n - exact)
        ).to(torch.int64)
        + (1 if round_up else 0)
    )
    if clamp:
        val = torch.minimum(val, torch.full_like(val, n - 1))
    return out + torch.where(is_small, dist, val)


def t5_right(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    return t5_reference_style(
        relative_position, bidirectional, num_buckets, max_distance
    )


def t5_numpy(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    r = np.asarray(relative_position).astype(np.int64)
    n = num_buckets // 2 if bidirectional else num_buckets
    base = (r > 0) * n if bidirectional else np.zeros_like(r)
    dist = np.abs(r) if bidirectional else np.maximum(-r, 0)
    exact = n // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        large = exact + (
            np.log(dist.astype(np.float32) / np.float32(exact))
            / np.float32(math.log(max_distance / exact))
            * (n - exact)
        ).astype(np.int64)
    large = np.minimum(large, n - 1)
    return base + np.where(dist < exact, dist, large)


def t5_python_loop(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    # float32 log as T5 does, per element, through torch scalars
    flat = torch.as_tensor(relative_position).flatten().tolist()
    out = []
    for r in flat:
        n = num_buckets // 2 if bidirectional else num_buckets
        b = n if (bidirectional and r > 0) else 0
        d = abs(r) if bidirectional else max(-r, 0)
        exact = n // 2
        if d < exact:
            out.append(b + d)
            continue
        x = torch.log(torch.tensor(d, dtype=torch.float32) / exact)
        x = x / math.log(max_distance / exact) * (n - exact)
        out.append(b + min(exact + int(x.to(torch.int64)), n - 1))
    return torch.tensor(out).reshape(torch.as_tensor(relative_position).shape)


def t5_float64(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    # the same formula with a float64 logarithm; the statement asks for transformers'
    # arithmetic, so this is right only where the two roundings agree
    return t5_reference_style(
        relative_position,
        bidirectional,
        num_buckets,
        max_distance,
        log_dtype=torch.float64,
    )


def t5_sign(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    return t5_reference_style(
        relative_position, bidirectional, num_buckets, max_distance, sign=-1
    )


def t5_no_clamp(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    return t5_reference_style(
        relative_position, bidirectional, num_buckets, max_distance, clamp=False
    )


def t5_round_up(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    return t5_reference_style(
        relative_position, bidirectional, num_buckets, max_distance, round_up=True
    )


def t5_no_halving(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    return t5_reference_style(
        relative_position, bidirectional, num_buckets, max_distance, half=False
    )


def t5_ignores_bidirectional(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    return t5_reference_style(relative_position, True, num_buckets, max_distance)


def t5_fixed_max_distance(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    return t5_reference_style(relative_position, bidirectional, num_buckets, 128)


def t5_exact_third(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    return t5_reference_style(
        relative_position,
        bidirectional,
        num_buckets,
        max_distance,
        exact_of=lambda n: n // 2 + 1,
    )


def t5_round_nearest(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    r = torch.as_tensor(relative_position).to(torch.int64)
    n = num_buckets // 2 if bidirectional else num_buckets
    out = (r > 0).to(torch.int64) * n if bidirectional else torch.zeros_like(r)
    dist = r.abs() if bidirectional else (-r).clamp_min(0)
    exact = n // 2
    x = torch.log(dist.float() / exact) / math.log(max_distance / exact) * (n - exact)
    large = (exact + torch.round(x).to(torch.int64)).clamp_max(n - 1)
    return out + torch.where(dist < exact, dist, large)


def t5_float_out(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):
    return t5_right(
        relative_position, bidirectional, num_buckets, max_distance
    ).double()


# ---------------------------------------------------------------------------------------
# 4.1 RoPE, interleaved, head 64, base 10000


def _rope(
    x,
    positions,
    *,
    pos=None,
    base=10000.0,
    exp_den=64,
    swap=False,
    sign=1.0,
    layout="interleaved",
    dtype=torch.float32,
    reverse=False,
    rotated=64,
    intdiv=False,
    table_dtype=None,
):
    positions = pos(positions) if pos is not None else positions
    i = torch.arange(32, dtype=torch.float64)
    expo = (2 * i // exp_den) if intdiv else (2 * i / exp_den)
    inv = base ** (-expo)
    if reverse:
        inv = inv.flip(0)
    a = positions.to(dtype)[:, None] * inv.to(dtype)
    cos, sin = a.cos(), sign * a.sin()
    if table_dtype is not None:
        cos, sin = cos.to(table_dtype).to(dtype), sin.to(table_dtype).to(dtype)
    if swap:
        cos, sin = sin, cos
    n = rotated // 2
    cos, sin = cos[:, :n], sin[:, :n]
    xx = x.to(dtype)
    out = xx.clone()
    if layout == "interleaved":
        u, v = xx[..., 0:rotated:2], xx[..., 1:rotated:2]
        out[..., 0:rotated:2] = u * cos - v * sin
        out[..., 1:rotated:2] = v * cos + u * sin
    else:
        u, v = xx[..., :n], xx[..., n:rotated]
        out[..., :n] = u * cos - v * sin
        out[..., n:rotated] = v * cos + u * sin
    return out.to(x.dtype)


def rope_complex(x, positions):
    inv = 1.0 / 10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    angles = positions.to(torch.float64)[:, None] * inv
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], 32, 2).contiguous())
    out = torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles))
    return out.flatten(-2).to(x.dtype)


def rope_numpy(x, positions):
    xn = x.detach().cpu().numpy().astype(np.float64)
    p = positions.cpu().numpy().astype(np.float64)
    inv = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    a = p[:, None] * inv
    out = np.empty_like(xn)
    u, v = xn[..., 0::2], xn[..., 1::2]
    out[..., 0::2] = u * np.cos(a) - v * np.sin(a)
    out[..., 1::2] = v * np.cos(a) + u * np.sin(a)
    return torch.from_numpy(out).to(x.dtype)


def rope_float64(x, positions):  # returns float64
    return _rope(x.double(), positions, dtype=torch.float64)


def rope_matrix(x, positions):  # a block-diagonal rotation matrix per position
    inv = 10000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)
    out = torch.empty_like(x, dtype=torch.float64)
    for s, p in enumerate(positions.tolist()):
        blocks = []
        for w in inv.tolist():
            c, sn = math.cos(p * w), math.sin(p * w)
            blocks.append(torch.tensor([[c, -sn], [sn, c]], dtype=torch.float64))
        rot = torch.block_diag(*blocks)
        out[:, s] = x[:, s].double() @ rot.T
    return out.float()


def rope_right(x, positions):
    return _rope(x, positions)


def rope_ignores_positions(x, positions):
    return _rope(x, torch.arange(x.shape[-2]))


def rope_halves(x, positions):
    return _rope(x, positions, layout="halves")


def rope_swapped(x, positions):
    return _rope(x, positions, swap=True)


def rope_reversed(x, positions):
    return _rope(x, positions, sign=-1.0)


def rope_offset(x, positions):
    return _rope(x, positions + 1)


def rope_exp_over_32(x, positions):
    return _rope(x, positions, exp_den=32)


def rope_intdiv(x, positions):
    return _rope(x, positions, intdiv=True)


def rope_base(x, positions):
    return _rope(x, positions, base=500000.0)


def rope_reversed_ladder(x, positions):
    return _rope(x, positions, reverse=True)


def rope_half_rotated(x, positions):
    return _rope(x, positions, rotated=32)


def rope_bf16_tables(x, positions):
    return _rope(x, positions, table_dtype=torch.bfloat16)


def rope_fp16_angles(x, positions):  # right at small positions only
    return _rope(x, positions, dtype=torch.float16).float()


def rope_mutates(x, positions):
    out = _rope(x, positions)
    x.copy_(out)
    return x


def rope_first_batch(x, positions):  # drops the batch dimension
    return _rope(x, positions)[0]


def rope_nan_at_zero(x, positions):
    out = _rope(x, positions)
    return torch.where((positions == 0)[:, None], torch.nan, out)


# ---------------------------------------------------------------------------------------
# 4.2 interleaved -> half layout, rows of W_q, head by head


def half_right(weight, n_heads):
    hd = weight.shape[0] // n_heads
    perm = list(range(0, hd, 2)) + list(range(1, hd, 2))
    rows = [h * hd + j for h in range(n_heads) for j in perm]
    return weight[rows]


def half_view(weight, n_heads):
    hd = weight.shape[0] // n_heads
    return weight.reshape(n_heads, hd // 2, 2, -1).transpose(1, 2).reshape(weight.shape)


def half_numpy(weight, n_heads):
    w = weight.detach().numpy()
    hd = w.shape[0] // n_heads
    w = w.reshape(n_heads, hd // 2, 2, -1).transpose(0, 2, 1, 3).reshape(w.shape)
    return w


def half_perm_matrix(weight, n_heads):
    hd = weight.shape[0] // n_heads
    p = torch.zeros(hd, hd, dtype=weight.dtype)
    for i in range(hd // 2):
        p[i, 2 * i] = 1
        p[hd // 2 + i, 2 * i + 1] = 1
    return torch.block_diag(*[p] * n_heads) @ weight


def half_inverse(weight, n_heads):  # the inverse permutation
    hd = weight.shape[0] // n_heads
    perm = list(range(0, hd, 2)) + list(range(1, hd, 2))
    inv = [perm.index(j) for j in range(hd)]
    rows = [h * hd + j for h in range(n_heads) for j in inv]
    return weight[rows]


def half_whole_matrix(weight, n_heads):  # one head of n_heads * head_dim
    n = weight.shape[0]
    return weight[list(range(0, n, 2)) + list(range(1, n, 2))]


def half_columns(weight, n_heads):
    hd = weight.shape[1] // n_heads
    perm = list(range(0, hd, 2)) + list(range(1, hd, 2))
    cols = [h * hd + j for h in range(n_heads) for j in perm]
    return weight[:, cols]


def half_swap_pairs(weight, n_heads):  # swaps the two features of each pair
    hd = weight.shape[0] // n_heads
    rows = [h * hd + (j ^ 1) for h in range(n_heads) for j in range(hd)]
    return weight[rows]


def half_fixed_head_dim(weight, n_heads):
    hd = 64
    n = weight.shape[0]
    perm = list(range(0, hd, 2)) + list(range(1, hd, 2))
    rows = [h * hd + j for h in range(max(n // hd, 1)) for j in perm if h * hd + j < n]
    rows += [r for r in range(n) if r not in rows]
    return weight[rows]


def half_identity(weight, n_heads):
    return weight.clone()


def half_mutates(weight, n_heads):
    out = half_right(weight, n_heads).clone()
    weight.copy_(out)
    return weight


# ---------------------------------------------------------------------------------------
# 5.1 M-RoPE axis map


def axis_torch(sections):
    return torch.repeat_interleave(
        torch.arange(len(sections)), torch.as_tensor(sections)
    )


def axis_numpy(sections):
    return np.repeat(np.arange(len(sections)), sections)


def axis_list(sections):
    return [a for a, n in enumerate(sections) for _ in range(n)]


def axis_searchsorted(sections):
    ends = torch.cumsum(torch.as_tensor(sections), 0)
    return torch.searchsorted(ends, torch.arange(int(ends[-1])), right=True)


def axis_interleaved(sections):  # Qwen3-VL's pattern
    return torch.arange(sum(sections)) % len(sections)


def axis_off_by_one(sections):
    ends = torch.cumsum(torch.as_tensor(sections), 0)
    return torch.searchsorted(ends, torch.arange(int(ends[-1])), right=False)


def axis_reversed(sections):
    return axis_torch(sections).flip(0)


def axis_float(sections):
    return axis_torch(sections).float()


def axis_hardcoded(sections):
    return axis_torch([16, 24, 24])


def axis_one_based(sections):
    return axis_torch(sections) + 1


def axis_per_section(sections):  # one entry per section
    return torch.arange(len(sections))


def axis_three_axes(sections):  # assumes three sections
    a, b, c = sections[:3]
    return torch.cat([torch.zeros(a), torch.ones(b), torch.full((c,), 2)]).long()


# ---------------------------------------------------------------------------------------
# 5.2 axial frequencies


def axial_right(axis_of_freq, base=10000.0):
    axis_of_freq = torch.as_tensor(axis_of_freq)
    out = torch.empty(len(axis_of_freq), dtype=torch.float64)
    for a in axis_of_freq.unique():
        mine = axis_of_freq == a
        k = torch.arange(int(mine.sum()), dtype=torch.float64)
        out[mine] = base ** (-k / len(k))
    return out


def axial_numpy(axis_of_freq, base=10000.0):
    axes = np.asarray(axis_of_freq)
    out = np.empty(len(axes))
    for a in np.unique(axes):
        idx = np.flatnonzero(axes == a)
        out[idx] = base ** (-np.arange(len(idx)) / len(idx))
    return out


def axial_loop(axis_of_freq, base=10000.0):
    axes = [int(a) for a in axis_of_freq]
    counts, seen, out = {}, {}, []
    for a in axes:
        counts[a] = counts.get(a, 0) + 1
    for a in axes:
        k = seen.get(a, 0)
        seen[a] = k + 1
        out.append(base ** (-k / counts[a]))
    return torch.tensor(out, dtype=torch.float64)


def axial_rope_ladder(axis_of_freq, base=10000.0):  # inv_freq of a 2 n_a head
    axes = torch.as_tensor(axis_of_freq)
    out = torch.empty(len(axes), dtype=torch.float64)
    for a in axes.unique():
        mine = axes == a
        n = int(mine.sum())
        out[mine] = 1.0 / base ** (
            torch.arange(0, 2 * n, 2, dtype=torch.float64) / (2 * n)
        )
    return out


def axial_float32(axis_of_freq, base=10000.0):
    return axial_right(axis_of_freq, base).float()


def axial_global(axis_of_freq, base=10000.0):  # one ladder over all pairs
    n = len(axis_of_freq)
    return base ** (-torch.arange(n, dtype=torch.float64) / n)


def axial_two_k(axis_of_freq, base=10000.0):  # base^(-2k/n_a)
    return axial_right(axis_of_freq, base) ** 2


def axial_sorted(axis_of_freq, base=10000.0):  # contiguous order, not the map's
    axes = torch.as_tensor(axis_of_freq)
    out = []
    for a in axes.unique():
        n = int((axes == a).sum())
        out.append(base ** (-torch.arange(n, dtype=torch.float64) / n))
    return torch.cat(out)


def axial_from_one(axis_of_freq, base=10000.0):
    axes = torch.as_tensor(axis_of_freq)
    out = torch.empty(len(axes), dtype=torch.float64)
    for a in axes.unique():
        mine = axes == a
        n = int(mine.sum())
        out[mine] = base ** (-torch.arange(1, n + 1, dtype=torch.float64) / n)
    return out


def axial_fixed_base(axis_of_freq, base=10000.0):
    return axial_right(axis_of_freq, 10000.0)


def axial_total_count(axis_of_freq, base=10000.0):  # k within axis, / total pairs
    axes = torch.as_tensor(axis_of_freq)
    out = torch.empty(len(axes), dtype=torch.float64)
    for a in axes.unique():
        mine = axes == a
        out[mine] = base ** (
            -torch.arange(int(mine.sum()), dtype=torch.float64) / len(axes)
        )
    return out


def axial_equal_split(axis_of_freq, base=10000.0):  # assumes equal axes
    axes = torch.as_tensor(axis_of_freq)
    n_a = len(axes) // len(axes.unique())
    out = torch.empty(len(axes), dtype=torch.float64)
    for a in axes.unique():
        mine = axes == a
        out[mine] = base ** (-torch.arange(int(mine.sum()), dtype=torch.float64) / n_a)
    return out


def axial_mutates(axis_of_freq, base=10000.0):
    out = axial_right(axis_of_freq, base)
    if isinstance(axis_of_freq, torch.Tensor):
        axis_of_freq.zero_()
    return out


# ---------------------------------------------------------------------------------------
# 6.1 NTK base


def ntk_right(base, factor, dim):
    return base * factor ** (dim / (dim - 2))


def ntk_exp(base, factor, dim):
    return math.exp(math.log(base) + dim / (dim - 2) * math.log(factor))


def ntk_tensor(base, factor, dim):
    return torch.tensor(base, dtype=torch.float64) * factor ** (dim / (dim - 2))


def ntk_numpy(base, factor, dim):
    return np.float64(base) * np.power(factor, dim / (dim - 2))


def ntk_solve(base, factor, dim):  # from theta_last' = theta_last / factor
    last = base ** (-(dim - 2) / dim) / factor
    return last ** (-dim / (dim - 2))


def ntk_linear(base, factor, dim):
    return base * factor


def ntk_int_exponent(base, factor, dim):
    return base * factor ** (dim // (dim - 2))


def ntk_inverted_exponent(base, factor, dim):
    return base * factor ** ((dim - 2) / dim)


def ntk_dim_minus_one(base, factor, dim):
    return base * factor ** (dim / (dim - 1))


def ntk_hardcoded_dim(base, factor, dim):
    return base * factor ** (128 / 126)


def ntk_divide(base, factor, dim):
    return base / factor ** (dim / (dim - 2))


def ntk_no_base(base, factor, dim):
    return factor ** (dim / (dim - 2))


def ntk_nan(base, factor, dim):
    return float("nan") if factor == 1 else ntk_right(base, factor, dim)


# ---------------------------------------------------------------------------------------
# 6.2 YaRN inv_freq (transformers, beta_fast 32, beta_slow 1)


def _yarn(
    dim,
    base,
    factor,
    L,
    *,
    beta_fast=32.0,
    beta_slow=1.0,
    round_=True,
    clamp_hi=None,
    invert=False,
    mult=False,
    float32_freqs=False,
    dim_in_pairs=False,
    ramp_over=None,
    fixed_L=None,
    ignore_factor_when=None,
):
    L = fixed_L or L

    def corr(turns):
        return dim * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = corr(beta_fast), corr(beta_slow)
    if round_:
        low, high = math.floor(low), math.ceil(high)
    low = max(low, 0)
    high = min(high, (dim - 1) if clamp_hi is None else clamp_hi)
    if low == high:
        high += 0.001
    dt = torch.float32 if float32_freqs else torch.float64
    i = torch.arange(dim // 2, dtype=torch.float64)
    pos = base ** (torch.arange(0, dim, 2, dtype=dt) / dim)
    extrap, interp = (1.0 / pos).double(), (1.0 / (factor * pos)).double()
    if mult:
        interp = extrap * factor
    ramp = ((i - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1 where the frequency is kept
    if invert:
        keep = 1 - keep
    return interp * (1 - keep) + extrap * keep


def yarn_right(dim, base, factor, original_max_position_embeddings):
    return _yarn(dim, base, factor, original_max_position_embeddings)


def yarn_float32_like_transformers(dim, base, factor, original_max_position_embeddings):
    return _yarn(
        dim, base, factor, original_max_position_embeddings, float32_freqs=True
    ).float()


def yarn_numpy(dim, base, factor, original_max_position_embeddings):
    L = original_max_position_embeddings

    def turn_pair(turns):
        # the pair whose wavelength 2 pi base^(2i/d) equals L / turns
        return math.log(L / (2 * math.pi * turns)) / math.log(base) * dim / 2

    low = max(math.floor(turn_pair(32)), 0)
    high = min(math.ceil(turn_pair(1)), dim - 1)
    if low == high:
        high += 0.001
    i = np.arange(dim // 2)
    theta = base ** (-2.0 * i / dim)
    ramp = np.clip((i - low) / (high - low), 0, 1)
    return theta * (1 - ramp) + theta / factor * ramp


def yarn_inverted(dim, base, factor, original_max_position_embeddings):
    return _yarn(dim, base, factor, original_max_position_embeddings, invert=True)


def yarn_clamp(dim, base, factor, original_max_position_embeddings):
    return _yarn(
        dim, base, factor, original_max_position_embeddings, clamp_hi=dim // 2 - 1
    )


def yarn_no_round(dim, base, factor, original_max_position_embeddings):
    return _yarn(dim, base, factor, original_max_position_embeddings, round_=False)


def yarn_betas_swapped(dim, base, factor, original_max_position_embeddings):
    return _yarn(
        dim,
        base,
        factor,
        original_max_position_embeddings,
        beta_fast=1.0,
        beta_slow=32.0,
    )


def yarn_multiply(dim, base, factor, original_max_position_embeddings):
    return _yarn(dim, base, factor, original_max_position_embeddings, mult=True)


def yarn_fixed_L(dim, base, factor, original_max_position_embeddings):
    return _yarn(dim, base, factor, original_max_position_embeddings, fixed_L=4096)


def yarn_plain_pi(
    dim, base, factor, original_max_position_embeddings
):  # every pair / s
    i = torch.arange(dim // 2, dtype=torch.float64)
    return base ** (-2 * i / dim) / factor


def yarn_no_change(dim, base, factor, original_max_position_embeddings):
    i = torch.arange(dim // 2, dtype=torch.float64)
    return base ** (-2 * i / dim)


def yarn_nan(dim, base, factor, original_max_position_embeddings):
    out = _yarn(dim, base, factor, original_max_position_embeddings)
    out[-1] = float("nan")
    return out


# ---------------------------------------------------------------------------------------
# predictions 2.3 (True), 3.3 (False), 4.3 (False), 5.3 (False), 6.3 (True)

ANSWERS = {"2.3": True, "3.3": False, "4.3": False, "5.3": False, "6.3": True}


def _pred(value):
    return lambda: value


PREDICTION_NAMES = r"predict|answer|expected|True|False"

# ---------------------------------------------------------------------------------------

R, W = True, False
BEFORE = [
    # 2.1
    Case("2.1", "numpy float64", sin_numpy, R),
    Case("2.1", "torch float32 via exp/log", sin_float32, R),
    Case("2.1", "python lists", sin_lists, R),
    Case("2.1", "complex exponential", sin_complex, R),
    Case("2.1", "p / base^(2i/d)", sin_divide, R),
    Case("2.1", "sin/cos swapped", sin_swapped, W, r"swap|cos.{0,40}sin|sin.{0,40}cos"),
    Case("2.1", "exponent i/d", sin_over_d, W, r"exponent|2i|i/d|frequenc"),
    Case(
        "2.1",
        "exponent 2j/d with j the feature",
        sin_feature_index,
        W,
        r"exponent|feature index|2j",
    ),
    Case("2.1", "base fixed at 10000", sin_fixed_base, W, r"base"),
    Case("2.1", "halves layout", sin_halves, W, r"half|halves|layout|interleav"),
    Case(
        "2.1",
        "positions from 1",
        sin_from_one,
        W,
        r"row 0|start|offset|p \+ 1|position 1",
    ),
    Case("2.1", "transposed", sin_transposed, W, r"shape"),
    Case("2.1", "NaN at one entry", sin_nan, W, r"nan|not a number|finite"),
    Case(
        "2.1",
        "float16 angles",
        sin_half16,
        W,
        r"float16|half precision|precision|large position|round",
    ),
    Case(
        "2.1",
        "sin x ~ x",
        sin_small_angle,
        W,
        r"small|large position|position \d+|row \d+",
    ),
    Case(
        "2.1",
        "exponent over d - 2",
        sin_base_minus_one,
        W,
        r"exponent|denominator|d - 2",
    ),
    # 2.2
    Case("2.2", "numpy", shift_numpy, R),
    Case("2.2", "torch float32", shift_float32, R),
    Case("2.2", "complex multiplication", shift_complex, R),
    Case("2.2", "least squares on the table", shift_by_solving, R),
    Case("2.2", "python lists", shift_lists, R),
    Case(
        "2.2",
        "transposed blocks (M_{-k})",
        shift_transposed,
        W,
        r"transpos|backward|-k|negative|sign|wrong direction|opposite",
    ),
    Case("2.2", "|k|", shift_abs_k, W, r"negative|backward|sign|-k"),
    Case("2.2", "base fixed", shift_fixed_base, W, r"base"),
    Case("2.2", "ignores k", shift_identity_k, W, r"ignor|every k|same matrix"),
    Case("2.2", "exponent i/d", shift_over_d, W, r"exponent|i/d|frequencies"),
    Case("2.2", "blocks (d/2, 2, 2)", shift_mutating_nothing_wrong_shape, W, r"shape"),
    Case("2.2", "NaN at k = 0", shift_nan, W, r"nan|not a number|finite"),
    # 3.1
    Case("3.1", "torch clamp", shaw_torch, R),
    Case("3.1", "numpy clip", shaw_numpy, R),
    Case("3.1", "nested where", shaw_where, R),
    Case("3.1", "python loop", shaw_loop, R),
    Case("3.1", "int32 labels", shaw_int32, R),
    Case("3.1", "no shift", shaw_no_shift, W, r"shift|negative|\+ ?kappa|0 \.\.|\[0"),
    Case(
        "3.1",
        "shift then clip to [0, k]",
        shaw_shift_then_clip,
        W,
        r"order|before clipping|then shift|shift.{0,30}clip",
    ),
    Case(
        "3.1",
        "clip off by one",
        shaw_off_by_one,
        W,
        r"off by one|\u03ba - 1|kappa - 1|one too|clip to \[-3, 3\]",
    ),
    Case(
        "3.1",
        "query minus key",
        shaw_sign,
        W,
        r"sign|key minus query|j - i|revers|mirror|i - j",
    ),
    Case("3.1", "float labels", shaw_float, W, r"integer|dtype|float"),
    Case(
        "3.1",
        "mutates its input",
        shaw_mutates,
        W,
        r"chang|modif|mutat|in place|in-place",
    ),
    Case(
        "3.1",
        "kappa fixed at 4",
        shaw_fixed_kappa,
        W,
        r"max_relative_position|\u03ba|kappa|argument",
    ),
    Case("3.1", "no clip", shaw_no_clip, W, r"clip|beyond|out of range|range"),
    # 3.2
    Case("3.2", "torch, float32 log", t5_right, R),
    Case("3.2", "numpy float32", t5_numpy, R),
    Case("3.2", "python loop", t5_python_loop, R),
    Case("3.2", "float64 log", t5_float64, R),
    Case(
        "3.2",
        "sign flipped",
        t5_sign,
        W,
        r"sign|direction|query minus key|revers|mirror",
    ),
    Case(
        "3.2", "no clamp", t5_no_clamp, W, r"clamp|last bucket|max_distance|cap|beyond"
    ),
    Case("3.2", "rounds up", t5_round_up, W, r"round|floor|ceil|off by one|one too"),
    Case(
        "3.2",
        "no halving when bidirectional",
        t5_no_halving,
        W,
        r"halv|upper half|half of the buckets|num_buckets // 2",
    ),
    Case(
        "3.2",
        "ignores bidirectional",
        t5_ignores_bidirectional,
        W,
        r"ignor|causal.{0,60}(future|right|0)",
    ),
    Case("3.2", "max_distance fixed", t5_fixed_max_distance, W, r"max_distance"),
    Case(
        "3.2",
        "exact range off by one",
        t5_exact_third,
        W,
        r"exact bucket|exact range|small distances",
    ),
    Case("3.2", "round to nearest", t5_round_nearest, W, r"round|floor|trunc"),
    Case("3.2", "float buckets", t5_float_out, W, r"integer|dtype|float|int64"),
    # 4.1
    Case("4.1", "complex multiplication", rope_complex, R),
    Case("4.1", "numpy float64", rope_numpy, R),
    Case("4.1", "returns float64", rope_float64, R),
    Case("4.1", "rotation matrices", rope_matrix, R),
    Case("4.1", "torch float32", rope_right, R),
    Case(
        "4.1",
        "positions ignored",
        rope_ignores_positions,
        W,
        r"position.{0,40}ignor|index in the sequence",
    ),
    Case("4.1", "halves layout", rope_halves, W, r"layout|half|halves"),
    Case("4.1", "cos/sin swapped", rope_swapped, W, r"swap|cos and sin|sin and cos"),
    Case(
        "4.1", "reversed rotation", rope_reversed, W, r"revers|direction|sign|clockwise"
    ),
    Case("4.1", "position offset", rope_offset, W, r"offset|shift"),
    Case("4.1", "exponent over 32", rope_exp_over_32, W, r"exponent|denominator|32"),
    Case("4.1", "integer division", rope_intdiv, W, r"integer division|//"),
    Case("4.1", "base 500000", rope_base, W, r"base"),
    Case("4.1", "reversed ladder", rope_reversed_ladder, W, r"revers|ladder|order"),
    Case(
        "4.1",
        "first 32 features",
        rope_half_rotated,
        W,
        r"rotat.{0,40}feature|partial|32|number of",
    ),
    Case("4.1", "bf16 tables", rope_bf16_tables, W, r"bfloat16"),
    Case("4.1", "float16 angles", rope_fp16_angles, W, r"float16|half|precision|round"),
    Case(
        "4.1",
        "mutates x",
        rope_mutates,
        W,
        r"chang|modif|mutat|in place|in-place|overwr",
    ),
    Case("4.1", "drops the batch", rope_first_batch, W, r"shape|batch"),
    Case("4.1", "NaN at position 0", rope_nan_at_zero, W, r"nan|finite|not a number"),
    # 4.2
    Case("4.2", "index list", half_right, R),
    Case("4.2", "reshape/transpose view", half_view, R),
    Case("4.2", "numpy", half_numpy, R),
    Case("4.2", "permutation matrix", half_perm_matrix, R),
    Case(
        "4.2",
        "inverse permutation",
        half_inverse,
        W,
        r"invers|other direction|half to interleaved|backward",
    ),
    Case(
        "4.2",
        "whole matrix as one head",
        half_whole_matrix,
        W,
        r"head by head|per head|n_heads|each head|across heads|one head",
    ),
    Case("4.2", "columns, not rows", half_columns, W, r"column|rows"),
    Case("4.2", "swaps within pairs", half_swap_pairs, W, r"swap|within|pair"),
    Case(
        "4.2",
        "head_dim fixed at 64",
        half_fixed_head_dim,
        W,
        r"head_dim|head size|each head|per head",
    ),
    Case(
        "4.2",
        "identity",
        half_identity,
        W,
        r"unchanged|same order|identity|not reorder|as it was|unordered|no reorder",
    ),
    Case(
        "4.2",
        "mutates the weight",
        half_mutates,
        W,
        r"chang|modif|mutat|in place|in-place|overwr",
    ),
    # 5.1
    Case("5.1", "repeat_interleave", axis_torch, R),
    Case("5.1", "numpy repeat", axis_numpy, R),
    Case("5.1", "python list", axis_list, R),
    Case("5.1", "searchsorted", axis_searchsorted, R),
    Case(
        "5.1",
        "interleaved (Qwen3)",
        axis_interleaved,
        W,
        r"interleav|contiguous|round.robin|cycl",
    ),
    Case(
        "5.1",
        "boundary off by one",
        axis_off_by_one,
        W,
        r"off by one|boundar|one pair|first pair of|last pair of",
    ),
    Case("5.1", "reversed", axis_reversed, W, r"revers|order|time first"),
    Case("5.1", "float", axis_float, W, r"int64|integer|dtype|float"),
    Case(
        "5.1",
        "hard-coded [16, 24, 24]",
        axis_hardcoded,
        W,
        r"sections|argument|\[16, 24, 24\]|ignor",
    ),
    Case(
        "5.1", "axes from 1", axis_one_based, W, r"axis 0|from 0|zero|one.based|start"
    ),
    Case(
        "5.1",
        "one entry per section",
        axis_per_section,
        W,
        r"shape|length|sum\(sections\)|one entry per pair",
    ),
    Case(
        "5.1",
        "assumes three sections",
        axis_three_axes,
        W,
        r"three|number of sections|len\(sections\)|axes",
    ),
    # 5.2
    Case("5.2", "torch per-axis", axial_right, R),
    Case("5.2", "numpy", axial_numpy, R),
    Case("5.2", "python loop", axial_loop, R),
    Case("5.2", "RoPE of 2 n_a features", axial_rope_ladder, R),
    Case(
        "5.2",
        "one global ladder",
        axial_global,
        W,
        r"each axis|per axis|own|global|whole|all pairs",
    ),
    Case("5.2", "base^(-2k/n_a)", axial_two_k, W, r"exponent|2k|twice|squared|-k/n"),
    Case("5.2", "contiguous order", axial_sorted, W, r"order|map lists|interleav|sort"),
    Case(
        "5.2",
        "k from 1",
        axial_from_one,
        W,
        r"from 0|k = 0|start|offset|off by one|k from 1",
    ),
    Case("5.2", "base fixed", axial_fixed_base, W, r"base"),
    Case(
        "5.2",
        "over the total pairs",
        axial_total_count,
        W,
        r"n_a|pairs of (the|its) axis|own|total|whole|all pairs",
    ),
    Case(
        "5.2",
        "assumes equal axes",
        axial_equal_split,
        W,
        r"equal|unequal|pairs of (the|its) axis|own pairs|n_a",
    ),
    Case(
        "5.2",
        "mutates the map",
        axial_mutates,
        W,
        r"chang|modif|mutat|in place|in-place|overwr",
    ),
    # 6.1
    Case("6.1", "closed form", ntk_right, R),
    Case("6.1", "exp/log", ntk_exp, R),
    Case("6.1", "0-d tensor", ntk_tensor, R),
    Case("6.1", "numpy float64", ntk_numpy, R),
    Case("6.1", "solved from the last pair", ntk_solve, R),
    Case(
        "6.1",
        "base * factor",
        ntk_linear,
        W,
        r"exponent|d/\(d ?- ?2\)|dim / \(dim - 2\)|linear|slowest",
    ),
    Case("6.1", "integer exponent", ntk_int_exponent, W, r"integer division|//"),
    Case(
        "6.1",
        "exponent (d-2)/d",
        ntk_inverted_exponent,
        W,
        r"invert|upside|reciprocal|(d ?- ?2) ?/ ?d|exponent",
    ),
    Case(
        "6.1", "d/(d-1)", ntk_dim_minus_one, W, r"d ?- ?1|dim - 1|exponent|i = d/2 - 1"
    ),
    Case(
        "6.1",
        "dim fixed at 128",
        ntk_hardcoded_dim,
        W,
        r"\bdim\b|head size|argument|ignor",
    ),
    Case(
        "6.1",
        "divides",
        ntk_divide,
        W,
        r"divid|smaller than base|must (grow|be larger)|faster|raise|increase",
    ),
    Case(
        "6.1",
        "forgets base",
        ntk_no_base,
        W,
        r"forg|without the base|missing|times the base|multipl",
    ),
    Case(
        "6.1",
        "NaN at factor 1",
        ntk_nan,
        W,
        r"nan|finite|not a number|factor 1|factor = 1",
    ),
    # 6.2
    Case("6.2", "float64", yarn_right, R),
    Case("6.2", "float32, as transformers", yarn_float32_like_transformers, R),
    Case("6.2", "numpy", yarn_numpy, R),
    Case("6.2", "inverted ramp", yarn_inverted, W, r"invert"),
    Case("6.2", "clamp dim//2-1", yarn_clamp, W, r"clamp|dim // 2 - 1"),
    Case("6.2", "no rounding", yarn_no_round, W, r"round"),
    Case("6.2", "betas swapped", yarn_betas_swapped, W, r"beta|swap"),
    Case(
        "6.2",
        "multiplies by factor",
        yarn_multiply,
        W,
        r"multipl|divid|faster|instead of dividing",
    ),
    Case(
        "6.2",
        "L fixed at 4096",
        yarn_fixed_L,
        W,
        r"original_max_position_embeddings|original context|argument|\bL\b",
    ),
    Case(
        "6.2",
        "plain PI",
        yarn_plain_pi,
        W,
        r"every pair|all pairs|position interpolation|linear|fast pairs|no ramp",
    ),
    Case(
        "6.2",
        "unchanged",
        yarn_no_change,
        W,
        r"unchanged|scaling ignored|plain RoPE|no scaling",
    ),
    Case("6.2", "NaN at the last pair", yarn_nan, W, r"nan|finite|not a number"),
]
for q, answer in ANSWERS.items():
    BEFORE += [
        Case(q, "bool", _pred(answer), R),
        Case(q, "numpy bool", _pred(np.bool_(answer)), R),
        Case(q, "0-d torch bool", _pred(torch.tensor(answer)), R),
        Case(q, "the other bool", _pred(not answer), W, PREDICTION_NAMES),
        Case(
            q,
            "the string of the answer",
            _pred(str(answer)),
            W,
            r"True or False|bool|string|str",
        ),
        Case(q, "None (forgot return)", _pred(None), W, r"None|return|True or False"),
    ]


# ---------------------------------------------------------------------------------------
# FRESH: a second sample, written after the graders were fixed, never used to fix them.


def fresh_sin_default_dtype(n_positions, dim, base=10000.0):
    # torch's default dtype throughout: float32 from arange(int) / int
    p = torch.arange(n_positions)[:, None]
    w = base ** (-torch.arange(0, dim, 2) / dim)
    t = torch.zeros(n_positions, dim)
    t[:, 0::2] = torch.sin(p * w)
    t[:, 1::2] = torch.cos(p * w)
    return t


def fresh_axial_default_dtype(axis_of_freq, base=10000.0):
    out = torch.zeros(len(axis_of_freq))
    for a in torch.unique(axis_of_freq):
        idx = torch.nonzero(axis_of_freq == a).flatten()
        out[idx] = base ** (-torch.arange(len(idx)) / len(idx))
    return out


def fresh_rope_every_two(x, positions):
    # GPT-J's rotate_every_two with repeated cos and sin tables
    inv = 1.0 / (10000 ** (torch.arange(0, 64, 2).float() / 64))
    ang = positions.float()[:, None] * inv
    cos = ang.cos().repeat_interleave(2, dim=-1)
    sin = ang.sin().repeat_interleave(2, dim=-1)
    rot = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * cos + rot * sin


def fresh_ntk_array(base, factor, dim):
    return np.array(base * factor ** (dim / (dim - 2)))


def fresh_half_slices(weight, n_heads):
    hd = weight.shape[0] // n_heads
    parts = []
    for h in range(n_heads):
        head = weight[h * hd : (h + 1) * hd]
        parts += [head[0::2], head[1::2]]
    return torch.cat(parts)


def fresh_axis_int32(sections):
    return torch.cat(
        [torch.full((n,), a, dtype=torch.int32) for a, n in enumerate(sections)]
    )


def fresh_sin_normalised(n_positions, dim, base=10000.0):  # positions p / n
    p = torch.arange(n_positions, dtype=torch.float64)[:, None] / n_positions
    w = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    return torch.stack([torch.sin(p * w), torch.cos(p * w)], -1).flatten(1)


def fresh_shift_halves(k, dim, base=10000.0):  # blocks on pairs (i, i + d/2)
    m = np.zeros((dim, dim))
    h = dim // 2
    for i in range(h):
        w = base ** (-2 * i / dim)
        c, s = math.cos(k * w), math.sin(k * w)
        m[i, i], m[i, i + h], m[i + h, i], m[i + h, i + h] = c, s, -s, c
    return m


def fresh_rope_cache_4096(x, positions):  # a cos/sin cache of 4096 rows, clamped
    return _rope(x, positions.clamp_max(4095))


def fresh_yarn_no_two(dim, base, factor, original_max_position_embeddings):
    # correction pair without the 2 in 2 ln(base)
    L = original_max_position_embeddings

    def corr(turns):
        return dim * math.log(L / (turns * 2 * math.pi)) / math.log(base)

    low = max(math.floor(corr(32)), 0)
    high = min(math.ceil(corr(1)), dim - 1)
    if low == high:
        high += 0.001
    i = torch.arange(dim // 2, dtype=torch.float64)
    theta = base ** (-2 * i / dim)
    ramp = ((i - low) / (high - low)).clamp(0, 1)
    return theta * (1 - ramp) + theta / factor * ramp


def fresh_t5_log_max(
    relative_position, bidirectional=True, num_buckets=32, max_distance=128
):  # ln(max_distance) instead of ln(max_distance / exact)
    r = relative_position
    n = num_buckets // 2 if bidirectional else num_buckets
    out = (r > 0).long() * n if bidirectional else torch.zeros_like(r)
    dist = r.abs() if bidirectional else (-r).clamp_min(0)
    exact = n // 2
    x = torch.log(dist.float() / exact) / math.log(max_distance) * (n - exact)
    large = (exact + x.long()).clamp_max(n - 1)
    return out + torch.where(dist < exact, dist, large)


FRESH = [
    Case("2.1", "torch default dtype (float32)", fresh_sin_default_dtype, R),
    Case("5.2", "torch default dtype (float32)", fresh_axial_default_dtype, R),
    Case("4.1", "rotate_every_two", fresh_rope_every_two, R),
    Case("6.1", "0-d numpy array", fresh_ntk_array, R),
    Case("4.2", "per-head even/odd slices", fresh_half_slices, R),
    Case("5.1", "int32 map", fresh_axis_int32, R),
    Case("2.1", "positions normalised by n", fresh_sin_normalised, W,
         r"position|row \d+ holds|p / n|scal"),
    Case("2.2", "blocks on (i, i + d/2)", fresh_shift_halves, W,
         r"pair|block|half|layout"),
    Case("4.1", "cache of 4096 rows, clamped", fresh_rope_cache_4096, W,
         r"clamp|4096|cache"),
    Case("6.2", "correction pair without the 2", fresh_yarn_no_two, W,
         r"correction|ramp|range|beta|turn"),
    Case("3.2", "ln(max_distance) instead of ln(max_distance/exact)", fresh_t5_log_max, W,
         r"max_distance ?/|ln\(max_distance|logarithm|log"),
]
