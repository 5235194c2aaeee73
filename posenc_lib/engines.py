"""What three inference engines do with a model's RoPE configuration.

transformers 4.57.6 is what :mod:`posenc_lib.scaling` reproduces. This module
holds, for vLLM and llama.cpp, **transcriptions** of the engine code that
turns a ``config.json`` into rotations, each labelled with its repository,
file, commit and lines, and a table of per-engine facts (:data:`FACTS`), each
cited the same way. The transcriptions are tested against transformers and
:mod:`posenc_lib.scaling` in ``tests/test_engines.py``; ``make engines`` runs
llama.cpp itself (through ``llama-cpp-python``) where it builds.

Nothing here imports vLLM or llama.cpp: the transcriptions are plain torch,
so the tests run offline.

Sources (every ``lines`` below refers to these):

* :data:`VLLM` files, each at the commit of the stored copy that was read
  (vLLM moves fast; the commit is per file).
* :data:`LLAMA_CPP`: ggml-org/llama.cpp at ``0c1e57098``, the commit that
  ``llama-cpp-python`` 0.3.36 vendors (its CHANGELOG: "update llama.cpp to
  ggml-org/llama.cpp@0c1e57098"; its build prints ``ggml commit: 0c1e570``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from . import _validate

#: The llama.cpp tree that ``make engines`` builds and that the llama.cpp
#: transcriptions and facts below cite.
LLAMA_CPP = {"package": "llama-cpp-python==0.3.36", "repo": "ggml-org/llama.cpp",
             "commit": "0c1e57098"}

#: vLLM files transcribed here, each at the commit of the copy read.
VLLM = {
    "base": ("vllm/model_executor/layers/rotary_embedding/base.py",
             "04458da08417899fc04046216c986d28abeb85af"),
    "common": ("vllm/model_executor/layers/rotary_embedding/common.py",
               "002d181a55a03803d7d69547846630069d2378b8"),
    "yarn": ("vllm/model_executor/layers/rotary_embedding/yarn_scaling_rope.py",
             "0cd5784803d83f81fac0794b82cb592d4317d4bf"),
    "dynamic": ("vllm/model_executor/layers/rotary_embedding/dynamic_ntk_scaling_rope.py",
                "3cfbaf333d800badc12fad1f138ab01178d35ab8"),
    "linear": ("vllm/model_executor/layers/rotary_embedding/linear_scaling_rope.py",
               "0f17ee061e413bf8ab7927f926f69cdff24dc63e"),
    "llama3": ("vllm/model_executor/layers/rotary_embedding/llama3_rope.py",
               "045d7575500e01e0f4a7ff84e039a9f7f7dc3bd0"),
    "longrope": (("vllm/model_executor/layers/rotary_embedding/"
                 "phi3_long_rope_scaled_rope.py"),
                 "17d618b0f944610b73e79e6726983fbe7679f613"),
}

ENGINES = ("transformers", "vllm", "llama.cpp")


def _cite(key: str, lines: str) -> str:
    path, commit = VLLM[key]
    return f"vllm-project/vllm {path}@{commit[:12]} {lines}"


def _lcpp(path: str, lines: str) -> str:
    return f"{LLAMA_CPP['repo']} {path}@{LLAMA_CPP['commit']} {lines}"


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

#: transformers 4.57.6's pair layout: every model of the table rotates halves
#: (``rotate_half``) except these, which pair neighbours in their modelling
#: code (DeepSeek-V3 with ``rope_interleave`` true, its published default;
#: ERNIE 4.5's ``rotate_half`` takes ``x[..., 0::2]`` and ``x[..., 1::2]``).
TRANSFORMERS_NEIGHBOURS = {"deepseek_v3", "ernie4_5",
                           # read as deepseek_v3 (no 4.57 class of their own)
                           "kimi_k2", "deepseek_v32",
                           # Llama4TextAttention rotates complex pairs (2i, 2i+1);
                           # llama.cpp's Llama4Model keeps undo_permute = False
                           "llama4"}


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
    4478-4491 at 0c1e57098), in float32 as ggml computes it."""
    f32 = torch.float32

    def corr_dim(n_rot):
        num = torch.tensor(n_ctx_orig, dtype=f32) / (torch.tensor(n_rot, dtype=f32) * 2
                                                     * torch.tensor(math.pi, dtype=f32))
        return (n_dims * torch.log(num) / (2 * torch.log(torch.tensor(freq_base, dtype=f32))))

    start = math.floor(float(corr_dim(beta_fast)))
    end = math.ceil(float(corr_dim(beta_slow)))
    return float(max(0, start)), float(min(n_dims - 1, end))


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


# ---- vLLM: rotary-embedding modules ----------------------------------------

def vllm_apply_rotary_emb_torch(x: Tensor, cos: Tensor, sin: Tensor,
                                is_neox_style: bool) -> Tensor:
    """Transcription of ``apply_rotary_emb_torch`` (common.py at
    002d181a55a0).

    Args:
        x: ``(tokens, heads, rotary_dim)``; cos, sin: ``(tokens, rotary_dim/2)``.
    """
    cos = cos.unsqueeze(-2).to(x.dtype)
    sin = sin.unsqueeze(-2).to(x.dtype)
    if is_neox_style:
        x1, x2 = torch.chunk(x, 2, dim=-1)
    else:
        x1 = x[..., ::2]
        x2 = x[..., 1::2]
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    if is_neox_style:
        return torch.cat((o1, o2), dim=-1)
    return torch.stack((o1, o2), dim=-1).flatten(-2)


def vllm_forward_native(positions: Tensor, query: Tensor, key: Tensor,
                        cos_sin_cache: Tensor, *, head_size: int, rotary_dim: int,
                        is_neox_style: bool = True) -> tuple[Tensor, Tensor]:
    """Transcription of ``RotaryEmbedding.forward_native`` (base.py at
    04458da08417): look up ``cos_sin_cache[positions]``, rotate the
    first ``rotary_dim`` features of every head.

    Args:
        positions: ``(tokens,)``; query, key: ``(tokens, heads * head_size)``;
        cos_sin_cache: ``(max_positions, rotary_dim)``, cos then sin.
    """
    positions = positions.flatten()
    num_tokens = positions.shape[0]
    cos_sin = cos_sin_cache.index_select(0, positions)
    cos, sin = cos_sin.chunk(2, dim=-1)
    out = []
    for t in (query, key):
        shape = t.shape
        t = t.view(num_tokens, -1, head_size)
        rot = vllm_apply_rotary_emb_torch(t[..., :rotary_dim], cos, sin, is_neox_style)
        out.append(torch.cat((rot, t[..., rotary_dim:]), dim=-1).reshape(shape))
    return out[0], out[1]


def vllm_inv_freq(rotary_dim: int, base: float) -> Tensor:
    """Transcription of ``RotaryEmbedding._compute_inv_freq`` (base.py at
    04458da08417), float32."""
    return 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))


def _cache(inv_freq: Tensor, num_positions, mscale: float = 1.0) -> Tensor:
    t = torch.arange(num_positions, dtype=torch.float)
    freqs = torch.einsum("i,j -> ij", t, inv_freq)
    return torch.cat((freqs.cos() * mscale, freqs.sin() * mscale), dim=-1)


def vllm_default_cache(rotary_dim: int, max_position_embeddings: int,
                       base: float) -> Tensor:
    """``RotaryEmbedding._compute_cos_sin_cache`` (base.py at
    04458da08417): ``(max_position_embeddings, rotary_dim)``, cos then sin."""
    return _cache(vllm_inv_freq(rotary_dim, base), max_position_embeddings)


def vllm_linear_cache(rotary_dim: int, max_position_embeddings: int, base: float,
                      scaling_factor: float) -> Tensor:
    """Transcription of ``LinearScalingRotaryEmbedding._compute_cos_sin_cache``
    for one factor (linear_scaling_rope.py at 0f17ee061e41): the
    *positions* are divided by the factor (transformers divides ``inv_freq``),
    over ``max_position_embeddings * scaling_factor`` rows."""
    max_len = int(max_position_embeddings * scaling_factor)
    t = torch.arange(max_len, dtype=torch.float) / scaling_factor
    freqs = torch.einsum("i,j -> ij", t, vllm_inv_freq(rotary_dim, base))
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1)


def vllm_yarn(rotary_dim: int, max_position_embeddings: int, base: float,
              scaling_factor: float, *, beta_fast: float = 32, beta_slow: float = 1,
              mscale: float | None = None, mscale_all_dim: float | None = None,
              attention_factor: float | None = None) -> tuple[Tensor, float, int]:
    """Transcription of ``YaRNScalingRotaryEmbedding`` (yarn_scaling_rope.py
    at 0cd5784803d8) with common.py's ``yarn_find_correction_*``,
    ``yarn_linear_ramp_mask`` and ``yarn_get_mscale`` (common.py at
    002d181a55a0). ``max_position_embeddings`` is the *original* context (vLLM
    passes ``original_max_position_embeddings`` here).

    Returns:
        ``(inv_freq, mscale, num_positions)``: ``(rotary_dim/2,)`` float32
        frequencies; the factor multiplied into the cached cos and sin; the
        cache's length ``ceil(max_position_embeddings * scaling_factor)``.
    """
    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if attention_factor is not None:
        ms = float(attention_factor)
    elif mscale and mscale_all_dim:
        ms = float(get_mscale(scaling_factor, mscale) / get_mscale(scaling_factor, mscale_all_dim))
    else:
        ms = float(get_mscale(scaling_factor))
    pos_freqs = base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (scaling_factor * pos_freqs)

    def corr_dim(num_rotations):
        return (rotary_dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))
                ) / (2 * math.log(base))

    low = max(math.floor(corr_dim(beta_fast)), 0)
    high = min(math.ceil(corr_dim(beta_slow)), rotary_dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(rotary_dim // 2, dtype=torch.float) - low) / (high - low),
                       0, 1)
    inv_freq_mask = 1 - ramp
    inv_freq = inv_freq_interpolation * (1 - inv_freq_mask) + inv_freq_extrapolation * inv_freq_mask
    return inv_freq, ms, math.ceil(max_position_embeddings * scaling_factor)


def vllm_dynamic_ntk_base(rotary_dim: int, max_position_embeddings: int, base: float,
                          scaling_factor: float) -> tuple[float, int]:
    """Transcription of ``DynamicNTKScalingRotaryEmbedding._compute_cos_sin_cache``
    (dynamic_ntk_scaling_rope.py at 3cfbaf333d80): one base for
    the whole static cache of ``max_position_embeddings * scaling_factor``
    positions, whatever the request's length.

    Returns:
        ``(base, cache_length)``. At this commit ``max_len /
        max_position_embeddings`` equals ``scaling_factor``, so the bracket is
        1 and the base is the configured one: no NTK scaling at any length.
    """
    max_len = max_position_embeddings * scaling_factor
    new_base = base * ((max_len / max_position_embeddings) - (scaling_factor - 1)) ** (
        rotary_dim / (rotary_dim - 2))
    return new_base, int(max_len)


def vllm_llama3_inv_freq(rotary_dim: int, base: float, scaling_factor: float,
                         low_freq_factor: float, high_freq_factor: float,
                         orig_max_position: int) -> Tensor:
    """Transcription of ``Llama3RotaryEmbedding._compute_inv_freq``
    (llama3_rope.py at 045d7575500e), float32."""
    inv_freqs = vllm_inv_freq(rotary_dim, base)
    low_freq_wavelen = orig_max_position / low_freq_factor
    high_freq_wavelen = orig_max_position / high_freq_factor
    wave_len = 2 * math.pi / inv_freqs
    if low_freq_factor != high_freq_factor:
        smooth = (orig_max_position / wave_len - low_freq_factor) / (
            high_freq_factor - low_freq_factor)
    else:
        smooth = 0
    return torch.where(
        wave_len < high_freq_wavelen, inv_freqs,
        torch.where(wave_len > low_freq_wavelen, inv_freqs / scaling_factor,
                    (1 - smooth) * inv_freqs / scaling_factor + smooth * inv_freqs))


def vllm_longrope(rotary_dim: int, max_position_embeddings: int,
                  original_max_position_embeddings: int, base: float,
                  short_factor: Sequence[float], long_factor: Sequence[float], *,
                  max_model_len: int) -> dict:
    """Transcription of ``Phi3LongRoPEScaledRotaryEmbedding`` (phi3_long_rope_
    scaled_rope.py at 17d618b0f944, ``__init__`` and ``forward``): both caches
    built once; which one every request reads is fixed at start-up by
    ``use_long_rope = max_model_len > original_max_position_embeddings``.

    Returns:
        dict with ``use_long_rope``, ``inv_freq`` (the factors the engine
        applies to *every* request, short or long), ``mscale``.
    """
    use_long = max_model_len > original_max_position_embeddings
    scale = max_position_embeddings / original_max_position_embeddings
    ms = 1.0 if scale <= 1.0 else math.sqrt(
        1 + math.log(scale) / math.log(original_max_position_embeddings))
    factors = torch.tensor(long_factor if use_long else short_factor, dtype=torch.float32)
    inv_freq = 1.0 / (factors * (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float)
                                          / rotary_dim)))
    return {"use_long_rope": use_long, "inv_freq": inv_freq, "mscale": ms}


# ---- the side-by-side facts -------------------------------------------------

#: Per rope type, what each engine does; every entry is cited. Keys: the
#: six questions of the recipe: ``frequencies``, ``factor`` (what multiplies
#: cos and sin, hence the logits by its square), ``when`` (when the
#: frequencies change during generation).
FACTS: dict[str, dict[str, dict[str, str]]] = {
    "default": {
        "transformers": {"frequencies": "base^(-2i/d)", "factor": "1",
                         "when": "never",
                         "source": "transformers v4.57.6 modeling_rope_utils.py "
                                   "_compute_default_rope_parameters"},
        "vllm": {"frequencies": "base^(-2i/d), float32", "factor": "1",
                 "when": "never (one cos/sin cache of max_position_embeddings rows)",
                 "source": _cite("base", "RotaryEmbedding._compute_inv_freq, _compute_cos_sin_cache")},
        "llama.cpp": {"frequencies": "base^(-2i/d) by repeated float32 products",
                      "factor": "1", "when": "never",
                      "source": _lcpp("ggml/src/ggml-cpu/ops.cpp", "lines 6203-6218, 6372")},
    },
    "linear": {
        "transformers": {"frequencies": "base^(-2i/d) / factor", "factor": "1",
                         "when": "never", "source": "transformers v4.57.6 "
                         "_compute_linear_scaling_rope_parameters"},
        "vllm": {"frequencies": "positions / factor over a cache of "
                                "max_position_embeddings * factor rows",
                 "factor": "1", "when": "never",
                 "source": _cite("linear", "LinearScalingRotaryEmbedding._compute_cos_sin_cache")},
        "llama.cpp": {"frequencies": "freq_scale = 1/factor (GGUF rope.scaling.factor)",
                      "factor": "1", "when": "never",
                      "source": _lcpp("conversion/base.py", "lines 1465-1469")},
    },
    "dynamic": {
        "transformers": {"frequencies": "NTK base from the current length when it "
                                        "exceeds max_position_embeddings",
                         "factor": "1",
                         "when": "every forward (dynamic_rope_update): grows past the "
                                 "trained length, back to the original below it",
                         "source": "transformers v4.57.6 modeling_rope_utils.py "
                                   "dynamic_rope_update, _compute_dynamic_ntk_parameters"},
        "vllm": {"frequencies": "one base for a static cache of max_position_embeddings "
                                "* factor rows; at the cited commit the bracket is 1: the "
                                "configured base, unscaled",
                 "factor": "1", "when": "never (static)",
                 "source": _cite("dynamic", "DynamicNTKScalingRotaryEmbedding._compute_cos_sin_cache")},
        "llama.cpp": {"frequencies": "not converted: the converter writes no scaling "
                                     "(only HunYuan handles it), so plain RoPE",
                      "factor": "1", "when": "never",
                      "source": _lcpp("conversion/base.py", "lines 1487-1489")},
    },
    "yarn": {
        "transformers": {"frequencies": "ramp between base^(-2i/d) and /factor",
                         "factor": "attention_factor, else 0.1 ln(factor) + 1 (or the "
                                   "mscale ratio)",
                         "when": "never", "source": "transformers v4.57.6 "
                         "_compute_yarn_parameters"},
        "vllm": {"frequencies": "same ramp, float32, cache of original * factor rows",
                 "factor": "mscale multiplied into the cached cos and sin: "
                           "attention_factor, else the mscale ratio, else 0.1 ln s + 1",
                 "when": "never", "source": _cite("yarn", "YaRNScalingRotaryEmbedding")},
        "llama.cpp": {"frequencies": "same ramp in ggml's float32 (rope_yarn)",
                      "factor": "0.1 ln(factor) + 1 (or the mscale ratio); a config's "
                                "attention_factor is written to the GGUF but not read",
                      "when": "never",
                      "source": _lcpp("src/llama-context.cpp", "lines 176-214") + "; "
                      + _lcpp("ggml/src/ggml-cpu/ops.cpp", "lines 6187-6201")},
    },
    "llama3": {
        "transformers": {"frequencies": "three bands: kept, /factor, smooth between",
                         "factor": "1", "when": "never",
                         "source": "transformers v4.57.6 _compute_llama3_parameters"},
        "vllm": {"frequencies": "same, float32", "factor": "1", "when": "never",
                 "source": _cite("llama3", "Llama3RotaryEmbedding._compute_inv_freq")},
        "llama.cpp": {"frequencies": "the converter's per-pair divisors (rope_freqs "
                                     "tensor), applied as freq_factors",
                      "factor": "1", "when": "never",
                      "source": _lcpp("conversion/llama.py", "lines 298-326")},
    },
    "longrope": {
        "transformers": {"frequencies": "short factors up to the original context, "
                                        "long factors beyond",
                         "factor": "sqrt(1 + ln(s)/ln(original)) (or attention_factor)",
                         "when": "per forward: the long factors once the sequence passes "
                                 "original_max_position_embeddings",
                         "source": "transformers v4.57.6 _compute_longrope_parameters, "
                                   "longrope_frequency_update"},
        "vllm": {"frequencies": "long factors for every request when max_model_len > "
                                "original, else short",
                 "factor": "same formula, in the cached cos and sin",
                 "when": "never: fixed at start-up by max_model_len",
                 "source": _cite("longrope", "Phi3LongRoPEScaledRotaryEmbedding.__init__, forward")},
        "llama.cpp": {"frequencies": "rope_factors_long / rope_factors_short tensors",
                      "factor": "sqrt(1 + ln(s)/ln(original)), written by the Phi-3 "
                                "converter as rope.scaling.attn_factor",
                      "when": "never: long factors for every token when the context "
                              "(n_ctx_seq) exceeds the original, chosen when the "
                              "context is created",
                      "source": _lcpp("src/llama-model.cpp", "lines 2337-2350") + "; "
                      + _lcpp("conversion/phi.py", "lines 196-210")},
    },
    "mrope": {
        "transformers": {"frequencies": "base^(-2i/d) split among (t, h, w) sections",
                         "factor": "1", "when": "never",
                         "source": "transformers v4.57.6 Qwen2_5_VL apply_multimodal_"
                                   "rotary_pos_emb"},
        "vllm": {"frequencies": "same sections", "factor": "1", "when": "never",
                 "source": "vllm-project/vllm vllm/model_executor/layers/rotary_embedding/"
                           "mrope.py@dba39a557eab"},
        "llama.cpp": {"frequencies": "sections in ggml_mrope_cache_init (imrope for "
                                     "Qwen3-VL)",
                      "factor": "1",
                      "when": "never; the cache cannot be shifted (n_pos_per_embd > 1)",
                      "source": _lcpp("ggml/src/ggml-cpu/ops.cpp", "lines 6220-6288") + "; "
                      + _lcpp("src/llama-kv-cache.cpp", "lines 1188-1197")},
    },
}

ROPE_TYPES = tuple(FACTS)


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


def engine_summary(config: Mapping, engine: str) -> dict:
    """The per-engine facts for one ``config.json``: pair layout, factor on
    cos and sin, when the frequencies change, whether the cache may be
    shifted.

    Args:
        config: a parsed ``config.json``.
        engine: one of :data:`ENGINES`.

    Returns:
        dict with ``rope_type``, ``pairs``, ``factor`` (a float, or ``None``
        without RoPE), ``when``, ``can_shift``, ``source``. ``can_shift`` is
        llama.cpp's answer (:func:`llama_cpp_can_shift`); for transformers and
        vLLM it is not assessed and reads ``True``.

    Raises:
        ValueError: naming ``engine`` for an unknown engine, or naming
            ``model_type`` for a model outside the table.
    """
    _validate.one_of("engine", engine, list(ENGINES))
    from . import scaling
    from ._config import parse_rope_config

    model_type = config.get("model_type")
    pairs_cpp = llama_cpp_pairs(model_type)
    if pairs_cpp == "none":
        return {"rope_type": None, "pairs": "no RoPE", "factor": None, "when": "-",
                "can_shift": True, "source": _lcpp("src/llama-model.cpp", "line 3049")}
    rope = parse_rope_config(config)
    rope_type = rope.rope_type
    if model_type in ("qwen2_5_vl", "qwen3_vl"):
        rope_type = "mrope"
    _, tf_factor = scaling.rope_from_config(config)
    fact = FACTS.get(rope_type, FACTS["default"])[engine]
    if engine == "transformers":
        pairs = "neighbours" if model_type in TRANSFORMERS_NEIGHBOURS else "halves"
        factor = tf_factor
        can_shift = True
    elif engine == "vllm":
        # each vLLM model file passes its own is_neox_style; not transcribed here
        pairs = "per model file (not transcribed)"
        factor = tf_factor
        if rope_type == "yarn":
            p = rope.params
            factor = vllm_yarn(rope.dim, p.get("original_max_position_embeddings")
                               or rope.max_position_embeddings, rope.base, p["factor"],
                               mscale=p.get("mscale"), mscale_all_dim=p.get("mscale_all_dim"),
                               attention_factor=p.get("attention_factor"))[1]
        can_shift = True
    else:
        pairs = {"norm": "neighbours (NORM; converter permutes q/k)"
                 if model_type in PERMUTED else "neighbours (NORM)",
                 "neox": "halves (NEOX)", "mrope": "halves, sectioned (MROPE)",
                 "imrope": "halves, interleaved sections (IMROPE)"}[pairs_cpp]
        factor = tf_factor
        if rope_type == "yarn":
            p = rope.params
            log_mul = (p["mscale_all_dim"] if p.get("mscale") and p.get("mscale_all_dim")
                       else 0.0)
            factor = llama_cpp_net_factor(p["factor"], rope_yarn_log_mul=log_mul,
                                          deepseek2=model_type == "deepseek_v3")
        can_shift = llama_cpp_can_shift(model_type)
    return {"rope_type": rope_type, "pairs": pairs, "factor": float(factor),
            "when": fact["when"], "can_shift": can_shift, "source": fact["source"]}
