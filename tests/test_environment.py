"""The environment is what requirements.txt says, and nothing threatens torch 2.13.0."""

from __future__ import annotations

import importlib.metadata as metadata
import os
import re
import subprocess
import sys

import pytest
import torch
from packaging.requirements import Requirement
from packaging.version import Version

from helpers.paths import ROOT

TORCH = Version("2.13.0")


def _pins(path):
    pins = {}
    for line in (ROOT / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier  # every requirement is pinned with exactly one ==
            assert spec.operator == "==", f"{path}: {line!r} is not an exact pin"
            pins[req.name] = spec.version
    return pins


def _normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def test_torch_is_the_pinned_cpu_build():
    import torch

    assert Version(torch.__version__).release == TORCH.release, torch.__version__
    assert torch.version.cuda is None, "a CUDA build of torch is installed"


@pytest.mark.parametrize("path", ["requirements.txt", "requirements-test.txt"])
def test_installed_versions_match_pins(path):
    for name, version in _pins(path).items():
        installed = Version(metadata.version(name))
        assert installed.public == Version(version).public, (name, str(installed), version)


def test_constraints_agree_with_requirements():
    lock = {_normalise(k): v for k, v in _pins("constraints.txt").items()}
    for path in ("requirements.txt", "requirements-test.txt", "requirements-lab.txt"):
        for name, version in _pins(path).items():
            assert lock.get(_normalise(name)) == version, (path, name, version)


def test_nothing_installed_would_replace_torch():
    """No CUDA wheels, and every installed package accepts torch 2.13.0."""
    offenders = []
    for dist in metadata.distributions():
        name = _normalise(dist.metadata["Name"])
        if name.startswith("nvidia-") or name == "triton":
            offenders.append(f"{name} is installed (a CUDA dependency of another torch)")
        for line in dist.requires or []:
            req = Requirement(line)
            if _normalise(req.name) != "torch":
                continue
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue  # an optional extra that was not requested
            if not req.specifier.contains(TORCH, prereleases=True):
                offenders.append(f"{name} requires {line!r}, which excludes torch {TORCH}")
    assert not offenders, "\n".join(offenders)


def test_pip_check_is_clean():
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif("POSENC_EXPECT_CAPABILITY" not in os.environ,
                    reason="set by `make portable` only")
def test_portable_run_uses_the_kernels_it_names():
    # `make portable` sets ATEN_CPU_CAPABILITY; torch ignores a value it does not
    # know, so the run would silently check this CPU's own kernels again.
    expected = os.environ["POSENC_EXPECT_CAPABILITY"].upper()
    assert torch.backends.cpu.get_cpu_capability() == expected
