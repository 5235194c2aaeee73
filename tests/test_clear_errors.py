"""Configs the stored sweeps hold that once crashed the library (a KeyError
or TypeError from deep inside) get a ValueError that says what is wrong, or a
report row. Found by running kv_cache_bytes under each engine and the
inspector under vLLM on every distinct config in results/*.json (4,611)."""

import json
import warnings
from pathlib import Path

import pytest

from posenc_lib import serving
from posenc_lib.tools import inspector

ROOT = Path(__file__).resolve().parents[1]


def _form(path, model_type, form):
    stored = json.loads((ROOT / "results" / path).read_text())
    if "types" in stored:
        return stored["types"][model_type][form]["raw"]
    return next(x["raw"] for a in stored["architectures"].values()
                for f, x in a.get("forms", {}).items()
                if f == form and x["raw"].get("model_type") == model_type)


@pytest.mark.parametrize("model_type", ["inkling_text", "inkling2_text"])
def test_inkling_with_attention_layer_names(model_type):
    """Inkling's layers are 'hybrid' or 'hybrid_sliding' (each holds
    convolution states); a layer_types key of attention names makes
    transformers 5.24's model fail (results/window-keys-5.json)."""
    raw = _form("window-keys-5.json", model_type, "layer_types, window")
    stored = json.loads((ROOT / "results" / "window-keys-5.json").read_text())
    assert "refused" in stored["types"][model_type]["layer_types, window"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="'hybrid' or 'hybrid_sliding'"):
            serving.kv_cache_bytes(raw, engine="transformers", length=64)


def test_deepseek_v4_with_a_full_attention_layer():
    """A deepseek_v4 layer_types entry DeepseekV4Config's validator refuses:
    the inspector reports it instead of failing on a KeyError."""
    raw = _form("vllm-layers.json", "deepseek_v4", "layer_types, window")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            report = inspector.inspect_config(raw, engine="vllm", target_length=64)
        except ValueError as error:
            assert "DeepSeek-V4's layers are" in str(error), error
        else:
            assert report is not None


def _stored_configs():
    """Every distinct config dict ("raw") in results/*.json."""
    found, seen = [], set()

    def walk(node, source):
        if isinstance(node, dict):
            raw = node.get("raw")
            if isinstance(raw, dict):
                key = json.dumps(raw, sort_keys=True, default=str)
                if key not in seen:
                    seen.add(key)
                    found.append((source, raw))
            for value in node.values():
                walk(value, source)
        elif isinstance(node, list):
            for value in node:
                walk(value, source)

    for path in sorted((ROOT / "results").glob("*.json")):
        walk(json.loads(path.read_text()), path.name)
    return found


@pytest.mark.slow
def test_no_stored_config_crashes_the_library():
    """kv_cache_bytes under transformers 4.57, 5.24 and vLLM, and the
    inspector under vLLM, on every config the sweeps stored (about 5,000):
    a ValueError that names the problem, or an answer; never another
    exception (about 10 minutes on one core)."""
    crashed = []
    configs = _stored_configs()
    assert len(configs) >= 4000, len(configs)
    calls = [
        ("transformers", lambda r: serving.kv_cache_bytes(r, length=64)),
        ("transformers 5.24", lambda r: serving.kv_cache_bytes(
            r, length=64, transformers_version="5.24.0")),
        ("vllm", lambda r: serving.kv_cache_bytes(r, engine="vllm", length=64)),
        ("inspect vllm", lambda r: inspector.inspect_config(
            r, engine="vllm", target_length=64)),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for source, raw in configs:
            for name, call in calls:
                try:
                    call(raw)
                except ValueError:
                    pass
                except Exception as error:  # noqa: BLE001 -- what this test looks for
                    crashed.append((source, raw.get("model_type"), name,
                                    f"{type(error).__name__}: {str(error)[:80]}"))
    assert not crashed, f"{len(crashed)} crashes: {crashed[:5]}"
