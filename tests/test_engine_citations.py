"""The engines recipe's source citations, checked against the engines' own
release files by scripts/engines/check_citations.py (vLLM 0.33.0's and SGLang
0.5.23's wheels, llama.cpp 0c1e57098 as llama-cpp-python 0.3.36 vendors it).
The run needs those downloads, so its result is stored; these tests check that
the stored run is of today's transcriptions and citations, and passed."""

import importlib.util
import json
from pathlib import Path

from posenc_lib.tools.engines import SGLANG_PAIRS, VLLM_PAIRS

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "results" / "engine_citations.json"
SCRIPT = ROOT / "scripts" / "engines" / "check_citations.py"
RERUN = "rerun scripts/engines/check_citations.py (its docstring says how)"


def _script():
    spec = importlib.util.spec_from_file_location("check_citations", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stored():
    return json.loads(RESULT.read_text())


def test_the_stored_run_read_the_vendored_releases():
    archives = _stored()["archives"]
    for engine in ("vllm", "sglang"):
        vendor = (ROOT / "posenc_lib" / "_vendor" / engine / "vendor.txt").read_text()
        assert f"wheel sha256: {archives[engine]['sha256']}" in vendor, (
            f"{engine}: the stored run read a wheel of sha256 "
            f"{archives[engine]['sha256']}, not the one vendor.txt names; {RERUN}"
        )
    assert archives["llama.cpp"]["file"] == "llama_cpp_python-0.3.36.tar.gz", (
        f"llama.cpp: the stored run read {archives['llama.cpp']['file']}, "
        "expected llama-cpp-python 0.3.36's source distribution (llama.cpp 0c1e57098)"
    )


def test_every_pair_transcription_was_checked_as_it_is_now_and_passed():
    stored = {(r["engine"], r["model_type"]): r for r in _stored()["pairs"]}
    for engine, table in (("vllm", VLLM_PAIRS), ("sglang", SGLANG_PAIRS)):
        for model_type, (value, path, line, code) in table.items():
            row = stored.get((engine, model_type))
            assert row is not None, f"{engine} {model_type}: not in {RESULT.name}; {RERUN}"
            now = {"value": repr(value), "path": path, "line": line, "code": code}
            then = {k: row[k] for k in now}
            assert then == now, (
                f"{engine} {model_type}: the transcription is {now}, the stored run "
                f"checked {then}; {RERUN}"
            )
            assert row["passed"], (
                f"{engine} {model_type}: the release's {path} line {line} reads "
                f"{row.get('line_text')!r} (is_neox_style there: "
                f"{row.get('neox_in_source')!r}), the transcription says {value!r}"
            )
    assert len(stored) == len(VLLM_PAIRS) + len(SGLANG_PAIRS), (
        f"{RESULT.name} holds {len(stored)} pair entries, the tables "
        f"{len(VLLM_PAIRS) + len(SGLANG_PAIRS)}; {RERUN}"
    )


def test_every_cited_span_was_checked_and_holds_its_text():
    rows = _stored()["citations"]
    keys = ("engine", "path", "first", "last", "needle")
    assert [tuple(r[k] for k in keys) for r in rows] == list(_script().CITATIONS), (
        f"the citations stored in {RESULT.name} are not the script's list; {RERUN}"
    )
    failed = [r for r in rows if not r["passed"]]
    assert not failed, f"cited spans without their text in the release: {failed}"


def test_no_table_model_sets_a_key_a_checked_default_depends_on():
    models = json.loads((ROOT / "posenc_lib" / "data" / "models.json").read_text())
    keys = {r["neox_in_source"].split(" unless the config sets ")[1]
            for r in _stored()["pairs"]
            if " unless the config sets " in (r.get("neox_in_source") or "")}
    for m in models["models"]:
        for key in keys:
            assert key not in m["config"], (
                f"{m['name']} sets {key}: the engine's is_neox_style for it is the "
                "config's value, not the default the transcription was checked against"
            )
