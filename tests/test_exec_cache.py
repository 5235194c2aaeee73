"""The Makefile clears the notebooks' execution cache whenever anything a
notebook can read changes, and only then.

jupyter-cache keys each notebook on its own code alone, so `make book` keys the
whole cache on the rest (EXEC_INPUTS: the library with its data and vendored
code, results/, data/, the build extension, the pins). Run here on a copy of the
Makefile in a scratch tree: a file edited, added, removed or renamed there clears
the cache; a touch, a bytecode file or an edit elsewhere keeps it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KEY = "_build/.exec-inputs"
CACHE = "_build/.jupyter_cache"

FILES = {
    "posenc_lib/__init__.py": "from . import rope\n",
    "posenc_lib/rope.py": "BASE = 10000.0\n",
    "posenc_lib/tools/inspector.py": "LIMIT = 3\n",
    "posenc_lib/data/models.json": "{}\n",
    "posenc_lib/_vendor/vllm/rope.py": "X = 1\n",
    "results/engines.json": "{\"ok\": true}\n",
    "data/README.md": "text\n",
    "book/_ext/posenc_book.py": "FRONTEND = 'static'\n",
    "book/01_why_positions.ipynb": "{}\n",
    "requirements.txt": "torch==2.13.0\n",
    "constraints.txt": "torch==2.13.0\n",
    "README.md": "readme\n",
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    if shutil.which("make") is None or shutil.which("sha256sum") is None:
        pytest.skip("needs make and sha256sum")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def build_key(tree: Path) -> bool:
    """Run the Makefile's cache check, as `make book` does first; True when it
    cleared the cache (a stand-in record is put there before each run)."""
    record = tree / CACHE / "executed" / "record"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text("cached outputs")
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    done = subprocess.run(["make", "-s", KEY], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return not record.exists()


def test_first_build_clears_then_an_unchanged_tree_keeps_the_cache(tree):
    assert build_key(tree)                       # no key yet: start clean
    assert (tree / KEY).read_text().strip()
    assert not build_key(tree)
    assert not build_key(tree)


@pytest.mark.parametrize("name", sorted(n for n in FILES
                                        if not n.startswith(("book/0", "README"))))
def test_an_edit_to_any_input_clears_the_cache(tree, name):
    build_key(tree)
    with open(tree / name, "a") as f:
        f.write("\n")
    assert build_key(tree)
    assert not build_key(tree)


def test_added_removed_and_renamed_files_clear_the_cache(tree):
    build_key(tree)
    (tree / "posenc_lib/data/new.json").write_text("{}\n")
    assert build_key(tree)
    (tree / "results/engines.json").unlink()
    assert build_key(tree)
    (tree / "posenc_lib/tools/inspector.py").rename(tree / "posenc_lib/tools/reader.py")
    assert build_key(tree)
    assert not build_key(tree)


def test_touch_bytecode_and_other_files_keep_the_cache(tree):
    build_key(tree)
    os.utime(tree / "posenc_lib/rope.py", (1, 1))
    os.utime(tree / "results/engines.json")
    (tree / "posenc_lib/__pycache__").mkdir()
    (tree / "posenc_lib/__pycache__/rope.cpython-311.pyc").write_bytes(b"\0")
    # A notebook's own code is jupyter-cache's key; prose is nobody's.
    (tree / "book/01_why_positions.ipynb").write_text("{\"cells\": []}\n")
    (tree / "README.md").write_text("another readme\n")
    assert not build_key(tree)


def test_other_kernels_clear_the_cache(tree, monkeypatch):
    """`make test` builds with the portable kernels, `make book` with the native
    ones: outputs cached under one must not stand for the other's."""
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    build_key(tree)
    assert not build_key(tree)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert build_key(tree)
    assert not build_key(tree)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    assert build_key(tree)
