"""The study's data: the pinned corpus's bytes, the evaluation windows, the
retrieval probe's rows and the retrieval task's fixed test items."""

from __future__ import annotations

import functools
import hashlib
from typing import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from ... import corpus, lm, retrieval
from .config import EVAL_FILES, TRAIN_FILES, Config

def load_bytes(modules: Sequence[str]) -> tuple[Tensor, str]:
    """Concatenate the source of standard-library ``modules`` as a byte tensor,
    read from the pinned corpus (:func:`posenc_lib.corpus.read`: CPython
    3.11.7's sources, stored in the repository and checked against their
    SHA-256), so the bytes do not depend on the running interpreter.

    Returns:
        ``(n_bytes,)`` uint8 tensor and the SHA-256 of the bytes.
    """
    data = corpus.read(modules)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8), hashlib.sha256(data).hexdigest()


def _check_pinned(config: Config, train_sha: str, eval_sha: str) -> None:
    """Before training: the study's own file lists must give the pinned bytes."""
    for part, files, found in (("train", config.train_files, train_sha),
                               ("eval", config.eval_files, eval_sha)):
        pinned = {"train": TRAIN_FILES, "eval": EVAL_FILES}[part]
        if tuple(files) == pinned and found != corpus.PINNED_SHA256[part]:
            raise ValueError(f"{part}_files: the corpus gives sha256 {found[:12]}..., "
                             f"pinned {corpus.PINNED_SHA256[part][:12]}...: restore "
                             "data/ from the repository")


def _split(rows: Tensor, bos: bool) -> tuple[Tensor, Tensor]:
    """``rows: (b, n + 1)`` bytes (the byte before the targets, then n targets)
    -> ``(inputs, targets)``, both ``(b, n)`` int64. With ``bos`` the first
    input is :data:`~posenc_lib.lm.BOS` instead of the byte before: every model
    predicts the same targets at the same positions."""
    rows = rows.long()
    inputs, targets = rows[:, :-1].clone(), rows[:, 1:]
    if bos:
        inputs[:, 0] = lm.BOS
    return inputs, targets


def _eval_rows(config: Config, data: Tensor) -> Tensor:
    """``(eval_windows, eval_length + 1)`` evenly spaced, non-overlapping windows."""
    n = config.eval_length
    if data.numel() < config.eval_windows * (n + 1) + 1:
        raise ValueError(f"the evaluation data ({data.numel()} bytes) is too short for "
                         f"{config.eval_windows} windows of {n + 1}")
    starts = torch.linspace(0, data.numel() - n - 1, config.eval_windows).long()
    return torch.stack([data[s:s + n + 1] for s in starts.tolist()])


def window_files(results: Mapping) -> np.ndarray:
    """The held-out file each evaluation window starts in, by index into
    ``eval_files``: ``(eval_windows,)`` int. Windows of one file share its
    style, so they are not independent draws of text."""
    c = results["config"]
    return _window_files(tuple(c["eval_files"]), c["eval_windows"],
                         c["max_multiplier"] * c["train_length"])


@functools.lru_cache(maxsize=8)
def _window_files(files: tuple, windows: int, length: int) -> np.ndarray:
    # load_bytes joins the files with two newlines
    ends = np.cumsum([size + 2 for size in corpus.sizes(files)])
    starts = torch.linspace(0, int(ends[-1]) - 2 - length - 1, windows).long().numpy()
    out = np.searchsorted(ends, starts, side="right")
    out.setflags(write=False)
    return out


def _probe_rows(config: Config, data: Tensor, distance: int) -> Tensor:
    """Rows of the retrieval probe at ``distance``: held-out text with one random
    string of ``probe_length`` symbols at ``probe_offset`` and again ``distance``
    later. Shape ``(probe_count, probe_offset + distance + probe_length + 1)``."""
    generator = torch.Generator().manual_seed(1_000 + distance)
    alphabet = torch.tensor(config.probe_symbols, dtype=torch.uint8)
    a, k = config.probe_offset, config.probe_length
    filler_len = a + distance - k + 1
    rows = []
    for _ in range(config.probe_count):
        start = int(torch.randint(0, data.numel() - filler_len, (1,), generator=generator))
        filler = data[start:start + filler_len]
        secret = alphabet[torch.randint(0, len(alphabet), (k,), generator=generator)]
        rows.append(torch.cat([filler[:a + 1], secret, filler[a + 1:], secret]))
    return torch.stack(rows)


def retrieval_grid(config: Config) -> dict:
    """The retrieval task's fixed test items
    (:func:`posenc_lib.retrieval.position_grid`): ``retrieval_items`` per
    (item length, distance band), identical for every model and seed.

    Returns:
        ``{"<length>:<band>": (inputs, answers, distances)}``.
    """
    grid = retrieval.position_grid(config.task, config.train_length, config.max_multiplier,
                                   config.retrieval_items)
    return {f"{n}:{band}": items for (n, band), items in grid.items()}
