"""Build a tiny transformers model and record what it does with positions.

Used by ``scripts/conformance.py`` (every registered causal-LM type) and by
:func:`posenc_lib.tools.crosscheck.crosscheck` (one config). :func:`run_model` builds
a model type's class-default config shrunk (a few layers, small hidden and
feed-forward sizes, four heads of 32 features where the class sets no
``head_dim``; every positional field and the layer types kept);
:func:`observe` runs a built model on ``TOKENS`` tokens with ``use_cache=True``
(and once more on ``TOKENS + 1``) and records:

- every call of the model file's own ``apply_rotary*`` functions, with its cos
  and sin (or ``freqs_cis``), attributed to the decoder layer whose forward
  pass is running (pre-hooks on the model's stack of layers);
- the ``scaling`` each call of its ``eager_attention_forward`` receives
  (``None`` means ``head_dim^-1/2`` of the query, as that function computes
  it; OPT and Whisper multiply the queries themselves and pass 1.0);
- the bytes of floating-point tensors the returned cache holds (keys and
  values apart from convolution, SSM and recurrent states), whose growth per
  token and fixed part come from the two lengths;
- each rotary module's cos/sin at position ``2L - 1`` (``L`` the config's
  ``max_position_embeddings``), where dynamic methods change their
  frequencies;
- which features the first ``apply_rotary*`` call rotates together
  (:func:`pair_layout`): the call is repeated with the query and key replaced
  by one-hot probes, and each probe moves into its partner feature.

The observation is plain JSON; :func:`posenc_lib.tools.conformance.compare` judges
it. Needs torch and transformers (imported when called).
"""

from __future__ import annotations

import contextlib
import functools
import inspect as std_inspect
import json
import sys
import warnings

import torch

__all__ = ["TOKENS", "run_model", "build", "observe", "cache_bytes", "pair_layout"]

TOKENS = 12
LAYERS = 6
EPS32 = torch.finfo(torch.float32).eps
#: Sizes with nothing to do with positions, shrunk where the class has them.
SMALL = {"vocab_size": 128, "intermediate_size": 64, "ffn_hidden_size": 64,
         "n_inner": 64, "d_ff": 64, "moe_intermediate_size": 32,
         "shared_expert_intermediate_size": 32, "intermediate_size_mlp": 64,
         "num_local_experts": 2, "num_experts": 2, "n_routed_experts": 2,
         "moe_num_experts": 2, "num_experts_per_tok": 1, "n_shared_experts": 1,
         "moe_topk": 1, "n_group": 1, "topk_group": 1,
         "q_lora_rank": 16, "kv_lora_rank": 16, "linear_num_key_heads": 2,
         "linear_num_value_heads": 2, "linear_key_head_dim": 16,
         "linear_value_head_dim": 16, "mamba_n_heads": 4, "mamba_d_state": 8,
         "mamba_n_groups": 1, "state_size": 8,
         "shared_intermediate_size": 64, "first_k_dense_replace": 1,
         "vocab_size_per_layer_input": 128, "hidden_size_per_layer_input": 16,
         "max_position_embeddings_per_layer": None, "pad_token_id": 0,
         "bos_token_id": 1, "eos_token_id": 2, "expert_dim": 32,
         "num_key_value_groups": None}
#: Per-type sizes the generic shrink gets wrong (the class default would not
#: build once shrunk, or would hide what the sweep looks for).
SPECIAL = {
    # a base per layer, one of them 0 (no RoPE): the sweep then sees each kind
    "granite_swa": {"layer_rope_theta": [0, 10000.0, 500000.0, 0, 10000.0, 500000.0]},
    "granitemoe_swa": {"layer_rope_theta": [10000.0, 0, 10000.0, 250000.0, 0, 1e6]},
    "gemma3n_text": {"num_kv_shared_layers": 4, "laurel_rank": 8},
    "jamba": {"use_mamba_kernels": False},
    # 4.57.6's MllamaRotaryEmbedding reads config.rope_scaling["rope_type"]
    # (modeling_mllama.py:731), None in the class default (5.x: unchanged)
    "mllama_text_model": {"cross_attention_layers": [1],
                          "rope_scaling": {"rope_type": "default"}},
    "recurrent_gemma": {"block_types": ["recurrent", "recurrent", "attention"],
                        "lru_width": None},
    "zamba": {"attn_layer_period": 3, "attn_layer_offset": 2,
              "use_mamba_kernels": False},
    # 4.57.6's Zamba2Config keeps its 54-entry default layers_block_type
    # (Zamba2Model.get_layers then runs out of Mamba layers: StopIteration)
    "zamba2": {"hybrid_layer_ids": [2, 5],
               "layers_block_type": ["mamba", "mamba", "hybrid", "mamba", "mamba",
                                     "hybrid"]},
    # 4.57.6's Phi4MultimodalConfig drops its default vision_config
    # (configuration_phi4_multimodal.py:417-418 builds one without keeping it)
    "phi4_multimodal": {"vision_config": {}, "audio_config": {}},
    "deepseek_v2": {"n_routed_experts": 2, "num_experts_per_tok": 1,
                    "topk_method": "greedy"},
    "dots1": {"n_routed_experts": 2, "num_experts_per_tok": 1, "n_shared_experts": 1},
    # class defaults that do not build (5.24.0): Lfm2MoeConfig has no
    # layer_types, Qwen4ExpTextConfig no indexer sizes for its indexed layers,
    # and LongCat-Flash's top-1 routing fails in its expert loop
    "lfm2_moe": {"layer_types": ["conv", "conv", "full_attention", "conv", "conv",
                                 "full_attention"]},
    "qwen4_exp_text": {"indexer_n_heads": 2, "indexer_kv_heads": 1,
                       "indexer_head_dim": 256, "indexer_budget": 8,
                       "indexer_compress_ratio": 4},
    "longcat_flash": {"moe_topk": 2},
    # BambaConfig's attention layers (9, 18, 27) lie beyond the six kept
    "bamba": {"attn_layer_indices": [2, 5]},
    # JetMoeConfig (4.57.6) sets num_attention_heads = num_key_value_heads x
    # num_experts_per_tok: two of each make the shrunk four heads consistent
    "jetmoe": {"num_local_experts": 2, "num_experts_per_tok": 2},
    "nemotron": {"num_key_value_heads": 2},
    "dbrx": {"attn_config": {"clip_qkv": 8, "kv_n_heads": 2, "rope_theta": 10000.0},
             "ffn_config": {"ffn_hidden_size": 64, "moe_num_experts": 2,
                            "moe_top_k": 1}},
    "granitemoehybrid": {"layer_types": ["mamba", "attention", "mamba",
                                         "mamba", "attention", "mamba"]},
    "xlstm": {"qk_dim_factor": 0.5, "v_dim_factor": 1.0},
    # GPTNeoConfig's default attention_types, [[["global", "local"], 12]],
    # lays out 24 layers, checked against num_layers: three global/local pairs
    "gpt_neo": {"attention_types": [[["global", "local"], 3]]},
    # Mamba2Config checks hidden_size * expand == num_heads * head_dim: the
    # default 128 heads, of the 256-wide shrunk model's 64 (512 / 64 = 8)
    "mamba2": {"num_heads": 8},
    # the class default has attention on every layer: keep convolution layers
    # too, whose state 4.57 and 5.x cache differently
    "lfm2": {"layer_types": ["conv", "conv", "full_attention", "conv", "conv",
                             "full_attention"]},
}
#: The same, where 5.x's class takes the layout from ``layer_types`` (its
#: attribute_map's ``layers_block_type``), which the generic shrink cuts to the
#: first layers of the default: attention kept at layers 2 and 5.
SPECIAL_5 = {
    # DoryConfig's 8 input and 8 output layers (the recurrent section, the
    # rest, then -10 layers of six): the output section reruns layers 4-5,
    # whose cache then holds each token twice; two of each section, looped
    "dory": {"n_input_layers": 2, "n_recurrent_layers": 2, "n_output_layers": 2},
    # CohereCompassTextConfig's default has no rope_parameters at all (each
    # layer type needs its entry): two bases, sliding and full layers
    "cohere_compass_text": {
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"]
        + ["sliding_attention"] * 2,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 500000.0}}},

    "zamba2": {"layer_types": ["mamba", "mamba", "hybrid", "mamba", "mamba",
                               "hybrid"]},
    # the layout attn_layer_period 3 / offset 2 (SPECIAL) means: 5.x
    # ZambaConfig takes layer_types as given, cut to one hybrid layer, whose
    # shared block then has no copy to tie (_tied_weights_keys ValueError)
    "zamba": {"layer_types": ["linear_attention", "linear_attention", "hybrid",
                              "linear_attention", "linear_attention", "hybrid"]},
}
#: Composite configs whose class default does not validate: the fields its
#: own validator asks of the default text config (5.24.0
#: Gemma4AssistantConfig.validate_architecture,
#: gemma4_assistant/configuration_gemma4_assistant.py:81-97, refuses the
#: default Gemma4TextConfig's per-layer inputs).
DEFAULT_KWARGS = {
    "gemma4_assistant": {"text_config": {"hidden_size_per_layer_input": 0,
                                         "vocab_size_per_layer_input": 0}},
}
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 32
#: Encoder classes that serve as causal LMs only with is_decoder=True (their
#: *ForCausalLM / *LMHeadModel warn and build an encoder otherwise).
NEEDS_DECODER = {"bert", "bert-generation", "big_bird", "camembert", "data2vec-text",
                 "electra", "ernie", "megatron-bert", "rembert", "roberta",
                 "roberta-prelayernorm", "roc_bert", "roformer", "xlm-roberta",
                 "xlm-roberta-xl", "xmod", "qdqbert", "mega", "reformer"}
#: Layers kept where the default six would hide the pattern.
LAYERS_OF = {"gemma3n_text": 10}


def _text_config(cfg):
    """The config of the language model (a composite config's text part)."""
    for name in ("text_config", "text_model_config", "language_config"):
        sub = getattr(cfg, name, None)
        if sub is not None and hasattr(sub, "model_type"):
            return sub
    return cfg


def _params(cls) -> set:
    params = set(std_inspect.signature(cls.__init__).parameters)
    return params | set(getattr(cls, "attribute_map", {}))


def shrunk(model_type: str):
    """``(config class, kwargs)`` of a tiny config of ``model_type``'s text model."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    cfg = CONFIG_MAPPING[model_type](**DEFAULT_KWARGS.get(model_type, {}))
    text = _text_config(cfg)
    cls = type(text)
    overrides = _per_layer_overrides(text)
    if overrides:  # 5.x heterogeneous config (Gemma 4): read the global values
        text.allow_global_per_layer_attribute_access = True
    params = _params(cls)

    def has(name):
        return name in params or hasattr(text, name)

    amap = getattr(cls, "attribute_map", {})
    kw = {}

    def put(name, value):
        if has(name):
            kw[amap.get(name, name)] = value

    for name, value in SMALL.items():
        if has(name) and value is not None and getattr(text, name, None) is not None:
            put(name, value)
    head_dim = getattr(text, "head_dim", None)
    explicit = "head_dim" in params and isinstance(head_dim, int) and head_dim > 0 \
        and "head_dim" not in amap
    heads = HEADS
    put("num_attention_heads", heads)
    if hasattr(text, "is_decoder") and "ForCausalLM" not in "" and \
            text.model_type in NEEDS_DECODER:
        kw["is_decoder"] = True  # BertLMHeadModel & co. cache only as decoders
    if getattr(text, "num_key_value_heads", None) is not None or \
            "num_key_value_heads" in params:
        if getattr(text, "num_key_value_heads", None) not in (1,):
            # MLA (DeepSeek-V2/V3, LongCat, MiniCPM3) caches one key per query head
            put("num_key_value_heads", heads if has("kv_lora_rank") else KV_HEADS)
    hd = head_dim if explicit else HEAD_DIM
    if isinstance(getattr(text, "rotary_dim", None), int):  # GPT-J, CodeGen: partial
        hd = max(hd, 2 * text.rotary_dim)
    if "head_dim" in params and head_dim is None and "head_dim" not in amap:
        explicit = True  # Hunyuan, Ministral: a null head_dim does not build
    put("hidden_size", heads * hd)
    if explicit:
        kw["head_dim"] = hd
    n = getattr(text, "num_hidden_layers", None)
    if isinstance(n, int) and n > 0:
        keep = min(n, LAYERS_OF.get(text.model_type, LAYERS))
        put("num_hidden_layers", keep)
        types = getattr(text, "layer_types", None)
        # (5.x FalconH1Config maps layer_types to a read-only property)
        settable = not isinstance(getattr(cls, amap.get("layer_types", "layer_types"),
                                          None), property)
        if isinstance(types, list) and len(types) == n and settable:
            kw["layer_types"] = types[:keep]
    # an encoder-decoder's attribute_map points num_hidden_layers and
    # num_attention_heads at the encoder's (BartConfig: encoder_layers,
    # encoder_attention_heads); its *ForCausalLM runs the decoder, whose
    # default 12 layers and 16 heads would stay (a cache of the encoder's
    # layer count, cache_utils.py:1620 IndexError; 128 features in 12 heads)
    # (4.57.6's BartConfig maps neither: the plain names are set)
    for dec, sources in (("decoder_layers", ("encoder_layers", "num_hidden_layers")),
                         ("decoder_attention_heads",
                          ("encoder_attention_heads", "num_attention_heads"))):
        src = next((k for k in sources if k in kw), None)
        if src is not None and dec in params and dec not in kw:
            kw[dec] = kw[src]
    special = dict(SPECIAL.get(text.model_type, {}))
    if _transformers_major() >= 5:
        special.update(SPECIAL_5.get(text.model_type, {}))
    kw.update({k: v for k, v in special.items() if v is not None})
    for k, v in SPECIAL.get(text.model_type, {}).items():
        if v is None:
            kw.pop(k, None)
    if text.model_type == "gemma3n_text":
        kw["activation_sparsity_pattern"] = [0.0] * kw["num_hidden_layers"]
    if overrides:
        # each layer's own head size, shrunk by the global one's ratio; the
        # overrides of the layers kept, by index
        ratio = hd / head_dim if isinstance(head_dim, int) and head_dim else 1
        keep = kw.get("num_hidden_layers", len(overrides))
        # (a layer whose key heads equal its query heads, MLA's as in Dots 3
        # Note's sliding layers, keeps them equal: its config refuses others)
        kw["per_layer_config"] = {
            i: {k: (max(2, int(v * ratio)) // 2 * 2 if k == "head_dim" else
                    HEADS if k == "num_attention_heads" or (
                        k == "num_key_value_heads"
                        and v == o.get("num_attention_heads")) else
                    (KV_HEADS if k == "num_key_value_heads" else v))
                for k, v in o.items()}
            for i, o in overrides.items() if i < keep}
    return cls, kw


def _transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def _per_layer_overrides(text) -> dict[int, dict]:
    """A 5.x heterogeneous config's per-layer overrides (``per_layer_config``
    in its ``to_dict()``), by layer index; ``{}`` for any other config."""
    if not getattr(text, "is_heterogeneous", False):
        return {}
    raw = text.to_dict().get("per_layer_config") or {}
    return {int(k): dict(v) for k, v in raw.items()}


@contextlib.contextmanager
def _patched(modules, name_test, wrapper_factory):
    """Each module-level function of ``modules`` whose name passes
    ``name_test``, and each such static method of the modules' own classes
    (RoFormerSelfAttention.apply_rotary_position_embeddings), replaced by
    ``wrapper_factory(name, fn)`` while the block runs."""
    saved = []
    for mod in modules:
        for name, fn in list(vars(mod).items()):
            if callable(fn) and name_test(name) and not isinstance(fn, type):
                saved.append((mod, name, fn))
                setattr(mod, name, wrapper_factory(name, fn))
            elif isinstance(fn, type) and fn.__module__ == mod.__name__:
                for attr, member in list(vars(fn).items()):
                    if isinstance(member, staticmethod) and name_test(attr):
                        saved.append((fn, attr, member))
                        setattr(fn, attr, staticmethod(
                            wrapper_factory(attr, member.__func__)))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def _squeeze2(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().double()
    while t.dim() > 2:
        t = t.squeeze(0) if t.shape[0] == 1 else t[0]
    if t.dim() == 1:
        t = t[None]
    return t


#: Types listed but not built, with the reason.
NOT_SHRUNK = {"blt": "BltConfig holds four sub-configs (patcher, encoder, global "
                     "transformer, decoder) that this sweep does not shrink; at "
                     "their default sizes the build takes minutes and over 10 GB"}


def run_model(model_type: str) -> dict:
    """Build ``model_type``'s tiny model, run it, and record what it does."""
    if model_type in NOT_SHRUNK:
        raise NotImplementedError(NOT_SHRUNK[model_type])
    cls, kw = shrunk(model_type)
    built, model = build(cls, kw)
    return observe(model, built, model_type)


def build(cls, kw: dict, dtype=None):
    """``(config object, model)``: a causal LM of the config class ``cls``
    built from ``kw`` with random weights (eager attention), in ``dtype`` if
    given (as a checkpoint loads in it: modules the class keeps in float32
    stay so)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = cls(**kw)
    built._attn_implementation = "eager"
    torch.manual_seed(0)
    return built, model_of(built, dtype)


def model_of(built, dtype=None):
    """The causal LM of the config object ``built`` with random weights (in
    ``dtype`` if given), in eval mode: its registered causal LM, else the one
    its config module defines for it (:func:`_causal_lm_of`), else its base
    model."""
    from transformers import AutoModel, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        extra = {} if dtype is None else {"dtype": dtype}
        if built.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
            model = AutoModelForCausalLM.from_config(built, **extra)
        elif (own := _causal_lm_of(type(built))) is not None:
            model = own._from_config(built, **extra)
        else:
            model = AutoModel.from_config(built, **extra)
    return model.eval()


def _causal_lm_of(config_cls):
    """The causal LM registered for the model type of ``config_cls``'s own
    module, where it takes that config: a composite's text config with no
    causal-LM type of its own (Emu3TextConfig, ``emu3_text_model``, and
    MllamaTextConfig, ``mllama_text_model``: Emu3ForCausalLM and
    MllamaForCausalLM, registered as ``emu3`` and ``mllama``); else ``None``."""
    import transformers
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)

    folder = config_cls.__module__.split(".")[-2]
    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(folder)
    model_cls = getattr(transformers, name, None) if name else None
    if model_cls is not None and getattr(model_cls, "config_class", None) is config_cls:
        return model_cls
    return None


def pair_layout(fn, sig, args, kwargs) -> str | None:
    """Which features ``fn`` (a model file's ``apply_rotary*``, called with
    ``args``/``kwargs``) rotates together: ``"half"`` (``i`` with ``i + r/2``),
    ``"interleaved"`` (``2i`` with ``2i + 1``), ``"other"``, or ``None`` when
    it cannot be probed. Feature ``j`` of the query and key is set to 1 and
    every other to 0; where the angle is not 0, the output of ``j`` spans two
    features, the same two as the output of ``j``'s partner (read this way, a
    function that also permutes its output, as DeepSeek-V3's
    ``apply_rotary_pos_emb_interleave`` does, pairs the input's features). The
    first two tensor arguments are the probed ones (query and key, or the one
    tensor a function rotates)."""
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    names = [n for n, v in bound.arguments.items()
             if isinstance(v, torch.Tensor) and v.is_floating_point()
             and n not in ("cos", "sin", "freqs_cis", "position_ids",
                           "sinusoidal_pos")][:2]
    if not names:
        return None
    width = bound.arguments[names[0]].shape[-1]
    spans: dict = {}
    for j in range(width):
        probe = bound.arguments.copy()
        for n in names:
            x = torch.zeros_like(bound.arguments[n])
            x[..., j] = 1
            probe[n] = x
        out = fn(**probe)
        out = out[0] if isinstance(out, (tuple, list)) else out
        rows = out.detach().reshape(-1, out.shape[-1]).float()
        span = frozenset(torch.nonzero(rows != 0)[:, 1].tolist())
        if len(span) == 2:
            spans.setdefault(span, []).append(j)
        elif len(span) > 2:
            return "other"
    groups = sorted(spans.values())
    if not groups:
        return None
    if any(len(g) != 2 for g in groups):
        return "other"
    if all(b == a + 1 for a, b in groups):
        return "interleaved"
    if all(b == a + len(groups) for a, b in groups):
        return "half"
    return "other"


def observe(model, built, model_type: str | None = None) -> dict:
    """Run ``model`` (``built``: its config object) and record what it does
    (see the module docstring)."""
    text_type = built.model_type
    modules = {sys.modules[type(m).__module__] for m in model.modules()
               if type(m).__module__.startswith("transformers.models.")}
    current = {"layer": None}
    rotary: dict = {}
    scales: dict = {}
    owner: set = set()  # the layers whose scale came from a module with a layer_idx
    probed: dict = {}

    def rotary_wrapper(name, fn):
        sig = std_inspect.signature(fn)

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs).arguments
            except TypeError:
                bound = {}
            layer = current["layer"]
            entry = {"function": name}
            if "cos" in bound and "sin" in bound:
                entry["cos"], entry["sin"] = _squeeze2(bound["cos"]), _squeeze2(bound["sin"])
            elif "freqs_cis" in bound:
                f = bound["freqs_cis"]
                entry["cos"], entry["sin"] = _squeeze2(f.real), _squeeze2(f.imag)
                entry["complex"] = True
            elif "sinusoidal_pos" in bound:  # RoFormer: [sin | cos], one per pair
                sin, cos = bound["sinusoidal_pos"].chunk(2, dim=-1)
                entry["cos"], entry["sin"] = _squeeze2(cos), _squeeze2(sin)
                entry["complex"] = True
            elif "sincos" in bound or "sin_cos" in bound:
                pass
            rotary.setdefault(layer, entry)
            if "pairs" not in probed:
                with torch.no_grad():
                    probed["pairs"] = pair_layout(fn, sig, args, kwargs)
            return fn(*args, **kwargs)
        return wrapped

    def attention_wrapper(name, fn):
        sig = std_inspect.signature(fn)

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            bound = sig.bind(*args, **kwargs).arguments
            module = bound.get("module")
            layer = current["layer"]
            scale = bound.get("scaling")
            query = bound.get("query")
            if scale is None and query is not None:
                scale = query.shape[-1] ** -0.5
            if scale == 1.0 and isinstance(getattr(module, "scaling", None), float) \
                    and type(module).__name__ in PRESCALED:
                scale = module.scaling  # the queries were multiplied by it before
            # a layer's first call is its attention's, unless a module without a
            # layer_idx attends first (Inkling 2's block attention residual, a
            # softmax over earlier blocks' outputs before each layer): the
            # attention module's call, which carries its layer_idx, replaces it
            owned = isinstance(getattr(module, "layer_idx", None), int)
            if layer not in scales or (owned and layer not in owner):
                scales[layer] = float(scale) if scale is not None else None
                if owned:
                    owner.add(layer)
            return fn(*args, **kwargs)
        return wrapped

    def pre_hook(module, args, kwargs=None):
        current["layer"] = module.layer_idx

    hooks = []
    stacks = _decoder_stacks(model)
    blocks = [b for stack in stacks for b in stack]
    # a block of several attention sublayers, each with its own cache index
    # (LongCat-Flash: self_attn[0] and [1] are layers 2i and 2i + 1): the
    # attention modules' layer_idx, as the library counts its layers
    # (a negative layer_idx is a placeholder, not a cache index: Zamba2's
    # shared transformer block, Zamba2Attention(layer_idx=-1), is told its
    # layer at each call, and its hybrid layer's block hook attributes it)
    inner = [m for b in blocks for m in b.modules() if m is not b
             and isinstance(getattr(m, "layer_idx", None), int) and m.layer_idx >= 0]
    if len({m.layer_idx for m in inner}) > len(blocks):
        blocks = []
        for m in inner:
            hooks.append(m.register_forward_pre_hook(pre_hook))
    for index, m in enumerate(blocks):
        hooks.append(m.register_forward_pre_hook(
            functools.partial(_set_layer, current, index % len(stacks[0])),
            with_kwargs=True))
    if not blocks and not hooks:
        for m in model.modules():
            if isinstance(getattr(m, "layer_idx", None), int):
                hooks.append(m.register_forward_pre_hook(pre_hook))

    def forward(tokens):
        return filled_cache(model, built, tokens)

    with _patched(modules, lambda n: n.startswith("apply_rotary"), rotary_wrapper), \
            _patched(modules, lambda n: n == "eager_attention_forward",
                     attention_wrapper):
        cache1 = forward(TOKENS)
    for h in hooks:
        h.remove()
    kv1, st1, how = cache_bytes(cache1, model)
    cache2 = forward(TOKENS + 1)
    kv2, st2, _ = cache_bytes(cache2, model)
    rope_layers = sorted(k for k in rotary if k is not None)
    if None in rotary and not rope_layers:
        rope_layers = ["unattributed"]
    cos_sin = {}
    for k in rope_layers:
        e = rotary[None if k == "unattributed" else k]
        if "cos" not in e:
            continue
        row = {"cos": [float(f"{x:.8g}") for x in e["cos"][TOKENS - 1].tolist()],
               "sin": [float(f"{x:.8g}") for x in e["sin"][TOKENS - 1].tolist()]}
        if row not in cos_sin.values() or True:
            cos_sin[str(k)] = row
    per_token = None if kv1 is None else kv2 - kv1
    beyond = _beyond(model, built, list(cos_sin.values()))
    observed = {"position": TOKENS - 1, "rope_layers": rope_layers,
                "cos_sin": _dedupe(cos_sin),
                "scales": {str(k): v for k, v in scales.items()},
                "kv_per_token": per_token,
                "fixed_state": None if kv1 is None else
                kv1 - TOKENS * per_token + st1, "beyond": beyond,
                "pair_layout": probed.get("pairs")}
    return {"config": _jsonable(built.to_dict()), "class": type(model).__name__,
            "text_model_type": text_type, "cache_class": how,
            "rotary_functions": sorted({e["function"] for e in rotary.values()}),
            "observed": observed}


def filled_cache(model, built, tokens: int):
    """The cache ``model`` (``built``: its config object) returns after a
    forward pass over ``tokens`` tokens with ``use_cache=True`` (a Mamba's,
    RWKV's or xLSTM's state where it has no ``past_key_values``; ``None``
    when it keeps nothing)."""
    vocab = getattr(built, "vocab_size", None) or 128
    ids = (torch.arange(tokens)[None] % max(vocab - 3, 1)) + min(3, vocab - 1)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
    cache = getattr(out, "past_key_values", None)
    if cache is None:  # Mamba, RWKV, xLSTM: their state
        cache = getattr(out, "cache_params", None) or getattr(out, "state", None)
    if cache is None and hasattr(model, "prepare_inputs_for_generation"):
        try:
            prep = model.prepare_inputs_for_generation(ids, use_cache=True)
            if prep.get("past_key_values") is not None:
                with torch.no_grad():
                    out = model(input_ids=ids, use_cache=True,
                                past_key_values=prep["past_key_values"])
                cache = out.past_key_values
        except Exception:  # noqa: BLE001 -- recorded as "no cache" by the caller
            cache = None
    if cache is None:  # 5.x RecurrentGemma drops its cache: pass one, as generate()
        from .cache_walk import _given_cache

        def run(**kwargs):
            with torch.no_grad():
                model(input_ids=ids, use_cache=True, **kwargs)

        cache = _given_cache(model, built, run)
    return cache


def _beyond(model, built, layer_rows: list | None = None) -> dict | None:
    """Each rotary module's cos/sin at position ``2L - 1`` (``L`` the config's
    max_position_embeddings): dynamic methods change their frequencies there.

    ``layer_rows``: the cos/sin rows the layers' ``apply_rotary*`` calls
    received at position ``TOKENS - 1``. Where each of them is some module's
    own row at that position, a module whose row no layer received is marked
    ``"unused"`` (4.57.6's Gemma 3 text model builds its local rotary module
    with every layer full); where a layer's row is no module's (a layer that
    slices or spreads it), none is marked."""
    length = getattr(built, "max_position_embeddings", None)
    if not isinstance(length, int) or length < 1:
        return None
    position = 2 * length - 1
    rows, within = [], []
    for name, m in model.named_modules():
        if not type(m).__name__.endswith("RotaryEmbedding") or \
                not hasattr(m, "inv_freq"):
            continue
        try:
            with torch.no_grad():
                cos, sin = m(torch.zeros(1, 1, 4), torch.tensor([[position]]))
                near = m(torch.zeros(1, 1, 4), torch.tensor([[TOKENS - 1]]))[0]
        except Exception:  # noqa: BLE001 -- M-RoPE and other signatures
            continue
        cos, sin = _squeeze2(cos)[-1], _squeeze2(sin)[-1]
        within.append(_squeeze2(near)[-1].double())
        rows.append({"module": name,
                     "cos": [float(f"{x:.8g}") for x in cos.tolist()],
                     "sin": [float(f"{x:.8g}") for x in sin.tolist()]})
    if rows and layer_rows:
        def same(row, mine):  # the stored rows keep 8 significant digits
            theirs = torch.tensor(row["cos"], dtype=torch.float64)
            return theirs.shape == mine.shape and bool(torch.allclose(
                theirs, mine, rtol=1e-6, atol=1e-7))
        matched = [[i for i, mine in enumerate(within) if same(row, mine)]
                   for row in layer_rows]
        if all(matched):
            used = {i for found in matched for i in found}
            for i, row in enumerate(rows):
                if i not in used:
                    row["unused"] = True
    return {"position": position, "rows": rows} if rows else None


def _dedupe(rows: dict) -> dict:
    """One row per distinct cos/sin (the layers that share it listed in its key)."""
    out: dict = {}
    for k, row in rows.items():
        for key, kept in out.items():
            if kept == row:
                out[f"{key},{k}"] = out.pop(key)
                break
        else:
            out[k] = row
    return out


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


#: Attention modules that multiply the queries by ``self.scaling`` themselves
#: and call the attention function with ``scaling=1.0`` (OPTAttention.forward,
#: WhisperAttention.forward in transformers 4.57.6).
PRESCALED = {"OPTAttention", "WhisperAttention"}


def _set_layer(current, index, module, args, kwargs=None):
    # HRM-Text runs each stack of blocks several times a forward, and a call
    # caches as layer index + cycle_offset (HrmTextAttention, 5.24.0
    # models/hrm_text/modeling_hrm_text.py): the layer is that cache layer
    current["layer"] = index + int((kwargs or {}).get("cycle_offset") or 0)


def _decoder_stacks(model) -> list[list]:
    """The model's stack of decoder layers (the longest ModuleList of blocks),
    as a list of one stack; where its blocks pass a ``cycle_offset`` on to their
    attention (HRM-Text's two stacks, each run several times a forward), every
    stack of that length."""
    stacks = []
    # sub-models of another config (Phi-4-multimodal's vision encoder,
    # model.embed_tokens_extend.image_embed.img_processor.encoder.layers, 27
    # layers of its vision_config): a text-only forward never runs them
    own = getattr(getattr(model, "config", None), "model_type", None)
    foreign = [name + "." for name, m in model.named_modules() if name and
               getattr(getattr(m, "config", None), "model_type", own) != own]
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.ModuleList) and name.split(".")[-1] in (
                "layers", "h", "blocks", "layer", "decoder_layers") and \
                "vision" not in name and "audio" not in name and len(m) and \
                not any(name.startswith(f) for f in foreign):
            stacks.append(list(m))
    if not stacks:
        return []
    longest = max(len(s) for s in stacks)
    best = next(s for s in stacks if len(s) == longest)
    if any("cycle_offset" in std_inspect.signature(m.forward).parameters
           for m in best[0].modules()):  # its attention's, passed on by the block
        return [s for s in stacks if len(s) == longest]
    return [best]


def _decoder_layers(model):
    """The model's stack of decoder layers (the longest ModuleList of blocks)."""
    stacks = _decoder_stacks(model)
    return stacks[0] if stacks else []


def _layer_count(built) -> int | None:
    for name in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        v = getattr(built, name, None)
        if isinstance(v, int):
            return v
    return None


def cache_rows(model, built, lengths) -> dict:
    """``{str(tokens): {"kv", "state", "cache_class"}}``: what ``model``'s own
    cache holds after a forward over each of ``lengths`` tokens."""
    rows = {}
    for tokens in lengths:
        kv, state, how = cache_bytes(filled_cache(model, built, tokens), model)
        rows[str(tokens)] = {"kv": kv, "state": state, "cache_class": how}
    return rows


def cache_bytes(cache, model) -> tuple[int | None, int, str]:
    """``(bytes of keys and values, bytes of other state, cache class)``:
    ``posenc_lib.tools.cache_walk.walk`` (``None`` bytes of keys and values
    when the model holds no cache at all)."""
    from .cache_walk import walk

    found = walk(cache, model)
    if cache is None and not found.found:
        return None, 0, "none"
    return found.kv, found.state, found.cls


