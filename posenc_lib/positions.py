"""Positions in a running model: padding, packing, and the cost of a stale rotation.

A model sees positions as a tensor of ``position_ids`` that the code around it
builds. This module builds them the way Hugging Face transformers does, so the
two can be compared:

* :func:`position_ids_from_mask`: a padded batch (padding on either side),
  as ``GenerationMixin.prepare_inputs_for_generation`` computes them in
  transformers' ``generation/utils.py``: ``attention_mask.cumsum(-1) - 1``,
  with every padded slot set to 1.
* :func:`packed_position_ids` and :func:`packed_causal_mask`: several
  documents concatenated into one row, positions restarting at 0 in each
  document and a block-diagonal causal mask that keeps them apart.
* :func:`expected_score_mismatch`: how far a RoPE attention score moves, on
  average over random queries and keys, when every pair of a key is rotated
  by a wrong angle, as happens to cached keys that are evicted without being
  moved or that were rotated with frequencies that have since changed.

Moving cached keys by ``δ`` positions is :func:`posenc_lib.rope.rerotate`.
"""

from __future__ import annotations

import numbers
from typing import Sequence

import torch
from torch import Tensor

from . import _validate

__all__ = ["position_ids_from_mask", "packed_position_ids", "packed_causal_mask",
           "expected_score_mismatch"]


def _check_mask(attention_mask) -> Tensor:
    _validate.tensor("attention_mask", attention_mask)
    if attention_mask.dim() != 2:
        raise ValueError(f"attention_mask must be 2-D (batch, seq), got shape "
                         f"{tuple(attention_mask.shape)}")
    if attention_mask.is_complex():
        raise ValueError("attention_mask must hold 0 and 1, got a complex tensor")
    if not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (tokens)")
    return attention_mask


def position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """Position ids of a padded batch: each row's tokens count 0, 1, 2, ...
    on their own.

    A token's position is the number of real tokens before it in its row,
    ``cumsum(attention_mask) - 1``; padded slots get 1, as in transformers'
    generation (the value is never seen, since the mask hides those slots,
    but it stays a valid index into a table of learned positions). Padding
    may sit on the left, on the right, or both.

    Args:
        attention_mask: ``(batch, seq)``, 1 for a token and 0 for padding
            (bool, integer or floating).

    Returns:
        ``(batch, seq)`` int64 tensor.
    """
    mask = _check_mask(attention_mask).long()
    return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)


def _check_lengths(lengths) -> list[int]:
    if isinstance(lengths, Tensor):
        if lengths.dim() != 1 or lengths.is_floating_point() or lengths.is_complex():
            raise ValueError(f"lengths must be a 1-D integer tensor, got dtype "
                             f"{lengths.dtype} and shape {tuple(lengths.shape)}")
        lengths = lengths.tolist()
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
        raise ValueError(f"lengths must be a sequence of document lengths, got "
                         f"{type(lengths).__name__}")
    if not lengths:
        raise ValueError("lengths must hold at least one document length")
    for n, length in enumerate(lengths):
        if isinstance(length, bool) or not isinstance(length, numbers.Integral):
            raise ValueError(f"lengths[{n}] must be an integer, got {length!r}")
        if length <= 0:
            raise ValueError(f"lengths[{n}] must be >= 1, got {length}")
    return [int(length) for length in lengths]


def packed_position_ids(lengths) -> Tensor:
    """Position ids of documents packed into one row: each restarts at 0.

    Args:
        lengths: the documents' lengths, a sequence (or 1-D integer tensor) of
            integers >= 1.

    Returns:
        ``(total,)`` int64 tensor, ``total = sum(lengths)``; add a batch
        dimension (``[None]``) to pass it to a model.
    """
    lengths = _check_lengths(lengths)
    return torch.cat([torch.arange(n) for n in lengths])


def packed_causal_mask(lengths) -> Tensor:
    """Which keys each query of a packed row may attend to: its own
    document, up to itself.

    Entry ``[i, j]`` is True when tokens ``i`` and ``j`` belong to the same
    document and ``j <= i``: a causal mask restricted to the diagonal blocks.

    Args:
        lengths: as in :func:`packed_position_ids`.

    Returns:
        ``(total, total)`` bool tensor, True where attention is allowed.
    """
    lengths = _check_lengths(lengths)
    document = torch.repeat_interleave(torch.arange(len(lengths)),
                                       torch.tensor(lengths))
    index = torch.arange(document.shape[0])
    same_document = document[:, None] == document[None, :]
    return same_document & (index[None, :] <= index[:, None])


def expected_score_mismatch(phase_error) -> Tensor:
    """Relative RMS change of a RoPE score when pair ``i`` of the key turns ``φ_i`` too far.

    For queries and keys with independent standard normal entries, the score
    is ``s = Σ_i Re(h_i e^{iα_i})`` with ``h_i`` the product of pair ``i`` of
    the query and the conjugate of pair ``i`` of the key (as complex
    numbers), and ``E|h_i|² = 4``. Turning pair ``i`` of the key by ``φ_i``
    more changes the score by ``Σ_i Re(h_i e^{iα_i}(e^{iφ_i} - 1))``, whose
    mean square is ``Σ_i 4(1 - cos φ_i)``; ``E s² = d``. The result is

    ``sqrt(Σ_i 4(1 - cos φ_i) / d)``, ``d = 2 · len(φ)``,

    0 without error and about ``√2`` when the phases are random.

    Args:
        phase_error: ``(..., dim/2)`` angles in radians.

    Returns:
        ``(...)`` tensor, in the dtype of ``phase_error`` (float64 for integers).
    """
    phase = torch.as_tensor(phase_error)
    if phase.dim() == 0:
        raise ValueError("phase_error must have a last dimension (dim/2,)")
    if phase.is_complex():
        raise ValueError("phase_error must be real")
    if not phase.is_floating_point():
        phase = phase.to(torch.float64)
    _validate.finite_tensor("phase_error", phase)
    if phase.shape[-1] == 0:
        raise ValueError("phase_error must hold at least one pair")
    dim = 2 * phase.shape[-1]
    return (4 * (1 - phase.cos()).sum(-1) / dim).sqrt()
