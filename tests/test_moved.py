"""The command line ``python -m posenc_lib TOOL`` and the old import paths kept
for a deprecation period (posenc_lib/_moved.py)."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import warnings

import pytest

from posenc_lib import __main__ as cli
from posenc_lib._moved import COMMANDS, MOVED


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_import_path_is_the_new_module_with_a_warning(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    # the module keeps its own spec (runpy and find_spec read it)
    assert module.__spec__.name == new and module.__name__ == new
    assert importlib.util.find_spec(new) is module.__spec__
    sys.modules.pop(old, None)


def test_from_import_of_an_old_name():
    sys.modules.pop("posenc_lib.inspect", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from posenc_lib import inspect as old  # noqa: F401
    from posenc_lib.tools import inspector

    assert old is inspector and old.inspect_config is inspector.inspect_config
    sys.modules.pop("posenc_lib.inspect", None)


def _run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=120)


def test_every_tool_has_an_entry_and_help():
    assert set(cli.TOOLS) == {"inspect", "crosscheck", "diagnose", "experiment"}
    assert set(COMMANDS.values()) == set(cli.TOOLS)
    for name, (module, function, _) in cli.TOOLS.items():
        assert callable(getattr(importlib.import_module(module), function)), name
    out = _run("-m", "posenc_lib", "--help")
    assert out.returncode == 0 and all(name in out.stdout for name in cli.TOOLS)


def test_the_command_line_runs_a_tool_and_refuses_an_unknown_one():
    out = _run("-m", "posenc_lib", "inspect", "llama-3.1-8b", "--json")
    assert out.returncode == 0, out.stderr
    assert '"rotary_dim": 128' in out.stdout
    old = _run("-m", "posenc_lib.inspect", "llama-3.1-8b", "--json")
    assert (old.returncode, old.stdout) == (0, out.stdout), old.stderr
    bad = _run("-m", "posenc_lib", "inspekt")
    assert bad.returncode == 2 and "unknown tool 'inspekt'" in bad.stderr
    assert _run("-m", "posenc_lib").returncode == 2
    none = _run("-m", "posenc_lib.engines")
    assert none.returncode != 0 and "posenc_lib.tools.engines" in none.stderr


def test_main_passes_argv_and_the_status(capsys):
    with pytest.raises(SystemExit) as stop:  # argparse's --help exits 0
        cli.main(["diagnose", "--help"])
    assert stop.value.code == 0 and "python -m posenc_lib diagnose" in capsys.readouterr().out
    assert cli.main(["inspect", "no-such-model"]) == 2



@pytest.mark.parametrize("old", sorted(COMMANDS))
def test_every_old_entry_point_gives_its_help(old, monkeypatch, capsys):
    """``python -m OLD --help``: runpy gives the aliased module no file, so
    ``sys.argv[0]`` is None, which argparse's default ``prog`` cannot take."""
    import runpy

    monkeypatch.setattr(sys, "argv", [None, "--help"])
    with pytest.raises(SystemExit) as stop:
        runpy.run_module(old, run_name="__main__")
    assert stop.value.code == 0
    assert f"python -m posenc_lib {COMMANDS[old]}" in capsys.readouterr().out
