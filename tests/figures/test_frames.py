"""The slider figures' frames as files beside the page (book/_ext/posenc_book.py).

A notebook's output holds every frame of a slider figure inline, drawn at
twice the book's resolution; the book build keeps the first inline and moves
the others into ``_images/frames/``, loaded when a slider reaches them. Here on
a small figure in a throw-away output folder: what is written, that the page
names exactly those files (relative to its own folder), that a second run
changes nothing and that files no page names are removed; and, in Chromium
(marked ``browser``), that the page shows the 2x frame at each slider end from
``file://`` and from an HTTP server, with no failed request.
"""

from __future__ import annotations

import base64
import functools
import http.server
import importlib.util
import json
import os
import re
import threading
from pathlib import Path

import pytest
from helpers.paths import ROOT

from posenc_lib.figures import SHOWN_WIDTH, new_figure
from posenc_lib.widgets import InteractiveFigure, Slider, core


def _extension():
    path = ROOT / "book" / "_ext" / "posenc_book.py"
    spec = importlib.util.spec_from_file_location("posenc_book_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bar(height=1, color="C0"):
    fig = new_figure(3, 1.5)
    ax = fig.subplots()
    ax.bar([0], [height], color=color)
    ax.set_ylim(0, 5)
    return fig


FIGURE = InteractiveFigure(_bar, [Slider.integers("height", 1, 3, default=2),
                                  Slider.choice("color", ("C0", "C1"), default="C0")])
PAGE = ('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
        '<article class="bd-article"><figure>{}</figure></article></body></html>')


def _payloads(text: str) -> list[dict]:
    return [json.loads(m) for m in
            re.findall(r'<script type="application/json">(.*?)</script>', text, re.DOTALL)]


@pytest.fixture(scope="module")
def fragment():
    return FIGURE.static_html()


@pytest.fixture
def book(tmp_path, fragment):
    """An output folder: index.html, a page one folder down and one two folders down."""
    (tmp_path / "index.html").write_text("<html></html>")
    for page in ("book/a.html", "book/recipes/b.html"):
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text(PAGE.format(fragment), encoding="utf-8")
    return tmp_path


def test_frames_move_to_files_and_the_first_stays_inline(book, fragment):
    (before,) = _payloads(fragment)
    inline = re.search(r'<img [^>]*src="([^"]+)"', fragment).group(1)
    done = _extension().externalize_frames(book)
    frames = book / "_images" / "frames"
    assert set(done) == {"book/a.html", "book/recipes/b.html"}
    assert done["book/a.html"][0] == len(before["frames"]) - 1
    for page in ("book/a.html", "book/recipes/b.html"):
        text = (book / page).read_text(encoding="utf-8")
        (after,) = _payloads(text)
        assert "frames" not in after and len(after["names"]) == len(before["frames"])
        assert after["index"] == before["index"] and after["first"] == before["first"]
        # The <img> still shows the first frame inline: the figure needs no request.
        assert re.search(r'<img [^>]*src="([^"]+)"', text).group(1) == inline
        assert after["names"][after["first"]] is None
        for k, name in enumerate(after["names"]):
            if k == after["first"]:
                continue
            path = ((book / page).parent / (after["base"] + name)).resolve()
            assert path.parent == frames.resolve(), (page, after["base"])
            assert path.read_bytes() == base64.b64decode(before["frames"][k])
    assert len(list(frames.glob("*.png"))) == len(before["frames"]) - 1  # shared by both pages


def test_a_second_run_changes_nothing_and_unnamed_files_go(book):
    extension = _extension()
    extension.externalize_frames(book)
    pages = {p: p.read_bytes() for p in book.rglob("*.html")}
    frames = book / "_images" / "frames"
    kept = sorted(p.name for p in frames.glob("*.png"))
    (frames / "0123456789abcdef01234567.png").write_bytes(b"stale")
    assert extension.externalize_frames(book) == {}
    assert {p: p.read_bytes() for p in book.rglob("*.html")} == pages
    assert sorted(p.name for p in frames.glob("*.png")) == kept


def test_frames_are_drawn_at_twice_the_shown_size(fragment):
    (payload,) = _payloads(fragment)
    img = re.search(r"<img [^>]*>", fragment).group(0)
    width = int(re.search(r'width="(\d+)"', img).group(1))
    assert width == SHOWN_WIDTH
    for encoded in payload["frames"]:
        png = base64.b64decode(encoded)
        assert int.from_bytes(png[16:20], "big") == core.STATIC_SCALE * width == 2 * width


# -- in Chromium -------------------------------------------------------------------


CHROMIUM = os.environ.get("POSENC_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def chromium():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                             args=["--no-sandbox", "--disable-gpu"])
        yield browser
        browser.close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def served(book):
    _extension().externalize_frames(book)
    handler = functools.partial(_Quiet, directory=str(book))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield book, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def _move(control, value):
    control.evaluate("(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }",
                     str(value))


@pytest.mark.browser
@pytest.mark.parametrize("scheme", ["file", "http"])
def test_each_slider_end_shows_its_2x_frame_from_a_file(chromium, served, scheme):
    book, http_base = served
    context = chromium.new_context(viewport={"width": 1280, "height": 900},
                                   device_scale_factor=2)
    try:
        page = context.new_page()
        failed = []
        # A load cut short because the src changed again (a slider dragged on) is
        # aborted, not failed: the test waits for each frame, so none is expected.
        page.on("requestfailed", lambda r: failed.append((r.url, r.failure)))
        page.on("response", lambda r: failed.append((r.url, r.status)) if r.status >= 400 else None)
        for name in ("book/a.html", "book/recipes/b.html"):
            url = (book / name).as_uri() if scheme == "file" else http_base + name
            page.goto(url, wait_until="load")
            img = page.locator("[data-posenc-figure] img")
            page.wait_for_function("el => el.complete && el.naturalWidth > 0",
                                   arg=img.element_handle())
            inline = img.get_attribute("src")
            assert inline.startswith("data:image/png")
            slider = page.locator("input[type=range]")
            radios = page.locator("input[type=radio]")
            loaded = ("el => el.complete && el.naturalWidth > 0 && el.currentSrc.endsWith("
                      "el.getAttribute('src').replace(/^(\\.\\.\\/)+/, ''))")
            for position, choice in ((0, 0), (2, 1), (0, 1), (2, 0)):
                _move(slider, position)
                page.wait_for_function(loaded, arg=img.element_handle())
                radios.nth(choice).check()
                page.wait_for_function(loaded, arg=img.element_handle())
                src = img.get_attribute("src")
                assert src.startswith("../") and "_images/frames/" in src, src
                natural, shown = img.evaluate(
                    "el => [el.naturalWidth, el.getBoundingClientRect().width]")
                assert natural == 2 * SHOWN_WIDTH, (position, choice, natural)
                assert natural == 2 * round(shown), (position, choice, natural, shown)
            _move(slider, 1)  # back at the defaults: the inline frame again
            radios.nth(0).check()
            assert img.get_attribute("src") == inline
        assert not failed, f"failed requests: {failed}"
    finally:
        context.close()
