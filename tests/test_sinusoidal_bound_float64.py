"""The float64 rounding bound of the sinusoidal table, against a reference
computed in numpy's extended precision (x87 80-bit or IEEE quad), over head
sizes (powers of two and not), bases, and positions up to 10^7."""

import math

import numpy as np
import pytest
import torch

from posenc_lib import absolute

EXTENDED = np.finfo(np.longdouble).eps < 2.0**-60


def _reference(positions, dim, base):
    i = np.arange(dim // 2, dtype=np.longdouble)
    omega = np.power(np.longdouble(base), -2 * i / np.longdouble(dim))
    angles = np.asarray(positions, dtype=np.longdouble)[:, None] * omega
    table = np.empty((len(positions), dim), dtype=np.longdouble)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles)
    return table


@pytest.mark.skipif(not EXTENDED, reason="numpy's longdouble is float64 here")
@pytest.mark.parametrize("dim", [2, 6, 64, 96, 128])
@pytest.mark.parametrize("base", [10.0, 1e4, 5e5])
def test_float64_rows_stay_within_the_float64_bound(dim, base):
    positions = np.concatenate([np.arange(0, 500),
                                np.linspace(500, 1e7, 500).round()])
    rows = absolute.sinusoidal_rows(torch.tensor(positions), dim, base,
                                    dtype=torch.float64).numpy()
    error = np.sqrt(((rows.astype(np.longdouble) - _reference(positions, dim, base))
                     ** 2).sum(1)).astype(float)
    bound = absolute.sinusoidal_error_bound(positions, dim, base,
                                            dtype=torch.float64).numpy()
    assert np.all(error <= bound), (
        f"dim {dim}, base {base}: error exceeds the bound at positions "
        f"{positions[error > bound][:5].tolist()}")


def test_float64_bound_keeps_its_angle_term():
    # (1 + u)**3 - 1 is 0 in float64 for u = 2**-53; the bound must still grow
    # with the position as 3u p omega does.
    u = 2.0 ** -53
    bound = absolute.sinusoidal_error_bound([1e6], 2, dtype=torch.float64, ulps=1.0)
    expected = (3 * u + 3 * u * u + u ** 3) * 1e6 + 2 * math.sqrt(2) * u
    assert bound.item() == pytest.approx(expected, rel=1e-12)
