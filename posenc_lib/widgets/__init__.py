"""Widgets layer: interactive figures that work live in Jupyter and in the static book.

:mod:`posenc_lib.widgets.core` holds the mechanism
(:class:`~posenc_lib.widgets.core.Slider`,
:class:`~posenc_lib.widgets.core.InteractiveFigure`); one module per chapter
defines that chapter's interactive figures as module-level constants.
:func:`registry` finds them all, so tests and benchmarks can sweep every slider
of every figure.
"""

from __future__ import annotations

import importlib
import pkgutil

from .core import (LIVE_SCALE, MAX_FRAMES, MAX_STATIC_VALUES, InteractiveFigure, Slider,
                   frontend, set_frontend)

__all__ = ["Slider", "InteractiveFigure", "set_frontend", "frontend", "registry",
           "chapter_modules", "MAX_FRAMES", "MAX_STATIC_VALUES", "LIVE_SCALE"]


def chapter_modules() -> list[str]:
    """Names of the modules that define interactive figures (every module but ``core``)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "core")


def registry() -> dict[str, InteractiveFigure]:
    """Every interactive figure of the book, keyed ``"module.NAME"``."""
    found = {}
    for module_name in chapter_modules():
        module = importlib.import_module(f"{__name__}.{module_name}")
        for attr, value in vars(module).items():
            if isinstance(value, InteractiveFigure):
                found[f"{module_name}.{attr}"] = value
    return found
