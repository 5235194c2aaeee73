"""Every M-RoPE model type the installed transformers ships, against the
inspector: which features rotate together (the pair layout), which position
row (temporal, height, width) each rotary pair follows and with which
frequency, observed by running the model file's own rotary module and apply
function on one-hot probes (``tests/helpers/mrope_probe.py``, which
``scripts/mrope_population.py`` runs under transformers 5.x), with
``mrope_interleaved`` true, false and absent.

The population is read from transformers, not listed here: every
``transformers.models.<type>.modeling_<type>`` whose source mentions
``mrope_section``. A type that a later transformers adds fails
:func:`test_the_population_is_every_mrope_module` until it is handled.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from helpers import mrope_probe  # noqa: E402

from posenc_lib.tools import inspector  # noqa: E402

MODULES = mrope_probe.mrope_modules()
#: Omni models keep the language model's fields in thinker_config.text_config,
#: which the inspector does not read: it must refuse them, not guess, and read
#: the text mapping once it is taken out.
NESTED = {m for m in MODULES if len(mrope_probe.SPECS.get(m, {}).get("nest", [])) > 1}
CASES = [(m, flag, "checkpoint") for m in MODULES for flag in mrope_probe.FLAGS] + [
    (m, None, variant) for m in MODULES for variant in ("absent", "reversed")]


def test_the_population_is_every_mrope_module():
    unknown = sorted(set(MODULES) - set(mrope_probe.SPECS))
    assert not unknown, (
        f"M-RoPE modules with no entry in tests/helpers/mrope_probe.py: {unknown}; "
        "add one, run its rotary module and teach the inspector its layout")
    assert len(MODULES) >= 8


@pytest.mark.parametrize("module,flag,variant", CASES,
                         ids=[f"{m}-{v}-{f}" for m, f, v in CASES])
def test_the_inspector_reports_what_the_model_code_does(module, flag, variant):
    config = mrope_probe.case_config(module, flag, variant)
    observed = mrope_probe.observe(module, config)
    if module in NESTED:
        with pytest.raises(ValueError, match="thinker_config"):
            inspector.inspect_config(config)
        config = mrope_probe.case_config(module, flag, variant, "text_only")
    reading = mrope_probe.inspector_reading(config)
    names = list(mrope_probe.SPECS[module].get("axes") or mrope_probe.THW)
    verdict = mrope_probe.judge(observed, reading, names)
    assert verdict is None, f"{module} ({variant}, mrope_interleaved {flag}): {verdict}"
    if variant == "checkpoint":  # the sections every checkpoint ships are read
        assert "error" not in observed and not reading.get("refused"), (observed, reading)


def test_an_unknown_mrope_type_is_refused_not_read_from_its_flag():
    config = mrope_probe.case_config("qwen3_vl", True)
    config["model_type"] = "qwen9_vl"
    config["text_config"]["model_type"] = "qwen9_vl_text"
    report = inspector.inspect_config(config, target_length=16)
    assert report["mrope"] is None and "qwen9_vl" in report["mrope_refused"]
    assert report["mrope_refused"] in report["warnings"]
