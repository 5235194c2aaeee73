"""make engines, second part: the KV cache llama.cpp allocates for each case of
compare_llama_cpp.py, as llama.cpp itself reports it.

For every case the tiny two-layer model is built and converted exactly as
compare_llama_cpp.py does; llama.cpp (llama-cpp-python in --engine-python)
then creates contexts over a grid of n_ctx, cache types (-ctk/-ctv), swa_full
and n_ubatch, and each context's own log lines are recorded:

    llama_kv_cache: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs),
        K (%s): %7.2f MiB, V (%s): %7.2f MiB

(src/llama-kv-cache.cpp 297-305 at the vendored commit: size_k_bytes() and
size_v_bytes(), the sums of ggml_nbytes over the cache's K and V tensors),
one line per cache (two for an iSWA model: the full layers' cache, then the
sliding layers'). The cell and layer counts are exact; the sizes are MiB to
two decimals. Nothing is predicted here: the records are merged into
results/engines.json (a "kv" list per case, the other figures untouched) and
tests/test_engines.py compares posenc_lib.tools.engines.engine_kv_cache_bytes with
them.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

KV_RUNNER = r'''
import sys, json, re, ctypes
import llama_cpp
from llama_cpp import Llama
gguf, grid = sys.argv[1], json.loads(sys.argv[2])
lines = []
@llama_cpp.llama_log_callback
def grab(level, text, user_data):
    lines.append(text.decode("utf-8", "replace"))
llama_cpp.llama_log_set(grab, ctypes.c_void_p(0))
TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8}
PAT = re.compile(r"llama_kv_cache: size = +([0-9.]+) MiB \( *(\d+) cells, +(\d+) layers, "
                 r"+(\d+)/(\d+) seqs\), K \((\w+)\): +([0-9.]+) MiB, V \((\w+)\): +([0-9.]+) MiB")
out = []
for point in grid:
    lines.clear()
    try:
        llm = Llama(model_path=gguf, n_ctx=point["n_ctx"], n_batch=point["n_batch"],
                    n_ubatch=point["n_ubatch"], n_threads=1, verbose=True,
                    type_k=TYPES[point["type_k"]], type_v=TYPES[point["type_v"]],
                    flash_attn=point["flash_attn"], swa_full=point["swa_full"])
        text = "".join(lines)
        caches = [dict(zip(("size_mib", "cells", "layers", "seqs", "streams", "k_type",
                            "k_mib", "v_type", "v_mib"),
                           (float(g[0]), int(g[1]), int(g[2]), int(g[3]), int(g[4]), g[5],
                            float(g[6]), g[7], float(g[8]))))
                  for g in PAT.findall(text)]
        ctx = re.search(r"n_ctx += (\d+)", text)
        ub = re.search(r"n_ubatch += (\d+)", text)
        out.append({**point, "caches": caches,
                    "log_n_ctx": int(ctx.group(1)) if ctx else None,
                    "log_n_ubatch": int(ub.group(1)) if ub else None,
                    "log": [l.strip() for l in text.splitlines()
                            if "llama_kv_cache" in l and ("size" in l or "SWA" in l)]})
        del llm
    except Exception as error:
        out.append({**point, "error": f"{type(error).__name__}: {error}",
                    "log_tail": "".join(lines)[-800:]})
print(json.dumps(out))
'''

#: The grid: every case at four contexts (256, 1000: padded to 1024, 4096, 32768)
#: with f16 and q8_0 caches; the sliding-window cases also with swa_full and a
#: smaller n_ubatch, and q4_0 on one point.
N_CTX = (256, 1000, 4096, 32768)


def grid(case):
    points = []
    for n_ctx in N_CTX:
        for t in ("f16", "q8_0"):
            points.append({"n_ctx": n_ctx, "type_k": t, "type_v": t, "swa_full": False,
                           "n_batch": 512, "n_ubatch": 512, "flash_attn": t != "f16"})
    points.append({"n_ctx": 4096, "type_k": "q4_0", "type_v": "q4_0", "swa_full": False,
                   "n_batch": 512, "n_ubatch": 512, "flash_attn": True})
    if case in ("gpt-oss-truncate-false", "gemma3"):
        points += [{"n_ctx": 1000, "type_k": "f16", "type_v": "f16", "swa_full": True,
                    "n_batch": 512, "n_ubatch": 512, "flash_attn": False},
                   {"n_ctx": 4096, "type_k": "q8_0", "type_v": "q8_0", "swa_full": False,
                    "n_batch": 512, "n_ubatch": 64, "flash_attn": True}]
    return points


def _compare_script():
    spec = importlib.util.spec_from_file_location("compare_llama_cpp",
                                                  HERE / "compare_llama_cpp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_case(script, case, args):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        script.build(case, tmp / "hf")
        script.convert(args.vendor, tmp / "hf", tmp / "m.gguf")
        config = json.loads((tmp / "hf" / "config.json").read_text())
        done = subprocess.run([args.engine_python, "-c", KV_RUNNER, str(tmp / "m.gguf"),
                               json.dumps(grid(case))], check=True, capture_output=True,
                              text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        points = json.loads(done.stdout.strip().splitlines()[-1])
    return config, points


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vendor", type=Path, required=True)
    parser.add_argument("--engine-python", required=True)
    parser.add_argument("--out", type=Path, default=Path("results/engines.json"))
    parser.add_argument("--cases", nargs="*", default=None)
    args = parser.parse_args()
    script = _compare_script()
    result = json.loads(args.out.read_text())
    cases = args.cases or [c["case"] for c in result["cases"]]
    kv = {}
    for case in cases:
        t0 = time.time()
        config, points = run_case(script, case, args)
        kv[case] = {"config": config, "points": points}
        errors = [p["error"] for p in points if "error" in p]
        print(f"{case}: {len(points)} contexts, {len(errors)} errors "
              f"({time.time() - t0:.1f} s) {errors[:1]}", flush=True)
    for record in result["cases"]:
        if record["case"] in kv:
            record["kv_config"] = kv[record["case"]]["config"]
            record["kv"] = kv[record["case"]]["points"]
    result["kv_source"] = ("llama.cpp's own log lines 'llama_kv_cache: size = ... MiB "
                           "(N cells, L layers, ...), K (type): ... MiB, V (type): ... MiB' "
                           "(src/llama-kv-cache.cpp 297-305), one per cache, from "
                           "scripts/engines/kv_llama_cpp.py")
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    if any("error" in p for v in kv.values() for p in v["points"]):
        sys.exit("some contexts could not be created; see the records")


if __name__ == "__main__":
    main()
