"""Interactive figures for chapter 4: rotary position embedding (RoPE)."""

from __future__ import annotations

from ..figures import rope as figures
from .core import InteractiveFigure, Slider

__all__ = ["DECAY_BOUND", "ROTATION_ANGLES", "ROTATION_CLOCKS", "PARTIAL_ROTARY"]

_BASES = (100.0, 1000.0, 10000.0, 100000.0, 500000.0, 1000000.0)


def _base(static=(100.0, 10000.0, 500000.0), **kwargs) -> Slider:
    return Slider.geometric("base", _BASES, default=10000.0, static=static, **kwargs)


def _dim(static=(16, 32, 64, 128), **kwargs) -> Slider:
    return Slider.integers("dim", 16, 256, 16, default=128, static=static, **kwargs)


DECAY_BOUND = InteractiveFigure(
    figures.decay_bound,
    [_dim(static=(16, 32, 64, 128, 256)), _base(static=(100.0, 1000.0, 10000.0, 500000.0))],
    alt="RoFormer's long-range bound against relative distance, with the score of a "
        "constant vector and the exact root mean square score of random vectors.")

ROTATION_ANGLES = InteractiveFigure(
    figures.rotation_angles,
    [_base(), _dim(static=(32, 64, 128)),
     Slider.geometric("context_length", (512, 2048, 4096, 8192, 32768, 131072),
                      default=4096, label="context length L",
                      static=(512, 4096, 32768, 131072))],
    alt="Angle of each RoPE pair against position, and each pair's wavelength against "
        "the context length.")

# Static frames: the "shift both" slider at 4 values times the distance at 3 (12
# frames); moving "shift both" alone moves the key and the query by the same
# step, so every static frame of one distance shows the same arcs.
ROTATION_CLOCKS = InteractiveFigure(
    figures.rotation_clocks,
    # One slider moves both positions by the same step (the key at n, the query
    # `distance` after it), so the invariance takes one move; by position 150
    # the slowest pair (θ = 0.018) has turned by about 2.7 rad.
    [Slider.integers("shift", 0, 200, default=2, label="shift both: key at n",
                     static=(0, 2, 50, 150)),
     Slider.integers("distance", 0, 60, default=3, label="distance m − n",
                     static=(0, 3, 30))],
    fixed={"dim": 16, "base": 100.0},
    alt="Every RoPE pair drawn as a clock with a query hand at angle m times theta and a "
        "key hand at angle n times theta; the bars show each pair's contribution "
        "cos((n - m) theta) to the score.")

PARTIAL_ROTARY = InteractiveFigure(
    figures.partial_rotary,
    [Slider.choice("partial_rotary_factor", tuple(k / 8 for k in range(1, 9)),
                   default=0.25, label="fraction p",
                   static=tuple(k / 8 for k in range(1, 9)), kind="slider"),
     _base(static=(10000.0, 500000.0, 1000000.0))],
    alt="Score of a constant query and key for full RoPE, GPT-NeoX partial rotary and "
        "p-RoPE, and the number of turns each pair makes within the context length.")
