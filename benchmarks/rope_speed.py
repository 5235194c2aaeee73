"""RoPE speed: posenc_lib.rope against the dense and complex forms and the reference libraries.

    python benchmarks/rope_speed.py [--device cpu|cuda] [--dtype float32|bfloat16|float16]
                                    [--repeats 15] [--threads N] [--layers 32]
                                    [--batch 1] [--heads 32] [--seq 4096] [--dim 128]
                                    [--rotary-dim 64] [--json PATH]

Rotates a query and a key tensor of shape (batch, heads, seq, dim), in
``--dtype`` on ``--device``, with each implementation, and prints one table
with these groups (all measured in one run, candidates interleaved round by
round; CUDA times come from ``torch.cuda.Event`` pairs around ``--inner``
calls, after a ``synchronize``):

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
  Here too: ``fused_apply`` (:func:`posenc_lib.rope.fused_apply`,
  ``torch.compile`` of the library's formula) with one cos and sin per pair,
  and the same compiled kernel called without the argument checks
  ("fused kernel alone"), which shows how much of a call is Python.
* **forward, cos/sin once**: what a model of ``--layers`` layers does per
  forward pass: cos/sin computed once, then q and k rotated in every layer.
* **partial**: only the first ``--rotary-dim`` features rotate; transformers'
  row is Phi-3's ``apply_rotary_pos_emb`` (4.57.6), which slices and
  concatenates, with cos/sin from ``LlamaRotaryEmbedding`` of a head of
  ``--rotary-dim`` features (the frequencies ``partial_rotary_factor`` gives).
* **copy**: ``copy_`` of q and k into preallocated outputs, and ``clone()``
  of both: the same bytes read and written as a rotation, no arithmetic. The
  "% of copy" column is the row's bytes per second over ``copy_``'s.

The dense, complex and rotary-embedding-torch rows are float32, CPU only.
transformers' Llama has no interleaved layout; its (half-layout) row is the
baseline of both layouts' ratios, which move the same bytes. ``--json PATH``
writes every figure with the device, versions, shapes and bytes per call.

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

Goals: ``apply_rope(layout="half")`` is no slower than transformers'
``apply_rotary_pos_emb`` on the CPU (ratio <= 1.0 in both groups); on a GPU,
``fused_apply`` reaches >= 50 % of the copy bandwidth and >= 2.5x
transformers' speed, in each layout and the partial case.
"""

from __future__ import annotations

import argparse
import json
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


def measure(candidates: dict, repeats: int, warmup: int = 2, *, device: str = "cpu",
            inner: int = 1) -> dict[str, float]:
    """Median seconds per call, the candidates interleaved round by round.

    Each sample times ``inner`` calls in a row and divides. On CUDA the time
    is read from a pair of ``torch.cuda.Event`` recorded around them, after a
    ``synchronize`` so that no earlier work is counted.
    """
    cuda = torch.device(device).type == "cuda"
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    if cuda:
        torch.cuda.synchronize()
    times = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            if cuda:
                torch.cuda.synchronize()
                begin, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                begin.record()
                for _ in range(inner):
                    fn()
                end.record()
                end.synchronize()
                times[name].append(begin.elapsed_time(end) / 1e3 / inner)
            else:
                start = time.perf_counter()
                for _ in range(inner):
                    fn()
                times[name].append((time.perf_counter() - start) / inner)
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


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _reference(x: torch.Tensor, positions, rotary_dim: int, base: float, layout: str):
    """float64 rotation of the first ``rotary_dim`` features, from float64 angles,
    written with explicit pair indices (independent of posenc_lib's code paths)."""
    x64 = x.double()
    angles = positions.double()[:, None] * rope.inv_freq(rotary_dim, base,
                                                         dtype=torch.float64).to(x.device)
    c, s = angles.cos(), angles.sin()
    half = rotary_dim // 2
    if layout == "half":
        i, j = torch.arange(half), torch.arange(half, rotary_dim)
    else:
        i, j = torch.arange(0, rotary_dim, 2), torch.arange(1, rotary_dim, 2)
    i, j = i.to(x.device), j.to(x.device)
    a, b = x64[..., i], x64[..., j]
    out = x64.clone()
    out[..., i], out[..., j] = a * c - b * s, b * c + a * s
    return out


def run(*, device: str = "cpu", dtype: str = "float32", batch: int = 1, heads: int = 32,
        seq: int = 4096, dim: int = 128, rotary_dim: int | None = None, base: float = 10000.0,
        layers: int = 32, repeats: int = 15, inner: int | None = None,
        extras: bool = True) -> dict:
    """Measure every candidate in one run; return the figures as a JSON-ready dict."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is visible")
    if dtype not in DTYPES:
        raise SystemExit(f"--dtype must be one of {list(DTYPES)}, got {dtype!r}")
    rotary_dim = dim // 2 if rotary_dim is None else rotary_dim
    if rotary_dim % 2 or not 2 <= rotary_dim <= dim:
        raise SystemExit(f"--rotary-dim must be even and in [2, {dim}], got {rotary_dim}")
    inner = inner or (10 if dev.type == "cuda" else 1)
    torch_dtype = DTYPES[dtype]
    shape = (batch, heads, seq, dim)
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(shape, generator=generator).to(dev, torch_dtype)
    k = torch.randn(shape, generator=generator).to(dev, torch_dtype)
    positions = torch.arange(seq, device=dev)
    freqs = rope.inv_freq(dim, base, dtype=torch.float32).to(dev)
    part_freqs = rope.inv_freq(rotary_dim, base, dtype=torch.float32).to(dev)

    groups: dict[str, dict] = {"cos/sin included": {}, "cos/sin given": {},
                               f"forward, {layers} layers": {}, "partial": {}, "copy": {}}
    meta: dict[tuple, tuple[str, int]] = {}   # (group, name) -> (layout, rotary_dim)

    def add(group, name, layout, rdim, fn):
        groups[group][name] = fn
        meta[group, name] = (layout, rdim)

    def pair_tables(f):
        angles = rope.rope_angles(positions, f)
        return angles.cos().to(torch_dtype), angles.sin().to(torch_dtype)

    def fused_kernel(x, cos, sin, layout, rdim):
        """The compiled kernel that fused_apply calls, without its checks and views."""
        kernel = rope._compiled_formula(("benchmark", layout, x.dtype, x.device.type))
        return kernel(x, cos, sin, layout, rdim)

    for layout in rope.LAYOUTS:
        add("cos/sin included", f"posenc apply_rope {layout}", layout, dim,
            lambda layout=layout: (rope.apply_rope(q, positions, freqs, layout=layout),
                                   rope.apply_rope(k, positions, freqs, layout=layout)))
        cos, sin = (t.to(torch_dtype) for t in rope.cos_sin(positions, freqs, layout=layout))
        add("cos/sin given", f"posenc apply_cos_sin {layout}", layout, dim,
            lambda layout=layout, cos=cos, sin=sin: (
                rope.apply_cos_sin(q, cos, sin, layout=layout),
                rope.apply_cos_sin(k, cos, sin, layout=layout)))
        pc, ps = pair_tables(freqs)
        add("cos/sin given", f"posenc fused_apply {layout}", layout, dim,
            lambda layout=layout, pc=pc, ps=ps: (
                rope.fused_apply(q, pc, ps, layout=layout),
                rope.fused_apply(k, pc, ps, layout=layout)))
        add("cos/sin given", f"fused kernel alone {layout}", layout, dim,
            lambda layout=layout, pc=pc, ps=ps: (fused_kernel(q, pc, ps, layout, dim),
                                                 fused_kernel(k, pc, ps, layout, dim)))

        def forward_posenc(layout=layout):
            cos, sin = rope.cos_sin(positions, freqs, layout=layout)
            cos, sin = cos.to(torch_dtype), sin.to(torch_dtype)
            for _ in range(layers):
                out = (rope.apply_cos_sin(q, cos, sin, layout=layout),
                       rope.apply_cos_sin(k, cos, sin, layout=layout))
            return out

        def forward_fused(layout=layout):
            pc, ps = pair_tables(freqs)
            for _ in range(layers):
                out = (rope.fused_apply(q, pc, ps, layout=layout),
                       rope.fused_apply(k, pc, ps, layout=layout))
            return out

        add(f"forward, {layers} layers", f"posenc cos_sin + apply_cos_sin {layout}", layout,
            dim, forward_posenc)
        add(f"forward, {layers} layers", f"posenc fused_apply {layout}", layout, dim,
            forward_fused)
        if rotary_dim < dim:
            pcp, psp = pair_tables(part_freqs)
            ccp, csp = (t.to(torch_dtype)
                        for t in rope.cos_sin(positions, part_freqs, layout=layout))
            add("partial", f"posenc apply_cos_sin {layout}", layout, rotary_dim,
                lambda layout=layout, c=ccp, s=csp: (
                    rope.apply_cos_sin(q, c, s, layout=layout, rotary_dim=rotary_dim),
                    rope.apply_cos_sin(k, c, s, layout=layout, rotary_dim=rotary_dim)))
            add("partial", f"posenc fused_apply {layout}", layout, rotary_dim,
                lambda layout=layout, c=pcp, s=psp: (
                    rope.fused_apply(q, c, s, layout=layout, rotary_dim=rotary_dim),
                    rope.fused_apply(k, c, s, layout=layout, rotary_dim=rotary_dim)))

    # The dense, complex and rotary-embedding-torch rows: float32 on the CPU (the
    # dense one rebuilds 4096 matrices on the CPU in every call).
    if extras and torch_dtype == torch.float32 and dev.type == "cpu":
        matrices = rope.rotation_matrix(positions.cpu(), freqs.cpu()).to(dev)
        add("cos/sin included", "dense matrix R_m x", "interleaved", dim,
            lambda: (lambda m: (dense_rotate(q, m), dense_rotate(k, m)))(
                rope.rotation_matrix(positions.cpu(), freqs.cpu()).to(dev)))
        add("cos/sin given", "dense matrix R_m x", "interleaved", dim,
            lambda: (dense_rotate(q, matrices), dense_rotate(k, matrices)))
        add("cos/sin included", "complex (Meta Llama)", "interleaved", dim,
            lambda: (lambda p: (complex_rotate(q, p), complex_rotate(k, p)))(
                complex_phases(positions, freqs)))
        phases = complex_phases(positions, freqs)
        add("cos/sin given", "complex (Meta Llama)", "interleaved", dim,
            lambda: (complex_rotate(q, phases), complex_rotate(k, phases)))
        ret = _optional("rotary_embedding_torch")
        if ret is not None:
            lucid = ret.RotaryEmbedding(dim=dim, theta=base,
                                        cache_max_seq_len=max(8192, seq)).to(dev)
            add("cos/sin included", "rotary-embedding-torch", "interleaved", dim,
                lambda: (lucid.rotate_queries_or_keys(q), lucid.rotate_queries_or_keys(k)))
            lucid_freqs = lucid(positions.float(), seq_len=seq)
            add("cos/sin given", "rotary-embedding-torch", "interleaved", dim,
                lambda: (ret.apply_rotary_emb(lucid_freqs, q),
                         ret.apply_rotary_emb(lucid_freqs, k)))

    # -- transformers 4.57.6: Llama (half layout), Phi-3 for the partial case ----------
    llama = _optional("transformers.models.llama.modeling_llama")
    transformers_version = None
    if llama is not None:
        import transformers
        from transformers import LlamaConfig
        from transformers.models.phi3 import modeling_phi3

        transformers_version = transformers.__version__

        def rotary_for(rdim):
            # A head of rdim features: the same frequencies, base**(-2i/rdim), as
            # partial_rotary_factor = rdim/dim gives (in 4.57 and 5.x alike).
            config = LlamaConfig(hidden_size=heads * dim, num_attention_heads=heads,
                                 head_dim=rdim, rope_theta=base,
                                 max_position_embeddings=seq)
            return llama.LlamaRotaryEmbedding(config=config).to(dev)

        rotary = rotary_for(dim)
        position_ids = positions[None].expand(batch, -1)

        def transformers_included():
            cos, sin = rotary(q, position_ids)
            return llama.apply_rotary_pos_emb(q, k, cos, sin)

        def transformers_forward():
            cos, sin = rotary(q, position_ids)
            for _ in range(layers):
                out = llama.apply_rotary_pos_emb(q, k, cos, sin)
            return out

        hf_cos, hf_sin = rotary(q, position_ids)
        add("cos/sin included", "transformers Llama", "half", dim, transformers_included)
        add("cos/sin given", "transformers Llama", "half", dim,
            lambda: llama.apply_rotary_pos_emb(q, k, hf_cos, hf_sin))
        add(f"forward, {layers} layers", "transformers Llama", "half", dim,
            transformers_forward)
        if rotary_dim < dim:
            part_cos, part_sin = rotary_for(rotary_dim)(q, position_ids)
            assert part_cos.shape[-1] == rotary_dim, part_cos.shape
            add("partial", "transformers Phi-3", "half", rotary_dim,
                lambda: modeling_phi3.apply_rotary_pos_emb(q, k, part_cos, part_sin))

    copy_q, copy_k = torch.empty_like(q), torch.empty_like(k)
    add("copy", "copy_ (preallocated)", "-", 0,
        lambda: (copy_q.copy_(q), copy_k.copy_(k)))
    add("copy", "clone", "-", 0, lambda: (q.clone(), k.clone()))

    # -- every candidate computes the right thing ---------------------------------------
    # float32 angles are off by up to a few ulps of m·θ (about seq · 2**-23 rad at the
    # last position); cos/sin and every product are rounded to the dtype (unit
    # roundoff u, a handful of roundings of terms bounded by max|x|). A wrong layout,
    # sign or rotary_dim is off by O(1).
    u = torch.finfo(torch_dtype).eps / 2
    largest = max(q.abs().max().item(), k.abs().max().item())
    tolerance = (4 * seq * 2.0 ** -23 + 8 * u) * largest
    references = {}
    checked = {}
    for group, candidates in groups.items():
        for name, fn in candidates.items():
            layout, rdim = meta[group, name]
            out_q, out_k = fn()
            if rdim == 0:
                refs = (q.double(), k.double())
            else:
                key = (layout, rdim)
                if key not in references:
                    references[key] = (_reference(q, positions, rdim, base, layout),
                                       _reference(k, positions, rdim, base, layout))
                refs = references[key]
            error = max((out_q.double() - refs[0]).abs().max().item(),
                        (out_k.double() - refs[1]).abs().max().item())
            assert error < tolerance, f"{group}: {name}: max error {error:.2e}"
            checked[group, name] = error
    del references

    times = {group: measure(candidates, repeats, device=device, inner=inner)
             for group, candidates in groups.items()}

    element = q.element_size()
    qk_bytes = 2 * q.numel() * element
    copy_seconds = times["copy"]["copy_ (preallocated)"]
    copy_bandwidth = 2 * qk_bytes / copy_seconds
    rows = []
    for group, medians in times.items():
        baseline = next((s for n, s in medians.items() if n.startswith("transformers")),
                        None)
        for name, seconds in sorted(medians.items(), key=lambda item: item[1]):
            layout, rdim = meta[group, name]
            moved = 2 * qk_bytes            # q and k read once, two outputs written once
            if name.startswith(("posenc fused", "fused kernel")):
                moved += 2 * seq * (rdim // 2) * element      # one cos, one sin per pair
            if group.startswith("forward"):
                moved *= layers
            bandwidth = moved / seconds
            rows.append({
                "group": group, "name": name, "layout": layout, "rotary_dim": rdim,
                "median_ms": seconds * 1e3,
                "speedup_vs_transformers": (baseline / seconds if baseline else None),
                "bytes_per_call": moved, "gb_per_s": bandwidth / 1e9,
                "fraction_of_copy": bandwidth / copy_bandwidth,
                "max_abs_error_vs_float64": checked[group, name]})
    goals = []
    if transformers_version is not None:
        for row in rows:
            if row["name"].startswith("posenc fused_apply") and row["group"] != "copy":
                goals.append({
                    "group": row["group"], "name": row["name"],
                    "fraction_of_copy": row["fraction_of_copy"],
                    "speedup_vs_transformers": row["speedup_vs_transformers"],
                    "met": bool(row["fraction_of_copy"] >= 0.5
                                and row["speedup_vs_transformers"] >= 2.5)})
    if dev.type == "cuda":
        device_name = torch.cuda.get_device_name(dev)
    else:
        device_name = f"CPU {platform.processor() or platform.machine()}, " \
                      f"{torch.get_num_threads()} threads"
    return {
        "device": device_name, "device_type": dev.type, "dtype": dtype,
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda,
                     "transformers": transformers_version,
                     "python": platform.python_version()},
        "shape": list(shape), "rotary_dim_partial": rotary_dim, "layers": layers,
        "repeats": repeats, "calls_per_sample": inner,
        "qk_bytes": qk_bytes, "copy_bandwidth_gb_per_s": copy_bandwidth / 1e9,
        "fused_fallback": rope._FUSED["fallback"],
        "tolerance_vs_float64": tolerance, "rows": rows, "goals": goals}


def print_table(result: dict) -> None:
    print(f"RoPE on q and k of shape {tuple(result['shape'])}, {result['dtype']}, "
          f"{result['device']}; torch {result['versions']['torch']}, transformers "
          f"{result['versions']['transformers']}; median of {result['repeats']} samples "
          f"of {result['calls_per_sample']} calls")
    print(f"copy bandwidth (read + write, copy_): {result['copy_bandwidth_gb_per_s']:.1f} "
          f"GB/s; q and k: {result['qk_bytes'] / 1e6:.0f} MB")
    if result["fused_fallback"]:
        print(f"fused_apply fell back to eager: {result['fused_fallback']}")
    header = (f"{'group':<20} {'implementation':<42} {'median ms':>10} "
              f"{'x transformers':>15} {'GB/s':>7} {'% of copy':>9}")
    print(header)
    print("-" * len(header))
    group = None
    for row in result["rows"]:
        if group is not None and row["group"] != group:
            print()
        group = row["group"]
        speed = row["speedup_vs_transformers"]
        print(f"{group:<20} {row['name']:<42} {row['median_ms']:>10.3f} "
              f"{(f'{speed:.2f}' if speed else 'n/a'):>15} {row['gb_per_s']:>7.1f} "
              f"{100 * row['fraction_of_copy']:>8.0f}%")
    print()
    for goal in result["goals"]:
        print(f"goal ({goal['group']}, {goal['name']}): "
              f"{100 * goal['fraction_of_copy']:.0f}% of copy (>= 50%), "
              f"{goal['speedup_vs_transformers']:.2f}x transformers (>= 2.5x): "
              f"{'met' if goal['met'] else 'NOT met'}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=tuple(DTYPES), default="float32")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--inner", type=int, default=0,
                        help="calls per timed sample (default: 10 on cuda, 1 on cpu)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--rotary-dim", type=int, default=None,
                        help="the partial case's rotary dim (default: dim/2)")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--base", type=float, default=10000.0)
    parser.add_argument("--threads", type=int, default=0,
                        help="torch.set_num_threads (default: torch's choice)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    result = run(device=args.device, dtype=args.dtype, batch=args.batch, heads=args.heads,
                 seq=args.seq, dim=args.dim, rotary_dim=args.rotary_dim, base=args.base,
                 layers=args.layers, repeats=args.repeats, inner=args.inner or None)
    result["command"] = " ".join(["python", "benchmarks/rope_speed.py",
                                  *(argv if argv is not None else sys.argv[1:])])
    print_table(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
