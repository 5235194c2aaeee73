"""A ``partial_rotary_factor`` with the plain RoPE is read as each rotary
class of transformers reads it, for every rotary causal-LM type registered.

``scripts/partial_readers.py`` built each type's tiny model twice, with the
factor 1.0 and 0.5, ran a forward pass and stored the width of the ``cos``
each layer's rotation receives: ``results/partial-readers-4.json``
(transformers 4.57.6) and ``-5.json`` (5.24.0). Here the library reads the
same two configs, with ``transformers_version`` set to the stored release,
and the ratio of its rotary dims must equal the ratio of the widths, layer by
layer (a width is the rotary dim, or half of it for a complex or interleaved
``cos``; the ratio is the same either way).

Most 5.24.0 classes compute the plain RoPE in their own
``compute_default_rope_parameters``, over the whole ``head_dim``; 4.57.6's
shared function reads the factor (and the attention of the same classes then
fails on a head wider than its ``cos``: those runs are stored as errors and
left out).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from posenc_lib import config_reader, scaling

ROOT = Path(__file__).resolve().parents[1]
STORED = {major: json.loads((ROOT / "results" / f"partial-readers-{major}.json")
                            .read_text()) for major in (4, 5)}


def _measured(major: int) -> list[tuple[str, dict]]:
    return [(t, e) for t, e in sorted(STORED[major]["types"].items()) if "reads" in e]


def _dims(config: dict, layers: str, version: str) -> int:
    layer = None if layers == "unattributed" else int(layers.split(",")[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inv_freq, _ = scaling.rope_from_config(config, layer=layer,
                                               transformers_version=version)
    return 2 * inv_freq.numel()


@pytest.mark.parametrize("major", [4, 5])
def test_population_is_measured(major):
    """Most of the rotary population was built at both factors (the stored
    run is not a sample of a few types)."""
    stored = STORED[major]
    assert stored["transformers"].startswith(f"{major}.")
    measured = _measured(major)
    assert len(measured) >= {4: 15, 5: 90}[major], len(measured)


@pytest.mark.parametrize("major", [4, 5])
def test_library_rotates_the_share_each_class_rotates(major):
    version = STORED[major]["transformers"]
    wrong = []
    for model_type, entry in _measured(major):
        one, half = entry["runs"]["1.0"], entry["runs"]["0.5"]
        for layers, width_one in one["widths"].items():
            seen = half["widths"][layers] / width_one
            try:
                ours = (_dims(half["config"], layers, version)
                        / _dims(one["config"], layers, version))
            except ValueError as error:
                ours = f"refused ({error})"
            if ours != seen:
                wrong.append(f"{model_type} layers {layers}: library rotates "
                             f"{ours} of the factor-1 dims, transformers {seen:g}")
    assert not wrong, "\n".join(wrong)


def test_whole_head_set_is_what_5x_measures():
    """Every entry of ``DEFAULT_ROPE_WHOLE_HEAD_5`` is a text model type that
    5.24.0 measured rotating the whole head, and none was measured in 4.57.6
    (whose run of these classes fails at the factor 0.5, or which lacks them):
    a class that reads or ignores the factor in both releases is not
    version-dependent."""
    whole5 = {e["runs"]["1.0"]["config"]["model_type"]
              for _, e in _measured(5) if e["reads"] is False}
    in4 = {e["runs"]["1.0"]["config"]["model_type"]: e["reads"]
           for _, e in _measured(4)}
    assert config_reader.DEFAULT_ROPE_WHOLE_HEAD_5 <= whole5
    same = {t for t in config_reader.DEFAULT_ROPE_WHOLE_HEAD_5 if t in in4}
    assert not same, f"{same}: measured in 4.57.6 too (read or ignored alike)"


def test_4x_attention_fails_for_every_whole_head_class_it_has():
    """The warning says 4.57's attention fails on these configs: every type of
    the set that 4.57.6 registers failed its forward pass at the factor 0.5,
    with the shapes of a cos narrower than the head."""
    names = {t.removesuffix("_text") for t in config_reader.DEFAULT_ROPE_WHOLE_HEAD_5}
    found = 0
    for model_type, entry in STORED[4]["types"].items():
        if model_type.removesuffix("_text") not in names:
            continue
        found += 1
        assert entry.get("error", "").startswith("factor 0.5: RuntimeError: The size"), (
            model_type, entry.get("error") or entry.get("reads"))
    assert found >= 40, found


LLAMA = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
         "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
         "max_position_embeddings": 4096}


@pytest.mark.parametrize("version, dim", [("4.57.6", 32), ("5.24.0", 64)])
def test_each_release_reading_with_a_warning(version, dim):
    with pytest.warns(config_reader.VersionDependentWarning,
                      match=r"4\.57 builds .* int\(64 \* 0\.5\) = 32 .* 5\.x "
                            r"rotates all 64"):
        rope = config_reader.parse_rope_config(LLAMA, transformers_version=version)
    assert rope.dim == dim


def test_scaled_types_and_full_factor_are_not_version_dependent():
    """Both releases read the factor for a scaled RoPE, and a factor of 1
    means the same everywhere: no warning, the same dims."""
    linear = {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    full = {**LLAMA, "partial_rotary_factor": 1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error", config_reader.VersionDependentWarning)
        for version in ("4.57.6", "5.24.0"):
            assert config_reader.parse_rope_config(
                linear, transformers_version=version).dim == 32
            assert config_reader.parse_rope_config(
                full, transformers_version=version).dim == 64


@pytest.mark.parametrize("bad", ["6.0.0", "main", 5])
def test_bad_version_names_the_parameter(bad):
    with pytest.raises(ValueError, match="version must be"):
        config_reader.parse_rope_config(LLAMA, transformers_version=bad)


@pytest.mark.parametrize("fields", [
    {"partial_rotary_factor": 0.5},
    {"partial_rotary_factor": 0.5, "rotary_pct": 0.75},
    {"rope_theta": 5000.0},
    {"rope_theta": 5000.0, "rotary_emb_base": 20000.0, "rotary_pct": 0.5},
    {"partial_rotary_factor": 0.25, "rotary_pct": 0.25},
])
def test_gpt_neox_reads_its_own_names_only(fields):
    """GPTNeoXConfig replaces a top-level partial_rotary_factor and rope_theta
    by rotary_pct and rotary_emb_base (their defaults 0.25 and 10,000 when
    absent): the library's frequencies are those of transformers' rotary
    module built from the same fields (4.57.6, live; 5.24.0 does the same,
    results/config_forms-5.json), and a value it drops is named."""
    import torch
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

    body = {"hidden_size": 256, "num_attention_heads": 4,
            "max_position_embeddings": 2048}
    theirs = GPTNeoXRotaryEmbedding(config=GPTNeoXConfig(**body, **fields)).inv_freq
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours, _ = scaling.rope_from_config({"model_type": "gpt_neox", **body, **fields},
                                           dtype=torch.float64)
    assert ours.numel() == theirs.numel()
    torch.testing.assert_close(ours, theirs.double(), rtol=2 * torch.finfo(
        torch.float32).eps, atol=0)
    dropped = {k for k in ("partial_rotary_factor", "rope_theta") if k in fields}
    named = {k for k in dropped for w in caught
             if issubclass(w.category, config_reader.IgnoredKeyWarning)
             and str(w.message).startswith(f"{k}=")}
    same = {"partial_rotary_factor": fields.get("rotary_pct", 0.25),
            "rope_theta": fields.get("rotary_emb_base", 10000.0)}
    assert named == {k for k in dropped if fields[k] != same[k]}, caught
