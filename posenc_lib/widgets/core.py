"""One definition, two renderings: live ipywidgets and kernel-free HTML sliders.

An interactive figure is a pure plotting function (parameters -> matplotlib
``Figure``, from :mod:`posenc_lib.figures`) plus its slider specifications.
:class:`InteractiveFigure` turns that single definition into

* a **live** ipywidgets UI (JupyterLab, Notebook 7, VS Code) whose sliders
  redraw the figure by calling the plotting function, and
* a **static** HTML fragment for the rendered book, where no kernel runs: every
  combination of the sliders' static values is rendered to a PNG frame (at
  ``STATIC_SCALE`` times the book's resolution) when the book is built, and a
  few lines of inline JavaScript swap the frame when a ``<input type=range>``
  moves or a radio button (a categorical choice) is picked. It loads nothing
  from anywhere but the frame files that the book build puts beside the page.

Why precomputed frames: the book has no kernel, and JupyterLite or Pyodide
cannot help (they fetch their runtime from a CDN, and torch has no Pyodide
build). Frames show exactly what the Python function draws, so the static and
the live figure can never disagree. The price is bytes on disk, which grow with
the product of the sliders' static value counts; :data:`MAX_FRAMES` caps it,
identical frames are stored once, and PNGs are palette-compressed. The page
itself carries one frame per figure (``book/_ext/posenc_book.py`` moves the
others into files, loaded when a slider reaches them).

Which rendering a figure uses follows the ``POSENC_LIB_FRONTEND`` environment
variable: ``static`` (set by the book build, see ``book/_ext/posenc_book.py``)
or ``live`` (the default). :func:`set_frontend` overrides it in a session.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import hashlib
import html
import itertools
import json
import math
import numbers
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from ..figures import to_png
from ..figures._base import STATIC_SCALE, compress_png as _compress_png, png_size, shown_size

__all__ = ["Slider", "InteractiveFigure", "set_frontend", "frontend", "MAX_FRAMES",
           "MAX_STATIC_VALUES", "LIVE_SCALE", "STATIC_SCALE", "STALE_NOTE"]

#: Largest number of frames one static figure may hold.
MAX_FRAMES = 144
#: Static values chosen per slider when a spec does not list its own.
MAX_STATIC_VALUES = 7
#: The live widget draws this many image pixels per CSS pixel (sharp on high-DPI
#: screens) and shows the image at its natural size, as ordinary figures are.
LIVE_SCALE = 2
# STATIC_SCALE (imported from posenc_lib.figures._base, re-exported here): the
# book's static frames are drawn at this many image pixels per CSS pixel too, as
# every other figure of the book, and shown at the book's width: sharp at a device
# pixel ratio of 2. The book build stores them as image files beside the page (see
# ``book/_ext/posenc_book.py``), so the page itself carries one frame per figure.
#: The class of the still figure beside the live widget; the save hook of
#: ``make lab`` (scripts/lab/jupyter_server_config.py) looks for it.
STALE_CLASS = "posenc-stale-figure"
#: The class of the live widget's image, by which that save hook finds, in the
#: widget state JupyterLab saves, the image where the sliders were left.
LIVE_IMAGE_CLASS = "posenc-live-image"
#: What a notebook reopened without its kernel shows in place of the sliders,
#: above the figure at its defaults (see :meth:`InteractiveFigure.fallback_bundle`).
STALE_NOTE = "Run this cell to bring the sliders back; below, the figure at its defaults."

_FRONTENDS = ("live", "static")
_frontend_override: str | None = None


def set_frontend(name: str | None) -> None:
    """Force ``"live"`` or ``"static"`` rendering in this session (``None`` resets)."""
    global _frontend_override
    if name is not None and name not in _FRONTENDS:
        raise ValueError(f"name must be one of {list(_FRONTENDS)} or None, got {name!r}")
    _frontend_override = name


def frontend() -> str:
    """The rendering that displaying an :class:`InteractiveFigure` uses now."""
    if _frontend_override is not None:
        return _frontend_override
    value = os.environ.get("POSENC_LIB_FRONTEND", "live")
    return value if value in _FRONTENDS else "live"


def _format(value) -> str:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}".replace(",", "\u2009")
    value = float(value)
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.3g}"
    return f"{value:.4g}"


def _evenly_spaced(values: Sequence, count: int, must_include) -> tuple:
    """``count`` values spread over ``values``, both ends and ``must_include`` kept."""
    if len(values) <= count:
        return tuple(values)
    picks = {round(i * (len(values) - 1) / (count - 1)) for i in range(count)}
    picks.add(values.index(must_include))
    return tuple(values[i] for i in sorted(picks))


@dataclass(frozen=True)
class Slider:
    """A slider over an explicit, ordered list of values.

    Args:
        name: the keyword argument of the plotting function it drives.
        values: every value the live slider offers, in order.
        default: the starting value; one of ``values``.
        label: text shown next to the slider (defaults to ``name``).
        static: the values baked into the static book (a subset of ``values``
            that contains ``default``); by default up to
            :data:`MAX_STATIC_VALUES` values spread evenly, both ends included.
        kind: ``"slider"`` (a range input) or ``"radio"`` (one button per
            value, for categorical choices; :meth:`choice` sets it).

    Use the constructors :meth:`integers`, :meth:`floats`, :meth:`geometric`
    and :meth:`choice` rather than listing values by hand.
    """

    name: str
    values: tuple
    default: Any
    label: str = ""
    static: tuple = ()
    kind: str = "slider"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"name must be a Python identifier, got {self.name!r}")
        if self.kind not in ("slider", "radio"):
            raise ValueError(f"kind of slider {self.name!r} must be 'slider' or 'radio', "
                             f"got {self.kind!r}")
        values = tuple(self.values)
        if not values:
            raise ValueError(f"values of slider {self.name!r} must not be empty")
        if len(set(values)) != len(values):
            raise ValueError(f"values of slider {self.name!r} must be distinct")
        if self.default not in values:
            raise ValueError(f"default of slider {self.name!r} ({self.default!r}) "
                             f"is not one of its values")
        static = tuple(self.static) or _evenly_spaced(values, MAX_STATIC_VALUES, self.default)
        extra = [v for v in static if v not in values]
        if extra:
            raise ValueError(f"static values {extra} of slider {self.name!r} are not "
                             f"among its values")
        if self.default not in static:
            raise ValueError(f"static values of slider {self.name!r} must contain the "
                             f"default {self.default!r}")
        static = tuple(sorted(static, key=values.index))
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "static", static)
        object.__setattr__(self, "label", self.label or self.name)

    @classmethod
    def integers(cls, name: str, start: int, stop: int, step: int = 1, *, default: int,
                 **kwargs) -> "Slider":
        """``start, start + step, ..., stop`` (``stop`` included)."""
        if step <= 0 or stop < start:
            raise ValueError(f"slider {name!r}: need start <= stop and step > 0, got "
                             f"start={start}, stop={stop}, step={step}")
        return cls(name, tuple(range(start, stop + 1, step)), default, **kwargs)

    @classmethod
    def floats(cls, name: str, start: float, stop: float, step: float, *, default: float,
               **kwargs) -> "Slider":
        """Evenly spaced floats from ``start`` to ``stop`` (included), rounded to ``step``."""
        if not step > 0 or not stop >= start:
            raise ValueError(f"slider {name!r}: need start <= stop and step > 0, got "
                             f"start={start}, stop={stop}, step={step}")
        count = int(round((stop - start) / step)) + 1
        decimals = max(0, -math.floor(math.log10(step)) + 1)
        values = tuple(round(start + i * step, decimals) for i in range(count))
        return cls(name, values, round(default, decimals), **kwargs)

    @classmethod
    def geometric(cls, name: str, values: Sequence[float], *, default: float,
                  **kwargs) -> "Slider":
        """An explicit list of values for quantities that span decades (a ``base``)."""
        return cls(name, tuple(values), default, **kwargs)

    @classmethod
    def choice(cls, name: str, options: Sequence, *, default, **kwargs) -> "Slider":
        """Categorical options (strings, say), shown as radio buttons."""
        kwargs.setdefault("kind", "radio")
        return cls(name, tuple(options), default, **kwargs)


@dataclass
class InteractiveFigure:
    """A pure plotting function plus its sliders; displays live or static.

    Args:
        plot: ``plot(**params) -> Figure``, a pure function from the figures layer.
        sliders: one :class:`Slider` per swept keyword argument.
        fixed: further keyword arguments passed to ``plot`` unchanged.
        alt: a one-sentence description, used as the image's alternative text.

    Display it as the last expression of a cell; call :meth:`live` or
    :meth:`static_html` to choose a rendering explicitly.
    """

    plot: Callable[..., Figure]
    sliders: Sequence[Slider]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    alt: str = ""

    def __post_init__(self):
        self.sliders = tuple(self.sliders)
        if not self.sliders:
            raise ValueError("sliders must hold at least one Slider")
        names = [s.name for s in self.sliders]
        if len(set(names)) != len(names):
            raise ValueError(f"slider names must be distinct, got {names}")
        clash = set(names) & set(self.fixed)
        if clash:
            raise ValueError(f"parameters {sorted(clash)} are both sliders and fixed")
        if self.n_frames > MAX_FRAMES:
            raise ValueError(f"the static figure would need {self.n_frames} frames "
                             f"(more than MAX_FRAMES={MAX_FRAMES}): give the sliders "
                             f"fewer static values")
        self._cache: OrderedDict[tuple, bytes] = OrderedDict()
        self._frozen_layout: list | None = None

    # -- parameters and rendering -------------------------------------------------

    @property
    def name(self) -> str:
        return getattr(self.plot, "__name__", "figure")

    @property
    def key(self) -> str:
        """``<figures module>.<function>``, e.g. ``"rope.decay_bound"``: names it in the HTML."""
        module = getattr(self.plot, "__module__", "") or ""
        return f"{module.rsplit('.', 1)[-1]}.{self.name}" if module else self.name

    @property
    def n_frames(self) -> int:
        """How many parameter combinations the static figure holds."""
        return math.prod(len(s.static) for s in self.sliders)

    def defaults(self) -> dict:
        return {s.name: s.default for s in self.sliders}

    def with_fixed(self, **fixed) -> "InteractiveFigure":
        """A copy that passes extra fixed keyword arguments to ``plot``."""
        return replace(self, fixed={**self.fixed, **fixed})  # fresh caches

    def figure(self, **params) -> Figure:
        """The figure at the defaults, overridden by ``params`` (slider names only).

        Every figure gets one axes layout, computed once over the sliders'
        range (see ``_layout``), so the axes do not jump when a slider
        moves, nothing leaves the canvas at any slider end, and redraws skip
        matplotlib's layout solver, the slowest step.
        """
        unknown = set(params) - {s.name for s in self.sliders}
        if unknown:
            raise ValueError(f"unknown slider(s) {sorted(unknown)} for {self.name}; "
                             f"sliders are {[s.name for s in self.sliders]}")
        fig = self.plot(**{**self.fixed, **self.defaults(), **params})
        layout = self._layout()
        if len(fig.axes) == len(layout):
            fig.set_layout_engine("none")
            for ax, position in zip(fig.axes, layout):
                ax.set_position(position)
        return fig

    def _layout(self) -> list:
        """Axes positions that fit every frame: the defaults' layout, shrunk to the range.

        Matplotlib's layout engine fits the figure at the defaults; at another
        slider value the tick labels, titles or legends can be wider (more
        digits, a longer title) and would leave the canvas under that frozen
        layout. So every axes box of the default layout is mapped into a
        smaller frame, by the margins of :meth:`fit_margins`. Those take a few
        seconds to fit; the book's figures find theirs in
        :data:`LAYOUTS_FILE` (``make layouts`` refits them), under a
        fingerprint of everything they depend on, and any other figure is
        fitted here, once.
        """
        if self._frozen_layout is None:
            fig = self.plot(**{**self.fixed, **self.defaults()})
            fig.draw_without_rendering()
            layout = [ax.get_position().frozen() for ax in fig.axes]
            self._dpi = float(fig.dpi)
            stored = _stored_layouts().get(self.layout_fingerprint())
            if stored is not None:
                margins = tuple(stored["margins"])
            else:
                margins = self.fit_margins(fig, layout)
            self._frozen_layout = [_within(box, margins) for box in layout]
        return self._frozen_layout

    def fit_margins(self, fig: Figure | None = None, layout: list | None = None) -> tuple:
        """``(left, bottom, right, top)``, in figure fractions, to keep every frame inside.

        The default layout (``layout``, of the default figure ``fig``) is
        checked against the figure at every combination of the sliders' ends
        (:meth:`layout_params`): the ink of each (``_ink_box``) must keep
        the layout engine's padding from the canvas' edges. Where it does not,
        the axes are mapped into a smaller frame, by the largest overflow on
        each side, and the check runs again (at most ``_LAYOUT_ROUNDS``
        times). A figure whose number of axes depends on the sliders is laid
        out by its own engine at the values where it differs, and is skipped
        here, as is a value the plot refuses (the live widget reports that
        error when the value is picked).
        """
        from matplotlib import rcParams

        if fig is None or layout is None:
            fig = self.plot(**{**self.fixed, **self.defaults()})
            fig.draw_without_rendering()
            layout = [ax.get_position().frozen() for ax in fig.axes]
        width, height = fig.get_size_inches()
        pad_x = float(rcParams["figure.constrained_layout.w_pad"]) / width
        pad_y = float(rcParams["figure.constrained_layout.h_pad"]) / height
        figures = [fig]
        for params in self.layout_params()[1:]:
            try:
                figures.append(self.plot(**{**self.fixed, **params}))
            except Exception:  # noqa: BLE001 - drawing that value reports it itself
                continue
        figures = [f for f in figures if len(f.axes) == len(layout)]
        margins = (0.0, 0.0, 0.0, 0.0)
        for _ in range(_LAYOUT_ROUNDS):
            current = [_within(box, margins) for box in layout]
            left = bottom = right = top = 0.0
            for f in figures:
                f.set_layout_engine("none")
                for ax, position in zip(f.axes, current):
                    ax.set_position(position)
                x0, y0, x1, y1 = self._ink_box(f)
                left, bottom = max(left, pad_x - x0), max(bottom, pad_y - y0)
                right, top = max(right, x1 - 1 + pad_x), max(top, y1 - 1 + pad_y)
            if max(left, bottom, right, top) <= 1e-4:
                break
            # A little more than the overflow: the axes shrink too, so one
            # exact step would leave part of it.
            step = tuple(1.25 * v + 1e-3 if v > 1e-4 else 0.0
                         for v in (left, bottom, right, top))
            combined = _compose(margins, step)
            if combined[0] + combined[2] > 0.5 or combined[1] + combined[3] > 0.5:
                break  # text wider than half the figure: nothing sensible to do
            margins = combined
        return tuple(round(m, 6) for m in margins)

    def layout_fingerprint(self) -> str:
        """A hash of what the fitted margins depend on: the plotting function's
        module, name and source, the sliders, the fixed arguments, matplotlib's
        version and the rcParams that size text and ticks."""
        import inspect

        import matplotlib
        from matplotlib import rcParams

        try:
            source = inspect.getsource(self.plot)
        except (OSError, TypeError):
            source = ""
        text = repr((self.key, source,
                     [(s.name, [repr(v) for v in s.values], repr(s.default))
                      for s in self.sliders],
                     sorted((k, repr(v)) for k, v in self.fixed.items()),
                     matplotlib.__version__,
                     [(k, repr(v)) for k, v in sorted(dict.items(rcParams))
                      if k.startswith(_LAYOUT_RC)]))
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def layout_params(self) -> list[dict]:
        """The slider settings the layout is fitted to: the defaults first, then every
        combination of each slider's first and last value (the others at
        their defaults where that would give more than 16 combinations)."""
        defaults = self.defaults()
        ends = [sorted({s.values[0], s.values[-1]}, key=s.values.index) for s in self.sliders]
        names = [s.name for s in self.sliders]
        if math.prod(len(e) for e in ends) <= 16:
            combos = [dict(zip(names, combo)) for combo in itertools.product(*ends)]
        else:
            combos = [{**defaults, name: value} for name, e in zip(names, ends) for value in e]
        result = [defaults]
        for combo in combos:
            params = {**defaults, **combo}
            if params not in result:
                result.append(params)
        return result

    @staticmethod
    def _ink_box(fig: Figure) -> tuple[float, float, float, float]:
        """Where ``fig`` puts ink, in figure fractions ``(x0, y0, x1, y1)``.

        Every visible artist counts, inside the layout or not (a legend placed
        below the axes, a note in the figure's corner), except the figure's
        own background patch.
        """
        from matplotlib.transforms import Bbox

        renderer = fig.canvas.get_renderer()
        boxes = []
        for artist in fig.get_children():
            if artist is fig.patch or not artist.get_visible():
                continue
            if hasattr(artist, "get_tightbbox"):
                box = artist.get_tightbbox(renderer)
                if box is None and hasattr(artist, "get_window_extent"):
                    box = artist.get_window_extent(renderer)
            else:
                box = artist.get_window_extent(renderer)
            if box is not None and box.width >= 0 and np.isfinite(box.bounds).all():
                boxes.append(box)
            if hasattr(artist, "get_children") and hasattr(artist, "bbox"):  # axes
                for child in artist.get_children():
                    if child.get_visible() and not child.get_in_layout():
                        extent = child.get_window_extent(renderer)
                        if extent is not None and np.isfinite(extent.bounds).all():
                            boxes.append(extent)
        if not boxes:
            return 0.5, 0.5, 0.5, 0.5
        union = Bbox.union(boxes).transformed(fig.transFigure.inverted())
        return union.x0, union.y0, union.x1, union.y1

    @property
    def draft_scale(self) -> float:
        """The live widget's first image after a slider moves, relative to the book's.

        :data:`LIVE_SCALE`: the image drawn while a slider is dragged is as sharp
        as the one it rests on, on a screen with two device pixels per CSS
        pixel (the kernel cannot know the reader's screen; a draft at
        :data:`~posenc_lib.figures.DPI`, 512 px shown at 752, was soft on every
        screen). It costs about a third more time per redraw than that draft
        (``benchmarks/widgets.py``). A subclass for a figure too slow to drag
        at this scale may return less: the widget then sharpens the image once
        the sliders rest (see :meth:`live`).
        """
        return LIVE_SCALE

    def png(self, *, scale: float = 1, **params) -> bytes:
        """PNG bytes of :meth:`figure`, cached for the last 64 parameter sets.

        ``scale`` multiplies the figure's own resolution (the book's, which
        fills the column: see :func:`posenc_lib.figures.figure_dpi`); 2 for
        the live widget on high-DPI screens (:data:`LIVE_SCALE`, and
        :attr:`draft_scale` while a slider is dragged). Encoded fast (zlib level 1) through the caching renderer
        (:func:`posenc_lib.figures.to_png` with ``reuse_axes``); :meth:`frames`
        recompresses for the book.
        """
        key = self._key(scale, params)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        with _gc_paused():
            fig = self.figure(**params)
            data = to_png(fig, dpi=fig.dpi * scale, compress_level=1, reuse_axes=True)
        self._cache[key] = data
        if len(self._cache) > 64:
            self._cache.popitem(last=False)
        return data

    def _key(self, scale: float, params: Mapping) -> tuple:
        return (scale,) + tuple(sorted({**self.defaults(), **params}.items()))

    # -- static rendering ---------------------------------------------------------

    def frames(self, *, progress: bool = False) -> tuple[list[bytes], list[int]]:
        """Render every static combination, at ``STATIC_SCALE`` times the book's resolution.

        Returns:
            ``(unique_frames, index)``: palette-compressed PNGs, each stored
            once, and for every combination (row-major over the sliders, last
            slider fastest) the position of its frame in ``unique_frames``.
        """
        unique: list[bytes] = []
        seen: dict[str, int] = {}
        index: list[int] = []
        combos = list(itertools.product(*(s.static for s in self.sliders)))
        start = time.perf_counter()
        for n, combo in enumerate(combos, 1):
            params = dict(zip((s.name for s in self.sliders), combo))
            data = _compress_png(self.png(scale=STATIC_SCALE, **params))
            digest = hashlib.sha1(data).hexdigest()
            if digest not in seen:
                seen[digest] = len(unique)
                unique.append(data)
            index.append(seen[digest])
            if progress:
                print(f"\r{self.name}: frame {n}/{len(combos)} "
                      f"({time.perf_counter() - start:.1f} s)", end="", flush=True)
        if progress:
            print()
        return unique, index

    def static_html(self) -> str:
        """A self-contained HTML fragment: frames, range inputs and inline JS.

        Every frame is inline (base64 in a JSON payload), so the fragment works
        wherever it is shown. The book build then moves the frames into image
        files beside the page and leaves only the first inline
        (``book/_ext/posenc_book.py``): the payload's ``frames`` become
        ``base`` + ``names``, and the script loads a frame by setting the
        ``<img>``'s ``src`` to its file when a slider reaches it. The ``<img>``
        carries the frame's size in CSS pixels (its pixels over
        ``STATIC_SCALE``), at which the book shows it.
        """
        unique, index = self.frames()
        encoded = [base64.b64encode(f).decode("ascii") for f in unique]
        defaults = [s.static.index(s.default) for s in self.sliders]
        sizes = [len(s.static) for s in self.sliders]
        flat = 0
        for size, position in zip(sizes, defaults):
            flat = flat * size + position
        payload = {
            "sizes": sizes,
            "labels": [[_format(v) for v in s.static] for s in self.sliders],
            "frames": encoded,
            "index": index,
            "first": index[flat],
        }
        first = unique[index[flat]]
        css_width = shown_size(first, STATIC_SCALE)["width"]
        css_height = png_size(first)[1] // STATIC_SCALE
        alt = html.escape(self.alt or f"{self.name} figure", quote=True)
        label_width = self._label_width()
        controls = "\n".join(
            self._radio_html(s, pos, label_width) if s.kind == "radio" else
            f'<label style="display:flex;align-items:center;gap:0.6em;margin:0.2em 0">'
            f'<span style="flex:none;width:{label_width};text-align:right">'
            f'{html.escape(s.label)}</span>'
            f'<input type="range" name="{s.name}" min="0" max="{len(s.static) - 1}" '
            f'step="1" value="{pos}" style="flex:0 1 16em" aria-label="{html.escape(s.label)}" '
            f'data-posenc-control="{s.name}">'
            f'<output style="min-width:5em;font-family:monospace">'
            f'{html.escape(_format(s.default))}</output></label>'
            for s, pos in zip(self.sliders, defaults))
        data_json = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
        return (
            f'<div class="posenc-figure" data-posenc-figure="{html.escape(self.key)}">\n'
            f'<img alt="{alt}" width="{css_width}" height="{css_height}" '
            f'style="max-width:100%;height:auto" '
            f'src="data:image/png;base64,{encoded[index[flat]]}">\n'
            f'<div class="posenc-controls" style="font-size:0.9em">\n{controls}\n</div>\n'
            f'<script type="application/json">{data_json}</script>\n'
            f"<script>{_STATIC_JS}</script>\n"
            f"</div>")

    def _radio_html(self, s: Slider, pos: int, label_width: str) -> str:
        """A categorical choice: one radio button per static value."""
        group = html.escape(f"{self.key}-{s.name}", quote=True)
        buttons = "".join(
            f'<label style="white-space:nowrap"><input type="radio" name="{group}" '
            f'value="{k}"{" checked" if k == pos else ""}> '
            f'{html.escape(_format(v))}</label>'
            for k, v in enumerate(s.static))
        return (f'<div role="radiogroup" aria-label="{html.escape(s.label)}" '
                f'data-posenc-control="{s.name}" style="display:flex;flex-wrap:wrap;'
                f'align-items:center;gap:0.2em 0.9em;margin:0.2em 0">'
                f'<span style="flex:none;width:{label_width};text-align:right">'
                f'{html.escape(s.label)}</span>{buttons}</div>')

    # -- live rendering -----------------------------------------------------------

    def _label_width(self) -> str:
        """One width for every slider label of this figure, so the tracks line up."""
        return f"{max(8, max(len(s.label) for s in self.sliders)) + 1}ch"

    def live(self, *, sharpen_after: float | None = 0.25):
        """An ipywidgets UI: one slider per parameter above the redrawn image.

        The image is shown at the figure's natural width (as large as the static
        figures beside it) and is sharp on high-DPI screens: a slider change
        draws it at :attr:`draft_scale` times the book's resolution
        (:data:`LIVE_SCALE`, 2), shown at the same size. Only if
        :attr:`draft_scale` is less than :data:`LIVE_SCALE` is the image drawn
        again at :data:`LIVE_SCALE` once the sliders have rested for
        ``sharpen_after`` seconds (``None``: never). The image widget carries
        the class ``LIVE_IMAGE_CLASS``, by which the save hook of ``make
        lab`` finds the image where the sliders were left (see
        :meth:`fallback_bundle`). Sliders update
        while dragging: the redraw reuses cached glyphs and axis layers (see
        :mod:`posenc_lib.figures`), and ipywidgets sends at most one change at a
        time while the kernel is busy, so a slow redraw never queues up.
        """
        import ipywidgets as w

        png = self.png(scale=LIVE_SCALE)
        width = int.from_bytes(png[16:20], "big") // LIVE_SCALE  # from the PNG header
        image = w.Image(value=png, format="png",
                        layout=w.Layout(width=f"{width}px", max_width="100%", height="auto"))
        image.add_class(LIVE_IMAGE_CLASS)
        status = w.HTML()
        label_width = self._label_width()
        controls = [
            w.ToggleButtons(
                options=[(_format(v), v) for v in s.values], value=s.default,
                description=s.label, style={"description_width": label_width,
                                            "button_width": "auto"})
            if s.kind == "radio" else
            w.SelectionSlider(
                options=[(_format(v), v) for v in s.values], value=s.default,
                description=s.label, continuous_update=True,
                style={"description_width": label_width},
                layout=w.Layout(width=f"calc({label_width} + 24em)"))
            for s in self.sliders]
        pending = []  # the scheduled sharpening, if any

        def current() -> dict:
            return {s.name: c.value for s, c in zip(self.sliders, controls)}

        def show(scale: float, params: dict) -> None:
            try:
                with _gc_deferred():
                    image.value = self.png(scale=scale, **params)
                status.value = ""
            except Exception as error:  # keep the UI alive; say what went wrong
                status.value = (f'<span style="color:#b00">{html.escape(type(error).__name__)}'
                                f": {html.escape(str(error))}</span>")

        def sharpen(params: dict) -> None:
            pending.clear()
            if params == current():
                show(LIVE_SCALE, params)

        def redraw(_change=None):
            params = current()
            while pending:
                pending.pop().cancel()
            if self._key(LIVE_SCALE, params) in self._cache:  # drawn sharp before
                show(LIVE_SCALE, params)
                return
            draft = self.draft_scale
            show(draft, params)
            if sharpen_after is None or status.value or draft >= LIVE_SCALE:
                return
            handle = _call_later(sharpen_after, sharpen, params)
            if handle is None:  # no event loop (a script, a test): sharpen now
                sharpen(params)
            else:
                pending.append(handle)

        for control in controls:
            control.observe(redraw, names="value")
        box = w.VBox([w.VBox(controls), status, image])
        box.add_class("posenc-live-figure")
        box.redraw = redraw  # exposed for tests and benchmarks
        box.controls = controls
        box.image = image
        box.status = status
        return box

    # -- display ------------------------------------------------------------------

    def _repr_mimebundle_(self, include=None, exclude=None):
        if frontend() == "static":
            return {"text/html": self.static_html(), "text/plain": repr(self)}
        bundle = dict(self.live()._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle.update(self.fallback_bundle())
        return bundle

    def fallback_bundle(self) -> dict:
        """What the live widget's output holds besides the widget: the figure at its defaults.

        A frontend without a widget manager (nbviewer, GitHub, ``nbconvert``)
        shows it instead of the widget: ``text/html`` with ``STALE_NOTE``
        above the image, ``image/png`` and ``text/plain`` (the note) for the
        rest. JupyterLab renders the widget whenever the output holds one, and
        a notebook reopened without its kernel shows "model not found" there.
        The save hook that ``make lab`` sets up
        (``scripts/lab/jupyter_server_config.py``) removes the widget from the
        saved file, so that the reopened notebook shows this bundle.

        The image is drawn at :data:`LIVE_SCALE` times the book's resolution,
        as sharp as the live widget on a high-DPI screen, and the HTML shows
        it at the book's width (the live widget's first image is the same
        drawing, so this costs nothing more).
        """
        data = self.png(scale=LIVE_SCALE)
        width = int.from_bytes(data[16:20], "big") // LIVE_SCALE  # from the PNG header
        png = base64.b64encode(data).decode("ascii")
        alt = html.escape(self.alt or f"{self.name} figure", quote=True)
        note = html.escape(STALE_NOTE)
        return {
            "text/html": (f'<div class="{STALE_CLASS}"><p><em>{note}</em></p>'
                          f'<img alt="{alt}" width="{width}" '
                          f'style="max-width:100%;height:auto" '
                          f'src="data:image/png;base64,{png}"></div>'),
            "image/png": png,
            "text/plain": f"{self!r}\n{STALE_NOTE}",
        }

    def __repr__(self) -> str:
        sliders = ", ".join(f"{s.name}={s.default!r}" for s in self.sliders)
        return f"<InteractiveFigure {self.name}({sliders})>"


#: The rcParams that size text, ticks and the layout's padding: part of a
#: figure's layout fingerprint. (Not ``figure.dpi`` or ``figure.figsize``, which
#: the book's figures set themselves, and which IPython's inline backend changes.)
_LAYOUT_RC = ("font.", "axes.", "xtick.", "ytick.", "legend.", "mathtext.", "text.",
              "figure.constrained_layout.", "figure.title", "figure.label")
#: How many times :meth:`InteractiveFigure._layout` shrinks the layout at most.
_LAYOUT_ROUNDS = 4


#: The fitted margins of the book's interactive figures (see
#: :meth:`InteractiveFigure.fit_margins`), keyed by
#: :meth:`InteractiveFigure.layout_fingerprint`; ``make layouts`` writes it.
LAYOUTS_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data",
                            "figure_layouts.json")
_layouts_cache: dict | None = None


def _stored_layouts() -> dict:
    global _layouts_cache
    if _layouts_cache is None:
        try:
            with open(LAYOUTS_FILE, encoding="utf-8") as file:
                _layouts_cache = json.load(file)
        except FileNotFoundError:
            _layouts_cache = {}
    return _layouts_cache


def write_layouts(figures: Mapping[str, "InteractiveFigure"], path: str = LAYOUTS_FILE) -> dict:
    """Fit the margins of ``figures`` (``{name: figure}``) and store them in ``path``."""
    global _layouts_cache
    stored = {}
    for name, figure in sorted(figures.items()):
        stored[figure.layout_fingerprint()] = {"figure": name,
                                               "margins": list(figure.fit_margins())}
    with open(path, "w", encoding="utf-8") as file:
        json.dump(stored, file, indent=1, sort_keys=True)
        file.write("\n")
    _layouts_cache = None
    return stored


def _compose(first, then):
    """The margins of mapping into ``first``'s frame, then into ``then``'s."""
    l1, b1, r1, t1 = first
    l2, b2, r2, t2 = then
    sx1, sy1, sx2, sy2 = 1 - l1 - r1, 1 - b1 - t1, 1 - l2 - r2, 1 - b2 - t2
    left, bottom = l2 + sx2 * l1, b2 + sy2 * b1
    return (left, bottom, 1 - left - sx2 * sx1, 1 - bottom - sy2 * sy1)


def _within(box, margins):
    """``box`` (figure fractions) mapped from the whole figure into the frame that
    ``margins = (left, bottom, right, top)`` leave."""
    from matplotlib.transforms import Bbox

    left, bottom, right, top = margins
    width, height = 1 - left - right, 1 - bottom - top
    return Bbox.from_extents(left + box.x0 * width, bottom + box.y0 * height,
                             left + box.x1 * width, bottom + box.y1 * height)


def _call_later(delay: float, callback, *args):
    """Schedule ``callback(*args)`` on the running event loop (the kernel's), or ``None``."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop.call_later(delay, callback, *args)


@contextlib.contextmanager
def _gc_paused():
    """No cyclic garbage collection while one figure is drawn.

    A figure allocates thousands of small objects, and the collections they
    trigger would interrupt the drawing. Pausing the collector only defers
    them: the first allocation after the block pays for them (see
    :func:`_gc_deferred` for the live widget, which moves that past the
    image's message).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def _gc_deferred():
    """No cyclic garbage collection until the new image has been sent.

    In a kernel the collector is enabled again from the event loop, after the
    widget's message has gone out, so the collections the redraw triggered run
    while the reader already sees the image. Without a running loop (a
    script, a test) it is enabled at the end of the block.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled and _call_later(0, gc.enable) is None:
            gc.enable()


# The whole client side of a static figure: map the sliders' positions to a
# frame and swap the image. It runs once per figure, where it is defined. The
# first frame is the one the page holds inline (the <img>'s own src); the
# others are inline too (``frames``, base64) or, once the book build has moved
# them out (``base`` + ``names``), image files loaded when a slider reaches them.
_STATIC_JS = (
    "(function(root){"
    "var data=JSON.parse(root.querySelector('script[type=\"application/json\"]').textContent);"
    "var img=root.querySelector('img');var inline=img.getAttribute('src');"
    "var inputs=root.querySelectorAll('[data-posenc-control]');"
    "function at(c){if(c.type==='range'){return +c.value;}"
    "var r=c.querySelector('input:checked');return r?+r.value:0;}"
    "function update(){var flat=0;"
    "for(var i=0;i<inputs.length;i++){var k=at(inputs[i]);flat=flat*data.sizes[i]+k;"
    "if(inputs[i].type==='range'){"
    "inputs[i].nextElementSibling.textContent=data.labels[i][k];}}"
    "var f=data.index[flat];var src=f===data.first?inline:data.names?"
    "data.base+data.names[f]:'data:image/png;base64,'+data.frames[f];"
    "img.setAttribute('src',src);}"
    "for(var i=0;i<inputs.length;i++){inputs[i].addEventListener("
    "inputs[i].type==='range'?'input':'change',update);}"
    "})(document.currentScript.parentNode);"
)
