"""The built book in headless Chromium, opened from file:// URLs.

For every page in the table of contents:

1. math is typeset by the vendored MathJax, without TeX errors;
2. every kernel-free slider, when moved, changes its figure;
3. no request leaves the machine, and no uncaught JavaScript error occurs.

Run after ``make book`` (``make test`` does both). Chromium comes from the
Debian package; set ``POSENC_CHROMIUM`` to use another binary.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

pytestmark = pytest.mark.browser

# Overridable so that a chapter can be checked in a separate build directory.
HTML = Path(os.environ.get("POSENC_HTML", ROOT / "_build" / "html"))
TOC = Path(os.environ.get("POSENC_TOC", ROOT / "_toc.yml"))
CHROMIUM = os.environ.get("POSENC_CHROMIUM", "/usr/bin/chromium")
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")


def _pages():
    toc = yaml.safe_load(TOC.read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        pages += [chapter["file"] for chapter in part["chapters"]]
    return pages


@pytest.fixture(scope="module")
def browser():
    if not (HTML / "index.html").is_file():
        pytest.fail("the book is not built: run `make book` first")
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


@pytest.fixture(params=_pages())
def page(request, browser):
    """A loaded page, with the requests and errors it produced so far."""
    path = HTML / f"{request.param}.html"
    assert path.is_file(), f"{path} was not built"
    context = browser.new_context(viewport={"width": 1200, "height": 1000})
    page = context.new_page()
    page.remote_requests, page.js_errors = [], []
    page.on("request", lambda r: None if r.url.startswith(LOCAL_SCHEMES)
            else page.remote_requests.append(r.url))
    page.on("pageerror", lambda error: page.js_errors.append(str(error)))
    page.goto(path.as_uri(), wait_until="load")
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
        assert sliders.count() > 0, "a static figure without sliders"
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


def test_nothing_leaves_the_machine_and_no_js_errors(page):
    page.wait_for_timeout(500)  # let late scripts run
    assert not page.remote_requests, f"requests to remote hosts: {page.remote_requests}"
    assert not page.js_errors, f"uncaught JavaScript errors: {page.js_errors}"
