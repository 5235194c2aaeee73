"""The command line: ``python -m posenc_lib diagnose path/to/module.py:function
...`` (also ``python -m posenc_lib.tools.diagnose``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Callable

from .rope_fn import diagnose_rope


def _load(target: str) -> Callable:
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise ValueError(f"target must be path/to/module.py:function, got {target!r}")
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"target: no file {path!r}")
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.resolve().parent))
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as error:      # SystemExit too: the user's module
        raise ValueError(f"target: importing {path} raised {type(error).__name__}: "
                         f"{error}") from error
    finally:
        sys.path.pop(0)
    if not hasattr(module, name):
        raise ValueError(f"target: {path} defines no {name!r}")
    return getattr(module, name)


def main(argv=None) -> int:
    """``python -m posenc_lib diagnose path/to/module.py:function --dim 128 ...``.

    Prints the findings and the explanation; exits 0 when nothing was found,
    1 when something was, 2 on a bad argument or a ``fn`` that fails.
    """
    parser = argparse.ArgumentParser(
        prog="python -m posenc_lib diagnose",
        description="Diagnose a RoPE implementation fn(x, positions) -> rotated x, "
                    "x (batch, seq, dim) float32, positions (seq,) int64.")
    parser.add_argument("target", help="path/to/module.py:function")
    parser.add_argument("--dim", type=int, default=None,
                        help="features per head (required without --config)")
    parser.add_argument("--base", type=float, default=None,
                        help="intended base (default 10000, or the config's)")
    parser.add_argument("--layout", default=None, help="intended layout: half or "
                                                       "interleaved (default half, or "
                                                       "the config's model's)")
    parser.add_argument("--rotary-dim", type=int, default=None,
                        help="features meant to rotate (default: all)")
    parser.add_argument("--rope-scaling", default=None, metavar="JSON",
                        help='the rope_scaling block, as in config.json: '
                             '\'{"rope_type": "yarn", "factor": 4.0, '
                             '"original_max_position_embeddings": 4096}\'')
    parser.add_argument("--max-position-embeddings", type=int, default=None,
                        help="the config's max_position_embeddings (dynamic; yarn "
                             "without original_max_position_embeddings)")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="sequence length fn's frequencies are for (dynamic, "
                             "longrope)")
    parser.add_argument("--config", default=None, metavar="config.json",
                        help="a model's config.json: dim, base, partial rotary, "
                             "scaling and layout read from it")
    parser.add_argument("--max-position", type=int, default=None,
                        help="largest probed position (default: the context the "
                             "config or --max-position-embeddings gives, else 8191)")
    parser.add_argument("--rotary-position", default="first",
                        help="first (default) or last: where the rotated slice sits")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds each call of fn may take")
    args = parser.parse_args(argv)
    try:
        import json
        fn = _load(args.target)
        scaling_block = config = None
        if args.rope_scaling is not None:
            try:
                scaling_block = json.loads(args.rope_scaling)
            except json.JSONDecodeError as error:
                raise ValueError(f"--rope-scaling is not JSON: {error}") from None
        if args.config is not None:
            try:
                config = json.loads(Path(args.config).read_text())
            except (OSError, json.JSONDecodeError, RecursionError,
                    UnicodeDecodeError) as error:
                raise ValueError(f"--config: cannot read {args.config}: "
                                 f"{type(error).__name__}: {error}") from None
        result = diagnose_rope(fn, dim=args.dim, base=args.base, layout=args.layout,
                               rotary_dim=args.rotary_dim, rope_scaling=scaling_block,
                               max_position_embeddings=args.max_position_embeddings,
                               seq_len=args.seq_len, config=config,
                               max_position=args.max_position,
                               rotary_position=args.rotary_position,
                               timeout=args.timeout)
    except KeyboardInterrupt:
        raise
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except RecursionError:
        print("error: --config: the JSON is nested too deeply to read", file=sys.stderr)
        return 2
    except BaseException as error:      # the front door: one line, never a traceback
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    print(result)
    return 1 if result.findings else 0
