"""Check your own RoPE: what is wrong with it, fitted from its outputs.

:func:`diagnose_rope` treats a user's ``fn(x, positions)`` as a black box.
RoPE is linear in ``x``, so feeding the ``dim`` unit vectors at once (as a
batch) reads off the whole matrix ``M(p)`` that ``fn`` applies at each probed
position ``p``. Everything is then *fitted* from those matrices, not matched
against a list of known mutants:

1. **which features rotate together**: the off-diagonal entries of ``M(p)``
   give each feature's partner, hence the layout (``(i, i + r/2)`` for
   ``"half"``, ``(2i, 2i + 1)`` for ``"interleaved"``) and the number ``r`` of
   rotated features;
2. **the angle of every pair at every position**, from its 2x2 block; its
   sign says which way the pair turns;
3. **the frequency of every pair**, by unwrapping the angle over positions
   0..63 and refining it at the powers of two up to 4096 (which every float
   format holds exactly), then the geometric ladder ``θ_i = exp(a·i)`` through
   them, whose slope ``a = -(2/d)·ln(base)`` gives the base, or shows a wrong
   exponent (``i/d``: half the slope);
4. **the positions ``fn`` really used**, at positions that bfloat16 (above
   256) and float16 (above 2048) cannot hold: the significand width whose
   rounding reproduces the angles.

Before that, ``fn`` is called with the positions shifted and permuted (a
``fn`` that rotates by the index in the sequence ignores them), the common
length of the rotated features is read off (the attention factor of a scaled
RoPE) and a rotation already applied at position 0 is taken out and
explained (``M(p) = R(p + c)``: a position offset ``c``; a quarter turn with
the rotation reversed: cos and sin swapped). Ladders that the geometric fit
cannot read (flat, rising, reversed, or a scaled RoPE's and its known bugs)
are tested directly.

The fitted model is simulated and compared with every probed matrix; what it
does not reproduce is reported as ``"not-rope"``. ``fn`` is clean only when
it also reproduces the intended RoPE (``base``, ``layout``, ``rotary_dim``,
``rope_scaling``) at every probed position.

:func:`diagnose_inv_freq` does the same for the ``inv_freq`` a user's code
computes for a model's ``config.json``: it names the known variant or known
bug (the book's mutation catalogue) that reproduces it.

Run from a shell::

    python -m posenc_lib diagnose path/to/module.py:function --dim 128 \\
        --base 500000 --layout half
    python -m posenc_lib diagnose path/to/module.py:function \\
        --config path/to/config.json
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import torch
from torch import Tensor

from . import _diagnose_fit as _fit
from .. import _validate, rope

__all__ = ["CODES", "INV_FREQ_CODES", "Diagnosis", "diagnose_rope", "diagnose_inv_freq",
           "round_significand", "main"]

#: The findings :func:`diagnose_rope` can return, in the order it lists them.
CODES = ("positions-ignored", "layout", "cos-sin-swapped", "rotation-reversed",
         "position-offset", "position-map", "frequency-reversed", "frequency-exponent",
         "frequency-dtype", "frequency", "base", "scaling", "attention-factor", "positions-precision",
         "partial-rotary", "pair-block", "pass-through", "not-rope", "not-fitted")

_EPS32 = torch.finfo(torch.float32).eps
#: Bases that models ship with (rope_theta); a fitted base near one of these
#: is preferred over an odd one when two explanations fit equally well.
_COMMON_BASES = (1e4, 2.5e4, 5e4, 1e5, 2.5e5, 5e5, 1e6, 2e6, 5e6, 1e7)
_FORMATS = {8: "bfloat16", 11: "float16", 24: "float32"}


@dataclass(frozen=True)
class Diagnosis:
    """What :func:`diagnose_rope` or :func:`diagnose_inv_freq` found.

    Attributes:
        findings: the codes of the bugs found (see :data:`CODES` and
            :data:`INV_FREQ_CODES`); empty when the implementation is correct
            within float32 rounding.
        explanation: plain sentences: what was found, the evidence, the
            fitted values and the fix.
        fitted: the fitted values (layout, rotated features, base, exponent,
            sign, position precision, largest angle error), for programs.
    """

    findings: list
    explanation: str
    fitted: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """``True`` when nothing was found."""
        return not self.findings

    def __str__(self) -> str:
        head = "findings: " + (", ".join(self.findings) if self.findings else "none")
        body = "\n".join(textwrap.fill(line, 88) for line in self.explanation.split("\n"))
        return f"{head}\n{body}"


# -- small helpers ---------------------------------------------------------------------

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


# -- the fit ---------------------------------------------------------------------------

def _tolerance(positions: Tensor) -> Tensor:
    """Allowed angle error at each position: float32 rounding of ``m·θ`` and of ``θ``
    (a few ulp of angles up to ``m`` radians), plus the noise of cos and sin."""
    return 2e-4 + 64 * _EPS32 * positions.to(torch.float64)


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


@dataclass
class _Fit:
    findings: list
    lines: list
    fitted: dict


def diagnose_rope(fn: Callable[[Tensor, Tensor], Tensor], *, dim: int | None = None,
                  base: float | None = None, layout: str | None = None,
                  rotary_dim: int | None = None, rope_scaling: Mapping | None = None,
                  max_position_embeddings: int | None = None, seq_len: int | None = None,
                  config: Mapping | None = None, max_position: int | None = None,
                  seed: int = 0, rotary_position: str = "first",
                  timeout: float | None = None) -> Diagnosis:
    """Find what is wrong with a RoPE implementation, from its outputs alone.

    ``fn`` is called with the ``dim`` unit vectors as a batch (which reads
    off the matrix it applies at each position), with seeded random ``x``
    (RoPE is linear), with random ``x`` at positions 0..63 and at the same
    positions shifted (a ``fn`` that ignores its ``positions`` gives the same
    answer), with the positions permuted (a token's rotation must not depend
    on where it sits in the sequence), and once with up to 2,048 consecutive
    positions ending at ``max_position`` (a tiled kernel). Positions run from
    0 to ``max_position`` (the model's context by default): 0..63, every
    power of two and its neighbours, positions that bfloat16 and float16
    round (257, 2049, 8191, ...) and a geometric spread. The fit is general
    first (``posenc_lib.tools._diagnose_fit``: the position map, per-pair
    frequencies against the intended schedule, the 2x2 blocks entry by
    entry, output rounding), then the older fit below; an internal failure
    is the finding ``"not-fitted"``, never an exception.

    The reference is the RoPE you intend: plain RoPE with ``base`` over
    ``rotary_dim`` features, or, with ``rope_scaling``, the frequencies and
    attention factor that :func:`posenc_lib.scaling.rope_from_config` computes
    for that config (transformers 4.57's numbers). ``fn`` is clean only when
    it reproduces that reference at every probed position.

    Args:
        fn: ``fn(x, positions) -> rotated x``, with ``x`` ``(batch, seq, dim)``
            float32 and ``positions`` ``(seq,)`` int64.
        dim: features per head (even); read from ``config`` if given.
        base: the base the model was trained with (``rope_theta``); default
            10000, or ``config``'s.
        layout: the layout the checkpoint expects, ``"half"`` or
            ``"interleaved"`` (the two layouts of :mod:`posenc_lib.rope`);
            default ``"half"``, or the one ``config``'s model type uses.
        rotary_dim: features meant to rotate (the first ``rotary_dim``;
            transformers' ``int(head_dim * partial_rotary_factor)``); ``None``:
            all ``dim`` (or ``config``'s).
        rope_scaling: a config-style scaling block, as in ``config.json``
            (``{"rope_type": "yarn", "factor": 4.0,
            "original_max_position_embeddings": 4096}``); every ``rope_type``
            that :func:`~posenc_lib.scaling.rope_from_config` reads.
        max_position_embeddings: the config's ``max_position_embeddings``,
            for the rope types that read it (``"dynamic"``, and ``"yarn"``
            without ``original_max_position_embeddings``).
        seq_len: the sequence length ``fn`` computed its frequencies for, for
            ``"dynamic"`` and ``"longrope"``.
        config: a parsed ``config.json`` instead of the five arguments above
            (``dim`` is then its ``head_dim``; an argument given as well must
            agree with it).
        max_position: largest probed position (>= 64). Default: the model's
            context, ``max_position_embeddings`` (from ``config`` or the
            argument) or the extended length of ``rope_scaling`` (``factor``
            times ``original_max_position_embeddings``), minus 1; 8191
            without either (which probes the rounding of bfloat16 and
            float16). One more call rotates a long run of consecutive
            positions (up to 2,048) that ends there.
        seed: seed of the random ``x``.
        rotary_position: ``"first"`` (transformers, Llama, Qwen) or ``"last"``
            (DeepSeek's MLA rotates the last ``rotary_dim`` features of its
            query/key head): where the rotated slice sits.
        timeout: seconds each call of ``fn`` may take (``None``: no limit); a
            call that does not return in time is reported as an error.

    Returns:
        :class:`Diagnosis`: ``findings`` (codes from :data:`CODES`; empty when
        ``fn`` is RoPE as intended within float32 rounding) and ``explanation``.

    Raises:
        ValueError: naming the parameter, for a bad argument; and when ``fn``
            raises (``SystemExit`` included), exceeds ``timeout``, returns
            something other than a real tensor shaped like ``x`` (a ``meta``
            tensor included), or returns NaN or inf.
    """
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {type(fn).__name__}")
    if config is not None:
        dim, base, layout, rotary_dim, cfg = _from_config(config, dim, base, layout,
                                                          rotary_dim, rope_scaling,
                                                          max_position_embeddings)
    if dim is None:
        raise ValueError("dim must be given (features per head), or a config")
    dim = _validate.even_int("dim", dim)
    base = _validate.finite_float("base", 10000.0 if base is None else base,
                                  greater_than=1.0)
    layout = "half" if layout is None else layout
    _validate.one_of("layout", layout, rope.LAYOUTS)
    _validate.one_of("rotary_position", rotary_position, ("first", "last"))
    rotary = dim if rotary_dim is None else _validate.even_int("rotary_dim", rotary_dim)
    if rotary > dim:
        raise ValueError(f"rotary_dim must be <= dim = {dim}, got {rotary}")
    if timeout is not None:
        timeout = _validate.finite_float("timeout", timeout, greater_than=0.0)
    seed = _validate.nonnegative_int("seed", seed)
    if max_position_embeddings is not None:
        max_position_embeddings = _validate.positive_int(
            "max_position_embeddings", max_position_embeddings)
        if max_position_embeddings > _MAX_CONTEXT:
            raise ValueError(f"max_position_embeddings must be <= {_MAX_CONTEXT} (positions "
                             f"that float32 holds exactly), got {max_position_embeddings}")
    if config is None:
        cfg = _scaling_config(dim, base, rotary, rope_scaling, max_position_embeddings)
    expected, attention = _expected(cfg, rotary, base, seq_len)
    if max_position is None:
        max_position = max(_context(cfg, max_position_embeddings), seq_len or 0) - 1
    max_position = _validate.positive_int("max_position", max_position, minimum=64)
    if max_position > _MAX_CONTEXT:
        raise ValueError(f"max_position must be <= {_MAX_CONTEXT} (positions that float32 "
                         f"holds exactly), got {max_position}")

    positions = _fit.probe_positions(max_position)
    n_pos = len(positions)
    gen = torch.Generator().manual_seed(seed)
    fit = _Fit([], [], {"probed_positions": (0, int(positions.max()))})
    basis = torch.eye(dim, dtype=torch.float32)[:, None, :].expand(dim, n_pos, dim)
    m = _call(fn, basis.contiguous(), positions, timeout).permute(1, 2, 0)  # M[s, out, in]
    x = torch.randn(2, n_pos, dim, generator=gen, dtype=torch.float32)
    y = _call(fn, x, positions, timeout)
    intended = dict(dim=dim, base=base, seq_len=seq_len, layout=layout, rotary=rotary,
                    expected=expected, attention=attention, config=cfg, timeout=timeout,
                    start=dim - rotary if rotary_position == "last" else 0,
                    rotary_position=rotary_position, limit=max_position,
                    scaled=cfg is not None and _rope_type(cfg) != "default")
    rounding = _fit.output_rounding(m, y)
    noise = _fit.ROUNDING.get(rounding, 0.0)
    intended["noise"] = noise
    if rounding:
        fit.fitted["output_rounding"] = rounding
    linear_error = float((y - torch.einsum("soi,bsi->bso", m, x.double())).abs().max())
    if linear_error > (1e-3 + 8 * noise) * max(1.0, float(y.abs().max())):
        return _not_rope(fit, f"fn is not linear in x: fn(x) differs from the sum of "
                              f"its answers for the unit vectors by up to "
                              f"{linear_error:.3g}, and RoPE is a linear map (a "
                              f"rotation) of each x")
    ignored = _positions_used(fn, dim, max_position, gen, timeout, noise)
    if ignored is not None:
        fit.findings.append("positions-ignored")
        fit.lines.append(ignored)
        fit.lines.append("The rest was not fitted: fix the positions first and run the "
                         "diagnosis again.")
        return _finish(fit)
    try:
        result = _fit_general(fn, m, positions, intended, fit)
        if result is None:
            fit = _Fit([], [], {"probed_positions": (0, int(positions.max()))})
            if noise:
                fit.fitted["output_rounding"] = rounding
            result = _diagnose_normalised(m, positions, intended, fit)
            mixing, _ = _structure(m, threshold=1e-4 + 4 * noise)
            if result.findings == ["not-rope"] and "rounds its cos and sin tables" \
                    not in result.explanation and (mixing is None or mixing):
                theta = intended["expected"].to(torch.float64)
                ipairs = _pairs_of(layout, intended["start"], rotary // 2)
                rescued = _entries(m, positions, theta, ipairs, attention, intended,
                                   _Fit([], [], dict(fit.fitted)))
                if rescued is not None:
                    result = rescued
        if result.ok or result.findings == ["not-rope"]:
            extra = _long_run(fn, intended)
            if extra is not None and result.ok:
                code, line, fitted = extra
                result = Diagnosis([code], line, dict(result.fitted, **fitted))
        if rounding and result.ok:
            result = Diagnosis([], result.explanation + f" fn's outputs are {rounding} "
                               f"numbers: they were compared with a tolerance of "
                               f"{rounding}'s rounding (relative {noise:.2g}).",
                               result.fitted)
        return result
    except _FnError:
        raise          # fn failed when called again: the caller's error
    except Exception as error:    # an internal failure: say what could not be fitted
        if _DEBUG:
            raise
        fit = _Fit(["not-fitted"], [], {"probed_positions": (0, int(positions.max()))})
        fit.lines.append(f"Not fitted: the diagnosis could not fit a model to fn's "
                         f"outputs ({type(error).__name__}: {error}). fn is linear in x "
                         f"and uses its positions, but its rotation is none the fit can "
                         f"describe; compare its matrices at a few positions with "
                         f"rope.apply_rope's by hand.")
        fit.fitted["error"] = f"{type(error).__name__}: {error}"
        return _finish(fit)


#: Largest position probed: float32 holds every integer up to 2**24.
_MAX_CONTEXT = 2 ** 24
_DEBUG = False


def _context(cfg, max_position_embeddings) -> int:
    """The model's context: max_position_embeddings (the argument or the
    config's), or the extended length of a scaling, or 8192."""
    lengths = []
    if max_position_embeddings is not None:
        lengths.append(int(max_position_embeddings))
    if cfg is not None:
        value = cfg.get("max_position_embeddings")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            lengths.append(value)
        block = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
        if isinstance(block, Mapping):
            factor = block.get("factor")
            original = block.get("original_max_position_embeddings")
            if (isinstance(factor, (int, float)) and isinstance(original, int)
                    and math.isfinite(factor) and factor > 0):
                lengths.append(int(factor * original))
    context = max(lengths) if lengths else 8192
    return int(min(max(context, 65), _MAX_CONTEXT))


def _fit_general(fn, m, positions, intended, fit):
    """Fit, then explain (see ``posenc_lib.tools._diagnose_fit``): the position map
    with the intended frequencies, the per-pair frequencies against the
    intended schedule, the 2x2 blocks entry by entry. ``None`` where none of
    these models explains ``fn`` (the older fit then runs)."""
    dim, rotary, start = intended["dim"], intended["rotary"], intended["start"]
    noise, limit = intended["noise"], intended["limit"]
    theta = intended["expected"].to(torch.float64)
    att = intended["attention"]
    ipairs = _pairs_of(intended["layout"], start, rotary // 2)
    rotated = sorted({f for pair in ipairs for f in pair})
    rest = [f for f in range(dim) if f not in set(rotated)]
    eye = torch.eye(dim, dtype=torch.float64)
    entry_tol = 1e-4 + 4 * noise
    pairs, _ = _structure(m, threshold=entry_tol)
    if pairs is not None and not pairs:
        truncated = torch.floor(theta.to(torch.float32).to(torch.float64))
        if (bool((truncated == 0).all())
                and float((m - eye).abs().max()) <= entry_tol):
            # nothing rotates, which is what integer frequencies predict here
            return Diagnosis(["frequency-dtype"], (
                f"Frequency dtype: fn returns x unchanged at every position. Every "
                f"intended frequency is below 1 rad per position (the fastest, pair "
                f"0, {float(theta[0]):.4g}), so an inv_freq truncated to integers "
                f"(inv_freq.to(position_ids.dtype)) is all 0 and rotates nothing: "
                f"that reproduces fn exactly (if fn simply does not rotate, the fix "
                f"is to rotate). Fix: keep inv_freq in float32 and cast the "
                f"positions to float (position_ids.float())."), fit.fitted)
        return None     # nothing rotates: the older fit says so
    rest_ok = (not rest or float((m[:, rest][:, :, rest] - eye[rest][:, rest]).abs().max())
               <= entry_tol)
    coupled_rest = bool(rest) and float(m[:, rest][:, :, rotated].abs().max()
                                        if rotated else 0.0) > entry_tol
    if pairs is not None and set(pairs) == set(ipairs) and rest_ok and not coupled_rest:
        g = _column_scale(m, rotated, 1e-4 + 4 * noise)
        if g is None:
            return None     # no scaled rotations: the older fit, then the entries
        mm = m.clone()
        mm[:, :, rotated] /= g
        angles, misfit = _block_angles(mm, ipairs)
        tol = _fit.pair_tolerance(positions, theta, noise)
        if bool((misfit > tol).any()):
            return None     # no rotations: the older fit (mixed tables), then the entries
        attention = _attention_report(g, att, intended["scaled"], 1e-4 + 4 * noise)
        fit.fitted.update(layout=intended["layout"], rotated_features=len(rotated),
                          attention_factor=g)
        solved = _fit.solve_positions(angles, theta, tol, limit, prior=positions)
        if solved is not None and bool(solved[1].all()):
            q = solved[0]
            qtol = 0.05 + 64 * _EPS32 * positions.to(torch.float64) + 4 * noise / float(
                theta.abs().max())
            kind, value, text = _fit.classify_map(positions, q, qtol)
            fit.fitted["position_map"] = (kind, value)
            if kind == "reversed":
                return None     # every pair turns backwards: the older fit names it
            if kind == "identity":
                if attention is None:
                    return _clean(fit, intended, positions, g)
                return Diagnosis([attention[0]], attention[1], fit.fitted)
            bits = _bits_map(positions, q, qtol) if kind == "other" else None
            if bits is not None:
                name = _FORMATS.get(bits, f"a float format with a {bits}-bit significand")
                examples = [int(p) for p in positions if round_significand(p, bits) != p]
                shown = ", ".join(f"{p} acts as {int(round_significand(p, bits))}"
                                  for p in (examples[:1] + examples[-1:]))
                fit.fitted["position_bits"] = bits
                codes = ["positions-precision"]
                lines = [f"Positions precision: position {shown}: fn rounds positions "
                         f"to {name} ({bits}-bit significand: integers above "
                         f"{2 ** bits} are not all held) before computing the angles. "
                         f"Fix: compute the angles in float32 (positions.float() * "
                         f"inv_freq), and cast only cos and sin to the model's dtype."]
                if attention is not None:
                    codes.append(attention[0])
                    lines.append(attention[1])
                return Diagnosis(_order(codes), "\n".join(lines), fit.fitted)
            if kind == "scale" and intended["scaled"]:
                code, line = _scaled_twice(1 / value, intended)
            else:
                code, line = _fit.map_sentence(kind, value, text, "at the probed positions",
                                               limit + 1)
            codes, lines = [code], [line]
            if attention is not None:
                codes.append(attention[0])
                lines.append(attention[1])
            return Diagnosis(_order(codes), "\n".join(lines), fit.fitted)
        # the intended frequencies do not reproduce the angles: fit them freely
        return _schedule(angles, positions, theta, intended, fit, ipairs, attention)
    if (pairs is not None and pairs and set(pairs) < set(ipairs) and rest_ok
            and not coupled_rest):
        # some intended pairs never turn: frequency 0 (truncated?) or partial
        found = _zero_pairs(m, positions, theta, pairs, ipairs, intended, fit)
        if found is not None:
            return found
    if pairs and set(pairs) != set(ipairs) and _layout_of(pairs, intended["layout"]):
        return None     # pairs of some layout: the older fit names it (or we rescue)
    return _entries(m, positions, theta, ipairs, att, intended, fit)


def _order(codes):
    order = {code: k for k, code in enumerate(CODES)}
    return sorted(set(codes), key=order.__getitem__)


def _bits_map(positions, q, qtol):
    """The significand width whose rounding of the positions gives ``q``, or ``None``."""
    for bits in [8, 11] + [b for b in range(2, 24) if b not in (8, 11)]:
        if bool(((round_significand(positions, bits) - q).abs() <= qtol).all()):
            return bits
    return None


def _clean(fit, intended, positions, g):
    theta = intended["expected"]
    fit.lines.append(
        f"fn is RoPE as intended: fitted {intended['layout']} layout "
        f"({_pair_text(_pairs_of(intended['layout'], intended['start'], intended['rotary'] // 2))}"
        f" rotate together), {intended['rotary']} rotated features "
        f"({intended['rotary_position']} of {intended['dim']}), "
        + (f"the frequencies of rope_type {_rope_type(intended['config'])!r} as "
           f"scaling.rope_from_config computes them"
           if intended["scaled"] else f"fitted base {intended['base']:g} with exponent "
                                      f"2i/{intended['rotary']}")
        + f" (fitted pair 0 {float(theta[0]):.6g}, last pair {float(theta[-1]):.4g} rad per "
          f"position), attention factor {g:.6g}, and every probed position p rotated as "
          f"p itself (0 to {int(positions.max())}: no wrap, clamp, offset or scale).")
    fit.fitted.update(base=intended["base"], exponent=f"2i/{intended['rotary']}",
                      sign=1.0, position_bits=None)
    return Diagnosis([], "\n".join(fit.lines), fit.fitted)


def _scaled_twice(factor, intended):
    """A common ratio of the frequencies against a scaled RoPE's."""
    kind = _rope_type(intended["config"])
    from ..config_reader import parse_rope_config
    intended_factor = parse_rope_config(intended["config"]).params.get("factor")
    twice = (intended_factor is not None
             and abs(factor / intended_factor - 1) < 1e-4)
    return ("scaling",
            f"Scaling: every frequency of fn is the {kind!r} rope_scaling's divided by "
            f"{factor:.6g} (positions divided by {factor:.6g} more than intended)"
            + (f": the factor {intended_factor:g} applied twice (once in inv_freq, once "
               f"to the positions or again in inv_freq)" if twice else "")
            + ". Fix: apply the scaling once, as scaling.rope_from_config(config) "
              "computes it.")


def _free_frequencies(angles, positions, intended):
    """Per-pair frequencies fitted with ``q(p) = p``; ``None`` if they do not
    reproduce the angles."""
    theta = _fit_frequencies(angles, positions)
    tol = _fit.pair_tolerance(positions, theta, intended["noise"])
    model = positions.to(torch.float64)[:, None] * theta
    if bool((_wrap(angles - model).abs() > tol + 64 * _EPS32 * positions[:, None]).any()):
        return None
    return theta


def _schedule(angles, positions, theta, intended, fit, pairs, attention):
    """Frequencies fitted freely, matched to the intended schedule."""
    free = _free_frequencies(angles, positions, intended)
    if free is None or float(free[0]) <= 0:
        return None
    fit.fitted["fitted_inv_freq"] = free
    codes, lines = [], []
    explained = _explain_schedule(free, intended)
    if explained is None:
        return None
    codes.append(explained[0])
    lines.append(explained[1])
    if attention is not None:
        codes.append(attention[0])
        lines.append(attention[1])
    return Diagnosis(_order(codes), "\n".join(lines), fit.fitted)


def _explain_schedule(free, intended):
    """``(code, sentence)`` for fitted frequencies ``free`` that differ from
    the intended ones; ``None`` for a plain geometric ladder of another base or
    exponent (the older fit names those)."""
    theta = intended["expected"].to(torch.float64)
    rotary, base = intended["rotary"], intended["base"]
    plain = rope.inv_freq(rotary, base, dtype=torch.float64)
    rel = 2e-4
    ratio = free / plain
    truncated = torch.floor(theta.to(torch.float32).to(torch.float64))
    if bool(((free - truncated).abs() <= 1e-6).all()):
        return ("frequency-dtype",
                f"Frequency dtype: fn's frequencies are the intended ones rounded down to "
                f"integers ({', '.join(f'{float(v):g}' for v in free[:4])}, ...: pair 1 "
                f"turns {float(free[1]) if len(free) > 1 else 0:g} rad per position "
                f"instead of {float(theta[1]) if len(theta) > 1 else 0:.5g}): inv_freq "
                f"cast to an integer dtype (inv_freq.to(position_ids.dtype), or "
                f"torch.arange without .float()). Fix: keep inv_freq in float32 and "
                f"cast the positions to float (position_ids.float()).")
    off = ((free - theta).abs() > rel * theta).nonzero().flatten().tolist()
    if off and len(off) <= max(2, len(theta) // 8) and not (
            intended["scaled"] and _scaling_parameter_fit(free, intended)):
        shown = "; ".join(f"pair {i} turns {float(free[i]):.6g} rad per position, "
                          f"intended {float(theta[i]):.6g} ({float(free[i] / theta[i]):.4g}"
                          f" times)" for i in off[:3])
        return ("frequency",
                f"Frequency: {len(off)} of {len(theta)} pairs turn at another frequency "
                f"than intended ({shown}); every other pair matches. Fix: compute every "
                f"pair's frequency from the one formula (no per-pair edits, overrides "
                f"or off-by-one indexing of inv_freq).")
    common = float(ratio.median())
    if bool(((ratio - common).abs() <= rel * common).all()) and abs(common - 1) > rel:
        factor = 1 / common
        kind = _rope_type(intended["config"]) if intended["scaled"] else None
        if kind is None:
            return ("scaling",
                    f"Scaling: fn is a RoPE whose every frequency is divided by "
                    f"{factor:.6g} (positions divided by {factor:.6g}): position "
                    f"interpolation (rope_type 'linear', factor {factor:.6g}), while "
                    f"you intend plain RoPE. Fix: drop the scaling, or give the "
                    f"rope_scaling the checkpoint was trained with.")
        kept, divided = _fit.bands(theta / plain, _scaling_factor(intended) or factor)
        return ("scaling",
                f"Scaling: fn is plain position interpolation: every frequency is "
                f"divided by {factor:.6g} (rope_type 'linear', factor {factor:.6g}), "
                f"but the rope_scaling you give is {kind!r}, which keeps pairs 0.."
                f"{kept} and divides only pairs {divided}..{len(theta) - 1} fully. "
                f"Fix: compute inv_freq with scaling.rope_from_config(config) for "
                f"rope_type {kind!r}, not 'linear'.")
    if not intended["scaled"]:
        return None
    kind = _rope_type(intended["config"])
    factor = _scaling_factor(intended)
    line = (f"Scaling: fn's frequencies are not those of the rope_scaling you give "
            f"({kind!r}). ")
    if factor and factor > 1 and kind in ("llama3", "yarn"):
        k_fn, d_fn = _fit.bands(ratio, factor)
        k_ex, d_ex = _fit.bands(theta / plain, factor)
        line += (f"Fitted pair by pair: fn keeps pairs 0..{k_fn} and divides pairs "
                 f"{d_fn}..{len(theta) - 1} by {factor:g}, ramping between; the "
                 f"rope_scaling keeps 0..{k_ex} and divides {d_ex}..{len(theta) - 1}. ")
    found = _scaling_parameter_fit(free, intended)
    if found:
        line += f"Reproduced by: {found}. "
    else:
        k = int(((free - theta).abs() / theta).argmax())
        line += (f"The largest difference is at pair {k}: {float(free[k]):.5g} rad per "
                 f"position against {float(theta[k]):.5g} "
                 f"({float(free[k] / theta[k]):.4g} times). ")
    line += ("Fix: compute inv_freq with scaling.rope_from_config(config), with the ramp "
             "or smoothing exactly as there.")
    return ("scaling", line)


def _scaling_factor(intended):
    from ..config_reader import parse_rope_config
    if intended["config"] is None:
        return None
    factor = parse_rope_config(intended["config"]).params.get("factor")
    return float(factor) if isinstance(factor, (int, float)) else None


def _scaling_parameter_fit(free, intended):
    """Which change of one scaling parameter (or one step of its formula)
    reproduces ``free``: a sentence, or ``None``."""
    from ..config_reader import parse_rope_config
    from .. import scaling
    cfg = parse_rope_config(intended["config"])
    kind, params = cfg.rope_type, dict(cfg.params)
    rotary, base = intended["rotary"], intended["base"]
    plain = rope.inv_freq(rotary, base, dtype=torch.float64)
    candidates = []
    factor = params.get("factor")
    original = params.get("original_max_position_embeddings")
    if isinstance(factor, (int, float)) and factor > 0:
        candidates.append((f"factor {factor ** 2:g} (= {factor:g} applied twice) instead "
                           f"of {factor:g}", dict(params, factor=factor ** 2)))
    if kind == "llama3":
        lo, hi = params["low_freq_factor"], params["high_freq_factor"]
        candidates.append((f"low_freq_factor and high_freq_factor swapped ({hi:g} and "
                           f"{lo:g} instead of {lo:g} and {hi:g})",
                           dict(params, low_freq_factor=hi, high_freq_factor=lo)))
        if original and factor:
            candidates.append((f"original_max_position_embeddings {int(original * factor)}"
                               f" (the extended length) instead of {original}",
                               dict(params, original_max_position_embeddings=int(
                                   original * factor))))
    if kind == "yarn":
        if original and factor:
            candidates.append((f"original_max_position_embeddings {int(original * factor)}"
                               f" (the extended length) instead of {original}: the ramp "
                               f"computed from the extended length",
                               dict(params, original_max_position_embeddings=int(
                                   original * factor))))
        bf, bs = params.get("beta_fast") or 32.0, params.get("beta_slow") or 1.0
        candidates.append(("beta_fast and beta_slow swapped",
                           dict(params, beta_fast=bs, beta_slow=bf)))
    if kind == "dynamic" and len(free) > 1:
        found = _dynamic_fit(free, intended, params)
        if found:
            return found
    import warnings
    tried = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the variants are odd on purpose
        known = _inv_freq_candidates(cfg, intended["config"])
    for code, inv in known.items():
        if code != "frequency-exponent":
            tried.append((f"{INV_FREQ_CODES[code]} ({code})", inv))
    for text, p in candidates:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                inv = scaling.rope_parameters(kind, rotary, base, dtype=torch.float64,
                                              **{k: v for k, v in p.items()
                                                 if k not in ("rope_type", "type")})[0]
        except Exception:
            continue
        tried.append((text, inv))
    if kind == "llama3" and original and factor:
        lo, hi = params["low_freq_factor"], params["high_freq_factor"]
        variants = (
            ("the wavelength taken as 1/θ_i instead of 2π/θ_i", 1.0, lo, hi, False),
            ("the smoothing weights reversed (smooth and 1 - smooth swapped)",
             2 * math.pi, lo, hi, True),
            (f"low_freq_factor and high_freq_factor swapped ({hi:g} and {lo:g} instead "
             f"of {lo:g} and {hi:g})", 2 * math.pi, hi, lo, False))
        for text, turn, low, high, inverted in variants:
            for keep_first in (False, True):
                tried.append((text, _llama3_variant(plain, factor, low, high, original,
                                                    turn, inverted, keep_first)))
    for text, inv in tried:
        if inv.shape == free.shape and bool(((inv - free).abs() <= 2e-4 * inv).all()):
            return text
    return None


def _dynamic_fit(free, intended, params):
    """Dynamic NTK: the sequence length (and exponent) whose base reproduces a
    geometric ladder ``free``; a sentence or ``None``."""
    rotary, base = intended["rotary"], intended["base"]
    fitted_base = float(free[1]) ** (-rotary / 2)
    if not bool(((rope.inv_freq(rotary, fitted_base, dtype=torch.float64) - free).abs()
                 <= 2e-4 * free).all()):
        return None
    factor = params.get("factor")
    longest = params.get("max_position_embeddings")
    if not factor or not longest:
        return None
    seq_len = intended.get("seq_len")
    grown = fitted_base / base
    right = grown ** ((rotary - 2) / rotary)
    at_right = (right + factor - 1) * longest / factor
    at_dropped = (grown + factor - 1) * longest / factor
    if seq_len is not None and abs(at_dropped - seq_len) <= 1e-3 * seq_len:
        return (f"dynamic NTK's base without the exponent d/(d-2) = "
                f"{rotary}/{rotary - 2}: fn's ladder has base {fitted_base:.6g}, which "
                f"is base·(factor·L/max_position_embeddings - factor + 1) at L = "
                f"{seq_len}, not raised to d/(d-2)")
    return (f"dynamic NTK at sequence length about {at_right:.0f} (fn's ladder has base "
            f"{fitted_base:.6g})" + (f", not at the seq_len {seq_len} you give"
                                    if seq_len is not None else ""))


def _llama3_variant(plain, factor, low, high, original, turn, inverted, keep_first):
    """Llama 3's bands with one step changed: the wavelength ``turn/θ``, the
    smoothing reversed, and which band wins where they overlap (transformers
    divides first, then smooths; ``keep_first`` keeps first)."""
    wavelength = turn / plain
    smooth = (original / wavelength - low) / (high - low)
    if inverted:
        smooth = 1 - smooth
    mid = (1 - smooth) * plain / factor + smooth * plain
    high_wl, low_wl = original / high, original / low
    if keep_first:
        return torch.where(wavelength < high_wl, plain,
                           torch.where(wavelength > low_wl, plain / factor, mid))
    base = torch.where(wavelength > low_wl, plain / factor, plain)
    medium = ~(wavelength < high_wl) & ~(wavelength > low_wl)
    return torch.where(medium, mid, base)


def _zero_pairs(m, positions, theta, pairs, ipairs, intended, fit):
    """Some intended pairs never turn: the frequencies truncated to integers,
    or fewer features rotated."""
    free = torch.zeros_like(theta)
    index = {pair: i for i, pair in enumerate(ipairs)}
    angles, misfit = _block_angles(m, pairs)
    turning = _fit_frequencies(angles, positions)
    for pair, value in zip(pairs, turning):
        free[index[pair]] = value
    truncated = torch.floor(theta.to(torch.float32).to(torch.float64))
    if bool(((free - truncated).abs() <= 1e-6).all()):
        code, line = _explain_schedule(free, intended)
        return Diagnosis([code], line, fit.fitted)
    return None


def _entries(m, positions, theta, ipairs, att, intended, fit):
    """Blocks that are not rotations, explained entry by entry."""
    keep = positions <= 2048
    explained = _fit.explain_entries(m[keep], positions[keep], theta, ipairs, att,
                                     1e-3 + 4 * intended["noise"])
    if explained is None:
        return None
    codes, lines, details = explained
    fit.fitted.update(details)
    gain = details.get("gain")
    if gain is not None:
        attention = _attention_report(gain, att, intended["scaled"],
                                      1e-3 + 4 * intended["noise"])
        if attention is not None:
            codes = codes + [attention[0]]
            lines = lines + [attention[1]]
    return Diagnosis(_order(codes), "\n".join(lines), fit.fitted)


def _long_run(fn, intended):
    """One call with a long run of consecutive positions ending at the context:
    ``(code, sentence, fitted)`` when fn's angles there are not the positions',
    else ``None``."""
    dim, rotary, start = intended["dim"], intended["rotary"], intended["start"]
    limit = intended["limit"]
    length = min(2048, limit + 1)
    first = limit + 1 - length
    positions = torch.arange(first, first + length)
    ipairs = _pairs_of(intended["layout"], start, rotary // 2)
    x = torch.zeros(1, length, dim)
    for a, _ in ipairs:
        x[..., a] = 1.0
    y = _call(fn, x, positions, intended["timeout"])[0]
    a = torch.tensor([i for i, _ in ipairs])
    b = torch.tensor([j for _, j in ipairs])
    angles = torch.atan2(y[:, b], y[:, a])
    theta = intended["expected"].to(torch.float64)
    tol = _fit.pair_tolerance(positions, theta, intended["noise"])
    expected = positions.to(torch.float64)[:, None] * theta
    if bool((_wrap(angles - expected).abs() <= tol).all()):
        return None
    solved = _fit.solve_positions(angles, theta, tol, limit, prior=positions)
    index = torch.arange(length)
    if solved is None:
        bad = int(torch.nonzero((_wrap(angles - expected).abs() > tol).any(1))[0])
        return ("position-map",
                f"Position map: in one call with {length} consecutive positions "
                f"{first}..{limit}, fn's angles stop matching the positions at sequence "
                f"index {bad} (position {first + bad}); the probes of single positions "
                f"were right, so fn depends on where a token sits in a long call (a "
                f"tiled or chunked kernel?). Fix: compute each token's angles from its "
                f"own position.", {"long_run_first_bad_index": bad})
    q, ok = solved
    off = ((q - positions).abs() > 0.05 + 64 * _EPS32 * positions) | ~ok
    bad = int(torch.nonzero(off)[0])
    blocks = ""
    if bad > 0 and bad & (bad - 1) == 0:
        blocks = f" (index {bad} is a power of two: a tile or block of {bad} tokens?)"
    seen = ", ".join(f"index {int(i)} (position {first + int(i)}) acts as {float(q[i]):.6g}"
                     for i in index[off][:2])
    return ("position-map",
            f"Position map: in one call with {length} consecutive positions "
            f"{first}..{limit}, fn rotates the tokens from sequence index {bad} on by "
            f"other positions than their own{blocks}: {seen}. The probes of single "
            f"positions were right, so fn depends on where a token sits in a long call. "
            f"Fix: compute each token's angles from its own position (cos[position_ids]),"
            f" in every tile.", {"long_run_first_bad_index": bad})


def _from_config(config, dim, base, layout, rotary_dim, rope_scaling,
                 max_position_embeddings):
    """``(dim, base, layout, rotary_dim, config)`` read from a ``config.json``
    mapping; an argument given as well must agree with it."""
    from ..config_reader import parse_rope_config
    from .inspector import _pair_layout
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a mapping (a parsed config.json), got "
                         f"{type(config).__name__}")
    if rope_scaling is not None or max_position_embeddings is not None:
        raise ValueError("rope_scaling and max_position_embeddings are read from "
                         "config: give either config or them, not both")
    parsed = parse_rope_config(config)
    read = dict(dim=parsed.head_dim, base=parsed.base, layout=_pair_layout(config),
                rotary_dim=parsed.dim)
    for name, value in (("dim", dim), ("base", base), ("layout", layout),
                        ("rotary_dim", rotary_dim)):
        if value is not None and value != read[name]:
            raise ValueError(f"{name} = {value!r} disagrees with config's "
                             f"{read[name]!r}: leave it out to use the config's")
    return read["dim"], read["base"], read["layout"], read["rotary_dim"], dict(config)


def _scaling_config(dim, base, rotary, rope_scaling, max_position_embeddings):
    """A config mapping for :func:`~posenc_lib.scaling.rope_from_config`, or
    ``None`` without ``rope_scaling``."""
    if rope_scaling is None:
        return None           # max_position_embeddings, if given, is the context
    if not isinstance(rope_scaling, Mapping):
        raise ValueError(f"rope_scaling must be a mapping like config.json's "
                         f"(rope_type, factor, ...), got {type(rope_scaling).__name__}")
    config = {"rope_theta": base, "head_dim": dim, "hidden_size": dim,
              "num_attention_heads": 1, "rope_scaling": dict(rope_scaling)}
    if rotary != dim:
        config["partial_rotary_factor"] = rotary / dim
    if max_position_embeddings is not None:
        config["max_position_embeddings"] = _validate.positive_int(
            "max_position_embeddings", max_position_embeddings)
    return config


def _rope_type(config) -> str:
    from ..config_reader import parse_rope_config
    return parse_rope_config(config).rope_type


def _expected(config, rotary, base, seq_len):
    """The intended ``(inv_freq (rotary/2,) float64, attention factor)``."""
    from .. import scaling
    if config is None:
        if seq_len is not None:
            raise ValueError("seq_len is read only with rope_scaling (dynamic, "
                             "longrope): leave it out, or give rope_scaling")
        return rope.inv_freq(rotary, base, dtype=torch.float64), 1.0
    try:
        inv, attention = scaling.rope_from_config(config, seq_len=seq_len,
                                                  dtype=torch.float64)
    except ValueError as error:
        raise ValueError(f"rope_scaling: {error}") from error
    if inv.shape[0] != rotary // 2:
        raise ValueError(f"rotary_dim: the config rotates {2 * inv.shape[0]} features, "
                         f"not {rotary}")
    return inv, float(attention)


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


def _diagnose_normalised(m, positions, intended, fit) -> Diagnosis:
    """The attention factor and a constant phase taken out, then the fit."""
    dim = intended["dim"]
    attention = intended["attention"]
    pairs, _ = _structure(m, threshold=1e-4)
    scale_lines, scale_codes, phase = [], [], None
    if pairs:
        rotated = sorted({f for pair in pairs for f in pair})
        g = _column_scale(m, rotated)
        if g is not None and abs(g - 1) > 1e-4:
            m = m.clone()
            m[:, :, rotated] /= g
        if g is not None:
            fit.fitted["attention_factor"] = g
            code_line = _attention_report(g, attention, intended["scaled"])
            if code_line:
                scale_codes, scale_lines = [code_line[0]], [code_line[1]]
        m0 = m[0]
        eye = torch.eye(dim, dtype=torch.float64)
        if float((m0 - eye).abs().max()) > 1e-4:
            phi0, misfit0 = _block_angles(m0[None], pairs)
            rest = [f for f in range(dim) if f not in set(rotated)]
            if (float(misfit0.max()) <= 1e-4
                    and float((m0[rest][:, rest] - eye[rest][:, rest]).abs().max()
                              if rest else 0.0) <= 1e-4):
                phase = phi0[0]
                m = m @ _simulate(dim, pairs, -phase[None])
    result = _diagnose_matrices(m, positions, intended, fit)
    findings, lines = list(result.findings), result.explanation.split("\n")
    fitted = dict(result.fitted)
    if phase is not None:
        findings, lines = _explain_phase(phase, findings, lines, fitted, positions,
                                         pairs)
    if intended["scaled"] and "base" in findings and fitted.get("base"):
        findings, lines = _dynamic_length(findings, lines, fitted, intended)
    if scale_codes and "not-rope" not in findings:
        findings += scale_codes
        lines = [line for line in lines if not line.startswith("fn is RoPE")]
        lines += scale_lines
    fitted.pop("_theta", None)
    fitted.pop("_flipped", None)
    order = {code: k for k, code in enumerate(CODES)}
    findings = sorted(set(findings), key=order.__getitem__)
    return Diagnosis(findings, "\n".join(lines), fitted)


def _dynamic_length(findings, lines, fitted, intended):
    """A plain ladder with another base, for a dynamic rope_scaling: the length
    at which dynamic NTK gives that base."""
    from ..config_reader import parse_rope_config
    cfg = parse_rope_config(intended["config"])
    if cfg.rope_type != "dynamic":
        return findings, lines
    base, d = intended["base"], intended["rotary"]
    factor, longest = cfg.params["factor"], cfg.params["max_position_embeddings"]
    grown = (fitted["base"] / base) ** ((d - 2) / d)
    length = (grown + factor - 1) * longest / factor
    lines = [line for line in lines if not line.startswith("Base:")]
    lines.insert(0, f"Scaling: fn's frequencies are dynamic NTK's at sequence length "
                    f"about {length:.0f} (base {fitted['base']:.6g}), not at the length "
                    f"you give. Fix: recompute inv_freq when the sequence grows past "
                    f"max_position_embeddings = {longest}, at the current length "
                    f"(scaling.rope_from_config(config, seq_len=...)).")
    return [c for c in findings if c != "base"] + ["scaling"], lines


def _attention_report(g: float, attention: float, scaled: bool, rtol: float = 1e-4):
    """``(code, sentence)`` when the rotated features are scaled by ``g`` and the
    intended attention factor is ``attention``; ``None`` when they agree."""
    if abs(g / attention - 1) <= rtol:
        return None
    if abs(g - 1) <= rtol:
        return ("attention-factor",
                f"Attention factor missing: fn's rotation keeps lengths (factor 1), "
                f"but the rope_scaling you give multiplies cos and sin by "
                f"{attention:.6g} (so every q·k by {attention ** 2:.6g}). Fix: "
                f"multiply cos and sin by the attention factor that "
                f"scaling.rope_from_config(config) returns (transformers' "
                f"attention_scaling), once.")
    if abs(g / attention ** 2 - 1) <= rtol:
        return ("attention-factor",
                f"Attention factor applied twice: fn scales the rotated features by "
                f"{g:.6g} = {attention:.6g}², so q·k grows by {g ** 2:.6g} instead of "
                f"{attention ** 2:.6g}. Fix: multiply cos and sin by {attention:.6g} "
                f"once (not again on q, k or the scores).")
    what = ("the rope_scaling you give asks for " + f"{attention:.6g}" if scaled
            else "plain RoPE keeps lengths (factor 1)")
    return ("attention-factor",
            f"Attention factor: fn scales the rotated features by {g:.6g}; {what}. "
            f"Fix: multiply cos and sin by the attention factor of your config "
            f"(scaling.rope_from_config(config)[1]) and nothing else.")


def _explain_phase(phase, findings, lines, fitted, positions, pairs):
    """Name a rotation ``fn`` already applies at position 0: cos and sin
    swapped, or positions shifted by a constant ``c``."""
    sign = fitted.get("sign", 1.0)
    theta = fitted.get("_theta")
    phase_text = ", ".join(f"{float(v):.4g}" for v in phase[:3])
    if "not-rope" in findings or theta is None:
        lines.insert(0, f"At position 0 fn already turns the pairs (by {phase_text} "
                        f"rad, ...); taking that out did not leave a RoPE either.")
        return findings, lines
    quarter = _wrap(phase + sign * math.pi / 2).abs()
    if bool((quarter <= 1e-4).all()):
        findings = [c for c in findings if c != "rotation-reversed"] + ["cos-sin-swapped"]
        lines = [line for line in lines if not line.startswith(("Rotation reversed",
                                                                "fn is RoPE"))]
        lines.insert(0, "cos and sin swapped: at position 0 fn turns every pair by a "
                        "quarter turn, and then backwards as the position grows: its "
                        "block is [[sin, -cos], [cos, sin]], which is the rotation by "
                        "π/2 - m·θ. Fix: x * cos + rotate_half(x) * sin (cos on x, "
                        "sin on the rotated half).")
        return findings, lines
    theta = torch.as_tensor(theta, dtype=torch.float64)[:len(phase)]
    if fitted.get("_flipped"):
        theta = theta.flip(0)
    c = _fit_offset(phase, sign * theta)
    if c is not None:
        fitted["position_offset"] = c
        lines = [line for line in lines if not line.startswith("fn is RoPE")]
        findings = findings + ["position-offset"]
        lines.insert(0, f"Position offset: fn rotates position p as position "
                        f"p {'+' if c > 0 else '-'} {abs(c)} "
                        f"(at position 0 pair 0 already turns {float(phase[0]):.4g} "
                        f"rad, pair 1 {float(phase[1]) if len(phase) > 1 else 0:.4g}; "
                        f"M(p) = R(p + c) with c = {c} fits every probed position). Scores q·k "
                        f"only see m - n, so the offset cancels when q and k both carry "
                        f"it; it does not when they come from different code paths (the "
                        f"cached keys and a new query) or when outputs are compared "
                        f"with the checkpoint's. Fix: look up cos and sin at the "
                        f"positions themselves (cos[positions], not "
                        f"cos[positions {'+' if c > 0 else '-'} {abs(c)}]); position 0 "
                        f"must be the identity.")
        return findings, lines
    lines = [line for line in lines if not line.startswith("fn is RoPE")]
    lines.insert(0, f"Not RoPE: at position 0 fn turns the pairs by {phase_text} rad "
                    f"...; RoPE's rotation at position 0 is the identity, and no "
                    f"position offset or cos/sin swap explains these angles.")
    return findings + ["not-rope"], lines


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


def _not_rope(fit: _Fit, why: str) -> Diagnosis:
    fit.lines.append(f"Not RoPE: {why}. None of the known bugs ("
                     + ", ".join(CODES[:-1]) + ") explains it.")
    fit.fitted["not_rope"] = why
    return Diagnosis(["not-rope"], "\n".join(fit.lines), fit.fitted)


def _finish(fit: _Fit) -> Diagnosis:
    order = {code: k for k, code in enumerate(CODES)}
    findings = sorted(set(fit.findings), key=order.__getitem__)
    return Diagnosis(findings, "\n".join(fit.lines), fit.fitted)


def _diagnose_matrices(m: Tensor, positions: Tensor, intended: dict, fit: _Fit) -> Diagnosis:
    dim, base, layout, rotary = (intended[k] for k in ("dim", "base", "layout", "rotary"))
    eye = torch.eye(dim, dtype=torch.float64)
    at_zero = float((m[0] - eye).abs().max())
    if at_zero > 1e-4:
        return _not_rope(fit, f"at position 0 fn changes x (largest change "
                              f"{at_zero:.3g}); RoPE's rotation at position 0 is the "
                              f"identity")
    pairs, why = _structure(m, threshold=1e-4)
    if pairs is None:
        return _not_rope(fit, why)
    if not pairs:
        return _not_rope(fit, "fn returns x unchanged at every position: no feature "
                              "rotates, so attention would not see positions")
    shape = _layout_of(pairs, layout)
    if shape is None:
        return _not_rope(fit, f"the pairs that rotate together ({_pair_text(pairs, 4)}, "
                              f"...) follow neither layout")
    got_layout, start, n_block = shape
    angles, misfit = _block_angles(m, pairs)
    tol = _tolerance(positions)
    if bool((misfit > tol[:, None]).any()):
        return _mixed_tables(m, positions, pairs, got_layout, intended, fit)

    # -- frequencies: sign, θ_0, the geometric ladder ----------------------------------
    theta = _fit_frequencies(angles, positions)
    p_ref = float(max(p for p in (2 ** k for k in range(6, 14))
                      if p in set(positions.tolist())))
    seen = (theta.abs() * p_ref) > 1e-3
    sign = float(torch.sign(theta[0])) or 1.0
    rotated = sorted({f for pair in pairs for f in pair})
    wanted = list(range(intended["start"], intended["start"] + rotary))
    fit.fitted.update(layout=got_layout, rotated_features=len(rotated),
                      pairs=pairs[:4], sign=sign)
    freq_codes, freq_lines = [], []

    def fail(why):
        # Frequencies or angles in a low-precision dtype fit no exact ladder.
        formulas = _formulas(dim, rotary, len(rotated), n_block,
                             hidden_tail=math.exp(slope * len(pairs)) * p_ref < 1e-3)
        found = _fit_low_precision(angles, positions, sign, len(pairs), formulas,
                                   slope, base)
        if found is None:
            return None, why
        _, name, mode, low_base, (e, text, right, spacing) = found
        fit.fitted.update(base=low_base, exponent=text, position_bits=name,
                          low_precision=mode, spacing=spacing)
        codes, lines = _frequency_report(low_base, e, text, right, base, rotary,
                                         n_block, dim)
        codes.append("positions-precision")
        what = {"all": "the positions, inv_freq and their product (the angles)",
                "inv_freq": "the positions and inv_freq",
                "inv_freq_only": "inv_freq"}[mode]
        bits = 8 if name == "bfloat16" else 11
        last = int(positions[-1])
        acts = (f", so position {last} acts as {int(round_significand(last, bits))}"
                if mode != "inv_freq_only" else "")
        lines.append(f"Positions precision: fn computes {what} in {name}{acts}, and "
                     f"the frequencies are rounded to {name} (relative error up to "
                     f"{2.0 ** -bits:.2g}, which a position m multiplies). Fix: "
                     f"compute inv_freq and the angles in float32 (positions.float() "
                     f"* inv_freq.float()), and cast only cos and sin to the model's "
                     f"dtype.")
        angle = sign * _low_precision_angles(positions, len(pairs), low_base, e,
                                             _LOW[name], mode)
        return (codes, lines, angle), None

    direct = _direct_ladders(angles, positions, intended, len(pairs), theta)
    if direct is not None:
        sign = direct[3]
        fit.fitted["sign"] = sign
    magnitude = theta.abs()
    flipped = (direct is None and len(pairs) > 2
               and bool((magnitude.diff() >= -1e-6).all())
               and float(magnitude[-1]) > 1.5 * float(magnitude[0]))
    if flipped:
        # The ladder rises: fit it the other way round, then name the reversal.
        pairs, angles, theta, seen = pairs[::-1], angles.flip(1), theta.flip(0), \
            seen.flip(0)
        sign = float(torch.sign(theta[0])) or 1.0
        fit.fitted.update(sign=sign, _flipped=True)
    signs = torch.sign(theta[seen])
    theta = theta.abs()
    theta0 = float(theta[0])
    idx = torch.arange(len(pairs), dtype=torch.float64)
    weight = (theta * p_ref) ** 2 * seen
    slope = (float((weight * idx * theta.clamp_min(1e-300).log()).sum()
                   / (weight * idx * idx).sum().clamp_min(1e-300))
             if len(pairs) > 1 else 0.0)
    ladder = torch.exp(slope * idx)
    ladder_error = ((ladder - theta).abs() * p_ref)
    worst = int(ladder_error.argmax())
    why = None
    if direct is not None:
        pass
    elif not bool((signs == signs[0]).all()):
        why = "some pairs turn forwards and others backwards"
    elif abs(theta0 - 1.0) * p_ref > float(_tolerance(torch.tensor(p_ref))):
        why = (f"the fastest pair turns {theta0:.6g} rad per position; RoPE's fastest "
               f"pair (θ_0 = base^0) turns exactly 1 (positions scaled by "
               f"{1 / theta0:.4g}, as position interpolation does?)")
    elif (intended["scaled"] and len(theta) == len(intended["expected"])
          and float(ladder_error[worst]) > float(_tolerance(torch.tensor(p_ref))) + 1e-3):
        # not geometric, and not the scaling asked for (nor a known bug of it)
        expected = intended["expected"]
        k = int(((theta - expected).abs() / expected).argmax())
        why = (f"the frequencies match neither the rope_scaling you give "
               f"({_rope_type(intended['config'])!r}) nor a known bug of it: pair {k} "
               f"turns {float(theta[k]):.5g} rad per position, the rope_scaling's "
               f"{float(expected[k]):.5g} ({float(theta[k] / expected[k]):.4g} times); "
               f"compare your ramp or smoothing with scaling.rope_from_config(config)")
    elif float(ladder_error[worst]) > float(_tolerance(torch.tensor(p_ref))) + 1e-3:
        why = (f"the frequencies do not fall geometrically: pair {worst} turns "
               f"{float(theta[worst]):.4g} rad per position, "
               f"{float(theta[worst] / ladder[worst]):.4g} times the geometric ladder "
               f"through the others (a context-extension scaling such as YaRN or "
               f"Llama 3?)")

    # -- which features rotate ---------------------------------------------------------
    if got_layout == "half" and len(pairs) < n_block:
        # pairs of the block that never turn: a real zero, or too slow to see?
        if math.exp(slope * len(pairs)) * p_ref < 1e-3:
            rotated = list(range(start, start + 2 * n_block))
    fit.fitted["rotated_features"] = len(rotated)

    low = None
    if direct is not None:
        freq_codes, freq_lines, theta_model = direct[:3]
        bits = None
        model_angle = _model_angles(positions, theta_model, sign, None)
        residual = (m - _simulate(dim, pairs, model_angle)).abs().amax(dim=(1, 2))
        fit.fitted.update(_theta=theta_model)
    elif why is None:
        # -- the exponent and the base -------------------------------------------------
        freq_codes, freq_lines, theta_model = _explain_slope(
            slope, base, dim, rotary, len(rotated), n_block, fit.fitted,
            hidden_tail=math.exp(slope * len(pairs)) * p_ref < 1e-3)
        fit.fitted.update(_theta=theta_model[:len(pairs)])
        bits = _position_bits(angles, positions, theta_model[:len(pairs)], sign)
        fit.fitted["position_bits"] = bits
        model_angle = _model_angles(positions, theta_model[:len(pairs)], sign, bits)
        residual = (m - _simulate(dim, pairs, model_angle)).abs().amax(dim=(1, 2))
        worst_pos = int((residual - tol).argmax())
        if float(residual[worst_pos]) > float(tol[worst_pos]):
            why = (f"the best RoPE fitted to fn still misses its output at position "
                   f"{int(positions[worst_pos])} by {float(residual[worst_pos]):.3g}")
    else:
        bits = None
    if why is not None:
        low, why = fail(why)
        if low is None:
            return _not_rope(fit, why)
        freq_codes, freq_lines, model_angle = low
        fit.fitted.update(_theta=theta)
        bits = None
        residual = (m - _simulate(dim, pairs, model_angle)).abs().amax(dim=(1, 2))
    spacing = fit.fitted.get("spacing") or 0
    if (got_layout == "interleaved" and len(rotated) < spacing <= dim - start
            and math.exp(slope * len(pairs)) * p_ref < 1e-3):
        # fn's ladder continues with pairs too slow to see turning
        rotated = list(range(start, start + spacing))
        fit.fitted["rotated_features"] = len(rotated)
    fit.fitted["max_error"] = float(residual.max())

    # -- report --------------------------------------------------------------------------
    intended_pairs = _pairs_of(layout, intended["start"], rotary // 2)
    if got_layout != layout and len(pairs) > 1:
        fit.findings.append("layout")
        ours = _pairs_of(got_layout, start, n_block)
        fit.lines.append(
            f"Layout: pairs {_pair_text(ours)} rotate together, so fn uses the "
            f"{got_layout} layout; the {layout} layout you intend pairs "
            f"{_pair_text(intended_pairs)}. Fix: rotate with layout={layout!r} "
            f"(rope.apply_rope(..., layout={layout!r})), or keep fn and reorder "
            f"the rows of W_q and W_k: {_layout_fix(got_layout, rotary)}.")
    if sign < 0:
        fit.findings.append("rotation-reversed")
        fit.lines.append(
            f"Rotation reversed: at position 1 pair {_pair_text(pairs, 1)} turns by "
            f"{float(angles[1, 0]):.4f} rad, RoPE turns it by +1 (every pair turns "
            f"backwards, so scores depend on m - n with the wrong sign against the "
            f"checkpoint). Fix: (a, b) -> (a cos - b sin, b cos + a sin); "
            f"rotate_half must return (-b, a), and x * cos + rotate_half(x) * sin "
            f"adds the sin term.")
    if flipped:
        fit.findings.append("frequency-reversed")
        fit.lines.append(
            f"Frequency ladder reversed: pair 0 turns slowest "
            f"({float(theta[-1].abs()):.4g} rad per position) and pair "
            f"{len(pairs) - 1} fastest ({float(theta[0].abs()):.4g}); RoPE's pair 0 "
            f"turns fastest (θ_0 = base^0 = 1). Fix: do not flip or reverse inv_freq "
            f"(inv_freq.flip(0), [::-1]); pair i takes base^(-2i/{rotary}). The rest "
            f"is fitted on the ladder read the right way round.")
    fit.findings += freq_codes
    fit.lines += freq_lines
    if bits is not None:
        fit.findings.append("positions-precision")
        name = _FORMATS.get(bits, f"a float format with a {bits}-bit significand")
        examples = [int(p) for p in positions if round_significand(p, bits) != p]
        shown = ", ".join(f"{p} acts as {int(round_significand(p, bits))}"
                          for p in (examples[:1] + examples[-1:]))
        fit.lines.append(
            f"Positions precision: position {shown}: fn rounds positions to {name} "
            f"({bits}-bit significand: integers above {2 ** bits} are not all held) "
            f"before computing the angles. Fix: compute the angles in float32 "
            f"(positions.float() * inv_freq), and cast only cos and sin to the "
            f"model's dtype.")
    if rotated != wanted:
        fit.findings.append("partial-rotary")
        rest = dim - len(rotated)
        fit.lines.append(
            f"Partial rotary: fn rotates {len(rotated)} of the {dim} features "
            f"(features {rotated[0]}..{rotated[-1]}"
            + (f", pairs {_pair_text(pairs)}" if len(rotated) < dim else "")
            + f"; {rest} pass through unchanged); you intend {rotary}"
            + (f" (the {intended['rotary_position']} {rotary}, pairs "
               f"{_pair_text(intended_pairs)})" if rotary < dim else "")
            + (f" (fn rotates the {'last' if rotated[0] > 0 else 'first'} {len(rotated)}: "
               f"if the checkpoint does too, as DeepSeek's MLA rotates the last "
               f"features, pass rotary_position="
               f"{'last' if rotated[0] > 0 else 'first'!r})"
               if len(rotated) == rotary and rotated[0] != intended["start"] else "")
            + f". Fix: rotate exactly rotary_dim = int(head_dim * "
              f"partial_rotary_factor) = {rotary} features, with frequencies spaced "
              f"over them (rope.partial_inv_freq; rope.apply_rope(..., "
              f"rotary_dim={rotary})).")
    if not fit.findings:
        # Clean only if fn reproduces the intended RoPE itself, not just a RoPE.
        want = _simulate(dim, intended_pairs,
                         positions.to(torch.float64)[:, None] * intended["expected"])
        miss = (m - want).abs().amax(dim=(1, 2))
        worst_pos = int((miss - tol).argmax())
        if float(miss[worst_pos]) > float(tol[worst_pos]):
            return _not_rope(fit, f"fn is a RoPE, but not the one you intend: at "
                                  f"position {int(positions[worst_pos])} it differs "
                                  f"from it by {float(miss[worst_pos]):.3g}")
        got_pairs = _pairs_of(got_layout, start, n_block)
        if intended["scaled"]:
            ladder = (f"the frequencies of rope_type {_rope_type(intended['config'])!r} "
                      f"as scaling.rope_from_config computes them (fitted pair 0 "
                      f"{float(theta[0]):.6g}, last pair {float(theta[-1]):.4g} rad "
                      f"per position)")
        else:
            ladder = (f"fitted base {fit.fitted.get('base') or base:g} with exponent "
                      f"{fit.fitted.get('exponent') or f'2i/{rotary}'}")
        fit.lines.append(
            f"fn is RoPE as intended: fitted {got_layout} layout "
            f"({_pair_text(got_pairs)} rotate together), {len(rotated)} rotated "
            f"features, {ladder}, pairs turning forwards, exact positions up to "
            f"{int(positions.max())}; largest difference from the exact rotation "
            f"{float(miss.max()):.2g} (float32 rounding).")
    return _finish(fit)


def _direct_ladders(angles, positions, intended, n_pairs, theta_fit):
    """Ladders that the geometric fit cannot see, tested directly against the
    angles ``(n_pos, n_pairs)``: the intended (scaled) frequencies and the known
    bugs of a scaling, a flat ladder (integer division in the exponent), a
    rising one (``base ** (2i/d)``) and a reversed one. ``(codes, lines,
    theta, sign)`` of the first that reproduces every angle, or ``None``."""
    from ..config_reader import parse_rope_config
    expected, rotary = intended["expected"], intended["rotary"]
    if n_pairs != len(expected):
        return None
    tol = _tolerance(positions)[:, None]
    p = positions.to(torch.float64)[:, None]
    big = theta_fit.abs() * 64 > 1e-3
    first = int(torch.nonzero(big)[0]) if bool(big.any()) else 0
    sign = float(torch.sign(theta_fit[first])) or 1.0

    def fits(theta):
        # float32 rounds an angle p·θ to a few ulp of itself
        allowed = tol + 64 * _EPS32 * p * theta.clamp_min(1.0)
        return bool((_wrap(angles - sign * p * theta).abs() <= allowed).all())

    d = rotary
    candidates = []
    if intended["scaled"]:
        config = intended["config"]
        candidates.append(([], [], expected))
        for code, theta in _inv_freq_candidates(parse_rope_config(config),
                                                config).items():
            if theta.shape == expected.shape:
                candidates.append((["scaling"], [
                    f"Scaling: fn's frequencies are not those of the rope_scaling you "
                    f"give ({_rope_type(config)!r}); a known bug reproduces them: "
                    f"{INV_FREQ_CODES[code]} ({code}). Fix: compute inv_freq with "
                    f"scaling.rope_from_config(config) (transformers' "
                    f"ROPE_INIT_FUNCTIONS) and the ramp or smoothing exactly as "
                    f"there."], theta))
    if n_pairs > 1:
        candidates.append((["frequency-exponent"], [
            f"Frequency exponent: every pair turns 1 rad per position (a flat "
            f"ladder): the exponent is 0 for every pair, which is what integer "
            f"division gives, torch.arange(0, {d}, 2) // {d} (the old meaning of / "
            f"on integer tensors). Fix: inv_freq = 1.0 / base ** (torch.arange(0, "
            f"{d}, 2).float() / {d}), exponent 2i/{d} for pair i."],
            torch.ones_like(expected)))
        candidates.append((["frequency-exponent"], [
            f"Frequency exponent: the frequencies rise with the pair, θ_i = "
            f"base^(+2i/{d}) (pair 1 turns {float(1 / expected[1]):.5g} rad per "
            f"position instead of {float(expected[1]):.5g}): the 1 / (or the minus "
            f"sign of the exponent) is missing. Fix: inv_freq = 1.0 / base ** "
            f"(torch.arange(0, {d}, 2).float() / {d})."], 1 / expected))
        candidates.append((["frequency-reversed"], [
            f"Frequency ladder reversed: pair 0 turns slowest "
            f"({float(expected[-1]):.4g} rad per position) and pair {n_pairs - 1} "
            f"fastest (1 rad per position); RoPE's pair 0 turns fastest (θ_0 = "
            f"base^0 = 1). Fix: do not flip or reverse inv_freq (inv_freq.flip(0), "
            f"[::-1]); pair i takes base^(-2i/{d})."], expected.flip(0)))
    for way in (sign, -sign):       # the first pair's own sign may be aliased
        sign = way
        for codes, lines, theta in candidates:
            if fits(theta):
                return list(codes), list(lines), theta, sign
    return None


def _layout_fix(fn_layout: str, rotary: int) -> str:
    """How to reorder a checkpoint's W_q and W_k for a fn of the other layout."""
    if fn_layout == "half":
        return (f"rope.interleaved_to_half(W, n_heads) converts a checkpoint "
                f"trained interleaved (rows W[perm] within each head, perm = "
                f"rope.layout_permutation({rotary}))")
    return (f"within each head take rows W[torch.argsort(perm)], perm = "
            f"rope.layout_permutation({rotary}) (the inverse of "
            f"rope.interleaved_to_half)")


def _nice(value: float) -> bool:
    """Whether ``value`` is a base someone would type (a common one, or 1-2 digits)."""
    if any(abs(value / b - 1) < 1e-3 for b in _COMMON_BASES):
        return True
    digits = 10 ** (math.floor(math.log10(value)) - 1)
    return abs(value / (round(value / digits) * digits) - 1) < 1e-3


def _formulas(dim: int, rotary: int, n_rotated: int, n_block: int,
              hidden_tail: bool = False) -> list:
    """Candidate exponents ``(e, text, right)`` of a ladder ``θ_i = base**(-e·i)``.

    ``e`` is ``2/d`` (right), ``1/d`` (``i/d``), ``2/(d-2)`` (``linspace`` to
    the last pair) or ``4/d`` (``-2 * arange(0, d, 2) / d``), with ``d`` the
    features fn rotates, the intended number, or the whole head (the two
    partial-rotary conventions), in that order of preference; then, if
    ``hidden_tail`` (the next pair of fn's ladder would turn too slowly to
    see), the powers of two between fn's rotated features and the head. Each comes with its
    ``d``: ``(e, text, right, d)``.
    """
    powers = [2 ** k for k in range(1, 16) if n_rotated < 2 ** k <= dim and hidden_tail]
    spacings = list(dict.fromkeys(d for d in (n_rotated, rotary, dim, 2 * n_block, *powers)
                                  if d >= 2))
    # The whole head's spacing is a convention of its own (p-RoPE) only for a
    # fn that rotates another number of features than intended; for one that
    # rotates the intended rotary_dim < dim it is a wrong exponent.
    allowed = {n_rotated, rotary} | ({dim} if n_rotated != rotary else set())
    out = [(2.0 / d, f"2i/{d}", d in allowed or d in powers, d) for d in spacings]
    out += [(1.0 / d, f"i/{d}", False, d) for d in spacings]
    out += [(2.0 / (d - 2), f"2i/{d - 2}", False, d) for d in spacings if d > 2]
    out += [(4.0 / d, f"4i/{d}", False, d) for d in spacings]
    return out


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


def _denominator_hint(text: str, rotary: int, dim) -> str:
    """Why a ladder ``2i/D`` has the denominator ``D`` it has."""
    if not text.startswith("2i/"):
        return ""
    denominator = int(text.split("/")[1])
    if dim is not None and denominator == dim and rotary < dim:
        return (f"; {denominator} in the denominator is the whole head (head_dim), "
                f"but only rotary_dim = {rotary} features rotate: space the "
                f"frequencies over the rotated features")
    if denominator > (dim or rotary):
        return (f"; {denominator} in the denominator is larger than the head: "
                f"hidden_size (n_heads × head_dim) used instead of head_dim?")
    return ""


def _frequency_report(fitted_base: float, e: float, text: str, right: bool, base: float,
                      rotary: int, n: int, dim: int | None = None) -> tuple[list, list]:
    codes, lines = [], []
    if abs(math.log(fitted_base / base)) >= 1e-3:
        codes.append("base")
        lines.append(f"Base: fn's frequencies fit base {fitted_base:.6g} "
                     f"(θ_i = {fitted_base:.6g}^(-{text})); you intend {base:g}, so "
                     f"pair 1 turns {fitted_base ** -e:.5g} rad per position instead of "
                     f"{base ** (-2 / rotary):.5g}. Fix: pass the model's rope_theta "
                     f"({base:g}) as the base.")
    if not right:
        codes.append("frequency-exponent")
        lines.append(f"Frequency exponent: the frequencies fall as base^(-{text}) "
                     f"(ln θ_i falls {e * math.log(fitted_base):.5g} per pair; "
                     f"base^(-2i/{rotary}) falls {2 * math.log(fitted_base) / rotary:.5g}), "
                     f"so the slowest pair turns {fitted_base ** (-e * (n - 1)):.3g} "
                     f"rad per position instead of "
                     f"{fitted_base ** (-2 * (n - 1) / rotary):.3g}"
                     + _denominator_hint(text, rotary, dim)
                     + f". Fix: inv_freq = 1 / "
                     f"base ** (torch.arange(0, {rotary}, 2) / {rotary}), that is 2i/d "
                     f"for pair i (rope.inv_freq({rotary}, base)).")
    return codes, lines


def _explain_slope(slope: float, base: float, dim: int, rotary: int, n_rotated: int,
                   n_block: int, fitted: dict, hidden_tail: bool = False):
    """Codes, sentences and the model's frequencies for the ladder slope ``a``.

    A ladder ``θ_i = base'**(-e·i)`` has ``a = -e·ln(base')``: each candidate
    exponent (:func:`_formulas`) implies a base; the most plausible pair
    (:func:`_rank`) is the explanation.
    """
    n = max(n_block, 1)
    if slope >= 0 or n == 1:
        fitted.update(base=None, exponent=None)
        return [], [], torch.ones(n, dtype=torch.float64)
    best = min(((_rank(min(_safe_exp(-slope / e), 1e300), base, right), k, e, text,
                 right, d)
                for k, (e, text, right, d) in enumerate(_formulas(
                    dim, rotary, n_rotated, n_block, hidden_tail))))
    d_free = -2 * math.log(base) / slope
    if best[0] >= 3 and abs(d_free - round(d_free)) <= 1e-4 * d_free and \
            round(d_free) % 2 == 0:
        # The intended base with another denominator (hidden_size, say) fits
        # better than an odd base with a right one.
        d_free = round(d_free)
        best = (best[0], -1, 2.0 / d_free, f"2i/{d_free}", False, d_free)
    _, _, e, text, right, spacing = best
    fitted_base = _safe_exp(-slope / e)
    if not math.isfinite(fitted_base) or fitted_base > 1e300:
        raise _Unfitted(f"the ladder's slope {slope:.4g} per pair implies a base beyond "
                        f"1e300 for every exponent")
    if abs(math.log(fitted_base / base)) < 1e-3:
        fitted_base = base
    fitted.update(base=fitted_base, exponent=text, spacing=spacing)
    codes, lines = _frequency_report(fitted_base, e, text, right, base, rotary, n, dim)
    idx = torch.arange(n, dtype=torch.float64)
    return codes, lines, torch.pow(fitted_base, -e * idx)


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


def _mixed_tables(m, positions, pairs, got_layout, intended, fit) -> Diagnosis:
    """Blocks that are not rotations: cos and sin laid out for the other pairing?"""
    layout = intended["layout"]
    diag = torch.diagonal(m[1:4], dim1=-2, dim2=-1)           # cos at positions 1..3
    rotated = sorted({f for pair in pairs for f in pair})
    r = len(rotated)
    tables = []
    for name in rope.LAYOUTS:
        if name == got_layout:
            continue
        same = [(a, b) for a, b in _pairs_of(name, rotated[0], r // 2)]
        if all(torch.allclose(diag[:, a], diag[:, b], atol=1e-4) for a, b in same):
            tables.append(name)
    a, b = pairs[0]
    turn = float(m[1, b, a] - m[1, a, b])
    if not tables:
        block = m[:, rotated][:, :, rotated]
        for name, dtype in _LOW.items():
            if torch.equal(block.to(dtype).to(torch.float64), block):
                return _not_rope(fit, f"every entry of fn's rotations is a {name} "
                                      f"number: fn rounds its cos and sin tables to "
                                      f"{name} (largest error about "
                                      f"{2.0 ** -(8 if name == 'bfloat16' else 11):.2g}"
                                      f"), so no float32 rotation reproduces it. That "
                                      f"is expected of a model that runs in {name}: "
                                      f"check the float32 path (x.float(), tables in "
                                      f"float32) with this diagnosis, and the {name} "
                                      f"path against a reference in {name} with a "
                                      f"tolerance of a few {name} ulps")
        scale = torch.linalg.matrix_norm(m[:, :, rotated[0]:rotated[0] + 1], ord=2)
        return _not_rope(fit, f"the 2x2 blocks of the pairs {_pair_text(pairs)} are not "
                              f"rotations (column norms up to {float(scale.max()):.4g}; "
                              f"cos and sin of one angle are needed)")
    table = tables[0]
    fit.fitted.update(layout=got_layout, cos_sin_layout=table)
    fit.findings.append("layout")
    wrong = got_layout if got_layout != layout else table
    fit.lines.append(
        f"Layout: fn pairs the features as in the {got_layout} layout (pairs "
        f"{_pair_text(pairs)} rotate together) but lays cos and sin out for the "
        f"{table} layout, so each pair mixes two different angles; the {layout} layout "
        f"you intend pairs {_pair_text(_pairs_of(layout, 0, intended['rotary'] // 2))}. "
        f"Fix: build cos and sin for the same layout as the pairs (rope.cos_sin(..., "
        f"layout={layout!r}) with rope.apply_cos_sin(..., layout={layout!r})); the "
        f"{wrong} part is the one to change.")
    if turn < 0:
        fit.findings.append("rotation-reversed")
        fit.lines.append("Rotation reversed: at position 1 the first pair turns "
                         "backwards. Fix: (a, b) -> (a cos - b sin, b cos + a sin).")
    fit.lines.append("The frequencies were not fitted: fix the layout first and run "
                     "the diagnosis again.")
    return _finish(fit)


# -- inv_freq against a config ---------------------------------------------------------

#: What :func:`diagnose_inv_freq` can name: known variants (another rope_type
#: than the config's) and known bugs (mostly the book's mutation catalogue).
INV_FREQ_CODES = {
    "scaling-ignored": "the config's rope scaling ignored: plain RoPE frequencies",
    "frequency-exponent": "exponent i/d instead of 2i/d",
    "base": "a base other than the config's rope_theta",
    "partial-rotary-ignored": "partial_rotary_factor ignored: frequencies for the whole head",
    "linear-factor-multiplied": "linear scaling multiplies θ_i by factor instead of dividing",
    "ntk-exponent-dropped": "NTK-aware base without the exponent d/(d-2)",
    "yarn-ramp-inverted": "YaRN ramp inverted: fast pairs interpolated, slow kept",
    "yarn-clamp-half-dim": "YaRN's correction range clamped at dim//2 - 1 instead of dim - 1",
    "yarn-no-truncate": "YaRN's correction range not rounded outwards (truncate)",
    "yarn-original-ignored": "YaRN reads max_position_embeddings, not "
                             "original_max_position_embeddings",
    "llama3-smoothing-inverted": "Llama 3 smoothing weights swapped",
    "unknown": "none of the known variants or bugs reproduces it",
}


def _inv_freq_candidates(rope_cfg, config: Mapping) -> dict:
    """Frequencies of every known variant or bug that applies to this config."""
    from .. import scaling
    dim, base, kind, params = rope_cfg.dim, rope_cfg.base, rope_cfg.rope_type, rope_cfg.params
    idx = torch.arange(dim // 2, dtype=torch.float64)
    plain = rope.inv_freq(dim, base, dtype=torch.float64)
    out = {"frequency-exponent": base ** (-idx / dim)}
    if kind != "default":
        out["scaling-ignored"] = plain
    if rope_cfg.head_dim != dim:
        try:
            out["partial-rotary-ignored"] = scaling.rope_parameters(
                kind, rope_cfg.head_dim, base, dtype=torch.float64, **params)[0]
        except ValueError:
            pass
    factor = params.get("factor")
    if kind == "linear":
        out["linear-factor-multiplied"] = plain * factor
    if kind in ("ntk", "dynamic"):
        out["ntk-exponent-dropped"] = rope.inv_freq(dim, base * factor, dtype=torch.float64)
    if kind == "yarn":
        beta_fast = params.get("beta_fast") or 32.0
        beta_slow = params.get("beta_slow") or 1.0
        length = params["original_max_position_embeddings"]
        truncate = params.get("truncate", True)
        truncate = True if truncate is None else truncate

        def yarn(low, high, inverted=False):
            if low == high:
                high += 0.001
            w = ((idx - low) / (high - low)).clamp(0, 1)
            if inverted:
                w = 1 - w
            return plain * (1 - w) + plain / factor * w

        low, high = scaling.yarn_correction_range(dim, base, length, beta_fast, beta_slow,
                                                  truncate=truncate)
        out["yarn-ramp-inverted"] = yarn(low, high, inverted=True)
        out["yarn-clamp-half-dim"] = yarn(low, min(high, dim // 2 - 1))
        out["yarn-no-truncate"] = yarn(*scaling.yarn_correction_range(
            dim, base, length, beta_fast, beta_slow, truncate=False))
        longest = rope_cfg.max_position_embeddings
        if longest and longest != length:
            out["yarn-original-ignored"] = yarn(*scaling.yarn_correction_range(
                dim, base, longest, beta_fast, beta_slow, truncate=truncate))
    if kind == "llama3":
        length = params["original_max_position_embeddings"]
        lo, hi = params["low_freq_factor"], params["high_freq_factor"]
        wavelength = 2 * math.pi / plain
        smooth = ((length / wavelength - lo) / (hi - lo)).clamp(0, 1)
        smooth = torch.where(wavelength < length / hi, 1.0,
                             torch.where(wavelength > length / lo, 0.0, smooth))
        out["llama3-smoothing-inverted"] = plain * (1 - smooth) + plain / factor * smooth
    return out


def diagnose_inv_freq(inv_freq, config: Mapping) -> Diagnosis:
    """Which known variant or bug reproduces the ``inv_freq`` computed for ``config``.

    The reference is :func:`posenc_lib.scaling.rope_from_config` (transformers
    4.57's numbers). A match within float32 rounding (relative ``1e-5``) gives
    no findings; otherwise every known variant or bug in :data:`INV_FREQ_CODES`
    that applies to the config's ``rope_type`` is computed and the ones that
    reproduce ``inv_freq`` are named. Plain-RoPE frequencies with another base
    are fitted (``"base"``).

    Args:
        inv_freq: ``(dim/2,)`` floating-point tensor (or sequence), the user's.
        config: a parsed ``config.json`` (as for ``rope_from_config``).

    Returns:
        :class:`Diagnosis`; codes from :data:`INV_FREQ_CODES`.
    """
    from ..config_reader import parse_rope_config
    from .. import scaling
    if not isinstance(inv_freq, Tensor):
        try:
            inv_freq = torch.as_tensor(inv_freq, dtype=torch.float64)
        except Exception:
            raise ValueError(f"inv_freq must be a tensor or a sequence of numbers, got "
                             f"{type(inv_freq).__name__}") from None
    _validate.tensor("inv_freq", inv_freq, min_dim=1, floating=True)
    if inv_freq.dim() != 1:
        raise ValueError(f"inv_freq must be 1-D (dim/2,), got shape {tuple(inv_freq.shape)}")
    _validate.finite_tensor("inv_freq", inv_freq)
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a mapping (a parsed config.json), got "
                         f"{type(config).__name__}")
    rope_cfg = parse_rope_config(config)
    expected, _ = scaling.rope_from_config(config, dtype=torch.float64)
    got = inv_freq.detach().to("cpu", torch.float64)
    rtol = 1e-5

    def matches(candidate):
        return (candidate.shape == got.shape
                and bool(((candidate - got).abs() <= rtol * candidate.abs()).all()))

    what = f"rope_type {rope_cfg.rope_type!r}, dim {rope_cfg.dim}, base {rope_cfg.base:g}"
    fitted = {"rope_type": rope_cfg.rope_type, "dim": rope_cfg.dim, "base": rope_cfg.base}
    if matches(expected):
        return Diagnosis([], f"inv_freq matches the config ({what}) within float32 "
                             f"rounding.", fitted)
    found = [code for code, cand in _inv_freq_candidates(rope_cfg, config).items()
             if matches(cand)]
    if found:
        text = "; ".join(f"{c}: {INV_FREQ_CODES[c]}" for c in found)
        return Diagnosis(found, f"inv_freq does not match the config ({what}); it is "
                                f"reproduced by {text}. Fix: compute it with "
                                f"scaling.rope_from_config(config).", fitted)
    if got.shape != expected.shape:
        return Diagnosis(["unknown"], f"inv_freq has {got.shape[0]} frequencies; the "
                                      f"config rotates {rope_cfg.dim} features, so "
                                      f"{rope_cfg.dim // 2} are expected ({what}).", fitted)
    if len(got) > 1 and float(got[0]) == 1.0 and bool((got > 0).all()):
        idx = torch.arange(len(got), dtype=torch.float64)
        slope = float((idx * got.log()).sum() / (idx * idx).sum())
        fitted_base = math.exp(-slope * rope_cfg.dim / 2)
        if rope_cfg.rope_type == "default" and matches(
                rope.inv_freq(rope_cfg.dim, fitted_base, dtype=torch.float64)):
            fitted["fitted_base"] = fitted_base
            return Diagnosis(["base"], f"inv_freq is plain RoPE with base "
                                       f"{fitted_base:.6g}; the config's rope_theta "
                                       f"is {rope_cfg.base:g}. Fix: read rope_theta "
                                       f"from the config.", fitted)
    ratio = got / expected
    worst = int((ratio - 1).abs().argmax())
    return Diagnosis(["unknown"], f"inv_freq does not match the config ({what}), and "
                                  f"none of the known variants or bugs reproduces it: "
                                  f"pair {worst} is {float(ratio[worst]):.5g} times the "
                                  f"expected {float(expected[worst]):.5g}.", fitted)


# -- command line ----------------------------------------------------------------------

def _load(target: str) -> Callable:
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise ValueError(f"target must be path/to/module.py:function, got {target!r}")
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"target: no file {path!r}")
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as error:      # SystemExit too: the user's module
        raise ValueError(f"target: importing {path} raised {type(error).__name__}: "
                         f"{error}") from error
    finally:
        sys.path.pop(0)
    if not hasattr(module, name):
        raise ValueError(f"target: {path} defines no {name!r}")
    return getattr(module, name)


def main(argv=None) -> int:
    """``python -m posenc_lib diagnose path/to/module.py:function --dim 128 ...``.

    Prints the findings and the explanation; exits 0 when nothing was found,
    1 when something was, 2 on a bad argument or a ``fn`` that fails.
    """
    parser = argparse.ArgumentParser(
        prog="python -m posenc_lib diagnose",
        description="Diagnose a RoPE implementation fn(x, positions) -> rotated x, "
                    "x (batch, seq, dim) float32, positions (seq,) int64.")
    parser.add_argument("target", help="path/to/module.py:function")
    parser.add_argument("--dim", type=int, default=None,
                        help="features per head (required without --config)")
    parser.add_argument("--base", type=float, default=None,
                        help="intended base (default 10000, or the config's)")
    parser.add_argument("--layout", default=None, help="intended layout: half or "
                                                       "interleaved (default half, or "
                                                       "the config's model's)")
    parser.add_argument("--rotary-dim", type=int, default=None,
                        help="features meant to rotate (default: all)")
    parser.add_argument("--rope-scaling", default=None, metavar="JSON",
                        help='the rope_scaling block, as in config.json: '
                             '\'{"rope_type": "yarn", "factor": 4.0, '
                             '"original_max_position_embeddings": 4096}\'')
    parser.add_argument("--max-position-embeddings", type=int, default=None,
                        help="the config's max_position_embeddings (dynamic; yarn "
                             "without original_max_position_embeddings)")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="sequence length fn's frequencies are for (dynamic, "
                             "longrope)")
    parser.add_argument("--config", default=None, metavar="config.json",
                        help="a model's config.json: dim, base, partial rotary, "
                             "scaling and layout read from it")
    parser.add_argument("--max-position", type=int, default=None,
                        help="largest probed position (default: the context the "
                             "config or --max-position-embeddings gives, else 8191)")
    parser.add_argument("--rotary-position", default="first",
                        help="first (default) or last: where the rotated slice sits")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds each call of fn may take")
    args = parser.parse_args(argv)
    try:
        import json
        fn = _load(args.target)
        scaling_block = config = None
        if args.rope_scaling is not None:
            try:
                scaling_block = json.loads(args.rope_scaling)
            except json.JSONDecodeError as error:
                raise ValueError(f"--rope-scaling is not JSON: {error}") from None
        if args.config is not None:
            try:
                config = json.loads(Path(args.config).read_text())
            except (OSError, json.JSONDecodeError, RecursionError,
                    UnicodeDecodeError) as error:
                raise ValueError(f"--config: cannot read {args.config}: "
                                 f"{type(error).__name__}: {error}") from None
        result = diagnose_rope(fn, dim=args.dim, base=args.base, layout=args.layout,
                               rotary_dim=args.rotary_dim, rope_scaling=scaling_block,
                               max_position_embeddings=args.max_position_embeddings,
                               seq_len=args.seq_len, config=config,
                               max_position=args.max_position,
                               rotary_position=args.rotary_position,
                               timeout=args.timeout)
    except KeyboardInterrupt:
        raise
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RecursionError:
        print("error: --config: the JSON is nested too deeply to read", file=sys.stderr)
        return 2
    except BaseException as error:      # the front door: one line, never a traceback
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    print(result)
    return 1 if result.findings else 0


if __name__ == "__main__":
    sys.exit(main())
