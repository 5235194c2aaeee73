"""The engines side by side: per rope type what each engine does
(:data:`FACTS`, every entry cited), and each engine's frequencies, factor and
pair layout for one ``config.json`` from that engine's own code path
(:func:`engine_rope`, :func:`engine_inv_freq`, :func:`engine_summary`,
:func:`frequency_difference`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import torch
from torch import Tensor

from ... import _validate
from .common import (
    DEEPSEEK_FAMILY,
    ENGINES,
    LLAMA_CPP,
    _cite,
    _lcpp,
    _sgl,
    _vm,
    transformers_pairs,
)
from .llama_cpp import (
    PERMUTED,
    llama_cpp_can_shift,
    llama_cpp_inv_freq,
    llama_cpp_pairs,
    llama_cpp_params,
)
from .sglang import (
    SGLANG_LOAD_PERMUTED,
    sglang_get_rope_args,
    sglang_pairs,
    sglang_rope,
)
from .vllm import _VM, VLLM_LOAD_PERMUTED, vllm_get_rope_args, vllm_pairs, vllm_rope

# ---- the side-by-side facts -------------------------------------------------

_R = "layers/rotary_embedding/"
#: What each engine does, per rope type, every entry cited. The keys are the
#: questions of the recipe: ``frequencies``, ``factor`` (what multiplies
#: cos and sin, hence the logits by its square), ``when`` (when the
#: frequencies change during generation), ``source``.
FACTS: dict[str, dict[str, dict[str, str]]] = {
    "default": {
        "transformers": {"frequencies": "base^(-2i/d)", "factor": "1",
                         "when": "never",
                         "source": "transformers v4.57.6 modeling_rope_utils.py "
                                   "_compute_default_rope_parameters"},
        "vllm": {"frequencies": "base^(-2i/d), float32", "factor": "1",
                 "when": "never (one cos/sin cache of max_position_embeddings rows)",
                 "source": _cite("base", "lines 80-103 (RotaryEmbeddingBase._compute_inv_freq, "
                                       "_compute_cos_sin_cache)")},
        "llama.cpp": {"frequencies": "base^(-2i/d) by repeated float32 products",
                      "factor": "1", "when": "never",
                      "source": _lcpp("ggml/src/ggml-cpu/ops.cpp", "lines 6203-6218, 6372")},
        "sglang": {"frequencies": "base^(-2i/d), float32 cache, cast to the model's dtype "
                                  "off CUDA/HIP/XPU",
                   "factor": "1", "when": "never (one cos/sin cache)",
                   "source": _sgl(_R + "base.py", "lines 119-120, 233-266")},
    },
    "linear": {
        "transformers": {"frequencies": "base^(-2i/d) / factor", "factor": "1",
                         "when": "never", "source": "transformers v4.57.6 "
                         "_compute_linear_scaling_rope_parameters"},
        "vllm": {"frequencies": "positions / factor over a cache of "
                                "max_position_embeddings * factor rows",
                 "factor": "1", "when": "never",
                 "source": _cite("linear", "lines 79-108 (LinearScalingRotaryEmbedding."
                                         "_compute_cos_sin_cache)")},
        "llama.cpp": {"frequencies": "freq_scale = 1/factor (GGUF rope.scaling.factor)",
                      "factor": "1", "when": "never",
                      "source": _lcpp("conversion/base.py", "lines 1465-1469")},
        "sglang": {"frequencies": "positions / factor over a cache of "
                                  "max_position_embeddings * factor rows",
                   "factor": "1", "when": "never",
                   "source": _sgl(_R + "base.py", "lines 649-681 (LinearScalingRotaryEmbedding)")},
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
                                "rows: base (factor max_position / max_trained_positions "
                                "- factor + 1)^(d/(d-2)); max_trained_positions defaults "
                                "to max_position, so the configured base, unscaled",
                 "factor": "1", "when": "never (static)",
                 "source": _cite("dynamic", "lines 53-73") + "; "
                 + _cite("init", "lines 212-242 (get_rope, dynamic)")},
        "llama.cpp": {"frequencies": "not converted: the converter writes no scaling "
                                     "(only HunYuan handles it), so plain RoPE",
                      "factor": "1", "when": "never",
                      "source": _lcpp("conversion/base.py", "lines 1487-1489")},
        "sglang": {"frequencies": "one static cache of max_position_embeddings * factor "
                                  "rows with the NTK base of that full length, "
                                  "base (factor^2 - factor + 1)^(d/(d-2)), for every request",
                   "factor": "1", "when": "never (static; short requests get the long base)",
                   "source": _sgl(_R + "rope_variant.py",
                                  "lines 859-893 (DynamicNTKScalingRotaryEmbedding)")},
    },
    "yarn": {
        "transformers": {"frequencies": "ramp between base^(-2i/d) and /factor",
                         "factor": "attention_factor, else 0.1 ln(factor) + 1 (or the "
                                   "mscale ratio)",
                         "when": "never", "source": "transformers v4.57.6 "
                         "_compute_yarn_parameters"},
        "vllm": {"frequencies": "same ramp, float32, cache of original * factor rows; "
                                "reads truncate (gpt-oss passes rope_parameters.get("
                                "'truncate', True)); DeepSeek's path "
                                "(DeepseekScalingRotaryEmbedding) always truncates",
                 "factor": "mscale multiplied into the cached cos and sin: "
                           "attention_factor, else the mscale ratio, else 0.1 ln s + 1; "
                           "DeepSeek: the mscale ratio on cos and sin and "
                           "mscale(s, mscale_all_dim)^2 on the softmax scale",
                 "when": "never",
                 "source": _cite("yarn", "lines 10-85") + "; "
                 + _cite("common", "lines 46-59 (yarn_find_correction_range, truncate)") + "; "
                 + _cite("init", "lines 243-311 (get_rope, yarn, deepseek_yarn)") + "; "
                 + _cite("deepseek", "lines 26-114 (DeepseekScalingRotaryEmbedding)") + "; "
                 + _vm(_VM + "gpt_oss.py", "lines 111-127") + "; "
                 + _vm(_VM + "deepseek_v2.py", "lines 1115-1136")},
        "llama.cpp": {"frequencies": "the ramp in ggml's float32 (rope_yarn) with the "
                                     "correction range always floored and ceiled (no "
                                     "truncate: gpt-oss's truncate=false differs from "
                                     "transformers in 9 of 32 pairs), and beta_fast/"
                                     "beta_slow fixed at 32 and 1 except for Grok and "
                                     "Mistral 3 (Kimi K2's 1 and 1 are not read)",
                      "factor": "0.1 ln(factor) + 1 (or the mscale ratio, with DeepSeek's "
                                "mscale = mscale_all_dim); a config's attention_factor is "
                                "written to the GGUF but not read",
                      "when": "never",
                      "source": _lcpp("src/llama-context.cpp", "lines 116-117, 176-214") + "; "
                      + _lcpp("ggml/src/ggml.c", "lines 4478-4491") + "; "
                      + _lcpp("ggml/src/ggml-cpu/ops.cpp", "lines 6187-6201") + "; "
                      + _lcpp("src/llama-hparams.h", "lines 161-162") + "; "
                      + _lcpp("src/models/deepseek2.cpp", "lines 34-38, 307-314") + "; "
                      + _lcpp("conversion/deepseek.py", "lines 382-386")},
        "sglang": {"frequencies": "same ramp, float32 (reads truncate)",
                   "factor": "0.1 ln(factor) + 1 (or the mscale ratio) times attn_factor; a "
                             "config's attention_factor is not read",
                   "when": "never",
                   "source": _sgl(_R + "yarn.py", "lines 91-180") + "; "
                   + _sgl(_R + "factory.py", "lines 311-333")},
    },
    "llama3": {
        "transformers": {"frequencies": "three bands: kept, /factor, smooth between",
                         "factor": "1", "when": "never",
                         "source": "transformers v4.57.6 _compute_llama3_parameters"},
        "vllm": {"frequencies": "same, float32", "factor": "1", "when": "never",
                 "source": _cite("llama3", "lines 11-54 (Llama3RotaryEmbedding)")},
        "llama.cpp": {"frequencies": "the converter's per-pair divisors (rope_freqs "
                                     "tensor), applied as freq_factors",
                      "factor": "1", "when": "never",
                      "source": _lcpp("conversion/llama.py", "lines 298-326")},
        "sglang": {"frequencies": "same, float32", "factor": "1", "when": "never",
                   "source": _sgl(_R + "rope_variant.py",
                                  "lines 557-600 (Llama3RotaryEmbedding)")},
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
                 "source": _cite("longrope", "lines 51-55 (use_long_rope), 125-145 (forward)")},
        "llama.cpp": {"frequencies": "rope_factors_long / rope_factors_short tensors",
                      "factor": "sqrt(1 + ln(s)/ln(original)), written by the Phi-3 "
                                "converter as rope.scaling.attn_factor",
                      "when": "never: long factors for every token when the context "
                              "(n_ctx_seq) exceeds the original, chosen when the "
                              "context is created",
                      "source": _lcpp("src/llama-model.cpp", "lines 2337-2350") + "; "
                      + _lcpp("conversion/phi.py", "lines 196-210")},
        "sglang": {"frequencies": "short cache while every position of the batch is "
                                  "<= original, else the long cache for every token",
                   "factor": "same formula (short_mscale / long_mscale when given)",
                   "when": "per batch: any position > original switches every token of "
                           "the batch; at largest position = original that token reads "
                           "the long cache's row 0",
                   "source": _sgl(_R + "rope_variant.py",
                                  "lines 37-170 (Phi3LongRoPEScaledRotaryEmbedding)")},
    },
    "mrope": {
        "transformers": {"frequencies": "base^(-2i/d) split among (t, h, w) sections",
                         "factor": "1", "when": "never",
                         "source": "transformers v4.57.6 Qwen2_5_VL apply_multimodal_"
                                   "rotary_pos_emb"},
        "vllm": {"frequencies": "same sections", "factor": "1", "when": "never",
                 "source": _cite("mrope", "line 305 (class MRotaryEmbedding)") + "; "
                 + _cite("init", "lines 112-124 (get_rope, mrope_section)")},
        "llama.cpp": {"frequencies": "sections in ggml_mrope_cache_init (imrope for "
                                     "Qwen3-VL)",
                      "factor": "1",
                      "when": "never; the cache cannot be shifted (n_pos_per_embd > 1)",
                      "source": _lcpp("ggml/src/ggml-cpu/ops.cpp", "lines 6220-6288") + "; "
                      + _lcpp("src/llama-kv-cache.cpp", "lines 1188-1197")},
        "sglang": {"frequencies": "same sections", "factor": "1", "when": "never",
                   "source": _sgl(_R + "factory.py", "lines 242-253") + "; "
                   + _sgl(_R + "mrope.py", "line 60 (MRotaryEmbedding)")},
    },
}

ROPE_TYPES = tuple(FACTS)


def _describe_pairs(layout: Mapping, model_type: str, permuted: set) -> str:
    """One phrase for the inspector and the recipe: the engine's rotation and,
    where it differs, what it pairs in the checkpoint's rows."""
    neox, on_checkpoint = layout["is_neox_style"], layout["checkpoint_pairs"]
    if neox == "transformers":
        return f"{on_checkpoint} (Transformers backend)"
    if neox in ("none", None):
        return on_checkpoint
    if model_type in permuted:
        return f"halves (NEOX) on q/k rows permuted at load = {on_checkpoint}"
    return "halves (NEOX)" if neox else "neighbours (GPT-J style)"


def _transformers_logit_scale(config: Mapping) -> float:
    """DeepSeek-V3's softmax scale factor in transformers 4.57.6
    (models/deepseek_v3/modeling_deepseek_v3.py lines 372-377):
    ``mscale**2`` with ``mscale = 0.1 mscale_all_dim ln(factor) + 1``, run
    with transformers' own ``yarn_get_mscale``."""
    if config.get("model_type") not in DEEPSEEK_FAMILY:
        return 1.0
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_get_mscale

    rope_scaling = config.get("rope_scaling")
    if rope_scaling is None:
        return 1.0
    mscale_all_dim = rope_scaling.get("mscale_all_dim", 0)
    if not mscale_all_dim:
        return 1.0
    mscale = yarn_get_mscale(rope_scaling["factor"], mscale_all_dim)
    return float(mscale * mscale)


def _sglang_rope(config: Mapping) -> tuple[Tensor, float, list[str], str]:
    run = sglang_rope(config)
    notes: list[str] = []
    rope_scaling = sglang_get_rope_args(config)["rope_scaling"] or {}
    if rope_scaling.get("attention_factor") is not None:
        notes.append("attention_factor is not read (factory.py lines 319-332 of sglang "
                     "0.5.23 forward only SGLang's own keys)")
    if run["class"] == "Phi3LongRoPEScaledRotaryEmbedding":
        notes.append("short factors while every position of the batch is <= "
                     f"{run['module'].original_max_position_embeddings:,}, long factors "
                     "for every token once one is "
                     "past it (rope_variant.py lines 141-154)")
    if run["class"] == "DynamicNTKScalingRotaryEmbedding":
        notes.append("one static base for every request: the NTK base of the full length "
                     "(rope_variant.py lines 880-892)")
    return (run["inv_freq"], run["factor"], notes,
            f"SGLang 0.5.23 {run['class']} (vendored, run)")


def engine_rope(config: Mapping, engine: str, *, max_model_len: int | None = None,
                n_ctx: int | None = None) -> dict | None:
    """What ``engine`` computes for ``config``'s global RoPE, each from that
    engine's own code path: vLLM's vendored code (:func:`~.vllm.vllm_rope`),
    llama.cpp's converter, loader and ggml kernel (:func:`~.llama_cpp.llama_cpp_params`,
    transcribed at 0c1e57098 and run by ``make engines``), SGLang's vendored
    code (:func:`~.sglang.sglang_rope`), transformers 4.57.6 itself.

    Args:
        config: a parsed ``config.json``.
        engine: one of :data:`~.common.ENGINES`.
        max_model_len: vLLM's ``--max-model-len`` (LongRoPE; default
            ``max_position_embeddings``).
        n_ctx: llama.cpp's context size (LongRoPE; default
            ``max_position_embeddings``).

    Returns:
        ``None`` without RoPE, else a dict with ``inv_freq`` (``(d/2,)``
        float32: the angle of position 1), ``factor`` (on cos and sin),
        ``logit_scale`` (an extra factor on the softmax scale: DeepSeek's
        ``mscale**2``), ``via`` (whose code computed it), ``notes``.

    Raises:
        ValueError: naming ``engine`` or ``model_type``.
    """
    _validate.one_of("engine", engine, list(ENGINES))
    from ... import scaling

    model_type = config.get("model_type")
    if llama_cpp_pairs(model_type) == "none":
        return None
    tf = scaling.rope_from_config(config, reference="transformers", dtype=torch.float32)
    with warnings.catch_warnings():  # the same config's warnings, once is enough
        warnings.simplefilter("ignore")
        return _engine_rope(config, engine, tf, max_model_len, n_ctx)


def _engine_rope(config, engine, tf, max_model_len, n_ctx):
    tf_out = {"inv_freq": tf[0].float(), "factor": float(tf[1]),
              "logit_scale": _transformers_logit_scale(config),
              "via": "transformers 4.57.6", "notes": []}
    if engine == "transformers":
        return tf_out
    if engine == "vllm":
        run = vllm_rope(config, max_model_len=max_model_len)
        if run is None:
            layout = vllm_pairs(config)["is_neox_style"]
            if layout == "transformers":
                return {**tf_out, "via": "vLLM 0.33.0's Transformers backend (transformers' code)"}
            return None
        notes = []
        if "use_long_rope" in run:
            notes.append(f"{'long' if run['use_long_rope'] else 'short'} factors for every "
                         f"request (max_model_len "
                         f"{max_model_len or vllm_get_rope_args(config)['max_position']:,})")
        return {"inv_freq": run["inv_freq"], "factor": run["factor"],
                "logit_scale": run["logit_scale"],
                "via": f"vLLM 0.33.0 {run['class']} (vendored, run)", "notes": notes}
    if engine == "sglang":
        if sglang_pairs(config)["is_neox_style"] == "transformers":
            return {**tf_out, "via": "SGLang 0.5.23's Transformers fallback"}
        args = sglang_get_rope_args(config)
        if args["native"] == "transformers":
            amx = sglang_rope(config)
            diff = frequency_difference(amx["inv_freq"], tf_out["inv_freq"])
            return {**tf_out, "via": "SGLang 0.5.23's Gemma3RotaryEmbedding "
                    "(transformers' ROPE_INIT_FUNCTIONS)",
                    "notes": [(f"forward_cpu (AMX CPUs) rotates with get_rope's "
                               f"{amx['class']} instead: {diff['pairs_differ']} of "
                               f"{diff['pairs']} pairs differ, up to "
                               f"{diff['max_ratio']:.4g}x (gemma3_causal.py lines "
                               "186-224, 269)")]}
        inv, factor, notes, via = _sglang_rope(config)
        return {"inv_freq": inv.float(), "factor": float(factor),
                "logit_scale": args["logit_scale"], "via": via, "notes": notes}
    p = llama_cpp_params(config, n_ctx=n_ctx)
    return {"inv_freq": llama_cpp_inv_freq(config, n_ctx=n_ctx), "factor": p["net_factor"],
            "logit_scale": p["logit_scale"],
            "via": f"llama.cpp {LLAMA_CPP['commit']} (converter, loader, ggml; transcribed)",
            "notes": p["notes"]}


def engine_inv_freq(config: Mapping, engine: str, **kwargs) -> Tensor | None:
    """The frequencies ``engine`` rotates ``config``'s global layers with:
    ``engine_rope(config, engine, **kwargs)["inv_freq"]``, ``None`` without
    RoPE."""
    rope = engine_rope(config, engine, **kwargs)
    return None if rope is None else rope["inv_freq"]


def frequency_difference(engine_freq: Tensor, tf_freq: Tensor) -> dict:
    """How an engine's frequencies differ from transformers': the pairs whose
    relative difference exceeds float32 rounding (``(d/2 + 8) * 4 eps``: ggml
    accumulates ``theta_scale**i`` by ``i`` products, every other path rounds
    a few times), and the largest ratio. Where the two rotate a different
    share of each head (vLLM reads ``rotary_pct`` for every model; gpt-oss's
    own RoPE rotates the whole head), every pair differs and ``engine_pairs``
    says how many the engine has."""
    if engine_freq.numel() != tf_freq.numel():
        n = max(engine_freq.numel(), tf_freq.numel())
        return {"pairs_differ": n, "pairs": int(tf_freq.numel()),
                "engine_pairs": int(engine_freq.numel()), "max_ratio": None,
                "tolerance": None}
    rel = (engine_freq.double() / tf_freq.double() - 1).abs()
    tol = (tf_freq.numel() + 8) * 4 * torch.finfo(torch.float32).eps
    differ = rel > tol
    ratio = torch.maximum(engine_freq.double() / tf_freq.double(),
                          tf_freq.double() / engine_freq.double())
    return {"pairs_differ": int(differ.sum()), "pairs": int(tf_freq.numel()),
            "max_ratio": float(ratio.max()), "tolerance": tol}


def engine_summary(config: Mapping, engine: str, *, max_model_len: int | None = None,
                   n_ctx: int | None = None) -> dict:
    """The per-engine facts for one ``config.json``: pair layout, factor on
    cos and sin, when the frequencies change, whether the cache may be
    shifted, and how the engine's frequencies differ from transformers'.

    The factor and the frequencies come from :func:`engine_rope`, that is from
    each engine's own code path, never copied from transformers.

    Args:
        config: a parsed ``config.json``.
        engine: one of :data:`~.common.ENGINES`.
        max_model_len, n_ctx: see :func:`engine_rope`.

    Returns:
        dict with ``rope_type``, ``pairs``, ``factor`` (a float, or ``None``
        without RoPE), ``logit_scale``, ``when``, ``can_shift`` (llama.cpp's
        answer, :func:`~.llama_cpp.llama_cpp_can_shift`; ``None`` for the other engines:
        not assessed), ``frequencies`` (:func:`frequency_difference` against
        transformers 4.57.6 at the same request), ``via``, ``notes``,
        ``source``; for vLLM and SGLang ``pairs_source``.

    Raises:
        ValueError: naming ``engine`` for an unknown engine, or naming
            ``model_type`` for a model outside the table.
    """
    _validate.one_of("engine", engine, list(ENGINES))
    from ...config_reader import parse_rope_config

    model_type = config.get("model_type")
    pairs_cpp = llama_cpp_pairs(model_type)
    if pairs_cpp == "none":
        return {"rope_type": None, "pairs": "no RoPE", "factor": None, "logit_scale": 1.0,
                "when": "-", "can_shift": True if engine == "llama.cpp" else None,
                "frequencies": None, "via": None, "notes": [],
                "source": _lcpp("src/llama-model.cpp", "line 3049")}
    rope = parse_rope_config(config)
    rope_type = rope.rope_type
    if model_type in ("qwen2_5_vl", "qwen3_vl"):
        rope_type = "mrope"
    fact = FACTS.get(rope_type, FACTS["default"])[engine]
    layout = None
    can_shift = None
    if engine == "transformers":
        pairs = transformers_pairs(config)
    elif engine in ("vllm", "sglang"):
        layout = (vllm_pairs if engine == "vllm" else sglang_pairs)(config)
        pairs = _describe_pairs(layout, model_type,
                                VLLM_LOAD_PERMUTED if engine == "vllm" else SGLANG_LOAD_PERMUTED)
    else:
        pairs = {"norm": "neighbours (NORM; converter permutes q/k)"
                 if model_type in PERMUTED else "neighbours (NORM)",
                 "neox": "halves (NEOX)", "mrope": "halves, sectioned (MROPE)",
                 "imrope": "halves, interleaved sections (IMROPE)"}[pairs_cpp]
        can_shift = llama_cpp_can_shift(model_type)
    ours = engine_rope(config, engine, max_model_len=max_model_len, n_ctx=n_ctx)
    if ours is None:
        return {"rope_type": rope_type, "pairs": pairs, "factor": None, "logit_scale": 1.0,
                "when": fact["when"], "can_shift": can_shift, "frequencies": None,
                "via": None, "notes": [], "source": fact["source"],
                **({"pairs_source": layout["source"]} if layout else {})}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tf = engine_rope(config, "transformers")
    out = {"rope_type": rope_type, "pairs": pairs, "factor": float(ours["factor"]),
           "logit_scale": float(ours["logit_scale"]), "when": fact["when"],
           "can_shift": can_shift,
           "frequencies": frequency_difference(ours["inv_freq"], tf["inv_freq"]),
           "via": ours["via"], "notes": ours["notes"], "source": fact["source"]}
    if layout is not None:
        out["pairs_source"] = layout["source"]
    return out
