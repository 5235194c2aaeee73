"""A config that leaves out a field its class fills in reads as the class
reads it, for every rotary causal-LM type transformers registers.

The population is every type of the stored conformance sweep whose default
tiny model rotates (``results/conformance-<major>.json``). For each, the
config class is built with no arguments; each field that fixes the global
rotary frequencies (:data:`helpers.class_defaults.FIELDS`) is left out in
turn, and the library's frequencies and attention factor for the shorter
config must equal those for the whole one (the class puts the field back
with that value). transformers 4.57.6 runs live; 5.24.0's classes come from
``results/class-defaults-5.json`` (``make class-defaults``).

Before ``posenc_lib._defaults.MODEL_DEFAULTS`` was filled from the registry,
27 of 72 4.57.6 types and 69 of 115 5.24.0 types failed here (Nemotron's and
RecurrentGemma's half-width rotary read as full width, VaultGemma's and
gpt-oss's head_dim from hidden_size, Apertus's and gpt-oss's scaled default
RoPE read unscaled, and a missing rope_theta refused for most of the rest).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from helpers import class_defaults
from transformers import CONFIG_MAPPING

from posenc_lib import _defaults, _validate_config, config_reader

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "class_defaults_script", ROOT / "scripts" / "class_defaults.py")
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)

_ODD = "the class's own defaults give an odd rotary dim (int(42 * 0.5) = 21): refused"
_PER_TYPE = ("the class's default rope_parameters holds one block per layer type: "
             "without it the library refuses (no rope_theta to fall back on)")
#: What still differs, and why. Anything else that differs fails the test, and
#: so does an entry here that no longer differs (update the list).
_UNCLAIMED = ("the conformance sweep finds the library wrong on this type's default "
              "model (results/conformance-N.json, not claimed): no defaults entry")
KNOWN_4 = {"glm4_moe": {"*": _ODD}}
KNOWN_5 = {
    "glm4_moe": {"*": _ODD},
    "beam": {"*": "full_attention's rope_parameters is None by default: refused"},
    # one entry per layer type, none for full_attention: read at layer 0
    "zaya": {"rope_parameters": _PER_TYPE},
    "cohere_compass_text": {"*": "the class's default rope_parameters is empty (each "
                            "layer type needs an entry; its default model does not "
                            "build): refused"},
    "laguna": {"rope_parameters": _PER_TYPE, "head_dim": _PER_TYPE},
    "lfm3": {"rope_parameters": _PER_TYPE},
    "mellum": {"rope_parameters": _PER_TYPE, "head_dim": _PER_TYPE},
    "mimo_v2_flash": {"head_dim": "the class's own defaults give an odd rotary dim "
                      "(int(64 * 0.334) = 21): refused"},
    "modernbert-decoder": {"rope_parameters": _PER_TYPE},
}


def _differences(configs: dict[str, dict], known: dict,
                 version: str | None = None) -> list:
    found = {t: class_defaults.problems(c, version) for t, c in configs.items()}
    wrong = [(t, f, why) for t, p in found.items() for f, why in p.items()
             if f not in known.get(t, {})]
    fixed = [(t, f) for t, fields in known.items() for f in fields
             if t in found and f not in found[t]]
    return wrong + [(t, f, "no longer differs: remove it from the known list")
                    for t, f in fixed]


def test_every_4x_rotary_class_reads_its_own_defaults():
    types = script.population(4)
    assert len(types) >= 70, len(types)
    configs = {t: CONFIG_MAPPING[t]().to_dict() for t in types}
    problems = _differences(configs, KNOWN_4)
    assert not problems, problems


@pytest.fixture(scope="module")
def stored5():
    path = ROOT / "results" / "class-defaults-5.json"
    assert path.exists(), "results/class-defaults-5.json missing: make class-defaults"
    return json.loads(path.read_text())


def test_the_stored_5x_classes_cover_the_5x_population(stored5):
    assert stored5["transformers"].startswith("5."), stored5["transformers"]
    assert sorted(stored5["types"]) == script.population(5)
    assert not [t for t, e in stored5["types"].items() if "error" in e]


def test_every_5x_rotary_class_reads_its_own_defaults(stored5):
    configs = {t: e["config"] for t, e in stored5["types"].items()}
    problems = _differences(configs, KNOWN_5, stored5["transformers"])
    assert not problems, problems


def _theta(config: dict) -> float | None:
    """The full layers' base a class fills in, in either release's layout."""
    block = config.get("rope_parameters") or {}
    if config_reader.is_per_layer_type(block):
        block = block.get("full_attention") or {}
    return block.get("rope_theta", config.get("rope_theta"))


def test_the_changed_defaults_are_those_the_two_releases_classes_fill_in(stored5):
    """``MODEL_DEFAULTS_5_CHANGED`` is rebuilt from the classes: every rotary
    type both releases register, whose 5.24.0 class fills in another base than
    its 4.57.6 class (and no other)."""
    both = sorted(set(script.population(4)) & set(stored5["types"]))
    assert len(both) >= 60, len(both)
    changed = {}
    for t in both:
        four = _theta(CONFIG_MAPPING[t]().to_dict())
        five = _theta(stored5["types"][t]["config"])
        if four is not None and five is not None and float(four) != float(five):
            changed[t] = {"rope_theta": float(five)}
    assert changed == _defaults.MODEL_DEFAULTS_5_CHANGED


@pytest.mark.parametrize("model_type", sorted(_defaults.MODEL_DEFAULTS_5_CHANGED))
def test_a_changed_default_read_as_the_other_release_is_caught(stored5, model_type):
    """Planted: the 5.x classes read with 4.57.6's defaults (the library's
    reading before it took the release into account)."""
    config = stored5["types"][model_type]["config"]
    assert class_defaults.problems(config, stored5["transformers"]) == {}
    assert "rope_parameters" in class_defaults.problems(config, "4.57.6")


@pytest.mark.parametrize("model_type, field", [
    ("nemotron", "partial_rotary_factor"), ("vaultgemma", "head_dim"),
    ("apertus", "rope_scaling"), ("arcee", "rope_theta")])
def test_a_dropped_table_entry_is_caught(monkeypatch, model_type, field):
    """Planted: one class default removed from the table."""
    table = config_reader.MODEL_DEFAULTS
    monkeypatch.setitem(table, model_type,
                        {k: v for k, v in table[model_type].items() if k != field})
    assert field in class_defaults.problems(CONFIG_MAPPING[model_type]().to_dict())


def test_omitted_key_heads_read_as_each_class_fills_them_in(stored5):
    """The cache's key heads when a config leaves out ``num_key_value_heads``:
    every rotary class of both versions (before the 5.x-only classes were put
    in ``KV_HEADS_DEFAULTS``, 23 of 115 5.24.0 types read the query heads)."""
    configs = {("4", t): CONFIG_MAPPING[t]().to_dict() for t in script.population(4)}
    configs.update({("5", t): e["config"] for t, e in stored5["types"].items()})
    wrong = {k: p for k, c in configs.items() if (p := class_defaults.kv_problem(c))}
    assert not wrong, wrong


def test_every_5x_class_default_key_head_count_is_in_the_table(stored5):
    """The whole 5.24.0 registry (not only the rotary types): every class
    whose ``__init__`` gives ``num_key_value_heads`` an integer default is in
    the table with it (4.57.6: tests/test_bad_input.py, live)."""
    found = stored5["kv_heads_defaults"]
    assert len(found) > 100, f"only {len(found)} classes: the probe is broken"
    table = _validate_config.KV_HEADS_DEFAULTS
    assert {k: v for k, v in found.items() if table.get(k) != v} == {}
