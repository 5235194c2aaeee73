"""A config without ``layer_types`` reads as its class fills them in, for every
causal-LM type transformers registers whose class has layer types.

``scripts/layer_patterns.py`` draws, per type, layer counts and values of the
fields classes expand a pattern from (``sliding_window_pattern``,
``global_attn_every_n_layers``, ``layer_group_size``, a window, ...); the class
is built from each draw without ``layer_types``. transformers 4.57.6's classes
are built here, live; 5.24.0's draws and the layer types its classes filled in
are stored (``results/layer-patterns-5.json``, ``make layer-patterns``).

Before ``posenc_lib.per_layer`` expanded these patterns, the library read every
layer of 6 of 22 such 4.57.6 types and 27 of 43 5.24.0 types (their default
configs) as full attention: for example Qwen3.5's and OLMo-hybrid's linear
layers as attention holding keys and values, and the global layers of
AFMoE, EXAONE-MoE, Kolibri, Flint and LaRA-mini, which apply no RoPE, as
rotating.
"""

from __future__ import annotations

import importlib.util
import json
import random
import warnings
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from posenc_lib import per_layer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("layer_patterns_script",
                                               ROOT / "scripts" / "layer_patterns.py")
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)
STORED = json.loads((ROOT / "results" / "layer-patterns-5.json").read_text())

#: Types whose layer types the library does not derive, and why. Anything else
#: that differs fails, and so does an entry here that no longer differs.
KNOWN = {
    "qwen2_moe": ("5.24.0's Qwen2MoeConfig: every other layer below "
                  "max_window_layers slides, with use_sliding_window; the library "
                  "follows 4.57.6's class"),
    # DeepSeek-V3.2 is read as DeepSeek-V3 (config_reader.MODEL_TYPE_ALIASES):
    # "indexed_attention" layers rotate and cache like full ones; the indexer's
    # own cache is added by serving.kv_cache_bytes (INDEXER_DEFAULTS)
    "deepseek_v32": "indexed_attention read as full_attention (an alias of V3)",
}


#: One name for a layer type transformers 4.57.6 and 5.x name differently
#: (the library keeps 4.57.6's "mamba"; neither holds keys or values).
RENAMED = {"mamba": "linear_attention"}


def _library(default: dict, kwargs: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return per_layer.layer_types(script.library_config(default, kwargs))
        except ValueError as error:
            return error


def _mismatches(types: dict) -> dict[str, list]:
    found: dict[str, list] = {}
    for model_type, entry in types.items():
        for row in entry["rows"]:
            if "error" in row:
                continue
            ours = _library(entry["default"], row["kwargs"])
            if isinstance(ours, list):  # 5.x names Mamba layers linear_attention
                ours = [RENAMED.get(k, k) for k in ours]
            if ours != [RENAMED.get(k, k) for k in row["layer_types"]]:
                found.setdefault(model_type, []).append(
                    (row["kwargs"], row["layer_types"], ours))
    return found


def _judge(types: dict, version: str) -> None:
    found = _mismatches(types)
    wrong = {t: rows[:2] for t, rows in found.items() if t not in KNOWN}
    fixed = [t for t in KNOWN if t in types and t not in found]
    assert not wrong, f"{version}: {len(wrong)} types differ: {wrong}"
    assert not fixed, f"{version}: no longer differ (update KNOWN): {fixed}"


def _live_types() -> dict:
    out = {}
    for model_type, cls in script.population().items():
        default = json.loads(json.dumps(cls().to_dict(), default=str))
        rng = random.Random(f"0:{model_type}")
        out[model_type] = {"default": default, "rows": [
            {"kwargs": kw, **script.build(cls, kw)}
            for kw in script.variants(default, rng, 16)]}
    return out


def test_installed_transformers_classes():
    types = _live_types()
    assert len(types) >= 20  # 4.57.6: 22 causal-LM types with layer types
    rows = sum(len(e["rows"]) for e in types.values())
    assert sum("error" not in r for e in types.values() for r in e["rows"]) >= rows // 2
    _judge(types, "installed")


def test_stored_5x_classes():
    assert STORED["transformers"].startswith("5.")
    assert len(STORED["types"]) >= 70  # 5.24.0: 77 causal-LM types
    _judge(STORED["types"], STORED["transformers"])


def test_a_planted_pattern_is_caught(monkeypatch):
    """The comparison fails when one rule is wrong (Flint's last layer)."""
    monkeypatch.setitem(per_layer._PATTERNS, "flint", lambda t, n, get: [
        "full_attention" if i < 2 or i % 4 == 1 else "sliding_attention"
        for i in range(n)])
    assert "flint" in _mismatches({"flint": STORED["types"]["flint"]})


# -- 5.x heterogeneous configs: per_layer_config ---------------------------------------

GEMMA4 = {"model_type": "gemma4_text", "hidden_size": 64, "num_attention_heads": 2,
          "num_key_value_heads": 1, "head_dim": 32, "num_hidden_layers": 7,
          "max_position_embeddings": 4096, "sliding_window": 16,
          "rope_parameters": {
              "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
              "full_attention": {"rope_type": "default", "rope_theta": 1e6}}}


def test_gemma4_full_layers_take_their_own_head_without_per_layer_config():
    """Gemma4TextConfig fills in per_layer_config itself: its full-attention
    layers (5 and the last, 6) get global_head_dim (default 512)."""
    from posenc_lib import scaling, serving

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layers = per_layer.layer_layout(GEMMA4)
        full = scaling.rope_from_config(GEMMA4, layer=6)
        sliding = scaling.rope_from_config(GEMMA4, layer=0)
        kv = serving.kv_cache_bytes({**GEMMA4, "global_head_dim": 48}, bytes_per_value=1)
    assert [x.attention for x in layers].count("full_attention") == 2
    assert full[0].numel() == 256 and sliding[0].numel() == 16
    # 5 sliding layers x 1 head x (32 + 32) + 2 full layers x 1 head x (48 + 48)
    assert kv["bytes_per_token"] == 5 * 64 + 2 * 96


def test_per_layer_config_must_name_layers():
    from posenc_lib import serving

    for bad, match in (([1], "must be a mapping"), ({"x": {}}, "layer indices"),
                       ({"9": {"head_dim": 8}}, "names layer 9"),
                       ({"1": 8}, "must be a mapping of fields")):
        with pytest.raises(ValueError, match=match):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                serving.kv_cache_bytes({**GEMMA4, "per_layer_config": bad})


def test_a_report_without_a_full_attention_block_reads_the_first_rotating_layer():
    """Beam's rope_parameters maps full_attention to None (no RoPE there); the
    report's global RoPE is the sliding layers', as BeamModel runs them, and
    the full layers report no RoPE."""
    from posenc_lib.tools import inspector

    beam = {"model_type": "beam", "hidden_size": 64, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 32, "num_hidden_layers": 6,
            "max_position_embeddings": 4096, "sliding_window": 16,
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 5e4},
                "full_attention": None}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = inspector.inspect_config(beam)
    assert report["base"] == 5e4 and report["rotary_dim"] == 32
    rotating = [layer["index"] for layer in report["layers"] if layer["rope"]]
    assert rotating == [0, 1, 2, 3, 4]  # BeamConfig: the 6th and the last are full
    # its NoPE layer scales the queries (BeamModel's compute_attention_scaling)
    assert "query temperature (1 + (p + 1)/2048)^0.1" in inspector.format_report(report)


# -- the caches transformers 5.x builds from these configs -----------------------------

#: DynamicCache's layer classes, as the library's cache kinds name them.
CACHE_KIND = {"DynamicLayer": "full", "DynamicIndexedLayer": "full",
              "LinearAttentionAndFullAttentionLayer": "full",
              "DynamicSlidingWindowLayer": "sliding",
              "LinearAttentionAndSlidingWindowAttentionLayer": "sliding",
              "LinearAttentionLayer": "state"}


def _library_cache(default: dict, kwargs: dict):
    from posenc_lib import serving

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            kinds, _ = serving._cache_kinds(script.library_config(default, kwargs),
                                            "transformers")
        except ValueError as error:
            return error
    return ["state" if kind in serving.NO_KV else "sliding" if window else "full"
            for kind, window in kinds]


def _cache_mismatches(types: dict) -> dict[str, list]:
    found: dict[str, list] = {}
    for model_type, entry in types.items():
        for row in entry["rows"]:
            theirs = row.get("cache_layers")
            if not theirs or any(name not in CACHE_KIND for name in theirs):
                continue  # refused, no cache built, or a cache of its own
            ours = _library_cache(entry["default"], row["kwargs"])
            if ours != [CACHE_KIND[name] for name in theirs]:
                found.setdefault(model_type, []).append((row["kwargs"], theirs, ours))
    return found


def test_the_5x_cache_follows_the_layer_types_the_class_fills_in():
    """For each stored variant (a config without layer_types), the layers of
    the DynamicCache transformers 5.24.0 builds from the class (full, sliding,
    or a fixed state) are the library's cache kinds, for every class of
    serving.LAYER_TYPED_5; before it, all these classes' layers were taken for
    sliding ones whenever the config set a window."""
    from posenc_lib import serving

    found = _cache_mismatches({t: e for t, e in STORED["types"].items()
                               if e["default"]["model_type"].removesuffix("_text")
                               in serving.LAYER_TYPED_5})
    assert not found, {t: rows[:1] for t, rows in found.items()}
