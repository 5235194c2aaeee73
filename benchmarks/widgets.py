"""Interactive figures: live redraw time, static-frame build time, page weight.

    python benchmarks/widgets.py [--repeats 7] [--skip-frames] [--only NAME]
                                 [--html _build/html]

Prints three tables:

1. the time for a live widget to redraw after one slider change, per figure
   (goal: median <= 100 ms). Each change goes to a value whose image is not
   cached and includes what the widget does: compute what the figure
   function has not computed before (it caches its numerics by parameter
   values), draw and encode the PNG. The widget is timed first, so that the
   other two columns find those numerics cached (an advantage for *before*).
   Side by side, change by change on the same values:
   *before*, the original pipeline (``savefig`` of the same image,
   :func:`posenc_lib.figures.fast_rendering` off); *after*, the widget as it
   is now, until the new image is shown (cached glyphs, axis and legend
   layers; the image drawn while a slider moves, at the figure's
   ``draft_scale`` times the book's resolution, which is ``LIVE_SCALE`` = 2
   unless a figure lowers it), with its CPU time and 90th percentile;
   *sharp*, the image the widget shows once the sliders rest (``LIVE_SCALE``
   times the book's resolution, for high-DPI screens; the same image when
   ``draft_scale`` is ``LIVE_SCALE``). CPU time is what the redraw costs
   this process (all its threads); on a machine shared with other jobs the
   wall time is larger by however long the process waited for a core;
2. the time to build every static frame of each figure (the cost the book
   build pays), before and after, with the frame count and the HTML size;
3. the weight of each built page (goal: <= 5 MB), counting the page, its
   inline frames and the images it references; the shared theme and
   vendored assets are reported once, separately.

Timings are medians; compare the before/after ratios taken in one run rather
than absolute numbers across runs.
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

from posenc_lib.figures import _base, fast_rendering  # noqa: E402
from posenc_lib.widgets import LIVE_SCALE, registry  # noqa: E402

GOAL_MS = 100


def _timed(action) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def redraw_times(figure, repeats: int, rng: random.Random) -> dict[str, list[float]]:
    """Per slider change: before (savefig, 1x), after (the live widget), sharpened (2x)."""
    box = figure.live(sharpen_after=None)  # time what appears first; sharpening is separate
    times = {"before": [], "after": [], "after_cpu": [], "sharp": []}
    for _ in range(repeats):
        for control, slider in zip(box.controls, figure.sliders):
            choices = [v for v in slider.values if v != control.value]
            if not choices:
                continue
            value = rng.choice(choices)
            params = {s.name: c.value for s, c in zip(figure.sliders, box.controls)}
            params[slider.name] = value
            # The widget first: the numerics of values it has not seen yet are part
            # of its time. Then the other two, with those numerics cached (as they
            # are when the widget sharpens the image it has just drawn).
            figure._cache.clear()  # time real redraws, not cache hits
            wall, cpu = _timed(lambda: setattr(control, "value", value))
            assert box.status.value == "", box.status.value
            times["after"].append(wall)
            times["after_cpu"].append(cpu)
            figure._cache.clear()
            with fast_rendering(False):
                times["before"].append(_timed(
                    lambda: figure.png(scale=figure.draft_scale, **params))[0])
            figure._cache.clear()
            times["sharp"].append(_timed(lambda: figure.png(scale=LIVE_SCALE, **params))[0])
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


def _ms(values) -> float:
    return statistics.median(values) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--skip-frames", action="store_true",
                        help="do not time the static frames (the slowest part)")
    parser.add_argument("--only", default="", help="only figures whose name contains this")
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html",
                        help="the built book to weigh (default: _build/html)")
    args = parser.parse_args()
    rng = random.Random(0)
    figures = {name: f for name, f in registry().items() if args.only in name}

    print(f"1. Live redraw after one slider change ({args.repeats} rounds per slider; ms)")
    print(f"{'figure':34s} {'before':>7s} {'after':>7s} {'ratio':>6s} {'CPU':>6s} "
          f"{'p90':>6s} {'sharp':>6s} {'n':>4s}")
    summary = {"before": [], "after": [], "after_cpu": []}
    for name, figure in figures.items():
        try:
            times = redraw_times(figure, args.repeats, rng)
        except Exception as error:  # a chapter being edited should not stop the rest
            print(f"{name:34s} failed: {type(error).__name__}: {error}")
            continue
        after = sorted(times["after"])
        p90 = after[int(0.9 * (len(after) - 1))]
        for key in summary:
            summary[key].append(_ms(times[key]))
        print(f"{name:34s} {_ms(times['before']):7.0f} {_ms(after):7.0f} "
              f"{_ms(times['before']) / _ms(after):5.1f}x {_ms(times['after_cpu']):6.0f} "
              f"{p90 * 1e3:6.0f} {_ms(times['sharp']):6.0f} {len(after):4d}")
    n = len(summary["after"])
    if n:
        under = {key: sum(t <= GOAL_MS for t in values) for key, values in summary.items()}
        ratio = statistics.median(b / a for b, a in zip(summary["before"], summary["after"]))
        print(f"median at or under {GOAL_MS} ms: before {under['before']}/{n}, after "
              f"{under['after']}/{n} (wall), {under['after_cpu']}/{n} (CPU); median "
              f"ratio before/after {ratio:.1f}x")
    print(f"axis layers: {_base._layers.hits} reused, {_base._layers.misses} drawn; "
          f"legends: {_base._legend_layers.hits} reused, {_base._legend_layers.misses} drawn")

    if not args.skip_frames:
        print("\n2. Static frames (rendered and palette-compressed at book build time)")
        print(f"{'figure':34s} {'frames':>6s} {'unique':>6s} {'before s':>9s} {'after s':>8s} "
              f"{'HTML MB':>8s}")
        totals = [0.0, 0.0]
        for name, figure in figures.items():
            try:
                figure._cache.clear()
                with fast_rendering(False):
                    before = _timed(figure.frames)[0]
                figure._cache.clear()
                start = time.perf_counter()
                unique, index = figure.frames()
                after = time.perf_counter() - start
            except Exception as error:
                print(f"{name:34s} failed: {type(error).__name__}: {error}")
                continue
            totals[0] += before
            totals[1] += after
            size = len(figure.static_html()) / 1e6  # frames are cached by now
            print(f"{name:34s} {len(index):6d} {len(unique):6d} {before:9.1f} {after:8.1f} "
                  f"{size:8.2f}")
        print(f"{'total':34s} {'':6s} {'':6s} {totals[0]:9.1f} {totals[1]:8.1f}")

    html_root = args.html
    print(f"\n3. Page weight of the built book ({html_root})")
    if not (html_root / "book").is_dir():
        print(f"   {html_root} has no built book: run `make book` first")
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
