"""The inspector's --baseline and --python flags, through main()."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from posenc_lib import scaling
from posenc_lib.tools import inspector

EXTENDED = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "num_hidden_layers": 32, "rope_theta": 500000.0,
            "max_position_embeddings": 524288,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                             "original_max_position_embeddings": 131072}}


def test_baseline_flag_against_the_shipped_llama3_frequencies(tmp_path, capsys):
    """Llama 3.1 8B taken to 512k with YaRN x4: the pairs faster than the
    shipped llama3 bands, counted here from transformers' own functions."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS, PretrainedConfig

    path = tmp_path / "config.json"
    path.write_text(json.dumps(EXTENDED))
    assert inspector.main([str(path), "--json", "--baseline", "llama-3.1-8b"]) == 0
    got = json.loads(capsys.readouterr().out)["baseline"]
    shipped = PretrainedConfig(**inspector.model_config("llama-3.1-8b"))
    extended = PretrainedConfig(**EXTENDED)
    trained, _ = ROPE_INIT_FUNCTIONS["llama3"](shipped, "cpu")
    now, _ = ROPE_INIT_FUNCTIONS["yarn"](extended, "cpu")
    faster = (now.double() > trained.double() * (1 + 1e-6)).sum().item()
    assert got["faster_count"] == faster == 35
    ratio = (now.double() / trained.double()).max().item()
    assert abs(got["largest_speed_up"] - ratio) < 1e-5 * ratio
    inv, _ = scaling.rope_from_config(EXTENDED, dtype=torch.float64)
    assert inv.numel() == got["pairs"]


def test_baseline_and_python_errors_are_one_line(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(EXTENDED))
    assert inspector.main([str(path), "--baseline", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --baseline:") and err.count("\n") == 1
    with pytest.raises(SystemExit) as stop:
        inspector.main([str(path), "--python", sys.executable])
    assert stop.value.code == 2
    assert "give --crosscheck too" in capsys.readouterr().err
    assert inspector.main([str(path), "--crosscheck", "--python",
                         str(tmp_path / "no-python")]) == 2
    err = capsys.readouterr().err
    assert "crosscheck error" in err and "Traceback" not in err


def test_a_key_the_model_ignores_is_one_report_row(tmp_path, capsys):
    """A layer_types key on a Llama config (its class keeps the key, its masks
    never read it): the CLI's report says so once, as a warning row, and
    Python warnings stay silent (the layout is read three times per report)."""
    import warnings

    from posenc_lib import config_reader

    config = {**EXTENDED, "num_hidden_layers": 4, "sliding_window": 16,
              "layer_types": ["sliding_attention", "full_attention"] * 2}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert inspector.main([str(path), "--engine", "vllm"]) == 0
    out = capsys.readouterr().out
    ignored = [w for w in caught if issubclass(w.category, config_reader.IgnoredKeyWarning)]
    assert not ignored, [str(w.message)[:80] for w in ignored]
    rows = [line for line in out.splitlines() if "layer_types ignored" in line]
    assert len(rows) == 1, rows
    assert rows[0].lstrip().startswith("warning"), rows[0]
