"""Figures for chapter 9: real models, from their configs."""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import torch
from matplotlib.patches import Rectangle

from .. import config_reader, per_layer, scaling
from ..tools import inspector as model_inspect
from ._base import BookFigure, new_subplots, plain_log_axis

__all__ = ["ROTARY_MODELS", "LAYER_KINDS", "overview", "wavelengths", "layer_layouts"]

#: The table's models with rotary positions, in table order.
ROTARY_MODELS = tuple(
    name for name in model_inspect.model_names()
    if config_reader.positional_scheme(model_inspect.model_config(name)) == "rotary")

@contextlib.contextmanager
def _table_quietly():
    """The table's published configs leave out class defaults on purpose (Gemma
    3's ``rope_theta`` and ``max_position_embeddings``) and Llama 4 Scout's sets
    equal smoothing factors; the inspector's report lists both, so drawing the
    table need not warn about them again."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        warnings.simplefilter("ignore", scaling.RopeConfigWarning)
        yield


_Y_RANGE = (1.0, 1e9)  # every model's wavelengths fit, so the slider keeps the axes
_X_RANGE = (2.0, 5e8)


@_table_quietly()
def overview() -> BookFigure:
    """Every rotary model of the table: its pairs' wavelengths against its lengths.

    One row per model; each dot is one pair's wavelength ``2π/θ_i`` under the
    config's own frequencies (hollow: plain RoPE with the same base and dim,
    where the config changes it). The black bar is ``L`` (see
    :func:`~posenc_lib.tools.inspector.trained_and_extended`),
    the red bar the length the config extends to.
    """
    fig, ax = new_subplots(7.6, 1.6 + 0.27 * len(ROTARY_MODELS))  # 4.6 at 11 rows
    for row, name in enumerate(ROTARY_MODELS):  # labels repeat; the legend dedupes
        entry = model_inspect.model_entry(name)
        parts = model_inspect.trained_and_extended(entry["config"])
        rope = parts["rope"]
        y = len(ROTARY_MODELS) - 1 - row
        plain, _ = scaling.rope_parameters("default", rope.dim, rope.base,
                                           dtype=torch.float64)
        lam = (2 * math.pi / parts["extended"]).numpy()
        lam_plain = (2 * math.pi / plain).numpy()
        if not np.allclose(lam, lam_plain, rtol=1e-12):
            ax.scatter(lam_plain, np.full_like(lam_plain, y), s=9, facecolors="none",
                       edgecolors="0.55", lw=0.6, label="plain RoPE, same base and dim")
        ax.scatter(lam, np.full_like(lam, y), s=7, color="C0", lw=0,
                   label="wavelength of a pair (config's frequencies)")
        ax.plot([parts["train_length"]] * 2, [y - 0.38, y + 0.38], color="k", lw=2,
                label="L")
        if rope.extended_length:
            ax.plot([rope.extended_length] * 2, [y - 0.38, y + 0.38], color="C3", lw=2,
                    label="extended length L'")
    ax.set_yticks(range(len(ROTARY_MODELS)),
                  [model_inspect.model_entry(n)["title"] for n in ROTARY_MODELS[::-1]],
                  fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(*_X_RANGE)
    plain_log_axis(ax.xaxis)
    ax.set_xlabel("wavelength 2π/θ (tokens)")
    ax.set_title("Pairs left of L turn at least once within L",
                 fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper center",
              bbox_to_anchor=(0.42, -0.13), ncol=2)
    ax.grid(alpha=0.3, axis="x")
    return fig


@_table_quietly()
def wavelengths(model: str = "llama-3.1-8b") -> BookFigure:
    """One model: per-pair wavelength before and after its extension, against its lengths.

    The x axis is ``2i/d`` (pair ``i`` of ``d/2``), so models with different
    rotary dims share it; plain RoPE is then a straight line of slope
    ``ln(base)`` on the log axis. Shaded: the pairs that leave the angle
    range they had within ``L`` at the extended length (or at ``2L`` without an extension).
    """
    entry = model_inspect.model_entry(model)
    report = model_inspect.inspect_config(entry["config"], name=entry["title"])
    if report["scheme"] != "rotary":
        raise ValueError(f"model {model!r} uses {report['scheme']}, not rotary "
                         f"embeddings; choose one of {list(ROTARY_MODELS)}")
    parts = model_inspect.trained_and_extended(entry["config"])
    pairs = report["pairs"]
    x = np.arange(pairs) * 2 / report["rotary_dim"]
    fig, ax = new_subplots(6.8, 3.8)
    for first, last in report["out_of_range_pairs"]:
        ax.axvspan(x[first] - 1 / report["rotary_dim"], x[last] + 1 / report["rotary_dim"],
                   color="C3", alpha=0.12, lw=0)
    ax.fill_between([], [], color="C3", alpha=0.12,
                    label=f"out of range at {report['target_length']:,} "
                          f"({report['out_of_range_count']} pairs)")
    trained_label = ("short list, within L" if report["rope_type"] == "longrope"
                     else "plain RoPE (pre-training)")
    ax.semilogy(x, (2 * math.pi / parts["trained"]).numpy(), color="0.4", ls="--",
                marker=".", ms=3, lw=1.0, label=trained_label)
    ax.semilogy(x, (2 * math.pi / parts["extended"]).numpy(), color="C0", marker=".",
                ms=3, lw=1.4, label=f"config: {report['rope_type']}")
    ax.axhline(report["train_length"], color="k", lw=0.9,
               label=f"L = {report['train_length']:,} "
                     f"({report['train_length_from']})")
    ax.axhline(report["target_length"], color="C3", lw=0.9, ls=":",
               label=(f"extended length L' = {report['target_length']:,}"
                      if report["extended_length"] else
                      f"2L = {report['target_length']:,} (no extension)"))
    ax.set_ylim(*_Y_RANGE)
    ax.set_xlim(-0.02, 1.0)
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("2i/d: pair index over half the rotary dim (frequency falls →)")
    ax.set_ylabel("wavelength 2π/θ (tokens)")
    ax.set_title(f"{entry['title']}: d = {report['rotary_dim']}, base "
                 f"{report['base']:,.10g}, {report['full_turn_pairs']} of {pairs} pairs "
                 f"turn within L", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3)
    return fig


#: The kinds of layer in :func:`layer_layouts`, with their colours.
LAYER_KINDS = {
    "global RoPE, full attention": "C0",
    "global RoPE, sliding window or chunk": "#9ecae1",
    "local RoPE (own base or unscaled), sliding window": "C2",
    "no RoPE (NoPE), full attention": "C3",
    "linear attention, no positions": "0.55",
    "short convolution, no positions": "0.8",
    "Mamba layer, no positions": "0.7",
}


def _layer_kind(layer: per_layer.LayerRope) -> str:
    if layer.attention == "linear_attention":
        return "linear attention, no positions"
    if layer.attention == "conv":
        return "short convolution, no positions"
    if layer.attention == "mamba":
        return "Mamba layer, no positions"
    if layer.rope is None:
        return "no RoPE (NoPE), full attention"
    if layer.rope == "local":
        return "local RoPE (own base or unscaled), sliding window"
    if layer.window:
        return "global RoPE, sliding window or chunk"
    return "global RoPE, full attention"


def layer_layouts(configs) -> BookFigure:
    """The layer layout of several models: one row per model, one cell per layer.

    Args:
        configs: a mapping from a label to a ``config.json`` mapping (read
            with :func:`posenc_lib.per_layer.layer_layout`).

    Each cell is coloured by what the layer does with positions (see
    :data:`LAYER_KINDS`).
    """
    if not configs:
        raise ValueError("configs must name at least one model")
    with warnings.catch_warnings():
        # A layout spelled out with the layer fields only: the other fields
        # are the class's defaults by design, which need no warning here.
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        rows = [(label, per_layer.layer_layout(config))
                for label, config in configs.items()]
    depth = max(len(layers) for _, layers in rows)
    fig, ax = new_subplots(7.6, 0.55 * len(rows) + 1.5)
    seen = set()
    for row, (label, layers) in enumerate(rows):
        y = len(rows) - 1 - row
        for layer in layers:
            kind = _layer_kind(layer)
            ax.add_patch(Rectangle((layer.index, y - 0.4), 0.9, 0.8,
                                   color=LAYER_KINDS[kind], lw=0,
                                   label=None if kind in seen else kind))
            seen.add(kind)
    ax.set_xlim(-0.5, depth + 0.5)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows[::-1]], fontsize=8)
    ax.set_xlabel("layer index")
    ax.set_title("Which layers rotate, and with which RoPE", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    order = [labels.index(k) for k in LAYER_KINDS if k in labels]
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7,
              loc="upper center", bbox_to_anchor=(0.45, -0.2), ncol=2)
    return fig
