"""The caches of DeepSeek-V4, Qwen4-Exp, HRM-Text, MiMo-V2-Flash, Zamba2, the
three Inkling text models, Dots 3 Note and Dory, built by transformers 5.24.0
from generated configs, against the library's sizes.

``scripts/generated_caches.py`` draws 32 configs per type (layer patterns,
legacy field names, the fields that size each cache), builds each tiny model in
float32 and in bfloat16 and measures its own cache after four lengths between
1 and 40 tokens; ``results/generated-caches-5.json`` holds the run
(``make generated-caches``; CI has transformers 4.57.6, which registers none
of the four new ones; Zamba2's 4.57.6 model is in the stored conformance
sweep). Before these were modelled the library refused every DeepSeek-V4
config, sized Qwen4-Exp without its indexer keys and its gated-DeltaNet state,
counted HRM-Text's blocks per stack instead of its cache layers, ignored
MiMo-V2-Flash's ``sliding_window_size``, and read every Zamba2 layer as
rotating full attention with no Mamba state, and every Inkling layer as a
rotating full-attention layer without convolution states (asking for a
``rope_theta`` it has no use for).
"""

from __future__ import annotations

import json
import warnings

import pytest

from posenc_lib import serving
from posenc_lib.tools import conformance

from helpers.paths import ROOT, script as _script

script = _script("generated_caches")
STORED = json.loads((ROOT / "results" / "generated-caches-5.json").read_text())
BYTES = {"float32": 4, "bfloat16": 2}


def _sizes(case: dict) -> dict:
    """``{dtype: {length: {"kv", "state"}}}`` as the library sizes ``case``
    for transformers 5.24.0."""
    config = {"model_type": case["model_type"], **case["config"]}
    out: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dtype, rows in case["measured"].items():
            out[dtype] = {}
            for tokens in rows:
                cache = serving.kv_cache_bytes(
                    config, bytes_per_value=BYTES[dtype], length=int(tokens),
                    transformers_version=STORED["transformers"])
                state = cache["fixed_state"]["bytes"] if cache["fixed_state"] else 0
                out[dtype][tokens] = {"kv": cache["bytes_at_length"], "state": state}
    return out


def test_the_stored_run_is_every_generated_case():
    """The file holds the script's cases as the script draws them now, each
    built and measured (none refused by its class)."""
    assert STORED["transformers"] == "5.24.0"
    drawn = script.cases(STORED["per_type"])
    assert [(c["model_type"], c["config"], sorted(int(n) for n in c["measured"].get(
        "float32", {}))) for c in STORED["cases"]] == [
        (t, json.loads(json.dumps(f)), n) for t, f, n in drawn]
    assert not [c["error"] for c in STORED["cases"] if "error" in c]
    assert {c["model_type"] for c in STORED["cases"]} == set(script.GENERATORS)


@pytest.mark.parametrize("model_type", sorted(script.GENERATORS))
def test_every_generated_cache_is_the_library_s(model_type):
    """Per type, every case, dtype and length: keys and values (with
    DeepSeek-V4's compressed entries and open blocks, Qwen4-Exp's indexer keys)
    and the fixed state (Qwen4-Exp's gated-DeltaNet and PLE convolutions)."""
    wrong = []
    for case in STORED["cases"]:
        if case["model_type"] != model_type:
            continue
        measured = {d: {n: {"kv": r["kv"], "state": r["state"]} for n, r in rows.items()}
                    for d, rows in case["measured"].items()}
        ours = _sizes(case)
        if ours != measured:
            wrong.append(f"{case['config']}: library {ours}, transformers {measured}")
    assert not wrong, f"{len(wrong)} of {script.PER_TYPE}:\n" + "\n".join(wrong[:3])


@pytest.mark.parametrize("model_type", sorted(script.GENERATORS))
def test_every_generated_model_s_rotary_calls_are_the_library_s(model_type):
    """The float32 model of every case observed as the conformance sweep
    observes one (each layer's ``apply_rotary*`` cos/sin and pairs, the
    softmax scales, the cache's growth past 10 tokens), judged by
    :func:`posenc_lib.tools.conformance.compare` against the raw config:
    DeepSeek-V4's two RoPE entries (which of ``rope_theta``,
    ``compress_rope_theta``, ``partial_rotary_factor``, the legacy
    ``qk_rope_head_dim`` and the entries' own keys wins), HRM-Text's cache
    layers of both stacks, MiMo-V2-Flash's partial rotation. A config whose
    rotary dim is odd (MiMo's default third of a 16-wide head: int(16 x 0.334)
    = 5) is refused by the library, by design, with an error that names it."""
    wrong, odd, n = [], 0, 0
    for case in STORED["cases"]:
        if case["model_type"] != model_type:
            continue
        config = {"model_type": model_type, **case["config"]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            diffs = conformance.compare(case["observed"], config,
                                        transformers_version=STORED["transformers"])
        n += 1
        if diffs and all(d["library"] == "raises" and "must be even" in d["reason"]
                         for d in diffs):
            odd += 1
        elif diffs:
            wrong.append(f"{case['config']}: {diffs}")
    assert not wrong, f"{len(wrong)} of {n}:\n" + "\n".join(wrong[:3])
    assert odd < n / 2, f"{odd} of {n} refused for an odd rotary dim"


def test_deepseek_v4_s_growth_per_token_is_its_cache_s_over_whole_blocks():
    """DeepSeek-V4's ``bytes_per_token`` (the growth averaged over a block)
    against the library's own size at two lengths a whole number of blocks
    apart, once every window is full: ``(bytes(n + R) - bytes(n)) / R`` with
    R the least common multiple of the rates (the stored sizes are checked
    against transformers above)."""
    import math
    from fractions import Fraction

    for case in STORED["cases"]:
        if case["model_type"] != "deepseek_v4":
            continue
        config = {"model_type": "deepseek_v4", **case["config"]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain = serving.kv_cache_bytes(config, transformers_version="5.24.0")
            rates = [info["rate"] for info in plain["by_layer_type"].values()
                     if info.get("rate")]
            whole = math.lcm(*rates) if rates else 1
            n = 64 + case["config"]["sliding_window"]

            def size(tokens):
                return serving.kv_cache_bytes(config, length=tokens,
                                              transformers_version="5.24.0"
                                              )["bytes_at_length"]

            growth = Fraction(size(n + 3 * whole) - size(n), 3 * whole)
        # the library adds a float per layer type: a few roundings of 2^-53
        assert abs(plain["bytes_per_token"] - growth) <= 1e-14 * growth, (
            config, float(growth), plain["bytes_per_token"])


def test_the_cases_do_not_depend_on_the_hash_seed():
    """Each case is drawn by a seeded ``random.Random``; one drawn while
    iterating a set would follow Python's string-hash seed, which every
    process picks anew (a generator did, and its stored run matched one run
    in several)."""
    import os
    import subprocess
    import sys

    code = ("import json, sys; sys.path.insert(0, 'scripts'); "
            "import generated_caches as g; print(json.dumps(g.cases()))")
    drawn = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                            capture_output=True, text=True,
                            env={**os.environ, "PYTHONHASHSEED": seed}).stdout
             for seed in ("1", "2", "3")}
    assert len(drawn) == 1
