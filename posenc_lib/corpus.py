"""The pinned text of chapter 7's study: Python standard-library modules of
CPython 3.11.7, stored in the repository.

The study's data were once read from the running interpreter's standard
library, so another Python (Debian's 3.11.2, say) trained on other bytes.
They are now read from ``data/stdlib-3.11.7.tar.xz``, an archive of the
modules :data:`TRAIN_FILES` and :data:`EVAL_FILES` name, built once from
CPython 3.11.7's ``Lib/`` (with its licence) by :func:`build`. Every read
checks the archive's SHA-256 (:data:`ARCHIVE_SHA256`), and the joined bytes
of each list have a pinned digest (:data:`PINNED_SHA256`), so the training
bytes no longer depend on the interpreter.

This module uses the standard library only, so any Python 3 can run it::

    python3 posenc_lib/corpus.py        # prints both digests, checks the pins
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
from pathlib import Path
from typing import Sequence

__all__ = ["TRAIN_FILES", "EVAL_FILES", "ARCHIVE", "ARCHIVE_SHA256", "PINNED_SHA256",
           "PYTHON_VERSION", "read", "sizes", "digest", "build"]

#: Standard-library modules used for training (top-level ``.py`` files present
#: in CPython 3.10 to 3.12).
TRAIN_FILES = (
    "argparse", "ast", "base64", "bisect", "calendar", "cmd", "codecs", "configparser",
    "contextlib", "copy", "csv", "dataclasses", "datetime", "difflib", "enum", "fnmatch",
    "fractions", "ftplib", "functools", "getopt", "gettext", "glob", "gzip", "heapq",
    "hmac", "imaplib", "inspect", "ipaddress", "locale", "mailbox", "numbers", "operator",
    "optparse", "pathlib", "pickle", "pprint", "queue", "random", "shlex", "shutil",
    "smtplib", "socket", "statistics", "string", "subprocess", "tarfile", "tempfile",
    "textwrap", "threading", "timeit", "tokenize", "traceback", "typing", "uuid",
    "warnings", "weakref",
)
#: Held-out modules, never seen in training.
EVAL_FILES = (
    "bdb", "codeop", "colorsys", "filecmp", "graphlib", "hashlib", "keyword", "linecache",
    "netrc", "opcode", "platform", "plistlib", "poplib", "pyclbr", "quopri", "reprlib",
    "runpy", "sched", "selectors", "socketserver", "symtable", "tabnanny", "trace",
    "tracemalloc", "webbrowser", "zipapp",
)
#: The CPython release whose ``Lib/`` the archive holds.
PYTHON_VERSION = "3.11.7"
ARCHIVE = Path(__file__).resolve().parents[1] / "data" / f"stdlib-{PYTHON_VERSION}.tar.xz"
#: SHA-256 of the archive file; :func:`read` refuses any other.
ARCHIVE_SHA256 = "60c2aea1d1d4194b8546f279cc46692345e8161eec8e8530cacfc2f81b0d5751"
#: SHA-256 of the joined bytes (:func:`read`) of each list: the digests the
#: stored study recorded.
PINNED_SHA256 = {
    "train": "98f308bff98979cfd6a2cb1a0b68ece1e14e475e04b166b54ed301917cb474bd",
    "eval": "1a151d900fdec4f3e690ad0eac2ac973b9faf1d7a56b68796ef203664a4fe98b",
}


def _members(archive: Path) -> dict:
    data = Path(archive).read_bytes()
    found = hashlib.sha256(data).hexdigest()
    if Path(archive) == ARCHIVE and found != ARCHIVE_SHA256:
        raise ValueError(f"archive: {archive} has sha256 {found[:12]}..., pinned "
                         f"{ARCHIVE_SHA256[:12]}...: restore it from the repository "
                         "(git checkout data/)")
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                out[member.name] = tar.extractfile(member).read()
    return out


def read(modules: Sequence[str], archive: Path = ARCHIVE) -> bytes:
    """The source of ``modules`` from the archive, joined by two newlines
    (what the study trains and evaluates on).

    Raises:
        ValueError: a module the archive does not hold, or an archive whose
            SHA-256 is not :data:`ARCHIVE_SHA256`.
    """
    members = _members(archive)
    missing = [m for m in modules if f"{m}.py" not in members]
    if missing:
        raise ValueError(f"modules: {missing} are not in the pinned corpus {archive}; "
                         "add them with corpus.build from CPython "
                         f"{PYTHON_VERSION}'s Lib/")
    return b"\n\n".join(members[f"{m}.py"] for m in modules)


def sizes(modules: Sequence[str], archive: Path = ARCHIVE) -> list[int]:
    """The size in bytes of each module's source in the archive."""
    members = _members(archive)
    return [len(members[f"{m}.py"]) for m in modules]


def digest(modules: Sequence[str], archive: Path = ARCHIVE) -> str:
    """SHA-256 of :func:`read` ``(modules)``."""
    return hashlib.sha256(read(modules, archive)).hexdigest()


def build(stdlib: str | Path, archive: Path = ARCHIVE) -> str:
    """Write the archive from a CPython ``Lib/`` directory (deterministic:
    sorted members, zero times and owners) and return its SHA-256. The
    joined bytes must have the pinned digests, so only CPython
    :data:`PYTHON_VERSION`'s ``Lib/`` (or one with the same sources) builds it."""
    stdlib = Path(stdlib)
    names = sorted({f"{m}.py" for m in TRAIN_FILES + EVAL_FILES}) + ["LICENSE.txt"]
    for part, files in (("train", TRAIN_FILES), ("eval", EVAL_FILES)):
        joined = b"\n\n".join((stdlib / f"{m}.py").read_bytes() for m in files)
        if hashlib.sha256(joined).hexdigest() != PINNED_SHA256[part]:
            raise ValueError(f"stdlib: {stdlib} gives other {part} bytes than the pinned "
                             f"corpus; use CPython {PYTHON_VERSION}'s Lib/")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", format=tarfile.USTAR_FORMAT,
                      preset=9) as tar:
        for name in names:
            data = (stdlib / name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    Path(archive).parent.mkdir(parents=True, exist_ok=True)
    Path(archive).write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def _main(argv: Sequence[str]) -> int:
    print(f"python {sys.version.split()[0]}")
    ok = True
    for part, files in (("train", TRAIN_FILES), ("eval", EVAL_FILES)):
        found = digest(files)
        ok &= found == PINNED_SHA256[part]
        print(f"{part} {found}")
    print("pinned digests: " + ("match" if ok else "DIFFER"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
