"""The cache of every causal-LM type's tiny model in bfloat16, for
``tests/test_state_dtypes.py``.

The conformance sweep (``scripts/conformance.py``) runs its tiny models in
float32, where a state kept in float32 and one kept in the model's dtype take
the same bytes. Here each type the stored sweep built
(``results/conformance-<major>.json``) is built again from the stored config
in bfloat16 (``from_config(dtype=...)``, as a checkpoint loads: modules the
class keeps in float32 stay so; cast with ``.to()`` where that fails, noted
as ``"built": "cast"``) and run on ``TOKENS`` and ``TOKENS + 1`` tokens; the
bytes of keys and values per token and the fixed state are stored with the
config. The
test asks the library the same at 2 bytes a value
(:func:`posenc_lib.tools.conformance.library_view`): a gated-DeltaNet or
Bailing recurrent state kept in float32 is then 4 bytes a value beside a
2-byte convolution state. Run under each transformers::

    python scripts/state_dtypes.py     # results/state-dtypes-<major>.json

(``make state-dtypes`` runs both; about two minutes each).
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


def population(major: int) -> dict[str, dict]:
    """``{model_type: stored float32 entry}`` of the types the sweep built."""
    stored = json.loads((ROOT / "results" / f"conformance-{major}.json").read_text())
    return {t: e for t, e in sorted(stored["types"].items())
            if e["verdict"] != "not built"}


def measure(model_type: str) -> dict:
    """One type in bfloat16: bytes of keys and values per token, fixed state."""
    import torch

    from posenc_lib.tools import tiny_model

    cls, kw = tiny_model.shrunk(model_type)
    try:
        # built in bfloat16 as a checkpoint loads in it (from_config's dtype:
        # DeepSeek-V4's position_bias stays float32); a model whose weights
        # cannot be initialised in bfloat16 (RWKV's orthogonal init, XLNet)
        # built in float32 and cast, as before
        how_built = "dtype"
        try:
            built, model = tiny_model.build(cls, kw, dtype=torch.bfloat16)
        except Exception:  # noqa: BLE001 -- retried as a cast below
            built, model = tiny_model.build(cls, kw)
            model, how_built = model.to(torch.bfloat16), "cast"
        sizes = []
        for tokens in (tiny_model.TOKENS, tiny_model.TOKENS + 1):
            cache = tiny_model.filled_cache(model, built, tokens)
            kv, state, how = tiny_model.cache_bytes(cache, model)
            sizes.append((kv, state))
    except Exception as error:  # noqa: BLE001 -- stored with the type
        return {"error": f"{type(error).__name__}: {error}"[:300]}
    (kv1, st1), (kv2, _) = sizes
    if kv1 is None:
        return {"config": tiny_model._jsonable(built.to_dict()), "cache_class": how,
                "built": how_built, "kv_per_token": None, "fixed_state": None}
    per_token = kv2 - kv1
    return {"config": tiny_model._jsonable(built.to_dict()), "cache_class": how,
            "built": how_built, "kv_per_token": per_token,
            "fixed_state": kv1 - tiny_model.TOKENS * per_token + st1}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="default: results/state-dtypes-<major>.json")
    parser.add_argument("--types", nargs="*", default=None,
                        help="only these model types (default: the population)")
    args = parser.parse_args(argv)
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.set_num_threads(1)
    major = int(transformers.__version__.split(".")[0])
    out = args.out or ROOT / "results" / f"state-dtypes-{major}.json"
    types = args.types or list(population(major))
    start = time.time()
    entries = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, t in enumerate(types, 1):
            print(f"[{i}/{len(types)}] {t}", file=sys.stderr, flush=True)
            entries[t] = measure(t)
    from posenc_lib.tools.tiny_model import TOKENS

    result = {"transformers": transformers.__version__, "torch": torch.__version__,
              "dtype": "bfloat16", "tokens": TOKENS,
              "command": f"python scripts/state_dtypes.py (transformers "
                         f"{transformers.__version__})",
              "seconds": round(time.time() - start), "types": entries}
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    built = sum("error" not in e for e in entries.values())
    print(f"{len(types)} types, {built} built in bfloat16 -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
