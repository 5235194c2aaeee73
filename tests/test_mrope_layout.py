"""Which M-RoPE pairs follow which axis: the inspector against transformers' own
rotary modules, for every M-RoPE model type whose code fixes the layout
(Qwen2-VL, Qwen2.5-VL: contiguous blocks; Qwen3-VL, Qwen3-VL-MoE: interleaved),
with ``mrope_interleaved`` true, false and absent. transformers' code reads no
flag for these types, so a report that follows the flag is wrong for one of
the three settings.
"""

from __future__ import annotations

import copy
import importlib

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoConfig  # noqa: E402

from posenc_lib.tools import inspector  # noqa: E402

# model_type: (modelling module, rotary class, mrope_section, interleaved)
TYPES = {
    "qwen2_vl": ("qwen2_vl", "Qwen2VLRotaryEmbedding", [16, 24, 24], False),
    "qwen2_5_vl": ("qwen2_5_vl", "Qwen2_5_VLRotaryEmbedding", [16, 24, 24], False),
    "qwen3_vl": ("qwen3_vl", "Qwen3VLTextRotaryEmbedding", [24, 20, 20], True),
    "qwen3_vl_moe": ("qwen3_vl_moe", "Qwen3VLMoeTextRotaryEmbedding", [24, 20, 20],
                     True),
}


def _config(model_type: str, flag) -> dict:
    section = TYPES[model_type][2]
    block = {"rope_type": "default", "mrope_section": section}
    if flag is not None:
        block["mrope_interleaved"] = flag
    return {"model_type": model_type,
            "text_config": {"hidden_size": 512, "num_attention_heads": 4,
                            "head_dim": 128, "rope_theta": 1e6,
                            "max_position_embeddings": 4096, "rope_scaling": block}}


def _transformers_axes(model_type: str, config: dict) -> list[int]:
    """Pair i follows axis a iff its sine is non-zero at position 1 on axis a
    alone (Qwen2-VL and Qwen2.5-VL return one cos/sin per axis, merged by
    ``mrope_section`` in their apply function)."""
    module_name, cls, section, _ = TYPES[model_type]
    settings = copy.deepcopy(config)
    built = AutoConfig.for_model(settings.pop("model_type"), **settings)
    text = built.get_text_config()
    module = importlib.import_module(
        f"transformers.models.{module_name}.modeling_{module_name}")
    rotary = getattr(module, cls)(text)
    rows = []
    for axis in range(3):
        ids = torch.zeros(3, 1, 1, dtype=torch.long)
        ids[axis] = 1
        _, sin = rotary(torch.zeros(1), ids)
        if sin.dim() == 4:
            sin = torch.cat([m[i % 3] for i, m in
                             enumerate(sin.split(section * 2, dim=-1))], dim=-1)
        rows.append(sin[0, 0, : sin.shape[-1] // 2] != 0)
    rows = torch.stack(rows)
    assert torch.all(rows.sum(0) == 1), f"{model_type}: a pair follows no or two axes"
    return rows.int().argmax(0).tolist()


def _report_axes(report: dict) -> list:
    axes = [None] * report["pairs"]
    for a, info in enumerate(report["mrope"].values()):
        for first, last in info["ranges"]:
            axes[first:last + 1] = [a] * (last - first + 1)
    return axes


@pytest.mark.parametrize("flag", [True, False, None], ids=["true", "false", "absent"])
@pytest.mark.parametrize("model_type", list(TYPES))
def test_mrope_layout_is_the_model_code_s_whatever_the_flag(model_type, flag):
    config = _config(model_type, flag)
    theirs = _transformers_axes(model_type, config)
    report = inspector.inspect_config(config)
    assert _report_axes(report) == theirs, (
        f"{model_type}, mrope_interleaved {flag}: report {_report_axes(report)}, "
        f"transformers {theirs}")
    interleaved = TYPES[model_type][3]
    assert report["mrope_interleaved"] is interleaved
    assert (theirs[:3] == [0, 1, 2]) is interleaved  # the layout is the type's
