"""Engine code vendored unchanged from pinned releases, and its loader.

``vllm/``: the package ``vllm/model_executor/layers/rotary_embedding/`` of the
vllm 0.33.0 wheel from PyPI (Apache-2.0; ``vllm/LICENSE``; ``vllm/vendor.txt``
names the wheel and its hash; ``vllm/RECORD`` holds the wheel's own RECORD
lines for these files, whose sha256 ``tests/test_engines.py`` recomputes).

:func:`vllm_rotary` imports that package as vLLM would, except that the few
engine internals it imports at module level (``CustomOp``, the platform, the
logger, triton, the config, tensor parallelism) are replaced by the small
stubs below, which select the ``forward_native`` (plain torch) paths. Nothing
here is installed as ``vllm``: the stub modules are in ``sys.modules`` only
while the package loads.

``sglang/``: the package ``sglang/srt/layers/rotary_embedding/`` of the
sglang 0.5.23 wheel from PyPI, kept the same way (``sglang/LICENSE``,
``sglang/vendor.txt``, ``sglang/RECORD``). :func:`sglang_rotary` imports it
with SGLang's engine internals stubbed (see :func:`_sglang_stubs`); nothing
``sglang*`` stays in ``sys.modules``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import types
from pathlib import Path

import torch
from torch import nn

VENDOR = Path(__file__).parent
VLLM_ROOT = VENDOR / "vllm"
VLLM_PACKAGE = "vllm.model_executor.layers.rotary_embedding"

#: The ``max_model_len`` vLLM's config reports to
#: ``Phi3LongRoPEScaledRotaryEmbedding`` (it reads
#: ``get_current_vllm_config().model_config.max_model_len``); set it with
#: :func:`vllm_max_model_len`.
_VLLM_CONFIG = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=None))


@contextlib.contextmanager
def vllm_max_model_len(n: int):
    """Within the block, vLLM's config reports ``max_model_len = n``."""
    old = _VLLM_CONFIG.model_config.max_model_len
    _VLLM_CONFIG.model_config.max_model_len = int(n)
    try:
        yield
    finally:
        _VLLM_CONFIG.model_config.max_model_len = old


class _CustomOp(nn.Module):
    """Stub of ``vllm.model_executor.custom_op.CustomOp``: never enabled, so
    every layer dispatches to its ``forward_native``."""

    def __init__(self, *args, enforce_enable: bool = False, **kwargs):
        super().__init__()

    @classmethod
    def register(cls, name, *args, **kwargs):
        return lambda op: op

    def enabled(self) -> bool:
        return False

    def forward(self, *args, **kwargs):
        return self.forward_native(*args, **kwargs)


class _Anything:
    """Stands for triton and ``tl``: attributes, calls and decorators that
    are only evaluated at import (the triton kernels are never run here)."""

    def __getattr__(self, name):
        return _Anything()

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return _Anything()

    def __getitem__(self, key):
        return _Anything()


class _Logger(logging.LoggerAdapter):
    """vLLM's logger, at debug level: its start-up advice (LongRoPE's
    "Using LongRoPE scaling factors") is not the book's output."""

    def warning(self, *args, **kwargs):
        self.debug(*args, **kwargs)

    def warning_once(self, *args, **kwargs):
        self.debug(*args, **kwargs)

    def info_once(self, *args, **kwargs):
        self.debug(*args, **kwargs)

    def debug_once(self, *args, **kwargs):
        self.debug(*args, **kwargs)


def _stubs() -> dict[str, types.ModuleType]:
    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        return m

    platform = types.SimpleNamespace(is_cpu=lambda: True, is_cuda=lambda: False,
                                     is_rocm=lambda: False, is_xpu=lambda: False,
                                     is_cuda_alike=lambda: False)
    aiter = types.SimpleNamespace(is_triton_rotary_embed_enabled=lambda: False,
                                  get_triton_rotary_embedding_op=lambda: None)
    anything = _Anything()
    vllm = module("vllm", __path__=[str(VLLM_ROOT / "vllm")])
    return {
        "vllm": vllm,
        "vllm._aiter_ops": module("vllm._aiter_ops", rocm_aiter_ops=aiter),
        "vllm.model_executor.custom_op": module(
            "vllm.model_executor.custom_op", CustomOp=_CustomOp, PluggableLayer=_CustomOp),
        "vllm.logger": module(
            "vllm.logger",
            init_logger=lambda name: _Logger(logging.getLogger(name), {})),
        "vllm.platforms": module("vllm.platforms", current_platform=platform),
        "vllm.utils": module("vllm.utils", __path__=[]),
        "vllm.utils.torch_utils": module(
            "vllm.utils.torch_utils", direct_register_custom_op=lambda **kw: None,
            async_tensor_h2d=lambda data, dtype, device, pin_memory=False:
                torch.tensor(data, dtype=dtype, device=device)),
        "vllm.utils.flashinfer": module("vllm.utils.flashinfer",
                                        has_flashinfer=lambda: False),
        "vllm.triton_utils": module("vllm.triton_utils", triton=anything, tl=anything),
        "vllm.config": module("vllm.config",
                              get_current_vllm_config=lambda: _VLLM_CONFIG),
        "vllm.distributed": module("vllm.distributed",
                                   get_tensor_model_parallel_world_size=lambda: 1,
                                   get_tensor_model_parallel_rank=lambda: 0),
    }


_LOADED: dict[str, types.ModuleType] = {}


def vllm_rotary() -> types.ModuleType:
    """vLLM 0.33.0's ``vllm.model_executor.layers.rotary_embedding``, run from
    the vendored files (``get_rope``, ``YaRNScalingRotaryEmbedding``, ...).

    The stub modules and the loaded ``vllm.*`` modules are removed from
    ``sys.modules`` afterwards; the returned module keeps its references.
    """
    if "vllm" in _LOADED:
        return _LOADED["vllm"]
    saved = {k: v for k, v in sys.modules.items() if k == "vllm" or k.startswith("vllm.")}
    for k in saved:
        del sys.modules[k]
    try:
        sys.modules.update(_stubs())
        import importlib

        rotary = importlib.import_module(VLLM_PACKAGE)
    finally:
        for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
            del sys.modules[k]
        sys.modules.update(saved)
    _LOADED["vllm"] = rotary
    return rotary


# ---- SGLang 0.5.23 ----------------------------------------------------------

SGLANG_ROOT = VENDOR / "sglang"
SGLANG_PACKAGE = "sglang.srt.layers.rotary_embedding"
#: The platforms :func:`sglang_rotary` can load the package for: ``"cpu"``,
#: SGLang's CPU engine (``SGLANG_USE_CPU_ENGINE=1``) on a host without AMX,
#: where every layer runs ``forward_native``; ``"cuda"``, only to read what
#: the constructors do there (the cache kept in float32; no kernel is run;
#: a head size other than 64, 128, 256 or 512 makes ``RotaryEmbedding``
#: import SGLang's fallback kernel, base.py lines 122-141, and fails).
SGLANG_PLATFORMS = ("cpu", "cuda")


class _BaseFusedOp(nn.Module):
    """Stub of ``sglang.kernels.fused_op.BaseFusedOp``: no kernel backend and
    no platform forward, so ``forward`` is ``forward_native`` (its dispatch
    order's last step, the one a CPU without AMX takes)."""

    def forward(self, *args, **kwargs):
        return self.forward_native(*args, **kwargs)


class _Env:
    """One of ``sglang.srt.environ.envs``: ``.get()`` gives its default."""

    def __init__(self, default):
        self._default = default

    def get(self):
        return self._default


def _no_kernel(*args, **kwargs):
    raise RuntimeError("an SGLang GPU kernel was called; only forward_native runs here")


def _sglang_stubs(platform: str) -> dict[str, types.ModuleType]:
    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        return m

    def flag(value):
        return lambda *args, **kwargs: value

    # environ.py of sglang 0.5.23: SGLANG_ROPE_CACHE_FP32 = EnvBool(False) (line
    # 1546), SGLANG_ROPE_CACHE_ALIGN = EnvInt(128) (line 1548)
    envs = types.SimpleNamespace(SGLANG_ROPE_CACHE_FP32=_Env(False),
                                 SGLANG_ROPE_CACHE_ALIGN=_Env(128))
    utils = module(
        "sglang.srt.utils", cpu_has_amx_support=flag(False), get_bool_env_var=flag(False),
        is_cpu=flag(platform == "cpu"), is_cuda=flag(platform == "cuda"),
        is_hip=flag(False), is_mps=flag(False), is_musa=flag(False), is_npu=flag(False),
        is_xpu=flag(False), get_compiler_backend=flag("eager"), get_device=flag("cpu"),
        support_triton=flag(False))
    kernels = {"apply_rope_with_cos_sin_cache_inplace": _no_kernel,
               "rotary_embedding": _no_kernel, "bf16_rope_scale_store": _no_kernel,
               "triton_ernie45_rope_fused_inplace": _no_kernel,
               "triton_mrope_fused": _no_kernel, "apply_interleaved_rope_triton": _no_kernel}
    ops = "sglang.kernels.ops.attention."
    return {
        "sglang": module("sglang", __path__=[str(SGLANG_ROOT / "sglang")]),
        "sglang.kernels": module("sglang.kernels", __path__=[]),
        "sglang.kernels.fused_op": module("sglang.kernels.fused_op",
                                          BaseFusedOp=_BaseFusedOp),
        **{ops + name: module(ops + name, **kernels)
           for name in ("rope", "rotary_triton", "mrope")},
        "sglang.srt.environ": module("sglang.srt.environ", envs=envs),
        "sglang.srt.platforms": module(
            "sglang.srt.platforms",
            current_platform=types.SimpleNamespace(is_out_of_tree=flag(False))),
        "sglang.srt.runtime_context": module(
            "sglang.srt.runtime_context", publish_role=flag(None), get_exec=flag(None),
            attention_backends=flag((None, None))),
        "sglang.srt.utils": utils,
    }


def sglang_rotary(platform: str = "cpu") -> types.ModuleType:
    """sglang 0.5.23's ``sglang.srt.layers.rotary_embedding``, run from the
    vendored files (``get_rope``, ``factory``, ``base``, ``yarn``,
    ``rope_variant``, ``mrope``, ``utils`` as its attributes' modules).

    SGLang's engine internals that the package imports (the fused-op base
    class, its environment variables, platform checks, GPU kernels) are the
    stubs of :func:`_sglang_stubs` for ``platform`` (one of
    :data:`SGLANG_PLATFORMS`). The stub modules and the loaded ``sglang.*``
    modules are removed from ``sys.modules`` afterwards.
    """
    if platform not in SGLANG_PLATFORMS:
        raise ValueError(f"platform must be one of {SGLANG_PLATFORMS}, not {platform!r}")
    key = f"sglang-{platform}"
    if key in _LOADED:
        return _LOADED[key]
    saved = {k: v for k, v in sys.modules.items()
             if k == "sglang" or k.startswith("sglang.")}
    for k in saved:
        del sys.modules[k]
    try:
        sys.modules.update(_sglang_stubs(platform))
        import importlib

        rotary = importlib.import_module(SGLANG_PACKAGE)
        for name in ("factory", "base", "yarn", "rope_variant", "mrope", "utils"):
            importlib.import_module(f"{SGLANG_PACKAGE}.{name}")
    finally:
        for k in [k for k in sys.modules if k == "sglang" or k.startswith("sglang.")]:
            del sys.modules[k]
        sys.modules.update(saved)
    _LOADED[key] = rotary
    return rotary
