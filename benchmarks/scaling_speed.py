"""rope_parameters speed: posenc_lib.scaling against transformers' ROPE_INIT_FUNCTIONS.

    python benchmarks/scaling_speed.py [--repeats 15] [--calls 200] [--dim 128]

Dynamic NTK recomputes its frequencies whenever the sequence grows, so
:func:`posenc_lib.scaling.rope_parameters` sits on a model's forward path. For
every ``rope_type`` that both implement, this script times one call of each,
side by side in the same run: ``rope_parameters(rope_type, dim, base,
**params)`` returning float32, and transformers' function for the same type
called on a ``LlamaConfig`` built once beforehand (as a model does). Both
results are checked to agree before timing.

Each row gives the median over ``--repeats`` rounds of the mean time of
``--calls`` consecutive calls (candidates alternate within a round, so a busy
neighbour slows both alike) and the ratio ours / transformers. The extra cost
on our side is argument validation; transformers validates its config once,
at construction. Compare ratios taken in one run, not absolute times across
runs.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from posenc_lib import scaling  # noqa: E402


def cases(dim: int, base: float):
    """(label, rope_type, our params incl. seq_len, rope_scaling, max_position_embeddings, seq_len)."""
    generator = torch.Generator().manual_seed(0)
    short = (1 + 0.1 * torch.rand(dim // 2, generator=generator)).tolist()
    long = (1 + 30 * torch.rand(dim // 2, generator=generator)).tolist()
    return [
        ("default", "default", {}, None, 4096, None),
        ("linear", "linear", {"factor": 4.0}, {"rope_type": "linear", "factor": 4.0}, 4096,
         None),
        ("dynamic, seq_len 3L", "dynamic",
         {"factor": 4.0, "max_position_embeddings": 4096},
         {"rope_type": "dynamic", "factor": 4.0}, 4096, 3 * 4096),
        ("yarn", "yarn", {"factor": 16.0, "original_max_position_embeddings": 4096},
         {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096},
         65536, None),
        ("llama3", "llama3",
         {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192},
         {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, 131072, None),
        ("longrope, long", "longrope",
         {"short_factor": short, "long_factor": long, "factor": 32.0,
          "original_max_position_embeddings": 4096},
         {"rope_type": "longrope", "short_factor": short, "long_factor": long, "factor": 32.0},
         4096, 8192),
    ]


def mean_call_time(function, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--base", type=float, default=10000.0)
    args = parser.parse_args()

    import transformers
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    transformers.logging.set_verbosity_error()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}")
    print(f"dim {args.dim}, base {args.base:g}; median over {args.repeats} rounds of the mean "
          f"of {args.calls} calls\n")
    print(f"{'rope_type':22s} {'posenc_lib (us)':>16s} {'transformers (us)':>18s} "
          f"{'ratio':>7s}")
    for label, rope_type, params, rope_scaling, max_len, seq_len in cases(args.dim, args.base):
        config = LlamaConfig(hidden_size=args.dim * 2, num_attention_heads=2, head_dim=args.dim,
                             rope_theta=args.base, max_position_embeddings=max_len,
                             rope_scaling=rope_scaling)
        reference = ROPE_INIT_FUNCTIONS[rope_type]

        def ours():
            return scaling.rope_parameters(rope_type, args.dim, args.base, seq_len=seq_len,
                                           dtype=torch.float32, **params)

        def theirs():
            return reference(config, "cpu", seq_len=seq_len)

        mine, their = ours(), theirs()
        assert torch.allclose(mine[0], their[0], rtol=3e-6, atol=0), rope_type
        assert abs(mine[1] - their[1]) < 1e-12, rope_type
        times = {"ours": [], "theirs": []}
        for _ in range(args.repeats):
            times["ours"].append(mean_call_time(ours, args.calls))
            times["theirs"].append(mean_call_time(theirs, args.calls))
        a, b = statistics.median(times["ours"]), statistics.median(times["theirs"])
        print(f"{label:22s} {a * 1e6:16.1f} {b * 1e6:18.1f} {a / b:7.2f}")


if __name__ == "__main__":
    main()
