"""Interactive figures for chapter 10: RoPE's base, temperatures and re-mapped positions."""

from __future__ import annotations

from ..figures import beyond as figures
from .core import InteractiveFigure, Slider

__all__ = ["BASE_BOUNDS", "TEMPERATURES", "ENTROPY", "POSITION_MAPS"]

BASE_BOUNDS = InteractiveFigure(
    figures.base_bounds,
    [Slider.geometric("base", (1e4, 1e5, 5e5, 1e6, 1e7), default=5e5),
     Slider.geometric("train_length", (2048, 4096, 8192), default=4096,
                      label="Liu: T_train")],
    alt="Men et al.'s sum of cosines against the distance for one base, and the context "
        "length each base supports by Men et al.'s and Liu et al.'s criteria, with three "
        "models' bases and context lengths.")

TEMPERATURES = InteractiveFigure(
    figures.temperatures,
    [Slider.geometric("train_length", (2048, 4096, 8192, 32768), default=8192,
                      label="training length L"),
     Slider.geometric("factor", (2.0, 4.0, 8.0, 16.0, 32.0), default=8.0,
                      label="factor s")],
    alt="Log-n scaling, LongRoPE, YaRN and Llama 4's temperature as factors on the logits, "
        "against the extension factor and against the position inside one window.")

ENTROPY = InteractiveFigure(
    figures.entropy_growth,
    [Slider.geometric("sigma", (0.5, 1.0, 2.0, 3.0, 4.0), default=2.0,
                      label="logit std σ"),
     Slider.geometric("train_length", (128, 512, 2048), default=512,
                      label="training length L")],
    alt="Attention entropy of random queries and keys against the number of keys, with "
        "and without log-n scaling, with the Gaussian large-n limits.")

POSITION_MAPS = InteractiveFigure(
    figures.position_maps,
    [Slider.integers("window", 8, 32, 8, default=16, label="window w"),
     Slider.geometric("group_size", (2, 4, 8), default=4, label="Self-Extend G"),
     Slider.geometric("leaky_factor", (2.0, 4.0, 8.0), default=4.0, label="Leaky k")],
    alt="Heatmaps of the effective distance each query-key pair sees under RoPE, ReRoPE, "
        "Leaky ReRoPE, Self-Extend and attention sinks, and the last query's row.")
