"""posenc_lib.tools.experiment as a package: its statistics load without torch,
its paths are the caller's (none derived from where the package is installed),
and every name the module had is still there."""

from __future__ import annotations

import ast
import json
import math
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc_lib import _validate, retrieval
from posenc_lib.tools import experiment
from posenc_lib.tools.experiment import results, running, stats

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "posenc_lib" / "tools" / "experiment"

# Load posenc_lib.tools.experiment.stats with the three packages above it as
# empty stand-ins (their __init__ files, which import torch, are not run):
# stats.py and everything it imports runs for real. Then use what needs scipy.
_STATS_ALONE = """
import importlib, json, sys, types
root = sys.argv[1]
for name, folder in (("posenc_lib", ""), ("posenc_lib.tools", "/tools"),
                     ("posenc_lib.tools.experiment", "/tools/experiment")):
    module = types.ModuleType(name)
    module.__path__ = [root + "/posenc_lib" + folder]
    sys.modules[name] = module
stats = importlib.import_module("posenc_lib.tools.experiment.stats")
x = [[0.0, 1.0, 2.0], [1.0, 1.5, 2.5], [0.5, 1.0, 3.0]]
stats.interval(x, clusters=[0, 0, 1]), stats.p_value(x)
stats.accuracy_interval([[1, 0, 1], [1, 1, 0]]), stats.holm_levels([0.01, 0.2])
loaded = sorted(m for m in sys.modules if m.startswith(("torch", "posenc_lib")))
print(json.dumps(loaded))
"""


def test_the_statistics_load_and_run_without_torch():
    """What is checked: stats.py, and whatever it imports, imported in a fresh
    interpreter with its parent packages stubbed, then used (scipy included),
    loads no torch module and no posenc_lib module but itself."""
    out = subprocess.run([sys.executable, "-c", _STATS_ALONE, str(ROOT)], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    assert json.loads(out) == [
        "posenc_lib", "posenc_lib.tools", "posenc_lib.tools.experiment",
        "posenc_lib.tools.experiment.stats"]


_NAMES = st.text(alphabet="abcz_", min_size=1, max_size=8)
_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(),
                    st.booleans(), st.none(), st.text(max_size=3),
                    st.fractions(), st.sampled_from([0, 0.0, -0.0, 1e-320, math.inf]))


def _outcome(check, *args, **kwargs):
    try:
        return ("ok", check(*args, **kwargs))
    except ValueError as error:
        return ("error", str(error))


@given(_NAMES, _VALUES)
def test_the_statistics_own_check_matches_validate(name, value):
    """stats cannot import posenc_lib._validate (torch); its copy of
    finite_float(..., greater_than=0.0) must accept, convert and refuse alike,
    with the same messages."""
    assert _outcome(stats._positive, name, value) == _outcome(
        _validate.finite_float, name, value, greater_than=0.0)


def test_the_statistics_own_check_refuses_what_validate_refuses():
    for value in (0, -1.5, math.nan, math.inf, True, "0.5", None, Fraction(-1, 3)):
        with pytest.raises(ValueError, match="^alpha must be"):
            stats._positive("alpha", value)


def _path_sources(tree: ast.AST) -> list[str]:
    """What locates a module's own file or package: the dunders, and the
    resource readers (importlib.resources, pkg_resources, pkgutil.get_data,
    inspect.getfile)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [getattr(node, "module", None) or ""]
            names += [a.name for a in node.names]
            hit = [n for n in names
                   if n.split(".")[-1] in ("resources", "pkg_resources")]
        elif isinstance(node, ast.Name):
            hit = [node.id] if node.id in _DUNDERS else []
        elif isinstance(node, ast.Attribute):
            hit = [node.attr] if node.attr in _DUNDERS + _READERS else []
        else:
            hit = []
        found += [f"{name} (line {node.lineno})" for name in hit]
    return found


_DUNDERS = ("__file__", "__path__", "__spec__", "__loader__", "__cached__")
_READERS = ("resources", "get_data", "resource_filename", "getfile", "getsourcefile")


def test_no_path_is_derived_from_where_the_package_lies():
    """No source file of the package locates itself (``__file__``,
    importlib.resources, ...), so results/ and the cache can only come from
    the caller; the defaults are relative, to the current directory."""
    found = {path.name: _path_sources(ast.parse(path.read_text()))
             for path in sorted(PACKAGE.glob("*.py"))}
    assert len(found) == 11
    assert {name: where for name, where in found.items() if where} == {}
    # the check sees a planted one
    for planted in ("ROOT = Path(__file__).parents[3]",
                    "from importlib import resources",
                    "ROOT = importlib.resources.files('posenc_lib')",
                    "ROOT = Path(sys.modules[__name__].__spec__.origin)"):
        assert _path_sources(ast.parse(planted)), planted
    defaults = (experiment.RESULTS_PATH, experiment.RETRIEVAL_PATH,
                experiment.READERS_PATH, experiment.CACHE_DIR, retrieval.RESULTS_PATH)
    assert [p for p in defaults if p.is_absolute()] == []
    assert [str(p) for p in defaults] == [
        "results/length_generalization.json", "results/retrieval.json",
        "results/retrieval_readers.json", ".cache/experiment", "results/retrieval.json"]


_INSTALLED = """
import sys
import posenc_lib
assert posenc_lib.__file__.startswith(sys.argv[1]), posenc_lib.__file__
from posenc_lib.__main__ import main
main(["experiment", "--smoke", "--readers", "--quiet"])
main(["experiment", "--help"])
"""


def test_an_installed_copy_writes_and_reads_where_it_runs(tmp_path, monkeypatch):
    """The package copied away from the repository, as ``pip install .``
    leaves it: the command line writes under the directory it runs in, its
    ``--help`` names relative defaults, and the loaders read from there."""
    site, work = tmp_path / "site", tmp_path / "work"
    shutil.copytree(ROOT / "posenc_lib", site / "posenc_lib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    work.mkdir()
    done = subprocess.run([sys.executable, "-c", _INSTALLED, str(site)], cwd=work,
                          env={**os.environ, "PYTHONPATH": str(site)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert sorted(str(p.relative_to(work)) for p in work.rglob("*")) == [
        "results", "results/retrieval_readers.json"]
    assert not (site / "results").exists() and not (tmp_path / "results").exists()
    help_text = " ".join(done.stdout.split())
    for default in ("--out OUT where to write the JSON results (default: "
                    "results/length_generalization.json)",
                    "(default: .cache/experiment)", "default: results/retrieval.json",
                    "default: results/retrieval_readers.json"):
        assert default in help_text
    assert str(tmp_path) not in done.stdout
    monkeypatch.chdir(work)
    smoke = experiment.Config.smoke()
    assert experiment.load_reader_results(config=smoke)["config_hash"] == smoke.hash()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=re.escape(
            f"path: results/retrieval_readers.json does not exist (a relative path "
            f"starts at the current directory, {tmp_path})")):
        experiment.load_reader_results(config=smoke)


def test_companion_files_follow_the_default_out_however_it_is_spelled(tmp_path,
                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    default = experiment.RESULTS_PATH
    for out in (default, tmp_path / default,
                Path("./results/length_generalization.json"),
                Path("results/../results/length_generalization.json")):
        assert running._beside(out, results.READERS_PATH, ".readers.json") == \
            results.READERS_PATH, out
    other = Path("big/study.json")
    assert running._beside(other, results.RETRIEVAL_PATH, ".retrieval.json") == \
        Path("big/study.retrieval.json")


def test_every_name_of_the_module_is_still_there():
    """The API page's names and the module's ``__all__`` (notebooks and scripts
    use them), each from the package, with the classes documented where the
    page says they are."""
    page = (ROOT / "book" / "api.md").read_text()
    listed = re.search(r"automodule:: posenc_lib\.tools\.experiment\n\s+:members: (.*)",
                       page).group(1).split(", ")
    old = ["TRAIN_FILES", "EVAL_FILES", "MODELS", "ModelSpec", "EXTENSIONS",
           "Extension", "Config", "load_bytes", "build_model", "lr_factor", "fit",
           "train_model", "position_losses", "run", "write_results", "load_results",
           "RESULTS_PATH", "CACHE_DIR", "SCHEMA_VERSION", "Interval", "interval",
           "p_value", "holm", "accuracy_interval", "accuracy_p_value", "holm_levels",
           "degrees_of_freedom", "losses", "band_losses", "window_files", "Comparison",
           "adjust", "compare", "unclosed_fraction", "main", "READERS_PATH",
           "reader_results", "load_reader_results", "grid_digest",
           "load_retrieval_results", "FINETUNES", "FineTune", "RETRIEVAL_SKIP",
           "TASK_LENGTHS", "STUDIES", "finetune_model", "retrieval_grid",
           "retrieval_hits", "READERS_SCHEMA_VERSION"]
    # the offset-retrieval study's names, added after the split
    added = ["OffsetStudy", "OFFSET_PATH", "run_offset", "load_offset_results",
             "offset_cells", "offset_hits", "row_ranges"]
    assert len(listed) > 30 and set(listed) <= set(old + added)
    assert [n for n in old + added if not hasattr(experiment, n)] == []
    assert experiment.__all__ == old[:40] + added
    for cls in (experiment.Config, experiment.ModelSpec, experiment.Interval,
                experiment.Comparison, experiment.Extension, experiment.FineTune):
        assert cls.__module__ == "posenc_lib.tools.experiment"
    assert experiment.MODELS is experiment.config.MODELS
    assert experiment.run is running.run and experiment.main is running.main


def test_python_dash_m_runs_the_command_line():
    # in a fresh interpreter: importing an old path (tests/test_moved.py)
    # leaves the alias's __spec__ on the new module, and runpy follows it
    command = [sys.executable, "-m", "posenc_lib.tools.experiment", "--help"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "usage: python -m posenc_lib experiment [-h]" in done.stdout
    from posenc_lib import __main__ as cli

    assert cli.TOOLS["experiment"][:2] == ("posenc_lib.tools.experiment", "main")
