"""Page weight and time to first figure of built book pages, side by side.

    python benchmarks/page_weight.py [--html DIR] [--before DIR] [--loads 7]
                                     [--pages book/01_why_positions book/04_rope ...]

For each page of the built book in ``--html`` (default ``_build/html``), and
of a second build in ``--before`` when given (say, a copy of the book built
from another commit), it reports

* **weight**: the bytes a reader's browser fetches to show the page as it
  opens: the HTML file, with everything inline in it (the slider figures'
  frames, if they are inline, as base64), plus the images its ``<img>`` tags
  name; of that, the inline ``data:`` bytes, and the image files (the figures
  without sliders, drawn at 2x, and their count);
* **on disk**: the weight plus the slider figures' frame files that the page
  loads only when a slider reaches them (``_images/frames/``, see
  ``book/_ext/posenc_book.py``);
* **time to first figure**: in headless Chromium (Debian's, or
  ``POSENC_CHROMIUM``) at 1280 x 900 and a device pixel ratio of 2, from the
  start of navigation to the first animation frame at which the article's
  first figure image (and, separately, its first slider figure's image) is
  loaded and decoded; and the time of the ``load`` event. Pages are opened
  from ``file://`` and from a local HTTP server (Python's ``http.server`` on
  127.0.0.1), each load in a fresh browser context (no cache), the two builds
  alternating so that the machine's load affects both alike; medians of
  ``--loads`` loads.

Without a built book it says so and exits 0 (``make benchmark`` runs every
script here).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import statistics
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("POSENC_CHROMIUM", "/usr/bin/chromium")
PAGES = ("book/01_why_positions", "book/04_rope", "book/06_extension")
VIEWPORT = {"width": 1280, "height": 900}

_PAYLOAD = re.compile(r'<script type="application/json">(.*?)</script>', re.DOTALL)
_IMG_SRC = re.compile(r'<img[^>]+src="([^"]+)"')

# Installed before any of the page's scripts: polls, at every animation frame,
# for the first figure image and the first slider figure's image to be loaded.
_PROBE = """
(() => {
  const t = window.__posencTimes = {};
  const ready = img => img && img.complete && img.naturalWidth > 0;
  const poll = () => {
    const now = performance.now();
    if (t.figure === undefined && ready(document.querySelector('article.bd-article figure img')))
      t.figure = now;
    if (t.slider === undefined && ready(document.querySelector('[data-posenc-figure] img')))
      t.slider = now;
    if (t.figure === undefined || t.slider === undefined) requestAnimationFrame(poll);
  };
  requestAnimationFrame(poll);
  window.addEventListener('load', () => { t.load = performance.now(); });
})();
"""


def weigh(html: Path, page: str) -> dict:
    """Bytes of one page: HTML, inline data, images loaded at once, frames on disk."""
    path = html / f"{page}.html"
    text = path.read_text(encoding="utf-8")
    inline = sum(len(src) for src in _IMG_SRC.findall(text) if src.startswith("data:"))
    images = {(path.parent / src).resolve() for src in _IMG_SRC.findall(text)
              if not src.startswith(("data:", "http:", "https:"))}
    frames = set()
    for body in _PAYLOAD.findall(text):
        try:
            payload = json.loads(body)
        except ValueError:
            continue
        if not isinstance(payload, dict):
            continue
        inline += sum(len(f) for f in payload.get("frames", []))
        frames |= {(path.parent / (payload["base"] + name)).resolve()
                   for name in payload.get("names", []) if name}
    html_bytes = path.stat().st_size
    image_bytes = sum(p.stat().st_size for p in images if p.is_file())
    frame_bytes = sum(p.stat().st_size for p in frames if p.is_file())
    return {"html": html_bytes, "inline": inline, "weight": html_bytes + image_bytes,
            "disk": html_bytes + image_bytes + frame_bytes, "frame_files": len(frames),
            "images": image_bytes, "image_files": len(images)}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def load_once(browser, url: str) -> dict:
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=2)
    try:
        page = context.new_page()
        failed = []
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.add_init_script(_PROBE)
        page.goto(url, wait_until="load", timeout=120_000)
        page.wait_for_function("() => window.__posencTimes.figure !== undefined"
                               " || !document.querySelector('article.bd-article figure img')",
                               timeout=60_000)
        if page.evaluate("() => !!document.querySelector('[data-posenc-figure] img')"):
            page.wait_for_function("() => window.__posencTimes.slider !== undefined",
                                   timeout=60_000)
        times = page.evaluate("() => window.__posencTimes")
        if failed:
            raise RuntimeError(f"failed requests loading {url}: {failed[:3]}")
        return times
    finally:
        context.close()


def _ms(values) -> str:
    values = [v for v in values if v is not None]
    return f"{statistics.median(values):7.0f}" if values else "      -"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html",
                        help="the built book to measure (default: _build/html)")
    parser.add_argument("--before", type=Path, default=None,
                        help="a second build, measured side by side (say, the last commit's)")
    parser.add_argument("--pages", nargs="+", default=list(PAGES))
    parser.add_argument("--loads", type=int, default=7, help="loads per page, URL and build")
    parser.add_argument("--no-http", action="store_true", help="file:// only")
    args = parser.parse_args(argv)
    if args.loads < 1:
        parser.error(f"--loads must be at least 1, got {args.loads}")
    builds = {"after": args.html} if args.before is None else {"before": args.before,
                                                                "after": args.html}
    for label, html in builds.items():
        if not (html / "index.html").is_file():
            print(f"no built book in {html} (--{'html' if label == 'after' else label}): "
                  "run `make book` first; nothing measured")
            return 0
        missing = [p for p in args.pages if not (html / f"{p}.html").is_file()]
        if missing:
            parser.error(f"pages not built in {html}: {missing}")

    print("Weight: bytes fetched to show the page as it opens (HTML with its inline data,"
          " plus <img> files);\non disk: with the frame files loaded when a slider reaches"
          " them. MB = 10^6 bytes.")
    print(f"{'page':26} {'build':6} {'HTML MB':>8} {'inline MB':>9} {'images MB':>9}"
          f" {'weight MB':>9} {'on disk MB':>10} {'images':>6} {'frame files':>11}")
    for page in args.pages:
        for label, html in builds.items():
            w = weigh(html, page)
            print(f"{page:26} {label:6} {w['html'] / 1e6:8.2f} {w['inline'] / 1e6:9.2f} "
                  f"{w['images'] / 1e6:9.2f} {w['weight'] / 1e6:9.2f} {w['disk'] / 1e6:10.2f}"
                  f" {w['image_files']:6d} {w['frame_files']:11d}")

    if not Path(CHROMIUM).is_file():
        print(f"no Chromium at {CHROMIUM}: times not measured")
        return 0
    from playwright.sync_api import sync_playwright

    servers, bases = [], {}
    for label, html in builds.items():
        bases[label] = {"file": html.resolve().as_uri() + "/"}
        if not args.no_http:
            server, url = serve(html)
            servers.append(server)
            bases[label]["http"] = url
    schemes = ["file"] + ([] if args.no_http else ["http"])
    times = {(p, s, b): [] for p in args.pages for s in schemes for b in builds}
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                      "--disable-component-update", "--no-first-run"])
            for page in args.pages:
                for scheme in schemes:
                    for _ in range(args.loads):
                        for label in builds:  # alternating, side by side
                            url = bases[label][scheme] + page + ".html"
                            times[page, scheme, label].append(load_once(browser, url))
            browser.close()
    finally:
        for server in servers:
            server.shutdown()

    print(f"\nMilliseconds from navigation start, medians of {args.loads} loads "
          f"(1280 x 900, device pixel ratio 2, no cache):")
    print(f"{'page':26} {'from':5} {'build':6} {'1st figure':>10} {'1st slider':>10} "
          f"{'load':>7}")
    for page in args.pages:
        for scheme in schemes:
            for label in builds:
                runs = times[page, scheme, label]
                print(f"{page:26} {scheme:5} {label:6} "
                      f"{_ms(r.get('figure') for r in runs):>10} "
                      f"{_ms(r.get('slider') for r in runs):>10} "
                      f"{_ms(r.get('load') for r in runs):>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
