"""What three inference engines do with a model's RoPE configuration.

transformers 4.57.6 is what :mod:`posenc_lib.scaling` reproduces. For each
engine this module computes what that engine computes, from one pinned tree
per engine:

* **vLLM 0.33.0** (PyPI wheel, commit ``4ba787ec9``): its rotary-embedding
  package is vendored unchanged in ``posenc_lib/_vendor/vllm`` and *run*
  (:func:`vllm_rope`: ``get_rope`` builds the class and its cos/sin cache);
  only what the model files pass to ``get_rope`` is transcribed
  (:func:`vllm_get_rope_args`, :data:`VLLM_PAIRS`).
* **SGLang 0.5.23** (PyPI wheel): its rotary-embedding package is vendored
  unchanged in ``posenc_lib/_vendor/sglang`` and *run* (:func:`sglang_rope`);
  only what the model files pass to ``get_rope`` is transcribed
  (:func:`sglang_get_rope_args`, :data:`SGLANG_PAIRS`).
* **llama.cpp at 0c1e57098**, the tree ``llama-cpp-python`` 0.3.36 vendors:
  transcriptions of its converter, loader and ggml's CPU kernel
  (``llama_cpp_*``); ``make engines`` runs llama.cpp itself and records the
  run in ``results/engines.json``.

:func:`engine_rope` / :func:`engine_inv_freq` give each engine's frequencies
and factor from that engine's code path; :func:`engine_summary` adds the pair
layout, the schedule and the difference from transformers; :data:`FACTS`
holds the per-engine facts, each cited with file, release or commit and lines.

Sources (every ``lines`` below refers to these):

* :data:`VLLM`, :data:`VLLM_MODELS`: the vllm 0.33.0 wheel and source
  distribution (one release; its ``vllm/_version.py`` names ``g4ba787ec9``).
* :data:`SGLANG`: the sglang 0.5.23 wheel.
* :data:`LLAMA_CPP`: ggml-org/llama.cpp at ``0c1e57098`` (llama-cpp-python
  0.3.36's CHANGELOG: "update llama.cpp to ggml-org/llama.cpp@0c1e57098").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from ... import _validate

#: The llama.cpp tree that ``make engines`` builds and that the llama.cpp
#: transcriptions and facts below cite.
LLAMA_CPP = {"package": "llama-cpp-python==0.3.36", "repo": "ggml-org/llama.cpp",
             "commit": "0c1e57098"}

#: vLLM's rotary-embedding files, vendored unchanged from the vllm 0.33.0
#: wheel (posenc_lib/_vendor/vllm) and run; every ``lines`` below refers to
#: them (the package ``vllm/model_executor/layers/rotary_embedding/``).
_VR = "vllm/model_executor/layers/rotary_embedding/"
VLLM = {
    "init": _VR + "__init__.py", "base": _VR + "base.py", "common": _VR + "common.py",
    "yarn": _VR + "yarn_scaling_rope.py", "deepseek": _VR + "deepseek_scaling_rope.py",
    "dynamic": _VR + "dynamic_ntk_scaling_rope.py", "linear": _VR + "linear_scaling_rope.py",
    "llama3": _VR + "llama3_rope.py", "longrope": _VR + "phi3_long_rope_scaled_rope.py",
    "mrope": _VR + "mrope.py",
}

#: vLLM's model files, read in the source distribution vllm-0.33.0.tar.gz from
#: PyPI (sha256 f4c33c25...4c74112); its vllm/_version.py names the commit
#: ``g4ba787ec9``. Every line of :data:`VLLM_PAIRS` refers to it.
VLLM_MODELS = {"package": "vllm==0.33.0", "repo": "vllm-project/vllm", "commit": "4ba787ec9",
               "sdist_sha256": "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"}

#: SGLang, read in the wheel sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl
#: from PyPI (sha256 00b3cd5b...859937). Its sglang/_version.py records no commit
#: (``commit_id = None``), so the version and the wheel's hash are the citation;
#: paths are those of the package (python/sglang/... in sgl-project/sglang).
SGLANG = {"package": "sglang==0.5.23", "repo": "sgl-project/sglang",
          "wheel_sha256": "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937"}

ENGINES = ("transformers", "vllm", "llama.cpp", "sglang")


def _cite(key: str, lines: str) -> str:
    return _vm(VLLM[key], lines)


def _vm(path: str, lines: str) -> str:
    return f"{VLLM_MODELS['repo']} {VLLM_MODELS['package']} (commit {VLLM_MODELS['commit']}) {path} {lines}"


def _sgl(path: str, lines: str) -> str:
    return f"{SGLANG['repo']} {SGLANG['package']} (PyPI wheel) sglang/srt/{path} {lines}"


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


# ---- vLLM and SGLang: pair layout per model file ------------------------------

_VM = "vllm/model_executor/models/"

#: vLLM's ``is_neox_style`` for each ``model_type`` of the table, with the file
#: and line (vllm 0.33.0, :data:`VLLM_MODELS`) where it is set and the text of
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

_SG = "models/"

#: SGLang's ``is_neox_style`` for each ``model_type`` of the table (sglang
#: 0.5.23, :data:`SGLANG`), as :data:`VLLM_PAIRS`. ``get_rope``'s default is
#: ``True`` (layers/rotary_embedding/factory.py line 130). SGLang reads
#: DeepSeek's ``rope_interleave`` (default ``True``: neighbours) where vLLM
#: does not. ``"transformers"``: no SGLang class; with the default
#: ``model_impl`` it falls back to the Transformers implementation
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

#: DeepSeek-V3's attention in transformers: ``rope_interleave`` (default
#: ``True``) picks neighbour pairs; vLLM passes ``is_neox_style=False`` whatever
#: it says, SGLang reads it.
DEEPSEEK_FAMILY = {"deepseek_v3", "kimi_k2", "deepseek_v32"}


def transformers_pairs(config: Mapping) -> str:
    """transformers 4.57.6's pair layout for ``config``: ``"neighbours"`` or
    ``"halves"`` (see :data:`TRANSFORMERS_NEIGHBOURS`; DeepSeek's
    ``rope_interleave``, default ``True``, is read)."""
    model_type = config.get("model_type")
    if model_type in DEEPSEEK_FAMILY:
        return "neighbours" if config.get("rope_interleave", True) else "halves"
    return "neighbours" if model_type in TRANSFORMERS_NEIGHBOURS else "halves"


def _engine_pairs(table: Mapping, permuted: set, config: Mapping, engine: str) -> tuple:
    model_type = config.get("model_type")
    if model_type not in table:
        raise ValueError(f"model_type {model_type!r} is not in the {engine} pair table; "
                         f"known: {', '.join(sorted(table))}")
    neox, path, line, code = table[model_type]
    if neox == "rope_interleave":
        neox = not config.get("rope_interleave", True)
    if neox in ("transformers", "none", None):
        rotated = {"transformers": transformers_pairs(config), "none": "no RoPE",
                   None: f"no {engine} model"}[neox]
        return neox, rotated, path, line, code
    rotated = "halves" if neox else "neighbours"
    # NEOX on rows permuted at load = neighbours of the checkpoint's rows
    on_checkpoint = ({"halves": "neighbours", "neighbours": "halves"}[rotated]
                     if model_type in permuted else rotated)
    return neox, on_checkpoint, path, line, code


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


def sglang_pairs(config: Mapping) -> dict:
    """SGLang's pair layout for a ``config.json`` (:data:`SGLANG_PAIRS`), as
    :func:`vllm_pairs`."""
    neox, pairs, path, line, code = _engine_pairs(SGLANG_PAIRS, SGLANG_LOAD_PERMUTED,
                                                  config, "sglang")
    return {"is_neox_style": neox, "checkpoint_pairs": pairs,
            "source": _sgl(path, f"line {line}: {code}" if line else code)}


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


# ---- vLLM: its rotary-embedding package, run --------------------------------
#
# vLLM 0.33.0's vllm/model_executor/layers/rotary_embedding/ is vendored
# unchanged (posenc_lib/_vendor/vllm) and run here: ``get_rope`` picks the
# class and builds the cos/sin cache with vLLM's own code. What is transcribed
# is only what vLLM's *model files* pass to ``get_rope`` (:func:`vllm_get_rope_args`).

def _vllm_rope_parameters(config: Mapping) -> tuple[dict, int]:
    """The ``rope_parameters`` dict vLLM 0.33.0 hands to ``get_rope`` for a
    transformers-4.x ``config.json`` (vLLM runs transformers 5, whose
    ``standardize_rope_params`` merges ``rope_theta``, the rope block and
    ``partial_rotary_factor`` into one dict: vllm/transformers_utils/config.py
    lines 668-687 of 0.33.0), and the rotary dimension."""
    from ...config_reader import parse_rope_config

    rope = parse_rope_config(config)
    params = {"rope_type": rope.rope_type, "rope_theta": rope.base, **rope.params}
    if params["rope_type"] == "default" and config.get("model_type") in ("qwen2_5_vl",
                                                                       "qwen3_vl"):
        text = config.get("text_config", config)
        section = ((text.get("rope_scaling") or {}).get("mrope_section")
                   or (text.get("rope_parameters") or {}).get("mrope_section"))
        if section:
            params["mrope_section"] = list(section)
            params["mrope_interleaved"] = config.get("model_type") == "qwen3_vl"
    return params, rope.dim


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
    max_position = text.get("max_position_embeddings") or _default_max_position(config)
    args = {"head_size": dim, "max_position": int(max_position), "is_neox_style": neox,
            "rope_parameters": params, "dtype": torch.float32, "logit_scale": 1.0}
    if model_type == "gpt_oss":
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


def _default_max_position(config: Mapping) -> int:
    from ...config_reader import parse_rope_config

    return parse_rope_config(config).max_position_embeddings


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


# ---- SGLang: rotary-embedding modules ---------------------------------------
#
# sglang 0.5.23's sglang/srt/layers/rotary_embedding/ is vendored unchanged
# (posenc_lib/_vendor/sglang) and run here: ``get_rope`` picks the class and
# builds the cos/sin cache with SGLang's own code, on its CPU engine's
# ``forward_native`` path. What is transcribed is only what SGLang's *model
# files* pass to ``get_rope`` (:func:`sglang_get_rope_args`); every line
# number below refers to the same wheel (:data:`SGLANG`).

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


# ---- the side-by-side facts -------------------------------------------------

#: Per rope type, what each engine does; every entry is cited. Keys: the
#: six questions of the recipe: ``frequencies``, ``factor`` (what multiplies
#: cos and sin, hence the logits by its square), ``when`` (when the
#: frequencies change during generation).
_R = "layers/rotary_embedding/"

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
    engine's own code path: vLLM's vendored code (:func:`vllm_rope`),
    llama.cpp's converter, loader and ggml kernel (:func:`llama_cpp_params`,
    transcribed at 0c1e57098 and run by ``make engines``), SGLang's vendored
    code (:func:`sglang_rope`), transformers 4.57.6 itself.

    Args:
        config: a parsed ``config.json``.
        engine: one of :data:`ENGINES`.
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
    a few times), and the largest ratio."""
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
        engine: one of :data:`ENGINES`.
        max_model_len, n_ctx: see :func:`engine_rope`.

    Returns:
        dict with ``rope_type``, ``pairs``, ``factor`` (a float, or ``None``
        without RoPE), ``logit_scale``, ``when``, ``can_shift`` (llama.cpp's
        answer, :func:`llama_cpp_can_shift`; ``None`` for the other engines:
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


# ---- KV-cache sizing per engine (vLLM cache dtypes, llama.cpp's caches) -----

#: Where vLLM 0.33.0 sizes its KV cache (the wheel of :data:`VLLM_MODELS`,
#: commit ``4ba787ec9``; ``scripts/engines/vllm_kv_pages.py`` runs these
#: classes and stores their page sizes in ``results/engines.json``).
VLLM_KV_SOURCE = (
    "vllm==0.33.0 (4ba787ec9): vllm/v1/kv_cache_interface.py 552-616 "
    "(AttentionSpec: page = block_size x num_kv_heads x (head_size + head_size_v) x "
    "dtype size), 643-648 (FullAttentionSpec.max_memory_usage_bytes: cdiv(max_model_len, "
    "block_size) pages), 729-747 (MLAAttentionSpec: head_size_v = 0), 918-955 "
    "(SlidingWindowSpec: cdiv(min(window - 1 + in-flight tokens, max_model_len), "
    "block_size) + 1 pages); vllm/model_executor/layers/attention/mla_attention.py "
    "480-485 (head_size = kv_lora_rank + qk_rope_head_dim, num_kv_heads = 1) and "
    "1371-1388 (MLAAttentionSpec with that head); vllm/utils/torch_utils.py 40-57 "
    "(fp8, fp8_e4m3, fp8_e5m2 -> torch.uint8: 1 byte) and 519-525 ('auto' = the "
    "model's dtype)")

#: vLLM ``--kv-cache-dtype`` values sized here and their bytes per value
#: (``STR_DTYPE_TO_TORCH_DTYPE``, see :data:`VLLM_KV_SOURCE`); ``"auto"`` is
#: the model's dtype (2 bytes for bfloat16/float16, 4 for float32).
VLLM_CACHE_DTYPES = {"auto": None, "bfloat16": 2, "float16": 2, "half": 2,
                     "float32": 4, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}

#: ggml's cache types that llama.cpp's ``-ctk``/``-ctv`` accept
#: (common/arg.cpp 304-314) as (values per block, bytes per block): ggml.c's
#: ``type_traits`` (663-892) with the block structs of ggml-common.h (q4_0
#: 194-199: fp16 scale + 16 bytes; q4_1 201-212; q5_0 229-235; q5_1 237-249;
#: q8_0 251-256: fp16 scale + 32 bytes; iq4_nl 447-452).
GGML_TYPE_SIZES = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34),
                   "q4_0": (32, 18), "q4_1": (32, 20), "iq4_nl": (32, 18),
                   "q5_0": (32, 22), "q5_1": (32, 24)}

#: Model types whose llama.cpp loader sets a sliding-window (or chunked)
#: cache, so that ``create_memory`` builds ``llama_kv_cache_iswa``
#: (src/models/<arch>.cpp at :data:`LLAMA_CPP`: gemma2.cpp 4-6, gemma3.cpp 4-11,
#: gemma3n.cpp 4-11, cohere2.cpp 4-11, exaone4.cpp 5-7, openai-moe.cpp 6-9,
#: olmo2.cpp 6-9 (OLMo 3), llama4.cpp 8-19 (chunked, n_swa fixed at 8192 whatever
#: attention_chunk_size says)). Other loaders ignore a
#: config's ``sliding_window`` (phi3.cpp 13-23 turns it off) and cache every
#: layer in full.
LLAMA_CPP_SWA = frozenset({"gemma2", "gemma3", "gemma3n", "cohere2", "exaone4",
                           "gpt_oss", "olmo3", "llama4"})

#: Where llama.cpp's cache sizes come from (:data:`LLAMA_CPP`).
LLAMA_CPP_KV_SOURCE = (
    f"{LLAMA_CPP['repo']}@{LLAMA_CPP['commit']} ({LLAMA_CPP['package']}): "
    "src/llama-context.cpp 246-248 (n_batch = min(n_ctx, n_batch), n_ubatch = "
    "min(n_batch, n_ubatch)), 290-296 (n_ctx padded to 256), 3835-3851 (MLA needs "
    "one K/V type; a quantized V cache needs flash attention); src/llama-model.cpp "
    "2352-2880 (create_memory: kv_size = n_ctx_seq, n_pad 1; iSWA for SWA models; "
    "hybrids cache their attention layers only); src/llama-kv-cache-iswa.cpp 70-80 "
    "(SWA cache: pad256(min(n_ctx, n_swa + n_ubatch)) cells, or n_ctx with swa_full); "
    "src/llama-kv-cache.cpp 209-234 (per layer K = row(type_k, n_embd_k_gqa) x cells, "
    "V likewise, no V for MLA); conversion/deepseek.py 326, 349-353 (DEEPSEEK2: 1 KV "
    "head, key_length = kv_lora_rank + qk_rope_head_dim)")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def ggml_row_size(cache_type: str, n: int) -> int:
    """Bytes of ``n`` values of a ggml cache type (``ggml_row_size``); ``n``
    must be a multiple of the type's block (32 for the quantized types).

    Raises:
        ValueError: naming ``cache_type`` (with the known ones) or ``n``.
    """
    if cache_type not in GGML_TYPE_SIZES:
        raise ValueError(f"cache_type must be one of {', '.join(GGML_TYPE_SIZES)} "
                         f"(llama.cpp's -ctk/-ctv), got {cache_type!r}")
    block, size = GGML_TYPE_SIZES[cache_type]
    n = _validate.positive_int("n", n)
    if n % block:
        raise ValueError(f"n must be a multiple of {block} for {cache_type} (ggml "
                         f"quantizes rows in blocks of {block}), got {n}")
    return n // block * size


def engine_kv_cache_bytes(config: Mapping, engine: str, *, n_ctx: int,
                          cache_dtype: str | None = None,
                          cache_dtype_v: str | None = None,
                          swa_full: bool = False, n_batch: int = 2048,
                          n_ubatch: int = 512, flash_attn: bool = True,
                          block_size: int = 16, scheduled_tokens: int = 1) -> dict:
    """The KV cache one sequence of ``n_ctx`` tokens holds in ``engine``.

    * ``"transformers"``: :func:`posenc_lib.serving.kv_cache_bytes` (4.57.6's
      caches); ``cache_dtype`` ``"bfloat16"``/``"float16"`` (default) or
      ``"float32"``.
    * ``"vllm"`` (vLLM 0.33.0, :data:`VLLM_KV_SOURCE`): ``cache_dtype`` is
      ``--kv-cache-dtype`` (:data:`VLLM_CACHE_DTYPES`; ``fp8*`` = 1 byte per
      value; default ``"auto"``). Pages of ``block_size`` tokens per layer:
      ``block_size x kv_heads x (head_size + head_size_v) x bytes``; MLA caches
      the latent, ``kv_lora_rank + qk_rope_head_dim`` values on one head with no
      separate V. The request's blocks are
      :func:`posenc_lib.serving.kv_cache_bytes` with ``engine="vllm"`` (the
      hybrid allocator: a sliding layer holds ``window - 1 + scheduled_tokens``
      tokens' blocks + 1, a full one ``cdiv(n_ctx, block_size)``).
    * ``"llama.cpp"`` (:data:`LLAMA_CPP_KV_SOURCE`): ``cache_dtype`` is ``-ctk``
      (and ``-ctv`` unless ``cache_dtype_v``), a key of
      :data:`GGML_TYPE_SIZES` (default ``"f16"``). The context pads ``n_ctx`` to
      a multiple of 256 cells; every KV layer holds ``cells x row(type_k,
      kv_heads x key_dim)`` for K and likewise V; DeepSeek-2's MLA (DeepSeek
      V2/V3, Kimi K2) holds ONE tensor per layer, K of ``kv_lora_rank +
      qk_rope_head_dim`` values on one head (V is read from it); the layers of
      a sliding-window model (:data:`LLAMA_CPP_SWA`) hold ``pad256(min(cells,
      window + n_ubatch))`` cells, or all of them with ``swa_full`` (the
      C API's and llama-cpp-python's default is ``swa_full=True``; llama-cli and
      llama-server default to ``False``). ``n_ubatch`` is ``min(n_ctx,
      n_batch, n_ubatch)`` as the context computes it. One sequence
      (``n_seq_max = 1``). Recurrent state (Mamba, gated DeltaNet, LFM2's
      convolutions) is kept apart in float32 and not sized here.

    Args:
        config: a parsed ``config.json``.
        engine: ``"transformers"``, ``"vllm"`` or ``"llama.cpp"``.
        n_ctx: the context (tokens).
        cache_dtype: the engine's cache type (see above).
        cache_dtype_v: llama.cpp's ``-ctv`` when it differs from ``-ctk``.
        swa_full: llama.cpp's ``--swa-full``.
        n_batch, n_ubatch: llama.cpp's logical and physical batch.
        flash_attn: llama.cpp's flash attention (a quantized V cache needs it).
        block_size, scheduled_tokens: vLLM's block size and tokens in flight.

    Returns:
        dict with ``engine``, ``cache_dtype`` (and ``cache_dtype_v``),
        ``n_ctx``, ``bytes`` (the whole cache), ``k_bytes`` / ``v_bytes``
        (llama.cpp), ``by_layer_type`` (per type: ``layers``, ``cells`` or
        ``tokens``, ``k_row_bytes``/``v_row_bytes`` or ``page_size_bytes``,
        ``bytes``), ``formula``, ``notes`` and ``source``.

    Raises:
        ValueError: naming the bad parameter: an unknown ``engine`` or
            ``cache_dtype``, a ``cache_dtype_v`` outside llama.cpp, MLA with two
            cache types, a quantized V cache without ``flash_attn``, a row that
            is not a whole number of quantization blocks, or a model llama.cpp
            sizes with another cache (DeepSeek-V3.2's indexer).
    """
    if engine not in ("transformers", "vllm", "llama.cpp"):
        raise ValueError(f"engine must be one of transformers, vllm, llama.cpp, got "
                         f"{engine!r} (SGLang's KV sizing is not modelled)")
    n_ctx = _validate.length("n_ctx", n_ctx)
    if cache_dtype_v is not None and engine != "llama.cpp":
        raise ValueError("cache_dtype_v is llama.cpp's -ctv; vLLM and transformers "
                         "use one cache_dtype for keys and values")
    if engine == "transformers":
        sizes = {None: 2, "bfloat16": 2, "float16": 2, "float32": 4}
        if not isinstance(cache_dtype, str | None) or cache_dtype not in sizes:
            raise ValueError("cache_dtype must be bfloat16, float16 or float32 for "
                             f"transformers, got {cache_dtype!r}")
        return _kv_from_serving(config, "transformers", n_ctx, sizes[cache_dtype],
                                cache_dtype or "bfloat16")
    if engine == "vllm":
        return _vllm_kv(config, n_ctx, cache_dtype or "auto", block_size,
                        scheduled_tokens)
    return _llama_cpp_kv(config, n_ctx, cache_dtype or "f16",
                         cache_dtype_v or cache_dtype or "f16", swa_full, n_batch,
                         n_ubatch, flash_attn)


def _kv_from_serving(config, engine, n_ctx, b, dtype, **kw) -> dict:
    from ... import serving  # serving imports nothing from here

    sized = serving.kv_cache_bytes(config, bytes_per_value=b, length=n_ctx,
                                   engine=engine, **kw)
    if sized is None:
        raise ValueError("config must state num_hidden_layers or layer_types to "
                         "size a KV cache")
    by_type = {kind: {"layers": info["layers"], "tokens": info["tokens_at_length"],
                      "bytes": info["bytes_per_token"] * info["tokens_at_length"]}
               for kind, info in sized["by_layer_type"].items() if info["kv"]}
    return {"engine": engine, "cache_dtype": dtype, "bytes_per_value": b,
            "n_ctx": n_ctx, "bytes": sized["bytes_at_length"],
            "bytes_per_token": sized["bytes_per_token"], "by_layer_type": by_type,
            "formula": sized["formula"], "fixed_state": sized["fixed_state"],
            "notes": [], "source": sized.get("source", "transformers 4.57.6's caches "
                                                      "(posenc_lib.serving)")}


def _vllm_kv(config, n_ctx, cache_dtype, block_size, scheduled_tokens) -> dict:
    if not isinstance(cache_dtype, str) or cache_dtype not in VLLM_CACHE_DTYPES:
        raise ValueError(f"cache_dtype must be one of {', '.join(VLLM_CACHE_DTYPES)} "
                         f"(vLLM's --kv-cache-dtype sized here), got {cache_dtype!r}")
    b = VLLM_CACHE_DTYPES[cache_dtype]
    if b is None:  # "auto": the model's dtype
        text = config.get("text_config") or config
        dtype = str(text.get("torch_dtype") or text.get("dtype")
                    or config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        b = 4 if dtype.endswith("float32") else 2
    block_size = _validate.positive_int("block_size", block_size)
    out = _kv_from_serving(config, "vllm", n_ctx, b, cache_dtype,
                           block_size=block_size, scheduled_tokens=scheduled_tokens)
    sized = out.pop("by_layer_type")
    per_layer = out["bytes_per_token"] // max(1, sum(i["layers"] for i in sized.values()))
    out["by_layer_type"] = {
        kind: {**info, "page_size_bytes": block_size * per_layer,
               "blocks": info["tokens"] // block_size}
        for kind, info in sized.items()}
    out.update(block_size=block_size, scheduled_tokens=scheduled_tokens,
               source=VLLM_KV_SOURCE)
    if cache_dtype.startswith("fp8"):
        out["notes"].append(f"{cache_dtype}: one byte per cached value (torch.uint8), "
                            f"with per-layer scales outside the pages")
    return out


def _llama_cpp_kv(config, n_ctx, type_k, type_v, swa_full, n_batch, n_ubatch,
                  flash_attn) -> dict:
    from ... import config_reader, serving

    for name, value in (("cache_dtype", type_k), ("cache_dtype_v", type_v)):
        if not isinstance(value, str) or value not in GGML_TYPE_SIZES:
            raise ValueError(f"{name} must be one of {', '.join(GGML_TYPE_SIZES)} "
                             f"(llama.cpp's -ctk/-ctv), got {value!r}")
    n_batch = _validate.positive_int("n_batch", n_batch)
    n_ubatch = _validate.positive_int("n_ubatch", n_ubatch)
    text, model_type = config_reader._text_config(config)
    model_type = (model_type or "").removesuffix("_text")
    if "deepseek_v32" in (model_type, config.get("model_type")) or "index_topk" in text:
        raise ValueError("config: llama.cpp caches DeepSeek-V3.2 in llama_kv_cache_dsa "
                         "(MLA plus an indexer key cache), which is not sized here")
    if GGML_TYPE_SIZES[type_v][0] > 1 and not flash_attn:
        raise ValueError(f"flash_attn must be True for a quantized V cache "
                         f"({type_v}): llama.cpp refuses one without flash attention")
    if config_reader.num_layers(text) is None and text.get("layer_types") is None:
        raise ValueError("config must state num_hidden_layers or layer_types to "
                         "size a KV cache")
    head = serving.cache_head(config)
    mla = head.get("mla")
    if mla is not None and type_k != type_v:
        raise ValueError(f"cache_dtype_v must equal cache_dtype for an MLA model: "
                         f"llama.cpp refuses K {type_k} with V {type_v}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ... import per_layer
        layout = per_layer.layer_layout(config)
    shared = text.get("num_kv_shared_layers") or 0
    kinds = [(x.attention, x.window) for x in layout]
    if shared:  # Gemma 3n: the last layers reuse an earlier layer's cache
        kinds = kinds[:len(kinds) - shared] + [("shared_kv", None)] * min(shared,
                                                                          len(kinds))
    cells = _cdiv(n_ctx, 256) * 256
    ubatch = min(n_ctx, n_batch, n_ubatch)
    if mla is not None:
        k_n, v_n = mla["kv_lora_rank"] + mla["qk_rope_head_dim"], 0
        formula = (f"cells x layers x (kv_lora_rank {mla['kv_lora_rank']} + "
                   f"qk_rope_head_dim {mla['qk_rope_head_dim']}) values of {type_k} "
                   f"(K only: DeepSeek-2's MLA reads V from the cached latent)")
    else:
        k_n, v_n = head["kv_heads"] * head["key_dim"], head["kv_heads"] * head["value_dim"]
        formula = (f"cells x layers x ({head['kv_heads']} KV heads x {head['key_dim']} "
                   f"of {type_k} + {head['kv_heads']} x {head['value_dim']} of {type_v})")
    k_row = ggml_row_size(type_k, k_n)
    v_row = ggml_row_size(type_v, v_n) if v_n else 0
    notes = []
    swa_model = model_type in LLAMA_CPP_SWA
    by_type: dict = {}
    for kind, window in kinds:
        if kind in serving.NO_KV:
            continue
        if kind in ("sliding_attention", "chunked_attention") and not swa_model:
            note = (f"llama.cpp's {model_type or 'this'} loader sets no sliding window: "
                    f"its {kind} layers are cached in full")
            if note not in notes:
                notes.append(note)
            kind, window = "full_attention", None
        if kind == "chunked_attention" and model_type == "llama4":
            window = 8192  # llama4.cpp 13-14: n_swa = 8192, not read from the GGUF
        if kind in ("sliding_attention", "chunked_attention"):
            n = cells if swa_full else min(cells, _cdiv(min(cells, window + ubatch), 256)
                                           * 256)
        else:
            n = cells
        info = by_type.setdefault(kind, {"layers": 0, "cells": n, "window": window,
                                         "k_row_bytes": k_row, "v_row_bytes": v_row,
                                         "bytes": 0})
        info["layers"] += 1
        info["bytes"] += n * (k_row + v_row)
    if any(kind in serving.NO_KV and kind != "shared_kv" for kind, _ in kinds):
        notes.append("layers without attention keep a recurrent state (float32), not "
                     "sized here")
    k_bytes = sum(i["layers"] * i["cells"] * i["k_row_bytes"] for i in by_type.values())
    v_bytes = sum(i["layers"] * i["cells"] * i["v_row_bytes"] for i in by_type.values())
    return {"engine": "llama.cpp", "cache_dtype": type_k, "cache_dtype_v": type_v,
            "n_ctx": n_ctx, "cells": cells, "n_ubatch": ubatch, "swa_full": swa_full,
            "bytes": k_bytes + v_bytes, "k_bytes": k_bytes, "v_bytes": v_bytes,
            "by_layer_type": by_type, "formula": formula, "notes": notes,
            "source": LLAMA_CPP_KV_SOURCE}
