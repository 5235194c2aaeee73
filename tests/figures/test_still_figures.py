"""Figures without sliders, as a notebook displays them: drawn at 2x, shown at 1x.

IPython's own display formatter turns a :class:`~posenc_lib.figures.BookFigure`
into the output a notebook stores: a PNG drawn at ``STATIC_SCALE`` (2) times the
figure's resolution, and in the output's metadata the width to show it at (the
figure's width at its own resolution, ``SHOWN_WIDTH`` for the book's figures).
myst-nb writes that width into the book's ``<img>``, and JupyterLab sizes the
image by it; tests/test_browser.py measures both widths in the built book.
"""

from __future__ import annotations

import io

import pytest
from IPython.core.formatters import DisplayFormatter
from PIL import Image

from posenc_lib.figures import DPI, SHOWN_WIDTH, new_figure
from posenc_lib.figures import _base


def _drawn(width, height):
    fig = new_figure(width, height)
    ax = fig.subplots()
    ax.plot([0, 1, 2], [2, 0, 1], label="a line")
    ax.set_title("a title")
    ax.legend()
    return fig


@pytest.mark.parametrize("width, height", [(6.4, 3.6), (2.0, 2.0), (12.0, 3.0)])
def test_a_figure_is_displayed_drawn_at_twice_the_width_it_is_shown_at(width, height):
    fig = _drawn(width, height)
    data, metadata = DisplayFormatter().format(fig)
    png = data["image/png"]
    shown = int(width * fig.dpi)  # its width at its own resolution
    assert shown == (SHOWN_WIDTH if width * DPI <= SHOWN_WIDTH else int(width * DPI))
    assert _base.png_size(png) == (2 * shown, int(height * 2 * fig.dpi))
    assert metadata == {"image/png": {"width": shown}}
    with Image.open(io.BytesIO(png)) as image:
        assert image.mode == "P"  # a 256-colour palette, as the slider frames
    assert fig._repr_png_() == png


def test_the_2x_image_is_drawn_not_enlarged():
    """Twice the pixels, not each pixel doubled: the text's antialiased edges land
    on single device pixels, so many 2 x 2 blocks are not of one colour."""
    import numpy as np

    png, _ = _base.book_png(_drawn(6.4, 3.6))
    with Image.open(io.BytesIO(png)) as image:
        pixels = np.asarray(image.convert("RGB"), dtype=np.int16)
    blocks = pixels[: pixels.shape[0] // 2 * 2].reshape(pixels.shape[0] // 2, 2, -1, 2, 3)
    uniform = (blocks == blocks[:, :1, :, :1]).all(axis=(1, 3, 4))
    assert not uniform.all()


def test_png_size_refuses_what_is_not_a_png():
    with pytest.raises(ValueError, match="data must be PNG"):
        _base.png_size(b"GIF89a" + bytes(30))
