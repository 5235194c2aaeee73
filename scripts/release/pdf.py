"""Print the built book to one PDF through Chromium.

Every page of _toc.yml, in order, is opened from disk (file://, every other
request aborted), its math typeset by the vendored MathJax (we wait for
MathJax's startup promise), its images loaded (lazy ones included), its
"Proof" / "Going deeper" / "Code" dropdowns opened, and printed to A4 by
Chromium. pypdf joins the pages behind a title page with the version and a
table of contents, adds one outline entry (bookmark) per page of the book and
stamps the page numbers: Chromium prints them in the footer of an otherwise
blank document as long as the book, whose pages are laid over the book's.
Links to other pages of the book (file:// URLs of the build machine) are
removed; links to the web stay.
"""

from __future__ import annotations

import html
import io
import tempfile
from pathlib import Path

from common import Page
from pypdf import PdfReader, PdfWriter
from pypdf.annotations import Link

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
MARGIN = {"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"}
FOOTER = ('<div style="width:100%;text-align:center;font-size:9px;'
          'font-family:sans-serif;color:#444"><span class="pageNumber"></span></div>')

PREPARE = """async () => {
  const s = window.MathJax && window.MathJax.startup;
  if (s && s.promise) { await s.promise; }
  document.querySelectorAll('details.sd-dropdown').forEach(d => { d.open = true; });
  const images = [...document.images];
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.decode().catch(() => null)));
  return {
    title: (document.querySelector('main h1, article h1, h1') || {innerText: ''})
      .innerText.replace(/[#\\u00b6]\\s*$/, '').trim(),
    math: document.querySelectorAll('.math').length,
    typeset: document.querySelectorAll('mjx-container').length,
    errors: document.querySelectorAll('mjx-merror').length,
    broken: images.filter(img => !(img.naturalWidth > 0)).map(img => img.src.slice(0, 80)),
  };
}"""


def _block_network(context, remote: list[str]) -> None:
    def route(r):
        if r.request.url.startswith(LOCAL_SCHEMES):
            r.continue_()
        else:
            remote.append(r.request.url)
            r.abort()
    context.route("**/*", route)


def print_pages(browser, html_dir: Path, pages: list[Page]) -> list[tuple[Page, str, bytes]]:
    """(page, title, PDF bytes) for every page; raises if one did not render."""
    out, remote = [], []
    context = browser.new_context(viewport={"width": 1000, "height": 1400})
    _block_network(context, remote)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    for page in pages:
        path = (html_dir / f"{page.file}.html").resolve()
        if not path.is_file():
            raise SystemExit(f"{path} is not built: run `make book` first")
        tab.goto(path.as_uri(), wait_until="load")
        state = tab.evaluate(PREPARE)
        problems = []
        if state["math"] and state["typeset"] < state["math"]:
            problems.append(f"{state['typeset']} typeset formulas for "
                            f"{state['math']} math elements")
        if state["errors"]:
            problems.append(f"{state['errors']} TeX errors")
        if state["broken"]:
            problems.append(f"images that did not load: {state['broken']}")
        if problems:
            raise SystemExit(f"{page.file}: " + "; ".join(problems))
        tab.emulate_media(media="print")
        pdf = tab.pdf(format="A4", margin=MARGIN, print_background=True,
                      display_header_footer=False)
        tab.emulate_media(media="screen")
        out.append((page, state["title"] or page.file, pdf))
    context.close()
    if remote:
        raise SystemExit(f"requests to remote hosts while printing: {sorted(set(remote))[:5]}")
    if errors:
        raise SystemExit(f"JavaScript errors while printing: {errors[:5]}")
    return out


def _toc_html(title: str, version: str, entries: list[tuple[Page, str, int | str]]) -> str:
    rows, part = [], object()
    for page, name, number in entries:
        if page.part != part and page.part:
            rows.append(f'<tr><td class="part" colspan="2">{html.escape(page.part)}</td></tr>')
        part = page.part
        rows.append(f'<tr><td class="entry">{html.escape(name)}</td>'
                    f'<td class="num">{number}</td></tr>')
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
body {{ font-family: sans-serif; font-size: 11pt; color: #111; }}
.cover {{ height: 240mm; display: flex; flex-direction: column; justify-content: center;
          text-align: center; break-after: page; }}
.cover h1 {{ font-size: 28pt; font-weight: 500; margin: 0 0 8mm; }}
table {{ width: 100%; border-collapse: collapse; }}
td {{ padding: 1.2mm 0; vertical-align: bottom; }}
td.part {{ font-weight: 600; padding-top: 5mm; }}
td.entry {{ padding-left: 6mm; }}
td.num {{ text-align: right; width: 15mm; }}
</style></head><body>
<div class="cover"><h1>{html.escape(title)}</h1>
<p>Version {html.escape(version)}</p>
<p>Text and figures: CC BY 4.0. Code (posenc_lib and the code cells): MIT licence.</p></div>
<h2>Contents</h2><table>{''.join(rows)}</table></body></html>"""


def _print_html(browser, text: str, **options) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.html"
        path.write_text(text)
        context = browser.new_context()
        remote: list[str] = []
        _block_network(context, remote)
        tab = context.new_page()
        tab.goto(path.as_uri(), wait_until="load")
        pdf = tab.pdf(format="A4", margin=MARGIN, print_background=True, **options)
        context.close()
    return pdf


def _n_pages(pdf: bytes) -> int:
    return len(PdfReader(io.BytesIO(pdf)).pages)


def print_book(html_dir: Path, pages: list[Page], out: Path, *, title: str, version: str,
               chromium: str) -> dict:
    """Write the book's PDF to ``out``; return where each page of the book starts."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"])
        printed, chapter = [], 0
        for page, name, pdf in print_pages(browser, html_dir, pages):
            if page.numbered:  # the chapters' numbers, as in the HTML book's sidebar
                chapter += 1
                name = f"{chapter}. {name}"
            printed.append((page, name, pdf))
        # The front matter's length with placeholder numbers, then with the real
        # ones (the numbers take no more room than the placeholders).
        front = _print_html(browser, _toc_html(title, version,
                                               [(p, t, "000") for p, t, _ in printed]))
        n_front = _n_pages(front)
        starts, at = [], n_front
        for _, _, pdf in printed:
            starts.append(at)
            at += _n_pages(pdf)
        front = _print_html(browser, _toc_html(
            title, version, [(p, t, s + 1) for (p, t, _), s in zip(printed, starts)]))
        if _n_pages(front) != n_front:
            raise SystemExit("the table of contents changed length when numbered")
        total = at
        blank = ('<!doctype html><html><body style="margin:0">'
                 + '<div style="height:1px;break-after:page"></div>' * (total - 1)
                 + '<div style="height:1px"></div></body></html>')
        numbers = PdfReader(io.BytesIO(_print_html(
            browser, blank, display_header_footer=True,
            header_template="<span></span>", footer_template=FOOTER)))
        browser.close()
    if len(numbers.pages) != total:
        raise SystemExit(f"the page-number layer has {len(numbers.pages)} pages, "
                         f"the book {total}")

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(front)), import_outline=False)
    for _, _, pdf in printed:
        writer.append(PdfReader(io.BytesIO(pdf)), import_outline=False)
    for index, page in enumerate(writer.pages):
        annotations = page.get("/Annots")
        if annotations is not None:
            kept = [a for a in annotations
                    if not str(a.get_object().get("/A", {}).get("/URI", "")).startswith("file:")]
            if kept:
                page[_name("/Annots")] = _array(kept)
            else:
                del page["/Annots"]
        page.merge_page(numbers.pages[index])
    # The outline: one entry per part, one per page of the book; the table of
    # contents' rows link to the same pages.
    writer.add_outline_item("Contents", 1 if n_front > 1 else 0)
    parent, part = None, object()
    for (page, name, _), start in zip(printed, starts):
        if page.part != part:
            parent = writer.add_outline_item(page.part, start) if page.part else None
            part = page.part
        writer.add_outline_item(name, start, parent=parent)
    writer.add_metadata({"/Title": f"{title} (version {version})",
                         "/Author": "The posenc_lib authors"})
    _link_contents(writer, n_front, [(name, start) for (_, name, _), start
                                     in zip(printed, starts)])
    with open(out, "wb") as handle:
        writer.write(handle)
    return {"pages": total, "front": n_front,
            "starts": {page.file: start + 1 for (page, _, _), start in zip(printed, starts)}}


def _name(text):
    from pypdf.generic import NameObject
    return NameObject(text)


def _array(items):
    from pypdf.generic import ArrayObject
    return ArrayObject(items)


def _link_contents(writer: PdfWriter, n_front: int, entries: list[tuple[str, int]]) -> None:
    """Make each row of the printed table of contents a link to its page.

    The rows are found by their text in the front matter's text layer (with
    positions from pypdf's visitor), so a row that cannot be found keeps no
    link rather than a wrong one."""
    wanted = {name: start for name, start in entries}
    for index in range(n_front):
        found: list[tuple[str, float, float]] = []

        def visit(text, cm, tm, font_dict, font_size):
            if text.strip() in wanted:
                found.append((text.strip(), tm[4] * cm[0] + cm[4], tm[5] * cm[3] + cm[5]))

        writer.pages[index].extract_text(visitor_text=visit)
        width = float(writer.pages[index].mediabox.width)
        for name, x, y in found:
            writer.add_annotation(index, Link(rect=(x - 2, y - 3, width - 30, y + 10),
                                              target_page_index=wanted[name]))
