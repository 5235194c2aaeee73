"""The partial-RoPE layouts of posenc_lib.designs against each model's own attention code.

``results/conventions.json`` holds what ``scripts/probe_conventions.py`` read from
transformers 5.24.0 (every model of ``posenc_lib.conventions.PROBES``, Gemma 4 and
Mistral 4 included; ``make designs-v5`` rewrites it) and ``results/designs_v5.json``
what ``scripts/check_designs_v5.py`` read from 5.24.0's ``"proportional"`` rope type.
Neither is computed by the library: the tests compare the library with them, and probe
two models live in the project's transformers 4.57.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from posenc_lib import conventions, designs

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
EPS32 = torch.finfo(torch.float32).eps
EPS64 = torch.finfo(torch.float64).eps


def stored(name: str) -> dict:
    return json.loads((ROOT / "results" / name).read_text())


def misplaced(probes: dict, table: dict | None = None) -> dict:
    """name -> (the layout the table claims, the layouts that reproduce the probe), for
    every model whose probe the claimed layout does not reproduce alone."""
    table = conventions.PROBES if table is None else table
    wrong = {}
    for name, probe in probes.items():
        claimed = table[name][2]
        found = conventions.match_layouts(probe)
        if found != [claimed]:
            wrong[name] = (claimed, found)
    return wrong


def test_stored_probes_are_of_5x_and_cover_every_model():
    payload = stored("conventions.json")
    assert payload["transformers"].startswith("5.")
    assert set(payload["probes"]) == set(conventions.PROBES)
    for name, probe in payload["probes"].items():
        assert probe["model_type"] == conventions.PROBES[name][0]
        # R(far) is R(1)'s pairs turned far times: float32 tables, (4 + ln base) eps32
        # per unit of angle
        bound = 4 * probe["far"] * (4 + math.log(conventions.BASE)) * EPS32
        assert probe["far_error"] <= bound, name


def test_every_model_sits_in_the_row_its_own_code_gives():
    assert misplaced(stored("conventions.json")["probes"]) == {}


@pytest.mark.parametrize("name", ["GLM-4 (glm4)", "DeepSeek-V3"])
def test_live_probe_in_4x_matches_the_stored_5x_probe(name):
    model_type, keywords = conventions.PROBES[name][:2]
    live = conventions.probe_model(model_type, keywords)
    assert conventions.match_layouts(live) == [conventions.PROBES[name][2]]
    again = stored("conventions.json")["probes"][name]
    tol = 16 * (4 + math.log(conventions.BASE)) * EPS32
    for side in ("query", "key"):
        assert conventions.same_rotation(live[side], again[side], tol), (name, side)


def test_probe_reads_pairs_and_angles_not_just_which_features_turn():
    """At offset 0 every layout is the identity; the probe reads R(1), where the
    adjacent and the rotate-half slices differ although the same features turn."""
    probe = stored("conventions.json")["probes"]["GLM-4 (glm4)"]
    assert [p[:2] for p in probe["query"]["pairs"]] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    neox = stored("conventions.json")["probes"]["GLM-4.5 (glm4_moe)"]
    assert [p[:2] for p in neox["query"]["pairs"]] == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert sorted(f for p in probe["query"]["pairs"] for f in p[:2]) == sorted(
        f for p in neox["query"]["pairs"] for f in p[:2])


def test_proportional_frequencies_match_stored_5x():
    cases = stored("designs_v5.json")
    assert cases["transformers"].startswith("5.") and len(cases["proportional"]) >= 40
    for case in cases["proportional"]:
        real = torch.tensor(case["inv_freq"], dtype=torch.float64)
        ours = designs.proportional_inv_freq(case["head_dim"], case["partial_rotary_factor"],
                                             case["base"], factor=case["factor"],
                                             dtype=torch.float64)
        # 5.x computes in float32: the power, the division, the float32 base
        tol = (4 + math.log(case["base"])) * EPS32
        assert torch.allclose(ours, real, rtol=tol, atol=0), case["head_dim"]
        kept = designs.removed_pairs(case["head_dim"], case["partial_rotary_factor"],
                                     case["base"], 10)["kept"]
        assert int((real > 0).sum()) == int((ours > 0).sum()) == kept


# ---- the planted bugs, each caught by the checks above -------------------------------

def _planted_plan(swap: dict):
    real = designs.rotation_plan

    def plan(head_dim, p, convention="partial", base=10000.0):
        return real(head_dim, p, swap.get(convention, convention), base)

    return plan


@pytest.mark.parametrize("swap, caught", [
    ({"partial": "partial_adjacent"}, "GPT-NeoX"),       # "partial" on adjacent pairs
    ({"trailing": "trailing_half"}, "DeepSeek-V3"),      # "trailing" on rotate-half
])
def test_planted_wrong_pairs_are_caught(monkeypatch, swap, caught):
    monkeypatch.setattr(designs, "rotation_plan", _planted_plan(swap))
    wrong = misplaced(stored("conventions.json")["probes"])
    assert caught in wrong


def test_planted_glm4_in_the_neox_row_is_caught():
    table = dict(conventions.PROBES)
    table["GLM-4 (glm4)"] = table["GLM-4 (glm4)"][:2] + ("partial",) + \
        table["GLM-4 (glm4)"][3:]
    wrong = misplaced(stored("conventions.json")["probes"], table)
    assert wrong == {"GLM-4 (glm4)": ("partial", ["partial_adjacent"])}


def test_planted_p_rope_count_off_by_one_is_caught(monkeypatch):
    real = designs.proportional_inv_freq

    def one_more(head_dim, p=1.0, base=10000.0, *, factor=1.0, dtype=None):
        theta = real(head_dim, p, base, factor=factor, dtype=torch.float64)
        kept = int((theta > 0).sum())
        if kept < head_dim // 2:
            theta[kept] = base ** (-2 * kept / head_dim) / factor
        return theta if dtype is None else theta.to(dtype)

    monkeypatch.setattr(designs, "proportional_inv_freq", one_more)
    with pytest.raises(AssertionError):
        test_proportional_frequencies_match_stored_5x()
    assert "Gemma 4" in misplaced(stored("conventions.json")["probes"])


def test_per_layer_rope_parameters_match_stored_5x(capsys):
    """scripts/check_v5.py against the 5.x output it stored (make designs-v5)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_v5", ROOT / "scripts" / "check_v5.py")
    check_v5 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check_v5)
    stored_file = ROOT / "results" / "config_v5.json"
    assert json.loads(stored_file.read_text())["version"].startswith("5.")
    assert check_v5.main(["--stored", str(stored_file)]) == 0, capsys.readouterr().out
