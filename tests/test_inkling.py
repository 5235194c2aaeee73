"""Inkling's text models (transformers 5.24.0's ``inkling_text``,
``inkling2_text``, ``inkling2_loop_text``): the edges the generated configs of
``tests/test_generated_caches.py`` do not reach, each against what 5.24.0
does with such a config (measured once with the 5.x venv; the behaviour is
cited where it is a refusal).

The caches themselves (both kinds of layer, the ``swa_*`` heads, windows of 1,
the float32 convolution states in bfloat16 models, Inkling 2 Loop's copies)
are judged against 96 generated tiny models there.
"""

from __future__ import annotations

import warnings

import pytest

from posenc_lib import config_reader, per_layer, scaling, serving
from posenc_lib.logit_scale import layer_softmax_scales, softmax_scale
from posenc_lib.tools import inspector

TYPES = ("inkling_text", "inkling2_text", "inkling2_loop_text")
SMALL = {"num_hidden_layers": 6, "num_attention_heads": 4, "hidden_size": 32,
         "num_key_value_heads": 2, "head_dim": 8, "swa_num_key_value_heads": 1,
         "swa_head_dim": 4, "sliding_window_size": 3, "conv_kernel_size": 2}


def _sized(config, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return serving.kv_cache_bytes(config, transformers_version="5.24.0", **kw)


@pytest.mark.parametrize("model_type", TYPES)
def test_inkling_has_no_rotary_frequencies(model_type):
    config = {"model_type": model_type, **SMALL}
    assert "no RoPE" in config_reader.positional_scheme(config)
    with pytest.raises(ValueError, match="not rotary"):
        config_reader.parse_rope_config(config)
    assert all(x.rope is None for x in per_layer.layer_layout(config))
    assert scaling.rope_from_config(config, layer=5) is None


@pytest.mark.parametrize("beside", [False, True])
@pytest.mark.parametrize("window", [None, 0, -2])
def test_a_sliding_layer_without_a_positive_window_is_refused(window, beside):
    """5.24.0 builds such a config, and its model fails at the first forward
    (a null window: ``torch.empty`` given None, and without sliding layers
    ``create_sliding_window_causal_mask``'s "Could not find a `sliding_window`";
    0: an index out of range), so the library names the field instead of
    sizing a cache no model fills. The alias wins beside ``sliding_window_size``
    (``beside``), a null one too: the class's attribute_map sets the field to
    None (``tests/test_config_names.py`` measures every class's nulls)."""
    config = {"model_type": "inkling2_text", **SMALL, "sliding_window": window}
    if not beside:
        del config["sliding_window_size"]
    with pytest.raises(ValueError, match="sliding_window"):
        per_layer.layer_layout(config)
    full = {**config, "layer_types": ["hybrid"] * 6}  # still: the model's sliding mask
    with pytest.raises(ValueError, match="sliding_window"):
        _sized(full, length=5)


def test_the_aliases_win_over_their_fields():
    """``sliding_window`` and ``sconv_kernel_size`` are attribute_map aliases:
    given beside ``sliding_window_size`` / ``conv_kernel_size``, the alias is
    what the class holds (5.24.0, either order of the keys)."""
    base = {"model_type": "inkling_text", **SMALL}
    both = {**base, "sliding_window": 5, "sconv_kernel_size": 3}
    assert {x.window for x in per_layer.layer_layout(both) if x.window} == {5}
    # a layer of 2 x 1 head x 4 keeps 4 tokens at 5 tokens or more
    at_ten = _sized(both, length=10, bytes_per_value=2)["by_layer_type"]
    assert at_ten["hybrid_sliding"]["tokens_at_length"] == 4
    state = _sized(both)["fixed_state"]["bytes"]
    plain = _sized({**base, "conv_kernel_size": 3})["fixed_state"]["bytes"]
    assert state == plain and state != _sized(base)["fixed_state"]["bytes"]


def test_softmax_scales_are_per_layer_type():
    config = {"model_type": "inkling_text", **SMALL}
    scales = layer_softmax_scales(config)
    kinds = per_layer.layer_types(config)
    assert kinds == ["hybrid_sliding"] * 5 + ["hybrid"]
    assert scales == {i: 1 / 4 for i in range(5)} | {5: 1 / 8}
    assert softmax_scale(config) == 1 / 8  # the full layers' (the inspector's line)
    two = layer_softmax_scales({**config, "model_type": "inkling2_text"})
    assert two[0] == 4 ** -0.5 and two[5] == 8 ** -0.5


@pytest.mark.parametrize("loop, message", [
    ({"loop_layer_index_start": 0}, "above 0"),
    ({"loop_layer_index_start": 3, "n_layers_per_attn_res_block": 2}, "multiples"),
    ({"loop_config": {"core_end": 5}, "n_layers_per_attn_res_block": 2}, "multiples"),
    ({"loop_layer_index_start": 2, "loop_layer_index_end": 8,
      "n_layers_per_attn_res_block": 2, "loop_num_passes": 3}, "IndexError"),
])
def test_a_loop_the_model_cannot_run_is_refused(loop, message):
    """``Inkling2LoopTextConfig.validate_architecture`` refuses the first three
    (5.24.0 ``models/inkling2_loop/configuration_inkling2_loop.py``); the
    fourth builds, and its model raises an IndexError at the first forward."""
    config = {"model_type": "inkling2_loop_text", **SMALL, **loop}
    with pytest.raises(ValueError, match=message):
        _sized(config)


def test_the_looped_layers_are_cached_once_per_pass():
    """Layers 2 and 3, three passes: two copies each, after the 6 layers; the
    ``loop_config`` form says the same; a loop past the last layer copies what
    exists (two passes, which 5.24.0 runs)."""
    config = {"model_type": "inkling2_loop_text", **SMALL, "loop_layer_index_start": 2,
              "loop_layer_index_end": 4, "loop_num_passes": 3,
              "n_layers_per_attn_res_block": 2}
    flat = _sized(config, length=1)
    assert flat["layers"] == 6 + 2 * 2
    nested = {k: v for k, v in config.items() if not k.startswith("loop_")}
    nested["loop_config"] = {"core_start": 2, "core_end": 4, "num_passes": 3}
    assert _sized(nested, length=1) == flat
    past = {**config, "loop_layer_index_end": 8, "loop_num_passes": 2}
    assert _sized(past, length=1)["layers"] == 6 + 4


def test_vllm_is_not_sized_and_the_report_says_so():
    config = {"model_type": "inkling_text", **SMALL}
    with pytest.raises(ValueError, match="not modelled"):
        _sized(config, engine="vllm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = inspector.inspect_config(config, engine="vllm", target_length=100)
        plain = inspector.inspect_config(config, target_length=100)
    assert "kv_cache" not in report
    assert any("vLLM's cache of inkling" in w for w in report["warnings"])
    assert plain["kv_cache"]["fixed_state"]["bytes"] > 0
