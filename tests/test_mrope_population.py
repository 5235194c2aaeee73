"""Every M-RoPE model type the installed transformers ships, against the
inspector: which features rotate together (the pair layout) and which axis
(temporal, height, width) each rotary pair follows, observed by running the
model file's own rotary module and apply function on one-hot probes, with
``mrope_interleaved`` true, false and absent.

The population is read from transformers, not listed here: every
``transformers.models.<type>.modeling_<type>`` whose source mentions
``mrope_section``. A type that a later transformers adds fails
:func:`test_the_population_is_every_mrope_module` until it is handled.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import warnings

import pytest
import torch

pytest.importorskip("transformers")

import transformers.models  # noqa: E402
from transformers import AutoConfig  # noqa: E402

from posenc_lib.tools import inspector  # noqa: E402

#: model_type: (the text rotary class, mrope_section, partial_rotary_factor).
#: The sections are the released checkpoints' (Qwen2-VL and Qwen2.5-VL
#: [16, 24, 24]; Qwen3-VL [24, 20, 20]; GLM-4.1V and GLM-4.5V [8, 12, 12]
#: over half the head, partial_rotary_factor 0.5).
TEXT_TYPES = {
    "qwen2_vl": ("Qwen2VLRotaryEmbedding", [16, 24, 24], 1.0),
    "qwen2_5_vl": ("Qwen2_5_VLRotaryEmbedding", [16, 24, 24], 1.0),
    "qwen3_vl": ("Qwen3VLTextRotaryEmbedding", [24, 20, 20], 1.0),
    "qwen3_vl_moe": ("Qwen3VLMoeTextRotaryEmbedding", [24, 20, 20], 1.0),
    "glm4v": ("Glm4vTextRotaryEmbedding", [8, 12, 12], 0.5),
    "glm4v_moe": ("Glm4vMoeTextRotaryEmbedding", [8, 12, 12], 0.5),
}
#: Omni models keep the language model's fields in thinker_config.text_config,
#: which the inspector does not read: it must refuse them, not guess.
REFUSED = {"qwen2_5_omni", "qwen3_omni_moe"}
HEAD_DIM = 128


def _mrope_modules() -> set[str]:
    found = set()
    for info in pkgutil.iter_modules(transformers.models.__path__):
        name = f"transformers.models.{info.name}.modeling_{info.name}"
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and "mrope_section" in open(
                spec.origin, encoding="utf-8").read():
            found.add(info.name)
    return found


def test_the_population_is_every_mrope_module():
    found = _mrope_modules()
    assert found == set(TEXT_TYPES) | REFUSED, (
        f"M-RoPE modules in transformers {transformers.__version__}: "
        f"new {sorted(found - set(TEXT_TYPES) - REFUSED)}, gone "
        f"{sorted(set(TEXT_TYPES) | REFUSED - found)}; run the new type's rotary "
        "module here and teach the inspector its layout")


def _config(model_type: str, flag) -> dict:
    _, section, partial = TEXT_TYPES[model_type]
    block = {"rope_type": "default", "mrope_section": section}
    if flag is not None:
        block["mrope_interleaved"] = flag
    text = {"model_type": f"{model_type}_text", "hidden_size": 512,
            "num_attention_heads": 4, "head_dim": HEAD_DIM, "rope_theta": 1e4,
            "max_position_embeddings": 4096, "rope_scaling": block}
    if partial != 1.0:
        text["partial_rotary_factor"] = partial
    return {"model_type": model_type, "text_config": text}


def _observed(model_type: str, config: dict) -> tuple[str, list[int]]:
    """The pair layout and each pair's axis, from transformers' own code.

    Head ``j`` of the probe holds the unit vector ``e_j``; with position 1 on
    one axis and 0 on the others, ``e_j`` moves iff its pair follows that axis,
    and it moves into its partner feature. Pairs are numbered by their first
    feature, which is the frequency index in both layouts."""
    cls = TEXT_TYPES[model_type][0]
    module = importlib.import_module(
        f"transformers.models.{model_type}.modeling_{model_type}")
    built = AutoConfig.for_model(config["model_type"], text_config=config["text_config"])
    text = built.get_text_config()
    rotary = getattr(module, cls)(text)
    multimodal = getattr(module, "apply_multimodal_rotary_pos_emb", None)
    if multimodal is not None:
        assert "mrope_section" in inspect.signature(multimodal).parameters
    probe = torch.eye(HEAD_DIM, dtype=torch.float64).reshape(1, HEAD_DIM, 1, HEAD_DIM)
    partners, axes = {}, {}
    for axis in range(3):
        ids = torch.zeros(3, 1, 1, dtype=torch.long)
        ids[axis] = 1
        cos, sin = rotary(torch.zeros(1, dtype=torch.float64), ids)
        cos, sin = cos.double(), sin.double()
        if multimodal is not None:
            out, _ = multimodal(probe, probe, cos, sin, text.rope_scaling["mrope_section"])
        else:
            out, _ = module.apply_rotary_pos_emb(probe, probe, cos, sin)
        out = out[0, :, 0, :]  # row j: where e_j went
        for j in range(HEAD_DIM):
            moved = [i for i in range(HEAD_DIM) if i != j and out[j, i] != 0]
            if moved:
                assert len(moved) == 1 and j not in axes, (model_type, j, moved, axes)
                partners[j], axes[j] = moved[0], axis
    firsts = sorted(j for j in partners if j < partners[j])
    layout = ("interleaved" if all(partners[j] == j + 1 for j in firsts) else
              "half" if all(partners[j] == j + len(firsts) for j in firsts) else "other")
    return layout, [axes[j] for j in firsts]


def _reported(report: dict) -> list:
    axes = [None] * report["pairs"]
    for a, info in enumerate(report["mrope"].values()):
        for first, last in info["ranges"]:
            axes[first:last + 1] = [a] * (last - first + 1)
    return axes


@pytest.mark.parametrize("flag", [True, False, None], ids=["true", "false", "absent"])
@pytest.mark.parametrize("model_type", sorted(TEXT_TYPES))
def test_the_inspector_reports_what_the_model_code_does(model_type, flag):
    config = _config(model_type, flag)
    layout, axes = _observed(model_type, config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = inspector.inspect_config(config)
    assert report["pair_layout"] == layout, (
        f"{model_type}: the inspector says {report['pair_layout']} pairs, "
        f"transformers' code rotates {layout} pairs")
    assert _reported(report) == axes, (
        f"{model_type}, mrope_interleaved {flag}: the inspector's axes "
        f"{_reported(report)}, transformers' {axes}")
    assert not any("M-RoPE layout" in w for w in report["warnings"]), report["warnings"]


@pytest.mark.parametrize("model_type", sorted(REFUSED))
def test_omni_configs_are_refused_not_guessed(model_type):
    config = AutoConfig.for_model(model_type).to_dict()
    with pytest.raises(ValueError):
        inspector.inspect_config(config)


def test_an_unknown_mrope_type_is_read_from_its_flag_with_a_warning():
    config = _config("qwen3_vl", True)
    config["model_type"] = "qwen9_vl"
    config["text_config"]["model_type"] = "qwen9_vl_text"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = inspector.inspect_config(config)
    assert report["mrope_interleaved"] is True
    assert any("M-RoPE layout" in w and "qwen9_vl" in w for w in report["warnings"]), (
        report["warnings"])
