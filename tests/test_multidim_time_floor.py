"""Qwen2.5-VL's absolute time: the library's floor against exact rationals.

The frame rate is drawn as a fraction ``a/b`` and ``tokens_per_second`` as an
integer or a fraction; the caller passes both as floats, rounded as a reader's
``2 / fps`` would be. Every temporal offset must be ``floor(t · s · r)`` of the
exact rationals (``fractions.Fraction``), whole products included.
"""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from posenc_lib import multidim

_RATES = st.builds(Fraction, st.integers(1, 240), st.sampled_from([1, 2, 3, 4, 5, 1001]))
_PER_SECOND = st.one_of(st.integers(1, 25).map(Fraction),
                        st.builds(Fraction, st.integers(1, 50), st.sampled_from([2, 4, 10])))


@settings(max_examples=200, deadline=None)
@given(fps=_RATES, r=_PER_SECOND, as_reader=st.booleans())
def test_absolute_time_is_the_exact_floor(fps, r, as_reader):
    n_grids = 64
    # the float a reader passes: 2 / fps (two roundings) or the rounded 2b/a
    seconds = 2 / (fps.numerator / fps.denominator) if as_reader else float(2 / fps)
    ids = multidim.mrope_position_ids([("text", 1), ("video", (n_grids, 2, 2))],
                                      seconds_per_grid=seconds,
                                      tokens_per_second=float(r))
    offsets = (ids[0, 1:] - 1).tolist()
    exact = [math.floor(t * 2 / fps * r) for t in range(n_grids)]
    assert offsets == exact, (
        f"fps {fps}, r {r}: offsets differ from floor(t * 2/fps * r) at t = "
        f"{[t for t in range(n_grids) if offsets[t] != exact[t]][:5]}")


def test_whole_products_keep_their_id():
    """The case a plain float64 floor gets wrong: 7 · (2/3) · 3 = 13.999... there."""
    assert 7 * (2 / 3) * 3 < 14
    ids = multidim.mrope_position_ids([("text", 1), ("video", (12, 2, 2))],
                                      seconds_per_grid=2 / 3, tokens_per_second=3)
    assert (ids[0, 1:] - 1).tolist() == [2 * t for t in range(12)]
