"""Window keys on every causal-LM type: the library's cache against the one
each tiny model filled (``scripts/window_keys.py``, ``results/window-keys-*.json``).

The stored sweep took every type the conformance sweep agrees on, wrote its
tiny default config out, added window keys its class may not define
(``sliding_window``, ``attention_chunk_size``, ``layer_types``,
``use_sliding_window``, ``max_window_layers``), and measured the cache that
transformers 4.57.6 and 5.24.0 build from each dict. Here the library sizes
the same dicts. Adding the keys this way found Qwen3-MoE's window read without
its ``use_sliding_window`` switch, ModernBERT-decoder's window read from the
key where 4.57.6's class computes ``local_attention // 2``, Llama 4's chunked
layers in 4.57.6 (which slide by a ``sliding_window`` key), a ``layer_types``
key read as layers where Zamba2 (4.57.6) and RecurrentGemma never read it, a
crash on the latter, and Mllama's and CPM-Ant's caches.

The bytes compared are the total of keys, values and other state: the cache
walk cannot tell CPM-Ant's prompt tokens (a fixed part, in the library) from
its input's.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from helpers.window_refusals import REFUSED

from posenc_lib import serving

ROOT = Path(__file__).resolve().parents[1]
STORED = {int(p.stem.rsplit("-", 1)[1]): json.loads(p.read_text())
          for p in sorted((ROOT / "results").glob("window-keys-*.json"))}



def _sized(raw: dict, version: str) -> int | str:
    """The library's bytes of ``raw``'s cache after the sweep's tokens (keys,
    values and fixed state), or its refusal's message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = serving.kv_cache_bytes(raw, bytes_per_value=4, length=10,
                                         transformers_version=version)
    except ValueError as error:
        return str(error)
    return out["bytes_at_length"] + (out["fixed_state"]["bytes"]
                                     if out["fixed_state"] else 0)


def _verdicts(stored: dict) -> tuple[int, list, list]:
    """``(forms compared, disagreements, refusals not in REFUSED)``."""
    n, wrong, refused = 0, [], []
    for model_type, found in stored["types"].items():
        for form, entry in ({} if "error" in found else found).items():
            if "cache" not in entry:  # transformers refused it: nothing to compare
                continue
            n += 1
            ours = _sized(entry["raw"], stored["transformers"])
            theirs = sum(entry["cache"])
            if isinstance(ours, str):
                if not ours.startswith(REFUSED.get(model_type, ("\0",))):
                    refused.append(f"{model_type} / {form}: {ours[:150]}")
            elif ours != theirs:
                wrong.append(f"{model_type} / {form}: transformers {theirs:,}, "
                             f"library {ours:,}")
    return n, wrong, refused


def test_results_exist():
    assert set(STORED) == {4, 5}, "run make window-keys (both transformers)"


@pytest.mark.parametrize("major", [4, 5])
def test_every_window_form_is_sized_as_its_model_fills_it(major):
    stored = STORED[major]
    assert stored["tokens"] == 10
    n, wrong, refused = _verdicts(stored)
    assert n >= {4: 700, 5: 1000}[major], n
    assert not wrong, f"{len(wrong)} of {n}:\n" + "\n".join(wrong[:20])
    assert not refused, f"{len(refused)} refused:\n" + "\n".join(refused[:20])


def test_a_sweep_error_is_listed_not_dropped():
    """A type whose tiny model does not build is stored with its error; none
    of the conformance sweep's agreeing types is."""
    for major, stored in STORED.items():
        errors = {t: f["error"] for t, f in stored["types"].items() if "error" in f}
        assert not errors, (major, errors)


def test_the_comparison_can_fail():
    """A stored cache a byte larger, or a raw dict without its window key, is
    a disagreement (the forms are not all the same size)."""
    stored = STORED[4]
    entry = stored["types"]["llama"]["window"]
    assert _sized(entry["raw"], stored["transformers"]) == sum(entry["cache"])
    assert _sized(entry["raw"], stored["transformers"]) != sum(entry["cache"]) + 1
    bare = {k: v for k, v in entry["raw"].items() if k != "sliding_window"}
    assert _sized(bare, stored["transformers"]) != sum(entry["cache"])
