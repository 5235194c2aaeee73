"""Live figures in JupyterLab: time from a key press on a slider to the new image.

    python benchmarks/lab_latency.py [--presses 6] [--only NAME] [--pythonpath DIR]

Needs JupyterLab (``make lab`` installs it) and Debian's chromium. The script
starts a JupyterLab server on a free port in a temporary folder holding one
notebook, whose one cell displays every registered interactive figure (or
those whose name contains ``--only``) with its image cache switched off, so
that every key press is a real redraw. For each figure it moves the sliders in
turn with the arrow keys, ``--presses`` times, and measures in the page, with
``performance.now()``, the time from the ``keydown`` event to the moment the
new draft image is decoded and ready to paint: kernel, widget messages and
browser together. It waits for the sharpened image (see
:meth:`posenc_lib.widgets.InteractiveFigure.live`) before the next press, so
that the two do not overlap.

``--pythonpath DIR`` puts ``DIR`` first on the kernel's ``PYTHONPATH``: pass a
checkout of another commit to compare it with this one, side by side in one
window, as the numbers of this machine vary between runs.

Prints one row per figure (median, largest, presses) and the medians over
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("POSENC_CHROMIUM", "/usr/bin/chromium")
GOAL_MS = 100

_CELL = """\
import json
import posenc_lib
from posenc_lib.widgets import registry
from IPython.display import HTML, display

class _NoCache(dict):  # every slider change is a real redraw
    def __setitem__(self, key, value):
        pass

print(json.dumps({"posenc_lib": posenc_lib.__file__}))
for name, figure in registry().items():
    if %(only)r in name:
        figure._cache = _NoCache()
        display(HTML(f"<p class='posenc-bench-name'>{name}</p>"))
        display(figure)
display(HTML("<p class='posenc-bench-done'>all figures shown</p>"))
"""

# Resolves when the next keydown is followed by a new, decoded image in `box`.
_ARM = """([box]) => {
  const img = box.querySelector('.widget-image');
  window.__latency = undefined;
  let t0 = null;
  document.addEventListener('keydown', () => { t0 = performance.now(); },
                            {capture: true, once: true});
  new MutationObserver((records, observer) => {
    observer.disconnect();
    img.decode().catch(() => null).then(() => {
      window.__latency = performance.now() - t0;
    });
  }).observe(img, {attributes: true, attributeFilter: ['src']});
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_jupyterlab(folder: Path, *, token: str, pythonpath: str | None = None):
    """A JupyterLab server on a free port, serving ``folder``: ``(server, log, port)``.

    Its configuration, settings and workspaces stay inside ``folder``; the
    browser tests start theirs here too. Raises ``RuntimeError`` if the
    server does not answer within three minutes.
    """
    port = _free_port()
    settings = folder / ".settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # Render every output of the one cell (by default JupyterLab trims a cell to
    # its first 50 outputs; here 0 hides them all) and every cell, in view or not.
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps(
        {"windowingMode": "none", "maxNumberOutputs": 10_000}))
    args = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
            f"--port={port}", f"--ServerApp.token={token}", f"--ServerApp.root_dir={folder}",
            "--LabApp.news_url=None",
            # One cell sends every figure's images at once: lift the IOPub rate
            # limit (1 MB/s by default), above which the server drops outputs.
            "--ServerApp.iopub_data_rate_limit=1e12"]
    if os.getuid() == 0:
        args.append("--allow-root")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(folder / ".config"),
           "JUPYTERLAB_SETTINGS_DIR": str(folder / ".settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(folder / ".workspaces")}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(pythonpath).resolve())] + [p for p in [env.get("PYTHONPATH")] if p])
    log = open(folder / "server.log", "w")
    server = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
    for _ in range(180):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, log, port
        except OSError:
            time.sleep(1)
    server.terminate()
    raise RuntimeError(f"JupyterLab did not start; see {folder / 'server.log'}")


_COUNTS = """() => ({names: document.querySelectorAll('.posenc-bench-name').length,
  images: document.querySelectorAll('.posenc-live-figure .widget-image').length,
  done: document.querySelectorAll('.posenc-bench-done').length})"""


def _wait_for_figures(page, timeout_s: float) -> None:
    """Until the cell has shown every figure, each with its live image."""
    start = time.monotonic()
    while True:
        counts = page.evaluate(_COUNTS)
        if counts["done"] and counts["names"] == counts["images"] > 0:
            return
        if time.monotonic() - start > timeout_s:
            raise RuntimeError(f"the figures did not all appear in {timeout_s:.0f} s: "
                               f"{counts}")
        page.wait_for_timeout(1000)


def measure(page, box, presses: int, rest_s: float) -> list[float]:
    """``presses`` key presses over the sliders of one live figure, in ms each."""
    handles = box.query_selector_all(".noUi-handle")
    if not handles:
        raise RuntimeError("no slider handle in the figure's box")
    times = []
    for n in range(presses):
        handle = handles[n % len(handles)]
        now = float(handle.get_attribute("aria-valuenow"))
        top = float(handle.get_attribute("aria-valuemax"))
        if handle.get_attribute("aria-valuemax") == handle.get_attribute("aria-valuemin"):
            continue
        handle.focus()
        page.evaluate(_ARM, [box])
        page.keyboard.press("ArrowRight" if now < top else "ArrowLeft")
        page.wait_for_function("() => window.__latency !== undefined", timeout=60_000)
        times.append(page.evaluate("() => window.__latency"))
        page.wait_for_timeout(rest_s * 1000)  # the sharpened image comes and goes
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presses", type=int, default=6, help="key presses per figure")
    parser.add_argument("--only", default="", help="only figures whose name contains this")
    parser.add_argument("--pythonpath", default=None,
                        help="a checkout whose posenc_lib the kernel imports first")
    parser.add_argument("--rest", type=float, default=1.0,
                        help="seconds between presses (the sharpened image is drawn then)")
    args = parser.parse_args()
    try:
        import jupyterlab  # noqa: F401
        from playwright.sync_api import sync_playwright
    except ImportError as error:  # `make benchmark` goes on without it
        print(f"skipped: {error}; `make lab` installs JupyterLab")
        return
    if not Path(CHROMIUM).is_file():
        print(f"skipped: no Chromium at {CHROMIUM}; install Debian's chromium")
        return

    with tempfile.TemporaryDirectory(prefix="posenc-lab-") as tmp:
        folder = Path(tmp)
        notebook = {"cells": [{"cell_type": "code", "id": "bench", "metadata": {},
                               "outputs": [], "execution_count": None,
                               "source": _CELL % {"only": args.only}}],
                    "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                "display_name": "Python 3"}},
                    "nbformat": 4, "nbformat_minor": 5}
        (folder / "bench.ipynb").write_text(json.dumps(notebook))
        server, log, port = start_jupyterlab(folder, token="bench",
                                             pythonpath=args.pythonpath)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM,
                    args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update"])
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/lab/tree/bench.ipynb?token=bench",
                          timeout=180_000)
                page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor",
                                       timeout=180_000)
                page.wait_for_timeout(2000)
                page.click(".jp-Cell .jp-InputArea-editor")
                page.keyboard.press("Shift+Enter")
                _wait_for_figures(page, timeout_s=600)
                page.wait_for_timeout(3000)  # the kernel is idle, the page has settled
                source = page.inner_text(".jp-OutputArea-output pre")
                where = json.loads(source.splitlines()[0])["posenc_lib"]
                print(f"kernel imports {where}", flush=True)
                names = [e.inner_text() for e in page.query_selector_all(".posenc-bench-name")]
                boxes = page.query_selector_all(".posenc-live-figure")
                print(f"{'figure':34s} {'median':>7s} {'max':>6s} {'n':>3s}   (ms, key "
                      f"press to decoded image)")
                medians = []
                for name, box in zip(names, boxes):
                    box.scroll_into_view_if_needed()
                    times = measure(page, box, args.presses, args.rest)
                    if not times:
                        continue
                    medians.append(statistics.median(times))
                    print(f"{name:34s} {medians[-1]:7.0f} {max(times):6.0f} {len(times):3d}",
                          flush=True)
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=60)
            log.close()
    if medians:
        under = sum(m <= GOAL_MS for m in medians)
        print(f"figures with a median at or under {GOAL_MS} ms: {under}/{len(medians)}; "
              f"median over figures {statistics.median(medians):.0f} ms")


if __name__ == "__main__":
    main()
