"""The library on a GPU, in one command: ``make gpu-check``.

    python scripts/gpu_check.py [--out results/gpu.json]
    python scripts/gpu_check.py --device cpu --out /tmp/gpu-cpu.json --small

Four steps, each timed and recorded:

1. **benchmark**: ``benchmarks/rope_speed.py``'s measurements (q and k of
   shape (1, 32, 4096, 128), float32 and bfloat16): transformers' eager
   ``apply_rotary_pos_emb``, the library's eager paths, ``rope.fused_apply``
   and the copy bandwidth, with the goals (fused >= 50 % of the copy
   bandwidth and >= 2.5x transformers) judged per row;
2. **diagnose**: :func:`posenc_lib.tools.diagnose.diagnose_rope` on RoPE kernels
   that run on the device (the eager ``apply_rope``, ``fused_apply``'s
   generated kernel, both layouts), which must come back clean, and on a
   kernel with a planted bug (the sign of sin flipped), which must not;
3. **tests**: ``tests/test_fused_rope.py``, slow tests included, with
   ``POSENC_TEST_DEVICE`` and torch's default device set to the device;
4. **training**: chapter 7's trainer (:mod:`posenc_lib.tools.experiment`), its
   smoke configuration cut to the RoPE model and one seed, on the device.

It writes every figure, the device, the versions and the command to
``--out`` (default ``results/gpu.json``) and exits 1 if a step failed or a
goal was not met (the file is written either way, and after each step with
``"complete": false``, so that a run cut short keeps what it measured). Without a CUDA device it
prints "no CUDA device: skipped", writes nothing and exits 0. ``--device
cpu`` runs the same pipeline on the CPU to test it; it refuses to write
``results/gpu.json``, which holds GPU figures only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = ROOT / "results" / "gpu.json"
SKIPPED = "no CUDA device: skipped"


def versions() -> dict:
    import torch

    found = {"python": platform.python_version(), "torch": torch.__version__,
             "cuda": torch.version.cuda}
    try:
        import transformers

        found["transformers"] = transformers.__version__
    except ImportError:
        found["transformers"] = None
    try:
        import triton

        found["triton"] = triton.__version__
    except ImportError:
        found["triton"] = None
    return found


def device_name(device: str) -> str:
    import torch

    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        return f"{props.name} ({props.total_memory / 2 ** 30:.0f} GiB)"
    return f"CPU {platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def step_benchmark(device: str, small: bool) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import rope_speed

    sizes = (dict(heads=2, seq=64, layers=2, repeats=3) if small
             else dict(heads=32, seq=4096, layers=32, repeats=15))
    runs = {dtype: rope_speed.run(device=device, dtype=dtype, **sizes)
            for dtype in ("float32", "bfloat16")}
    goals = [dict(goal, dtype=dtype) for dtype, run in runs.items() for goal in run["goals"]]
    # The goals are a GPU's: on the CPU the step only has to run.
    return {"runs": runs, "goals": goals, "goals_judged": device == "cuda",
            "goals_met": bool(goals) and all(goal["met"] for goal in goals)}


def step_diagnose(device: str) -> dict:
    import torch

    from posenc_lib import rope
    from posenc_lib.tools.diagnose import diagnose_rope

    dim = 64
    freqs = rope.inv_freq(dim, dtype=torch.float32).to(device)

    def kernel(kind, layout):
        def fn(x, positions):
            x, positions = x.to(device), positions.to(device)
            if kind == "eager":
                out = rope.apply_rope(x, positions, freqs, layout=layout)
            else:
                angles = rope.rope_angles(positions, freqs)
                sin = angles.sin() if kind == "fused" else -angles.sin()
                out = rope.fused_apply(x, angles.cos(), sin, layout=layout)
            assert out.device.type == torch.device(device).type, out.device
            return out            # left on the device: diagnose moves it
        return fn

    cases = {}
    for kind in ("eager", "fused", "fused, sin sign flipped (planted)"):
        for layout in rope.LAYOUTS:
            name = kind.split(",")[0] if "planted" not in kind else "planted"
            start = time.perf_counter()
            found = diagnose_rope(kernel(name, layout), dim=dim, layout=layout,
                                  max_position=4095)
            expected_clean = "planted" not in kind
            cases[f"{kind} / {layout}"] = {
                "findings": list(found.findings), "clean": bool(found.ok),
                "expected_clean": expected_clean,
                "as_expected": bool(found.ok) == expected_clean,
                "seconds": round(time.perf_counter() - start, 2)}
    return {"cases": cases, "all_as_expected": all(c["as_expected"] for c in cases.values())}


def step_tests(device: str) -> dict:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, POSENC_TEST_DEVICE=device, PYTHONPATH=path)
    code = ("import sys, torch, pytest; torch.set_default_device(sys.argv[1]); "
            "sys.exit(pytest.main(sys.argv[2:]))")
    args = [sys.executable, "-c", code, device, "-q", "-p", "no:cacheprovider",
            "-m", "slow or not slow", "tests/test_fused_rope.py"]
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    summary = (done.stdout.strip().splitlines() or [""])[-1]
    return {"command": f"POSENC_TEST_DEVICE={device} (default device {device}) "
                       f"pytest -m 'slow or not slow' tests/test_fused_rope.py",
            "returncode": done.returncode, "summary": summary,
            "passed": done.returncode == 0,
            "output_tail": (done.stdout + done.stderr)[-3000:],
            "seconds": round(time.perf_counter() - start, 1)}


def step_training(device: str) -> dict:
    from posenc_lib.tools import experiment

    config = dataclasses.replace(experiment.Config.smoke(), models=("rope",), seeds=(0,))
    start = time.perf_counter()
    results = experiment.run(config, device=device, cache_dir=None, progress=False)
    train = results["models"]["rope"]["train"]
    curve = train["loss_curve"][0]
    return {"config": "Config.smoke() with models=('rope',), seeds=(0,)",
            "steps": train["steps"], "loss_curve": curve,
            "environment": results["environment"],
            "loss_is_finite": all(v == v and abs(v) != float("inf") for v in curve),
            "seconds": round(time.perf_counter() - start, 1)}


STEPS = {"benchmark": step_benchmark, "diagnose": step_diagnose, "tests": step_tests,
         "training": step_training}


def step_ok(name: str, result: dict) -> bool:
    if "error" in result:
        return False
    return {"benchmark": result.get("goals_met") or not result.get("goals_judged"),
            "diagnose": result.get("all_as_expected"),
            "tests": result.get("passed"), "training": result.get("loss_is_finite")}[name]


def write_results(results: dict, path: Path) -> Path:
    """Write ``results`` as JSON, atomically (a temporary file, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"where to write the results (default: {DEFAULT_OUT}; "
                        "required with --device cpu)")
    parser.add_argument("--small", action="store_true",
                        help="tiny benchmark shapes (to test the pipeline)")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help="comma-separated subset of: " + ", ".join(STEPS))
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        parser.error(f"--steps: unknown {unknown}; choose from {list(STEPS)}")
    if args.device == "cpu":
        if args.out is None or args.out.resolve() == DEFAULT_OUT.resolve():
            parser.error("--device cpu: pass --out elsewhere than results/gpu.json, "
                         "which holds GPU figures only")
    out = args.out or DEFAULT_OUT

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(SKIPPED)
        return 0
    command = " ".join(["python", "scripts/gpu_check.py",
                        *(argv if argv is not None else sys.argv[1:])])
    results = {"command": command, "device": device_name(args.device),
               "device_type": args.device, "versions": versions(),
               "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "steps": {}}
    start = time.perf_counter()
    for name in steps:
        print(f"== {name}", flush=True)
        begin = time.perf_counter()
        try:
            result = (STEPS[name](args.device, args.small) if name == "benchmark"
                      else STEPS[name](args.device))
        except Exception as error:
            result = {"error": f"{type(error).__name__}: {error}",
                      "traceback": traceback.format_exc()[-3000:]}
        result.setdefault("seconds", round(time.perf_counter() - begin, 1))
        result["ok"] = bool(step_ok(name, result))
        results["steps"][name] = result
        print(f"   {'ok' if result['ok'] else 'FAILED'} in {result['seconds']} s"
              + (f": {result['error']}" if "error" in result else ""), flush=True)
        write_results(dict(results, complete=False), out)   # what is done so far
        if name == "benchmark" and "runs" in result:
            sys.path.insert(0, str(ROOT / "benchmarks"))
            import rope_speed

            for run in result["runs"].values():
                rope_speed.print_table(run)
    results["wall_time_s"] = round(time.perf_counter() - start, 1)
    results["ok"] = all(step["ok"] for step in results["steps"].values())
    results["complete"] = True
    write_results(results, out)
    print(f"wrote {out} ({'all ok' if results['ok'] else 'FAILED: see the steps'}, "
          f"{results['wall_time_s']:.0f} s)")
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
