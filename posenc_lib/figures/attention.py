"""Figures for chapter 1: attention weights with and without positions."""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from ._base import SEQUENTIAL, BookFigure, new_figure

__all__ = ["attention_weights"]


def attention_weights(panels: Mapping[str, torch.Tensor], tokens: Sequence[str],
                      *, width_per_panel: float = 3.2) -> BookFigure:
    """Heatmaps of attention weights, one panel per entry of ``panels``.

    Args:
        panels: title -> ``(n, n)`` weights (query rows, key columns).
        tokens: the ``n`` token strings, used as tick labels.

    Returns:
        A figure with one heatmap per panel and a shared colour bar.
    """
    if not panels:
        raise ValueError("panels must hold at least one weight matrix")
    n = len(tokens)
    for title, w in panels.items():
        if tuple(w.shape) != (n, n):
            raise ValueError(f"panels[{title!r}] must have shape ({n}, {n}), "
                             f"got {tuple(w.shape)}")
    fig = new_figure(width_per_panel * len(panels) + 0.8, 3.2)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    image = None
    for ax, (title, w) in zip(axes, panels.items()):
        image = ax.imshow(w.detach().double().numpy(), cmap=SEQUENTIAL, vmin=0.0, vmax=1.0)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(n), [f"{t} {j}" for j, t in enumerate(tokens)], fontsize=8,
                      rotation=45, ha="right", rotation_mode="anchor")
        ax.set_yticks(range(n), [f"{i} {t}" for i, t in enumerate(tokens)], fontsize=8)
        ax.set_xlabel("key (token position)")
    axes[0].set_ylabel("query (position token)")
    fig.colorbar(image, ax=list(axes), label="attention weight", shrink=0.8)
    return fig
