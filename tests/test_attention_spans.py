"""What each layer attends to, by the library and by every tiny causal LM
(``scripts/attention_spans.py``, ``results/attention-spans-*.json``).

The stored sweep built every type the conformance sweep agrees on, with the
window keys of ``scripts/window_keys.py``, and measured in each decoder block
which input positions its output at each prompt position reads, and which
prompt positions one decoded token reads through the cache. Here the library
says the same from the dicts alone: a layer's attention from
:func:`posenc_lib.per_layer.layer_layout` (global: every earlier token; sliding
window ``W``: the last ``W``; chunked: the tokens of its chunk so far), and,
for the decoded token, that rule cut to what the cache keeps
(:func:`posenc_lib.serving` ``_layer_cache_kinds``: a cache of window ``W``
keeps the last ``W - 1`` tokens).

Before the library read them this way, the sweep found 116 of 774 forms (88
types) read wrongly under 4.57.6 and 130 of 1,114 (102 types) under 5.24.0:
a ``layer_types`` key read as the attention where the config class does not
define it (its model's masks never read it; only the cache does), and the
classes whose model slides every layer by ``sliding_window`` read as global
(Phi-3, PhiMoE, Phi-4-multimodal, Mixtral, Starcoder2, Doge, MiniMax's full
layers, 4.57.6's Qwen2-MoE with its switch, 5.x's Ministral 3), 4.57.6's
PhiMoE, whose mask a ``use_sliding_window`` key of false turns off, and
MiniMax-M3-VL, whose model builds no sliding mask.

transformers itself fails to decode one token through its own cache in 91 of
the compared forms (4.57.6) and 22 (5.24.0): BERT-like decoders and older ones
(Bloom, MPT, GIT) given a window key, whose masks do not shrink with a cache
that slides, and Mistral-like classes given a ``layer_types`` key (a cache of
mixed layers under one sliding mask); those are compared on the prompt only.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from helpers.window_refusals import REFUSED

from posenc_lib import config_reader, per_layer, serving

ROOT = Path(__file__).resolve().parents[1]
STORED = {int(p.stem.rsplit("-", 1)[1]): json.loads(p.read_text())
          for p in sorted((ROOT / "results").glob("attention-spans-*.json"))}

#: The kinds of layer whose block mixes positions by its attention alone.
ATTENDING = {"full_attention", "sliding_attention", "chunked_attention", "attention",
             "cross_attention"}

#: Types whose blocks mix positions by more than their attention, so that the
#: measurement says nothing about the attention's span: each block of Inkling's
#: text models also runs short causal convolutions, over the keys and values
#: (``k_sconv``, ``v_sconv``) and on the way into the attention and the MLP
#: (``attn_sconv``, ``mlp_sconv``; 5.24.0 ``models/inkling/modeling_inkling.py``
#: ``InklingDecoderLayer``).
NOT_ATTENTION_ALONE = {"inkling_text", "inkling2_text", "inkling2_loop_text"}

#: Types whose measured span is not the model's positions as the library counts
#: them, or whose blocks are not one layer each: CPM-Ant prepends its prompt
#: tokens to the input (the blocks see ``prompt_length`` more positions);
#: LongCat-Flash runs two attention layers per block; XLM keeps its attention
#: and feed-forward layers in separate lists (``attentions``, ``ffns``), no block;
#: 5.x's HRM-Text (two stacks) and Dory (its recurrent section) run blocks
#: several times a forward pass, each time as another cache layer.
NOT_COMPARABLE = {"cpmant", "dory", "hrm_text", "longcat_flash", "xlm"}

#: transformers' own bugs the sweep found, by release: the measured span is
#: wider than the causal one, and the library's (which is what the model's code
#: means to do) is compared as a subset. 4.57.6's Doge: without a sliding window
#: its SDPA attention gets no causal mask (``DogeAttention.prepare_dynamic_mask``
#: adds the causal mask only where ``attention_mask`` is not None, and the causal
#: SDPA mask is None; ``models/doge/modeling_doge.py`` lines 345-351), so each
#: prompt token reads the later ones; 5.24.0 masks it.
WIDER = {4: {"doge"}}


def expected(layout, cache, t: int, decode: bool):
    """Per layer: the positions the output at ``t`` reads, as the library says
    (``None`` for a layer that does not attend)."""
    out = []
    for x, (_, kept) in zip(layout, cache):
        if x.attention not in ATTENDING:
            out.append(None)
            continue
        if x.attention == "cross_attention":  # the image's states, no text token
            out.append([t])
            continue
        if x.attention in ("sliding_attention", "full_attention") and x.window:
            # (a full layer with a window: MiniMax's, which its sliding mask reaches)
            span = set(range(max(0, t - x.window + 1), t + 1))
        elif x.attention == "chunked_attention":
            span = set(range(x.window * (t // x.window), t + 1))
        else:
            span = set(range(t + 1))
        if decode and kept:  # the cache keeps the last kept - 1 tokens
            span &= set(range(max(0, t - kept + 1), t + 1))
        out.append(sorted(span))
    return out


def library(raw: dict, version: str):
    """``(layout, cache kinds)`` of ``raw`` as the library reads it for ``version``."""
    with warnings.catch_warnings(), config_reader.reading_release(version):
        warnings.simplefilter("ignore")
        layout = per_layer.layer_layout(raw)
        cache, _ = serving._layer_cache_kinds(raw, "transformers")
    return layout, cache


def verdicts(stored: dict, read=library) -> tuple[int, list, list]:
    """``(forms compared, disagreements, decode failures of transformers)``."""
    version, major = stored["transformers"], int(stored["transformers"][0])
    n, wrong, failed = 0, [], []
    for model_type, found in stored["types"].items():
        if "error" in found or model_type in NOT_ATTENTION_ALONE | NOT_COMPARABLE:
            continue
        for form, entry in found.items():
            if "prefill" not in entry:  # refused by transformers, or not probed
                continue
            try:
                layout, cache = read(entry["raw"], version)
            except ValueError as error:
                if str(error).startswith(REFUSED.get(model_type, ("\0",))):
                    continue  # refused on purpose (tests/test_window_keys.py)
                wrong.append(f"{model_type} / {form}: the library refuses: {error}")
                continue
            if len(layout) != len(entry["prefill"]):
                wrong.append(f"{model_type} / {form}: {len(layout)} layers, "
                             f"{len(entry['prefill'])} blocks")
                continue
            n += 1
            wider = model_type in WIDER.get(major, ())
            prompt = len(entry["prefill"][0])
            steps = [(t, False, [rows[t] for rows in entry["prefill"]])
                     for t in range(prompt)]
            if entry.get("decode") is not None:
                steps.append((prompt, True, entry["decode"]))
            elif entry.get("decode_error"):
                failed.append(f"{model_type} / {form}")
            for t, decode, measured in steps:
                ours = expected(layout, cache, t, decode)
                bad = [i for i, (a, b) in enumerate(zip(ours, measured))
                       if a is not None and (not set(a) <= set(b) if wider else a != b)]
                if bad:
                    i = bad[0]
                    wrong.append(f"{model_type} / {form}: layer {i} "
                                 f"({layout[i].attention}, window {layout[i].window}) "
                                 f"{'decoding' if decode else 'prompt'} t={t}: the "
                                 f"library {ours[i]}, the model {measured[i]}")
                    break
    return n, wrong, failed


def test_results_exist():
    assert set(STORED) == {4, 5}, "run make attention-spans (both transformers)"


@pytest.mark.parametrize("major", [4, 5])
def test_every_layer_attends_as_the_library_says(major):
    stored = STORED[major]
    assert stored["tokens"] == 10 and stored["window"] == 3
    n, wrong, _ = verdicts(stored)
    assert n >= {4: 700, 5: 1000}[major], n
    assert not wrong, f"{len(wrong)} of {n}:\n" + "\n".join(wrong[:25])


def test_a_sweep_error_is_listed_not_dropped():
    """No type of the conformance sweep's agreeing ones failed to build, and
    every form the blocks could not be probed in says why."""
    for major, stored in STORED.items():
        errors = {t: f["error"] for t, f in stored["types"].items() if "error" in f}
        assert not errors, (major, errors)
        unprobed = {t for t, f in stored["types"].items() for e in f.values()
                    if "not_probed" in e}
        assert unprobed <= NOT_COMPARABLE, (major, unprobed)


def test_the_key_only_table_is_the_measured_one():
    """``posenc_lib/data/layer_types_fields.json`` lists, for each release, the
    registered types whose class does not define ``layer_types``, as the
    sweep measured them."""
    table = json.loads((ROOT / "posenc_lib" / "data" /
                        "layer_types_fields.json").read_text())["releases"]
    for stored in STORED.values():
        fields = stored["fields"]
        assert set(table[stored["transformers"]]["keeps_unread"]) == \
            set(fields["registered"]) - set(fields["defines"])
        assert {"llama", "mistral", "phi3"} <= set(fields["registered"]) - \
            set(fields["defines"])


def test_the_comparison_can_fail():
    """A measured window one token wider, or a library that reads a Llama
    config's ``layer_types`` key as its attention, is a disagreement."""
    stored = STORED[4]
    raw = stored["types"]["mistral"]["window"]["raw"]
    layout, cache = library(raw, stored["transformers"])
    assert expected(layout, cache, 5, False)[0] == [3, 4, 5]
    widened = json.loads(json.dumps(stored))
    widened["types"] = {"mistral": widened["types"]["mistral"]}
    widened["types"]["mistral"]["window"]["prefill"][0][5] = [2, 3, 4, 5]
    assert verdicts(widened)[1]

    def as_given(raw, version):
        layout, cache = library(raw, version)
        kinds = raw.get("layer_types")
        if kinds:  # the key read as the attention, whatever the class defines
            layout = [per_layer.LayerRope(x.index, k, x.rope, raw.get("sliding_window")
                                          if k == "sliding_attention" else None,
                                          x.temperature)
                      for x, k in zip(layout, kinds)]
        return layout, cache

    llama = {"llama": stored["types"]["llama"]}
    assert not verdicts({**stored, "types": llama})[1]
    assert verdicts({**stored, "types": llama}, read=as_given)[1]


def test_a_key_the_class_does_not_define_is_ignored_with_a_warning():
    """A Llama config with ``layer_types``: every layer attends globally (the
    prompt), and the warning says that the cache follows the key."""
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
              "num_attention_heads": 4, "max_position_embeddings": 128,
              "sliding_window": 16,
              "layer_types": ["sliding_attention", "full_attention"]}
    with pytest.warns(config_reader.IgnoredKeyWarning, match="DynamicCache"):
        kinds = per_layer.layer_types(config)
    assert kinds == ["full_attention"] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache, _ = serving._layer_cache_kinds(config, "transformers")
    assert cache == [("sliding_attention", 16), ("full_attention", None)]
    # vLLM's Llama reads the key (vllm/model_executor/models/llama.py,
    # LlamaAttention: per_layer_sliding_window), and no warning says otherwise
    with warnings.catch_warnings():
        warnings.simplefilter("error", config_reader.IgnoredKeyWarning)
        vllm, _ = serving._layer_cache_kinds(config, "vllm")
    assert vllm == [("sliding_attention", 16), ("full_attention", None)]


@pytest.mark.parametrize("model_type", sorted(per_layer.SLIDES_EVERY_LAYER[4]))
def test_every_layer_slides_by_the_window_key(model_type):
    config = {"model_type": model_type, "num_hidden_layers": 3, "hidden_size": 64,
              "num_attention_heads": 4, "max_position_embeddings": 128,
              "sliding_window": 16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        layout = per_layer.layer_layout(config)
        bare = per_layer.layer_layout({**config, "sliding_window": None})
    assert [(x.attention, x.window) for x in layout] == [("sliding_attention", 16)] * 3
    assert {x.attention for x in bare} == {"full_attention"}
