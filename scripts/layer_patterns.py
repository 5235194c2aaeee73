"""The layer types every config class fills in when ``config.json`` has no
``layer_types``, over generated layer counts and pattern fields, for
``tests/test_layer_patterns.py``.

The population is every causal-LM model type transformers registers whose
class, built with its defaults, fills in ``layer_types`` (the text config of a
composite).
For each, :func:`variants` draws layer counts and values of the fields the
classes expand a pattern from (a fixed list of names, each set only where the
class has the field or reads it from its keyword arguments); the class is
built from each variant without ``layer_types`` and the ``layer_types`` it
fills in are kept, with the variant. The test gives the library the same
variant and compares (:func:`posenc_lib.per_layer.layer_types`).

transformers 4.x is installed in CI, so the test builds the 4.x classes live;
this script stores the 5.x side::

    make layer-patterns   # results/layer-patterns-5.json

(about 10 s). A variant the class refuses is stored with its error and left
out of the comparison.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Fields from which some class expands its layer types (set on a variant only
#: where the class's default config has the field, or, for the keyword-only
#: ones, always: a class that does not read them ignores them).
PATTERN_FIELDS = {
    "sliding_window_pattern": (1, 2, 3, 4, 6),
    "global_attn_every_n_layers": (1, 2, 3, 5),
    "layer_group_size": (1, 2, 3, 6),
    "prefix_dense_sliding_window_pattern": (1, 2, 3),
    "full_attn_idxs": None,  # a list: drawn below
    "no_rope_layer_interval": (1, 2, 4),
    "max_window_layers": (0, 1, 3, 28),
    "use_sliding_window": (False, True),
}
#: Keyword-only fields some classes pop in ``__post_init__`` (never in
#: ``to_dict()``): Qwen3.5's ``full_attention_interval``, Cohere2-MoE's
#: ``first_k_dense_replace``.
KEYWORD_FIELDS = {"full_attention_interval": (1, 2, 3, 4),
                  "first_k_dense_replace": (0, 1, 2)}
LAYERS = (1, 2, 3, 4, 5, 6, 7, 8, 12, 13)


def text_config(config):
    """The text config of a composite (``text_config``), else ``config``."""
    sub = getattr(config, "text_config", None)
    return sub if sub is not None and hasattr(sub, "layer_types") else config


def population() -> dict[str, object]:
    """``{model_type: text config class}`` for every registered type whose
    default config fills in ``layer_types``."""
    from transformers import CONFIG_MAPPING

    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    out = {}
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        if model_type not in CONFIG_MAPPING:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                text = text_config(CONFIG_MAPPING[model_type]())
            except Exception:  # noqa: BLE001 -- a class that needs arguments
                continue
        if isinstance(getattr(text, "layer_types", None), list):
            out[model_type] = type(text)
    return out


def variants(default: dict, rng: random.Random, count: int) -> list[dict]:
    """``count`` keyword sets: a layer count, and where the class has them
    (``default``: its ``to_dict()``), pattern fields and a window."""
    out = []
    for i in range(count):
        n = LAYERS[i % len(LAYERS)] if i < len(LAYERS) else rng.choice(LAYERS)
        kw = {"num_hidden_layers": n}
        for name, values in PATTERN_FIELDS.items():
            if name not in default or rng.random() < 0.3:
                continue
            if name == "full_attn_idxs":
                kw[name] = sorted(rng.sample(range(n), rng.randint(0, n)))
            else:
                kw[name] = rng.choice(values)
        for name, values in KEYWORD_FIELDS.items():
            if rng.random() < 0.5:
                kw[name] = rng.choice(values)
        if "sliding_window" in default and rng.random() < 0.5:
            kw["sliding_window"] = rng.choice((None, 16, 64))
        if default.get("model_type") == "kimi_linear" and rng.random() < 0.5:
            # KimiLinearConfig's linear_attn_config (absent from its to_dict()
            # by default): layer lists counted from 1, full and KDA layers
            full = sorted(rng.sample(range(1, n + 1), rng.randint(0, n)))
            kw["linear_attn_config"] = {
                "full_attn_layers": full,
                "kda_layers": [i for i in range(1, n + 1) if i not in full]}
        out.append(kw)
    return out


def build(cls, kw: dict) -> dict:
    """``{"layer_types": [...]}`` as ``cls(**kw)`` fills them in, or
    ``{"error": ...}``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            built = cls(**kw)
        except Exception as error:  # noqa: BLE001 -- the class refuses it
            return {"error": f"{type(error).__name__}: {error}"[:200]}
        out = {"layer_types": list(built.layer_types)}
        try:  # the cache transformers builds for it: its layer classes
            from transformers import DynamicCache

            out["cache_layers"] = [type(layer).__name__
                                   for layer in DynamicCache(config=built).layers]
        except Exception as error:  # noqa: BLE001 -- recorded, not compared
            out["cache_error"] = f"{type(error).__name__}: {error}"[:200]
    return out


def library_config(default: dict, kwargs: dict) -> dict:
    """The config the library reads for a variant: what the class was given
    (the variant's keywords) and its ``model_type``; every other field is
    left out, as a config.json may leave it, for the library to fill in as
    the class does."""
    return {"model_type": default["model_type"], **kwargs}


def run(count: int, seed: int) -> dict:
    import transformers

    types = {}
    for model_type, cls in population().items():
        default = json.loads(json.dumps(cls().to_dict(), default=str))
        rng = random.Random(f"{seed}:{model_type}")
        rows = []
        for kw in variants(default, rng, count):
            rows.append({"kwargs": kw, **build(cls, kw)})
        types[model_type] = {"default": default, "rows": rows}
    return {"transformers": transformers.__version__, "seed": seed,
            "variants_per_type": count,
            "command": "make layer-patterns (python scripts/layer_patterns.py "
                       "--out results/layer-patterns-5.json)", "types": types}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--variants", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = run(args.variants, args.seed)
    rows = [r for t in out["types"].values() for r in t["rows"]]
    print(f"{len(out['types'])} types, {len(rows)} variants, "
          f"{sum('error' in r for r in rows)} refused by their class")
    if args.out:
        args.out.write_text(json.dumps(out, indent=0) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
