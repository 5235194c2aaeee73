"""posenc_lib's claims about vLLM's rotary embedding against the rotary
module vLLM 0.33.0's own model classes build, on every generated RoPE config
form.

``posenc_lib.tools.engines`` says what vLLM does with a config's RoPE by
transcribing the arguments each vLLM model file passes to ``get_rope``
(:func:`~posenc_lib.tools.engines.vllm_get_rope_args`) and running vLLM's
vendored rotary code on them. ``results/vllm-rope-forms.json`` (``make
vllm-layers``, ``scripts/engines/vllm_rope_forms.py``) holds, for each form of
``results/config_forms-5.json`` whose model type vLLM serves, what vLLM's own
model class built on the CPU in float32: its first rotary module (class, pair
layout, sizes, base, and its cos/sin rows at positions 1 and ``far``), no
rotary module (the Transformers backend runs transformers' code), or the
error vLLM raised and where. Nothing here runs vLLM's model classes; these
tests compare the transcription with the stored run.
"""

import json
import warnings
from pathlib import Path

import pytest
import torch

from posenc_lib.tools import engines

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "vllm-rope-forms.json"
VENDOR = ROOT / "posenc_lib" / "_vendor" / "vllm" / "vendor.txt"
#: float32's unit roundoff.
U = 2.0 ** -24


def _bound(ours, n_rows: int, far: int) -> torch.Tensor:
    """Per coefficient of the rows at positions 1 and ``far``: how far two
    float32 cos/sin kernels may take the same float32 angle ``m theta``
    apart. vLLM's module ran one CPU's kernels when the run was stored, the
    library runs this machine's (``ATEN_CPU_CAPABILITY`` picks scalar libm or
    vectorized SLEEF), and a vectorized kernel's range reduction may cost a
    step of the angle's float32 spacing, ``2u |m theta|``, beside a few steps
    of the result, ``8u``; the factor on cos and sin (YaRN's mscale) scales
    both."""
    inv = ours["inv_freq"].double()
    factor = abs(float(ours["factor"]))
    rows = []
    for m in (1, far)[:n_rows]:
        b = factor * (2 * U * (m * inv).abs() + 8 * U)
        rows.append(torch.cat((b, b)))
    return torch.stack(rows)


def _stored():
    return json.loads(RESULTS.read_text())


def _ours(raw, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engines.vllm_rope(raw, **kwargs)


def _args(raw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engines.vllm_get_rope_args(raw)


def _built():
    return [f for f in _stored()["forms"] if "refused" not in f]


def _claims(raw) -> bool:
    """Whether the library says anything about vLLM's RoPE for ``raw`` (its
    table holds the model type)."""
    try:
        engines.vllm_pairs(raw)
    except ValueError:
        return False
    return True


#: Forms vLLM builds that the library refuses to read, with the words of its
#: error: Phi-3 with original_max_position_embeddings both at the top level
#: and in the rope block, with different values (vLLM's LongRoPE reads the
#: block; the library refuses the ambiguity for every engine).
LIBRARY_REFUSES = {("Phi3ForCausalLM", "scaled:longrope"): "config is ambiguous"}
#: The causal-LM types vLLM serves whose RoPE the library's engine table does
#: not describe (no claim: the inspector prints no vLLM RoPE rows for them).
NOT_IN_THE_TABLE = frozenset({
    "afmoe", "apertus", "arcee", "axk1", "beam", "cohere", "cohere2", "cohere2_moe",
    "cwm", "dbrx", "deepseek_v2", "deepseek_v4", "ernie4_5_moe", "exaone4",
    "exaone_moe", "falcon", "falcon_h1", "flex_olmo", "gemma2", "gemma3_text",
    "gemma3n_text", "gemma4_text", "glm", "glm4", "glm4_moe", "glm4_moe_lite",
    "glm_moe_dsa", "gptj", "granite", "granite_swa", "granitemoe", "granitemoe_swa",
    "granitemoeshared", "hrm_text", "hunyuan_v1_dense", "hunyuan_v1_moe", "hy_v3",
    "hy_v4", "hyperclovax", "jais2", "kolibri1", "laguna", "lfm2_moe", "llama4_text",
    "longcat_flash", "mellum", "mimo_v2_flash", "minicpm3", "minimax_m2", "ministral3",
    "mixtral", "nemotron", "olmo", "olmo2", "olmo_hybrid", "olmoe", "phi", "qwen2_moe",
    "qwen3_5", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_5_text", "qwen4_exp",
    "qwen4_exp_text", "seed_oss", "stablelm", "starcoder2", "vaultgemma"})


def test_the_stored_run_is_vllms_own_release():
    stored = _stored()
    assert stored["vllm"].startswith("0.33.0"), stored["vllm"]
    assert stored["wheel_sha256"] in VENDOR.read_text()
    assert stored["transformers"] == "5.20.2", stored["transformers"]
    forms = json.loads((ROOT / "results" / "config_forms-5.json").read_text())["entries"]
    for f in stored["forms"]:  # each stored form is the generated one, unedited
        raw = {k: v for k, v in f["raw"].items() if k != "architectures"}
        assert raw == forms[f["index"]]["raw"], f["index"]
    assert len(_built()) >= 550, len(_built())


def _compared():
    return [f for f in _built() if _claims(f["raw"])
            and (f["architecture"], f["kind"]) not in LIBRARY_REFUSES]


def test_what_the_library_makes_no_claim_about():
    """The types the library's vLLM table lacks are exactly those listed:
    a type that joins the table is compared below from then on."""
    seen = {f["raw"]["model_type"] for f in _stored()["forms"] if not _claims(f["raw"])}
    assert seen == NOT_IN_THE_TABLE, sorted(seen ^ NOT_IN_THE_TABLE)


def test_what_the_library_refuses_raises():
    forms = {(f["architecture"], f["kind"]): f for f in _built()}
    for key, words in LIBRARY_REFUSES.items():
        with pytest.raises(ValueError, match=words):
            _args(forms[key]["raw"])


def test_who_runs_the_rotary_code():
    """A rotary module of vLLM's own where the library runs vLLM's rotary
    code, none (vLLM's Transformers backend) where the library says vLLM runs
    transformers' code."""
    wrong = []
    for f in _compared():
        ours = _args(f["raw"]) is not None
        theirs = f["rotary"] is not None
        if ours != theirs:
            wrong.append((f["architecture"], f["kind"], ours, f["rotary"]))
    assert len(_compared()) >= 100, len(_compared())  # not vacuous
    assert not wrong, f"{len(wrong)} differ: {wrong[:5]}"


def test_the_module_vllm_builds():
    """The class get_rope builds, its pair layout (where the class has one:
    LongRoPE's is NEOX only), rotary size, the length it is built for and its
    base, as vLLM's model class built them. (The head size the library hands
    get_rope is the rotary part, which builds the same cache.)"""
    wrong, n = [], 0
    for f in _compared():
        if f["rotary"] is None:
            continue
        n += 1
        args, ours = _args(f["raw"]), _ours(f["raw"])
        module = ours["module"]
        mine = {"rotary": ours["class"], "is_neox_style": args["is_neox_style"],
                "rotary_dim": module.rotary_dim,
                "max_position_embeddings": module.max_position_embeddings,
                "base": module.base}
        theirs = {k: f.get(k) for k in mine}
        if theirs["is_neox_style"] is None:  # Phi3LongRoPEScaledRotaryEmbedding
            theirs["is_neox_style"] = mine["is_neox_style"] = True
        if mine != theirs:
            wrong.append((f["architecture"], f["kind"], mine, theirs))
    assert n >= 80, n  # not vacuous
    assert not wrong, f"{len(wrong)} of {n} differ: {wrong[:3]}"


def test_the_cos_and_sin_vllm_reads():
    """The cos/sin rows at positions 1 and far, within what two float32
    kernels make of the same angle (:func:`_bound`)."""
    far = _stored()["far"]
    wrong, n = [], 0
    for f in _compared():
        if not f.get("rows"):
            continue
        n += 1
        ours = _ours(f["raw"], positions=[far])
        theirs = torch.tensor(f["rows"], dtype=torch.float64)
        mine = ours["rows"].double()[1:1 + len(theirs)]  # rows at [0, 1, far]
        if mine.shape != theirs.shape:
            wrong.append((f["architecture"], f["kind"], tuple(mine.shape)))
            continue
        excess = ((mine - theirs).abs() / _bound(ours, len(theirs), far)).max().item()
        if excess > 1:
            wrong.append((f["architecture"], f["kind"], excess))
    assert n >= 80, n  # not vacuous
    assert not wrong, f"{len(wrong)} of {n} differ: {wrong[:5]}"


def test_configs_vllms_rotary_code_fails_on_are_said_to_fail():
    """Where vLLM's model class stopped inside its rotary code, the library
    says vLLM fails (an EngineFailure naming the place); nowhere else."""
    missed, said = [], []
    for f in _stored()["forms"]:
        if not _claims(f["raw"]):
            continue
        stopped = "rotary_embedding" in f.get("raised_in", "")
        try:
            _ours(f["raw"])
            fails = False
        except engines.EngineFailure:
            fails = True
        except ValueError:
            fails = None  # the library refuses the config for another reason
        if stopped and not fails:
            missed.append((f["architecture"], f["kind"], f["refused"][:80]))
        if fails and not stopped:
            said.append((f["architecture"], f["kind"], f.get("refused", "built")[:80]))
    assert not missed, missed
    assert not said, said


def test_a_planted_error_is_caught(monkeypatch):
    """The comparison can fail: a form's pair layout flipped in the library's
    table (what a misread model file gives)."""
    f = next(f for f in _built() if f["rotary"] == "RotaryEmbedding"
             and f["raw"].get("model_type") in engines.VLLM_PAIRS)
    model_type = f["raw"]["model_type"]
    args = _args(f["raw"])
    assert args["is_neox_style"] == f["is_neox_style"]
    entry = engines.VLLM_PAIRS[model_type]
    monkeypatch.setitem(engines.VLLM_PAIRS, model_type, (not entry[0], *entry[1:]))
    assert _args(f["raw"])["is_neox_style"] != f["is_neox_style"]


@pytest.mark.parametrize("arch, kind", [("Ernie4_5ForCausalLM", "scaled:linear"),
                                        ("DeepseekV3ForCausalLM", "scaled:dynamic")])
def test_the_report_says_where_vllm_fails(arch, kind):
    """The inspector's engine row says vLLM fails where its rotary code does
    (ERNIE 4.5 with an integer linear factor; DeepSeek-V3's scaling without
    original_max_position_embeddings), as the stored run saw."""
    from posenc_lib.tools import inspector

    f = next(f for f in _stored()["forms"] if (f["architecture"], f["kind"]) == (arch, kind))
    assert "rotary_embedding" in f["raised_in"], f.get("raised_in")
    report = inspector.format_report(inspector.inspect_config(
        f["raw"], engine="vllm", target_length=64))
    line = next(s for s in report.splitlines() if s.strip().startswith("engine RoPE"))
    assert "rotary code fails" in line, line


@pytest.mark.parametrize("arch, kind", [("Qwen3ForCausalLM", "partial:rotary_pct"),
                                        ("GptOssForCausalLM",
                                         "partial:partial_rotary_factor")])
def test_the_report_says_how_much_of_a_head_vllm_rotates(arch, kind):
    """Where vLLM rotates another share of each head than transformers (it
    reads rotary_pct for every model; gpt-oss's own RoPE dict has no partial
    factor), the engine row gives vLLM's rotary size as its class built it,
    and the crosscheck agrees with the report instead of failing on shapes."""
    from posenc_lib.tools import inspector

    f = next(f for f in _built() if (f["architecture"], f["kind"]) == (arch, kind))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = inspector.inspect_config(f["raw"], engine="vllm", target_length=64)
        ok, text = inspector.crosscheck_vllm(f["raw"], report)
    line = next(s for s in inspector.format_report(report).splitlines()
                if s.strip().startswith("engine freqs"))
    assert f"rotates {f['rotary_dim']} features of each head" in line, line
    assert ok and "as reported" in text, text
