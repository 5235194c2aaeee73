"""What three inference engines do with a model's RoPE configuration.

transformers 4.57.6 is what :mod:`posenc_lib.scaling` reproduces. This module
holds, for vLLM, SGLang and llama.cpp, **transcriptions** of the engine code that
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
* :data:`VLLM_MODELS`: vLLM's model files (the pair layout each passes to
  ``get_rope``), read in the vllm 0.33.0 source distribution.
* :data:`SGLANG`: SGLang's rotary-embedding package and model files, read in
  the sglang 0.5.23 wheel.
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
    path, commit = VLLM[key]
    return f"vllm-project/vllm {path}@{commit[:12]} {lines}"


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


# ---- SGLang: rotary-embedding modules ---------------------------------------
#
# Transcriptions of sglang 0.5.23 (:data:`SGLANG`), package
# sglang/srt/layers/rotary_embedding/, not a run: SGLang needs its CUDA
# kernels package and is not installed here.

def sglang_inv_freq(rotary_dim: int, base: float) -> Tensor:
    """Transcription of ``RotaryEmbedding._compute_inv_freq`` (base.py lines
    233-251 of sglang 0.5.23): ``(rotary_dim/2,)`` float32."""
    return 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))


def sglang_default_cache(rotary_dim: int, max_position_embeddings: int, base: float, *,
                         cast_to: torch.dtype | None = None) -> Tensor:
    """Transcription of ``RotaryEmbedding._compute_cos_sin_cache`` (base.py
    lines 253-266) and of the cast in ``__init__`` (lines 119-120): the cache
    is built in float32 and kept so on CUDA, HIP and XPU; elsewhere (CPU, NPU,
    MPS) it is cast to the model's dtype unless ``SGLANG_ROPE_CACHE_FP32`` is
    set. ``cast_to`` is that dtype (``None``: the float32 cache).

    Returns:
        ``(max_position_embeddings, rotary_dim)``, cos then sin.
    """
    inv_freq = sglang_inv_freq(rotary_dim, base)
    t = torch.arange(0, max_position_embeddings, dtype=torch.float)
    freqs = torch.einsum("i,j -> ij", t, inv_freq)
    cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1)
    return cache if cast_to is None else cache.to(cast_to)


def sglang_forward_native(positions: Tensor, query: Tensor, key: Tensor,
                          cos_sin_cache: Tensor, *, head_size: int, rotary_dim: int,
                          is_neox_style: bool = True,
                          offsets: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Transcription of ``RotaryEmbedding.forward_native`` (base.py lines
    321-361): add ``offsets``, look up ``cos_sin_cache[positions]``, rotate the
    first ``rotary_dim`` features of every head with ``apply_rotary_emb``
    (utils.py lines 35-62, the same text as vLLM's ``apply_rotary_emb_torch``,
    so :func:`vllm_apply_rotary_emb_torch` runs it).

    Args:
        positions: ``(tokens,)``; query, key: ``(tokens, heads * head_size)``;
        cos_sin_cache: ``(max_positions, rotary_dim)``, cos then sin.
    """
    if offsets is not None:
        positions = positions + offsets
    positions = positions.flatten()
    num_tokens = positions.shape[0]
    cos, sin = cos_sin_cache.index_select(0, positions).chunk(2, dim=-1)
    out = []
    for t in (query, key):
        shape = t.shape
        t = t.view(num_tokens, -1, head_size)
        rot = vllm_apply_rotary_emb_torch(t[..., :rotary_dim], cos, sin, is_neox_style)
        out.append(torch.cat((rot, t[..., rotary_dim:]), dim=-1).reshape(shape))
    return out[0], out[1]


def sglang_linear_cache(rotary_dim: int, max_position_embeddings: int, base: float,
                        scaling_factor: float) -> Tensor:
    """Transcription of ``LinearScalingRotaryEmbedding._compute_cos_sin_cache``
    for one factor (base.py lines 649-681): positions divided by the factor,
    ``max_position_embeddings * scaling_factor`` rows."""
    inv_freq = sglang_inv_freq(rotary_dim, base)
    max_len = max_position_embeddings * scaling_factor
    t = torch.arange(max_len, dtype=torch.float) / scaling_factor
    freqs = torch.einsum("i,j -> ij", t, inv_freq)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1)


def sglang_dynamic_ntk_base(rotary_dim: int, max_position_embeddings: int, base: float,
                            scaling_factor: float) -> tuple[float, int]:
    """Transcription of ``DynamicNTKScalingRotaryEmbedding._compute_cos_sin_cache``
    (rope_variant.py lines 880-893): one static cache of
    ``max_position_embeddings * scaling_factor`` rows whose base is transformers'
    dynamic-NTK base at that full length,
    ``base * (factor^2 - factor + 1)^(d/(d-2))``, for every request, short
    ones included (the bracket vLLM had before its PR #41277).

    Returns:
        ``(base, cache_length)``.
    """
    max_len = max_position_embeddings * scaling_factor
    new_base = base * ((scaling_factor * max_len / max_position_embeddings)
                       - (scaling_factor - 1)) ** (rotary_dim / (rotary_dim - 2))
    return new_base, int(max_len)


def sglang_yarn_kwargs(rope_scaling: Mapping) -> dict:
    """Transcription of ``get_rope``'s YaRN branch (factory.py lines 311-333):
    the keys of the rope block it forwards to ``YaRNScalingRotaryEmbedding``.
    transformers' ``attention_factor`` is not among them, so an explicit one
    is dropped (sglang PR #33558 converts it for one model, Laguna, in
    configs/laguna.py lines 68-78)."""
    kwargs = {k: v for k, v in rope_scaling.items()
              if k in ("extrapolation_factor", "attn_factor", "beta_fast", "beta_slow",
                       "mscale", "mscale_all_dim")}
    kwargs["truncate"] = rope_scaling.get("truncate", True)
    return kwargs


def sglang_yarn(rotary_dim: int, max_position_embeddings: int, base: float,
                scaling_factor: float, *, extrapolation_factor: float = 1,
                attn_factor: float = 1, beta_fast: float = 32, beta_slow: float = 1,
                truncate: bool = True, mscale: float | None = None,
                mscale_all_dim: float | None = None) -> tuple[Tensor, float, int]:
    """Transcription of ``YaRNScalingRotaryEmbedding`` (yarn.py lines 91-180,
    with ``yarn_find_correction_*``, ``yarn_linear_ramp_mask`` and
    ``yarn_get_mscale*`` at lines 15-63). ``max_position_embeddings`` is the
    *original* context (``get_rope`` passes ``original_max_position_embeddings``).

    The factor is the mscale ratio when ``mscale`` and ``mscale_all_dim`` are
    both given (``is not None``; transformers asks that both be non-zero),
    else ``0.1 ln s + 1``, and in both cases is *multiplied* by
    ``attn_factor``; transformers' ``attention_factor`` *replaces* it.

    Returns:
        ``(inv_freq, mscale, num_positions)`` as :func:`vllm_yarn`.
    """
    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if mscale is not None and mscale_all_dim is not None:
        ms = float(get_mscale(scaling_factor, mscale) / get_mscale(scaling_factor, mscale_all_dim))
    else:
        ms = float(get_mscale(scaling_factor))
    ms *= attn_factor
    pos_freqs = base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (scaling_factor * pos_freqs)

    def corr_dim(num_rotations):
        return (rotary_dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))
                ) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(rotary_dim // 2, dtype=torch.float) - low) / (high - low),
                       0, 1)
    inv_freq_mask = (1 - ramp) * extrapolation_factor
    inv_freq = inv_freq_interpolation * (1 - inv_freq_mask) + inv_freq_extrapolation * inv_freq_mask
    return inv_freq, ms, math.ceil(max_position_embeddings * scaling_factor)


def sglang_llama3_inv_freq(rotary_dim: int, base: float, scaling_factor: float,
                           low_freq_factor: float, high_freq_factor: float,
                           orig_max_position: int) -> Tensor:
    """Transcription of ``Llama3RotaryEmbedding._compute_inv_freq``
    (rope_variant.py lines 579-600), float32."""
    inv_freqs = sglang_inv_freq(rotary_dim, base)
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


def sglang_longrope_cache(rotary_dim: int, max_position_embeddings: int,
                          original_max_position_embeddings: int, base: float,
                          short_factor: Sequence[float], long_factor: Sequence[float], *,
                          short_mscale: float | None = None,
                          long_mscale: float | None = None) -> Tensor:
    """Transcription of ``Phi3LongRoPEScaledRotaryEmbedding.__init__``
    (rope_variant.py lines 40-101): the short cache (``original`` rows, short
    factors) followed by the long cache (``max_position_embeddings`` rows, long
    factors), each times its mscale (default ``sqrt(1 + ln s / ln original)``,
    ``s = max_position_embeddings / original``), float32.

    Returns:
        ``(original + max_position_embeddings, rotary_dim)``, cos then sin.
    """
    scale = max_position_embeddings / original_max_position_embeddings
    ms = 1.0 if scale <= 1.0 else math.sqrt(
        1 + math.log(scale) / math.log(original_max_position_embeddings))
    short_mscale = ms if short_mscale is None else short_mscale
    long_mscale = ms if long_mscale is None else long_mscale

    def cache(n, factors, m):
        inv_freq = 1.0 / (torch.tensor(factors, dtype=torch.float32) * (
            base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim)))
        freqs = torch.einsum("i,j -> ij", torch.arange(n, dtype=torch.float), inv_freq)
        return torch.cat((freqs.cos() * m, freqs.sin() * m), dim=-1)

    return torch.cat([cache(original_max_position_embeddings, short_factor, short_mscale),
                      cache(max_position_embeddings, long_factor, long_mscale)], dim=0)


def sglang_longrope_index(positions: Tensor, original_max_position_embeddings: int) -> Tensor:
    """Transcription of the row lookup in ``Phi3LongRoPEScaledRotaryEmbedding.forward``
    (rope_variant.py lines 141-148): if *any* position of the batch exceeds
    ``original``, every token of the batch reads the long cache (row
    ``position + original``); else every token reads the short one.

    Two consequences, both checked in tests/test_engines.py: a short request
    batched with a long one is rotated with the long factors (the question of
    vllm-project/vllm issue #6283, about the same code in vLLM then); and at a
    largest position equal to ``original`` (a sequence of ``original + 1``
    tokens) the short branch is taken, whose cache has only ``original`` rows,
    so that token reads the long cache's row 0, the rotation of position 0.

    Args:
        positions: ``(tokens,)`` integer positions of the whole batch.

    Returns:
        ``(tokens,)`` rows of :func:`sglang_longrope_cache`.
    """
    k = original_max_position_embeddings
    long_prompt_offset = (torch.any(positions > k).float() * torch.full_like(positions, k)).long()
    return positions + long_prompt_offset


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
                 "source": _cite("base", "RotaryEmbedding._compute_inv_freq, _compute_cos_sin_cache")},
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
                 "source": _cite("linear", "LinearScalingRotaryEmbedding._compute_cos_sin_cache")},
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
                                "* factor rows; at the cited commit the bracket is 1: the "
                                "configured base, unscaled",
                 "factor": "1", "when": "never (static)",
                 "source": _cite("dynamic", "DynamicNTKScalingRotaryEmbedding._compute_cos_sin_cache")},
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
                 "source": _cite("llama3", "Llama3RotaryEmbedding._compute_inv_freq")},
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
                 "source": _cite("longrope", "Phi3LongRoPEScaledRotaryEmbedding.__init__, forward")},
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
                 "source": "vllm-project/vllm vllm/model_executor/layers/rotary_embedding/"
                           "mrope.py@dba39a557eab"},
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
        llama.cpp's answer (:func:`llama_cpp_can_shift`); for transformers,
        vLLM and SGLang it is not assessed and reads ``True``. For vLLM and
        SGLang, ``pairs_source`` cites the model file's line that sets the
        layout (:data:`VLLM_PAIRS`, :data:`SGLANG_PAIRS`).

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
        pairs = transformers_pairs(config)
        factor = tf_factor
        can_shift = True
    elif engine in ("vllm", "sglang"):
        layout = (vllm_pairs if engine == "vllm" else sglang_pairs)(config)
        pairs = _describe_pairs(layout, model_type,
                                VLLM_LOAD_PERMUTED if engine == "vllm" else SGLANG_LOAD_PERMUTED)
        factor = tf_factor
        can_shift = True
    if engine == "sglang":
        if rope_type == "yarn":
            p = rope.params
            factor = sglang_yarn(rope.dim, p.get("original_max_position_embeddings")
                                 or rope.max_position_embeddings, rope.base, p["factor"],
                                 **sglang_yarn_kwargs(p))[1]
    elif engine == "vllm":
        if rope_type == "yarn":
            p = rope.params
            factor = vllm_yarn(rope.dim, p.get("original_max_position_embeddings")
                               or rope.max_position_embeddings, rope.base, p["factor"],
                               mscale=p.get("mscale"), mscale_all_dim=p.get("mscale_all_dim"),
                               attention_factor=p.get("attention_factor"))[1]
        can_shift = True
    elif engine == "llama.cpp":
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
    out = {"rope_type": rope_type, "pairs": pairs, "factor": float(factor),
           "when": fact["when"], "can_shift": can_shift, "source": fact["source"]}
    if engine in ("vllm", "sglang"):
        out["pairs_source"] = layout["source"]
    return out
