"""Interactive figures for chapter 7: an explorer of the stored study."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Mapping

from ..tools import experiment
from ..figures import experiment as figures
from .core import InteractiveFigure, Slider

__all__ = ["EXPLORER", "explorer_for", "stored_results", "default_length"]

_ALT = ("Perplexity per position of one trained or fine-tuned model or RoPE extension at "
        "one evaluation length, with its 95 % band and the sliding-window reference.")


def stored_results(path: str | Path = experiment.RESULTS_PATH) -> dict:
    """The study's results at ``path`` (default
    ``results/length_generalization.json``, relative to the current
    directory), read once (configuration-checked)."""
    return _read(Path(path).resolve())


@functools.lru_cache(maxsize=1)
def _read(path: Path) -> dict:
    return experiment.load_results(path, check_environment=False)


def default_length(config: experiment.Config) -> int:
    """The evaluation length the explorer starts at: ``2 L``, the first one past training.

    There a trained model first meets positions it never saw, and an extension
    runs at its smallest factor, ``s = 2``; the longest length is one slider
    move away. Without ``2 L`` among the lengths, the shortest one past ``L``
    (or ``L`` itself if there is none).
    """
    lengths = config.eval_lengths
    L = config.train_length
    if 2 * L in lengths:
        return 2 * L
    return min((n for n in lengths if n > L), default=L)


def study_explorer(model: str = "rope", length: int | None = None, *,
                   path: str | Path = experiment.RESULTS_PATH):
    """:func:`posenc_lib.figures.experiment.explorer` on the stored results at
    ``path`` (see :func:`stored_results`).

    ``length`` defaults to :func:`default_length` of the stored configuration.
    """
    results = stored_results(path)
    if length is None:
        length = default_length(experiment.Config.from_dict(results["config"]))
    return figures.explorer(results, model, length)


def _sliders(names, config: experiment.Config) -> list:
    # Every model and every length in the static book too (16 x 4 frames for
    # the default configuration), not an evenly spaced subset.
    names, lengths = tuple(names), tuple(config.eval_lengths)
    return [Slider.choice("model", names, default="rope" if "rope" in names else names[0],
                          label="model or extension", static=names),
            Slider.choice("length", lengths, default=default_length(config),
                          label="evaluation length", static=lengths, kind="slider")]


def explorer_for(results: Mapping) -> InteractiveFigure:
    """The explorer over any results file's content (its models and lengths).

    ``EXPLORER`` is this figure for the stored results of the default
    :class:`~posenc_lib.tools.experiment.Config`, read from
    ``results/length_generalization.json`` under the current directory;
    ``EXPLORER.with_fixed(path=...)`` reads them from ``path``.
    """
    config = experiment.Config.from_dict(results["config"])
    return InteractiveFigure(figures.explorer, _sliders(results["models"], config),
                             fixed={"results": results}, alt=_ALT)


_config = experiment.Config()
_NAMES = (tuple(experiment.MODELS) + tuple(experiment.FINETUNES)
          + tuple(f"rope+{e}" for e in experiment.EXTENSIONS))

EXPLORER = InteractiveFigure(study_explorer, _sliders(_NAMES, _config), alt=_ALT)
