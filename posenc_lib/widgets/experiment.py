"""Interactive figures for chapter 7: an explorer of the stored study."""

from __future__ import annotations

import functools
from typing import Mapping

from .. import experiment
from ..figures import experiment as figures
from .core import InteractiveFigure, Slider

__all__ = ["EXPLORER", "explorer_for", "stored_results"]

_ALT = ("Perplexity per position of one trained or fine-tuned model or RoPE extension at "
        "one evaluation length, with its 95 % band and the sliding-window reference.")


@functools.lru_cache(maxsize=1)
def stored_results() -> dict:
    """``results/length_generalization.json``, read once (configuration-checked)."""
    return experiment.load_results(check_environment=False)


def study_explorer(model: str = "rope", length: int = 512):
    """:func:`posenc_lib.figures.experiment.explorer` on the stored results."""
    return figures.explorer(stored_results(), model, length)


def _sliders(names, lengths) -> list:
    # Every model and every length in the static book too (16 x 4 frames for
    # the default configuration), not an evenly spaced subset.
    names, lengths = tuple(names), tuple(lengths)
    return [Slider.choice("model", names, default="rope" if "rope" in names else names[0],
                          label="model or extension", static=names),
            Slider.choice("length", lengths, default=lengths[-1],
                          label="evaluation length", static=lengths, kind="slider")]


def explorer_for(results: Mapping) -> InteractiveFigure:
    """The explorer over any results file's content (its models and lengths).

    ``EXPLORER`` is this figure for the stored results of the default
    :class:`~posenc_lib.experiment.Config`.
    """
    config = experiment.Config.from_dict(results["config"])
    return InteractiveFigure(figures.explorer, _sliders(results["models"],
                                                        config.eval_lengths),
                             fixed={"results": results}, alt=_ALT)


_config = experiment.Config()
_NAMES = (tuple(experiment.MODELS) + tuple(experiment.FINETUNES)
          + tuple(f"rope+{e}" for e in experiment.EXTENSIONS))

EXPLORER = InteractiveFigure(study_explorer, _sliders(_NAMES, _config.eval_lengths),
                             alt=_ALT)
