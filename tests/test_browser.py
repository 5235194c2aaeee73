"""The built book in headless Chromium, opened from file:// URLs.

For every page in the table of contents:

1. math is typeset by the vendored MathJax, without TeX errors;
2. every kernel-free slider, when moved, changes its figure (every figure with
   sliders is found on its own, new ones included);
3. every figure has a numbered caption ("Fig. 4.2"), and in the chapters no
   image or slider figure stands outside a numbered figure;
4. in dark mode (the theme's toggle) figures are not dimmed and the slider
   panel keeps readable contrast; a screenshot of each page in dark mode is
   saved next to the build (``<build>/screenshots``) for a person to look at;
5. a page weighs at most 2 MB (its HTML with what is inline in it, and the
   images it shows as it opens), and at most 10 MB on disk with the slider
   figures' frame files, which load only when a slider reaches them;
6. the footer states the licences of the text and of the code;
7. no request leaves the machine, and no uncaught JavaScript error occurs;
8. at 1280 x 900, in light and dark mode, no code block (source or printed
   output) is wider than its column, so none scrolls sideways;
9. at 1280 x 900, every figure image is at least 90 % of the text column,
   none is shown wider than it is drawn (the book never enlarges a figure), every
   figure without sliders is drawn at twice the width it is shown at, and
   no table is wider than the column; every chapter has a "What to remember" section;
   the text holds no raw TeX (``$``, ``\\(``), no doubled names ("Proposition
   Proposition") and no unresolved label (``??``).

A last test opens a live figure in JupyterLab, when it is installed (``make
lab``): shown at its natural size, sharp at 2x, slider tracks aligned.

Run after ``make book`` (``make test`` does both). Set ``POSENC_HTML`` to test
another build (``jupyter-book build . --path-output DIR`` writes
``DIR/_build/html``). Chromium comes from the Debian package; set
``POSENC_CHROMIUM`` to use another binary.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from helpers.paths import ROOT
from posenc_lib.figures import SHOWN_WIDTH

pytestmark = pytest.mark.browser

# Overridable so that a chapter can be checked in a separate build directory.
HTML = Path(os.environ.get("POSENC_HTML", ROOT / "_build" / "html"))
TOC = Path(os.environ.get("POSENC_TOC", ROOT / "_toc.yml"))
CHROMIUM = os.environ.get("POSENC_CHROMIUM", "/usr/bin/chromium")
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


# What a page may weigh as it opens, and on disk with every slider figure's
# frames (at 2x; book/_ext/posenc_book.py moves them out of the page).
MAX_PAGE_MB = 2.0
MAX_PAGE_DISK_MB = 10.0


def _pages():
    toc = yaml.safe_load(TOC.read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        pages += [chapter["file"] for chapter in part["chapters"]]
    return pages


def _chapter_pages() -> set[str]:
    """Pages of the numbered parts: the chapters, whose figures carry numbers."""
    toc = yaml.safe_load(TOC.read_text())
    return {chapter["file"] for part in toc.get("parts", []) if part.get("numbered")
            for chapter in part["chapters"]}


@pytest.fixture(scope="module")
def chromium():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def browser(chromium):
    if not (HTML / "index.html").is_file():
        pytest.fail(f"the book is not built in {HTML}: run `make book` first")
    return chromium


@pytest.fixture(scope="module", params=_pages())
def page(request, browser):
    """A loaded page, with the requests and errors it produced so far.

    Loaded once for all the tests of one page (loading and typesetting is most
    of their time); the tests leave it as they found it, and the check for
    requests and JavaScript errors sees everything the earlier tests did."""
    path = HTML / f"{request.param}.html"
    assert path.is_file(), f"{path} was not built"
    context = browser.new_context(viewport={"width": 1200, "height": 1000})
    page = context.new_page()
    page.remote_requests, page.js_errors, page.failed_requests = [], [], []
    page.on("request", lambda r: None if r.url.startswith(LOCAL_SCHEMES)
            else page.remote_requests.append(r.url))
    # A frame load cut short because a slider moved on is aborted, not failed
    # (a missing file from file:// is net::ERR_FILE_NOT_FOUND).
    page.on("requestfailed", lambda r: None if r.failure == "net::ERR_ABORTED"
            else page.failed_requests.append((r.url, r.failure)))
    page.on("pageerror", lambda error: page.js_errors.append(str(error)))
    page.goto(path.as_uri(), wait_until="load")
    page.name = request.param
    # MathJax typesets asynchronously; its startup promise resolves when done.
    # (If the script failed to load, window.MathJax is only the configuration.)
    page.evaluate("async () => { const s = window.MathJax && window.MathJax.startup;"
                  " if (s && s.promise) { await s.promise; } }")
    yield page
    context.close()


def test_math_is_typeset(page):
    n_math = page.locator(".math").count()
    if n_math == 0:
        pytest.skip("no math on this page")
    assert page.evaluate("() => !!(window.MathJax && window.MathJax.startup)"), \
        "MathJax did not load"
    typeset = page.locator("mjx-container").count()
    assert typeset >= n_math, f"{typeset} typeset formulas for {n_math} math elements"
    errors = page.locator("mjx-merror").all_inner_texts()
    assert not errors, f"TeX errors: {errors}"


def test_static_sliders_change_their_figure(page):
    figures = page.locator("[data-posenc-figure]")
    for f in range(figures.count()):
        figure = figures.nth(f)
        image = figure.locator("img").first
        sliders = figure.locator("input[type=range]")
        groups = figure.locator("[role=radiogroup]")
        assert sliders.count() + groups.count() > 0, "a static figure without controls"
        for g in range(groups.count()):
            buttons = groups.nth(g).locator("input[type=radio]")
            checked = next(k for k in range(buttons.count()) if buttons.nth(k).is_checked())
            other = 0 if checked else buttons.count() - 1
            before = image.get_attribute("src")
            buttons.nth(other).check()
            name = groups.nth(g).get_attribute("data-posenc-control")
            assert image.get_attribute("src") != before, \
                f"figure {f}: choosing in {name!r} did not change it"
            buttons.nth(checked).check()
            assert image.get_attribute("src") == before, f"choice {name!r} is not reversible"
        for s in range(sliders.count()):
            slider = sliders.nth(s)
            before = image.get_attribute("src")
            value, top = slider.input_value(), slider.get_attribute("max")
            target = "0" if value == top else top
            slider.evaluate(
                "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", target)
            after = image.get_attribute("src")
            name = slider.get_attribute("name")
            assert after != before, f"figure {f}: moving slider {name!r} did not change it"
            slider.evaluate(
                "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", value)
            assert image.get_attribute("src") == before, f"slider {name!r} is not reversible"


def test_licences_in_the_footer(page):
    footer = page.locator("footer").all_inner_texts()
    assert any("CC BY 4.0" in text and "MIT" in text for text in footer), footer


def test_nothing_leaves_the_machine_and_no_js_errors(page):
    page.wait_for_timeout(500)  # let late scripts run
    assert not page.remote_requests, f"requests to remote hosts: {page.remote_requests}"
    assert not page.js_errors, f"uncaught JavaScript errors: {page.js_errors}"
    assert not page.failed_requests, f"failed requests: {page.failed_requests}"


def test_every_figure_has_a_numbered_caption(page):
    figures = page.evaluate("""() => Array.from(
        document.querySelectorAll('article.bd-article figure'), f => {
            const number = f.querySelector('figcaption .caption-number');
            return {id: f.id, number: number ? number.textContent.trim() : null};
        })""")
    unnumbered = [f["id"] for f in figures
                  if not (f["number"] and re.fullmatch(r"Fig\. \d+(\.\d+)*", f["number"]))]
    assert not unnumbered, f"figures without a number: {unnumbered}"


def test_no_image_or_slider_outside_a_figure_in_chapters(page):
    if page.name not in _chapter_pages():
        pytest.skip("not a chapter")
    loose = page.evaluate("""() => Array.from(
        document.querySelectorAll('article.bd-article img, [data-posenc-figure]'))
        .filter(el => !el.closest('figure'))
        .map(el => el.getAttribute('data-posenc-figure') || el.getAttribute('alt')
                   || el.getAttribute('src').slice(0, 40))""")
    assert not loose, f"images or slider figures without a numbered caption: {loose}"


# Contrast of a text colour on its background, WCAG 2 definition.
_CONTRAST_JS = """
(el) => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const background = e => {
    for (; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || c[3] > 0) { return c.slice(0, 3); }
    }
    return [255, 255, 255];
  };
  const lum = c => {
    const [r, g, b] = c.map(v => { v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const fg = lum(rgb(getComputedStyle(el).color).slice(0, 3));
  const bg = lum(background(el));
  return (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
}
"""


def _set_theme(page, theme: str) -> None:
    page.evaluate("t => { document.documentElement.dataset.theme = t;"
                  " document.documentElement.dataset.mode = t; }", theme)
    page.wait_for_timeout(100)


@pytest.fixture
def themed(page, request):
    """The page in the requested theme, put back in light mode afterwards."""
    _set_theme(page, request.param)
    yield page
    _set_theme(page, "light")


@pytest.mark.parametrize("themed", ["light", "dark"], indirect=True)
def test_figures_and_slider_panels_stay_readable(themed):
    page, theme = themed, themed.evaluate("() => document.documentElement.dataset.theme")
    if theme == "dark":
        shots = HTML.parent / "screenshots"
        shots.mkdir(exist_ok=True)
        name = page.name.replace("/", "_")
        page.screenshot(path=str(shots / f"{name}-dark.png"))
        first = page.locator("[data-posenc-figure]").first
        if page.locator("[data-posenc-figure]").count():
            first.scroll_into_view_if_needed()
            first.screenshot(path=str(shots / f"{name}-dark-slider.png"))
    filters = page.evaluate("""() => Array.from(
        document.querySelectorAll('article.bd-article figure img'),
        img => getComputedStyle(img).filter)""")
    assert all(f == "none" for f in filters), f"{theme}: dimmed figure images: {set(filters)}"
    labels = page.locator("[data-posenc-figure] label span, [data-posenc-figure] output")
    for k in range(labels.count()):
        ratio = labels.nth(k).evaluate(_CONTRAST_JS)
        assert ratio >= 4.5, f"{theme}: slider panel text has contrast {ratio:.1f} < 4.5"


# The laptop layout the book is written for (book/_ext/posenc.css).
LAPTOP = {"width": 1280, "height": 900}

# The width of the article's text column, padding excluded.
_COLUMN_JS = """() => { const a = document.querySelector('article.bd-article');
  const s = getComputedStyle(a);
  return a.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); }"""


@pytest.fixture
def laptop(page):
    """The page at 1280 x 900, put back to its own size afterwards."""
    size = page.viewport_size
    page.set_viewport_size(LAPTOP)
    page.wait_for_timeout(100)
    yield page
    page.set_viewport_size(size)


def test_figures_fill_the_column(laptop):
    column = laptop.evaluate(_COLUMN_JS)
    widths = laptop.evaluate("""() => Array.from(
        document.querySelectorAll('article.bd-article figure img'),
        img => [img.getBoundingClientRect().width, img.getAttribute('alt') || ''])""")
    narrow = [(round(w), alt[:40]) for w, alt in widths if w < 0.9 * column]
    assert not narrow, f"figures narrower than 90 % of the {column:.0f} px column: {narrow}"


# Every image in the article, loaded (lazy ones too): drawn and shown width.
_IMAGE_WIDTHS_JS = """async () => {
  const images = Array.from(document.querySelectorAll('article.bd-article img'));
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.decode().catch(() => null)));
  return images.map(img => ({
    natural: img.naturalWidth, shown: img.getBoundingClientRect().width,
    name: (img.closest('[data-posenc-figure]') || img).getAttribute('data-posenc-figure')
          || (img.getAttribute('alt') || img.getAttribute('src')).slice(0, 40)}));
}"""


def test_no_figure_is_shown_wider_than_it_is_drawn(laptop):
    """At 1280 x 900 the book never enlarges a figure: each image is drawn at least
    as wide as it is shown (posenc_lib/figures/_base.py draws every figure
    SHOWN_WIDTH pixels wide), so its lines and text are sharp."""
    images = laptop.evaluate(_IMAGE_WIDTHS_JS)
    unloaded = [i["name"] for i in images if not i["natural"]]
    assert not unloaded, f"images that did not load: {unloaded}"
    enlarged = [(i["name"], i["natural"], round(i["shown"], 1)) for i in images
                if i["shown"] > i["natural"] + 0.5]
    assert not enlarged, (f"{len(enlarged)} of {len(images)} figures shown wider than "
                          f"drawn (name, drawn px, shown px): {enlarged}")


_LOADED_JS = ("el => el.complete && el.naturalWidth > 0 && el.currentSrc.endsWith("
              "el.getAttribute('src').replace(/^(\\.\\.\\/)+/, ''))")


def test_slider_ends_show_frames_drawn_at_2x(laptop):
    """Each slider at each end (the others where they are) shows a frame drawn at twice
    its shown width, loaded from its file beside the page, without a failed request."""
    failed = len(laptop.failed_requests)
    figures = laptop.locator("[data-posenc-figure]")
    for f in range(figures.count()):
        figure = figures.nth(f)
        image = figure.locator("img").first
        name = figure.get_attribute("data-posenc-figure")
        sliders = figure.locator("input[type=range]")
        for s in range(sliders.count()):
            slider = sliders.nth(s)
            start = slider.input_value()
            for end in ("0", slider.get_attribute("max"), start):
                slider.evaluate(
                    "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", end)
                laptop.wait_for_function(_LOADED_JS, arg=image.element_handle(),
                                         timeout=10_000)
                natural, shown = image.evaluate(
                    "el => [el.naturalWidth, el.getBoundingClientRect().width]")
                where = (name, slider.get_attribute("name"), end)
                assert natural >= 2 * shown - 1, f"{where}: {natural} px shown at {shown:.0f}"
                assert natural == 2 * int(image.get_attribute("width")), where
                if int(image.get_attribute("width")) == SHOWN_WIDTH:  # pixel for pixel
                    assert abs(natural - 2 * shown) <= 1, f"{where}: {natural}, {shown}"
    assert laptop.failed_requests[failed:] == [], laptop.failed_requests[failed:]


# Every image a cell displayed (myst-nb names each by its hash), slider figures aside.
_STILL_IMAGES_JS = """async () => {
  const images = Array.from(document.querySelectorAll('article.bd-article img')).filter(
      img => !img.closest('[data-posenc-figure]')
             && /_images\\/[0-9a-f]{64}\\.png$/.test(img.getAttribute('src')));
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.decode().catch(() => null)));
  return images.map(img => ({
    name: img.getAttribute('src').split('/').pop().slice(0, 12),
    natural: img.naturalWidth, shown: img.getBoundingClientRect().width,
    style: img.getAttribute('style') || ''}));
}"""


def test_still_figures_are_drawn_at_2x(laptop):
    """Each figure without sliders is drawn at twice the width its ``<img>`` gives
    (posenc_lib/figures/_base.py, ``BookFigure``): at 1280 x 900 the book's figures
    are shown pixel for pixel at a device pixel ratio of 2, as the slider frames."""
    images = laptop.evaluate(_STILL_IMAGES_JS)
    wrong = []
    for i in images:
        given = re.fullmatch(r"width: (\d+)px;", i["style"].strip())
        width = int(given.group(1)) if given else 0
        if (i["natural"] != 2 * width or i["natural"] < 2 * i["shown"] - 1
                or (width == SHOWN_WIDTH and abs(i["natural"] - 2 * i["shown"]) > 1)):
            wrong.append((i["name"], i["natural"], round(i["shown"], 1), i["style"]))
    assert not wrong, (f"{len(wrong)} of {len(images)} still figures not drawn at 2x "
                       f"(file, drawn px, shown px, style): {wrong}")


def test_no_table_is_wider_than_the_column(laptop):
    column = laptop.evaluate(_COLUMN_JS)
    widths = laptop.evaluate("""() => Array.from(
        document.querySelectorAll('article.bd-article table'),
        t => [t.getBoundingClientRect().width,
              (t.querySelector('th, td') || {textContent: ''}).textContent.trim()])""")
    wide = [(round(w), head[:30]) for w, head in widths if w > column + 1]
    assert not wide, f"tables wider than the {column:.0f} px column: {wide}"


def test_every_chapter_ends_with_what_to_remember(page):
    if page.name not in _chapter_pages():
        pytest.skip("not a chapter")
    headings = page.evaluate("""() => Array.from(
        document.querySelectorAll('article.bd-article h2'), h => h.textContent.trim())""")
    assert any("What to remember" in h for h in headings), \
        f"no 'What to remember' section: {headings}"


def test_no_raw_tex_or_doubled_labels(page):
    """What the reader sees holds no raw TeX, doubled names or unresolved labels."""
    text = page.evaluate("""() => {
        const a = document.querySelector('article.bd-article').cloneNode(true);
        a.querySelectorAll('pre, code, script, style, mjx-container, .highlight')
          .forEach(e => e.remove());
        return a.innerText; }""")
    problems = re.findall(r".{0,40}(?:\$|\\\(|\\\)|\?\?).{0,40}", text)
    problems += re.findall(r"\b(Proposition|Theorem|Lemma|Corollary|Definition|Fig\.|Table)"
                           r"\s+\1\b", text)
    assert not problems, f"raw TeX, doubled names or unresolved labels: {problems}"
    errors = page.locator("mjx-merror").count()
    assert not errors, f"{errors} MathJax errors"


_WIDE_BLOCKS_JS = """() => Array.from(document.querySelectorAll('article.bd-article pre'))
    .filter(pre => pre.scrollWidth > pre.clientWidth + 1)
    .map(pre => ({width: pre.scrollWidth, column: pre.clientWidth,
                  output: !!pre.closest('.cell_output'),
                  line: pre.textContent.split('\\n').reduce(
                      (a, l) => (l.length > a.length ? l : a), '')}))"""


@pytest.mark.parametrize("themed", ["light", "dark"], indirect=True)
def test_no_code_block_scrolls_sideways(themed):
    """At 1280 x 900 every code block, source or printed output, fits its column."""
    page = themed
    size = page.viewport_size
    page.set_viewport_size(LAPTOP)
    try:
        page.wait_for_timeout(100)
        wide = page.evaluate(_WIDE_BLOCKS_JS)
    finally:
        page.set_viewport_size(size)
    report = "\n".join(f"  {'output' if w['output'] else 'source'} {w['width']} px in "
                       f"{w['column']} px: {w['line'][:100]!r}" for w in wide)
    assert not wide, f"{page.name}: {len(wide)} code blocks scroll sideways at 1280 px:\n{report}"


def _page_bytes(name: str) -> tuple[int, int]:
    """What the page weighs as it opens (its HTML with what is inline, and the images
    its ``<img>`` tags name; shared assets aside), and that with the frame files of
    its slider figures (loaded when a slider reaches them)."""
    import json

    path = HTML / f"{name}.html"
    text = path.read_text(encoding="utf-8")
    images = {(path.parent / src).resolve()
              for src in re.findall(r'<img[^>]+src="(?!data:|https?:)([^"]+)"', text)}
    frames = set()
    for body in re.findall(r'<script type="application/json">(.*?)</script>', text, re.DOTALL):
        payload = json.loads(body)
        if isinstance(payload, dict) and "names" in payload:
            frames |= {(path.parent / (payload["base"] + n)).resolve()
                       for n in payload["names"] if n}
    missing = sorted(str(p) for p in images | frames if not p.is_file())
    assert not missing, f"{name} names files that are not there: {missing[:3]}"
    weight = path.stat().st_size + sum(p.stat().st_size for p in images)
    return weight, weight + sum(p.stat().st_size for p in frames)


@pytest.fixture(scope="module")
def built():
    if not (HTML / "index.html").is_file():
        pytest.fail(f"the book is not built in {HTML}: run `make book` first")


@pytest.mark.parametrize("name", _pages())
def test_page_weight(built, name):
    weight, disk = (b / 1e6 for b in _page_bytes(name))
    print(f"{name}: {weight:.2f} MB as it opens, {disk:.2f} MB on disk with its frames")
    assert weight <= MAX_PAGE_MB, f"{name} weighs {weight:.2f} MB > {MAX_PAGE_MB} MB"
    assert disk <= MAX_PAGE_DISK_MB, \
        f"{name} holds {disk:.2f} MB on disk with its frames > {MAX_PAGE_DISK_MB} MB"


def test_every_registered_figure_is_in_the_book(built):
    """A figure with sliders defined for a chapter appears, with its sliders, in the book."""
    from posenc_lib.widgets import registry

    shown = set()
    for name in _pages():
        text = (HTML / f"{name}.html").read_text(encoding="utf-8")
        shown |= set(re.findall(r'data-posenc-figure="([^"]+)"', text))
    missing = sorted(key for key, figure in registry().items() if figure.key not in shown)
    assert not missing, f"interactive figures that no page shows: {missing}"


# -- the live figure in JupyterLab ------------------------------------------------

_NOTEBOOK = {
    "cells": [{"cell_type": "code", "id": "live", "metadata": {}, "outputs": [],
               "execution_count": None,
               "source": ["from posenc_lib.widgets.rope import DECAY_BOUND\n", "DECAY_BOUND"]}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}
_IMAGE = ".jp-OutputArea-output .widget-image"


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server on a free port, in an empty directory with one notebook."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is installed by `make lab`")
    import importlib.util
    import json

    # The server the latency benchmark starts (configuration kept in tmp_path).
    spec = importlib.util.spec_from_file_location(
        "lab_latency", ROOT / "benchmarks" / "lab_latency.py")
    lab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lab)
    (tmp_path / "live.ipynb").write_text(json.dumps(_NOTEBOOK))
    server, log, port = lab.start_jupyterlab(tmp_path, token="posenc")
    try:
        yield f"http://127.0.0.1:{port}/lab/tree/live.ipynb?token=posenc"
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


@pytest.mark.slow
def test_live_figure_in_jupyterlab(chromium, jupyterlab):
    """Natural size, sharp at 2x, aligned slider tracks, and a redraw on a key press."""
    from posenc_lib.widgets import LIVE_SCALE
    from posenc_lib.widgets.rope import DECAY_BOUND

    natural = int.from_bytes(DECAY_BOUND.png()[16:20], "big")
    context = chromium.new_context(viewport={"width": 1400, "height": 1000},
                                   device_scale_factor=2)
    try:
        page = context.new_page()
        page.goto(jupyterlab, timeout=180_000)
        page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor", timeout=180_000)
        page.wait_for_timeout(2000)
        page.click(".jp-Cell .jp-InputArea-editor")
        page.keyboard.press("Shift+Enter")
        page.wait_for_selector(_IMAGE, timeout=180_000)
        page.wait_for_function(f"() => document.querySelector('{_IMAGE}').naturalWidth > 0")
        layout = page.evaluate("""(image) => {
            const img = document.querySelector(image);
            const tracks = Array.from(document.querySelectorAll(
                '.jp-OutputArea-output .widget-slider .slider-container'),
                e => e.getBoundingClientRect());
            return {shown: img.getBoundingClientRect().width, pixels: img.naturalWidth,
                    lefts: tracks.map(r => Math.round(r.left)),
                    widths: tracks.map(r => Math.round(r.width))};
        }""", _IMAGE)
        assert abs(layout["shown"] - natural) <= 1, layout  # not stretched to the output
        assert layout["pixels"] == LIVE_SCALE * natural, layout  # sharp on 2x screens
        assert len(layout["lefts"]) == 2 and len(set(layout["lefts"])) == 1, layout
        assert len(set(layout["widths"])) == 1, layout
        before = page.evaluate(f"() => document.querySelector('{_IMAGE}').src")
        page.locator(".jp-OutputArea-output .widget-slider .noUi-handle").first.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"b => document.querySelector('{_IMAGE}').src !== b",
                               arg=before, timeout=60_000)
    finally:
        context.close()


def test_check_outputs_are_marked_and_other_outputs_are_not(page):
    """The printed output of a cell that asserts (tag ``check``) sits in the
    marked box (posenc.css), and printed output of other cells does not."""
    styles = page.evaluate("""() => Array.from(
        document.querySelectorAll('div.cell div.cell_output .output.stream'), o => ({
            check: o.closest('div.cell').classList.contains('tag_check'),
            border: getComputedStyle(o).borderLeftStyle,
            label: getComputedStyle(o, '::before').content}))""")
    checks = [s for s in styles if s["check"]]
    if not checks:
        pytest.skip("no printed check on this page")
    assert all(s["border"] == "solid" and "check" in s["label"] for s in checks), checks
    assert not any(s["border"] == "solid" or "check" in s["label"]
                   for s in styles if not s["check"])
