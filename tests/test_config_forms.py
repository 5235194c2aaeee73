"""Config forms (scripts/config_forms.py): the inspector on configs written the
way released ``config.json`` files are, against transformers' own tiny models.

- a derandomized hypothesis slice: configs drawn by the script's strategy for
  a few model types, each built and run by the installed transformers and
  judged (the sweep's comparison on the raw dict, and ``inspect_config``); a
  config transformers accepts must get the model's frequencies, rotating
  layers, softmax scale and cache bytes, or a clear refusal;
- the stored runs (``results/config_forms-*.json``) re-judged by the current
  library where no transformers is needed (the comparison on the stored
  observation): a fix or a regression changes a stored verdict, and the file
  must be regenerated (``make config-forms``).
"""

from __future__ import annotations

import gzip
import json
import sys
import warnings
from pathlib import Path

import pytest

from posenc_lib import config_reader, scaling
from posenc_lib.tools import conformance

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "results").glob("config_forms-*.json*"))


def _load(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def forms():
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import config_forms
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return config_forms


#: Fast types that read the forms differently: Llama (generic rope init,
#: reads partial_rotary_factor through getattr), Qwen2 (use_sliding_window,
#: max_window_layers, a class default for num_key_value_heads), GPT-NeoX
#: (rotary_pct, rotary_emb_base), GPT-J (rotary_dim, n_positions, a sine
#: table), Cohere (interleaved cos/sin), Falcon (num_kv_heads, self_attention).
SLICE_TYPES = ["llama", "qwen2", "gpt_neox", "gptj", "cohere", "falcon"]
#: Forms the first sweep found misread, each drawn once on purpose.
FOUND = [("llama", {"kind": "partial", "partial key": "rotary_pct", "fraction": 0.5}),
         ("qwen2", {"kind": "kv_heads", "kv heads": "null"}),
         ("gpt_neox", {"kind": "kv_heads", "kv heads": "one"}),
         ("llama", {"kind": "window", "window": "small"}),
         ("gptj", {"kind": "as-is"}),
         ("qwen2", {"kind": "extra", "extra key": "rotary_emb_base"})]


def _judged(forms, model_type, draw):
    entry = forms.one(model_type, draw, crosscheck_too=False)
    if entry is None or not entry["accepted"]:
        return None  # a kind that does not apply, or transformers rejects it
    assert entry["disagree"] in ([], ["refused"]), (
        f"{model_type} {entry['kind']} {entry['draws']}: "
        f"{json.dumps(entry['judged'], default=str)[:800]}")
    return entry


@pytest.mark.parametrize("model_type,choices", FOUND,
                         ids=[f"{t}-{'-'.join(map(str, c.values()))}" for t, c in FOUND])
def test_found_forms(forms, model_type, choices):
    assert _judged(forms, model_type, forms.Draw.scripted(choices)) is not None


def test_generated_forms_slice(forms):
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    seen = []

    @settings(max_examples=12, derandomize=True, database=None, deadline=None,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(SLICE_TYPES), st.data())
    def check(model_type, data):
        entry = _judged(forms, model_type, forms.Draw.hypothesis(data))
        if entry is not None:
            seen.append(entry["kind"])

    check()
    assert len(seen) >= 6, seen  # most draws are configs transformers runs


def test_results_exist():
    assert RESULTS, "results/config_forms-*.json missing: run make config-forms"


@pytest.mark.parametrize("path", RESULTS, ids=[p.name for p in RESULTS])
def test_stored_comparisons_are_the_current_library_s(path):
    """Each stored observation, compared again with the current library on
    the stored raw config, gives the stored verdict of that comparison."""
    stored = _load(path)
    assert stored["tallies"]["total"]["accepted"] >= 300
    changed = []
    accepted = [e for e in stored["entries"] if e["accepted"]]
    # every stored disagreement, and every 8th agreement (the time budget)
    for i, entry in enumerate(accepted):
        if not entry["judged"]["compare"] and i % 8:
            continue
        diffs = conformance.compare(entry["observed"], entry["raw"],
                                    transformers_version=stored["transformers"])
        now = conformance.verdict(diffs) == "disagree"
        if now != bool(entry["judged"]["compare"]):
            changed.append((entry["model_type"], entry["kind"], now))
    assert not changed, (f"{len(changed)} stored comparisons changed (regenerate "
                         f"with make config-forms): {changed[:10]}")


def test_text_class_defaults_reach_every_layer():
    """Qwen3.5's text classes fill in ``partial_rotary_factor`` 0.25 when the
    file has none (a ``rotary_dim`` or ``rotary_pct`` they do not read, say):
    the library's rotating layer has the width 5.24.0's tiny model gave its
    ``cos`` (the layer reading once missed the default, under the type name
    without ``_text``, and rotated the whole head)."""
    path = next((p for p in RESULTS if p.name == "config_forms-5.json"), None)
    if path is None:
        pytest.skip("results/config_forms-5.json missing")
    entries = [e for e in _load(path)["entries"] if e["accepted"]
               and e["model_type"].startswith("qwen3_5")
               and e["kind"] in ("partial:rotary_dim", "partial:rotary_pct")]
    assert len(entries) >= 3, [e["kind"] for e in entries]
    for entry in entries:
        layers, row = next(iter(entry["observed"]["cos_sin"].items()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            inv_freq, _ = scaling.rope_from_config(
                entry["raw"], layer=int(layers.split(",")[0]),
                transformers_version=_load(path)["transformers"])
        assert 2 * inv_freq.numel() == len(row["cos"]), (
            entry["model_type"], entry["kind"])


def test_a_one_block_rope_parameters_of_a_per_type_class_is_ignored():
    """Gemma 3, Gemma 3n and OLMo 3 (5.x) build one rotary module per layer
    type: a one-block ``rope_parameters`` gets the two entries added beside
    it, with the class's bases, and the model reads only those. Every stored
    5.24.0 form of these types with such a block is read as its tiny model
    ran it."""
    from posenc_lib import config_reader

    path = next((p for p in RESULTS if p.name == "config_forms-5.json"), None)
    if path is None:
        pytest.skip("results/config_forms-5.json missing")
    stored = _load(path)
    found = []
    for entry in stored["entries"]:
        text = entry["raw"].get("text_config") or entry["raw"]
        if not entry["accepted"] or entry["model_type"].removesuffix("_text") \
                not in config_reader.V5_NESTED_DEFAULTS \
                or not config_reader._is_flat_block(text.get("rope_parameters")):
            continue
        diffs = conformance.compare(entry["observed"], entry["raw"],
                                    transformers_version=stored["transformers"])
        found.append((entry["model_type"], entry["kind"],
                      conformance.verdict(diffs)))
    assert len(found) >= 4, found
    assert all(v != "disagree" for *_, v in found), found


def test_olmo3_sliding_layers_of_a_4x_layout_file_read_per_release():
    """OLMo 3 with a top-level ``rope_theta`` and no ``rope_parameters``: 5.24.0's
    ``Olmo3Config`` gives the full layers that base and the sliding layers its
    default 500,000, and every stored 5.24.0 form of that layout is read so;
    read as 4.57.6 reads it (the top-level base on every layer, what the library
    once did under both releases), a form whose base is not 500,000 disagrees."""
    path = next((p for p in RESULTS if p.name == "config_forms-5.json"), None)
    if path is None:
        pytest.skip("results/config_forms-5.json missing")
    stored = _load(path)
    entries = [e for e in stored["entries"] if e["accepted"]
               and e["model_type"] == "olmo3"
               and e["raw"].get("rope_parameters") is None]
    assert entries, "no OLMo 3 form of the 4.x layout in the stored run"
    for entry in entries:
        five = conformance.compare(entry["observed"], entry["raw"],
                                   transformers_version=stored["transformers"])
        assert conformance.verdict(five) != "disagree", (entry["kind"], five)
        four = conformance.compare(entry["observed"], entry["raw"],
                                   transformers_version="4.57.6")
        if entry["raw"].get("rope_theta", 500_000.0) != 500_000.0:
            assert conformance.verdict(four) == "disagree", entry["kind"]


def test_an_alias_beside_its_target_wins_as_the_class_sets_it():
    """JetMoE's ``head_dim`` beside ``kv_channels`` (its ``attribute_map``), and
    5.x GLM-4-MoE-Lite's beside ``qk_rope_head_dim``: the class sets the keyword
    after its own field, and the tiny models of both releases rotate and cache
    ``head_dim`` features. Every stored form with the two given apart agrees
    with the library (which once refused them as ambiguous)."""
    found = []
    for path in RESULTS:
        stored = _load(path)
        for entry in stored["entries"]:
            raw = entry["raw"]
            target = {"jetmoe": "kv_channels",
                      "glm4_moe_lite": "qk_rope_head_dim"}.get(entry["model_type"])
            if not entry["accepted"] or target is None or raw.get("head_dim") is None \
                    or raw.get(target) in (None, raw["head_dim"]):
                continue
            diffs = conformance.compare(entry["observed"], raw,
                                        transformers_version=stored["transformers"])
            found.append((entry["model_type"], stored["transformers"],
                          conformance.verdict(diffs)))
    assert len(found) >= 3, found
    assert all(v != "disagree" for *_, v in found), found



def test_a_type_only_5x_registers_is_read_as_5x_reads_it(monkeypatch):
    """Fields that 4.57.6 and 5.24.0 resolve differently are refused for a
    type both register; for one that only 5.24.0 registers (Qwen3.5, Gemma 4,
    MiMo-V2-Flash, CWM, ...) there is one reading, 5.x's: the rope block's
    value over a top-level one (``setdefault``), a top-level original length
    first. The forms are the stored 5.24.0 ones of such types that the library
    refuses as ambiguous when told both releases register the type; each must
    agree with its 5.24.0 model."""
    from posenc_lib import config_reader

    stored = _load(ROOT / "results" / "config_forms-5.json")
    only_five = [e for e in stored["entries"] if e["accepted"]
                 and config_reader._only_release(e["model_type"]) == 5]

    def compared(entry):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return conformance.compare(entry["observed"], entry["raw"],
                                       transformers_version="5.24.0")

    def between_releases(diffs):  # the refusals that name the two readings
        return any(d["library"] == "raises" and "ambiguous" in d["reason"] and (
            "4.57" in d["reason"] or "disagree on the" in d["reason"]) for d in diffs)

    with monkeypatch.context() as patch:  # as if 4.57.6 registered them too
        patch.setattr(config_reader, "_only_release", lambda model_type: None)
        refused = [e for e in only_five if between_releases(compared(e))]
    found = [(e["model_type"], e["kind"], conformance.verdict(compared(e)))
             for e in refused]
    assert len(found) >= 10, found
    assert all(v != "disagree" for *_, v in found), found


def test_a_key_beside_per_type_rope_blocks_is_ignored():
    """transformers 5.x reads a per-layer-type ``rope_parameters`` only under
    the config's layer types: a ``partial_rotary_factor`` beside the blocks is
    ignored (Gemma 4, Beam, ZAYA), and so is it by the library, with a
    warning that names it. Every stored 5.x form with such a key, each
    compared with its tiny model (the library once refused them all)."""
    path = next((p for p in RESULTS if p.name == "config_forms-5.json"), None)
    if path is None:
        pytest.skip("results/config_forms-5.json missing")
    stored = _load(path)

    def stray(raw):
        block = raw.get("rope_parameters")
        return isinstance(block, dict) and any(isinstance(v, dict) for v in
                                               block.values()) and any(
            v is not None and not isinstance(v, dict) for v in block.values())

    entries = [e for e in stored["entries"] if e["accepted"] and stray(e["raw"])]
    assert len(entries) >= 3, len(entries)
    for entry in entries:
        with pytest.warns(config_reader.IgnoredKeyWarning, match="ignored beside"):
            diffs = conformance.compare(entry["observed"], entry["raw"],
                                        transformers_version=stored["transformers"])
        assert not diffs, (entry["model_type"], entry["kind"], diffs)
