"""Shared plumbing for the figures layer: a Figure that displays itself.

Figures are built with :class:`matplotlib.figure.Figure` directly, never with
``pyplot``: no global state, nothing to close, safe to call thousands of times
when the widgets layer renders slider frames.
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["BookFigure", "new_figure", "to_png", "DPI", "SEQUENTIAL", "DIVERGING"]

DPI = 80  # one resolution for notebooks, live widgets and static frames
SEQUENTIAL = "viridis"
DIVERGING = "RdBu_r"


class BookFigure(Figure):
    """A matplotlib ``Figure`` that Jupyter displays as PNG without ``pyplot``."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        FigureCanvasAgg(self)

    def _repr_png_(self) -> bytes:
        return to_png(self)


def new_figure(width: float = 6.4, height: float = 3.6, **kwargs) -> BookFigure:
    """A new figure of the given size in inches, laid out with ``constrained``."""
    kwargs.setdefault("layout", "constrained")
    return BookFigure(figsize=(width, height), dpi=DPI, **kwargs)


def to_png(fig: Figure, *, dpi: float = DPI) -> bytes:
    """Render ``fig`` to PNG bytes with the Agg backend."""
    if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
