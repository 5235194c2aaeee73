"""Import paths that moved, kept working for a deprecation period.

The reader tools moved into :mod:`posenc_lib.tools` and the config reader became
public as :mod:`posenc_lib.config_reader` (version 0.1.0). Importing an old path
(``import posenc_lib.inspect``, ``from posenc_lib import diagnose``) gives the
module at its new path, the same object, with a ``DeprecationWarning``; ``python -m
posenc_lib.inspect ...`` still runs the tool (``python -m posenc_lib inspect ...`` is
the command line now). Nothing inside the repository uses an old path
(tests/test_import_graph.py checks); the aliases go in 0.3.0.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: ``{old module name: new module name}``
MOVED = {
    "posenc_lib._config": "posenc_lib.config_reader",
    "posenc_lib._diagnose_fit": "posenc_lib.tools.diagnose.fit",
    "posenc_lib.conformance": "posenc_lib.tools.conformance",
    "posenc_lib.crosscheck": "posenc_lib.tools.crosscheck",
    "posenc_lib.diagnose": "posenc_lib.tools.diagnose",
    "posenc_lib.engines": "posenc_lib.tools.engines",
    "posenc_lib.exercises": "posenc_lib.tools.exercises",
    "posenc_lib.experiment": "posenc_lib.tools.experiment",
    "posenc_lib.inspect": "posenc_lib.tools.inspector",
    "posenc_lib.tiny_model": "posenc_lib.tools.tiny_model",
}

#: Old module entry points (``python -m OLD ...``) and the tool each runs.
COMMANDS = {
    "posenc_lib.crosscheck": "crosscheck",
    "posenc_lib.diagnose": "diagnose",
    "posenc_lib.experiment": "experiment",
    "posenc_lib.inspect": "inspect",
}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Finds an old name and loads the module at its new one."""

    def __init__(self):
        self._specs = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {MOVED[spec.name]}; import it from there "
                      f"(the old path goes in posenc_lib 0.3.0)", DeprecationWarning,
                      stacklevel=2)
        module = importlib.import_module(MOVED[spec.name])
        # the import system sets module.__spec__ to the alias's spec after this
        # returns; exec_module puts the module's own back
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        """Nothing to run (:meth:`create_module` returned the imported module), but
        give the module back its own ``__spec__``, which the import system replaced
        with the alias's (``runpy`` and ``importlib.util.find_spec`` read it)."""
        module.__spec__ = self._specs.pop(module.__name__)

    def is_package(self, fullname):
        return False

    def get_source(self, fullname):
        """``python -m OLD args``: the code runpy runs as ``__main__``."""
        tool = COMMANDS.get(fullname)
        if tool is None:
            raise ImportError(f"{fullname} has no command line; it moved to "
                              f"{MOVED[fullname]}", name=fullname)
        return ("import sys\n"
                "from posenc_lib.__main__ import main\n"
                f"sys.exit(main([{tool!r}, *sys.argv[1:]]))\n")


def install() -> None:
    """Put the alias finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
