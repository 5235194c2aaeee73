"""Absolute encodings against direct, element-by-element computations."""

from __future__ import annotations

import math

import pytest
import torch

from posenc_lib import absolute


def test_sinusoidal_matches_the_paper_formula():
    n, dim, base = 40, 12, 10000.0
    pe = absolute.sinusoidal_encoding(n, dim, base, dtype=torch.float64)
    for p in range(n):
        for i in range(dim // 2):
            angle = p / base ** (2 * i / dim)
            assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)


def test_sinusoidal_float32_close_to_float64():
    pe32 = absolute.sinusoidal_encoding(512, 64, dtype=torch.float32)
    pe64 = absolute.sinusoidal_encoding(512, 64, dtype=torch.float64)
    assert pe32.dtype == torch.float32
    assert torch.allclose(pe32.double(), pe64, atol=1e-4)


def _pe_row(p, dim, base=10000.0):
    """One sinusoidal row from the formula, in plain Python floats."""
    row = []
    for i in range(dim // 2):
        angle = p / base ** (2 * i / dim)
        row += [math.sin(angle), math.cos(angle)]
    return torch.tensor(row, dtype=torch.float64)


@pytest.mark.parametrize("k", [0, 1, 7, 250, -13, 2.5])
def test_shift_matrix_moves_every_position_by_k(k, generator):
    dim = 16
    m = absolute.shift_matrix(k, dim, dtype=torch.float64)
    for p in torch.randint(20, 300, (25,), generator=generator).tolist():
        assert torch.allclose(m @ _pe_row(p, dim), _pe_row(p + k, dim), atol=1e-10)


def test_shift_matrix_default_dtype_matches_the_table():
    pe = absolute.sinusoidal_encoding(64, 8)
    assert torch.allclose(absolute.shift_matrix(5, 8) @ pe[10], pe[15], atol=1e-5)


def test_shift_matrix_is_orthogonal_and_composes():
    a = absolute.shift_matrix(3, 8, dtype=torch.float64)
    b = absolute.shift_matrix(5, 8, dtype=torch.float64)
    assert torch.allclose(a @ a.T, torch.eye(8, dtype=torch.float64))
    assert torch.allclose(a @ b, absolute.shift_matrix(8, 8, dtype=torch.float64))


def test_binary_matches_python_bits():
    table = absolute.binary_encoding(37, 6)
    for p in range(37):
        bits = [int(c) for c in reversed(format(p, "06b"))]
        assert table[p].tolist() == bits


def test_binary_refuses_too_many_positions():
    absolute.binary_encoding(16, 4)
    with pytest.raises(ValueError, match="n_positions .17. exceeds 2\\*\\*dim = 16"):
        absolute.binary_encoding(17, 4)


def test_integer_encoding():
    assert torch.equal(absolute.integer_encoding(4, 3)[:, 0], torch.arange(4.0))
    normalized = absolute.integer_encoding(4, 3, normalize=True)
    assert torch.allclose(normalized[:, 2], torch.tensor([0, 0.25, 0.5, 0.75]))


@pytest.mark.parametrize("call, match", [
    (lambda: absolute.sinusoidal_encoding(10, 7), "dim must be even"),
    (lambda: absolute.sinusoidal_encoding(0, 8), "n_positions must be >= 1"),
    (lambda: absolute.sinusoidal_encoding(10, 8, base=1.0), "base must be > 1"),
    (lambda: absolute.sinusoidal_encoding(10, 8, dtype=torch.int64), "dtype"),
    (lambda: absolute.shift_matrix(1, 9), "dim must be even"),
    (lambda: absolute.shift_matrix(float("nan"), 8), "k must be finite"),
    (lambda: absolute.binary_encoding(-1, 4), "n_positions"),
    (lambda: absolute.integer_encoding(4, 0), "dim"),
])
def test_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_learned_embedding_refuses_positions_outside_the_table():
    torch.manual_seed(0)
    emb = absolute.LearnedPositionalEmbedding(8, 4)
    assert emb(torch.arange(8)).shape == (8, 4)
    with pytest.raises(ValueError, match=r"positions must lie in \[0, 7\].*\[0, 8\]"):
        emb(torch.arange(9))
    with pytest.raises(ValueError, match="integer tensor"):
        emb(torch.arange(3.0))


def test_sinusoidal_matches_the_paper_formula_at_large_positions():
    # Far positions catch a frequency or a position rounded to a low precision.
    dim = 16
    positions = [0, 1, 257, 2049, 40_001, 999_983]
    rows = absolute.sinusoidal_rows(positions, dim, dtype=torch.float64)
    for row, p in zip(rows, positions):
        assert torch.allclose(row, _pe_row(p, dim), atol=1e-9), p


def _tensor2tensor_timing_signal(length, channels, min_timescale=1.0,
                                 max_timescale=1.0e4):
    """tensor2tensor's get_timing_signal_1d (tensor2tensor/layers/common_attention.py),
    transcribed to numpy: geometric timescales with num_timescales - 1 steps,
    and all sines before all cosines."""
    import numpy as np

    position = np.arange(length, dtype=np.float64)
    num_timescales = channels // 2
    log_increment = (math.log(max_timescale / min_timescale)
                     / max(num_timescales - 1, 1))
    inv_timescales = min_timescale * np.exp(np.arange(num_timescales) * -log_increment)
    scaled_time = position[:, None] * inv_timescales[None, :]
    return np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)


@pytest.mark.parametrize("dim", [8, 64, 512])
def test_tensor2tensor_layout_is_the_paper_table_permuted_with_another_base(dim):
    """tensor2tensor's table equals the paper's with base 10000**(n/(n-1)),
    n = dim/2, and the interleaved columns gathered as [sin | cos]."""
    n = dim // 2
    t2t = torch.from_numpy(_tensor2tensor_timing_signal(300, dim))
    ours = absolute.sinusoidal_encoding(300, dim, base=1e4 ** (n / (n - 1)),
                                        dtype=torch.float64)
    permutation = torch.cat([torch.arange(0, dim, 2), torch.arange(1, dim, 2)])
    assert torch.allclose(ours[:, permutation], t2t, atol=1e-10)
    # Its slowest wavelength is exactly 2π·10^4; the paper's is 2π·10^(4(d-2)/d).
    paper = absolute.sinusoidal_frequencies(dim, dtype=torch.float64)
    assert paper[-1].item() == pytest.approx(1e4 ** (-(dim - 2) / dim), rel=1e-12)
    assert torch.allclose(t2t[1, n - 1], torch.tensor(math.sin(1e-4), dtype=torch.float64))


def test_affine_shift_residual_is_zero_exactly_for_affine_shifts(generator):
    sinusoidal = absolute.sinusoidal_encoding(256, 16, dtype=torch.float64)
    integer = absolute.integer_encoding(256, 16, dtype=torch.float64)
    for k in (1, 5, 100):
        assert absolute.affine_shift_residual(sinusoidal, k) < 1e-9
        assert absolute.affine_shift_residual(integer, k) < 1e-9
    learned = 0.02 * torch.randn(256, 16, generator=generator, dtype=torch.float64)
    assert absolute.affine_shift_residual(learned) > 0.5  # random rows: no map


def test_affine_shift_residual_matches_numpy_least_squares():
    import numpy as np

    table = absolute.binary_encoding(64, 6, dtype=torch.float64).numpy()
    for k in (1, 3):
        inputs = np.hstack([table[:-k], np.ones((64 - k, 1))])
        solution, *_ = np.linalg.lstsq(inputs, table[k:], rcond=None)
        expected = np.linalg.norm(inputs @ solution - table[k:]) / np.linalg.norm(table[k:])
        ours = absolute.affine_shift_residual(torch.from_numpy(table), k)
        assert ours == pytest.approx(expected, rel=1e-9)
        assert ours > 0.1


def test_affine_shift_residual_refuses_an_underdetermined_fit():
    with pytest.raises(ValueError, match="over-determined"):
        absolute.affine_shift_residual(torch.zeros(10, 8), 1)
    with pytest.raises(ValueError, match="table must be"):
        absolute.affine_shift_residual(torch.zeros(10, 2, 2), 1)


@pytest.mark.parametrize("dtype, top", [(torch.float32, 10 ** 6),
                                        (torch.bfloat16, 10 ** 4),
                                        (torch.float16, 60_000)])
def test_rounding_stays_within_the_error_bound(dtype, top):
    positions = torch.cat([torch.arange(0, 300),
                           torch.linspace(300, top, 500).round().to(torch.int64)])
    measured = (absolute.sinusoidal_rows(positions, 32, dtype=dtype).double()
                - absolute.sinusoidal_rows(positions, 32, dtype=torch.float64))
    bound = absolute.sinusoidal_error_bound(positions, 32, dtype=dtype)
    assert torch.all(measured.norm(dim=-1) <= bound)


def test_error_bound_catches_positions_rounded_below_the_working_precision():
    # A float32 table whose positions went through bfloat16 first breaks the bound.
    positions = torch.arange(1000, 1100)
    rounded = positions.to(torch.bfloat16).to(torch.float32)
    wrong = absolute.sinusoidal_rows(rounded, 32, dtype=torch.float32).double()
    exact = absolute.sinusoidal_rows(positions, 32, dtype=torch.float64)
    bound = absolute.sinusoidal_error_bound(positions, 32, dtype=torch.float32)
    assert torch.any((wrong - exact).norm(dim=-1) > bound)


def test_error_bound_matches_its_formula_for_one_pair():
    u = 2.0 ** -24
    bound = absolute.sinusoidal_error_bound([1000.0], 2, dtype=torch.float32, ulps=1.0)
    expected = ((1 + u) ** 3 - 1) * 1000.0 + 2 * math.sqrt(2) * u
    assert bound.item() == pytest.approx(expected, rel=1e-12)


def test_positions_keep_the_working_precision():
    # 2**24 + 1 is exact in float64 but not in float32: a float64 row must not
    # have gone through float32 on the way.
    p = 2 ** 24 + 1
    row = absolute.sinusoidal_rows([p], 16, dtype=torch.float64)[0]
    assert torch.allclose(row, _pe_row(p, 16), atol=1e-7)


def test_similarity_and_offset_distance_match_explicit_rows():
    dim = 12
    for t, k in [(0, 1), (5, 3), (100, 37), (40, -25), (1000, 999)]:
        a, b = _pe_row(t, dim), _pe_row(t + k, dim)
        assert absolute.sinusoidal_similarity(k, dim).item() == pytest.approx(
            (a @ b).item(), abs=1e-10)
        assert absolute.offset_distance(k, dim).item() == pytest.approx(
            (a - b).norm().item(), abs=1e-7)


def test_min_pairwise_distance_matches_cdist_across_chunks(generator):
    table = torch.randn(50, 5, generator=generator, dtype=torch.float64)
    table[37] = table[11] + 1e-3        # one close pair, in different chunks
    distances = torch.cdist(table, table)
    distances.fill_diagonal_(float("inf"))
    for chunk_size in (7, 16, 1024):
        assert absolute.min_pairwise_distance(table, chunk_size=chunk_size) == \
            pytest.approx(distances.min().item(), rel=1e-9)
