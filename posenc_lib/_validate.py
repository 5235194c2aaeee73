"""Argument checks shared by every public function.

Each helper raises a ``ValueError`` whose message starts with the parameter's
name, so a reader sees *which* argument was wrong instead of a stack trace from
deep inside torch.
"""

from __future__ import annotations

import math
import numbers
from typing import Sequence

import torch


def positive_int(name: str, value, *, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def nonnegative_int(name: str, value) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 0 (a seed,
    an index, a count that may be zero); the messages of :func:`positive_int`."""
    return positive_int(name, value, minimum=0)


#: The largest length (tokens, positions) the package accepts: 2**53, the
#: largest integer float64 holds exactly (positions and angles are computed in
#: float64; ``torch.arange`` holds int64, which is larger).
MAX_LENGTH = 2**53


def length(name: str, value) -> int:
    """Return ``value`` as an int, or raise unless ``1 <= value <= MAX_LENGTH``."""
    value = positive_int(name, value)
    if value > MAX_LENGTH:
        raise ValueError(f"{name} must be at most {MAX_LENGTH:,} (2**53, the largest "
                         f"integer float64 holds exactly; positions are float64), "
                         f"got {value}")
    return value


def even_int(name: str, value, *, minimum: int = 2) -> int:
    """Return ``value`` as an int, or raise if it is not an even integer >= ``minimum``."""
    value = positive_int(name, value, minimum=minimum)
    if value % 2:
        raise ValueError(f"{name} must be even, got {value}")
    return value


def finite_float(name: str, value, *, greater_than: float | None = None,
                 at_least: float | None = None) -> float:
    """Return ``value`` as a float, or raise if it is not finite or out of range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if greater_than is not None and not value > greater_than:
        raise ValueError(f"{name} must be > {greater_than}, got {value}")
    if at_least is not None and not value >= at_least:
        raise ValueError(f"{name} must be >= {at_least}, got {value}")
    return value


def floating_dtype(name: str, dtype) -> torch.dtype:
    """Return ``dtype`` (``None`` means torch's default) if it is a floating-point dtype."""
    if dtype is None:
        return torch.get_default_dtype()
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"{name} must be a floating-point torch.dtype, got {dtype!r}")
    return dtype


def tensor(name: str, value, *, min_dim: int = 0, last_dim: int | None = None,
           floating: bool = False) -> torch.Tensor:
    """Check that ``value`` is a tensor with at least ``min_dim`` dimensions."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dim() < min_dim:
        raise ValueError(f"{name} must have at least {min_dim} dimensions, "
                         f"got shape {tuple(value.shape)}")
    if last_dim is not None and value.shape[-1] != last_dim:
        raise ValueError(f"{name} must have last dimension {last_dim}, "
                         f"got shape {tuple(value.shape)}")
    if floating and not value.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {value.dtype}")
    return value


def finite_tensor(name: str, value: torch.Tensor) -> torch.Tensor:
    """Raise if a tensor holds NaN or infinity."""
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        raise ValueError(f"{name} must be finite (it holds NaN or inf)")
    return value


def broadcastable(name: str, shape: Sequence[int], target: Sequence[int]) -> None:
    """Raise unless ``shape`` broadcasts to ``target`` (without growing ``target``)."""
    try:
        result = torch.broadcast_shapes(tuple(shape), tuple(target))
    except RuntimeError:
        result = None
    if result != tuple(target):
        raise ValueError(f"{name} has shape {tuple(shape)}, which does not broadcast "
                         f"to {tuple(target)}")


def one_of(name: str, value, options: Sequence) -> None:
    """Raise unless ``value`` is one of ``options``."""
    if value not in options:
        raise ValueError(f"{name} must be one of {list(options)}, got {value!r}")
