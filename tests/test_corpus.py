"""The pinned corpus of chapter 7's study: the training bytes come from the
repository, not from the running interpreter."""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from posenc_lib import corpus
from posenc_lib.tools import experiment


def test_the_archive_gives_the_pinned_digests():
    for part, files in (("train", corpus.TRAIN_FILES), ("eval", corpus.EVAL_FILES)):
        data, sha = experiment.load_bytes(files)
        assert sha == corpus.PINNED_SHA256[part]
        assert sha == hashlib.sha256(data.numpy().tobytes()).hexdigest()
    assert experiment.TRAIN_FILES == corpus.TRAIN_FILES


def test_the_training_bytes_do_not_read_the_interpreters_standard_library(monkeypatch,
                                                                          tmp_path):
    # The study's data were once the interpreter's Lib/: point the interpreter's
    # paths at a Lib/ with one module changed, and the bytes stay the pinned ones.
    fake = tmp_path / "lib"
    fake.mkdir()
    for name in corpus.TRAIN_FILES:
        (fake / f"{name}.py").write_bytes(b"# another Python's source\n")
    paths = dict(sysconfig.get_paths(), stdlib=str(fake))
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: paths)
    assert experiment.load_bytes(corpus.TRAIN_FILES)[1] == corpus.PINNED_SHA256["train"]


def _other_pythons():
    here = platform.python_version()
    out = []
    for name in ("python3", "python3.11", "python3.12", "python3.10"):
        for exe in {shutil.which(name), f"/usr/bin/{name}"}:
            if not exe or not Path(exe).is_file() or Path(exe).resolve() == Path(
                    sys.executable).resolve():
                continue
            try:
                version = subprocess.run([exe, "-c", "import platform; print("
                                          "platform.python_version())"],
                                         capture_output=True, text=True, timeout=30,
                                         check=True).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                continue
            if version and version != here and version not in [v for _, v in out]:
                out.append((exe, version))
    return out


def test_two_python_versions_give_the_same_training_bytes():
    # corpus.py uses the standard library only: another interpreter (e.g.
    # Debian's 3.11.2, whose own Lib/ gives other bytes) runs it as a script.
    others = _other_pythons()
    if not others:
        pytest.skip("no second Python version on this machine")
    script = Path(corpus.__file__)
    for exe, version in others:
        out = subprocess.run([exe, str(script)], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, (version, out.stdout, out.stderr)
        lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
        assert lines["python"] == version
        assert lines["train"] == corpus.PINNED_SHA256["train"], version
        assert lines["eval"] == corpus.PINNED_SHA256["eval"], version


def test_a_changed_archive_is_refused(monkeypatch, tmp_path):
    # planted bug: one byte of the stored corpus changed
    copy = tmp_path / corpus.ARCHIVE.name
    data = bytearray(corpus.ARCHIVE.read_bytes())
    data[len(data) // 2] ^= 0xFF
    copy.write_bytes(bytes(data))
    monkeypatch.setattr(corpus, "ARCHIVE", copy)
    with pytest.raises(ValueError, match="sha256"):
        corpus.read(corpus.TRAIN_FILES[:1], copy)
    with pytest.raises(ValueError, match="modules"):
        corpus.read(["no_such_module_here"])


@pytest.mark.skipif(platform.python_version() != corpus.PYTHON_VERSION,
                    reason="compares with CPython 3.11.7's own Lib/")
def test_the_archive_holds_cpython_3_11_7s_sources_unchanged():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    members = corpus._members(corpus.ARCHIVE)
    for name in corpus.TRAIN_FILES + corpus.EVAL_FILES:
        assert members[f"{name}.py"] == (stdlib / f"{name}.py").read_bytes(), name
    assert members["LICENSE.txt"] == (stdlib / "LICENSE.txt").read_bytes()


def test_training_refuses_other_bytes_for_the_studys_file_lists():
    config = experiment.Config()
    pinned = corpus.PINNED_SHA256
    experiment.data._check_pinned(config, pinned["train"], pinned["eval"])   # the study's
    with pytest.raises(ValueError, match="train_files"):
        experiment.data._check_pinned(config, "0" * 64, pinned["eval"])
    with pytest.raises(ValueError, match="eval_files"):
        experiment.data._check_pinned(config, pinned["train"], "0" * 64)
    # other file lists (the smoke study's) have no pin
    experiment.data._check_pinned(experiment.Config.smoke(), "0" * 64, "0" * 64)
