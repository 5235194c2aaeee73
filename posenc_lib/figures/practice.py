"""Figures for chapter 8: positions in a running model."""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from .. import _validate, multidim, positions, rope, scaling
from ._base import BookFigure, new_subplots, plain_log_axis, set_ticks
__all__ = ["bytes_per_token", "padded_positions", "packing_masks", "eviction",
           "dynamic_mismatch", "mrope_continuation"]

_TOKEN, _PAD, _LEAK = "#cfe3f3", "0.82", "#e4572e"


def bytes_per_token(names: Sequence[str], n_bytes: Sequence[int],
                    n_tokens: Sequence[int]) -> BookFigure:
    """Bytes per token of a BPE tokenizer on each file, against byte-level tokens (1).

    Args:
        names: one label per file.
        n_bytes: UTF-8 bytes of each file.
        n_tokens: BPE tokens of each file.
    """
    if not (len(names) == len(n_bytes) == len(n_tokens)) or not names:
        raise ValueError(f"names, n_bytes and n_tokens must have the same non-zero length, "
                         f"got {len(names)}, {len(n_bytes)} and {len(n_tokens)}")
    for name, values in (("n_bytes", n_bytes), ("n_tokens", n_tokens)):
        for n, value in enumerate(values):
            _validate.positive_int(f"{name}[{n}]", value)
    ratio = np.array(n_bytes, dtype=float) / np.array(n_tokens, dtype=float)
    order = np.argsort(ratio)
    overall = sum(n_bytes) / sum(n_tokens)
    fig, ax = new_subplots(7.2, 3.2)
    ax.bar(np.arange(len(names)), ratio[order], color="C0", label="BPE, per file")
    ax.axhline(overall, color="C0", ls="--", lw=1.2,
               label=f"BPE, all files: {overall:.2f} bytes/token")
    ax.axhline(1.0, color="C3", lw=1.5, label="byte-level: 1 byte/token")
    ax.set_xticks(np.arange(len(names)), [names[i] for i in order], rotation=60,
                  ha="right", fontsize=7)
    ax.set_ylabel("bytes per token")
    ax.set_xlabel("held-out file")
    ax.set_ylim(0, max(ratio) * 1.25)
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    ax.grid(axis="y", alpha=0.3)
    return fig


def _grid(ax, values: np.ndarray, real: np.ndarray, title: str) -> None:
    """Draw a (batch, seq) grid: real slots coloured, padding grey, every value written."""
    colours = ListedColormap([_PAD, _TOKEN])
    ax.imshow(real.astype(float), cmap=colours, vmin=0, vmax=1, aspect="auto")
    for (b, j), value in np.ndenumerate(values):
        ax.text(j, b, str(value), ha="center", va="center", fontsize=9,
                color="0.35" if not real[b, j] else "k")
    set_ticks(ax.xaxis, np.arange(values.shape[1]))
    set_ticks(ax.yaxis, np.arange(values.shape[0]))
    set_ticks(ax.xaxis, np.arange(values.shape[1] + 1) - 0.5, minor=True)
    set_ticks(ax.yaxis, np.arange(values.shape[0] + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="w", lw=2)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel("slot index in the padded row")
    ax.set_title(title, fontsize=9)


def padded_positions(attention_mask) -> BookFigure:
    """Position ids of a padded batch: from the mask (left) and ``arange`` (right).

    Args:
        attention_mask: ``(batch, seq)`` 0/1 mask.
    """
    ids = positions.position_ids_from_mask(attention_mask).numpy()
    real = np.asarray(attention_mask).astype(bool)
    naive = np.broadcast_to(np.arange(real.shape[1]), real.shape)
    fig, (left, right) = new_subplots(7.6, 0.55 * real.shape[0] + 1.6, 1, 2, sharey=True)
    _grid(left, ids, real, "position_ids_from_mask: every row counts from 0")
    _grid(right, naive, real, "arange: row b is shifted by its padding")
    left.set_ylabel("row b of the batch")
    handles = [Patch(color=_TOKEN, label="token"), Patch(color=_PAD, label="padding")]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8)
    return fig


def packing_masks(lengths=(5, 3, 4)) -> BookFigure:
    """The block-diagonal causal mask of a packed row, and what a plain causal mask leaks.

    Args:
        lengths: the documents' lengths.
    """
    allowed = positions.packed_causal_mask(lengths)
    ids = positions.packed_position_ids(lengths).tolist()
    total = allowed.shape[0]
    causal = torch.ones(total, total, dtype=torch.bool).tril()
    leak = causal & ~allowed
    fig, panels = new_subplots(7.6, 3.7, 1, 2, sharey=True)
    colours = ListedColormap(["white", _TOKEN, _LEAK])
    for ax, state, title in ((panels[0], allowed.long(), "packed_causal_mask"),
                             (panels[1], allowed.long() + 2 * leak.long(),
                              "causal mask only")):
        ax.imshow(state.numpy(), cmap=colours, vmin=0, vmax=2)
        set_ticks(ax.xaxis, np.arange(total), ids, labelsize=7)
        set_ticks(ax.yaxis, np.arange(total), ids, labelsize=7)
        set_ticks(ax.xaxis, np.arange(total + 1) - 0.5, minor=True)
        set_ticks(ax.yaxis, np.arange(total + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="0.85", lw=0.6)
        ax.tick_params(which="minor", length=0)
        for edge in np.cumsum(lengths)[:-1] - 0.5:
            ax.axhline(edge, color="k", lw=1.0)
            ax.axvline(edge, color="k", lw=1.0)
        ax.set_xlabel("key (labelled by its position id)")
        ax.set_title(title, fontsize=9)
    panels[0].set_ylabel("query (labelled by its position id)")
    handles = [Patch(facecolor=_TOKEN, edgecolor="0.6", label="attention allowed"),
               Patch(facecolor="white", edgecolor="0.6", label="masked"),
               Patch(facecolor=_LEAK, label="allowed, but another document"),
               Patch(facecolor="none", edgecolor="k", label="document boundary")]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=7)
    return fig


def eviction(n_sinks: int = 4, window: int = 60, evicted: int = 200, *, dim: int = 64,
             base: float = 10000.0, n_draws: int = 4000, seed: int = 0) -> BookFigure:
    """Scores after evicting keys, with and without moving the kept keys.

    A cache held ``n_sinks + evicted + window`` keys; the ``evicted`` keys after
    the sinks are dropped and the kept ones should sit at the positions
    ``0 .. n_sinks + window - 1`` of the cache, with the next query after
    them. Left: one query's scores against the kept keys, recomputed at the
    new positions, moved with :func:`~posenc_lib.rope.rerotate`, and left
    where they were. Right: the relative RMS score error of a key moved by
    ``δ`` positions too few, closed form
    (:func:`~posenc_lib.positions.expected_score_mismatch`) and Monte Carlo.
    """
    n_sinks = _validate.nonnegative_int("n_sinks", n_sinks)
    window = _validate.positive_int("window", window)
    evicted = _validate.positive_int("evicted", evicted)
    dim = _validate.even_int("dim", dim)
    n_draws = _validate.positive_int("n_draws", n_draws)
    f = rope.inv_freq(dim, base, dtype=torch.float64)
    generator = torch.Generator().manual_seed(seed)
    kept = n_sinks + window
    old = torch.cat([torch.arange(n_sinks), torch.arange(n_sinks + evicted, kept + evicted)])
    new = torch.arange(kept)
    q, keys = torch.randn(1, dim, generator=generator, dtype=torch.float64), \
        torch.randn(kept, dim, generator=generator, dtype=torch.float64)
    query = rope.apply_rope(q, [kept], f)
    cached = rope.apply_rope(keys, old, f)
    shift = torch.where(new < n_sinks, 0, -evicted)
    scores = {"recomputed at the new positions": rope.apply_rope(keys, new, f),
              "rerotate(cached, −evicted)": rope.rerotate(cached, shift, f),
              "left unmoved": cached}
    fig, (left, right) = new_subplots(8.4, 3.4, 1, 2, width_ratios=[1.2, 1])
    styles = [dict(color="0.2", lw=1.4), dict(color="C0", ls="none", marker="o", ms=4),
              dict(color="C3", ls="none", marker="x", ms=4)]
    for (label, k), style in zip(scores.items(), styles):
        left.plot(new.numpy(), (query @ k.T)[0].numpy() / math.sqrt(dim), label=label,
                  **style)
    left.axvspan(-0.5, n_sinks - 0.5, color="0.9", lw=0, label="sinks (never moved)")
    left.set_xlabel("key position in the cache after eviction")
    left.set_ylabel("score q·k / √d")
    left.set_title(f"{evicted} keys evicted after {n_sinks} sinks", fontsize=9)
    left.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    left.grid(alpha=0.3)
    deltas = np.unique(np.geomspace(1, 10_000, 60).round().astype(int))
    closed = positions.expected_score_mismatch(torch.as_tensor(deltas)[:, None] * f)
    right.semilogx(deltas, closed.numpy(), color="C3", lw=1.5,
                   label="closed form, expected_score_mismatch")
    sample = deltas[::6]
    qs, ks = torch.randn(2, n_draws, dim, generator=generator, dtype=torch.float64)
    true = (qs * ks).sum(-1)                                       # both at position 0
    moved = rope.apply_rope(ks.expand(len(sample), -1, -1), torch.as_tensor(sample)[:, None], f)
    wrong = (qs * moved).sum(-1)
    measured = ((wrong - true) ** 2).mean(-1).sqrt() / true.pow(2).mean().sqrt()
    right.semilogx(sample, measured.numpy(), "o", color="k", ms=4,
                   label=f"Monte Carlo, {n_draws:,} random (q, k)")
    right.axhline(math.sqrt(2), color="0.5", ls=":", lw=1, label="√2: unrelated phases")
    plain_log_axis(right.xaxis)
    right.set_xlabel("δ: positions the key is off by")
    right.set_ylabel("RMS score error / RMS score")
    right.set_title(f"dim = {dim}, base = {base:g}", fontsize=9)
    right.legend(fontsize=7, loc="upper left")
    right.grid(alpha=0.3)
    return fig


def _dynamic_inv_freq(dim, base, factor, original, seq_len):
    return scaling.rope_parameters("dynamic", dim, base, factor=factor,
                                   max_position_embeddings=original, seq_len=seq_len,
                                   dtype=torch.float64)[0]


@functools.lru_cache(maxsize=64)
def _mismatch_curve(dim: int, base: float, factor: float, length: int, n_mult: int):
    """One curve of :func:`dynamic_mismatch`: cached keys ``j`` and their mismatch.

    Cached (a few hundred frequency ladders per curve), so that a slider
    returning to a value redraws without recomputing it.
    """
    n = n_mult * length
    j = torch.unique(torch.cat([torch.arange(0, n, max(1, n // 400)),
                                torch.tensor([length - 1, length, n - 1])]))
    now = _dynamic_inv_freq(dim, base, factor, length, n)
    sizes = torch.clamp(j + 1, min=length)
    cached = torch.stack([_dynamic_inv_freq(dim, base, factor, length, int(s))
                          for s in sizes.unique()])
    index = torch.searchsorted(sizes.unique(), sizes)
    phase = j[:, None].double() * (cached[index] - now)
    return j.numpy(), positions.expected_score_mismatch(phase).numpy()


def dynamic_mismatch(factor: float = 4.0, base: float = 10000.0, *, dim: int = 128,
                     original_max_position_embeddings: int = 4096) -> BookFigure:
    """Dynamic NTK with a KV cache: how far each cached key's scores are from fresh ones.

    The prompt fills the original context ``L``; then tokens are generated one
    at a time, so (as in transformers' ``dynamic_rope_update``) key ``j`` was
    rotated with the frequencies for length ``max(L, j + 1)``. At the current
    length ``n`` the query and a freshly computed key use those for ``n``. The
    curves give the expected relative RMS score error
    (:func:`~posenc_lib.positions.expected_score_mismatch`) of each cached
    key, for three current lengths.
    """
    factor = _validate.finite_float("factor", factor, greater_than=1.0)
    length = _validate.positive_int("original_max_position_embeddings",
                                    original_max_position_embeddings, minimum=2)
    dim = _validate.even_int("dim", dim, minimum=4)
    fig, ax = new_subplots(6.8, 3.4)
    for n_mult, colour in ((2, "C0"), (4, "C1"), (8, "C3")):
        j, mismatch = _mismatch_curve(dim, base, factor, length, n_mult)
        ax.plot(j, mismatch, color=colour, lw=1.4,
                label=f"current length n = {n_mult} L")
    ax.axvline(length, color="k", lw=0.8, ls="--", label=f"L = {length:,} (prompt)")
    ax.axhline(math.sqrt(2), color="0.5", ls=":", lw=1, label="√2: unrelated phases")
    ax.set_xlabel("position j of the cached key")
    ax.set_ylabel("RMS score error / RMS score")
    ax.set_title(f"dynamic NTK, factor = {factor:g}, base = {base:g}, dim = {dim}",
                 fontsize=9)
    ax.set_ylim(0, 1.6)
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
    return fig


def mrope_continuation(segments=(("text", 4), ("image", (1, 8, 12)), ("text", 3)),
                       n_generated: int = 6, *, spatial_merge_size: int = 2) -> BookFigure:
    """M-RoPE's three position channels over a prompt and the tokens generated after it.

    The prompt's ids come from :func:`~posenc_lib.multidim.mrope_position_ids`;
    a generated token at index ``c`` gets ``c + rope_deltas`` in every channel.
    """
    n_generated = _validate.positive_int("n_generated", n_generated)
    ids = multidim.mrope_position_ids(list(segments), spatial_merge_size=spatial_merge_size)
    prompt = ids.shape[1]
    delta = int(ids.max()) + 1 - prompt
    index = np.arange(prompt + n_generated)
    generated = np.arange(prompt, prompt + n_generated) + delta
    fig, ax = new_subplots(7.2, 3.9)
    start = 0
    colours = {"text": "0.93", "image": "#dbe9f6", "video": "#fde3c8"}
    for (kind, _), size in zip(segments, multidim.segment_lengths(
            list(segments), spatial_merge_size=spatial_merge_size)):
        ax.axvspan(start - 0.5, start + size - 0.5, color=colours[kind], lw=0)
        start += size
    ax.axvspan(prompt - 0.5, prompt + n_generated - 0.5, color="#e6f2e1", lw=0)
    for axis, (name, colour, marker) in enumerate(
            (("temporal", "C3", "s"), ("height", "C0", "o"), ("width", "C2", "^"))):
        channel = np.concatenate([ids[axis].numpy(), generated])
        ax.plot(index, channel, marker=marker, ls="none", ms=3.5, color=colour,
                label=f"{name} id")
    ax.plot(index, index + delta, color="k", lw=0.9, ls="--",
            label=f"index + rope_deltas ({delta})")
    ax.plot(index, index, color="0.5", lw=0.8, ls=":", label="index (no delta)")
    handles, labels = ax.get_legend_handles_labels()
    handles += [Patch(color=colours["text"], label="text"),
                Patch(color=colours["image"], label="image"),
                Patch(color="#e6f2e1", label="generated")]
    fig.legend(handles=handles, fontsize=7, loc="outside lower center", ncol=5)
    ax.set_xlabel("token index c in the sequence")
    ax.set_ylabel("position id")
    ax.grid(alpha=0.3)
    return fig
