"""The forms of the book's citations (book/references.bib and the links in the
notebooks' markdown), checked so that every source can be found again.

* Every bibliography entry names where to read it: a ``url``, ``doi``,
  ``eprint`` (arXiv) or ``isbn`` field.
* Every citation of code (an entry whose ``howpublished`` names a repository, a
  file, a package or a wheel) pins the version it read: a commit
  (``commit`` followed by 7 to 40 hexadecimal digits), or a release of a package
  that the repository pins itself (``name==version`` in requirements*.txt or the
  Makefile, or a vendored ``vendor.txt``), which PyPI never changes.
* Every link in a notebook's markdown to a file on GitHub or the Hugging Face
  Hub names a commit, not a branch.
* Every key the notebooks cite is in the bibliography (the book build would
  also fail; this says which key, in a second).
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIB = ROOT / "book" / "references.bib"
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb")) + sorted(
    (ROOT / "book" / "recipes").glob("*.ipynb")
)

COMMIT = re.compile(r"\bcommits?\s+(?:[a-z]+\s+)?[0-9a-f]{7,40}\b")
CODE = re.compile(r"\b(repository|file|files|package|wheel)\b", re.IGNORECASE)
DISCUSSION = re.compile(
    r"\b(issue|pull request|blog|forum|documentation)\b", re.IGNORECASE
)
# How an entry names a release: "v4.57.6", "vllm 0.33.0", "transformers 5.24.0".
RELEASE = re.compile(r"(?:\bv|\b([A-Za-z][\w.-]*)\s+)(\d+\.\d+\.\d+)\b")
# The PyPI name of a repository an entry cites by release.
PYPI_NAME = {
    "huggingface/transformers": "transformers",
    "huggingface/tokenizers": "tokenizers",
    "lucidrains/x-transformers": "x-transformers",
    "lucidrains/rotary-embedding-torch": "rotary-embedding-torch",
    "vllm-project/vllm": "vllm",
}


def parse_bib(text):
    """Entries of a BibTeX file as {key: (type, {field: value})}; braces
    balanced, so a value may hold braces and commas."""
    entries = {}
    for m in re.finditer(r"^@(\w+)\{([^,\s]+),", text, re.MULTILINE):
        kind, key = m.group(1).lower(), m.group(2)
        i, depth, fields = m.end(), 1, {}
        body_start = i
        while depth:
            if i >= len(text):
                raise ValueError(f"references.bib: entry {key} is not closed")
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[body_start : i - 1]
        for f in re.finditer(r"(\w+)\s*=\s*\{", body):
            j, d = f.end(), 1
            while d:
                d += {"{": 1, "}": -1}.get(body[j], 0)
                j += 1
            fields[f.group(1).lower()] = body[f.end() : j - 1]
        assert key not in entries, f"references.bib: key {key} appears twice"
        entries[key] = (kind, fields)
    return entries


def pinned_releases():
    """{pypi name: {versions}} that the repository pins itself."""
    pins = {}
    sources = list(ROOT.glob("requirements*.txt")) + [ROOT / "Makefile"]
    sources += list((ROOT / "posenc_lib" / "_vendor").glob("*/vendor.txt"))
    for path in sources:
        for name, version in re.findall(
            r"([A-Za-z][\w.-]*)==(\d+\.\d+\.\d+)", path.read_text()
        ):
            pins.setdefault(name.lower(), set()).add(version)
    return pins


def is_code(fields):
    how = fields.get("howpublished", "")
    return bool(CODE.search(how)) and not DISCUSSION.search(how)


# Hugging Face Hub files whose revision could not be resolved where the book is
# built (the Hub is not reachable there): the entry must say so in the words
# "revision not pinned"; a new one has to be added here, on purpose.
UNPINNED_HUB_FILES = {
    "qwen25_model_card",
    "hf_deberta_v3_config",
    "phi2_config",
    "phi3_mini_128k_config",
}


def version_problem(key, fields, pins):
    """None if a code entry pins what it read, else what is missing."""
    how = re.sub(r"\\_", "_", fields.get("howpublished", ""))
    if COMMIT.search(how):
        return None
    if (
        key in UNPINNED_HUB_FILES
        and "Hugging Face" in how
        and "revision not pinned" in how
    ):
        return None
    repos = re.findall(r"\b([\w-]+/[\w.-]+)\b", how)
    names = {PYPI_NAME[r] for r in repos if r in PYPI_NAME}
    names |= {n.lower() for n, _ in RELEASE.findall(how) if n and n.lower() in pins}
    for name in names:
        for _, version in RELEASE.findall(how):
            if version in pins.get(name, ()):
                return None
    return (
        f"{key}: a citation of code without a commit ({how!r}); add 'commit <sha>' "
        "of the version read, or a release the repository pins (requirements*.txt, "
        "the Makefile or a vendor.txt)"
    )


ENTRIES = parse_bib(BIB.read_text())


def test_the_parser_reads_every_entry():
    count = len(re.findall(r"^@\w+\{", BIB.read_text(), re.MULTILINE))
    assert len(ENTRIES) == count, f"parsed {len(ENTRIES)} entries of {count}"


@pytest.mark.parametrize("key", sorted(ENTRIES))
def test_every_entry_says_where_to_read_it(key):
    _, fields = ENTRIES[key]
    assert {"url", "doi", "eprint", "isbn"} & set(fields), (
        f"{key}: no url, doi, eprint (arXiv id) or isbn field; add one so that a "
        "reader can find the source"
    )


def test_every_citation_of_code_names_a_commit_or_a_pinned_release():
    pins = pinned_releases()
    problems = [
        p
        for key, (_, fields) in sorted(ENTRIES.items())
        if is_code(fields)
        for p in [version_problem(key, fields, pins)]
        if p
    ]
    assert not problems, "\n".join(problems)


def test_a_missing_commit_is_caught():
    """The check above fails on a planted entry of each kind it must refuse."""
    pins = pinned_releases()
    planted = {
        "no commit": "GitHub repository meta-llama/llama, file llama/model.py",
        "a branch": "GitHub repository microsoft/LongRoPE, file rope/longrope.py, main",
        "an unpinned release": "GitHub repository huggingface/transformers, file x.py, v4.40.0",
    }
    for what, how in planted.items():
        fields = {"howpublished": how}
        assert is_code(fields), f"{what}: not recognised as a citation of code"
        assert version_problem(what, fields, pins), f"{what}: accepted"
    ok = "GitHub repository meta-llama/llama, file llama/model.py, commit 689c7f2"
    assert version_problem("ok", {"howpublished": ok}, pins) is None


def _markdown_links():
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                for url in re.findall(r"https?://[^\s)>\]]+", "".join(cell["source"])):
                    yield path.name, cell.get("id"), url


def test_links_to_files_name_a_commit():
    bad = [
        f"{name} cell {cid}: {url}"
        for name, cid, url in _markdown_links()
        if re.search(r"(github\.com|huggingface\.co)/.+/(blob|raw|tree|resolve)/", url)
        and not re.search(r"/(blob|raw|tree|resolve)/[0-9a-f]{7,40}/", url)
    ]
    assert not bad, "links to a branch, not a commit:\n" + "\n".join(bad)


INLINE_REPO = re.compile(r"\brepository\s+`?([\w.-]+/[\w.-]+)`?")
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")


def inline_repository_problems(text):
    """Mentions of 'repository owner/name' in prose with no commit within the
    next 250 characters (the rest of the citation)."""
    flat = " ".join(text.split())
    return [
        m.group(1)
        for m in INLINE_REPO.finditer(flat)
        if not HEX.search(flat[m.end() : m.end() + 250])
    ]


def test_inline_citations_of_a_repository_name_a_commit():
    bad = []
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "markdown":
                bad += [
                    f"{path.name} cell {cell.get('id')}: repository {repo}"
                    for repo in inline_repository_problems("".join(cell["source"]))
                ]
    assert not bad, "repositories cited in the prose without a commit:\n" + "\n".join(
        bad
    )


def test_an_inline_citation_without_a_commit_is_caught():
    planted = "(repository vllm-project/vllm, file `vllm/x.py`, `_f`)"
    assert inline_repository_problems(planted) == ["vllm-project/vllm"], planted
    ok = "(repository jquesnelle/yarn at commit a18e5498)"
    assert inline_repository_problems(ok) == [], ok


def test_every_cited_key_is_in_the_bibliography():
    missing = []
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for keys in re.findall(
                r"\{cite(?::[pt])?\}`([^`]+)`", "".join(cell["source"])
            ):
                missing += [
                    f"{path.name} cell {cell.get('id')}: {k.strip()}"
                    for k in keys.split(",")
                    if k.strip() not in ENTRIES
                ]
    assert not missing, "cited keys not in references.bib:\n" + "\n".join(missing)
