"""RoPE speed: posenc_lib.rope against the dense and complex forms and the reference libraries.

    python benchmarks/rope_speed.py [--repeats 15] [--threads N]
                                    [--batch 1] [--heads 32] [--seq 4096] [--dim 128]

Rotates a query and a key tensor of shape (batch, heads, seq, dim), float32 on
the CPU, with each implementation, and prints one table with two groups:

* **cos/sin included**: every timed call starts from the positions and computes
  its angles, cos and sin (or rotation matrices, or complex phases), then
  rotates q and k. ``apply_rope`` computes cos/sin once per tensor, at
  (seq, dim/2), and broadcasts them over batch and heads; transformers computes
  them once for q and k together (``LlamaRotaryEmbedding``, at
  (batch, seq, dim)); rotary-embedding-torch reuses its cached angles and takes
  cos/sin of them on every call.
* **cos/sin precomputed**: the cos/sin (rotation matrices, complex phases)
  are built once before timing, as a model caches them per forward pass; each
  timed call only rotates q and k. ``apply_cos_sin`` gets the same (seq, dim)
  tensors that :func:`posenc_lib.rope.cos_sin` returns (and checks that every
  angle is repeated); transformers' ``apply_rotary_pos_emb`` gets its rotary
  embedding's (batch, seq, dim) output; rotary-embedding-torch's
  ``apply_rotary_emb`` takes angles, so it still computes cos and sin.

Every output is checked against an independent float64 computation before
timing. Each row gives the median over ``--repeats`` rounds (candidates run in
turn within a round, so a busy neighbour slows them all alike), the ratio to
transformers in the same group, and the effective bandwidth: bytes read plus
bytes written by the rotation itself (q and k read once, two outputs written
once: 4 x seq x heads x dim x 4 bytes; cos/sin are small and left out) divided
by the median time. The memory bandwidth of the machine is measured in the
same run, with ``copy_`` into a preallocated buffer and with ``clone()``
(which, like every out-of-place rotation here, writes fresh memory and pays
its page faults). Compare ratios taken in one run, not absolute times across
runs.

Writing fresh memory is expensive here: a 64 MiB output is mapped page by page
on first touch, which costs every out-of-place rotation as much as the
arithmetic. torch's switch ``THP_MEM_ALLOC_ENABLE=1`` (an environment variable,
read once per process) lets its allocator use transparent huge pages, which
removes most of that cost for every candidate alike; run the script both ways
to see it. On a machine shared with other jobs, every parallel kernel may wait
for a busy core, which penalises many small kernels (the cos/sin tables); run
with ``--threads 1`` to see the picture without that.

Goal: ``apply_rope(layout="half")`` is no slower than transformers'
``apply_rotary_pos_emb`` (ratio <= 1.0 in both groups).
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

from posenc_lib import rope  # noqa: E402


def _optional(name: str):
    try:
        return __import__(name, fromlist=["_"])
    except ImportError:
        return None


def measure(candidates: dict, repeats: int, warmup: int = 2) -> dict[str, float]:
    """Median seconds per call, the candidates interleaved round by round."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def dense_rotate(x, matrices):
    """``R_m x`` for every position: a batched (heads x dim) @ (dim x dim) per position."""
    b, h, s, d = x.shape
    rows = x.permute(2, 0, 1, 3).reshape(s, b * h, d)
    return (rows @ matrices.mT).reshape(s, b, h, d).permute(1, 2, 0, 3)


def complex_phases(positions, freqs):
    """Meta's Llama ``precompute_freqs_cis``: ``e^{i m θ_j}`` as complex64."""
    angles = torch.outer(positions.float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def complex_rotate(x, phases):
    """Meta's Llama ``apply_rotary_emb``: pairs as complex numbers, one multiplication."""
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(z * phases).flatten(-2).type_as(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--base", type=float, default=10000.0)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch.set_num_threads (default: torch's choice)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    shape = (args.batch, args.heads, args.seq, args.dim)
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(shape, generator=generator)
    k = torch.randn(shape, generator=generator)
    positions = torch.arange(args.seq)
    freqs = rope.inv_freq(args.dim, args.base, dtype=torch.float32)
    freqs64 = rope.inv_freq(args.dim, args.base, dtype=torch.float64)
    # Independent references: the dense matrices in float64.
    matrices64 = {layout: rope.rotation_matrix(positions, freqs64, layout=layout)
                  for layout in rope.LAYOUTS}
    reference = {layout: (dense_rotate(q.double(), m), dense_rotate(k.double(), m))
                 for layout, m in matrices64.items()}
    del matrices64

    included, precomputed, layouts = {}, {}, {}

    def add(group, name, layout, fn):
        group[name] = fn
        layouts[name] = layout

    # -- posenc_lib --------------------------------------------------------------------
    for layout in rope.LAYOUTS:
        add(included, f"posenc apply_rope {layout}", layout,
            lambda layout=layout: (rope.apply_rope(q, positions, freqs, layout=layout),
                                   rope.apply_rope(k, positions, freqs, layout=layout)))
        cos, sin = rope.cos_sin(positions, freqs, layout=layout)
        add(precomputed, f"posenc apply_cos_sin {layout}", layout,
            lambda layout=layout, cos=cos, sin=sin: (
                rope.apply_cos_sin(q, cos, sin, layout=layout),
                rope.apply_cos_sin(k, cos, sin, layout=layout)))

    # -- dense matrices and complex numbers (Meta's Llama code) --------------------------
    add(included, "dense matrix R_m x", "interleaved",
        lambda: (lambda m: (dense_rotate(q, m), dense_rotate(k, m)))(
            rope.rotation_matrix(positions, freqs)))
    matrices = rope.rotation_matrix(positions, freqs)
    add(precomputed, "dense matrix R_m x", "interleaved",
        lambda: (dense_rotate(q, matrices), dense_rotate(k, matrices)))
    add(included, "complex (Meta Llama)", "interleaved",
        lambda: (lambda p: (complex_rotate(q, p), complex_rotate(k, p)))(
            complex_phases(positions, freqs)))
    phases = complex_phases(positions, freqs)
    add(precomputed, "complex (Meta Llama)", "interleaved",
        lambda: (complex_rotate(q, phases), complex_rotate(k, phases)))

    # -- transformers (half layout) ------------------------------------------------------
    llama = _optional("transformers.models.llama.modeling_llama")
    if llama is not None:
        from transformers import LlamaConfig

        config = LlamaConfig(hidden_size=args.heads * args.dim, num_attention_heads=args.heads,
                             rope_theta=args.base, max_position_embeddings=args.seq)
        rotary = llama.LlamaRotaryEmbedding(config=config)
        position_ids = positions[None].expand(args.batch, -1)

        def transformers_included():
            cos, sin = rotary(q, position_ids)
            return llama.apply_rotary_pos_emb(q, k, cos, sin)

        hf_cos, hf_sin = rotary(q, position_ids)
        add(included, "transformers Llama", "half", transformers_included)
        add(precomputed, "transformers Llama", "half",
            lambda: llama.apply_rotary_pos_emb(q, k, hf_cos, hf_sin))

    # -- rotary-embedding-torch (interleaved layout) --------------------------------------
    ret = _optional("rotary_embedding_torch")
    if ret is not None:
        lucid = ret.RotaryEmbedding(dim=args.dim, theta=args.base,
                                    cache_max_seq_len=max(8192, args.seq))
        add(included, "rotary-embedding-torch", "interleaved",
            lambda: (lucid.rotate_queries_or_keys(q), lucid.rotate_queries_or_keys(k)))
        lucid_freqs = lucid(positions.float(), seq_len=args.seq)
        add(precomputed, "rotary-embedding-torch", "interleaved",
            lambda: (ret.apply_rotary_emb(lucid_freqs, q), ret.apply_rotary_emb(lucid_freqs, k)))

    # -- every candidate computes the right thing -----------------------------------------
    # float32 angles are off by up to a few ulps of m·θ (about seq · 2**-23 rad at the
    # last position), so allow that; a wrong layout or sign is off by O(1).
    tolerance = 4 * args.seq * 2.0 ** -23 * max(q.abs().max().item(), k.abs().max().item())
    for group in (included, precomputed):
        for name, fn in group.items():
            out_q, out_k = fn()
            ref_q, ref_k = reference[layouts[name]]
            error = max((out_q.double() - ref_q).abs().max().item(),
                        (out_k.double() - ref_k).abs().max().item())
            assert error < tolerance, f"{name}: max error {error:.2e} against float64"
    del reference

    # -- memory bandwidth -------------------------------------------------------------------
    src = torch.randn(64 * 2 ** 20, generator=generator)  # 256 MiB
    dst = torch.empty_like(src)
    bw = measure({"copy_": lambda: dst.copy_(src), "clone": lambda: src.clone()}, args.repeats)
    nbytes = 2 * src.numel() * src.element_size()
    copy_gbs, clone_gbs = nbytes / bw["copy_"] / 1e9, nbytes / bw["clone"] / 1e9
    del src, dst

    times = {"included": measure(included, args.repeats),
             "precomputed": measure(precomputed, args.repeats)}

    moved = 4 * q.numel() * q.element_size()
    print(f"RoPE on q and k of shape {shape}, float32, CPU; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}; "
          f"median of {args.repeats}")
    print(f"memory bandwidth (read + write): copy_ {copy_gbs:.1f} GB/s, "
          f"clone (fresh memory) {clone_gbs:.1f} GB/s")
    print(f"bytes moved per call: {moved / 1e6:.0f} MB (q, k read; two outputs written)\n")
    header = (f"{'cos/sin':<12} {'implementation':<32} {'layout':<12} {'median ms':>10} "
              f"{'/ transformers':>15} {'GB/s':>6} {'% of copy_':>10}")
    print(header)
    print("-" * len(header))
    for group, label in (("included", "included"), ("precomputed", "precomputed")):
        hf = times[group].get("transformers Llama")
        for name, seconds in sorted(times[group].items(), key=lambda item: item[1]):
            ratio = f"{seconds / hf:.2f}" if hf else "n/a"
            gbs = moved / seconds / 1e9
            print(f"{label:<12} {name:<32} {layouts[name]:<12} {seconds * 1e3:>10.1f} "
                  f"{ratio:>15} {gbs:>6.1f} {100 * gbs / copy_gbs:>9.0f}%")
        print()
    if "transformers Llama" in included:
        for group in ("included", "precomputed"):
            name = ("posenc apply_rope half" if group == "included"
                    else "posenc apply_cos_sin half")
            ratio = times[group][name] / times[group]["transformers Llama"]
            verdict = "met" if ratio <= 1.0 else "NOT met"
            print(f"goal, cos/sin {group}: {name} / transformers = {ratio:.2f} "
                  f"(<= 1.0: {verdict})")


if __name__ == "__main__":
    main()
