"""Interactive figures for chapter 8: positions in a running model."""

from __future__ import annotations

from ..figures import practice as figures
from .core import InteractiveFigure, Slider

__all__ = ["DYNAMIC_MISMATCH"]

DYNAMIC_MISMATCH = InteractiveFigure(
    figures.dynamic_mismatch,
    [Slider.geometric("factor", (2.0, 4.0, 8.0, 16.0, 32.0), default=4.0),
     Slider.geometric("base", (10000.0, 500000.0), default=10000.0)],
    alt="Expected relative score error of every cached key under dynamic NTK, against the "
        "key's position, for three current lengths.")
