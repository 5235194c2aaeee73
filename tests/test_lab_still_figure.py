"""In JupyterLab with ``make lab``'s configuration: a saved live figure reopens where
its sliders were left.

A live figure's output holds the widget and a still figure at the sliders'
defaults; a widget's callback cannot change that output in JupyterLab (an
``update_display_data`` reaches only the cell's own execution). ``make lab``
turns on jupyterlab-manager's ``saveState``, so every save carries the widgets'
state, and the save hook (scripts/lab/jupyter_server_config.py) puts the live
image where the sliders were left in the still figure's place. Here a real
JupyterLab runs a figure, a slider moves three steps, the notebook is saved
and reopened without its kernel.

Runs where JupyterLab is installed (``make lab``'s, or the ``jupyter-lab``
named by ``POSENC_JUPYTER_LAB``) and Chromium is there; about a minute.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from pathlib import Path

import pytest
from helpers import lab as lab_server
from helpers.paths import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = os.environ.get("POSENC_CHROMIUM", "/usr/bin/chromium")
IMAGE = ".jp-OutputArea-output .widget-image"


@pytest.fixture
def lab(tmp_path):
    """JupyterLab with make lab's config path, a kernel of this Python, one notebook."""
    jupyter_lab = lab_server.jupyter_lab()
    if not jupyter_lab:
        pytest.skip("JupyterLab is not installed (make lab installs it)")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    kernel = tmp_path / "jupyter" / "kernels" / "posenc"
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "posenc", "language": "python",
        "env": {"PYTHONPATH": str(ROOT), "POSENC_LIB_FRONTEND": "live"}}))
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "live.ipynb").write_text(json.dumps({
        "cells": [{"cell_type": "code", "id": "live", "metadata": {}, "outputs": [],
                   "execution_count": None,
                   "source": ["from posenc_lib.widgets.rope import DECAY_BOUND\n",
                              "DECAY_BOUND"]}],
        "metadata": {"kernelspec": {"name": "posenc", "display_name": "posenc",
                                    "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}))
    jupyter_path = os.pathsep.join([str(tmp_path / "jupyter"),  # this kernel, and the
                                    str(Path(sys.prefix) / "share" / "jupyter")])  # widgets
    with lab_server.serve(jupyter_lab, tmp_path / "root", tmp_path, jupyter_path) as base:
        yield base, tmp_path / "root" / "live.ipynb"


def test_a_saved_live_figure_reopens_where_its_sliders_were_left(lab):
    from playwright.sync_api import sync_playwright

    from posenc_lib.widgets import LIVE_SCALE
    from posenc_lib.widgets.core import STALE_CLASS, _format
    from posenc_lib.widgets.rope import DECAY_BOUND

    base, path = lab
    url = f"{base}/lab/tree/live.ipynb?token=t"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                          device_scale_factor=2)
            page = context.new_page()
            page.goto(url, timeout=180_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor",
                                   timeout=180_000)
            page.wait_for_timeout(2000)
            page.click(".jp-Cell .jp-InputArea-editor")
            page.keyboard.press("Shift+Enter")
            page.wait_for_selector(IMAGE, timeout=180_000)
            page.wait_for_function(f"() => document.querySelector('{IMAGE}').naturalWidth > 0")
            first = page.evaluate(f"() => document.querySelector('{IMAGE}').src")
            page.locator(".jp-OutputArea-output .widget-slider .noUi-handle").first.focus()
            for _ in range(3):
                page.keyboard.press("ArrowRight")
                page.wait_for_timeout(300)
            page.wait_for_function(f"b => document.querySelector('{IMAGE}').src !== b",
                                   arg=first, timeout=60_000)
            page.wait_for_timeout(1500)  # the last redraw has arrived
            readouts = page.evaluate("""() => Array.from(
                document.querySelectorAll('.jp-OutputArea-output .widget-readout'),
                e => e.textContent.trim())""")
            before = path.stat().st_mtime_ns
            page.keyboard.press("Control+s")
            for _ in range(60):
                if path.stat().st_mtime_ns != before:
                    break
                page.wait_for_timeout(500)
            page.wait_for_timeout(1000)
            # Without its kernel, in a fresh page: the still figure, not the widget.
            page.evaluate("""async () => {
                const sessions = await (await fetch('/api/sessions?token=t')).json();
                for (const s of sessions) {
                  await fetch('/api/sessions/' + s.id + '?token=t', {method: 'DELETE'});
                } }""")
            context.close()
            context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                          device_scale_factor=2)
            page = context.new_page()
            page.goto(url, timeout=180_000)
            still = f".{STALE_CLASS} img"
            page.wait_for_selector(still, timeout=120_000)
            page.wait_for_function(f"() => document.querySelector('{still}').naturalWidth > 0")
            reopened = page.evaluate(f"""() => {{
                const img = document.querySelector('{still}');
                return {{natural: img.naturalWidth, shown: img.getBoundingClientRect().width,
                         text: document.querySelector('.jp-Notebook').innerText}}; }}""")
            context.close()
        finally:
            browser.close()

    labels = [{_format(v): v for v in s.values} for s in DECAY_BOUND.sliders]
    params = {s.name: label[text] for s, label, text in zip(DECAY_BOUND.sliders, labels,
                                                            readouts)}
    assert params != DECAY_BOUND.defaults(), (params, "the slider did not move")
    saved = json.loads(path.read_text(encoding="utf-8"))
    (output,) = saved["cells"][0]["outputs"]
    data = output["data"]
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert "widgets" not in saved["metadata"]
    still_png = base64.b64decode(data["image/png"])
    assert still_png == DECAY_BOUND.png(scale=LIVE_SCALE, **params), params
    html = "".join(data["text/html"])
    assert re.search(r'src="data:image/png;base64,([^"]+)"', html).group(1) == \
        "".join(data["image/png"]).strip()
    assert "where the sliders were left" in html
    assert "model not found" not in reopened["text"]
    assert "where the sliders were left" in reopened["text"]
    natural = int.from_bytes(still_png[16:20], "big")
    assert reopened["natural"] == natural == LIVE_SCALE * round(reopened["shown"])
