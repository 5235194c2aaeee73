"""`make help` is generated from the Makefile's own `## ` comments, and it lists
every target a user runs; `make quick`'s selection (tests/quick.txt) still names
test files that exist.

Read from the files, never from a copy: a target added without a `## ` comment,
or a quick test file renamed, fails here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = ROOT / "Makefile"
TESTS = Path(__file__).resolve().parent

#: .PHONY targets that only other targets call, so `make help` may leave them out.
INTERNAL: frozenset[str] = frozenset()

#: A rule line: `name: prerequisites`, not a variable (`NAME := ...`, `NAME ?= ...`).
RULE = re.compile(r"^([A-Za-z0-9_.-]+):(?![:=])([^#]*)(?:##\s*(.*))?$")

#: What `make help` prints per target.
HELP_LINE = re.compile(r"^make (\S+)\s+(\S.*)$")


def phony_targets() -> set[str]:
    names: set[str] = set()
    for line in MAKEFILE.read_text().splitlines():
        if line.startswith(".PHONY:"):
            names.update(line.split(":", 1)[1].split())
    return names


def documented_rules() -> dict[str, str | None]:
    """``{target: its ## text, or None}`` for every rule line of the Makefile."""
    rules: dict[str, str | None] = {}
    for line in MAKEFILE.read_text().splitlines():
        match = RULE.match(line)
        if match and not match.group(1).startswith("."):
            rules[match.group(1)] = (match.group(3) or "").strip() or None
    return rules


def _make_env() -> dict[str, str]:
    # Under `make unit` the outer make's flags (a jobserver, -O) would leak in.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    env["LC_ALL"] = "C"
    return env


def run_make(*args: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("no make on PATH")
    done = subprocess.run(["make", *args], cwd=ROOT, env=_make_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    return done.stdout


def test_every_phony_target_has_a_description():
    rules = documented_rules()
    phony = phony_targets() - INTERNAL
    assert phony, "no .PHONY targets found: has the Makefile moved?"
    missing_rule = sorted(phony - set(rules))
    assert not missing_rule, f".PHONY names targets with no rule: {missing_rule}"
    undocumented = sorted(t for t in phony if rules[t] is None)
    assert not undocumented, (
        f"targets without a `## description` on their rule line: {undocumented}; "
        f"write `target: prerequisites ## what it does` so `make help` lists it")


def help_output() -> str:
    """`make -s help`'s output, run only once `make help` is known to build
    nothing: a help rule with prerequisites would install the venv first."""
    prerequisites = [RULE.match(line).group(2).strip()
                     for line in MAKEFILE.read_text().splitlines()
                     if line.startswith("help:")]
    assert prerequisites == [""], f"help must have no prerequisites: {prerequisites}"
    commands = [c for c in run_make("-n", "help").splitlines() if c.strip()]
    assert len(commands) == 1 and commands[0].lstrip().startswith("awk "), commands
    return run_make("-s", "help")


def test_make_help_runs_nothing_but_awk():
    """`make help` builds nothing: no venv, no pip, no download; one awk command."""
    help_output()


def test_make_help_lists_every_target_with_its_own_comment():
    rules = documented_rules()
    printed = {}
    for line in help_output().splitlines():
        match = HELP_LINE.match(line)
        assert match, f"make help printed a line it should not: {line!r}"
        printed[match.group(1)] = match.group(2).strip()
    wanted = {t: rules[t] for t in phony_targets() - INTERNAL}
    assert printed == wanted
    # The first command a newcomer should run comes right after help itself.
    assert list(printed)[:2] == ["help", "quick"]


def quick_files() -> list[str]:
    return [line.split()[0] for line in (TESTS / "quick.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_quick_selection_names_existing_test_files():
    names = quick_files()
    assert len(names) == len(set(names)), "a file is listed twice in tests/quick.txt"
    found: dict[str, list[Path]] = {}
    for path in TESTS.rglob("test_*.py"):
        found.setdefault(path.name, []).append(path)
    gone = sorted(n for n in names if n not in found)
    assert not gone, (f"tests/quick.txt names test files that no longer exist: {gone}; "
                      f"update it (its header says how the files were chosen)")
    twice = sorted(n for n in names if len(found[n]) > 1)
    assert not twice, f"two test files share a quick basename: {twice}"


def test_quick_marker_is_registered_and_excludes_the_slow_files():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^\s*"quick:', pyproject, re.M), "register the quick marker"
    # The files that cost seconds alone (tests/quick.txt's header names them).
    for name in ("test_positions.py", "test_widgets.py", "test_diagnose.py",
                 "test_crosscheck.py", "test_experiment.py"):
        assert name not in quick_files()


def test_readme_offers_make_quick_first():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^make (\S+)", readme, re.M)
    assert commands and commands[0] == "quick", commands[:3]
