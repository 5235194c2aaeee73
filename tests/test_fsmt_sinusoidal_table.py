"""Chapter 2 says that transformers' FSMT port of fairseq builds its sinusoidal
table as tensor2tensor does, not as the paper's formula: sines before cosines,
frequencies 10000**(-i/(n - 1)) for n = dim/2 pairs (the paper's table with
base 10000**(n/(n - 1)), columns reordered), the padding row zeroed, and
positions counted from padding_idx + 1. This runs transformers' own
SinusoidalPositionalEmbedding (models/fsmt/modeling_fsmt.py, v4.57.6)."""

import pytest
import torch

from posenc_lib import absolute

fsmt = pytest.importorskip("transformers.models.fsmt.modeling_fsmt")


def _paper_layout(table):
    """FSMT's (sin block, cos block) columns, interleaved as the paper's."""
    n = table.shape[1] // 2
    out = torch.empty_like(table)
    out[:, 0::2], out[:, 1::2] = table[:, :n], table[:, n:]
    return out


@pytest.mark.parametrize("dim", [4, 16, 64, 96, 512])
def test_fsmt_table_is_the_paper_table_reordered_with_another_base(dim):
    rows, n = 300, dim // 2
    table = fsmt.SinusoidalPositionalEmbedding.get_embedding(rows, dim, None).double()
    other_base = absolute.sinusoidal_encoding(rows, dim, 10000.0 ** (n / (n - 1)),
                                              dtype=torch.float64)
    paper = absolute.sinusoidal_encoding(rows, dim, dtype=torch.float64)
    # FSMT computes in float32 (u = 2**-24): exp(-i c) errs by (|i c| + 2) u
    # relative, and p times it by one u more, so an angle p w errs by at most
    # p w (|ln w| + 3) u <= 300 * 3u ~ 5.4e-5 (w (|ln w| + 3) <= 3 for w <= 1).
    assert torch.allclose(_paper_layout(table), other_base, atol=1e-4, rtol=0)
    assert not torch.allclose(_paper_layout(table), paper, atol=1e-2, rtol=0)
    assert not torch.allclose(table, other_base, atol=1e-2, rtol=0)  # column order


def test_fsmt_zeroes_the_padding_row_and_counts_positions_after_it():
    dim, padding_idx = 16, 1
    layer = fsmt.SinusoidalPositionalEmbedding(64, dim, padding_idx)
    layer.make_weight(64, dim, padding_idx)
    assert torch.equal(layer.weight[padding_idx], torch.zeros(dim))
    tokens = torch.tensor([[5, 6, 7, padding_idx]])
    out = layer(tokens).double()
    expected = _paper_layout(layer.weight.double())[padding_idx + 1: padding_idx + 4]
    assert torch.allclose(_paper_layout(out[0, :3]), expected, atol=0, rtol=0)
    assert torch.equal(out[0, 3], torch.zeros(dim, dtype=torch.float64))
