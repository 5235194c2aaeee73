"""Which key names every registered config class reads for six positional
fields, and which one wins when a ``config.json`` gives several.

A class reads a field under its own name, and often under others: its
``attribute_map`` (GPT-2's ``n_layer``, DBRX's ``max_seq_len``, Step-3.5's
``num_attention_groups``), or a keyword its ``__init__`` pops (BLOOM's and
Falcon's ``n_embed``). Every other name is kept as an attribute that the class
does not read for the field (``n_layer`` in a Llama config). For each type that
the installed transformers registers, and each field, the script builds the
class (not its source) with each candidate name alone and with each pair, and
reads the field back::

    python scripts/config_names.py probe --out results/config-names-4.json
    /work/venv5/bin/python scripts/config_names.py probe \\
        --out results/config-names-5.json          # or: make config-names

(about 1 and 3 minutes). Each stored type also holds generated forms (two to
four names at once, other values) with the value the class reads: the 4.x
forms are rebuilt live by ``tests/test_config_names.py``, the 5.x ones are
judged from the file. ``table`` condenses the two probes into the package's
``posenc_lib/data/config_names.json``, which ``posenc_lib.config_reader``
reads::

    python scripts/config_names.py table results/config-names-4.json \\
        results/config-names-5.json --out posenc_lib/data/config_names.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The fields, and the names any config class of either release maps onto
#: them (every ``attribute_map`` entry of 4.57.6 and 5.24.0 that touches one,
#: and the names the library read before this table).
FIELDS = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers",
                          "decoder_layers", "layers", "encoder_layers",
                          "num_decoder_layers"),
    "hidden_size": ("hidden_size", "n_embd", "n_embed", "d_model", "emb_dim", "dim",
                    "embed_dim", "hidden_dim", "model_dim"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads",
                            "attention_heads", "decoder_attention_heads",
                            "encoder_attention_heads", "num_encoder_attention_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv",
                            "num_attention_groups", "multi_query_group_num",
                            "kv_n_heads", "n_kv_heads", "num_key_value_groups"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "n_ctx",
                                "max_seq_len", "model_max_length", "context_length",
                                "max_sequence_length", "seq_length", "max_seq_length"),
    "sliding_window": ("sliding_window", "sliding_window_size", "attention_window_size",
                       "window_size", "attention_window"),
}
_MISSING = object()
FORMS_PER_FIELD = 4


def _int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _get(config, field):
    return getattr(config, field, _MISSING)


def values(field: str, config) -> list[int] | None:
    """Two values of ``field`` other than ``config``'s that its class accepts
    (head counts that divide the hidden size and are divided by the key
    heads), or ``None``."""
    d = _get(config, field)
    if d is not None and not _int(d):
        return None
    heads = _get(config, "num_attention_heads")
    if field == "num_attention_heads":
        hidden, kv = _get(config, "hidden_size"), _get(config, "num_key_value_heads")
        kv = kv if _int(kv) and kv else 1
        found = [m * d for m in (2, 4, 8) if _int(hidden) and hidden % (m * d) == 0]
        found += [d // m for m in (2, 4) if d % m == 0 and (d // m) % kv == 0]
    elif field == "num_key_value_heads":
        if not _int(heads):
            return None
        found = list(dict.fromkeys(k for k in (heads // 2, heads // 4, heads // 8, 1,
                                               heads) if k and heads % k == 0 and k != d))
    elif field == "num_hidden_layers":
        found = [d + 1, d + 2] if d is not None else [3, 5]
    elif field == "sliding_window":
        found = [48, 80]
    else:
        found = [2 * d, 4 * d] if d else [96, 160]
    return found[:2] if len(found) >= 2 else None


def _build(cls, kwargs):
    try:
        return cls(**kwargs), None
    except Exception as error:  # noqa: BLE001 -- the class refuses the form
        return None, f"{type(error).__name__}: {str(error)[:100]}"


def probe_field(cls, base, field: str) -> dict:
    """How ``cls`` reads ``field``: the names that set it (``reads``), each
    pair's winner, the names it leaves the field alone with (``ignored``),
    those that change it otherwise (``derived``), and those that are an own
    attribute of the class (``own``)."""
    try:
        present = _get(base, field) is not _MISSING
        pair = values(field, base) if present else None
    except Exception as error:  # noqa: BLE001 -- 5.x per-layer attributes raise
        return {"error": type(error).__name__}
    if not present:
        return {"absent": True}
    if pair is None:
        return {"no_values": repr(_get(base, field))[:40]}
    a, b = pair
    d0 = _get(base, field)
    out = {"values": pair, "default": d0, "reads": [], "ignored": [], "derived": [],
           "errors": {}, "pairs": {}}
    for name in FIELDS[field]:
        config, error = _build(cls, {name: a})
        if error:
            out["errors"][name] = error
            continue
        got = _get(config, field)
        kind = "reads" if got == a else "ignored" if got == d0 else "derived"
        out[kind].append(name)
    out["own"] = [n for n in out["ignored"] if n != field and hasattr(base, n)]
    for n1, n2 in itertools.combinations(out["reads"], 2):
        config, error = _build(cls, {n1: a, n2: b})
        got = None if error else _get(config, field)
        out["pairs"][f"{n1}|{n2}"] = (error if error else n1 if got == a
                                      else n2 if got == b else repr(got))
    out["null_forms"] = null_forms(cls, field, out)
    return out


def null_forms(cls, field: str, record: dict) -> list[dict]:
    """Forms with a name given as null (``"sliding_window": null``) beside
    each other name the class sets the field from, with the value the built
    class holds (``None`` where it refuses). A class whose attribute_map sets
    the field from an alias sets it from a null too (Inkling's
    ``sliding_window`` beside ``sliding_window_size`` leaves no window); a
    keyword the class pops and tests for None does not (BLOOM's ``n_embed``).
    (A null alone leaves the field to the class's own default, which the
    class-defaults sweep covers.)"""
    a = record["values"][0]
    out = []
    for n in record["reads"]:
        for given in [{n: None, m: a} for m in record["reads"] if m != n]:
            config, error = _build(cls, given)
            out.append({"given": given, "reads": None if error else _get(config, field),
                        **({"error": error} if error else {})})
    return out


def derived_forms(cls, base, field: str, record: dict) -> list[dict]:
    """Forms for the names that set ``field`` to something other than their
    value (HRM's ``num_hidden_layers``, MiMo's ``sliding_window_size``): each
    alone at both probe values, and with each other integer field of the class
    moved by one or list of integers made one longer (a rule may use them:
    HRM's cycles, Swin's ``depths``), with the value the built class holds
    (``None`` where it refuses)."""
    try:
        defaults = base.to_dict()
    except Exception:  # noqa: BLE001 -- a class that cannot dump itself
        defaults = {}
    moved = {k: v + 1 if _int(v) else [*v, v[-1]] for k, v in sorted(defaults.items())
             if k not in record["derived"] and ((_int(v) and v >= 0) or (
                 isinstance(v, list) and v and all(_int(x) for x in v)))}
    out = []
    for name in record["derived"]:
        givens = [{name: v} for v in record["values"]]
        givens += [{name: record["values"][0], k: v} for k, v in list(moved.items())[:40]]
        for given in givens:
            config, error = _build(cls, given)
            out.append({"given": given, "reads": None if error else _get(config, field),
                        **({"error": error} if error else {})})
    return out


def forms(cls, model_type: str, field: str, record: dict) -> list[dict]:
    """Generated forms for one field: two to four of its names at once (those
    the class sets it from or ignores), with distinct values where there are
    enough, and the value the built class holds (``None`` where it refuses)."""
    names = [n for n in FIELDS[field] if n in record["reads"]
             or (n in record["ignored"] and n not in record["own"])]
    pool = [*record["values"], *([record["default"]] if _int(record["default"]) else [])]
    rng = random.Random(f"{model_type}/{field}")
    out = []
    for _ in range(FORMS_PER_FIELD if len(names) >= 2 else 0):
        chosen = rng.sample(names, rng.randint(2, min(4, len(names))))
        given = {n: pool[(i + rng.randrange(len(pool))) % len(pool)]
                 for i, n in enumerate(chosen)}
        config, error = _build(cls, given)
        out.append({"given": given, "reads": None if error else _get(config, field),
                    **({"error": error} if error else {})})
    return out


def probe(types: list[str] | None = None) -> dict:
    import transformers
    from transformers import CONFIG_MAPPING

    # a few classes log an error for a name they cannot set (a property), and
    # EdgeTAM's asks the Hub for a timm config (offline: it fails at once)
    transformers.logging.set_verbosity(transformers.logging.CRITICAL)
    import huggingface_hub.constants as hub

    offline, hub.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE, True
    try:
        found = _probe_types(types or sorted(CONFIG_MAPPING.keys()))
    finally:
        hub.HF_HUB_OFFLINE = offline
    return {"transformers": transformers.__version__, "fields": FIELDS,
            "types": found}


def _probe_types(types: list[str]) -> dict:
    from transformers import CONFIG_MAPPING

    found = {}
    for model_type in types:
        cls = CONFIG_MAPPING[model_type]
        base, error = _build(cls, {})
        if error:
            found[model_type] = {"error": error}
            continue
        record = {}
        for field in FIELDS:
            record[field] = probe_field(cls, base, field)
            if record[field].get("reads"):
                record[field]["forms"] = forms(cls, model_type, field, record[field])
            if record[field].get("derived"):
                record[field]["derived_forms"] = derived_forms(cls, base, field,
                                                               record[field])
        found[model_type] = record
    return found


def reading(record: dict) -> dict | None:
    """``{"order": names in the order they win, "keep": names the library
    must leave alone}`` for one probed field, or ``None`` where the class
    sets the field from none of the names alone (absent, computed)."""
    if not record.get("reads"):
        return None
    wins = {n: sum(w == n for w in record["pairs"].values()) for n in record["reads"]}
    order = sorted(record["reads"], key=lambda n: (-wins[n], record["reads"].index(n)))
    for n1, n2 in itertools.combinations(order, 2):
        if record["pairs"].get(f"{n1}|{n2}", record["pairs"].get(f"{n2}|{n1}")) != n1:
            raise ValueError(f"no total order: {record['pairs']}")
    keep = sorted({*record["derived"], *record["errors"], *record["own"]})
    # a null counts as the name's value, but for the names whose null beside
    # a name after them leaves that one's value (a keyword popped and tested
    # for None)
    a = record["values"][0]
    null_absent = sorted({n for form in record.get("null_forms", [])
                          if len(form["given"]) == 2 and not form.get("error")
                          for n, m in [sorted(form["given"],
                                              key=lambda k: form["given"][k] is not None)]
                          if order.index(n) < order.index(m) and form["reads"] == a})
    # the order predicts every generated form, or the class decides otherwise
    # (pix2struct's text model: four head-count names, no order fits them all)
    # (a null beside one name the class takes as absent and beside another as
    # its value: pix2struct's text model, decoder_layers null beside num_layers
    # or num_hidden_layers)
    unordered = any(_predict(order, form["given"], record, null_absent) != form["reads"]
                    for form in [*record.get("forms", []), *record.get("null_forms", [])]
                    if not form.get("error"))
    return {"order": order, **({"keep": keep} if keep else {}),
            **({"null_absent": null_absent} if null_absent else {}),
            **({"unordered": True} if unordered else {})}


def _predict(order: list[str], given: dict, record: dict, null_absent=()):
    """The value the first name of ``order`` in ``given`` sets (a null one
    too, unless in ``null_absent``), or the class's default where none is
    given."""
    return next((given[n] for n in order if n in given and (
        given[n] is not None or n not in null_absent)), record["default"])


def table(paths: list[Path]) -> dict:
    """The package table: per release, groups of types that read the fields
    alike (the fields each reads, with the order of its names when that is
    not the field's own name alone)."""
    releases = {}
    for path in paths:
        stored = json.loads(path.read_text())
        groups: dict[str, list[str]] = {}
        for model_type, record in stored["types"].items():
            if "error" in record:
                continue
            fields = {}
            for field, found in record.items():
                read = reading(found)
                if read is None:
                    continue
                plain = set(read) == {"order"}
                fields[field] = 1 if plain and read["order"] == [field] \
                    else read["order"] if plain else read
            key = json.dumps(fields, sort_keys=True)
            groups.setdefault(key, []).append(model_type)
        releases[stored["transformers"]] = [
            {"fields": json.loads(key), "types": sorted(types)}
            for key, types in sorted(groups.items(), key=lambda kv: -len(kv[1]))]
    return {"about": "Which names each registered config class reads for six "
                     "positional fields: per release, groups of model types with "
                     "the fields they set from a name (1: from the field's own name "
                     "alone; a list: the names that set it, the winner first, a "
                     "null one too; 'keep': names the class reads otherwise; "
                     "'null_absent': names whose null the class takes as absent; "
                     "'unordered': no order "
                     "of the names predicts the class on every generated form). Written by "
                     "scripts/config_names.py table from results/config-names-*.json.",
            "fields": FIELDS, "releases": releases}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("probe", help="probe the installed transformers")
    one.add_argument("--out", type=Path, required=True)
    one.add_argument("--types", nargs="*", help="only these model types")
    two = sub.add_parser("table", help="condense probes into the package table")
    two.add_argument("probes", type=Path, nargs="+")
    two.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "probe":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = probe(args.types)
        # one line per type: diffs stay readable, the file a third of indent=1's
        lines = [json.dumps(t) + ": " + json.dumps(r, sort_keys=True, default=repr,
                                                  separators=(",", ":"))
                 for t, r in sorted(result["types"].items())]
        text = (f'{{"transformers": {json.dumps(result["transformers"])}, "fields": '
                f'{json.dumps(result["fields"])},\n"types": {{\n'
                + ",\n".join(lines) + "}}")
        json.loads(text)
        print(f"transformers {result['transformers']}: {len(result['types'])} types")
    else:
        text = json.dumps(table(args.probes), indent=1, sort_keys=True)
    args.out.write_text(text + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
