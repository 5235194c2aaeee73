"""The interactive-figure mechanism, and every interactive figure of the book."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest
from matplotlib.axis import XAxis, YAxis
from matplotlib.layout_engine import ConstrainedLayoutEngine
from PIL import Image

from posenc_lib.widgets import LIVE_SCALE, InteractiveFigure, Slider, core, registry, set_frontend
from posenc_lib.figures import (DPI, SHOWN_WIDTH, _base, fast_rendering, figure_dpi,
                                new_figure, to_png)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIGURES = registry()


def test_registry_is_not_empty():
    assert FIGURES, "no interactive figures registered"


def _extremes(figure: InteractiveFigure):
    """Each slider at its first, last and default value, the others at default."""
    for slider in figure.sliders:
        for value in {slider.values[0], slider.values[-1], slider.default}:
            yield {slider.name: value}
    yield {s.name: s.values[0] for s in figure.sliders}    # every slider at its minimum
    yield {s.name: s.values[-1] for s in figure.sliders}   # every slider at its maximum


def _pixels(png: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGBA"), dtype=np.int16)


# The cached renderer stores an axis layer with straight alpha in 8 bits and
# blends it once more: each step rounds by at most one level.
LAYER_TOLERANCE = 2


def _assert_same_pixels(cached: bytes, reference: bytes, what):
    a, b = _pixels(cached), _pixels(reference)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    worst = int(np.abs(a - b).max())
    assert worst <= LAYER_TOLERANCE, f"{what}: cached pixels differ by up to {worst} levels"


def _eligible_axes(fig) -> int:
    """How many axes of ``fig`` the layer cache should draw (see ``_base._patch_axes``)."""
    return sum(type(axis) in (XAxis, YAxis) and axis.get_visible()
               and _base._plain_artist(axis)
               for ax in fig.axes if getattr(ax, "name", None) == "rectilinear"
               and ax.get_visible() and ax.axison for axis in (ax.xaxis, ax.yaxis))


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_figure_draws_through_the_layer_cache(name):
    """Cheap, for every figure: one draw at the defaults, the way the book and the
    live widget draw it. The image has the figure's size, and every axis went
    through the layer cache: a figure that silently falls back to a full layout
    on each redraw (an axis key that cannot be computed) fails here. That the
    cached pixels are right is checked below on representative figures."""
    figure = FIGURES[name]
    figure._cache.clear()
    fig = figure.figure()
    drawn = _base._layers.hits + _base._layers.misses
    png = to_png(fig, compress_level=1, reuse_axes=True)
    assert png.startswith(PNG_MAGIC)
    width, height = fig.get_size_inches()
    # As wide as the book shows it (narrower figures are never enlarged), or wider.
    assert _png_size(png) == (int(width * fig.dpi), int(height * fig.dpi)), name
    assert _png_size(png)[0] >= SHOWN_WIDTH, name
    assert _base._layers.hits + _base._layers.misses - drawn == _eligible_axes(fig), \
        f"{name}: an axis was drawn without the layer cache"


# The smallest text (legends, titles, tick and axis labels, notes), in CSS pixels
# of font size, where the book shows a figure (at a 1280 x 900 window,
# SHOWN_WIDTH pixels wide; the static frames are drawn at twice that and shown
# at that size).
MIN_TEXT_PX = 10
# A one-character subscript written as plain text ("W_q", "theta_i", "x_{i}")
# instead of mathtext ($W_q$); config keys such as head_dim stay as they are.
_PLAIN_SUBSCRIPT = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]+_(?:[A-Za-z0-9]|\{[^}]*\})"
                              r"(?![A-Za-z0-9_])")


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_text_is_legible_where_the_book_shows_it(name):
    from matplotlib.text import Text

    fig = FIGURES[name].figure()
    natural = int(fig.get_size_inches()[0] * fig.dpi)
    shown = min(natural, SHOWN_WIDTH)  # every figure image fills the column
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    small = [(round(t.get_fontsize() * fig.dpi / 72 * shown / natural, 1), t.get_text())
             for t in texts
             if t.get_fontsize() * fig.dpi / 72 * shown / natural < MIN_TEXT_PX]
    assert not small, f"{name}: text below {MIN_TEXT_PX} px in the book: {small}"
    plain = [t.get_text() for t in texts
             if _PLAIN_SUBSCRIPT.search(re.sub(r"\$[^$]*\$", "", t.get_text()))]
    assert not plain, f"{name}: subscripts written as plain text, not mathtext: {plain}"


def test_plain_subscripts_are_told_from_config_keys():
    assert all(_PLAIN_SUBSCRIPT.search(t) for t in ("W_q", "theta_i", "score of x_{i}"))
    assert not any(_PLAIN_SUBSCRIPT.search(t) for t in (
        "head_dim = 64", "max_distance", "original_max_position_embeddings", "p = 0.25"))


def test_figures_are_drawn_as_wide_as_the_book_shows_them():
    """Every width in inches gives SHOWN_WIDTH pixels, at 1x and 2x, never below DPI."""
    for width in (2.0, 5.6, 6.4, 6.8, 7.2, 8.4, 9.0, SHOWN_WIDTH / DPI):
        fig = new_figure(width, 1.0)
        for scale in (1, 2):
            png = to_png(fig, dpi=fig.dpi * scale, compress_level=1)
            assert _png_size(png)[0] == scale * SHOWN_WIDTH, (width, scale)
    assert figure_dpi(12.0) == DPI  # wider figures are drawn at DPI, and shrunk
    for width in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="width"):
            figure_dpi(width)


# Pixel comparison of the cached renderer against plain savefig, on three
# figures that between them use what the caches must get right: a heatmap with
# a colour bar and two axes (SINUSOIDAL_HEATMAP); three axes with log and
# linear scales, mathtext labels, a colour bar and legends (ROTATION_ANGLES); a
# symlog axis with explicit tick labels (T5_BUCKETS). The decorations the layer
# key must follow are checked one by one further down (VARIANTS). Comparing
# every figure at every slider extreme takes tens of minutes: it is marked
# ``slow`` (``make unit`` skips it); run it after changing the renderer with
#     python -m pytest -m slow tests/figures/test_widgets.py
REPRESENTATIVE = ("absolute.SINUSOIDAL_HEATMAP", "rope.ROTATION_ANGLES",
                  "relative.T5_BUCKETS")


def _compare_with_savefig(name, settings):
    figure = FIGURES[name]
    for n, params in enumerate(settings):
        figure._cache.clear()
        png = figure.png(**params)
        assert png.startswith(PNG_MAGIC), (name, params)
        with fast_rendering(False):
            reference = to_png(figure.figure(**params), compress_level=1)
        _assert_same_pixels(png, reference, (name, params))
        if n == 0:  # drawn again, every axis layer is reused
            figure._cache.clear()
            hits = _base._layers.hits
            _assert_same_pixels(figure.png(**params), reference, (name, params, "reused"))
            assert _base._layers.hits > hits, "no axis layer was reused"


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_cached_pixels_match_savefig(name):
    """The defaults (drawn twice: the second time from cached layers), then every
    slider at its maximum: new ticks and labels, so new layers."""
    figure = FIGURES[name]
    _compare_with_savefig(name, [{}, {s.name: s.values[-1] for s in figure.sliders}])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_slider_extreme_renders_as_savefig_does(name):
    """Every figure, each slider at its ends and default, then all at min and max."""
    _compare_with_savefig(name, list(_extremes(FIGURES[name])))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_live_widget_survives_every_slider_extreme(name):
    figure = FIGURES[name]
    box = figure.live(sharpen_after=None)
    for control, slider in zip(box.controls, figure.sliders):
        start = bytes(box.image.value)
        for value in (slider.values[0], slider.values[-1], slider.default):
            control.value = value
            assert box.status.value == "", (name, slider.name, value, box.status.value)
            assert bytes(box.image.value).startswith(PNG_MAGIC)
        if len(slider.values) > 1:
            control.value = slider.values[0] if slider.default != slider.values[0] \
                else slider.values[-1]
            assert bytes(box.image.value) != start, f"{name}: slider {slider.name} changes nothing"
            control.value = slider.default


# -- the mechanism, on a small figure whose output we can predict ----------------

def _bar(height=1, color="C0", width=1.0):
    fig = new_figure(2, 2)
    ax = fig.subplots()
    ax.bar([0], [height], color=color, width=width)
    ax.set_ylim(0, 5)
    return fig


def _toy_figure(**kwargs):
    return InteractiveFigure(
        _bar, [Slider.integers("height", 1, 4, default=2),
               Slider.choice("color", ("C0", "C1", "C2"), default="C1")], **kwargs)


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.scripts, self._in_script = [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs).get("type", "text/javascript")

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append((self._in_script, data))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None


def test_static_html_holds_every_combination_and_starts_at_the_default():
    figure = _toy_figure()
    parser = _Collector()
    parser.feed(figure.static_html())
    ranges = [a for t, a in parser.tags if t == "input" and a.get("type") == "range"]
    assert [(r["name"], r["max"], r["value"]) for r in ranges] == [("height", "3", "1")]
    # A categorical choice is a group of radio buttons, the default checked.
    radios = [a for t, a in parser.tags if t == "input" and a.get("type") == "radio"]
    assert [(r["value"], "checked" in r) for r in radios] == [
        ("0", False), ("1", True), ("2", False)]
    assert len({r["name"] for r in radios}) == 1
    controls = [a["data-posenc-control"] for t, a in parser.tags
                if "data-posenc-control" in a]
    assert controls == ["height", "color"]  # in the order of the frame index
    (payload,) = [json.loads(d) for t, d in parser.scripts if t == "application/json"]
    assert payload["sizes"] == [4, 3]
    assert len(payload["index"]) == 12 and len(payload["frames"]) == 12
    # The frame for (height=3, color=C2) is what the plotting function draws.
    flat = 2 * 3 + 2
    frame = base64.b64decode(payload["frames"][payload["index"][flat]])
    assert frame == core._compress_png(figure.png(scale=core.STATIC_SCALE, height=3, color="C2"))
    # Drawn at twice the book's resolution: sharp on a high-DPI screen.
    assert _png_size(frame) == (2 * SHOWN_WIDTH, 2 * SHOWN_WIDTH)
    # The initial <img> shows the defaults (height=2, color=C1), at the book's size.
    (img,) = [a for t, a in parser.tags if t == "img"]
    assert payload["first"] == payload["index"][1 * 3 + 1]
    default_frame = payload["frames"][payload["first"]]
    assert img["src"] == "data:image/png;base64," + default_frame
    assert (img["width"], img["height"]) == (str(SHOWN_WIDTH), str(SHOWN_WIDTH))
    assert not re.search(r"<script[^>]+src=", figure.static_html()), "external script"


def test_compressed_frames_keep_the_white_background_white():
    """The palette keeps the figures' white exactly, so a frame sits on the page's white."""
    for png in (_toy_figure().png(), FIGURES["rope.ROTATION_ANGLES"].png()):
        before, after = _pixels(png)[..., :3], _pixels(core._compress_png(png))[..., :3]
        white = (before == 255).all(axis=-1)
        assert white.any() and (after[white] == 255).all()
        assert len(core._compress_png(png)) < len(png)


def test_identical_frames_are_stored_once():
    def ignores_label(height=1, label="a"):
        return _bar(height)

    # 'label' never changes the picture: each frame appears once per height.
    figure = InteractiveFigure(ignores_label, [Slider.integers("height", 1, 3, default=1),
                                               Slider.choice("label", ("a", "b"), default="a")])
    unique, index = figure.frames()
    assert len(index) == 6 and len(unique) == 3
    assert index == [0, 0, 1, 1, 2, 2]


def test_frontend_switch_and_mimebundle(monkeypatch):
    figure = _toy_figure()
    monkeypatch.setenv("POSENC_LIB_FRONTEND", "static")
    bundle = figure._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    monkeypatch.setenv("POSENC_LIB_FRONTEND", "live")
    bundle = figure._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert base64.b64decode(bundle["image/png"]).startswith(PNG_MAGIC)
    set_frontend("static")
    try:
        assert "text/html" in figure._repr_mimebundle_()
    finally:
        set_frontend(None)
    with pytest.raises(ValueError, match="name must be one of"):
        set_frontend("browser")


def _lab_config():
    """scripts/lab/jupyter_server_config.py, the server configuration of ``make lab``."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "lab" / "jupyter_server_config.py"
    spec = importlib.util.spec_from_file_location("posenc_lab_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_live_output_carries_the_still_figure_and_survives_a_reopened_notebook(monkeypatch):
    """The live output holds, beside the widget, the figure at its defaults and a line
    saying how to bring the sliders back; the save hook of ``make lab`` keeps only
    those in the saved file (JupyterLab shows the widget whenever the output holds
    one, and in a reopened notebook that is "model not found")."""
    figure = _toy_figure(alt="a toy bar")
    monkeypatch.setenv("POSENC_LIB_FRONTEND", "live")
    bundle = figure._repr_mimebundle_()
    view = "application/vnd.jupyter.widget-view+json"
    assert bundle[view]["model_id"]
    still = base64.b64decode(bundle["image/png"])
    # the defaults, sharp on a high-DPI screen: twice the book's resolution, shown
    # at the book's width
    assert still == figure.png(scale=LIVE_SCALE)
    assert _png_size(still) == (LIVE_SCALE * SHOWN_WIDTH, LIVE_SCALE * SHOWN_WIDTH)
    parser = _Collector()
    parser.feed(bundle["text/html"])
    (img,) = [a for t, a in parser.tags if t == "img"]
    assert img["width"] == str(SHOWN_WIDTH)
    assert img["src"] == "data:image/png;base64," + bundle["image/png"]
    assert img["alt"] == "a toy bar"
    assert core.STALE_NOTE in bundle["text/html"]
    assert core.STALE_NOTE in bundle["text/plain"]
    assert "sliders back" in core.STALE_NOTE

    lab = _lab_config()
    assert lab.MARKER == core.STALE_CLASS and lab.WIDGET_VIEW == view
    other_widget = {"text/plain": "IntSlider(value=0)", view: {"model_id": "abc"}}
    html_as_lines = dict(bundle, **{"text/html": bundle["text/html"].split("<img")})
    model = {"type": "notebook", "content": {"cells": [
        {"cell_type": "code", "outputs": [
            {"output_type": "execute_result", "data": json.loads(json.dumps(bundle))},
            {"output_type": "display_data", "data": dict(other_widget)},
            {"output_type": "display_data", "data": html_as_lines},
            {"output_type": "stream", "text": "printed"}]},
        {"cell_type": "markdown", "source": "text"}]}}
    lab.strip_widget_views(model=model, path="x.ipynb", contents_manager=None)
    first, second, third, stream = model["content"]["cells"][0]["outputs"]
    assert set(first["data"]) == {"text/html", "image/png", "text/plain"}
    assert first["data"]["image/png"] == bundle["image/png"]
    assert second["data"] == other_widget  # a widget without a still figure is kept
    assert view not in third["data"]
    assert stream == {"output_type": "stream", "text": "printed"}
    untouched = {"type": "file", "content": "text"}
    lab.strip_widget_views(model=untouched)
    assert untouched == {"type": "file", "content": "text"}


def test_live_widget_redraws_on_slider_change():
    figure = _toy_figure()
    box = figure.live()
    first = bytes(box.image.value)
    box.controls[0].value = 4
    assert bytes(box.image.value) != first
    # Without an event loop (a script, this test) the sharp image follows at once.
    assert bytes(box.image.value) == figure.png(scale=LIVE_SCALE, height=4, color="C1")


def _png_size(data: bytes) -> tuple[int, int]:
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_live_image_is_sharp_and_shown_at_its_natural_size():
    figure = _toy_figure()
    box = figure.live()
    natural = _png_size(figure.png())
    assert natural == (SHOWN_WIDTH, SHOWN_WIDTH)  # the 2 x 2 inch toy figure, as the book
    # shows it: as wide as the column
    assert _png_size(bytes(box.image.value)) == (LIVE_SCALE * natural[0],
                                                 LIVE_SCALE * natural[1])
    assert box.image.layout.width == f"{natural[0]}px"
    assert box.image.layout.height == "auto" and box.image.layout.max_width == "100%"


def test_categorical_choices_are_buttons_not_sliders():
    figure = _toy_figure()
    box = figure.live(sharpen_after=None)
    height, color = box.controls
    assert type(height).__name__ == "SelectionSlider"
    assert type(color).__name__ == "ToggleButtons"
    before = bytes(box.image.value)
    color.value = "C2"
    assert bytes(box.image.value) != before
    with pytest.raises(ValueError, match="kind"):
        Slider("x", (1, 2), 1, kind="dial")


def test_slider_labels_share_one_width_and_update_while_dragging():
    figure = InteractiveFigure(
        _bar, [Slider.integers("height", 1, 4, default=2, label="h"),
               Slider.floats("width", 0.2, 1.0, 0.2, default=0.6, label="a much longer label")])
    box = figure.live()
    widths = {c.style.description_width for c in box.controls}
    assert len(widths) == 1, widths
    assert widths.pop() == f"{len('a much longer label') + 1}ch"
    assert len({c.layout.width for c in box.controls}) == 1
    assert all(c.continuous_update for c in box.controls)
    spans = re.findall(r'<span style="flex:none;width:([^;]+);', figure.static_html())
    assert spans == [f"{len('a much longer label') + 1}ch"] * 2


def test_live_widget_draws_at_2x_while_a_slider_is_dragged():
    """Each image while dragging is drawn at LIVE_SCALE times the book's resolution
    and shown at the book's width: sharp on a screen of device pixel ratio 2 (the
    draft used to be 512 px shown at 752)."""
    figure = _toy_figure()

    async def scenario():
        box = figure.live(sharpen_after=0.05)
        drawn = []
        for height in (3, 4, 1):
            box.controls[0].value = height
            drawn.append(bytes(box.image.value))  # what the reader sees at once
        await asyncio.sleep(0.2)
        return box, drawn, bytes(box.image.value)

    box, drawn, rested = asyncio.run(scenario())
    for height, image in zip((3, 4, 1), drawn):
        assert image == figure.png(scale=LIVE_SCALE, height=height, color="C1"), height
        assert _png_size(image) == (LIVE_SCALE * SHOWN_WIDTH, LIVE_SCALE * SHOWN_WIDTH)
    assert rested == drawn[-1]
    assert box.image.layout.width == f"{SHOWN_WIDTH}px"


class _CoarseDraft(InteractiveFigure):
    """A figure too slow to drag at 2x would draft coarser; the widget then sharpens."""

    @property
    def draft_scale(self):
        return DPI / figure_dpi(2)


def test_a_coarser_draft_sharpens_once_the_sliders_rest():
    figure = _CoarseDraft(_bar, _toy_figure().sliders)

    async def scenario():
        box = figure.live(sharpen_after=0.05)
        box.controls[0].value = 3
        draft = bytes(box.image.value)
        assert draft == figure.png(scale=DPI / figure_dpi(2), height=3, color="C1")
        box.controls[0].value = 4  # moves on before the first sharpening is due
        await asyncio.sleep(0.3)
        return draft, bytes(box.image.value)

    draft, rested = asyncio.run(scenario())
    assert rested == figure.png(scale=LIVE_SCALE, height=4, color="C1")
    assert _png_size(draft) == (2 * DPI, 2 * DPI)
    assert _png_size(rested) == (LIVE_SCALE * SHOWN_WIDTH, LIVE_SCALE * SHOWN_WIDTH)


def test_the_saved_still_figure_is_where_the_sliders_were_left(monkeypatch):
    """With ``make lab``'s settings JupyterLab saves every live widget's state in the
    notebook (``serialize_state``: each image widget's PNG in base64); the save hook
    puts the live image, where the sliders were left and drawn at 2x, in place of
    the still figure at the defaults, says so, and drops the state. The state here
    is ipywidgets' own ``get_manager_state`` (the same schema as JupyterLab's),
    after a slider moved."""
    import ipywidgets

    lab = _lab_config()
    assert lab.LIVE_IMAGE == core.LIVE_IMAGE_CLASS
    assert core.STALE_NOTE.endswith(lab.AT_DEFAULTS)
    figure = _toy_figure(alt="a toy bar")
    box = figure.live(sharpen_after=None)
    bundle = {**box._repr_mimebundle_(), **figure.fallback_bundle()}  # as _repr_mimebundle_
    box.controls[0].value = 4
    box.controls[1].value = "C2"
    left = figure.png(scale=LIVE_SCALE, height=4, color="C2")
    assert bytes(box.image.value) == left
    state = json.loads(json.dumps(ipywidgets.Widget.get_manager_state(drop_defaults=True)))
    other = {"text/plain": "IntSlider(value=0)",
             lab.WIDGET_VIEW: {"model_id": ipywidgets.IntSlider().model_id}}
    model = {"type": "notebook", "content": {
        "metadata": {"kernelspec": {"name": "python3"},
                     "widgets": {lab.WIDGET_STATE: state}},
        "cells": [{"cell_type": "code", "outputs": [
            {"output_type": "execute_result", "data": json.loads(json.dumps(bundle))},
            {"output_type": "display_data", "data": dict(other)}]}]}}
    lab.strip_widget_views(model=model)
    first, second = model["content"]["cells"][0]["outputs"]
    data = first["data"]
    assert set(data) == {"text/html", "image/png", "text/plain"}
    assert base64.b64decode(data["image/png"]) == left
    assert _png_size(left) == (LIVE_SCALE * SHOWN_WIDTH, LIVE_SCALE * SHOWN_WIDTH)
    parser = _Collector()
    parser.feed(data["text/html"])
    (img,) = [a for t, a in parser.tags if t == "img"]
    assert img["src"] == "data:image/png;base64," + data["image/png"]
    assert img["width"] == str(SHOWN_WIDTH) and img["alt"] == "a toy bar"
    for text in (data["text/html"], data["text/plain"]):
        assert lab.WHERE_LEFT in text and lab.AT_DEFAULTS not in text
    assert second["data"] == other  # another widget's view is kept
    assert model["content"]["metadata"] == {"kernelspec": {"name": "python3"}}

    # Saved without the widget state (JupyterLab's default setting): the defaults.
    model = {"type": "notebook", "content": {"metadata": {}, "cells": [
        {"cell_type": "code", "outputs": [{"output_type": "execute_result",
                                           "data": json.loads(json.dumps(bundle))}]}]}}
    lab.strip_widget_views(model=model)
    (only,) = model["content"]["cells"][0]["outputs"]
    assert only["data"]["image/png"] == bundle["image/png"] != data["image/png"]
    assert lab.AT_DEFAULTS in only["data"]["text/html"]


def test_live_redraw_leaves_garbage_collection_until_the_image_is_sent():
    import gc

    figure = _toy_figure()

    async def scenario():
        box = figure.live(sharpen_after=None)
        box.controls[0].value = 3
        paused = not gc.isenabled()  # the image is set; the loop has not run yet
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return paused, gc.isenabled()

    assert gc.isenabled()
    assert asyncio.run(scenario()) == (True, True)
    box = figure.live(sharpen_after=None)
    box.controls[0].value = 4  # no event loop: enabled again at once
    assert gc.isenabled()
    gc.disable()
    try:  # a collector the user switched off stays off
        box.controls[0].value = 2
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_live_widget_reports_errors_instead_of_dying():
    def fragile(x=0):
        if x == 2:
            raise ValueError("x = 2 is not drawable")
        return _bar(height=x + 1)

    box = InteractiveFigure(fragile, [Slider.integers("x", 0, 2, default=0)]).live()
    box.controls[0].value = 2
    assert "x = 2 is not drawable" in box.status.value
    box.controls[0].value = 1
    assert box.status.value == ""


def test_layout_is_frozen_at_the_defaults():
    figure = _toy_figure()
    default = figure.figure()
    other = figure.figure(height=4)
    assert default.axes[0].get_position().bounds == other.axes[0].get_position().bounds
    assert not isinstance(other.get_layout_engine(), ConstrainedLayoutEngine)


@pytest.mark.parametrize("make, match", [
    (lambda: Slider("base", (1, 2), 3), "default of slider 'base'"),
    (lambda: Slider("base", (), 3), "must not be empty"),
    (lambda: Slider("base", (1, 1), 1), "distinct"),
    (lambda: Slider("not valid", (1,), 1), "identifier"),
    (lambda: Slider("x", (1, 2, 3), 1, static=(2, 3)), "contain the default"),
    (lambda: Slider("x", (1, 2, 3), 1, static=(1, 4)), "not among its values"),
    (lambda: Slider.integers("x", 5, 1, default=1), "start <= stop"),
    (lambda: Slider.floats("x", 0, 1, 0, default=0), "step > 0"),
    (lambda: InteractiveFigure(_bar, []), "at least one Slider"),
    (lambda: InteractiveFigure(_bar, [Slider("height", (1,), 1)], fixed={"height": 2}),
     "both sliders and fixed"),
    (lambda: InteractiveFigure(_bar, [Slider.integers("height", 1, 20, default=1,
                                                      static=tuple(range(1, 21))),
                                      Slider.integers("width", 1, 20, default=1,
                                                      static=tuple(range(1, 21)))]),
     "MAX_FRAMES"),
])
def test_validation(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_unknown_parameters_are_named():
    with pytest.raises(ValueError, match=r"unknown slider\(s\) \['colour'\]"):
        _toy_figure().figure(colour="C2")


def test_default_static_values_keep_the_ends_and_the_default():
    slider = Slider.integers("n", 1, 100, default=37)
    assert slider.static[0] == 1 and slider.static[-1] == 100 and 37 in slider.static
    assert len(slider.static) <= core.MAX_STATIC_VALUES + 1
    floats = Slider.floats("s", 0.0, 1.0, 0.1, default=0.3)
    assert floats.values[3] == 0.3 and floats.values[-1] == 1.0


# -- the caching renderer: every axis property that changes pixels changes the key ---

def _axis_variant(variant="base"):
    """One axes whose decorations differ from ``base`` in exactly one respect."""
    from matplotlib.ticker import FuncFormatter

    fig = new_figure(3, 2, layout=None)  # the axes box stays put, as in a redraw
    ax = fig.add_axes((0.25, 0.25, 0.65, 0.6))
    x = np.linspace(1, 100, 50)
    ax.plot(x, x ** 0.5 * (1e6 if variant == "offset" else 1))
    if variant == "label color":
        ax.set_xlabel("position p", color="red")
    else:
        ax.set_xlabel("position p")
    ax.set_ylabel("other text" if variant == "label text" else "value")
    ax.set_title("a title" if variant == "title" else "")
    if variant == "tick labels":
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"<{v:g}>"))
    if variant == "tick size":
        ax.tick_params(labelsize=5)
    if variant == "tick direction":
        ax.tick_params(direction="in", length=8)
    if variant == "grid":
        ax.grid(alpha=0.5)
    if variant == "log":
        ax.set_xscale("log")
    if variant == "limits":
        ax.set_xlim(-10, 120)
    if variant == "spine":
        ax.spines["left"].set_position(("outward", 6))
    if variant == "explicit ticks":
        ax.set_yticks([2, 5, 8], ["two", "five", "eight"], fontsize=6, color="blue")
    if variant == "one tick label":
        ax.get_xticklabels()  # creates the ticks; then recolour one of them
        ax.xaxis.get_major_ticks()[2].label1.set_color("green")  # 20, in view
    return fig


VARIANTS = ["offset", "label color", "label text", "title", "tick labels", "tick size",
            "tick direction", "grid", "log", "limits", "spine", "explicit ticks",
            "one tick label"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_axis_layers_follow_every_decoration(variant):
    """Draw the base figure (its layers are cached), then a variant: no stale layer."""
    to_png(_axis_variant("base"), reuse_axes=True)
    cached = to_png(_axis_variant(variant), reuse_axes=True)
    with fast_rendering(False):
        reference = to_png(_axis_variant(variant))
        base = to_png(_axis_variant("base"))
    changed = (np.abs(_pixels(reference) - _pixels(base)).max(axis=-1) > 16).sum()
    assert changed > 20, f"the variant changes only {changed} pixels"
    _assert_same_pixels(cached, reference, variant)


def _legend_variant(variant="base"):
    """One legend that differs from ``base`` in exactly one respect (data the same)."""
    fig = new_figure(3, 2, layout=None)
    ax = fig.add_axes((0.2, 0.2, 0.7, 0.7) if variant != "axes position"
                      else (0.25, 0.2, 0.65, 0.7))
    x = np.linspace(0, 1, 20)
    style = {"color": "red" if variant == "line color" else "C0",
             "ls": "--" if variant == "line style" else "-",
             "lw": 3 if variant == "line width" else 1.5,
             "marker": "s" if variant == "marker" else "o",
             "ms": 7 if variant == "marker size" else 4,
             "mfc": "none" if variant == "marker fill" else None}
    ax.plot(x, x ** 2, label="other label" if variant == "label" else "x squared", **style)
    ax.axvspan(0.2, 0.4, facecolor="0.8", edgecolor="0.3", lw=0, label="a band",
               hatch="//" if variant == "hatch" else None)
    ax.axhline(0.5, color="k", lw=0.8, label="half")
    if variant == "third entry":
        ax.plot(x, x, color="C2", label="identity")
    if variant == "collection":
        ax.vlines([0.7, 0.8], 0, 1, colors="C1", linestyles=":", label="a band")
    kwargs = {"fontsize": 9 if variant == "font size" else 7,
              "loc": "lower right" if variant == "loc" else "upper left",
              "framealpha": 0.3 if variant == "frame alpha" else None,
              "title": "title" if variant == "title" else None,
              "ncols": 2 if variant == "columns" else 1,
              "handlelength": 4 if variant == "handle length" else None,
              "shadow": variant == "shadow",
              "facecolor": "lightyellow" if variant == "frame colour" else None}
    ax.legend(**kwargs)
    if variant == "text colour":
        ax.get_legend().get_texts()[1].set_color("blue")
    if variant == "frame style":  # the default is round, pad=0, rounding_size=0.2
        ax.get_legend().get_frame().set_boxstyle("round", pad=0, rounding_size=1.5)
    return fig


LEGEND_VARIANTS = ["axes position", "line color", "line style", "line width", "marker",
                   "marker size", "marker fill", "label", "hatch", "third entry",
                   "collection", "font size", "loc", "frame alpha", "title", "columns",
                   "handle length", "frame style", "shadow", "frame colour", "text colour"]


@pytest.mark.parametrize("variant", LEGEND_VARIANTS)
def test_cached_legends_follow_every_property(variant):
    """Draw the base legend (its layer is cached), then a variant: no stale legend."""
    to_png(_legend_variant("base"), reuse_axes=True)
    hits = _base._legend_layers.hits
    again = to_png(_legend_variant("base"), reuse_axes=True)
    assert _base._legend_layers.hits == hits + 1, "the base legend was not reused"
    cached = to_png(_legend_variant(variant), reuse_axes=True)
    with fast_rendering(False):
        reference = to_png(_legend_variant(variant))
        base = to_png(_legend_variant("base"))
    _assert_same_pixels(again, base, "base")
    changed = (np.abs(_pixels(reference) - _pixels(base)).max(axis=-1) > 16).sum()
    assert changed > 10, f"the variant changes only {changed} pixels"
    _assert_same_pixels(cached, reference, variant)


def test_legends_placed_by_the_data_are_drawn_afresh():
    """``loc="best"`` looks at the data: such a legend is never taken from the cache."""
    def figure(y):
        fig = new_figure(3, 2, layout=None)
        ax = fig.add_axes((0.2, 0.2, 0.7, 0.7))
        ax.plot([0, 1], [y, y], lw=8, label="a line")
        ax.set_ylim(0, 1)  # the line at the top, then at the bottom: the legend moves
        ax.legend(loc="best")
        return fig

    pixels = []
    for y in (0.9, 0.1):
        with fast_rendering(False):
            reference = to_png(figure(y))
        _assert_same_pixels(to_png(figure(y), reuse_axes=True), reference, y)
        pixels.append(_pixels(reference))
    moved = (np.abs(pixels[0] - pixels[1]).max(axis=-1) > 16).sum()
    assert moved > 200, f"the two legends differ in only {moved} pixels"


def test_cached_glyphs_replay_at_whole_and_fractional_pixel_offsets():
    # At DPI, the offsets below are whole, half and quarter pixels.
    def text_at(x):
        fig = new_figure(2, 1, layout=None)
        fig.text(x, 0.5, "Offset k, $\\theta_i$ (ÿ)", fontsize=9)
        return fig

    for x in (0.1, 0.1 + 1 / (2 * DPI), 0.1 + 3 / (2 * DPI), 0.1 + 0.25 / (2 * DPI)):
        cached = [to_png(text_at(x), dpi=DPI) for _ in range(2)]
        with fast_rendering(False):
            reference = to_png(text_at(x), dpi=DPI)
        for png in cached:  # text has no layer: the pixels are exactly FreeType's
            assert np.array_equal(_pixels(png), _pixels(reference)), x


def test_fast_png_round_trips():
    rng = np.random.default_rng(0)
    for channels in (3, 4):
        pixels = rng.integers(0, 256, size=(7, 5, channels), dtype=np.uint8)
        with Image.open(io.BytesIO(_base._fast_png(pixels, 1))) as image:
            assert np.array_equal(np.asarray(image), pixels)


def test_glyph_bitmaps_are_shared_between_strings_at_every_angle_and_offset():
    """New strings made of glyphs drawn before (rotated, at fractional pixel
    offsets, mathtext with rules, without antialiasing) give FreeType's pixels."""
    def texts(words, shift):
        fig = new_figure(3, 2, layout=None)
        for n, (word, angle) in enumerate(zip(words, (0, 90, 30, 0))):
            fig.text(0.05 + n * 0.22 + shift, 0.3 + 0.1 * n, word, rotation=angle, fontsize=9)
        fig.text(0.1 + shift, 0.85, r"$\frac{m}{2\pi} + \sqrt{d}$", fontsize=10)
        fig.text(0.6 + shift, 0.1, "no antialias 123", fontsize=8, antialiased=False)
        return fig

    renderer = _base._shared_renderer(3 * DPI, 2 * DPI, DPI)
    first = ("pair 12", "angle 3.5", "base 10k", "dim 64")
    later = ("12 pair", "3.5 angle", "10k base", "64 dim")  # same glyphs, new strings
    for shift in (0.0, 0.5 / (3 * DPI), 0.3 / (3 * DPI)):
        for words in (first, later):
            before = len(renderer._glyphs)
            cached = to_png(texts(words, shift), dpi=DPI)
            with fast_rendering(False):
                reference = to_png(texts(words, shift), dpi=DPI)
            assert np.array_equal(_pixels(cached), _pixels(reference)), (words, shift)
        # The second set of strings rasterised fewer glyphs than it drew.
        assert len(renderer._glyphs) - before < sum(len(w) for w in later)

    def one_glyph(angle):  # the glyph's origin is the anchor: same spot at every angle
        fig = new_figure(3, 2, layout=None)
        fig.text(0.5, 0.5, "W", rotation=angle, rotation_mode="anchor", ha="left",
                 va="baseline", fontsize=14)
        return fig

    for angle in (0, 90, 45):
        cached = to_png(one_glyph(angle), dpi=DPI)
        with fast_rendering(False):
            reference = to_png(one_glyph(angle), dpi=DPI)
        assert np.array_equal(_pixels(cached), _pixels(reference)), angle


@pytest.mark.parametrize("grid, kwargs", [
    ((1, 1), {}),
    ((1, 3), {"width_ratios": [1, 2, 1]}),
    ((2, 2), {"sharex": True, "sharey": True}),
    ((3, 1), {"squeeze": False, "height_ratios": [2, 1, 1]}),
])
def test_new_subplots_copies_draw_as_a_freshly_built_figure(grid, kwargs):
    """The second call unpickles the first call's empty figure: same axes, same
    pixels, and nothing drawn on one copy shows up in the next."""
    def draw(fig, axes):
        for n, ax in enumerate(np.ravel(axes)):
            ax.plot(np.arange(10), np.arange(10) ** (n + 1), label=f"line {n}")
            ax.set_title(f"axes {n}")
            ax.legend()
        return fig

    with fast_rendering(False):
        fig = new_figure(4, 3)
        axes = fig.subplots(*grid, **kwargs)
        reference = to_png(draw(fig, axes))
    for _ in range(3):  # built, then copied twice
        fig, copied = _base.new_subplots(4, 3, *grid, **kwargs)
        assert type(copied) is type(axes) and np.shape(copied) == np.shape(axes)
        assert all(not ax.lines for ax in fig.axes)
        with fast_rendering(False):
            assert np.array_equal(_pixels(to_png(draw(fig, copied))), _pixels(reference))
        assert isinstance(fig, _base.BookFigure) and fig._repr_png_().startswith(PNG_MAGIC)
    if kwargs.get("sharex"):
        first, *rest = np.ravel(copied)
        first.set_xlim(-5, 50)
        assert all(ax.get_xlim() == (-5, 50) for ax in rest)


@pytest.mark.parametrize("ticks, labels, minor, labelsize, limits", [
    ([0, 2, 5], None, False, None, (1, 3)),              # widens the view to the ticks
    ([0, 1, 2], ["a", "bb", "ccc"], False, 7, (0, 9)),  # labels and their size
    ([], None, False, None, (0, 9)),                     # no ticks
    ([0, 3], [], False, None, (0, 9)),                   # ticks without labels
    (np.arange(11) - 0.5, None, True, None, (0, 9)),     # minor ticks
    ([1, 10, 100], ["1", "10", "100"], False, 8, None),  # a log axis
])
def test_set_ticks_draws_as_matplotlib_set_ticks_does(ticks, labels, minor, labelsize, limits):
    """Same pixels and limits as ``Axis.set_ticks``, and no tick artists built yet."""
    def figure(use_helper):
        fig = new_figure(4, 3)
        ax, other = fig.subplots(1, 2, sharey=True)
        ax.plot([1, 2, 3], [2, 3, 1])
        if limits is None:
            ax.set_xscale("log")
        else:
            ax.set_xlim(*limits)
            ax.set_ylim(*limits)
        for axis in (ax.xaxis, ax.yaxis):
            if use_helper:
                _base.set_ticks(axis, ticks, labels, minor=minor, labelsize=labelsize)
                assert "majorTicks" not in vars(axis) or len(vars(axis)["majorTicks"]) <= 1
            else:
                extra = {} if labelsize is None else {"fontsize": labelsize}
                axis.set_ticks(ticks, labels, minor=minor, **extra)
        if minor:
            ax.grid(which="minor")
        return fig, ax, other

    with fast_rendering(False):
        fig, ax, other = figure(False)
        reference = to_png(fig)
        expected = ax.get_xlim(), ax.get_ylim(), other.get_ylim()
        fig, ax, other = figure(True)
        assert (ax.get_xlim(), ax.get_ylim(), other.get_ylim()) == expected  # shared y too
        assert np.array_equal(_pixels(to_png(fig)), _pixels(reference))
    with pytest.raises(ValueError, match="labels must give one string per tick"):
        _base.set_ticks(ax.xaxis, [0, 1], ["only one"])


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, strategies as st  # noqa: E402


@given(st.floats(min_value=1e-12, max_value=1e12))
def test_steady_limit_rounds_up_to_a_nearby_step(value):
    limit = _base.steady_limit(value)
    assert value * (1 - 1e-9) <= limit < value * 1.34  # less than a third of headroom
    mantissa = limit / 10.0 ** np.floor(np.log10(limit) + 1e-9)
    assert min(abs(mantissa - step) for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)) < 1e-9
    assert _base.steady_limit(limit) == pytest.approx(limit)  # a step is its own limit


@given(st.floats(min_value=1e-12, max_value=1e12))
def test_steady_limit_with_one_step_is_the_next_power_of_ten(value):
    limit = _base.steady_limit(value, steps=(1,))
    assert value * (1 - 1e-9) <= limit < value * 10.0001
    assert limit == pytest.approx(10.0 ** round(np.log10(limit)))


@pytest.mark.parametrize("steps", [(), (2, 5), (1, 5, 2), (1, 10)])
def test_steady_limit_rejects_steps_that_are_not_a_ladder(steps):
    with pytest.raises(ValueError, match="steps"):
        _base.steady_limit(3.0, steps=steps)


@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_steady_limit_rejects_what_is_not_a_positive_number(value):
    with pytest.raises(ValueError, match="value"):
        _base.steady_limit(value)


def test_experiment_explorer_starts_at_twice_the_training_length():
    """Not at the longest length: at 2L, the first length past training."""
    from posenc_lib.tools import experiment
    from posenc_lib.widgets import experiment as explorer

    config = experiment.Config()
    length = {s.name: s for s in explorer.EXPLORER.sliders}["length"]
    assert length.default == 2 * config.train_length != length.values[-1]
    assert length.values == tuple(config.eval_lengths)
    assert explorer.default_length(experiment.Config(factors=(4, 8))) == \
        4 * config.train_length
    assert explorer.default_length(experiment.Config(factors=(2, 8))) == \
        2 * config.train_length


def test_frequency_allocation_axis_top_is_fixed_or_fitted():
    """``top`` fixes the wavelength axis (never below the data); ``None`` fits it."""
    from posenc_lib.figures import multidim as multidim_figures

    def tops(**kwargs):
        return {ax.get_ylim()[1] for ax in multidim_figures.frequency_allocation(**kwargs).axes}

    assert tops(base=1e4) == {1e5}                  # longest wavelength 54 410
    assert tops(base=1e4, top=1e8) == {1e8}
    assert tops(base=5e6, top=10.0) == {1e8}        # the data need more than 10
    with pytest.raises(ValueError, match="top must be > 1.0"):
        multidim_figures.frequency_allocation(top=0.5)


def test_clocks_shift_one_slider_and_title_fits():
    """Chapter 4's clocks: one slider moves both positions (the score stays), the
    title stays inside the figure at every slider extreme, and n − m is written
    with a minus sign, not a hyphen."""
    from posenc_lib.figures import rope as rope_figures
    from posenc_lib.widgets import rope as rope_widgets

    clocks = rope_widgets.ROTATION_CLOCKS
    assert [s.name for s in clocks.sliders] == ["shift", "distance"]

    def title(**kwargs):
        fig = rope_figures.rotation_clocks(**kwargs)
        fig.canvas.draw()
        text = fig._suptitle
        box = text.get_window_extent(fig.canvas.get_renderer())
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height, (
            kwargs, box, fig.bbox)
        return text.get_text()

    for values in _extremes(clocks):
        kwargs = {s.name: s.default for s in clocks.sliders} | values
        assert "-" not in title(**kwargs).replace("_i", ""), kwargs
    first, moved = title(shift=2, distance=3), title(shift=150, distance=3)
    score = re.compile(r"= (\S+) \(dim")
    assert score.search(first).group(1) == score.search(moved).group(1)
    assert "n − m = −3" in first


def test_rope_decay_curves_stay_inside_the_axes():
    """Chapter 4's decay figure: every curve inside the y-limits, for every head size
    and base the sliders offer (small heads dip to -0.65 of the start)."""
    from posenc_lib.figures import rope as rope_figures
    from posenc_lib.widgets import rope as rope_widgets

    dims, bases = (s.values for s in rope_widgets.DECAY_BOUND.sliders)
    for dim in dims[:4] + dims[-1:]:
        for base in (bases[0], bases[-1]):
            ax = rope_figures.decay_bound(dim, base).axes[0]
            low, high = ax.get_ylim()
            for line in ax.get_lines():
                y = np.asarray(line.get_ydata(), dtype=float)
                assert low <= y.min() and y.max() <= high, (dim, base, line.get_label())


def test_rope_angles_mask_exactly_the_aliased_cells():
    """The angles panel leaves blank the cells where a pair turns by more than half
    a turn across the cell's width, and only those."""
    import math

    from posenc_lib import rope
    from posenc_lib.figures import rope as rope_figures

    fig = rope_figures.rotation_angles(10000.0, 64, 4096)
    mesh = fig.axes[0].collections[0]
    mask = np.ma.getmaskarray(mesh.get_array()).reshape(32, -1)
    edges = np.logspace(0, math.log10(4096), 257)
    turn = rope.inv_freq(64, 10000.0).numpy()[:, None] * np.diff(edges)[None, :]
    assert np.array_equal(mask, turn > math.pi)
    assert mask.any() and not mask.all()


# -- nothing leaves the canvas at any slider end ------------------------------------

#: The ring of pixels at a frame's border that must stay background, and how
#: far from white a pixel may be and still count as background (palette and
#: antialiasing noise are a few levels; ink is far more).
EDGE_PX = 2
INK_LEVELS = 8


def _ink_at_edge(png: bytes) -> int:
    """How many pixels of the outer ``EDGE_PX`` ring of a frame carry ink."""
    rgb = _pixels(png)[..., :3]
    ring = np.ones(rgb.shape[:2], dtype=bool)
    ring[EDGE_PX:-EDGE_PX, EDGE_PX:-EDGE_PX] = False
    return int(((255 - rgb[ring]).max(axis=-1) > INK_LEVELS).sum())


def _slider_ends(figure: InteractiveFigure):
    """Every combination of each slider's first, default and last value."""
    import itertools

    choices = [sorted({s.values[0], s.default, s.values[-1]}, key=s.values.index)
               for s in figure.sliders]
    for combo in itertools.product(*choices):
        yield dict(zip((s.name for s in figure.sliders), combo))


def _widening(width: int = 1):
    """A toy figure whose y tick labels widen with ``width`` and that fills its left side."""
    fig = new_figure(3, 2)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 10.0 ** width])
    ax.set_ylim(0, 10.0 ** width)
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set_ylabel("a long label on the left")
    return fig


def test_layout_makes_room_for_the_widest_slider_end():
    """The default (1) has short tick labels; at 7 they are seven digits wide, and a
    layout frozen at the defaults pushes the y label off the canvas (it did before
    the layout was fitted to the slider ends: the check caught that)."""
    figure = InteractiveFigure(_widening, [Slider.integers("width", 1, 7, default=1)])
    naive = _widening(7)
    default = _widening(1)
    default.draw_without_rendering()
    frozen = [ax.get_position().frozen() for ax in default.axes]
    naive.set_layout_engine("none")
    naive.axes[0].set_position(frozen[0])
    assert _ink_at_edge(to_png(naive)) > 0, "the toy must clip under the defaults' layout"
    for width in (1, 4, 7):
        assert _ink_at_edge(figure.png(width=width)) == 0, width
    assert figure.figure(width=7).axes[0].get_position().bounds == \
        figure.figure(width=1).axes[0].get_position().bounds  # still one layout


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_ink_touches_the_edge_at_any_slider_end(name):
    """Every interactive figure, at every combination of its sliders' first, default
    and last values (up to 27 frames): no ink in the frame's outer 2 px. About 50 s
    for the whole book on one core, so `make slow` runs it."""
    figure = FIGURES[name]
    clipped = {}
    for params in _slider_ends(figure):
        count = _ink_at_edge(figure.png(**params))
        if count:
            clipped[tuple(sorted(params.items()))] = count
    assert not clipped, f"{name}: ink at the frame's edge (pixels) at {clipped}"


def test_every_figure_has_its_fitted_layout_stored():
    """The book's figures take their margins from posenc_lib/data/figure_layouts.json
    (fitting them costs about 1.5 minutes): each figure's fingerprint must be there,
    or the figure, its sliders or matplotlib changed since `make layouts` ran."""
    stored = core._stored_layouts()
    stale = sorted(name for name, figure in FIGURES.items()
                   if figure.layout_fingerprint() not in stored)
    assert not stale, f"run `make layouts`: no stored layout for {stale}"
    names = sorted(entry["figure"] for entry in stored.values())
    assert names == sorted(FIGURES), "run `make layouts`: stored layouts of other figures"


def test_stored_margins_are_the_fitted_ones():
    """One figure refitted here (the cheapest that needed room) gives the stored margins."""
    figure = FIGURES["absolute.SINUSOIDAL_SIMILARITY"]
    stored = core._stored_layouts()[figure.layout_fingerprint()]["margins"]
    assert any(stored), "this figure needs room at some slider end"
    assert np.allclose(figure.fit_margins(), stored, atol=2e-3)


_STRIP = r'''
import json, sys
nb = json.load(sys.stdin)
for cell in nb["cells"]:
    if cell["cell_type"] == "code":
        cell["outputs"], cell["execution_count"] = [], None
nb["metadata"]["language_info"] = {"name": "python"}
sys.stdout.write(json.dumps(nb, indent=1, sort_keys=True) + "\n")
'''


def _notebook_text(source: str, *, saved: bool) -> str:
    """A one-cell notebook as git stores it, or as JupyterLab saves it (outputs, count,
    the kernel's language_info: what the filter strips)."""
    import json

    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "source": source,
            "execution_count": 1 if saved else None,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": "3\n"}]
            if saved else []}
    info = ({"name": "python", "version": "3.11.9", "mimetype": "text/x-python"}
            if saved else {"name": "python"})
    nb = {"cells": [cell], "metadata": {"language_info": info}, "nbformat": 4,
          "nbformat_minor": 5}
    return json.dumps(nb, indent=1, sort_keys=True) + "\n"


def test_save_hook_keeps_git_status_honest(tmp_path):
    """After a save that adds only what the git filter strips, `git status` lists
    nothing (git takes the size change for a change unless the index is refreshed);
    a real edit stays listed and unstaged; an untracked notebook stays untracked."""
    import shutil
    import subprocess
    import sys

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    lab = _lab_config()

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True,
                              text=True, check=True).stdout

    (tmp_path / "strip.py").write_text(_STRIP)
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    git("config", "filter.strip.clean", f'"{sys.executable}" strip.py')
    git("config", "filter.strip.smudge", "cat")
    (tmp_path / ".gitattributes").write_text("*.ipynb filter=strip\n")
    notebook = tmp_path / "a.ipynb"
    notebook.write_text(_notebook_text("1 + 2", saved=False))
    git("add", ".")
    git("commit", "-q", "-m", "clean")

    notebook.write_text(_notebook_text("1 + 2", saved=True))  # Run All, then save
    assert git("diff") == ""
    assert git("status", "--porcelain") == " M a.ipynb\n"  # what the hook fixes
    lab.refresh_git_index(os_path=str(notebook), model={}, contents_manager=None)
    assert git("status", "--porcelain") == ""

    notebook.write_text(_notebook_text("1 + 5", saved=True))  # a real edit
    lab.refresh_git_index(os_path=str(notebook), model={}, contents_manager=None)
    assert git("status", "--porcelain") == " M a.ipynb\n"  # listed, and not staged

    other = tmp_path / "b.ipynb"
    other.write_text(_notebook_text("4", saved=True))
    lab.refresh_git_index(os_path=str(other), model={}, contents_manager=None)
    assert "?? b.ipynb" in git("status", "--porcelain")
    lab.refresh_git_index(os_path=str(tmp_path / "strip.py"), model={}, contents_manager=None)


def test_layout_fingerprint_ignores_what_the_inline_backend_changes():
    """IPython's inline backend sets figure.dpi, figure.figsize and the figure's colours
    when a notebook imports pyplot; the book's figures set their own size and
    resolution, so their stored layouts must still be found. A font size does matter."""
    from matplotlib import rc_context

    figure = FIGURES["rope.DECAY_BOUND"]
    plain = figure.layout_fingerprint()
    with rc_context({"figure.dpi": 72, "figure.figsize": (6.0, 4.0),
                     "figure.facecolor": (1, 1, 1, 0), "figure.subplot.bottom": 0.125}):
        assert figure.layout_fingerprint() == plain
    with rc_context({"font.size": 14}):
        assert figure.layout_fingerprint() != plain
