"""Phase 2 of :func:`posenc_lib.tools.diagnose.diagnose_rope`: the frequency fit.

Given the matrices ``M(p)`` a user's ``fn`` applies at the probed positions,
this module fits a general model of what ``fn`` does and compares it with the
intended RoPE, instead of matching a list of known bugs:

* **a position map** ``q(p)``: the position each probed ``p`` is really
  rotated by, solved from the angles of every pair (slowest pair first, then
  refined pair by pair), then classified: identity, offset, scale (position
  interpolation), ``p mod N`` (a cos/sin cache of ``N`` rows that wraps),
  ``min(p, N - 1)`` (a clamped cache) or another map (a tiled kernel, read on
  a long run of consecutive positions);
* **per-pair frequencies** fitted freely, then matched to the intended
  schedule: one common ratio (position interpolation), bands kept / divided /
  ramped with the fitted bounds against the expected ones, the scaling
  parameters that reproduce them, or frequencies truncated to integers;
* **each 2x2 block** explained entry by entry from a dictionary of signals
  (``1``, ``cos θ_j p``, ``sin θ_j p`` for every intended pair ``j``):
  rotation, reflection, symmetric (missing minus), outputs in swapped order,
  sin of another pair, cos and sin at different angles, a pass-through
  feature scaled or multiplied by cos;
* **output rounding**: bfloat16 and float16 outputs are rounding, with a
  tolerance of that format's unit roundoff.

Every function returns ``None`` where its model does not explain ``fn``; the
caller then falls back to the older fit, and turns any internal failure into
a finding that says what could not be fitted.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .structure import _tolerance, round_significand

_EPS32 = torch.finfo(torch.float32).eps
#: unit roundoff of the output formats the rounding model knows
ROUNDING = {"bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


def _wrap(angle: Tensor) -> Tensor:
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


def output_rounding(*tensors: Tensor):
    """``"bfloat16"`` or ``"float16"`` when every value of every tensor is a
    number of that format (and not all of them small integers), else ``None``."""
    for name, dtype in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        ok = True
        for t in tensors:
            low = t.to(dtype).to(torch.float64)
            if not bool(torch.equal(low, t)):
                ok = False
                break
        if ok:
            # integers and halves are numbers of every format: not evidence
            if all(bool(torch.equal(t, torch.round(t * 4) / 4)) for t in tensors):
                return None
            return name
    return None


def probe_positions(limit: int) -> Tensor:
    """Dense 0..63; powers of two and their neighbours (where caches of a
    power-of-two size wrap or clamp); positions bfloat16 and float16 round;
    a geometric spread up to ``limit``; and ``limit`` itself."""
    dense = list(range(64))
    edges = []
    k = 6
    while 2 ** k <= limit:
        edges += [2 ** k - 1, 2 ** k, 2 ** k + 1]
        k += 1
    odd = [100, 255, 257, 259, 301, 511, 513, 777, 1001, 1025, 2047, 2049, 2051, 3001,
           4095, 4097, 4099, 5003, 6007, 7001, 8191]
    spread = [int(round(64 * (limit / 64) ** (j / 24))) for j in range(25)] if limit > 64 \
        else []
    near_end = [limit - 1, limit - 2, (limit * 3) // 4, limit // 2 + 3]
    every = dense + edges + odd + spread + near_end + [limit]
    return torch.tensor(sorted({p for p in every if 0 <= p <= limit}))


def pair_tolerance(positions: Tensor, theta: Tensor, noise: float) -> Tensor:
    """Allowed angle error ``(n_pos, n_pairs)``: float32 rounding of ``θ`` and
    of the product ``p·θ`` (16 ulp of the angle), cos/sin noise, and the
    output rounding ``noise`` (an angle read from entries rounded to relative
    ``noise`` is off by up to about ``2·noise``)."""
    p = positions.to(torch.float64)[:, None]
    return 2e-4 + 4 * noise + 16 * _EPS32 * p * theta.abs()[None, :].clamp_min(1e-3) \
        + 4 * _EPS32 * p.clamp_min(1.0) * (theta.abs()[None, :] >= 0.5)


def solve_positions(angles: Tensor, theta: Tensor, tol: Tensor, limit: int,
                    prior: Tensor | None = None):
    """Per probed position, the ``q`` with ``angles ≡ q·θ`` for every pair.

    The slowest pair gives ``q`` up to whole turns (every candidate in
    ``[-one turn, 2·limit]`` is tried); each faster pair refines it. Where
    several candidates fit, the one nearest ``prior`` (the positions given)
    is taken. Returns ``(q,
    ok)``: ``q`` ``(n_pos,)`` float64 and ``ok`` (bool per position: every
    pair reproduced within ``tol``), or ``None`` when too many candidates
    would be needed.
    """
    theta = theta.to(torch.float64)
    keep = theta.abs() > 1e-12
    if not bool(keep.any()):
        return None
    angles, theta, tol = angles[:, keep], theta[keep], tol[:, keep]
    order = torch.argsort(theta.abs())
    slow = int(order[0])
    th = float(theta[slow])
    turns = int(math.ceil(2 * limit * abs(th) / (2 * math.pi))) + 1
    if turns > 4096:
        return None
    base = torch.remainder(angles[:, slow] * math.copysign(1.0, th), 2 * math.pi) / abs(th)
    k = torch.arange(-1, turns, dtype=torch.float64)        # q may be a little negative
    q = base[:, None] + k[None, :] * (2 * math.pi / abs(th))       # (n_pos, turns)
    for j in order[1:].tolist():
        t = float(theta[j])
        q = q + _wrap(angles[:, j, None] - t * q) / t
    resid = (_wrap(angles[:, :, None] - theta[None, :, None] * q[:, None, :]).abs()
             - tol[:, :, None]).amax(1)                              # (n_pos, turns)
    best = resid.argmin(1)
    if prior is not None:
        # several candidates fit (the angles repeat within the range): the one
        # nearest the position given, so an ambiguous map is never a finding
        distance = (q - prior.to(torch.float64)[:, None]).abs()
        distance = torch.where(resid <= 0, distance, torch.full_like(distance, math.inf))
        near = distance.argmin(1)
        best = torch.where(torch.isfinite(distance.amin(1)), near, best)
    rows = torch.arange(q.shape[0])
    return q[rows, best], resid[rows, best] <= 0


def classify_map(positions: Tensor, q: Tensor, qtol: Tensor):
    """``(kind, value, text)`` for the position map ``p -> q``: ``"identity"``,
    ``"offset"`` (c), ``"scale"`` (s), ``"reversed"`` (a negative s: every pair
    turns backwards), ``"wrap"`` (N), ``"clamp"`` (N),
    ``"other"`` (a few examples)."""
    p = positions.to(torch.float64)
    d = q - p
    if bool((d.abs() <= qtol).all()):
        return "identity", 0, ""
    c = float(torch.round(d[1:].median())) if len(d) > 1 else 0.0
    if c != 0 and bool(((d - c).abs() <= qtol).all()):
        return "offset", int(c), ""
    big = p > 0
    if bool((q[big] < 0).all()):
        return "reversed", -1.0, ""     # every pair turns backwards (maybe rounded too)
    s = float((q[big] * p[big]).sum() / (p[big] * p[big]).sum())
    if abs(s - 1) > 1e-6 and bool(((q - s * p).abs() <= qtol + 1e-6 * p).all()):
        return ("reversed" if s < 0 else "scale"), s, ""
    off = (d.abs() > qtol)
    first = int(torch.nonzero(off)[0])
    ints = torch.round(q)
    if bool(((q - ints).abs() <= qtol).all()):
        shifted = (p - ints)[off].long()
        if bool((shifted > 0).all()):
            n = 0
            for v in shifted.tolist():
                n = math.gcd(n, int(v))
            if n > 0 and bool(((ints - torch.remainder(p, n)).abs() < 0.5).all()):
                return "wrap", n, ""
            top = ints[off]
            if bool((top == top[0]).all()) and not bool(off[:first].any()):
                limit = int(top[0]) + 1
                if bool(((ints - p.clamp(max=limit - 1)).abs() < 0.5).all()):
                    return "clamp", limit, ""
    examples = [(int(p[i]), float(q[i])) for i in torch.nonzero(off).flatten()[:4].tolist()]
    text = ", ".join(f"position {a} acts as {b:.6g}" for a, b in examples)
    return "other", first, text


def map_sentence(kind: str, value, text: str, where: str, extent: int) -> tuple[str, str]:
    """``(code, sentence)`` naming a position map that is not the identity."""
    if kind == "offset":
        return ("position-offset",
                f"Position offset: {where} fn rotates position p as p "
                f"{'+' if value > 0 else '-'} {abs(value)}. Fix: look up cos and sin at "
                f"the positions themselves; position 0 must be the identity.")
    if kind == "scale":
        factor = 1 / value
        return ("scaling",
                f"Scaling: {where} fn is a RoPE whose positions are divided by "
                f"{factor:.6g} (every frequency divided by {factor:.6g}): position "
                f"interpolation (rope_type 'linear', factor {factor:.6g}), not the "
                f"schedule you intend. Fix: compute inv_freq with "
                f"scaling.rope_from_config(config) for the config's rope_scaling "
                f"(and apply a factor once).")
    if kind == "wrap":
        return ("position-map",
                f"Position map: {where} fn rotates position p as p mod {value}: a cos/sin "
                f"cache of {value} rows that wraps (position {value} acts as 0). The "
                f"model's context is {extent} positions. Fix: build the cache for the "
                f"whole context ({extent} rows), or compute cos and sin from the "
                f"positions (positions.float()[:, None] * inv_freq).")
    if kind == "clamp":
        return ("position-map",
                f"Position map: {where} fn rotates every position p >= {value - 1} as "
                f"{value - 1}: a cos/sin cache of {value} rows read with the positions "
                f"clamped (min(p, {value - 1})). The model's context is {extent} "
                f"positions. Fix: build the cache for the whole context ({extent} "
                f"rows).")
    return ("position-map",
            f"Position map: {where} fn does not rotate each position by itself: "
            f"{text}. Fix: compute each token's angles from its own position.")


# -- the 2x2 blocks, entry by entry ----------------------------------------------------

def explain_entries(m: Tensor, positions: Tensor, theta: Tensor, pairs: list,
                    gain: float, tol: float):
    """Explain every entry of ``M(p)`` by a signal ``c·1``, ``c·cos θ_j p`` or
    ``c·sin θ_j p`` (``j`` any intended pair), and compare with the intended
    blocks ``pairs`` (pair ``i`` = ``(a, b)``, angle ``θ_i p``, gain ``gain``).

    Returns ``(codes, lines, details)`` or ``None`` when some entry fits no
    signal (then the blocks are not explained).
    """
    dim = m.shape[-1]
    p = positions.to(torch.float64)
    ang = p[:, None] * theta[None, :]
    n = theta.shape[0]
    signals = torch.cat([torch.ones(len(p), 1, dtype=torch.float64), ang.cos(), ang.sin()],
                        dim=1)                                         # (n_pos, 1+2n)
    names = [("1", -1)] + [("cos", j) for j in range(n)] + [("sin", j) for j in range(n)]
    big = m.abs().amax(0) > tol                                        # (out, in)
    idx = torch.nonzero(big)
    if len(idx) == 0 or len(idx) > 8 * dim:
        return None
    e = m[:, idx[:, 0], idx[:, 1]]                                     # (n_pos, E)
    norm = (signals * signals).sum(0)
    coef = (signals.T @ e) / norm[:, None]                            # (K, E)
    resid = (e[:, None, :] - signals[:, :, None] * coef[None]).abs().amax(0)
    best = resid.argmin(0)
    label = {}
    for k, (o, i) in enumerate(idx.tolist()):
        b = int(best[k])
        if float(resid[b, k]) > 4 * tol:
            return None
        label[(o, i)] = (names[b][0], names[b][1], float(coef[b, k]))

    def same(got, kind, j, c):
        return (got is not None and got[0] == kind and got[1] == j
                and abs(got[2] - c) <= 1e-3 * max(1.0, abs(c)))

    diag = [label[(f, f)][2] for a, b in pairs for f in (a, b)
            if (f, f) in label and label[(f, f)][0] == "cos"]
    if diag:
        fitted_gain = float(torch.tensor(diag).abs().median())
        if all(abs(abs(c) - fitted_gain) <= 1e-3 * fitted_gain for c in diag):
            gain = fitted_gain
    kinds = {}
    partner = {}
    for a, b in pairs:
        partner[a], partner[b] = b, a
    notes = []
    for i, (a, b) in enumerate(pairs):
        g = gain
        got = {k: label.get(k) for k in ((a, a), (b, b), (b, a), (a, b))}
        want = {(a, a): ("cos", i, g), (b, b): ("cos", i, g), (b, a): ("sin", i, g),
                (a, b): ("sin", i, -g)}
        if all(same(got[k], *want[k]) for k in want):
            kind = "rotation"
        elif (same(got[(a, a)], "cos", i, g) and same(got[(b, b)], "cos", i, g)
              and same(got[(b, a)], "sin", i, g) and same(got[(a, b)], "sin", i, g)):
            kind = "symmetric"
        elif (same(got[(a, a)], "cos", i, g) and same(got[(b, b)], "cos", i, -g)
              and same(got[(b, a)], "sin", i, g) and same(got[(a, b)], "sin", i, g)):
            kind = "reflection"
        elif (same(label.get((a, b)), "cos", i, g) and same(label.get((b, a)), "cos", i, g)
              and got[(a, a)] is not None and got[(a, a)][0] == "sin"):
            kind = "swapped-order"
        else:
            cj = {got[k][1] for k in ((a, a), (b, b)) if got[k] and got[k][0] == "cos"}
            sj = {got[k][1] for k in ((b, a), (a, b)) if got[k] and got[k][0] == "sin"}
            if cj == {i} and sj and sj != {i}:
                kind = "sin-of-other"
                notes.append((i, sorted(sj)))
            elif cj and sj and cj != sj:
                kind = "cos-sin-angles"
                notes.append((i, sorted(cj), sorted(sj)))
            else:
                kind = "other"
        kinds.setdefault(kind, []).append(i)
    stray = [(o, i) for (o, i) in label if o != i and partner.get(i) != o]
    rotated = set(partner)
    passthrough = {}
    for f in range(dim):
        if f in rotated:
            continue
        got = label.get((f, f))
        if got is None:
            passthrough.setdefault("zeroed", []).append(f)
        elif got[0] == "1" and abs(got[2] - 1) <= 1e-4:
            continue
        elif got[0] == "1":
            passthrough.setdefault("scaled", []).append((f, got[2]))
        elif got[0] == "cos":
            passthrough.setdefault("cos", []).append((f, got[1]))
        else:
            passthrough.setdefault("other", []).append(f)
    codes, lines = [], []
    details = {"blocks": {k: len(v) for k, v in kinds.items()}, "gain": gain}
    wrong = {k: v for k, v in kinds.items() if k != "rotation"}
    if stray:
        o, i = stray[0]
        codes.append("pair-block")
        lines.append(f"Pair blocks: feature {i} feeds output {o}, which is not its partner "
                     f"in the layout you intend ({len(stray)} such entries): fn mixes "
                     f"features across pairs (a rotate-half over another width than the "
                     f"rotated slice, or a wrong split?). Fix: rotate_half over exactly "
                     f"the rotated features, and pair them as the layout says.")
    if wrong:
        codes.append("pair-block")
        for kind, which in wrong.items():
            first = which[0]
            a, b = pairs[first]
            head = (f"{len(which)} of {len(pairs)} pairs (pair {first} = features "
                    f"({a}, {b}), ...)")
            if kind == "symmetric":
                lines.append(f"Pair blocks: {head} are [[cos, sin], [sin, cos]], symmetric: "
                             f"the minus of the rotation is missing (rotate_half must "
                             f"return cat(-x2, x1)). Fix: out_a = a cos - b sin, out_b = "
                             f"b cos + a sin.")
            elif kind == "reflection":
                lines.append(f"Pair blocks: {head} are reflections [[cos, sin], [sin, "
                             f"-cos]] (determinant -1), not rotations. Fix: out_a = a cos "
                             f"- b sin, out_b = b cos + a sin.")
            elif kind == "swapped-order":
                lines.append(f"Pair blocks: {head} write their two outputs in swapped "
                             f"order (output {a} holds what belongs in {b}). Fix: stack "
                             f"(a cos - b sin, b cos + a sin) in that order.")
            elif kind == "sin-of-other" and not _sin_interleaved(label, pairs):
                i, sj = next(x for x in notes if x[0] == first and len(x) == 2)
                rel = ", ".join(f"{j - i:+d}" for j in sj)
                lines.append(f"Pair blocks: {head} take cos of their own angle but sin "
                             f"of another pair's (pair {first} reads sin of pair(s) "
                             f"{', '.join(map(str, sj))}, offset {rel}): the sin table is "
                             f"indexed or laid out differently from the cos table. Fix: "
                             f"build cos and sin from the same angle tensor, laid out "
                             f"the same way.")
            elif kind == "sin-of-other" and _sin_interleaved(label, pairs):
                lines.append(f"Pair blocks: {head} take cos of their own angle but sin "
                             f"laid out for the interleaved layout: feature f reads sin "
                             f"of pair f // 2 (sin built with repeat_interleave, cos with "
                             f"cat). Fix: build cos and sin the same way, "
                             f"torch.cat((freqs, freqs), -1) for the half layout.")
            elif kind == "cos-sin-angles":
                note = next(x for x in notes if x[0] == first and len(x) == 3)
                lines.append(f"Pair blocks: {head} take cos and sin at different angles "
                             f"(pair {first}: cos of pair(s) {note[1]}, sin of pair(s) "
                             f"{note[2]}): cos and sin laid out for different layouts "
                             f"(cat for one, repeat_interleave for the other?). Fix: "
                             f"build both with the same layout.")
            elif not stray:
                lines.append(f"Pair blocks: {head} are not the rotation by their angle.")
    if passthrough:
        codes.append("pass-through")
        for kind, which in passthrough.items():
            if kind == "scaled":
                f, c = which[0]
                lines.append(f"Pass-through: {len(which)} features that should pass "
                             f"unchanged are multiplied by {c:.6g} (feature {f}): a "
                             f"factor meant for cos and sin (the attention factor) "
                             f"applied to the whole head. Fix: multiply only the rotated "
                             f"features' cos and sin.")
            elif kind == "cos":
                f, j = which[0]
                lines.append(f"Pass-through: {len(which)} features that should pass "
                             f"unchanged are multiplied by cos (feature {f} by cos of pair "
                             f"{j}'s angle): the cos table covers the whole head. Fix: "
                             f"concatenate the pass-through features untouched.")
            elif kind == "zeroed":
                lines.append(f"Pass-through: {len(which)} features that should pass "
                             f"unchanged come out as 0 (feature {which[0]}). Fix: "
                             f"concatenate them untouched.")
            else:
                lines.append(f"Pass-through: {len(which)} features that should pass "
                             f"unchanged are changed (feature {which[0]}).")
    if not codes:
        return None
    return codes, lines, details


def _sin_interleaved(label, pairs) -> bool:
    """Whether every sin entry of row ``f`` reads pair ``(f - start) // 2``."""
    start = min(a for a, _ in pairs)
    for a, b in pairs:
        for row, col in ((b, a), (a, b)):
            got = label.get((row, col))
            if got is None or got[0] != "sin" or got[1] != (row - start) // 2:
                return False
    return True


# -- frequency schedules ---------------------------------------------------------------

def bands(ratio: Tensor, factor: float, rtol: float = 1e-3):
    """``(kept, divided)``: the last pair index whose frequency is kept (ratio 1,
    from pair 0) and the first from which every frequency is divided by
    ``factor``; ``-1`` / ``n`` when there are none."""
    n = ratio.shape[0]
    kept = -1
    for i in range(n):
        if abs(float(ratio[i]) - 1) <= rtol:
            kept = i
        else:
            break
    divided = n
    for i in range(n - 1, -1, -1):
        if abs(float(ratio[i]) * factor - 1) <= rtol:
            divided = i
        else:
            break
    return kept, divided


# -- the frequency fit of diagnose_rope's first model ---------



#: Bases that models ship with (rope_theta); a fitted base near one of these
#: is preferred over an odd one when two explanations fit equally well.
_COMMON_BASES = (1e4, 2.5e4, 5e4, 1e5, 2.5e5, 5e5, 1e6, 2e6, 5e6, 1e7)


def _fit_frequencies(angles: Tensor, positions: Tensor) -> Tensor:
    """Per pair, the frequency that reproduces ``angles`` ``(n_pos, n_pairs)``.

    Unwraps over the dense positions 0..63 (steps of at most 1 radian), then
    refines at each power of two: the predicted angle is off by less than π,
    so the wrapped residual corrects it.
    """
    index = {int(p): k for k, p in enumerate(positions)}
    dense = torch.tensor([index[p] for p in range(64)])
    phi = angles[dense]
    unwrapped = phi[0] + torch.cumsum(_wrap(phi.diff(dim=0)), dim=0)
    unwrapped = torch.cat([phi[:1], unwrapped])
    m = torch.arange(64, dtype=torch.float64)[:, None]
    theta = (m * unwrapped).sum(0) / (m * m).sum()
    p = 64
    while p in index:
        predicted = p * theta
        theta = (predicted + _wrap(angles[index[p]] - predicted)) / p
        p *= 2
    return theta


_LOW = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def _low_precision_angles(positions: Tensor, n_pairs: int, base: float, e: float,
                          dtype: torch.dtype, mode: str) -> Tensor:
    """Angles as code computes them with ``inv_freq = base**(-e·i)`` (and, for
    ``mode="all"``, the positions and the product) in a low-precision ``dtype``."""
    inv = torch.pow(float(base), -e * torch.arange(n_pairs, dtype=torch.float64))
    inv = inv.to(torch.float32).to(dtype)
    if mode == "all":
        return (positions.to(dtype)[:, None] * inv).to(torch.float64)
    if mode == "inv_freq_only":
        return positions.to(torch.float64)[:, None] * inv.to(torch.float64)
    return positions.to(dtype).to(torch.float64)[:, None] * inv.to(torch.float64)


def _safe_exp(value: float) -> float:
    """``exp(value)``, ``inf`` where it overflows."""
    return math.exp(value) if value < 700 else math.inf


def _snap(value: float) -> list:
    """Bases near a roughly fitted one: the nearest common base and the value
    rounded to two significant digits."""
    if not (math.isfinite(value) and 1.0 < value < 1e30):
        return []
    digits = 10 ** (math.floor(math.log10(value)) - 1)
    near = [min(_COMMON_BASES, key=lambda b: abs(math.log(b / value))),
            float(round(value / digits) * digits)]
    return [float(b) for b in near if abs(math.log(b / value)) < 0.05]


def _fit_low_precision(angles, positions, sign, n_pairs, formulas, slope, base):
    """``(rank, dtype name, mode, base, (e, text, right))`` whose low-precision
    angles reproduce ``angles``, or ``None``."""
    tol = _tolerance(positions)[:, None]
    found = []
    for e, text, right, d in formulas:
        bases = [base] + (_snap(_safe_exp(-slope / e)) if slope < 0 else [])
        for b in dict.fromkeys(bases):
            if not (math.isfinite(b) and 1.0 < b < 1e30):
                continue
            rank = _rank(b, base, right)
            if found and rank >= found[0][0]:
                continue
            for name, dtype in _LOW.items():
                for mode in ("all", "inv_freq", "inv_freq_only"):
                    model = sign * _low_precision_angles(positions, n_pairs, b, e,
                                                         dtype, mode)
                    if bool((_wrap(angles - model).abs() <= tol).all()):
                        found = [(rank, name, mode, b, (e, text, right, d))]
                        break
                if found and found[0][3] == b:
                    break
    return found[0] if found else None


def _bits_map(positions, q, qtol):
    """The significand width whose rounding of the positions gives ``q``, or ``None``."""
    for bits in [8, 11] + [b for b in range(2, 24) if b not in (8, 11)]:
        if bool(((round_significand(positions, bits) - q).abs() <= qtol).all()):
            return bits
    return None


def _fit_offset(phase: Tensor, theta: Tensor, span: int = 65536):
    """The integer ``c`` (smallest ``|c|``) with ``phase ≡ c·θ`` for every pair, or ``None``."""
    c = torch.arange(-span, span + 1, dtype=torch.float64)
    order = torch.argsort(c.abs(), stable=True)
    c = c[order]
    best = None
    chunk = 8192
    for start in range(0, len(c), chunk):
        cc = c[start:start + chunk]
        error = _wrap(phase[None, :] - cc[:, None] * theta[None, :]).abs()
        tol = 2e-4 + 64 * _EPS32 * cc.abs()
        ok = (error <= tol[:, None]).all(1)
        if bool(ok.any()):
            best = int(cc[int(torch.nonzero(ok)[0])])
            break
    if best == 0:
        return None
    return best


def _nice(value: float) -> bool:
    """Whether ``value`` is a base someone would type (a common one, or 1-2 digits)."""
    if any(abs(value / b - 1) < 1e-3 for b in _COMMON_BASES):
        return True
    digits = 10 ** (math.floor(math.log10(value)) - 1)
    return abs(value / (round(value / digits) * digits) - 1) < 1e-3


def _rank(value: float, base: float, right: bool) -> int:
    """How plausible a fitted (base, exponent) is: 0 best. The intended base,
    then a base models ship with, then a round one in 1e3..1e8; the right
    exponent before a wrong one at each level."""
    if abs(math.log(value / base)) < 1e-3:
        level = 0
    elif any(abs(value / b - 1) < 1e-3 for b in _COMMON_BASES):
        level = 1
    elif 1e3 <= value <= 1e8 and _nice(value):
        level = 2
    else:
        level = 3
    return 2 * level + (0 if right else 1)


def _position_bits(angles: Tensor, positions: Tensor, theta: Tensor, sign: float):
    """The significand width whose rounding of the positions reproduces the angles
    (``None``: exact positions)."""
    def error(bits):
        p = positions.to(torch.float64) if bits is None else round_significand(positions, bits)
        return _wrap(angles - sign * p[:, None] * theta).abs().amax(1) - _tolerance(positions)

    if float(error(None).max()) <= 0:
        return None
    for bits in [8, 11] + [b for b in range(2, 24) if b not in (8, 11)]:
        if float(error(bits).max()) <= 0:
            return bits
    return None      # unexplained: the final comparison reports it
