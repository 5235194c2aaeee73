"""Six positional fields read under every name a config class gives them, as
the class reads them, for every model type transformers registers.

A config class reads a field under its own name and often under others (its
``attribute_map``, or keywords its ``__init__`` pops); every other name is
kept as an attribute the class does not read as the field. The library's table
(``posenc_lib/data/config_names.json``) comes from probing each class with one
name and with each pair (``scripts/config_names.py``). Here it is judged on
other forms: two to four names at once with other values, built by the class
itself. transformers 4.57.6 runs live (every registered type, forms built now);
5.24.0's forms and the values its classes read are stored in
``results/config-names-5.json`` (``make config-names``).

Before the table the library read the union of all the names for every type:
it read ``n_layer`` in a Llama config, missed DBRX's ``max_seq_len`` and
Step-3.5's ``num_attention_groups``, took BLOOM's ``hidden_size`` over its
``n_embed``, and refused any form with two names that disagree.
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import pytest
from transformers import CONFIG_MAPPING

from posenc_lib import config_reader, serving

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "config_names_script", ROOT / "scripts" / "config_names.py")
script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(script)

STORED_5 = json.loads((ROOT / "results" / "config-names-5.json").read_text())
STORED_4 = json.loads((ROOT / "results" / "config-names-4.json").read_text())
TABLE = json.loads((ROOT / "posenc_lib" / "data" / "config_names.json").read_text())


def _library_reads(model_type: str, given: dict, field: str, major: int, monkeypatch,
                   counted: bool = False):
    """The field as the library reads ``given`` under release ``major``'s table
    (``counted``: the layer count as :func:`config_reader.num_layers` counts it,
    LongCat-Flash's attention layers where its class holds the decoder layers)."""
    monkeypatch.setattr(config_reader, "_reading_major", lambda version: major)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text, _ = config_reader._raw_text_config({"model_type": model_type, **given})
        if counted and field == "num_hidden_layers":
            return config_reader.num_layers(text)
    return text.get(field)


def _unordered(model_type: str, field: str, major: int) -> bool:
    release = {4: STORED_4, 5: STORED_5}[major]["transformers"]
    return any(isinstance(g["fields"].get(field), dict)
               and g["fields"][field].get("unordered") and model_type in g["types"]
               for g in TABLE["releases"][release])


def _judge(model_type, field, record, form, major, monkeypatch,
           counted: bool = False) -> str | None:
    """Why the library's reading of ``form`` is not the class's, or ``None``."""
    if form.get("error"):  # the class refuses this form: nothing to compare
        return None
    try:
        got = _library_reads(model_type, form["given"], field, major, monkeypatch,
                             counted)
    except ValueError as error:  # refused: only where the table says no order fits
        return None if "which one wins depends" in str(error) and _unordered(
            model_type, field, major) else f"{model_type} {field}: refused: {error}"
    want = form["reads"]
    if got == want or (got is None and want == record["default"]):
        return None
    return f"{model_type} {field} {form['given']}: class {want!r}, library {got!r}"


def _live_records():
    """The installed 4.57.6's probe, with its forms (about 8 s)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return script.probe()


@pytest.fixture(scope="module")
def live():
    return _live_records()


def test_the_stored_4x_probe_is_the_installed_release(live):
    """The table's 4.57.6 half comes from the stored probe; the probe run now
    on the installed classes must give the same table."""
    assert live["transformers"] == STORED_4["transformers"] == "4.57.6"
    now = {t: {f: script.reading(r) for f, r in rec.items()}
           for t, rec in live["types"].items() if "error" not in rec}
    stored = {t: {f: script.reading(r) for f, r in rec.items()}
              for t, rec in STORED_4["types"].items() if "error" not in rec}
    assert now == stored


def _every_form(probe: dict, major: int, monkeypatch,
                kind: str = "forms") -> tuple[int, list[str]]:
    """How many forms of ``kind`` ``probe`` holds, and why the library misreads
    each it misreads."""
    wrong, n = [], 0
    for model_type, record in probe["types"].items():
        for field, found in record.items() if "error" not in record else ():
            for form in found.get(kind, []):
                n += 1
                why = _judge(model_type, field, found, form, major, monkeypatch,
                             kind == "derived_forms")
                if why:
                    wrong.append(why)
    return n, wrong


def test_every_4x_form_reads_as_the_class_reads_it(live, monkeypatch):
    """Every registered type of 4.57.6, every field a name sets, forms of two
    to four names built by the class now."""
    n, wrong = _every_form(live, 4, monkeypatch)
    assert n > 1500, n
    assert not wrong, f"{len(wrong)} of {n}:\n" + "\n".join(wrong[:20])


def test_every_stored_5x_form_reads_as_the_class_read_it(monkeypatch):
    n, wrong = _every_form(STORED_5, 5, monkeypatch)
    assert n > 3000, n
    assert not wrong, f"{len(wrong)} of {n}:\n" + "\n".join(wrong[:20])


@pytest.mark.parametrize("major", [4, 5])
def test_every_null_form_reads_as_the_class_reads_it(live, major, monkeypatch):
    """A name given as null beside each other name that sets the field: an
    attribute_map alias sets the field to None (Inkling's
    ``sliding_window`` null beside ``sliding_window_size``: no window, and its
    model fails), a keyword the class pops and tests for None leaves the other
    name's value (BLOOM's ``n_embed``). 4.57.6 built now, 5.24.0 stored."""
    n, wrong = _every_form(live if major == 4 else STORED_5, major, monkeypatch,
                           "null_forms")
    assert n > {4: 300, 5: 500}[major], n
    assert not wrong, f"{len(wrong)} of {n}:\n" + "\n".join(wrong[:20])


@pytest.mark.parametrize("major", [4, 5])
def test_every_computed_field_reads_as_the_class_computes_it(live, major, monkeypatch):
    """Fields a class computes from another name (``derived`` in the probe):
    HRM's ``num_hidden_layers`` (blocks x H_cycles x (L_cycles + 1) on first
    construction), MiMo-V2-Flash's ``sliding_window`` (``sliding_window_size``
    + 1), LongCat-Flash's (2 x ``num_layers``), Swin's width, XLM-ProphetNet's
    layers; each name alone and beside every other integer field of the class
    moved by one (4.57.6 built now, 5.24.0 stored)."""
    probe = live if major == 4 else STORED_5
    n, wrong = _every_form(probe, major, monkeypatch, "derived_forms")
    computed = {t for t, r in probe["types"].items() if "error" not in r
                and any(f.get("derived") for f in r.values())}
    assert n > 10 * len(computed) > 0, (n, computed)
    assert not wrong, f"{len(wrong)} of {n}:\n" + "\n".join(wrong[:20])


def test_the_table_covers_both_registries():
    """Every type each release registers and builds is in its half of the
    table (a type left out would be read with every name, as before)."""
    for stored in (STORED_4, STORED_5):
        built = {t for t, r in stored["types"].items() if "error" not in r}
        tabled = {t for g in TABLE["releases"][stored["transformers"]] for t in g["types"]}
        assert built == tabled
    assert set(STORED_4["types"]) == set(CONFIG_MAPPING.keys())


def test_an_unread_alias_is_dropped_with_a_warning():
    """Llama's class does not read ``n_layer``: the layer count is its own
    field's, and a file with ``n_layer`` alone has none (the class's default)."""
    config = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
              "num_hidden_layers": 2, "n_layer": 7}
    with pytest.warns(config_reader.IgnoredKeyWarning, match="n_layer=7"):
        text, _ = config_reader._raw_text_config(config)
    assert config_reader.num_layers(text) == 2
    del config["num_hidden_layers"]
    with pytest.warns(config_reader.IgnoredKeyWarning):
        text, _ = config_reader._raw_text_config(config)
    assert config_reader.num_layers(text) is None


def test_names_the_class_maps_are_read(monkeypatch):
    """DBRX's length is ``max_seq_len`` (its published config.json has no
    ``max_position_embeddings``); Step-3.5's key heads are
    ``num_attention_groups`` (5.x only); BLOOM's ``n_embed`` wins over
    ``hidden_size``. Each value against the class's own reading in the stored
    probes."""
    dbrx = {"model_type": "dbrx", "d_model": 256, "n_heads": 4, "n_layers": 2,
            "max_seq_len": 32768,
            "attn_config": {"kv_n_heads": 1, "rope_theta": 500000.0}}
    parsed = config_reader.parse_rope_config(dbrx)
    assert parsed.max_position_embeddings == 32768
    assert STORED_4["types"]["dbrx"]["max_position_embeddings"]["reads"] == [
        "max_position_embeddings", "max_seq_len"]
    step = {"model_type": "step3p5", "hidden_size": 256, "num_attention_heads": 8,
            "num_attention_groups": 2, "num_hidden_layers": 2, "head_dim": 32,
            "rope_theta": 10000.0}
    assert serving.cache_head(step)["kv_heads"] == 2
    assert "num_attention_groups" in STORED_5["types"]["step3p5"][
        "num_key_value_heads"]["reads"]
    bloom = {"model_type": "bloom", "hidden_size": 256, "n_embed": 512, "n_head": 4}
    with pytest.warns(config_reader.IgnoredKeyWarning, match="hidden_size=256"):
        text, _ = config_reader._raw_text_config(bloom)
    assert text["hidden_size"] == 512
    assert STORED_4["types"]["bloom"]["hidden_size"]["pairs"] == {
        "hidden_size|n_embed": "n_embed"}


def test_a_reading_that_differs_between_releases_warns():
    """RecurrentGemma 5.x maps ``sliding_window`` onto ``attention_window_size``
    (the window it keeps); 4.57.6 has no such alias and keeps its own field."""
    config = {"model_type": "recurrent_gemma", "hidden_size": 64,
              "num_attention_heads": 4, "num_hidden_layers": 3,
              "attention_window_size": 2048, "sliding_window": 64}
    with pytest.warns(config_reader.VersionDependentWarning,
                      match="attention_window_size"):
        text, _ = config_reader._raw_text_config(config)
    assert text["attention_window_size"] == 2048  # read as the installed 4.57.6


def test_a_caller_s_release_chooses_the_reading():
    """With ``transformers_version="5.24.0"`` the RecurrentGemma window is the
    ``sliding_window`` that 5.x's class maps onto ``attention_window_size``:
    the cache is the one of a config that gives that window alone."""
    config = {"model_type": "recurrent_gemma", "hidden_size": 64,
              "num_attention_heads": 4, "num_hidden_layers": 3,
              "attention_window_size": 2048, "sliding_window": 64}
    alone = {k: v for k, v in config.items() if k != "sliding_window"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        five = serving.kv_cache_bytes(config, length=4096, transformers_version="5.24.0")
        five_alone = serving.kv_cache_bytes({**alone, "attention_window_size": 64},
                                            length=4096, transformers_version="5.24.0")
        four = serving.kv_cache_bytes(config, length=4096, transformers_version="4.57.6")
        four_alone = serving.kv_cache_bytes(alone, length=4096,
                                            transformers_version="4.57.6")
    assert five["bytes_at_length"] == five_alone["bytes_at_length"]
    assert four["bytes_at_length"] == four_alone["bytes_at_length"] != five["bytes_at_length"]
