"""RoPE-Mixed and axial RoPE against RoPE-ViT's own code (copied verbatim).

``tests/helpers/ropevit_reference.py`` holds naver-ai/rope-vit's functions at
commit ce85c2e. The reference works in float32; tolerances below are float32
roundings (``u = 2**-24``) of the quantities involved, derived in each test.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import ropevit_reference as ref

from posenc_lib import multidim

U32 = 2.0**-24
SIDE, DIM, HEADS = 14, 64, 6  # a 224-pixel image in 16-pixel patches, DeiT-S heads


def _rotate_reference(q, freqs_cis):
    """The reference rotation of q (batch 1): its apply_rotary_emb, q as both inputs."""
    out, _ = ref.apply_rotary_emb(q, q, freqs_cis)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mixed_frequencies_match_the_reference_initialisation(seed):
    torch.manual_seed(seed)
    theirs = ref.init_random_2d_freqs(DIM, HEADS, theta=10.0)  # (x / y, head, pair)
    torch.manual_seed(seed)  # the same draws: one torch.rand(1) per head
    angles = [(torch.rand(1) * 2 * torch.pi).item() for _ in range(HEADS)]
    for head, angle in enumerate(angles):
        ours = multidim.mixed_frequencies(DIM, 10.0, angle=angle, dtype=torch.float64)  # rows (y, x)
        # float32: angle + pi/2 (< 8) rounds by <= 2 u32 * 4, its cos and the
        # magnitude's power and quotient by a few u32 each; components <= 1.
        tol = 16 * U32
        assert torch.allclose(ours[1], theirs[0, head].double(), rtol=0, atol=tol)
        assert torch.allclose(ours[0], theirs[1, head].double(), rtol=0, atol=tol)


def test_mixed_rotation_matches_the_reference():
    torch.manual_seed(3)
    freqs = ref.init_random_2d_freqs(DIM, HEADS, theta=10.0)
    t_x, t_y = ref.init_t_xy(SIDE, SIDE)
    cis = ref.compute_mixed_cis(freqs.view(2, 1, -1), t_x, t_y, HEADS)[0]  # (H, N, 32)
    q = torch.randn(1, HEADS, SIDE * SIDE, DIM)
    theirs = _rotate_reference(q, cis)[0]
    positions = multidim.grid_positions((SIDE, SIDE))  # (y, x), x fastest, as init_t_xy
    for head in range(HEADS):
        vectors = torch.stack([freqs[1, head], freqs[0, head]]).double()  # (y, x)
        ours = multidim.apply_mixed_rope(q[0, head].double(), positions, vectors)
        # float32 angle t_x fx + t_y fy, |angle| <= A: three roundings of <= u32 A;
        # cos, sin and the complex product: a few u32 of each pair's norm.
        a_max = (SIDE - 1) * (vectors.abs().sum(0)).max().item()
        pair_norm = q[0, head].view(-1, DIM // 2, 2).norm(dim=-1).max().item()
        tol = 8 * U32 * (a_max + 2) * pair_norm
        diff = (ours - theirs[head].double()).abs().max().item()
        assert diff <= tol, f"head {head}: max |diff| {diff:.2e} > {tol:.2e}"


def test_axial_rotation_matches_the_reference():
    cis = ref.compute_axial_cis(DIM, SIDE, SIDE, theta=100.0)  # (N, 32): x pairs first
    q = torch.randn(1, 1, SIDE * SIDE, DIM, generator=torch.Generator().manual_seed(4))
    theirs = _rotate_reference(q, cis)[0, 0].double()
    x_then_y = torch.tensor([1] * (DIM // 4) + [0] * (DIM // 4))  # axis 1 is x
    theta = multidim.axial_inv_freq(x_then_y, 100.0, dtype=torch.float64)
    ours = multidim.apply_multiaxis_rope(q[0, 0].double(), multidim.grid_positions(
        (SIDE, SIDE)), theta, x_then_y, layout="interleaved")
    pair_norm = q[0, 0].view(-1, DIM // 2, 2).norm(dim=-1).max().item()
    tol = 8 * U32 * (SIDE - 1 + 2) * pair_norm  # angles <= 13 rad, as above
    diff = (ours - theirs).abs().max().item()
    assert diff <= tol, f"max |diff| {diff:.2e} > {tol:.2e}"
    # and a control: the y-first map is a different rotation
    y_then_x = 1 - x_then_y
    other = multidim.apply_multiaxis_rope(q[0, 0].double(), multidim.grid_positions(
        (SIDE, SIDE)), theta, y_then_x, layout="interleaved")
    assert (other - theirs).abs().max().item() > 100 * tol
    assert math.isfinite(diff)
