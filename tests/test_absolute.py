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
