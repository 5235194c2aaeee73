"""VideoRoPE's axis map and rotation against the authors' own function.

``tests/helpers/videorope_reference.py`` holds ``apply_m_modify_multimodal_rotary_pos_emb``
from Wiselnn570/VideoRoPE at commit 7712ca3, verbatim. It reads ``cos`` and
``sin`` in the layout of transformers' Qwen2-VL rotary module: one
``(batch, seq, head_dim)`` table per axis, the angles of the 64 pairs twice.
"""

from __future__ import annotations

import pytest
import torch
from helpers import videorope_reference as ref

from posenc_lib import multidim, rope

F64 = torch.float64
EPS = torch.finfo(F64).eps


def _tables(ids, theta):
    angles = ids[:, None, :, None].to(F64) * theta        # (3, 1, seq, 64)
    angles = torch.cat([angles, angles], dim=-1)          # rotate-half: twice
    return angles.cos(), angles.sin()


@pytest.mark.parametrize("section", [[16, 24, 24], [8, 12, 12], [4, 6, 6]])
def test_videorope_rotation_matches_the_authors_function(section):
    dim = 2 * sum(section)
    theta = rope.inv_freq(dim, 1e6, dtype=F64)
    segments = [("text", 3), ("video", (3, 8, 6)), ("text", 2), ("image", (1, 4, 6)),
                ("text", 1)]
    ids = multidim.videorope_position_ids(segments, temporal_spacing=2.0)
    q = torch.randn(1, 2, ids.shape[1], dim, generator=torch.Generator().manual_seed(0),
                    dtype=F64)
    cos, sin = _tables(ids, theta)
    theirs, _ = ref.apply_m_modify_multimodal_rotary_pos_emb(q, q, cos, sin, section)
    axis = multidim.videorope_axis_map(section, dim=dim)
    ours = multidim.apply_multiaxis_rope(q, ids[:, None, :], theta, axis)
    # The same angles, cos and sin of them in both; each output is
    # q_a cos + q_b sin, two products and a sum: a few ulps of |q_a| + |q_b|.
    tol = 4 * EPS * 2 * q.abs().max().item()
    assert (ours - theirs).abs().max().item() <= tol
    # the map alone: label every pair by its axis and let the function pick
    labels = torch.arange(3.0, dtype=F64).view(3, 1, 1, 1).expand(3, 1, 1, dim).clone()
    unit = torch.ones(1, 1, 1, dim, dtype=F64)  # output = the picked "cos" row
    picked, _ = ref.apply_m_modify_multimodal_rotary_pos_emb(
        unit, unit, labels, torch.zeros_like(labels), section)
    assert picked[0, 0, 0, : dim // 2].long().tolist() == axis.tolist()
