"""The inspector says when the stored conformance sweep found the library wrong
on a model type: ``posenc_lib/data/known_disagreements.json`` is what
``results/conformance-*.json`` say, and a report on such a type carries it."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

from posenc_lib.tools import inspector

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "known_disagreements_script", ROOT / "scripts" / "known_disagreements.py")
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)


def test_the_packaged_list_is_the_stored_sweeps():
    packaged = json.loads(script.OUT.read_text())
    assert packaged == script.derive(), (
        "posenc_lib/data/known_disagreements.json is stale: python "
        "scripts/known_disagreements.py")
    assert set(packaged["versions"]) == {"4.57.6", "5.24.0"}


def _disagreeing(tmp_path) -> tuple[str, str, dict, dict]:
    """``(release, model_type, its tiny config, the list derived)`` of a type a
    stored sweep finds the library wrong on and whose config the inspector
    reads; where there is none, one is planted: an agreeing type of the 5.x sweep
    stored as disagreeing, with one difference, in a copy of the results that
    ``scripts/known_disagreements.py`` derives its list from. (The types that
    disagree now, Dory and Dots 3 Note, have configs the inspector refuses.)"""
    for major in (4, 5):
        stored = json.loads((ROOT / "results" / f"conformance-{major}.json").read_text())
        for entry in stored["types"].values():
            if entry["verdict"] != "disagree":
                continue
            try:  # a config the inspector reads (Dory's and Dots 3 Note's: not)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    inspector.inspect_config(entry["config"])
            except Exception:  # noqa: BLE001 -- a config the inspector refuses
                continue
            return (stored["transformers"], entry["model_type"], entry["config"],
                    script.derive())
    results = tmp_path / "results"
    results.mkdir()
    for major in (4, 5):
        stored = json.loads((ROOT / "results" / f"conformance-{major}.json").read_text())
        if major == 5:
            entry = stored["types"]["llama"]
            assert entry["verdict"] == "agree"
            entry["verdict"] = "disagree"
            entry["differences"] = [{"what": "KV bytes/token", "transformers": 1,
                                     "library": 2, "reason": "a planted difference"}]
        (results / f"conformance-{major}.json").write_text(json.dumps(stored))
    root, script.ROOT = script.ROOT, tmp_path
    try:
        derived = script.derive()
    finally:
        script.ROOT = root
    return stored["transformers"], "llama", entry["config"], derived


def test_a_report_on_a_disagreeing_type_says_it_is_not_verified(tmp_path, monkeypatch):
    release, model_type, config, derived = _disagreeing(tmp_path)
    monkeypatch.setattr(inspector, "_known_table", lambda: derived["versions"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = inspector.inspect_config(config)
        clean = inspector.inspect_config({
            "model_type": "mistral", "hidden_size": 256, "num_attention_heads": 4,
            "num_key_value_heads": 2, "num_hidden_layers": 2, "rope_theta": 1e4,
            "max_position_embeddings": 4096})
    assert release in report["known_disagreements"], (model_type, release)
    text = inspector.format_report(report)
    assert f"not verified       transformers {release} runs this model type" in text
    assert clean["known_disagreements"] == {}
    assert "not verified" not in inspector.format_report(clean)


def test_a_report_on_a_type_the_sweep_could_not_build_says_so():
    """BLT's tiny model is not built in 4.57.6 (results/conformance-4.json;
    the sweep does not shrink its four sub-configs): the report is not
    verified, and says why."""
    stored = json.loads((ROOT / "results" / "conformance-4.json").read_text())
    assert stored["types"]["blt"]["verdict"] == "not built", (
        "blt now builds: pick another type the 4.x sweep could not build")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = inspector.inspect_config({
            "model_type": "blt", "hidden_size": 256, "num_attention_heads": 4,
            "num_key_value_heads": 2, "num_hidden_layers": 2, "rope_theta": 1e4,
            "max_position_embeddings": 4096})
    text = inspector.format_report(report)
    assert "not verified       transformers 4.57.6 was not run on this model type" in text
    assert "could not build its tiny model" in text
