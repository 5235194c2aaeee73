"""A tiny built-in vocabulary with seeded embeddings, so no tokenizer or model
has to be downloaded.

The position-encoding arguments in the book depend only on *which* rows of the
embedding table are equal, never on their values, so random embeddings show
the same effects as trained ones would.
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _validate

__all__ = ["VOCAB", "tokenize", "embedding_table", "embed"]

#: The built-in vocabulary, nineteen lower-case words and a full stop.
VOCAB: tuple[str, ...] = (
    "<bos>", "the", "a", "another", "dog", "cat", "man", "woman", "ball", "park",
    "chased", "saw", "bit", "threw", "liked", "in", "on", "with", "and", ".",
)
_INDEX = {word: i for i, word in enumerate(VOCAB)}


def tokenize(sentence: str) -> list[int]:
    """Split on white space, lower-case, and map each word to its index in :data:`VOCAB`."""
    if not isinstance(sentence, str):
        raise ValueError(f"sentence must be a str, got {type(sentence).__name__}")
    words = sentence.lower().split()
    if not words:
        raise ValueError("sentence must contain at least one word")
    unknown = [w for w in words if w not in _INDEX]
    if unknown:
        raise ValueError(f"sentence has words outside VOCAB: {unknown}; VOCAB is {list(VOCAB)}")
    return [_INDEX[w] for w in words]


def embedding_table(d_model: int, *, seed: int = 0, dtype: torch.dtype | None = None) -> Tensor:
    """A seeded standard-normal ``(len(VOCAB), d_model)`` embedding table."""
    d_model = _validate.positive_int("d_model", d_model)
    dtype = _validate.floating_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(int(seed))
    return torch.randn(len(VOCAB), d_model, generator=generator, dtype=torch.float64).to(dtype)


def embed(sentence: str, d_model: int, *, seed: int = 0,
          dtype: torch.dtype | None = None) -> Tensor:
    """Embed a sentence: ``(n_words, d_model)``, one row per word, no position information."""
    return embedding_table(d_model, seed=seed, dtype=dtype)[tokenize(sentence)]
