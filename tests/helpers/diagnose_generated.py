"""Generated RoPE bugs: a correct kernel, written here without posenc_lib, with
one component perturbed at a time, and the findings that name that cause.

``make_case(params)`` builds ``(fn, diagnose kwargs, accepted codes, text)``
from a dict of plain values; :func:`strategy` draws those dicts with
hypothesis (tests/test_diagnose_generated.py), and
``benchmarks/diagnose_rates.py`` samples the same space with a seeded
``random.Random`` for the stored run (results/diagnose_rates.json).

Components perturbed: the position map (offset, scale, a cache that wraps or
clamps, a tiled kernel), the pairing (the other layout, a rotated slice in the
wrong place), one frequency, the base, the exponent, signs (rotation
reversed, a missing minus, a reflection), cos/sin placement (swapped, sin of
the next pair, outputs in swapped order), dtypes (positions in bfloat16,
inv_freq truncated to integers) and the scaling's parameters (factor twice,
Llama 3 bands swapped, YaRN's original length, the attention factor).
"""

from __future__ import annotations

import math

import torch

PERTURBATIONS = {
    # name: findings that name the cause (any one of them); "none": the correct kernel
    "none": set(),
    "offset": {"position-offset"},
    "scale": {"scaling"},
    "wrap": {"position-map"},
    "clamp": {"position-map"},
    "tiled": {"position-map"},
    "other-layout": {"layout"},
    "slice-last": {"partial-rotary"},
    "one-frequency": {"frequency"},
    "base": {"base"},
    "exponent": {"frequency-exponent"},
    "reversed": {"rotation-reversed"},
    "missing-minus": {"pair-block"},
    "reflection": {"pair-block"},
    "cos-sin-swapped": {"cos-sin-swapped"},
    "sin-next-pair": {"pair-block"},
    "outputs-swapped": {"pair-block"},
    "positions-bf16": {"positions-precision"},
    "inv-freq-int": {"frequency-dtype"},
    "factor-twice": {"scaling"},
    "llama3-bands-swapped": {"scaling"},
    "yarn-original-length": {"scaling"},
    "attention-factor": {"attention-factor"},
    "pass-through-cos": {"pass-through"},
}
SCALED_ONLY = {"factor-twice", "llama3-bands-swapped", "yarn-original-length",
               "attention-factor"}
PARTIAL_ONLY = {"slice-last", "pass-through-cos"}


def ladder(dim, base, exponent=2.0):
    return 1.0 / base ** (exponent * torch.arange(dim // 2, dtype=torch.float64) / dim)


def llama3(dim, base, factor, low, high, original):
    inv = ladder(dim, base)
    wavelength = 2 * math.pi / inv
    smooth = ((original / wavelength - low) / (high - low)).clamp(0, 1)
    mid = (1 - smooth) * inv / factor + smooth * inv
    return torch.where(wavelength < original / high, inv,
                       torch.where(wavelength > original / low, inv / factor, mid))


def yarn(dim, base, factor, original, beta_fast=32.0, beta_slow=1.0):
    inv = ladder(dim, base)

    def correction(turns):
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction(beta_fast)), 0)
    high = min(math.ceil(correction(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp
    att = 0.1 * math.log(factor) + 1.0
    return inv / factor * (1 - keep) + inv * keep, att


def make_case(params: dict):
    """``(fn, kwargs, accepted, text)`` for one perturbation of a correct kernel."""
    dim, base, layout = params["dim"], params["base"], params["layout"]
    rotary = dim // 2 if params["partial"] else dim
    scaling = params["scaling"]
    bug = params["bug"]
    context = params["context"]
    kw = dict(dim=dim, base=base, layout=layout, rotary_dim=rotary,
              max_position_embeddings=context)
    att = 1.0
    if scaling == "linear":
        block = {"rope_type": "linear", "factor": 4.0}
        inv = ladder(rotary, base) / 4.0
    elif scaling == "llama3":
        block = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                 "high_freq_factor": 4.0, "original_max_position_embeddings": context // 8}
        inv = llama3(rotary, base, 8.0, 1.0, 4.0, context // 8)
    elif scaling == "yarn":
        block = {"rope_type": "yarn", "factor": 4.0,
                 "original_max_position_embeddings": context // 4}
        inv, att = yarn(rotary, base, 4.0, context // 4)
    else:
        block = None
        inv = ladder(rotary, base)
    if block is not None:
        kw["rope_scaling"] = block
    n = rotary // 2
    k = params["k"] % n
    pos_map = None
    sign = 1.0
    if bug == "offset":
        pos_map = lambda p: p + params["offset"]                      # noqa: E731
    elif bug == "scale":
        inv = inv / params["factor"]
    elif bug == "wrap":
        rows = params["rows"]
        pos_map = lambda p: p % rows                                   # noqa: E731
    elif bug == "clamp":
        rows = params["rows"]
        pos_map = lambda p: p.clamp(max=rows - 1)                      # noqa: E731
    elif bug == "one-frequency":
        inv = inv.clone()
        inv[k] *= params["factor"]
    elif bug == "base":
        inv = ladder(rotary, base * params["factor"]) if block is None else inv
    elif bug == "exponent":
        inv = ladder(rotary, base, exponent=1.0) if block is None else inv
    elif bug == "reversed":
        sign = -1.0
    elif bug == "inv-freq-int":
        inv = torch.floor(inv.float()).double()
    elif bug == "factor-twice":
        inv = inv / block["factor"]
    elif bug == "llama3-bands-swapped":
        inv = llama3(rotary, base, 8.0, 4.0, 1.0, context // 8)
    elif bug == "yarn-original-length":
        inv, att = yarn(rotary, base, 4.0, context)
    elif bug == "attention-factor":
        att = att * att if att != 1.0 else 1.25
    if bug in SCALED_ONLY and scaling in (None, "linear") and bug != "factor-twice" \
            and bug != "attention-factor":
        bug = "clean"
    if bug == "factor-twice" and block is None:
        bug = "clean"
    inv32 = inv.float()
    pass_through = dim - rotary
    slice_last = bug == "slice-last"

    def angles(positions):
        p = positions
        if pos_map is not None:
            p = pos_map(p)
        t = p.to(torch.bfloat16).float() if bug == "positions-bf16" else p.float()
        return sign * t[:, None] * inv32[None]

    def rotate(xr, f):
        c, s = f.cos() * att, f.sin() * att
        if bug == "cos-sin-swapped":
            c, s = s, c
        if bug == "sin-next-pair":
            s = torch.roll(s, -1, -1)
        if layout == "half" and bug != "other-layout" or \
                layout == "interleaved" and bug == "other-layout":
            a, b = xr[..., :n], xr[..., n:]
        else:
            a, b = xr[..., 0::2], xr[..., 1::2]
        out_a = a * c - b * s
        out_b = b * c + a * s
        if bug == "missing-minus":
            out_a = a * c + b * s
        if bug == "reflection":
            out_a, out_b = a * c + b * s, a * s - b * c
        if bug == "outputs-swapped":
            out_a, out_b = out_b, out_a
        if layout == "half" and bug != "other-layout" or \
                layout == "interleaved" and bug == "other-layout":
            return torch.cat((out_a, out_b), -1)
        return torch.stack((out_a, out_b), -1).flatten(-2)

    def fn(x, positions):
        if bug == "tiled" and x.shape[1] > 128:
            positions = positions.clone()
            positions[128:] = positions[0] + torch.arange(x.shape[1] - 128)
        f = angles(positions)
        if slice_last:
            xp, xr = x[..., :pass_through], x[..., pass_through:]
            return torch.cat((xp, rotate(xr, f)), -1)
        xr, xp = x[..., :rotary], x[..., rotary:]
        if bug == "pass-through-cos":
            xp = xp * f.cos()[:, :1]
        return torch.cat((rotate(xr, f), xp), -1)

    accepted = set() if bug in ("clean", "none") else PERTURBATIONS[bug]
    text = (f"{bug} (dim {dim}, rotary {rotary}, base {base:g}, {layout}, "
            f"scaling {scaling}, context {context}, params "
            f"{ {k: v for k, v in params.items() if k in ('offset', 'factor', 'rows', 'k')} })")
    return fn, kw, accepted, text


def valid(params: dict) -> bool:
    """Whether the perturbation applies to this kernel."""
    bug = params["bug"]
    if bug in PARTIAL_ONLY and not params["partial"]:
        return False
    if bug in ("base", "exponent") and params["scaling"] is not None:
        return False
    if bug in ("llama3-bands-swapped",) and params["scaling"] != "llama3":
        return False
    if bug in ("yarn-original-length",) and params["scaling"] != "yarn":
        return False
    if bug == "factor-twice" and params["scaling"] is None:
        return False
    if bug in ("wrap", "clamp") and params["rows"] >= params["context"]:
        return False
    return True


def sample(rng) -> dict:
    """One params dict from ``random.Random`` ``rng`` (the stored run's sampler)."""
    while True:
        params = dict(
            dim=rng.choice([32, 64, 128]), base=rng.choice([1e4, 5e5, 1e6]),
            layout=rng.choice(["half", "interleaved"]), partial=rng.random() < 0.25,
            scaling=rng.choice([None, None, "linear", "llama3", "yarn"]),
            context=rng.choice([8192, 32768, 131072]), bug=rng.choice(sorted(PERTURBATIONS)),
            offset=rng.choice([1, 2, 7, 100, -3]), factor=rng.choice([0.5, 2.0, 4.0, 8.0, 1.01]),
            rows=rng.choice([2048, 4096, 8192, 16384]), k=rng.randrange(64))
        if valid(params):
            return params


def strategy():
    """A hypothesis strategy for the same space."""
    from hypothesis import strategies as st
    space = st.fixed_dictionaries(dict(
        dim=st.sampled_from([32, 64]), base=st.sampled_from([1e4, 5e5]),
        layout=st.sampled_from(["half", "interleaved"]), partial=st.booleans(),
        scaling=st.sampled_from([None, "linear", "llama3", "yarn"]),
        context=st.sampled_from([8192, 16384]), bug=st.sampled_from(sorted(PERTURBATIONS)),
        offset=st.sampled_from([1, 2, 7, -3]), factor=st.sampled_from([0.5, 2.0, 4.0, 1.01]),
        rows=st.sampled_from([2048, 4096]), k=st.integers(0, 63)))
    return space.filter(valid)


def judge(result, accepted) -> tuple[bool, bool]:
    """``(detected, named)`` of a diagnosis for a case with ``accepted`` codes."""
    if not accepted:
        return (not result.findings, not result.findings)
    detected = bool(result.findings)
    named = bool(set(result.findings) & accepted) and "not-fitted" not in result.findings
    return detected, named
