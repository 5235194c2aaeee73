"""Interactive figures for chapter 4: rotary position embedding (RoPE)."""

from __future__ import annotations

from ..figures import rope as figures
from .core import InteractiveFigure, Slider

__all__ = ["DECAY_BOUND", "ROTATION_ANGLES"]

_BASES = (100.0, 1000.0, 10000.0, 100000.0, 500000.0, 1000000.0)


def _base(static=(100.0, 10000.0, 500000.0), **kwargs) -> Slider:
    return Slider.geometric("base", _BASES, default=10000.0, static=static, **kwargs)


def _dim(static=(16, 32, 64, 128), **kwargs) -> Slider:
    return Slider.integers("dim", 16, 256, 16, default=128, static=static, **kwargs)


DECAY_BOUND = InteractiveFigure(
    figures.decay_bound,
    [_dim(static=(16, 32, 64, 128, 256)), _base(static=(100.0, 1000.0, 10000.0, 500000.0))],
    alt="RoFormer's long-range bound against relative distance, with the score of a "
        "constant vector and the typical score of random vectors.")

ROTATION_ANGLES = InteractiveFigure(
    figures.rotation_angles,
    [_base(), _dim(static=(32, 64, 128)),
     Slider.geometric("context_length", (512, 2048, 4096, 8192, 32768, 131072),
                      default=4096, label="context length L", static=(512, 4096, 32768, 131072))],
    alt="Angle of each RoPE pair against position, and each pair's wavelength against "
        "the context length.")
