"""Write a notebook's MyST directives so that JupyterLab's Markdown shows them as text.

JupyterLab renders Markdown cells with marked (GitHub-flavoured Markdown), not
MyST. A directive written as a backtick fence (```` ```{prf:theorem} Title ````)
shows there as a code block: the title, held in the fence's info string, is
hidden, and the statement appears as raw TeX. Written as a colon fence
(``:::{prf:theorem} Title``) it is a paragraph, math typeset; but Markdown
joins consecutive lines, so the title, the ``:label:`` line, the first line of
the text and the closing ``:::`` run together. This script

* rewrites every backtick directive fence in a Markdown cell as a colon fence
  (nested fences get one colon more than the fences they hold), and
* ends each header line (``:::{name} title`` and each ``:option:`` line) with
  two spaces, a Markdown hard line break, where another line follows it
  directly, and puts a blank line before each closing ``:::``.

MyST reads the result as it read the original: the directive's name, title
and options are stripped of the trailing spaces, and blank lines at the end of
a directive's text are dropped (``myst_parser.parsers.directives``). Cell ids
and code cells are untouched.

Usage: ``python scripts/lab/colon_fences.py book/05_multidim.ipynb ...``
(rewrites the notebooks in place); ``--check`` only lists what it would change.
:func:`layout_problems` is what ``tests/test_notebooks_clean.py`` checks.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from markdown_it import MarkdownIt


def _myst():
    """MyST's block parser as the book configures it (colon fences, dollar math)."""
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    return create_md_parser(
        MdParserConfig(enable_extensions={"colon_fence", "dollarmath", "amsmath"}),
        RendererHTML,
    )


_MD = None


def _parser():
    global _MD
    if _MD is None:
        _MD = _myst()
    return _MD


def _directives(lines: list[str], offset: int = 0):
    """(token, first line, last line) of each directive fence, outermost first."""
    for token in _parser().parse("\n".join(lines)):
        directive = token.info.strip().startswith("{")
        if token.type in ("fence", "colon_fence") and directive:
            start, end = token.map
            yield token, offset + start, offset + end - 1
            inner = lines[start + 1 : end - 1]
            yield from _directives(inner, offset + start + 1)


def _colons(line: str) -> int:
    return len(line) - len(line.lstrip(":"))


def to_colon_fences(text: str) -> str:
    """Every backtick directive fence of ``text`` as a colon fence (no layout)."""
    lines = text.split("\n")
    tops = [(t, s, e) for t, s, e in _directives(lines)]
    # outermost blocks only: inner ones are handled by the recursive call
    outer = [
        (t, s, e)
        for t, s, e in tops
        if not any(s2 < s and e <= e2 for _, s2, e2 in tops)
    ]
    for token, start, end in reversed(outer):
        opening, closing = lines[start], lines[end]
        closed = closing.strip().startswith(("`", ":", "~"))
        if opening != opening.lstrip() or not closed:
            raise ValueError(f"an indented or unclosed fence: {opening!r}")
        inner = to_colon_fences("\n".join(lines[start + 1 : end])).split("\n")
        nested = [_colons(line) for line in inner if re.match(r"^:{3,}\{", line)]
        width = max([3] + [n + 1 for n in nested])
        if token.type == "colon_fence" and _colons(opening) >= width:
            width = _colons(opening)
        lines[start : end + 1] = [":" * width + token.info.strip(), *inner, ":" * width]
    return "\n".join(lines)


def _header_lines(lines: list[str], start: int, end: int) -> list[int]:
    """The opening line and the option lines of the fence on lines start..end."""
    header = [start]
    for index in range(start + 1, end):
        line = lines[index]
        if re.match(r"^:[A-Za-z][\w-]*:", line) or (
            line.startswith(":") and not line.startswith(":::")
        ):
            header.append(index)
        else:
            break
    return header


def _is_fence(line: str) -> bool:
    return line.lstrip().startswith(("```", "~~~"))


def lay_out(text: str) -> str:
    """Hard breaks after header lines and a blank line before each closing fence."""
    lines = text.split("\n")
    breaks, blanks = set(), set()
    for token, start, end in _directives(lines):
        if token.type != "colon_fence":
            continue
        for index in _header_lines(lines, start, end):
            following = lines[index + 1] if index + 1 < end else ""  # blank before end
            if following.strip() and not _is_fence(following):
                breaks.add(index)
        if lines[end - 1].strip():
            blanks.add(end)
    for index in breaks:
        lines[index] = lines[index].rstrip() + "  "
    for index in sorted(blanks, reverse=True):
        lines.insert(index, "")
    return "\n".join(lines)


def convert(text: str) -> str:
    return lay_out(to_colon_fences(text))


# -- what JupyterLab shows -------------------------------------------------------

_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL)


def _without_math(text: str) -> str:
    """JupyterLab takes the math out before marked sees the text (``removeMath``)."""
    return _MATH.sub(lambda m: f"MATH{abs(hash(m.group())) % 10**8}", text)


_COMMONMARK = MarkdownIt("commonmark")


def jupyterlab_html(text: str) -> str:
    """The cell roughly as JupyterLab renders it (CommonMark; math set aside)."""
    return _COMMONMARK.render(_without_math(text))


def _shown_lines(html: str) -> list[str]:
    """The lines of text of each paragraph as shown (a soft break joins two lines)."""
    return [
        line
        for paragraph in re.findall(r"<p>(.*?)</p>", html, re.DOTALL)
        for line in paragraph.split("<br />\n")
    ]


#: A fence opener after other text on its line: Markdown (and MyST) read it as text.
_MIDLINE_FENCE = re.compile(r"^(?!\s*(`{3,}|:{3,}|~{3,})).*?(`{3,}|:{3,})\{[\w:-]+\}")


def layout_problems(text: str) -> list[str]:
    """What JupyterLab would show wrongly: a directive as a code block, or a
    fence's title, option or closing line run into the text next to it."""
    from collections import Counter

    problems = []
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if _MIDLINE_FENCE.search(line):
            problems.append(
                f"line {index + 1}: a directive fence after other text is read as "
                "text (start it on a line of its own)"
            )
    shown = Counter(_shown_lines(jupyterlab_html(text)))
    needed = Counter()
    for token, start, end in _directives(lines):
        name = token.info.split()[0]
        if token.type == "fence":
            problems.append(
                f"line {start + 1}: {name} is a backtick fence "
                "(a code block in JupyterLab)"
            )
            continue
        for index in [*_header_lines(lines, start, end), end]:
            line = _COMMONMARK.renderInline(_without_math(lines[index].strip()))
            needed[line] += 1
            if needed[line] > shown[line]:
                problems.append(
                    f"line {index + 1}: {lines[index].strip()!r} runs into "
                    "the text next to it in JupyterLab"
                )
    return problems


def _markdown_cells(nb: dict):
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            yield cell


def _source(cell: dict) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument(
        "--check",
        action="store_true",
        help="list the cells that would change; change nothing",
    )
    args = parser.parse_args(argv)
    import nbformat

    changed = 0
    for path in args.notebooks:
        nb = nbformat.read(path, as_version=4)
        touched = []
        for cell in _markdown_cells(nb):
            new = convert(_source(cell))
            if new != _source(cell):
                touched.append(cell.get("id"))
                cell["source"] = new
        if touched:
            changed += 1
            verb = "would change" if args.check else "rewritten"
            print(
                f"{path}: {len(touched)} cells {verb}: {', '.join(map(str, touched))}"
            )
            if not args.check:
                path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
