"""Phase 1 of :func:`diagnose_rope`: probing ``fn`` (calling it safely, shapes,
linearity) and reading each matrix's structure: which features rotate
together (the layout), the angle of every pair, the float32 tolerance.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor

from ... import _validate

_EPS32 = torch.finfo(torch.float32).eps


_FORMATS = {8: "bfloat16", 11: "float16", 24: "float32"}


def round_significand(positions, bits: int) -> Tensor:
    """Round integers to the nearest float with a ``bits``-bit significand (ties to even).

    ``bits=8`` is bfloat16 (exact up to 256), ``bits=11`` float16 (exact up
    to 2048), ``bits=24`` float32. Computed in float64, without overflow, so
    the result does not depend on an exponent range.

    Args:
        positions: integer positions, any shape.
        bits: significand width, ``>= 1``.

    Returns:
        float64 tensor shaped like ``positions``.
    """
    bits = _validate.positive_int("bits", bits)
    p = torch.as_tensor(positions, dtype=torch.float64)
    exponent = torch.floor(torch.log2(p.abs().clamp_min(1.0)))
    step = torch.pow(2.0, (exponent - (bits - 1)).clamp_min(0.0))
    return torch.round(p / step) * step          # torch.round rounds half to even


def _wrap(angle: Tensor) -> Tensor:
    """Angles into ``(-π, π]``."""
    return torch.remainder(angle + math.pi, 2 * math.pi) - math.pi


def _pairs_of(layout: str, start: int, n_pairs: int) -> list:
    """Feature pairs ``(a, b)`` of a block of ``2 * n_pairs`` features from ``start``."""
    if layout == "half":
        return [(start + i, start + i + n_pairs) for i in range(n_pairs)]
    return [(start + 2 * i, start + 2 * i + 1) for i in range(n_pairs)]


def _pair_text(pairs: list, n: int = 2) -> str:
    return ", ".join(f"({a}, {b})" for a, b in pairs[:n])


def _probe_positions(max_position: int) -> Tensor:
    """Dense 0..63, powers of two, and positions that bfloat16/float16 cannot hold."""
    dense = list(range(64))
    powers = [2 ** k for k in range(6, 13) if 2 ** k <= max_position]
    odd = [100, 255, 257, 259, 301, 511, 513, 777, 1001, 1025, 2047, 2049, 2051,
           3001, 4095, 4097, 4099, 5003, 6007, 7001, 8191, max_position]
    return torch.tensor(sorted(set(dense + powers + [p for p in odd if p <= max_position])))


def _call(fn: Callable, x: Tensor, positions: Tensor, timeout: float | None = None) -> Tensor:
    """Call ``fn`` and return its output as float64 on the CPU, or raise a
    ValueError saying why not. Whatever ``fn`` raises (``SystemExit`` too) and
    whatever moving its result to the CPU raises (a ``meta`` tensor) is
    reported; with ``timeout`` (seconds) a call that does not return in time
    is reported (the call is left running in a daemon thread)."""
    where = (f"when called with x of shape {tuple(x.shape)} (float32) and positions "
             f"of shape {tuple(positions.shape)} (int64, {int(positions.min())} to "
             f"{int(positions.max())})")

    def run():
        out = fn(x.clone(), positions.clone())
        if not isinstance(out, Tensor):
            try:
                out = torch.as_tensor(out)
            except Exception:
                raise _UserResult(f"fn must return a tensor, got {type(out).__name__} "
                                  f"({where})") from None
        if tuple(out.shape) != tuple(x.shape):
            raise _UserResult(f"fn returned shape {tuple(out.shape)}; it must return x's "
                              f"shape {tuple(x.shape)} ({where})")
        if out.dtype == torch.bool or out.is_complex() or not out.is_floating_point():
            raise _UserResult(f"fn must return a real floating-point tensor, got "
                              f"{out.dtype} ({where})")
        if out.device.type == "meta":
            raise _UserResult(f"fn returned a tensor on the meta device (no values); "
                              f"return real values ({where})")
        try:
            return out.detach().to("cpu", torch.float64)
        except Exception as error:
            raise _UserResult(f"fn's result (on {out.device}) could not be moved to the "
                              f"CPU: {type(error).__name__}: {error} ({where})") from None

    box: dict = {}

    def guarded():
        try:
            box["out"] = run()
        except _UserResult as error:
            box["error"] = _FnError(str(error))
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # the user's code: report it, whatever it raised
            kind = type(error).__name__
            extra = (" (fn must return, not exit)" if isinstance(error, SystemExit)
                     else "")
            box["error"] = _FnError(f"fn raised {kind}: {error}{extra} ({where})")
            box["error"].__cause__ = error

    if timeout is None:
        guarded()
    else:
        import threading
        thread = threading.Thread(target=guarded, daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise _FnError(f"fn did not return within timeout = {timeout:g} s ({where})")
    if "error" in box:
        raise box["error"]
    out = box["out"]
    if not bool(torch.isfinite(out).all()):
        bad = torch.nonzero(~torch.isfinite(out))[0].tolist()
        raise _FnError(f"fn returned NaN or inf (first at index {tuple(bad)}) ({where})")
    return out


class _Unfitted(Exception):
    """The fit cannot go on: the message says what could not be fitted."""


class _FnError(ValueError):
    """``fn`` failed or returned something unusable (reported to the caller)."""


class _UserResult(Exception):
    """A result of ``fn`` that is not a real tensor shaped like ``x``."""


def _tolerance(positions: Tensor) -> Tensor:
    """Allowed angle error at each position: float32 rounding of ``m·θ`` and of ``θ``
    (a few ulp of angles up to ``m`` radians), plus the noise of cos and sin."""
    return 2e-4 + 64 * _EPS32 * positions.to(torch.float64)


def _simulate(dim: int, pairs: list, angle: Tensor) -> Tensor:
    """The matrices ``M(p)`` ``(n_pos, dim, dim)`` that rotate each pair by its
    angle ``angle`` ``(n_pos, n_pairs)``."""
    out = torch.eye(dim, dtype=torch.float64).repeat(angle.shape[0], 1, 1)
    if pairs:
        a = torch.tensor([i for i, _ in pairs])
        b = torch.tensor([j for _, j in pairs])
        out[:, a, a] = angle.cos()
        out[:, b, b] = angle.cos()
        out[:, b, a] = angle.sin()
        out[:, a, b] = -angle.sin()
    return out


def _model_angles(positions: Tensor, theta: Tensor, sign: float, bits) -> Tensor:
    p = positions.to(torch.float64) if bits is None else round_significand(positions, bits)
    return sign * p[:, None] * theta


def _block_angles(m: Tensor, pairs: list) -> tuple[Tensor, Tensor]:
    """Angle of each pair's 2x2 block at each position, and how far the block is
    from a rotation (largest entry error)."""
    a = torch.tensor([i for i, _ in pairs])
    b = torch.tensor([j for _, j in pairs])
    c1, c2 = m[:, a, a], m[:, b, b]
    s1, s2 = m[:, b, a], -m[:, a, b]
    cos, sin = (c1 + c2) / 2, (s1 + s2) / 2
    angle = torch.atan2(sin, cos)
    misfit = torch.stack([(c1 - angle.cos()).abs(), (c2 - angle.cos()).abs(),
                          (s1 - angle.sin()).abs(), (s2 - angle.sin()).abs()]).amax(0)
    return angle, misfit


def _structure(m: Tensor, threshold: float):
    """Pairs ``(a, b)``, ``a < b``, of features that mix, or a sentence saying why
    the mixing is not pairwise."""
    dim = m.shape[-1]
    off = m - torch.diag_embed(torch.diagonal(m, dim1=-2, dim2=-1))
    coupling = off.abs().amax(0)
    coupling = torch.maximum(coupling, coupling.T)
    top = coupling.topk(min(2, dim), dim=1)
    pairs = set()
    for j in range(dim):
        if top.values[j, 0] <= threshold:
            continue
        if dim > 2 and top.values[j, 1] > threshold:
            mixed = [int(k) for k in torch.nonzero(coupling[j] > threshold).flatten()]
            return None, (f"feature {j} mixes with {len(mixed)} features "
                          f"({', '.join(map(str, mixed[:6]))}); RoPE mixes each "
                          f"feature with one partner only")
        k = int(top.indices[j, 0])
        partner = int(top.indices[k, 0])
        if partner != j or top.values[k, 0] <= threshold:
            return None, (f"feature {j} mixes into {k}, but {k} mixes into {partner}: "
                          f"the features do not form pairs")
        pairs.add((min(j, k), max(j, k)))
    return sorted(pairs), None


def _layout_of(pairs: list, intended: str):
    """``(layout, start, n_pairs_in_block)`` of the observed pairs, or ``None``."""
    offsets = {b - a for a, b in pairs}
    firsts = [a for a, _ in pairs]
    start = min(firsts)
    if offsets == {1} and all((a - start) % 2 == 0 for a in firsts):
        n = len(pairs)
        if [a for a in firsts] == [start + 2 * i for i in range(n)]:
            if n == 1:          # one pair (s, s+1): both layouts; take the intended
                return intended, start, 1
            return "interleaved", start, n
    if len(offsets) == 1:
        o = offsets.pop()
        if firsts == list(range(start, start + len(pairs))) and len(pairs) <= o:
            return "half", start, o
    return None


def _positions_used(fn, dim, max_position, gen, timeout=None, noise=0.0) -> str | None:
    """A finding when ``fn`` does not rotate by the positions it is given."""
    x = torch.randn(2, 1, dim, generator=gen, dtype=torch.float32).repeat(1, 64, 1)
    first = torch.arange(64)
    shift = min(1000, max_position - 63)
    y0 = _call(fn, x, first, timeout)
    y1 = _call(fn, x, first + shift, timeout)
    moved = float((y0 - y0[:, :1]).abs().max())       # the same x rotated differently
    scale = max(1.0, float(y0.abs().max()))
    if moved > 1e-3 * scale and float((y0 - y1).abs().max()) <= 1e-5 * scale:
        return (f"Positions ignored: fn gives the same output for positions "
                f"{shift}..{shift + 63} as for 0..63, so it rotates each token by its "
                f"index in the sequence (torch.arange(seq_len)) and not by the "
                f"positions it is given. With a KV cache the new token at position "
                f"{shift} arrives alone and is rotated as position 0: the cache "
                f"offset is lost (and so are padding-aware and packed position_ids). "
                f"Fix: index the cos/sin tables with positions (cos[position_ids]), "
                f"or compute the angles as positions.float()[:, None] * inv_freq.")
    x = torch.randn(2, 64, dim, generator=gen, dtype=torch.float32)
    y0 = _call(fn, x, first, timeout)
    perm = torch.randperm(64, generator=gen)
    y2 = _call(fn, x[:, perm], first[perm], timeout)
    error = float((y2 - y0[:, perm]).abs().max())
    if moved > 1e-3 * scale and error > 1e-4 * scale:
        return (f"Positions ignored: with the same tokens and positions in another "
                f"order fn's outputs differ by up to {error:.3g}, so a token's "
                f"rotation depends on where it sits in the sequence, not only on the "
                f"position it is given (positions mixed with torch.arange(seq_len)?). "
                f"With a KV cache, padding or packed sequences the position_ids are "
                f"not 0..seq_len-1. Fix: compute the angles from positions alone, "
                f"positions.float()[:, None] * inv_freq.")
    return None


def _column_scale(m: Tensor, rotated: list, rtol: float = 1e-4):
    """The common length of the rotated columns of every ``M(p)``, or ``None``
    when they differ (then the blocks are not scaled rotations)."""
    norms = torch.linalg.vector_norm(m[:, :, rotated], dim=1)
    g = float(norms.mean())
    if float((norms - g).abs().max()) > rtol * g:
        return None
    return g
