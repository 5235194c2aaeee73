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
    "affine_shift_residual",
    "sinusoidal_error_bound",
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


def binary_encoding(n_positions: int, dim: int,
                    *, dtype: torch.dtype | None = None) -> Tensor:
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
        raise ValueError(f"n_positions ({n_positions}) exceeds 2**dim = {2 ** dim}: a "
                         f"{dim}-bit code cannot give every position a distinct row")
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
        ``(dim/2,)`` tensor, computed in float64 and then rounded to ``dtype``.
    """
    dim = _validate.even_int("dim", dim)
    base = _validate.finite_float("base", base, greater_than=1.0)
    dtype = _validate.floating_dtype("dtype", dtype)
    i = torch.arange(0, dim // 2, dtype=torch.float64)
    return (base ** (-2.0 * i / dim)).to(dtype)


def sinusoidal_rows(positions, dim: int, base: float = 10000.0,
                    *, dtype: torch.dtype | None = None) -> Tensor:
    """Sinusoidal encodings of arbitrary (possibly huge) ``positions``.

    ``PE[p, 2i] = sin(p·ω_i)`` and ``PE[p, 2i+1] = cos(p·ω_i)``. The positions
    and the frequencies are rounded to ``dtype`` first and the angles are
    computed in ``dtype``, as a model running in that precision computes them.

    Args:
        positions: any shape ``S`` (a tensor or a sequence).

    Returns:
        ``(*S, dim)`` tensor.
    """
    dtype = _validate.floating_dtype("dtype", dtype)
    p = torch.as_tensor(positions).to(dtype)
    _validate.finite_tensor("positions", p)
    omega = sinusoidal_frequencies(dim, base, dtype=dtype)   # (dim/2,)
    angles = p.unsqueeze(-1) * omega                          # (*S, dim/2)
    table = torch.empty(*angles.shape[:-1], dim, dtype=dtype)
    table[..., 0::2] = torch.sin(angles)                      # even features: sin
    table[..., 1::2] = torch.cos(angles)                      # odd features: cos
    return table


def sinusoidal_encoding(n_positions: int, dim: int, base: float = 10000.0,
                        *, dtype: torch.dtype | None = None) -> Tensor:
    """The Transformer's fixed table: rows ``0 .. n_positions - 1``.

    Row ``p`` is :func:`sinusoidal_rows` at ``p``: ``sin(p·ω_i)`` at feature
    ``2i``, ``cos(p·ω_i)`` at feature ``2i + 1``.

    Returns:
        ``(n_positions, dim)`` tensor in ``dtype`` (torch's default if ``None``).
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
    sin_row = torch.arange(0, dim, 2)   # feature 2i holds sin(pω_i)
    cos_row = sin_row + 1               # feature 2i+1 holds cos(pω_i)
    m[sin_row, sin_row], m[sin_row, cos_row] = c, s
    m[cos_row, sin_row], m[cos_row, cos_row] = -s, c
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
    """``‖PE(t+k) − PE(t)‖ = sqrt(dim − 2·Σ_i cos(k·ω_i))``, the same for all ``t``.

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
        squared = (norms[start:start + chunk_size, None] + norms[None, :]
                   - 2 * block @ rows.T)
        idx = torch.arange(block.shape[0])
        squared[idx, idx + start] = float("inf")  # a row's distance to itself
        best = min(best, squared.min().item())
    return max(best, 0.0) ** 0.5


def neighbour_hamming(n_positions: int, dim: int) -> Tensor:
    """Number of bits that differ between the binary codes of ``p`` and ``p + 1``.

    Returns:
        ``(n_positions - 1,)`` int64 tensor; entry ``p`` compares ``p``
        with ``p + 1``.
    """
    table = binary_encoding(n_positions, dim)
    return (table[1:] != table[:-1]).sum(-1).to(torch.int64)


def affine_shift_residual(table: Tensor, k: int = 1) -> float:
    """How far the best *affine* map ``PE(p) -> PE(p + k)`` is from exact.

    Fits ``PE(p + k) ≈ M·PE(p) + b`` by least squares over every ``p`` with
    ``p + k`` in the table, with one ``M`` and one ``b`` for all ``p``, and
    returns ``‖residual‖ / ‖PE(p + k)‖`` (Frobenius norms). It is 0 (up to
    float64 round-off) exactly when an affine map independent of ``p`` exists,
    as for the sinusoidal table (``M = M_k``, ``b = 0``) and the integer
    table (``M = I``, ``b = k·1``).

    Args:
        table: ``(n, dim)``, with ``n - k > dim + 1`` rows, so that the
            ``dim·(dim + 1)`` unknowns are over-determined.
        k: the offset, ``1 <= k < n``.

    Returns:
        The relative residual, a float in ``[0, 1]``.
    """
    _validate.tensor("table", table, min_dim=2)
    if table.dim() != 2:
        raise ValueError(f"table must be (n, dim), got shape {tuple(table.shape)}")
    n, dim = table.shape
    k = _validate.positive_int("k", k)
    if n - k <= dim + 1:
        raise ValueError(f"table must have more than dim + 1 + k = {dim + 1 + k} rows "
                         f"for the fit to be over-determined, got n = {n}")
    rows = table.to(torch.float64)
    inputs = torch.cat([rows[:-k], torch.ones(n - k, 1, dtype=torch.float64)], dim=1)
    targets = rows[k:]
    solution = torch.linalg.lstsq(inputs, targets, driver="gelsd").solution
    residual = (inputs @ solution - targets).norm()
    return (residual / targets.norm()).item()


def sinusoidal_error_bound(positions, dim: int, base: float = 10000.0, *,
                           dtype: torch.dtype = torch.float32,
                           ulps: float = 2.0) -> Tensor:
    """Upper bound on ``‖sinusoidal_rows(p, dtype) − PE(p)‖`` (exact ``PE``).

    With unit round-off ``u`` of ``dtype``, the position, the frequency and
    their product are each rounded once, so the computed angle is off by at
    most ``((1 + u)**3 − 1)·p·ω_i``. A pair ``(sin, cos)`` moves along the unit
    circle by at most that angle (a chord is shorter than its arc), and each
    of the two values is rounded to within ``ulps`` units in the last place
    (``ulp <= 2u`` on ``[-1, 1]``), which adds at most ``2·sqrt(2)·ulps·u``.

    Args:
        positions: non-negative positions, any shape ``S``.
        ulps: accuracy assumed for ``sin`` and ``cos`` in ``dtype`` (torch's
            CPU kernels are accurate to about 1 ulp).

    Returns:
        ``S``-shaped float64 tensor.
    """
    dtype = _validate.floating_dtype("dtype", dtype)
    ulps = _validate.finite_float("ulps", ulps, at_least=0.0)
    p = torch.as_tensor(positions, dtype=torch.float64)
    _validate.finite_tensor("positions", p)
    u = torch.finfo(dtype).eps / 2
    omega = sinusoidal_frequencies(dim, base, dtype=torch.float64)
    # (1 + u)**3 - 1, expanded: written as such it rounds to 0 in float64 when
    # u = 2**-53 (1 + u rounds to 1), and the float64 bound lost its angle term.
    angle_error = (3 * u + 3 * u * u + u ** 3) * p.abs().unsqueeze(-1) * omega
    per_pair = angle_error + 2 * 2 ** 0.5 * ulps * u
    return per_pair.pow(2).sum(-1).sqrt()


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
            raise ValueError(
                f"positions must be an integer tensor, got {positions.dtype}")
        if positions.numel():
            lo, hi = int(positions.min()), int(positions.max())
            if lo < 0 or hi >= self.max_positions:
                raise ValueError(
                    f"positions must lie in [0, {self.max_positions - 1}] (the table "
                    f"has max_positions={self.max_positions} rows), got values in "
                    f"[{lo}, {hi}]")
        return self.table(positions)
