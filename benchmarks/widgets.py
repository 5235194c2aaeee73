"""Interactive figures: live redraw time, static-frame build time, page weight.

    python benchmarks/widgets.py [--repeats 9] [--skip-frames]

Prints three tables:

1. the median (and 90th percentile) time for a live widget to redraw after one
   slider change, per figure (goal: <= 100 ms). Each change goes to a value
   whose frame is not cached, and includes what the widget does: run the
   plotting function and encode the PNG;
2. the time to build every static frame of each figure (the cost the book
   build pays), with the frame count and the resulting HTML size;
3. the weight of each built page of ``_build/html`` (goal: <= 5 MB), counting
   the page, its inline frames and the images it references; the shared theme
   and vendored assets are reported once, separately.

Timings are medians over repeated runs on a shared machine; compare ratios
taken in one run rather than absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from posenc_lib.widgets import registry  # noqa: E402


def redraw_times(figure, repeats: int, rng: random.Random) -> list[float]:
    box = figure.live()
    times = []
    for _ in range(repeats):
        for control, slider in zip(box.controls, figure.sliders):
            choices = [v for v in slider.values if v != control.value]
            if not choices:
                continue
            figure._cache.clear()  # time a real redraw, not a cache hit
            start = time.perf_counter()
            control.value = rng.choice(choices)
            times.append(time.perf_counter() - start)
            assert box.status.value == "", box.status.value
    return times


def page_weights(html_root: Path):
    static = html_root / "_static"
    shared = sum(f.stat().st_size for f in static.rglob("*") if f.is_file())
    rows = []
    for page in sorted((html_root / "book").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        images = set(re.findall(r'src="\.\./(_images/[^"]+)"', text))
        image_bytes = sum((html_root / img).stat().st_size for img in images)
        inline = sum(len(m) for m in re.findall(r"data:image/png;base64,[A-Za-z0-9+/=]+", text))
        inline += sum(len(m) for m in re.findall(
            r'<script type="application/json">(.*?)</script>', text, flags=re.S))
        rows.append((page.name, page.stat().st_size, inline, image_bytes))
    return shared, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--skip-frames", action="store_true",
                        help="do not time the static frames (the slowest part)")
    args = parser.parse_args()
    rng = random.Random(0)
    figures = registry()

    print(f"1. Live redraw after one slider change ({args.repeats} rounds per slider)")
    print(f"{'figure':42s} {'median ms':>10s} {'p90 ms':>8s} {'n':>4s}")
    for name, figure in figures.items():
        times = sorted(redraw_times(figure, args.repeats, rng))
        p90 = times[int(0.9 * (len(times) - 1))]
        print(f"{name:42s} {statistics.median(times) * 1e3:10.0f} {p90 * 1e3:8.0f} "
              f"{len(times):4d}")

    if not args.skip_frames:
        print("\n2. Static frames (rendered and palette-compressed at book build time)")
        print(f"{'figure':42s} {'frames':>6s} {'unique':>6s} {'seconds':>8s} {'HTML MB':>8s}")
        total = 0.0
        for name, figure in figures.items():
            figure._cache.clear()
            start = time.perf_counter()
            unique, index = figure.frames()
            elapsed = time.perf_counter() - start
            total += elapsed
            size = len(figure.static_html()) / 1e6  # frames are cached by now
            print(f"{name:42s} {len(index):6d} {len(unique):6d} {elapsed:8.1f} {size:8.2f}")
        print(f"{'total':42s} {'':6s} {'':6s} {total:8.1f}")

    html_root = ROOT / "_build" / "html"
    print("\n3. Page weight of the built book")
    if not (html_root / "book").is_dir():
        print("   _build/html is missing: run `make book` first")
        return
    shared, rows = page_weights(html_root)
    print(f"{'page':32s} {'HTML MB':>8s} {'inline frames MB':>17s} {'images MB':>10s} "
          f"{'total MB':>9s}")
    for name, html_bytes, inline, image_bytes in rows:
        print(f"{name:32s} {html_bytes / 1e6:8.2f} {inline / 1e6:17.2f} "
              f"{image_bytes / 1e6:10.2f} {(html_bytes + image_bytes) / 1e6:9.2f}")
    print(f"shared theme and vendored assets (_static/, counted once): {shared / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
