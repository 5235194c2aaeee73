"""Interactive figures for chapter 6: extrapolation and context extension."""

from __future__ import annotations

from ..figures import extension as figures
from .core import InteractiveFigure, Slider

__all__ = ["OUT_OF_RANGE", "WAVELENGTHS", "RAMPS", "ALIBI_BIAS", "PI_FIT", "XPOS_DECAY",
           "P_ROPE_REMOVED", "PARTIAL_CONVENTIONS"]

_FACTORS = (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)

OUT_OF_RANGE = InteractiveFigure(
    figures.out_of_range,
    [Slider.geometric("factor", _FACTORS, default=4.0, static=(2.0, 4.0, 8.0, 16.0, 32.0)),
     Slider.geometric("target_length", (4096, 8192, 16384, 32768, 65536, 131072, 262144),
                      default=16384, label="target length",
                      static=(8192, 16384, 32768, 65536, 131072))],
    alt="Fraction of rotary pairs outside their trained angle range against the inference "
        "length, for every method, and the per-pair angle ratio at the target length.")

WAVELENGTHS = InteractiveFigure(
    figures.wavelengths,
    [Slider.geometric("factor", _FACTORS, default=8.0),
     Slider.geometric("original_max_position_embeddings", (2048, 4096, 8192), default=4096,
                      label="original context")],
    alt="Wavelength of every rotary pair after each scaling method, with the original and "
        "target context lengths.")

RAMPS = InteractiveFigure(
    figures.ramps,
    [Slider.geometric("beta_fast", (8.0, 16.0, 32.0, 64.0), default=32.0,
                      static=(16.0, 32.0, 64.0)),
     Slider.geometric("beta_slow", (0.5, 1.0, 2.0), default=1.0, static=(1.0, 2.0)),
     Slider.geometric("low_freq_factor", (0.5, 1.0, 2.0), default=1.0, static=(1.0, 2.0)),
     Slider.geometric("high_freq_factor", (4.0, 8.0, 16.0), default=4.0, static=(4.0, 8.0))],
    alt="Per-pair interpolation weight of YaRN and Llama 3 against the number of rotations "
        "in the original context.")

ALIBI_BIAS = InteractiveFigure(
    figures.alibi_bias,
    [Slider.integers("n_heads", 1, 64, default=8, static=(1, 4, 8, 12, 16, 32, 64)),
     Slider.geometric("max_distance", (16, 64, 256, 1024), default=64,
                      label="max distance", static=(16, 64, 1024))],
    alt="Heatmap of the ALiBi bias over heads and distance, and the head slopes.")

PI_FIT = InteractiveFigure(
    figures.pi_fit,
    [Slider.integers("seed", 0, 5, default=0, static=(0, 1, 2), label="random draw"),
     Slider.choice("dtype", ("float32", "float64"), default="float64"),
     Slider.geometric("ridge", (0.0, 1e-10, 1e-6, 1e-3, 1.0), default=1e-6)],
    alt="Least-squares fit of a RoPE attention score to random points: bounded inside the "
        "training range, exploding beyond it, smooth between integer offsets.")

XPOS_DECAY = InteractiveFigure(
    figures.xpos_decay,
    [Slider.geometric("gamma", (0.1, 0.4, 1.0), default=0.4),
     Slider.geometric("scale_base", (128.0, 512.0, 2048.0), default=512.0,
                      label="scale_base")],
    alt="The factor xPos puts on each pair's logit against the distance, for a few pairs.")

P_ROPE_REMOVED = InteractiveFigure(
    figures.p_rope_removed,
    [Slider.geometric("partial_rotary_factor", (0.0625, 0.125, 0.25, 0.5, 0.75, 1.0),
                      default=0.25, label="fraction p"),
     Slider.geometric("train_length", (1024, 4096, 8192, 32768, 131072, 1048576),
                      default=8192, label="training length L",
                      static=(1024, 8192, 131072, 1048576))],
    alt="Wavelength of every rotary pair of a 512-feature head, the pairs p-RoPE keeps "
        "and the slow pairs it removes, against the training length.")

PARTIAL_CONVENTIONS = InteractiveFigure(
    figures.partial_conventions,
    [Slider.geometric("partial_rotary_factor", (0.125, 0.25, 0.5, 0.75, 1.0), default=0.25,
                      label="fraction p")],
    alt="For one head, which features rotate at which frequency under the partial, "
        "proportional and trailing-slice conventions, and the score each computes.")
