"""Shared plumbing for the figures layer: a Figure that displays itself.

Figures are built with :class:`matplotlib.figure.Figure` directly, never with
``pyplot``: no global state, nothing to close, safe to call thousands of times
when the widgets layer renders slider frames.
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["BookFigure", "new_figure", "to_png", "plain_log_axis", "DPI", "SEQUENTIAL",
           "DIVERGING"]

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


def to_png(fig: Figure, *, dpi: float = DPI, compress_level: int = 6) -> bytes:
    """Render ``fig`` to PNG bytes with the Agg backend.

    ``compress_level`` (0-9) trades size for speed; live widgets use 1.
    """
    if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": compress_level})
    return buf.getvalue()


def plain_log_axis(axis) -> None:
    """Label a log-scaled axis with plain numbers (10, 100, 1k, ...), no minor labels.

    Much cheaper to draw than matplotlib's default mathtext labels ($10^3$),
    which matters for figures that live sliders redraw.
    """
    from matplotlib.ticker import FuncFormatter, NullFormatter

    def label(value, _position):
        for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if value >= threshold:
                return f"{value / threshold:g}{suffix}"
        return f"{value:g}"

    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_formatter(NullFormatter())
