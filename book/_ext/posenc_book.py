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
"""

from __future__ import annotations

import os
import shutil
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
