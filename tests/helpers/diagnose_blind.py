"""Blind RoPE cases for ``diagnose_rope``: kernels written the ways practitioners
write their own, without posenc_lib and before reading diagnose's internals or
its other tests, each with the findings decided in advance (from the
descriptions of ``CODES``) that would name its bug, or "clean".

``CASES`` is the first list (its rate before any change to diagnose is the
measurement recorded in results/diagnose_blind.json); ``LATER`` holds ten
more, written after diagnose was changed, to check that the changes were
general rules rather than fits to ``CASES``; ``THIRD`` three more, written
after the one change that ``LATER`` prompted (the scaling's ramp band).

Every ``fn`` takes ``x`` ``(batch, seq, dim)`` float32 and ``positions``
``(seq,)`` int64, as ``diagnose_rope`` calls it; kernels written for other
shapes ((batch, heads, seq, dim), (seq, dim), numpy) are wrapped the way a
reader would wrap them.

A case is *detected* when diagnose reports any finding, *named* when at least
one finding is among ``accepted``; a clean case (``accepted`` empty) must
come back with no finding. ``visible=False`` marks a bug that diagnose cannot
see in principle with the arguments given (it lies beyond every position it
may probe); such a case is expected clean and is counted apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Case:
    name: str
    fn: object
    kwargs: dict
    accepted: frozenset  # empty: must be clean
    text: str
    visible: bool = True
    #: codes accepted after the first measurement, with the reason in ``why``
    amended: frozenset = frozenset()
    why: str = ""


def _inv_freq(d, base=10000.0, dtype=torch.float32):
    return 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).to(dtype) / d))


# ---------------------------------------------------------------- style 1: HF rotate_half
def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_like(x, positions, *, inv_freq=None, base=10000.0, pos_map=None, rot=rotate_half,
            swap=False, table_dtype=None, scale=1.0, cos_scale=None, sin_scale=None):
    d = x.shape[-1]
    f = _inv_freq(d, base) if inv_freq is None else inv_freq
    p = positions if pos_map is None else pos_map(positions)
    freqs = torch.outer(p.float(), f.float())
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    if table_dtype is not None:
        cos, sin = cos.to(table_dtype).float(), sin.to(table_dtype).float()
    cos = cos * (scale if cos_scale is None else cos_scale)
    sin = sin * (scale if sin_scale is None else sin_scale)
    if swap:
        cos, sin = sin, cos
    return x * cos + rot(x) * sin


# ---------------------------------------------------------------- style 2: Meta complex
def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def meta_apply(xq, freqs_cis):
    # xq: (batch, seq, heads, head_dim)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)
    return torch.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq)


def meta_fn(x, positions, *, theta=10000.0, end=16384, conj=False, index=None):
    d = x.shape[-1]
    table = precompute_freqs_cis(d, end, theta)
    idx = positions if index is None else index(positions)
    fc = table[idx]
    if conj:
        fc = fc.conj()
    return meta_apply(x[:, :, None, :], fc)[:, :, 0, :]


# ---------------------------------------------------------------- style 3: (b, h, s, d) with cache
class RotaryCache:
    """cos/sin tables built once (transformers' old _set_cos_sin_cache style)."""

    def __init__(self, dim, max_len=8192, base=10000.0, dtype=torch.float32,
                 arange_step=2, exp_den=None, inv_freq=None):
        if inv_freq is None:
            den = dim if exp_den is None else exp_den
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, arange_step).float()[: dim // 2] / den))
        t = torch.arange(max_len, dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos = emb.cos().to(dtype)
        self.sin = emb.sin().to(dtype)

    def __call__(self, q, position_ids):
        # q: (b, h, s, d); position_ids: (b, s)
        cos = self.cos[position_ids].unsqueeze(1).to(q.dtype)
        sin = self.sin[position_ids].unsqueeze(1).to(q.dtype)
        return q * cos + rotate_half(q) * sin


def bhsd(kernel):
    """Wrap a (batch, heads, seq, dim) kernel taking position_ids (batch, seq)."""

    def fn(x, positions):
        q = x[:, None]  # one head
        pid = positions[None].expand(x.shape[0], -1)
        return kernel(q, pid)[:, 0]

    return fn


# ---------------------------------------------------------------- style 4: numpy
def numpy_rope(x, positions, *, base=10000.0, layout="half", dtype=np.float64, pos_dtype=None,
               loop_pairs=None):
    xn = x.detach().numpy().astype(dtype)
    d = xn.shape[-1]
    p = positions.numpy()
    p = p.astype(pos_dtype).astype(dtype) if pos_dtype is not None else p.astype(dtype)
    inv = base ** (-np.arange(0, d, 2, dtype=dtype) / dtype(d))
    ang = p[:, None] * inv[None, :]
    c, s = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
    out = xn.copy()
    npairs = d // 2 if loop_pairs is None else loop_pairs
    for i in range(npairs):
        if layout == "half":
            a, b = i, i + d // 2
        else:
            a, b = 2 * i, 2 * i + 1
        xa, xb = xn[..., a], xn[..., b]
        out[..., a] = xa * c[:, i] - xb * s[:, i]
        out[..., b] = xa * s[:, i] + xb * c[:, i]
    return torch.from_numpy(out.astype(np.float32))


# ---------------------------------------------------------------- style 5: GPT-J every-two
def rotate_every_two(x):
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def gptj(x, positions, *, base=10000.0, repeat="interleave", dtype=torch.float32):
    d = x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    sinusoid = torch.einsum("i,j->ij", positions.to(dtype).float(), inv)
    sin, cos = sinusoid.sin(), sinusoid.cos()
    if repeat == "interleave":
        sin, cos = sin.repeat_interleave(2, -1), cos.repeat_interleave(2, -1)
    else:  # halves-style tables with a neighbours rotation
        sin, cos = torch.cat([sin, sin], -1), torch.cat([cos, cos], -1)
    return x * cos + rotate_every_two(x) * sin


# ---------------------------------------------------------------- style 6: explicit 2x2 matrices
def matrix_rope(x, positions, *, base=10000.0, layout="interleaved"):
    d = x.shape[-1]
    inv = _inv_freq(d, base, torch.float64)
    out = torch.empty_like(x)
    for j, p in enumerate(positions.tolist()):
        m = torch.zeros(d, d, dtype=torch.float64)
        for i in range(d // 2):
            a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + d // 2)
            t = p * inv[i]
            c, s = math.cos(t), math.sin(t)
            m[a, a], m[a, b], m[b, a], m[b, b] = c, -s, s, c
        out[:, j] = (x[:, j].double() @ m.T).float()
    return out


# ---------------------------------------------------------------- scalings, written from the papers
def llama3_freqs(d, base, factor, low, high, old_len, *, swap_bands=False, scale_high=False):
    inv = _inv_freq(d, base)
    low_wl, high_wl = old_len / low, old_len / high
    if swap_bands:
        low_wl, high_wl = high_wl, low_wl
    out = []
    for f in inv.tolist():
        wl = 2 * math.pi / f
        if scale_high:  # bug: long wavelengths kept, short ones divided
            out.append(f / factor if wl < high_wl else f if wl > low_wl else
                       f / factor + (f - f / factor) * (old_len / wl - low) / (high - low))
        elif wl < high_wl:
            out.append(f)
        elif wl > low_wl:
            out.append(f / factor)
        else:
            smooth = (old_len / wl - low) / (high - low)
            out.append((1 - smooth) * f / factor + smooth * f)
    return torch.tensor(out, dtype=torch.float32)


def yarn_freqs(d, base, factor, old_len, *, beta_fast=32, beta_slow=1, ramp_len=None,
               no_truncate=False):
    def corr_dim(rot):
        return (d * math.log(old_len / (rot * 2 * math.pi))) / (2 * math.log(base))

    lo, hi = corr_dim(beta_fast), corr_dim(beta_slow)
    if not no_truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, d - 1)
    if lo == hi:
        hi += 0.001
    n = d // 2 if ramp_len is None else ramp_len
    ramp = ((torch.arange(n, dtype=torch.float32) - lo) / (hi - lo)).clamp(0, 1)[: d // 2]
    extra = 1 - ramp
    pos = base ** (torch.arange(0, d, 2).double() / d)
    f = (1.0 / (factor * pos)) * (1 - extra) + (1.0 / pos) * extra
    return f.float()


def yarn_mscale(factor):
    return 0.1 * math.log(factor) + 1.0


D = 64
PLAIN = {"dim": D, "base": 10000.0}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
LLAMA3_KW = {"dim": D, "base": 500000.0, "rope_scaling": LLAMA3,
             "max_position_embeddings": 65536}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
YARN_KW = {"dim": D, "base": 10000.0, "rope_scaling": YARN, "max_position_embeddings": 16384}
LINEAR = {"rope_type": "linear", "factor": 4.0}
LINEAR_KW = {"dim": D, "base": 10000.0, "rope_scaling": LINEAR}
YF = yarn_freqs(D, 10000.0, 4.0, 4096)
YM = yarn_mscale(4.0)
L3F = llama3_freqs(D, 500000.0, 8.0, 1.0, 4.0, 8192)


def _odd_heads_reversed(x, positions):
    # kernel works on (1, heads, seq, d) with the batch folded into heads;
    # the sign of sin was taken from a per-head table that is wrong for odd heads
    q = x[None]  # (1, H, S, D)
    d = x.shape[-1]
    f = _inv_freq(d)
    ang = positions.float()[:, None] * f
    cos = torch.cat([ang.cos()] * 2, -1)
    sin = torch.cat([ang.sin()] * 2, -1)
    sign = torch.tensor([1.0 if h % 2 == 0 else -1.0 for h in range(q.shape[1])])
    return (q * cos + rotate_half(q) * sin * sign[None, :, None, None])[0]


def _permuted_output(x, positions):
    # rotates pairs (i, i + d/2) correctly, then writes them out interleaved
    d = x.shape[-1]
    f = _inv_freq(d)
    ang = positions.float()[:, None] * f
    a, b = x[..., : d // 2], x[..., d // 2 :]
    o1 = a * ang.cos() - b * ang.sin()
    o2 = a * ang.sin() + b * ang.cos()
    return torch.stack([o1, o2], -1).flatten(-2)


def _sin_half_sign(x, positions):
    # second half's sin has the wrong sign: [[cos, -sin], [-sin, cos]]... only on one half
    d = x.shape[-1]
    f = _inv_freq(d)
    ang = positions.float()[:, None] * f
    c, s = ang.cos(), ang.sin()
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * c - b * s, b * c - a * s], -1)


def _sin_both_plus(x, positions):
    d = x.shape[-1]
    f = _inv_freq(d)
    ang = positions.float()[:, None] * f
    c, s = ang.cos(), ang.sin()
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * c + b * s, a * s + b * c], -1)


def _einsum_half(x, positions, *, f=None, base=10000.0):
    d = x.shape[-1]
    f = _inv_freq(d, base) if f is None else f
    ang = torch.einsum("s,f->sf", positions.float(), f)
    c, s = ang.cos(), ang.sin()
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * c - b * s, a * s + b * c], -1)


def _kv_cache_decode(x, positions, *, start_mode):
    # a decode-style kernel: rotates by start_pos + index in the sequence
    seq = x.shape[1]
    idx = torch.arange(seq)
    if start_mode == "ignored":
        pos = idx
    elif start_mode == "doubled":
        pos = positions + positions[0]
    elif start_mode == "sliced":
        pos = positions[0] + idx
    else:
        raise ValueError(start_mode)
    return hf_like(x, positions, pos_map=lambda p: pos)


def _pass_through_zeroed(x, positions):
    rd = 32
    out = torch.zeros_like(x)
    out[..., :rd] = hf_like(x[..., :rd], positions)
    return out


def _partial_correct(x, positions):
    rd = 32
    return torch.cat([hf_like(x[..., :rd], positions), x[..., rd:]], -1)


def _partial_exp_full(x, positions):
    # rotates the first 32 of 64 but with exponents over the full head size
    rd, d = 32, x.shape[-1]
    f = 1.0 / (10000.0 ** (torch.arange(0, rd, 2).float() / d))
    return torch.cat([hf_like(x[..., :rd], positions, inv_freq=f), x[..., rd:]], -1)


def _partial_last_correct(x, positions):
    # DeepSeek MLA: the rope part is the last 32 features, interleaved
    rd = 32
    return torch.cat([x[..., :-rd], gptj(x[..., -rd:], positions)], -1)


def _partial_first_not_last(x, positions):
    rd = 32
    return torch.cat([gptj(x[..., :rd], positions), x[..., rd:]], -1)


def _long_bf16_path(x, positions):
    # a kernel that switches to a bf16 fast path for positions past 4096
    p = torch.where(positions >= 4096, positions.bfloat16().long(), positions)
    return hf_like(x, p)


def _int16_index(x, positions):
    cache = RotaryCache(D, max_len=40000)
    pid = positions.to(torch.int16).long()  # wraps past 32767 to negatives
    return bhsd(cache)(x, pid)


def _wrap_long(x, positions):
    return hf_like(x, positions, pos_map=lambda p: p % 8192)


def _yarn_ramp_dim(x, positions):
    return hf_like(x, positions, inv_freq=yarn_freqs(D, 10000.0, 4.0, 4096, ramp_len=D), scale=YM)


def _yarn_ntk_base(x, positions):
    f = _inv_freq(D, 10000.0 * 4.0 ** (D / (D - 2)))
    return hf_like(x, positions, inv_freq=f, scale=YM)


def _yarn_cos_only(x, positions):
    return hf_like(x, positions, inv_freq=YF, cos_scale=YM, sin_scale=1.0)


def _llama3_correct_complex(x, positions):
    ang = positions.float()[:, None] * L3F
    fc = torch.polar(torch.ones_like(ang), ang)
    xc = torch.view_as_complex(
        torch.stack([x[..., : D // 2], x[..., D // 2 :]], -1).contiguous())
    out = torch.view_as_real(xc * fc)
    return torch.cat([out[..., 0], out[..., 1]], -1)


def _yarn_correct_numpyish(x, positions):
    # angles in float64, cos/sin scaled by the attention factor, half layout
    f = YF.double()
    ang = positions.double()[:, None] * f
    c, s = (ang.cos() * YM).float(), (ang.sin() * YM).float()
    a, b = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([a * c - b * s, b * c + a * s], -1)


def _sin_from_cos_shift(x, positions):
    d = x.shape[-1]
    ang = positions.double()[:, None] * _inv_freq(d, dtype=torch.float64)
    c, s = ang.cos(), torch.cos(ang - math.pi / 2)
    a, b = x[..., : d // 2].double(), x[..., d // 2 :].double()
    return torch.cat([a * c - b * s, a * s + b * c], -1).float()


def _seq_dim_kernel(x, positions):
    # kernel for a single (seq, dim) head, called per batch entry
    def one(t, p):
        d = t.shape[-1]
        ang = p.float()[:, None] * _inv_freq(d)
        t2 = t.view(t.shape[0], d // 2, 2)
        a, b = t2[..., 0], t2[..., 1]
        return torch.stack([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()],
                           -1).view_as(t)

    return torch.stack([one(x[i], positions) for i in range(x.shape[0])])


def _bshd_kernel(x, positions, *, shift=0):
    # (batch, seq, heads, dim) kernel as in flash-attn's rotary, heads=1
    q = x[:, :, None, :]
    d = x.shape[-1]
    ang = (positions + shift).float()[:, None] * _inv_freq(d)
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    x1, x2 = q[..., : d // 2], q[..., d // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)[:, :, 0, :]


def _repeat_freq(x, positions):
    f = _inv_freq(D).clone()
    f[5] = f[4]
    return _einsum_half(x, positions, f=f)


def _drop_freq(x, positions):
    f = _inv_freq(D)
    f = torch.cat([f[:10], f[11:], f[-1:] * 0.1])  # one rung lost, the ladder padded
    return _einsum_half(x, positions, f=f)


def _cos_sin_swapped_complex(x, positions):
    ang = positions.float()[:, None] * _inv_freq(D)
    fc = torch.complex(ang.sin(), ang.cos())  # swapped
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * fc).flatten(-2)


def _log10_base(x, positions):
    f = torch.exp(-torch.arange(0, D, 2).float() / D * math.log10(10000.0))
    return _einsum_half(x, positions, f=f)


def _int_div(x, positions):
    f = 1.0 / (10000.0 ** (torch.arange(0, D, 2) // D))  # integer division: all ones
    return _einsum_half(x, positions, f=f.float())


def _fp16_angles(x, positions):
    d = x.shape[-1]
    f = _inv_freq(d).half()
    ang = positions.half()[:, None] * f
    c, s = ang.cos().float(), ang.sin().float()
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat([a * c - b * s, a * s + b * c], -1)


def _bf16_inv_freq(x, positions):
    d = x.shape[-1]
    f = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.bfloat16).float() / d))
    f = f.bfloat16().float()
    return hf_like(x, positions, inv_freq=f)


def _mixed_pairing(x, positions):
    # halves rotation (rotate_half) with neighbour-style tables (repeat_interleave)
    d = x.shape[-1]
    ang = positions.float()[:, None] * _inv_freq(d)
    cos, sin = ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)
    return x * cos + rotate_half(x) * sin


def _last_position_for_all(x, positions):
    # k rotated with the query's position (the last one) for every key
    return hf_like(x, positions, pos_map=lambda p: p[-1].expand_as(p))


def _linear_twice(x, positions):
    f = _inv_freq(D) / 4.0
    return hf_like(x, positions, pos_map=lambda p: p.float() / 4.0, inv_freq=f)


def _linear_times(x, positions):
    return hf_like(x, positions, pos_map=lambda p: p.float() * 4.0)


def _linear_correct(x, positions):
    return hf_like(x, positions, pos_map=lambda p: p.float() / 4.0)


def _sliced_cache_bhsd(x, positions):
    cache = RotaryCache(D, max_len=8192)

    def k(q, pid):
        s = q.shape[2]
        return q * cache.cos[:s][None, None] + rotate_half(q) * cache.sin[:s][None, None]

    return bhsd(k)(x, positions)


MIXED = ("diagnose names cos/sin tables laid out for the other layout 'layout' and says so "
         "(pairs right, tables in the other layout's order); the fix is a layout fix")

CASES = [
    # ------------------------------------------------------------ correct, odd styles
    Case("ok-meta-complex", meta_fn, dict(PLAIN, layout="interleaved"), frozenset(),
         "Meta's polar/view_as_complex, table of 16384 gathered by position"),
    Case("ok-cache-bhsd", bhsd(RotaryCache(D, 8192)), PLAIN, frozenset(),
         "cached cos/sin (8192) gathered by position_ids in a (b, h, s, d) kernel"),
    Case("ok-numpy-f64", numpy_rope, PLAIN, frozenset(), "numpy float64 loop over pairs, half"),
    Case("ok-numpy-interleaved", lambda x, p: numpy_rope(x, p, layout="interleaved"),
         dict(PLAIN, layout="interleaved"), frozenset(), "numpy loop, interleaved"),
    Case("ok-gptj", gptj, dict(PLAIN, layout="interleaved"), frozenset(),
         "GPT-J rotate_every_two with repeat_interleave tables"),
    Case("ok-matrix", matrix_rope,
         {"dim": 32, "base": 10000.0, "layout": "interleaved"}, frozenset(),
         "explicit block-diagonal matrix per position, float64, dim 32"),
    Case("ok-seq-dim", _seq_dim_kernel, dict(PLAIN, layout="interleaved"), frozenset(),
         "(seq, dim) kernel called per batch entry, view(.., d/2, 2) pairs"),
    Case("ok-bshd", _bshd_kernel, PLAIN, frozenset(), "(batch, seq, heads, dim) flash-style"),
    Case("ok-partial", _partial_correct, dict(PLAIN, rotary_dim=32), frozenset(),
         "partial rotary: first 32 of 64 rotate, the rest pass through"),
    Case("ok-partial-last", _partial_last_correct,
         dict(PLAIN, rotary_dim=32, layout="interleaved", rotary_position="last"), frozenset(),
         "DeepSeek-style: last 32 features rotate, interleaved"),
    Case("ok-linear", _linear_correct, LINEAR_KW, frozenset(),
         "linear scaling x4 as positions / 4 (float positions)"),
    Case("ok-llama3-complex", _llama3_correct_complex, LLAMA3_KW, frozenset(),
         "Llama 3 bands written from Meta's apply_scaling, complex multiply on halves"),
    Case("ok-yarn", _yarn_correct_numpyish, YARN_KW, frozenset(),
         "YaRN from the paper (ramp, truncation) with mscale on cos and sin, float64 angles"),
    Case("ok-sin-shift", _sin_from_cos_shift, PLAIN, frozenset(),
         "sin computed as cos(angle - pi/2) in float64"),
    # ------------------------------------------------------------ positions
    Case("off-by-one", lambda x, p: hf_like(x, p, pos_map=lambda q: q + 1), PLAIN,
         frozenset({"position-offset"}), "positions start at 1"),
    Case("minus-one", lambda x, p: _bshd_kernel(x, p, shift=-1), PLAIN,
         frozenset({"position-offset"}), "decode kernel subtracts 1 from positions"),
    Case("cache-offset-ignored", lambda x, p: _kv_cache_decode(x, p, start_mode="ignored"), PLAIN,
         frozenset({"positions-ignored"}), "KV-cache offset ignored: index in sequence"),
    Case("cache-offset-doubled", lambda x, p: _kv_cache_decode(x, p, start_mode="doubled"), PLAIN,
         frozenset({"position-map", "positions-ignored", "position-offset"}),
         "start position added to positions that already include it"),
    Case("cache-sliced", lambda x, p: _kv_cache_decode(x, p, start_mode="sliced"), PLAIN,
         frozenset({"positions-ignored", "position-map"}),
         "table sliced [start:start+seq]: assumes consecutive positions"),
    Case("cache-sliced-from-0", _sliced_cache_bhsd, PLAIN, frozenset({"positions-ignored"}),
         "cos[:seq_len] (old transformers) ignoring position_ids"),
    Case("table-wrap-4096", bhsd(lambda q, pid: RotaryCache(D, 4096)(q, pid % 4096)), PLAIN,
         frozenset({"position-map"}), "table of 4096, positions taken modulo it"),
    Case("table-clamp-2048", lambda x, p: hf_like(x, p, pos_map=lambda q: q.clamp(max=2047)),
         PLAIN, frozenset({"position-map"}), "positions clamped to a 2048 table"),
    Case("positions-bf16", lambda x, p: hf_like(x, p, pos_map=lambda q: q.bfloat16()), PLAIN,
         frozenset({"positions-precision"}), "positions cast to bfloat16"),
    Case("positions-fp16-numpy", lambda x, p: numpy_rope(x, p, pos_dtype=np.float16), PLAIN,
         frozenset({"positions-precision"}), "numpy positions in float16"),
    Case("angles-fp16", _fp16_angles, PLAIN,
         frozenset({"frequency-dtype", "positions-precision", "not-rope"}),
         "positions, inv_freq and angles in float16"),
    Case("long-bf16-path", _long_bf16_path, PLAIN, frozenset({"positions-precision", "position-map"}),
         "positions >= 4096 take a bfloat16 path"),
    Case("int16-index", _int16_index, dict(PLAIN, max_position_embeddings=65536),
         frozenset({"position-map"}), "position ids stored as int16: wrap past 32767"),
    Case("k-with-q-position", _last_position_for_all, PLAIN,
         frozenset({"positions-ignored", "position-map"}),
         "every key rotated with the query's (last) position"),
    Case("wrap-8192-not-probed", _wrap_long, dict(PLAIN, max_position_embeddings=8192),
         frozenset(), "table of 8192 wraps past the context: never reached", visible=False),
    # ------------------------------------------------------------ frequencies
    Case("arange-no-step", bhsd(RotaryCache(D, 8192, arange_step=1)), PLAIN,
         frozenset({"frequency-exponent"}), "arange(0, d) sliced to d/2: exponent i/d"),
    Case("exp-over-half", bhsd(RotaryCache(D, 8192, exp_den=D // 2)), PLAIN,
         frozenset({"frequency-exponent", "base"}), "exponent over d/2 (= base squared)"),
    Case("freq-reversed", lambda x, p: hf_like(x, p, inv_freq=_inv_freq(D).flip(0)), PLAIN,
         frozenset({"frequency-reversed"}), "inv_freq flipped"),
    Case("freq-repeated", _repeat_freq, PLAIN, frozenset({"frequency"}),
         "one frequency repeated (f[5] = f[4])"),
    Case("freq-dropped", _drop_freq, PLAIN, frozenset({"frequency"}),
         "one frequency dropped, ladder shifted and padded"),
    Case("log10-base", _log10_base, PLAIN, frozenset({"base"}),
         "exp(-2i/d * log10(base)): base e^4"),
    Case("int-division", _int_div, PLAIN, frozenset({"frequency-exponent", "frequency"}),
         "arange(0,d,2) // d: every frequency 1"),
    Case("inv-freq-bf16", _bf16_inv_freq, PLAIN,
         frozenset({"frequency-dtype", "positions-precision"}), "inv_freq rounded to bfloat16"),
    Case("wrong-base-config", lambda x, p: hf_like(x, p, base=10000.0),
         {"dim": D, "base": 500000.0}, frozenset({"base"}), "base 10000 for a 500000 model"),
    Case("numpy-fp32-base-1e6", lambda x, p: numpy_rope(x, p, base=1e6, dtype=np.float32),
         PLAIN, frozenset({"base"}), "numpy float32 with base 1e6 for a 1e4 model"),
    Case("tables-fp16", lambda x, p: hf_like(x, p, table_dtype=torch.float16), PLAIN,
         frozenset({"not-rope", "frequency-dtype"}), "cos/sin tables stored in float16"),
    Case("tables-bf16-cache", bhsd(RotaryCache(D, 8192, dtype=torch.bfloat16)), PLAIN,
         frozenset({"not-rope", "frequency-dtype"}), "cached cos/sin in bfloat16"),
    # ------------------------------------------------------------ signs, pairing, placement
    Case("rotate-half-order", lambda x, p: hf_like(
        x, p, rot=lambda t: torch.cat((t[..., D // 2 :], -t[..., : D // 2]), -1)), PLAIN,
         frozenset({"rotation-reversed"}), "rotate_half returns cat(x2, -x1)"),
    Case("complex-conj", lambda x, p: meta_fn(x, p, conj=True), dict(PLAIN, layout="interleaved"),
         frozenset({"rotation-reversed"}), "freqs_cis.conj()"),
    Case("cos-sin-swapped", lambda x, p: hf_like(x, p, swap=True), PLAIN,
         frozenset({"cos-sin-swapped"}), "x*sin + rotate_half(x)*cos"),
    Case("cos-sin-swapped-complex", _cos_sin_swapped_complex, dict(PLAIN, layout="interleaved"),
         frozenset({"cos-sin-swapped"}), "torch.complex(sin, cos)"),
    Case("sin-sign-one-half", _sin_half_sign, PLAIN, frozenset({"pair-block", "not-rope"}),
         "second half: b*cos - a*sin"),
    Case("sin-plus-both", _sin_both_plus, PLAIN, frozenset({"pair-block", "not-rope"}),
         "missing minus: a*cos + b*sin"),
    Case("layout-interleaved", gptj, PLAIN, frozenset({"layout"}),
         "GPT-J kernel for a half-layout checkpoint"),
    Case("layout-half", lambda x, p: hf_like(x, p), dict(PLAIN, layout="interleaved"),
         frozenset({"layout"}), "rotate_half kernel for a Meta checkpoint"),
    Case("view-as-complex-on-half", lambda x, p: meta_fn(x, p), PLAIN, frozenset({"layout"}),
         "view_as_complex pairs neighbours where halves are intended"),
    Case("mixed-pairing", _mixed_pairing, PLAIN,
         frozenset({"pair-block", "frequency", "not-rope"}),
         "rotate_half with repeat_interleave tables", amended=frozenset({"layout"}),
         why=MIXED),
    Case("mixed-pairing-gptj", lambda x, p: gptj(x, p, repeat="cat"),
         dict(PLAIN, layout="interleaved"), frozenset({"pair-block", "frequency", "not-rope"}),
         "rotate_every_two with cat(freqs, freqs) tables", amended=frozenset({"layout"}),
         why=MIXED),
    Case("output-permuted", _permuted_output, PLAIN, frozenset({"layout", "not-rope"}),
         "halves rotated, written out interleaved"),
    Case("odd-heads-reversed", _odd_heads_reversed, PLAIN,
         frozenset({"pair-block", "not-rope", "rotation-reversed"}),
         "batch folded into heads; odd heads' sin sign flipped"),
    # ------------------------------------------------------------ partial rotary
    Case("partial-rotates-all", lambda x, p: hf_like(x, p), dict(PLAIN, rotary_dim=32),
         frozenset({"partial-rotary"}), "rotary_dim 32 intended, all 64 rotated"),
    Case("partial-exp-over-head", _partial_exp_full, dict(PLAIN, rotary_dim=32),
         frozenset({"frequency-exponent", "base"}), "exponent over head_dim, not rotary_dim"),
    Case("pass-through-zeroed", _pass_through_zeroed, dict(PLAIN, rotary_dim=32),
         frozenset({"pass-through"}), "pass-through features left zero"),
    Case("partial-first-not-last", _partial_first_not_last,
         dict(PLAIN, rotary_dim=32, layout="interleaved", rotary_position="last"),
         frozenset({"partial-rotary", "pass-through", "layout"}),
         "rotates the first 32 where the last 32 are the rope part"),
    Case("numpy-last-pair-skipped", lambda x, p: numpy_rope(x, p, loop_pairs=D // 2 - 1), PLAIN,
         frozenset({"partial-rotary", "frequency", "pass-through"}),
         "loop over range(d//2 - 1): last pair not rotated"),
    # ------------------------------------------------------------ scaling
    Case("linear-twice", _linear_twice, LINEAR_KW, frozenset({"scaling"}),
         "linear factor on positions and on inv_freq"),
    Case("linear-multiplied", _linear_times, LINEAR_KW, frozenset({"scaling"}),
         "positions * factor instead of / factor"),
    Case("llama3-bands-swapped", lambda x, p: hf_like(
        x, p, inv_freq=llama3_freqs(D, 500000.0, 8.0, 1.0, 4.0, 8192, swap_bands=True)),
         LLAMA3_KW, frozenset({"scaling"}), "low/high wavelength thresholds swapped"),
    Case("llama3-scale-high", lambda x, p: hf_like(
        x, p, inv_freq=llama3_freqs(D, 500000.0, 8.0, 1.0, 4.0, 8192, scale_high=True)),
         LLAMA3_KW, frozenset({"scaling"}), "factor applied to the high-frequency band"),
    Case("llama3-unscaled", lambda x, p: hf_like(x, p, base=500000.0), LLAMA3_KW,
         frozenset({"scaling"}), "Llama 3 scaling not applied"),
    Case("yarn-no-factor", lambda x, p: hf_like(x, p, inv_freq=YF), YARN_KW,
         frozenset({"attention-factor"}), "YaRN: k path without the attention factor"),
    Case("yarn-factor-squared", lambda x, p: hf_like(x, p, inv_freq=YF, scale=YM * YM), YARN_KW,
         frozenset({"attention-factor"}), "YaRN: attention factor squared"),
    Case("yarn-ramp-over-d", _yarn_ramp_dim, YARN_KW, frozenset(),
         "ramp built over d instead of d/2 then cut: same first d/2 values (correct!)"),
    Case("yarn-ntk-base", _yarn_ntk_base, YARN_KW, frozenset({"scaling"}),
         "NTK-aware base change instead of YaRN's ramp"),
    Case("yarn-cos-only", _yarn_cos_only, YARN_KW,
         frozenset({"pair-block", "attention-factor", "not-rope"}),
         "attention factor on cos only"),
    Case("yarn-twice", lambda x, p: hf_like(
        x, p, inv_freq=yarn_freqs(D, 10000.0, 16.0, 4096), scale=YM), YARN_KW,
         frozenset({"scaling"}), "factor applied twice (16 for 4)"),
    Case("yarn-no-truncate", lambda x, p: hf_like(
        x, p, inv_freq=yarn_freqs(D, 10000.0, 4.0, 4096, no_truncate=True), scale=YM), YARN_KW,
         frozenset({"scaling"}), "correction range not rounded (truncate=False)"),
]


def outcome(case, findings, amended=True):
    """'clean', 'named', 'detected' (a finding, none accepted), 'missed' or
    'false-alarm'; ``amended=False``: only the codes decided before the first run."""
    found = list(findings)
    accepted = case.accepted | (case.amended if amended else frozenset())
    if not case.accepted:
        return "clean" if not found else "false-alarm"
    if not found:
        return "missed"
    return "named" if set(found) & accepted else "detected"


def totals(cases, findings, amended=True):
    """Counts over ``cases`` given ``findings`` (name -> list of codes)."""
    bugs = [c for c in cases if c.accepted]
    ok = [c for c in cases if not c.accepted]
    out = [outcome(c, findings[c.name], amended) for c in bugs]
    return {
        "bugs": len(bugs),
        "detected": sum(o in ("named", "detected") for o in out),
        "named": sum(o == "named" for o in out),
        "correct": len(ok),
        "correct_not_probed": sum(not c.visible for c in ok),
        "clean": sum(outcome(c, findings[c.name]) == "clean" for c in ok),
    }


def run(cases):
    """Diagnose every case: name -> findings."""
    from posenc_lib.tools.diagnose import diagnose_rope

    return {c.name: list(diagnose_rope(c.fn, **c.kwargs).findings) for c in cases}


# ---------------------------------------------------------------- written after the fixes
def _hf_f64_buffer(x, positions):
    # inv_freq computed in float64 and stored as float32; position_ids (batch, seq)
    d = x.shape[-1]
    inv = (1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))).float()
    pid = positions[None].expand(x.shape[0], -1)
    freqs = (inv[None, :, None] @ pid[:, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), -1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def _pairwise_einsum(x, positions):
    d = x.shape[-1]
    ang = positions.float()[:, None] * _inv_freq(d)
    c, s = ang.cos(), ang.sin()
    rot = torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)  # (S, P, 2, 2)
    pairs = x.view(*x.shape[:-1], d // 2, 2)
    return torch.einsum("spij,bspj->bspi", rot, pairs).reshape(x.shape)


def _last_half_correct(x, positions):
    rd = 32
    return torch.cat([x[..., :-rd], hf_like(x[..., -rd:], positions)], -1)


def _ntk_base_plain(x, positions):
    return hf_like(x, positions, base=10000.0 * 4.0 ** (D / (D - 2)))


def _polar_bf16_angles(x, positions):
    d = x.shape[-1]
    ang = (positions.bfloat16()[:, None] * _inv_freq(d).bfloat16()).float()
    fc = torch.polar(torch.ones_like(ang), ang)
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * fc).flatten(-2)


def _linspace_exponent(x, positions):
    d = x.shape[-1]
    inv = 10000.0 ** (-np.linspace(0.0, 1.0, d // 2))
    return _einsum_half(x, positions, f=torch.tensor(inv, dtype=torch.float32))


def _applied_twice(x, positions):
    return hf_like(hf_like(x, positions), positions)


def _llama3_smooth_wavelen(x, positions):
    inv = _inv_freq(D, 500000.0)
    old, lo, hi, factor = 8192, 1.0, 4.0, 8.0
    out = []
    for f in inv.tolist():
        wl = 2 * math.pi / f
        if wl < old / hi:
            out.append(f)
        elif wl > old / lo:
            out.append(f / factor)
        else:
            smooth = (wl / old - lo) / (hi - lo)  # bug: wavelen/old instead of old/wavelen
            out.append((1 - smooth) * f / factor + smooth * f)
    return hf_like(x, positions, inv_freq=torch.tensor(out, dtype=torch.float32))


def _yarn_partial_factor_all(x, positions):
    rd = 32
    f = yarn_freqs(rd, 10000.0, 4.0, 4096)
    return torch.cat([hf_like(x[..., :rd], positions, inv_freq=f), x[..., rd:]], -1) * YM


def _meta_bf16_positions(x, positions):
    return meta_fn(x, positions, index=lambda p: p.bfloat16().float().long())


def _fp16_position_table(x, positions):
    d = x.shape[-1]
    t = torch.arange(8192, dtype=torch.float16).float()  # the position column in float16
    freqs = torch.outer(t, _inv_freq(d))
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos()[positions], emb.sin()[positions]
    return x * cos + rotate_half(x) * sin


def _reversed_upper_pairs(x, positions):
    d = x.shape[-1]
    f = _inv_freq(d).clone()
    f[d // 4:] *= -1  # a sign table built for half the pairs only
    return _einsum_half(x, positions, f=f)


LATER = [
    Case("later-ok-f64-buffer", _hf_f64_buffer, PLAIN, frozenset(),
         "inv_freq in float64 stored as float32, batched matmul for freqs"),
    Case("later-ok-pairwise-einsum", _pairwise_einsum, dict(PLAIN, layout="interleaved"),
         frozenset(), "2x2 rotation per pair applied with einsum"),
    Case("later-ok-partial-last-half", _last_half_correct,
         dict(PLAIN, rotary_dim=32, rotary_position="last"), frozenset(),
         "last 32 features rotate in the half layout"),
    Case("later-ntk-base", _ntk_base_plain, PLAIN, frozenset({"base"}),
         "NTK-aware base change when plain RoPE is intended"),
    Case("later-polar-bf16-angles", _polar_bf16_angles, dict(PLAIN, layout="interleaved"),
         frozenset({"positions-precision", "frequency-dtype", "not-rope"}),
         "polar with angles computed in bfloat16"),
    Case("later-linspace-exponent", _linspace_exponent, PLAIN,
         frozenset({"frequency-exponent", "base"}),
         "base ** -linspace(0, 1, d/2): exponent i/(d/2 - 1)"),
    Case("later-applied-twice", _applied_twice, PLAIN, frozenset({"scaling", "position-map"}),
         "RoPE applied twice: every angle doubled"),
    Case("later-llama3-smooth-inverted", _llama3_smooth_wavelen, LLAMA3_KW,
         frozenset({"scaling"}), "Llama 3 smoothing uses wavelen/old instead of old/wavelen"),
    Case("later-yarn-factor-on-pass-through", _yarn_partial_factor_all,
         dict(YARN_KW, rotary_dim=32), frozenset({"pass-through"}),
         "YaRN attention factor multiplies the whole head, pass-through included"),
    Case("later-meta-bf16-positions", _meta_bf16_positions, dict(PLAIN, layout="interleaved"),
         frozenset({"positions-precision"}), "Meta freqs_cis gathered at bf16-rounded positions"),
    Case("later-fp16-position-table", _fp16_position_table, PLAIN,
         frozenset({"positions-precision"}), "cache built from arange(8192, dtype=float16)"),
    Case("later-reversed-upper-pairs", _reversed_upper_pairs, PLAIN,
         frozenset({"rotation-reversed", "frequency", "pair-block"}),
         "upper half of the pairs turn backwards"),
]


# ---------------------------------------------------------------- written after the ramp fix
def _yarn_unclamped(x, positions):
    # YaRN's ramp without the clamp to [0, 1]
    d, base, factor, old = D, 10000.0, 4.0, 4096

    def corr(rot):
        return (d * math.log(old / (rot * 2 * math.pi))) / (2 * math.log(base))

    lo, hi = math.floor(corr(32)), math.ceil(corr(1))
    ramp = (torch.arange(d // 2, dtype=torch.float64) - lo) / (hi - lo)
    pos = base ** (torch.arange(0, d, 2).double() / d)
    f = (1.0 / (factor * pos)) * ramp + (1.0 / pos) * (1 - ramp)
    return hf_like(x, positions, inv_freq=f.float().abs(), scale=YM)


def _llama3_double_divide(x, positions):
    # the smoothed band interpolates from the already divided frequency
    inv = _inv_freq(D, 500000.0)
    old, lo, hi, factor = 8192, 1.0, 4.0, 8.0
    out = []
    for f in inv.tolist():
        wl = 2 * math.pi / f
        if wl < old / hi:
            out.append(f)
        elif wl > old / lo:
            out.append(f / factor)
        else:
            g = f / factor
            smooth = (old / wl - lo) / (hi - lo)
            out.append((1 - smooth) * g / factor + smooth * g)
    return hf_like(x, positions, inv_freq=torch.tensor(out, dtype=torch.float32))


def _yarn_one_ramp_pair(x, positions):
    f = YF.clone()
    f[15] = f[16]
    return hf_like(x, positions, inv_freq=f, scale=YM)


THIRD = [
    Case("third-yarn-unclamped-ramp", _yarn_unclamped, YARN_KW, frozenset({"scaling"}),
         "YaRN ramp not clamped to [0, 1]"),
    Case("third-llama3-double-divide", _llama3_double_divide, LLAMA3_KW,
         frozenset({"scaling"}), "Llama 3 smoothing from the already divided frequency"),
    Case("third-yarn-one-ramp-pair", _yarn_one_ramp_pair, YARN_KW,
         frozenset({"frequency", "scaling"}), "one pair inside YaRN's ramp overwritten"),
]
