"""Config forms: the inspector against configs written the way released
``config.json`` files are written, on every rotary causal-LM type.

``scripts/conformance.py`` builds each causal-LM type's DEFAULT config. Real
configs differ from defaults in their form and their secondary fields: the
rope block under ``rope_scaling`` with ``type`` or ``rope_type`` (or 5.x's
``rope_parameters``, with ``rope_theta`` inside it or at the top level),
``head_dim`` explicit, absent, null or not ``hidden_size / heads``, a partial
rotary dim under one of three names, ``num_key_value_heads`` absent or 1,
sliding-window fields and ``layer_types``, integers where floats are usual,
keys no class reads, a text model nested in a multimodal config, and scaled
rope types (linear, dynamic, yarn with and without its optional fields,
llama3, longrope).

For each rotary type of the stored conformance sweep (``results/conformance-4.json``
or ``-5.json``, whichever matches the running transformers), :func:`perturb`
draws such a variant of the type's tiny default config (the one
``posenc_lib.tools.tiny_model.shrunk`` builds). A variant is kept only if
transformers itself accepts it (the config class builds from the dict, as
``AutoConfig`` does, and a tiny model of it runs a forward pass); then

- ``compare``: the tiny model's observation (``tiny_model.observe``: which
  layers call ``apply_rotary*`` and with which cos/sin, the softmax scale, the
  cache bytes per token and fixed state after a filled cache, each rotary
  module past ``L``) is judged by ``posenc_lib.tools.conformance.compare``
  against the RAW dict (what a practitioner hands the inspector), not
  ``config.to_dict()``, which transformers has already normalised;
- ``inspector``: ``inspect_config(raw)`` must return a report (a
  ``ValueError`` that names a field is counted as a refusal, anything else as
  a crash);
- ``crosscheck``: ``posenc_lib.tools.crosscheck.crosscheck(raw)`` must run and
  find no mismatch;
- ``warnings``: whether transformers logged a rope warning while building the
  config, against whether the report lists one (``transformers_warnings``).

The draws go through :class:`Draw`, so that hypothesis drives them
(``tests/test_config_forms.py``) or, in this script, a seeded
``random.Random`` per type and example (uniform over the kinds, and the same
under both interpreters: the 5.x venv has no hypothesis).

Run: ``python scripts/config_forms.py --out results/config_forms-4.json``
(``--examples N`` per type, ``--types a,b``); the same with the 5.x
interpreter for ``-5.json`` (``make config-forms`` runs both).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import platform
import random
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import transformers  # noqa: E402
from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

from posenc_lib.tools import conformance, tiny_model  # noqa: E402

MAJOR = int(transformers.__version__.split(".")[0])

#: What each perturbation kind varies (the keys of the stored tallies).
KINDS = ("as-is", "sparse", "rope_form", "theta", "scaled", "head_dim", "partial",
         "kv_heads", "window", "layer_types", "lengths", "numbers", "extra",
         "nested")
SCALED = ("linear", "dynamic", "yarn", "llama3", "longrope")


class Draw:
    """The choices a perturbation makes: ``choice(name, options)`` and
    ``subset(name, options)``; each is logged in ``log`` (name: value)."""

    def __init__(self, pick):
        self._pick = pick  # (options list) -> one of them
        self.log: dict = {}

    def choice(self, name, options):
        options = list(options)
        value = self._pick(options)
        self.log[name] = value
        return value

    def subset(self, name, options):
        out = [o for o in options if self._pick([False, True])]
        self.log[name] = out
        return out

    @classmethod
    def scripted(cls, choices: dict):
        """The value ``choices`` gives each named choice, else the first option
        (a subset: the listed options, else none)."""
        d = cls(lambda options: options[0])
        base_choice, base_subset = d.choice, d.subset
        d.choice = lambda name, options: (d.log.__setitem__(name, choices[name]) or
                                          choices[name]) if name in choices \
            else base_choice(name, options)
        d.subset = lambda name, options: (d.log.__setitem__(name, choices[name]) or
                                          choices[name]) if name in choices \
            else base_subset(name, [])
        return d

    @classmethod
    def seeded(cls, seed):
        rng = random.Random(seed)
        return cls(lambda options: options[rng.randrange(len(options))])

    @classmethod
    def hypothesis(cls, data):
        from hypothesis import strategies as st

        return cls(lambda options: data.draw(st.sampled_from(options)))


# -- reading the raw dict the way a practitioner writes it (generator side) --

def _rope_block(raw):
    """``(where, block)``: the dict holding the rope type, or ``(None, None)``."""
    for key in ("rope_parameters", "rope_scaling"):
        if isinstance(raw.get(key), dict):
            return key, raw[key]
    return None, None


def _theta(raw, default=10000.0):
    where, block = _rope_block(raw)
    if block is not None and "rope_theta" in block:
        return block["rope_theta"]
    return raw.get("rope_theta", default)


def _heads(raw):
    return raw.get("num_attention_heads")


def _mpe(raw):
    v = raw.get("max_position_embeddings")
    return v if isinstance(v, int) and v > 0 else 4096


def _set_rope(raw, theta, scaled, d):
    """Write ``theta`` and the scaled block ``scaled`` (``None``: default rope)
    in a form drawn from those the running major version reads."""
    partial = None
    for key in ("rope_parameters", "rope_scaling"):
        block = raw.pop(key, None)
        if isinstance(block, dict) and "partial_rotary_factor" in block:
            partial = block["partial_rotary_factor"]
    raw.pop("rope_theta", None)
    forms = ["legacy"] if MAJOR < 5 else ["legacy", "parameters", "parameters+top"]
    form = d.choice("rope form", forms)
    if scaled is not None:
        scaled = dict(scaled)
        kind = scaled.pop("rope_type")
        key = d.choice("type key", ["rope_type", "type"] if form == "legacy" else
                       ["rope_type", "rope_type", "type"])
        scaled = {key: kind, **scaled}
    if form == "legacy":
        raw["rope_theta"] = theta
        raw["rope_scaling"] = scaled
    else:
        block = dict(scaled) if scaled else {"rope_type": "default"}
        if form == "parameters":
            block["rope_theta"] = theta
        else:
            raw["rope_theta"] = theta
        raw["rope_parameters"] = block
    if partial is not None:
        target = raw.get("rope_parameters") or raw.get("rope_scaling")
        if isinstance(target, dict):
            target["partial_rotary_factor"] = partial
        else:
            raw["partial_rotary_factor"] = partial
    return raw


def _scaled(d, kind, mpe, pairs):
    factor = d.choice("factor", [2, 4, 8, 2.0, 4.0, 8.0, 1.5, 16.0])
    block = {"rope_type": kind}
    if kind in ("linear", "dynamic"):
        block["factor"] = factor
    elif kind == "yarn":
        block["factor"] = factor
        for key in d.subset("yarn fields", ["original_max_position_embeddings",
                                           "beta_fast", "beta_slow",
                                           "attention_factor", "mscale",
                                           "mscale_all_dim", "truncate"]):
            block[key] = {"original_max_position_embeddings": max(mpe // 4, 16),
                          "beta_fast": d.choice("beta_fast", [32, 16.0]),
                          "beta_slow": d.choice("beta_slow", [1, 2.0]),
                          "attention_factor": d.choice("attention_factor",
                                                       [1.0, 0.8, 1.2]),
                          "mscale": d.choice("mscale", [1, 0.707, 1.0]),
                          "mscale_all_dim": d.choice("mscale_all_dim", [1, 0.707, 0]),
                          "truncate": d.choice("truncate", [True, False])}[key]
    elif kind == "llama3":
        block.update(factor=factor, low_freq_factor=d.choice("low", [1, 1.0, 2.0]),
                     high_freq_factor=d.choice("high", [4, 4.0, 8.0]),
                     original_max_position_embeddings=max(mpe // 4, 16))
    elif kind == "longrope":
        if pairs is None:
            return None
        block["short_factor"] = [1.0 + 0.01 * i for i in range(pairs)]
        block["long_factor"] = [1.0 + 0.5 * i for i in range(pairs)]
        for key in d.subset("longrope fields", ["original_max_position_embeddings",
                                               "factor", "attention_factor"]):
            block[key] = {"original_max_position_embeddings": max(mpe // 4, 16),
                          "factor": float(mpe // max(mpe // 4, 16)),
                          "attention_factor": 1.1}[key]
    return block


def perturb(d: Draw, base: dict, info: dict):
    """One variant of the tiny default config ``base`` (a ``config.json``
    dict), or ``None`` where the drawn kind does not apply. ``info``:
    ``sparse`` (the same config without its class defaults), ``pairs`` (the
    base model's rotary pairs), ``composite`` (the multimodal type that nests
    this text type, or ``None``)."""
    raw = copy.deepcopy(base)
    kind = d.choice("kind", KINDS)
    heads = _heads(raw)
    if kind == "as-is":
        return kind, raw
    if kind == "sparse":
        return kind, copy.deepcopy(info["sparse"])
    if kind == "rope_form":
        where, block = _rope_block(raw)
        scaled = None
        if block is not None:
            scaled = {k: v for k, v in block.items()
                      if k not in ("rope_theta", "partial_rotary_factor")}
            t = scaled.pop("type", None) or scaled.pop("rope_type", None) or "default"
            scaled = None if t == "default" else {"rope_type": t, **scaled}
        return kind, _set_rope(raw, _theta(raw), scaled, d)
    if kind == "theta":
        theta = d.choice("theta", [10000, 500000, 1000000.0, 5e6, 1e4])
        where, block = _rope_block(raw)
        scaled = None
        if block is not None:
            scaled = {k: v for k, v in block.items()
                      if k not in ("rope_theta", "partial_rotary_factor")}
            t = scaled.pop("type", None) or scaled.pop("rope_type", None) or "default"
            scaled = None if t == "default" else {"rope_type": t, **scaled}
        return kind, _set_rope(raw, theta, scaled, d)
    if kind == "scaled":
        method = d.choice("method", SCALED)
        scaled = _scaled(d, method, _mpe(raw), info["pairs"])
        if scaled is None:
            return None
        return f"scaled:{method}", _set_rope(raw, _theta(raw), scaled, d)
    if kind == "head_dim":
        hidden = raw.get("hidden_size")
        if not isinstance(hidden, int) or not isinstance(heads, int):
            return None
        form = d.choice("head_dim", ["absent", "null", "equal", "double", "half"])
        if form == "absent":
            raw.pop("head_dim", None)
        elif form == "null":
            raw["head_dim"] = None
        else:
            raw["head_dim"] = {"equal": hidden // heads, "double": 2 * hidden // heads,
                               "half": max(hidden // heads // 2, 4)}[form]
        return f"head_dim:{form}", raw
    if kind == "partial":
        key = d.choice("partial key", ["partial_rotary_factor", "rotary_pct",
                                       "rotary_dim", "partial_rotary_factor"])
        hd = raw.get("head_dim") or (raw.get("hidden_size", 0) // (heads or 1))
        value = (d.choice("rotary_dim", [hd // 2, hd // 4, hd]) if key == "rotary_dim"
                 else d.choice("fraction", [0.5, 0.25, 1.0, 0.75, 1]))
        for k in ("partial_rotary_factor", "rotary_pct", "rotary_dim"):
            raw.pop(k, None)
        where, block = _rope_block(raw)
        if key == "partial_rotary_factor" and where == "rope_parameters" and \
                d.choice("partial in rope_parameters", [True, False]):
            block.pop("partial_rotary_factor", None)
            block[key] = value
        else:
            if block is not None:
                block.pop("partial_rotary_factor", None)
            raw[key] = value
        return f"partial:{key}", raw
    if kind == "kv_heads":
        form = d.choice("kv heads", ["absent", "one", "equal", "null"])
        if form == "absent":
            raw.pop("num_key_value_heads", None)
        else:
            raw["num_key_value_heads"] = {"one": 1, "equal": heads, "null": None}[form]
        return f"kv_heads:{form}", raw
    if kind == "window":
        form = d.choice("window", ["small", "large", "null", "absent", "use off",
                                   "use on", "max_window_layers"])
        if form in ("small", "large"):
            raw["sliding_window"] = 4 if form == "small" else 4096
        elif form == "null":
            raw["sliding_window"] = None
        elif form == "absent":
            raw.pop("sliding_window", None)
        elif form in ("use off", "use on"):
            raw["use_sliding_window"] = form == "use on"
            if raw.get("sliding_window") is None and form == "use on":
                raw["sliding_window"] = 4
        else:
            raw["use_sliding_window"] = True
            raw["sliding_window"] = raw.get("sliding_window") or 4
            raw["max_window_layers"] = d.choice("max_window_layers", [0, 1, 3, 100])
        return f"window:{form}", raw
    if kind == "layer_types":
        n = raw.get("num_hidden_layers")
        if not isinstance(n, int):
            return None
        present = raw.get("layer_types")
        options = sorted(set(present)) if isinstance(present, list) else []
        if "full_attention" not in options:
            options.append("full_attention")
        form = d.choice("layer_types", ["absent", "all full", "alternate", "random"]
                        + (["with sliding"] if "sliding_attention" not in options else []))
        if form == "absent":
            raw.pop("layer_types", None)
        elif form == "all full":
            raw["layer_types"] = ["full_attention"] * n
        elif form == "alternate":
            raw["layer_types"] = [options[i % len(options)] for i in range(n)]
        elif form == "random":
            raw["layer_types"] = [d.choice(f"layer {i}", options) for i in range(n)]
        else:
            raw["layer_types"] = ["sliding_attention" if i % 2 == 0 else "full_attention"
                                  for i in range(n)]
            raw.setdefault("sliding_window", 4)
            if raw.get("sliding_window") is None:
                raw["sliding_window"] = 4
        return f"layer_types:{form}", raw
    if kind == "lengths":
        form = d.choice("lengths", ["mpe small", "mpe large", "omp top",
                                    "omp top with yarn"])
        if form == "mpe small":
            raw["max_position_embeddings"] = 64
        elif form == "mpe large":
            raw["max_position_embeddings"] = 131072
        else:
            raw["original_max_position_embeddings"] = max(_mpe(raw) // 4, 16)
            if form == "omp top with yarn":
                _set_rope(raw, _theta(raw), {"rope_type": "yarn", "factor": 4.0}, d)
        return f"lengths:{form}", raw
    if kind == "numbers":
        form = d.choice("numbers", ["theta int", "theta float", "mpe float",
                                    "head_dim float", "partial int"])
        theta = _theta(raw)
        if form == "theta int" and float(theta).is_integer():
            where, block = _rope_block(raw)
            if block is not None and "rope_theta" in block:
                block["rope_theta"] = int(theta)
            else:
                raw["rope_theta"] = int(theta)
        elif form == "theta float":
            where, block = _rope_block(raw)
            if block is not None and "rope_theta" in block:
                block["rope_theta"] = float(theta)
            else:
                raw["rope_theta"] = float(theta)
        elif form == "mpe float":
            raw["max_position_embeddings"] = float(_mpe(raw))
        elif form == "head_dim float" and isinstance(raw.get("head_dim"), int):
            raw["head_dim"] = float(raw["head_dim"])
        elif form == "partial int":
            raw["partial_rotary_factor"] = 1
        else:
            return None
        return f"numbers:{form}", raw
    if kind == "extra":
        key = d.choice("extra key", ["rotary_emb_base", "rope_ratio", "rotary_base",
                                     "base", "rope_type", "position_embedding_type",
                                     "use_rope", "_name_or_path", "rope_in_block",
                                     "unknown"])
        if key == "rope_type":
            raw["rope_type"] = "linear"
        elif key == "position_embedding_type":
            raw[key] = d.choice("position_embedding_type", ["rope", "absolute"])
        elif key == "use_rope":
            raw[key] = True
        elif key == "_name_or_path":
            raw[key] = "someone/some-model"
        elif key == "rope_in_block":
            where, block = _rope_block(raw)
            if block is None:
                return None
            block["finetuned"] = True
        elif key == "unknown":
            raw["some_unknown_key"] = 3
        else:
            raw[key] = 5000.0
        return f"extra:{key}", raw
    if kind == "nested":
        composite = info.get("composite")
        if composite is None:
            return None
        form = d.choice("nested", ["text_config", "text_config sparse",
                                   "rope at top"])
        text = copy.deepcopy(info["sparse"] if form == "text_config sparse" else raw)
        out = {"model_type": composite, "text_config": text}
        if form == "rope at top":
            for k in ("rope_theta", "rope_scaling", "rope_parameters"):
                if k in text:
                    out[k] = copy.deepcopy(text[k])
        return f"nested:{form}", out
    raise AssertionError(kind)


# -- transformers' side --------------------------------------------------

class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def load(raw: dict):
    """``(config object of the text model, transformers' logged warnings)``:
    ``raw`` read the way ``AutoConfig`` reads a ``config.json``."""
    from posenc_lib.tools.crosscheck import config_class

    cls = config_class(raw["model_type"])
    if cls is None:
        raise KeyError(raw["model_type"])
    capture = _Capture()
    logger = logging.getLogger("transformers")
    logger.addHandler(capture)
    hf_logging.disable_default_handler()
    old = hf_logging.get_verbosity()
    hf_logging.set_verbosity_warning()
    try:
        warning_once = getattr(hf_logging, "warning_once", None)
        if hasattr(warning_once, "cache_clear"):
            warning_once.cache_clear()
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cfg = cls.from_dict(copy.deepcopy(raw))
    finally:
        logger.removeHandler(capture)
        hf_logging.enable_default_handler()
        hf_logging.set_verbosity(old)
    messages = capture.messages + [str(w.message) for w in caught]
    return tiny_model._text_config(cfg), messages


def build_and_observe(raw: dict):
    """transformers' verdict on ``raw`` and, when it accepts it, what its tiny
    model does: ``(observation or None, rejection or None, warnings)``."""
    import warnings

    try:
        built, logged = load(raw)
    except Exception as e:  # noqa: BLE001 -- transformers rejects the config
        return None, f"config: {type(e).__name__}: {str(e)[:200]}", []
    try:
        built._attn_implementation = "eager"
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf_logging.set_verbosity_error()
            model = tiny_model.model_of(built)
            observed = tiny_model.observe(model, built, built.model_type)
    except Exception as e:  # noqa: BLE001 -- the model does not build or run
        return None, f"model: {type(e).__name__}: {str(e)[:200]}", logged
    finally:
        hf_logging.set_verbosity_warning()
    return observed, None, logged


def rope_warnings(messages):
    """The logged messages about the rope block."""
    return sorted({m.splitlines()[0][:200] for m in messages
                   if "rope" in m.lower() or "rotary" in m.lower()})


# -- the library's side --------------------------------------------------

def warnings_disagree(theirs: list, report: dict) -> dict | None:
    """``{"transformers": ..., "report": ...}`` when transformers logged RoPE
    messages and the report names none (or the reverse), else ``None``.
    transformers' "Unrecognized keys" message is covered by the report's own
    unknown-key warning (the inspector lists such keys among its warnings, not
    on its "transformers warns" line)."""
    ours = list(report.get("transformers_warnings", []))
    unknown = any(w.startswith("unknown key(s)") for w in report.get("warnings", []))
    rest = [t for t in theirs if not (unknown and t.startswith("Unrecognized keys"))]
    if bool(rest) != bool(ours):
        return {"transformers": theirs, "report": ours}
    return None


def judge(raw: dict, observed: dict, logged: list, *, crosscheck_too: bool = True,
          version: str | None = None) -> dict:
    """Every disagreement of the library with transformers on ``raw``
    (see the module docstring): ``{"compare": [...], "inspector": ...,
    "crosscheck": ..., "warnings": ...}``, each empty/None when they agree."""
    import warnings

    from posenc_lib.tools import inspector

    version = version or transformers.__version__
    out = {"compare": [], "inspector": None, "crosscheck": None, "warnings": None}
    diffs = conformance.compare(observed, raw, transformers_version=version)
    if conformance.verdict(diffs) == "disagree":
        out["compare"] = [d for d in diffs if not d["reason"].endswith("not compared")]
    report = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            report = inspector.inspect_config(raw)
        except ValueError as e:
            out["inspector"] = f"refuses: {str(e)[:300]}"
        except Exception as e:  # noqa: BLE001 -- a crash is a finding
            out["inspector"] = (f"crash: {type(e).__name__}: {str(e)[:200]} at "
                                f"{traceback.extract_tb(e.__traceback__)[-1].name}")
    theirs = rope_warnings(logged)
    if report is not None:
        out["warnings"] = warnings_disagree(theirs, report)
    if crosscheck_too:
        from posenc_lib.tools.crosscheck import crosscheck

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = crosscheck(raw)
                if not result["ok"]:
                    out["crosscheck"] = result["problems"][:5]
            except Exception as e:  # noqa: BLE001 -- a crash is a finding
                out["crosscheck"] = [f"raises {type(e).__name__}: {str(e)[:200]}"]
    return out


def refused(judged: dict) -> bool:
    """Whether the library refuses the config with a clear error (the
    inspector's ``ValueError`` naming the field), every compare difference
    being that refusal and the crosscheck raising it too: an answer the
    library may give, tallied apart from the disagreements."""
    message = judged.get("inspector") or ""
    if not message.startswith("refuses: "):
        return False
    text = message.removeprefix("refuses: ")[:60]
    return all(d["what"] == "library" and text in d["reason"]
               for d in judged.get("compare") or []) and \
        all(text in p for p in judged.get("crosscheck") or [])


def disagrees(judged: dict) -> list[str]:
    """The parts of a judgement that disagree (``compare``, ``inspector``,
    ``crosscheck``; ``warnings`` is tallied apart; a clear refusal is
    ``["refused"]``)."""
    if refused(judged):
        return ["refused"]
    return [k for k in ("compare", "inspector", "crosscheck") if judged.get(k)]


# -- the population ------------------------------------------------------

def rotary_types() -> list[str]:
    """The causal-LM types whose default tiny model rotates (stored sweep)."""
    stored = json.loads((ROOT / "results" / f"conformance-{MAJOR}.json").read_text())
    return sorted(t for t, e in stored["types"].items()
                  if e["verdict"] != "not built" and e["observed"]["rope_layers"])


_BASES: dict = {}


def base_of(model_type: str) -> tuple[dict, dict]:
    """``(base raw config, info)`` of ``model_type``'s tiny default."""
    if model_type in _BASES:
        return _BASES[model_type]
    cls, kw = tiny_model.shrunk(model_type)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_logging.set_verbosity_error()
        built, model = tiny_model.build(cls, kw)
        hf_logging.set_verbosity_warning()
    base = json.loads(json.dumps(built.to_dict(), default=str))
    sparse = json.loads(json.dumps(built.to_diff_dict(), default=str))
    sparse["model_type"] = built.model_type
    for d in (base, sparse):
        for k in ("transformers_version", "architectures", "_attn_implementation",
                  "torch_dtype", "dtype", "_name_or_path"):
            d.pop(k, None)
    pairs = None
    for m in model.modules():
        if type(m).__name__.endswith("RotaryEmbedding") and hasattr(m, "inv_freq"):
            pairs = int(m.inv_freq.numel())
            break
    composite = None
    if model_type != built.model_type and "text_config" in CONFIG_MAPPING[model_type](
            **tiny_model.DEFAULT_KWARGS.get(model_type, {})).to_dict():
        composite = model_type
    _BASES[model_type] = (base, {"sparse": sparse, "pairs": pairs,
                                 "composite": composite})
    return _BASES[model_type]


def one(model_type: str, d: Draw, *, crosscheck_too: bool = True) -> dict | None:
    """Draw one variant of ``model_type`` and judge it (``None``: the drawn
    kind does not apply)."""
    base, info = base_of(model_type)
    drawn = perturb(d, base, info)
    if drawn is None:
        return None
    kind, raw = drawn
    entry = {"model_type": model_type, "kind": kind, "draws": dict(d.log), "raw": raw}
    start = time.perf_counter()
    observed, rejected, logged = build_and_observe(raw)
    if rejected:
        entry.update(accepted=False, rejected=rejected)
        return entry
    entry.update(accepted=True, observed=observed["observed"],
                 judged=judge(raw, observed["observed"], logged,
                              crosscheck_too=crosscheck_too),
                 seconds=round(time.perf_counter() - start, 2))
    entry["disagree"] = disagrees(entry["judged"])
    return entry


def run_type(model_type: str, examples: int, seed: int, crosscheck_too: bool) -> list:
    """``examples`` draws for ``model_type``, each from its own seeded
    ``random.Random`` (uniform over the kinds, the same in both interpreters;
    tests/test_config_forms.py drives :func:`one` with hypothesis instead)."""
    entries = []
    for i in range(examples):
        e = one(model_type, Draw.seeded(f"{seed}:{model_type}:{i}"),
                crosscheck_too=crosscheck_too)
        if e is not None:
            entries.append(e)
    return entries


def tallies(entries: list) -> dict:
    """Counts per type and per kind: drawn, accepted, disagree (any part),
    and per part."""
    def blank():
        return {"accepted": 0, "rejected": 0, "disagree": 0, "refused": 0,
                "compare": 0, "inspector": 0, "crosscheck": 0, "warnings": 0}

    out = {"total": blank(), "by_type": {}, "by_kind": {}}
    for e in entries:
        kind = e["kind"].split(":")[0]
        for bucket in (out["total"], out["by_type"].setdefault(e["model_type"], blank()),
                       out["by_kind"].setdefault(kind, blank())):
            if not e["accepted"]:
                bucket["rejected"] += 1
                continue
            bucket["accepted"] += 1
            if e["disagree"] == ["refused"]:
                bucket["refused"] += 1
                continue
            bucket["disagree"] += bool(e["disagree"])
            for part in ("compare", "inspector", "crosscheck", "warnings"):
                bucket[part] += bool(e["judged"].get(part))
    return out


def rejudge(stored: dict, *, before: dict | None = None, command: str = "") -> dict:
    """A stored run judged again by the library as it is now, from the stored
    observations (no model is built): ``compare`` and ``inspector`` are
    re-run, and ``warnings`` where the run stored a disagreement (with its log
    of transformers' messages); ``crosscheck`` (which builds its own model) is
    kept as the run found it (``crosscheck_rerun`` false). ``before`` (another
    stored run, default this one) gives the tallies kept under ``before``, with
    ``before_command``."""
    import warnings

    from posenc_lib.tools import inspector

    before = before or stored
    out = {k: v for k, v in stored.items() if k not in ("entries", "tallies")}
    out["before"] = before.get("before") or tallies(  # a refusal counted apart
        [dict(e, disagree=disagrees(e["judged"])) if e["accepted"] else e
         for e in before["entries"]])
    out["before_command"] = before.get("before_command", command)
    out["crosscheck_rerun"] = False
    entries = []
    for e in stored["entries"]:
        e = dict(e)
        if e["accepted"]:
            judged = dict(e["judged"])
            diffs = conformance.compare(e["observed"], e["raw"],
                                        transformers_version=stored["transformers"])
            judged["compare"] = ([d for d in diffs if not d["reason"].endswith(
                "not compared")] if conformance.verdict(diffs) == "disagree" else [])
            judged["inspector"] = None
            report = None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    report = inspector.inspect_config(e["raw"])
                except ValueError as error:
                    judged["inspector"] = f"refuses: {str(error)[:300]}"
                except Exception as error:  # noqa: BLE001 -- a crash is a finding
                    judged["inspector"] = f"crash: {type(error).__name__}: {error}"[:300]
            if judged.get("warnings") and report is not None:
                # the stored log, judged again (an agreement stays one: the
                # rule only covers messages the report names)
                judged["warnings"] = warnings_disagree(
                    judged["warnings"]["transformers"], report)
            e["judged"] = judged
            e["disagree"] = disagrees(judged)
        entries.append(e)
    out["tallies"] = tallies(entries)
    out["entries"] = entries
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--types", default=None)
    parser.add_argument("--examples", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-crosscheck", action="store_true")
    parser.add_argument("--memory-gb", type=float, default=3.0,
                        help="data-segment limit: a config whose model would "
                        "not fit fails with an allocation error, recorded")
    parser.add_argument("--rejudge", type=Path, default=None,
                        help="judge a stored run (this script's --out) again "
                        "with the current library; no model is built")
    parser.add_argument("--before", type=Path, default=None,
                        help="with --rejudge: the run whose tallies are kept "
                        "as the before figure")
    args = parser.parse_args(argv)
    if args.rejudge:
        out = rejudge(json.loads(args.rejudge.read_text()),
                      before=json.loads(args.before.read_text()) if args.before
                      else None, command=f"python scripts/config_forms.py --examples "
                      f"{args.examples} (before the fixes)")
        print(json.dumps(out["before"]["total"]), "->",
              json.dumps(out["tallies"]["total"]))
        if args.out:
            args.out.write_text(json.dumps(out, default=str) + "\n")
        return 0
    try:
        import resource

        limit = int(args.memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    torch.set_num_threads(1)
    hf_logging.set_verbosity_warning()
    types = args.types.split(",") if args.types else rotary_types()
    start = time.perf_counter()
    entries, failed = [], {}
    for model_type in types:
        t0 = time.perf_counter()
        try:
            got = run_type(model_type, args.examples, args.seed, not args.no_crosscheck)
        except Exception as e:  # noqa: BLE001 -- listed, never dropped
            failed[model_type] = f"{type(e).__name__}: {str(e)[:300]}"
            print(f"{model_type:28s} FAILED {failed[model_type][:120]}", flush=True)
            continue
        entries += got
        bad = [e for e in got if e.get("disagree")]
        print(f"{model_type:28s} {sum(e['accepted'] for e in got):3d} accepted "
              f"{len(bad):3d} disagree  {time.perf_counter() - t0:5.1f} s"
              + "".join(f"\n    - {e['kind']}: {', '.join(e['disagree'])}" for e in bad),
              flush=True)
    elapsed = time.perf_counter() - start
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "python": platform.python_version(), "examples_per_type": args.examples,
           "seed": args.seed, "crosscheck": not args.no_crosscheck,
           "seconds": round(elapsed, 1), "failed": failed,
           "tallies": tallies(entries), "entries": entries}
    print(json.dumps(out["tallies"]["total"]), f"{elapsed:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(out, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
