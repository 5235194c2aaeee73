"""Check the inspector's report against the installed transformers.

``python -m posenc_lib inspect CONFIG --crosscheck`` calls :func:`crosscheck`:
it shrinks the config (two heads of the same head size, a small hidden and
feed-forward size, few experts, a small vocabulary; every positional field,
the layer count and the layer types kept as given), builds a model of the
config's own class with random weights (nothing is downloaded), and compares
with the library:

- every layer's rotary module: its ``inv_freq`` (relative tolerance
  ``32 ε₃₂``, the float32 rounding of frequencies computed in another order)
  and the cos and sin its forward pass returns at the first positions and just
  below ``L``, against float64 values from :func:`~posenc_lib.scaling.rope_from_config`
  (tolerance ``s·(33 ε₃₂·|m θ| + 2 ε₃₂)``: the frequency's error carried to the
  angle, the angle's rounding, cos/sin and the product by ``s``); a layer
  without RoPE must have no rotary module in use;
- the attention scaling: the rotary module's ``attention_scaling`` and the
  attention module's softmax ``scaling`` against the report's logit factors;
- the cache: the bytes of the keys and values (and of the fixed state of
  linear-attention, convolution and Mamba layers) that a forward pass of
  ``tokens`` tokens leaves in the model's cache, against
  :func:`~posenc_lib.serving.kv_cache_bytes` of the shrunk config.

The rules for which rotary module a layer uses are read from transformers
4.57.6's modelling code (``Gemma3TextModel.rotary_emb_local``,
``Olmo3Model.rotary_embs``, ``use_rope`` of Llama 4 and SmolLM3, the forward
conditions of ``Cohere2Attention`` and ``Exaone4Attention``).
"""

from __future__ import annotations

import copy
import inspect as std_inspect
import math
import warnings
from typing import Mapping

import torch

from .. import config_reader, per_layer, scaling, serving
from ..logit_scale import _global_config, softmax_scale

__all__ = ["crosscheck", "filled_cache_bytes", "format_result", "shrink"]

EPS32 = torch.finfo(torch.float32).eps
#: Config classes registered under another name than the config's model_type.
CLASS_TYPE = {"gemma3": "gemma3_text", "llama4": "llama4_text",
              "qwen2_5_vl": "qwen2_5_vl_text", "qwen3_vl": "qwen3_vl_text",
              "qwen2_vl": "qwen2_vl_text", "gemma3n": "gemma3n_text"}
#: Sizes that have nothing to do with positions, shrunk where the class takes them.
SMALL = {"vocab_size": 16, "intermediate_size": 32, "intermediate_size_mlp": 32,
         "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16,
         "num_local_experts": 2, "num_experts": 2, "n_routed_experts": 2,
         "moe_num_experts": 2, "n_shared_experts": 1, "num_experts_per_tok": 1,
         "n_group": 1, "topk_group": 1, "q_lora_rank": 8, "kv_lora_rank": 8,
         "qk_nope_head_dim": 8, "v_head_dim": 8, "linear_num_key_heads": 2,
         "linear_num_value_heads": 2, "linear_key_head_dim": 16,
         "linear_value_head_dim": 16, "mamba_n_heads": 2, "mamba_d_state": 8,
         "mamba_n_groups": 1, "shared_intermediate_size": 32,
         "first_k_dense_replace": 1, "pad_token_id": 0,
         "vocab_size_per_layer_input": 16, "hidden_size_per_layer_input": 8}


#: Query heads where two do not build: CodeGenAttention splits its fused
#: projection into ``mp_num = 4`` groups of whole heads.
HEADS = {"codegen": 4}


def _transformers():
    try:
        import transformers
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except ImportError:
        raise ImportError("--crosscheck needs transformers (pip install transformers); "
                          "the report itself does not") from None
    return transformers, CONFIG_MAPPING


def shrink(config: Mapping) -> dict:
    """The config's text model with tiny sizes (see the module docstring).

    Raises:
        ValueError: if the installed transformers does not know the model type.
    """
    transformers, mapping = _transformers()
    text, model_type = config_reader._text_config(config)
    text = copy.deepcopy(text)
    inner = config.get("text_config")
    candidates = []
    if isinstance(inner, Mapping):  # a multimodal config: its text model
        candidates.append(text.pop("model_type", None))
        candidates.append(f"{config.get('model_type')}_text")
    if not isinstance(inner, Mapping) and model_type in mapping:
        # a text model's own config (aria_text): its own class, not the
        # composite's whose text fields would be ignored (a full-size model)
        candidates.append(model_type)
    model_type = (model_type or "").removesuffix("_text")
    candidates += [CLASS_TYPE.get(model_type, model_type), f"{model_type}_text"]
    class_type = next((c for c in candidates if c and config_class(c)), None)
    if class_type is None:
        raise ValueError(f"transformers {transformers.__version__} does not know "
                         f"model_type {model_type!r}: nothing to build and compare")
    one = _global_config(config)  # Beam, ZAYA: the first rotating layer's
    if config_reader.positional_scheme(config) == "rotary" and one is not None:
        rope = config_reader.parse_rope_config(one)
        head_dim = rope.head_dim if "qk_rope_head_dim" not in text else None
    else:  # NoPE, ALiBi, learned positions, hybrids: the cache and scale still
        head_dim = serving.cache_head(config)["key_dim"]
    params = set(std_inspect.signature(config_class(class_type).__init__).parameters)
    text_class = (getattr(config_class(class_type), "sub_configs", None) or {}).get(
        "text_config")
    if isinstance(text_class, type):  # a composite: its text model's fields too
        params |= set(std_inspect.signature(text_class.__init__).parameters)
    small = {k: v for k, v in SMALL.items() if k in params or k in text}
    for alias in (*config_reader._HEADS_ALIASES, *config_reader._HIDDEN_ALIASES, "num_kv_heads"):
        text.pop(alias, None)  # replaced by the canonical names below
    heads = HEADS.get(class_type, 2)
    # a layer type that keeps a multiple of num_key_value_heads (MiMo-V2-Flash's
    # sliding layers: twice as many) must still have no more than the query
    # heads: with as many as the query heads, num_key_value_groups = 2 // 4 = 0
    # and the eager attention's matmul fails (a tensor of 0 heads)
    multiple = max((serving.KV_HEADS_MULTIPLE.get(class_type) or {}).values(),
                   default=1)
    out = {**text, "model_type": class_type, **small, "num_attention_heads": heads,
           "num_key_value_heads": max(1, heads // multiple)}
    out.pop("qk_head_dim", None)  # DeepseekV3Config's sum of the two (shrunk) parts
    if head_dim is not None:
        out["hidden_size"] = heads * head_dim
        if text.get("head_dim") is not None or "head_dim" in params:
            out["head_dim"] = head_dim
    else:  # MLA: the rotary part stays, the rest shrinks
        out["hidden_size"] = 64
    if "mamba_d_head" in out and "mamba_n_heads" in small:
        out["mamba_d_head"] = "auto"  # follows the shrunk hidden size and heads
    if config_reader.num_layers(text) is None and text.get("layer_types") is None:
        out["num_hidden_layers"] = 2  # the config states no layers: two show it
    # each value under the class's own field, not an attribute_map alias of it:
    # a 5.x dataclass sets the alias after __post_init__ has read the field
    # (DbrxConfig copies d_model into ffn_config.hidden_size there, so
    # hidden_size=64 left the experts 2048 wide)
    for alias, target in (getattr(config_class(class_type), "attribute_map", None)
                          or {}).items():
        if alias in out and target not in ("model_type",):
            out[target] = out.pop(alias)
    return out


def config_class(model_type: str):
    """The config class of ``model_type``: the registered one, else a
    composite's text config that is not registered on its own (4.57.6's
    ``mllama_text_model`` and ``emu3_text_model``, the text configs of
    ``mllama`` and ``emu3``), else ``None``."""
    _, mapping = _transformers()
    if model_type in mapping:
        return mapping[model_type]
    owner = model_type.removesuffix("_text_model")
    sub = (getattr(mapping[owner], "sub_configs", None) or {}).get(
        "text_config") if owner != model_type and owner in mapping else None
    return sub if getattr(sub, "model_type", None) == model_type else None


#: Layer-count fields of a composite's other parts (a vision tower, say):
#: set to 1, since only the text model is compared and a full-size tower
#: takes most of the build (Qwen2.5-VL's 32 vision blocks: about 50 s).
OTHER_PART_LAYERS = ("depth", "num_hidden_layers", "num_layers")


def _built(cls, fields: dict):
    """The config object of ``cls`` from ``fields``, a composite's parts other
    than the text model cut to one layer (built whole if the class refuses
    that)."""
    parts = {}
    for name, sub in (getattr(cls, "sub_configs", None) or {}).items():
        if name == "text_config" or not isinstance(sub, type) or name in fields:
            continue
        params = std_inspect.signature(sub.__init__).parameters
        one = {k: 1 for k in OTHER_PART_LAYERS if k in params}
        if one:
            parts[name] = one
    if parts:
        try:
            return cls(**fields, **parts)
        except Exception:  # noqa: BLE001 -- the class refuses a one-layer part
            pass
    return cls(**fields)


class _SinCosTable:
    """GPT-J's and CodeGen's rotary table (``embed_positions``: per position
    the sines, then the cosines, of each pair; ``create_sinusoidal_positions``)
    read as a rotary module: ``(cos, sin)`` per position, one value per pair;
    no ``inv_freq`` to compare, no attention factor."""

    inv_freq = None
    attention_scaling = 1.0

    def __init__(self, table):
        self.table = table

    def __call__(self, x, positions):
        sin, cos = torch.chunk(self.table[positions.reshape(-1)], 2, dim=-1)
        return cos[None], sin[None]


class _SeqLenRotary:
    """A rotary module whose forward takes the sequence length instead of the
    positions (PhiMoE, Open-Llama: ``forward(x, seq_len)``, the cos/sin of
    ``0 ... seq_len - 1``, PhiMoE's with its mscale multiplied in; the model
    calls it with the last position + 1) read as one that takes positions, at
    ``seq_len``."""

    def __init__(self, module, seq_len: int):
        self.module, self.seq_len = module, seq_len
        inv_freq = getattr(module, "inv_freq", None)
        if inv_freq is None:  # PhiMoE computes it in each call
            inv_freq, _ = module.rope_init_fn(module.config, None, seq_len)
        self.inv_freq = inv_freq
        cos, _ = module(torch.zeros(1, dtype=torch.float64), seq_len=seq_len)
        self.attention_scaling = float(cos[0, 0])  # cos(0) times the mscale

    def __call__(self, x, positions):
        cos, sin = self.module(x, seq_len=self.seq_len)
        index = positions.reshape(-1)
        return cos[index][None], sin[index][None]


class _LayerTypeRotary:
    """transformers 5.x's one rotary module for several layer types (Gemma 3,
    OLMo 3, Laguna, ...): buffers ``{type}_inv_freq`` and attributes
    ``{type}_attention_scaling``, ``forward(x, position_ids, layer_type)``;
    read as the module of one layer type."""

    def __init__(self, module, layer_type: str):
        self.module, self.layer_type = module, layer_type
        self.inv_freq = getattr(module, f"{layer_type}_inv_freq")
        self.attention_scaling = getattr(module, f"{layer_type}_attention_scaling", 1.0)

    def __call__(self, x, positions):
        return self.module(x, positions, layer_type=self.layer_type)


def _readable(module, built, index: int, seq_len: int):
    """``module`` as one that has ``inv_freq`` and takes positions: a module
    that takes ``seq_len`` read at ``seq_len``, 5.x's shared per-type module
    read at layer ``index``'s type, 5.x GPT-J's and CodeGen's sine table; else
    ``module`` itself."""
    if _takes_seq_len(module):
        return _SeqLenRotary(module, seq_len)
    if module is None or getattr(module, "inv_freq", None) is not None:
        return module
    if isinstance(getattr(module, "embed_positions", None), torch.Tensor):
        return _SinCosTable(module.embed_positions)  # GPT-J, CodeGen (5.x)
    types = getattr(built, "layer_types", None)
    if types and hasattr(module, f"{types[index]}_inv_freq"):
        return _LayerTypeRotary(module, types[index])
    # DeepSeek-V4: one buffer per entry of rope_parameters, named by label
    label = config_reader.DEEPSEEK_V4_LABELS.get(types[index]) if types else None
    if label and hasattr(module, f"{label}_inv_freq"):
        return _LayerTypeRotary(module, label)
    return module


def _takes_seq_len(module) -> bool:
    import inspect

    if not isinstance(module, torch.nn.Module):  # None, GPT-J's and CodeGen's table
        return False
    params = inspect.signature(module.forward).parameters
    return "seq_len" in params and "position_ids" not in params


def _rotary_for(model, layer):
    """The rotary module a decoder layer's forward pass uses, or ``None``."""
    # DBRX keeps its attention inside a norm-attention-norm block
    layer = getattr(layer, "norm_attn_norm", layer)
    attn = next((getattr(layer, n) for n in ("self_attn", "attention", "attn",
                                             "self_attention",  # Falcon's
                                             "temporal_block")  # RecurrentGemma's
                 if getattr(layer, n, None) is not None), None)
    name = type(attn).__name__ if attn is not None else ""
    if name.endswith("RecurrentBlock"):
        return None, attn  # RecurrentGemma's RG-LRU blocks: no attention
    if isinstance(getattr(attn, "embed_positions", None), torch.Tensor):
        return _SinCosTable(attn.embed_positions), attn  # GPT-J, CodeGen
    if hasattr(getattr(attn, "self", None), "apply_rotary_position_embeddings"):
        # RoFormer: the encoder's one sinusoidal table ([sin | cos] per position)
        return _SinCosTable(model.encoder.embed_positions.weight.detach()), attn
    if attn is None or not getattr(attn, "use_rope", 1):
        return None, attn
    if "linear_attention" in (getattr(layer, "layer_type", None),
                              getattr(layer, "block_type", None)):
        return None, attn  # MiniMax's lightning attention ignores the cos/sin
        # (4.57.6 names the decoder layer's type layer_type, 5.24.0 block_type)
    # the attention classes that skip the cos/sin they are given (each one's
    # forward, transformers 4.57.6 and 5.24.0)
    if name in ("Cohere2Attention", "Cohere2MoeAttention", "FlintAttention") and \
            attn.sliding_window is None and not getattr(attn, "force_rope", False):
        return None, attn
    if name in ("Exaone4Attention", "ExaoneMoeAttention", "Kolibri1Attention") and \
            not (attn.sliding_window is None or attn.is_sliding):
        return None, attn
    if name == "AfmoeAttention" and not attn.is_local_attention:
        return None, attn
    if name == "LaraMiniAttention" and attn.layer_type != "sliding_attention":
        return None, attn  # LaraMiniModel passes no cos/sin to the others
    if name in ("GraniteSWAAttention", "GraniteMoeSWAAttention"):
        # GraniteSWAModel: one rotary module per nonzero layer_rope_theta
        theta = model.config.layer_rope_theta[attn.layer_idx]
        return (None if not theta else next(
            r for r in model.rotary_embs
            if r.config.rope_parameters["rope_theta"] == theta)), attn
    if name == "BeamAttention" and attn.config.rope_parameters[
            attn.config.layer_types[attn.layer_idx]] is None:
        return None, attn  # BeamModel: no cos/sin for a layer type mapped to None
    if hasattr(attn, "rotary_emb"):  # the attention's own (Moshi; None: no RoPE)
        return attn.rotary_emb, attn
    if hasattr(model, "rotary_embs"):  # OLMo 3
        return model.rotary_embs[attn.attention_type], attn
    if getattr(attn, "is_sliding", False) and hasattr(model, "rotary_emb_local"):
        return model.rotary_emb_local, attn
    if hasattr(model, "global_rotary_emb"):  # ModernBERT decoder
        return (model.local_rotary_emb if getattr(attn, "is_sliding", False)
                else model.global_rotary_emb), attn
    # LFM2-MoE (5.24.0) keeps its one rotary module as pos_emb
    return getattr(model, "rotary_emb", None) or getattr(model, "pos_emb", None), attn


def filled_cache_bytes(model, built, tokens: int) -> tuple[int, int]:
    """``(bytes of keys and values, bytes of other state)`` that ``model``'s own
    cache holds after one forward pass of ``tokens`` tokens (``built``: its
    config object); the tensors are counted, not predicted, by
    ``posenc_lib.tools.cache_walk.walk``."""
    kwargs = generation_cache(model, built)
    from .cache_walk import fill_cache, walk

    if kwargs:
        with torch.no_grad():
            cache = model(torch.arange(tokens)[None] % 16, use_cache=True,
                          **kwargs).past_key_values
    else:
        cache = fill_cache(model, built, tokens)
    found = walk(cache, model)
    return found.kv, found.state


def generation_cache(model, built) -> dict:
    """``{"past_key_values": cache}`` for a model whose forward pass makes no
    cache of its own where ``generate()`` creates one (4.57.6's Bamba and
    Falcon-H1, GraniteMoeHybrid: their hybrid caches, in the model's own
    dtype), else ``{}``."""
    import transformers

    kwargs = {}
    if built.model_type == "granitemoehybrid" or (
            built.model_type == "bamba" and transformers.__version__.startswith("4.")):
        # only generate() creates it (4.57.6's Bamba likewise)
        if built.model_type == "bamba":
            from transformers.models.bamba.modeling_bamba import (
                HybridMambaAttentionDynamicCache)
        else:
            from transformers.models.granitemoehybrid.modeling_granitemoehybrid import (
                HybridMambaAttentionDynamicCache)

        # in the model's own dtype, as generate() creates it
        kwargs["past_key_values"] = HybridMambaAttentionDynamicCache(
            built, 1, next(model.parameters()).dtype)
    elif built.model_type == "falcon_h1" and transformers.__version__.startswith("4."):
        # likewise in 4.57.6 (5.x's model makes its own DynamicCache)
        from transformers.models.falcon_h1.modeling_falcon_h1 import (
            FalconHybridMambaAttentionDynamicCache)

        kwargs["past_key_values"] = FalconHybridMambaAttentionDynamicCache(
            built, 1, next(model.parameters()).dtype,
            devices=["cpu"] * built.num_hidden_layers)
    return kwargs


def crosscheck(config: Mapping, *, tokens: int = 10, python: str | None = None) -> dict:
    """Compare the report on ``config`` with a tiny model of its class.

    Args:
        config: a parsed ``config.json`` (a multimodal one is checked through
            its text model).
        tokens: the length of the forward pass whose cache is measured.
        python: another Python interpreter (a transformers 5.x venv, say) to
            build and run the tiny model with; it imports this ``posenc_lib``
            and needs torch and transformers. The comparison is this
            library's.

    Returns:
        dict with ``model_type``, ``class`` (the model class built),
        ``layers`` (per layer: ``index``, ``rope`` (bool), ``cos_sin_error``,
        ``tolerance``, ``ok``), ``softmax_scaling`` (the report's) and
        ``scales_received`` (what each attention call received),
        ``cache`` (``kv``, ``state``: measured and predicted bytes at
        ``tokens`` tokens), ``beyond`` (positions past ``L`` checked, or
        ``None``), ``not_compared`` (comparisons that could not be made),
        ``problems`` (a list of sentences) and ``ok``.

    Raises:
        ImportError: without transformers.
        ValueError: for a model type the installed transformers does not know.
    """
    if python is not None:
        return _in_other_python(config, tokens, python)
    transformers, _ = _transformers()
    from transformers import AutoModel
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    from transformers.utils import logging as hf_logging

    from . import conformance, tiny_model

    small = shrink(config)
    fields = {k: v for k, v in small.items() if k != "model_type"}
    if small["model_type"] in tiny_model.NEEDS_DECODER:
        fields["is_decoder"] = True  # as its causal LM builds it: with a cache
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        built = _built(config_class(small["model_type"]), fields)
        built._attn_implementation = "eager"
        torch.manual_seed(0)
        # float32: GPT-J's and CodeGen's sine table is computed in the dtype the
        # model is built in (bfloat16 frequencies are off by 0.9 near L)
        own = None if built.model_type in MODEL_MAPPING_NAMES else \
            tiny_model._causal_lm_of(type(built))
        try:
            if own is not None:
                # a text config with no base model of its own (Mllama's, Emu3's):
                # the causal LM its module defines for it, and that one's decoder
                model = own._from_config(built, dtype=torch.float32).eval()
            else:
                model = AutoModel.from_config(built, dtype=torch.float32).eval()
        except Exception as error:  # noqa: BLE001 -- transformers' own failure
            # (4.57.6's Phi4MultimodalConfig without a vision_config builds, and
            # its model then reads config.vision_config.image_token_id)
            raise ValueError(
                f"transformers {transformers.__version__} builds the config but not a "
                f"model of it ({type(built).__name__}: {type(error).__name__}: "
                f"{str(error)[:200]}); nothing to compare (the report itself needs "
                f"no model)") from error
    finally:
        hf_logging.set_verbosity(verbosity)
    base = model.model if own is not None else getattr(model, "language_model", model)
    problems: list[str] = []
    rotary = config_reader.positional_scheme(small) == "rotary"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected_softmax = softmax_scale(small)
        one = _global_config(small) if rotary else None
        train = config_reader.parse_rope_config(one).train_length if one else tokens
        if train is None:  # the window every rotating layer attends within
            train = per_layer.windowed_length(small)
    if train is None:
        raise ValueError("config is incomplete: the length L needs "
                         "max_position_embeddings (or original_max_position_embeddings)")
    positions = torch.cat([torch.arange(min(tokens, train)),
                           torch.arange(max(train - 4, tokens), train)])
    layers_out = []
    stack = getattr(base, "layers", None) or tiny_model._decoder_layers(base)
    for i, layer in enumerate(stack):
        module, attn = _rotary_for(base, layer) if rotary else (None, None)
        module = _readable(module, getattr(built, "text_config", None) or built, i,
                           train)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = (scaling.rope_from_config(small, layer=i, seq_len=train,
                                             dtype=torch.float64) if rotary else None)
        entry = {"index": i, "rope": module is not None, "cos_sin_error": None,
                 "tolerance": None, "ok": True}
        if (ours is None) != (module is None):
            entry["ok"] = False
            problems.append(f"layer {i}: transformers "
                            f"{'applies no' if module is None else 'applies a'} RoPE, "
                            f"the report {'does' if ours is not None else 'does not'}")
        elif module is not None:
            freq, factor = ours
            theirs = freq if module.inv_freq is None else module.inv_freq.double()
            if theirs.shape != freq.shape or not torch.allclose(
                    freq, theirs, rtol=32 * EPS32, atol=0):
                entry["ok"] = False
                problems.append(f"layer {i}: inv_freq differs from the report's"
                                + (f" (rotary dim {2 * theirs.numel()} vs "
                                   f"{2 * freq.numel()})"
                                   if theirs.shape != freq.shape else ""))
            # a module without attention_scaling (4.57.6's RecurrentGemma)
            # returns cos and sin unscaled
            scale = float(getattr(module, "attention_scaling", 1.0))
            if not math.isclose(scale, factor,
                                rel_tol=8 * torch.finfo(torch.float64).eps):
                entry["ok"] = False
                problems.append(f"layer {i}: rotary attention_scaling "
                                f"{scale:.9g}, the report {factor:.9g}")
            x = torch.zeros(1, dtype=torch.float32)
            with torch.no_grad():
                try:
                    out = module(x, positions[None])
                except (IndexError, RuntimeError):  # M-RoPE: one row per axis
                    out = module(x, positions.expand(3, 1, -1))
            if isinstance(out, torch.Tensor) and out.is_complex():
                cos, sin = out.real, out.imag  # freqs_cis: Llama 4, DeepSeek-V2
            else:
                cos, sin = out
            if cos.dim() == 4:  # (axis, batch, seq, dim): equal positions per axis
                cos, sin = cos[0], sin[0]
            angles = positions.double()[:, None] * freq
            cos, sin = cos[0].double(), sin[0].double()
            # the module's rows in either layout (halves, or each pair's value
            # twice in a row: Cohere, GLM), or one value per pair (gpt-oss);
            # which features the weights pair is compared elsewhere (the
            # conformance sweep's probes), so the closer layout is taken
            best = None
            for spread in (lambda x: torch.cat([x] * 2, -1),
                           lambda x: x.repeat_interleave(2, -1), lambda x: x):
                ref_cos, ref_sin = spread(angles.cos()) * factor, \
                    spread(angles.sin()) * factor
                if cos.shape != ref_cos.shape:
                    continue
                err = torch.maximum((cos - ref_cos).abs(), (sin - ref_sin).abs())
                tol = factor * (33 * EPS32 * spread(angles.abs()) + 2 * EPS32)
                if best is None or float((err / tol).max()) < float(
                        (best[0] / best[1]).max()):
                    best = (err, tol, ref_cos)
            if best is not None:
                err, tol, ref_cos = best
                if (err > tol).any():
                    entry["ok"] = False
                    problems.append(f"layer {i}: cos/sin off by "
                                    f"{float(err.max()):.3g}")
                entry["cos_sin_error"] = float(err.max())
                entry["tolerance"] = float(tol.max())
            else:  # never a difference of 0: the comparison is impossible
                entry["ok"] = False
                problems.append(f"layer {i}: rotary dim {cos.shape[-1]} vs "
                                f"{2 * angles.shape[-1]}: cos/sin not compared")
        layers_out.append(entry)
    kv, state = filled_cache_bytes(model, built, tokens)
    predicted = serving.kv_cache_bytes(small, length=tokens, bytes_per_value=4)
    fixed = predicted["fixed_state"]["bytes"] if predicted["fixed_state"] else 0
    if (kv, state) != (predicted["bytes_at_length"], fixed):
        problems.append(f"cache after {tokens} tokens: transformers holds {kv:,} bytes "
                        f"of keys and values and {state:,} of other state, the report "
                        f"{predicted['bytes_at_length']:,} and {fixed:,}")
    # What the attention calls receive (scaling), and each rotary module at a
    # position past L (called with float32 input): the conformance sweep's
    # observation; its cos/sin rows and cache bytes are not used
    model32 = model
    hf_logging.set_verbosity_error()
    try:
        observed = tiny_model.observe(model32, built, small["model_type"])["observed"]
    finally:
        hf_logging.set_verbosity(verbosity)
    scales = sorted({v for v in observed["scales"].values() if v is not None})
    not_compared = []
    for d in conformance.compare({**observed, "cos_sin": {}, "kv_per_token": 0,
                                  "fixed_state": None}, small):
        if d["what"] == "softmax scale" or d["what"].endswith("past L"):
            problems.append(d["reason"])
    return {"model_type": small["model_type"], "class": type(model).__name__,
            "transformers": transformers.__version__, "tokens": tokens,
            "layers": layers_out, "softmax_scaling": expected_softmax,
            "scales_received": scales, "beyond": observed.get("beyond") and
            observed["beyond"]["position"], "not_compared": not_compared,
            "cache": {"kv": kv, "kv_predicted": predicted["bytes_at_length"],
                      "state": state, "state_predicted": fixed},
            "problems": problems, "ok": not problems}


def _in_other_python(config: Mapping, tokens: int, python: str) -> dict:
    """Run :func:`crosscheck` with the interpreter ``python`` (JSON both ways)."""
    import json
    import os
    import subprocess
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get(
        "PYTHONPATH", "")}
    try:
        done = subprocess.run([python, "-m", "posenc_lib.tools.crosscheck", "--stdin-json",
                               "--tokens", str(tokens)],
                              input=json.dumps(dict(config)), capture_output=True,
                              text=True, env=env, cwd=root, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ValueError(f"python {python!r} could not run the cross-check: "
                         f"{error}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ValueError(f"python {python!r} could not run the cross-check: {last}")
    return json.loads(done.stdout)


def format_result(result: dict) -> str:
    """The crosscheck as a few lines, ending with its verdict."""
    rotary = sum(e["rope"] for e in result["layers"])
    errors = [e["cos_sin_error"] for e in result["layers"]
              if e["cos_sin_error"] is not None]
    worst = (f"largest cos/sin difference {max(errors):.3g}" if errors else
             "no cos/sin compared")
    cache = result["cache"]
    lines = [f"crosscheck against transformers {result['transformers']} "
             f"({result['class']}, tiny sizes, random weights):",
             f"  layers             {len(result['layers'])} compared, {rotary} with "
             f"RoPE; {worst}",
             (f"  softmax scaling    report {result['softmax_scaling']:.6g}; attention "
              f"called with {', '.join(f'{v:.6g}' for v in result['scales_received'])}"
              if result["scales_received"] else
              f"  softmax scaling    report {result['softmax_scaling']:.6g}; not "
              f"compared (the attention does not call eager_attention_forward)")
             if result["softmax_scaling"] is not None else
             "  softmax scaling    none (no attention)",
             f"  cache              {cache['kv']:,} bytes of keys and values after "
             f"{result['tokens']} tokens (report: {cache['kv_predicted']:,}); fixed "
             f"state {cache['state']:,} (report: {cache['state_predicted']:,})"]
    if result.get("beyond"):
        lines.append(f"  past L             each rotary module's cos/sin at position "
                     f"{result['beyond']:,} compared")
    for item in result.get("not_compared", []):
        lines.append(f"  NOT COMPARED       {item}")
    for problem in result["problems"]:
        lines.append(f"  MISMATCH           {problem}")
    lines.append("  verdict            " + (
        "the report matches what transformers runs" if result["ok"] else
        f"{len(result['problems'])} mismatch(es): do not trust the report for "
        f"this config"))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # ``python -m posenc_lib crosscheck``: the command line prints the
    # inspector's report first, so it lives with the inspector's
    # (posenc_lib.tools.inspector.crosscheck_main), which imports this module, not the
    # other way round
    from posenc_lib.tools.inspector import crosscheck_main

    raise SystemExit(crosscheck_main())
