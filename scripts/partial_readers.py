"""Which classes' default RoPE reads ``partial_rotary_factor``, measured by
running each one, for ``tests/test_partial_readers.py``.

For every causal-LM model type of the stored conformance sweep that rotates
(``results/conformance-<major>.json``) and whose class default is the plain
(``"default"``) RoPE (in one block, or, for a 5.x ``rope_parameters`` per
layer type, in some of them), the tiny model of the sweep
(:func:`posenc_lib.tools.tiny_model.shrunk`) is built twice: with
``partial_rotary_factor`` 1.0 and with 0.5 (at the top level, and for
transformers 5.x also in ``rope_parameters``, where 5.x reads it; per layer
type, in each plain block only). A forward
pass records the width of the ``cos`` each layer's ``apply_rotary*`` receives
(:func:`posenc_lib.tools.tiny_model.observe`). A class reads the factor when
the width at 0.5 is below the width at 1.0.

transformers 4.57.6 reads the factor in ``_compute_default_rope_parameters``
(``modeling_rope_utils.py``) for every class that uses it; most 5.24.0 classes
compute their default frequencies in their own
``compute_default_rope_parameters``, over ``head_dim`` only. Run under each
transformers (``make partial-readers`` runs both)::

    python scripts/partial_readers.py    # results/partial-readers-<major>.json

(about two minutes each). Types the class or the tiny model refuses are stored
with the error and left out of the comparison.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FACTORS = (1.0, 0.5)


def population(major: int) -> list[str]:
    """The causal-LM types whose default tiny model rotates (stored sweep)."""
    stored = json.loads((ROOT / "results" / f"conformance-{major}.json").read_text())
    return sorted(t for t, e in stored["types"].items()
                  if e["verdict"] != "not built" and e["observed"]["rope_layers"])


def _widths(observed: dict) -> dict[str, int]:
    """``{layers: width of cos}`` of one run's rotating layers."""
    return {k: len(v["cos"]) for k, v in observed["cos_sin"].items()}


def measure(model_type: str, major: int) -> dict:
    """One type: the configs built at each factor and the cos widths seen."""
    from posenc_lib.tools import tiny_model

    cls, kw = tiny_model.shrunk(model_type)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        default = cls(**kw)
    params = getattr(default, "rope_parameters", None) if major >= 5 else None
    per_type = isinstance(params, dict) and "rope_type" not in params and \
        any(isinstance(v, dict) and v.get("rope_type") == "default"
            for v in params.values())
    if major >= 5 and not per_type and (not isinstance(params, dict)
                                        or params.get("rope_type") != "default"):
        return {"skipped": f"class default rope_parameters has no default "
                           f"block: {json.dumps(params, default=str)[:200]}"}
    elif major < 5:
        scaling = getattr(default, "rope_scaling", None)
        if scaling not in (None, {}) and (scaling.get("rope_type") or
                                          scaling.get("type")) != "default":
            return {"skipped": f"class default rope_scaling is "
                               f"{json.dumps(scaling, default=str)[:200]}"}
    runs = {}
    for factor in FACTORS:
        args = copy.deepcopy(kw)
        if per_type:  # the factor in each plain block, the others as they are
            args["rope_parameters"] = {
                k: ({**v, "partial_rotary_factor": factor}
                    if isinstance(v, dict) and v.get("rope_type") == "default" else v)
                for k, v in params.items()}
        else:
            args["partial_rotary_factor"] = factor
        if major >= 5 and not per_type:
            args["rope_parameters"] = {**params, "partial_rotary_factor": factor}
        try:
            built, model = tiny_model.build(cls, args)
            seen = tiny_model.observe(model, built, model_type)
        except Exception as error:  # noqa: BLE001 -- stored with the type
            return {"error": f"factor {factor}: {type(error).__name__}: {error}"[:300]}
        runs[str(factor)] = {"config": seen["config"],
                             "widths": _widths(seen["observed"])}
    one, half = (runs[str(f)]["widths"] for f in FACTORS)
    if not one or set(one) != set(half):
        return {"error": f"rotating layers differ or no cos seen: {one} vs {half}",
                "runs": runs}
    return {"runs": runs, "reads": any(half[k] < one[k] for k in one)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="default: results/partial-readers-<major>.json")
    parser.add_argument("--types", nargs="*", default=None,
                        help="only these model types (default: the population)")
    args = parser.parse_args(argv)
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    major = int(transformers.__version__.split(".")[0])
    out = args.out or ROOT / "results" / f"partial-readers-{major}.json"
    types = args.types or population(major)
    start = time.time()
    entries = {}
    for i, t in enumerate(types, 1):
        print(f"[{i}/{len(types)}] {t}", file=sys.stderr, flush=True)
        entries[t] = measure(t, major)
    result = {"transformers": transformers.__version__,
              "command": f"python scripts/partial_readers.py (transformers "
                         f"{transformers.__version__})",
              "factors": list(FACTORS), "seconds": round(time.time() - start),
              "types": entries}
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    reads = sum(e.get("reads") is True for e in entries.values())
    ignores = sum(e.get("reads") is False for e in entries.values())
    print(f"{len(types)} types: {reads} read the factor, {ignores} rotate the whole "
          f"head, {len(types) - reads - ignores} skipped or refused -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
