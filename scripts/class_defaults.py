"""Every rotary causal-LM config class's defaults, as the installed
transformers fills them in, for ``tests/test_class_defaults.py``.

For each model type of the stored conformance sweep that rotates
(``results/conformance-<major>.json``), the config class is built with no
arguments and its ``to_dict()`` is stored. The test then leaves out, one at a
time, each field of that dict that fixes the rotary frequencies and checks
that the library reads the shortened config as the class does (the class fills
the field back in with the stored value). transformers 4.x is installed in CI,
so the 4.x side runs live there; this script stores the 5.x side::

    /work/venv5/bin/python scripts/class_defaults.py   # or: make class-defaults

writes ``results/class-defaults-5.json`` (about 10 s), with, over the whole
registry, each class's default ``num_key_value_heads`` (``kv_heads_defaults``).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def population(major: int) -> list[str]:
    """The causal-LM types whose default tiny model rotates (stored sweep)."""
    stored = json.loads((ROOT / "results" / f"conformance-{major}.json").read_text())
    return sorted(t for t, e in stored["types"].items()
                  if e["verdict"] != "not built" and e["observed"]["rope_layers"])


def class_default(model_type: str) -> dict:
    """``{"config": to_dict()}`` of the class built with no arguments, or
    ``{"error": ...}``."""
    from transformers import CONFIG_MAPPING

    sys.path.insert(0, str(ROOT))
    from posenc_lib.tools.tiny_model import DEFAULT_KWARGS

    # a class whose own validator refuses its defaults (Gemma4AssistantConfig):
    # the fewest fields it asks for, none positional (tiny_model.DEFAULT_KWARGS)
    given = DEFAULT_KWARGS.get(model_type, {})
    try:
        config = CONFIG_MAPPING[model_type](**given)
    except Exception as error:  # noqa: BLE001 -- the class refuses its defaults
        return {"error": f"{type(error).__name__}: {error}"[:300]}
    raw = json.loads(json.dumps(config.to_dict(), default=str))
    for key in ("transformers_version", "architectures", "_name_or_path",
                "torch_dtype", "dtype", "_attn_implementation"):
        raw.pop(key, None)
    return {"config": raw, **({"given": given} if given else {})}


def kv_heads_defaults() -> dict[str, int]:
    """Every config class of the installed transformers whose ``__init__``
    gives ``num_key_value_heads`` an integer default: the key heads a config
    that omits the field gets (MLA classes, with ``kv_lora_rank``, left out:
    their cache holds the compressed latent, not key heads)."""
    import inspect

    from transformers import CONFIG_MAPPING

    found = {}
    for model_type in CONFIG_MAPPING.keys():  # noqa: SIM118 -- a lazy mapping
        try:
            cls = CONFIG_MAPPING[model_type]
        except Exception:  # noqa: BLE001 -- dependencies not installed
            continue
        params = inspect.signature(cls.__init__).parameters
        param = params.get("num_key_value_heads")
        if param is not None and isinstance(param.default, int) and \
                "kv_lora_rank" not in params:  # MLA: the cache holds the latent
            found[model_type] = param.default
    return dict(sorted(found.items()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="default: results/class-defaults-<major>.json")
    args = parser.parse_args(argv)
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    major = int(transformers.__version__.split(".")[0])
    out = args.out or ROOT / "results" / f"class-defaults-{major}.json"
    types = population(major)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        entries = {t: class_default(t) for t in types}
    # the classes whose state the library sizes but that do not rotate
    # (Nemotron-H): their defaults too, for tests/test_kv_cache.py
    sys.path.insert(0, str(ROOT))
    from posenc_lib import serving
    from transformers import CONFIG_MAPPING

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (a composite's text class where it has one: Inkling's sizes are there)
        names = [next((n for n in (f"{t}_text", t) if n in CONFIG_MAPPING), None)
                 for t in sorted(serving.STATE_DEFAULTS)]
        state = {n: class_default(n) for n in names
                 if n is not None and n not in entries}
    result = {"transformers": transformers.__version__,
              "command": f"python scripts/class_defaults.py (transformers "
                         f"{transformers.__version__})",
              "types": entries, "state_types": state,
              "kv_heads_defaults": kv_heads_defaults()}
    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"{len(types)} types, {sum('error' in e for e in entries.values())} "
          f"refused by their own class -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
