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
