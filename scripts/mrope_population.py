"""Every M-RoPE module of the running transformers against the inspector.

For each ``transformers.models`` module whose modeling file mentions
``mrope_section`` (the population is read from transformers), the language
model's own rotary module and apply function are run on one-hot probes
(``tests/helpers/mrope_probe.py``) for a config per case: the checkpoints'
sections, none (the code's default) and the checkpoints' reversed, each with
``mrope_interleaved`` true, false and absent, in the 4.x (``rope_scaling``) and
5.x (``rope_parameters``) forms, and for an Omni model the language model's
own mapping (``thinker_config.text_config``) as well. What the code did (the pair layout, the
position row of each pair and its angle at position 1) and what the inspector
says of the same config are stored; ``tests/test_mrope_results.py`` judges the
stored observations against the current inspector again. Also stored: where
``posenc_lib.multidim.mrope_position_ids`` and this transformers'
``get_rope_index`` agree (``mrope_probe.position_ids_report``).

Run with either interpreter: ``python scripts/mrope_population.py --out
results/mrope-5.json`` (``make mrope-population`` runs transformers 5.x).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import transformers  # noqa: E402

from tests.helpers import mrope_probe  # noqa: E402


def sweep() -> dict:
    modules = mrope_probe.mrope_modules()
    cases = []
    for module in modules:
        if module not in mrope_probe.SPECS:
            cases.append({"module": module, "unprobed": "no entry in mrope_probe.SPECS"})
            continue
        names = list(mrope_probe.SPECS[module].get("axes") or mrope_probe.THW)
        nested = len(mrope_probe.SPECS[module].get("nest", [])) > 1
        for form in ("rope_scaling", "rope_parameters") + (("text_only",) if nested else ()):
            for variant in mrope_probe.VARIANTS:
                if variant != "checkpoint" and not mrope_probe.SPECS[module]["sections"]:
                    continue
                for flag in mrope_probe.FLAGS:
                    config = mrope_probe.case_config(module, flag, variant, form)
                    observed = mrope_probe.observe(module, mrope_probe.case_config(
                        module, flag, variant,
                        "rope_scaling" if form == "text_only" else form))
                    reading = mrope_probe.inspector_reading(config)
                    cases.append({
                        "module": module, "form": form, "variant": variant,
                        "flag": flag, "axis_names": names, "config": config,
                        "observed": observed, "inspector": reading,
                        "verdict": mrope_probe.judge(observed, reading, names)})
                    reading.pop("inv_freq", None)  # base ** (-2i/d), from the config
    return {"transformers": transformers.__version__, "torch": torch.__version__,
            "python": platform.python_version(), "modules": modules, "cases": cases,
            "position_ids": mrope_probe.position_ids_report()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    data = sweep()
    data["seconds"] = round(time.perf_counter() - start, 1)
    probed = [c for c in data["cases"] if "unprobed" not in c]
    agree = sum(c["verdict"] is None for c in probed)
    data["agree"] = agree
    args.out.write_text(json.dumps(data, sort_keys=True) + "\n")
    print(f"transformers {data['transformers']}: {len(data['modules'])} M-RoPE modules, "
          f"{agree} of {len(probed)} cases agree ({data['seconds']} s)")
    for case in data["cases"]:
        if "unprobed" in case:
            print(f"  {case['module']}: not probed ({case['unprobed']})")
        elif case["verdict"]:
            print(f"  {case['module']} {case['form']} {case['variant']} "
                  f"flag={case['flag']}: {case['verdict'][:160]}")
    return 0 if agree == len(probed) == len(data["cases"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
