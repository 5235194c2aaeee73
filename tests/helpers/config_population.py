"""Generated configs: posenc_lib's accept / warn / raise against transformers'.

:func:`configs` is a hypothesis strategy for ``config.json`` mappings of three
model types (``llama``, whose class validates the rope block; ``qwen2``, which
validates it and reads ``layer_types``; ``mistral``, which validates nothing),
with every rope type (and a missing, null, misspelt, unknown or wrongly typed
one), each rope key present, missing, wrongly typed or out of range, extra
keys, and wrongly typed or out-of-range layout fields (lengths, windows,
heads, ``layer_types``).

:func:`transformers_outcome` runs the installed transformers (4.57.6) as it
loads a model: the config class (``AutoConfig.for_model``, which runs the rope
validation where the class does), then a one-layer model of that class and a
forward pass over three tokens; its logged warnings are captured.
:func:`project_outcome` runs ``posenc_lib.tools.inspector.inspect_config`` (which reads
the layout and the rope block; ``rope_from_config`` for the frequencies).
:func:`compare` says whether they agree, and when they do not, whether the
difference is a deliberate one (:data:`DELIBERATE`, each with its reason).

``python tests/helpers/config_population.py --examples N`` prints the agreement rate
for N generated configs; ``tests/test_bad_input.py`` runs a few hundred.
"""

from __future__ import annotations

import importlib
import logging
import math
import re
import sys
import warnings
from pathlib import Path

import torch
from hypothesis import strategies as st

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from posenc_lib import _validate_config, scaling  # noqa: E402
from posenc_lib import config_reader  # noqa: E402

MODEL_TYPES = ("llama", "qwen2", "mistral")
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")
#: Values a generated field may take besides its good ones.
BAD_VALUES = [None, 0, -3, "8", True, 1e30, float("nan"), [2.0], {}]


def _number(good):
    """A good value about two times in three, else a bad one."""
    return st.sampled_from(list(good) * (2 * len(BAD_VALUES) // len(good) + 1)
                           + BAD_VALUES)


@st.composite
def rope_block(draw, head_dim: int):
    kind = draw(st.sampled_from(ROPE_TYPES * 3 + ("missing", "null", "misspelt",
                                                  "bogus", "number")))
    block: dict = {}
    if kind in ROPE_TYPES:
        block[draw(st.sampled_from(["rope_type", "rope_type", "type"]))] = kind
    elif kind == "null":
        block["rope_type"] = None
    elif kind == "misspelt":
        block["rope_tpye"] = draw(st.sampled_from(ROPE_TYPES))
    elif kind == "bogus":
        block["rope_type"] = "su-per"
    elif kind == "number":
        block["rope_type"] = 3
    pairs = head_dim // 2
    keys = {"factor": _number([2.0, 4.0, 0.5, 1.0, 8]),
            "original_max_position_embeddings": _number([1024, 2048, 4096]),
            "attention_factor": _number([1.0, 0.5]),
            "beta_fast": _number([32.0, 4.0]), "beta_slow": _number([1.0, 2.0]),
            "low_freq_factor": _number([1.0, 2.0]),
            "high_freq_factor": _number([4.0, 1.0]),
            "short_factor": st.sampled_from([[1.0] * pairs, [1.5] * pairs] * 3 +
                                            [[1.0] * (pairs + 1), None, "x"]),
            "long_factor": st.sampled_from([[2.0] * pairs] * 4 +
                                           [[1.0] * (pairs - 1), None]),
            "mscale": _number([1.0]), "truncate": st.sampled_from([True, False, None]),
            "foo": st.just(1.0)}
    used = set(config_reader.ROPE_KEYS.get(kind, ((), ()))[0] +
               config_reader.ROPE_KEYS.get(kind, ((), ()))[1])
    for key, values in keys.items():
        if draw(st.integers(0, 9)) < (7 if key in used else 1):
            block[key] = draw(values)
    return block


@st.composite
def configs(draw):
    """A config.json mapping (see the module docstring)."""
    model_type = draw(st.sampled_from(MODEL_TYPES))
    heads = draw(st.sampled_from([2, 4]))
    head_dim = draw(st.sampled_from([8, 16]))
    config = {"model_type": model_type, "vocab_size": 16, "intermediate_size": 16,
              "num_hidden_layers": 2, "num_attention_heads": heads,
              "hidden_size": draw(st.sampled_from([heads * head_dim] * 4 +
                                                  [heads * head_dim + 2]))}
    optional = {
        "num_key_value_heads": st.sampled_from([1, heads] * 3 + [3, 0, "2"]),
        "max_position_embeddings": _number([2048, 4096, 8192, 4096.0]),
        "rope_theta": _number([10000.0, 500000, 1.5]),
        "partial_rotary_factor": st.sampled_from([1.0] * 4 + [0.5, 0.0, 2.0, "1"]),
        "sliding_window": _number([512, 4096]),
        "rope_scaling": st.one_of(st.none(), rope_block(head_dim),
                                  rope_block(head_dim)),
    }
    for key, values in optional.items():
        # num_key_value_heads is rarely omitted (published configs give it)
        if draw(st.integers(0, 9)) < (8 if key == "num_key_value_heads" else 5):
            config[key] = draw(values)
    if model_type == "qwen2" and draw(st.booleans()):
        config["use_sliding_window"] = True
        config["max_window_layers"] = 1
        config["layer_types"] = draw(st.sampled_from([
            ["full_attention", "sliding_attention"], ["full_attention", "bogus"],
            ["full_attention"], ["sliding_attention", 3]]))
    return config


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def transformers_outcome(config: dict) -> tuple[str, object]:
    """``("raise", error)``, ``("warn", messages)`` or ``("accept", None)``,
    plus the rotary ``(inv_freq, attention_scaling)`` where it accepts."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only contend
    try:
        return _transformers_outcome(config)
    finally:
        torch.set_num_threads(threads)


def _transformers_outcome(config: dict):
    import transformers
    from transformers import AutoConfig

    handler = _Records()
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    old = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_warning()
    try:
        fields = {k: v for k, v in config.items() if k != "model_type"}
        fields = {k: (dict(v) if isinstance(v, dict) else v) for k, v in fields.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = AutoConfig.for_model(config["model_type"], **fields)
            cfg._attn_implementation = "eager"
            module = importlib.import_module(f"transformers.models.{cfg.model_type}."
                                             f"modeling_{cfg.model_type}")
            prefix = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral"}[
                cfg.model_type]
            rotary = getattr(module, f"{prefix}RotaryEmbedding")(cfg)
            torch.manual_seed(0)
            attention = getattr(module, f"{prefix}Attention")(cfg, layer_idx=0)
            hidden = torch.randn(1, 3, cfg.hidden_size)
            with torch.no_grad():
                cos, sin = rotary(hidden, torch.arange(3)[None])
                out, _ = attention(hidden, position_embeddings=(cos, sin),
                                   attention_mask=None)
        if not bool(torch.isfinite(out).all()):
            return "raise", "non-finite attention output", None
        freq = (rotary.inv_freq.double(), float(rotary.attention_scaling))
    except Exception as error:  # noqa: BLE001 - any failure is a refusal
        return "raise", f"{type(error).__name__}: {error}", None
    finally:
        logger.removeHandler(handler)
        transformers.logging.set_verbosity(old)
    messages = [m for m in handler.messages if "generation" not in m.lower()]
    return ("warn" if messages else "accept"), messages, freq


#: Warnings of posenc_lib that transformers has no counterpart for: the
#: fields filled in from a class default (transformers fills them in silently).
_SILENT = (config_reader.DefaultValueWarning,)


def project_outcome(config: dict) -> tuple[str, object]:
    """The same three outcomes for ``posenc_lib`` (the inspector's report and
    ``rope_from_config``'s warnings), plus its ``(inv_freq, attention_factor)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            freq = scaling.rope_from_config(config, seq_len=3, dtype=torch.float64)
        except ValueError as error:
            return "raise", str(error), None
    messages = [str(w.message) for w in caught if not issubclass(w.category, _SILENT)]
    return ("warn" if messages else "accept"), messages, freq


def _present(block, key):
    return isinstance(block, dict) and key in block


#: Deliberate differences: a name, the reason (for chapter 9), and a test of
#: the config. A disagreement is deliberate when one of these holds for it.
DELIBERATE = [
    ("hidden_size not a multiple of the heads",
     "transformers 5.x refuses it for llama; 4.57 floors the head size: the two "
     "versions build different models, so posenc_lib refuses it",
     lambda c, t, p: c["model_type"] == "llama"
     and c["hidden_size"] % c["num_attention_heads"] != 0 and p[0] == "raise"
     and "hidden_size (" in str(p[1])),
    ("window or length that is not a positive integer",
     "transformers stores sliding_window / max_position_embeddings as given and "
     "uses them only in some code paths (a mask, a dynamic length); posenc_lib "
     "sizes caches and lengths from them, so it refuses a window or length that "
     "is not a positive integer up to 2**53",
     lambda c, t, p: p[0] == "raise" and any(
         f"{name} must" in str(p[1]) or f"{name} is" in str(p[1])
         for name in ("sliding_window", "max_position_embeddings",
                      "original_max_position_embeddings", "target_length"))),
    ("partial_rotary_factor on a model that rotates the whole head",
     "LlamaAttention, MistralAttention and Qwen2Attention apply cos/sin to the "
     "whole head while the rotary module builds int(head_dim x p) features, so "
     "transformers 4.57's forward fails on the shapes for p < 1; posenc_lib "
     "reads p for every model type (Phi, StableLM, GLM use it). Open: refusing "
     "it needs a per-model list of which attention modules honour p",
     lambda c, t, p: t[0] == "raise" and p[0] != "raise"
     and c.get("partial_rotary_factor") not in (None, 1.0, 1)
     and "must match the size of tensor" in str(t[1])),
    ("num_key_value_heads omitted where the class default does not divide the heads",
     "Qwen2Config defaults num_key_value_heads to 32 and MistralConfig to 8 "
     "(posenc_lib._validate_config.KV_HEADS_DEFAULTS), so a config that omits it "
     "with fewer heads fails transformers' forward; rope_from_config needs no key "
     "heads and reads such a config. Open: serving.cache_head takes an omitted "
     "num_key_value_heads as num_attention_heads, not the class default",
     lambda c, t, p: t[0] == "raise" and p[0] != "raise"
     and "num_key_value_heads" not in c
     and c["num_attention_heads"] % _validate_config.KV_HEADS_DEFAULTS.get(
         c["model_type"], 1) != 0
     and re.search("must divide|size of tensor", str(t[1])) is not None),
    ("a length the config leaves out",
     "transformers fills in its class default (LlamaConfig: "
     "max_position_embeddings 2048), which is rarely the model's length; "
     "posenc_lib reports a missing length instead of guessing it "
     "(config_reader.MODEL_DEFAULTS leaves lengths out on purpose)",
     lambda c, t, p: p[0] == "raise" and "config is incomplete" in str(p[1])
     and "max_position_embeddings" in str(p[1])
     and "max_position_embeddings" not in c),
    ("a rope value out of range or wrongly typed that transformers only logs",
     "transformers 4.57's validator logs a factor or band factor <= 0, or a "
     "beta that is not a float, and computes anyway (negative or infinite "
     "frequencies; a falsy beta such as {} silently becomes its default, "
     "`beta_fast or 32`); posenc_lib refuses the value by name",
     lambda c, t, p: p[0] == "raise" and t[0] == "warn"
     and re.search(r"(factor|beta_fast|beta_slow) must be (>|>=|a real number)",
                   str(p[1])) is not None),
    ("Mistral's dynamic NTK without head_dim",
     "MistralConfig stores head_dim = None, and 4.57's "
     "_compute_dynamic_ntk_parameters reads getattr(config, 'head_dim', ...) "
     "(None, not the fallback): int(None * p) raises. posenc_lib computes "
     "hidden_size // heads as the other methods do. Open: refuse it per model",
     lambda c, t, p: c["model_type"] == "mistral" and "head_dim" not in c
     and t[0] == "raise" and "NoneType" in str(t[1])
     and "dynamic" in str(c.get("rope_scaling"))),
    ("a boolean where a number is expected",
     "Python's True is the integer 1, so transformers computes with a base, "
     "factor or length of 1 (or 0); posenc_lib refuses a boolean by name",
     lambda c, t, p: p[0] == "raise" and re.search(r"got (a boolean, )?(True|False)",
                                                    str(p[1])) is not None),
    ("posenc_lib warns where transformers is silent",
     "posenc_lib warns about ignored rope keys and values transformers computes "
     "anyway even for a class that runs no validation (Mistral), and where "
     "transformers' check is skipped",
     lambda c, t, p: p[0] == "warn" and t[0] == "accept"
     and c["model_type"] == "mistral"),
    ("transformers warns where posenc_lib is silent",
     "a log of transformers' that posenc_lib does not repeat (it reports the "
     "validator's messages in the inspector's 'transformers warns' lines)",
     lambda c, t, p: p[0] == "accept" and t[0] == "warn"),
]


def compare(config: dict) -> dict:
    """Both outcomes for one config and how they relate: ``"agree"``,
    ``"deliberate: NAME"`` or ``"DISAGREE"``; and, where both compute, the
    largest relative difference of the frequencies."""
    t = transformers_outcome(config)
    p = project_outcome(config)
    relation = "agree" if t[0] == p[0] else "DISAGREE"
    if relation != "agree":
        for name, _, holds in DELIBERATE:
            if holds(config, t, p):
                relation = f"deliberate: {name}"
                break
    freq_error = None
    if t[2] is not None and p[2] is not None:
        (ti, ts), (pi, ps) = t[2], p[2]
        if ti.shape != pi.shape:
            freq_error = math.inf
        else:
            freq_error = max(float(((ti - pi).abs() / pi.abs()).max()),
                             abs(ts - ps) / max(abs(ps), 1e-30))
    return {"transformers": t[:2], "posenc_lib": p[:2], "relation": relation,
            "freq_error": freq_error}


def main(argv=None) -> int:
    import argparse
    import collections

    from hypothesis import HealthCheck, given, settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--show", type=int, default=3,
                        help="configs shown per kind of relation")
    args = parser.parse_args(argv)
    counts: collections.Counter = collections.Counter()
    shown: dict = collections.defaultdict(list)
    worst = [0.0]

    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(configs())
    def run(config):
        result = compare(config)
        counts[result["relation"]] += 1
        if result["freq_error"] is not None:
            worst[0] = max(worst[0], result["freq_error"])
        if len(shown[result["relation"]]) < args.show:
            shown[result["relation"]].append((config, result))

    run()
    total = sum(counts.values())
    for relation, n in counts.most_common():
        print(f"{n:6d}  {relation}")
    agree = counts["agree"]
    explained = total - counts["DISAGREE"]
    print(f"{total} configs: same outcome {agree / total:.1%}; same or a listed "
          f"deliberate difference {explained / total:.1%}; largest relative "
          f"frequency difference where both compute: {worst[0]:.2e}")
    for relation, examples in shown.items():
        if relation == "agree":
            continue
        for config, result in examples:
            print(f"[{relation}]", config, "| transformers:",
                  str(result["transformers"])[:300], "| posenc_lib:",
                  str(result["posenc_lib"])[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
