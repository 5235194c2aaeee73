"""The conformance sweep's stored results against the current library.

``make conformance`` (scripts/conformance.py) builds a tiny model of every
causal-LM type transformers registers and stores what each did in
``results/conformance*.json``. Here, fast: the stored observations are judged
again by the current library (a fix or a regression changes a verdict, and the
stored file must be regenerated), the file covers every registered type, and a
few types are built live to show the stored observations are still what
transformers does.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from posenc_lib.tools import conformance

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "results").glob("conformance*.json"))


def _load(path):
    return json.loads(path.read_text())


@pytest.fixture(scope="module", params=RESULTS, ids=[p.name for p in RESULTS])
def stored(request):
    return _load(request.param)


def test_results_exist():
    assert RESULTS, "results/conformance*.json missing: run make conformance"


def test_every_registered_type_listed_with_a_verdict(stored):
    types = stored["types"]
    assert len(types) == stored["registered"]
    for name, entry in types.items():
        assert entry["verdict"] in ("agree", "disagree", "partly compared",
                                    "not built"), name
        if entry["verdict"] == "not built":
            assert entry["reason"], name
        if entry["verdict"] in ("disagree", "partly compared"):
            assert all(d["reason"] for d in entry["differences"]), name
    counts = {}
    for entry in types.values():
        counts[entry["verdict"]] = counts.get(entry["verdict"], 0) + 1
    assert counts == stored["counts"]


def test_stored_verdicts_are_the_current_library_s(stored):
    """Each stored observation, judged by the library as it is now, gives the
    stored differences (the file is regenerated whenever a fix changes one)."""
    changed = {}
    for name, entry in stored["types"].items():
        if entry["verdict"] == "not built":
            continue
        diffs = conformance.compare(entry["observed"], entry["config"],
                                    transformers_version=stored["transformers"])
        now = sorted(d["what"] for d in diffs)
        then = sorted(d["what"] for d in entry["differences"])
        if now != then:
            changed[name] = {"stored": then, "now": now}
    assert not changed, f"re-run make conformance: {changed}"


def _agreeing(stored, name):
    entry = stored["types"].get(name)
    if entry is None or entry["verdict"] != "agree":
        pytest.skip(f"{name} does not agree in {stored['transformers']}")
    return entry


@pytest.mark.parametrize("name", ["llama", "gemma3_text", "granitemoehybrid"])
def test_planted_differences_are_caught(stored, name):
    """The comparison can fail: a cos/sin row off by a tiny angle, a scale
    off by 1 %, one layer's RoPE dropped, a byte more per token."""
    entry = _agreeing(stored, name)
    obs = entry["observed"]
    if obs["cos_sin"]:
        bad = copy.deepcopy(obs)
        key = next(iter(bad["cos_sin"]))
        bad["cos_sin"][key]["cos"][1] += 1e-4
        assert any("cos/sin" in d["what"] for d in
                   conformance.compare(bad, entry["config"],
                                       transformers_version=stored["transformers"]))
        bad = copy.deepcopy(obs)
        bad["rope_layers"] = bad["rope_layers"][1:]
        assert any(d["what"] == "layers with RoPE" for d in
                   conformance.compare(bad, entry["config"],
                                       transformers_version=stored["transformers"]))
    bad = copy.deepcopy(obs)
    bad["scales"] = {k: v * 1.01 for k, v in bad["scales"].items()}
    if bad["scales"]:
        assert any(d["what"] == "softmax scale" for d in
                   conformance.compare(bad, entry["config"],
                                       transformers_version=stored["transformers"]))
    bad = copy.deepcopy(obs)
    bad["kv_per_token"] += 4
    assert any(d["what"] == "KV bytes/token" for d in
               conformance.compare(bad, entry["config"],
                                       transformers_version=stored["transformers"]))


def test_live_subset_matches_the_stored_observations():
    """Two types built now with the installed transformers (a plain one and a
    hybrid with a fixed state): what they do is what the stored file says they
    did, so the file describes this version (a few seconds)."""
    transformers = pytest.importorskip("transformers")
    path = ROOT / "results" / f"conformance-{transformers.__version__.split('.')[0]}.json"
    if not path.exists():
        pytest.skip(f"no stored results for transformers {transformers.__version__}")
    data = _load(path)
    if data["transformers"] != transformers.__version__:
        pytest.skip(f"stored for {data['transformers']}")
    from posenc_lib.tools import tiny_model

    for name in ("llama", "qwen3_next"):
        run = tiny_model.run_model(name)
        stored = data["types"][name]["observed"]
        assert run["observed"]["rope_layers"] == stored["rope_layers"], name
        assert run["observed"]["kv_per_token"] == stored["kv_per_token"], name
        assert run["observed"]["fixed_state"] == stored["fixed_state"], name
        assert run["observed"]["scales"] == stored["scales"], name
        assert conformance.compare(run["observed"], run["config"]) == \
            conformance.compare(stored, data["types"][name]["config"],
                                transformers_version=data["transformers"]), name


# The issue-table rows, each against a tiny model of its own config (tens of
# seconds each: `make slow`).
GRANITE_H = {
    "model_type": "granitemoehybrid", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_hidden_layers": 40,
    "layer_types": ["attention" if i in (5, 15, 25, 35) else "mamba"
                    for i in range(40)],
    "position_embedding_type": "nope", "attention_multiplier": 0.0078125,
    "max_position_embeddings": 131072, "mamba_n_heads": 128, "mamba_d_state": 128,
    "mamba_d_head": 64, "mamba_expand": 2, "mamba_n_groups": 1, "mamba_d_conv": 4}
HUNYUAN_7B = {
    "model_type": "hunyuan_v1_dense", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 32,
    "max_position_embeddings": 262144, "rope_theta": 10000.0,
    "rope_scaling": {"type": "dynamic", "factor": 1.0, "alpha": 1000.0}}


@pytest.mark.slow
def test_granite_h_report_and_crosscheck():
    from posenc_lib.tools import crosscheck, inspector

    report = inspector.inspect_config(GRANITE_H)
    cache = report["kv_cache"]
    assert cache["bytes_per_token"] == 16 * 1024
    assert cache["fixed_state"]["layers"] == 36
    assert round(cache["fixed_state"]["bytes"] / 2**20, 1) == 74.3
    assert report["logit_factors"][0]["value"] == 0.0078125
    assert "serving" in inspector.format_report(report)
    result = crosscheck.crosscheck(GRANITE_H)
    assert result["ok"], result["problems"]
    assert result["scales_received"] == [0.0078125]


@pytest.mark.slow
def test_gemma3n_report_and_crosscheck():
    pytest.importorskip("transformers")
    from transformers import Gemma3nConfig

    from posenc_lib.tools import crosscheck, inspector

    config = Gemma3nConfig().to_dict()  # E4B's text sizes: 35 layers, 15 sharing
    report = inspector.inspect_config(config)
    assert report["kv_cache"]["bytes_per_token"] == 40 * 1024
    assert report["kv_cache"]["kv_layers"] == 20
    assert inspector.softmax_scale(config) == 1.0
    local = {e["rope"]["base"] for e in report["layers"]
             if e["attention"] == "sliding_attention"}
    assert local == {10_000.0}
    result = crosscheck.crosscheck(config)
    assert result["ok"], result["problems"]
    assert result["scales_received"] == [1.0]


@pytest.mark.slow
def test_hunyuan_alpha_base_and_the_4_57_cliff():
    transformers = pytest.importorskip("transformers")
    from posenc_lib.tools import crosscheck, inspector

    report = inspector.inspect_config(HUNYUAN_7B)
    assert round(report["effective_base"], -3) == 11_159_000
    assert report["full_turn_pairs"] == 42
    assert report["frequencies"]["length_dependent"]
    result = crosscheck.crosscheck(HUNYUAN_7B)  # positions past L included
    assert result["beyond"] == 2 * 262144 - 1
    if transformers.__version__.startswith("4."):
        assert result["ok"], result["problems"]


@pytest.mark.slow
def test_minimax_m2_rotary_dim_under_5x():
    from posenc_lib.tools import crosscheck, inspector

    config = {"model_type": "minimax_m2", "hidden_size": 3072,
              "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
              "rotary_dim": 64, "num_hidden_layers": 62,
              "max_position_embeddings": 196608, "rope_theta": 5000000,
              "num_local_experts": 256, "num_experts_per_tok": 8,
              "use_mtp": True, "num_mtp_modules": 3}
    report = inspector.inspect_config(config)
    assert (report["rotary_dim"], report["pairs"]) == (64, 32)
    assert any("multi-token-prediction" in n for n in report["engine_needs"])
    from helpers.paths import PYTHON5 as python

    if not python.exists():
        pytest.skip("no transformers 5.x interpreter (make conformance makes one)")
    result = crosscheck.crosscheck(config, python=str(python))
    assert result["transformers"].startswith("5.")
    assert result["ok"], result["problems"]


def test_each_file_is_judged_for_its_own_transformers():
    """The library answers per transformers version: the 5.24.0 observations
    of DeepSeek-V3 (latent cache) and LFM2 (no state on attention layers)
    agree when judged as 5.24.0 and disagree when judged as 4.57.6, so the
    version is what the comparison turns on (a planted swap of versions)."""
    data = {d["transformers"].split(".")[0]: d for d in conformance.load_results()}
    if "5" not in data:
        pytest.skip("no stored 5.x sweep")
    for name, what in (("deepseek_v3", "KV bytes/token"), ("lfm2", "fixed state")):
        entry = data["5"]["types"][name]
        assert conformance.compare(entry["observed"], entry["config"],
                                   transformers_version="5.24.0") == []
        wrong = conformance.compare(entry["observed"], entry["config"],
                                    transformers_version="4.57.6")
        assert [d["what"] for d in wrong] == [what], (name, wrong)


def test_no_type_the_library_claims_disagrees(stored):
    """What make conformance fails on: every remaining disagreement is a type
    the library names in none of its tables (the stored ``claimed``), each
    difference with its reason."""
    claimed = sorted(name for name, e in stored["types"].items()
                     if e["verdict"] == "disagree" and e.get("claimed"))
    assert not claimed, f"{stored['transformers']}: {claimed}"
    for name, e in stored["types"].items():
        if e["verdict"] == "disagree":
            assert conformance.claimed(e["text_model_type"]) is False, name


def test_a_flipped_pair_layout_is_caught(stored):
    """The pair layout is compared: llama's observation with its pairs
    reported as neighbours disagrees with the library."""
    entry = _agreeing(stored, "llama")
    if entry["observed"].get("pair_layout") is None:
        pytest.skip("this sweep predates the pair-layout probe")
    bad = copy.deepcopy(entry["observed"])
    bad["pair_layout"] = "interleaved"
    assert any(d["what"] == "pair layout" for d in
               conformance.compare(bad, entry["config"],
                                   transformers_version=stored["transformers"]))


def _rotate(x, cos, sin, layout):
    half = x.shape[-1] // 2
    if layout == "half":
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)


@pytest.mark.parametrize("kind, expected", [
    ("half", "half"), ("interleaved", "interleaved"),
    # DeepSeek-V3's apply_rotary_pos_emb_interleave: neighbours, written out as halves
    ("permuted", "interleaved"),
    # a bug that mixes three features: neither layout
    ("three", "other")])
def test_pair_layout_probe_reads_the_function_not_its_name(kind, expected):
    """tiny_model.pair_layout on functions written for each case; cos/sin hold
    angles 0 (position 0, nothing moves) and 0.3·(i+1) (position 1)."""
    import inspect as std_inspect

    from posenc_lib.tools import tiny_model

    angle = torch.stack([torch.zeros(4), 0.3 * torch.arange(1, 5)])  # (seq 2, 4 pairs)
    cos, sin = angle.cos(), angle.sin()

    def apply(q, k, cos, sin):
        def one(x):
            if kind == "permuted":
                return _rotate(torch.cat([x[..., 0::2], x[..., 1::2]], -1), cos, sin,
                               "half")
            if kind == "three":
                y = _rotate(x, cos, sin, "half")
                return y + 0.5 * x.roll(1, -1) * (sin != 0).any(-1, keepdim=True)
            return _rotate(x, cos, sin, kind)
        return one(q), one(k)

    q = torch.randn(1, 2, 2, 8)
    k = torch.randn(1, 1, 2, 8)
    sig = std_inspect.signature(apply)
    assert tiny_model.pair_layout(apply, sig, (q, k, cos, sin), {}) == expected


@pytest.mark.parametrize("all_full", [True, False], ids=["all full", "class pattern"])
def test_a_rotary_module_no_layer_uses_is_not_judged_past_L(all_full):
    """transformers 4.57.6's Gemma 3 text model builds its local rotary module
    (base 10,000) whatever ``layer_types`` says; with every layer full no layer
    receives its rows, and its rows past L match none of the library's layers
    (a disagreement the model never shows). ``tiny_model`` marks such a module
    unused, from the rows the layers received; the modules the layers use are
    still judged past L (a planted row off by 0.01 at its slowest pair, whose
    angle past L is small enough to be compared that closely, is caught)."""
    transformers = pytest.importorskip("transformers")
    if not transformers.__version__.startswith("4."):
        pytest.skip("5.x's Gemma 3 keeps one rotary module for both layer types")
    from posenc_lib.tools import tiny_model

    cls, kw = tiny_model.shrunk("gemma3_text")
    n = kw["num_hidden_layers"]
    if all_full:
        kw = {**kw, "layer_types": ["full_attention"] * n}
    built, model = tiny_model.build(cls, kw)
    found = tiny_model.observe(model, built, built.model_type)
    observed, raw = found["observed"], found["config"]
    unused = {r["module"] for r in observed["beyond"]["rows"] if r.get("unused")}
    assert unused == ({"model.rotary_emb_local"} if all_full else set())
    diffs = conformance.compare(observed, raw, transformers_version="4.57.6")
    assert conformance.verdict(diffs) == "agree", diffs
    bad = copy.deepcopy(observed)
    used = next(r for r in bad["beyond"]["rows"] if not r.get("unused"))
    used["cos"][-1] += 0.01
    assert any(d["what"].endswith("past L") for d in
               conformance.compare(bad, raw, transformers_version="4.57.6"))
