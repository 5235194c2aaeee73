"""VideoRoPE's rotation from the authors' code, copied verbatim.

Source: Wiselnn570/VideoRoPE, ``videorope-transformer/modeling_videorope.py``
at commit 7712ca3f52b795284e0453badc6cf1642c1368c4: ``rotate_half`` (lines
204-208) and ``apply_m_modify_multimodal_rotary_pos_emb`` (lines 258-285),
which the model's forward installs in place of ``apply_multimodal_rotary_pos_emb``
when ``which_rope`` contains ``'videorope'`` (lines 2094-2097; there the
position ids come from ``get_t_scale_rope_index`` with ``scale_factor = 2.0``).
One debugging comment (``# import pdb; pdb.set_trace()``) is left out.

Copyright 2024 The Qwen team, Alibaba Group and the HuggingFace Inc. team;
licensed under the Apache License, Version 2.0 (the file's header).
"""

import torch


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_m_modify_multimodal_rotary_pos_emb(q, k, cos, sin, mrope_section, unsqueeze_dim=1):
    # add x, y dim -> (16, 48)
    mrope_section = [mrope_section[0], mrope_section[1] + mrope_section[2]]
    mrope_section = mrope_section * 2
    # adjust t last -> (48, 16, 48, 16)
    mrope_section = mrope_section[::-1]
    index = 0
    result_cos = []
    result_sin = []
    # get x1, y1, x2, y2, ..., t1, t2, ...
    for i, section in enumerate(mrope_section):
        if i % 2 == 0:
            for j in range(section):
                row = 1 if j % 2 == 0 else 2

                result_cos.append(cos[row, ..., index: index + 1])
                result_sin.append(sin[row, ..., index: index + 1])
                index += 1
        else:
            result_cos.append(cos[0, ..., index:index + section])
            result_sin.append(sin[0, ..., index:index + section])
            index += section
    cos, sin = torch.cat(result_cos, dim=-1).unsqueeze(dim=unsqueeze_dim), torch.cat(result_sin, dim=-1).unsqueeze(dim=unsqueeze_dim)

    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed
