"""Window keys on every causal-LM type: the cache each tiny model fills, for
``tests/test_window_keys.py``.

A ``config.json`` may carry window keys its class does not define, or define
with a switch: ``sliding_window`` in a Llama or CPM-Ant config,
``attention_chunk_size``, ``layer_types``, Qwen's ``use_sliding_window`` and
``max_window_layers``. A class keeps such a key as an attribute, and a
``DynamicCache(config)`` may read it whatever the attention does; a class
may also override it (ModernBERT-decoder's ``local_attention // 2`` in
4.57.6) or keep it only behind a switch (Qwen3-MoE's ``use_sliding_window``).

For every type of the stored conformance sweep that agrees
(``results/conformance-<major>.json``), the sweep's tiny default config
(:func:`posenc_lib.tools.tiny_model.shrunk`) is written out (``to_dict()``),
each form's keys are added to that dict (as a practitioner edits a file),
the installed class builds the result as ``AutoConfig`` does
(``from_dict``), and its model's own cache is measured after a forward of
:data:`TOKENS` tokens (:func:`posenc_lib.tools.crosscheck.filled_cache_bytes`:
keys and values, and other state). A form the class or its model refuses is
stored with the error. Run under each transformers (``make window-keys``)::

    python scripts/window_keys.py --out results/window-keys-4.json
    /path/to/venv5/bin/python scripts/window_keys.py --out results/window-keys-5.json

(168 s and 238 s on two cores, 2026-11-29.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The forward pass's length; the windows are shorter.
TOKENS = 10
WINDOW = 3


def forms(layers: int | None) -> dict[str, dict]:
    """The keys each form adds (``layers``: the tiny config's layer count)."""
    out = {"as-is": {}, "window": {"sliding_window": WINDOW},
           "chunk": {"attention_chunk_size": WINDOW},
           "window, switch off": {"sliding_window": WINDOW, "use_sliding_window": False},
           "window, switch on": {"sliding_window": WINDOW, "use_sliding_window": True},
           "window, switch on, max_window_layers 1": {
               "sliding_window": WINDOW, "use_sliding_window": True,
               "max_window_layers": 1}}
    if isinstance(layers, int) and layers > 0:
        out["layer_types, window"] = {
            "layer_types": (["sliding_attention", "full_attention"] * layers)[:layers],
            "sliding_window": WINDOW}
    return out


def written_forms(model_type: str) -> tuple[type, list[tuple[str, dict]]]:
    """``(config class, [(form, raw dict)])``: ``model_type``'s tiny default
    config written out (``to_dict()``), each form's keys added."""
    from posenc_lib.tools import tiny_model

    cls, kw = tiny_model.shrunk(model_type)
    base, _ = tiny_model.build(cls, kw)
    written = json.loads(json.dumps(base.to_dict(), default=str))
    for key in ("transformers_version", "_attn_implementation", "dtype", "torch_dtype"):
        written.pop(key, None)
    return cls, [(name, {**written, **extra}) for name, extra in
                 forms(getattr(base, "num_hidden_layers", None)).items()]


def tiny_of(cls, raw: dict, attn_implementation: str | None = None):
    """``(config, model)``: ``raw`` built by ``cls`` as ``AutoConfig`` builds a
    dict (``from_dict``), and its tiny model with seeded weights; raises what
    transformers raises."""
    import torch

    from posenc_lib.tools import tiny_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = cls.from_dict(dict(raw))
    if attn_implementation is not None:
        built._attn_implementation = attn_implementation
    torch.manual_seed(0)
    return built, tiny_model.model_of(built)


def measure(model_type: str) -> dict:
    """Each form of ``model_type``: ``{"raw", "cache": [kv, state]}`` or
    ``{"raw", "refused": why}``."""
    from posenc_lib.tools.crosscheck import filled_cache_bytes

    cls, written = written_forms(model_type)
    out = {}
    for name, raw in written:
        entry = {"raw": raw}
        try:
            built, model = tiny_of(cls, raw, "eager")
            entry["cache"] = list(filled_cache_bytes(model, built, TOKENS))
        except Exception as error:  # noqa: BLE001 -- transformers' own refusal
            entry["refused"] = f"{type(error).__name__}: {str(error)[:200]}"
        out[name] = entry
    return out


def sweep(measure, selected: str | None) -> dict:
    """``measure(model_type)`` over every type the stored conformance sweep of
    the installed transformers agrees on (or those of ``selected``, comma-
    separated), with a type whose measurement fails stored with its error:
    ``{"transformers", "torch", "tokens", "window", "seconds", "types"}``."""
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    major = transformers.__version__.split(".")[0]
    stored = json.loads((ROOT / "results" / f"conformance-{major}.json").read_text())
    types = sorted(t for t, e in stored["types"].items() if e["verdict"] == "agree")
    if selected:
        types = [t for t in types if t in selected.split(",")]
    start, found = time.perf_counter(), {}
    for i, model_type in enumerate(types, 1):
        try:
            found[model_type] = measure(model_type)
        except Exception as error:  # noqa: BLE001 -- listed, never dropped
            found[model_type] = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
        print(f"[{i}/{len(types)}] {model_type}", flush=True)
    return {"transformers": transformers.__version__, "torch": torch.__version__,
            "tokens": TOKENS, "window": WINDOW,
            "seconds": round(time.perf_counter() - start, 1), "types": found}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--types", default=None, help="comma-separated model types")
    args = parser.parse_args(argv)
    out = {**sweep(measure, args.types),
           "command": f"python scripts/window_keys.py --out {args.out.name}"}
    args.out.write_text(json.dumps(out, sort_keys=True, default=str) + "\n")
    print(f"{len(out['types'])} types -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
