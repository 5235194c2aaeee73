"""Judge the library against what a tiny transformers model was seen doing.

``scripts/conformance.py`` builds a tiny model of every causal-LM type that
transformers registers, runs it, and records what it did (an *observation*:
which layers called the model file's ``apply_rotary*``, the cos and sin of
each such call at one position, the ``scaling`` each attention call received,
the cache's bytes per token and its fixed part). This module holds the other
half, which needs no transformers: :func:`library_view` (what posenc_lib says
about the same config) and :func:`compare` (every difference, with its
reason), so that ``tests/test_conformance.py`` can re-judge the stored
observations (``results/conformance*.json``) against the current library in
seconds.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Mapping

import torch

from .. import config_reader, per_layer, scaling, serving
from ..logit_scale import layer_softmax_scales, softmax_scale

__all__ = ["library_view", "compare", "verdict", "claimed", "load_results",
           "rejudge", "tally", "RESULTS_DIR", "EPS32"]

EPS32 = torch.finfo(torch.float32).eps


def claimed(model_type: str) -> bool:
    """Whether the library names ``model_type`` in one of its tables (a type
    it says it reads): the sweep fails when such a type disagrees."""
    name = (model_type or "").removesuffix("_text")
    tables = (config_reader.MODEL_DEFAULTS, config_reader.NOT_ROTARY, per_layer.LAYER_DEFAULTS,
              config_reader.FIXED_BASE,
              serving.STATE_DEFAULTS, getattr(config_reader, "NO_POSITIONS", {}))
    return any(name in t or model_type in t for t in tables)


def library_view(config: Mapping, *, position: int,
                 transformers_version: str | None = None,
                 bytes_per_value: int = 4) -> dict:
    """What the library says about ``config`` (errors collected, not raised):
    ``scheme``, per layer the RoPE ``(inv_freq, attention_factor)`` or
    ``None``, the softmax scale, the KV bytes per token and the fixed state,
    both for a model in float32 (``bytes_per_value`` 4; 2 for bfloat16), as
    transformers ``transformers_version`` runs it (default: the installed one;
    see :func:`posenc_lib.serving.mimicked_transformers_version`). Where 4.57.6
    and 5.24.0 differ: the MLA and LFM2 caches
    (:func:`~posenc_lib.serving.kv_cache_bytes`), a ``partial_rotary_factor``
    with the plain RoPE of a class that rotates the whole head in 5.x
    (``config_reader.DEFAULT_ROPE_WHOLE_HEAD_5``), and Hunyuan's NTK ``alpha``
    past ``max_position_embeddings``: 4.57.6's
    ``dynamic_rope_update`` switches to plain dynamic NTK there, 5.24.0 gives
    the module its own static type ``ntk_alpha``
    (``models/hunyuan_v1_dense/modeling_hunyuan_v1_dense.py`` lines 298-305,
    342-355), so its frequencies are those at ``max_position_embeddings``."""
    with config_reader.reading_release(transformers_version):
        version = serving.mimicked_transformers_version(transformers_version)
        seq_len = position + 1
        if version.startswith("5.") and out_of_alpha_range(config, seq_len):
            seq_len = None  # static: 5.x never recomputes Hunyuan's alpha frequencies

        out: dict = {"errors": [], "rope": {}, "softmax": None, "kv_per_token": None,
                     "state": None, "layout": None}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out["scheme"] = config_reader.positional_scheme(config)
            except Exception as e:  # noqa: BLE001 -- a crash is a finding too
                out["errors"].append(f"positional_scheme: {e}")
                out["scheme"] = None
            try:
                out["layout"] = per_layer.layer_layout(config)
            except Exception as e:  # noqa: BLE001 -- a crash is a finding too
                out["errors"].append(f"layer_layout: {e}")
            if out["layout"] is not None and out["scheme"] == "rotary":
                for layer in out["layout"]:
                    try:
                        out["rope"][layer.index] = scaling.rope_from_config(
                            config, layer=layer.index, seq_len=seq_len,
                            dtype=torch.float64, transformers_version=version)
                    except Exception as e:  # noqa: BLE001 -- a crash is a finding too
                        out["errors"].append(f"rope_from_config(layer={layer.index}): {e}")
                        out["rope"] = None
                        break
            try:
                out["softmax"] = softmax_scale(config)
                out["softmax_by_layer"] = layer_softmax_scales(config)
            except Exception as e:  # noqa: BLE001 -- a crash is a finding too
                out["errors"].append(f"softmax scale: {e}")
            try:
                # the cache after ``tokens`` and ``tokens + 1`` tokens, as the
                # sweep measures it: a sliding window shorter than that has
                # stopped growing (its keys and values are then a fixed part)
                tokens = position + 1
                kv, longer = (serving.kv_cache_bytes(
                    config, bytes_per_value=bytes_per_value, length=n,
                    transformers_version=version) for n in (tokens, tokens + 1))
                if kv is None:
                    out["errors"].append("kv_cache_bytes: no layer count")
                else:
                    state = kv["fixed_state"]["bytes"] if kv["fixed_state"] else 0
                    out["kv_per_token"] = longer["bytes_at_length"] - kv["bytes_at_length"]
                    out["state"] = kv["bytes_at_length"] - tokens * out["kv_per_token"] \
                        + state
                    unsized = sorted({k for k, info in kv["by_layer_type"].items()
                                      if not info["kv"] and k != "shared_kv"})
                    if unsized and not kv["fixed_state"]:
                        out["state"], out["unsized"] = None, unsized
            except Exception as e:  # noqa: BLE001 -- a crash is a finding too
                out["errors"].append(f"kv_cache_bytes: {e}")
        return out


def out_of_alpha_range(config: Mapping, seq_len: int) -> bool:
    """Whether ``config`` has Hunyuan's NTK ``alpha`` and ``seq_len`` is past
    its ``max_position_embeddings`` (where 4.57.6 and 5.x differ)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rope = config_reader.parse_rope_config(config)
    except (ValueError, TypeError, KeyError):
        return False
    return rope.dynamic_params is not None and seq_len > rope.max_position_embeddings


def _cos_sin_difference(cos, sin, freq, factor, position):
    """``(layout, largest difference, its tolerance, within tolerance)`` of one
    observed cos/sin row against the library's, or ``None`` when no layout has
    the row's width. Each feature has its own tolerance: float32 frequencies
    (relative error ~ 32 eps, carried to the angle), the angle's and cos/sin's
    rounding, the product by the factor, and the 8 significant digits the
    observation is stored with."""
    cos = torch.as_tensor(cos, dtype=torch.float64)
    sin = torch.as_tensor(sin, dtype=torch.float64)
    ang = position * freq

    def layouts(x):
        return {"half": torch.cat([x] * 2), "interleaved": x.repeat_interleave(2),
                "pairs": x}

    best = None
    for name, c in layouts(ang.cos()).items():
        if c.shape != cos.shape:
            continue
        s = layouts(ang.sin())[name]
        mag = layouts(ang.abs())[name]
        err = torch.maximum((c * factor - cos).abs(), (s * factor - sin).abs())
        tol = abs(factor) * (33 * EPS32 * mag + 4 * EPS32) + 1e-7
        worst = int((err / tol).argmax())
        found = (name, float(err[worst]), float(tol[worst]), bool((err <= tol).all()))
        if best is None or (found[3], -found[1]) > (best[3], -best[1]):
            best = found
    return best


def compare(observed: Mapping, config: Mapping, *,
            transformers_version: str | None = None) -> list[dict]:
    """Every difference between an observation of the tiny model (see the
    module docstring) and the library on the same config, the library
    answering for ``transformers_version`` (the release that made the
    observation; default: the installed one)."""
    with config_reader.reading_release(transformers_version):
        lib = library_view(config, position=observed["position"],
                           transformers_version=transformers_version)
        diffs: list[dict] = []

        def add(what, theirs, ours, reason):
            diffs.append({"what": what, "transformers": theirs, "library": ours,
                          "reason": reason})

        for e in lib["errors"]:
            add("library", None, "raises", e)
        rotating = list(observed["rope_layers"])
        if lib["layout"] is not None and lib["rope"] is not None:
            ours = sorted(i for i, r in lib["rope"].items() if r is not None)
            if rotating != ours:
                add("layers with RoPE", rotating, ours,
                    f"transformers rotates layers {rotating}, the library {ours}")
            for key, row in observed["cos_sin"].items():
                if not all(k.isdigit() for k in key.split(",")):
                    add("cos/sin", key, None, "apply_rotary* was called outside any "
                        "decoder layer the sweep found: not compared")
                    continue
                same = [int(k) for k in key.split(",")]
                i = next((k for k in same if k in ours), None)
                if i is None:
                    continue
                if any(k in ours and not torch.equal(lib["rope"][k][0], lib["rope"][i][0])
                       for k in same):
                    add(f"layers {key} frequencies", "one cos/sin", "several",
                        f"transformers gives layers {key} the same cos/sin, the library "
                        f"different frequencies")
                freq, factor = lib["rope"][i]
                found = _cos_sin_difference(row["cos"], row["sin"], freq, factor,
                                            observed["position"])
                if found is None:
                    add(f"layer {i} rotary dim", len(row["cos"]), 2 * freq.numel(),
                        f"rotary dim {len(row['cos'])} vs {2 * freq.numel()}: cos/sin "
                        f"not compared")
                elif not found[3]:
                    add(f"layer {i} cos/sin", found[1], found[2],
                        f"largest |cos, sin| difference {found[1]:.3g} at position "
                        f"{observed['position']} (tolerance {found[2]:.3g}, {found[0]} "
                        f"layout)")
        pairs = observed.get("pair_layout")  # absent from sweeps made before it
        # one pair a head (a rotary dim of 2): halves and neighbours are one layout
        single = lib["rope"] is not None and all(
            r is None or r[0].numel() == 1 for r in lib["rope"].values())
        if pairs is not None and lib["rope"] is not None and not single:
            try:
                ours = config_reader._pair_layout(config)
            except ValueError as error:
                ours = f"raises: {error}"
            if pairs == "other":
                add("pair layout", pairs, ours, "the model's apply_rotary* pairs features "
                    "neither as halves nor as neighbours: not compared")
            elif pairs != ours:
                add("pair layout", pairs, ours,
                    f"transformers' apply_rotary* rotates {pairs} pairs, the inspector "
                    f"reports {ours}")
        beyond = observed.get("beyond")
        if beyond and lib["scheme"] == "rotary" and lib["rope"] is not None:
            far = library_view(config, position=beyond["position"],
                               transformers_version=transformers_version)["rope"] or {}
            ropes = {}
            for r in far.values():
                if r is not None:
                    ropes.setdefault(tuple(r[0].tolist()), r)
            # (no layer rotates: unused; a module whose rows no layer received,
            # marked by tiny_model._beyond: unused too)
            for row in [r for r in beyond["rows"] if not r.get("unused")] if ropes else ():
                found = [_cos_sin_difference(row["cos"], row["sin"], f, a,
                                             beyond["position"]) for f, a in ropes.values()]
                found = [x for x in found if x is not None]
                if not any(x[3] for x in found):
                    worst = min((x[1] for x in found), default=None)
                    add(f"{row['module']} past L", worst, None,
                        f"at position {beyond['position']:,} (past max_position_embeddings"
                        f") {row['module']}'s cos/sin match none of the library's layers"
                        + (f" (closest: off by {worst:.3g})" if worst is not None else
                           " (no layer has its width)"))
        scales = {(int(k) if str(k).isdigit() else str(k)): v
                  for k, v in observed["scales"].items() if v is not None}
        by_layer = lib.get("softmax_by_layer")
        if scales and by_layer is not None:  # a scale per layer (Inkling)
            bad = {k: v for k, v in scales.items()
                   if k not in by_layer or not math.isclose(v, by_layer[k], rel_tol=1e-6)}
            if bad:
                add("softmax scale", sorted(set(bad.values())),
                    sorted({by_layer.get(k) for k in bad}, key=str),
                    f"attention is called with scaling {sorted(set(bad.values()))} on "
                    f"layers {sorted(bad, key=str)}, the library says "
                    f"{[by_layer.get(k) for k in sorted(bad, key=str)]}")
        elif scales and lib["softmax"] is not None:
            bad = {k: v for k, v in scales.items()
                   if not math.isclose(v, lib["softmax"], rel_tol=1e-6)}
            if bad:
                add("softmax scale", sorted(set(bad.values())), lib["softmax"],
                    f"attention is called with scaling {sorted(set(bad.values()))} on "
                    f"layers {sorted(bad, key=str)}, the library says "
                    f"{lib['softmax']:.6g}")
        theirs = observed["kv_per_token"]
        if theirs is None:
            add("KV bytes/token", None, lib["kv_per_token"],
                "the forward pass returned no cache to measure: not compared")
        elif lib["kv_per_token"] is not None and theirs != lib["kv_per_token"]:
            add("KV bytes/token", theirs, lib["kv_per_token"],
                f"the filled cache grows by {theirs:,} bytes per token (float32), the "
                f"library says {lib['kv_per_token']:,}")
        fixed = observed["fixed_state"]
        if lib.get("unsized"):
            add("fixed state", fixed, None,
                f"the library does not size the state of {', '.join(lib['unsized'])} "
                f"layers (the cache holds {fixed or 0:,} bytes that do not grow): not "
                f"compared")
        elif fixed is not None and lib["state"] is not None and fixed != lib["state"]:
            add("fixed state", fixed, lib["state"],
                f"the cache holds {fixed:,} bytes that do not grow with the length, the "
                f"library says {lib['state']:,}")
        return diffs


def verdict(diffs: list[dict]) -> str:
    """``"agree"``; ``"partly compared"`` when every entry is a comparison
    that could not be made (said as such, never as a difference of 0); else
    ``"disagree"``."""
    if not diffs:
        return "agree"
    if all(d["reason"].endswith("not compared") for d in diffs):
        return "partly compared"
    return "disagree"


#: The stored sweeps, one file per transformers major version.
RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"


def load_results() -> list[dict]:
    """The stored sweeps (``results/conformance-*.json``), oldest version first."""
    return [json.loads(p.read_text())
            for p in sorted(RESULTS_DIR.glob("conformance-*.json"))]


def rejudge(stored: dict) -> dict:
    """Each built type of a stored sweep judged again by the library as it is
    now: ``{model_type: (stored verdict, verdict now)}``."""
    out = {}
    for name, entry in stored["types"].items():
        if entry["verdict"] == "not built":
            out[name] = ("not built", "not built")
            continue
        out[name] = (entry["verdict"], verdict(compare(
            entry["observed"], entry["config"],
            transformers_version=stored["transformers"])))
    return out


def tally(stored: dict) -> dict:
    """``registered``, ``built`` and the count of each verdict of a sweep."""
    counts = {"registered": stored["registered"]}
    for entry in stored["types"].values():
        counts[entry["verdict"]] = counts.get(entry["verdict"], 0) + 1
    counts["built"] = counts["registered"] - counts.get("not built", 0)
    return counts
