"""Print the table implementation | truth | finding for diagnose_rope over the
RoPEs of tests/helpers/rope_styles.py (six styles, correct, scaled and buggy).

    PYTHONPATH=. python tests/helpers/diagnose_table.py [--max-position 2048]
"""

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: tests/ holds the helpers package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.rope_styles import (  # noqa: E402
    BASE, BUGS, DIM, SCALINGS, STYLES, plain, transformers_rope, yarn_ramp_inverted)

from posenc_lib.tools.diagnose import diagnose_rope  # noqa: E402


def rows(max_position):
    for style, (make, layout) in STYLES.items():
        yield style, "correct", make(plain()), {}, layout
        yield style, "correct, base 500000", make(plain(base=5e5)), dict(base=5e5), layout
        for kind, block in SCALINGS.items():
            inv, att = transformers_rope(block)
            yield style, f"correct {kind}", make(inv, att=att), dict(rope_scaling=block), \
                layout
        for name, inv, bug, _, _ in BUGS:
            yield style, name, make(inv.float(), bug), {}, layout
        inv, att = transformers_rope(SCALINGS["yarn"])
        yield style, "yarn, attention factor missing", make(inv), \
            dict(rope_scaling=SCALINGS["yarn"]), layout
        yield style, "yarn, attention factor twice", make(inv, att=att * att), \
            dict(rope_scaling=SCALINGS["yarn"]), layout
        yield style, "yarn, ramp inverted", make(yarn_ramp_inverted(SCALINGS["yarn"]),
                                                 att=att), \
            dict(rope_scaling=SCALINGS["yarn"]), layout
        yield style, "llama3 served as plain RoPE", make(plain()), \
            dict(rope_scaling=SCALINGS["llama3"]), layout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-position", type=int, default=8191)
    args = parser.parse_args()
    print("| implementation | truth | finding |")
    print("| --- | --- | --- |")
    for style, truth, fn, kw, layout in rows(args.max_position):
        kw = dict(dict(dim=DIM, base=BASE, layout=layout), **kw)
        result = diagnose_rope(fn, max_position=args.max_position, **kw)
        found = ", ".join(result.findings) or "clean"
        print(f"| {style} | {truth} | {found} |")


if __name__ == "__main__":
    main()
