"""Figures for chapter 1: attention weights with and without positions."""

from __future__ import annotations

import functools

from matplotlib.patches import Rectangle

from .. import _validate, toy
from ._base import SEQUENTIAL, BookFigure, new_subplots, set_ticks
__all__ = ["DOG_SENTENCE", "sentence_attention"]

#: The chapter's example, with the same word at positions 1 and 4.
DOG_SENTENCE = "the dog chased another dog"


@functools.lru_cache(maxsize=32)
def _sentence_weights(sentence: str, encoding: str, causal: bool):
    """The weights of :func:`posenc_lib.toy.sentence_attention` (seeded; cached)."""
    return toy.sentence_attention(sentence, encoding=encoding, causal=causal)[1]


def sentence_attention(encoding: str = "none", mask: str = "off", *,
                       sentence: str = DOG_SENTENCE, head: int = 0) -> BookFigure:
    """Heatmap of one head's attention weights over ``sentence``.

    The weights come from :func:`posenc_lib.toy.sentence_attention` (seeded
    embeddings and layer). The query rows of the first word that occurs twice
    are outlined, and the title gives the largest difference between them.

    Args:
        encoding: one of :data:`posenc_lib.toy.ENCODINGS`.
        mask: ``"off"`` or ``"on"``, the causal mask.
        sentence: words from :data:`posenc_lib.toy.VOCAB`.
        head: which of the four heads to show.
    """
    _validate.one_of("mask", mask, ("off", "on"))
    weights = _sentence_weights(sentence, encoding, mask == "on")
    head = _validate.nonnegative_int("head", head)
    if head >= weights.shape[0]:
        raise ValueError(f"head must be < {weights.shape[0]}, got {head}")
    w = weights[head].numpy()
    tokens = sentence.lower().split()
    n = len(tokens)
    repeated = next((t for t in tokens if tokens.count(t) > 1), None)
    rows = [i for i, t in enumerate(tokens) if t == repeated]

    fig, ax = new_subplots(5.6, 4.4)
    image = ax.imshow(w, cmap=SEQUENTIAL, vmin=0.0, vmax=1.0)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=8,
                    color="black" if w[i, j] > 0.6 else "white")
    for number, i in enumerate(rows):
        ax.add_patch(Rectangle((-0.5, i - 0.5), n, 1, fill=False, edgecolor="C3", lw=2,
                               label=f"queries '{repeated}'" if number == 0 else None))
    ax.set_xticks(range(n), [f"{j} {t}" for j, t in enumerate(tokens)], fontsize=8,
                  rotation=30, ha="right", rotation_mode="anchor")
    set_ticks(ax.yaxis, range(n), [f"{i} {t}" for i, t in enumerate(tokens)], labelsize=8)
    ax.set_xlabel("key (position, word)")
    ax.set_ylabel("query (position, word)")
    if len(rows) >= 2:
        gap = abs(w[rows[0]] - w[rows[1]]).max()
        ax.set_title(f"encoding: {encoding}, causal mask: {mask}\n"
                     f"max |row {rows[0]} − row {rows[1]}| = {gap:.3f}", fontsize=10)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8,
                  frameon=False)
    else:
        ax.set_title(f"encoding: {encoding}, causal mask: {mask}", fontsize=10)
    fig.colorbar(image, ax=ax, label=f"attention weight of head {head} (probability)")
    return fig
