"""Interactive figures for chapter 9: real models, from their configs."""

from __future__ import annotations

from ..figures import models as figures
from .core import InteractiveFigure, Slider

__all__ = ["MODEL_WAVELENGTHS"]

MODEL_WAVELENGTHS = InteractiveFigure(
    figures.wavelengths,
    [Slider.choice("model", figures.ROTARY_MODELS, default="llama-3.1-8b")],
    alt="Wavelength of every rotary pair of the chosen model before and after its "
        "context extension, against its trained and extended lengths, with the pairs "
        "that leave their trained angle range shaded.")
