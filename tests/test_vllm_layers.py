"""posenc_lib.serving's ``engine="vllm"`` against vLLM 0.33.0's own model
classes, on every causal-LM type vLLM serves and transformers registers.

``results/vllm-layers.json`` (``make vllm-layers``,
``scripts/engines/vllm_layers.py``) holds, for each architecture and each
window form of its tiny config (the forms of ``scripts/window_keys.py``),
what vLLM's code built: the KV-cache spec of every layer the model runner
would size (``FullAttentionSpec``, ``SlidingWindowSpec`` with its window,
``ChunkedLocalAttentionSpec``, ``MLAAttentionSpec``, ``MambaSpec``), its
bytes per block and ``max_memory_usage_bytes`` at the engine's
``max_model_len``, or the error vLLM raised. Nothing here runs vLLM; these
tests compare the library with the stored run, exactly: layer kinds and
windows in order, bytes per token, and bytes reserved at ``max_model_len``
(integers, no tolerance).
"""

import json
import re
from pathlib import Path

import pytest

from posenc_lib import serving

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "vllm-layers.json"
VENDOR = ROOT / "posenc_lib" / "_vendor" / "vllm" / "vendor.txt"

#: vLLM's attention specs, as the library names the layer's attention.
ATTENTION_SPECS = {"FullAttentionSpec": "full", "MLAAttentionSpec": "full",
                   "SlidingWindowSpec": "sliding",
                   "ChunkedLocalAttentionSpec": "chunked"}

#: Errors that say this CPU build of vLLM's Python files cannot construct the
#: model (vLLM's CPU platform without its compiled kernels or CUDA; a tiny
#: config lacking a field that a published config.json carries): the
#: library's claims for these forms are not compared here.
NOT_BUILT_HERE = (
    "Sparse Attention is not supported on CPU",
    "sparse attention was requested, but no valid sparse MLA backend",
    "is_act_and_mul=False is supported only for CUDA",
    "Model Runner V1 does not support",  # the CPU platform's model runner
    "object has no attribute",  # a field only published configs carry
    "first_k_dense_replace not exist",
    "module 'triton' has no attribute",  # Triton without a GPU backend
    "--mamba-block-size can only be set",  # the CPU platform's Mamba block size
    "Failed to load the processor",  # a processor of the model's own code
    "sconv SWA cache supports bfloat16 only",  # the run is in float32
    # fields the tiny config leaves at a class default a published config sets:
    "unsupported output_gate_type=None",  # Qwen4-Exp's gate activation
    "object of type 'NoneType' has no len()",  # Granite 4 Vision's deepstack_layer_map
    "num_heads (4) is not divisible by num_kv_heads (16)",  # PaliGemma's KV heads
    "has no attribute image_token",  # Emu3: the tokenizer, which is not written
)
#: Architectures this sweep does not build, with the message each stored and
#: why: one architecture each, where the message alone does not say.
ARCH_NOT_BUILT = {
    "Ernie4_5_VLMoeForConditionalGeneration": (
        "moe_intermediate_size", "the tiny config's moe_intermediate_size is one "
        "integer; the class wants one per modality"),
    "CohereCompassForConditionalGeneration": (
        "AssertionError: ", "vLLM's CohereCompassForCausalLM asserts "
        "tie_word_embeddings, which the tiny config leaves false"),
}
#: Errors that say the config itself is refused: by vLLM (its Qwen2 model's
#: assertion) or by transformers 5.20.2's config class (a validator, a
#: read-only property), before any model exists.
CONFIG_REFUSED = {
    "Sliding window for some but all layers is not supported": "vllm",
    "has no attribute 'max_window_layers'": "vllm",  # the same check in Qwen3-VL
    "StrictDataclassClassValidationError": "transformers",
    "has no setter": "transformers",
    "mutually exclusive `sliding_window` and `attention_chunk_size`": "transformers",
    "KeyError: 'sliding_attention'": "vllm",
    "Invalid layer_type": "vllm",
}


#: Forms vLLM builds that the library refuses to size (form None: every form
#: of the architecture), with the error's words and why.
LIBRARY_REFUSES = {
    ("Zamba2ForCausalLM", "layer_types, window"): (
        "zamba2's layers",
        "a layer_types key of attention names on Zamba2 (transformers 5.x maps it "
        "onto layers_block_type); vLLM builds two attention layers that no entry "
        "names, so the library raises rather than guess"),
    ("DeepseekV4ForCausalLM", None): (
        "DeepSeek-V4's cache in up to five caches",
        "vLLM's DeepSeek-V4 keeps per layer a sliding fp8 latent cache, the "
        "compressed latents, the compressor's state and the indexer's keys and "
        "state, in blocks of five sizes: not modelled, so refused"),
    ("Qwen2_5OmniForConditionalGeneration", None): (
        r"thinker_config\['text_config'\]",
        "the language model sits in thinker_config.text_config, which the "
        "library does not look into; it names the key to pass instead"),
}


def _refused_by_library(arch, form) -> bool:
    return (arch, form) in LIBRARY_REFUSES or (arch, None) in LIBRARY_REFUSES


def _stored():
    return json.loads(RESULTS.read_text())


def _forms():
    """(architecture, form, entry) for every stored form vLLM built."""
    for arch, entry in sorted(_stored()["architectures"].items()):
        for form, x in entry.get("forms", {}).items():
            if "refused" not in x and not _refused_by_library(arch, form):
                yield arch, form, x


def _theirs(x) -> list:
    """vLLM's attention layers in the runner's order: (kind, window)."""
    return [(ATTENTION_SPECS[s["spec"]],
             s.get("sliding_window") or s.get("attention_chunk_size"))
            for _, s in x["layers"] if s["spec"] in ATTENTION_SPECS]


def _text(raw) -> dict:
    """A config's language-model part (a composite's text config)."""
    return next((raw[k] for k in ("text_config", "text_model_config", "language_config")
                 if isinstance(raw.get(k), dict)), raw)


def _text_type(raw) -> str:
    """The language model's type as the library keys vLLM's rules."""
    return (_text(raw).get("model_type") or raw.get("model_type", "")).removesuffix(
        "_text")


def _ours(raw) -> list:
    """The library's layers that hold keys and values (vLLM's cache layers)."""
    kinds, _ = serving._layer_cache_kinds(raw, "vllm")
    shared = _text(raw).get("num_kv_shared_layers") or 0  # Gemma 3n: none of their own
    kinds = kinds[:len(kinds) - shared]
    return [("chunked" if k == "chunked_attention" else "sliding" if w else "full",
             w if k in ("sliding_attention", "chunked_attention") else None)
            for k, w in kinds if k not in serving.NO_KV]


def test_the_stored_run_is_vllms_own_release():
    stored = _stored()
    vendor = VENDOR.read_text()
    assert stored["vllm"].startswith("0.33.0"), stored["vllm"]
    assert stored["wheel_sha256"] in vendor, "the run is not of the vendored wheel"
    assert stored["transformers"] == "5.20.2", stored["transformers"]
    assert len(stored["architectures"]) >= 150, len(stored["architectures"])
    assert stored["torch"].startswith("2.14."), stored["torch"]  # vLLM's own major


def test_multimodal_classes_are_compared_as_published_configs_nest_them():
    """The multimodal classes vLLM serves are built from a composite config
    (the language model in text_config, as a published config.json has it)
    and compared like the causal LMs: among them Gemma 3, Llama 4, Mistral 3,
    Qwen2.5-VL and Qwen3-VL, the configs practitioners bring most."""
    built = {a for a, _, x in _forms() if isinstance(x["raw"].get("text_config"), dict)}
    assert len(built) >= 35, len(built)
    assert {"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
            "Mistral3ForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
            "Qwen3VLForConditionalGeneration"} <= built


def test_every_refusal_is_explained():
    """Each stored error is either this build's limit or the config's refusal;
    a new kind of error fails here until someone reads it."""
    unexplained = []
    for arch, entry in sorted(_stored()["architectures"].items()):
        known = ARCH_NOT_BUILT.get(arch, (None,))[0]
        if "error" in entry:
            assert known is not None and known in entry["error"], (arch, entry["error"])
            continue
        for form, x in entry["forms"].items():
            why = x.get("refused")
            if why and not any(k in why for k in (*NOT_BUILT_HERE, *CONFIG_REFUSED)) \
                    and not (known is not None and why.startswith(known)):
                unexplained.append((arch, form, why[:120]))
    assert not unexplained, unexplained


def test_every_layer_as_vllm_builds_it():
    """Layer by layer, in order: full, sliding with its window, or chunked
    with its chunk, as vLLM's classes built them."""
    wrong, n = [], 0
    for arch, form, x in _forms():
        n += 1
        try:
            ours = _ours(x["raw"])
        except ValueError as error:
            ours = f"ValueError: {error}"
        if ours != _theirs(x):
            wrong.append((arch, form, _theirs(x), ours))
    assert n >= 750, n
    assert not wrong, f"{len(wrong)} of {n} forms differ: {wrong[:5]}"


def test_bytes_as_vllm_reserves_them():
    """Per token, the sum over cache layers of page_size_bytes / block_size;
    at the engine's max_model_len with its max_in_flight_tokens, the sum of
    each layer's max_memory_usage_bytes. Exact integers."""
    wrong = []
    for arch, form, x in _forms():
        attention = [s for _, s in x["layers"] if s["spec"] in ATTENTION_SPECS]
        length, flight = x["max_model_len"], x["max_in_flight_tokens"]
        per_token = sum(s["page_size_bytes"] // s["block_size"] for s in attention)
        theirs = sum(s["max_memory_usage_bytes"] for s in attention)
        ours, ours_token = 0, None
        for block in sorted({s["block_size"] for s in attention}) or [16]:
            cache = serving.kv_cache_bytes(x["raw"], engine="vllm", bytes_per_value=4,
                                           length=length, block_size=block,
                                           scheduled_tokens=flight)
            ours_token = cache["bytes_per_token"]
            kinds = _ours(x["raw"])
            for kind, info in cache["by_layer_type"].items():
                if not info["kv"]:
                    continue
                short = ("chunked" if kind == "chunked_attention" else
                         "sliding" if info["window"] else "full")
                here = sum(1 for (k, _), s in zip(kinds, attention)
                           if k == short and s["block_size"] == block)
                ours += info["tokens_at_length"] * info["bytes_per_token"] * here \
                    // info["layers"]
        if (ours_token, ours) != (per_token, theirs):
            wrong.append((arch, form, (ours_token, per_token), (ours, theirs)))
    assert not wrong, f"{len(wrong)} forms differ: {wrong[:5]}"


def test_every_layer_typed_class_was_seen_to_be_one():
    """serving.VLLM_LAYER_TYPED holds only types whose layer_types form vLLM
    built with both sliding and full layers (the comparison above shows that
    no other type does): no entry rests on reading the source alone."""
    seen = set()
    for arch, form, x in _forms():
        kinds = {k for k, _ in _theirs(x)}
        if form == "layer_types, window" and {"sliding", "full"} <= kinds:
            seen.add(_text_type(x["raw"]))
    assert serving.VLLM_LAYER_TYPED == seen, (
        sorted(serving.VLLM_LAYER_TYPED - seen), sorted(seen - serving.VLLM_LAYER_TYPED))


def test_every_qwen2_model_class_was_seen_to_assert():
    """serving.VLLM_QWEN2_MODEL holds exactly the types whose mixed layer
    types vLLM refused in its Qwen2Model (the assertion, or reading a
    max_window_layers the config class lacks): the refusal is keyed by what
    vLLM's code did, not by a reading of which classes extend Qwen2Model."""
    seen = set()
    for entry in _stored()["architectures"].values():
        for x in entry.get("forms", {}).values():
            why = x.get("refused") or ""
            if "Sliding window for some but all layers" in why or \
                    "has no attribute 'max_window_layers'" in why:
                seen.add(_text_type(x["raw"]))
    assert serving.VLLM_QWEN2_MODEL == seen, (
        sorted(serving.VLLM_QWEN2_MODEL - seen), sorted(seen - serving.VLLM_QWEN2_MODEL))


def test_every_gated_delta_net_class_was_seen_to_refuse():
    """serving.VLLM_GATED_DELTA_NET holds exactly the types whose decoder
    layer vLLM saw raise on a sliding layer type."""
    seen = {_text_type(x["raw"]) for e in _stored()["architectures"].values()
            for x in e.get("forms", {}).values()
            if "Invalid layer_type" in (x.get("refused") or "")}
    assert serving.VLLM_GATED_DELTA_NET == seen, (
        sorted(serving.VLLM_GATED_DELTA_NET ^ seen))


def test_the_fixed_state_vllm_sizes():
    """Where the library sizes vLLM's state of layers without attention, the
    layer count and bytes are those of vLLM's MambaSpec layers."""
    wrong, n = [], 0
    for arch, form, x in _forms():
        state = serving.fixed_state_bytes(x["raw"], bytes_per_value=4, engine="vllm")
        if state is None:
            continue
        n += 1
        theirs = [s for _, s in x["layers"] if s["spec"] not in ATTENTION_SPECS]
        if (state["layers"], state["bytes"]) != (
                len(theirs), sum(s["page_size_bytes"] for s in theirs)):
            wrong.append((arch, form, state["layers"], state["bytes"],
                          [s["page_size_bytes"] for s in theirs]))
    assert n >= 1, "no sized state was compared"
    assert not wrong, wrong


def test_fp8_where_vllm_applies_it():
    """``--kv-cache-dtype fp8`` on a bfloat16 model: one byte per value where
    vLLM's layers cache uint8, the model's two where a class builds its
    attention without the cache config (Falcon)."""
    from posenc_lib.tools import engines

    wrong, n = [], 0
    for arch, form, x in _forms():
        if form != "as-is":
            continue
        dtypes = {d for d in x.get("fp8_dtypes", ()) if d is not None}
        if not dtypes:
            continue
        n += 1
        theirs = {"uint8": 1, "bfloat16": 2}[dtypes.pop()] if len(dtypes) == 1 else dtypes
        ours = engines.engine_kv_cache_bytes(x["raw"], "vllm", n_ctx=64,
                                             cache_dtype="fp8")["bytes_per_value"]
        if ours != theirs:
            wrong.append((arch, ours, theirs))
    assert n >= 60, n
    assert not wrong, wrong


def test_configs_vllm_refuses_are_refused():
    """Where vLLM's own code refuses a config, the library raises a ValueError
    that says so; transformers' refusals are listed in TRANSFORMERS_REFUSES."""
    accepted = []
    for arch, entry in sorted(_stored()["architectures"].items()):
        for form, x in entry.get("forms", {}).items():
            why = x.get("refused") or ""
            if not any(k in why and who == "vllm" for k, who in CONFIG_REFUSED.items()):
                continue
            try:
                serving.kv_cache_bytes(x["raw"], engine="vllm", length=64)
            except ValueError:
                continue
            accepted.append((arch, form, why[:80]))
    assert not accepted, accepted


def test_a_refusal_says_what_vllm_does():
    """Where vLLM's Qwen2 model fails reading a max_window_layers the config
    class lacks (Qwen3-VL), the library says that, not that the value is
    wrong; where the value is wrong (Qwen2.5-VL), it names it."""
    stored = _stored()["architectures"]
    for arch, words in (("Qwen3VLForConditionalGeneration", "does not set"),
                        ("Qwen2_5_VLForConditionalGeneration", r"max_window_layers \(")):
        x = stored[arch]["forms"]["layer_types, window"]
        assert "refused" in x, (arch, "vLLM built it")
        with pytest.raises(ValueError, match=words):
            serving.kv_cache_bytes(x["raw"], engine="vllm", length=64)


def test_what_the_library_refuses_raises():
    """Each form vLLM built that the library refuses: a ValueError that says
    why, from the layer layout the inspector and kv_cache_bytes read."""
    stored = _stored()["architectures"]
    n = 0
    for (arch, form), (words, why) in LIBRARY_REFUSES.items():
        forms = stored[arch]["forms"]
        for name in [form] if form else [f for f, x in forms.items()
                                         if "refused" not in x]:
            x = forms[name]
            assert "refused" not in x, (arch, name, why)
            with pytest.raises(ValueError, match=words):
                serving._layer_cache_kinds(x["raw"], "vllm")
            n += 1
    assert n >= 3, n


def test_a_planted_error_is_caught(monkeypatch):
    """The comparison can fail: Cohere 2's sliding layers without vLLM's extra
    token, and a Llama config's lone sliding_window read as no window (what
    the library said before it was compared with vLLM)."""
    forms = {(a, f): x for a, f, x in _forms()}
    cohere = forms[("Cohere2ForCausalLM", "as-is")]
    assert _ours(cohere["raw"]) == _theirs(cohere)
    monkeypatch.setattr(serving, "VLLM_WINDOW_PLUS_ONE", frozenset())
    assert _ours(cohere["raw"]) != _theirs(cohere)
    monkeypatch.undo()
    llama = forms[("LlamaForCausalLM", "window")]
    assert _theirs(llama) == [("sliding", 3)] * len(_theirs(llama))
    raw = {**llama["raw"], "sliding_window": None}
    assert _ours(raw) != _theirs(llama)


def test_what_the_report_says_for_vllm():
    """The inspector's vLLM cache line follows vLLM's layers: a Llama config
    with a lone sliding_window slides every layer under vLLM (its engine-wide
    window), while transformers' Llama attends over every token."""
    from posenc_lib.tools import inspector

    x = next(x for a, f, x in _forms() if (a, f) == ("LlamaForCausalLM", "window"))
    n = len(_theirs(x))
    report = inspector.format_report(inspector.inspect_config(
        x["raw"], engine="vllm", target_length=64))
    line = next(s for s in report.splitlines() if s.strip().startswith("KV cache"))
    assert f"sliding {n} layers" in line and "window 3" in line, line
    # the layers line judges the frequencies at vLLM's window too
    line = next(s for s in report.splitlines() if s.strip().startswith("layers"))
    assert f"{n} sliding (window 3)" in line, line
    plain = inspector.format_report(inspector.inspect_config(x["raw"], target_length=64))
    line = next(s for s in plain.splitlines() if s.strip().startswith("layers"))
    assert f"{n} global" in line, line  # transformers' Llama attends to every token


def test_error_names_are_current():
    """The explained errors each still occur (a list entry nothing matches is
    stale)."""
    errors = [x["refused"] for e in _stored()["architectures"].values()
              for x in e.get("forms", {}).values() if "refused" in x]
    stale = [k for k in (*NOT_BUILT_HERE, *CONFIG_REFUSED)
             if not any(k in e for e in errors)]
    assert not stale, stale
    assert all(re.search(r"\w", k) for k in NOT_BUILT_HERE)


def test_the_max_window_layers_defaults_are_the_classes():
    """serving.VLLM_QWEN2_MAX_WINDOW_LAYERS holds the default of each text
    config class (what vLLM's Qwen2Model reads where a config.json leaves the
    key out), as transformers builds it; Qwen3-VL's class has none."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    for model_type, value in serving.VLLM_QWEN2_MAX_WINDOW_LAYERS.items():
        text = CONFIG_MAPPING[f"{model_type}_text"]()
        assert text.max_window_layers == value, (model_type, text.max_window_layers)
    if "qwen3_vl_text" in CONFIG_MAPPING:
        assert not hasattr(CONFIG_MAPPING["qwen3_vl_text"](), "max_window_layers")
