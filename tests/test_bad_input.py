"""Bad input to the config readers and the inspector's command line: a clear
error naming the field or file (exit 2 on the command line), never a traceback,
a hang or a silently wrong answer; and the generated population compared with
transformers 4.57.6 (tests/helpers/config_population.py)."""

import contextlib
import errno
import io
import json
import os
import re
import warnings
from pathlib import Path

import pytest
import torch

from posenc_lib import _validate, _validate_config, per_layer, scaling, serving
from posenc_lib.tools import inspector

ROOT = Path(__file__).resolve().parents[1]
BASE = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
        "num_key_value_heads": 4, "num_hidden_layers": 2,
        "max_position_embeddings": 4096, "rope_theta": 10000.0}
MISTRAL = {**BASE, "model_type": "mistral"}
QWEN2 = {**BASE, "model_type": "qwen2", "use_sliding_window": True,
         "sliding_window": 512, "max_window_layers": 1}
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 256, "num_attention_heads": 4,
          "num_key_value_heads": 1, "head_dim": 64, "num_hidden_layers": 6,
          "max_position_embeddings": 8192, "rope_theta": 1e6,
          "rope_local_base_freq": 10000.0, "sliding_window": 512}


class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _cli(*args):
    """``python -m posenc_lib inspect ARGS``, in this process (the same main())."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = inspector.main(list(args))
        except SystemExit as stop:  # argparse
            code = stop.code
    return _Result(code, out.getvalue(), err.getvalue())


def _one_error_line(result, pattern):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert re.search(pattern, lines[0]), lines[0]


# ---- sliding windows -----------------------------------------------------------

@pytest.mark.parametrize("window, pattern", [
    (-5, r"sliding_window must be >= 1, got -5"),
    (0, r"sliding_window must be >= 1, got 0"),
    ("512", r"sliding_window must be a positive integer .* got a string, '512': "
            r"write it without quotes"),
    (True, r"sliding_window must be a positive integer .* got a boolean, True"),
])
def test_a_bad_window_is_named_in_serving_and_the_inspector(window, pattern):
    config = {**MISTRAL, "sliding_window": window}
    with pytest.raises(ValueError, match=pattern):
        serving.kv_cache_bytes(config, length=100)
    with pytest.raises(ValueError, match=pattern):  # not target_length
        inspector.inspect_config(config)


def test_a_good_window_caps_the_cache():
    out = serving.kv_cache_bytes({**MISTRAL, "sliding_window": 512}, length=100_000)
    info = out["by_layer_type"]["sliding_attention"]
    assert info["tokens_at_length"] == 511 and out["bytes_at_length"] > 0


# ---- layer_types -----------------------------------------------------------------

@pytest.mark.parametrize("config", [
    {**QWEN2, "layer_types": ["full_attention", "bogus"]},
    {**GEMMA3, "layer_types": ["sliding_attention"] * 5 + ["global"]},
])
def test_unknown_layer_types_are_refused_as_transformers_refuses_them(config):
    with pytest.raises(ValueError, match=r"layer_types\[\d\] is '(bogus|global)', "
                                         r"which transformers refuses"):
        per_layer.layer_layout(config)
    with pytest.raises(ValueError, match=r"layer_types\[\d\]"):
        serving.kv_cache_bytes(config, length=10)
    transformers = pytest.importorskip("transformers")
    fields = {k: v for k, v in config.items() if k != "model_type"}
    with pytest.raises(ValueError, match="layer_types"):  # both 4.57 and 5.x raise
        transformers.AutoConfig.for_model(config["model_type"], **fields)


def test_the_allowed_layer_types_are_transformers_own():
    configuration_utils = pytest.importorskip("transformers.configuration_utils")
    if not configuration_utils.__name__ or \
            pytest.importorskip("transformers").__version__ != "4.57.6":
        pytest.skip("the fallback is 4.57.6's set")
    assert _validate_config.ALLOWED_LAYER_TYPES_4_57 == \
        configuration_utils.ALLOWED_LAYER_TYPES
    from transformers import GraniteMoeHybridConfig
    with pytest.raises(ValueError, match="mamba"):  # its own two types only
        GraniteMoeHybridConfig(layer_types=["full_attention"], num_hidden_layers=1)


def test_valid_layer_types_still_read():
    layers = per_layer.layer_layout({**QWEN2, "layer_types": ["full_attention",
                                                              "sliding_attention"]})
    assert [x.attention for x in layers] == ["full_attention", "sliding_attention"]


# ---- types and ranges of the other fields ---------------------------------------

@pytest.mark.parametrize("config, pattern", [
    ({**BASE, "model_type": 7}, r"model_type must be a string .* got 7"),
    ({"model_type": "gemma3", "text_config": {**GEMMA3, "model_type": 3}},
     r"text_config.model_type must be a string"),
    ({**BASE, "num_key_value_heads": 3},
     r"num_key_value_heads \(3\) must divide num_attention_heads \(4\)"),
    ({**BASE, "hidden_size": 250},
     r"hidden_size \(250\) must be a multiple of num_attention_heads \(4\) for "
     r"model_type 'llama': transformers 5.x refuses it"),
    ({**GEMMA3, "rope_local_base_freq": -5.0}, r"^rope_local_base_freq must be > 1"),
    ({**BASE, "max_position_embeddings": 1e30},
     r"max_position_embeddings must be at most 9,007,199,254,740,992 \(2\*\*53"),
    ({**BASE, "rope_theta": None}, r"rope_theta is null"),
    ({**BASE, "num_hidden_layers": 10**9}, r"num_hidden_layers must be at most 65,536"),
    ({**BASE, "head_dim": 2**40}, r"head_dim must be at most 65,536"),
])
def test_a_bad_field_is_named(config, pattern):
    with pytest.raises(ValueError, match=pattern):
        inspector.inspect_config(config)
    with pytest.raises(ValueError, match=pattern):
        scaling.rope_from_config(config)


def test_hidden_size_not_divisible_stays_accepted_where_5x_accepts_it():
    config = {**BASE, "model_type": "qwen2", "hidden_size": 250}  # Qwen2: no check
    assert inspector.inspect_config(config)["head_dim"] == 62


@pytest.mark.parametrize("block, given", [
    ({"rope_tpye": "linear", "factor": 2.0}, "is missing \\(the block has 'rope_tpye'"),
    ({}, "is missing"), ({"factor": 2.0}, "is missing"),
    ({"rope_type": None, "factor": 2.0}, "is null"),
])
def test_a_rope_scaling_without_its_method_raises_as_in_457(block, given):
    config = {**BASE, "rope_scaling": block}
    with pytest.raises(ValueError, match=f"rope_scaling.rope_type {given}"):
        scaling.rope_from_config(config)
    transformers = pytest.importorskip("transformers")
    fields = {k: v for k, v in config.items() if k != "model_type"}
    with pytest.raises((KeyError, ValueError)):  # 4.57: the config or its rotary module
        cfg = transformers.LlamaConfig(**fields)
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
        LlamaRotaryEmbedding(cfg)


def test_a_5x_block_without_rope_type_is_plain_rope_as_5x_reads_it():
    config = {**BASE, "rope_parameters": {"rope_theta": 10000.0}}
    config.pop("rope_theta")
    freq, _ = scaling.rope_from_config(config, dtype=torch.float64)
    plain, _ = scaling.rope_parameters("default", 64, 10000.0, dtype=torch.float64)
    assert torch.equal(freq, plain)


def test_rope_from_config_warns_the_yarn_warning_the_inspector_shows():
    config = {**BASE, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                       "original_max_position_embeddings": 2048}}
    with pytest.warns(scaling.RopeConfigWarning) as caught:
        scaling.rope_from_config(config)
    shown = inspector.inspect_config(config)["transformers_warnings"]
    ours = [str(w.message) for w in caught
            if str(w.message).startswith(scaling.YARN_LENGTH_MESSAGES)]
    assert ours and ours[0] in shown
    report = inspector.inspect_config(config)
    assert ours[0] not in report["warnings"]  # listed once, as transformers warns


def test_the_hidden_size_rule_is_5x_own():
    from helpers.paths import PYTHON5

    roots = sorted(PYTHON5.parent.parent.glob("lib/python3*/site-packages/transformers/models"))
    if not roots:
        pytest.skip("no transformers 5.x interpreter (set PY5, or make conformance)")
    root = roots[0]
    found = set()
    for path in root.glob("*/configuration_*.py"):
        text = path.read_text()
        if "self.hidden_size % self.num_attention_heads != 0" in text:
            found.update(re.findall(r'model_type = "([a-z0-9_]+)"', text))
    assert _validate_config.HIDDEN_DIVISIBLE_5X <= found


def test_the_kv_head_defaults_are_the_classes():
    transformers = pytest.importorskip("transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model_type, kv in _validate_config.KV_HEADS_DEFAULTS.items():
            if model_type not in transformers.CONFIG_MAPPING:
                continue  # 5.x only: tests/test_class_defaults.py
            if model_type == "llama4_text":
                cfg = transformers.Llama4TextConfig(num_attention_heads=2)
            else:
                cfg = transformers.AutoConfig.for_model(model_type,
                                                        num_attention_heads=2)
            cfg = getattr(cfg, "text_config", None) or cfg
            assert cfg.num_key_value_heads == kv, model_type


def test_every_class_default_kv_head_count_is_in_the_table():
    """The converse, over the whole registry: every config class of the
    installed transformers whose ``__init__`` gives ``num_key_value_heads`` an
    integer default (a config that omits the field gets that many key heads,
    not the query heads) is in the table with that default. DeepSeek-V3 is
    left out: its attention expands its keys per query head."""
    transformers = pytest.importorskip("transformers")
    import inspect

    found = {}
    for model_type in transformers.CONFIG_MAPPING.keys():
        try:
            cls = transformers.CONFIG_MAPPING[model_type]
        except Exception:  # a class whose dependencies are not installed
            continue
        param = inspect.signature(cls.__init__).parameters.get("num_key_value_heads")
        if param is not None and isinstance(param.default, int):
            found[model_type] = param.default
    found.pop("deepseek_v3")
    table = _validate_config.KV_HEADS_DEFAULTS
    assert len(found) > 40, f"only {len(found)} classes read: the probe is broken"
    assert {k: v for k, v in found.items() if table.get(k) != v} == {}, (
        "classes whose omitted num_key_value_heads default the table lacks or misstates")


# ---- lengths -------------------------------------------------------------------

def test_lengths_are_capped_at_2_53_and_the_cap_works():
    report = inspector.inspect_config(BASE, target_length=_validate.MAX_LENGTH)
    assert report["target_length"] == 2**53
    with pytest.raises(ValueError, match="target_length must be at most"):
        inspector.inspect_config(BASE, target_length=2**53 + 1)
    with pytest.raises(ValueError, match="length must be at most"):
        serving.kv_cache_bytes(BASE, length=10**30)
    # the default target (2 L) above the cap names where it comes from
    with pytest.raises(ValueError, match=r"target_length defaults to 2 x L = "):
        inspector.inspect_config({**BASE, "max_position_embeddings": 2**53})


# ---- the command line's front door ----------------------------------------------

def test_cli_target_length_too_large(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(BASE))
    _one_error_line(_cli(str(tmp_path / "c.json"), "--target-length", "1e30"),
                    r"--target-length must be at most 9,007,199,254,740,992")
    _one_error_line(_cli(str(tmp_path / "c.json"), "--target-length", "abc"),
                    r"'abc' is not an integer")


@pytest.mark.parametrize("config, pattern", [
    ({**MISTRAL, "sliding_window": "512"}, "sliding_window must be a positive"),
    ({**MISTRAL, "sliding_window": 0}, "sliding_window must be >= 1"),
    ({**BASE, "model_type": 7}, "model_type must be a string"),
    ({**BASE, "max_position_embeddings": 1e30}, "max_position_embeddings must be at"),
    ({**BASE, "rope_scaling": {"rope_tpye": "yarn"}}, "rope_scaling.rope_type"),
])
def test_cli_bad_fields(tmp_path, config, pattern):
    (tmp_path / "c.json").write_text(json.dumps(config))
    _one_error_line(_cli(str(tmp_path / "c.json")), pattern)


def test_cli_kv_heads_not_dividing_never_reach_crosscheck(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({**BASE, "num_key_value_heads": 3}))
    result = _cli(str(tmp_path / "c.json"), "--crosscheck")
    _one_error_line(result, "num_key_value_heads \\(3\\) must divide")
    assert "match" not in result.stdout


def test_cli_deep_json(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "deep2.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    _one_error_line(_cli(str(tmp_path / "deep.json")),
                    "deep.json nests its JSON too deeply")
    _one_error_line(_cli(str(tmp_path / "deep2.json")),
                    "deep2.json nests its JSON too deeply")


def test_unreadable_file_is_named(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(BASE))

    def refuse(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)
    with pytest.raises(ValueError, match=f"cannot read {re.escape(str(path))}: "
                                         f"Permission denied"):
        inspector.load_config(path)


def test_cli_unreadable_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(BASE))
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: every file is readable")
        _one_error_line(_cli(str(path)), "cannot read .*Permission denied")
    finally:
        path.chmod(0o644)


def test_cli_symlink_loop_and_dangling_link(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    _one_error_line(_cli(str(tmp_path / "a")), "is a symbolic link loop")
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    _one_error_line(_cli(str(tmp_path / "gone")), "is a symbolic link to .*which does "
                                                  "not exist")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").symlink_to(tmp_path / "d" / "config.json")
    _one_error_line(_cli(str(tmp_path / "d")), "config.json is a symbolic link loop")


def test_cli_a_name_too_long_and_a_pipe(tmp_path):
    _one_error_line(_cli("a" * 5000), "cannot read .*File name too long")
    os.mkfifo(tmp_path / "fifo")  # never opened: reading it would block
    _one_error_line(_cli(str(tmp_path / "fifo")), "neither a regular file nor a "
                                                  "directory")


def test_the_front_door_turns_any_failure_into_one_line(monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise TypeError("unsupported operand type(s) for -: 'str' and 'int'")

    monkeypatch.setattr(inspector, "inspect_config", broken)
    assert inspector.main(["llama-3.1-8b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: llama-3.1-8b: a value of this "
                                               "config could not be used (TypeError")


# ---- the population -------------------------------------------------------------

def test_generated_configs_agree_with_transformers_457():
    """About 300 generated configs (deterministic; ``python
    tests/helpers/config_population.py --examples N`` runs more and prints the
    agreement rate): every difference from transformers 4.57.6's outcome is a
    listed deliberate one, and where both compute, the frequencies agree to
    float32's rounding (transformers computes inv_freq in float32: a few ulp,
    2**-24 each)."""
    pytest.importorskip("transformers")
    from hypothesis import HealthCheck, given, settings

    from helpers import config_population as population

    relations = []

    @settings(max_examples=300, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(population.configs())
    def check(config):
        result = population.compare(config)
        relations.append(result["relation"])
        assert result["relation"] != "DISAGREE", (config, result)
        if result["freq_error"] is not None:
            assert result["freq_error"] <= 8 * 2.0**-24, (config, result)

    check()
    assert relations.count("agree") >= len(relations) // 2


def test_serving_inputs_are_named():
    with pytest.raises(ValueError, match="target_length must be at most"):
        serving.angle_errors(64, 1e4, 10**30)
    with pytest.raises(ValueError, match=r"extended has shape \(4,\), trained \(3,\)"):
        serving.frequency_schedule("yarn", torch.ones(3, dtype=torch.float64),
                                   torch.ones(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="length must be an integer, got True"):
        serving.kv_cache_bytes(BASE, length=True)
