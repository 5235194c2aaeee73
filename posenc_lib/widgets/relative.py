"""Interactive figures for chapter 3: relative position encodings."""

from __future__ import annotations

from ..figures import relative as figures
from .core import InteractiveFigure, Slider

__all__ = ["T5_BUCKETS", "SCORE_BIAS_HEATMAPS"]

# Every num_buckets/2 (at most 32) stays below every max_distance (at least 40),
# so each combination of slider values is a valid T5 configuration.
T5_BUCKETS = InteractiveFigure(
    figures.t5_buckets,
    [Slider.integers("num_buckets", 4, 64, 4, default=32, static=(4, 8, 16, 32, 64)),
     Slider.geometric("max_distance", (40, 64, 96, 128, 192, 256, 512, 1024), default=128,
                      static=(40, 128, 1024)),
     Slider.choice("bidirectional", (True, False), default=True)],
    alt="T5's bucket against the relative position, with the start of the last bucket.")

SCORE_BIAS_HEATMAPS = InteractiveFigure(
    figures.score_bias_heatmaps,
    [Slider.integers("max_relative_position", 0, 16, default=4, label="Shaw: clip k",
                     static=(2, 4, 8, 16)),
     Slider.integers("num_buckets", 4, 32, 4, default=16, label="T5: num_buckets",
                     static=(8, 16, 32)),
     Slider.integers("mem_len", 0, 16, 4, default=0, label="memory length",
                     static=(0, 16))],
    alt="Heatmaps of the position term of the attention score for Shaw et al., "
        "T5 and Transformer-XL, query by key.")
