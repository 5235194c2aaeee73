from __future__ import annotations

import math

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


def test_attention_layer_is_seeded_and_leaves_the_global_generator_alone():
    state = torch.random.get_rng_state()
    a = toy.attention_layer(16, 4, seed=1)
    assert torch.equal(torch.random.get_rng_state(), state)
    b = toy.attention_layer(16, 4, seed=1)
    c = toy.attention_layer(16, 4, seed=2)
    assert torch.equal(a.w_q.weight, b.w_q.weight)
    assert not torch.equal(a.w_q.weight, c.w_q.weight)
    assert a.w_o.weight.abs().max() <= 1 / math.sqrt(16)


def _rope_half(x, positions, base=10000.0):
    """RoPE in the "half" layout, written out: pair (i, i + d/2) turns by p·θ_i."""
    d = x.shape[-1]
    out = torch.empty_like(x)
    for row, p in enumerate(positions):
        for i in range(d // 2):
            angle = p * base ** (-2 * i / d)
            a, b = x[..., row, i], x[..., row, i + d // 2]
            out[..., row, i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., row, i + d // 2] = b * math.cos(angle) + a * math.sin(angle)
    return out


def _reference(sentence, encoding, causal, d_model=16, n_heads=4, seed=0):
    """Per-head attention from the layer's weight matrices, computed by hand."""
    x = toy.embed(sentence, d_model, seed=seed, dtype=torch.float64)
    layer = toy.attention_layer(d_model, n_heads, seed=seed, dtype=torch.float64)
    n, head_dim = x.shape[0], d_model // n_heads
    if encoding == "sinusoidal":
        pe = torch.tensor([[math.sin(p / 10000 ** (2 * (j // 2) / d_model)) if j % 2 == 0
                            else math.cos(p / 10000 ** (2 * (j // 2) / d_model))
                            for j in range(d_model)] for p in range(n)],
                          dtype=torch.float64)
        x = x + pe
    weights, outputs = [], []
    for h in range(n_heads):
        rows = slice(h * head_dim, (h + 1) * head_dim)
        q = x @ layer.w_q.weight[rows].T
        k = x @ layer.w_k.weight[rows].T
        v = x @ layer.w_v.weight[rows].T
        if encoding == "rope":
            q, k = _rope_half(q, range(n)), _rope_half(k, range(n))
        scores = q @ k.T / math.sqrt(head_dim)
        if causal:
            for i in range(n):
                for j in range(i + 1, n):
                    scores[i, j] = -math.inf
        w = torch.softmax(scores, dim=-1)
        weights.append(w)
        outputs.append(w @ v)
    out = torch.cat(outputs, dim=-1) @ layer.w_o.weight.T
    return out, torch.stack(weights)


@pytest.mark.parametrize("encoding", toy.ENCODINGS)
@pytest.mark.parametrize("causal", [False, True])
def test_sentence_attention_matches_a_hand_computation(encoding, causal):
    sentence = "the dog chased another dog"
    out, weights = toy.sentence_attention(sentence, encoding=encoding, causal=causal)
    with torch.no_grad():
        ref_out, ref_weights = _reference(sentence, encoding, causal)
    assert weights.shape == (4, 5, 5)
    assert torch.allclose(weights, ref_weights, atol=1e-12)
    assert torch.allclose(out, ref_out, atol=1e-12)


def test_sentence_attention_validates():
    with pytest.raises(ValueError, match="encoding must be one of"):
        toy.sentence_attention("the dog", encoding="alibi")
    with pytest.raises(ValueError, match="causal must be a bool"):
        toy.sentence_attention("the dog", causal="yes")
