"""Relative position encodings: extra parameters, memory and time of one attention layer.

    python benchmarks/relative_memory.py [--lengths 256 512 1024 2048] [--repeats 5]

For each method and sequence length L, one ``MultiHeadAttention`` layer
(d_model 512, 8 heads, batch 1, float32, causal) runs forward through the
method's hooks, next to the same layer with no positions. The methods are
Shaw et al. in its three implementations (``gather``: the (L, L, d) tables,
as in the paper; ``project``: q against the 2κ + 1 table rows, then a gather
of scores; ``skew``: q against one row per relative position, then the
skewing of Huang et al., 2018), T5 buckets, Transformer-XL, DeBERTa's c2p +
p2c, Kerple (log kernel), FIRE and CoPE. Printed per row:

* ``params``: the parameters the method adds to the layer (T5's table serves
  the whole stack; it is counted here once, as for a one-layer stack);
* ``extra peak``: the peak of memory allocated during a forward pass under
  ``torch.no_grad()``, minus the same for the plain layer, measured with
  ``torch.profiler`` (``profile_memory=True``) by replaying its allocation
  events in time order;
* ``extra saved``: the bytes that autograd keeps for the backward pass (each
  storage counted once), minus the plain layer's;
* ``time``: median forward time (no grad) and its ratio to the plain layer,
  all variants timed in interleaved rounds, side by side in one run.

The T5 row includes computing the bias, which a real stack does once for all
its layers. Numbers are measured, never asserted; timings on a shared machine
vary, so compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from posenc_lib import attention, relative  # noqa: E402

MIB = 2 ** 20


METHODS = ("none", "shaw-gather", "shaw-project", "shaw-skew", "t5", "xl",
           "deberta", "kerple", "fire", "cope")


def hooks(method: str, d_model: int, n_heads: int, clip: int):
    """``(module or None, keyword arguments for MultiHeadAttention.forward)``."""
    head_dim = d_model // n_heads
    if method == "none":
        return None, {}
    if method.startswith("shaw-"):
        module = relative.ShawRelativePosition(clip, head_dim,
                                               implementation=method[len("shaw-"):])
        return module, {"score_bias": module.score_bias, "value_term": module.value_term}
    if method == "t5":
        module = relative.T5RelativeBias(n_heads, bidirectional=False)
    elif method == "xl":
        module = relative.TransformerXLRelativePosition(d_model, n_heads)
    elif method == "deberta":
        module = relative.DisentangledRelativePosition(clip, n_heads, head_dim)
    elif method == "kerple":
        module = torch.nn.Module()
        module.r1 = torch.nn.Parameter(torch.ones(n_heads))
        module.r2 = torch.nn.Parameter(torch.ones(n_heads))

        def bias(q, k, module=module):
            return relative.kerple_bias(module.r1, module.r2, q.shape[-2], k.shape[-2],
                                        dtype=q.dtype)

        return module, {"score_bias": bias}
    elif method == "fire":
        module = relative.FIREBias(n_heads)
    elif method == "cope":
        module = relative.ContextualPosition(head_dim, 64)
    else:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return module, {"score_bias": module.score_bias}


@contextlib.contextmanager
def _silenced_stderr():
    """The profiler's C++ side prints a line to stderr at every start and stop."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def peak_bytes(fn) -> int:
    """Peak of the bytes allocated while ``fn`` runs, from the profiler's events."""
    with _silenced_stderr(), profile(activities=[ProfilerActivity.CPU],
                                     profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    current = peak = 0
    for _, nbytes in events:
        current += nbytes
        peak = max(peak, current)
    return peak


def saved_bytes(fn) -> int:
    """Bytes of the distinct storages autograd saves for the backward pass."""
    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn()
    return sum(storages.values())


def median_ms(fns: list, repeats: int) -> list[float]:
    """Median time of each function, run in interleaved rounds (one warm-up round)."""
    times = [[] for _ in fns]
    for round_ in range(repeats + 1):
        for n, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            if round_:
                times[n].append(time.perf_counter() - start)
    return [1000 * statistics.median(t) for t in times]


def measure(length: int, args) -> list[dict]:
    rows, forwards = [], []
    x = torch.randn(1, length, args.d_model, generator=torch.Generator().manual_seed(0))
    for method in METHODS:
        torch.manual_seed(0)
        layer = attention.MultiHeadAttention(args.d_model, args.heads)
        module, kwargs = hooks(method, args.d_model, args.heads, args.clip)

        def forward(layer=layer, kwargs=kwargs):
            return layer(x, causal=True, **kwargs)

        def forward_no_grad(forward=forward):
            with torch.no_grad():
                return forward()

        forwards.append(forward_no_grad)
        rows.append({
            "method": method,
            "params": 0 if module is None else sum(p.numel() for p in module.parameters()),
            "peak": peak_bytes(forward_no_grad),
            "saved": saved_bytes(forward),
        })
    for row, ms in zip(rows, median_ms(forwards, args.repeats)):
        row["ms"] = ms
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--clip", type=int, default=16,
                        help="Shaw's clip distance κ (and DeBERTa's)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    head_dim = args.d_model // args.heads
    names = {"shaw-gather": f"Shaw, gather (κ = {args.clip})",
             "shaw-project": f"Shaw, project (κ = {args.clip})",
             "shaw-skew": f"Shaw, skew (κ = {args.clip})",
             "t5": "T5 (32 buckets)", "xl": "Transformer-XL",
             "deberta": f"DeBERTa c2p+p2c (κ = {args.clip})",
             "kerple": "Kerple (log)", "fire": "FIRE (MLP width 32)",
             "cope": "CoPE (npos_max 64)"}
    print(f"One causal attention layer: d_model {args.d_model}, {args.heads} heads of "
          f"{head_dim}, batch 1, float32, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads\n")
    header = (f"{'method':<26} {'L':>5} {'params':>8} {'extra peak':>11} "
              f"{'extra saved':>12} {'time':>9} {'ratio':>6}")
    print(header)
    print("-" * len(header))
    for length in args.lengths:
        rows = measure(length, args)
        base = rows[0]
        print(f"{'plain attention':<26} {length:>5} {0:>8} {base['peak'] / MIB:>7.1f} MiB "
              f"{base['saved'] / MIB:>8.1f} MiB {base['ms']:>6.1f} ms {1:>6.2f}"
              "   (absolute values)")
        for row in rows[1:]:
            print(f"{names[row['method']]:<26} {length:>5} {row['params']:>8,} "
                  f"{(row['peak'] - base['peak']) / MIB:>+7.1f} MiB "
                  f"{(row['saved'] - base['saved']) / MIB:>+8.1f} MiB "
                  f"{row['ms']:>6.1f} ms {row['ms'] / base['ms']:>6.2f}")
        print()
    print("Reference sizes of the tensors each method materializes (float32, per layer):")
    length = max(args.lengths)
    print(f"  L = {length}: L·L·d_head (one gathered Shaw table) = "
          f"{length * length * head_dim * 4 / MIB:.1f} MiB; "
          f"h·L·L (one score-sized tensor) = {args.heads * length * length * 4 / MIB:.1f} MiB; "
          f"L·L int64 bucket ids = {length * length * 8 / MIB:.1f} MiB")


if __name__ == "__main__":
    main()
