"""What the engine modules share: the pinned trees they cite, the engines'
names, and the conventions more than one engine reads.

* the sources: :data:`LLAMA_CPP`, :data:`VLLM`, :data:`VLLM_MODELS`,
  :data:`SGLANG` (every ``lines`` in the engine modules refers to these) and
  the helpers that format a citation into them;
* :data:`ENGINES`, the engines the side-by-side compares;
* transformers' own pair layout (:func:`transformers_pairs`), which vLLM's
  Transformers backend and SGLang's Transformers fallback inherit, and the
  reader of the vLLM/SGLang pair tables;
* the ``rope_parameters`` dict that vLLM and SGLang both receive from
  transformers 5 (``_vllm_rope_parameters``).
"""

from __future__ import annotations

from collections.abc import Mapping

#: The llama.cpp tree that ``make engines`` builds and that the llama.cpp
#: transcriptions and facts below cite.
LLAMA_CPP = {"package": "llama-cpp-python==0.3.36", "repo": "ggml-org/llama.cpp",
             "commit": "0c1e57098"}

_VR = "vllm/model_executor/layers/rotary_embedding/"
#: vLLM's rotary-embedding files, vendored unchanged from the vllm 0.33.0
#: wheel (posenc_lib/_vendor/vllm) and run; every ``lines`` below refers to
#: them (the package ``vllm/model_executor/layers/rotary_embedding/``).
VLLM = {
    "init": _VR + "__init__.py", "base": _VR + "base.py", "common": _VR + "common.py",
    "yarn": _VR + "yarn_scaling_rope.py", "deepseek": _VR + "deepseek_scaling_rope.py",
    "dynamic": _VR + "dynamic_ntk_scaling_rope.py", "linear": _VR + "linear_scaling_rope.py",
    "llama3": _VR + "llama3_rope.py", "longrope": _VR + "phi3_long_rope_scaled_rope.py",
    "mrope": _VR + "mrope.py",
}

#: vLLM's model files, read in the source distribution vllm-0.33.0.tar.gz from
#: PyPI (sha256 f4c33c25...4c74112); its vllm/_version.py names the commit
#: ``g4ba787ec9``. Every line of :data:`~.vllm.VLLM_PAIRS` refers to it.
VLLM_MODELS = {"package": "vllm==0.33.0", "repo": "vllm-project/vllm", "commit": "4ba787ec9",
               "sdist_sha256": "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"}

#: SGLang, read in the wheel sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl
#: from PyPI (sha256 00b3cd5b...859937). Its sglang/_version.py records no commit
#: (``commit_id = None``), so the version and the wheel's hash are the citation;
#: paths are those of the package (python/sglang/... in sgl-project/sglang).
SGLANG = {"package": "sglang==0.5.23", "repo": "sgl-project/sglang",
          "wheel_sha256": "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937"}

#: The engines compared side by side (:func:`~.compare.engine_rope`,
#: :func:`~.compare.engine_summary`), transformers 4.57.6 first.
ENGINES = ("transformers", "vllm", "llama.cpp", "sglang")


def _cite(key: str, lines: str) -> str:
    return _vm(VLLM[key], lines)


def _vm(path: str, lines: str) -> str:
    return f"{VLLM_MODELS['repo']} {VLLM_MODELS['package']} (commit {VLLM_MODELS['commit']}) {path} {lines}"


def _sgl(path: str, lines: str) -> str:
    return f"{SGLANG['repo']} {SGLANG['package']} (PyPI wheel) sglang/srt/{path} {lines}"


def _lcpp(path: str, lines: str) -> str:
    return f"{LLAMA_CPP['repo']} {path}@{LLAMA_CPP['commit']} {lines}"


# ---- transformers' pair layout, and the engines' pair tables read ------------

#: The models of the table that pair neighbours in transformers 4.57.6, in
#: their modelling code (DeepSeek-V3 with ``rope_interleave`` true, its
#: published default; ERNIE 4.5's ``rotate_half`` takes ``x[..., 0::2]`` and
#: ``x[..., 1::2]``); every other model rotates halves (``rotate_half``).
TRANSFORMERS_NEIGHBOURS = {"deepseek_v3", "ernie4_5",
                           # read as deepseek_v3 (no 4.57 class of their own)
                           "kimi_k2", "deepseek_v32",
                           # Llama4TextAttention rotates complex pairs (2i, 2i+1);
                           # llama.cpp's Llama4Model keeps undo_permute = False
                           "llama4"}

#: The models read as DeepSeek-V3, whose attention in transformers picks
#: neighbour pairs with ``rope_interleave`` (default ``True``); vLLM passes
#: ``is_neox_style=False`` whatever it says, SGLang reads it.
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


# ---- transformers 5's rope_parameters, as vLLM and SGLang receive them --------

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


def _default_max_position(config: Mapping) -> int:
    from ...config_reader import parse_rope_config

    return parse_rope_config(config).max_position_embeddings
