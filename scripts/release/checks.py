"""Checks of the printed book (scripts/release/build.py runs them on every PDF).

``check_pdf`` returns what is wrong, an empty list when nothing is:

- the outline (bookmarks) holds one entry per page of _toc.yml, in order, each
  starting on a later PDF page than the one before, so every chapter (counted
  from _toc.yml) has at least one page of its own;
- the printed table of contents lists every numbered chapter with the page
  number its outline entry points to;
- every page's text ends with its own page number;
- no page's text outside code holds raw TeX: ``$``-delimited math, ``\\(``,
  ``\\[`` or a TeX command such as ``\\frac`` (MathJax, once it has typeset a
  formula, leaves Unicode characters in the text layer, not TeX). Code and
  printed output, set in a monospaced font, are left out: a matplotlib label
  such as ``"$b^{-2i/d}$"`` is code, not a formula of the book.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from common import Page

# $x$, $$...$$, \( \) \[ \], and TeX commands that prose and code never hold.
RAW_TEX = re.compile(
    r"\$\$|(?<![\w$])\$[^\s$][^$\n]{0,80}(?<!\s)\$(?![\w$])|\\\(|\\\)|\\\[|\\\]"
    r"|\\(?:frac|dfrac|sqrt|mathrm|mathbf|mathbb|text|theta|alpha|omega|sum|prod|cdot|left"
    r"|right|begin|end|lvert|rvert|langle|rangle|infty|le|ge|times|operatorname)(?![a-zA-Z])")


def _outline_leaves(reader) -> list[tuple[str, int]]:
    leaves: list[tuple[str, int]] = []

    def walk(items, depth):
        for k, item in enumerate(items):
            if isinstance(item, list):
                continue
            children = items[k + 1] if k + 1 < len(items) and isinstance(items[k + 1], list) \
                else None
            if children is not None:
                walk(children, depth + 1)   # a part: its pages are its children
            elif item.title != "Contents":
                leaves.append((item.title, reader.get_destination_page_number(item)))

    walk(reader.outline, 0)
    return leaves


def _texts(page) -> tuple[str, str]:
    """The page's text, and its text outside monospaced fonts (code, printed output)."""
    prose: list[str] = []

    def visit(text, cm, tm, font_dict, font_size):
        font = str((font_dict or {}).get("/BaseFont", ""))
        prose.append("\n" if "Mono" in font else text)

    text = page.extract_text(visitor_text=visit) or ""
    return (unicodedata.normalize("NFKC", text),
            unicodedata.normalize("NFKC", "".join(prose)))


def check_pdf(path: Path, pages: list[Page]) -> list[str]:
    from pypdf import PdfReader

    reader = PdfReader(path)
    problems: list[str] = []
    n = len(reader.pages)
    texts, prose = zip(*(_texts(page) for page in reader.pages)) if n else ((), ())

    leaves = _outline_leaves(reader)
    if len(leaves) != len(pages):
        problems.append(f"the outline has {len(leaves)} entries for the book's "
                        f"{len(pages)} pages in _toc.yml")
    starts = [start for _, start in leaves]
    for (title, start), nxt in zip(leaves, starts[1:] + [n]):
        if not start < nxt:
            problems.append(f"{title!r} has no page of its own (starts at {start + 1}, "
                            f"the next entry at {nxt + 1})")
    chapters = [page for page in pages if page.numbered]
    chapter_leaves = [(title, start) for (title, start), page in zip(leaves, pages)
                      if page.numbered]
    if len(chapter_leaves) != len(chapters):
        problems.append(f"{len(chapter_leaves)} chapters in the outline, "
                        f"{len(chapters)} in _toc.yml")

    front = "\n".join(texts[:min(starts, default=1) or 1])
    if "Contents" not in front:
        problems.append("no table of contents before the first page of the book")
    for number, (title, start) in enumerate(chapter_leaves, 1):
        row = re.compile(rf"^{re.escape(title)}\s+{start + 1}\s*$", re.M)
        if not row.search(front):
            problems.append(f"the table of contents has no row {title!r} ... {start + 1}")

    unnumbered = [i + 1 for i, text in enumerate(texts)
                  if text.rstrip().rsplit("\n", 1)[-1].strip() != str(i + 1)]
    if unnumbered:
        problems.append(f"{len(unnumbered)} pages do not end with their page number "
                        f"(first: {unnumbered[:5]})")

    for i, text in enumerate(prose):
        for match in RAW_TEX.finditer(text):
            context = text[max(0, match.start() - 30):match.end() + 30].replace("\n", " ")
            problems.append(f"page {i + 1}: raw TeX {match.group()!r} in ...{context}...")
            break
    return problems
