"""The inspector's "transformers warns" lines against what transformers 4.57.6
logs, for every config class of the table and of the per-layer families.

transformers logs its RoPE warnings from ``rope_config_validation``, which only
some config classes call (``Llama4TextConfig``, ``Exaone4Config``,
``MistralConfig``, ``Gemma2Config``, the Hunyuan classes ... never do). Each
case builds the config with ``AutoConfig.for_model``, captures every record
of the ``transformers`` logger, and compares it with
:func:`posenc_lib.serving.transformers_warnings` and the inspector's report.
"""

from __future__ import annotations

import copy
import inspect as pyinspect
import json
import re
import sys
import warnings
from importlib import metadata
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402

from posenc_lib.tools import inspector as model_inspect  # noqa: E402
from posenc_lib import per_layer, scaling, serving  # noqa: E402
from posenc_lib import config_reader  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import capture_transformers_warnings as capture  # noqa: E402
import transformers_rope_log  # noqa: E402
from helpers import rope_population  # noqa: E402
from helpers.paths import PYTHON5  # noqa: E402

SHARED = Path("/work/shared/configs")


def transformers_log(config: dict) -> list[str]:
    """The RoPE messages transformers logs while building ``config`` (every
    record of the ``transformers`` logger that mentions rope, unrecognized
    keys left out: the inspector lists those itself); an error propagates."""
    return transformers_rope_log.rope_log(config, catch=False)


def _class_validates(cls) -> bool:
    try:
        source = pyinspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return False
    if "rope_config_validation(" in source:
        return True
    method = getattr(cls, "_rope_scaling_validation", None)
    return ("self._rope_scaling_validation()" in source and method is not None
            and "rope_config_validation(" in pyinspect.getsource(method))


def test_validating_model_types_are_read_from_transformers_source():
    found = set()
    for model_type in CONFIG_MAPPING.keys():
        try:
            cls = CONFIG_MAPPING[model_type]
        except (ImportError, KeyError, AttributeError):
            continue
        if _class_validates(cls):
            found.add(model_type)
    assert found == set(serving.VALIDATING_MODEL_TYPES)


COMPOSITES = ["aria", "gemma3", "gemma3n", "glm4v", "glm4v_moe", "qwen2_vl",
              "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe"]


@pytest.mark.parametrize("model_type", COMPOSITES)
def test_flat_composite_configs(model_type):
    # the text fields at the top level: some classes pass them on to their
    # text config (which validates), others build a default text config
    config = {"model_type": model_type, **BASE, "rope_scaling": BLOCKS[2]}
    logged = _check(config)
    assert bool(logged) == (model_type in serving.FLAT_TO_TEXT)


BASE = {"hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 1,
        "head_dim": 32, "max_position_embeddings": 8192, "rope_theta": 10000.0,
        "num_hidden_layers": 4}
#: Blocks each validator warns about (``rope_population.PROBE_BLOCKS``).
BLOCKS = rope_population.PROBE_BLOCKS
TABLE = [n for n in model_inspect.model_names()
         if model_inspect.model_entry(n)["config"]["model_type"] not in
         ("bloom", "t5")]
#: The per-layer families, and classes that never validate.
#: (The 4.57.6 ones: the families only 5.x has are checked by the conformance
#: sweep's stored 5.x runs.)
FAMILIES = sorted({t for t in per_layer.LAYER_DEFAULTS
                   if t in CONFIG_MAPPING or f"{t}_text" in CONFIG_MAPPING}
                  | {"granitemoehybrid"} |
                  {"falcon", "dots1", "hunyuan_v1_dense", "hunyuan_v1_moe"})


def with_block(config: dict, block: dict) -> dict:
    config = copy.deepcopy(config)
    target = config.get("text_config", config)
    target["rope_scaling"] = copy.deepcopy(block)
    return config


def family_config(model_type: str) -> dict:
    # the classes the per-layer code reads (Gemma 3's and Llama 4's text configs)
    model_type = {"gemma3": "gemma3_text", "llama4": "llama4_text"}.get(model_type,
                                                                       model_type)
    config = {"model_type": model_type, **BASE}
    if model_type == "falcon":
        del config["head_dim"]  # a read-only property of FalconConfig
    if model_type == "granitemoehybrid":
        config["position_embedding_type"] = "rope"
    if model_type == "exaone4":
        config["sliding_window"] = 16
    return config


def _check(config: dict) -> list[str]:
    logged = transformers_log(config)
    assert serving.transformers_warnings(config) == logged, json.dumps(config)
    return logged


@pytest.mark.parametrize("name", TABLE)
def test_table_models_warn_as_transformers_logs(name):
    config = model_inspect.model_config(name)
    if config["model_type"] in config_reader.MODEL_TYPE_ALIASES:
        # transformers 4.57 has no such class (the model runs remote code)
        assert config["model_type"] not in CONFIG_MAPPING
        assert serving.transformers_warnings(config) == []
        return
    logged = _check(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert model_inspect.inspect_config(config)["transformers_warnings"] == logged
    if config["model_type"] == "phi3":
        return  # Phi3Config raises on blocks other than its own
    for block in BLOCKS:
        _check(with_block(config, block))


@pytest.mark.parametrize("model_type", FAMILIES)
@pytest.mark.parametrize("block", BLOCKS, ids=["llama3", "yarn", "linear", "dynamic"])
def test_every_family_warns_as_transformers_logs(model_type, block):
    logged = _check(with_block(family_config(model_type), block))
    # a class that validates does warn about every one of these blocks
    assert bool(logged) == serving.validates_rope(family_config(model_type))


def test_published_llama4_scout_config_gives_no_warning():
    config = json.loads((SHARED / "llama4-scout-17b-16e-instruct.json").read_text())
    assert config["text_config"]["rope_scaling"]["low_freq_factor"] == \
        config["text_config"]["rope_scaling"]["high_freq_factor"] == 1.0
    assert transformers_log(config) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", scaling.RopeConfigWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*leaves out.*")
        report = model_inspect.inspect_config(config)
    assert report["transformers_warnings"] == []
    assert not [w for w in report["warnings"] if "freq_factor" in w]
    # the same block under a class that validates: warned, by both
    llama = with_block(family_config("llama"), config["text_config"]["rope_scaling"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = model_inspect.inspect_config(llama)
    assert report["transformers_warnings"] == transformers_log(llama) != []
    assert [w for w in report["warnings"] if "freq_factor" in w]


# --- both versions, on a generated population --------------------------------
# transformers_warnings follows the installed transformers (4.57.6 here) and
# reproduces 5.24.0 on request. The population (tests/helpers/rope_population.py) and
# the table's configs are compared with what 4.57.6 logs in this process and
# with what 5.24.0 logged (tests/data/transformers_5_rope_log.json, written by
# scripts/capture_transformers_warnings.py; re-logged live where an
# interpreter with 5.24.0 is at hand).

CONFIGS = rope_population.all_configs()


def canonical(messages: list[str]) -> list[str]:
    """The messages with the set that ends a message (missing or unknown keys,
    printed in hash order) sorted."""
    def sort_set(match):
        return "{" + ", ".join(sorted(x.strip() for x in match.group(1).split(","))) + "}"
    return [re.sub(r"\{([^{}]*)\}$", sort_set, m) for m in messages]


def _stored_5() -> dict:
    return json.loads(capture.CAPTURE.read_text())


def test_version_follows_the_installed_transformers():
    installed = metadata.version("transformers")
    assert installed.startswith("4.57")
    assert serving.mimicked_transformers_version() == "4.57.6"
    assert serving.mimicked_transformers_version("5.3.0") == "5.24.0"
    config = model_inspect.model_config("qwen2.5-7b-instruct-yarn")
    assert config["max_position_embeddings"] == 32768
    # the model card's block: 4.57 warns (implicit factor 1.0), 5.x does not
    assert serving.transformers_warnings(config) == \
        serving.transformers_warnings(config, "4.57.6") != []
    assert serving.transformers_warnings(config, "5.24.0") == []
    for bad in ("3.0.0", "six", 5):
        with pytest.raises(ValueError, match="version"):
            serving.transformers_warnings(config, bad)


def test_population_is_varied():
    # every rope type, both key names, and each version's distinctive messages
    stored = _stored_5()["logs"][:rope_population.SIZE]
    population = CONFIGS[:rope_population.SIZE]
    blocks = [c["rope_scaling"] for c in population]
    assert {b.get("rope_type", b.get("type")) for b in blocks} == set(rope_population.ROPE_TYPES)
    assert sum("type" in b for b in blocks) >= 30
    logged_4 = [m for c in population for m in transformers_rope_log.rope_log(c)]
    logged_5 = [m for log in stored for m in log]
    for messages, needles in (
            (logged_4, ["= 1.0). Using the explicit", "must be a float >= 1, got 4",
                        "is unset. We will **assume**", "KeyError", "must have length"]),
            (logged_5, ["please correct the 'original_max_position_embeddings'",
                        "This model config has set", "KeyError", "must have length",
                        "must be an integer"])):
        for needle in needles:
            assert any(needle in m for m in messages), needle


@pytest.mark.parametrize("start", range(0, len(CONFIGS), 50))
def test_4_57_logs_what_the_function_says(start):
    for config in CONFIGS[start:start + 50]:
        logged = transformers_rope_log.rope_log(config)
        if logged and logged[0].startswith("ValueError: Unrecognized model"):
            continue
        assert canonical(serving.transformers_warnings(config, "4.57.6")) == \
            canonical(logged), json.dumps(config)


def test_5_24_logged_what_the_function_says():
    stored = _stored_5()
    assert stored["version"] == "5.24.0"
    assert stored["configs_sha256"] == capture.configs_hash(CONFIGS), \
        "the configs changed: rerun scripts/capture_transformers_warnings.py"
    checked = 0
    for config, logged in zip(CONFIGS, stored["logs"], strict=True):
        if logged and logged[0].startswith("ValueError: Unrecognized model"):
            assert config["model_type"] == "kimi_k2"  # no 5.24 class: remote code
            assert serving.transformers_warnings(config, "5.24.0") == []
            continue
        assert canonical(serving.transformers_warnings(config, "5.24.0")) == \
            canonical(logged), json.dumps(config)
        checked += 1
    assert checked >= 400


@pytest.mark.skipif(not PYTHON5.exists(), reason="no interpreter with transformers 5.24")
def test_stored_5_24_log_is_what_5_24_logs_now():
    live = capture.run_worker(str(PYTHON5), CONFIGS)
    stored = _stored_5()
    assert live["version"] == stored["version"]
    assert [canonical(x) for x in live["logs"]] == [canonical(x) for x in stored["logs"]]


def test_classes_that_keep_the_type_key_are_read_from_4_57():
    found = set()
    for model_type in serving.VALIDATING_MODEL_TYPES:
        config = {"model_type": model_type, **BASE,
                  "rope_scaling": {"type": "linear", "factor": 2.0}}
        if model_type == "granitemoehybrid":
            config["position_embedding_type"] = "rope"
        logged = transformers_rope_log.rope_log(config)
        if logged and "{'rope_type'}" in logged[-1]:
            found.add(model_type)
    assert found == set(serving.KEEPS_TYPE_KEY)


@pytest.mark.parametrize("block", [{"type": "mrope", "mrope_section": [16, 24, 24]},
                                   {"rope_type": "mrope", "mrope_section": [16, 24, 24]},
                                   {"type": "default", "mrope_section": [16, 24, 24]}])
def test_qwen_vl_mrope_blocks_warn_as_each_version_logs(block):
    """Qwen2-VL's and Qwen2.5-VL's classes read a ``type: mrope`` block as
    default RoPE before validating it (4.57.6 only from ``type``; 5.24.0 from
    either key), so the published block logs nothing; a ``rope_type: mrope``
    block does log in 4.57.6."""
    config = with_block(model_inspect.model_config("qwen2.5-vl-7b-instruct"), block)
    assert serving.transformers_warnings(config, "4.57.6") == transformers_log(config)
    if PYTHON5.exists():
        live = capture.run_worker(str(PYTHON5), [config])["logs"][0]
        assert canonical(serving.transformers_warnings(config, "5.24.0")) == \
            canonical(live)
