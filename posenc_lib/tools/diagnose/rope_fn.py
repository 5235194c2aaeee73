""":func:`diagnose_rope`, the entry point for a user's ``fn(x, positions)``:
reads the intended RoPE, probes ``fn`` and runs the phases (structure,
frequency fit, explanation, findings) over its matrices.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import torch
from torch import Tensor

from ... import _validate, rope
from . import fit as _fit
from .explanation import (
    _attention_report,
    _direct_ladders,
    _dynamic_length,
    _entries,
    _explain_phase,
    _explain_slope,
    _formulas,
    _frequency_report,
    _layout_fix,
    _rope_type,
    _scaled_twice,
    _schedule,
    _zero_pairs,
)
from .findings import CODES, Diagnosis, _finish, _Fit, _not_rope, _order
from .fit import (
    _LOW,
    _bits_map,
    _fit_frequencies,
    _fit_low_precision,
    _low_precision_angles,
    _position_bits,
)
from .structure import (
    _EPS32,
    _FORMATS,
    _block_angles,
    _call,
    _column_scale,
    _FnError,
    _layout_of,
    _model_angles,
    _pair_text,
    _pairs_of,
    _positions_used,
    _simulate,
    _structure,
    _tolerance,
    _wrap,
    round_significand,
)


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
    first (``posenc_lib.tools.diagnose.fit``: the position map, per-pair
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
        ``fn`` is RoPE as intended within float32 rounding) and ``explanation``
        (for a clean ``fn``, also what was not probed: positions above
        ``max_position``, inputs other than float32, a head axis).

    Raises:
        ValueError: naming the parameter, for a bad argument; and when ``fn``
            raises (``SystemExit`` included), exceeds ``timeout``, returns
            something other than a real tensor shaped like ``x`` (a ``meta``
            tensor included), or returns NaN or inf.
    """
    if not callable(fn):
        raise ValueError(f"fn must be callable, got {type(fn).__name__}")
    again = dict(dim=dim, base=base, layout=layout, rotary_dim=rotary_dim,
                 rope_scaling=rope_scaling, max_position_embeddings=max_position_embeddings,
                 seq_len=seq_len, config=config, max_position=max_position, seed=seed,
                 rotary_position=rotary_position, timeout=timeout)
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
    converted = _layout_conversion(m, intended)
    if converted is not None:
        return _diagnose_converted(fn, converted, intended, again)
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
        free = intended.get("free_rotation")
        if free is not None and result.findings and set(result.findings) <= {
                "pair-block", "not-rope"}:
            # the blocks were proven rotations at constant per-pair frequencies
            # with every position its own: the frequencies are what is wrong
            result = Diagnosis(free[0], free[1], result.fitted)
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


def _layout_conversion(m, intended):
    """``(P, from, to)`` when ``fn`` is, at position 0 (where RoPE is the
    identity), the permutation that moves the rotated features from one
    layout's order to the other's (a conversion ``rope.interleaved_to_half``
    does for weights, left in the kernel), else ``None``."""
    dim, rotary, start = intended["dim"], intended["rotary"], intended["start"]
    if rotary < 4:
        return None          # one pair: the two layouts are the same order
    m0 = m[0]
    tol = 1e-4 + 4 * intended["noise"]
    for src, dst in (("half", "interleaved"), ("interleaved", "half")):
        p = torch.eye(dim, dtype=torch.float64)
        p[start:start + rotary] = 0.0
        for (a, b), (c, d) in zip(_pairs_of(src, start, rotary // 2),
                                  _pairs_of(dst, start, rotary // 2)):
            p[c, a] = 1.0
            p[d, b] = 1.0
        if float((m0 - p).abs().max()) <= tol:
            return p, src, dst
    return None


def _diagnose_converted(fn, converted, intended, again):
    """The diagnosis of ``fn`` whose outputs come out in the other layout's order:
    ``"layout"``, then what the same ``fn`` with its outputs put back in order
    does (diagnosed again)."""
    p, src, dst = converted
    pt = p.to(torch.float32)

    def reordered(x, positions):
        out = fn(x, positions)
        return out @ pt.to(out.dtype).to(out.device)

    inner = diagnose_rope(reordered, **again)
    line = (f"Layout: at position 0, where RoPE is the identity, fn moves its "
            f"features from the {src} layout's order to the {dst} layout's (feature "
            f"{intended['start'] + 1} comes out at "
            f"{int(p[:, intended['start'] + 1].argmax())}): it rotates in one layout "
            f"and writes (or reads) the features in the other, a layout conversion "
            f"left in the kernel. Fix: return the features in the order they came "
            f"in; convert the checkpoint's q and k weights instead "
            f"(rope.interleaved_to_half).")
    rest = ("With the outputs put back in order, fn is RoPE as intended."
            if inner.ok else "With the outputs put back in order:\n" + inner.explanation)
    codes = _order(["layout"] + [c for c in inner.findings if c != "layout"])
    return Diagnosis(codes, line + "\n" + rest, dict(inner.fitted, output_order=dst))


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
    """Fit, then explain (see ``posenc_lib.tools.diagnose.fit``): the position map
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
    top = int(positions.max())
    fit.lines.append(
        f"Not probed: positions above {top} (a cache that wraps or clamps beyond them "
        f"is invisible here: give the model's full context as max_position_embeddings "
        f"or max_position); x other than float32 (fn's low-precision path); and heads: "
        f"fn is called on (batch, seq, dim) and its batch rows are checked, so a bug "
        f"in some heads only shows if fn maps that batch onto heads.")
    fit.fitted.update(base=intended["base"], exponent=f"2i/{intended['rotary']}",
                      sign=1.0, position_bits=None,
                      not_probed=("positions above max_position", "x not float32",
                                  "head axis"))
    return Diagnosis([], "\n".join(fit.lines), fit.fitted)


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
    from ...config_reader import parse_rope_config
    from ..inspector import _pair_layout
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


def _expected(config, rotary, base, seq_len):
    """The intended ``(inv_freq (rotary/2,) float64, attention factor)``."""
    from ... import scaling
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


def _low_precision_fallback(why, fit, *, dim, angles, positions, pairs, rotated, sign,
                           slope, p_ref, rotary, n_block, base):
    """``((codes, lines, angle), None)`` when a low-precision dtype explains the
    angles that no exact ladder fits; ``(None, why)`` otherwise.

    Called by :func:`_diagnose_matrices` with the values it holds at that point
    (after a rising ladder was flipped and the slope fitted).
    """
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
        low, why = _low_precision_fallback(
            why, fit, dim=dim, angles=angles, positions=positions, pairs=pairs,
            rotated=rotated, sign=sign, slope=slope, p_ref=p_ref, rotary=rotary,
            n_block=n_block, base=base)
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
