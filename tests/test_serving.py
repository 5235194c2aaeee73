"""What serving a model needs: the inspector's serving report, its inputs,
and the float16 overflow of positions."""

import pytest
import torch

from posenc_lib import rope
from posenc_lib.tools import inspector


@pytest.mark.parametrize("target, label", [(131072, "(4 x L)"), (65536, "(2 x L)"),
                                           (49152, "(1.5 x L)")])
def test_out_of_range_label_states_the_ratio_to_L(target, label):
    report = inspector.inspect_config(inspector.model_config("qwen2.5-7b-instruct"),
                                    target_length=target)
    assert report["train_length"] == 32768
    line = next(line for line in inspector.format_report(report).splitlines()
                if "out of range" in line)
    assert f"at {target:,} tokens {label}" in line


def test_out_of_range_label_is_absent_at_the_configured_length():
    config = inspector.model_config("qwen2.5-7b-instruct-yarn")
    text = inspector.format_report(inspector.inspect_config(config))
    line = next(line for line in text.splitlines() if "out of range" in line)
    assert "x L)" not in line


def test_float16_positions_beyond_its_range_are_named_as_an_overflow():
    positions = torch.arange(65520, 65530)
    with pytest.raises(ValueError, match=r"positions overflow torch.float16: "
                       r"positions above 65,504 \(its largest finite value, "
                       r"65504.0\) do not fit"):
        rope.cos_sin_error(positions, 128, 1e6, angle_dtype=torch.float16)
    # the largest representable position still works, in float16 and beyond
    assert rope.cos_sin_error(torch.tensor([65504]), 128, 1e6,
                              angle_dtype=torch.float16).isfinite().all()
    assert rope.cos_sin_error(positions, 128, 1e6).isfinite().all()


def test_nan_positions_still_say_must_be_finite():
    with pytest.raises(ValueError, match="positions must be finite"):
        rope.rope_angles(torch.tensor([0.0, float("nan")]), rope.inv_freq(8))


# ---- the serving report ------------------------------------------------------------

import json  # noqa: E402
import logging  # noqa: E402

from posenc_lib import scaling, serving  # noqa: E402

transformers = pytest.importorskip("transformers")
from transformers import AutoConfig  # noqa: E402

#: Qwen2.5-7B-Instruct's published config.json (huggingface.co/Qwen/
#: Qwen2.5-7B-Instruct), the fields that matter here.
QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 3584,
             "intermediate_size": 18944, "max_position_embeddings": 32768,
             "max_window_layers": 28, "model_type": "qwen2",
             "num_attention_heads": 28, "num_hidden_layers": 28,
             "num_key_value_heads": 4, "rope_theta": 1000000.0,
             "sliding_window": 131072, "use_sliding_window": False,
             "torch_dtype": "bfloat16", "vocab_size": 152064}
#: The YaRN block Qwen2.5's model card says to add for 128K.
QWEN_YARN = {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}


def _transformers_log(config: dict) -> list[str]:
    """What transformers logs from modeling_rope_utils while loading ``config``."""
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("transformers.modeling_rope_utils")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logging.Logger.warning_once.cache_clear()  # transformers caches its warning_once
    try:
        fields = json.loads(json.dumps(config))
        AutoConfig.for_model(fields.pop("model_type"), **fields)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return [r for r in records if not r.startswith("Unrecognized keys")]


BLOCKS = [
    QWEN_YARN,
    {"factor": 4.0, "original_max_position_embeddings": 32768, "rope_type": "yarn"},
    {"factor": 4, "original_max_position_embeddings": 8192, "rope_type": "yarn"},
    {"factor": 4.0, "rope_type": "yarn"},
    {"factor": 4.0, "rope_type": "yarn", "beta_fast": 1.0, "beta_slow": 2.0,
     "original_max_position_embeddings": 8192},
    {"factor": 4.0, "rope_type": "yarn", "beta_fast": 32, "attention_factor": 1,
     "original_max_position_embeddings": 8192},
    {"factor": 2, "type": "linear"},
    {"factor": 2.0, "type": "dynamic"},
    {"factor": 0.5, "rope_type": "linear"},
    {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    {"factor": 8, "low_freq_factor": 1, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 32768, "rope_type": "llama3"},
]


@pytest.mark.parametrize("model_type", ["qwen2", "llama"])
@pytest.mark.parametrize("block", BLOCKS, ids=range(len(BLOCKS)))
def test_transformers_warnings_are_what_transformers_logs(model_type, block):
    config = dict(QWEN25_7B, model_type=model_type, rope_scaling=dict(block))
    assert serving.transformers_warnings(config) == _transformers_log(config)


def test_deepseek_integers_are_floats_to_transformers():
    config = inspector.model_config("deepseek-v3")
    assert _transformers_log(config) == serving.transformers_warnings(config) == []
    assert serving.transformers_warnings(dict(config, model_type="llama")) == [
        "`rope_scaling`'s factor field must be a float >= 1, got 40",
        "`rope_scaling`'s beta_fast field must be a float, got 32",
        "`rope_scaling`'s beta_slow field must be a float, got 1"]


def test_qwen25_model_card_yarn_warning_is_in_the_report(tmp_path):
    config = dict(QWEN25_7B, rope_scaling=QWEN_YARN)
    (tmp_path / "config.json").write_text(json.dumps(config))
    [message] = _transformers_log(config)
    assert "does not match the ratio implicitly set" in message
    report = inspector.inspect_config(config)
    assert report["transformers_warnings"] == [message]
    assert f"transformers warns {message}" in inspector.format_report(report)


def test_a_model_directory_is_read(tmp_path, capsys):
    folder = tmp_path / "Qwen2.5-7B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN25_7B))
    assert inspector.load_config(folder) == ("Qwen2.5-7B-Instruct", QWEN25_7B)
    assert inspector.main([str(folder), "--json", "--target-length", "131072"]) == 0
    report = json.loads(capsys.readouterr().out)
    # 2 (keys and values) x 28 layers x 4 KV heads x 128 dims x 2 bytes
    assert report["kv_cache"]["bytes_per_token"] == 2 * 28 * 4 * 128 * 2 == 57344
    assert report["kv_cache"]["bytes_at_length"] == 57344 * 131072
    assert inspector.main([str(folder)]) == 0
    assert "KV cache           56 KiB per token" in capsys.readouterr().out


def test_a_directory_without_config_and_a_hub_id_say_what_to_do(tmp_path, capsys):
    with pytest.raises(ValueError, match="holds no config.json"):
        inspector.load_config(tmp_path)
    assert inspector.main(["Qwen/Qwen2.5-7B-Instruct"]) == 2
    err = capsys.readouterr().err
    assert "looks like a Hugging Face hub id" in err and "download its config.json" in err


@pytest.mark.parametrize("model_type, extra", [
    ("qwen2", {}), ("qwen2", {"use_sliding_window": True, "max_window_layers": 20}),
    ("gemma2", {"sliding_window": 4096, "head_dim": 256}),
    ("gemma3_text", {"sliding_window": 1024, "head_dim": 128}),
    ("gemma3_text", {"sliding_window": 1024, "head_dim": 128,
                     "sliding_window_pattern": 4}),
])
def test_layer_types_match_transformers_config_classes(model_type, extra):
    config = dict(QWEN25_7B, model_type=model_type, **extra)
    fields = dict(config)
    theirs = AutoConfig.for_model(fields.pop("model_type"), **fields).layer_types
    cache = serving.kv_cache_bytes(config, length=100000)
    per_layer = 2 * 4 * config.get("head_dim", 128) * 2
    counts = {kind: theirs.count(kind) for kind in set(theirs)}
    assert {k: v["layers"] for k, v in cache["by_layer_type"].items()} == counts
    window = config["sliding_window"] if "sliding_attention" in counts else 0
    assert cache["bytes_at_length"] == per_layer * (
        counts.get("full_attention", 0) * 100000
        + counts.get("sliding_attention", 0) * min(window - 1, 100000))


@pytest.mark.parametrize("model_type, extra", [
    ("qwen2", {}), ("mistral", {"sliding_window": 4}),
    ("gemma2", {"sliding_window": 4, "head_dim": 16}),
    ("gemma3_text", {"sliding_window": 5, "head_dim": 16})])
@pytest.mark.parametrize("length", [3, 10])
def test_kv_cache_bytes_match_the_cache_transformers_fills(model_type, extra, length):
    from transformers import AutoModelForCausalLM

    fields = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                  num_key_value_heads=2, num_hidden_layers=7, vocab_size=100,
                  max_position_embeddings=256, **extra)
    built = AutoConfig.for_model(model_type, **fields)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(built, dtype=torch.bfloat16).eval()
    with torch.no_grad():
        cache = model(torch.arange(length)[None], use_cache=True).past_key_values
    measured = sum(t.numel() * t.element_size() for layer in cache.layers
                   for t in (layer.keys, layer.values))
    ours = serving.kv_cache_bytes(dict(fields, model_type=model_type), length=length)
    assert ours["bytes_at_length"] == measured


def test_length_dependence_is_measured_not_declared():
    # dynamic and LongRoPE: frequencies at two lengths differ; static: equal.
    for name in ("phi-3-mini-128k-instruct", "qwen2.5-7b-instruct-yarn",
                 "llama-3.1-8b"):
        config = inspector.model_config(name)
        rope_type = inspector.inspect_config(config)["rope_type"]
        length = inspector.trained_and_extended(config)["train_length"]
        a, _ = scaling.rope_from_config(config, seq_len=length, dtype=torch.float64)
        b, _ = scaling.rope_from_config(config, seq_len=4 * length,
                                        dtype=torch.float64)
        report = inspector.inspect_config(config)
        assert report["frequencies"]["length_dependent"] == (not torch.equal(a, b))
        assert (rope_type in serving.LENGTH_DEPENDENT) == (not torch.equal(a, b))
    dynamic = dict(QWEN25_7B, rope_scaling={"type": "dynamic", "factor": 2.0})
    a, _ = scaling.rope_from_config(dynamic, seq_len=32768)
    b, _ = scaling.rope_from_config(dynamic, seq_len=65536)
    assert not torch.equal(a, b)
    assert inspector.inspect_config(dynamic)["frequencies"]["length_dependent"]


def test_static_methods_change_short_prompts_and_plain_rope_does_not():
    yarn = inspector.inspect_config(dict(QWEN25_7B, rope_scaling=QWEN_YARN))
    plain = inspector.inspect_config(QWEN25_7B)
    assert yarn["frequencies"]["short_prompt_pairs_changed"] > 0
    assert plain["frequencies"]["short_prompt_pairs_changed"] == 0
    assert "short prompts included" in inspector.format_report(yarn)


def test_angle_errors_order_and_float16_overflow():
    errors = serving.angle_errors(128, 1e6, 131072)
    assert errors["float16"] is None  # 131,071 > 65,504
    assert errors["float32"] < errors["bfloat16"]
    # float32 spacing at 2**17 is 2**-6: a rounded angle is off by up to 2**-7
    # at pair 0, so cos or sin by up to about that much.
    assert 2**-9 < errors["float32"] < 2**-6
    short = serving.angle_errors(128, 1e6, 4096)
    assert short["float16"] is not None
    assert short["float32"] < short["float16"] < short["bfloat16"]


def test_gemma3_without_max_position_embeddings_gets_its_class_default(tmp_path):
    # Gemma 3's published text_config has no max_position_embeddings; its
    # config class fills it in, and so does the inspector, and says so.
    text = {"model_type": "gemma3_text", "head_dim": 128, "hidden_size": 5376,
            "num_attention_heads": 32, "num_key_value_heads": 16,
            "num_hidden_layers": 62, "rope_theta": 1000000.0,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024}
    config = {"model_type": "gemma3", "text_config": text}
    expected = AutoConfig.for_model(**json.loads(json.dumps(text)))
    (tmp_path / "config.json").write_text(json.dumps(config))
    _, loaded = inspector.load_config(tmp_path)
    report = inspector.inspect_config(loaded)
    assert report["train_length"] == expected.max_position_embeddings == 131072
    assert any("max_position_embeddings" in w and "131072" in w
               for w in report["warnings"])


@pytest.mark.parametrize("engine, when", [
    ("transformers", "per forward: the long factors once the sequence passes"),
    ("vllm", "never: fixed at start-up by max_model_len"),
    ("sglang", "per batch: any position > original switches every token"),
])
def test_engine_flag_reports_the_engines_rope(engine, when, capsys):
    """``--engine`` names the chosen engine's pair layout, factor and frequency
    schedule (``posenc_lib.tools.engines``, whose transcriptions tests/test_engines.py
    checks): for Phi-3's LongRoPE the two engines switch at different times."""
    assert inspector.main(["phi-3-mini-128k-instruct", "--engine", engine]) == 0
    (line,) = [row for row in capsys.readouterr().out.splitlines()
               if row.strip().startswith("engine RoPE")]
    assert f"{engine}: pairs" in line and when in line
    assert "factor 1.19024 on cos and sin (logits x 1.41667)" in line


@pytest.mark.parametrize("model, engine, pairs", [
    ("llama-3.1-8b", "vllm", "pairs halves (NEOX);"),
    ("deepseek-v3", "vllm", "pairs neighbours (GPT-J style);"),
    ("ernie-4.5-0.3b-base-pt", "vllm", "pairs neighbours (GPT-J style);"),
    ("llama-4-scout-17b-16e-instruct", "vllm",
     "pairs halves (NEOX) on q/k rows permuted at load = neighbours;"),
    ("smollm3-3b", "vllm", "pairs halves (Transformers backend);"),
    ("olmo-3.1-32b-instruct", "sglang", "pairs halves (NEOX);"),
    ("kimi-k2-instruct", "sglang", "pairs neighbours (GPT-J style);"),
])
def test_engine_flag_reports_the_per_model_pair_layout(model, engine, pairs, capsys):
    """``--engine vllm|sglang`` reports the layout the engine's model file sets
    (posenc_lib.tools.engines.VLLM_PAIRS / SGLANG_PAIRS); on the checkpoint's rows it
    is the inspector's own record of transformers' pairs (INTERLEAVED_PAIRS),
    and the JSON report cites the model file's line."""
    assert inspector.main([model, "--engine", engine]) == 0
    (line,) = [row for row in capsys.readouterr().out.splitlines()
               if row.strip().startswith("engine RoPE")]
    assert f"{engine}: {pairs}" in line
    _, config = inspector.load_config(model)
    report = inspector.inspect_config(config, engine=engine)
    from posenc_lib.tools import engines

    expected = "neighbours" if inspector._pair_layout(config) == "interleaved" else "halves"
    layout = (engines.vllm_pairs if engine == "vllm" else engines.sglang_pairs)(config)
    assert layout["checkpoint_pairs"] == expected
    source = report["engine_rope"]["pairs_source"]
    assert source.startswith({"vllm": "vllm-project/vllm vllm==0.33.0",
                              "sglang": "sgl-project/sglang sglang==0.5.23"}[engine])
    assert " line " in source


def test_sglang_engine_has_no_kv_cache_size(capsys):
    """SGLang's KV-cache sizing is not transcribed: the report says so rather
    than give transformers' or vLLM's number under SGLang's name."""
    _, config = inspector.load_config("llama-3.1-8b")
    report = inspector.inspect_config(config, engine="sglang")
    assert "kv_cache" not in report and "not transcribed" in report["kv_cache_not_covered"]
    with pytest.raises(ValueError, match="engine"):
        inspector.inspect_config(config, engine="tensorrt-llm")
    with pytest.raises(ValueError, match="engine"):
        serving.kv_cache_bytes(config, length=10, engine="sglang")


# ---- which transformers' caches: 4.57.6 and 5.24.0 differ (MLA, LFM2) -------------


def _deepseek_61():
    config = inspector.model_config("deepseek-v3")
    assert config["num_hidden_layers"] == 61  # the table's, cited in models.json
    return config


def test_kv_cache_says_which_transformers_it_models():
    """4.57.6 caches DeepSeek's MLA decompressed, 5.24.0 the latent (the
    stored sweeps, results/conformance-4.json and -5.json, measured both on
    tiny models: tests/test_conformance.py re-judges them)."""
    old = serving.kv_cache_bytes(_deepseek_61(), transformers_version="4.57.6")
    new = serving.kv_cache_bytes(_deepseek_61(), transformers_version="5.24.0")
    assert old["transformers_version"] == "4.57.6"
    assert new["transformers_version"] == "5.24.0"
    assert old["bytes_per_token"] == 61 * 128 * (128 + 64 + 128) * 2
    assert new["bytes_per_token"] == 61 * (512 + 64) * 2
    # any 5.x is modelled as 5.24.0, the default is the installed transformers
    assert serving.kv_cache_bytes(_deepseek_61(), transformers_version="5.0.1")[
        "bytes_per_token"] == new["bytes_per_token"]
    assert serving.kv_cache_bytes(_deepseek_61())["transformers_version"] == \
        serving.mimicked_transformers_version()
    assert serving.kv_cache_bytes(_deepseek_61(), engine="vllm")[
        "transformers_version"] is None
    line = next(x for x in inspector.format_report(inspector.inspect_config(
        _deepseek_61())).splitlines() if x.strip().startswith("KV cache"))
    assert f"(transformers {serving.mimicked_transformers_version()}:" in line


def test_lfm2_state_per_transformers_version():
    config = {"model_type": "lfm2", "hidden_size": 2048, "num_attention_heads": 32,
              "num_key_value_heads": 8, "num_hidden_layers": 4, "conv_L_cache": 3,
              "layer_types": ["conv", "full_attention", "conv", "conv"],
              "rope_theta": 1e6, "max_position_embeddings": 128000}
    old = serving.fixed_state_bytes(config, transformers_version="4.57.6")
    new = serving.fixed_state_bytes(config, transformers_version="5.24.0")
    assert (old["layers"], old["bytes"]) == (4, 4 * 2048 * 3 * 2)  # every layer
    assert (new["layers"], new["bytes"]) == (3, 3 * 2048 * 3 * 2)  # conv layers only


def test_transformers_version_must_be_4_or_5():
    with pytest.raises(ValueError, match="version must be a transformers 4.x or 5.x"):
        serving.kv_cache_bytes(_deepseek_61(), transformers_version="3.0.0")
