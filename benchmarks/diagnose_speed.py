"""Time diagnose_rope on correct RoPE kernels (head_dim 64-128, contexts up to
131,072), the interactive case: every call should take well under 2 s.

    PYTHONPATH=. .venv/bin/python benchmarks/diagnose_speed.py [--threads 2]

Prints one line per kernel and the median and maximum over them. The kernels
are written here in three styles (transformers' rotate_half, Meta's complex
product, a GPT-J style cos/sin cache) from frequencies computed here, not by
posenc_lib.
"""

import argparse
import math
import statistics
import time
import warnings

import torch

from posenc_lib import scaling
from posenc_lib.tools.diagnose import diagnose_rope


def ladder(dim, base):
    return scaling.rope_parameters("default", dim, base, dtype=torch.float64)[0]


def llama3(dim, base, factor, low, high, original):
    return scaling.rope_parameters(
        "llama3", dim, base, dtype=torch.float64, factor=factor, low_freq_factor=low,
        high_freq_factor=high, original_max_position_embeddings=original)[0]


def rotate_half_style(inv):
    inv = inv.float()

    def fn(x, positions):
        f = positions.float()[:, None] * inv
        emb = torch.cat((f, f), -1)
        x1, x2 = x.chunk(2, -1)
        return x * emb.cos() + torch.cat((-x2, x1), -1) * emb.sin()
    return fn


def complex_style(inv):
    inv = inv.float()

    def fn(x, positions):
        cis = torch.polar(torch.ones(len(positions), len(inv)),
                          torch.outer(positions.float(), inv))
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(xc * cis).flatten(-2)
    return fn


def cache_style(inv, rows):
    t = torch.arange(rows, dtype=torch.float32)
    f = torch.outer(t, inv.float())
    cos, sin = f.cos(), f.sin()

    def fn(x, positions):
        c, s = cos[positions], sin[positions]
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * c - b * s, b * c + a * s), -1).flatten(-2)
    return fn


def kernels():
    l31 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    for dim in (64, 128):
        for base, context in ((1e4, 8192), (5e5, 32768), (1e6, 131072)):
            inv = ladder(dim, base)
            kw = dict(dim=dim, base=base, max_position_embeddings=context)
            yield f"rotate_half d{dim} base {base:g} ctx {context}", \
                rotate_half_style(inv), dict(kw, layout="half")
            yield f"complex d{dim} base {base:g} ctx {context}", \
                complex_style(inv), dict(kw, layout="interleaved")
        inv = llama3(dim, 5e5, 8.0, 1.0, 4.0, 8192)
        kw = dict(dim=dim, base=5e5, rope_scaling=l31, max_position_embeddings=131072)
        yield f"llama3 rotate_half d{dim} ctx 131072", rotate_half_style(inv), \
            dict(kw, layout="half")
        yield f"llama3 cache d{dim} ctx 131072", cache_style(inv, 131072), \
            dict(kw, layout="interleaved")
        yield f"cache d{dim} ctx 32768", cache_style(ladder(dim, 1e4), 32768), \
            dict(dim=dim, base=1e4, max_position_embeddings=32768, layout="interleaved")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    times, cpu_times = [], []
    for name, fn, kw in kernels():
        best = best_cpu = math.inf
        for _ in range(args.repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            try:
                result = diagnose_rope(fn, **kw)
                verdict = ", ".join(result.findings) or "clean"
            except (TypeError, ValueError) as error:   # an older diagnose's arguments
                kw = {k: v for k, v in kw.items() if k != "max_position_embeddings"}
                kw["max_position"] = 8191
                result = diagnose_rope(fn, **kw)
                verdict = (", ".join(result.findings) or "clean") + f" ({error})"[:0]
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - start_cpu)
        times.append(best)
        cpu_times.append(best_cpu)
        print(f"{best:6.3f} s wall {best_cpu:6.3f} s cpu  {name}: {verdict}")
    print(f"median {statistics.median(times):.3f} s, max {max(times):.3f} s wall; "
          f"median {statistics.median(cpu_times):.3f} s, max {max(cpu_times):.3f} s CPU "
          f"(all threads) over {len(times)} correct kernels ({args.threads} threads)")


if __name__ == "__main__":
    main()
