"""Absolute position encodings: integer, binary, sinusoidal and learned.

Each ``*_encoding`` function returns an ``(n_positions, dim)`` table whose row
``p`` is added to the token embedding at position ``p`` (the
``input_encoding`` hook of :mod:`posenc_lib.attention`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from . import _validate

__all__ = [
    "integer_encoding",
    "binary_encoding",
    "sinusoidal_frequencies",
    "sinusoidal_encoding",
    "sinusoidal_rows",
    "shift_matrix",
    "sinusoidal_similarity",
    "offset_distance",
    "min_pairwise_distance",
    "neighbour_hamming",
    "LearnedPositionalEmbedding",
]


def integer_encoding(n_positions: int, dim: int, normalize: bool = False,
                     *, dtype: torch.dtype | None = None) -> Tensor:
    """Every feature of row ``p`` equals ``p`` (or ``p / n_positions``).

    Args:
        n_positions: number of positions ``m``.
        dim: feature size.
        normalize: divide by ``m``, so the values lie in ``[0, 1)``. The same
            offset then means a different shift for every sequence length.

    Returns:
        ``(n_positions, dim)`` tensor.
    """
    n_positions = _validate.positive_int("n_positions", n_positions)
    dim = _validate.positive_int("dim", dim)
    dtype = _validate.floating_dtype("dtype", dtype)
    p = torch.arange(n_positions, dtype=torch.float64)
    if normalize:
        p = p / n_positions
    return p.unsqueeze(1).expand(n_positions, dim).to(dtype).contiguous()


def binary_encoding(n_positions: int, dim: int, *, dtype: torch.dtype | None = None) -> Tensor:
    """Column ``j`` holds bit ``j`` (least significant first) of the position.

    Column ``j`` is a square wave of period ``2**(j+1)``. Only ``2**dim``
    positions have distinct codes, so asking for more raises ``ValueError``.

    Returns:
        ``(n_positions, dim)`` tensor of 0s and 1s.
    """
    n_positions = _validate.positive_int("n_positions", n_positions)
    dim = _validate.positive_int("dim", dim)
    dtype = _validate.floating_dtype("dtype", dtype)
    if dim < 63 and n_positions > 2 ** dim:
        raise ValueError(f"n_positions ({n_positions}) exceeds 2**dim = {2 ** dim}: "
                         f"a {dim}-bit code cannot give every position a distinct row")
    p = torch.arange(n_positions, dtype=torch.int64).unsqueeze(1)
    bits = torch.arange(min(dim, 63), dtype=torch.int64)
    table = torch.zeros(n_positions, dim, dtype=dtype)
    table[:, : bits.numel()] = ((p >> bits) & 1).to(dtype)
    return table


def sinusoidal_frequencies(dim: int, base: float = 10000.0, *,
                           dtype: torch.dtype | None = None) -> Tensor:
    """Angular frequencies ``ω_i = base**(-2i/dim)`` for ``i = 0 .. dim/2 - 1``.

    The wavelengths ``2π/ω_i`` run from ``2π`` up to ``2π·base**((dim-2)/dim)``.

    Returns:
        ``(dim/2,)`` tensor.
    """
    dim = _validate.even_int("dim", dim)
    base = _validate.finite_float("base", base, greater_than=1.0)
    dtype = _validate.floating_dtype("dtype", dtype)
    i = torch.arange(0, dim // 2, dtype=torch.float64)
    return (base ** (-2.0 * i / dim)).to(dtype)


def sinusoidal_rows(positions, dim: int, base: float = 10000.0,
                    *, dtype: torch.dtype | None = None) -> Tensor:
    """Sinusoidal encodings of arbitrary (possibly huge) ``positions``.

    The positions are converted to ``dtype`` first and the angles are computed
    in ``dtype``, exactly as :func:`sinusoidal_encoding` does for ``0 .. n-1``.

    Args:
        positions: any shape ``S`` (a tensor or a sequence).

    Returns:
        ``(*S, dim)`` tensor.
    """
    dtype = _validate.floating_dtype("dtype", dtype)
    p = torch.as_tensor(positions).to(dtype)
    _validate.finite_tensor("positions", p)
    omega = sinusoidal_frequencies(dim, base, dtype=dtype)
    angles = p.unsqueeze(-1) * omega
    table = torch.empty(*angles.shape[:-1], dim, dtype=dtype)
    table[..., 0::2] = torch.sin(angles)
    table[..., 1::2] = torch.cos(angles)
    return table


def sinusoidal_encoding(n_positions: int, dim: int, base: float = 10000.0,
                        *, dtype: torch.dtype | None = None) -> Tensor:
    """The Transformer's fixed encoding: ``sin`` at even, ``cos`` at odd features.

    ``PE[p, 2i] = sin(p·ω_i)`` and ``PE[p, 2i+1] = cos(p·ω_i)``, with ``ω_i``
    from :func:`sinusoidal_frequencies`. The angles ``p·ω_i`` are computed
    in ``dtype`` (torch's default if ``None``), as a model running in that
    precision would compute them.

    Returns:
        ``(n_positions, dim)`` tensor.
    """
    n_positions = _validate.positive_int("n_positions", n_positions)
    dtype = _validate.floating_dtype("dtype", dtype)
    return sinusoidal_rows(torch.arange(n_positions), dim, base, dtype=dtype)


def shift_matrix(k: float, dim: int, base: float = 10000.0,
                 *, dtype: torch.dtype | None = None) -> Tensor:
    """The block-diagonal ``M_k`` with ``PE[p + k] = M_k @ PE[p]`` for every ``p``.

    Block ``i`` acts on ``(sin pω_i, cos pω_i)`` and is
    ``[[cos kω_i, sin kω_i], [-sin kω_i, cos kω_i]]``: it depends on the
    offset ``k`` only, never on ``p``.

    Returns:
        ``(dim, dim)`` tensor.
    """
    k = _validate.finite_float("k", k)
    omega = sinusoidal_frequencies(dim, base, dtype=torch.float64)
    dtype = _validate.floating_dtype("dtype", dtype)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    m = torch.zeros(dim, dim, dtype=torch.float64)
    idx = torch.arange(0, dim, 2)
    m[idx, idx] = c
    m[idx, idx + 1] = s
    m[idx + 1, idx] = -s
    m[idx + 1, idx + 1] = c
    return m.to(dtype)


def sinusoidal_similarity(offsets, dim: int, base: float = 10000.0) -> Tensor:
    """``PE(t)·PE(t+k) = Σ_i cos(k·ω_i)`` for each offset ``k``, in float64.

    The dot product does not depend on ``t``, and it is even in ``k``.

    Args:
        offsets: any shape ``S`` of offsets ``k`` (a tensor or a sequence).

    Returns:
        ``S``-shaped float64 tensor.
    """
    k = torch.as_tensor(offsets, dtype=torch.float64)
    _validate.finite_tensor("offsets", k)
    omega = sinusoidal_frequencies(dim, base, dtype=torch.float64)
    return torch.cos(k.unsqueeze(-1) * omega).sum(-1)


def offset_distance(offsets, dim: int, base: float = 10000.0) -> Tensor:
    """``‖PE(t+k) − PE(t)‖ = sqrt(dim − 2·Σ_i cos(k·ω_i))``, the same for every ``t``.

    Returns:
        float64 tensor shaped like ``offsets``.
    """
    squared = dim - 2.0 * sinusoidal_similarity(offsets, dim, base)
    return squared.clamp_min(0.0).sqrt()


def min_pairwise_distance(table: Tensor, *, chunk_size: int = 1024) -> float:
    """Smallest Euclidean distance between two distinct rows, by brute force.

    The rows are converted to float64 first, so the result measures the table
    as stored (say, rounded to float32), not the rounding of the distance
    computation. Costs ``O(n² · dim)``; chunks keep memory at
    ``chunk_size × n`` distances.

    Args:
        table: ``(n, dim)`` with ``n >= 2``.
    """
    _validate.tensor("table", table, min_dim=2)
    if table.dim() != 2 or table.shape[0] < 2:
        raise ValueError(f"table must be (n >= 2, dim), got shape {tuple(table.shape)}")
    chunk_size = _validate.positive_int("chunk_size", chunk_size)
    rows = table.to(torch.float64)
    norms = (rows * rows).sum(1)
    best = float("inf")
    for start in range(0, rows.shape[0], chunk_size):
        block = rows[start:start + chunk_size]
        squared = norms[start:start + chunk_size, None] + norms[None, :] - 2 * block @ rows.T
        idx = torch.arange(block.shape[0])
        squared[idx, idx + start] = float("inf")  # a row's distance to itself
        best = min(best, squared.min().item())
    return max(best, 0.0) ** 0.5


def neighbour_hamming(n_positions: int, dim: int) -> Tensor:
    """Number of bits that differ between the binary codes of ``p`` and ``p + 1``.

    Returns:
        ``(n_positions - 1,)`` int64 tensor; entry ``p`` compares ``p`` with ``p + 1``.
    """
    table = binary_encoding(n_positions, dim)
    return (table[1:] != table[:-1]).sum(-1).to(torch.int64)


class LearnedPositionalEmbedding(nn.Module):
    """A trainable ``(max_positions, dim)`` table, as in BERT and GPT-2.

    Unlike a bare ``nn.Embedding``, asking for a position outside the table
    raises a ``ValueError`` that says how long the table is: such a position
    has no trained row, so the model cannot extrapolate to it.
    """

    def __init__(self, max_positions: int, dim: int, *, std: float = 0.02):
        super().__init__()
        self.max_positions = _validate.positive_int("max_positions", max_positions)
        self.dim = _validate.positive_int("dim", dim)
        std = _validate.finite_float("std", std, at_least=0.0)
        self.table = nn.Embedding(self.max_positions, self.dim)
        nn.init.normal_(self.table.weight, std=std)

    def forward(self, positions: Tensor) -> Tensor:
        """Look up ``positions`` (any integer shape ``S``) and return ``(*S, dim)``."""
        _validate.tensor("positions", positions)
        if positions.is_floating_point() or positions.is_complex():
            raise ValueError(f"positions must be an integer tensor, got {positions.dtype}")
        if positions.numel():
            lo, hi = int(positions.min()), int(positions.max())
            if lo < 0 or hi >= self.max_positions:
                raise ValueError(
                    f"positions must lie in [0, {self.max_positions - 1}] (the table has "
                    f"max_positions={self.max_positions} rows), got values in [{lo}, {hi}]")
        return self.table(positions)
