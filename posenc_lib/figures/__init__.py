"""Figures layer: pure functions from parameters to a matplotlib ``Figure``.

Every function here builds a fresh :class:`~posenc_lib.figures.BookFigure`
and returns it; nothing is drawn on a global canvas. The widgets layer calls
the same functions for live sliders and for the static frames of the book.
This layer imports numerics and matplotlib, never ipywidgets.

One module per chapter (``posenc_lib.figures.absolute``, ...); import it
explicitly, e.g. ``from posenc_lib.figures import absolute as figures``.
"""

from ._base import (DIVERGING, DPI, SEQUENTIAL, SHOWN_WIDTH, BookFigure, fast_rendering,
                    figure_dpi, new_figure, new_subplots, plain_log_axis, render_rgba,
                    set_ticks, steady_limit, to_png)

__all__ = ["BookFigure", "new_figure", "new_subplots", "to_png", "render_rgba",
           "fast_rendering", "plain_log_axis", "set_ticks", "steady_limit", "DPI",
           "SHOWN_WIDTH", "figure_dpi", "SEQUENTIAL", "DIVERGING"]
