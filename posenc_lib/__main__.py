"""The command line: ``python -m posenc_lib TOOL [ARGS...]``.

One entry point for the reader tools (:mod:`posenc_lib.tools`); ``python -m
posenc_lib TOOL --help`` gives each tool's options. The entry points each tool had before it moved into
:mod:`posenc_lib.tools` run the same code (:mod:`posenc_lib._moved`).
"""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

#: ``{tool: (module, function, one line)}``; each function takes ``argv`` and
#: returns the exit status (``None`` counts as 0).
TOOLS = {
    "inspect": ("posenc_lib.tools.inspector", "main",
                "what a model's config.json sets up (RoPE, lengths, KV cache, serving)"),
    "crosscheck": ("posenc_lib.tools.inspector", "crosscheck_main",
                   "the inspector's report against a tiny model built by transformers"),
    "diagnose": ("posenc_lib.tools.diagnose", "main",
                 "find the bug in a RoPE implementation fn(x, positions)"),
    "experiment": ("posenc_lib.tools.experiment", "main",
                   "train and evaluate chapter 7's length-generalization study"),
}


def usage() -> str:
    width = max(map(len, TOOLS))
    lines = ["usage: python -m posenc_lib TOOL [ARGS...]", "", "tools:"]
    lines += [f"  {name:<{width}}  {summary}" for name, (_, _, summary) in TOOLS.items()]
    lines += ["", "`python -m posenc_lib TOOL --help` lists a tool's options."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``TOOL`` with the remaining arguments; 2 for a missing or unknown tool."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in TOOLS:
        print(f"error: unknown tool {name!r}; choose one of {', '.join(TOOLS)}\n",
              file=sys.stderr)
        print(usage(), end="", file=sys.stderr)
        return 2
    module, function, _ = TOOLS[name]
    status = getattr(importlib.import_module(module), function)(rest)
    return 0 if status is None else int(status)


if __name__ == "__main__":
    sys.exit(main())
