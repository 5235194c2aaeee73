"""scripts/gpu_check.py (`make gpu-check`): the skip without a GPU, the results file,
and (slow) the whole pipeline run on the CPU."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import torch

from helpers.paths import ROOT

SCRIPT = ROOT / "scripts" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible here")
def test_without_a_gpu_it_skips_cleanly_and_writes_nothing(tmp_path):
    out = tmp_path / "gpu.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "no CUDA device: skipped"
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_skip_is_decided_by_cuda_availability(gpu_check, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_check, "STEPS", {})   # a skip must not reach any step
    assert gpu_check.main(["--out", str(tmp_path / "gpu.json")]) == 0
    assert capsys.readouterr().out.strip() == gpu_check.SKIPPED
    assert not (tmp_path / "gpu.json").exists()


def test_a_cpu_run_may_not_write_the_gpu_results(gpu_check):
    for argv in (["--device", "cpu"], ["--device", "cpu", "--out", str(gpu_check.DEFAULT_OUT)]):
        with pytest.raises(SystemExit) as exit_info:
            gpu_check.main(argv)
        assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        gpu_check.main(["--device", "cpu", "--out", "/tmp/x.json", "--steps", "nonsense"])


def test_results_file_records_every_step_and_the_command(gpu_check, monkeypatch, tmp_path):
    def fine(device, small=False):
        return {"figure": 1.5, "device_seen": device, "loss_is_finite": True}

    def broken(device):
        raise RuntimeError("planted failure")

    monkeypatch.setattr(gpu_check, "STEPS", {"training": fine, "tests": broken})
    out = tmp_path / "sub" / "gpu.json"
    code = gpu_check.main(["--device", "cpu", "--out", str(out),
                           "--steps", "training,tests"])
    assert code == 1                                  # a failed step fails the command
    written = json.loads(out.read_text())             # ... and the file is still written
    assert written["command"] == (f"python scripts/gpu_check.py --device cpu --out {out} "
                                  f"--steps training,tests")
    assert written["device_type"] == "cpu" and written["device"].startswith("CPU")
    assert written["versions"]["torch"] == torch.__version__
    assert written["steps"]["training"] == {"figure": 1.5, "device_seen": "cpu",
                                            "loss_is_finite": True,
                                            "seconds": written["steps"]["training"]["seconds"],
                                            "ok": True}
    assert written["steps"]["tests"]["ok"] is False
    assert "planted failure" in written["steps"]["tests"]["error"]
    assert written["ok"] is False and written["complete"] is True
    assert [p.name for p in out.parent.iterdir()] == ["gpu.json"]   # no temporary left


@pytest.mark.slow
def test_the_whole_pipeline_runs_on_the_cpu(tmp_path):
    """Every step for real, on the CPU with tiny benchmark shapes (minutes)."""
    out = tmp_path / "gpu-cpu.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--small",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    written = json.loads(out.read_text())
    steps = written["steps"]
    assert set(steps) == {"benchmark", "diagnose", "tests", "training"}
    assert all(step["ok"] for step in steps.values())
    names = {row["name"] for run in steps["benchmark"]["runs"].values()
             for row in run["rows"]}
    assert {"transformers Llama", "posenc fused_apply half", "posenc fused_apply interleaved",
            "copy_ (preallocated)", "transformers Phi-3"} <= names
    diagnosed = steps["diagnose"]["cases"]
    assert not diagnosed["fused, sin sign flipped (planted) / half"]["clean"]
    assert diagnosed["fused / interleaved"]["clean"]
