"""What three inference engines do with a model's RoPE configuration.

transformers 4.57.6 is what :mod:`posenc_lib.scaling` reproduces. For each
engine this package computes what that engine computes, from one pinned tree
per engine, one module per engine:

* :mod:`~posenc_lib.tools.engines.vllm`: **vLLM 0.33.0** (PyPI wheel, commit
  ``4ba787ec9``): its rotary-embedding package is vendored unchanged in
  ``posenc_lib/_vendor/vllm`` and *run* (:func:`~.vllm.vllm_rope`: ``get_rope``
  builds the class and its cos/sin cache); only what the model files pass to
  ``get_rope`` is transcribed (:func:`~.vllm.vllm_get_rope_args`,
  :data:`~.vllm.VLLM_PAIRS`).
* :mod:`~posenc_lib.tools.engines.sglang`: **SGLang 0.5.23** (PyPI wheel): its
  rotary-embedding package is vendored unchanged in
  ``posenc_lib/_vendor/sglang`` and *run* (:func:`~.sglang.sglang_rope`); only
  what the model files pass to ``get_rope`` is transcribed
  (:func:`~.sglang.sglang_get_rope_args`, :data:`~.sglang.SGLANG_PAIRS`).
* :mod:`~posenc_lib.tools.engines.llama_cpp`: **llama.cpp at 0c1e57098**, the
  tree ``llama-cpp-python`` 0.3.36 vendors: transcriptions of its converter,
  loader and ggml's CPU kernel (``llama_cpp_*``); ``make engines`` runs
  llama.cpp itself and records the run in ``results/engines.json``.

:mod:`~posenc_lib.tools.engines.compare` puts them side by side:
:func:`~.compare.engine_rope` / :func:`~.compare.engine_inv_freq` give each
engine's frequencies and factor from that engine's code path;
:func:`~.compare.engine_summary` adds the pair layout, the schedule and the
difference from transformers; :data:`~.compare.FACTS` holds the per-engine
facts, each cited with file, release or commit and lines.
:mod:`~posenc_lib.tools.engines.kv_cache` sizes each engine's KV cache
(:func:`~.kv_cache.engine_kv_cache_bytes`), and
:mod:`~posenc_lib.tools.engines.common` holds what the engines share: the
sources below and transformers' own pair layout.

Sources (every ``lines`` in these modules refers to these):

* :data:`~.common.VLLM`, :data:`~.common.VLLM_MODELS`: the vllm 0.33.0 wheel
  and source distribution (one release; its ``vllm/_version.py`` names
  ``g4ba787ec9``).
* :data:`~.common.SGLANG`: the sglang 0.5.23 wheel.
* :data:`~.common.LLAMA_CPP`: ggml-org/llama.cpp at ``0c1e57098``
  (llama-cpp-python 0.3.36's CHANGELOG: "update llama.cpp to
  ggml-org/llama.cpp@0c1e57098").

Every public name of the submodules is re-exported here
(``from posenc_lib.tools import engines; engines.engine_summary(...)``). To
replace a function in a test, patch the submodule that calls it (for example
``engines.compare.vllm_rope`` for :func:`~.compare.engine_rope`), not this
package.
"""

from .common import (
    DEEPSEEK_FAMILY,
    ENGINES,
    LLAMA_CPP,
    SGLANG,
    TRANSFORMERS_NEIGHBOURS,
    VLLM,
    VLLM_MODELS,
    transformers_pairs,
)
from .compare import (
    FACTS,
    ROPE_TYPES,
    engine_inv_freq,
    engine_rope,
    engine_summary,
    frequency_difference,
)
from .kv_cache import (
    GGML_TYPE_SIZES,
    LLAMA_CPP_KV_SOURCE,
    LLAMA_CPP_SWA,
    VLLM_CACHE_DTYPES,
    VLLM_KV_SOURCE,
    engine_kv_cache_bytes,
    ggml_row_size,
)
from .llama_cpp import (
    LLAMA_CPP_PAIRS,
    LLAMA_CPP_YARN_LOG_MUL_ARCHS,
    PERMUTED,
    convert_permute,
    llama_cpp_can_shift,
    llama_cpp_corr_dims,
    llama_cpp_inv_freq,
    llama_cpp_llama3_factors,
    llama_cpp_net_factor,
    llama_cpp_pairs,
    llama_cpp_params,
    llama_cpp_rope,
    llama_cpp_yarn_attn_factor,
)
from .sglang import (
    SGLANG_LOAD_PERMUTED,
    SGLANG_PAIRS,
    SGLANG_ROPE_CALLS,
    sglang_get_rope_args,
    sglang_pairs,
    sglang_rope,
)
from .vllm import (
    VLLM_LOAD_PERMUTED,
    EngineFailure,
    VLLM_PAIRS,
    vllm_get_rope_args,
    vllm_pairs,
    vllm_permute_qk_for_rotary,
    vllm_rope,
)

__all__ = [
    # common: the sources, the engines, transformers' pair layout
    "LLAMA_CPP", "VLLM", "VLLM_MODELS", "SGLANG", "ENGINES", "TRANSFORMERS_NEIGHBOURS",
    "DEEPSEEK_FAMILY", "transformers_pairs",
    # llama_cpp
    "LLAMA_CPP_PAIRS", "PERMUTED", "llama_cpp_pairs", "convert_permute",
    "llama_cpp_corr_dims", "llama_cpp_rope", "llama_cpp_yarn_attn_factor",
    "llama_cpp_net_factor", "LLAMA_CPP_YARN_LOG_MUL_ARCHS", "llama_cpp_params",
    "llama_cpp_llama3_factors", "llama_cpp_inv_freq", "llama_cpp_can_shift",
    # vllm
    "VLLM_PAIRS", "VLLM_LOAD_PERMUTED", "vllm_pairs", "vllm_permute_qk_for_rotary",
    "vllm_get_rope_args", "vllm_rope", "EngineFailure",
    # sglang
    "SGLANG_PAIRS", "SGLANG_LOAD_PERMUTED", "sglang_pairs", "SGLANG_ROPE_CALLS",
    "sglang_get_rope_args", "sglang_rope",
    # compare: the side by side
    "FACTS", "ROPE_TYPES", "engine_rope", "engine_inv_freq", "frequency_difference",
    "engine_summary",
    # kv_cache
    "VLLM_KV_SOURCE", "VLLM_CACHE_DTYPES", "GGML_TYPE_SIZES", "LLAMA_CPP_SWA",
    "LLAMA_CPP_KV_SOURCE", "ggml_row_size", "engine_kv_cache_bytes",
]
