"""Shared plumbing for the figures layer: a Figure that displays itself, and a fast renderer.

Figures are built with :class:`matplotlib.figure.Figure` directly, never with
``pyplot``: no global state, nothing to close, safe to call thousands of times
when the widgets layer renders slider frames.

Rendering (:func:`to_png`, :func:`render_rgba`) draws a figure once with Agg
(``savefig`` draws twice when a figure has a layout engine) and keeps its
caches across figures, so that redrawing a figure whose parameters changed costs
little more than drawing its data:

* **text**: every string is rasterised by FreeType once per font, size, angle
  and sub-pixel offset; later draws replay the same glyph bitmaps at the new
  integer offset, which gives exactly the pixels FreeType would give again;
* **axes decorations** (``reuse_axes=True``, used by the interactive figures):
  each x or y axis (its ticks, tick labels, grid lines, label and offset
  text) is drawn once onto a transparent layer and stored under a key of
  everything that determines its pixels: the axes' box, the view limits and
  scale, the tick locations and their formatted labels, the tick, label and
  spine properties. A later figure whose axis has the same key composites that
  layer in the axis' place in the drawing order, so nothing is laid out again.
  Every axis, cached or not, is drawn through that layer, so the pixels do not
  depend on what was drawn before;
* **legends** (also with ``reuse_axes=True``): the same for each legend, under
  a key of its anchor box and location code, its frame and every text, line,
  patch or collection in its boxes. A legend the key cannot describe (placed
  by ``loc="best"``, which looks at the data, or holding another kind of
  artist) is drawn as usual.

The caches are bounded, guarded by one lock, and can be switched off with
:func:`fast_rendering` (then ``to_png`` is plain ``savefig``), which the tests
use to check that the cached pixels match a plain drawing.
"""

from __future__ import annotations

import contextlib
import io
import math
import pickle
import struct
import threading
import zlib
from collections import OrderedDict

import numpy as np
from matplotlib import rcParams
from matplotlib.axis import XAxis, YAxis
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg, get_hinting_flag
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.ft2font import RenderMode
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.spines import Spine

__all__ = ["BookFigure", "new_figure", "new_subplots", "to_png", "render_rgba",
           "fast_rendering", "plain_log_axis", "set_ticks", "steady_limit", "DPI",
           "SHOWN_WIDTH", "STATIC_SCALE", "figure_dpi", "book_png", "compress_png", "png_size",
           "SEQUENTIAL", "DIVERGING"]

#: Width in CSS pixels at which the book shows every figure at a 1280 x 900
#: window: every figure image fills its ``<figure>`` (book/_ext/posenc.css),
#: which is the article's 832 px less 2 x 32 px of padding and the figure's own
#: 2 x 8 px. Each figure is drawn at least this many pixels wide, whatever its
#: size in inches, so that the book shows it pixel for pixel and never enlarges
#: it (tests/test_browser.py measures both widths in Chromium).
SHOWN_WIDTH = 752
#: The smallest resolution a figure is drawn at (a figure wider than
#: ``SHOWN_WIDTH / DPI`` inches is drawn wider than the column, and shrunk).
DPI = 80
#: The book's still images (every figure, and each frame of a slider figure) are
#: drawn at this many image pixels per CSS pixel and shown at their CSS size: sharp
#: at a device pixel ratio of 2 (see :func:`book_png`).
STATIC_SCALE = 2
SEQUENTIAL = "viridis"
DIVERGING = "RdBu_r"


class BookFigure(Figure):
    """A matplotlib ``Figure`` that Jupyter displays as PNG without ``pyplot``.

    Displayed, it is drawn at ``STATIC_SCALE`` (2) times its own resolution and
    carries, in the output's metadata, the width at which to show it (its own
    resolution's, :data:`SHOWN_WIDTH` pixels for figures from :func:`new_figure`):
    JupyterLab and the book (myst-nb writes it into the ``<img>``) show it at that
    width, sharp on a screen with two device pixels per CSS pixel.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        FigureCanvasAgg(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        data, shown = book_png(self)
        return {"image/png": data}, {"image/png": shown}

    def _repr_png_(self) -> bytes:
        return book_png(self)[0]

    def __setstate__(self, state):  # unpickled (see new_subplots): draw with Agg again
        super().__setstate__(state)
        FigureCanvasAgg(self)


def figure_dpi(width: float) -> float:
    """The resolution a figure ``width`` inches wide is drawn at: ``SHOWN_WIDTH`` pixels.

    Its text, sized in points, then has on screen the size it has in the book
    (the book scales every figure to the column), now without being enlarged.
    Never below :data:`DPI`.
    """
    width = float(width)
    if not (math.isfinite(width) and width > 0):
        raise ValueError(f"width must be a finite number of inches > 0, got {width}")
    # A hair more: matplotlib truncates width * dpi to whole pixels (at 2x too).
    return max(float(DPI), SHOWN_WIDTH * (1 + 2.0 ** -30) / width)


def new_figure(width: float = 6.4, height: float = 3.6, **kwargs) -> BookFigure:
    """A new figure of the given size in inches, laid out with ``constrained``.

    It is drawn at :func:`figure_dpi` of its width (``SHOWN_WIDTH`` pixels
    wide), which ``to_png`` and the notebooks' display use.
    """
    kwargs.setdefault("layout", "constrained")
    return BookFigure(figsize=(width, height), dpi=figure_dpi(width), **kwargs)


_skeletons: OrderedDict = OrderedDict()


def new_subplots(width: float = 6.4, height: float = 3.6, nrows: int = 1, ncols: int = 1,
                 **kwargs):
    """``new_figure(width, height)`` with ``nrows x ncols`` empty axes: ``(fig, axes)``.

    The same as ``fig = new_figure(width, height); axes = fig.subplots(nrows,
    ncols, **kwargs)`` (``axes`` squeezed as ``subplots`` does), made faster
    for figures that sliders redraw: building a matplotlib ``Axes`` costs
    about 8 ms, so the first call pickles the new, empty figure and later
    calls with the same arguments and rcParams unpickle a copy, which takes
    about half as long. Inside ``fast_rendering(False)`` every figure is built
    afresh.

    Args:
        width, height: the figure's size in inches.
        nrows, ncols: the grid of axes.
        **kwargs: passed to matplotlib's ``Figure.subplots``
            (``sharex``, ``width_ratios``, ...); ``layout`` goes to
            :func:`new_figure`.
    """
    layout = kwargs.pop("layout", "constrained")

    def build():
        fig = new_figure(width, height, layout=layout)
        return fig, fig.subplots(nrows, ncols, **kwargs)

    if not _enabled:
        return build()
    key = (repr((width, height, nrows, ncols, layout, sorted(kwargs.items())))
           + repr(list(dict.items(rcParams))))
    with _LOCK:
        blob = _skeletons.get(key)
        if blob is None:
            fig, axes = build()
            _skeletons[key] = pickle.dumps(fig, protocol=pickle.HIGHEST_PROTOCOL)
            if len(_skeletons) > 64:  # more than the live figures of the whole book
                _skeletons.popitem(last=False)
            return fig, axes
        _skeletons.move_to_end(key)
    fig = pickle.loads(blob)
    axes = np.empty((nrows, ncols), dtype=object)
    axes.ravel()[:] = fig.axes
    if kwargs.get("squeeze", True):
        axes = axes.item() if axes.size == 1 else axes.squeeze()
    return fig, axes


# -- rendering --------------------------------------------------------------------

_LOCK = threading.RLock()
_enabled = True


@contextlib.contextmanager
def fast_rendering(enabled: bool):
    """Switch the caches of :func:`to_png` on or off inside a ``with`` block.

    Off, :func:`to_png` is plain ``Figure.savefig`` (the reference the tests
    compare the cached pixels with, and the "before" of the benchmark).
    """
    global _enabled
    with _LOCK:
        previous, _enabled = _enabled, bool(enabled)
        try:
            yield
        finally:
            _enabled = previous


def to_png(fig: Figure, *, dpi: float | None = None, compress_level: int = 6,
           reuse_axes: bool = False) -> bytes:
    """Render ``fig`` to PNG bytes with the Agg backend.

    Args:
        dpi: pixels per inch of the image; ``None``: the figure's own
            (:func:`figure_dpi` of its width for figures from
            :func:`new_figure`; twice that for high-DPI screens).
        compress_level: zlib level, 0-9; it trades size for speed (live widgets use 1).
        reuse_axes: composite cached axis layers (see the module docstring);
            for figures redrawn many times with the same axes.
    """
    from PIL import Image

    if dpi is None:
        dpi = fig.dpi
    if not _enabled:
        if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
            FigureCanvasAgg(fig)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": compress_level})
        return buf.getvalue()
    rgba = render_rgba(fig, dpi=dpi, reuse_axes=reuse_axes)
    if rgba[..., 3].min() == 255:
        rgba = rgba[..., :3]  # opaque: a quarter less to encode and send
    if compress_level <= 3:
        return _fast_png(rgba, compress_level)
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(rgba)).save(buf, format="png",
                                                     compress_level=compress_level)
    return buf.getvalue()


def png_size(data: bytes) -> tuple[int, int]:
    """``(width, height)`` in pixels of PNG ``data``, read from its header."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("data must be PNG bytes (they start with the PNG signature and IHDR)")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def shown_size(data: bytes, scale: float = STATIC_SCALE) -> dict:
    """``{"width": w}``: the CSS width at which PNG ``data``, drawn at ``scale`` image
    pixels per CSS pixel, is shown (its pixel width over ``scale``, rounded down as
    the static frames' ``<img>`` is; the height follows the image's own ratio)."""
    return {"width": int(png_size(data)[0] // scale)}


def book_png(fig: Figure, *, scale: float = STATIC_SCALE) -> tuple[bytes, dict]:
    """A figure as the book stores it: ``(png, {"width": css_width})``.

    Drawn at ``scale`` times the figure's own resolution (fast zlib, then
    :func:`compress_png`'s palette), to be shown ``css_width`` CSS pixels wide:
    the width it has at its own resolution. The slider figures' frames are made
    the same way (:meth:`posenc_lib.widgets.InteractiveFigure.frames`).
    """
    data = compress_png(to_png(fig, dpi=fig.dpi * scale, compress_level=1))
    return data, shown_size(data, scale)


def compress_png(data: bytes) -> bytes:
    """Re-encode a PNG with a 256-colour palette, keeping it if that is not smaller.

    The palette comes from an octree (Pillow's ``FASTOCTREE``), whose error is
    spread evenly over the colours (a few levels in 255): on the book's frames
    it gives files about a quarter smaller than median cut, whose error is
    smaller on average but reaches tens of levels on some colours. Entries
    within 3 levels of white are made white, so a figure's background is the
    page's.
    """
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        quantized = im.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE,
                                               dither=Image.Dither.NONE)
        palette = quantized.getpalette()
        for k in range(0, len(palette), 3):
            if min(palette[k:k + 3]) >= 252:
                palette[k:k + 3] = [255, 255, 255]
        quantized.putpalette(palette)
        buf = io.BytesIO()
        # zlib level 7: at 2x (1504 px wide) level 9 with ``optimize`` took about 4x
        # as long per frame (125 against 33 ms) for files 8 % smaller; the book
        # draws some 960 frames on every cold build.
        quantized.save(buf, format="PNG", compress_level=7)
    smaller = buf.getvalue()
    return smaller if len(smaller) < len(data) else data


def _fast_png(pixels: np.ndarray, level: int) -> bytes:
    """A PNG of ``pixels`` ``(height, width, 3 or 4)`` uint8, without row filters.

    Pillow tries every row filter to find the smallest; for a figure redrawn
    while a slider moves, zlib alone at a low level gives about the same size
    several times faster.
    """
    height, width, channels = pixels.shape
    rows = np.empty((height, 1 + width * channels), np.uint8)
    rows[:, 0] = 0  # filter type "None" for every row
    rows[:, 1:] = pixels.reshape(height, -1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2 if channels == 3 else 6, 0, 0, 0)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), level)) + chunk(b"IEND", b""))


def render_rgba(fig: Figure, *, dpi: float | None = None,
                reuse_axes: bool = False) -> np.ndarray:
    """Draw ``fig`` once and return its pixels, ``(height, width, 4)`` uint8 RGBA.

    ``dpi``: pixels per inch; ``None``: the figure's own.
    """
    if dpi is None:
        dpi = fig.dpi
    with _LOCK:
        if fig.canvas is None or not isinstance(fig.canvas, FigureCanvasAgg):
            FigureCanvasAgg(fig)
        canvas = fig.canvas
        old_dpi = fig.dpi
        fig.dpi = dpi
        patched = []
        try:
            width, height = canvas.get_width_height(physical=True)
            renderer = _shared_renderer(width, height, dpi)
            renderer.rc_key = _rc_key()
            canvas.renderer, canvas._lastKey = renderer, (width, height, dpi)
            if reuse_axes:
                patched = _patch_axes(fig)
            canvas.draw()
            return np.array(renderer.buffer_rgba(), copy=True)
        finally:
            for obj, name in patched:
                obj.__dict__.pop(name, None)
            canvas.renderer, canvas._lastKey = None, None
            fig.dpi = old_dpi


_RC_PREFIXES = ("font.", "mathtext.", "text.", "xtick.", "ytick.", "axes.", "grid.")


def _rc_key() -> str:
    """The rcParams that change how text and ticks look, as one string (hashed once)."""
    return repr([(key, value) for key, value in dict.items(rcParams)
                 if key.startswith(_RC_PREFIXES)])


_renderers: OrderedDict = OrderedDict()


def _shared_renderer(width: int, height: int, dpi: float, layer: bool = False):
    """One renderer per image size: text metrics and glyphs stay cached across figures."""
    key = (width, height, dpi, layer)
    if key not in _renderers:
        _renderers[key] = _GlyphCachingRenderer(width, height, dpi)
        if len(_renderers) > 8:
            _renderers.popitem(last=False)
    _renderers.move_to_end(key)
    return _renderers[key]


class _Recorder:
    """Stands in for the C++ renderer while one string is drawn; records its glyphs."""

    def __init__(self, target):
        self.target, self.glyphs, self.replayable = target, [], True

    def draw_text_image(self, image, x, y, angle, gc):
        self.glyphs.append((np.array(image, copy=True), x, y, angle))
        self.target.draw_text_image(image, x, y, angle, gc)

    def __getattr__(self, name):  # anything but glyphs (mathtext rules, say)
        self.replayable = False
        return getattr(self.target, name)


class _GlyphCachingRenderer(RendererAgg):
    """``RendererAgg`` that rasterises each string once and replays its glyph bitmaps.

    Agg places every glyph at a sub-pixel offset: two draws of the same string
    with the same font, angle and fractional position give the same bitmaps,
    shifted by whole pixels. The cache stores them under that key.
    """

    MAX_STRINGS = 4096
    MAX_GLYPHS = 8192

    def __init__(self, width, height, dpi):
        super().__init__(width, height, dpi)
        self.rc_key = ""
        self._strings: OrderedDict = OrderedDict()
        self._glyphs: dict = {}  # insertion order: the oldest glyph goes first

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath == "TeX":
            return super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
        key = (s, _font_key(prop), angle, ismath, gc.get_antialiased(), x % 1.0, y % 1.0,
               _hashable(getattr(mtext, "get_fontfeatures", lambda: None)()),
               getattr(mtext, "get_language", lambda: None)(), self.rc_key)
        hit = self._strings.get(key)
        if hit is None:
            recorder = _Recorder(self._renderer)
            self._renderer = recorder
            try:
                super().draw_text(gc, x, y, s, prop, angle, ismath, mtext)
            finally:
                self._renderer = recorder.target
            if recorder.replayable:
                self._strings[key] = (math.floor(x), math.floor(y), recorder.glyphs)
                if len(self._strings) > self.MAX_STRINGS:
                    self._strings.popitem(last=False)
            return
        self._strings.move_to_end(key)
        x0, y0, glyphs = hit
        dx, dy = math.floor(x) - x0, math.floor(y) - y0
        for image, gx, gy, g_angle in glyphs:
            self._renderer.draw_text_image(image, gx + dx, gy + dy, g_angle, gc)

    def _draw_text_glyphs_and_boxes(self, gc, x, y, angle, glyphs, boxes):
        """``RendererAgg``'s glyph loop, with each glyph's bitmap rasterised once.

        A string the cache above has not seen still mostly consists of glyphs
        drawn before (new tick labels, changing numbers). FreeType places a
        glyph at a position in 1/64 pixel: its bitmap depends on the font,
        size, transform and that position's fractional part; the whole part
        only moves it. The loop is matplotlib 3.11's
        (``backend_agg.RendererAgg._draw_text_glyphs_and_boxes``), with the
        bitmaps cached under that key; the pixels are FreeType's.
        """
        cos = math.cos(math.radians(angle))
        sin = math.sin(math.radians(angle))
        load_flags = get_hinting_flag()
        antialiased = bool(gc.get_antialiased())
        height = int(self.height)
        for font, size, glyph_index, slant, extend, dx, dy in glyphs:  # dy is upwards
            px = round(0x40 * (x + dx * cos - dy * sin))
            py = round(0x40 * (self.height - y + dx * sin + dy * cos))  # FreeType's y is up
            key = (font.fname, size, self.dpi, glyph_index, slant, extend, angle,
                   px & 0x3F, py & 0x3F, load_flags, antialiased, self.rc_key)
            hit = self._glyphs.get(key)
            if hit is None:
                font.set_size(size, self.dpi)
                font._set_transform(
                    (0x10000 * np.array([[cos, -sin], [sin, cos]])
                     @ [[extend, extend * slant], [0, 1]]).round().astype(int), [px, py])
                bitmap = font._render_glyph(
                    glyph_index, load_flags,
                    RenderMode.NORMAL if antialiased else RenderMode.MONO)
                image = np.array(bitmap.buffer, copy=True)
                if not antialiased:
                    image *= 0xFF
                hit = (image, bitmap.left - (px >> 6), bitmap.top - (py >> 6))
                self._glyphs[key] = hit
                if len(self._glyphs) > self.MAX_GLYPHS:
                    del self._glyphs[next(iter(self._glyphs))]
            image, left, top = hit
            # draw_text_image's y is downwards and names the bitmap's bottom side.
            self._renderer.draw_text_image(image, left + (px >> 6),
                                           height - (top + (py >> 6)) + image.shape[0], 0, gc)
        if boxes:
            super()._draw_text_glyphs_and_boxes(gc, x, y, angle, (), boxes)


def _font_key(prop) -> tuple:
    return (tuple(prop.get_family()), prop.get_style(), prop.get_variant(),
            prop.get_weight(), prop.get_stretch(), prop.get_size_in_points(),
            prop.get_file(), prop.get_math_fontfamily())


def _hashable(value):
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


# -- cached axis layers -----------------------------------------------------------

class _LayerCache:
    """Axis layers by key, least recently used first out, bounded in bytes."""

    MAX_BYTES = 96 * 2 ** 20

    def __init__(self):
        self.layers: OrderedDict = OrderedDict()
        self.nbytes = 0
        self.hits = self.misses = 0

    def get(self, key):
        layer = self.layers.get(key)
        if layer is not None:
            self.layers.move_to_end(key)
        return layer

    def put(self, key, layer):
        self.layers[key] = layer
        self.nbytes += layer[0].nbytes if layer[0] is not None else 0
        while self.nbytes > self.MAX_BYTES and len(self.layers) > 1:
            _, (image, *_rest) = self.layers.popitem(last=False)
            self.nbytes -= image.nbytes if image is not None else 0

    def fetch(self, key, artist, renderer, extra=tuple) -> tuple:
        """``(image, x, y) + extra()``: the layer under ``key``, made on a miss by
        drawing ``artist`` (as its class draws it) on a transparent canvas."""
        layer = self.get(key)
        if layer is None:
            self.misses += 1
            layer = _render_layer(lambda scratch: type(artist).draw(artist, scratch),
                                  renderer) + extra()
            self.put(key, layer)
        else:
            self.hits += 1
        return layer

    def clear(self):
        self.layers.clear()
        self.nbytes = self.hits = self.misses = 0


_layers = _LayerCache()
_legend_layers = _LayerCache()


def _patch_axes(fig) -> list:
    """Route every eligible axis of ``fig`` through :func:`_draw_axis_layer` for one draw."""
    patched = []
    for ax in fig.axes:
        if getattr(ax, "name", None) != "rectilinear":
            continue
        axes_ok = False
        for axis in (ax.xaxis, ax.yaxis):
            if type(axis) in (XAxis, YAxis) and _plain_artist(axis):
                axis.draw = _draw_axis_layer.__get__(axis)
                patched.append((axis, "draw"))
                axes_ok = True
        if axes_ok:
            ax._update_title_position = _update_title_position.__get__(ax)
            patched.append((ax, "_update_title_position"))
    for legend in [ax.get_legend() for ax in fig.axes] + list(fig.legends):
        if type(legend) is Legend and _plain_artist(legend):
            legend.draw = _draw_legend_layer.__get__(legend)
            patched.append((legend, "draw"))
    return patched


def _plain_artist(artist) -> bool:
    """No filter, sketch, path effect, rasterisation or animation that a layer would miss.

    (A clip path is fine: the layer is drawn with it, at the same place.)
    """
    return not (artist.get_agg_filter() or artist.get_sketch_params()
                or artist.get_path_effects() or artist.get_rasterized()
                or artist.get_animated())


def _draw_axis_layer(axis, renderer):
    """Draw ``axis`` by compositing its cached layer (rendering it first on a miss)."""
    if not axis.get_visible():
        return
    key = _axis_key(axis, renderer)
    if key is None:
        type(axis).draw(axis, renderer)
        return
    image, x, y, offset_text = _layers.fetch(key, axis, renderer,
                                             lambda: (axis.offsetText.get_text(),))
    axis.offsetText.set_text(offset_text)
    _composite(renderer, image, x, y)
    axis.stale = False


def _render_layer(draw, renderer) -> tuple:
    """``(image, x, y)``: what ``draw(scratch)`` paints on a transparent canvas the
    size of ``renderer``'s, cropped (``image`` is ``None`` if nothing was painted)."""
    scratch = _shared_renderer(renderer.width, renderer.height, renderer.dpi, layer=True)
    scratch.rc_key = renderer.rc_key
    scratch.clear()  # transparent
    draw(scratch)
    pixels = np.asarray(scratch.buffer_rgba())
    rows = np.flatnonzero(pixels[..., 3].any(axis=1))
    cols = np.flatnonzero(pixels[..., 3].any(axis=0))
    if rows.size == 0:
        return None, 0, 0
    top, bottom, left, right = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    # draw_image takes rows bottom-up and the bottom-left corner.
    image = np.ascontiguousarray(pixels[top:bottom, left:right][::-1])
    return image, int(left), int(renderer.height - bottom)


def _composite(renderer, image, x, y) -> None:
    if image is not None:
        gc = renderer.new_gc()
        renderer.draw_image(gc, x, y, image)
        gc.restore()


def _draw_legend_layer(legend, renderer):
    """Draw ``legend`` by compositing its cached layer (rendering it first on a miss).

    A legend is laid out and drawn from scratch on every draw (a dozen
    milliseconds for a few entries) although a slider rarely changes it. Its
    pixels follow from its place, its frame and the artists in its boxes,
    all in :func:`_legend_key`; a legend placed by ``loc="best"`` (which
    looks at the data) or holding an artist the key does not know is drawn
    as usual.
    """
    if not legend.get_visible():
        return
    key = _legend_key(legend, renderer)
    if key is None:
        _legend_layers.misses += 1
        type(legend).draw(legend, renderer)
        return
    _composite(renderer, *_legend_layers.fetch(key, legend, renderer))
    legend.stale = False


def _legend_key(legend, renderer):
    """Everything that determines the pixels of ``legend``, or ``None`` if unsure."""
    if legend._loc == 0 or legend.get_draggable():  # "best" depends on the data
        return None
    boxes = _box_key(legend._legend_box)
    if boxes is None:
        return None
    frame = legend.legendPatch
    return (renderer.width, renderer.height, renderer.dpi, renderer.rc_key,
            tuple(legend.get_bbox_to_anchor().bounds), legend._loc, legend._mode,
            legend.borderaxespad, legend.borderpad, legend._fontsize, legend.shadow,
            repr(getattr(legend, "_shadow_props", None)), legend.get_alpha(),
            _patch_key(frame), boxes)  # the frame's outline follows its box style


def _box_key(box):
    """The layout and contents of a legend's box tree, or ``None`` for an unknown part."""
    from matplotlib.offsetbox import DrawingArea, HPacker, PaddedBox, TextArea, VPacker

    if not (box.get_visible() and _plain_artist(box)):
        return (type(box).__name__, False)
    kind = type(box)
    if kind in (VPacker, HPacker, PaddedBox):
        children = tuple(_box_key(child) for child in box.get_children())
        if None in children:
            return None
        own = (box.pad, getattr(box, "sep", None), getattr(box, "width", None),
               getattr(box, "height", None), getattr(box, "align", None),
               getattr(box, "mode", None),
               _patch_key(box.patch) if kind is PaddedBox else None)
        return (kind.__name__, own, children)
    if kind is TextArea:
        text = box._text
        return (kind.__name__, box._multilinebaseline, text.get_text(), _artist_key(text),
                text.get_usetex(), text.get_wrap(), tuple(text.get_position()))
    if kind is DrawingArea:
        artists = []
        for artist in box.get_children():
            if not _plain_artist(artist):
                return None
            if isinstance(artist, Line2D):
                part = (_artist_key(artist), artist.get_xydata().tobytes(),
                        artist.get_drawstyle(), artist.get_fillstyle(),
                        str(artist.get_markevery()), artist.get_solid_capstyle(),
                        artist.get_solid_joinstyle(), artist.get_dash_capstyle(),
                        artist.get_dash_joinstyle(), str(artist.get_gapcolor()))
            elif isinstance(artist, Patch):
                part = _patch_key(artist)
            elif type(artist) in (LineCollection, PathCollection, PolyCollection):
                part = (_artist_key(artist), repr(artist.get_linestyle()),
                        _hashable(np.asarray(artist.get_linewidth()).tolist()),
                        np.asarray(artist.get_offsets(), dtype=float).tobytes(),
                        np.asarray(artist.get_sizes(), dtype=float).tobytes(),
                        tuple(path.vertices.tobytes() for path in artist.get_paths()),
                        artist.get_hatch(), _hashable(artist.get_antialiased().tolist()))
            else:
                return None
            artists.append((type(artist).__name__, artist.get_zorder(), part))
        return (kind.__name__, box.width, box.height, box.xdescent, box.ydescent,
                box.clip_children, tuple(artists))
    return None


def _patch_key(patch) -> tuple:
    """A patch's drawing properties and its outline in its own coordinates."""
    return (_artist_key(patch), patch.get_visible(), patch.get_fill(), patch.get_hatch(),
            patch.get_antialiased(), patch.get_capstyle(), patch.get_joinstyle(),
            patch.get_path().vertices.tobytes(),
            patch.get_patch_transform().get_matrix().tobytes())


def _update_title_position(ax, renderer):
    """``Axes._update_title_position`` without laying out the y axis when it cannot matter.

    Matplotlib lays out the y axis only to find its offset text ("1e6"), which
    may push the title up. With no offset text, no ticks or label on top and no
    twinned, aligned or child axes, the result is the same without it.
    """
    base = type(ax)._update_title_position
    try:
        fig = ax.get_figure(root=False)
        alone = (not ax.child_axes
                 and len(ax._twinned_axes.get_siblings(ax)) == 1
                 and len(fig._align_label_groups["title"].get_siblings(ax)) == 1)
        simple = (alone and ax.yaxis.offsetText.get_text() == ""
                  and ax.yaxis.major.formatter.get_offset() == ""
                  and ax.xaxis.get_ticks_position() not in ("top", "unknown")
                  and ax.xaxis.get_label_position() != "top")
    except (AttributeError, KeyError, IndexError):
        simple = False
    if not simple:
        return base(ax, renderer)
    ax.yaxis.get_tightbbox = lambda *args, **kwargs: None
    try:
        return base(ax, renderer)
    finally:
        del ax.yaxis.get_tightbbox


def _axis_key(axis, renderer):
    """Everything that determines the pixels of ``axis``, or ``None`` if unsure."""
    ax = axis.axes
    name = axis._get_axis_name()
    try:
        if len(ax.get_figure(root=False)._align_label_groups[name].get_siblings(ax)) != 1:
            return None  # aligned labels depend on other axes
    except (AttributeError, KeyError):
        return None
    for part in (axis.label, axis.offsetText):
        if not _plain_artist(part):
            return None
    major = np.asarray(axis.get_majorticklocs(), dtype=float)
    major_labels = tuple(axis.major.formatter.format_ticks(major))
    offset = axis.major.formatter.get_offset()
    minor = np.asarray(axis.get_minorticklocs(), dtype=float)
    minor_labels = tuple(axis.minor.formatter.format_ticks(minor))
    view = np.asarray(axis.get_view_interval(), dtype=float)
    scaled = axis.get_transform().transform(np.concatenate([view, major, minor]))
    ticks = []
    for attr in ("majorTicks", "minorTicks"):  # ticks that exist already carry properties
        for tick in vars(axis).get(attr, ()):
            ticks.append((attr, getattr(tick, "_pad", None), getattr(tick, "_tickdir", None),
                          _hashable(getattr(tick, "_labelrotation", None)),
                          tuple(_artist_key(a) for a in (tick.tick1line, tick.tick2line,
                                                          tick.gridline, tick.label1,
                                                          tick.label2))))
    # A standard spine's path follows from its position, bounds and the view;
    # others (a colour bar's outline) carry their own.
    spines = tuple((n, type(s).__name__, _hashable(getattr(s, "_position", None)),
                    s.get_visible(), _hashable(getattr(s, "_bounds", None)),
                    None if type(s) is Spine else s.get_path().vertices.tobytes(),
                    _artist_key(s)) for n, s in ax.spines.items())
    return (renderer.width, renderer.height, renderer.dpi, renderer.rc_key,
            type(axis).__name__, tuple(ax.bbox.bounds), axis.get_scale(),
            view.tobytes(), major.tobytes(), minor.tobytes(), scaled.tobytes(),
            major_labels, minor_labels, offset,
            repr(sorted(axis._major_tick_kw.items())),
            repr(sorted(axis._minor_tick_kw.items())), tuple(ticks),
            _artist_key(axis.label), axis.label.get_text(), axis.labelpad,
            axis.label_position, axis._autolabelpos,
            None if axis._autolabelpos else tuple(axis.label.get_position()),
            _artist_key(axis.offsetText), axis.offset_text_position, spines)


def _artist_key(artist) -> tuple:
    """The drawing properties of a tick line, spine or text that ticks copy around."""
    common = (type(artist).__name__, artist.get_visible(), artist.get_alpha(),
              artist.get_zorder())
    if hasattr(artist, "get_fontproperties"):
        return common + (_font_key(artist.get_fontproperties()), str(artist.get_color()),
                         artist.get_rotation(), artist.get_horizontalalignment(),
                         artist.get_verticalalignment(), artist.get_rotation_mode(),
                         artist.get_linespacing(), artist.get_bbox_patch() is not None,
                         _hashable(artist.get_transform_rotates_text()))
    if hasattr(artist, "get_marker"):
        return common + (str(artist.get_color()), artist.get_linewidth(),
                         str(artist.get_linestyle()), _hashable(getattr(artist, "_dash_pattern", None)),
                         str(artist.get_marker()), artist.get_markersize(),
                         artist.get_markeredgewidth(), str(artist.get_markeredgecolor()),
                         str(artist.get_markerfacecolor()), artist.get_antialiased(),
                         _hashable(artist.get_clip_on()))
    if hasattr(artist, "get_edgecolor"):
        return common + (_hashable(np.asarray(artist.get_edgecolor()).tolist()),
                         artist.get_linewidth(), str(artist.get_linestyle()),
                         _hashable(np.asarray(artist.get_facecolor()).tolist()))
    return common


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


def set_ticks(axis, ticks, labels=None, *, minor: bool = False, labelsize=None) -> None:
    """``axis.set_ticks(ticks, labels)``, without building the tick artists now.

    Matplotlib's ``Axis.set_ticks`` makes one ``Tick`` (two lines, two texts)
    per location at once, about a millisecond each; a live redraw that finds
    the axis in its layer cache never draws them. This sets the same
    ``FixedLocator`` (and ``FixedFormatter`` for ``labels``), and widens the
    view to include the ticks as ``set_ticks`` does; the ticks are made when
    the axis is drawn.

    Args:
        axis: ``ax.xaxis`` or ``ax.yaxis``.
        ticks: tick locations in data coordinates.
        labels: one string per tick, or ``None`` to keep the formatter
            (an empty list hides the labels, as in matplotlib).
        minor: set the minor ticks instead.
        labelsize: the labels' font size (``set_ticks(..., fontsize=...)``),
            through ``set_tick_params``, so that ticks made later get it too.
    """
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter

    ticks = [float(t) for t in np.asarray(ticks, dtype=float).ravel()]
    if labels is not None:
        labels = [str(label) for label in labels]
        if labels and len(labels) != len(ticks):
            raise ValueError(f"labels must give one string per tick: {len(ticks)} ticks, "
                             f"{len(labels)} labels")
    if ticks:
        for shared in axis._get_shared_axis():
            shared.set_view_interval(min(ticks), max(ticks))  # only ever widens
    which = "minor" if minor else "major"
    getattr(axis, f"set_{which}_locator")(FixedLocator(ticks))
    if labels is not None:
        getattr(axis, f"set_{which}_formatter")(FixedFormatter(labels) if labels
                                                else NullFormatter())
    if labelsize is not None:
        axis.set_tick_params(which=which, labelsize=labelsize)
    axis.axes.stale = True


_STEPS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)


def steady_limit(value: float, steps=_STEPS) -> float:
    """``value`` rounded up to one of ``steps`` times a power of ten.

    With the default steps (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8) an axis limit
    rounded up this way changes only when the data cross a step (it adds less
    than a third of headroom), so a slider that moves the data a little keeps
    the axis, and its cached layer, unchanged. ``steps=(1,)`` gives the next
    power of ten, for log axes.

    Args:
        value: a finite number > 0.
        steps: increasing numbers in ``[1, 10)``, starting with 1.
    """
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"value must be finite and > 0, got {value}")
    steps = tuple(float(step) for step in steps)
    if not steps or steps[0] != 1.0 or steps[-1] >= 10.0 or list(steps) != sorted(set(steps)):
        raise ValueError(f"steps must increase from 1 and stay below 10, got {steps}")
    scale = 10.0 ** math.floor(math.log10(value))
    for step in steps + (10.0,):
        limit = step * scale
        if limit >= value * (1 - 1e-12):
            return limit
    return 10.0 * scale
