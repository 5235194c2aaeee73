"""posenc_lib: the single source of truth for the book's math, figures and widgets.

Layers, each importing only the ones before it (tests/test_import_graph.py checks
it, imports inside functions counted):

0. base: argument checks (``_validate``) and the config reader
   (:mod:`~posenc_lib.config_reader`, with ``_validate_config`` and the config
   classes' defaults both read, ``_defaults``);
1. numerics: :mod:`~posenc_lib.attention`, :mod:`~posenc_lib.absolute`,
   :mod:`~posenc_lib.toy` and one module per family of encodings (torch only);
2. tools: :mod:`posenc_lib.tools` (the inspector, ``diagnose``, the engines, the
   exercises, chapter 7's experiment);
3. figures: :mod:`posenc_lib.figures` (pure functions from parameters to a
   matplotlib ``Figure``; some draw a tool's result);
4. widgets: :mod:`posenc_lib.widgets` (live ipywidgets and kernel-free HTML
   sliders, both built from one definition);
5. the command line: ``python -m posenc_lib TOOL`` (:mod:`posenc_lib.__main__`).

Importing ``posenc_lib`` loads the numerics only.
"""

import importlib

from . import _moved, absolute, attention, rope, toy

_moved.install()  # old import paths (posenc_lib.tools.inspector, ...) still work

# The one place the version is written: pyproject.toml reads it, CITATION.cff and
# the book's front page name it (tests/test_release.py), `make release` uses it.
__version__ = "0.1.0"

__all__ = ["absolute", "attention", "rope", "toy", "__version__"]


def __getattr__(name: str):
    """Import any other numerics submodule on first use (``posenc_lib.alibi``, ...)."""
    if name.startswith("_") or name in ("figures", "widgets", "tools"):
        raise AttributeError(f"module 'posenc_lib' has no attribute {name!r}")
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module 'posenc_lib' has no attribute {name!r}") from None
