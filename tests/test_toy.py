from __future__ import annotations

import pytest
import torch

from posenc_lib import toy


def test_equal_words_get_equal_rows_and_distinct_words_do_not():
    x = toy.embed("the dog chased another dog", 16)
    assert torch.equal(x[1], x[4])
    assert not torch.equal(x[0], x[1])


def test_embeddings_are_seeded():
    assert torch.equal(toy.embedding_table(8, seed=3), toy.embedding_table(8, seed=3))
    assert not torch.equal(toy.embedding_table(8, seed=3), toy.embedding_table(8, seed=4))


def test_unknown_words_are_named():
    with pytest.raises(ValueError, match="zebra"):
        toy.tokenize("the zebra")
    with pytest.raises(ValueError, match="at least one word"):
        toy.tokenize("   ")
