"""Fetch the browser assets that the book serves itself, so that the built HTML
never loads anything from a third-party host.

Today that is MathJax 3, taken from the npm registry as a pinned tarball whose
sha512 is checked before anything is unpacked. The result lands in
``.cache/vendor/`` (ignored by git); ``book/_ext/posenc_book.py`` copies it into
``_build/html/_static/vendor/`` after each build.

Usage: ``python scripts/vendor_assets.py`` (``make book`` and ``make test`` run it).
"""

from __future__ import annotations

import base64
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / ".cache" / "vendor"

MATHJAX_VERSION = "3.2.2"
# dist.integrity of mathjax@3.2.2 as published on the npm registry.
MATHJAX_SHA512 = ("Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/"
                  "FEsPsjKPZGJvtRZM1vO+geW0OhGw==")
MATHJAX_URL = f"https://registry.npmjs.org/mathjax/-/mathjax-{MATHJAX_VERSION}.tgz"
# The CommonHTML TeX bundle, its web fonts, and the components it loads lazily
# (TeX extensions, the context menu, accessibility). About 3.7 MB.
MATHJAX_KEEP = (
    "es5/tex-chtml.js",
    "es5/input/",
    "es5/output/chtml/fonts/woff-v2/",
    "es5/ui/",
    "es5/a11y/",
)


def _fetch_tarball() -> bytes:
    """Download the tarball with npm (honours the user's npm config), else urllib."""
    npm = shutil.which("npm")
    if npm:
        with tempfile.TemporaryDirectory() as tmp:
            result = subprocess.run(
                [npm, "pack", f"mathjax@{MATHJAX_VERSION}", "--pack-destination", tmp,
                 "--silent"], capture_output=True, text=True)
            tarballs = list(Path(tmp).glob("*.tgz"))
            if result.returncode == 0 and tarballs:
                return tarballs[0].read_bytes()
            print(f"npm pack failed ({result.stderr.strip()[-200:]}); trying urllib",
                  file=sys.stderr)
    with urllib.request.urlopen(MATHJAX_URL, timeout=120) as response:
        return response.read()


def vendor_mathjax() -> Path:
    """Unpack MathJax into ``.cache/vendor/mathjax`` unless it is already there."""
    target = VENDOR / "mathjax"
    stamp = target / ".version"
    if stamp.is_file() and stamp.read_text().strip() == MATHJAX_VERSION:
        return target
    data = _fetch_tarball()
    digest = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if digest != MATHJAX_SHA512:
        raise SystemExit(f"mathjax-{MATHJAX_VERSION}.tgz has sha512 {digest}, "
                         f"expected {MATHJAX_SHA512}: refusing to use it")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix("package/")
            if not member.isfile() or not name.startswith(MATHJAX_KEEP):
                continue
            dest = target / name.removeprefix("es5/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(tar.extractfile(member).read())
        license_file = tar.extractfile("package/LICENSE")
        (target / "LICENSE").write_bytes(license_file.read())
    stamp.write_text(MATHJAX_VERSION + "\n")
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    print(f"vendored MathJax {MATHJAX_VERSION} into {target} ({size / 1e6:.1f} MB)")
    return target


if __name__ == "__main__":
    vendor_mathjax()
