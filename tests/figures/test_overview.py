"""The introduction's map of the field: the figure and the table say the same thing."""

from __future__ import annotations

import re

import pytest

from helpers.paths import ROOT
from posenc_lib.figures import BookFigure, overview

INTRO = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")


def _table_rows() -> list[list[str]]:
    """The rows of the intro's map table (``tab-intro-map``), as lists of cell texts."""
    block = INTRO.split(":name: tab-intro-map", 1)[1].split("\n```", 1)[0]
    rows = []
    for chunk in re.split(r"\n\* - ", block)[1:]:
        cells = [" ".join(c.split()) for c in re.split(r"\n  - ", chunk)]
        rows.append(cells)
    return rows[1:]  # the header row first


ROWS = _table_rows()


def test_the_figure_shows_every_encoding_and_place():
    fig = overview.field_map()
    assert isinstance(fig, BookFigure)
    texts = {t.get_text() for t in fig.axes[0].texts}
    for place, formula, encodings in overview.ENTRY_POINTS:
        assert {place, formula} <= texts
        assert {name for name, _label in encodings} <= texts


def test_the_table_has_the_header_and_one_row_per_family():
    assert len(ROWS) >= 10 and all(len(row) == 5 for row in ROWS), ROWS


@pytest.mark.parametrize("place, name, label", [
    (place, name, label) for place, _formula, encodings in overview.ENTRY_POINTS
    for name, label in encodings])
def test_figure_and_table_agree(place, name, label):
    """Each encoding of the figure has a row: same place, and a link to its chapter."""
    first = name.split(",")[0].split()[0].lower()
    rows = [r for r in ROWS if r[0].lower().startswith(first)]
    assert rows, f"no row of the table for {name!r}"
    row = rows[0]
    assert row[1].split()[0].rstrip(":") == place.split()[0], (name, row[1], place)
    assert f"{{ref}}`{label}`" in row[4], (name, row[4], label)


def test_every_row_links_to_a_chapter_that_exists():
    labels = set()
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        labels |= set(re.findall(r"\((ch-[a-z-]+)\)=", path.read_text(encoding="utf-8")))
    for row in ROWS:
        linked = re.findall(r"\{ref\}`(ch-[a-z-]+)`", row[4])
        assert linked and set(linked) <= labels, row
        # Every claim in the row links to a chapter or carries a citation.
        assert "{cite:" in " ".join(row[2:4]) or "{ref}" in row[3], row


def _notation_rows() -> list[list[str]]:
    block = INTRO.split(":name: tab-notation", 1)[1].split("\n```", 1)[0]
    return [[" ".join(c.split()) for c in re.split(r"\n  - ", chunk)]
            for chunk in re.split(r"\n\* - ", block)[1:]][1:]


def test_every_notation_row_links_to_a_chapter_that_uses_the_symbol():
    """The third column names chapters (existing labels); the pair index is there."""
    labels = {}
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        for label in re.findall(r"\((ch-[a-z-]+)\)=", path.read_text(encoding="utf-8")):
            labels[label] = path
    rows = _notation_rows()
    assert len(rows) >= 10 and all(len(row) == 3 for row in rows), rows
    for row in rows:
        linked = re.findall(r"\{ref\}`(ch-[a-z-]+)`", row[2])
        assert linked and set(linked) <= set(labels), row
    symbols = " ".join(row[0] for row in rows)
    for needed in (r"\theta_i", "d_\\text{model}", "d_r", r"\kappa", "m, n"):
        assert needed in symbols, needed
    # d_r and kappa are used where the table says.
    for symbol, label in (("d_r", "ch-rope"), (r"\\kappa", "ch-relative")):
        assert symbol in labels[label].read_text(encoding="utf-8"), (symbol, label)


def test_every_table_row_is_in_the_figure():
    """Each encoding named in the table's first column is drawn in the figure.

    Names compare by their first word, and a figure word may abbreviate a table
    word ("NTK" for "NTK-aware").
    """
    drawn = [part.split()[0].lower() for _place, _formula, encodings in overview.ENTRY_POINTS
             for name, _label in encodings for part in name.split(", ")]
    for row in ROWS:
        for part in row[0].split(", "):
            word = part.split()[0].lower()
            assert any(word == d or word.startswith(d + "-") for d in drawn), (part, drawn)


def test_shaw_value_term_is_drawn():
    """Shaw et al. add to the values too; the figure says so."""
    names = [name for _p, _f, encodings in overview.ENTRY_POINTS for name, _l in encodings]
    assert any(name.startswith("Shaw") and "values" in name for name in names)
