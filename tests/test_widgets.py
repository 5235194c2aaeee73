"""The interactive-figure mechanism, and every interactive figure of the book."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser

import pytest
from matplotlib.layout_engine import ConstrainedLayoutEngine

from posenc_lib.widgets import InteractiveFigure, Slider, core, registry, set_frontend
from posenc_lib.figures import new_figure

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


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_slider_extreme_renders(name):
    figure = FIGURES[name]
    for params in _extremes(figure):
        png = figure.png(**params)
        assert png.startswith(PNG_MAGIC), (name, params)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_live_widget_survives_every_slider_extreme(name):
    figure = FIGURES[name]
    box = figure.live()
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
    assert [(r["name"], r["max"], r["value"]) for r in ranges] == [
        ("height", "3", "1"), ("color", "2", "1")]
    (payload,) = [json.loads(d) for t, d in parser.scripts if t == "application/json"]
    assert payload["sizes"] == [4, 3]
    assert len(payload["index"]) == 12 and len(payload["frames"]) == 12
    # The frame for (height=3, color=C2) is what the plotting function draws.
    flat = 2 * 3 + 2
    frame = base64.b64decode(payload["frames"][payload["index"][flat]])
    assert frame == core._compress_png(figure.png(height=3, color="C2"))
    # The initial <img> shows the defaults (height=2, color=C1).
    (img,) = [a for t, a in parser.tags if t == "img"]
    default_frame = payload["frames"][payload["index"][1 * 3 + 1]]
    assert img["src"] == "data:image/png;base64," + default_frame
    assert not re.search(r"<script[^>]+src=", figure.static_html()), "external script"


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


def test_live_widget_redraws_on_slider_change():
    figure = _toy_figure()
    box = figure.live()
    first = bytes(box.image.value)
    box.controls[0].value = 4
    assert bytes(box.image.value) != first
    assert bytes(box.image.value) == figure.png(height=4, color="C1")


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
