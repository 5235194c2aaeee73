"""Sphinx glue for the book: offline assets and the static-figure switch.

* Tells notebooks executed during the build to render interactive figures in
  their kernel-free form (see :mod:`posenc_lib.widgets`), by setting
  ``POSENC_LIB_FRONTEND=static`` in the environment that the kernels inherit.
* Serves the vendored MathJax from ``_static/posenc-vendor/`` without putting
  it in ``html_static_path``: Jupyter Book would otherwise add a ``<script>``
  tag for every ``.js`` file there to every page.
* Adds ``posenc.css`` (next to this file) to every page: figures stay readable
  in dark mode.
* Drops the Thebe scripts. Jupyter Book always loads sphinx-thebe, whose
  inline configuration is added twice (an uncaught "THEBE_JS_URL has already
  been declared" error on every page) and points at a CDN; the book does not
  use Thebe.
* Removes duplicated inline scripts for the same reason.
* Moves the frames of every slider figure out of its page (see
  :func:`externalize_frames`): a notebook's output holds all of a figure's
  frames inline, drawn at twice the book's resolution; the built page keeps the
  first inline and loads each other frame from ``_images/frames/`` when a
  slider reaches it. Run on a built book by hand with
  ``python book/_ext/posenc_book.py _build/html``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path

from sphinx.errors import ExtensionError


CSS = Path(__file__).with_name("posenc.css")


def _vendor_dir(app) -> Path:
    return Path(app.confdir) / ".cache" / "vendor"


def _config_inited(app, config) -> None:
    os.environ["POSENC_LIB_FRONTEND"] = "static"


def _builder_inited(app) -> None:
    if app.builder.format != "html":
        return
    if not (_vendor_dir(app) / "mathjax" / "tex-chtml.js").is_file():
        raise ExtensionError(
            "vendored MathJax not found in .cache/vendor/mathjax: run "
            "`python scripts/vendor_assets.py` (make book does this for you)"
        )


def _build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    target = Path(app.outdir) / "_static" / "posenc-vendor"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(_vendor_dir(app), target)
    shutil.copyfile(CSS, Path(app.outdir) / "_static" / CSS.name)
    externalize_frames(app.outdir)


#: Where the slider figures' frames go, relative to the output directory.
FRAMES_DIR = "_images/frames"
# A slider figure's JSON payload (see InteractiveFigure.static_html in widgets/core.py).
_PAYLOAD = re.compile(
    r'(<div class="posenc-figure" data-posenc-figure="[^"]*">\n'
    r'<img [^>]*>\n.*?<script type="application/json">)(.*?)(</script>)',
    re.DOTALL,
)


def _frame_name(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24] + ".png"


def externalize_frames(outdir: str | os.PathLike) -> dict:
    """Move the slider figures' frames from the pages under ``outdir`` into files.

    Each frame but the first (which the ``<img>`` shows inline) is written to
    ``FRAMES_DIR/<sha256 of its bytes>.png``; the payload's ``frames`` (base64)
    become ``base`` (the folder, relative to the page) and ``names`` (``null``
    for the inline frame). A page done before is left as it is, so this can run
    after every build; files no page names any more are removed.

    Returns ``{page: (frames moved, bytes moved)}`` for the pages changed now.
    """
    outdir = Path(outdir)
    frames = outdir / FRAMES_DIR
    done, used = {}, set()
    for page in sorted(outdir.rglob("*.html")):
        if page.relative_to(outdir).parts[0].startswith("_"):
            continue  # _static, _sources, _images: not the book's pages
        text = page.read_text(encoding="utf-8")
        if 'data-posenc-figure="' not in text:
            continue
        moved = [0, 0]
        base = os.path.relpath(frames, page.parent).replace(os.sep, "/") + "/"

        def move(match, page=page, base=base, moved=moved):
            payload = json.loads(match.group(2).replace("<\\/", "</"))
            if "frames" not in payload:
                used.update(n for n in payload.get("names", []) if n)
                return match.group(0)
            src = re.search(
                r'<img [^>]*src="data:image/png;base64,([^"]*)"', match.group(1)
            )
            encoded_frames = payload.pop("frames")
            # the frame the <img> shows inline; the script uses the img's own src
            payload["first"] = encoded_frames.index(src.group(1)) if src else -1
            names = []
            for k, encoded in enumerate(encoded_frames):
                if k == payload["first"]:
                    names.append(None)
                    continue
                data = base64.b64decode(encoded)
                name = _frame_name(data)
                path = frames / name
                if not path.is_file():
                    frames.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                names.append(name)
                used.add(name)
                moved[0] += 1
                moved[1] += len(data)
            payload["base"], payload["names"] = base, names
            text = json.dumps(payload, separators=(",", ":")).replace("</", "<\\/")
            return match.group(1) + text + match.group(3)

        new = _PAYLOAD.sub(move, text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            done[str(page.relative_to(outdir))] = tuple(moved)
    if frames.is_dir():
        for path in frames.glob("*.png"):
            if path.name not in used:
                path.unlink()
    return done


def _is_thebe(script) -> bool:
    filename = getattr(script, "filename", None) or ""
    body = getattr(script, "attributes", {}).get("body", "")
    return "thebe" in filename or "THEBE_JS_URL" in body


def _page_context(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    kept, seen = [], set()
    for script in scripts:
        body = getattr(script, "attributes", {}).get("body")
        if _is_thebe(script) or (body is not None and body in seen):
            continue
        if body is not None:
            seen.add(body)
        kept.append(script)
    context["script_files"] = kept


def setup(app):
    # Not through html_static_path: Jupyter Book links every file found there.
    app.add_css_file(CSS.name)
    app.connect("html-page-context", _page_context, priority=900)
    app.connect("config-inited", _config_inited)
    app.connect("builder-inited", _builder_inited)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1], "index.html").is_file():
        sys.exit(
            "usage: python book/_ext/posenc_book.py BUILT_HTML_DIR (holding index.html)"
        )
    for page, (count, size) in externalize_frames(sys.argv[1]).items():
        print(f"{page}: {count} frames, {size / 1e6:.2f} MB moved to {FRAMES_DIR}/")
