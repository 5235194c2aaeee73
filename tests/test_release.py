"""The release files of ``make release`` (scripts/release/).

- The version: CITATION.cff and the book's front page name the package's
  version, and pyproject.toml takes it from ``posenc_lib.__version__``; each
  planted disagreement is reported.
- The PDF checks (scripts/release/checks.py) tell raw TeX from prose and code.
- Offline (browser stage): every page of the HTML release, unpacked from
  dist/...-html.tar.gz when ``make release`` wrote it (else the built
  _build/html), opened from file:// with every other request aborted: it loads,
  MathJax typesets every formula of the page's HTML (no raw ``$$`` or ``\\(``
  left in its text), every image is decoded (naturalWidth > 0), and nothing
  asks for a remote host.
- The PDF in dist/, when there is one, passes the checks the release script
  ran on it (``make release-check``).
"""

from __future__ import annotations

import re
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
from helpers.paths import ROOT

sys.path.insert(0, str(ROOT / "scripts" / "release"))

from checks import RAW_TEX  # noqa: E402
from common import NAME, package_version, toc_pages, version_mismatches  # noqa: E402

DIST = ROOT / "dist"
CHROMIUM = "/usr/bin/chromium"


# ---- the version -----------------------------------------------------------

def test_the_version_is_the_same_everywhere():
    assert version_mismatches() == []
    import posenc_lib

    assert package_version() == posenc_lib.__version__


@pytest.fixture
def copy(tmp_path):
    for name in ("posenc_lib/__init__.py", "CITATION.cff", "pyproject.toml", "_toc.yml",
                 "book/intro.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    assert version_mismatches(tmp_path) == []
    return tmp_path


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("planted", ["citation", "front page", "package", "pyproject"])
def test_a_planted_version_mismatch_is_reported(copy, planted):
    version = package_version(copy)
    if planted == "citation":
        _replace(copy / "CITATION.cff", f'version: "{version}"', 'version: "9.9.9"')
    elif planted == "front page":
        _replace(copy / "book/intro.md", f"Version {version} of", "Version 9.9.9 of")
    elif planted == "package":
        _replace(copy / "posenc_lib/__init__.py", f'__version__ = "{version}"',
                 '__version__ = "9.9.9"')
    else:
        _replace(copy / "pyproject.toml", 'dynamic = ["version"]', 'version = "9.9.9"')
    problems = version_mismatches(copy)
    assert problems, f"a planted {planted} mismatch went unnoticed"
    assert "9.9.9" in " ".join(problems) or planted == "pyproject"


# ---- the PDF's raw-TeX check -------------------------------------------------

@pytest.mark.parametrize("text", [
    "the form $x \\mapsto e^{pA}x$ is RoPE", "$$", "where \\(\\theta_i\\) is",
    "\\frac{1}{2}", "a \\sqrt 2 gain", "θ ≤ \\pi \\le 3", "\\[ x \\]", "$d$"])
def test_raw_tex_is_found(text):
    assert RAW_TEX.search(text), text


@pytest.mark.parametrize("text", [
    "θi = base−2i/d, mθ and nθ", "costs $5 and $10 a month", "cd dist && ls",
    "a\\b path C:\\temp", "(n −m)θ", "echo $HOME", "price: 3$ each"])
def test_prose_and_code_are_not_raw_tex(text):
    assert not RAW_TEX.search(text), text


# ---- the HTML release, offline (browser stage) ---------------------------------

OPEN = """async () => {
  const s = window.MathJax && window.MathJax.startup;
  if (s && s.promise) { await s.promise; }
  const images = [...document.images];
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.decode().catch(() => null)));
  const article = document.querySelector('article') || document.body;
  const copy = article.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, mjx-container, .highlight')
    .forEach(n => n.remove());
  return {
    typeset: document.querySelectorAll('mjx-container').length,
    errors: document.querySelectorAll('mjx-merror').length,
    text: copy.textContent,
    images: images.length,
    broken: images.filter(img => !(img.naturalWidth > 0)).map(img => img.getAttribute('src')),
  };
}"""


@pytest.fixture(scope="module")
def release_html(tmp_path_factory):
    """The HTML release unpacked, or the built book when there is no release."""
    tarball = DIST / f"{NAME}-{package_version()}-html.tar.gz"
    if tarball.is_file():
        out = tmp_path_factory.mktemp("release")
        with tarfile.open(tarball) as tar:
            tar.extractall(out, filter="data")
        (top,) = out.iterdir()
        return top
    html = ROOT / "_build" / "html"
    if not (html / "index.html").is_file():
        pytest.fail(f"neither {tarball} nor a built book in {html}: run `make book`")
    return html


@pytest.mark.browser
def test_every_page_works_offline(release_html):
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium")
    remote: list[str] = []

    def route(r):
        if r.request.url.startswith(("file:", "data:", "blob:", "about:")):
            return r.continue_()
        remote.append(r.request.url)
        return r.abort()

    problems = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"])
        context = browser.new_context()
        context.route("**/*", route)
        tab = context.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        assert tab.goto((release_html / "index.html").as_uri()).ok
        tab.wait_for_url("**/book/intro.html")     # the redirect to the front page
        for page in toc_pages():
            path = release_html / f"{page.file}.html"
            if not path.is_file():
                problems.append(f"{page.file}: not in the release")
                continue
            # Formulas as Sphinx wrote them, before MathJax: one per math element.
            n_math = len(re.findall(r'class="math notranslate', path.read_text()))
            response = tab.goto(path.as_uri(), wait_until="load")
            state = tab.evaluate(OPEN)
            if response is None or not response.ok:
                problems.append(f"{page.file}: did not load")
            if state["typeset"] < n_math:
                problems.append(f"{page.file}: {state['typeset']} typeset formulas for "
                                f"{n_math} in its HTML")
            if state["errors"]:
                problems.append(f"{page.file}: {state['errors']} TeX errors")
            raw = re.findall(r".{0,30}(?:\$\$|\\\(|\\\[).{0,30}", state["text"])
            if raw:
                problems.append(f"{page.file}: raw TeX in the text: {raw[:3]}")
            if state["broken"]:
                problems.append(f"{page.file}: images not drawn: {state['broken'][:3]}")
        browser.close()
    if remote:
        problems.append(f"requests that would leave the machine: {sorted(set(remote))}")
    if errors:
        problems.append(f"JavaScript errors: {errors}")
    assert not problems, "\n".join(problems)


@pytest.mark.browser
def test_the_released_pdf_passes_its_checks():
    pdf = DIST / f"{NAME}-{package_version()}-book.pdf"
    if not pdf.is_file():
        pytest.skip(f"no {pdf.name} in dist/ (`make release` writes it)")
    from checks import check_pdf

    assert check_pdf(pdf, toc_pages()) == []
