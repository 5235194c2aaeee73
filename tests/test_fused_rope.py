"""rope.fused_apply (torch.compile of the library's formula) against the eager paths.

The tensors live on ``POSENC_TEST_DEVICE`` (default ``cpu``); ``make gpu-check``
runs this file with ``cuda``, where TorchInductor generates a Triton kernel.

Tolerance, from the arithmetic: each output is ``a·c - b·s`` or ``b·c + a·s``.
A path that computes it with at most three rounded operations (two products,
one sum), each with relative error at most ``u = eps/2`` of the dtype, is
within ``3u·M`` of the exact value, with ``M = |a·c| + |b·s|`` for that
output (products and sum are bounded by ``M``; the ``O(u²)`` terms are covered
by the factor ``1 + 2**-8`` below). The eager path (``x⊙cos``, rounded, then an
``addcmul``) and the fused one (float32 inside, one final rounding in
bfloat16/float16) both do at most that, so each is within ``3u·M`` of a
float64 evaluation of the same rounded inputs, and they are within ``6u·M`` of
each other. Features beyond ``rotary_dim`` are copied: they must be equal.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc_lib import rope

DEVICE = torch.device(os.environ.get("POSENC_TEST_DEVICE", "cpu"))
#: Inputs are drawn and references computed here, whatever torch's default device
#: (make gpu-check sets it to the GPU as well).
HOST = torch.device("cpu")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _inputs(lead, seq, dim, rotary_dim, dtype, seed, cos_lead=()):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, seq, dim, generator=g, device=HOST).to(DEVICE, dtype)
    positions = torch.randint(0, 100_000, (*cos_lead, seq), generator=g, device=HOST)
    freqs = rope.inv_freq(rotary_dim, dtype=torch.float64).to(HOST)
    angles = rope.rope_angles(positions, freqs)
    cos, sin = angles.cos().to(DEVICE, dtype), angles.sin().to(DEVICE, dtype)
    return x, cos, sin


def _pairs(rotary_dim, layout):
    """Feature indices (first, second) of every pair, written out independently."""
    half = rotary_dim // 2
    if layout == "half":
        return torch.arange(half, device=HOST), torch.arange(half, rotary_dim, device=HOST)
    return (torch.arange(0, rotary_dim, 2, device=HOST),
            torch.arange(1, rotary_dim, 2, device=HOST))


def _exact_and_bound(x, cos, sin, layout, rotary_dim):
    """float64 rotation of the same rounded inputs, and ``M`` per output feature."""
    x64, c, s = x.double().cpu(), cos.double().cpu(), sin.double().cpu()
    i, j = _pairs(rotary_dim, layout)
    a, b = x64[..., i], x64[..., j]
    exact = x64.clone()
    exact[..., i] = a * c - b * s
    exact[..., j] = b * c + a * s
    bound = torch.zeros_like(x64)
    bound[..., i] = (a * c).abs() + (b * s).abs()
    bound[..., j] = (b * c).abs() + (a * s).abs()
    return exact, bound


def _unit_roundoff(dtype):
    return torch.finfo(dtype).eps / 2 * (1 + 2.0 ** -8)


def _full_tables(cos, sin, layout):
    """The repeated (…, rotary_dim) tables that apply_cos_sin takes."""
    if layout == "half":
        return torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    return cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)


def _check(x, cos, sin, layout, rotary_dim):
    fused = rope.fused_apply(x, cos, sin, layout=layout, rotary_dim=rotary_dim)
    eager = rope.apply_cos_sin(x, *_full_tables(cos, sin, layout), layout=layout,
                               rotary_dim=rotary_dim)
    assert fused.shape == x.shape and fused.dtype == x.dtype and fused.device == x.device
    exact, bound = _exact_and_bound(x, cos, sin, layout, rotary_dim)
    u = _unit_roundoff(x.dtype)
    for name, out in (("fused", fused), ("eager", eager)):
        error = (out.double().cpu() - exact).abs()
        worst = (error - 3 * u * bound).max().item()
        assert worst <= 0, f"{name} exceeds 3u·M by {worst:.3g} ({layout}, {x.dtype})"
    gap = (fused.double().cpu() - eager.double().cpu()).abs()
    assert bool((gap <= 6 * u * bound).all()), "fused and eager differ beyond 6u·M"
    assert torch.equal(fused[..., rotary_dim:], x[..., rotary_dim:])


@pytest.fixture
def fresh_fused(monkeypatch):
    """A fresh compiled function (and fallback state) for this test only."""
    state = {"compiled": {}, "fallback": None, "backend": "inductor"}
    monkeypatch.setattr(rope, "_FUSED", state)
    return state


@pytest.fixture
def strict_dynamo():
    """Raise instead of silently running eager when dynamo's recompile limit is hit
    (a silent fallback would make fused == eager trivially)."""
    import torch._dynamo

    torch._dynamo.reset()
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        yield
    torch._dynamo.reset()


# -- fast: the traced graph (no code generation), fallback, bad input -----------------

@pytest.mark.parametrize("layout", rope.LAYOUTS)
def test_traced_formula_matches_the_eager_paths(fresh_fused, strict_dynamo, layout):
    """torch.compile captures the whole formula as one graph (fullgraph) with
    dynamic sizes; the "eager" backend runs that graph without generating code."""
    fresh_fused["backend"] = "eager"
    cases = [((2, 3), 17, 12, 8, torch.float32, (), 0),
             ((), 1, 4, 4, torch.float32, (), 1),
             ((5,), 9, 10, 10, torch.bfloat16, (5,), 2)]
    for lead, seq, dim, rotary_dim, dtype, cos_lead, seed in cases:
        x, cos, sin = _inputs(lead, seq, dim, rotary_dim, dtype, seed, cos_lead)
        _check(x, cos, sin, layout, rotary_dim)
    assert fresh_fused["fallback"] is None


@pytest.mark.slow
def test_many_layouts_dtypes_and_ranks_in_one_process_stay_compiled(fresh_fused,
                                                                      strict_dynamo):
    """dynamo allows 8 graphs per code object; a model (or the benchmark) meets
    more variants than that in one process. None may fall back to eager."""
    fresh_fused["backend"] = "eager"
    for layout in rope.LAYOUTS:
        for dtype in (torch.float32, torch.bfloat16):
            for rotary_dim in (8, 12):
                for lead, cos_lead in (((2, 3), ()), ((2, 3), (2, 1)), ((), ()),
                                       ((1, 2, 2, 1), (2, 1))):
                    for seq in (1, 5):
                        x, cos, sin = _inputs(lead, seq, 12, rotary_dim, dtype, seq,
                                              cos_lead)
                        out = rope.fused_apply(x, cos, sin, layout=layout,
                                               rotary_dim=rotary_dim)
                        assert out.shape == x.shape
    assert fresh_fused["fallback"] is None, fresh_fused["fallback"]


def test_falls_back_to_the_eager_formula_with_one_clear_warning(fresh_fused):
    def broken_backend(graph, example_inputs):
        raise RuntimeError("Compiler: cc is not found")

    fresh_fused["backend"] = broken_backend
    x, cos, sin = _inputs((2,), 6, 8, 8, torch.float32, 3)
    with pytest.warns(RuntimeWarning, match="torch.compile is unavailable.*cc is not found"):
        out = rope.fused_apply(x, cos, sin, layout="interleaved")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = rope.fused_apply(x, cos, sin, layout="interleaved")
    expected = rope.apply_cos_sin(x, *_full_tables(cos, sin, "interleaved"),
                                  layout="interleaved")
    assert torch.equal(out, again)
    exact, bound = _exact_and_bound(x, cos, sin, "interleaved", 8)
    out, expected = out.double().cpu(), expected.double().cpu()
    assert bool(((out - exact).abs() <= 3 * _unit_roundoff(x.dtype) * bound).all())
    assert bool(((out - expected).abs() <= 6 * _unit_roundoff(x.dtype) * bound).all())


def test_bad_input_names_the_parameter(fresh_fused):
    x, cos, sin = _inputs((2,), 6, 8, 8, torch.float32, 4)
    full_cos, full_sin = _full_tables(cos, sin, "half")
    with pytest.raises(ValueError, match="cos has 8 frequencies, so dim must be 16"):
        rope.fused_apply(x, full_cos, full_sin)
    with pytest.raises(ValueError, match="rotary_dim must be 8"):
        rope.fused_apply(x, cos, sin, rotary_dim=6)
    with pytest.raises(ValueError, match="cos and sin must have the same shape"):
        rope.fused_apply(x, cos, sin[:3])
    with pytest.raises(ValueError, match="cos has shape"):
        rope.fused_apply(x, cos[:5], sin[:5])
    with pytest.raises(ValueError, match="layout must be one of"):
        rope.fused_apply(x, cos, sin, layout="neox")
    with pytest.raises(ValueError, match="cos is on meta and x on"):
        rope.fused_apply(x, cos.to("meta"), sin)
    with pytest.raises(ValueError, match="x"):
        rope.fused_apply(x.long(), cos, sin)
    assert fresh_fused["compiled"] == {}  # nothing was compiled for bad input


# -- slow: TorchInductor's generated kernel, adversarial shapes ------------------------

@st.composite
def _case(draw):
    rotary_dim = 2 * draw(st.integers(1, 8))
    dim = rotary_dim + 2 * draw(st.sampled_from([0, 0, 1, 3]))
    lead = tuple(draw(st.lists(st.integers(1, 5), max_size=2)))
    cos_lead = lead[len(lead) - draw(st.integers(0, len(lead))):] if lead else ()
    return dict(lead=lead, seq=draw(st.integers(1, 23)), dim=dim, rotary_dim=rotary_dim,
                dtype=draw(st.sampled_from(DTYPES)), cos_lead=cos_lead,
                seed=draw(st.integers(0, 2 ** 16)),
                layout=draw(st.sampled_from(rope.LAYOUTS)))


@pytest.mark.slow
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(case=_case())
def test_generated_kernel_matches_the_eager_paths(fresh_fused, strict_dynamo, case):
    """Odd sizes, partial rotary dims, both layouts, three dtypes, cos/sin with
    fewer leading dimensions than x: TorchInductor's kernel (C++ on the CPU,
    Triton on a GPU) against the float64 rotation and the eager path."""
    layout = case.pop("layout")
    x, cos, sin = _inputs(**case)
    _check(x, cos, sin, layout, case["rotary_dim"])
    assert fresh_fused["fallback"] is None, fresh_fused["fallback"]


@pytest.mark.slow
def test_generated_kernel_gradients_match_the_eager_formula(fresh_fused, strict_dynamo):
    """Training goes through it too: the compiled backward against autograd of
    the eager formula (the same linear map transposed, so the same bound)."""
    for layout in rope.LAYOUTS:
        x, cos, sin = _inputs((2, 3), 11, 12, 8, torch.float32, 5)
        x.requires_grad_(True)
        weight = torch.randn(x.shape, generator=torch.Generator().manual_seed(6),
                             device=HOST).to(DEVICE)
        (fused_grad,) = torch.autograd.grad(
            (rope.fused_apply(x, cos, sin, layout=layout, rotary_dim=8) * weight).sum(), x)
        (eager_grad,) = torch.autograd.grad(
            (rope.apply_cos_sin(x, *_full_tables(cos, sin, layout), layout=layout,
                                rotary_dim=8) * weight).sum(), x)
        # The gradient rotates the weight by minus the angle: M from |w| instead of |x|.
        _, bound = _exact_and_bound(weight, cos, -sin, layout, 8)
        gap = (fused_grad.double().cpu() - eager_grad.double().cpu()).abs()
        assert bool((gap <= 6 * _unit_roundoff(x.dtype) * bound).all()), layout
    assert fresh_fused["fallback"] is None
