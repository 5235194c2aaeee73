"""``scaling.out_of_range_pairs``'s default tolerance follows the inputs' dtype.

Position interpolation (``θ' = θ/s`` at ``s·L``) reaches exactly the trained
angles, so no pair may count as out of range whatever the dtype the frequencies
were computed in; a ratio a few times above that dtype's rounding must count.
"""

from __future__ import annotations

import pytest
import torch

from posenc_lib import rope, scaling


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("dim, base", [(64, 1e4), (128, 1e4), (128, 5e5)])
def test_interpolation_is_in_range_in_every_dtype(dtype, dim, base):
    theta = rope.inv_freq(dim, base, dtype=torch.float64).to(dtype)
    for s in (2, 3, 4, 5, 7, 8, 16, 32):
        out = scaling.out_of_range_pairs(theta, theta / s, 4096, s * 4096)
        assert not out.any(), f"{dtype}, s={s}: pairs {out.nonzero().flatten().tolist()}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_ratio_above_rounding_counts(dtype):
    theta = rope.inv_freq(128, 1e4, dtype=dtype)
    u = torch.finfo(dtype).eps / 2
    # The default tolerance is 2u(8 + |ln θ| + |ln θ'|) < 2u(8 + 2·10): 64u is above it.
    out = scaling.out_of_range_pairs(theta, theta * (1 + 64 * u), 4096, 4096)
    unturned = 4096 * theta.double() < 2 * torch.pi
    assert torch.equal(out, unturned)
    explicit = scaling.out_of_range_pairs(theta, theta * (1 + 64 * u), 4096, 4096, rtol=1.0)
    assert not explicit.any()
    with pytest.raises(ValueError, match="rtol"):
        scaling.out_of_range_pairs(theta, theta, 4096, 4096, rtol=-1.0)
