"""Tag every code cell of the book that asserts (a check) with ``check``, so
the rendered page styles its output as a check (book/_ext/posenc.css).

``--check``: list the cells that lack the tag and exit 1 if any do (the test
suite runs the same rule: tests/test_notebooks_clean.py)."""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

import nbformat

BOOK = Path(__file__).resolve().parents[1] / "book"


def asserts(source: str) -> bool:
    """Whether the cell's Python (magics commented out) has an assert statement."""
    code = "\n".join("#" + line if re.match(r"\s*[%!]", line) else line
                     for line in source.splitlines())
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Assert) for node in ast.walk(tree))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    missing = []
    for path in sorted(BOOK.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts or "_build" in path.parts:
            continue
        nb = nbformat.read(path, as_version=4)
        changed = False
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            want = cell.cell_type == "code" and asserts(cell.source)
            if want != ("check" in tags):
                missing.append(f"{path.relative_to(BOOK)} {cell.get('id')}")
                cell.metadata["tags"] = ([*tags, "check"] if want
                                         else [t for t in tags if t != "check"])
                if not cell.metadata["tags"]:
                    del cell.metadata["tags"]
                changed = True
        if changed and not args.check:
            nbformat.write(nb, path)
    if args.check and missing:
        print("\n".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
