"""Compare the library's reading of transformers 5.x per-layer-type
``rope_parameters`` with what transformers 5.24.0 itself computes.

transformers 5.x cannot share the project's environment (it pins 4.57.6), so
this runs outside ``make test``, with a second interpreter that has
transformers 5.24.0 installed (torch is not needed: only config classes run)::

    make conformance   # creates .cache/transformers5-venv (or set PY5)
    PYTHONPATH=. .venv/bin/python scripts/check_v5.py --python5 .cache/transformers5-venv/bin/python

``make designs-v5`` runs it with ``--out results/config_v5.json``, and
tests/test_conventions.py runs it with ``--stored results/config_v5.json``: the
library against what 5.x computed, where no 5.x is installed.

For each case it builds the config with 5.24's own class
(``Gemma3TextConfig`` / ``Olmo3Config``), reads its ``rope_parameters`` and
``layer_types``, and checks that (1) the library completes the nested
dictionary to the same entries, and (2) every layer's
``rope_from_config(config, layer=i)`` equals the frequencies of the 5.x entry
for that layer's type. Exit status 0 when every case agrees.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import warnings
from pathlib import Path

import torch

from posenc_lib import scaling
from posenc_lib import config_reader

GEMMA = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 2,
         "num_key_value_heads": 1, "head_dim": 32, "num_hidden_layers": 12,
         "max_position_embeddings": 8192, "sliding_window": 16}
OLMO = {"model_type": "olmo3", "hidden_size": 64, "num_attention_heads": 2,
        "num_key_value_heads": 1, "num_hidden_layers": 8,
        "max_position_embeddings": 8192, "sliding_window": 16}
FULL = {"rope_type": "default", "rope_theta": 1e6}
CASES = {
    "gemma3: sliding entry missing": {**GEMMA, "rope_parameters": {
        "full_attention": FULL}},
    "gemma3: sliding entry missing, rope_local_base_freq given": {
        **GEMMA, "rope_local_base_freq": 20000.0,
        "rope_parameters": {"full_attention": FULL}},
    "gemma3: sliding entry without rope_theta, rope_local_base_freq given": {
        **GEMMA, "rope_theta": 1e6, "rope_local_base_freq": 10000.0,
        "rope_parameters": {"full_attention": FULL,
                            "sliding_attention": {"rope_type": "default"}}},
    "gemma3: legacy rope_scaling beside nested": {
        **GEMMA, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
        "rope_parameters": {"full_attention": FULL,
                            "sliding_attention": {"rope_type": "default",
                                                  "rope_theta": 10000.0}}},
    "gemma3: differing top-level rope_theta": {
        **GEMMA, "rope_theta": 500000.0,
        "rope_parameters": {"full_attention": FULL,
                            "sliding_attention": {"rope_type": "default",
                                                  "rope_theta": 10000.0}}},
    "gemma3: full entry without rope_theta, top-level given": {
        **GEMMA, "rope_theta": 500000.0,
        "rope_parameters": {"full_attention": {"rope_type": "default"},
                            "sliding_attention": {"rope_type": "default",
                                                  "rope_theta": 10000.0}}},
    "olmo3: sliding entry missing": {**OLMO, "rope_theta": 10000.0,
                                     "rope_parameters": {"full_attention": {
                                         "rope_type": "yarn", "factor": 8.0,
                                         "rope_theta": 500000.0,
                                         "original_max_position_embeddings": 1024}}},
}

V5_CODE = r"""
import json, sys
from transformers import AutoConfig
cases = json.loads(sys.stdin.read())
out = {}
for name, config in cases.items():
    fields = dict(config)
    built = AutoConfig.for_model(fields.pop("model_type"), **fields)
    out[name] = {"rope_parameters": built.rope_parameters,
                 "layer_types": list(built.layer_types)}
import transformers
print(json.dumps({"version": transformers.__version__, "cases": out}))
"""


def reference(python5: str) -> dict:
    done = subprocess.run([python5, "-c", V5_CODE], input=json.dumps(CASES),
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def flat(config: dict, entry: dict) -> dict:
    """A one-RoPE config holding the 5.x entry, read by the 5.x flat path."""
    keep = ("hidden_size", "num_attention_heads", "head_dim",
            "max_position_embeddings")
    return {"model_type": "llama", **{k: config[k] for k in keep if k in config},
            "rope_parameters": dict(entry)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python5", default=".cache/transformers5-venv/bin/python",
                        help="an interpreter with transformers 5.x installed")
    parser.add_argument("--out", type=Path,
                        help="also store what 5.x computed (results/config_v5.json)")
    parser.add_argument("--stored", type=Path,
                        help="compare with a stored 5.x output instead of running 5.x "
                             "(how tests/test_conventions.py runs it, without 5.x)")
    args = parser.parse_args(argv)
    if args.stored is not None:
        ref = json.loads(args.stored.read_text())
    else:
        ref = reference(args.python5)
    if args.out is not None:
        args.out.write_text(json.dumps(ref, indent=1, sort_keys=True) + "\n")
    print(f"transformers {ref['version']}")
    failures = 0
    for name, config in CASES.items():
        theirs = ref["cases"][name]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            text, _ = config_reader._text_config(config)
        said = [str(w.message) for w in caught
                if issubclass(w.category, config_reader.V5LayoutWarning)]
        ours = text["rope_parameters"]
        problems = []
        for kind, entry in ours.items():
            for key, value in entry.items():
                if theirs["rope_parameters"][kind].get(key) != value:
                    problems.append(f"{kind}.{key}: ours {value!r}, 5.x "
                                    f"{theirs['rope_parameters'][kind].get(key)!r}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i, kind in enumerate(theirs["layer_types"]):
                got = scaling.rope_from_config(config, layer=i, dtype=torch.float64)
                want = scaling.rope_from_config(
                    flat(config, theirs["rope_parameters"][kind]), dtype=torch.float64)
                if not (torch.equal(got[0], want[0]) and got[1] == want[1]):
                    problems.append(f"layer {i} ({kind}) frequencies differ")
        if not said:
            problems.append("no V5LayoutWarning")
        failures += bool(problems)
        print(f"{'ok  ' if not problems else 'FAIL'} {name}")
        print(f"     5.x: {json.dumps(theirs['rope_parameters'])}")
        for line in problems + [f"warns: {m}" for m in said]:
            print(f"     {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
