"""Build the release files into dist/ from the built book (``make release``).

    python scripts/release/build.py [--html _build/html] [--dist dist]

writes, for the version in posenc_lib/__init__.py:

- positional-encodings-<version>-html.tar.gz: the built HTML book (no request
  leaves the machine: MathJax is vendored; tests/test_release.py opens every
  page from disk with the network blocked);
- positional-encodings-<version>-notebooks.zip: the notebooks without outputs,
  posenc_lib, the stored results it reads, the requirements and a README;
- positional-encodings-<version>-book.pdf: every page of _toc.yml printed by
  Chromium (scripts/release/pdf.py), then checked (scripts/release/checks.py);
- SHA256SUMS, for ``sha256sum -c SHA256SUMS``.

The archives are reproducible: their entries are sorted and dated with the
last commit's time (or SOURCE_DATE_EPOCH). It refuses to run when
CITATION.cff or the front page names another version than the package.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from checks import check_pdf  # noqa: E402
from common import NAME, ROOT, package_version, toc_pages, version_mismatches  # noqa: E402

TITLE = "Positional Encodings, Derived and Checked"
NOTEBOOK_README = (
    "Positional Encodings, Derived and Checked, version {version}: "
    "run its notebooks (Python 3.10+) with\n"
    "python -m venv .venv && .venv/bin/pip install -r requirements.txt "
    "-r requirements-lab.txt -c constraints.txt && .venv/bin/pip install --no-deps -e . "
    "&& .venv/bin/jupyter lab book/\n")
# What the notebooks need besides themselves: the library, the stored results
# and data it reads (posenc_lib resolves them next to itself), the pins.
NOTEBOOK_FILES = ["pyproject.toml", "LICENSE", "CITATION.cff", "requirements.txt",
                  "requirements-lab.txt", "requirements-test.txt", "constraints.txt"]
NOTEBOOK_DIRS = ["posenc_lib", "results", "data"]
SKIP = ("__pycache__", ".ipynb_checkpoints", ".pyc")


def _epoch() -> int:
    if "SOURCE_DATE_EPOCH" in os.environ:
        return int(os.environ["SOURCE_DATE_EPOCH"])
    try:
        return int(subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=ROOT, check=True,
                                  capture_output=True, text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError, ValueError):
        return 315532800  # 1980-01-01, the earliest date a zip file can hold


def _files(top: Path) -> list[Path]:
    return sorted(p for p in top.rglob("*")
                  if p.is_file() and not any(part.endswith(SKIP) for part in p.parts))


def html_tarball(html: Path, out: Path, prefix: str, epoch: int) -> int:
    files = [p for p in _files(html) if "screenshots" not in p.relative_to(html).parts]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in files:
            info = tarfile.TarInfo(f"{prefix}/{path.relative_to(html).as_posix()}")
            info.size, info.mtime, info.mode = path.stat().st_size, epoch, 0o644
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    with open(out, "wb") as handle, gzip.GzipFile(fileobj=handle, mode="wb", mtime=epoch,
                                                    filename="") as gz:
        gz.write(raw.getvalue())
    return len(files)


def _without_outputs(path: Path) -> bytes:
    """The notebook as committed; refuses one that holds outputs (git should not)."""
    notebook = json.loads(path.read_text())
    for cell in notebook["cells"]:
        if cell.get("outputs") or cell.get("execution_count"):
            raise SystemExit(f"{path.relative_to(ROOT)} holds outputs: clear them "
                             "(jupyter nbconvert --clear-output --inplace) and commit")
    return path.read_bytes()


def notebooks_zip(out: Path, prefix: str, version: str, epoch: int) -> int:
    stamp = time.gmtime(max(epoch, 315532800))[:6]
    entries: dict[str, bytes] = {"README.txt": NOTEBOOK_README.format(version=version).encode()}
    for path in _files(ROOT / "book"):
        if path.suffix == ".ipynb":
            entries[path.relative_to(ROOT).as_posix()] = _without_outputs(path)
    for name in NOTEBOOK_FILES:
        entries[name] = (ROOT / name).read_bytes()
    for top in NOTEBOOK_DIRS:
        for path in _files(ROOT / top):
            entries[path.relative_to(ROOT).as_posix()] = path.read_bytes()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(f"{prefix}/{name}", date_time=stamp)
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            archive.writestr(info, entries[name])
    return len(entries)


def sha256sums(files: list[Path], out: Path) -> None:
    lines = []
    for path in files:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        lines.append(f"{digest}  {path.name}\n")
    out.write_text("".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html",
                        help="the built book (make book)")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="where to write")
    parser.add_argument("--chromium", default=os.environ.get("POSENC_CHROMIUM",
                                                             "/usr/bin/chromium"))
    args = parser.parse_args(argv)

    problems = version_mismatches()
    if problems:
        raise SystemExit("error: the version is not the same everywhere:\n  "
                         + "\n  ".join(problems))
    if not (args.html / "index.html").is_file():
        raise SystemExit(f"error: no built book in {args.html}: run `make book` first")
    if not Path(args.chromium).is_file():
        raise SystemExit(f"error: no Chromium at {args.chromium} (--chromium or "
                         "POSENC_CHROMIUM; `make test` installs Debian's chromium)")
    from pdf import print_book  # needs pypdf and playwright (requirements-test.txt)

    version = package_version()
    base = f"{NAME}-{version}"
    args.dist.mkdir(parents=True, exist_ok=True)
    html, notebooks, book = (args.dist / f"{base}-html.tar.gz",
                             args.dist / f"{base}-notebooks.zip",
                             args.dist / f"{base}-book.pdf")
    epoch = _epoch()
    start = time.perf_counter()
    n_html = html_tarball(args.html, html, f"{base}-html", epoch)
    n_notebooks = notebooks_zip(notebooks, f"{base}-notebooks", version, epoch)
    pages = toc_pages()
    layout = print_book(args.html, pages, book, title=TITLE, version=version,
                        chromium=args.chromium)
    problems = check_pdf(book, pages)
    if problems:
        book.rename(book.with_suffix(".rejected.pdf"))
        raise SystemExit("error: the PDF failed its checks:\n  " + "\n  ".join(problems))
    files = [html, notebooks, book]
    sha256sums(files, args.dist / "SHA256SUMS")
    print(f"dist/ for version {version} ({time.perf_counter() - start:.0f} s):")
    details = {html: f"{n_html} files", notebooks: f"{n_notebooks} files",
               book: f"{layout['pages']} pages"}
    for path in files:
        print(f"  {path.name:48} {path.stat().st_size / 1e6:7.1f} MB  {details[path]}")
    print(f"  SHA256SUMS (check with: cd {args.dist} && sha256sum -c SHA256SUMS)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
