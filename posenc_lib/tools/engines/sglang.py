"""SGLang 0.5.23 (PyPI wheel): its rotary-embedding package is vendored
unchanged in ``posenc_lib/_vendor/sglang`` and *run* (:func:`sglang_rope`);
only what the model files pass to ``get_rope`` is transcribed
(:func:`sglang_get_rope_args`, :data:`SGLANG_PAIRS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from .common import (
    DEEPSEEK_FAMILY,
    _default_max_position,
    _engine_pairs,
    _sgl,
    _vllm_rope_parameters,
)

# ---- SGLang: pair layout per model file -----------------------------------------

_SG = "models/"

#: SGLang's ``is_neox_style`` for each ``model_type`` of the table (sglang
#: 0.5.23, :data:`~.common.SGLANG`), as :data:`~.vllm.VLLM_PAIRS`.
#: ``get_rope``'s default is ``True`` (layers/rotary_embedding/factory.py
#: line 130). SGLang reads DeepSeek's ``rope_interleave`` (default ``True``:
#: neighbours) where vLLM does not. ``"transformers"``: no SGLang class; with
#: the default ``model_impl`` it falls back to the Transformers implementation
#: (model_loader/utils.py lines 181-194).
SGLANG_PAIRS: dict[str, tuple] = {
    "llama": (True, _SG + "llama.py", 335,
              'rope_is_neox_style = getattr(config, "rope_is_neox_style", True)'),
    "mistral": (True, _SG + "mistral.py", 33,
                "class MistralForCausalLM(LlamaForCausalLM):  # llama.py line 335"),
    "phi3": (True, _SG + "llama.py", 956,
             "class Phi3ForCausalLM(LlamaForCausalLM):  # line 335"),
    "qwen2": (True, _SG + "qwen2.py", 207, "self.rotary_emb = get_rope(  # default"),
    "qwen2_5_vl": (True, _SG + "qwen2_5_vl.py", 720,
                   "self.model = Qwen2Model(  # qwen2.py line 207"),
    "qwen3": (True, _SG + "qwen3.py", 216, "self.rotary_emb = get_rope(  # default"),
    "qwen3_moe": (True, _SG + "qwen3_moe.py", 546, "self.rotary_emb = get_rope(  # default"),
    "qwen3_vl": (True, _SG + "qwen3_vl.py", 1169,
                 "class Qwen3LLMModel(Qwen3Model):  # qwen3.py line 216"),
    "qwen3_next": (True, _SG + "qwen3_next.py", 660, "is_neox_style=True,"),
    "gemma": (True, _SG + "gemma.py", 135, "is_neox_style=True,"),
    "gemma3": (True, _SG + "gemma3_causal.py", 224,
               'is_neox_style=getattr(config, "rope_is_neox_style", True),'),
    "lfm2": (True, _SG + "lfm2.py", 147, "is_neox_style=True,"),
    "gpt_oss": (True, _SG + "gpt_oss.py", 444, "self.rotary_emb = get_rope(  # default"),
    "olmo3": (True, _SG + "olmo2.py", 138,
              "self.rotary_emb = get_rope(  # configs/olmo3.py line 63: Olmo2ForCausalLM"),
    "llama4": (True, _SG + "llama4.py", 284,
               "is_neox_style = True  # q/k rows permuted at load, mllama4.py line 606"),
    "ernie4_5": (False, _SG + "ernie4.py", 168,
                 'rope_is_neox_style = getattr(config, "rope_is_neox_style", False)'),
    "deepseek_v3": ("rope_interleave", _SG + "deepseek_v2.py", 2166,
                    'is_neox_style = not getattr(config, "rope_interleave", True)'),
    "kimi_k2": ("rope_interleave", _SG + "deepseek_v2.py", 2166,
                'is_neox_style = not getattr(config, "rope_interleave", True)'),
    "deepseek_v32": ("rope_interleave", _SG + "deepseek_v2.py", 2166,
                     'is_neox_style = not getattr(config, "rope_interleave", True)'),
    "gpt_neox": ("transformers", "model_loader/utils.py", 190,
                 '"%s has no SGLang implementation, falling back to Transformers "'),
    "smollm3": ("transformers", "model_loader/utils.py", 190,
                '"%s has no SGLang implementation, falling back to Transformers "'),
    "bloom": ("none", _SG, None, "no Bloom model (ALiBi; no RoPE either way)"),
    "t5": (None, _SG, None, "no T5 model"),
}

#: Table models whose q/k rows SGLang permutes while loading
#: (``Llama4ForConditionalGeneration.permute_qk_weight_for_rotary``,
#: models/mllama4.py lines 606-637 of sglang 0.5.23).
SGLANG_LOAD_PERMUTED = {"llama4"}


def sglang_pairs(config: Mapping) -> dict:
    """SGLang's pair layout for a ``config.json`` (:data:`SGLANG_PAIRS`), as
    :func:`~.vllm.vllm_pairs`."""
    neox, pairs, path, line, code = _engine_pairs(SGLANG_PAIRS, SGLANG_LOAD_PERMUTED,
                                                  config, "sglang")
    return {"is_neox_style": neox, "checkpoint_pairs": pairs,
            "source": _sgl(path, f"line {line}: {code}" if line else code)}


# ---- SGLang: rotary-embedding modules ---------------------------------------
#
# sglang 0.5.23's sglang/srt/layers/rotary_embedding/ is vendored unchanged
# (posenc_lib/_vendor/sglang) and run here: ``get_rope`` picks the class and
# builds the cos/sin cache with SGLang's own code, on its CPU engine's
# ``forward_native`` path. What is transcribed is only what SGLang's *model
# files* pass to ``get_rope`` (:func:`sglang_get_rope_args`); every line
# number below refers to the same wheel (:data:`~.common.SGLANG`).

#: The model file of each table ``model_type`` whose attention calls
#: ``get_rope``, the lines of that call and of where its arguments come from
#: (sglang 0.5.23, ``sglang/srt/models/``). SGLang pins ``transformers==5.19.0``
#: (its METADATA), so ``config.rope_parameters`` is transformers 5's merged
#: dict (``rope_type``, ``rope_theta`` and the scaling keys).
SGLANG_ROPE_CALLS = {
    "llama": "llama.py lines 196-197 (rotary_dim), 225-232 (get_rope), 322-335 "
             "(rope_parameters, original_max_position_embeddings, rope_is_neox_style)",
    "mistral": "mistral.py line 33 (LlamaForCausalLM): llama.py lines 196-197, 225-232, "
               "322-335",
    "phi3": "llama.py line 956 (Phi3ForCausalLM(LlamaForCausalLM)): lines 225-232, "
            "322-335",
    "qwen2": "qwen2.py lines 207-214, 273-274 (get_rope_config)",
    "qwen2_5_vl": "qwen2_5_vl.py line 720 (Qwen2Model): qwen2.py lines 207-214, 273-274",
    "qwen3": "qwen3.py lines 216-222, 379-385",
    "qwen3_moe": "qwen3_moe.py lines 546-553, 811-813",
    "qwen3_vl": "qwen3_vl.py line 1169 (Qwen3LLMModel(Qwen3Model)): qwen3.py lines "
                "216-222, 379-385",
    "qwen3_next": "qwen3_next.py lines 636-661 (partial_rotary_factor passed to get_rope)",
    "gemma": "gemma.py lines 130-136, 175-178 (no rope_scaling)",
    "gemma3": "gemma3_causal.py lines 186-224: get_rope with {'rope_type': 'default'} for "
              "every layer, used only by forward_cpu (line 269, AMX CPUs); forward_native "
              "(lines 297-302) applies Gemma3RotaryEmbedding (lines 414-440, 575-603), "
              "transformers' ROPE_INIT_FUNCTIONS on the full_attention parameters",
    "lfm2": "lfm2.py lines 130-148",
    "gpt_oss": "gpt_oss.py lines 444-450, 531-533 (rope_parameters as is, truncate too)",
    "olmo3": "olmo2.py lines 100-104, 133-144 (rope_scaling on full-attention layers "
             "only; sglang/srt/configs/olmo3.py line 63 runs Olmo3 as Olmo2ForCausalLM)",
    "llama4": "llama4.py lines 284-296 (base=int(rope_theta)), 384-386",
    "ernie4_5": "ernie4.py lines 167-179 (get_rope_config, rope_is_neox_style False)",
    "deepseek_v3": "deepseek_v2.py lines 2605-2613 (rope_parameters unless default), "
                   "2065-2066 (rope_type rewritten to deepseek_yarn), 2166-2178 "
                   "(get_rope_wrapper; softmax scale times compute_mla_mscale_scaling, "
                   "sglang/srt/configs/model_config.py lines 2617-2647)",
}
SGLANG_ROPE_CALLS["kimi_k2"] = SGLANG_ROPE_CALLS["deepseek_v32"] = SGLANG_ROPE_CALLS[
    "deepseek_v3"]


def _sglang():
    from ... import _vendor

    return _vendor.sglang_rotary()


def sglang_get_rope_args(config: Mapping) -> dict | None:
    """What sglang 0.5.23's model file for ``config`` passes to ``get_rope``
    (:data:`SGLANG_ROPE_CALLS`): ``head_size``, ``rotary_dim``,
    ``max_position``, ``base``, ``is_neox_style``, ``rope_scaling``,
    ``partial_rotary_factor``, and ``logit_scale``, the factor the model file
    multiplies into the softmax scale (DeepSeek's ``mscale**2``), and
    ``source``. ``dtype`` is not passed by most files: ``get_rope`` then takes
    ``torch.get_default_dtype()``, the model's dtype while it loads; float32
    here. ``None`` where SGLang runs no RoPE of its own (the Transformers
    fallback, ALiBi, no model).

    For Gemma 3 the arguments are those of the ``get_rope`` call that only
    ``forward_cpu`` (AMX CPUs) uses, and ``native`` says that the
    ``forward_native`` path rotates with transformers' own code instead.
    """
    model_type = config.get("model_type")
    neox = sglang_pairs(config)["is_neox_style"]
    if neox in ("transformers", "none", None):
        return None
    params, dim = _vllm_rope_parameters(config)  # transformers 5's rope_parameters
    text = config.get("text_config", config)
    heads = text.get("num_attention_heads") or 1
    head = text.get("head_dim") or (text.get("hidden_size", 0) // heads) or dim
    max_position = int(text.get("max_position_embeddings")
                       or _default_max_position(config))
    rope_scaling: dict | None = dict(params)
    partial = 1.0
    rotary_dim = head
    logit_scale = 1.0
    native = None
    if model_type in ("llama", "mistral", "phi3", "ernie4_5"):
        rotary_dim = int(text.get("partial_rotary_factor", 1) * head)
        if config.get("original_max_position_embeddings"):
            rope_scaling["original_max_position_embeddings"] = config[
                "original_max_position_embeddings"]
    elif model_type == "qwen3_next":
        partial = float(text.get("partial_rotary_factor", 0.25))
    elif model_type == "gemma":
        rope_scaling = None
    elif model_type == "gemma3":
        rotary_dim = int(text.get("partial_rotary_factor", 1) * head)
        rope_scaling = {"rope_type": "default"}
        native = "transformers"
    elif model_type in DEEPSEEK_FAMILY:
        head = rotary_dim = dim  # qk_rope_head_dim
        if params["rope_type"] == "default":
            rope_scaling = None
        else:
            rope_scaling["rope_type"] = "deepseek_yarn"
            yarn_get_mscale = _sglang().yarn.yarn_get_mscale
            mscale = yarn_get_mscale(rope_scaling.get("factor", 1.0),
                                     float(rope_scaling.get("mscale_all_dim", False)))
            logit_scale = mscale * mscale
    base = params["rope_theta"]
    if model_type == "llama4":
        base = int(base)
    return {"head_size": head, "rotary_dim": rotary_dim, "max_position": max_position,
            "base": base, "is_neox_style": neox, "rope_scaling": rope_scaling,
            "partial_rotary_factor": partial, "logit_scale": logit_scale,
            "native": native, "source": _sgl(_SG + SGLANG_ROPE_CALLS[model_type], "")
            .rstrip()}


class _EinsumProxy:
    """``torch`` for the vendored cache builders: every
    ``einsum("i,j -> ij", t, inv_freq)`` (positions times frequencies, the one
    line where a cache's size is spent) takes only the rows of ``t`` at
    ``positions`` that the cache has, and its output (the angles) is recorded;
    everything else is torch."""

    def __init__(self, positions, angles, lengths):
        self._positions, self._angles, self._lengths = positions, angles, lengths

    def einsum(self, equation, *operands):
        if equation.replace(" ", "") == "i,j->ij" and operands[0].dim() == 1:
            t = operands[0]
            self._lengths.append(t.shape[0])
            rows = [p for p in self._positions if p < t.shape[0]]
            operands = (t[rows], *operands[1:])
        out = torch.einsum(equation, *operands)
        self._angles.append(out)
        return out

    def __getattr__(self, name):
        return getattr(torch, name)


_SGLANG_CACHE_MODULES = ("base", "yarn", "rope_variant", "mrope")


def sglang_rope(config: Mapping | None = None, *, args: Mapping | None = None,
                positions: Sequence[int] = (), full_cache: bool = False,
                dtype: torch.dtype | None = None, platform: str = "cpu") -> dict | None:
    """Run sglang 0.5.23's ``get_rope`` (vendored) for ``config`` as its model
    file calls it (:func:`sglang_get_rope_args`, or ``args`` of that form),
    and read what it built.

    The cache builders run unchanged except that, unless ``full_cache``, the
    positions times frequencies product is taken only at
    ``[0, 1, *positions]`` (``_EinsumProxy``; the frequencies, the
    factor and every other line run as released).

    Args:
        config: a parsed ``config.json``.
        args: instead of ``config``, the arguments themselves.
        positions: extra positions whose cos/sin rows to return.
        dtype: ``get_rope``'s ``dtype`` (default: float32, the default dtype).
        platform: the platform the package is loaded for
            (``posenc_lib._vendor.SGLANG_PLATFORMS``).

    Returns:
        ``None`` where SGLang runs no RoPE of its own, else a dict: ``class``,
        ``module``, ``inv_freq`` (``(rotary_dim/2,)`` float32: the angle of
        position 1 in the cache; for LongRoPE the short cache's, with
        ``long_inv_freq`` the long one's), ``factor`` (the cache's cos at
        position 0), ``logit_scale``, ``rows`` (the cache's rows at
        ``[0, 1, *positions]``, cos then sin; LongRoPE: the short cache's
        rows below ``original`` then the long cache's, as SGLang stores them),
        ``cache_length`` (the rows of the full cache; LongRoPE: the short
        and the long cache's), ``native`` (see :func:`sglang_get_rope_args`).
    """
    from ... import _vendor

    if args is None:
        args = sglang_get_rope_args(config)
        if args is None:
            return None
    rotary = _vendor.sglang_rotary(platform)
    want = [0, 1, *[int(p) for p in positions]]
    angles: list[Tensor] = []
    lengths: list[int] = []
    modules = [getattr(rotary, m) for m in _SGLANG_CACHE_MODULES]
    rope_scaling = args["rope_scaling"]
    rotary.factory._ROPE_DICT.clear()
    try:
        if not full_cache:
            for m in modules:
                m.torch = _EinsumProxy(want, angles, lengths)
        module = rotary.get_rope(
            args["head_size"], rotary_dim=args["rotary_dim"],
            max_position=args["max_position"], base=args["base"],
            is_neox_style=args["is_neox_style"],
            rope_scaling=None if rope_scaling is None else dict(rope_scaling),
            dtype=dtype or torch.float32,
            partial_rotary_factor=args.get("partial_rotary_factor", 1.0))
    finally:
        for m in modules:
            m.torch = torch
        rotary.factory._ROPE_DICT.clear()
    name = type(module).__name__
    out = {"class": name, "module": module, "logit_scale": args.get("logit_scale", 1.0),
           "native": args.get("native")}
    if name == "Phi3LongRoPEScaledRotaryEmbedding":
        rows = module.long_short_cos_sin_cache
        short_rows = module.short_cos_sin_cache.shape[0]
        long_row1 = module.long_cos_sin_cache[1]
    else:
        rows = module.cos_sin_cache
    half = rows.shape[-1] // 2
    out["rows"] = rows
    out["factor"] = float(rows[0, 0])
    out["cache_length"] = lengths if not full_cache else [rows.shape[0]]
    if full_cache:
        out["inv_freq"] = torch.atan2(rows[1, half:].float(), rows[1, :half].float())
    else:
        out["inv_freq"] = angles[0][1].clone()
    if name == "Phi3LongRoPEScaledRotaryEmbedding":
        out["long_inv_freq"] = (angles[1][1].clone() if not full_cache else
                                torch.atan2(long_row1[half:], long_row1[:half]))
        out["short_rows"] = short_rows
    return out
