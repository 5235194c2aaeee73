"""vLLM 0.33.0 (PyPI wheel, commit ``4ba787ec9``): its rotary-embedding
package is vendored unchanged in ``posenc_lib/_vendor/vllm`` and *run*
(:func:`vllm_rope`: ``get_rope`` builds the class and its cos/sin cache); only
what the model files pass to ``get_rope`` is transcribed
(:func:`vllm_get_rope_args`, :data:`VLLM_PAIRS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ... import config_reader
from .common import (
    DEEPSEEK_FAMILY,
    _default_max_position,
    _engine_pairs,
    _vllm_rope_parameters,
    _vm,
)

# ---- vLLM: pair layout per model file ----------------------------------------

_VM = "vllm/model_executor/models/"

#: vLLM's ``is_neox_style`` for each ``model_type`` of the table, with the file
#: and line (vllm 0.33.0, :data:`~.common.VLLM_MODELS`) where it is set and the text of
#: that line. ``True``: halves (NEOX); ``False``: neighbours (GPT-J style,
#: ``x[..., ::2]`` with ``x[..., 1::2]`` in ``apply_rotary_emb_torch``).
#: ``get_rope``'s default is ``True`` (layers/rotary_embedding/__init__.py line
#: 35); a model file that does not pass it gets halves. ``"transformers"``: the
#: registry sends the architecture to vLLM's Transformers backend
#: (models/registry.py, ``_TRANSFORMERS_SUPPORTED_MODELS``), which runs
#: transformers' own modelling code, hence transformers' layout. ``"none"``: no
#: RoPE. ``None``: no vLLM model for the architecture.
VLLM_PAIRS: dict[str, tuple] = {
    "llama": (True, _VM + "llama.py", 241,
              "is_neox_style = True  # LlamaAttention._init_rotary_emb"),
    "mistral": (True, _VM + "mistral.py", 77,
                "class MistralAttention(LlamaAttention):  # llama.py line 241"),
    "phi3": (True, _VM + "phi3.py", 10,
             "class Phi3ForCausalLM(LlamaForCausalLM):  # llama.py line 241"),
    "qwen2": (True, _VM + "qwen2.py", 179, "self.rotary_emb = get_rope(  # default"),
    "qwen2_5_vl": (True, _VM + "qwen2_5_vl.py", 1447,
                   'architectures=["Qwen2ForCausalLM"],  # qwen2.py line 179'),
    "qwen3": (True, _VM + "qwen3.py", 123, "self.rotary_emb = get_rope(  # default"),
    "qwen3_moe": (True, _VM + "qwen3_moe.py", 302, "self.rotary_emb = get_rope(  # default"),
    "qwen3_vl": (True, _VM + "qwen3_vl.py", 2046,
                 'architectures=["Qwen3ForCausalLM"],  # qwen3.py line 123'),
    "qwen3_next": (True, _VM + "qwen3_next.py", 336,
                   "self.rotary_emb = get_rope(  # default"),
    "gemma": (True, _VM + "gemma.py", 181, "is_neox_style=True,"),
    "gemma3": (True, _VM + "gemma3.py", 162, "is_neox_style=True,"),
    "lfm2": (True, _VM + "lfm2.py", 162, "is_neox_style=True,"),
    "gpt_oss": (True, _VM + "gpt_oss.py", 95, "rope_is_neox_style: bool = True"),
    "llama4": (True, _VM + "llama4.py", 238,
               "is_neox_style = True  # q/k rows permuted at load, line 805"),
    "ernie4_5": (False, _VM + "ernie45.py", 51,
                 "layer.self_attn.rotary_emb.is_neox_style = False"),
    "deepseek_v3": (False, _VM + "deepseek_v2.py", 1126,
                    "is_neox_style=False,  # DeepseekV2MLAAttention"),
    "kimi_k2": (False, _VM + "deepseek_v2.py", 1126,
                "is_neox_style=False,  # DeepseekV3ForCausalLM, as deepseek_v3"),
    "deepseek_v32": (False, "vllm/models/deepseek_v32/attention.py", 276,
                     "is_neox_style=False,  # the indexer: line 283"),
    "gpt_neox": ("transformers", _VM + "registry.py", 754,
                 '"GPTNeoXForCausalLM": ("transformers", "TransformersForCausalLM"),'),
    "olmo3": ("transformers", _VM + "registry.py", 763,
              '"Olmo3ForCausalLM": ("transformers", "TransformersForCausalLM"),'),
    "smollm3": ("transformers", _VM + "registry.py", 766,
                '"SmolLM3ForCausalLM": ("transformers", "TransformersForCausalLM"),'),
    "bloom": ("none", _VM + "registry.py", 84,
              '"BloomForCausalLM": ("bloom", "BloomForCausalLM"),  # ALiBi'),
    "t5": (None, _VM + "registry.py", None, "no T5 architecture in the registry"),
}

#: Table models whose checkpoint q/k rows vLLM permutes while loading, so that
#: its NEOX rotation scores as the checkpoint's neighbour pairs:
#: ``Llama4ForCausalLM.permute_qk_weight_for_rotary`` (llama4.py lines 805-840
#: of vllm 0.33.0, the transcription :func:`vllm_permute_qk_for_rotary`).
VLLM_LOAD_PERMUTED = {"llama4"}


def vllm_pairs(config: Mapping) -> dict:
    """vLLM's pair layout for a ``config.json`` (:data:`VLLM_PAIRS`).

    Returns:
        dict with ``is_neox_style`` (``True``, ``False``, ``"transformers"``,
        ``"none"`` or ``None``), ``checkpoint_pairs`` (which features of the
        checkpoint's q/k rows rotate together: ``"halves"``, ``"neighbours"``,
        ``"no RoPE"``, ``"no vllm model"``), ``source``.

    Raises:
        ValueError: naming ``model_type`` if it is not in the table.
    """
    neox, pairs, path, line, code = _engine_pairs(VLLM_PAIRS, VLLM_LOAD_PERMUTED, config,
                                                  "vllm")
    return {"is_neox_style": neox, "checkpoint_pairs": pairs,
            "source": _vm(path, f"line {line}: {code}" if line else code)}


def vllm_permute_qk_for_rotary(weights: Tensor, n_heads: int) -> Tensor:
    """Transcription of ``Llama4ForCausalLM.permute_qk_weight_for_rotary``
    (vllm 0.33.0 models/llama4.py lines 835-839): within each head, rows
    ``(2i, 2i+1)`` of a q/k projection move to ``(i, i + d/2)``, so that NEOX
    rotation of the loaded rows scores as neighbour rotation of the checkpoint.
    SGLang's mllama4.py lines 612-619 does the same.

    Args:
        weights: ``(n_heads * head_dim, in_features)``.
    """
    f_out, f_in = weights.shape
    return (weights.view(n_heads, f_out // n_heads // 2, 2, f_in)
            .transpose(1, 2)
            .reshape(f_out, f_in))


# ---- vLLM: its rotary-embedding package, run --------------------------------
#
# vLLM 0.33.0's vllm/model_executor/layers/rotary_embedding/ is vendored
# unchanged (posenc_lib/_vendor/vllm) and run here: ``get_rope`` picks the
# class and builds the cos/sin cache with vLLM's own code. What is transcribed
# is only what vLLM's *model files* pass to ``get_rope`` (:func:`vllm_get_rope_args`).


def vllm_get_rope_args(config: Mapping) -> dict | None:
    """What vLLM 0.33.0's model file for ``config`` passes to ``get_rope``:
    ``head_size``, ``max_position``, ``is_neox_style``, ``rope_parameters``,
    ``dtype``, and ``logit_scale``, the factor the model file multiplies into
    the softmax scale (DeepSeek's ``mscale**2``). ``None`` where vLLM runs no
    RoPE of its own (the Transformers backend, ALiBi, no model).

    Sources (vllm 0.33.0): llama.py lines 243-248 and the other model files
    of :data:`VLLM_PAIRS` (``config.rope_parameters`` as is, head size the
    rotary dimension here, ``max_position = max_position_embeddings``);
    gpt_oss.py lines 111-127 (its own dict, with ``truncate`` read through
    ``rope_parameters.get("truncate", True)``); deepseek_v2.py lines 1115-1136
    (``rope_type`` rewritten to ``deepseek_yarn``, or
    ``deepseek_llama_scaling`` when ``attention_factor == 1``; neighbours;
    ``self.scaling *= mscale * mscale`` with
    ``mscale = yarn_get_mscale(factor, mscale_all_dim)``).
    """
    model_type = config.get("model_type")
    neox = VLLM_PAIRS.get(model_type, (None,))[0]
    if neox in ("transformers", "none", None):
        return None
    params, dim = _vllm_rope_parameters(config)
    text = config.get("text_config", config)
    dim = _vllm_rotary_share(text, params, dim)
    max_position = text.get("max_position_embeddings") or _default_max_position(config)
    args = {"head_size": dim, "max_position": int(max_position), "is_neox_style": neox,
            "rope_parameters": params, "dtype": torch.float32, "logit_scale": 1.0}
    if model_type == "gpt_oss":  # its own dict, no partial factor: the whole head
        args["head_size"] = config_reader._head_dim(text)
        args["rope_parameters"] = {
            "rope_theta": params["rope_theta"], "rope_type": "yarn",
            "factor": params["factor"],
            "original_max_position_embeddings": params["original_max_position_embeddings"],
            "beta_fast": params["beta_fast"], "beta_slow": params["beta_slow"],
            "truncate": params.get("truncate", True)}
    if model_type in DEEPSEEK_FAMILY and params["rope_type"] != "default":
        params["rope_type"] = ("deepseek_llama_scaling"
                               if params.get("attention_factor") == 1.0 else "deepseek_yarn")
        if params["rope_type"] == "deepseek_yarn":
            mscale = _vllm().common.yarn_get_mscale(params["factor"],
                                             float(params.get("mscale_all_dim", False)))
            args["logit_scale"] = mscale * mscale
    return args


#: The names vLLM 0.33.0 reads a partial rotary factor from, for every model:
#: ``patch_rope_parameters`` (``vllm/transformers_utils/config.py`` lines
#: 668-687) sets ``config.partial_rotary_factor`` from the first of these the
#: config has, before transformers standardizes ``rope_parameters``.
VLLM_PARTIAL_NAMES = ("partial_rotary_factor", "rotary_pct", "rotary_emb_fraction")


def _vllm_rotary_share(text: Mapping, params: dict, dim: int) -> int:
    """The rotary dimension vLLM's ``get_rope`` builds where a config names
    its partial factor ``rotary_pct`` or ``rotary_emb_fraction`` and its
    transformers class reads no partial factor (``dim`` is then the whole
    head): vLLM applies it all the same (:data:`VLLM_PARTIAL_NAMES`)."""
    if text.get("partial_rotary_factor") is not None or \
            "partial_rotary_factor" in params:
        return dim
    alias = next((text[n] for n in VLLM_PARTIAL_NAMES[1:] if text.get(n) is not None),
                 None)
    if alias is None:
        return dim
    try:
        head = config_reader._head_dim(text)
    except ValueError:
        return dim
    return int(head * float(alias)) if dim == head else dim


def _vllm():
    from ... import _vendor

    return _vendor.vllm_rotary()


class _TorchProxy:
    """``torch`` for the vendored cache builders: ``torch.arange(n)`` (one
    positional argument: the positions of a cache) yields only ``positions``,
    and every ``einsum`` output (the angles) is recorded; everything else is
    torch."""

    def __init__(self, positions, angles):
        self._positions, self._angles = positions, angles

    def arange(self, *args, **kwargs):
        if len(args) == 1 and "end" not in kwargs:
            return torch.tensor(self._positions, dtype=kwargs.get("dtype") or torch.int64)
        return torch.arange(*args, **kwargs)

    def einsum(self, *args, **kwargs):
        out = torch.einsum(*args, **kwargs)
        self._angles.append(out)
        return out

    def __getattr__(self, name):
        return getattr(torch, name)


_VLLM_CACHE_MODULES = ("base", "yarn_scaling_rope", "deepseek_scaling_rope",
                       "linear_scaling_rope", "dynamic_ntk_scaling_rope",
                       "phi3_long_rope_scaled_rope", "llama3_rope", "mrope")


class EngineFailure(ValueError):
    """The engine's own code fails on the config: the engine would not start."""


def _vendored_frame(error: BaseException) -> str | None:
    """``file:function`` of the innermost frame of ``error`` if it was raised
    in the vendored vLLM code, else ``None``."""
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    if frames and "/_vendor/vllm/" in frames[-1].filename.replace("\\", "/"):
        return f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].name}"
    return None


def vllm_rope(config: Mapping, *, max_model_len: int | None = None,
              positions: Sequence[int] = (), full_cache: bool = False) -> dict | None:
    """Run vLLM 0.33.0's ``get_rope`` (vendored) for ``config`` as its model
    file calls it, and read what it built.

    The cache builders run unchanged except that, unless ``full_cache``,
    their position range ``torch.arange(n)`` is replaced by
    ``[0, 1, *positions]`` (every other line, the frequencies and factor
    included, runs as released); ``full_cache=True`` builds the whole cache.

    Args:
        config: a parsed ``config.json``.
        max_model_len: vLLM's ``--max-model-len`` (read by LongRoPE only);
            default ``max_position_embeddings``, vLLM's default.
        positions: extra positions whose cos/sin rows to return.

    Raises:
        EngineFailure: (a ``ValueError``) where vLLM's rotary code itself
            fails on the config (an
            integer ``factor`` for linear scaling, a DeepSeek scaling block
            without ``original_max_position_embeddings``, ...): vLLM would not
            start, and the message says where it failed.

    Returns:
        ``None`` where vLLM runs no RoPE of its own (see
        :func:`vllm_get_rope_args`), else a dict: ``class`` (the class
        ``get_rope`` built), ``inv_freq`` (``(rotary_dim/2,)`` float32: the
        angle of position 1 in the cache the engine reads), ``factor`` (what
        multiplies cos and sin: the cache's cos at position 0),
        ``logit_scale``, ``rows`` (cos then sin at ``[0, 1, *positions]``,
        or the whole cache), ``use_long_rope`` (LongRoPE only), ``module`` (the built module).
    """
    from ... import _vendor

    args = vllm_get_rope_args(config)
    if args is None:
        return None
    rotary = _vendor.vllm_rotary()
    want = [0, 1, *[int(p) for p in positions]]
    angles: list[Tensor] = []
    proxy = _TorchProxy(want, angles)
    modules = [getattr(rotary, m) for m in _VLLM_CACHE_MODULES]
    if max_model_len is None:
        max_model_len = args["max_position"]
    rotary._ROPE_DICT.clear()
    try:
        if not full_cache:
            for m in modules:
                m.torch = proxy
        with _vendor.vllm_max_model_len(max_model_len):
            module = rotary.get_rope(args["head_size"], args["max_position"],
                                     is_neox_style=args["is_neox_style"],
                                     rope_parameters=dict(args["rope_parameters"]),
                                     dtype=args["dtype"])
    except Exception as error:  # noqa: BLE001 -- re-raised unless vLLM's own
        where = _vendored_frame(error)
        if where is None:
            raise
        raise EngineFailure(
            f"vLLM 0.33.0's rotary code fails on this config ({type(error).__name__}: "
            f"{error} in {where}): its model would not start; write the RoPE "
            f"block as vLLM reads it (a float factor, the keys its rope_type "
            f"needs)") from error
    finally:
        for m in modules:
            m.torch = torch
        rotary._ROPE_DICT.clear()
    name = type(module).__name__
    out = {"class": name, "module": module, "logit_scale": args["logit_scale"]}
    if name == "Phi3LongRoPEScaledRotaryEmbedding":
        cache = module.long_short_cos_sin_cache
        short_rows = len(want) if not full_cache else module.original_max_position_embeddings
        use_long = bool(module.use_long_rope)
        rows = cache[short_rows:] if use_long else cache[:short_rows]
        out["use_long_rope"] = use_long
        angle = angles[1 if use_long else 0] if angles else None
    else:
        rows = module.cos_sin_cache
        angle = angles[0] if angles else None
    half = rows.shape[-1] // 2
    out["rows"] = rows
    out["factor"] = float(rows[0, 0])
    if full_cache:
        t = rows[1]
        out["inv_freq"] = torch.atan2(t[half:], t[:half])
    else:
        out["inv_freq"] = angle[1].clone()
    return out
