"""The KV cache one sequence holds in each engine: transformers 4.57.6's
caches (through :mod:`posenc_lib.serving`), vLLM 0.33.0's pages per
``--kv-cache-dtype`` and llama.cpp's per-layer caches per ``-ctk``/``-ctv``
(:func:`engine_kv_cache_bytes`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from ... import _validate
from .common import LLAMA_CPP

# ---- KV-cache sizing per engine (vLLM cache dtypes, llama.cpp's caches) -----

#: Where vLLM 0.33.0 sizes its KV cache (the wheel of :data:`~.common.VLLM_MODELS`,
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
#: (src/models/<arch>.cpp at :data:`~.common.LLAMA_CPP`: gemma2.cpp 4-6,
#: gemma3.cpp 4-11, gemma3n.cpp 4-11, cohere2.cpp 4-11, exaone4.cpp 5-7,
#: openai-moe.cpp 6-9, olmo2.cpp 6-9 (OLMo 3), llama4.cpp 8-19 (chunked, n_swa
#: fixed at 8192 whatever attention_chunk_size says)). Other loaders ignore a
#: config's ``sliding_window`` (phi3.cpp 13-23 turns it off) and cache every
#: layer in full.
LLAMA_CPP_SWA = frozenset({"gemma2", "gemma3", "gemma3n", "cohere2", "exaone4",
                           "gpt_oss", "olmo3", "llama4"})

#: Where llama.cpp's cache sizes come from (:data:`~.common.LLAMA_CPP`).
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
    from ... import config_reader, serving

    b = VLLM_CACHE_DTYPES[cache_dtype]
    model_type = (config_reader._text_config(config)[1] or "").removesuffix("_text")
    ignored = b is not None and model_type in serving.VLLM_WITHOUT_CACHE_CONFIG
    if ignored:  # its attention never sees --kv-cache-dtype
        b = None
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
    if ignored:
        out["notes"].append(f"--kv-cache-dtype {cache_dtype} is not applied: vLLM "
                            f"0.33.0's {model_type} builds its attention without the "
                            f"cache config, so its cache holds the model's dtype")
    elif cache_dtype.startswith("fp8"):
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
