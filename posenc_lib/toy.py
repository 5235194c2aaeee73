"""A tiny built-in vocabulary with seeded embeddings and a seeded attention layer,
so no tokenizer or model has to be downloaded.

The position-encoding arguments in the book depend only on *which* rows of the
embedding table are equal, never on their values, so random embeddings show
the same effects as trained ones would.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from . import _validate, absolute, attention, rope

__all__ = ["VOCAB", "ENCODINGS", "tokenize", "embedding_table", "embed",
           "attention_layer", "sentence_attention"]

#: The built-in vocabulary, nineteen lower-case words and a full stop.
VOCAB: tuple[str, ...] = (
    "<bos>", "the", "a", "another", "dog", "cat", "man", "woman", "ball", "park",
    "chased", "saw", "bit", "threw", "liked", "in", "on", "with", "and", ".",
)
_INDEX = {word: i for i, word in enumerate(VOCAB)}

#: The positional encodings :func:`sentence_attention` can apply.
ENCODINGS: tuple[str, ...] = ("none", "sinusoidal", "rope")


def tokenize(sentence: str) -> list[int]:
    """Split on white space, lower-case, and map each word to its index in
    :data:`VOCAB`."""
    if not isinstance(sentence, str):
        raise ValueError(f"sentence must be a str, got {type(sentence).__name__}")
    words = sentence.lower().split()
    if not words:
        raise ValueError("sentence must contain at least one word")
    unknown = [w for w in words if w not in _INDEX]
    if unknown:
        raise ValueError(f"sentence has words outside VOCAB: {unknown}; "
                         f"VOCAB is {list(VOCAB)}")
    return [_INDEX[w] for w in words]


def embedding_table(d_model: int, *, seed: int = 0,
                    dtype: torch.dtype | None = None) -> Tensor:
    """A seeded standard-normal ``(len(VOCAB), d_model)`` embedding table.

    Unit-variance entries are the scale of Vaswani et al.'s embeddings after
    their multiplication by ``sqrt(d_model)``.
    """
    d_model = _validate.positive_int("d_model", d_model)
    dtype = _validate.floating_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(int(seed))
    table = torch.randn(len(VOCAB), d_model, generator=generator, dtype=torch.float64)
    return table.to(dtype)


def embed(sentence: str, d_model: int, *, seed: int = 0,
          dtype: torch.dtype | None = None) -> Tensor:
    """Embed a sentence: ``(n_words, d_model)``, one row per word, no positions."""
    return embedding_table(d_model, seed=seed, dtype=dtype)[tokenize(sentence)]


def attention_layer(d_model: int = 16, n_heads: int = 4, *, seed: int = 0,
                    dtype: torch.dtype | None = None) -> attention.MultiHeadAttention:
    """A :class:`~posenc_lib.attention.MultiHeadAttention` with seeded weights.

    Every weight is drawn from ``U(-1/sqrt(d_model), 1/sqrt(d_model))``, the
    range of ``nn.Linear``'s default initialisation, from a private generator:
    the global random state is neither used nor changed.
    """
    with torch.random.fork_rng(devices=[]):  # nn.Linear's own init draws globally
        layer = attention.MultiHeadAttention(d_model, n_heads)
    dtype = _validate.floating_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(int(seed))
    bound = 1.0 / math.sqrt(d_model)
    with torch.no_grad():
        for linear in (layer.w_q, layer.w_k, layer.w_v, layer.w_o):
            weight = torch.rand(d_model, d_model, generator=generator,
                                dtype=torch.float64)
            linear.weight.copy_((2 * weight - 1) * bound)
    return layer.to(dtype)


def sentence_attention(sentence: str, *, encoding: str = "none", causal: bool = False,
                       d_model: int = 16, n_heads: int = 4,
                       seed: int = 0) -> tuple[Tensor, Tensor]:
    """One seeded attention layer over a sentence, with or without positions.

    Args:
        sentence: words from :data:`VOCAB`, separated by spaces.
        encoding: ``"none"``; ``"sinusoidal"``, the table of
            :func:`~posenc_lib.absolute.sinusoidal_encoding` added to the
            input; or ``"rope"``, :func:`~posenc_lib.rope.apply_rope` with base
            10000 (``"half"`` layout) on every head's queries and keys.
        causal: mask keys to the right of each query.
        d_model, n_heads, seed: passed to :func:`embed` (same ``seed``) and
            :func:`attention_layer`.

    Returns:
        ``(output, weights)``: ``(n, d_model)`` and ``(n_heads, n, n)``
        float64 tensors, with ``n`` the number of words.
    """
    _validate.one_of("encoding", encoding, ENCODINGS)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be a bool, got {causal!r}")
    x = embed(sentence, d_model, seed=seed, dtype=torch.float64)
    layer = attention_layer(d_model, n_heads, seed=seed, dtype=torch.float64)
    n = x.shape[0]
    hooks = {}
    if encoding == "sinusoidal":
        hooks["input_encoding"] = absolute.sinusoidal_encoding(n, d_model,
                                                               dtype=torch.float64)
    elif encoding == "rope":
        positions = torch.arange(n)
        inv_freq = rope.inv_freq(layer.head_dim, dtype=torch.float64)

        def rotate_qk(q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
            return (rope.apply_rope(q, positions, inv_freq),
                    rope.apply_rope(k, positions, inv_freq))

        hooks["qk_transform"] = rotate_qk
    with torch.no_grad():
        return layer(x, causal=causal, return_weights=True, **hooks)
