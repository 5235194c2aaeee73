"""Figures for chapter 7: the measured length-generalization study.

Every curve is a mean over seeds and held-out windows with its 95 %
t-interval (:func:`posenc_lib.tools.experiment.interval`, the windows clustered by
source file) drawn as a band or an error bar. Perplexity is ``exp`` of the
mean loss, and its interval ``exp`` of the loss interval.
"""

from __future__ import annotations

import functools
import math
from typing import Mapping, Sequence

import numpy as np
from matplotlib.ticker import LogLocator

from ..tools import experiment
from ._base import BookFigure, new_figure, new_subplots, plain_log_axis, set_ticks
__all__ = ["STYLE", "band_perplexity", "context_effect", "position_curves",
           "training_curves", "retrieval_accuracy", "offset_accuracy", "explorer"]

#: One colour (and marker) per model, shared by every figure of the chapter.
STYLE = {
    "nope": ("C7", "o"), "nope-nobos": ("0.55", "x"), "sinusoidal": ("C0", "s"),
    "learned": ("C1", "D"), "t5": ("C2", "^"), "alibi": ("C3", "v"), "rope": ("C4", "o"),
    "rope-b32": ("C9", "P"), "xpos": ("C5", "*"),
    "rope+pi": ("C6", "s"), "rope+ntk": ("C8", "D"), "rope+yarn": ("k", "^"),
    "rope+yarn-notemp": ("0.4", "v"), "rope+ntk-yarntemp": ("C1", "<"),
    "rope+dynamic": ("C0", ">"), "rope+dynamic-kv": ("C3", "x"),
    "xpos-sb512": ("C5", "X"), "p-rope": ("C1", "p"), "rnope-swa": ("C6", "h"),
    "rope+dynamic-f": ("C9", "<"), "drope": ("C2", "d"), "rope-ft": ("C4", "x"),
    "rope+pi-ft": ("C6", "P"), "rope+yarn-ft": ("0.2", "^"),
}


def _style(name: str):
    return STYLE.get(name, ("C7", "o"))


def _perplexity_axis(axis) -> None:
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    plain_log_axis(axis)


def _band_labels(results: Mapping) -> list[str]:
    L = results["config"]["train_length"]
    labels = []
    for lo, hi in results["bands"]:
        labels.append(f"{lo // L}L–{hi // L}L" if lo else f"0–{hi // L}L")
    return labels


def _check(results: Mapping, names: Sequence[str]) -> list[str]:
    names = list(names)
    unknown = [n for n in names if n not in results["models"]]
    if unknown:
        raise ValueError(f"models {unknown} are not in the results; have "
                         f"{list(results['models'])}")
    return names


@functools.lru_cache(maxsize=4096)
def _cached_interval(values: bytes, shape: tuple, other: bytes | None,
                     clusters: tuple | None):
    x = np.frombuffer(values).reshape(shape)
    y = None if other is None else np.frombuffer(other).reshape(shape)
    return experiment.interval(x, y, clusters=clusters)


def _clusters(results: Mapping) -> tuple | None:
    """The source file of every window, as :func:`posenc_lib.tools.experiment.compare`
    uses them (``None`` when all windows come from one file)."""
    files = experiment.window_files(results)
    return tuple(files.tolist()) if len(set(files.tolist())) > 1 else None


def _interval(values: np.ndarray, other: np.ndarray | None = None,
              clusters: tuple | None = None) -> experiment.Interval:
    """Interval over (seeds, windows), memoised on the numbers (frames repeat them)."""
    x = np.ascontiguousarray(values, dtype=np.float64)
    y = None if other is None else np.ascontiguousarray(other, dtype=np.float64).tobytes()
    return _cached_interval(x.tobytes(), x.shape, y, clusters)


def _ppl_band(ax, x, values: np.ndarray, name: str, label: str, *, ls="-",
              clusters: tuple | None = None):
    """Mean perplexity per column of ``values (seeds, units, points)`` with its band."""
    cis = [_interval(values[..., j], clusters=clusters) for j in range(values.shape[-1])]
    colour, marker = _style(name)
    ax.plot(x, [math.exp(c.mean) for c in cis], ls=ls, marker=marker, ms=3, color=colour,
            label=label)
    ax.fill_between(x, [math.exp(c.low) for c in cis], [math.exp(c.high) for c in cis],
                    color=colour, alpha=0.2, lw=0)


def band_perplexity(results: Mapping, models: Sequence[str]) -> BookFigure:
    """Perplexity per position band for ``models``, with 95 % intervals.

    Every model is scored on the same target bytes in each band.
    """
    models = _check(results, models)
    labels = _band_labels(results)
    fig, ax = new_subplots(9.0, 3.8)
    width = 0.8 / len(models)
    for k, name in enumerate(models):
        bands = experiment.band_losses(results, name)
        cis = [_interval(bands[..., b], clusters=_clusters(results))
               for b in range(bands.shape[-1])]
        x = np.arange(len(cis)) - 0.4 + (k + 0.5) * width
        mean = np.array([math.exp(c.mean) for c in cis])
        err = np.array([[mean[i] - math.exp(c.low), math.exp(c.high) - mean[i]]
                        for i, c in enumerate(cis)]).T
        colour, marker = _style(name)
        ax.errorbar(x, mean, yerr=err, fmt=marker, ms=4, color=colour, capsize=2, label=name)
    set_ticks(ax.xaxis, range(len(labels)), [f"positions {t}" for t in labels])
    ax.set_yscale("log")
    _perplexity_axis(ax.yaxis)
    ax.set_ylabel("perplexity per byte (log scale)")
    ax.set_xlabel(f"position band (L = {results['config']['train_length']} = training "
                  "length); bars: 95 % interval")
    ax.grid(alpha=0.3, which="both", axis="y")
    ax.legend(fontsize=7, ncol=min(len(models), 5), loc="upper left")
    return fig


def context_effect(results: Mapping, models: Sequence[str], *,
                   zoom: Sequence[str] = ()) -> BookFigure:
    """Full context over sliding window, per band: what positions beyond ``L`` do.

    For each model and band, the paired difference in mean loss between
    reading the whole window and reading every target through a window of
    ``L`` positions (same targets, same seeds), as a perplexity ratio. Below
    1: the long context helps; above 1: the unseen positions hurt. ``zoom``
    lists models drawn again in a second panel on a linear scale.
    """
    models = _check(results, models)
    zoom = _check(results, zoom)
    labels = _band_labels(results)[1:]
    fig = new_figure(9.6, 3.8)
    axes = fig.subplots(1, 2, width_ratios=(1.5, 1)) if zoom else [fig.subplots()]
    for ax, names in zip(axes, (models, zoom)):
        width = 0.8 / len(names)
        for k, name in enumerate(names):
            full = experiment.band_losses(results, name)
            window = experiment.band_losses(results, name, sliding=True)
            cis = [_interval(full[..., b], window[..., b], _clusters(results))
                   for b in range(1, full.shape[-1])]
            x = np.arange(len(cis)) - 0.4 + (k + 0.5) * width
            mean = np.array([math.exp(c.mean) for c in cis])
            err = np.array([[mean[i] - math.exp(c.low), math.exp(c.high) - mean[i]]
                            for i, c in enumerate(cis)]).T
            colour, marker = _style(name)
            ax.errorbar(x, mean, yerr=err, fmt=marker, ms=4, color=colour, capsize=2,
                        label=name)
        ax.axhline(1.0, color="grey", lw=1, ls=":", label="no effect")
        set_ticks(ax.xaxis, range(len(labels)), labels)
        ax.set_xlabel("position band; bars: paired 95 % interval")
        ax.grid(alpha=0.3, which="both", axis="y")
    axes[0].set_yscale("log")
    _perplexity_axis(axes[0].yaxis)
    axes[0].set_ylabel("perplexity ratio, full / sliding\n(log scale)")
    axes[0].legend(fontsize=7, ncol=3, loc="upper left")
    if zoom:
        axes[1].set_ylabel("perplexity ratio, full / sliding")
        axes[1].set_title("zoom (linear scale)", fontsize=10)
        axes[1].legend(fontsize=7, loc="upper left")
    return fig


def position_curves(results: Mapping, models: Sequence[str], *, length: int | None = None,
                    sliding: Sequence[str] = ()) -> BookFigure:
    """Perplexity per bucket of positions inside windows of ``length``, with bands.

    ``sliding`` lists models also drawn (dashed) as read through a sliding
    window of the training length: the in-distribution reference.
    """
    models = _check(results, models)
    config = results["config"]
    L, size = config["train_length"], results["bucket"]
    length = config["max_multiplier"] * L if length is None else length
    fig, ax = new_subplots(9.0, 3.8)
    for name in models:
        values = experiment.losses(results, name, length)
        x = (np.arange(values.shape[-1]) + 0.5) * size
        _ppl_band(ax, x, values, name, name, clusters=_clusters(results))
    for name in _check(results, sliding):
        values = experiment.losses(results, name, length, sliding=True)
        x = (np.arange(values.shape[-1]) + 0.5) * size
        _ppl_band(ax, x, values, name, f"{name}, sliding window of L", ls="--",
                  clusters=_clusters(results))
    ax.axvline(L, color="grey", ls=":", lw=1, label=f"training length L = {L}")
    ax.set_yscale("log")
    _perplexity_axis(ax.yaxis)
    ax.set_xlim(0, length)
    ax.set_xlabel(f"position inside the window (bytes; buckets of {size})")
    ax.set_ylabel("perplexity per byte (log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=3)
    return fig


def training_curves(results: Mapping, models: Sequence[str]) -> BookFigure:
    """Training loss (one batch every ``log_every`` steps) of ``models``, the
    mean over seeds as a line and the range over seeds as a band."""
    models = _check(results, models)
    fig, ax = new_subplots(9.0, 3.8)
    for name in models:
        train = results["models"][name].get("train")
        if train is None:
            raise ValueError(f"models: {name!r} is not a trained model")
        curves = np.asarray(train["loss_curve"])          # (seeds, logged steps)
        colour, marker = _style(name)
        ax.plot(train["steps"], curves.mean(0), color=colour, lw=1, label=name)
        ax.fill_between(train["steps"], curves.min(0), curves.max(0), color=colour,
                        alpha=0.15, lw=0)
    ax.set_yscale("log")
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss, one batch\n(nats per byte, log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=3)
    return fig


def retrieval_accuracy(results: Mapping, models: Sequence[str]) -> BookFigure:
    """Accuracy on the retrieval task per distance band for ``models``, from
    the retrieval results file (``results/retrieval.json``'s content), with
    95 % intervals made for 0/1 outcomes
    (:func:`posenc_lib.tools.experiment.accuracy_interval`), and the chance level
    and the order-free bound of each band."""
    from .. import retrieval

    models = list(models)
    unknown = [n for n in models if n not in results["outcomes"]]
    if unknown:
        raise ValueError(f"models {unknown} are not in the results; have "
                         f"{list(results['outcomes'])}")
    bands = list(results["bands"])
    fig, ax = new_subplots(10.5, 3.8)
    _accuracy_points(ax, models, bands,
                     lambda name, band: retrieval.outcomes(results, name, band))
    edges = np.arange(len(bands) + 1) - 0.5
    for key, label, ls in (("chance", "chance", ":"), (None, "order-free bound", "--")):
        values = (results["chance"] if key else results["controls"]["prefix_sets"])
        ax.stairs([values[b] for b in bands], edges, color="grey", ls=ls, label=label,
                  baseline=None)
    _accuracy_axes(ax, [f"distances {b}" for b in bands],
                   "distance band (every item length of the band); bars: 95 % interval")
    return fig


def _accuracy_points(ax, models: Sequence[str], cells: Sequence, outcomes) -> None:
    """One error bar per model and cell, side by side within each cell: the
    accuracy of ``outcomes(name, cell)`` (``(seeds, items)`` 0/1) with its
    95 % interval made for 0/1 outcomes."""
    width = 0.8 / len(models)
    for k, name in enumerate(models):
        cis = [experiment.accuracy_interval(outcomes(name, cell)) for cell in cells]
        x = np.arange(len(cells)) - 0.4 + (k + 0.5) * width
        mean = np.array([c.mean for c in cis])
        err = np.array([[c.mean - c.low, c.high - c.mean] for c in cis]).T
        colour, marker = _style(name)
        ax.errorbar(x, mean, yerr=err, fmt=marker, ms=4, color=colour, capsize=2,
                    label=name)


def _accuracy_axes(ax, labels: Sequence[str], xlabel: str) -> None:
    set_ticks(ax.xaxis, range(len(labels)), list(labels))
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")
    ax.set_xlabel(xlabel)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))


def offset_accuracy(results: Mapping, models: Sequence[str], *,
                    chance: float | None = None) -> BookFigure:
    """Accuracy on the offset task per cell for ``models``, from the offset
    study's results (``results/retrieval_offset.json``'s content): the
    ``"in-train"`` cell, then each distance band, with 95 % intervals made
    for 0/1 outcomes (:func:`posenc_lib.tools.experiment.accuracy_interval`
    over seeds x items), the reader panel's margin on the bands and, if
    given, the ``chance`` level of a model's guess.

    Raises:
        ValueError: a name of ``models`` is not in the results.
    """
    models = list(models)
    unknown = [n for n in models if n not in results["outcomes"]]
    if unknown:
        raise ValueError(f"models {unknown} are not in the offset results; have "
                         f"{list(results['outcomes'])}")
    if not models:
        raise ValueError("models is empty: name at least one model of the results")
    cells = list(results["cells"])
    fig, ax = new_subplots(10.5, 3.8)
    _accuracy_points(ax, models, cells,
                     lambda name, cell: np.asarray(results["outcomes"][name][cell]))
    held = results["readers"]["held_cells"]
    at = [cells.index(c) for c in held]
    margin = results["readers"]["margin"]["upper_accuracy"]
    ax.hlines(margin, min(at) - 0.5, max(at) + 0.5, color="grey", ls="--",
              label="readers' margin")
    if chance is not None:
        ax.axhline(chance, color="grey", ls=":", label=f"chance ({chance:.3g})")
    labels = [f"distances {results['cells'][c]['band']}" if c in held
              else "in training rows" for c in cells]
    _accuracy_axes(ax, labels, f"test cell ({results['study']['items']} items each); "
                   "bars: 95 % interval over seeds and items")
    return fig


def explorer(results: Mapping, model: str = "rope", length: int = 512) -> BookFigure:
    """One model (or RoPE with an extension) evaluated at ``length``:
    perplexity per position bucket with its 95 % band, against RoPE read
    through a sliding window of the training length (the in-distribution
    reference on the same targets)."""
    _check(results, [model])
    config = results["config"]
    L, size = config["train_length"], results["bucket"]
    longest = config["max_multiplier"] * L
    low, high = _explorer_limits(results)
    fig, left = new_subplots(9.0, 3.6)
    values = experiment.losses(results, model, length)
    x = (np.arange(values.shape[-1]) + 0.5) * size
    reference = experiment.losses(results, "rope", length, sliding=True)
    clusters = _clusters(results)
    _ppl_band(left, x, reference, "nope", "rope, sliding window of L", ls="--",
              clusters=clusters)
    _ppl_band(left, x, values, model, model, clusters=clusters)
    left.axvline(L, color="grey", ls=":", lw=1, label=f"training length L = {L}")
    left.set_yscale("log")
    left.set_ylim(low, high)
    _perplexity_axis(left.yaxis)
    left.set_xlim(0, longest)
    left.set_xlabel("position inside the window (bytes)")
    left.set_ylabel("perplexity per byte (log scale)")
    left.set_title(f"{model}, windows of {length} bytes", fontsize=10)
    left.grid(alpha=0.3, which="both")
    left.legend(fontsize=9, loc="upper left")
    return fig


def _explorer_limits(results: Mapping) -> tuple[float, float]:
    """Axis limits shared by every frame of the explorer: the perplexity range
    over every model's per-bucket means."""
    means = [np.asarray(entry[table][length]).mean(axis=(0, 1))
             for entry in results["models"].values()
             for table in ("loss", "sliding") if table in entry
             for length in entry[table]]
    values = np.exp(np.concatenate(means))
    return float(values.min()) / 1.2, float(values.max()) * 1.2
