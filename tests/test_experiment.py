"""The length-generalization experiment: smoke run, determinism, stored results."""

from __future__ import annotations

import json
import math

import pytest
import torch

from posenc_lib import experiment, lm

SMOKE = experiment.Config.smoke()


def _strip_timings(results):
    """Everything except wall-clock times, which legitimately vary."""
    results = json.loads(json.dumps(results))
    results.pop("wall_time_s")
    for entry in results["models"].values():
        entry.get("train", {}).pop("seconds", None)
    return results


@pytest.fixture(scope="module")
def smoke_results():
    return experiment.run(SMOKE, progress=False)


def test_smoke_run_covers_every_model(smoke_results):
    models = smoke_results["models"]
    expected = set(lm.SCHEMES) | {f"rope+{e}" for e in experiment.EXTENSIONS}
    assert set(models) == expected
    for name, entry in models.items():
        assert set(entry["eval"]) == {str(n) for n in SMOKE.eval_lengths}, name
        for scores in entry["eval"].values():
            assert math.isfinite(scores["ppl"]) and scores["ppl"] > 1
            assert math.isclose(scores["ppl"], math.exp(scores["loss"]), rel_tol=1e-3)
    assert smoke_results["config_hash"] == SMOKE.hash()
    json.dumps(smoke_results)  # serialisable


def test_seeded_runs_are_bitwise_deterministic(smoke_results):
    again = experiment.run(SMOKE, progress=False)
    assert _strip_timings(again) == _strip_timings(smoke_results)


def test_stored_results_match_the_current_configuration():
    """The book's figures come from results/ : they must not be stale."""
    results = experiment.load_results()
    # JSON turns tuples into lists; compare the canonical JSON forms.
    assert results["config"] == json.loads(json.dumps(experiment.Config().to_dict()))
    lengths = {str(n) for n in experiment.Config().eval_lengths}
    for name, entry in results["models"].items():
        assert set(entry["eval"]) == lengths, name


def test_stale_results_are_refused(tmp_path):
    results = json.loads(experiment.RESULTS_PATH.read_text())
    results["config_hash"] = "0" * 16
    path = tmp_path / "stale.json"
    path.write_text(json.dumps(results))
    with pytest.raises(ValueError, match="re-run"):
        experiment.load_results(path)
    changed = experiment.Config(steps=experiment.Config().steps + 1)
    assert changed.hash() != experiment.Config().hash()


@pytest.mark.parametrize("scheme", lm.SCHEMES)
def test_every_model_is_causal(scheme):
    torch.manual_seed(0)
    model = experiment._build_model(SMOKE, scheme).eval()
    tokens = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % 256
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :8], b[:, :8], atol=1e-6)
    assert not torch.allclose(a[:, 8:], b[:, 8:])


def test_chunked_evaluation_equals_one_pass_for_a_static_scheme():
    """A causal model gives every position the same loss whether or not the
    sequence is fed in growing prefixes."""
    torch.manual_seed(0)
    model = experiment._build_model(SMOKE, "rope").eval()
    windows = torch.randint(0, 256, (3, 33), generator=torch.Generator().manual_seed(2))
    whole = experiment.per_position_loss(model, windows)
    chunked = experiment.per_position_loss(model, windows, chunk=8)
    assert torch.allclose(whole, chunked, atol=1e-5)


def test_rope_extensions_at_factor_one_change_nothing():
    torch.manual_seed(0)
    model = experiment._build_model(SMOKE, "rope").eval()
    tokens = torch.randint(0, 256, (2, SMOKE.train_length),
                           generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        reference = model(tokens)
        for rope_type, params in [("linear", {"factor": 1.0}), ("ntk", {"factor": 1.0}),
                                  ("dynamic", {"factor": 1.0, "max_position_embeddings":
                                               SMOKE.train_length})]:
            model.scheme.set_scaling(rope_type, **params)
            assert torch.allclose(model(tokens), reference, atol=1e-5), rope_type
    model.scheme.set_scaling("default")


def test_linear_scaling_equals_scaled_positions():
    """PI with factor s is RoPE at positions m / s."""
    from posenc_lib import rope

    scheme = lm.RopeScheme(8)
    scheme.set_scaling("linear", factor=4.0)
    q = torch.randn(1, 2, 10, 8, generator=torch.Generator().manual_seed(4))
    k = torch.randn(1, 2, 10, 8, generator=torch.Generator().manual_seed(5))
    q_scaled, _ = scheme.attention_hooks(10)["qk_transform"](q, k)
    expected = rope.apply_rope(q, torch.arange(10) / 4.0, rope.inv_freq(8, dtype=torch.float32))
    assert torch.allclose(q_scaled, expected, atol=1e-6)


def test_config_validation():
    with pytest.raises(ValueError, match="schemes"):
        experiment.Config(schemes=("rope", "fourier"))
    with pytest.raises(ValueError, match="even"):
        experiment.Config(d_model=12, n_heads=4)
    with pytest.raises(ValueError, match="position_buckets"):
        experiment.Config(position_buckets=7)
    with pytest.raises(ValueError, match="modules"):
        experiment.load_bytes(["no_such_module_here"])
