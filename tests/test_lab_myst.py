"""In JupyterLab as ``make lab`` installs it, a chapter reads like the book's page.

``requirements-lab.txt`` installs jupyterlab-myst beside JupyterLab, so that
Markdown cells are rendered as MyST: a ``:::{prf:theorem} Title`` block shows
as "Theorem 2 (Title)", a role such as ``{numref}`` or ``{cite:p}`` as a
reference (its target, or its label or key where the open notebook alone
cannot resolve it), never as the text written in the notebook. JupyterLab without the
extension (or with it disabled) shows all of it as raw text.

Here a real JupyterLab server, started with ``make lab``'s configuration,
opens chapter 4 and chapter 5 in headless Chromium. For each, the rendered
text of every Markdown cell is read and checked against the notebook's own
source: no directive or role is left as written, and every theorem whose
title is plain text shows under that title with its number. Chapter 4 is then
saved from JupyterLab, and the saved file, passed through the git filter
``make lab`` installs (read from the Makefile), must come back as the
committed bytes: opening a notebook marks it as modified (the kernel fills in
``metadata.language_info``), and that is all a save adds.

Every Markdown cell is in the page at once: the test sets JupyterLab's
notebook ``windowingMode`` to ``"none"`` (by default, cells far below the
window are attached only when scrolled to).

Runs where JupyterLab is installed (``make lab``'s, or the ``jupyter-lab``
named by ``POSENC_JUPYTER_LAB``) and Chromium is there (``POSENC_CHROMIUM``);
about a minute. Marked slow: ``make slow`` runs it, ``make test`` does not.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import lab as lab_server
from helpers.paths import ROOT

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("POSENC_CHROMIUM", "/usr/bin/chromium")
# Every page of the book that is a notebook: the tour, chapters 1-10, the recipes.
CHAPTERS = tuple(str(p.relative_to(ROOT)) for p in sorted(
    [*(ROOT / "book").glob("*.ipynb"), *(ROOT / "book" / "recipes").glob("*.ipynb")]))
#: A directive's opening line as the notebooks write it (colon fence, name in braces).
DIRECTIVE = re.compile(r"^(:{3,}|`{3,})\{([\w:-]+)\}(.*)$", re.MULTILINE)
#: A MyST role (``{numref}`label` ``) or directive name as written in the source.
RAW = re.compile(r"\{(prf:\w+|py:\w+|numref|ref|cite:[pt]|eq|doc|term|download)\}")


def _committed(path: str) -> bytes:
    """The notebook as git would commit it (the index), or as it is on disk."""
    try:
        return subprocess.run(["git", "show", f":{path}"], cwd=ROOT, check=True,
                              capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return (ROOT / path).read_bytes()


def _make_lab(pattern: str) -> str:
    """One value from ``make -n lab`` (what make would run), by a regex group."""
    try:
        printed = subprocess.run(["make", "--no-print-directory", "-n", "lab"], cwd=ROOT,
                                 check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"make is not available: {error}")
    (found,) = re.findall(pattern, printed)
    return found


def _lab_clean(data: bytes) -> bytes:
    """``data`` through the clean filter that ``make lab`` installs for git."""
    pytest.importorskip("nbstripout", reason="nbstripout is installed by `make lab`")
    args = shlex.split(_make_lab(
        r"git config filter\.nbstripout\.clean '\"[^\"]*\" ([^']*)'"))
    return subprocess.run([sys.executable, *args], check=True, capture_output=True,
                          input=data).stdout


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab with make lab's config path and kernelspec, the chapters in its root."""
    executable = lab_server.jupyter_lab()
    if not executable:
        pytest.skip("JupyterLab is not installed (make lab installs it)")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    tmp = tmp_path_factory.mktemp("lab_myst")
    root = tmp / "root"
    root.mkdir()
    for path in CHAPTERS:
        (root / Path(path).name).write_bytes(_committed(path))
    # The kernelspec `make lab` installs (`ipykernel install --name python3
    # --display-name ...`), for this Python.
    kernel = tmp / "jupyter" / "kernels" / "python3"
    kernel.mkdir(parents=True)
    display_name = re.findall(r'ipykernel install .*--display-name "([^"]+)"',
                              (ROOT / "Makefile").read_text())[0]
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name, "language": "python"}))
    settings = tmp / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    with lab_server.serve(executable, root, tmp, str(tmp / "jupyter")) as base:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                                 args=["--no-sandbox"])
            try:
                yield base, root, browser
            finally:
                browser.close()


def _open(lab, name: str):
    """A page with notebook ``name`` open (its own workspace) and every Markdown cell
    rendered; returns (page, the rendered text of each Markdown cell, in order)."""
    base, root, browser = lab
    markdown = [c for c in json.loads((root / name).read_text())["cells"]
                if c["cell_type"] == "markdown"]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{base}/lab/workspaces/{Path(name).stem}/tree/{name}?token=t",
              timeout=180_000)
    cells = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-MarkdownCell"
    page.wait_for_function(
        """([sel, n]) => { const cells = document.querySelectorAll(sel);
             return cells.length === n && Array.from(cells).every(
               c => c.classList.contains('jp-mod-rendered')); }""",
        arg=[cells, len(markdown)], timeout=180_000)
    page.wait_for_timeout(1500)  # the last cells' MyST parse and math
    # Open the collapsed blocks ({dropdown}, rendered as <details>) as a reader
    # would, by a click on each, so that their text is read too.
    closed = cells + " details:not([open]) > summary"
    for _ in range(20):  # MyST may render a cell again, closing its blocks
        page.evaluate("s => document.querySelectorAll(s).forEach(e => e.click())", closed)
        page.wait_for_timeout(1000)
        if not page.evaluate("s => document.querySelectorAll(s).length", closed):
            break
    texts = page.evaluate(
        """sel => Array.from(document.querySelectorAll(sel), c => {
             const r = c.querySelector('.jp-InputArea > .lm-Widget:not(.jp-InputPrompt)'
                                       + ':not(.jp-Editor):not(.jp-Toolbar)');
             return r ? r.innerText : null; })""", cells)
    return page, markdown, texts


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: Path(p).name)
def test_a_chapter_renders_its_directives_and_roles(lab, path):
    page, markdown, texts = _open(lab, Path(path).name)
    page.close()
    assert None not in texts, "a Markdown cell shows no rendered content"
    raw = []
    for cell, text in zip(markdown, texts):
        for line in text.splitlines():
            if line.lstrip().startswith(":::") or line.lstrip().startswith("```{") \
                    or RAW.search(line):
                raw.append((cell.get("id"), line.strip()[:100]))
    sources = "\n".join("".join(c["source"]) for c in markdown)
    assert raw == [], f"{path}: MyST shown as written in JupyterLab: {raw[:5]}"
    lines = {line.strip() for text in texts for line in text.splitlines()}
    titles = [title.strip() for _, name, title in DIRECTIVE.findall(sources)
              if name == "prf:theorem" and title.strip() and not re.search(r"[$`{\\]", title)]
    if path in ("book/04_rope.ipynb", "book/05_multidim.ipynb"):   # not vacuous there
        assert RAW.search(sources) and titles, f"{path} has no role or titled theorem"
    for title in titles:
        shown = [line for line in lines
                 if re.fullmatch(rf"Theorem \d+ \({re.escape(title)}\)", line)]
        assert shown, (f"{path}: theorem {title!r} is not shown as "
                       f"'Theorem N ({title})'")


def test_a_save_in_jupyterlab_adds_only_what_the_git_filter_strips(lab):
    """Opening a chapter marks it modified: the kernel fills in
    ``metadata.language_info``. Saved, the file differs from the committed one only
    in what ``make lab``'s git filter strips, so git sees no change."""
    root = lab[1]
    name = "04_rope.ipynb"
    committed = (root / name).read_bytes()
    page, _, _ = _open(lab, name)
    try:
        dirty = ".lm-TabBar-tab.jp-mod-current.jp-mod-dirty"
        page.wait_for_selector(dirty, timeout=120_000)
        before = (root / name).stat().st_mtime_ns
        page.click(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
        page.keyboard.press("Control+s")
        for _ in range(120):
            if (root / name).stat().st_mtime_ns != before:
                break
            page.wait_for_timeout(500)
        page.wait_for_selector(dirty, state="detached", timeout=60_000)
    finally:
        page.close()
    saved = (root / name).read_bytes()
    assert saved != committed, "JupyterLab did not save"
    added = json.loads(saved)["metadata"]["language_info"]
    assert set(added) - set(json.loads(committed)["metadata"]["language_info"]), added
    assert _lab_clean(saved) == committed


def test_jupyterlab_myst_is_built_for_the_installed_jupyterlab():
    """``jupyter labextension list`` checks each extension's declared shared packages
    against JupyterLab's own: jupyterlab-myst 2.7.0 needs @jupyter/ydoc 3, which
    JupyterLab 4.5.x ships and 4.6.x does not (there it is listed with an X)."""
    executable = lab_server.jupyter_lab()
    if not executable:
        pytest.skip("JupyterLab is not installed (make lab installs it)")
    jupyter = Path(executable).with_name("jupyter")
    listed = subprocess.run([str(jupyter), "labextension", "list"], capture_output=True,
                            text=True, env={**os.environ, "NO_COLOR": "1"}, check=True)
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    pin = re.search(r"^jupyterlab-myst==(\S+)$",
                    (ROOT / "requirements-lab.txt").read_text(), re.MULTILINE).group(1)
    assert re.search(rf"^\s*jupyterlab-myst v{re.escape(pin)} enabled\s+OK\b", text,
                     re.MULTILINE), text
