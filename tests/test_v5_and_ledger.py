"""transformers 5.x shapes (per-layer-type ``rope_parameters``, the
``proportional`` rope type) and the inspector's ledger of logit factors.

transformers 5.x is not installed here (the venv pins 4.57.6), so the 5.x
shapes are checked on literal dicts: against the same set-up written in
4.57's layout and run through 4.57's own modules, and for ``proportional``
against a transcription of 5.x's ``_compute_proportional_rope_parameters``
(``src/transformers/modeling_rope_utils.py`` on the main branch) in Python
floats, and against :func:`posenc_lib.rope.partial_inv_freq`'s independent
``"head_dim"`` spacing. The ledger is checked against the ``scaling``
attribute of transformers 4.57.6's attention modules.
"""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch

pytest.importorskip("transformers")

from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from posenc_lib import rope, scaling  # noqa: E402
from posenc_lib import config_reader  # noqa: E402
from posenc_lib.tools import inspector as model_inspect  # noqa: E402
from helpers.tiny_models import GEMMA3, OLMO3, check_every_layer  # noqa: E402


def per_layer_type(config: dict, local: dict) -> dict:
    """``config`` (4.x layout) written with 5.x's per-layer-type rope_parameters."""
    v5 = {k: v for k, v in config.items()
          if k not in ("rope_scaling", "rope_theta", "rope_local_base_freq")}
    full = {**config["rope_scaling"], "rope_theta": config["rope_theta"]}
    v5["rope_parameters"] = {"full_attention": full, "sliding_attention": local}
    return v5


@pytest.mark.parametrize("config, local", [
    (GEMMA3, {"rope_type": "default", "rope_theta": GEMMA3["rope_local_base_freq"]}),
    (OLMO3, {"rope_type": "default", "rope_theta": OLMO3["rope_theta"]}),
], ids=["gemma3", "olmo3"])
def test_per_layer_type_rope_parameters(config, local):
    v5 = per_layer_type(config, local)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        check_every_layer(config)  # the 4.x form against transformers 4.57.6
        for i in range(config["num_hidden_layers"]):
            a = scaling.rope_from_config(v5, layer=i, dtype=torch.float64)
            b = scaling.rope_from_config(config, layer=i, dtype=torch.float64)
            assert torch.equal(a[0], b[0]) and a[1] == b[1], i
        glob = scaling.rope_from_config(v5, dtype=torch.float64)
    assert torch.equal(glob[0], scaling.rope_from_config(config,
                                                         dtype=torch.float64)[0])
    assert config_reader.parse_rope_config(v5).layout == "5.x"
    # 5.x fills a missing full_attention entry with plain RoPE on the
    # top-level base, else the class default (see the next test)
    only_sliding = {**v5, "rope_parameters": {"sliding_attention": local}}
    with pytest.warns(config_reader.V5LayoutWarning, match="no 'full_attention' entry"):
        inv_freq, _ = scaling.rope_from_config(only_sliding, dtype=torch.float64)
    base = {"gemma3": 1e6, "olmo3": 5e5}[config["model_type"]]
    assert torch.equal(inv_freq, scaling.rope_parameters(
        "default", 32, base, dtype=torch.float64)[0])


#: What transformers 5.24.0 makes of per-layer-type rope_parameters:
#: Gemma3TextConfig.convert_rope_params_to_dict and Olmo3Config's
#: (huggingface/transformers v5.24.0, src/transformers/models/gemma3/
#: configuration_gemma3.py and models/olmo3/configuration_olmo3.py, with
#: standardize_rope_params in src/transformers/modeling_rope_utils.py).
#: scripts/check_v5.py computes each with transformers 5.24.0 itself.
V5_GEMMA = {"model_type": "gemma3_text", "hidden_size": 64, "num_attention_heads": 2,
            "head_dim": 32, "num_hidden_layers": 6,
            "max_position_embeddings": 8192}
FULL_1E6 = {"rope_type": "default", "rope_theta": 1e6}
SLIDING_1E4 = {"rope_type": "default", "rope_theta": 10000.0}
V5_EXPECTED = [
    # a missing sliding_attention entry: plain RoPE, base 10,000
    ({**V5_GEMMA, "rope_parameters": {"full_attention": FULL_1E6}},
     {"full_attention": FULL_1E6, "sliding_attention": SLIDING_1E4}),
    # ... or rope_local_base_freq when the config gives it
    ({**V5_GEMMA, "rope_local_base_freq": 20000.0,
      "rope_parameters": {"full_attention": FULL_1E6}},
     {"full_attention": FULL_1E6,
      "sliding_attention": {"rope_type": "default", "rope_theta": 20000.0}}),
    # a sliding entry without rope_theta: rope_local_base_freq, not rope_theta
    ({**V5_GEMMA, "rope_theta": 1e6, "rope_local_base_freq": 10000.0,
      "rope_parameters": {"full_attention": {"rope_type": "default"},
                          "sliding_attention": {"rope_type": "default"}}},
     {"full_attention": FULL_1E6, "sliding_attention": SLIDING_1E4}),
    # a legacy rope_scaling beside nested parameters: merged into full_attention
    ({**V5_GEMMA, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
      "rope_parameters": {"full_attention": FULL_1E6,
                          "sliding_attention": SLIDING_1E4}},
     {"full_attention": {**FULL_1E6, "rope_type": "linear", "factor": 8.0},
      "sliding_attention": SLIDING_1E4}),
    # a differing top-level rope_theta: the nested values kept
    ({**V5_GEMMA, "rope_theta": 500000.0,
      "rope_parameters": {"full_attention": FULL_1E6,
                          "sliding_attention": SLIDING_1E4}},
     {"full_attention": FULL_1E6, "sliding_attention": SLIDING_1E4}),
]


@pytest.mark.parametrize("config, expected", V5_EXPECTED)
def test_v5_per_layer_type_defaults_and_merges(config, expected):
    with pytest.warns(config_reader.V5LayoutWarning, match="as transformers 5.x reads it"):
        text, _ = config_reader._text_config(config)
    assert text["rope_parameters"] == expected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(6):  # layers 0-4 sliding, 5 full (pattern 6)
            kind = "full_attention" if i == 5 else "sliding_attention"
            entry = expected[kind]
            want = scaling.rope_parameters(entry["rope_type"], 32, entry["rope_theta"],
                                           dtype=torch.float64,
                                           **({"factor": entry["factor"]}
                                              if "factor" in entry else {}))
            got = scaling.rope_from_config(config, layer=i, dtype=torch.float64)
            assert torch.equal(got[0], want[0]) and got[1] == want[1], (i, kind)
        report = model_inspect.inspect_config(config)
    assert any("as transformers 5.x reads it" in w for w in report["warnings"])


def proportional_5x(head_dim: int, base: float, p: float, factor: float) -> list:
    """5.x's function, transcribed in Python floats."""
    angles = int(p * head_dim // 2)
    rotated = [1.0 / base ** (2 * i / head_dim) for i in range(angles)]
    return [f / factor for f in rotated + [0.0] * (head_dim // 2 - angles)]


@pytest.mark.parametrize("head_dim, p, factor", [(512, 0.25, 1.0), (256, 0.75, 8.0),
                                                 (64, 1.0, 2.0), (128, 0.1, 1.0)])
def test_proportional_rope_type(head_dim, p, factor):
    config = {"model_type": "llama", "hidden_size": head_dim, "head_dim": head_dim,
              "num_attention_heads": 1, "max_position_embeddings": 4096,
              "rope_parameters": {"rope_type": "proportional", "rope_theta": 1e6,
                                  "partial_rotary_factor": p, "factor": factor}}
    inv_freq, attention_factor = scaling.rope_from_config(config, dtype=torch.float64)
    expected = torch.tensor(proportional_5x(head_dim, 1e6, p, factor),
                            dtype=torch.float64)
    assert attention_factor == 1.0 and inv_freq.shape == (head_dim // 2,)
    assert torch.allclose(inv_freq, expected, rtol=1e-13, atol=0)
    independent = rope.partial_inv_freq(head_dim, p, 1e6, spacing="head_dim",
                                        dtype=torch.float64) / factor
    assert torch.allclose(inv_freq, independent, rtol=1e-13, atol=0)
    report = model_inspect.inspect_config(config)  # measures the turning pairs
    assert report["rope_type"] == "proportional"
    # The 4.x layout has no such method in transformers 4.57.6.
    v4 = {**{k: v for k, v in config.items() if k != "rope_parameters"},
          "rope_theta": 1e6, "rope_scaling": {"rope_type": "proportional"}}
    with pytest.raises(ValueError, match="proportional"):
        scaling.rope_from_config(v4)


# -- the ledger of logit factors ------------------------------------------------------

TINY = {"hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 32, "intermediate_size": 32, "vocab_size": 16}


def hf_attention(config: dict):
    """transformers 4.57.6's attention module of layer 0, from the config."""
    import importlib

    d = copy.deepcopy(config)
    model_type = d.pop("model_type")
    built = CONFIG_MAPPING[model_type](**d)
    module = importlib.import_module(f"transformers.models.{model_type.removesuffix('_text')}"
                                     f".modeling_{model_type.removesuffix('_text')}")
    cls = [getattr(module, n) for n in dir(module) if n.endswith("Attention")
           and n[0].isupper() and "Flash" not in n and "Vision" not in n
           and hasattr(getattr(module, n), "forward")][0]
    return cls(built, 0)


def constant(report: dict) -> float:
    return math.prod(f["value"] for f in report["logit_factors"]
                     if f["value"] is not None)


@pytest.mark.parametrize("config", [
    {"model_type": "llama", **TINY, "rope_theta": 1e4},
    {"model_type": "gemma3_text", **TINY, "query_pre_attn_scalar": 144,
     "rope_theta": 1e6, "num_hidden_layers": 2},
    {"model_type": "granite", **TINY, "attention_multiplier": 0.015625,
     "rope_theta": 1e4},
    {"model_type": "deepseek_v3", "hidden_size": 64, "num_attention_heads": 2,
     "num_key_value_heads": 2, "q_lora_rank": 16, "kv_lora_rank": 16,
     "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
     "rope_theta": 1e4, "max_position_embeddings": 163840,
     "rope_scaling": {"type": "yarn", "factor": 40.0, "beta_fast": 32,
                      "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0,
                      "original_max_position_embeddings": 4096}},
], ids=["llama", "gemma3", "granite", "deepseek_v3"])
def test_ledger_matches_the_attention_modules(config):
    config = {"max_position_embeddings": 4096, **config}
    report = model_inspect.inspect_config(config)
    attention = hf_attention(config)
    # Softmax scale (and DeepSeek's mscale²) times the cos/sin factor squared.
    expected = attention.scaling * report["attention_factor"] ** 2
    assert math.isclose(constant(report), expected, rel_tol=1e-12)
    text = model_inspect.format_report(report)
    assert "logit factors" in text


def test_ledger_lists_position_dependent_temperatures():
    from helpers.tiny_models import LLAMA4

    report = model_inspect.inspect_config(LLAMA4)
    temps = [f for f in report["logit_factors"] if f["value"] is None]
    assert len(temps) == 1 and "2 NoPE layers" in temps[0]["name"]
    assert "0.1" in temps[0]["formula"] and "8192" in temps[0]["formula"]
    mistral = {"model_type": "mistral", **TINY, "max_position_embeddings": 4096,
               "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                   "llama_4_scaling_beta": 0.1,
                                   "original_max_position_embeddings": 16384}}
    with pytest.warns(config_reader.UnknownRopeKeyWarning):  # 4.57 ignores the key
        scaling.rope_from_config(mistral)
    report = model_inspect.inspect_config(mistral)
    temps = [f for f in report["logit_factors"] if f["value"] is None]
    assert temps and "16384" in temps[0]["formula"]


@pytest.mark.parametrize("model_type, factor", [("llama", 4.0), ("qwen2", 16.0)])
def test_ledger_equals_the_logits_a_yarn_layer_computes(model_type, factor):
    # A cos/sin factor != 1 (YaRN: 1 + 0.1 ln factor) multiplies q and k, so
    # the logits by its square: a ledger that forgot the square or dropped the
    # factor is off by 14 % or more.
    import importlib

    from transformers import AutoConfig

    config = {"model_type": model_type, **TINY, "num_key_value_heads": 2,
              "rope_theta": 10000.0, "max_position_embeddings": 16384,
              "rope_scaling": {"rope_type": "yarn", "factor": factor,
                               "original_max_position_embeddings": 4096}}
    report = model_inspect.inspect_config(config)
    assert report["attention_factor"] > 1.1
    ledger = constant(report)
    module = importlib.import_module(f"transformers.models.{model_type}."
                                     f"modeling_{model_type}")
    settings = copy.deepcopy(config)
    hf = AutoConfig.for_model(settings.pop("model_type"), **settings)
    hf._attn_implementation = "eager"
    torch.manual_seed(0)
    prefix = "Llama" if model_type == "llama" else "Qwen2"
    attention = getattr(module, f"{prefix}Attention")(hf, 0).double()
    rotary = getattr(module, f"{prefix}RotaryEmbedding")(hf).double()
    positions = torch.tensor([[0, 1, 37, 5000, 12000]])
    h = torch.randn(1, 5, 64, dtype=torch.float64)
    captured = {}
    eager = module.eager_attention_forward

    def capture(mod, query, key, value, mask, scaling, **kwargs):
        captured["logits"] = query @ key.transpose(2, 3) * scaling
        return eager(mod, query, key, value, mask, scaling, **kwargs)

    module.eager_attention_forward = capture
    try:
        with torch.no_grad():
            attention(h, rotary(h, positions), attention_mask=None)
    finally:
        module.eager_attention_forward = eager
    inv_freq, _ = scaling.rope_from_config(config, dtype=torch.float32,
                                           reference="transformers")
    angles = positions[0, :, None].float() * inv_freq  # float32, as the module
    cos = torch.cat([angles.cos()] * 2, -1).double()
    sin = torch.cat([angles.sin()] * 2, -1).double()

    def rotated(x):
        x = x.view(1, 5, 2, 32).transpose(1, 2)
        return x * cos + torch.cat([-x[..., 16:], x[..., :16]], -1) * sin

    with torch.no_grad():
        q, k = rotated(attention.q_proj(h)), rotated(attention.k_proj(h))
    raw = q @ k.transpose(2, 3)
    # the module rounds cos·f and sin·f to float32 (ε32/2 on each entry)
    eps32 = torch.finfo(torch.float32).eps
    bound = 8 * eps32 * ledger * q.norm(dim=-1)[..., None] * k.norm(dim=-1)[..., None, :]
    assert ((captured["logits"] - ledger * raw).abs() <= bound).all()
