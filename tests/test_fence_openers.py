"""A directive fence opens at the start of its own line.

A fence written after text on the same line (``apart. ````{dropdown} Title``) is not
a fence: MyST and JupyterLab show the backticks and the directive's name as text, the
block's body as ordinary paragraphs (always open), and the closing fence opens an
empty code block. ``test_notebooks_clean.py`` checks the fences that parse; this one
finds the openers that never became fences.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: A ``` or ::: fence opener that names a directive, anywhere in a line.
_OPENER = re.compile(r"(`{3,}|:{3,})\{")


def late_openers(text: str) -> list[str]:
    """The lines of ``text`` on which a directive fence opens after other text."""
    late = []
    for line in text.splitlines():
        match = _OPENER.search(line)
        if match and line[:match.start()].strip():
            late.append(line)
    return late


def _markdown(path: Path) -> list[tuple[str, str]]:
    if path.suffix == ".md":
        return [(path.name, path.read_text(encoding="utf-8"))]
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(f"{path.name} {cell.get('id')}", "".join(cell["source"]))
            for cell in nb["cells"] if cell["cell_type"] == "markdown"]


BOOK_FILES = sorted(p for p in (ROOT / "book").rglob("*")
                    if p.suffix in (".md", ".ipynb") and "_build" not in p.parts)


@pytest.mark.parametrize("path", BOOK_FILES, ids=lambda p: p.name)
def test_every_directive_fence_opens_its_own_line(path):
    found = [f"{where}: {line[:80]}" for where, text in _markdown(path)
             for line in late_openers(text)]
    assert not found, "a fence opener after text (not a fence):\n" + "\n".join(found)


def test_the_check_sees_a_fence_opened_mid_line():
    broken = "1.95 apart. ````{dropdown} Going deeper\nbody\n````\n"
    fine = "1.95 apart.\n\n:::{dropdown} Going deeper\nbody\n:::\n  ```{code-cell}\n"
    assert late_openers(broken) and not late_openers(fine)
