"""Figures for chapter 7: the measured length-generalization experiment."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from matplotlib.ticker import LogLocator

from ._base import BookFigure, new_figure, plain_log_axis

__all__ = ["ppl_vs_length", "ppl_vs_position"]

def _perplexity_axis(axis) -> None:
    """Log scale with plain labels at 1, 2 and 5 times each power of ten."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    plain_log_axis(axis)


_STYLE = {  # one colour per encoding, used by both figures
    "nope": "C7", "sinusoidal": "C0", "learned": "C1", "t5": "C2", "alibi": "C3",
    "rope": "C4", "xpos": "C5",
    "rope+linear": "C6", "rope+ntk": "C8", "rope+dynamic": "C9", "rope+yarn": "k",
}


def _lines(results: Mapping, models: Sequence[str] | None):
    models = list(results["models"]) if models is None else list(models)
    unknown = [m for m in models if m not in results["models"]]
    if unknown:
        raise ValueError(f"models {unknown} are not in the results; have "
                         f"{list(results['models'])}")
    return models


def ppl_vs_length(results: Mapping, *, trained: Sequence[str] | None = None,
                  extended: Sequence[str] | None = None) -> BookFigure:
    """Perplexity over whole windows against the evaluation length.

    Left: every trained encoding. Right: the RoPE model with each
    context-extension method applied at inference (no fine-tuning).
    """
    models = results["models"]
    if trained is None:
        trained = [m for m in models if "base_model" not in models[m]]
    if extended is None:
        extended = ["rope"] * ("rope" in models) + [m for m in models if "base_model" in models[m]]
    train_length = results["config"]["train_length"]
    fig = new_figure(9.0, 3.6)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, names, title in ((axes[0], trained, "trained encodings"),
                             (axes[1], extended, "RoPE + extension at inference")):
        for name in _lines(results, names):
            lengths = sorted(int(k) for k in models[name]["eval"])
            ppl = [models[name]["eval"][str(n)]["ppl"] for n in lengths]
            ax.plot(lengths, ppl, "o-", ms=4, color=_STYLE.get(name), label=name)
        ax.axvline(train_length, color="grey", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.set_yscale("log")
        _perplexity_axis(ax.yaxis)
        ax.set_xlabel("evaluation length (bytes)")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, ncol=2)
    axes[0].set_ylabel("perplexity per byte (log scale)")
    fig.suptitle(f"Trained on {train_length}-byte windows (dotted line)", fontsize=10)
    return fig


def ppl_vs_position(results: Mapping, *, length: int | None = None,
                    models: Sequence[str] | None = None) -> BookFigure:
    """Perplexity per position bucket inside windows of ``length`` (default: longest)."""
    config = results["config"]
    train_length = config["train_length"]
    if length is None:
        length = train_length * max(config["eval_multipliers"])
    fig = new_figure(9.0, 3.6)
    ax = fig.subplots()
    for name in _lines(results, models):
        entry = results["models"][name]["eval"].get(str(length))
        if entry is None:
            raise ValueError(f"length {length} was not evaluated")
        buckets = np.asarray(entry["bucket_ppl"])
        width = length / len(buckets)
        centers = (np.arange(len(buckets)) + 0.5) * width
        ax.plot(centers, buckets, "o-" if "+" not in name else "s--", ms=3,
                color=_STYLE.get(name), label=name)
    ax.axvline(train_length, color="grey", ls=":", lw=1, label="training length")
    ax.set_yscale("log")
    _perplexity_axis(ax.yaxis)
    ax.set_xlabel(f"position inside a {length}-byte window")
    ax.set_ylabel("perplexity per byte (log scale)")
    ax.set_title("Where each model breaks down", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=3)
    return fig
