"""Per-layer positions against transformers 4.57.6's own models.

Each check builds a tiny model (hidden size 64, a few layers, random
weights, no download) from the same config with transformers' own classes,
then reads which rotary module every layer uses the way its forward pass
does (``Gemma3TextModel.rotary_emb_local`` for sliding layers,
``Olmo3Model.rotary_embs[attention_type]``, ``use_rope`` of Llama 4 and
SmolLM3, Qwen3-Next's ``linear_attn`` layers), and compares that module's
``inv_freq`` and ``attention_scaling`` with ``rope_from_config(config,
layer=i)``. Tolerance as in ``test_models.py``.
"""

from __future__ import annotations

import copy
import inspect as std_inspect
import json
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")

from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from posenc_lib import per_layer, scaling  # noqa: E402
from posenc_lib import config_reader  # noqa: E402
from posenc_lib.tools import inspector as model_inspect  # noqa: E402
from helpers.hf_reference import assert_same  # noqa: E402
from helpers.tiny_models import (CLASS_TYPE, EXTRA, GEMMA3, LLAMA4,  # noqa: E402
                                 OLMO3, TINY, check_every_layer, tiny_model)

TABLE_ROTARY = [n for n in model_inspect.model_names()
                if config_reader.positional_scheme(model_inspect.model_config(n)) == "rotary"]


SMOLLM3 = {"model_type": "smollm3", **TINY, "num_hidden_layers": 8,
           "rope_theta": 5e6, "max_position_embeddings": 65536}
QWEN3_NEXT = {"model_type": "qwen3_next", **TINY, **EXTRA["qwen3_next"],
              "num_hidden_layers": 8, "rope_theta": 1e7, "partial_rotary_factor": 0.25,
              "max_position_embeddings": 262144}
GPT_OSS = {"model_type": "gpt_oss", **TINY, **EXTRA["gpt_oss"], "num_hidden_layers": 4,
           "rope_theta": 150000.0, "sliding_window": 128,
           "max_position_embeddings": 131072,
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                            "beta_slow": 1.0, "truncate": False,
                            "original_max_position_embeddings": 4096}}
LFM2 = {"model_type": "lfm2", **TINY, "num_hidden_layers": 6, "full_attn_idxs": [2, 5],
        "rope_theta": 1e6, "max_position_embeddings": 128000}
COHERE2 = {"model_type": "cohere2", **TINY, "num_hidden_layers": 8, "sliding_window": 16,
           "rope_theta": 5e4, "max_position_embeddings": 8192}
EXAONE4 = {"model_type": "exaone4", **TINY, "num_hidden_layers": 8, "sliding_window": 16,
           "sliding_window_pattern": 4, "rope_theta": 1e6,
           "max_position_embeddings": 65536}
GRANITE4 = {"model_type": "granitemoehybrid", **TINY, "num_hidden_layers": 4,
            "layer_types": ["mamba", "attention", "mamba", "attention"],
            "position_embedding_type": "rope", "rope_theta": 1e4,
            "max_position_embeddings": 4096, "num_local_experts": 2, "mamba_n_heads": 2,
            "mamba_d_state": 8, "mamba_n_groups": 1, "shared_intermediate_size": 32}
MODELS = {"gemma3": GEMMA3, "olmo3": OLMO3, "llama4": LLAMA4, "smollm3": SMOLLM3,
          "qwen3_next": QWEN3_NEXT, "gpt_oss": GPT_OSS, "lfm2": LFM2,
          "cohere2": COHERE2, "exaone4": EXAONE4, "granitemoehybrid": GRANITE4}


#: Sizes that have nothing to do with positions, shrunk so that a model of
#: the table builds in a blink; each is set only where its config class takes it.
SMALL = {"vocab_size": 16, "intermediate_size": 32, "intermediate_size_mlp": 32,
         "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16,
         "num_local_experts": 2, "num_experts": 2, "n_routed_experts": 2,
         "moe_num_experts": 2, "n_shared_experts": 1, "num_experts_per_tok": 1,
         "n_group": 1, "topk_group": 1, "q_lora_rank": 8, "kv_lora_rank": 8,
         "qk_nope_head_dim": 8, "v_head_dim": 8, "linear_num_key_heads": 2,
         "linear_num_value_heads": 2, "linear_key_head_dim": 16,
         "linear_value_head_dim": 16, "pad_token_id": 0}


def shrunk(config: dict) -> dict:
    """A table config's text model with its sizes made tiny: two heads of the
    same head dimension, few experts, a small vocabulary. Every positional
    field, the layer count and the layer types stay as published."""
    model_type = config["model_type"]
    text = copy.deepcopy(config.get("text_config") or config)
    if "text_config" in config:
        model_type = text.pop("model_type", None) or f"{model_type}_text"
    model_type = CLASS_TYPE.get(model_type, model_type)
    heads = text.get("num_attention_heads", text.get("n_head"))
    head_dim = text.get("head_dim") or text["hidden_size"] // heads
    params = std_inspect.signature(CONFIG_MAPPING[model_type].__init__).parameters
    small = {k: v for k, v in SMALL.items() if k in params or k in text}
    return {**text, "model_type": model_type, **small, "num_attention_heads": 2,
            "num_key_value_heads": 2, "hidden_size": 2 * head_dim}


@pytest.mark.parametrize("name", list(MODELS))
def test_every_layer_matches_the_models_own_modules(name):
    layout = check_every_layer(MODELS[name])
    kinds = {(x.attention, x.rope) for x in layout}
    expected = {
        "gemma3": {("sliding_attention", "local"), ("full_attention", "global")},
        "olmo3": {("sliding_attention", "local"), ("full_attention", "global")},
        "llama4": {("chunked_attention", "global"), ("full_attention", None)},
        "smollm3": {("full_attention", "global"), ("full_attention", None)},
        "qwen3_next": {("linear_attention", None), ("full_attention", "global")},
        "gpt_oss": {("sliding_attention", "global"), ("full_attention", "global")},
        "lfm2": {("conv", None), ("full_attention", "global")},
        "cohere2": {("sliding_attention", "global"), ("full_attention", None)},
        "exaone4": {("sliding_attention", "global"), ("full_attention", None)},
        "granitemoehybrid": {("mamba", None), ("attention", "global")},
    }[name]
    assert kinds == expected  # every kind of layer was compared above


@pytest.mark.parametrize("name", TABLE_ROTARY)
def test_every_layer_of_every_table_model(name):
    """Each rotary model of the table, layer by layer, against the modules its
    own model class builds (from the published config with tiny sizes)."""
    config = model_inspect.model_config(name)
    text = config.get("text_config", config)
    if "num_hidden_layers" not in text:  # older entries: no per-layer field,
        text["num_hidden_layers"] = 2  # so two layers show that all agree
        assert not {"layer_types", "no_rope_layers", "rope_local_base_freq",
                    "sliding_window_pattern", "full_attn_idxs"} & set(text)
    check_every_layer(shrunk(config), ours=config)


def test_the_kinds_of_layer_really_differ():
    """Gemma 3's local layers are not its global ones (another base, no factor);
    OLMo 3's sliding layers are plain RoPE, its full layers YaRN."""
    local = scaling.rope_from_config(GEMMA3, layer=0, dtype=torch.float64)
    glob = scaling.rope_from_config(GEMMA3, layer=5, dtype=torch.float64)
    assert torch.allclose(local[0], 1e4 ** -(torch.arange(0, 32, 2) / 32).double())
    assert torch.allclose(glob[0], 1e6 ** -(torch.arange(0, 32, 2) / 32).double() / 8)
    assert torch.equal(glob[0], scaling.rope_from_config(GEMMA3, dtype=torch.float64)[0])
    sliding = scaling.rope_from_config(OLMO3, layer=0, dtype=torch.float64)
    full = scaling.rope_from_config(OLMO3, layer=3, dtype=torch.float64)
    assert sliding[1] == 1.0 and full[1] == 1.2
    assert not torch.equal(sliding[0], full[0])


@st.composite
def layouts(draw):
    name = draw(st.sampled_from(list(MODELS)))
    config = copy.deepcopy(MODELS[name])
    n = draw(st.integers(1, 9))
    config["num_hidden_layers"] = n
    choice = draw(st.sampled_from(["pattern", "explicit", "default"]))
    if name in ("gemma3", "olmo3", "gpt_oss", "cohere2", "exaone4"):
        if choice == "explicit":
            config["layer_types"] = draw(st.lists(st.sampled_from(
                ["sliding_attention", "full_attention"]), min_size=n, max_size=n))
        elif choice == "pattern" and name in ("gemma3", "cohere2", "exaone4"):
            config["sliding_window_pattern"] = draw(st.integers(1, 4))
        if name in ("cohere2", "exaone4") and choice == "explicit" and \
                draw(st.booleans()):
            config["sliding_window"] = None  # no window: which layers rotate?
    elif name in ("llama4", "smollm3"):
        if choice == "explicit":
            config["no_rope_layers"] = draw(st.lists(st.sampled_from([0, 1]),
                                                     min_size=n, max_size=n))
        elif choice == "pattern":
            config["no_rope_layer_interval"] = draw(st.integers(1, 4))
        if name == "smollm3" and draw(st.booleans()):
            config.update(use_sliding_window=True, sliding_window=16)
    elif name == "granitemoehybrid":
        config["layer_types"] = draw(st.lists(st.sampled_from(
            ["mamba", "attention"]), min_size=n, max_size=n))
        if choice == "default":  # position_embedding_type None: no RoPE anywhere
            del config["position_embedding_type"]
    elif name == "lfm2":
        if choice == "explicit":
            config["full_attn_idxs"] = draw(st.lists(st.integers(0, n - 1),
                                                     unique=True))
        elif choice == "default":
            del config["full_attn_idxs"]  # Lfm2Config: every layer attends
    elif name == "qwen3_next":
        if choice == "explicit":
            config["layer_types"] = draw(st.lists(st.sampled_from(
                ["linear_attention", "full_attention"]), min_size=n, max_size=n))
        elif choice == "pattern":
            config["full_attention_interval"] = draw(st.integers(1, 4))
    return config


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(config=layouts())
def test_random_layouts_match_the_models(config):
    check_every_layer(config)


@pytest.mark.parametrize("model_type, extra", [
    ("qwen2", {"use_sliding_window": True, "sliding_window": 32,
               "max_window_layers": 2}),
    ("qwen3", {"use_sliding_window": False, "sliding_window": 32}),
    ("mistral", {"sliding_window": 32}), ("mistral", {"sliding_window": None}),
    ("gemma2", {}),
])
def test_layer_types_of_other_sliding_models(model_type, extra):
    """The layer types and windows the config classes fill in (no model built)."""
    config = {"model_type": model_type, **TINY, "num_hidden_layers": 5,
              "rope_theta": 10000.0, **extra}
    d = {k: v for k, v in config.items() if k != "model_type"}
    built = CONFIG_MAPPING[model_type](**d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        ours = per_layer.layer_layout(config)
    if hasattr(built, "layer_types"):
        assert [x.attention for x in ours] == list(built.layer_types)
    window = getattr(built, "sliding_window", None)
    for x in ours:
        assert x.window == (window if x.attention == "sliding_attention" else None)
        assert x.rope == "global"


def test_layer_out_of_range_names_layer():
    for bad in (8, -1, 2.0, True, "0"):
        with pytest.raises(ValueError, match="layer"):
            scaling.rope_from_config(OLMO3, layer=bad)
    with pytest.raises(ValueError, match="num_hidden_layers"):
        scaling.rope_from_config({"model_type": "mystery", "hidden_size": 64,
                                  "num_attention_heads": 2, "rope_theta": 1e4},
                                 layer=0)


def test_exaone4_without_a_window_rotates_every_layer():
    """Exaone4Attention rotates where ``sliding_window is None or is_sliding``:
    with no window, its full-attention layers rotate too."""
    config = {**EXAONE4, "sliding_window": None,
              "layer_types": ["sliding_attention", "full_attention"] * 4}
    layout = check_every_layer(config)
    assert [x.rope for x in layout] == ["global"] * 8


def test_granite4_without_rope_has_no_positions():
    """GraniteMoeHybridModel builds no rotary module unless
    position_embedding_type is "rope" (the class default is None)."""
    config = {k: v for k, v in GRANITE4.items() if k != "position_embedding_type"}
    model, _ = tiny_model(config)
    assert model.rotary_emb is None
    assert config_reader.positional_scheme(config) == "no positional encoding (NoPE)"
    with pytest.raises(ValueError, match="position_embedding_type"):
        scaling.rope_from_config(config)
    assert all(scaling.rope_from_config(config, layer=i) is None for i in range(4))


def test_lfm2_reads_theta_as_its_class_does():
    """Lfm2Config takes ``theta`` (the key of Liquid's own configs) over
    ``rope_theta``; the rotary module then turns at that base."""
    for extra in ({"theta": 5e4}, {"theta": 5e4, "rope_theta": 1e6}):
        config = {**{k: v for k, v in LFM2.items() if k != "rope_theta"}, **extra}
        model, _ = tiny_model(config)
        ours = scaling.rope_from_config(config, layer=2, dtype=torch.float64)
        assert_same(ours, (model.rotary_emb.inv_freq,
                           float(model.rotary_emb.attention_scaling)))
        assert torch.allclose(ours[0], 5e4 ** -(torch.arange(0, 32, 2) / 32).double())
        assert scaling.rope_from_config(config, layer=0) is None  # a convolution


def test_layout_defaults_are_the_config_classes_and_are_reported():
    stored5 = json.loads((Path(__file__).resolve().parents[1] / "results"
                          / "class-defaults-5.json").read_text())
    stored5 = {**stored5["state_types"], **stored5["types"]}
    for model_type, defaults in per_layer.LAYER_DEFAULTS.items():
        name5 = next((t for t in (f"{model_type}_text", model_type) if t in stored5),
                     None)
        if CLASS_TYPE.get(model_type, model_type) not in CONFIG_MAPPING:
            # a class only 5.x has: the defaults its built config holds
            # (results/class-defaults-5.json, make class-defaults)
            for name, value in defaults.items():
                assert stored5[name5]["config"][name] == value, (model_type, name)
            continue
        class_type = CLASS_TYPE.get(model_type, model_type)
        if f"{class_type}_text" in CONFIG_MAPPING:  # a composite: its text class
            class_type = f"{class_type}_text"
        cls = CONFIG_MAPPING[class_type]
        params = std_inspect.signature(cls.__init__).parameters
        for name, value in defaults.items():
            if name in params:
                assert params[name].default == value, (model_type, name)
            elif model_type == "modernbert-decoder":  # 4.57.6 keeps it as an attribute
                assert getattr(cls(), name) == value, (model_type, name)
            else:  # read from kwargs: the class's behaviour without the key
                assert name in ("sliding_window_pattern", "full_attention_interval")
    # The kwargs defaults, through the layer types the classes fill in.
    for model_type in ("gemma3", "cohere2", "qwen3_next"):
        config = {"model_type": model_type, **TINY, "num_hidden_layers": 13,
                  **EXTRA.get(model_type, {})}
        built = CONFIG_MAPPING[CLASS_TYPE.get(model_type, model_type)](
            **{k: v for k, v in config.items() if k != "model_type"})
        with pytest.warns(config_reader.DefaultValueWarning, match="leaves out"):
            assert per_layer.layer_types(config) == list(built.layer_types)
    no_layers = {k: v for k, v in GEMMA3.items() if k != "num_hidden_layers"}
    with pytest.warns(config_reader.DefaultValueWarning, match="num_hidden_layers"):
        assert len(per_layer.layer_layout(no_layers)) == 26


# -- the inspector --------------------------------------------------------------------

GEMMA3_27B_LAYOUT = {"model_type": "gemma3_text", "hidden_size": 5376, "head_dim": 128,
                     "num_attention_heads": 32, "num_hidden_layers": 62,
                     "max_position_embeddings": 131072, "rope_theta": 1e6,
                     "rope_local_base_freq": 1e4, "sliding_window": 1024,
                     "sliding_window_pattern": 6,
                     "rope_scaling": {"rope_type": "linear", "factor": 8.0}}


def test_inspector_summarises_the_layers():
    from posenc_lib.tools import inspector as model_inspect

    report = model_inspect.inspect_config(GEMMA3_27B_LAYOUT)
    assert report["layer_summary"] == (
        "62 layers: 52 sliding (window 1,024), base 10,000, plain; "
        "10 global, base 1,000,000, linear x8")
    assert len(report["layers"]) == 62
    # Counted independently of the library: global every 6th layer (5, 11, ...).
    glob = [e["index"] for e in report["layers"] if e["rope"]["kind"] == "global"]
    assert glob == list(range(5, 62, 6))
    assert "52 sliding" in model_inspect.format_report(report)
    llama4 = model_inspect.inspect_config({**LLAMA4, "num_hidden_layers": 48})
    assert llama4["layer_summary"].startswith("48 layers: 36 chunked (window 8,192)")
    assert "12 global, no RoPE (NoPE), query temperature 1 + 0.1" in \
        llama4["layer_summary"]
    qwen = model_inspect.inspect_config(QWEN3_NEXT)
    assert qwen["layer_summary"] == ("8 layers: 6 linear attention, no RoPE; "
                                     "2 global, base 10,000,000, plain")


def test_sliding_layers_are_judged_against_their_window():
    """A local layer of Gemma 3 as a config of its own (base 10,000, window
    1,024, L = 1,024): at 2,048 tokens plain RoPE would put every pair that
    has not closed its circle out of range, but no distance above 1,023 occurs
    in the layer."""
    from posenc_lib.tools import inspector as model_inspect

    local = {"model_type": "mistral", "hidden_size": 5376, "head_dim": 128,
             "num_attention_heads": 32, "max_position_embeddings": 1024,
             "rope_theta": 1e4, "sliding_window": 1024}
    report = model_inspect.inspect_config(local)
    unwindowed = model_inspect.inspect_config({**local, "sliding_window": None})
    assert report["target_length"] == unwindowed["target_length"] == 2048
    assert unwindowed["out_of_range_count"] == 64 - unwindowed["full_turn_pairs"] > 0
    assert report["out_of_range_count"] == 0 and report["judged_at"] == 1024
    as_gemma = model_inspect.inspect_config({**GEMMA3_27B_LAYOUT,
                                             "max_position_embeddings": 1024})
    sliding = [e for e in as_gemma["layers"] if e["window"]]
    assert {e["out_of_range_count"] for e in sliding} == {0}
    assert {e["judged_at"] for e in sliding} == {1024}
    full = [e for e in as_gemma["layers"] if not e["window"]]
    assert {e["judged_at"] for e in full} == {2048}


def test_inspector_json_has_one_entry_per_layer(capsys, tmp_path):
    import json

    from posenc_lib.tools import inspector as model_inspect

    path = tmp_path / "config.json"
    path.write_text(json.dumps(OLMO3))
    assert model_inspect.main([str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [e["index"] for e in report["layers"]] == list(range(8))
    for e in report["layers"]:
        got = scaling.rope_from_config(OLMO3, layer=e["index"])
        assert e["rope"]["attention_factor"] == got[1]


def test_layer_layout_figure():
    from posenc_lib.figures import models as figures

    layouts = {"Gemma 3": GEMMA3, "Llama 4": LLAMA4, "Qwen3-Next": QWEN3_NEXT}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        fig = figures.layer_layouts(layouts)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "layer index" and ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()] == list(layouts)[::-1]
    assert len(ax.patches) == 12 + 8 + 8  # one cell per layer
    labels = ax.get_legend().get_texts()
    assert {t.get_text() for t in labels} == {
        "global RoPE, full attention", "local RoPE (own base or unscaled), sliding "
        "window", "global RoPE, sliding window or chunk",
        "no RoPE (NoPE), full attention", "linear attention, no positions"}
    with pytest.raises(ValueError, match="configs"):
        figures.layer_layouts({})
    # Layers without attention keep their own colours (not linear attention's).
    mixed = figures.layer_layouts({"LFM2": LFM2, "Granite 4.0": GRANITE4})
    labels = {t.get_text() for t in mixed.axes[0].get_legend().get_texts()}
    assert labels == {"short convolution, no positions", "Mamba layer, no positions",
                      "global RoPE, full attention"}


@pytest.mark.parametrize("model_type", ["ernie4_5", "glm", "glm4", "cohere", "cohere2",
                                        "helium", "qwen3", "smollm3"])
def test_pair_layout_of_current_models(model_type):
    """Which feature pairs with feature 0, found by rotating one-hot vectors
    with the model's own rotary module and apply function (test_models'
    ``hf_pair_partner``), against the inspector."""
    from helpers.hf_reference import hf_pair_partner

    from posenc_lib.tools import inspector as model_inspect

    config = {"model_type": model_type, **{k: v for k, v in TINY.items()
                                           if k != "pad_token_id"},
              "num_hidden_layers": 2, "rope_theta": 1e4,
              "max_position_embeddings": 256}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        report = model_inspect.inspect_config(config)
    partner = hf_pair_partner(config)
    assert partner == (1 if report["pair_layout"] == "interleaved"
                       else report["rotary_dim"] // 2), (model_type, partner)


def test_llama4_pairs_neighbours():
    """Llama 4 views features (2i, 2i + 1) as one complex number."""
    from transformers.models.llama4 import modeling_llama4 as m

    from posenc_lib.tools import inspector as model_inspect

    model, built = tiny_model(LLAMA4)
    freqs = model.rotary_emb(torch.zeros(1), torch.tensor([[0, 1]]))
    d = 32
    eye = torch.eye(d)[None, None].expand(1, 2, d, d)  # (batch, seq, head j: e_j, d)
    q, k = m.apply_rotary_emb(eye, eye, freqs)
    score = k[0, 0] @ q[0, 1, 0]  # keys e_j at position 0, query e_0 at 1
    hits = torch.nonzero(score.abs() > 1e-6).flatten().tolist()
    assert hits == [0, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert model_inspect.inspect_config(LLAMA4)["pair_layout"] == "interleaved"


def test_no_import_cycle_between_scaling_and_per_layer():
    # scaling imports per_layer and _config; neither may import scaling back
    # (not even inside a function), so the modules form no cycle.
    import ast
    from pathlib import Path

    package = Path(per_layer.__file__).parent
    for name in ("per_layer.py", "config_reader.py"):
        tree = ast.parse((package / name).read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                imported |= {node.module or ""} | {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
        assert not {n for n in imported if n.split(".")[-1] == "scaling"}, name


def test_olmo3_sliding_layers_take_the_top_level_base_in_4x():
    """A 4.x-layout OLMo 3 config whose ``rope_theta`` is not 500,000: 4.57.6's
    ``Olmo3Model.rotary_embs["sliding_attention"]`` rotates with it (5.24.0 with
    the class default, ``test_config_forms``), and the library warns that the
    releases differ."""
    config = {**OLMO3, "rope_theta": 12345.0}
    check_every_layer(config)
    with pytest.warns(config_reader.VersionDependentWarning, match="500000"):
        sub = per_layer.layer_config(config, 0, transformers_version="5.24.0")
    assert sub["rope_theta"] == 500_000.0
    with pytest.warns(config_reader.VersionDependentWarning):
        assert per_layer.layer_config(config, 0, transformers_version="4.57.6")[
            "rope_theta"] == 12345.0


def test_bamba_takes_its_attention_layers_from_attn_layer_indices():
    """A ``layer_types`` key in a Bamba config: 4.57.6's BambaConfig keeps it as
    an attribute nothing reads and builds its layers from
    ``attn_layer_indices`` (``layers_block_type``); the library does the same
    and warns (it once followed the key)."""
    config = {"model_type": "bamba", **TINY, "num_hidden_layers": 4,
              "attn_layer_indices": [1], "rope_theta": 1e4,
              "layer_types": ["full_attention"] * 4}
    fields = {k: v for k, v in config.items() if k != "model_type"}
    built = CONFIG_MAPPING["bamba"](**fields)
    expected = ["full_attention" if t == "attention" else "mamba"
                for t in built.layers_block_type]
    with pytest.warns(config_reader.IgnoredKeyWarning, match="attn_layer_indices"):
        assert per_layer.layer_types(config) == expected == [
            "mamba", "full_attention", "mamba", "mamba"]


def test_zamba2_layers_are_its_class_s():
    """Zamba2Config's block types (4.57.6, live): Mamba-2 layers, and "hybrid"
    layers that also run the shared transformer block, which rotates only
    with ``use_mem_rope`` (``Zamba2Attention``, ``modeling_zamba2.py``). The
    library's default pattern and its rotating layers against the class's."""
    from transformers import Zamba2Config

    for given in ({}, {"use_mem_rope": True},
                  {"use_mem_rope": True, "num_hidden_layers": 6,
                   "layers_block_type": ["mamba", "hybrid"] * 3}):
        built = Zamba2Config(**given)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layout = per_layer.layer_layout({"model_type": "zamba2", **given})
        kinds = list(built.layers_block_type)
        assert [x.attention for x in layout] == kinds, given
        rotating = [i for i, x in enumerate(layout) if x.rope is not None]
        assert rotating == ([i for i, k in enumerate(kinds) if k == "hybrid"]
                            if built.use_mem_rope else []), (given, rotating)


def test_mllama_cross_attention_layers_neither_rotate_nor_cache_per_token():
    """Llama 3.2 Vision's text model: the layers ``cross_attention_layers``
    names attend to the image (``MllamaCrossAttentionDecoderLayer``), with no
    RoPE and nothing cached per text token; against 4.57.6's tiny model, its
    class default list included (``results/conformance-*.json`` observe the
    same in both releases)."""
    from transformers import MllamaForCausalLM
    from transformers.models.mllama.configuration_mllama import MllamaTextConfig

    from posenc_lib import serving

    assert list(MllamaTextConfig().cross_attention_layers) == list(
        per_layer._MLLAMA_CROSS)
    fields = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 5, "cross_attention_layers": [1, 3],
              "intermediate_size": 32, "vocab_size": 64, "pad_token_id": 0,
              "rope_scaling": {"rope_type": "default"}}
    torch.manual_seed(0)
    model = MllamaForCausalLM(MllamaTextConfig(**fields)).eval()
    with torch.no_grad():
        cache = model(torch.arange(7)[None], use_cache=True).past_key_values
    grows = [i for i, layer in enumerate(cache.layers)
             if getattr(layer, "keys", None) is not None and layer.keys.numel()]
    config = {"model_type": "mllama_text_model", **fields}
    layout = per_layer.layer_layout(config)
    assert [x.index for x in layout if x.rope is not None] == grows == [0, 2, 4]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sized = serving.kv_cache_bytes(config, bytes_per_value=4, length=7)
    held = sum(layer.keys.numel() + layer.values.numel() for i, layer in
               enumerate(cache.layers) if i in grows) * 4
    assert sized["bytes_at_length"] == held
    assert sized["by_layer_type"]["cross_attention"]["kv"] is False


@pytest.mark.parametrize("extra", [
    {"sliding_window": 4}, {"attention_chunk_size": 3},
    {"layer_types": ["sliding_attention", "full_attention"] * 3, "sliding_window": 4},
    {"layer_types": ["full_attention"] * 6, "sliding_window": 4},
    {"layer_types": ["chunked_attention", "full_attention", "sliding_attention"] * 2,
     "attention_chunk_size": 3}],
    ids=["window", "chunk", "types+window", "full types+window", "types+chunk"])
def test_mllama_s_cache_follows_window_keys_its_class_does_not_define(extra):
    """MllamaTextConfig defines neither ``layer_types`` nor a window, yet keeps
    either key as an attribute, and its model's ``DynamicCache(config)`` reads
    them as on any such class: a window alone makes every layer a sliding one,
    ``layer_types`` choose per layer. The model's layers still come from
    ``cross_attention_layers`` (a given ``layer_types`` does not make a
    cross-attention layer rotate or cache). Against 4.57.6's tiny model."""
    from transformers import MllamaForCausalLM
    from transformers.models.mllama.configuration_mllama import MllamaTextConfig

    from posenc_lib import serving

    fields = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
              "num_hidden_layers": 6, "cross_attention_layers": [1, 4],
              "intermediate_size": 32, "vocab_size": 64, "pad_token_id": 0,
              "rope_scaling": {"rope_type": "default"}, **extra}
    torch.manual_seed(0)
    model = MllamaForCausalLM(MllamaTextConfig(**fields)).eval()
    with torch.no_grad():
        cache = model(torch.arange(10)[None], use_cache=True).past_key_values
    held = sum(layer.keys.numel() + layer.values.numel() for layer in cache.layers
               if getattr(layer, "keys", None) is not None) * 4
    config = {"model_type": "mllama_text_model", **fields}
    assert [x.index for x in per_layer.layer_layout(config) if x.rope is not None] == [
        0, 2, 3, 5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sized = serving.kv_cache_bytes(config, bytes_per_value=4, length=10)
    assert sized["bytes_at_length"] == held, (sized["bytes_at_length"], held)


@pytest.mark.parametrize("extra", [
    {"sliding_window": 3}, {"sliding_window": 3, "use_sliding_window": False},
    {"sliding_window": 3, "use_sliding_window": True},
    {"sliding_window": 3, "use_sliding_window": True, "max_window_layers": 1}],
    ids=["window", "window, switch off", "window, switch on", "max_window_layers"])
def test_qwen3_moe_slides_only_with_use_sliding_window(extra):
    """Qwen3MoeConfig keeps ``sliding_window`` only with ``use_sliding_window``
    (else None), and then every layer slides (no ``max_window_layers``, unlike
    Qwen2): a window without the switch once made the library size every
    layer as a sliding one, a cache 5 times too small at 10 tokens here. Found
    by adding window keys to every type's tiny model; against 4.57.6's."""
    from posenc_lib import serving
    from posenc_lib.tools import tiny_model
    from posenc_lib.tools.crosscheck import filled_cache_bytes

    cls, kw = tiny_model.shrunk("qwen3_moe")
    built, model = tiny_model.build(cls, {**kw, **extra})
    kv, _ = filled_cache_bytes(model, built, 10)
    config = {**built.to_dict(), **extra}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sized = serving.kv_cache_bytes(config, bytes_per_value=4, length=10)
        kinds = {x.attention for x in per_layer.layer_layout(config)}
    assert sized["bytes_at_length"] == kv, (sized["bytes_at_length"], kv)
    assert kinds == ({"sliding_attention"} if extra.get("use_sliding_window")
                     else {"full_attention"})


def test_cpmant_with_a_window_key_is_refused_as_its_cache_slides_over_its_prompt():
    """CPM-Ant puts ``prompt_length`` prompt tokens before every input, and the
    library sizes them as a fixed part of every layer's cache. A
    ``sliding_window`` (a key CpmAntConfig does not define) still makes its
    ``DynamicCache`` keep only the last W - 1 tokens, prompt and input alike
    (measured here with 4.57.6), which that sizing cannot express: refused
    with the keys named, where it once claimed 17 times what the model holds
    (835,584 bytes against 49,152 at 10 tokens)."""
    from posenc_lib import serving
    from posenc_lib.tools import tiny_model
    from posenc_lib.tools.crosscheck import filled_cache_bytes

    cls, kw = tiny_model.shrunk("cpmant")
    built, model = tiny_model.build(cls, kw)
    full = sum(filled_cache_bytes(model, built, 10))
    config = built.to_dict()
    built, model = tiny_model.build(cls, {**kw, "sliding_window": 3})
    kv, state = filled_cache_bytes(model, built, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = serving.kv_cache_bytes(config, bytes_per_value=4, length=10)
        assert plain["bytes_at_length"] + plain["fixed_state"]["bytes"] == full
        assert kv + state < plain["fixed_state"]["bytes"]  # the prompt slid out too
        with pytest.raises(ValueError, match="sliding_window, attention_chunk_size"):
            serving.kv_cache_bytes({**config, "sliding_window": 3}, bytes_per_value=4,
                                   length=10)


@pytest.mark.parametrize("extra", [
    {}, {"sliding_window": 3}, {"local_attention": 6}, {"local_attention": 7},
    {"local_attention": 6, "sliding_window": 4}],
    ids=["as-is", "window key", "local_attention", "odd local_attention", "both"])
def test_modernbert_decoder_s_window_is_half_its_local_attention(extra):
    """ModernBertDecoderConfig sets ``sliding_window = local_attention // 2``
    (128 // 2 by default); 4.57.6 sets it over a ``sliding_window`` key, 5.24.0
    keeps the key (``results/window-keys-5.json``). Against 4.57.6's model:
    the library once ignored ``local_attention`` and read the key."""
    from posenc_lib import serving
    from posenc_lib.tools import tiny_model
    from posenc_lib.tools.crosscheck import filled_cache_bytes

    cls, kw = tiny_model.shrunk("modernbert-decoder")
    built, model = tiny_model.build(cls, {**kw, **extra})
    kv, state = filled_cache_bytes(model, built, 10)
    written = {k: v for k, v in built.to_dict().items()
               if k not in ("sliding_window", "local_attention")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sized = serving.kv_cache_bytes({**written, **extra}, bytes_per_value=4,
                                       length=10, transformers_version="4.57.6")
    assert sized["bytes_at_length"] == kv and state == 0
    if "local_attention" in extra:
        assert built.sliding_window == extra["local_attention"] // 2
