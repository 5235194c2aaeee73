"""JupyterLab for the tests that run one (skipped without it): where it is, and
a server started as ``make lab`` starts it, in scratch directories."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .paths import ROOT


def jupyter_lab() -> str | None:
    """``jupyter-lab``: $POSENC_JUPYTER_LAB, else beside this Python (after
    ``make lab``), else on PATH; ``None`` if there is none."""
    named = os.environ.get("POSENC_JUPYTER_LAB")
    if named:
        return named
    beside = Path(sys.executable).parent / "jupyter-lab"
    return str(beside) if beside.exists() else shutil.which("jupyter-lab")


@contextlib.contextmanager
def serve(executable: str, root: Path, tmp: Path, jupyter_path: str):
    """A JupyterLab server on a free local port with ``make lab``'s config path
    (scripts/lab), serving ``root``, its settings, workspaces and runtime files
    under ``tmp``, kernels from ``jupyter_path``; token ``t``. Yields its base
    URL; fails the test, naming the log, if the server exits before it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(ROOT / "scripts" / "lab"),
           "JUPYTER_PATH": jupyter_path,
           "JUPYTER_CONFIG_DIR": str(tmp / "config"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(tmp / "runtime")}
    args = [executable, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
            "--ServerApp.token=t", f"--ServerApp.root_dir={root}"]
    if hasattr(os, "getuid") and os.getuid() == 0:
        args.append("--allow-root")
    with open(tmp / "server.log", "w") as log:
        server = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(180):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if server.poll() is not None:
                        pytest.fail(f"{executable} exited; see {tmp / 'server.log'}")
                    time.sleep(1)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(timeout=60)
