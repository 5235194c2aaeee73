"""Dory and Dots 3 Note (transformers 5.24.0 only): the refusals and config
forms the generated configs of ``tests/test_generated_caches.py`` do not
reach. Their caches, rotary calls and softmax scales are judged there against
32 tiny models of each, built by 5.24.0 from configs in every form below.
"""

from __future__ import annotations

import warnings

import pytest

from posenc_lib import config_reader, per_layer, scaling, serving
from posenc_lib.logit_scale import layer_softmax_scales

DORY = {"model_type": "dory", "hidden_size": 32, "num_attention_heads": 2,
        "num_key_value_heads": 1, "head_dim": 8, "num_hidden_layers": 5,
        "n_input_layers": 1, "n_recurrent_layers": 2, "n_output_layers": 2,
        "n_recurrent_loops": 3, "sliding_window": 4}


def _sized(config, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serving.kv_cache_bytes(config, transformers_version="5.24.0", **kw)


def _saved(config: dict) -> dict:
    """``config`` as ``DoryConfig.to_dict`` writes it: an "mlp" after each
    layer type, the four layer counts doubled."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kinds = per_layer.layer_types(config)
    out = {**config, "layer_types": [x for k in kinds for x in (k, "mlp")]}
    for key in ("num_hidden_layers", "n_input_layers", "n_recurrent_layers",
                "n_output_layers"):
        out[key] = 2 * config[key]
    return out


def test_dory_caches_each_further_pass_of_its_recurrent_layers():
    """5 layers, the recurrent two run three times: 5 + 2 x 2 cache layers,
    their kinds those of layers 1 and 2 (layer 3 is the full one); with
    last_loop only the model's 5."""
    cache = _sized(DORY, length=10)
    assert cache["layers"] == 9
    assert cache["by_layer_type"]["full_attention"]["layers"] == 1
    last = _sized({**DORY, "recurrent_kv_cache_mode": "last_loop"}, length=10)
    assert last["layers"] == 5
    with pytest.raises(ValueError, match="recurrent_kv_cache_mode"):
        _sized({**DORY, "recurrent_kv_cache_mode": "every_loop"})


def test_dory_s_saved_form_reads_as_the_form_a_user_writes():
    saved = _saved(DORY)
    assert _sized(saved, length=10) == _sized(DORY, length=10)
    # without n_recurrent_layers the class fills in what the others leave
    minimal = {k: v for k, v in saved.items() if k != "n_recurrent_layers"}
    assert _sized(minimal, length=10) == _sized(DORY, length=10)
    # a saved form that leaves out the input and output layers halves the
    # class's 8 and 8 as well: 4 + 4 + the rest of 16 // 2 layers
    bare = {k: v for k, v in saved.items() if not k.startswith("n_")}
    bare.update(num_hidden_layers=32, layer_types=["sliding_attention", "mlp"] * 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text, _ = config_reader._text_config(bare)
    assert (text["n_input_layers"], text["n_recurrent_layers"],
            text["n_output_layers"]) == (4, 8, 4)


@pytest.mark.parametrize("change, message", [
    ({"n_recurrent_layers": 3}, "must be num_hidden_layers"),
    ({"n_recurrent_loops": 0}, "at least 1"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4}},
     "one entry per layer type"),
])
def test_a_dory_config_its_class_or_model_refuses_is_refused(change, message):
    """``DoryConfig.validate_architecture`` refuses the first two (5.24.0); the
    third builds, and ``DoryRotaryEmbedding`` raises a KeyError (measured)."""
    with pytest.raises(ValueError, match=message):
        _sized({**DORY, **change})


def test_dory_s_class_default_bases_are_per_layer_type_whatever_rope_theta_says():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text, _ = config_reader._text_config({**DORY, "rope_theta": 5e5})
    assert text["rope_parameters"] == {
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        "full_attention": {"rope_type": "default", "rope_theta": 1e7}}


def test_vllm_is_not_sized_for_dory():
    with pytest.raises(ValueError, match="not modelled"):
        _sized(DORY, engine="vllm")


DOTS = {"model_type": "dots3_note_text", "hidden_size": 32, "num_hidden_layers": 6,
        "num_attention_heads": 2, "num_key_value_heads": 2, "q_lora_rank": 8,
        "kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
        "v_head_dim": 8, "head_dim": 16, "index_head_dim": 16}
SWA = {"num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 8,
       "kv_lora_rank": 24, "head_dim": 24, "qk_nope_head_dim": 16, "v_head_dim": 8}


def test_dots3_note_s_released_keywords_read_as_its_saved_form():
    """The released checkpoint's ``swa_*`` keywords and ``swa_rope_theta``,
    and the form the class saves (``per_layer_config``, an entry per layer
    type with its share), size and rotate alike; layers 0, 1 and 5 are
    indexed (``i < 2 or i % 4 == 1``), the others slide."""
    released = {**DOTS, **{f"swa_{k}": v for k, v in SWA.items()},
                "swa_rope_theta": 1e4, "rope_theta": 1e6, "sliding_window_size": 3}
    kinds = ["indexed_attention"] * 2 + ["sliding_attention"] * 3 + ["indexed_attention"]
    saved = {**DOTS, "layer_types": kinds, "sliding_window": 3,
             "per_layer_config": {str(i): {**SWA, "qk_rope_head_dim": 8}
                                  for i in (2, 3, 4)},
             "rope_parameters": {
                 "indexed_attention": {"rope_type": "default", "rope_theta": 1e6,
                                       "partial_rotary_factor": 0.25},
                 "sliding_attention": {"rope_type": "default", "rope_theta": 1e4,
                                       "partial_rotary_factor": 8 / 24}}}
    assert per_layer.layer_types(released) == kinds
    assert _sized(released, length=9) == _sized(saved, length=9)
    assert layer_softmax_scales(released) == layer_softmax_scales(saved) == {
        0: 12 ** -0.5, 1: 12 ** -0.5, 2: 24 ** -0.5, 3: 24 ** -0.5, 4: 24 ** -0.5,
        5: 12 ** -0.5}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for layer, (base, dim) in {0: (1e6, 4), 2: (1e4, 8)}.items():
            inv_freq, _ = scaling.rope_from_config(released, layer=layer)
            assert inv_freq.numel() == dim // 2
            assert float(inv_freq[1]) == pytest.approx(base ** (-2 / dim), rel=1e-6)


def test_dots3_note_s_indexer_keys_are_float32_in_a_bfloat16_model():
    """Per token: the indexed layers' latent (kv_lora_rank + qk_rope_head_dim,
    2 bytes) and their indexer keys (index_head_dim, 4 bytes), the sliding
    layers' larger latent (24 + 8); ``use_dsa`` false: full layers, no
    indexer."""
    released = {**DOTS, **{f"swa_{k}": v for k, v in SWA.items()},
                "swa_qk_rope_head_dim": 8}
    cache = _sized(released, bytes_per_value=2)
    assert cache["bytes_per_token"] == 3 * (12 * 2 + 16 * 4) + 3 * 32 * 2
    plain = _sized({**released, "use_dsa": False}, bytes_per_value=2)
    assert plain["indexer"]["layers"] == 0
    assert plain["bytes_per_token"] == 3 * 12 * 2 + 3 * 32 * 2
