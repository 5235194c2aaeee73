"""The mutation harness (tests/helpers/mutation.py) keeps working: a smoke run and a catalogue check.

The full run (``make mutants``) takes tens of minutes and is not part of the
suite; these tests make sure it cannot rot silently: every planted bug still
matches the library's text exactly once, and one bug goes through the whole
pipeline (copy, mutate, unit tests, the chapter's notebook) and is caught,
while the un-mutated copy passes.
"""

from __future__ import annotations

import pytest

from helpers import mutation
from helpers.paths import ROOT

IDS = [m.id for m in mutation.MUTANTS]


def test_catalogue_has_at_least_twenty_distinct_mutants():
    assert len(IDS) >= 20
    assert len(set(IDS)) == len(IDS), "mutant ids must be distinct"


@pytest.mark.parametrize("mutant", mutation.MUTANTS, ids=IDS)
def test_every_mutant_still_matches_the_library(mutant):
    assert mutation.occurrences(mutant) == 1, (
        f"{mutant.id}: its text no longer occurs exactly once in {mutant.path}; "
        f"update the catalogue in tests/helpers/mutation.py")
    assert mutant.old != mutant.new
    for chapter in mutant.chapters:
        assert (ROOT / "book" / f"{chapter}.ipynb").is_file(), chapter


def test_apply_refuses_text_that_is_not_there(tmp_path):
    (tmp_path / "posenc_lib").mkdir()
    (tmp_path / "posenc_lib" / "x.py").write_text("a = 1\na = 1\n")
    twice = mutation.Mutant("x", "posenc_lib/x.py", "a = 1", "a = 2", (), "")
    with pytest.raises(ValueError, match="occurs 2 times"):
        mutation.apply(twice, tmp_path)


@pytest.mark.mutation
def test_one_mutant_end_to_end():
    """A causal-mask off-by-one: the clean copy passes, the mutant fails both steps."""
    mutant = {m.id: m for m in mutation.MUTANTS}["causal-excludes-self"]
    clean = mutation.check(None, tests=["tests/test_attention.py"], book=False)
    assert clean.unit_caught is False, clean.unit_tail
    caught = mutation.check(mutant, tests=["tests/test_attention.py"])
    assert caught.unit_caught is True, caught.unit_tail
    assert caught.book_caught is True, caught.book_tail
