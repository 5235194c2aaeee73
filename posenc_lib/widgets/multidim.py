"""Interactive figures for chapter 5: multi-dimensional RoPE."""

from __future__ import annotations

from ..figures import multidim as figures
from .core import InteractiveFigure, Slider

__all__ = ["MROPE_IDS", "FREQUENCY_ALLOCATION", "MIXED_KERNEL", "TEMPORAL_KERNEL",
           "VIDEOROPE_IDS"]

# Every grid is a multiple of spatial_merge_size = 2, and every fps gives a
# whole number of temporal grids over 8 s (fps * 8 frames, 2 frames per grid).
MROPE_IDS = InteractiveFigure(
    figures.mrope_ids,
    [Slider.integers("grid", 2, 12, 2, default=6, label="patch grid (h = w)",
                     static=(2, 6, 12)),
     Slider.geometric("fps", (0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0), default=2.0,
                      label="video fps", static=(0.25, 1.0, 2.0, 3.0, 5.0)),
     Slider.choice("absolute_time", (False, True), default=True,
                   label="absolute time (2.5-VL)")],
    fixed={"video_seconds": 8.0, "tokens_per_second": 2.0},
    alt="The temporal, height and width position ids of every token of a prompt with "
        "text, an image and a video.")

FREQUENCY_ALLOCATION = InteractiveFigure(
    figures.frequency_allocation,
    [Slider.integers("temporal_pairs", 8, 40, 8, default=16, label="temporal pairs",
                     static=(8, 16, 24, 32, 40)),
     Slider.geometric("base", (1e4, 1e5, 1e6, 5e6), default=1e6)],
    # The wavelength axis ends where the largest base needs it, for every base.
    fixed={"head_dim": 128, "top": 1e8},
    alt="Wavelength of every frequency pair, coloured by the axis that drives it, for "
        "contiguous and interleaved M-RoPE, VideoRoPE and six-feature groups.")

MIXED_KERNEL = InteractiveFigure(
    figures.mixed_kernel,
    [Slider.integers("angle", 0, 90, 15, default=30, label="direction angle (°)"),
     Slider.geometric("base", (10.0, 100.0), default=10.0)],
    fixed={"dim": 64, "extent": 24},
    alt="RoPE-Mixed frequency vectors of one head and the two-dimensional kernel they "
        "give, for a chosen direction angle.")

TEMPORAL_KERNEL = InteractiveFigure(
    figures.temporal_kernel,
    [Slider.geometric("base", (1e4, 1e5, 1e6, 5e6), default=1e6),
     Slider.integers("temporal_pairs", 8, 32, 8, default=16, label="temporal pairs")],
    fixed={"head_dim": 128, "max_offset": 1e6},
    alt="Mean cosine of the temporal pairs against the temporal offset, for contiguous "
        "M-RoPE, interleaved M-RoPE and VideoRoPE.")

VIDEOROPE_IDS = InteractiveFigure(
    figures.videorope_ids,
    [Slider.integers("grid", 2, 10, 2, default=6, label="patch grid (h = w)"),
     Slider.geometric("temporal_spacing", (0.5, 1.0, 2.0, 3.0), default=2.0,
                      label="VideoRoPE δ")],
    fixed={"frames": 4},
    alt="Temporal against height position ids of a text, video, text prompt, under "
        "M-RoPE and under VideoRoPE's diagonal layout.")
