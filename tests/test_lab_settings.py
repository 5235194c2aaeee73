"""JupyterLab as ``make lab`` starts it: no question about news, no update check.

``make lab`` points ``JUPYTER_CONFIG_PATH`` at ``scripts/lab``. Two things there
keep JupyterLab quiet:

* ``jupyter_server_config.py`` sets ``LabApp.news_url = None`` and the
  ``jupyterlab.NeverCheckForUpdate`` class, so the server fetches nothing;
* ``labconfig/default_setting_overrides.json`` sets the defaults of the
  notification settings ``fetchNews`` to ``"false"`` and ``checkForUpdates`` to
  false. The server settings alone do not stop the pop-up: JupyterLab's
  ``announcements`` plugin asks "Would you like to get notified about official
  Jupyter news?" whenever ``fetchNews`` is ``"none"``, its default, before it
  asks the server anything (``packages/apputils-extension/src/announcements.ts``
  in JupyterLab 4; the string is in 4.5.11's ``jlab_core`` bundle).
  jupyterlab_server reads ``labconfig/default_setting_overrides.json`` from
  every directory of the Jupyter config path (``_get_overrides`` in
  ``jupyterlab_server/settings_utils.py``, 2.28.1).

The last test starts a real JupyterLab server where one is installed
(``make lab``'s, or the ``jupyter-lab`` named by ``POSENC_JUPYTER_LAB``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import lab as lab_server
from helpers.paths import ROOT

LAB_CONFIG = ROOT / "scripts" / "lab"
OVERRIDES = LAB_CONFIG / "labconfig" / "default_setting_overrides.json"
PLUGIN = "@jupyterlab/apputils-extension:notification"


def test_lab_settings_turn_the_news_question_and_update_check_off():
    overrides = json.loads(OVERRIDES.read_text(encoding="utf-8"))
    assert overrides.pop(PLUGIN) == {"fetchNews": "false", "checkForUpdates": False}, (
        f"{OVERRIDES}: JupyterLab asks about news unless fetchNews defaults to "
        '"false" (the string; its choices are "true", "false" and "none")'
    )
    # The widget state in each save, for the still figure where the sliders were left
    # (scripts/lab/jupyter_server_config.py, strip_widget_views).
    assert overrides == {"@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": True}}


def test_server_config_fetches_no_news_and_checks_no_update():
    from traitlets.config import Config

    path = LAB_CONFIG / "jupyter_server_config.py"
    spec = importlib.util.spec_from_file_location("posenc_lab_config_news", path)
    module = importlib.util.module_from_spec(spec)
    module.c = Config()
    spec.loader.exec_module(module)
    assert module.c.LabApp.news_url is None
    assert module.c.LabApp.check_for_updates_class == "jupyterlab.NeverCheckForUpdate"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _notification_defaults(lab: str, config_path: Path, tmp: Path) -> dict:
    """The notification settings' defaults as a running JupyterLab serves them."""
    port = _free_port()
    env = dict(
        os.environ,
        JUPYTER_CONFIG_PATH=str(config_path),
        JUPYTER_DATA_DIR=str(tmp / "data"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
    )
    (tmp / "root").mkdir(exist_ok=True)
    args = [lab, "--no-browser", f"--port={port}", "--IdentityProvider.token=t",
            f"--ServerApp.root_dir={tmp / 'root'}"]
    if hasattr(os, "getuid") and os.getuid() == 0:
        args.append("--allow-root")
    server = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/lab/api/settings/{PLUGIN}?token=t"
    try:
        for _ in range(120):
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    schema = json.load(response)["schema"]["properties"]
                return {key: schema[key]["default"] for key in ("fetchNews",
                                                                "checkForUpdates")}
            except OSError:
                if server.poll() is not None:
                    pytest.fail(f"{lab} exited with {server.returncode}")
                time.sleep(0.5)
        pytest.fail("JupyterLab did not answer within a minute")
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_a_running_jupyterlab_asks_nothing_about_news(tmp_path):
    """With ``make lab``'s config path the served defaults are "false"/false, so
    the pop-up never shows; without it, "none": the question (the control)."""
    lab = lab_server.jupyter_lab()
    if not lab:
        pytest.skip("JupyterLab is not installed (make lab installs it)")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "empty").mkdir()
    assert _notification_defaults(lab, LAB_CONFIG, tmp_path / "a") == {
        "fetchNews": "false", "checkForUpdates": False}
    assert _notification_defaults(lab, tmp_path / "empty", tmp_path / "b") == {
        "fetchNews": "none", "checkForUpdates": True}
