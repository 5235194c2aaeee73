"""Fit the layout margins of every interactive figure and store them (`make layouts`).

Each figure's layout is fitted over its sliders' ends
(``InteractiveFigure.fit_margins``), which takes a few seconds a figure; the
stored margins let the book, the tests and the live widgets skip that. Run it
after changing a figure, its sliders or matplotlib: a unit test
(tests/figures/test_widgets.py) fails while a stored fingerprint is out of date.
"""

from __future__ import annotations

import time

from posenc_lib.widgets import registry
from posenc_lib.widgets.core import LAYOUTS_FILE, write_layouts

if __name__ == "__main__":
    start = time.perf_counter()
    stored = write_layouts(registry())
    shrunk = sorted(entry["figure"] for entry in stored.values() if any(entry["margins"]))
    print(f"{len(stored)} layouts written to {LAYOUTS_FILE} in "
          f"{time.perf_counter() - start:.0f} s; shrunk to fit: {', '.join(shrunk)}")
