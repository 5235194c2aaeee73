"""Interactive figures for chapter 2: absolute position encodings."""

from __future__ import annotations

from ..figures import absolute as figures
from .core import InteractiveFigure, Slider

__all__ = ["SINUSOIDAL_HEATMAP", "SINUSOIDAL_SIMILARITY", "WAVELENGTHS"]

_BASES = (10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0)


def _base(**kwargs) -> Slider:
    return Slider.geometric("base", _BASES, default=10000.0, **kwargs)


def _dim(static=(8, 16, 32, 64, 96, 128), **kwargs) -> Slider:
    return Slider.integers("dim", 8, 128, 8, default=64, static=static, **kwargs)


SINUSOIDAL_HEATMAP = InteractiveFigure(
    figures.sinusoidal_heatmap, [_base(), _dim()],
    alt="Heatmap of the sinusoidal encoding: positions down, features across.")

SINUSOIDAL_SIMILARITY = InteractiveFigure(
    figures.sinusoidal_similarity, [_base(), _dim()],
    alt="Dot product of sinusoidal encodings against the offset k.")

WAVELENGTHS = InteractiveFigure(
    figures.wavelengths,
    [_dim(static=(16, 32, 64, 128)), _base(),
     Slider.geometric("context", (512, 2048, 4096, 8192, 32768, 131072), default=4096,
                      label="context length", static=(512, 4096, 32768))],
    alt="Wavelength of each sin/cos pair on a log scale, with the context length.")
