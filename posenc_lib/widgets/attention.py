"""Interactive figures for chapter 1: why attention needs positions."""

from __future__ import annotations

from .. import toy
from ..figures import attention as figures
from .core import InteractiveFigure, Slider

__all__ = ["SENTENCE_ATTENTION"]

SENTENCE_ATTENTION = InteractiveFigure(
    figures.sentence_attention,
    [Slider.choice("encoding", toy.ENCODINGS, default="none",
                   label="positional encoding"),
     Slider.choice("mask", ("off", "on"), default="off", label="causal mask")],
    alt="Attention weights of 'the dog chased another dog': with no encoding and no "
        "mask the two 'dog' rows are identical.")
