"""Interactive figures for chapter 3: relative position encodings and learned biases."""

from __future__ import annotations

from ..figures import relative as figures
from .core import InteractiveFigure, Slider

__all__ = ["T5_BUCKETS", "SCORE_BIAS_HEATMAPS", "KERPLE_BIASES", "FIRE_INTERPOLATION"]

# The exact buckets end at num_buckets // 4 (bidirectional) or num_buckets // 2
# (causal), at most 32, below every max_distance (at least 40): each combination
# of slider values is a valid T5 configuration.
T5_BUCKETS = InteractiveFigure(
    figures.t5_buckets,
    [Slider.integers("num_buckets", 4, 64, 4, default=32, static=(4, 8, 16, 32, 64)),
     Slider.geometric("max_distance", (40, 64, 96, 128, 192, 256, 512, 1024),
                      default=128, static=(40, 128, 1024)),
     Slider.choice("bidirectional", (True, False), default=True)],
    alt="T5's bucket against the relative position, with the start of the last bucket.")

SCORE_BIAS_HEATMAPS = InteractiveFigure(
    figures.score_bias_heatmaps,
    [Slider.integers("max_relative_position", 0, 16, default=4, label="Shaw: clip κ",
                     static=(2, 4, 8, 16)),
     Slider.integers("num_buckets", 4, 32, 4, default=16, label="T5: num_buckets",
                     static=(8, 16, 32)),
     Slider.integers("mem_len", 0, 16, 4, default=0, label="memory length",
                     static=(0, 16))],
    alt="Heatmaps of the position term of the attention score for Shaw et al., "
        "T5 and Transformer-XL, query by key.")

KERPLE_BIASES = InteractiveFigure(
    figures.kerple_biases,
    [Slider.choice("kernel", ("log", "power"), default="log"),
     Slider.geometric("r1", (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0), default=1.0,
                      static=(0.1, 0.5, 1.0, 4.0)),
     Slider.geometric("r2", (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0), default=1.0,
                      static=(0.1, 0.5, 1.0, 1.5, 2.0))],
    alt="Kerple's power or logarithmic bias against the distance, with ALiBi's line.")

FIRE_INTERPOLATION = InteractiveFigure(
    figures.fire_interpolation,
    [Slider.geometric("threshold", (16.0, 32.0, 64.0, 128.0, 256.0, 512.0),
                      default=64.0, label="threshold T"),
     Slider.geometric("c", (0.01, 0.03, 0.1, 0.3, 1.0), default=0.1)],
    alt="FIRE's normalised distance against the distance for several query "
        "positions, below and above the threshold T.")
