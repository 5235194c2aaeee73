"""Context extension for RoPE, in the vocabulary of Hugging Face transformers.

:func:`rope_parameters` returns the rotation frequencies ``inv_freq`` and the
``attention_factor`` of a RoPE variant, given the same ``rope_type`` and
parameter names as a model's ``rope_scaling`` (transformers 4.x) or
``rope_parameters`` (5.x) configuration, so a reader can paste a config::

    rope_parameters(dim=128, base=500000.0, **{"rope_type": "llama3", "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192})

The methods are collected in :data:`ROPE_SCALINGS`, keyed by ``rope_type``:

========== ================================= ==============================================
rope_type  method                            parameters
========== ================================= ==============================================
default    plain RoPE                        none
linear     position interpolation (PI)       factor
ntk        static NTK-aware                  factor
dynamic    dynamic NTK                       factor, max_position_embeddings, seq_len,
                                             original_max_position_embeddings (unused)
yarn       YaRN (NTK-by-parts + temperature) factor, original_max_position_embeddings,
                                             beta_fast, beta_slow, mscale, mscale_all_dim,
                                             attention_factor, truncate
llama3     Llama 3.1 bands                   factor, low_freq_factor, high_freq_factor,
                                             original_max_position_embeddings
longrope   LongRoPE                          short_factor, long_factor, factor,
                                             original_max_position_embeddings,
                                             attention_factor, seq_len
========== ================================= ==============================================

transformers 5.x adds ``"proportional"`` (p-RoPE: the fastest
``int(partial_rotary_factor·dim // 2)`` pairs of the whole head keep their
frequencies, the others get 0, all divided by ``factor``), also registered.

Every method changes the frequencies ``θ_i`` only (``"linear"`` too: dividing
every ``θ_i`` by ``factor`` is the same as dividing every position by it), and
some also return an ``attention_factor`` that multiplies cos and sin, hence
every query-key logit by its square.

The module also holds the small tools the context-extension chapter measures
with (which pairs leave their trained angle range, the per-pair interpolation
weight, the least-squares fit of the PI paper's Figure 2) and Llama 4's
attention temperature for its NoPE layers.
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from . import _validate, serving
from . import config_reader
from .config_reader import parse_rope_config
from .per_layer import layer_config, llama4_no_rope_layers  # noqa: F401 (kept importable here)

__all__ = [
    "RopeScaling",
    "RopeConfigWarning",
    "ROPE_SCALINGS",
    "rope_parameters",
    "ntk_base",
    "yarn_correction_range",
    "yarn_attention_factor",
    "rotations",
    "interpolation_weight",
    "angle_range_ratio",
    "out_of_range_pairs",
    "extension_inv_freqs",
    "score_function",
    "fit_score_function",
    "random_score_fit",
    "interpolation_bound",
    "llama4_attn_scales",
    "rope_from_config",
]


class RopeConfigWarning(UserWarning):
    """A value transformers 4.57 computes anyway, though its validator (where the
    model's config class runs one) logs a warning about it."""


# -- the registry ---------------------------------------------------------------------

@dataclass(frozen=True)
class RopeScaling:
    """One ``rope_type``: how to compute it, and which parameters it takes.

    Attributes:
        compute: ``compute(dim, base, seq_len, **params) -> (inv_freq, attention_factor)``
            with ``inv_freq`` in float64; ``params`` holds every parameter in
            ``required`` and ``optional`` (defaults filled in).
        required: parameters that must be given.
        optional: the other accepted parameters and their defaults.
        min_dim: smallest rotary ``dim`` the formula allows.
    """

    compute: Callable[..., "tuple[Tensor, float]"]
    required: tuple = ()
    optional: Mapping[str, Any] = None
    min_dim: int = 2

    def __post_init__(self):
        object.__setattr__(self, "optional", dict(self.optional or {}))


@functools.lru_cache(maxsize=64)
def _exponents(dim: int) -> Tensor:
    """``2i/dim`` for ``i = 0 .. dim/2 - 1``, float64 (cached: rope_parameters is hot)."""
    return torch.arange(0, dim, 2, dtype=torch.float64) / dim


def _default_inv_freq(dim: int, base: float) -> Tensor:
    # 1 / base**(2i/dim), rounded exactly as rope.inv_freq, in two cheap kernels.
    return torch.pow(base, _exponents(dim)).reciprocal_()


def _factor(value, name: str = "factor") -> float:
    return _validate.finite_float(name, value, at_least=1.0)


def _shrink_factor(value, rope_type: str) -> float:
    """A ``factor`` of linear, dynamic, YaRN or Llama 3 scaling: finite and > 0.

    transformers 4.57 computes a factor below 1 (frequencies sped up, not slowed
    down) and only logs "factor field must be a float >= 1"; it is computed here
    too, with a :class:`RopeConfigWarning`. A factor <= 0 would give infinite or
    negative frequencies and is rejected.
    """
    factor = _validate.finite_float("factor", value, greater_than=0.0)
    if factor < 1:
        warnings.warn(f"factor={factor} < 1 speeds the {rope_type} frequencies up "
                      f"instead of slowing them down; computed as transformers 4.57 "
                      f"computes it (its validator logs that factor should be >= 1)",
                      RopeConfigWarning, stacklevel=4)
    return factor


def _length(name: str, value) -> int:
    if isinstance(value, Tensor) and value.dim() == 0 and not value.is_floating_point():
        value = int(value)
    return _validate.positive_int(name, value)


def ntk_base(base: float, factor: float, dim: int) -> float:
    """Static NTK-aware base ``base · factor**(dim/(dim-2))``.

    The exponent ``dim/(dim-2)`` is what makes the slowest pair ``i = dim/2 - 1``
    turn exactly ``factor`` times slower, while pair 0 keeps ``θ_0 = 1``.
    """
    dim = _validate.even_int("dim", dim, minimum=4)
    base = _validate.finite_float("base", base, greater_than=1.0)
    factor = _factor(factor)
    return base * factor ** (dim / (dim - 2))


def _default(dim, base, seq_len):
    return _default_inv_freq(dim, base), 1.0


def _linear(dim, base, seq_len, *, factor):
    return _default_inv_freq(dim, base) / _shrink_factor(factor, "linear"), 1.0


def _ntk(dim, base, seq_len, *, factor):
    return _default_inv_freq(dim, ntk_base(base, factor, dim)), 1.0


def _dynamic(dim, base, seq_len, *, factor, max_position_embeddings,
             original_max_position_embeddings):
    factor = _shrink_factor(factor, "dynamic")
    max_len = _length("max_position_embeddings", max_position_embeddings)
    if original_max_position_embeddings is not None:
        # Accepted and unused, as by transformers 4.57, whose dynamic function
        # reads config.max_position_embeddings only: a pasted config must work.
        _length("original_max_position_embeddings", original_max_position_embeddings)
    # Up to max_position_embeddings (L) this is plain RoPE. Beyond, the NTK scale
    # factor·n/L - (factor - 1) grows with the length n: 1 at n = L, and at
    # n = factor·L it is factor² - factor + 1, not factor (only factor = 1 gives n/L).
    length = max_len if seq_len is None else max(seq_len, max_len)
    scale = factor * length / max_len - (factor - 1)
    return _default_inv_freq(dim, base * scale ** (dim / (dim - 2))), 1.0


def yarn_correction_range(dim: int, base: float, original_max_position_embeddings: int,
                          beta_fast: float = 32.0, beta_slow: float = 1.0, *,
                          truncate: bool = True) -> tuple[float, float]:
    """The pair indices ``(low, high)`` between which YaRN's ramp runs.

    Pair ``i`` turns ``r_i = L / λ_i`` times within the original context
    ``L``; ``low`` is where ``r = beta_fast`` and ``high`` where
    ``r = beta_slow``, solved for ``i`` from ``λ_i = 2π·base**(2i/dim)``. With
    ``truncate`` they are rounded outwards (floor, ceil), as in the reference
    code; both are then clamped to ``[0, dim - 1]`` (transformers' bound, not
    ``dim/2 - 1``). ``beta_fast <= beta_slow`` is accepted, as transformers
    4.57 accepts it (it logs a warning): equal betas give a zero-width or
    one-pair ramp (see the guard in the ramp), and ``beta_fast < beta_slow``
    gives ``low > high``, a ramp that falls instead of rising, computed by the
    same formula. A :class:`RopeConfigWarning` says so.
    """
    dim = _validate.even_int("dim", dim)
    length = _length("original_max_position_embeddings",
                     original_max_position_embeddings)
    beta_fast = _validate.finite_float("beta_fast", beta_fast, greater_than=0.0)
    beta_slow = _validate.finite_float("beta_slow", beta_slow, greater_than=0.0)
    if beta_fast < beta_slow:
        warnings.warn(f"beta_fast={beta_fast} < beta_slow={beta_slow}: the ramp runs "
                      f"backwards; computed as transformers 4.57 computes it",
                      RopeConfigWarning, stacklevel=2)

    def pair_index(turns: float) -> float:
        return dim * math.log(length / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_index(beta_fast), pair_index(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, dim - 1)


def yarn_attention_factor(factor: float, mscale: float | None = None,
                          mscale_all_dim: float | None = None) -> float:
    """YaRN's ``attention_factor`` ``√(1/t)`` when the config does not set it.

    ``0.1·ln(factor) + 1`` (1 for ``factor <= 1``); if both ``mscale`` and
    ``mscale_all_dim`` are set (and non-zero), the ratio
    ``(0.1·mscale·ln s + 1) / (0.1·mscale_all_dim·ln s + 1)`` instead, as in
    DeepSeek's configs. ``mscale`` alone is ignored, exactly as transformers does.
    """
    factor = _validate.finite_float("factor", factor, greater_than=0.0)

    def get_mscale(scale: float, weight: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0

    if mscale and mscale_all_dim:
        return get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
    return get_mscale(factor)


def _yarn(dim, base, seq_len, *, factor, original_max_position_embeddings, beta_fast,
          beta_slow, mscale, mscale_all_dim, attention_factor, truncate):
    factor = _shrink_factor(factor, "yarn")
    if not isinstance(truncate, bool):
        raise ValueError(f"truncate must be True or False, got {truncate!r}")
    for name, value in (("mscale", mscale), ("mscale_all_dim", mscale_all_dim)):
        if value is not None:
            _validate.finite_float(name, value, at_least=0.0)
    if attention_factor is None:
        attention_factor = yarn_attention_factor(factor, mscale, mscale_all_dim)
    else:
        attention_factor = _validate.finite_float("attention_factor", attention_factor,
                                                  at_least=0.0)
        if attention_factor == 0:
            warnings.warn("attention_factor=0 multiplies cos and sin by 0, so every "
                          "rotated logit is 0; computed as transformers 4.57 computes "
                          "it (its validator logs only a non-float or negative value)",
                          RopeConfigWarning, stacklevel=3)
    low, high = yarn_correction_range(dim, base, original_max_position_embeddings,
                                      beta_fast, beta_slow, truncate=truncate)
    if low == high:
        high += 0.001  # the reference code's guard against a zero-width ramp
    # weight 0: keep θ_i (extrapolate); weight 1: θ_i / factor (interpolate).
    pairs = torch.arange(dim // 2, dtype=torch.float64)
    weight = ((pairs - low) / (high - low)).clamp(0, 1)
    inv_freq = _default_inv_freq(dim, base)
    return inv_freq * (1 - weight) + inv_freq / factor * weight, attention_factor


def _llama3(dim, base, seq_len, *, factor, low_freq_factor, high_freq_factor,
            original_max_position_embeddings):
    factor = _shrink_factor(factor, "llama3")
    low = _validate.finite_float("low_freq_factor", low_freq_factor,
                                 greater_than=0.0)
    high = _validate.finite_float("high_freq_factor", high_freq_factor,
                                  greater_than=0.0)
    if not low < high:  # transformers 4.57 warns and computes a hard cut
        warnings.warn(f"low_freq_factor={low} >= high_freq_factor={high}: no band is "
                      f"smoothed; pairs with wavelength > L/low_freq_factor are "
                      f"divided by factor, the others kept, as transformers 4.57 "
                      f"computes it", RopeConfigWarning, stacklevel=2)
    length = _length("original_max_position_embeddings",
                     original_max_position_embeddings)
    inv_freq = _default_inv_freq(dim, base)
    wavelength = 2 * math.pi / inv_freq
    # smooth = (r - low) / (high - low) with r = L / λ turns in the original
    # context: 1 keeps θ_i, 0 divides it by factor, linear in r in between.
    # With low == high the band is empty (0/0 only for a wavelength exactly
    # L/low, NaN as in transformers); with low > high "divide" wins where both
    # tests hold, as in transformers, which divides first.
    smooth = ((length / wavelength - low) / (high - low)).clamp(0, 1)
    keep = wavelength < length / high
    divide = wavelength > length / low
    smooth = torch.where(divide, 0.0, torch.where(keep, 1.0, smooth))
    return inv_freq * smooth + inv_freq / factor * (1 - smooth), 1.0


def _factor_list(name: str, value, dim: int):
    """Check a LongRoPE factor list (dim/2 finite numbers > 0); tensors stay tensors."""
    if isinstance(value, Tensor):
        if value.shape != (dim // 2,) or value.is_complex():
            raise ValueError(f"{name} must hold dim/2 = {dim // 2} numbers, got shape "
                             f"{tuple(value.shape)}")
        if not bool((torch.isfinite(value) & (value > 0)).all()):
            raise ValueError(f"{name} must hold finite numbers > 0")
        return value
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a list of dim/2 = {dim // 2} numbers, "
                         f"got {type(value).__name__}")
    if len(value) != dim // 2:
        raise ValueError(f"{name} must hold dim/2 = {dim // 2} numbers, got {len(value)}")
    if all(type(item) is float and 0 < item < math.inf for item in value):
        return value  # the common case (a pasted JSON list), checked fast
    for item in value:
        if (isinstance(item, bool) or not isinstance(item, numbers.Real)
                or not math.isfinite(item) or not item > 0):
            raise ValueError(f"{name} must hold finite numbers > 0, got {item!r}")
    return value


def _longrope(dim, base, seq_len, *, short_factor, long_factor, factor,
              original_max_position_embeddings, attention_factor):
    short = _factor_list("short_factor", short_factor, dim)
    long = _factor_list("long_factor", long_factor, dim)
    length = _length("original_max_position_embeddings",
                     original_max_position_embeddings)
    if factor is not None:
        factor = _factor(factor)
    if attention_factor is None:
        if factor is None:
            raise ValueError("longrope needs factor (or an explicit attention_factor) to "
                             "set its attention factor")
        attention_factor = (1.0 if factor <= 1.0
                            else math.sqrt(1 + math.log(factor) / math.log(length)))
    else:
        attention_factor = _validate.finite_float("attention_factor", attention_factor,
                                                  greater_than=0.0)
    rescale = long if seq_len is not None and seq_len > length else short
    return (_default_inv_freq(dim, base) / torch.as_tensor(rescale, dtype=torch.float64),
            attention_factor)


def _proportional(dim, base, seq_len, *, factor, partial_rotary_factor):
    # transformers 5.x: ``dim`` is the whole head; the fastest
    # int(p·dim // 2) pairs keep base**(-2i/dim), the others never turn.
    share = _validate.finite_float("partial_rotary_factor", partial_rotary_factor,
                                   greater_than=0.0)
    if share > 1:
        raise ValueError(f"partial_rotary_factor must be <= 1, got {share}")
    inv_freq = _default_inv_freq(dim, base).clone()
    inv_freq[int(share * dim // 2):] = 0.0
    return inv_freq / _factor(factor), 1.0


#: Every supported ``rope_type``, with its parameters and their defaults.
ROPE_SCALINGS: dict[str, RopeScaling] = {
    "default": RopeScaling(_default),
    "linear": RopeScaling(_linear, ("factor",)),
    "ntk": RopeScaling(_ntk, ("factor",), min_dim=4),
    "dynamic": RopeScaling(_dynamic, ("factor", "max_position_embeddings"),
                           {"original_max_position_embeddings": None}, min_dim=4),
    "yarn": RopeScaling(
        _yarn, ("factor", "original_max_position_embeddings"),
        {"beta_fast": 32.0, "beta_slow": 1.0, "mscale": None, "mscale_all_dim": None,
         "attention_factor": None, "truncate": True}),
    "llama3": RopeScaling(
        _llama3, ("factor", "low_freq_factor", "high_freq_factor",
                  "original_max_position_embeddings")),
    "proportional": RopeScaling(_proportional, (),
                                {"factor": 1.0, "partial_rotary_factor": 1.0}),
    "longrope": RopeScaling(
        _longrope, ("short_factor", "long_factor", "original_max_position_embeddings"),
        {"factor": None, "attention_factor": None}),
}


# -- transformers' float32 arithmetic, operation for operation ------------------------
# transformers 4.57.6's modeling_rope_utils.py computes inv_freq in float32, each
# step rounded to float32; these repeat its expressions in its order, so the
# results agree bit for bit (tests/test_reference.py). No import of transformers.

def _tf_default(dim, base):
    exponents = torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float32) / dim
    return 1.0 / (base ** exponents)


def _tf_linear(dim, base, seq_len, *, factor):
    return _tf_default(dim, base) / factor


def _tf_dynamic(dim, base, seq_len, *, factor, max_position_embeddings,
                original_max_position_embeddings):
    # A running module (dynamic_rope_update's dynamic_frequency_update) keeps the
    # frequencies computed at init (seq_len None: Python floats) up to
    # max_position_embeddings; beyond, it passes seq_len = max(position_ids) + 1,
    # a 0-d int64 tensor, so the rescaled base is a float32 tensor.
    if seq_len is None or seq_len <= max_position_embeddings:
        length = max_position_embeddings
    else:
        length = torch.tensor(seq_len, dtype=torch.int64)
    base = base * ((factor * length / max_position_embeddings) - (factor - 1)) ** (
        dim / (dim - 2))
    return _tf_default(dim, base)


def _tf_yarn(dim, base, seq_len, *, factor, original_max_position_embeddings,
             beta_fast, beta_slow, truncate, **_):
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float32) / dim)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (factor * pos_freqs)
    low, high = yarn_correction_range(dim, base, original_max_position_embeddings,
                                      beta_fast, beta_slow, truncate=truncate)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low)
                       / (high - low), 0, 1)
    keep = 1 - ramp
    return interpolation * (1 - keep) + extrapolation * keep


def _tf_llama3(dim, base, seq_len, *, factor, low_freq_factor, high_freq_factor,
               original_max_position_embeddings):
    inv_freq = _tf_default(dim, base)
    length = original_max_position_embeddings
    low_wavelength = length / low_freq_factor
    high_wavelength = length / high_freq_factor
    wavelength = 2 * math.pi / inv_freq
    scaled = torch.where(wavelength > low_wavelength, inv_freq / factor, inv_freq)
    smooth = (length / wavelength - low_freq_factor) / (high_freq_factor
                                                        - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelength < high_wavelength) * ~(wavelength > low_wavelength)
    return torch.where(medium, smoothed, scaled)


def _tf_longrope(dim, base, seq_len, *, short_factor, long_factor,
                 original_max_position_embeddings, **_):
    chosen = (long_factor if seq_len and seq_len > original_max_position_embeddings
              else short_factor)
    rescale = torch.as_tensor(chosen, dtype=torch.float32)
    shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (rescale * base**shape)


#: transformers' float32 ``inv_freq`` per rope type (``"ntk"`` is not one of its types).
TRANSFORMERS_INV_FREQ = {
    "default": lambda dim, base, seq_len: _tf_default(dim, base),
    "linear": _tf_linear, "dynamic": _tf_dynamic, "yarn": _tf_yarn,
    "llama3": _tf_llama3, "longrope": _tf_longrope,
}
#: The references :func:`rope_parameters` can compute against.
REFERENCES = ("float64", "transformers")


def _positive_real(name, value):
    return _validate.finite_float(name, value, greater_than=0.0)


def _non_negative_real(name, value):
    return _validate.finite_float(name, value, at_least=0.0)


#: Range checks of scalar parameters, run before the method's own (which repeat
#: them), so that one error lists every problem of a call, not just the first.
_PARAM_CHECKS = {
    "factor": _positive_real, "low_freq_factor": _positive_real,
    "high_freq_factor": _positive_real, "beta_fast": _positive_real,
    "beta_slow": _positive_real, "mscale": _non_negative_real,
    "mscale_all_dim": _non_negative_real, "attention_factor": _non_negative_real,
    "max_position_embeddings": _length, "original_max_position_embeddings": _length,
}


def rope_parameters(rope_type: str, dim: int, base: float = 10000.0, *, seq_len=None,
                    dtype: torch.dtype | None = None, reference: str = "float64",
                    **params) -> tuple[Tensor, float]:
    """Frequencies and attention factor of a RoPE context-extension method.

    Args:
        rope_type: a key of :data:`ROPE_SCALINGS` (transformers' name).
        dim: number of rotated features (transformers:
            ``int(head_dim * partial_rotary_factor)``); even.
        base: RoPE base (transformers' ``rope_theta``).
        seq_len: current sequence length; used by ``"dynamic"`` (frequencies
            grow with it beyond ``max_position_embeddings``) and ``"longrope"``
            (long factors when ``seq_len > original_max_position_embeddings``),
            accepted and unused by the others, as by transformers' functions.
        dtype: dtype of ``inv_freq`` (torch's default if ``None``).
        reference: how ``inv_freq`` is computed. ``"float64"`` (the default):
            in float64, rounded once to ``dtype``, so the float32 result is
            the float32 number nearest the exact frequency. ``"transformers"``:
            in float32, operation for operation as transformers 4.57.6's
            ``ROPE_INIT_FUNCTIONS`` (bit for bit), then converted to
            ``dtype``; for ``"dynamic"`` beyond ``max_position_embeddings``,
            what a running module holds after ``dynamic_rope_update`` at
            ``seq_len`` (which passes the length as a tensor, so the base
            is rescaled in float32); several frequencies then differ from ``"float64"`` by an
            ulp or more. Use ``"transformers"`` to test a kernel or a port
            against what a transformers model actually runs (an exact match is
            then expected); use ``"float64"`` to measure how far any float32
            computation, transformers' included, is from the exact angles.
            The attention factor is the same under both.
        **params: the method's parameters, with transformers' names (see
            :data:`ROPE_SCALINGS`). An optional parameter set to ``None`` takes
            its default. Unknown names raise ``ValueError``.

    Returns:
        ``(inv_freq, attention_factor)``: a ``(dim/2,)`` tensor and a float that
        multiplies cos and sin (so every logit by its square).
    """
    _validate.one_of("rope_type", rope_type, list(ROPE_SCALINGS))
    spec = ROPE_SCALINGS[rope_type]
    dim = _validate.even_int("dim", dim, minimum=spec.min_dim)
    base = _validate.finite_float("base", base, greater_than=1.0)
    dtype = _validate.floating_dtype("dtype", dtype)
    problems = []  # every problem of the call, reported in one error
    unknown = sorted(set(params) - set(spec.required) - set(spec.optional))
    if unknown:
        accepted = sorted(spec.required + tuple(spec.optional)) or "none"
        hint = (" (old configs call rope_type 'type': pass it as rope_type)"
                if "type" in unknown else "")
        problems.append(f"unknown parameter(s) {unknown} for rope_type {rope_type!r}; "
                        f"it accepts {accepted}{hint}")
    missing = [name for name in spec.required if params.get(name) is None]
    if missing:
        problems.append(f"rope_type {rope_type!r} needs {missing}")
    for name, value in params.items():
        if value is not None and name in _PARAM_CHECKS:
            try:
                _PARAM_CHECKS[name](name, value)
            except ValueError as error:
                problems.append(str(error))
    if len(problems) == 1:
        raise ValueError(problems[0])
    if problems:
        listed = "; ".join(f"({i}) {m}" for i, m in enumerate(problems, 1))
        raise ValueError(f"rope_parameters has {len(problems)} problems: {listed}")
    _validate.one_of("reference", reference, list(REFERENCES))
    if reference == "transformers" and rope_type not in TRANSFORMERS_INV_FREQ:
        raise ValueError(f"reference 'transformers' has no rope_type {rope_type!r}; "
                         f"its types are {sorted(TRANSFORMERS_INV_FREQ)}")
    if seq_len is not None:
        seq_len = _length("seq_len", seq_len)
    values = dict(spec.optional)
    values.update((k, v) for k, v in params.items() if v is not None)
    inv_freq, attention_factor = spec.compute(dim, base, seq_len, **values)
    if reference == "transformers":  # the values are checked above, by compute
        inv_freq = TRANSFORMERS_INV_FREQ[rope_type](dim, base, seq_len, **values)
    return inv_freq.to(dtype), float(attention_factor)


# -- measuring what a method does -----------------------------------------------------

def _inv_freq_arg(name: str, value: Tensor, *, rows: bool = False) -> Tensor:
    _validate.tensor(name, value, min_dim=1, floating=True)
    if value.dim() != 1 and not (rows and value.dim() == 2):
        shapes = "(dim/2,) or (n, dim/2)" if rows else "1-D (dim/2,)"
        raise ValueError(f"{name} must be {shapes}, got shape {tuple(value.shape)}")
    _validate.finite_tensor(name, value)
    if not bool((value > 0).all()):
        raise ValueError(f"{name} must be > 0")
    return value.to(torch.float64)


def _same_pairs(a: Tensor, b: Tensor) -> None:
    """``b``, ``(dim/2,)`` or one row per length, must have ``a``'s pairs."""
    if b.shape[-1:] != a.shape:
        raise ValueError(f"scaled_inv_freq has shape {tuple(b.shape)}, but inv_freq has "
                         f"{tuple(a.shape)}")


def rotations(inv_freq: Tensor, length: float) -> Tensor:
    """``r_i = length·θ_i / 2π``: how many full turns pair ``i`` makes within ``length``.

    Equivalently ``length / λ_i`` with the wavelength ``λ_i = 2π/θ_i``; the
    quantity YaRN and Llama 3 compare with their thresholds.

    Returns:
        ``(dim/2,)`` float64 tensor.
    """
    inv_freq = _inv_freq_arg("inv_freq", inv_freq)
    length = _validate.finite_float("length", length, greater_than=0.0)
    return length * inv_freq / (2 * math.pi)


def interpolation_weight(scaled_inv_freq: Tensor, inv_freq: Tensor, factor: float) -> Tensor:
    """Per-pair weight ``w_i`` in ``θ'_i = (1 - w_i)·θ_i + w_i·θ_i/factor``.

    ``w = 0`` keeps the pair (extrapolation), ``w = 1`` is PI on it
    (interpolation). Solved as ``w = (1 - θ'/θ) / (1 - 1/factor)``, so it
    applies to any method's output.

    Returns:
        ``(dim/2,)`` float64 tensor.
    """
    inv_freq = _inv_freq_arg("inv_freq", inv_freq)
    scaled = _inv_freq_arg("scaled_inv_freq", scaled_inv_freq)
    _same_pairs(inv_freq, scaled)
    factor = _validate.finite_float("factor", factor, greater_than=1.0)
    return (1 - scaled / inv_freq) / (1 - 1 / factor)


def angle_range_ratio(inv_freq: Tensor, scaled_inv_freq: Tensor, train_length: float,
                      target_length) -> Tensor:
    """Largest angle at inference over largest angle in training, per pair.

    ``(target_length·θ'_i) / (train_length·θ_i)``: above 1, pair ``i`` reaches
    angles it never reached in training, unless it had already turned a
    full circle then (see :func:`out_of_range_pairs`).

    Args:
        inv_freq: ``(dim/2,)`` frequencies ``θ_i`` of training.
        scaled_inv_freq: ``(dim/2,)`` frequencies ``θ'_i`` at inference, or
            ``(n, dim/2)``: one row per target length (dynamic NTK, whose
            frequencies follow the length).
        train_length: the training length, ``> 0``.
        target_length: one length ``> 0``, or ``(n,)`` lengths (a list or a
            1-D tensor).

    Returns:
        ``(dim/2,)`` float64 tensor; ``(n, dim/2)``, one row per length, when
        ``target_length`` or ``scaled_inv_freq`` has ``n`` rows.
    """
    inv_freq = _inv_freq_arg("inv_freq", inv_freq)
    scaled = _inv_freq_arg("scaled_inv_freq", scaled_inv_freq, rows=True)
    _same_pairs(inv_freq, scaled)
    train = _validate.finite_float("train_length", train_length, greater_than=0.0)
    if isinstance(target_length, numbers.Real) and not isinstance(target_length, bool):
        target = _validate.finite_float("target_length", target_length, greater_than=0.0)
        if scaled.dim() == 2:
            target = torch.full((scaled.shape[0], 1), target, dtype=torch.float64)
    else:
        target = _lengths_arg("target_length", target_length)
        if scaled.dim() == 2 and scaled.shape[0] != target.shape[0]:
            raise ValueError(f"scaled_inv_freq has {scaled.shape[0]} rows but target_length "
                             f"has {target.shape[0]} lengths; give one row per length")
        target = target[:, None]
    return (target * scaled) / (train * inv_freq)


def _lengths_arg(name: str, value) -> Tensor:
    """A 1-D float64 tensor of finite lengths ``> 0`` (from a list, array or tensor)."""
    try:
        lengths = torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{name} must be a number or a 1-D sequence of numbers, "
                         f"got {type(value).__name__}") from None
    if lengths.dim() != 1 or lengths.numel() == 0:
        raise ValueError(f"{name} must be a number or a non-empty 1-D sequence, "
                         f"got shape {tuple(lengths.shape)}")
    _validate.finite_tensor(name, lengths)
    if not bool((lengths > 0).all()):
        raise ValueError(f"{name} must be > 0")
    return lengths


def out_of_range_pairs(inv_freq: Tensor, scaled_inv_freq: Tensor, train_length: float,
                       target_length, *, rtol: float | None = None) -> Tensor:
    """Which pairs are pushed outside the angle range they saw in training.

    Training on positions ``[0, train_length]`` with frequencies ``θ_i``
    shows pair ``i`` the angles ``[0, train_length·θ_i]``, which is the whole
    circle once ``train_length·θ_i >= 2π``. Pair ``i`` is *out of range* at
    ``target_length`` with frequencies ``θ'_i`` if it had not closed the
    circle and ``target_length·θ'_i > train_length·θ_i`` (up to ``rtol``, so
    that rounding does not count).

    Args:
        inv_freq, scaled_inv_freq, train_length, target_length: as for
            :func:`angle_range_ratio` (several lengths at once included).
        rtol: by default the rounding of the inputs' own dtype (the coarser
            of the two): ``u·(8 + |ln θ|max + |ln θ'|max)``, doubled, with
            ``u`` its unit roundoff. A frequency computed as ``base^(-y)``
            in that dtype is off by up to ``(|ln θ| + 2)·u`` relative (the
            rounding of ``y`` and ``base``, times ``|ln θ|``, plus the power's
            own few ulps); the ratio of two, times two lengths, adds ``4u``.
            Below the dtype's smallest normal number ``tiny`` (float16 from
            6e-5), ``u`` grows to ``u·(1 + tiny/min θ)``.

    Returns:
        ``(dim/2,)`` bool tensor, or ``(n, dim/2)`` for ``n`` lengths; its
        mean over the last axis is the fraction of pairs out of range.
    """
    ratio = angle_range_ratio(inv_freq, scaled_inv_freq, train_length, target_length)
    closed = train_length * inv_freq.to(torch.float64) >= 2 * math.pi
    if rtol is None:
        u, logs = 0.0, 0.0
        for f in (inv_freq, scaled_inv_freq):
            info, smallest = torch.finfo(f.dtype), float(f.abs().min())
            # a subnormal keeps only tiny·eps absolute precision: u·tiny/|θ| relative
            u = max(u, info.eps / 2 * (1 + info.tiny / smallest))
            logs += float(f.to(torch.float64).log().abs().max())
        rtol = 2 * u * (8 + logs)
    else:
        rtol = _validate.finite_float("rtol", rtol, at_least=0.0)
    return (ratio > 1 + rtol) & ~closed


def extension_inv_freqs(dim: int = 128, base: float = 10000.0, factor: float = 4.0,
                        original_max_position_embeddings: int = 4096,
                        seq_len: int | None = None) -> dict[str, Tensor]:
    """float64 frequencies of every method with a closed form, at one setting.

    Keys: ``"default"``, ``"linear"``, ``"ntk"``, ``"dynamic"`` (at
    ``seq_len``, which defaults to ``factor · original_max_position_embeddings``),
    ``"yarn"`` (``beta_fast=32``, ``beta_slow=1``) and ``"llama3"``
    (``low_freq_factor=1``, ``high_freq_factor=4``, Llama 3.1's values).
    LongRoPE is left out: its factors are searched per model, not computed.
    """
    length = _length("original_max_position_embeddings",
                     original_max_position_embeddings)
    if seq_len is None:
        seq_len = max(length, round(_factor(factor) * length))
    common = {"dim": dim, "base": base, "dtype": torch.float64}
    return {
        "default": rope_parameters("default", **common)[0],
        "linear": rope_parameters("linear", factor=factor, **common)[0],
        "ntk": rope_parameters("ntk", factor=factor, **common)[0],
        "dynamic": rope_parameters("dynamic", factor=factor, max_position_embeddings=length,
                                   seq_len=seq_len, **common)[0],
        "yarn": rope_parameters("yarn", factor=factor,
                                original_max_position_embeddings=length, **common)[0],
        "llama3": rope_parameters("llama3", factor=factor, low_freq_factor=1.0,
                                  high_freq_factor=4.0,
                                  original_max_position_embeddings=length, **common)[0],
    }


# -- the PI paper's Figure 2: fitting an attention score -------------------------------

def _features(positions: Tensor, inv_freq: Tensor) -> Tensor:
    """``[cos(sθ_j) ..., -sin(sθ_j) ...]``: ``a(s) = features @ [Re h, Im h]``."""
    angles = positions.unsqueeze(-1) * inv_freq
    return torch.cat([angles.cos(), -angles.sin()], dim=-1)


def score_function(positions, h: Tensor, inv_freq: Tensor) -> Tensor:
    """The attention score of RoPE as a function of the offset: ``a(s) = Re Σ_j h_j e^{i s θ_j}``.

    Args:
        positions: offsets ``s``, any shape ``S``.
        h: ``(dim/2,)`` complex coefficients (from :func:`fit_score_function`).
        inv_freq: ``(dim/2,)`` frequencies ``θ_j``.

    Returns:
        tensor of shape ``S`` in ``inv_freq``'s dtype.
    """
    _validate.tensor("h", h, min_dim=1)
    if not h.is_complex() or h.shape != inv_freq.shape:
        raise ValueError(f"h must be a complex tensor shaped like inv_freq "
                         f"{tuple(inv_freq.shape)}, got {h.dtype} {tuple(h.shape)}")
    s = torch.as_tensor(positions).to(inv_freq.dtype)
    _validate.finite_tensor("positions", s)
    return _features(s, inv_freq) @ torch.cat([h.real, h.imag]).to(inv_freq.dtype)


def _householder_lstsq(a: Tensor, b: Tensor) -> Tensor:
    """Least squares ``min ‖a x - b‖`` for ``a: (m, n)``, ``m >= n``, by Householder QR.

    Written with numpy's elementwise products and sums only, no BLAS or
    LAPACK call, so that the result is bitwise reproducible: LAPACK's solvers
    (MKL here) may round differently from one call to the next, and on an
    ill-conditioned problem that changes the answer completely. The columns
    of ``a`` are stored as contiguous rows, so that each reflection is two
    passes over memory.
    """
    columns = a.numpy().T.copy()  # row k holds column k of a
    rhs = b.numpy().copy()
    n, m = columns.shape
    scratch = np.empty_like(columns)
    for j in range(n):
        x = columns[j, j:]
        norm = np.sqrt((x * x).sum())
        if norm == 0:
            continue
        reflected = -norm if x[0] >= 0 else norm  # what the reflection makes of x
        v = x.copy()
        v[0] -= reflected
        beta = 2 / (v * v).sum()
        rest = columns[j + 1:, j:]
        work = scratch[:n - j - 1, :m - j]
        w = np.multiply(rest, v, out=work).sum(axis=1)
        w *= beta
        rest -= np.multiply(w[:, None], v, out=work)
        columns[j, j] = reflected
        rhs[j:] -= v * (beta * (v * rhs[j:]).sum())
    solution = np.zeros(n, dtype=columns.dtype)
    for i in range(n - 1, -1, -1):  # R[i, k] = columns[k, i] for k > i
        if columns[i, i] != 0:
            solution[i] = ((rhs[i] - (columns[i + 1:, i] * solution[i + 1:]).sum())
                           / columns[i, i])
    return torch.from_numpy(solution)


def _solve_dtype(name: str, dtype: torch.dtype) -> torch.dtype:
    """``dtype`` if the least-squares solve (numpy) has it."""
    if dtype not in (torch.float16, torch.float32, torch.float64):
        raise ValueError(f"{name} must be float16, float32 or float64 (the dtype of the "
                         f"solve), got {dtype}")
    return dtype


def fit_score_function(positions: Tensor, targets: Tensor, inv_freq: Tensor, *,
                       ridge: float = 0.0) -> Tensor:
    """Least-squares coefficients ``h`` with ``a(positions) ≈ targets``.

    Minimises ``‖a(positions) - targets‖² + ridge·‖h‖²`` over the ``dim``
    real numbers ``Re h_j, Im h_j``, in ``inv_freq``'s dtype, by Householder
    QR of the system stacked with ``√ridge·I``. No singular value is
    truncated, so with ``ridge = 0`` an ill-conditioned fit keeps its huge
    coefficients; the solve is bitwise reproducible (see the source).

    Args:
        positions: ``(n,)`` offsets.
        targets: ``(n,)`` values to fit.
        inv_freq: ``(dim/2,)`` frequencies in float16, float32 or float64
            (the dtype of the solve).
        ridge: ``>= 0``; must be ``> 0`` when there are fewer points than
            the ``dim`` unknowns.

    Returns:
        ``(dim/2,)`` complex coefficients.
    """
    _validate.tensor("inv_freq", inv_freq, min_dim=1, floating=True)
    dtype = _solve_dtype("inv_freq", inv_freq.dtype)
    positions = _validate.tensor("positions", positions, min_dim=1).to(dtype)
    targets = _validate.tensor("targets", targets, min_dim=1).to(dtype)
    if positions.dim() != 1 or targets.shape != positions.shape:
        raise ValueError(f"positions and targets must be 1-D of one length, got "
                         f"{tuple(positions.shape)} and {tuple(targets.shape)}")
    ridge = _validate.finite_float("ridge", ridge, at_least=0.0)
    a = _features(positions, inv_freq)
    b = targets
    n = a.shape[1]
    if ridge > 0:
        a = torch.cat([a, math.sqrt(ridge) * torch.eye(n, dtype=dtype)])
        b = torch.cat([b, torch.zeros(n, dtype=dtype)])
    elif a.shape[0] < n:
        raise ValueError(f"ridge must be > 0 with fewer points ({a.shape[0]}) than "
                         f"unknowns ({n})")
    coefficients = _householder_lstsq(a, b)
    half = inv_freq.shape[0]
    return torch.complex(coefficients[:half], coefficients[half:])


def random_score_fit(*, dim: int = 128, length: int = 2048, n_points: int = 64,
                     seed: int = 0, dtype: torch.dtype | None = None, ridge: float = 0.0,
                     base: float = 10000.0) -> tuple[Tensor, Tensor, Tensor]:
    """The PI paper's Figure 2 set-up: fit ``a(s)`` to random targets on ``[0, length]``.

    Draws ``n_points`` offsets uniformly in ``[0, length]`` and targets
    uniformly in ``[-1, 1]`` (seeded), then calls :func:`fit_score_function`
    with RoPE's frequencies in ``dtype``.

    Returns:
        ``(positions, targets, h)``: two ``(n_points,)`` tensors in ``dtype``
        and the ``(dim/2,)`` complex coefficients.
    """
    length = _validate.positive_int("length", length)
    n_points = _validate.positive_int("n_points", n_points)
    dtype = _solve_dtype("dtype", _validate.floating_dtype("dtype", dtype))
    generator = torch.Generator().manual_seed(_validate.nonnegative_int("seed", seed))
    positions = torch.rand(n_points, generator=generator, dtype=torch.float64) * length
    targets = torch.rand(n_points, generator=generator, dtype=torch.float64) * 2 - 1
    inv_freq = _default_inv_freq(_validate.even_int("dim", dim),
                                 _validate.finite_float("base", base, greater_than=1.0))
    h = fit_score_function(positions.to(dtype), targets.to(dtype), inv_freq.to(dtype),
                           ridge=ridge)
    return positions.to(dtype), targets.to(dtype), h


def interpolation_bound(s, s1: float, s2: float, h: Tensor, inv_freq: Tensor) -> Tensor:
    """Bound on ``|a(s) - a_lin(s)|`` for ``s1 <= s <= s2``, ``a_lin`` the chord.

    ``(s - s1)(s2 - s)/2 · max_j |h_j| · Σ_j θ_j²``: the linear-interpolation
    error bound ``(s - s1)(s2 - s)/2 · max|a''|``, with
    ``|a''(s)| = |Re Σ_j h_j θ_j² e^{isθ_j}| <= max_j |h_j| Σ_j θ_j²``.

    Returns:
        tensor shaped like ``s``.
    """
    s = torch.as_tensor(s, dtype=torch.float64)
    s1 = _validate.finite_float("s1", s1)
    s2 = _validate.finite_float("s2", s2, greater_than=s1)
    theta = inv_freq.to(torch.float64)
    return (s - s1) * (s2 - s) / 2 * h.abs().max().to(torch.float64) * (theta ** 2).sum()


# -- NoPE layers of Llama 4 -----------------------------------------------------------

def llama4_attn_scales(positions, *, attn_scale: float = 0.1,
                       floor_scale: float = 8192.0) -> Tensor:
    """Llama 4's query scale in its NoPE layers: ``1 + attn_scale·ln(1 + ⌊(p + 1)/floor_scale⌋)``.

    Multiplies the queries (hence the logits) of the token at position ``p``
    (``attn_temperature_tuning`` in transformers' ``Llama4TextAttention``).
    It is exactly 1 for ``p < floor_scale - 1`` and grows like the log of
    the position beyond, in steps of ``floor_scale`` tokens.

    Returns:
        float64 tensor shaped like ``positions``.
    """
    attn_scale = _validate.finite_float("attn_scale", attn_scale, at_least=0.0)
    floor_scale = _validate.finite_float("floor_scale", floor_scale, greater_than=0.0)
    p = torch.as_tensor(positions, dtype=torch.float64)
    _validate.finite_tensor("positions", p)
    if bool((p < 0).any()):
        raise ValueError("positions must be >= 0")
    return torch.log1p(torch.floor((p + 1.0) / floor_scale)) * attn_scale + 1.0


# -- a whole config.json --------------------------------------------------------------

#: How transformers 4.57.6's YaRN validator (``_validate_yarn_parameters``)
#: begins its two warnings about the lengths: a ``factor`` that differs from
#: ``max_position_embeddings / original_max_position_embeddings``, and an
#: unset ``original_max_position_embeddings``.
YARN_LENGTH_MESSAGES = ("The explicitly set RoPE scaling factor",
                        "config.rope_scaling['original_max_position_embeddings']")


def warn_yarn_lengths(config: Mapping, *, stacklevel: int = 2) -> None:
    """Warn (:class:`RopeConfigWarning`) with transformers' YaRN factor/length
    warning, where its config class logs it
    (:func:`posenc_lib.serving.transformers_warnings`, the text the inspector
    shows under "transformers warns"); ``stacklevel`` counts from the caller.

    It lives here, beside its one caller (:func:`rope_from_config`) and its
    warning class, not in the validator: it runs serving's code, and the
    validator sits below the numerics."""
    for message in serving.transformers_warnings(config):
        if message.startswith(YARN_LENGTH_MESSAGES):
            warnings.warn(message, RopeConfigWarning, stacklevel=stacklevel + 1)


def rope_from_config(config: Mapping, *, layer: int | None = None, seq_len=None,
                     dtype: torch.dtype | None = None,
                     reference: str = "float64",
                     transformers_version: str | None = None
                     ) -> tuple[Tensor, float] | None:
    """``(inv_freq, attention_factor)`` of a model, from its ``config.json``
    as a mapping.

    Reads every layout transformers has used (4.x ``rope_theta`` plus
    ``rope_scaling`` with ``rope_type`` or the older ``type``; 5.x
    ``rope_parameters``; Phi-3's top-level ``original_max_position_embeddings``;
    ``partial_rotary_factor`` or GPT-NeoX's ``rotary_pct``; ``head_dim``, else
    ``hidden_size // num_attention_heads``, or DeepSeek's ``qk_rope_head_dim``)
    and returns the numbers transformers 4.57 computes for it (its
    ``ROPE_INIT_FUNCTIONS``), through :func:`rope_parameters`. Keys outside the
    positional set-up are ignored; so is a key of the rope block that
    transformers does not read, with a warning that names it (transformers
    logs it as unrecognized).

    Args:
        config: a parsed ``config.json`` (a ``text_config`` inside is read too).
        layer: a layer index: that layer's RoPE, as the model's own modelling
            code builds it (Gemma 3's local layers, OLMo 3's sliding layers),
            or ``None`` for a layer without RoPE (Llama 4's and SmolLM3's NoPE
            layers, Qwen3-Next's linear-attention layers); see
            :mod:`posenc_lib.per_layer`. Without it, the model's global
            (full-attention) RoPE.
        seq_len: current sequence length, for ``"dynamic"`` and ``"longrope"``.
        dtype: dtype of ``inv_freq`` (torch's default if ``None``).
        reference: ``"float64"`` (exact frequencies, rounded once) or
            ``"transformers"`` (transformers' own float32 arithmetic, bit for
            bit: the reference for a kernel or port of a transformers model);
            see :func:`rope_parameters`.
        transformers_version: the release whose reading to reproduce where
            4.57 and 5.x differ in code (a ``partial_rotary_factor`` with the
            plain RoPE of a class that rotates the whole head in 5.x); default
            the installed one. See ``config_reader.parse_rope_config``.

    Returns:
        ``(inv_freq, attention_factor)``: a ``(dim/2,)`` tensor, ``dim`` the rotated
        features per head, and a float; ``None`` for a layer without RoPE.

    Raises:
        ValueError: naming ``layer`` for an index outside the model's layers;
            naming the key, for a key transformers requires and does not
            find (``yarn`` without ``factor``; ``yarn`` with neither
            ``original_max_position_embeddings`` nor ``max_position_embeddings``),
            a value it rejects, a model without rotary positions, or a config that
            transformers 4.57 and 5.x would read differently.

    Warns:
        UnknownRopeKeyWarning: for a key of the rope block that transformers
            ignores (a misspelt ``original_max_position_embeddings``, say).
        VersionDependentWarning: for a config the two releases read
            differently (``transformers_version`` above).
        RopeConfigWarning: for YaRN, transformers' warning that ``factor``
            differs from the ratio of the lengths or that
            ``original_max_position_embeddings`` is unset, where its config
            class logs it (the inspector's "transformers warns" line).
    """
    with config_reader.reading_release(transformers_version):
        if layer is not None:
            config = layer_config(config, layer,
                                  transformers_version=transformers_version)
            if config is None:
                return None
        rope = parse_rope_config(config, transformers_version=transformers_version)
        if rope.rope_type == "yarn":  # the inspector's "transformers warns" line
            warn_yarn_lengths(config, stacklevel=2)
        if (rope.dynamic_params is not None and seq_len is not None
                and _length("seq_len", seq_len) > rope.max_position_embeddings):
            # Hunyuan's module is decorated with dynamic_rope_update: beyond
            # max_position_embeddings it recomputes plain dynamic NTK (no alpha).
            return rope_parameters("dynamic", rope.dim, rope.base, seq_len=seq_len,
                                   dtype=dtype, reference=reference,
                                   **rope.dynamic_params)
        return rope_parameters(rope.rope_type, rope.dim, rope.base, seq_len=seq_len,
                               dtype=dtype, reference=reference, **rope.params)
