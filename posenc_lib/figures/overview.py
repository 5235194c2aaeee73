"""The introduction's map of the field: where each encoding enters attention."""

from __future__ import annotations

from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from ._base import BookFigure, new_figure

__all__ = ["ENTRY_POINTS", "field_map"]

#: Where a positional encoding can enter one attention layer, in the order a
#: token meets them, with the encodings of this book that enter there and the
#: chapter label that derives and checks each.
ENTRY_POINTS = (
    ("added to the input", "x + PE(p)", (
        ("sinusoidal", "ch-absolute"), ("learned table", "ch-absolute"))),
    ("rotating q and k", "R(m) q, R(n) k", (
        ("RoPE", "ch-rope"), ("M-RoPE, 2D/3D", "ch-multidim"),
        ("PI, NTK, YaRN, Llama 3", "ch-extension"), ("xPos", "ch-extension"))),
    ("biasing the scores", "q·k + bias(i, j)", (
        ("Shaw et al. (+ values)", "ch-relative"), ("T5 buckets", "ch-relative"),
        ("Transformer-XL", "ch-relative"), ("DeBERTa, TUPE", "ch-relative"),
        ("KERPLE, FIRE, CoPE", "ch-relative"), ("ALiBi", "ch-extension"))),
    ("nothing", "causal mask only", (
        ("NoPE", "ch-why-positions"),)),
)

_PIPELINE = ("token\nembedding x", "+", "W_q, W_k,\nW_v", "q, k", "q·kᵀ/√d", "softmax\n(mask)",
             "weights\n· v")
# Which pipeline stage each entry point attaches to (indices into _PIPELINE).
_STAGE = (1, 3, 4, 5)
_COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#8C8C8C")


def field_map() -> BookFigure:
    """One attention layer, left to right, with the four places positions can enter.

    Below each place, the encodings of this book that enter there
    (:data:`ENTRY_POINTS`); the colours match the introduction's table.
    """
    tallest = max(len(encodings) for _where, _formula, encodings in ENTRY_POINTS)
    bottom = min(1.0, 30 - (6 + 4.2 * tallest) - 1.5)  # room for the longest column
    fig = new_figure(7.2, 3.8 * (55.5 - bottom) / 54.5, layout=None)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 100)
    ax.set_ylim(bottom, 55.5)
    ax.axis("off")

    step = 100 / len(_PIPELINE)
    centres = [step * (k + 0.5) for k in range(len(_PIPELINE))]
    top = 45
    for k, (x, label) in enumerate(zip(centres, _PIPELINE)):
        small = label == "+"
        width = 5 if small else step - 3
        ax.add_patch(FancyBboxPatch((x - width / 2, top - 4), width, 8,
                                    boxstyle="round,pad=0.4,rounding_size=1.2",
                                    fc="white", ec="#333333", lw=1))
        ax.text(x, top, label, ha="center", va="center", fontsize=8.5 if not small else 12)
        if k:
            left = centres[k - 1] + (2.5 if _PIPELINE[k - 1] == "+" else step / 2 - 1.5)
            right = x - (2.5 if small else width / 2)
            ax.add_patch(FancyArrowPatch((left + 0.6, top), (right - 0.6, top),
                                         arrowstyle="-|>", mutation_scale=9, lw=1,
                                         color="#333333"))
    ax.text(50, 53, "one attention layer", ha="center", va="center", fontsize=9,
            color="#333333", style="italic")

    column = 100 / len(ENTRY_POINTS)
    for n, ((where, formula, encodings), stage, colour) in enumerate(
            zip(ENTRY_POINTS, _STAGE, _COLOURS)):
        x = column * (n + 0.5)
        height = 6 + 4.2 * len(encodings)
        box_top = 30
        ax.add_patch(FancyBboxPatch((x - column / 2 + 1.8, box_top - height), column - 3.6,
                                    height, boxstyle="round,pad=0.4,rounding_size=1.5",
                                    fc=colour, alpha=0.14, ec=colour, lw=1.4))
        ax.text(x, box_top - 2.2, where, ha="center", va="center", fontsize=9,
                weight="bold", color=colour)
        ax.text(x, box_top - 5.6, formula, ha="center", va="center", fontsize=8,
                color="#333333")
        for row, (name, _label) in enumerate(encodings):
            ax.text(x, box_top - 9.8 - 4.2 * row, name, ha="center", va="center",
                    fontsize=8.5)
        ax.add_patch(FancyArrowPatch((x, box_top + 0.6), (centres[stage], top - 4.6),
                                     arrowstyle="-|>", mutation_scale=10, lw=1.4,
                                     color=colour, connectionstyle="arc3,rad=0"))
    return fig
