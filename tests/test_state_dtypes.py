"""The cache of a bfloat16 model is sized as transformers fills it, for every
causal-LM type the conformance sweep builds.

``scripts/state_dtypes.py`` built each type's tiny model again, cast it to
bfloat16 and measured its cache after ``TOKENS`` and ``TOKENS + 1`` tokens
(``results/state-dtypes-4.json``, ``-5.json``). The library answers for the
stored config at 2 bytes a value. The float32 sweep cannot tell a state kept
in float32 from one kept in the model's dtype; this one can (the gated-DeltaNet
and Bailing recurrent states stay in float32, their convolution states follow
the model).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posenc_lib.tools import conformance

ROOT = Path(__file__).resolve().parents[1]
STORED = {major: json.loads((ROOT / "results" / f"state-dtypes-{major}.json")
                            .read_text()) for major in (4, 5)}
SWEEP = {major: json.loads((ROOT / "results" / f"conformance-{major}.json")
                           .read_text()) for major in (4, 5)}


def _float32_agrees(major: int, model_type: str) -> bool:
    """The float32 sweep found the library right on this type's cache (the
    types it did not are listed there, with reasons; here only what the dtype
    changes is judged)."""
    entry = SWEEP[major]["types"].get(model_type, {})
    return entry.get("verdict") == "agree"


@pytest.mark.parametrize("major", [4, 5])
def test_population_was_built_in_bfloat16(major):
    stored = STORED[major]
    assert stored["transformers"].startswith(f"{major}.")
    assert stored["dtype"] == "bfloat16"
    built = [t for t, e in stored["types"].items() if "error" not in e]
    assert len(built) >= {4: 90, 5: 140}[major], len(built)
    judged = [t for t in built if _float32_agrees(major, t)]
    assert len(judged) >= {4: 90, 5: 135}[major], len(judged)


@pytest.mark.parametrize("major", [4, 5])
def test_library_sizes_the_bfloat16_cache(major):
    stored = STORED[major]
    wrong = []
    for model_type, entry in sorted(stored["types"].items()):
        if "error" in entry or entry["kv_per_token"] is None \
                or not _float32_agrees(major, model_type):
            continue
        ours = conformance.library_view(
            entry["config"], position=stored["tokens"] - 1,
            transformers_version=stored["transformers"], bytes_per_value=2)
        theirs = (entry["kv_per_token"], entry["fixed_state"])
        if (ours["kv_per_token"], ours["state"]) != theirs:
            wrong.append(f"{model_type}: library {ours['kv_per_token']} per token, "
                         f"state {ours['state']}; transformers {theirs[0]}, "
                         f"{theirs[1]} ({'; '.join(ours['errors'])[:200]})")
    assert not wrong, f"{len(wrong)} types:\n" + "\n".join(wrong)
