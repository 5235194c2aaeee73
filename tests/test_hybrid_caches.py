"""The cache a hybrid model's own code fills, against the library's sizes, over
the config forms of ``scripts/hybrid_caches.py``: Nemotron-H (its block pattern
and legacy field names), Bamba (its Mamba-2 groups and kernel), Falcon-H1 (its
Mamba widths and a ``sliding_window`` it does not use) and RecurrentGemma
(``lru_width`` and a window shorter than the input), in float32 and bfloat16,
after 5 and 12 tokens.

transformers 4.57.6 (installed in CI) runs live; 5.24.0's measurements come
from ``results/hybrid-caches-5.json`` (``make hybrid-caches``). Before these
were sized, the library said 0 bytes of state for every case, let Falcon-H1's
keys slide, let RecurrentGemma's 4.57.6 keys grow with the tokens, and could not
lay out Nemotron-H at all (it has no ``num_hidden_layers`` to read).
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import pytest

from posenc_lib import config_reader, serving

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "hybrid_caches_script", ROOT / "scripts" / "hybrid_caches.py")
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)
STORED = ROOT / "results" / "hybrid-caches-5.json"
BYTES = {"float32": 4, "bfloat16": 2}


def library(case: dict, version: str) -> dict:
    """``{dtype: {length: {"kv", "state"}}}`` as the library sizes the case."""
    config = {"model_type": case["model_type"], **case["config"]}
    out: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, b in BYTES.items():
            out[name] = {}
            for tokens in script.LENGTHS:
                cache = serving.kv_cache_bytes(config, bytes_per_value=b,
                                               length=tokens,
                                               transformers_version=version)
                state = cache["fixed_state"]["bytes"] if cache["fixed_state"] else 0
                out[name][str(tokens)] = {"kv": cache["bytes_at_length"],
                                          "state": state}
    return out


def _measured(case: dict) -> dict:
    return {d: {n: {"kv": r["kv"], "state": r["state"]} for n, r in rows.items()}
            for d, rows in case["measured"].items()}


@pytest.fixture(scope="module")
def stored5():
    assert STORED.exists(), "results/hybrid-caches-5.json missing: make hybrid-caches"
    return json.loads(STORED.read_text())


def test_the_stored_run_is_every_case(stored5):
    assert stored5["transformers"].startswith("5."), stored5["transformers"]
    assert [(c["model_type"], {k: v for k, v in c["config"].items()
                               if k not in script.TINY})
            for c in stored5["cases"]] == [(t, f) for t, f in script.CASES]
    assert not [c for c in stored5["cases"] if "error" in c]


@pytest.mark.parametrize("index", range(len(script.CASES)))
def test_5x_caches_are_the_library_s(stored5, index):
    case = stored5["cases"][index]
    assert library(case, stored5["transformers"]) == _measured(case), case["config"]


@pytest.mark.parametrize("index", [i for i, (t, _) in enumerate(script.CASES)
                                   if t != "nemotron_h"])
def test_4x_caches_are_the_library_s(index):
    """The 4.x cases built live with the installed transformers (4.57.6 has no
    Nemotron-H)."""
    transformers = pytest.importorskip("transformers")
    if not transformers.__version__.startswith("4."):
        pytest.skip("the 4.x side runs under transformers 4.x")
    case = script.measure(*script.CASES[index])
    assert "error" not in case, case.get("error")
    assert library(case, transformers.__version__) == _measured(case), case["config"]


def test_nemotron_h_is_nope_and_its_layers_come_from_the_pattern():
    config = {"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*E",
              "num_hidden_layers": 52, "num_attention_heads": 4, "head_dim": 16,
              "num_key_value_heads": 2, "hidden_size": 64}
    assert config_reader.positional_scheme(config) == "no positional encoding (NoPE)"
    assert config_reader.num_layers(config) == 5  # the pattern's, not 52
    with pytest.raises(ValueError, match="hybrid_override_pattern"):
        config_reader.num_layers({**config, "hybrid_override_pattern": "M-X*"})
