"""rope_from_config, the table of real models and the inspector (chapter 9).

The reference is transformers 4.57.6 itself: a config object built from the
same dictionary by its own config class, then its ``ROPE_INIT_FUNCTIONS`` and
its models' rotary-embedding modules. transformers computes in float32, where
``base**x`` loses about ``ln(base)·ε32`` of relative precision (ln(1e6) < 14),
hence the tolerance of ``32·ε32``; attention factors are Python floats on both
sides.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("transformers")

from transformers import LlamaConfig  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from posenc_lib import alibi, bounds, multidim, scaling  # noqa: E402
from posenc_lib import config_reader  # noqa: E402
from posenc_lib.tools import inspector as model_inspect  # noqa: E402
from posenc_lib.figures import models as figures  # noqa: E402

from helpers.hf_reference import (EPS32, EPS64, assert_same,  # noqa: E402
                                   hf_config, hf_pair_partner, hf_rope,
                                   rotary_module)
from helpers.paths import ROOT  # noqa: E402

NAMES = model_inspect.model_names()
ROTARY = [n for n in NAMES if config_reader.positional_scheme(model_inspect.model_config(n))
          == "rotary"]


# -- every model of the table ---------------------------------------------------------

@pytest.mark.parametrize("name", ROTARY)
def test_table_model_matches_transformers(name):
    config = model_inspect.model_config(name)
    rope = config_reader.parse_rope_config(config)
    lengths = {None, rope.train_length, rope.train_length + 1, rope.extended_length,
               2 * rope.train_length}
    for seq_len in sorted(lengths - {None}) + [None]:
        assert_same(scaling.rope_from_config(config, seq_len=seq_len, dtype=torch.float64),
                    hf_rope(config, seq_len), f"{name} at {seq_len}")
    # The model's rotary module (as built at load time) holds the same numbers.
    module = rotary_module(config)
    assert_same(scaling.rope_from_config(config, dtype=torch.float64),
                (module.inv_freq, float(module.attention_scaling)), name)


def test_table_covers_the_models_the_book_needs():
    methods = {config_reader.parse_rope_config(model_inspect.model_config(n)).rope_type
               for n in ROTARY}
    assert methods == {"default", "linear", "yarn", "llama3", "longrope"}
    assert len(NAMES) >= 12 and len(set(NAMES)) == len(NAMES)
    schemes = {config_reader.positional_scheme(model_inspect.model_config(n)) for n in NAMES}
    assert {"ALiBi", "T5 relative buckets", "rotary"} <= schemes
    vl = config_reader.parse_rope_config(model_inspect.model_config("qwen2.5-vl-7b-instruct"))
    assert vl.mrope_section == (16, 24, 24)
    neox = config_reader.parse_rope_config(model_inspect.model_config("gpt-neox-20b"))
    assert neox.partial_rotary_factor == 0.25 and neox.dim == 24


@pytest.mark.parametrize("name", NAMES)
def test_table_entry_is_a_valid_transformers_config(name, caplog):
    """Each entry builds with its own config class, and its rope validation is quiet."""
    entry = model_inspect.model_entry(name)
    source = entry["source"]
    assert source["config_url"].startswith("https://huggingface.co/")
    assert source["read_from"] and source["read_on"]
    assert all(url.startswith("https://") for url in source["read_from"]), name
    logging.Logger.warning_once.cache_clear()  # transformers' once-only warnings
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_warning()
    hf_logging.enable_propagation()
    try:
        with caplog.at_level(logging.WARNING, logger="transformers"):
            built = hf_config(entry["config"])
    finally:
        hf_logging.disable_propagation()
        hf_logging.set_verbosity(verbosity)
    model_type = entry["config"]["model_type"]
    assert built.model_type.startswith(config_reader.MODEL_TYPE_ALIASES.get(model_type,
                                                                     model_type))
    warnings = sorted({r.getMessage() for r in caplog.records})
    if name == "qwen2.5-7b-instruct-yarn":
        # The model card's recipe keeps max_position_embeddings at 32768, and
        # transformers' YaRN validator warns that 32768 / 32768 != factor 4.
        assert len(warnings) == 1 and "does not match the ratio" in warnings[0]
    elif name == "olmo-3.1-32b-instruct":
        # The published YaRN block has int betas (32, 1); transformers' validator
        # logs that each must be a float, then computes with them.
        assert warnings == ["`rope_scaling`'s beta_fast field must be a float, got 32",
                            "`rope_scaling`'s beta_slow field must be a float, got 1"]
    else:
        assert warnings == [], warnings


def test_phi3_lists_are_complete():
    rope_scaling = model_inspect.model_config("phi-3-mini-128k-instruct")["rope_scaling"]
    long, short = rope_scaling["long_factor"], rope_scaling["short_factor"]
    assert len(long) == len(short) == 3072 // 32 // 2
    # Both lists rise with the pair index (LongRoPE's searched factors are monotone
    # here); the long list ends near 2 x the extension factor 32.
    assert long == sorted(long) and short == sorted(short)
    assert min(long + short) >= 1 and 60 < long[-1] < 70


def test_model_defaults_are_each_config_class_default():
    import inspect as std_inspect  # the standard library's, not posenc_lib's

    for model_type, defaults in config_reader.MODEL_DEFAULTS.items():
        if model_type not in CONFIG_MAPPING:
            continue  # 5.x only: tests/test_class_defaults.py, stored 5.x classes
        cls = CONFIG_MAPPING[model_type]
        cls = cls.sub_configs.get("text_config", cls)
        params = std_inspect.signature(cls.__init__).parameters
        for name, value in defaults.items():
            # a field the class sets itself, not an argument (BambaConfig's
            # rope_theta): the value an instance built with no arguments holds
            given = params[name].default if name in params else getattr(cls(), name)
            assert given == value, (model_type, name)
        # A config that omits them gets transformers' numbers from rope_from_config.
        config = {"model_type": model_type, "hidden_size": 512, "num_attention_heads": 4,
                  "max_position_embeddings": 256}
        if model_type == "zamba2":  # its attention rotates only with use_mem_rope
            config["use_mem_rope"] = True
        assert_same(scaling.rope_from_config(config, dtype=torch.float64),
                    hf_rope(config), model_type)


def test_gpt_neox_overwrites_the_generic_names():
    config = {"model_type": "gpt_neox", "hidden_size": 512, "num_attention_heads": 4,
              "max_position_embeddings": 2048, "rope_theta": 500000.0}
    text = hf_config(config)
    assert text.rope_theta == 10000  # GPTNeoXConfig replaced it by rotary_emb_base
    with pytest.warns(config_reader.IgnoredKeyWarning, match="rotary_emb_base=10000"):
        assert_same(scaling.rope_from_config(config), hf_rope(config))
    config = {**config, "rope_theta": None, "partial_rotary_factor": 1.0}
    assert hf_config(config).partial_rotary_factor == 0.25
    with pytest.warns(config_reader.IgnoredKeyWarning, match="rotary_pct=0.25"):
        assert_same(scaling.rope_from_config(config), hf_rope(config))


# -- the three layouts ----------------------------------------------------------------

def layouts(config: dict) -> dict[str, dict]:
    """The same set-up written as 4.x with ``rope_type``, 4.x with ``type``, and 5.x."""
    if "text_config" in config:  # nested (Qwen3-VL): the text part in each layout
        return {layout: {**config, "text_config": text}
                for layout, text in layouts(config["text_config"]).items()}
    rope = config_reader.parse_rope_config(config)
    block = dict(config.get("rope_scaling") or {})
    block.pop("type", None)
    block.pop("rope_type", None)
    v4_new = {**config, "rope_scaling": {**block, "rope_type": rope.rope_type}}
    v4_old = {**config, "rope_scaling": {**block, "type": rope.rope_type}}
    rest = {k: v for k, v in config.items()
            if k not in ("rope_scaling", "rope_theta", "rotary_emb_base",
                         "partial_rotary_factor", "rotary_pct")}
    v5 = {**rest, "rope_parameters": {**block, "rope_type": rope.rope_type,
                                      "rope_theta": rope.base,
                                      "partial_rotary_factor": rope.partial_rotary_factor}}
    if rope.rope_type in ("yarn", "llama3", "longrope"):
        # 5.x's standardize_rope_params moves the pre-training length into the dict.
        v5["rope_parameters"]["original_max_position_embeddings"] = \
            rope.original_max_position_embeddings
        v5.pop("original_max_position_embeddings", None)
    if config["model_type"].removesuffix("_text") in config_reader.V5_NESTED_DEFAULTS:
        # 5.x's Gemma 3 and OLMo 3 classes read one entry per layer type (a
        # one-block rope_parameters is ignored there): the global RoPE is the
        # full_attention entry, the class fills in the sliding one
        v5["rope_parameters"] = {"full_attention": v5["rope_parameters"]}
    return {"4.x rope_type": v4_new, "4.x type": v4_old, "5.x": v5}


@pytest.mark.parametrize("name", ROTARY)
def test_three_layouts_give_the_same_numbers(name):
    config = model_inspect.model_config(name)
    rope = config_reader.parse_rope_config(config)
    for seq_len in (None, rope.train_length + 1):
        reference = scaling.rope_from_config(config, seq_len=seq_len, dtype=torch.float64)
        for layout, variant in layouts(config).items():
            if config["model_type"] == "phi3" and layout == "4.x rope_type":
                # Phi3Config insists on the old key: transformers rejects this file.
                with pytest.raises(ValueError, match="type field"):
                    hf_config(variant)
                with pytest.raises(ValueError, match="Phi3Config"):
                    scaling.rope_from_config(variant)
                continue
            assert config_reader.parse_rope_config(variant).layout == layout
            got = scaling.rope_from_config(variant, seq_len=seq_len, dtype=torch.float64)
            assert torch.equal(got[0], reference[0]) and got[1] == reference[1], layout


def test_hand_written_layouts_of_llama31_agree():
    """Llama 3.1 8B written out by hand in each layout (not generated)."""
    body = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
            "max_position_embeddings": 131072}
    params = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}
    v4_new = {**body, "rope_theta": 500000.0, "rope_scaling": {**params,
                                                               "rope_type": "llama3"}}
    v4_old = {**body, "rope_theta": 500000.0, "rope_scaling": {**params, "type": "llama3"}}
    v5 = {**body, "rope_parameters": {**params, "rope_type": "llama3",
                                      "rope_theta": 500000.0}}
    results = [scaling.rope_from_config(c, dtype=torch.float64)
               for c in (v4_new, v4_old, v5)]
    assert all(torch.equal(r[0], results[0][0]) for r in results)
    assert_same(results[0], hf_rope(v4_new))
    assert_same(results[0], hf_rope(v4_old))


# -- property tests over random configs -----------------------------------------------

@st.composite
def random_configs(draw):
    head_dim = draw(st.sampled_from([16, 32, 64, 96, 128]))
    partial = draw(st.sampled_from([1.0, 0.5, 0.25]))
    dim = int(head_dim * partial)
    heads = draw(st.sampled_from([2, 4, 8]))
    max_len = draw(st.sampled_from([2048, 4096, 32768, 131072]))
    base = draw(st.sampled_from([10000.0, 500000.0, 1000000.0, 25000.0]))
    factor = draw(st.sampled_from([2.0, 4.0, 8.0, 32.0]))
    rope_type = draw(st.sampled_from(["default", "linear", "dynamic", "yarn", "llama3",
                                      "longrope"]))
    config = {"model_type": "llama", "hidden_size": head_dim * heads,
              "num_attention_heads": heads, "head_dim": head_dim,
              "partial_rotary_factor": partial, "rope_theta": base,
              "max_position_embeddings": max_len}
    key = draw(st.sampled_from(["rope_type", "type"]))
    block = {key: rope_type}
    if rope_type in ("linear", "dynamic"):
        block["factor"] = factor
    elif rope_type == "yarn":
        block["factor"] = factor
        if draw(st.booleans()):
            block["original_max_position_embeddings"] = max_len // 4
        if draw(st.booleans()):
            block.update(beta_fast=draw(st.sampled_from([16.0, 32.0, 64.0])),
                         beta_slow=draw(st.sampled_from([0.5, 1.0, 2.0])))
        if draw(st.booleans()):
            mscale = draw(st.sampled_from([0.707, 1.0]))
            block.update(mscale=mscale, mscale_all_dim=mscale)
        if draw(st.booleans()):
            block["truncate"] = draw(st.booleans())
    elif rope_type == "llama3":
        block.update(factor=factor, low_freq_factor=1.0,
                     high_freq_factor=draw(st.sampled_from([2.0, 4.0])),
                     original_max_position_embeddings=max_len // 4)
    elif rope_type == "longrope":
        lists = st.lists(st.floats(1.0, 64.0, width=32), min_size=dim // 2,
                         max_size=dim // 2)
        block.update(short_factor=draw(lists), long_factor=draw(lists))
        config["original_max_position_embeddings"] = max_len // draw(
            st.sampled_from([1, 4, 32]))
    config["rope_scaling"] = None if rope_type == "default" and draw(st.booleans()) \
        else block
    return config


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(config=random_configs(), seq_len=st.sampled_from([None, 1000, 5000, 200000]))
def test_random_configs_match_transformers(config, seq_len):
    assert_same(scaling.rope_from_config(config, seq_len=seq_len, dtype=torch.float64),
                hf_rope(config, seq_len), json.dumps(config)[:300])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(config=random_configs(),
       extra=st.dictionaries(st.sampled_from(["vocab_size", "architectures", "torch_dtype",
                                              "num_hidden_layers", "my_note", "use_cache"]),
                             st.integers(0, 10), max_size=4))
def test_keys_transformers_ignores_are_ignored(config, extra):
    reference = scaling.rope_from_config(config, dtype=torch.float64)
    for variant in (config, *layouts(config).values()):
        got = scaling.rope_from_config({**variant, **extra}, dtype=torch.float64)
        assert torch.equal(got[0], reference[0]) and got[1] == reference[1]


# -- errors ---------------------------------------------------------------------------

LLAMA = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4,
         "max_position_embeddings": 4096, "rope_theta": 10000.0}


@pytest.mark.parametrize("config, words", [
    ({**LLAMA, "rope_scaling": {"rope_type": "yarn", "orginal_factor": 4.0}},
     ["factor", "needs"]),
    ({**LLAMA, "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                "low_freq_factor": 1.0,
                                "original_max_position_embeddings": 1024}},
     ["high_freq_factor", "needs"]),
    ({**{k: v for k, v in LLAMA.items() if k != "max_position_embeddings"},
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
     ["original_max_position_embeddings", "max_position_embeddings"]),
    ({**LLAMA, "rope_scaling": {"rope_type": "ntk", "factor": 4.0}}, ["ntk"]),
    ({**LLAMA, "rope_scaling": {"rope_type": "linear", "type": "dynamic", "factor": 2.0}},
     ["ambiguous", "rope_type", "type"]),
    ({**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 2.0},
      "rope_parameters": {"rope_type": "linear", "factor": 2.0}},
     ["rope_scaling", "rope_parameters"]),
    ({**LLAMA, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}},
     ["ambiguous", "rope_theta"]),
    ({k: v for k, v in LLAMA.items() if k != "hidden_size"},
     ["hidden_size", "head_dim"]),
    ({**LLAMA, "model_type": "mystery", "rope_theta": None}, ["rope_theta", "mystery"]),
    ({**LLAMA, "head_dim": 6, "partial_rotary_factor": 0.5}, ["even", "3"]),
    ({**LLAMA, "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0] * 64,
                                "long_factor": [2.0] * 64,
                                "original_max_position_embeddings": 1024}},
     ["ambiguous", "original_max_position_embeddings"]),
    ({**LLAMA, "original_max_position_embeddings": 1024,
      "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
     ["ambiguous", "top-level"]),
    ({"model_type": "bloom", "hidden_size": 1024, "n_head": 16}, ["ALiBi"]),
    ({"model_type": "t5", "d_model": 768, "num_heads": 12}, ["T5"]),
    ({**LLAMA, "rope_scaling": "yarn"}, ["rope_scaling", "mapping"]),
    ("config.json", ["mapping"]),
])
def test_bad_configs_give_clear_errors(config, words):
    with pytest.raises(ValueError) as info:
        scaling.rope_from_config(config)
    message = str(info.value)
    for word in words:
        assert word in message, message


def test_transformers_rejects_what_we_reject():
    """The missing-key errors mirror transformers' own KeyError, and the values we
    refuse to guess really differ between the two readings."""
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
              "original_max_position_embeddings": 1024}
    with pytest.raises(KeyError, match="high_freq_factor"):
        LlamaConfig(**{**LLAMA, "rope_scaling": llama3})
    with pytest.raises(KeyError, match="factor"):
        LlamaConfig(**{**LLAMA, "rope_scaling": {"rope_type": "yarn"}})
    # rope_type vs type: transformers silently lets `type` win.
    built = LlamaConfig(**{**LLAMA, "rope_scaling": {"rope_type": "linear",
                                                     "type": "dynamic", "factor": 2.0}})
    assert built.rope_scaling["rope_type"] == "dynamic"
    # LongRoPE with only a rope-block original length: 4.57 ignores it.
    block = {"rope_type": "longrope", "short_factor": [1.0] * 64,
             "long_factor": [2.0] * 64, "factor": 4.0,
             "original_max_position_embeddings": 1024}
    hf = LlamaConfig(**{**LLAMA, "rope_scaling": block})
    _, hf_factor = ROPE_INIT_FUNCTIONS["longrope"](hf, "cpu")
    as_if_1024 = math.sqrt(1 + math.log(4.0) / math.log(1024))
    as_4_57 = math.sqrt(1 + math.log(4.0) / math.log(4096))
    assert math.isclose(hf_factor, as_4_57) and not math.isclose(hf_factor, as_if_1024)


def test_unknown_rope_keys_are_ignored_with_a_warning():
    """transformers logs an unknown key of the rope block and ignores it: a config it
    accepts works here too, with the same numbers, and the warning names the key."""
    typo = {"rope_type": "yarn", "factor": 4.0, "orginal_max_position_embeddings": 1024}
    meant = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}
    with pytest.warns(config_reader.UnknownRopeKeyWarning,
                      match="orginal_max_position_embeddings") as record:
        got = scaling.rope_from_config({**LLAMA, "rope_scaling": typo},
                                       dtype=torch.float64)
    assert record[0].filename == __file__  # points at the caller's line
    assert_same(got, hf_rope({**LLAMA, "rope_scaling": typo}))
    # The typo silently changes YaRN's original length in transformers (it falls
    # back to max_position_embeddings): the numbers differ from the intended ones.
    assert not torch.equal(got[0], scaling.rope_from_config(
        {**LLAMA, "rope_scaling": meant}, dtype=torch.float64)[0])
    # The inspector lists the key in its report instead of warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", config_reader.UnknownRopeKeyWarning)
        report = model_inspect.inspect_config({**LLAMA, "rope_scaling": typo})
    assert len(report["warnings"]) == 1 and "orginal_max" in report["warnings"][0]
    assert "orginal_max" in model_inspect.format_report(report)
    assert model_inspect.inspect_config(LLAMA)["warnings"] == []
    # Keys M-RoPE configs carry are exempt, as in transformers: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", config_reader.UnknownRopeKeyWarning)
        scaling.rope_from_config({**LLAMA, "rope_scaling": {
            "rope_type": "default", "mrope_section": [16, 8, 8]}})


@settings(max_examples=40, deadline=None, derandomize=True)
@given(config=random_configs(),
       extra=st.dictionaries(st.sampled_from(["finetuned", "alpha", "note", "low_freq"]),
                             st.one_of(st.booleans(), st.floats(1.0, 8.0)), min_size=1,
                             max_size=3))
def test_configs_transformers_accepts_with_unknown_keys_work(config, extra):
    block = config.get("rope_scaling") or {"rope_type": "default"}
    noisy = {**config, "rope_scaling": {**block, **extra}}
    with pytest.warns(config_reader.UnknownRopeKeyWarning) as record:
        got = scaling.rope_from_config(noisy, dtype=torch.float64)
    assert all(name in str(record[0].message) for name in extra)
    assert_same(got, hf_rope(noisy), json.dumps(noisy)[:300])
    assert_same(got, scaling.rope_from_config({**config, "rope_scaling": block},
                                              dtype=torch.float64))


def test_mrope_keys_are_ignored_as_transformers_does():
    config = {**LLAMA, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    plain = scaling.rope_from_config(LLAMA, dtype=torch.float64)
    got = scaling.rope_from_config(config, dtype=torch.float64)
    assert torch.equal(got[0], plain[0])
    qwen_vl = {**config, "model_type": "qwen2_5_vl"}
    assert_same(scaling.rope_from_config(qwen_vl, dtype=torch.float64), hf_rope(qwen_vl))


# -- the inspector --------------------------------------------------------------------

def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """The command line in-process: ``main(argv)``, with its stdout and stderr."""
    code = model_inspect.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_inspector_runs_on_a_file_and_on_a_name(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(model_inspect.model_config("phi-3-mini-128k-instruct")))
    code_file, from_file, err = run_main(capsys, str(path), "--json")
    code_name, from_name, _ = run_main(capsys, "phi-3-mini-128k-instruct", "--json")
    assert code_file == 0 and code_name == 0, err
    a, b = json.loads(from_file), json.loads(from_name)
    assert a.pop("name") == "config.json" and b.pop("name") == "Phi-3 mini 128k Instruct"
    assert a == b
    assert b["rope_type"] == "longrope" and b["rotary_dim"] == 96
    code, text, _ = run_main(capsys, "llama-3.1-8b")
    assert code == 0 and "llama3" in text and "131,072" in text
    code, text, _ = run_main(capsys, "llama-3.1-8b", "--target-length", "65536")
    assert code == 0 and "0 pairs at 65,536 tokens" in text


def test_inspector_errors_list_the_known_names(tmp_path, capsys):
    for bad in ("no-such-model", str(tmp_path / "missing.json")):
        code, _, err = run_main(capsys, bad)
        assert code == 2
        assert "llama-3.1-8b" in err and "deepseek-v3" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    code, _, err = run_main(capsys, str(broken))
    assert code == 2 and "JSON" in err
    listing = tmp_path / "list.json"
    listing.write_text("[1, 2]")
    code, _, err = run_main(capsys, str(listing))
    assert code == 2 and "JSON object" in err
    code, out, _ = run_main(capsys, "--list")
    assert code == 0 and out.split() == NAMES
    with pytest.raises(SystemExit) as info:  # argparse: no source given
        model_inspect.main([])
    assert info.value.code == 2 and "llama-3.1-8b" in capsys.readouterr().err


def test_the_inspector_runs_only_as_a_module():
    import inspect as std_inspect
    import runpy

    assert sys.modules["inspect"] is std_inspect and hasattr(std_inspect, "signature")
    assert model_inspect.__name__ == "posenc_lib.tools.inspector"
    assert sys.modules["posenc_lib.tools.inspector"] is model_inspect
    # Run as a file, the module refuses with the command that works.
    with pytest.raises(ImportError, match="python -m posenc_lib inspect"):
        runpy.run_path(str(ROOT / "posenc_lib" / "tools" / "inspector.py"))


def test_console_entry(monkeypatch, capsys):
    """``python -m posenc_lib inspect`` runs ``main`` and exits with its status
    (in-process: runpy executes the module as ``__main__``, as ``-m`` does)."""
    import runpy
    import warnings

    for argv, status in ((["--list"], 0), (["no-such-model"], 2)):
        monkeypatch.setattr(sys, "argv", ["posenc_lib.tools.inspector", *argv])
        with warnings.catch_warnings(), pytest.raises(SystemExit) as info:
            # The package is imported already; runpy warns that it re-executes it.
            warnings.filterwarnings("ignore", "'posenc_lib.tools.inspector' found in sys.modules",
                                    RuntimeWarning)
            runpy.run_module("posenc_lib.tools.inspector", run_name="__main__")
        assert info.value.code == status
    out = capsys.readouterr()
    assert out.out.split() == NAMES and "known models: llama-2-7b" in out.err


@pytest.mark.parametrize("name", ROTARY)
def test_inspector_numbers_agree_with_closed_forms(name):
    config = model_inspect.model_config(name)
    report = model_inspect.inspect_config(config)
    rope = config_reader.parse_rope_config(config)
    d, base, L = rope.dim, rope.base, report["train_length"]
    if rope.rope_type != "longrope":
        # Pair i turns within L iff 2π·base^(2i/d) <= L: i <= d ln(L/2π) / (2 ln base),
        # Liu et al.'s critical dimension d_extra = 2⌈(d/2) log_base(L/2π)⌉.
        bound = d * math.log(L / (2 * math.pi)) / (2 * math.log(base))
        assert report["full_turn_pairs"] == min(d // 2, math.floor(bound) + 1)
        assert report["critical_dimension"] == 2 * min(d // 2, math.ceil(bound))
        # bounds.critical_dimension's closed form agrees with the inspector's count.
        assert report["critical_dimension"] == 2 * report["full_turn_pairs"]
        low, high = report["wavelength_trained"]
        assert math.isclose(low, 2 * math.pi, rel_tol=EPS64)
        assert math.isclose(high, 2 * math.pi * base ** ((d - 2) / d), rel_tol=1e3 * EPS64)
    if rope.rope_type == "default":
        # Plain RoPE at 2L: every pair that had not closed the circle leaves its
        # range, unless every layer's window keeps the distances within L
        # (Mistral 7B v0.1: window 4,096 < L).
        window = config.get("sliding_window") if config["model_type"] == "mistral" \
            else None
        assert report["window"] == window
        leaves = window is None or window > L
        assert report["out_of_range_count"] == (
            d // 2 - report["full_turn_pairs"] if leaves else 0)
    if rope.rope_type in ("yarn", "llama3"):
        # Every pair that had not closed the circle (wavelength > L) is divided by the
        # full factor s (YaRN: r < beta_slow = 1; Llama 3: wavelength > L / 1), so it
        # leaves its range exactly when L' / s > L.
        # Judged at the target, or at the window where every rotating layer has
        # one (Llama 4's chunks of 8,192: no distance beyond occurs with RoPE).
        target, s = report["judged_at"], rope.factor
        unclosed = d // 2 - report["full_turn_pairs"]
        assert report["out_of_range_count"] == (unclosed if target / s > L else 0)
    if report["mrope"]:
        assert report_axes(report) == hf_mrope_axes(config).tolist()


# -- M-RoPE, T5 and ALiBi against transformers ------------------------------------------

QWEN3_VL = {"model_type": "qwen3_vl", "text_config": {
    "model_type": "qwen3_vl_text", "head_dim": 128, "hidden_size": 4096,
    "num_attention_heads": 32, "rope_theta": 5e6, "max_position_embeddings": 128000,
    "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20],
                     "mrope_interleaved": True}}}


def hf_mrope_axes(config: dict) -> torch.Tensor:
    """Which axis drives each pair in transformers: the pairs whose sine is
    non-zero when only that axis' position id is 1 (Qwen2.5-VL merges the
    per-axis cos/sin in ``apply_multimodal_rotary_pos_emb``, Qwen3-VL in its
    rotary module's ``apply_interleaved_mrope``)."""
    text = hf_config(config)
    module = rotary_module(config)
    section = text.rope_scaling["mrope_section"]
    rows = []
    for axis in range(3):
        ids = torch.zeros(3, 1, 1, dtype=torch.long)
        ids[axis] = 1
        _, sin = module(torch.zeros(1), ids)
        if sin.dim() == 4:  # (3, batch, seq, dim): Qwen2-VL / Qwen2.5-VL
            sin = torch.cat([m[i % 3] for i, m in
                             enumerate(sin.split(section * 2, dim=-1))], dim=-1)
        rows.append(sin[0, 0, : sin.shape[-1] // 2] != 0)
    rows = torch.stack(rows)
    assert torch.all(rows.sum(0) == 1)  # every pair follows exactly one axis
    return rows.int().argmax(0)


def report_axes(report: dict) -> list:
    axes = [None] * report["pairs"]
    for a, info in enumerate(report["mrope"].values()):
        for first, last in info["ranges"]:
            axes[first:last + 1] = [a] * (last - first + 1)
    return axes


@pytest.mark.parametrize("config", [model_inspect.model_config("qwen2.5-vl-7b-instruct"),
                                    QWEN3_VL], ids=["qwen2.5-vl", "qwen3-vl"])
def test_mrope_report_matches_transformers_cos_sin(config):
    report = model_inspect.inspect_config(config)
    axes = hf_mrope_axes(config)
    assert report_axes(report) == axes.tolist()
    interleaved = config["model_type"] == "qwen3_vl"
    assert report["mrope_interleaved"] is interleaved
    if interleaved:  # t, h, w, t, ... until height and width run out at 60
        assert axes[:60].tolist() == [0, 1, 2] * 20 and axes[60:].tolist() == [0] * 4
        assert "temporal 24 pairs (0-60 step 3, 61-63)" in \
            model_inspect.format_report(report)


def test_inspector_on_non_rotary_models():
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.t5.modeling_t5 import T5Attention

    bloom = model_inspect.inspect_config(model_inspect.model_config("bloom-560m"))
    assert bloom["scheme"] == "ALiBi" and bloom["heads"] == 16
    # BLOOM's bias at key position 1 is the slope itself. It raises a float32
    # base (error <= ε32/2) to powers up to 16: relative error <= 16·ε32.
    slopes = build_alibi_tensor(torch.ones(1, 2), 16, torch.float32)[:, 0, 1].double()
    assert math.isclose(bloom["slope_max"], slopes.max(), rel_tol=16 * EPS32)
    assert math.isclose(bloom["slope_min"], slopes.min(), rel_tol=16 * EPS32)
    assert "ALiBi" in model_inspect.format_report(bloom)
    t5 = model_inspect.inspect_config(model_inspect.model_config("t5-v1_1-base"))
    from transformers import T5Config
    assert t5["max_distance"] == T5Config().relative_attention_max_distance == 128
    relative = torch.arange(-1000, 1001)  # key minus query
    for part, bidirectional in (("encoder", True), ("decoder", False)):
        bucket = T5Attention._relative_position_bucket(
            relative, bidirectional=bidirectional, num_buckets=32, max_distance=128)
        past, future = bucket[relative <= 0], bucket[relative > 0]
        ids, counts = past.unique(return_counts=True)
        far = past[relative[relative <= 0] <= -t5[part]["last_from"]]
        assert t5[part]["past"] == ids.numel()
        assert t5[part]["exact_past"] == int((counts == 1).sum())
        assert far.unique().numel() == 1 and (past == far[0]).sum() == far.numel()
        assert t5[part]["future"] == len(set(future.tolist()) - set(past.tolist()))
    assert (t5["encoder"]["past"], t5["encoder"]["exact_past"]) == (16, 8)
    assert (t5["decoder"]["past"], t5["decoder"]["exact_past"]) == (32, 16)


@pytest.mark.parametrize("name", ROTARY)
def test_pair_layout_matches_transformers(name):
    config = model_inspect.model_config(name)
    report = model_inspect.inspect_config(config)
    partner = hf_pair_partner(config)
    assert partner == (1 if report["pair_layout"] == "interleaved"
                       else report["rotary_dim"] // 2)
    if name == "deepseek-v3":
        assert report["pair_layout"] == "interleaved"
        flat = {**config, "rope_interleave": False}
        assert model_inspect.inspect_config(flat)["pair_layout"] == "half"
        assert hf_pair_partner(flat) == report["rotary_dim"] // 2


def test_lengths_are_the_configs_own():
    # Gemma 3's text config: max_position_embeddings is the extended length.
    gemma3 = {"model_type": "gemma3_text", "hidden_size": 5376, "head_dim": 128,
              "num_attention_heads": 32, "max_position_embeddings": 131072,
              "rope_theta": 1e6, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    report = model_inspect.inspect_config(gemma3)
    assert report["extended_length"] is None and report["train_length"] == 131072
    assert report["train_length_from"] == "max_position_embeddings"
    assert "1,048,576" not in model_inspect.format_report(report)
    assert "names no length before" in model_inspect.format_report(report)
    dynamic = {**LLAMA, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    assert model_inspect.inspect_config(dynamic)["extended_length"] is None
    llama31 = model_inspect.inspect_config(model_inspect.model_config("llama-3.1-8b"))
    assert llama31["train_length_from"] == "original_max_position_embeddings"
    assert "L' = 131,072 (max_position_embeddings)" in \
        model_inspect.format_report(llama31)


def test_loading_and_unknown_names():
    with pytest.raises(ValueError, match="known models: llama-2-7b"):
        model_inspect.model_config("llama-9")
    assert model_inspect.load_config({"a": 1}) == ("config", {"a": 1})
    with pytest.raises(ValueError, match="path, a model name or a mapping"):
        model_inspect.load_config(3)
    first = model_inspect.model_config("deepseek-v3")
    first["rope_theta"] = 1
    assert model_inspect.model_config("deepseek-v3")["rope_theta"] == 10000  # a copy


# -- figures --------------------------------------------------------------------------

def test_figures_render_and_refuse_non_rotary_models():
    assert set(figures.ROTARY_MODELS) == set(ROTARY)
    fig = figures.wavelengths("deepseek-v3")
    assert len(fig.axes) == 1 and "DeepSeek-V3" in fig.axes[0].get_title()
    assert len(figures.overview().axes[0].get_yticklabels()) == len(ROTARY)
    with pytest.raises(ValueError, match="ALiBi"):
        figures.wavelengths("bloom-560m")
