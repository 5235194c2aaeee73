"""Conformance sweep: every causal-LM model type the installed transformers
registers, built tiny, against what posenc_lib says about it.

For each model type of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` (a composite,
multimodal config through its ``text_config``), the class-default config is
shrunk (a few layers, small hidden and feed-forward sizes, two or four heads;
``head_dim``, every positional field and the layer types kept), a model with
random weights is built and run on ``TOKENS`` tokens with ``use_cache=True``
(and once more on ``TOKENS + 1`` tokens, so that the cache's growth per token
and its fixed part are measured, not predicted), while

- every call of the model file's own ``apply_rotary*`` functions is recorded
  with its cos and sin (or ``freqs_cis``), attributed to the layer whose
  forward pass is running (``layer_idx``);
- every call of its ``eager_attention_forward`` records the ``scaling`` it
  receives (``None`` means ``head_dim^-1/2`` of the query, as that function
  computes it).

The library's answers for the same config (``config.to_dict()``): which layers
rotate and with which frequencies and cos/sin factor
(:func:`posenc_lib.scaling.rope_from_config` per layer), the softmax scale
(the constant logit factors of :func:`posenc_lib.tools.inspector.logit_factors`,
without the cos/sin factor, which the cos/sin carry), the KV cache per token
and the fixed state (:func:`posenc_lib.serving.kv_cache_bytes` in float32).
Each difference is recorded with its reason; a type that cannot be built is
listed with the error, never dropped.

Run: ``python scripts/conformance.py --out results/conformance-4.json`` (the
venv's transformers) and the same with the 5.x interpreter (``make
conformance`` runs both). ``--types a,b`` restricts the sweep.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import transformers  # noqa: E402
from transformers.models.auto.modeling_auto import (  # noqa: E402
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)

from posenc_lib.tools import conformance  # noqa: E402
from posenc_lib.tools.tiny_model import TOKENS, run_model  # noqa: E402

def sweep(types: list[str]) -> dict:
    results = {}
    for model_type in types:
        start = time.perf_counter()
        entry: dict = {"model_type": model_type}
        try:
            run = run_model(model_type)
        except Exception as e:  # noqa: BLE001 -- listed with its reason
            entry.update(verdict="not built", reason=f"{type(e).__name__}: "
                         f"{str(e).splitlines()[0][:300] if str(e) else ''}",
                         where=traceback.extract_tb(e.__traceback__)[-1].name)
            results[model_type] = entry
            print(f"{model_type:28s} not built: {entry['reason'][:100]}", flush=True)
            continue
        try:
            diffs = conformance.compare(run["observed"], run["config"],
                                        transformers_version=transformers.__version__)
        except Exception as e:  # noqa: BLE001 -- a crash of the comparison is listed
            diffs = [{"what": "comparison", "transformers": None, "library": None,
                      "reason": f"the comparison raised {type(e).__name__}: {e}"}]
        entry.update(
            text_model_type=run["text_model_type"], model_class=run["class"],
            cache_class=run["cache_class"], rotary_functions=run["rotary_functions"],
            claimed=conformance.claimed(run["text_model_type"]),
            verdict=conformance.verdict(diffs), differences=diffs,
            observed=run["observed"], config=run["config"],
            seconds=round(time.perf_counter() - start, 2))
        results[model_type] = entry
        print(f"{model_type:28s} {entry['verdict']}"
              + "".join(f"\n    - {d['what']}: {d['reason'][:150]}" for d in diffs),
              flush=True)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--types", default=None)
    args = parser.parse_args(argv)
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    torch.set_num_threads(1)
    types = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    if args.types:
        types = args.types.split(",")
    start = time.perf_counter()
    results = sweep(types)
    elapsed = time.perf_counter() - start
    counts = {}
    for e in results.values():
        counts[e["verdict"]] = counts.get(e["verdict"], 0) + 1
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "python": platform.python_version(), "tokens": TOKENS,
           "registered": len(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES),
           "counts": counts, "seconds": round(elapsed, 1), "types": results}
    print(json.dumps(counts), f"{elapsed:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    failing = sorted(t for t, e in results.items()
                     if e["verdict"] == "disagree" and e.get("claimed"))
    if failing:
        print(f"{len(failing)} type(s) the library names in its tables disagree: "
              f"{', '.join(failing)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
