"""llama.cpp (ggml-org/llama.cpp at ``0c1e57098``, the tree
``llama-cpp-python`` 0.3.36 vendors): transcriptions of its converter, loader
and ggml's CPU RoPE kernel, which ``make engines`` checks against a build.

* the pair layout per architecture (:data:`LLAMA_CPP_PAIRS`,
  :func:`llama_cpp_pairs`) and the converter's q/k permutation
  (:func:`convert_permute`);
* ggml's RoPE kernel (:func:`llama_cpp_rope`, YaRN's correction range and
  attention factor);
* what the converter writes and the context makes of it
  (:func:`llama_cpp_params`, :func:`llama_cpp_inv_freq`);
* whether its cache may be shifted (:func:`llama_cpp_can_shift`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import Tensor

# ---- llama.cpp: pair layout per architecture --------------------------------

#: llama.cpp's pair layout for each ``model_type`` of the book's table of
#: models, from ``llama_model_rope_type`` (src/llama-model.cpp, the switch at
#: lines 3023-3205 of 0c1e57098: NONE returned at 3049, NORM at 3095, NEOX at
#: 3177, MROPE at 3189, IMROPE at 3196). ``model_type`` maps to llama.cpp's
#: architecture through the converter (mistral, llama: LLM_ARCH_LLAMA;
#: deepseek_v3: LLM_ARCH_DEEPSEEK2; gpt_oss: LLM_ARCH_OPENAI_MOE).
#: "norm": neighbours (2i, 2i+1); "neox": halves (i, i + d/2); "mrope" /
#: "imrope": halves, with the frequencies split (or interleaved) among
#: three position streams; "none": no RoPE.
LLAMA_CPP_PAIRS = {
    "llama": ("norm", "LLM_ARCH_LLAMA", 3052), "mistral": ("norm", "LLM_ARCH_LLAMA", 3052),
    "deepseek_v3": ("norm", "LLM_ARCH_DEEPSEEK2", 3067),
    "smollm3": ("norm", "LLM_ARCH_SMOLLM3", 3082),
    "ernie4_5": ("norm", "LLM_ARCH_ERNIE4_5", 3084),
    "qwen2": ("neox", "LLM_ARCH_QWEN2", 3117), "qwen3": ("neox", "LLM_ARCH_QWEN3", 3120),
    "qwen3_moe": ("neox", "LLM_ARCH_QWEN3MOE", 3121),
    "phi3": ("neox", "LLM_ARCH_PHI3", 3127), "gemma": ("neox", "LLM_ARCH_GEMMA", 3132),
    "gpt_neox": ("neox", "LLM_ARCH_GPTNEOX", 3141),
    "gpt_oss": ("neox", "LLM_ARCH_OPENAI_MOE", 3153),
    "lfm2": ("neox", "LLM_ARCH_LFM2", 3156),
    "qwen2_5_vl": ("mrope", "LLM_ARCH_QWEN2VL", 3187),
    "qwen3_vl": ("imrope", "LLM_ARCH_QWEN3VL", 3190),
    "bloom": ("none", "LLM_ARCH_BLOOM", 3031), "t5": ("none", "LLM_ARCH_T5", 3036),
    # the 2025-26 entries of the table: the converter's architecture for each
    # (conversion/__init__.py and the @ModelBase.register lines of
    # conversion/{llama,deepseek,gemma,olmo,qwen}.py at 0c1e57098; Kimi K2's
    # config names DeepseekV3ForCausalLM, OLMo 3 converts as OLMO2)
    "llama4": ("norm", "LLM_ARCH_LLAMA4", 3054),
    "kimi_k2": ("norm", "LLM_ARCH_DEEPSEEK2", 3067),
    "deepseek_v32": ("norm", "LLM_ARCH_DEEPSEEK32", 3069),
    "olmo3": ("neox", "LLM_ARCH_OLMO2", 3124),
    "gemma3": ("neox", "LLM_ARCH_GEMMA3", 3134),
    "qwen3_next": ("neox", "LLM_ARCH_QWEN3NEXT", 3169),
}


#: Table models whose q/k weights llama.cpp's converter permutes (``LlamaModel``
#: and its subclasses keep ``undo_permute = True``: conversion/llama.py lines
#: 18-35 register Llama and Mistral there, line 427 SmolLM3 as a subclass). The
#: other NORM models (DeepSeek-V3, ERNIE 4.5) already pair neighbours in
#: transformers and are not permuted.
PERMUTED = {"llama", "mistral", "smollm3"}


def llama_cpp_pairs(model_type: str) -> str:
    """llama.cpp's rotation layout for ``model_type``: ``"norm"``,
    ``"neox"``, ``"mrope"``, ``"imrope"`` or ``"none"`` (see
    :data:`LLAMA_CPP_PAIRS`).

    Raises:
        ValueError: naming ``model_type`` if it is not in the table.
    """
    if model_type not in LLAMA_CPP_PAIRS:
        raise ValueError(f"model_type {model_type!r} is not in LLAMA_CPP_PAIRS; known: "
                         f"{', '.join(sorted(LLAMA_CPP_PAIRS))}")
    return LLAMA_CPP_PAIRS[model_type][0]


def convert_permute(weights: Tensor, n_head: int, n_head_kv: int | None = None) -> Tensor:
    """Transcription of ``LlamaModel.permute`` in llama.cpp's converter
    (conversion/llama.py lines 176-181 at 0c1e57098), applied to Llama's
    ``q_proj``/``k_proj`` weights so that NORM (neighbour) rotation of the
    GGUF weights scores as transformers' half rotation of the originals.

    Args:
        weights: ``(n_head * head_dim, ...)``.
        n_head: query heads; ``n_head_kv`` replaces it when given and different.
    """
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


# ---- llama.cpp: ggml's RoPE kernel ----------------------------------------

def llama_cpp_corr_dims(n_dims: int, n_ctx_orig: int, freq_base: float,
                        beta_fast: float, beta_slow: float) -> tuple[float, float]:
    """Transcription of ``ggml_rope_yarn_corr_dim(s)`` (ggml/src/ggml.c lines
    4478-4491 at 0c1e57098), in float32 as ggml computes it. ggml always floors
    the start and ceils the end (lines 4486-4487): llama.cpp has no
    ``truncate = false``, and its converter does not write the key."""
    f32 = torch.float32

    def corr_dim(n_rot):
        num = torch.tensor(n_ctx_orig, dtype=f32) / (torch.tensor(n_rot, dtype=f32) * 2
                                                     * torch.tensor(math.pi, dtype=f32))
        return (n_dims * torch.log(num) / (2 * torch.log(torch.tensor(freq_base, dtype=f32))))

    start = math.floor(float(corr_dim(beta_fast)))
    end = math.ceil(float(corr_dim(beta_slow)))
    return float(max(0, start)), float(min(n_dims - 1, end))


def _ggml_theta(positions: Tensor, *, n_dims: int, freq_base: float, freq_scale: float,
                ext_factor: float, attn_factor: float, n_ctx_orig: int, beta_fast: float,
                beta_slow: float, freq_factors: Tensor | None) -> tuple[Tensor, Tensor]:
    """ggml's angles ``(len(positions), n_dims/2)`` and the factor on cos and
    sin: ``ggml_rope_cache_init`` and ``rope_yarn`` (ops.cpp lines 6187-6218)."""
    f32 = torch.float32
    theta_scale = torch.tensor(freq_base, dtype=f32) ** torch.tensor(-2.0 / n_dims, dtype=f32)
    half = n_dims // 2
    # theta = p * theta_scale**i, accumulated by repeated multiplication in ggml
    powers = torch.ones(half, dtype=f32)
    for i in range(1, half):
        powers[i] = powers[i - 1] * theta_scale
    theta_extrap = positions.to(f32)[:, None] * powers[None, :]
    if freq_factors is not None:
        theta_extrap = theta_extrap / freq_factors.to(f32)
    theta_interp = freq_scale * theta_extrap
    theta = theta_interp
    mscale = torch.tensor(attn_factor, dtype=f32)
    if ext_factor != 0.0:
        low, high = llama_cpp_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow)
        i0 = torch.arange(0, n_dims, 2)
        y = (i0 // 2 - low) / max(0.001, high - low)
        ramp_mix = (1 - y.clamp(0, 1)).to(f32) * ext_factor
        theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix
        mscale = mscale * (1.0 + 0.1 * math.log(1.0 / freq_scale))
    return theta, mscale


def llama_cpp_rope(x: Tensor, positions: Tensor, *, n_dims: int, mode: str = "norm",
                   freq_base: float = 10000.0, freq_scale: float = 1.0,
                   ext_factor: float = 0.0, attn_factor: float = 1.0,
                   n_ctx_orig: int = 0, beta_fast: float = 32.0, beta_slow: float = 1.0,
                   freq_factors: Tensor | None = None) -> Tensor:
    """Transcription of ggml's CPU RoPE, ``rope_yarn``, ``rope_yarn_ramp``,
    ``ggml_rope_cache_init`` and ``rotate_pairs`` (ggml/src/ggml-cpu/ops.cpp
    lines 6180-6218 and 6291-6308 at 0c1e57098) plus the ``theta_scale`` of
    ``ggml_compute_forward_rope_flt`` (line 6372), vectorised in float32.

    Modes "norm" (pairs ``(2i, 2i+1)``) and "neox" (pairs ``(i, i+n_dims/2)``)
    only. Features beyond ``n_dims`` pass through.

    Args:
        x: ``(seq, heads, head_dim)`` float32 queries or keys.
        positions: ``(seq,)`` integer positions.
        freq_factors: ``(n_dims/2,)`` divisors of each pair's angle (the GGUF
            ``rope_freqs`` tensor: Llama 3's factors, LongRoPE's), or ``None``.

    Returns:
        ``(seq, heads, head_dim)``.
    """
    if mode not in ("norm", "neox"):
        raise ValueError(f"mode must be 'norm' or 'neox', got {mode!r}")
    half = n_dims // 2
    theta, mscale = _ggml_theta(positions, n_dims=n_dims, freq_base=freq_base,
                                freq_scale=freq_scale, ext_factor=ext_factor,
                                attn_factor=attn_factor, n_ctx_orig=n_ctx_orig,
                                beta_fast=beta_fast, beta_slow=beta_slow,
                                freq_factors=freq_factors)
    cos = (torch.cos(theta) * mscale)[:, None, :]
    sin = (torch.sin(theta) * mscale)[:, None, :]
    out = x.clone()
    if mode == "norm":
        x0, x1 = x[..., 0:n_dims:2], x[..., 1:n_dims:2]
        out[..., 0:n_dims:2] = x0 * cos - x1 * sin
        out[..., 1:n_dims:2] = x0 * sin + x1 * cos
    else:
        x0, x1 = x[..., :half], x[..., half:n_dims]
        out[..., :half] = x0 * cos - x1 * sin
        out[..., half:n_dims] = x0 * sin + x1 * cos
    return out


def llama_cpp_yarn_attn_factor(factor: float, *, rope_yarn_log_mul: float = 0.0,
                               rope_attn_factor: float = 1.0,
                               deepseek2: bool = False) -> float:
    """The ``attn_factor`` llama.cpp passes to ggml for YaRN
    (``ext_factor != 0``): transcription of src/llama-context.cpp lines
    176-214 at 0c1e57098. It divides out the ``1 + 0.1 ln(factor)`` that
    ``rope_yarn`` multiplies in, so the net factor on cos and sin is
    ``attn_factor * (1 + 0.1 ln factor)``; see :func:`llama_cpp_net_factor`.

    The GGUF key ``rope.scaling.yarn_attn_factor``, where the converter writes
    a config's ``attention_factor`` (conversion/base.py lines 1477-1478), is
    read only for Grok (src/models/grok.cpp line 25) and overwritten here
    whenever ``ext_factor != 0``: it does not reach the kernel.

    ``rope_yarn_log_mul`` is the *loader's* value (``hparams.rope_yarn_log_mul``):
    for DeepSeek the GGUF holds ``0.1 * mscale_all_dim`` and the loader divides
    it by 0.1 again, so this is ``mscale_all_dim`` (see :func:`llama_cpp_params`).
    ``deepseek2``: the architecture is ``LLM_ARCH_DEEPSEEK2`` (lines 191-196 take
    ``mscale = mscale_all_dims`` then, assuming the config's two are equal).
    """
    def get_mscale(scale, mscale):
        return 1.0 if scale <= 1.0 else 0.1 * mscale * math.log(scale) + 1.0

    if rope_yarn_log_mul != 0.0:
        mscale = rope_yarn_log_mul if (deepseek2 and rope_yarn_log_mul != 1.0) else 1.0
        out = get_mscale(factor, mscale) / get_mscale(factor, rope_yarn_log_mul)
    else:
        out = get_mscale(factor, 1.0)
    out *= 1.0 / (1.0 + 0.1 * math.log(factor))
    return out * rope_attn_factor


def llama_cpp_net_factor(factor: float, **kwargs) -> float:
    """What multiplies cos and sin in llama.cpp's YaRN: the ``attn_factor`` of
    :func:`llama_cpp_yarn_attn_factor` times ``rope_yarn``'s own
    ``1 + 0.1 ln(1/freq_scale)`` (ops.cpp line 6198), ``freq_scale = 1/factor``."""
    return llama_cpp_yarn_attn_factor(factor, **kwargs) * (1.0 + 0.1 * math.log(factor))


# ---- llama.cpp: what the converter writes and the context makes of it -------

#: The architectures whose loader reads ``rope.scaling.yarn_log_mul`` and
#: divides it by 0.1 again (src/models/deepseek2.cpp lines 34-38,
#: src/models/deepseek32.cpp lines 34-38 at 0c1e57098); the converter wrote
#: ``0.1 * mscale_all_dim`` there (conversion/deepseek.py lines 382-386,
#: ``TAG_DEEPSEEK2_YARN_LOG_MUL_FIX``). Kimi K2's ``config.json`` names
#: ``DeepseekV3ForCausalLM``, which converts to ``LLM_ARCH_DEEPSEEK2``
#: (conversion/__init__.py line 55, conversion/deepseek.py lines 227-237).
LLAMA_CPP_YARN_LOG_MUL_ARCHS = {"LLM_ARCH_DEEPSEEK2", "LLM_ARCH_DEEPSEEK32"}


def llama_cpp_params(config: Mapping, *, n_ctx: int | None = None) -> dict:
    """The RoPE parameters llama.cpp (0c1e57098) hands to ggml for
    ``config``'s global layers, from what its converter writes to the GGUF
    and what its loader and context make of it.

    * converter, conversion/base.py lines 1462-1489: ``linear`` and ``yarn``
      write ``rope.scaling.type`` and ``factor``; YaRN also the original
      context, ``attention_factor`` (as ``yarn_attn_factor``) and
      ``beta_fast``/``beta_slow``; ``truncate`` is not written; ``dynamic``
      writes nothing; ``llama3`` becomes the ``rope_freqs`` tensor
      (conversion/llama.py lines 298-326); LongRoPE the ``rope_factors_long``/
      ``_short`` tensors and ``rope.scaling.attn_factor`` (conversion/phi.py
      lines 185-210).
    * loader: ``yarn_beta_fast``/``_slow`` are read from the GGUF only for
      Grok and Mistral 3 (src/models/grok.cpp line 26, mistral3.cpp line 7);
      every other architecture keeps the defaults 32 and 1
      (src/llama-hparams.h lines 161-162; llama-context.cpp lines 116-117);
      ``yarn_attn_factor`` is read only for Grok (grok.cpp line 25).
    * context: ``ext_factor = 1`` for YaRN (llama-context.cpp line 174), the
      ``attn_factor`` of :func:`llama_cpp_yarn_attn_factor` (lines 176-214);
      LongRoPE's long factors when ``n_ctx_seq > n_ctx_orig_yarn``
      (src/llama-model.cpp lines 2337-2350).

    Args:
        config: a parsed ``config.json``.
        n_ctx: the context size (``-c``; LongRoPE reads it); default
            ``max_position_embeddings`` (the GGUF's training context, which
            llama.cpp uses when ``n_ctx`` is 0).

    Returns:
        dict with ``arch``, ``n_dims``, ``freq_base``, ``freq_scale``,
        ``ext_factor``, ``attn_factor`` (passed to ggml), ``n_ctx_orig``,
        ``beta_fast``, ``beta_slow``, ``freq_factors`` (a tensor or ``None``),
        ``rope_yarn_log_mul`` (the loader's value), ``gguf_yarn_log_mul``
        (what the converter wrote), ``net_factor`` (what multiplies cos and
        sin), ``logit_scale`` (DeepSeek's ``mscale**2`` in ``kq_scale``,
        src/models/deepseek2.cpp lines 307-314), ``notes``.
    """
    from ...config_reader import parse_rope_config

    model_type = config.get("model_type")
    arch = LLAMA_CPP_PAIRS[model_type][1] if model_type in LLAMA_CPP_PAIRS else None
    rope = parse_rope_config(config)
    p = rope.params
    out = {"arch": arch, "n_dims": rope.dim, "freq_base": float(rope.base),
           "freq_scale": 1.0, "ext_factor": 0.0, "attn_factor": 1.0,
           "n_ctx_orig": int(p.get("original_max_position_embeddings")
                             or rope.max_position_embeddings),
           "beta_fast": 32.0, "beta_slow": 1.0, "freq_factors": None,
           "rope_yarn_log_mul": 0.0, "gguf_yarn_log_mul": None, "logit_scale": 1.0,
           "notes": []}
    rope_type = rope.rope_type
    if rope_type == "linear":
        out["freq_scale"] = 1.0 / p["factor"]
    elif rope_type == "yarn":
        factor = float(p["factor"])
        out.update(freq_scale=1.0 / factor, ext_factor=1.0)
        if p.get("truncate", True) is False:
            out["notes"].append("truncate=false is not written to the GGUF; ggml floors "
                                "and ceils the correction range (ggml.c lines 4486-4487)")
        if (p.get("beta_fast", 32) != 32 or p.get("beta_slow", 1) != 1):
            out["notes"].append(f"beta_fast={p.get('beta_fast', 32)}, "
                                f"beta_slow={p.get('beta_slow', 1)} are written to the GGUF "
                                "but read only for Grok and Mistral 3: ggml uses 32 and 1")
        if p.get("attention_factor") is not None:
            out["notes"].append("attention_factor is written as yarn_attn_factor but "
                                "not read (only Grok reads it)")
        deepseek = arch in LLAMA_CPP_YARN_LOG_MUL_ARCHS and p.get("mscale_all_dim") is not None
        if deepseek:
            out["gguf_yarn_log_mul"] = 0.1 * float(p["mscale_all_dim"])
            out["rope_yarn_log_mul"] = out["gguf_yarn_log_mul"] / 0.1
        out["attn_factor"] = llama_cpp_yarn_attn_factor(
            factor, rope_yarn_log_mul=out["rope_yarn_log_mul"],
            deepseek2=arch == "LLM_ARCH_DEEPSEEK2")
        if deepseek:
            # deepseek2.cpp lines 307-314: attn_factor_org and kq_scale
            attn_org = out["attn_factor"] * (1.0 + 0.1 * math.log(factor))
            mscale = attn_org * (1.0 + 0.1 * out["rope_yarn_log_mul"] * math.log(factor))
            out["logit_scale"] = mscale * mscale
    elif rope_type == "llama3":
        out["freq_factors"] = llama_cpp_llama3_factors(
            rope.dim, rope.base, p["factor"], p["low_freq_factor"], p["high_freq_factor"],
            p["original_max_position_embeddings"])
    elif rope_type == "longrope":
        n_ctx = rope.max_position_embeddings if n_ctx is None else int(n_ctx)
        long = n_ctx > out["n_ctx_orig"]
        out["freq_factors"] = torch.tensor(p["long_factor" if long else "short_factor"],
                                           dtype=torch.float32)
        scale = rope.max_position_embeddings / out["n_ctx_orig"]
        out["attn_factor"] = (math.sqrt(1 + math.log(scale) / math.log(out["n_ctx_orig"]))
                              if scale > 1.0 else 1.0)
        out["notes"].append(f"{'long' if long else 'short'} factors for every token: "
                            f"n_ctx {n_ctx:,} {'>' if long else '<='} "
                            f"{out['n_ctx_orig']:,}")
    elif rope_type == "dynamic":
        out["notes"].append("dynamic NTK is not converted: plain RoPE at the configured base")
    out["net_factor"] = out["attn_factor"] * (
        1.0 + 0.1 * math.log(1.0 / out["freq_scale"]) if out["ext_factor"] else 1.0)
    return out


def llama_cpp_llama3_factors(dim: int, base: float, factor: float, low_freq_factor: float,
                             high_freq_factor: float, old_context_len: int) -> Tensor:
    """Transcription of ``LlamaModel.generate_extra_tensors`` (llama.cpp's
    converter, conversion/llama.py lines 298-326 at 0c1e57098): the
    ``rope_freqs`` tensor, one divisor per pair."""
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    rope_factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            rope_factors.append(1)
        elif wavelen > low_freq_wavelen:
            rope_factors.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (
                high_freq_factor - low_freq_factor)
            rope_factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(rope_factors, dtype=torch.float32)


def llama_cpp_inv_freq(config: Mapping, *, n_ctx: int | None = None) -> Tensor:
    """The frequency of each pair as ggml rotates ``config``'s global layers
    (the angle at position 1 of :func:`llama_cpp_rope` with the parameters of
    :func:`llama_cpp_params`), ``(n_dims/2,)`` float32."""
    p = llama_cpp_params(config, n_ctx=n_ctx)
    theta, _ = _ggml_theta(torch.tensor([1]), n_dims=p["n_dims"], freq_base=p["freq_base"],
                           freq_scale=p["freq_scale"], ext_factor=p["ext_factor"],
                           attn_factor=p["attn_factor"], n_ctx_orig=p["n_ctx_orig"],
                           beta_fast=p["beta_fast"], beta_slow=p["beta_slow"],
                           freq_factors=p["freq_factors"])
    return theta[0]


# ---- llama.cpp: context shift ---------------------------------------------------

def llama_cpp_can_shift(model_type: str) -> bool:
    """Whether llama.cpp may shift (K-shift, context shift) this model's
    cache: ``llama_kv_cache::get_can_shift`` (src/llama-kv-cache.cpp lines
    1188-1197 at 0c1e57098) refuses when ``n_pos_per_embd() > 1``, i.e. for
    M-RoPE and interleaved M-RoPE (src/llama-hparams.cpp lines 285-288), and
    a shift then aborts (llama-kv-cache.cpp line 859). MLA (DeepSeek-V3)
    shifts: its rope part is a separate key slice.

    Raises:
        ValueError: naming ``model_type`` if it is not in :data:`LLAMA_CPP_PAIRS`.
    """
    return llama_cpp_pairs(model_type) not in ("mrope", "imrope")
