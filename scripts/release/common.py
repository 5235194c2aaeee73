"""What the release scripts share: the repository root, the version, the pages.

The version has one source, ``__version__`` in ``posenc_lib/__init__.py``;
pyproject.toml reads it from there (``dynamic = ["version"]``), and
CITATION.cff and the book's front page (book/intro.md) name it, which
``version_mismatches`` checks. The version is read from the file's syntax tree,
so that neither torch nor the package is imported.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
NAME = "positional-encodings"
# The front page's version line, e.g. "Version 0.1.0 of the book and of `posenc_lib`".
FRONT_PAGE_VERSION = re.compile(r"^Version (\S+) of the book and of `posenc_lib`", re.M)


def package_version(root: Path = ROOT) -> str:
    """``posenc_lib.__version__``, read without importing the package."""
    tree = ast.parse((root / "posenc_lib" / "__init__.py").read_text())
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], "id", None) == "__version__"
                and isinstance(node.value, ast.Constant)):
            return node.value.value
    raise SystemExit("posenc_lib/__init__.py defines no __version__ = \"...\" string")


def citation_version(root: Path = ROOT) -> str | None:
    return str(yaml.safe_load((root / "CITATION.cff").read_text()).get("version"))


def front_page(root: Path = ROOT) -> Path:
    return root / f"{yaml.safe_load((root / '_toc.yml').read_text())['root']}.md"


def front_page_version(root: Path = ROOT) -> str | None:
    match = FRONT_PAGE_VERSION.search(front_page(root).read_text())
    return match.group(1) if match else None


def version_mismatches(root: Path = ROOT) -> list[str]:
    """Where CITATION.cff, the front page or pyproject.toml disagree with the package."""
    version = package_version(root)
    problems = []
    cited = citation_version(root)
    if cited != version:
        problems.append(f"CITATION.cff says version {cited!r}, posenc_lib {version!r}")
    shown = front_page_version(root)
    if shown != version:
        problems.append(f"{front_page(root).relative_to(root)} says version {shown!r} "
                        f"(a line 'Version X of the book and of `posenc_lib`'), "
                        f"posenc_lib {version!r}")
    pyproject = (root / "pyproject.toml").read_text()
    if not re.search(r'^dynamic = \["version"\]', pyproject, re.M) or \
            'version = { attr = "posenc_lib.__version__" }' not in pyproject:
        problems.append("pyproject.toml must take its version from posenc_lib.__version__ "
                        '(dynamic = ["version"] and [tool.setuptools.dynamic])')
    if re.search(r'^version\s*=\s*"', pyproject, re.M):
        problems.append("pyproject.toml states a version of its own; "
                        "it must come from posenc_lib.__version__")
    return problems


@dataclass(frozen=True)
class Page:
    file: str            # "book/04_rope", as in _toc.yml
    part: str | None     # the part's caption, None for the root page
    numbered: bool       # in a numbered part (a chapter)


def toc_pages(root: Path = ROOT) -> list[Page]:
    """Every page of the book in _toc.yml order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    pages = [Page(toc["root"], None, False)]
    for part in toc.get("parts", []):
        pages += [Page(chapter["file"], part.get("caption"), bool(part.get("numbered")))
                  for chapter in part["chapters"]]
    return pages
