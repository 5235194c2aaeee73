"""What a model's positional set-up does, read from its ``config.json``.

Run it as ``python -m posenc_lib inspect CONFIG.json`` (or a model directory
holding one, or a model name from :func:`model_names`, e.g. ``llama-3.1-8b``;
``--json`` for scripts, ``--list`` for the names; nothing is downloaded). The
report gives the rotary dim, base, method and
attention factor; the wavelength range; how many pairs complete a full turn
within ``L`` (the critical dimension of Liu et al. 2023); which pairs leave
the angle range they had within ``L`` at the extended length; and, for
M-RoPE, the pairs each axis gets. For serving (:mod:`posenc_lib.serving`):
the warnings transformers logs for the config, whether the frequencies depend
on the length (and so whether cached keys stay valid), how many pairs a
static method changes for short prompts too, the angle error at the target
length in bfloat16, float16 and float32 (with the configured method's
frequencies), the KV-cache size counted layer by layer at the length the
config supports (``--engine vllm`` or ``llama.cpp`` for that engine's cache,
with ``--cache-dtype``), the engine's pair layout, factor and frequency schedule
(``--engine sglang`` too), a one-line serving verdict, and what an engine must implement
beyond RoPE (learned attention sinks, multi-token-prediction layers, the fixed
state of layers without keys and values). ``--crosscheck`` then compares the
report with a tiny model of the config's class built with the installed
transformers (:mod:`posenc_lib.tools.crosscheck`).

"""

from __future__ import annotations

if not __package__:  # run as a file
    raise ImportError("posenc_lib/tools/inspector.py is the module "
                      "posenc_lib.tools.inspector: run it as `python -m posenc_lib inspect`")

import argparse
import copy
import errno
import functools
import json
import math
import os
import re
import sys
import warnings
from importlib import resources
from pathlib import Path
from typing import Mapping, Sequence

import torch

from .. import (config_reader, _validate, alibi, bounds, per_layer,
                relative, scaling, serving)
from . import engines
from ..logit_scale import _global_config, logit_factors, softmax_scale

__all__ = ["model_names", "model_entry", "model_config", "load_config", "inspect_config",
           "softmax_scale", "logit_factors", "compare_to_baseline", "format_baseline",
           "trained_and_extended", "format_report", "main", "crosscheck_main"]

#: Display names of transformers' rope types.
#: The engines ``--engine`` accepts: :data:`posenc_lib.serving.ENGINES` (whose KV
#: cache is sized), SGLang and llama.cpp (RoPE only,
#: ``posenc_lib.tools.engines.engine_summary``).
ENGINES = serving.ENGINES + ("sglang", "llama.cpp")

METHODS = {"default": "plain RoPE", "linear": "position interpolation (PI)",
           "dynamic": "dynamic NTK", "yarn": "YaRN", "llama3": "Llama 3.1 bands",
           "longrope": "LongRoPE", "ntk": "static NTK-aware (alpha)",
           "proportional": "proportional (p-RoPE, transformers 5.x)"}
#: Model types whose checkpoints pair features ``2i, 2i + 1``, and how each is
#: read: ``posenc_lib.config_reader.INTERLEAVED_PAIRS``.
INTERLEAVED_PAIRS = config_reader.INTERLEAVED_PAIRS
#: Short names of the methods in the per-layer summary.
SHORT = {"default": "plain", "linear": "linear", "dynamic": "dynamic NTK",
         "yarn": "YaRN", "llama3": "Llama 3", "longrope": "LongRoPE",
         "ntk": "NTK alpha"}
#: How the summary names each attention type.
ATTENTION = {"full_attention": "global", "sliding_attention": "sliding",
             "chunked_attention": "chunked", "linear_attention": "linear attention",
             "conv": "convolution", "mamba": "Mamba", "attention": "global"}
#: A hub id, ``org/name`` (not a local path: checked after the file system).
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
#: T5Config's default ``relative_attention_max_distance`` (older T5 configs omit it).
T5_MAX_DISTANCE = 128


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, dict]:
    text = resources.files("posenc_lib").joinpath("data/models.json").read_text("utf-8")
    return {entry["name"]: entry for entry in json.loads(text)["models"]}


def model_names() -> list[str]:
    """Names of the models in the package's table (``posenc_lib/data/models.json``)."""
    return list(_table())


def model_entry(name: str) -> dict:
    """The table entry of a model: ``name``, ``title``, ``hub_id``, ``config``, ``source``.

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    table = _table()
    key = name.lower() if isinstance(name, str) else name
    if key not in table:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(table)}")
    return copy.deepcopy(table[key])


def model_config(name: str) -> dict:
    """The ``config.json`` fields of a model in the table (a fresh copy)."""
    return model_entry(name)["config"]


def load_config(source) -> tuple[str, dict]:
    """``(name, config)`` from a ``config.json``, a model directory, a model name
    or a mapping.

    Raises:
        ValueError: if ``source`` is neither an existing file, a directory
            holding ``config.json``, nor a known model name (the message lists
            the known names; for a hub id ``org/name`` it says to download the
            ``config.json``, since nothing is fetched), or the file is not a
            JSON object.
    """
    if isinstance(source, Mapping):
        return "config", dict(source)
    if not isinstance(source, (str, Path)):
        raise ValueError(f"source must be a path, a model name or a mapping, got "
                         f"{type(source).__name__}")
    path = _checked_path(source)
    if path.is_dir():
        if not (path / "config.json").is_file():
            _checked_path(path / "config.json")  # a loop or a dangling link: say so
            raise ValueError(f"the directory {path} holds no config.json")
        name, config = load_config(path / "config.json")
        return path.resolve().name, config
    if path.is_file():
        config = _read_json(path)
        return path.name, config
    if path.exists():
        raise ValueError(f"{path} is neither a regular file nor a directory (a pipe "
                         f"or a device?): give the config.json itself")
    if str(source).lower() in _table():
        entry = model_entry(str(source))
        return entry["title"], entry["config"]
    if _HUB_ID.fullmatch(str(source)):
        raise ValueError(
            f"{str(source)!r} looks like a Hugging Face hub id, and nothing is fetched: "
            f"download its config.json (e.g. `huggingface-cli download {source} "
            f"config.json --local-dir DIR`) and pass the file or the directory")
    raise ValueError(f"{str(source)!r} is neither a file nor a model of the table; "
                     f"known models: {', '.join(_table())}")


def _checked_path(source) -> Path:
    """``Path(source)``, or a ``ValueError`` naming it where the file system
    cannot even say what it is (a symlink loop, a dangling link, a name too
    long, a NUL byte, a directory without permission)."""
    text = str(source)
    if "\0" in text:
        raise ValueError(f"{text!r} is not a usable path: it holds a NUL byte")
    path = Path(text)
    try:
        path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise ValueError(f"{path} is a symbolic link to {os.readlink(path)!r}, "
                             f"which does not exist") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(f"{path} is a symbolic link loop (a link that leads back "
                             f"to itself): point it at the config.json") from None
        if error.errno not in (errno.ENOENT, errno.ENOTDIR):
            shown = (text if len(text) <= 200 else
                     f"{text[:100]}...({len(text):,} characters)")
            raise ValueError(f"cannot read {shown}: "
                             f"{error.strerror or error}") from None
    return path


def _read_json(path: Path) -> dict:
    """The JSON object in the file ``path``, or a ``ValueError`` naming the file."""
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a JSON file: {error}") from None
    except OSError as error:  # permission, a directory race, an I/O error
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not a JSON file: {error}") from None
    except RecursionError:
        raise ValueError(f"{path} nests its JSON too deeply to read (more levels "
                         f"than Python's recursion limit, "
                         f"{sys.getrecursionlimit():,}); a config.json nests a "
                         f"few levels") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} must hold a JSON object, got "
                         f"{type(config).__name__}")
    return config


def trained_and_extended(config: Mapping, target_length: int | None = None, *,
                         window: int | None = None) -> dict:
    """The frequencies and lengths the report compares (float64).

    ``L`` is the length before extension where the config states one
    (``original_max_position_embeddings``), else ``max_position_embeddings``:
    the length the config allows, which need not be the length the model
    was trained on; for a config that states neither, ``window`` if given (the
    window every rotating layer attends within: no distance reaches it). ``trained`` holds the frequencies in effect within ``L``:
    plain RoPE with the config's dim and base (what was pre-trained), except for
    LongRoPE, whose short list is what runs up to ``L``. ``extended`` holds the
    config's frequencies at ``target`` (the extended length, or ``2L`` when the
    config extends nothing).

    Returns:
        dict with ``rope`` (the parsed config), ``trained`` and ``extended``
        (``(dim/2,)`` tensors), ``attention_factor``, ``train_length`` and
        ``target_length``.
    """
    rope = config_reader.parse_rope_config(config)
    train = rope.train_length
    if train is None and window is not None:
        train = window  # every rotating layer attends within it (RecurrentGemma)
    if train is None:
        raise ValueError("config is incomplete: the length L needs "
                         "max_position_embeddings (or original_max_position_embeddings)")
    if target_length is None:
        target_length = rope.extended_length or 2 * train
        if target_length > _validate.MAX_LENGTH:  # name where the default comes from
            raise ValueError(
                "target_length defaults to " + ("the extended length" if
                rope.extended_length else "2 x L") + f" = {target_length:,}, above "
                f"{_validate.MAX_LENGTH:,} (2**53, the largest integer float64 holds "
                f"exactly): give a smaller target_length (--target-length)")
    target = _validate.length("target_length", target_length)
    if rope.rope_type == "longrope" or rope.ntk_alpha is not None:
        # LongRoPE's short list and Hunyuan's alpha base run up to L: what was trained
        trained, _ = scaling.rope_from_config(config, seq_len=train, dtype=torch.float64)
    else:
        trained, _ = scaling.rope_parameters("default", rope.dim, rope.base,
                                             dtype=torch.float64)
    extended, factor = scaling.rope_from_config(config, seq_len=target,
                                                dtype=torch.float64)
    if rope.rope_type == "proportional":  # only the pairs that turn are measured
        turning = int((extended > 0).sum())
        trained, extended = trained[:turning], extended[:turning]
    return {"rope": rope, "trained": trained, "extended": extended,
            "attention_factor": factor, "train_length": train, "target_length": target}


def _ranges(indices: Sequence[int]) -> list[list[int]]:
    """``[0, 1, 2, 5]`` -> ``[[0, 2], [5, 5]]``."""
    out: list[list[int]] = []
    for i in indices:
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


_pair_layout = config_reader._pair_layout


def _names_original(config: Mapping, rope_type: str) -> bool:
    """Whether ``L`` is a length before extension that the config states
    (``original_max_position_embeddings``, at the top or in the rope block,
    for a method that reads it)."""
    if rope_type not in ("yarn", "llama3", "longrope"):
        return False
    text, _ = config_reader._text_config(config)
    block, _ = config_reader._rope_block(text)
    return any(m.get("original_max_position_embeddings") is not None
               for m in (text, block))


#: The rows of ``position_ids`` in the order ``get_rope_index`` stacks them
#: (``torch.stack([T_grid, H_grid, W_grid])`` in every M-RoPE module of
#: transformers 5.24.0 that the inspector reads).
_THW = ("temporal", "height", "width")

#: How each M-RoPE type's own rotary code gives its pairs to the position rows,
#: whatever ``mrope_interleaved`` says (no modeling file of transformers 4.57.6
#: or 5.24.0 reads that flag), and the sections 5.24.0's code falls back on when
#: the config has no ``mrope_section`` (``None``: it fails; named in the
#: refusal, since 4.57.6's code fails there for some types). Rules:
#:
#: * ``"blocks"``: section ``a`` takes the next ``sections[a]`` pairs (Qwen2-VL's
#:   ``freq.split(mrope_section)``, ``m[i % 3]``);
#: * ``"stride3"``: height takes pairs 1, 4, 7, ... below ``3 * sections[1]``,
#:   width pairs 2, 5, 8, ... below ``3 * sections[2]``, time every other pair
#:   (Qwen3-VL's ``slice(offset, mrope_section[dim] * 3, 3)``; ``sections[0]``
#:   is not read);
#: * ``"hw-alternate"``: the sections are (height, width, time): the first
#:   ``sections[0] + sections[1]`` pairs alternate height, width, the rest
#:   follow time (ERNIE-4.5-VL's ``torch.stack([freq_h, freq_w])``, which needs
#:   equal height and width sections).
#:
#: Every M-RoPE module of 5.24.0 is run against this (``make mrope-population``,
#: results/mrope-5.json), and of 4.57.6 in ``tests/test_mrope_population.py``.
_MROPE_RULES = {
    "qwen2_vl": ("blocks", (16, 24, 24)), "qwen2_5_vl": ("blocks", (16, 24, 24)),
    "qwen2_5_omni": ("blocks", (16, 24, 24)), "paddleocr_vl": ("blocks", (16, 24, 24)),
    "glm4v": ("blocks", (8, 12, 12)), "glm4v_moe": ("blocks", (8, 12, 12)),
    "glm_image": ("blocks", (8, 12, 12)), "glm_ocr": ("blocks", (8, 12, 12)),
    "qwen3_vl": ("stride3", (24, 20, 20)), "qwen3_vl_moe": ("stride3", (24, 20, 20)),
    "qwen3_omni_moe": ("stride3", (24, 20, 20)), "cosmos3_edge": ("stride3", None),
    "hy_v4_vl": ("stride3", None), "cohere_compass": ("stride3", (24, 20, 20)),
    "qwen3_5": ("stride3", (11, 11, 10)), "qwen3_5_moe": ("stride3", (11, 11, 10)),
    "qwen4_exp": ("stride3", (11, 11, 10)),
    "ernie4_5_vl_moe": ("hw-alternate", (22, 22, 20)),
}
#: Whether the pairs cycle through the rows (the report's ``mrope_interleaved``).
_MROPE_LAYOUT_BY_TYPE = {t: rule != "blocks" for t, (rule, _) in _MROPE_RULES.items()}
#: M-RoPE types whose pairs the report cannot give an axis each, and why.
_MROPE_REFUSED = {
    "hunyuan_vl": "its rotary code splits the concatenated cos/sin by twice each "
                  "section, so the two features of a pair follow different position "
                  "rows wherever the rows differ: no pair has one axis to report",
    "neomme": "its rotary code gives alternate pairs to two position rows (the grid's "
              "row and column) with no mrope_section in the config, per layer type, "
              "which the report does not describe",
}


def _mrope_type(model_type: str | None) -> str:
    """The M-RoPE family of a composite, text or thinker model_type."""
    name = model_type or ""
    for suffix in ("_text", "_thinker"):
        name = name.removesuffix(suffix)
    return name


def _mrope_layout(config: Mapping, sections: Sequence[int] | None,
                  pairs: int) -> dict:
    """The M-RoPE part of the report: ``{"axes": row per pair, "interleaved",
    "warnings"}``, or ``{"refused": why}`` where the type's code is not known
    here, is not described by an axis per pair, or fails on the config."""
    _, model_type = config_reader._text_config(config)
    family = _mrope_type(model_type)
    if family in _MROPE_REFUSED:
        return {"refused": f"model_type {model_type!r}: M-RoPE not reported: "
                           f"{_MROPE_REFUSED[family]}"}
    if family not in _MROPE_RULES:
        known = ", ".join(sorted(_MROPE_RULES))
        return {"refused": f"model_type {model_type!r}: M-RoPE not reported: the "
                           "pairs' axes are fixed by the model's rotary code, not by "
                           "mrope_interleaved (which no transformers rotary code "
                           f"reads), and this type's code has not been run here "
                           f"(known: {known}); check which pairs follow which axis "
                           "in its rotary module"}
    rule, default = _MROPE_RULES[family]
    if sections is None:  # 5.24.0 falls back on a default; 4.57.6 fails for some
        fallback = (f"transformers 5.24.0's code falls back on {list(default)}; "
                    "4.57.6's fails for Qwen2-VL, Qwen2.5-VL and GLM-4.1V" if default
                    else "transformers' code fails")
        return {"refused": f"model_type {model_type!r}: M-RoPE not reported: no "
                           f"mrope_section in the rope block ({fallback}); set "
                           "mrope_section"}
    notes = []
    sections = [int(s) for s in sections]
    if len(sections) != 3:
        return {"refused": f"model_type {model_type!r}: mrope_section {sections} has "
                           f"{len(sections)} entries; its code reads three "
                           "(temporal, height, width)"}
    if rule != "stride3" and sum(sections) != pairs:
        return {"refused": f"model_type {model_type!r}: mrope_section {sections} sums "
                           f"to {sum(sections)}, not the {pairs} rotary pairs; "
                           "transformers' code fails on it"}
    if rule == "blocks":
        axes = [a for a, s in enumerate(sections) for _ in range(s)]
    elif rule == "stride3":
        axes = [0] * pairs
        for a in (1, 2):
            for i in range(a, min(3 * sections[a], pairs), 3):
                axes[i] = a
    else:  # hw-alternate: (height, width, time) in the config
        if sections[0] != sections[1]:
            return {"refused": f"model_type {model_type!r}: mrope_section {sections} "
                               "gives height and width different sections; its code "
                               "alternates them pair by pair and fails"}
        hw = sections[0] + sections[1]
        axes = [1 + k % 2 for k in range(hw)] + [0] * (pairs - hw)
    counts = [axes.count(a) for a in range(3)]
    expected = sections if rule != "hw-alternate" else [sections[2], *sections[:2]]
    if counts != list(expected):
        notes.append(f"model_type {model_type!r}: its M-RoPE code gives "
                     f"{', '.join(f'{n} {c}' for n, c in zip(_THW, counts))} pairs, "
                     f"not what mrope_section {sections} says")
    return {"axes": axes, "interleaved": _MROPE_LAYOUT_BY_TYPE[family], "warnings": notes}


def _mrope(axes: Sequence[int]) -> dict:
    axis = torch.tensor(list(axes))
    return {name: {"pairs": int((axis == a).sum()),
                   "ranges": _ranges(torch.nonzero(axis == a).flatten().tolist())}
            for a, name in enumerate(_THW)}


def _nested_text_refusal(config: Mapping) -> None:
    """Omni configs keep the language model's fields in
    ``thinker_config.text_config``, which the inspector does not read: a clear
    error instead of a report of the wrong fields."""
    thinker = config.get("thinker_config") if isinstance(config, Mapping) else None
    if isinstance(thinker, Mapping) and "text_config" not in config:
        inner = (thinker.get("text_config") or {}).get("model_type")
        raise ValueError(
            f"model_type {config.get('model_type')!r} keeps its language model's "
            "fields in thinker_config.text_config, which the inspector does not read; "
            f"pass config['thinker_config']['text_config'] (model_type {inner!r}) "
            "instead")


def _t5_buckets(num_buckets: int, max_distance: int) -> dict:
    """Buckets per direction, exact buckets and where the last bucket starts,
    for T5's encoder (bidirectional) and decoder (causal) self-attention, read
    off :func:`~posenc_lib.relative.t5_bucket_ranges`."""
    out = {}
    for part, bidirectional in (("encoder", True), ("decoder", False)):
        ranges = relative.t5_bucket_ranges(bidirectional, num_buckets, max_distance)
        past = [r for r in ranges if r.first <= 0]
        future = [r for r in ranges if r.first > 0]
        out[part] = {"past": len(past), "future": len(future),
                     "exact_past": sum(r.first == min(r.last, 0) for r in past),
                     "last_from": int(-past[-1].last)}
    return out


def _windowed_length(config: Mapping) -> int | None:
    return per_layer.windowed_length(config)


def _global_window(config: Mapping, layers: list | None) -> int | None:
    """The window every layer with the model's global RoPE shares, if all of
    them have one (Mistral: every layer slides); else ``None``."""
    if layers is None:
        text, model_type = config_reader._text_config(config)
        window = text.get("sliding_window")
        return window if model_type == "mistral" and window else None
    spans = {e["window"] for e in layers
             if e["rope"] is not None and e["rope"]["kind"] == "global"}
    return spans.pop() if len(spans) == 1 and None not in spans else None


def compare_to_baseline(config: Mapping, baseline: Mapping, *,
                        target_length: int | None = None) -> dict:
    """Judge an extended config against the config the model shipped with.

    ``baseline``'s frequencies at its own length ``L`` (for Llama 3.1, its
    ``llama3`` bands; for Hunyuan, its alpha base) are what the model was
    trained with, not plain RoPE. Against them, at ``target_length`` (default:
    the extended length of ``config``, else its ``max_position_embeddings``):

    - ``faster``: pairs whose frequency is higher than trained (an extension
      should only slow pairs down), with the largest ratio;
    - ``beyond``: pairs that never completed a turn within ``L`` and whose
      angle at ``target - 1`` exceeds the largest one they reached in training
      (at ``L - 1``): angles the model never saw;
    - ``logit_factor_change``: the cos/sin attention factor squared, new over
      shipped; a static method applies it to every prompt, short ones too.

    Raises:
        ValueError: for either config without RoPE, or configs whose rotary
            dims differ (nothing to compare pair by pair).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = config_reader.parse_rope_config(baseline)
        new = config_reader.parse_rope_config(config)
        if old.dim != new.dim:
            raise ValueError(f"baseline rotates {old.dim} features, config {new.dim}: "
                             f"no pair-by-pair comparison")
        length = old.extended_length or old.max_position_embeddings or old.train_length
        target = target_length or new.extended_length or new.max_position_embeddings
        if length is None or target is None:
            raise ValueError("baseline and config need max_position_embeddings")
        target = _validate.positive_int("target_length", target)
        trained, factor_old = scaling.rope_from_config(baseline, seq_len=length,
                                                       dtype=torch.float64)
        now, factor_new = scaling.rope_from_config(config, seq_len=target,
                                                   dtype=torch.float64)
        short, factor_short = scaling.rope_from_config(config, seq_len=min(length,
                                                                           target),
                                                       dtype=torch.float64)
    eps = 1e-12
    faster = now > trained * (1 + eps)
    trained_angle = trained * (length - 1)
    beyond = (now * (target - 1) > trained_angle * (1 + eps)) & \
        (trained_angle < 2 * math.pi)
    return {"baseline_length": length, "target_length": target,
            "faster_count": int(faster.sum()),
            "faster_pairs": _ranges(torch.nonzero(faster).flatten().tolist()),
            "largest_speed_up": float((now / trained).max()),
            "beyond_count": int(beyond.sum()),
            "beyond_pairs": _ranges(torch.nonzero(beyond).flatten().tolist()),
            "short_prompt_pairs_changed": int(
                ((short - trained).abs() > 1e-6 * trained).sum()),
            "logit_factor_change": (factor_short / factor_old) ** 2,
            "pairs": new.dim // 2}


def format_baseline(result: dict) -> str:
    """:func:`compare_to_baseline` as a few lines."""
    n, L, T = result["pairs"], result["baseline_length"], result["target_length"]
    lines = [f"against the shipped config (trained frequencies at L = {L:,}):",
             f"  faster than trained {result['faster_count']} of {n} pairs "
             f"({_fmt_ranges(result['faster_pairs'])}), up to "
             f"{result['largest_speed_up']:.3g}x",
             f"  angles never seen   {result['beyond_count']} pairs reach at {T - 1:,} "
             f"more than their angle at {L - 1:,} "
             f"({_fmt_ranges(result['beyond_pairs'])})",
             f"  short prompts       {result['short_prompt_pairs_changed']} pairs "
             f"differ from trained; logits x {result['logit_factor_change']:.4g} "
             f"against the shipped config"]
    return "\n".join(lines) + "\n"


def _has_layers(config: Mapping) -> bool:
    """Whether the config states its layers (``num_hidden_layers`` or
    ``layer_types``): only then does the report list them."""
    text, _ = config_reader._text_config(config)
    return any(text.get(k) is not None for k in ("num_hidden_layers", "layer_types"))


def _out_of_range(config: Mapping, target: int, window: int | None) -> dict:
    """Pairs out of range for one RoPE, judged at ``min(target, window)``: a
    layer with a window of ``w`` never sees a distance of ``w`` or more."""
    parts = trained_and_extended(config, target, window=_windowed_length(config))
    judged = target if window is None else min(target, window)
    out = scaling.out_of_range_pairs(parts["trained"], parts["extended"],
                                     parts["train_length"], judged)
    return {"judged_at": judged, "out_of_range_count": int(out.sum()),
            "out_of_range_pairs": _ranges(torch.nonzero(out).flatten().tolist()),
            "rope": parts["rope"], "attention_factor": parts["attention_factor"]}


def _layers(config: Mapping, target: int, engine: str = "transformers") -> list[dict]:
    """One entry per layer: its attention type, window, RoPE (or none) and the
    pairs out of range, judged against its window. Under ``engine="vllm"``
    the attention types and windows are vLLM's (a config vLLM refuses keeps
    transformers' layers; the KV line says why)."""
    cache: dict = {}
    entries = []
    layout = per_layer.layer_layout(config)
    if engine == "vllm":
        try:
            layout = serving._vllm_layout(config)
        except ValueError:
            pass
    for layer in layout:
        entry = {"index": layer.index, "attention": layer.attention,
                 "window": layer.window, "rope": None,
                 "temperature": layer.temperature}
        if layer.rope is not None:
            key = (layer.rope, layer.window)
            if key not in cache:
                sub = per_layer.layer_config(config, layer.index)
                cache[key] = _out_of_range(sub, target, layer.window)
            found = cache[key]
            rope = found["rope"]
            entry["rope"] = {"kind": layer.rope, "rope_type": rope.rope_type,
                             "base": rope.base, "factor": rope.factor,
                             "rotary_dim": rope.dim,
                             "attention_factor": found["attention_factor"]}
            entry.update(judged_at=found["judged_at"],
                         out_of_range_count=found["out_of_range_count"],
                         out_of_range_pairs=found["out_of_range_pairs"])
        entries.append(entry)
    return entries


def _attention_name(entry: dict) -> str:
    """How the summary names a layer's attention: ``"sliding"`` for a full
    attention layer with a window (MiniMax's, under ``sliding_window``)."""
    if entry["attention"] == "full_attention" and entry.get("window"):
        return ATTENTION["sliding_attention"]
    return ATTENTION.get(entry["attention"], entry["attention"])


def layer_summary(layers: Sequence[dict]) -> str:
    """``"62 layers: 52 sliding, base 10,000, plain; 10 global, base
    1,000,000, linear x8"``: the layers grouped by what they do, in order of
    first appearance."""
    groups: dict = {}
    for entry in layers:
        rope = entry["rope"]
        name = _attention_name(entry)
        if rope is None:
            what = "no RoPE"
            if entry["attention"] not in ("linear_attention", "conv", "mamba"):
                what = "no RoPE (NoPE)"
            if entry["temperature"]:
                t = entry["temperature"]
                what += (f", query temperature {t['formula']}" if "formula" in t else
                         f", query temperature 1 + {t['attn_scale']:g}"
                         f"·ln(1 + ⌊(p + 1)/{t['floor_scale']:,}⌋)")
        else:
            method = SHORT.get(rope["rope_type"], rope["rope_type"])
            if rope["factor"] and rope["rope_type"] != "default":
                method += f" x{rope['factor']:g}"
            what = f"base {rope['base']:,.10g}, {method}"
        if entry["window"]:
            name += f" (window {entry['window']:,})"
        key = (name, what)
        groups[key] = groups.get(key, 0) + 1
    parts = [f"{count} {name}, {what}" for (name, what), count in groups.items()]
    return f"{len(layers)} layers: " + "; ".join(parts)


def _known_table() -> dict:
    """``{transformers version: {model_type: reasons}}``, the packaged list."""
    import json
    from importlib import resources

    return json.loads(resources.files("posenc_lib").joinpath(
        "data", "known_disagreements.json").read_text())["versions"]


def known_disagreements(config: Mapping) -> dict[str, list[str]]:
    """``{transformers version: reasons}`` where the stored conformance sweep
    (``make conformance``; ``posenc_lib/data/known_disagreements.json``) found
    this library wrong on the default tiny model of ``config``'s model type
    (or of its text model's), or could not build that model: a report on such
    a type is not verified."""
    table = _known_table()
    _, text_type = config_reader._text_config(config)
    names = {config.get("model_type"), text_type} - {None}
    return {version: [r for name in sorted(names) for r in found.get(name, [])]
            for version, found in table.items()
            if any(name in found for name in names)}


def inspect_config(config: Mapping, *, target_length: int | None = None,
                   name: str = "config", engine: str = "transformers",
                   max_model_len: int | None = None,
                   cache_dtype: str | None = None) -> dict:
    """The inspector's report on a ``config.json`` mapping, as a JSON-ready dict.

    Args:
        config: a parsed ``config.json``.
        target_length: length at which to look for pairs out of range and at
            which to give the serving numbers (angle error, KV cache). Default:
            the extended length of the config; without one, twice ``L`` for
            the pairs (what extending would break) and
            ``max_position_embeddings``, the length the config supports, for
            the serving numbers.
        name: a label for the report.
        engine: whose conventions to report, one of ``ENGINES``: the KV
            cache (:func:`posenc_lib.serving.kv_cache_bytes` for transformers
            and vLLM, ``posenc_lib.tools.engines.engine_kv_cache_bytes`` for vLLM's
            cache dtypes and llama.cpp; for ``"sglang"`` the report says the
            cache is not sized) and the engine's RoPE
            (``posenc_lib.tools.engines.engine_summary``).
        max_model_len: the context the engine serves: vLLM's
            ``--max-model-len``, llama.cpp's ``-c`` (LongRoPE picks its factors
            from it once); default ``max_position_embeddings``, both engines'
            default.
        cache_dtype: the engine's KV-cache type: vLLM's ``--kv-cache-dtype``
            (``auto``, ``fp8``, ``fp8_e4m3``, ``fp8_e5m2``, ...) or llama.cpp's
            ``-ctk``/``-ctv`` (``f16``, ``q8_0``, ``q4_0``, ...); default the
            engine's (``auto``; ``f16``).

    Keys of the rope block that transformers ignores are ignored here too; the
    report lists them under ``warnings`` (instead of raising a warning), with
    the fields filled in from a config class's defaults and the values
    transformers accepts with a warning (equal Llama 3 factors, say).
    """
    report = _inspect(config, target_length=target_length, name=name, engine=engine,
                      max_model_len=max_model_len, cache_dtype=cache_dtype)
    report["known_disagreements"] = known_disagreements(config)
    return report


def _inspect(config: Mapping, *, target_length: int | None, name: str, engine: str,
             max_model_len: int | None, cache_dtype: str | None) -> dict:
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got "
                         f"{engine!r}")
    _check_cache_dtype(engine, cache_dtype)
    _nested_text_refusal(config)
    scheme = config_reader.positional_scheme(config)
    report: dict = {"name": name, "model_type": config.get("model_type"),
                    "scheme": scheme}
    if scheme == "ALiBi":
        _, heads = config_reader._one_of_aliases(config, config_reader._HEADS_ALIASES)
        slopes = alibi.alibi_slopes(_validate.positive_int("n_head", heads),
                                    dtype=torch.float64)
        report.update(heads=int(heads), slope_min=float(slopes.min()),
                      slope_max=float(slopes.max()))
        report.update(_without_rope(config, scheme, target_length, engine,
                                    cache_dtype))
        return report
    if scheme == "T5 relative buckets":
        buckets = _validate.positive_int(
            "relative_attention_num_buckets",
            config.get("relative_attention_num_buckets", 32), minimum=2)
        distance = _validate.positive_int(
            "relative_attention_max_distance",
            config.get("relative_attention_max_distance", T5_MAX_DISTANCE))
        report.update(heads=config.get("num_heads"), num_buckets=buckets,
                      max_distance=distance, **_t5_buckets(buckets, distance))
        return report
    if scheme != "rotary":
        report.update(_without_rope(config, scheme, target_length, engine,
                                    cache_dtype))
        return report
    listed = (config_reader.UnknownRopeKeyWarning, config_reader.DefaultValueWarning,
              scaling.RopeConfigWarning, config_reader.V5LayoutWarning,
              config_reader.VersionDependentWarning,
              # a key the config class keeps but its model ignores: one report
              # row, as for a config without RoPE, not one Python warning per
              # reading of the layers
              config_reader.IgnoredKeyWarning)
    # a 5.x rope_parameters per layer type without a full_attention block (Beam,
    # ZAYA): the global RoPE the report describes is the first rotating layer's
    global_config = _global_config(config)
    if global_config is None:  # no layer rotates
        report.update(_without_rope(config, "no positional encoding (NoPE)",
                                    target_length, engine, cache_dtype))
        return report
    with warnings.catch_warnings(record=True) as caught:  # unknown keys, defaults
        warnings.simplefilter("always")
        windowed = _windowed_length(config)
        parts = trained_and_extended(global_config, target_length, window=windowed)
        layers = (_layers(config, parts["target_length"], engine)
                  if _has_layers(config) else None)
    for item in caught:
        if not issubclass(item.category, listed):
            warnings.warn_explicit(item.message, item.category, item.filename,
                                   item.lineno)
    # A RopeConfigWarning stands beside the validator's message, so it is listed
    # only where the config class runs that validation (not for Llama 4, say,
    # whose published low_freq_factor = high_freq_factor logs nothing).
    validated = serving.validates_rope(config)
    report["warnings"] = list(dict.fromkeys(
        str(item.message) for item in caught if issubclass(item.category, listed)
        and (validated or not issubclass(item.category, scaling.RopeConfigWarning))))
    rope, trained, extended = parts["rope"], parts["trained"], parts["extended"]
    train, target = parts["train_length"], parts["target_length"]
    full_turn = scaling.rotations(trained, train) >= 1  # λ_i <= L
    window = _global_window(config, layers)
    judged = target if window is None else min(target, window)
    out = scaling.out_of_range_pairs(trained, extended, train, judged)
    report.update(
        layout=rope.layout, rope_type=rope.rope_type, method=METHODS[rope.rope_type],
        head_dim=rope.head_dim, rotary_dim=rope.dim, pairs=rope.dim // 2,
        pair_layout=_pair_layout(config),
        partial_rotary_factor=rope.partial_rotary_factor, base=rope.base,
        effective_base=(rope.base * rope.ntk_alpha ** (rope.dim / (rope.dim - 2))
                        if rope.ntk_alpha is not None else None),
        attention_factor=parts["attention_factor"], factor=rope.factor,
        train_length=train, extended_length=rope.extended_length,
        train_length_from=("original_max_position_embeddings"
                           if _names_original(config, rope.rope_type)
                           else "max_position_embeddings"
                           if rope.train_length is not None else "window"),
        max_position_embeddings=rope.max_position_embeddings,
        target_length=target, window=window, judged_at=judged,
        layers=layers, layer_summary=layer_summary(layers) if layers else None,
        logit_factors=logit_factors(config, rope, parts["attention_factor"], layers),
        wavelength_trained=[float(2 * math.pi / trained.max()),
                            float(2 * math.pi / trained.min())],
        wavelength_extended=[float(2 * math.pi / extended.max()),
                             float(2 * math.pi / extended.min())],
        full_turn_pairs=int(full_turn.sum()),
        # Liu et al.'s closed form for plain RoPE; LongRoPE's short list moves the
        # wavelengths, so there it is twice the pairs counted above.
        critical_dimension=(2 * int(full_turn.sum()) if rope.rope_type == "longrope"
                            else bounds.critical_dimension(
                                rope.dim, rope.base * rope.ntk_alpha ** (
                                    rope.dim / (rope.dim - 2))
                                if rope.ntk_alpha is not None else rope.base, train)),
        out_of_range_pairs=_ranges(torch.nonzero(out).flatten().tolist()),
        out_of_range_count=int(out.sum()),
        mrope=None, mrope_interleaved=None)
    if rope.mrope_section or _mrope_type(rope.model_type) in (
            *_MROPE_RULES, *_MROPE_REFUSED):
        layout = _mrope_layout(config, rope.mrope_section, rope.dim // 2)
        if "refused" in layout:
            report["mrope_refused"] = layout["refused"]
            report["warnings"].append(layout["refused"])
        else:
            report.update(mrope=_mrope(layout["axes"]),
                          mrope_interleaved=layout["interleaved"])
            report["warnings"].extend(layout["warnings"])
    supported = rope.extended_length or rope.max_position_embeddings or train
    with warnings.catch_warnings(record=True) as caught:  # MLA sizes left out
        warnings.simplefilter("always")
        report.update(_serving(config, rope, train, target, extended,
                               target_length or supported, engine, cache_dtype,
                               rope_config=global_config))
    for item in caught:
        if issubclass(item.category, listed):
            if str(item.message) not in report["warnings"]:
                report["warnings"].append(str(item.message))
        else:
            warnings.warn_explicit(item.message, item.category, item.filename,
                                   item.lineno)
    shown = set(report.get("transformers_warnings", []))  # listed there already
    report["warnings"] = [w for w in report["warnings"] if w not in shown]
    report["supported_length"] = supported
    report["serving_verdict"] = _verdict(report)
    report["engine_needs"] = _engine_needs(config, report)
    try:  # the engine's pair layout, factor and frequency schedule
        with warnings.catch_warnings():  # the report lists them already
            warnings.simplefilter("ignore")
            summary = engines.engine_summary(config, engine, max_model_len=max_model_len,
                                             n_ctx=max_model_len)
        report["engine_rope"] = {"engine": engine, **summary}
    except engines.EngineFailure as error:  # the engine's own code fails: a row
        report["engine_rope"] = {"engine": engine, "fails": str(error)}
    except ValueError as error:  # a model type the engine table does not hold
        report["engine_rope"] = {"unknown": str(error)}
    if engine != "transformers" and report.get("serving_verdict"):
        # the verdict describes transformers' schedule; the engine's is its own row
        report["serving_verdict"] = f"transformers: {report['serving_verdict']}"
    return report


#: Where a config without RoPE states the longest position it has.
_POSITION_LIMITS = ("max_position_embeddings", "n_positions", "n_ctx",
                    "max_sequence_length", "max_seq_len")


def _without_rope(config: Mapping, scheme: str, target_length: int | None,
                  engine: str, cache_dtype: str | None = None) -> dict:
    """The report's layer, softmax and serving keys for a config without RoPE
    (learned or sinusoidal positions, ALiBi, NoPE, attention-free and hybrid
    models): what it has instead, each layer's type, the scale attention is
    called with, the KV cache per layer type and the fixed state."""
    text, model_type = config_reader._text_config(config)
    out: dict = {"warnings": []}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            layers = per_layer.layer_layout(config)
        except ValueError as error:
            layers, out["layers_error"] = None, str(error)
        try:
            out["logit_factors"] = ([] if model_type in config_reader.ATTENTION_FREE
                                    else logit_factors(config, None, 1.0)[:1])
        except ValueError as error:
            out["logit_factors"] = []
            out["warnings"].append(f"softmax scale not known: {error}")
        limit = next((text[k] for k in _POSITION_LIMITS
                      if isinstance(text.get(k), int)), None)
        length = target_length or limit
        if engine == "sglang":
            out["kv_cache_not_covered"] = _SGLANG_KV
        elif length is not None and layers is not None:
            sized = _sized_kv_cache(config, length, engine, cache_dtype)
            if "kv_cache" in sized:
                out["kv_cache"] = sized["kv_cache"]
            else:
                out["warnings"].append(f"KV cache {sized['kv_cache_not_covered']}")
    out["warnings"] += list(dict.fromkeys(str(w.message) for w in caught))
    if layers is not None:
        entries = [{"index": x.index, "attention": x.attention, "window": x.window,
                    "rope": None, "temperature": x.temperature} for x in layers]
        out["layers"] = entries
        out["layer_summary"] = layer_summary(entries).replace(
            "no RoPE (NoPE)", "no RoPE" if scheme != "no positional encoding (NoPE)"
            else "no RoPE (NoPE)")
    out["position_limit"] = limit
    cache = out.get("kv_cache")
    if "learned" in scheme and limit:
        verdict = (f"{scheme}: the table has {limit:,} rows, so no position at or "
                   f"beyond {limit:,} exists; longer inputs need another model")
    elif scheme.startswith("no positions"):
        verdict = ("no positions and no keys or values: memory per sequence is the "
                   "fixed state, whatever the length")
    elif limit:
        verdict = (f"{scheme}: nothing in the positions stops at a length; the "
                   f"config allows {limit:,} tokens (max_position_embeddings), check "
                   f"the model still works beyond what it was trained on")
    else:
        verdict = f"{scheme}: the config states no length limit"
    if cache and cache.get("length"):
        verdict += (f". KV cache {cache['bytes_at_length'] / 2**30:,.4g} GiB per "
                    f"sequence at {cache['length']:,} tokens ({cache['engine']})")
    out["serving_verdict"] = verdict
    out["engine_needs"] = _engine_needs(config, out)
    return out


def _serving(config: Mapping, rope, train: int, target: int, extended,
             kv_length: int, engine: str, cache_dtype: str | None = None,
             rope_config: Mapping | None = None) -> dict:
    """The report's serving keys (see :mod:`posenc_lib.serving`); the
    frequencies are ``rope_config``'s (default ``config``: see
    ``logit_scale._global_config``)."""
    whole, config = config, (config if rope_config is None else rope_config)
    plain, _ = scaling.rope_parameters("default", rope.dim, rope.base,
                                       dtype=torch.float64)
    with warnings.catch_warnings():  # reported once, by inspect_config
        warnings.simplefilter("ignore", config_reader.UnknownRopeKeyWarning)
        warnings.simplefilter("ignore", scaling.RopeConfigWarning)
        short, _ = scaling.rope_from_config(config, seq_len=train, dtype=torch.float64)
    if kv_length != target:  # the serving numbers at the length served
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", config_reader.UnknownRopeKeyWarning)
            extended, _ = scaling.rope_from_config(config, seq_len=kv_length,
                                                   dtype=torch.float64)
    configured = extended.shape == (rope.dim // 2,)  # proportional: only some turn
    schedule = serving.frequency_schedule(rope.rope_type, plain, short)
    if rope.dynamic_params is not None:  # Hunyuan's alpha, 4.x layout
        cliff = rope.max_position_embeddings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            past, _ = scaling.rope_from_config(config, seq_len=2 * cliff,
                                               dtype=torch.float64)
        ratio = float(past[1] / past[0])
        jumped = ratio ** (-rope.dim / 2)
        schedule = {**schedule, "length_dependent": True, "cache": (
            f"transformers 4.57: static up to max_position_embeddings {cliff:,}; past "
            f"it dynamic_rope_update switches to plain dynamic NTK from rope_theta "
            f"(base {jumped:,.4g} at {2 * cliff:,} tokens instead of the alpha base): "
            f"every cached key's rotation is then wrong, keep prompts within "
            f"{cliff:,} tokens. transformers 5.x (rope_parameters) stays static")}
    return {"transformers_warnings": serving.transformers_warnings(whole),
            "frequencies": schedule,
            "angle_error": serving.angle_errors(
                rope.dim, rope.base, kv_length,
                frequencies=extended if configured else None),
            "angle_error_length": kv_length,
            "angle_error_frequencies": (f"{METHODS[rope.rope_type]} frequencies at "
                                        f"{kv_length:,} tokens" if configured
                                        else "plain RoPE frequencies"),
            **(_sized_kv_cache(whole, kv_length, engine, cache_dtype)
               if engine != "sglang" else {"kv_cache_not_covered": _SGLANG_KV})}


#: The KV row under ``--engine sglang``.
_SGLANG_KV = ("SGLang's KV-cache sizing is not transcribed here; see --engine vllm, "
              "llama.cpp or transformers")


def _check_cache_dtype(engine: str, cache_dtype: str | None) -> None:
    """``cache_dtype`` must be one the engine's cache takes (ValueError)."""
    if cache_dtype is None:
        return
    known = {"vllm": engines.VLLM_CACHE_DTYPES,
             "llama.cpp": engines.GGML_TYPE_SIZES}.get(engine)
    if known is None:
        raise ValueError(f"cache_dtype (--cache-dtype) is vLLM's --kv-cache-dtype or "
                         f"llama.cpp's -ctk/-ctv: give --engine vllm or llama.cpp, "
                         f"not {engine}")
    if not isinstance(cache_dtype, str) or cache_dtype not in known:
        raise ValueError(f"cache_dtype (--cache-dtype) must be one of "
                         f"{', '.join(known)} for {engine}, got {cache_dtype!r}")


def _sized_kv_cache(config: Mapping, length: int, engine: str,
                    cache_dtype: str | None = None) -> dict:
    """``{"kv_cache": ...}``, or ``{"kv_cache_not_covered": why}`` where the
    config does not say enough to size it (the rest of the report stands).

    transformers: :func:`posenc_lib.serving.kv_cache_bytes`. vLLM: the same
    at the bytes of ``cache_dtype`` (``posenc_lib.tools.engines.engine_kv_cache_bytes``)
    with the engine's page size and cache dtype added. llama.cpp:
    ``engine_kv_cache_bytes`` (its cells, K/V types, sliding-window cache), in
    the same keys."""
    try:
        plain = serving.kv_cache_bytes(config, length=length,
                                       engine="vllm" if engine == "vllm" else
                                       "transformers")
        if engine == "transformers" or plain is None:  # None: no layer count
            return {"kv_cache": plain}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
            sized = engines.engine_kv_cache_bytes(config, engine, n_ctx=length,
                                                  cache_dtype=cache_dtype)
        if engine == "vllm":
            cache = serving.kv_cache_bytes(config, length=length, engine=engine,
                                           bytes_per_value=sized["bytes_per_value"])
            cache.update(cache_dtype=sized["cache_dtype"], notes=sized["notes"],
                         page_size_bytes={k: v["page_size_bytes"] for k, v
                                          in sized["by_layer_type"].items()},
                         source=sized["source"])
            return {"kv_cache": cache}
        return {"kv_cache": _llama_cpp_cache(config, sized)}
    except ValueError as error:
        return {"kv_cache_not_covered": f"not sized: {error}"}


def _llama_cpp_cache(config: Mapping, sized: dict) -> dict:
    """``engine_kv_cache_bytes(..., "llama.cpp")`` in the keys of
    :func:`posenc_lib.serving.kv_cache_bytes` that the report reads."""
    by_type = {kind: {"layers": info["layers"],
                      "bytes_per_token": info["layers"] * (info["k_row_bytes"]
                                                           + info["v_row_bytes"]),
                      "window": info["window"],
                      "cap": info["cells"] if info["window"] else None, "kv": True}
               for kind, info in sized["by_layer_type"].items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", config_reader.DefaultValueWarning)
        layout = per_layer.layer_layout(config)
    for x in layout:  # the layers without attention: their state is not sized
        if x.attention in serving.NO_KV and x.attention != "shared_kv":
            info = by_type.setdefault(x.attention, {"layers": 0, "bytes_per_token": 0,
                                                    "window": None, "cap": None,
                                                    "kv": False})
            info["layers"] += 1
    return {"engine": "llama.cpp", "cache_dtype": sized["cache_dtype"],
            "cache_dtype_v": sized["cache_dtype_v"], "cells": sized["cells"],
            "bytes_per_token": sum(v["bytes_per_token"] for v in by_type.values()),
            "bytes_per_value": None,
            "kv_layers": sum(v["layers"] for v in by_type.values() if v["kv"]),
            "layers": len(layout), "formula": sized["formula"],
            "by_layer_type": by_type, "fixed_state": None, "notes": sized["notes"],
            "length": sized["n_ctx"], "bytes_at_length": sized["bytes"],
            "source": sized["source"]}


def _verdict(report: dict) -> str:
    """One line: the length the config supports, and what going beyond needs."""
    n, train = report["supported_length"], report["train_length"]
    kind = report["rope_type"]
    if report.get("train_length_from") == "window" and kind == "default":
        head = (f"no length limit from the rotation: every rotating layer attends "
                f"within {train:,} tokens, so the distances it rotates by never grow "
                f"with the input (the config states no length)")
    elif kind == "dynamic":
        head = (f"supported up to {n:,} tokens with plain frequencies; beyond, "
                f"dynamic NTK raises the base with the length, so keys cached before "
                f"the change need re-rotation or a fresh prefill")
    elif (report.get("model_type") or "").removesuffix("_text") in \
            config_reader.FIXED_BASE:
        head = (f"supported up to {n:,} tokens (max_position_embeddings: the "
                f"model's sinusoidal table has {n:,} rows); a longer input fails "
                f"in transformers (index out of range), and the class reads no "
                f"rope_scaling: going beyond needs a longer table and a check that "
                f"the model still retrieves there")
    elif kind == "default":
        head = (f"supported up to {n:,} tokens (max_position_embeddings, no "
                f"extension configured); beyond, needs a context extension in "
                f"rope_scaling (YaRN, say) and a check that the model still "
                f"retrieves there")
    else:
        factor = f" x{report['factor']:g}" if report["factor"] else ""
        source = (f"{report['method']}{factor} from L = {train:,}"
                  if report["extended_length"] else
                  f"max_position_embeddings, with {report['method']}{factor}")
        head = (f"supported up to {n:,} tokens ({source}); beyond, needs a larger "
                f"factor or another method, and the engine must apply this one as "
                f"configured")
    cache = report.get("kv_cache")
    if cache and cache["length"] == n:
        head += (f". KV cache {cache['bytes_at_length'] / 2**30:,.4g} GiB per "
                 f"sequence at {n:,} tokens ({cache['engine']})")
    return head


def _kv_engine_suffix(cache: dict) -> str:
    """The KV row's engine-specific tail: vLLM's blocks, pages and cache dtype;
    llama.cpp's cells and K/V types; the engine's notes."""
    if cache["engine"] == "vllm":
        pages = cache.get("page_size_bytes") or {}
        out = f" in blocks of {cache['block_size']} tokens"
        if cache.get("cache_dtype"):
            out += (f", --kv-cache-dtype {cache['cache_dtype']} "
                    f"({cache['bytes_per_value']} byte(s) a value)")
        if pages:
            out += ", pages of " + ", ".join(
                f"{_size(size)} ({ATTENTION.get(kind, kind)})"
                for kind, size in pages.items()) + " per layer"
    elif cache["engine"] == "llama.cpp":
        out = (f" in {cache['cells']:,} cells (n_ctx padded to 256), -ctk "
               f"{cache['cache_dtype']} -ctv {cache['cache_dtype_v']}")
    else:
        return ""
    return out + "".join(f"; {note}" for note in cache.get("notes") or [])


def _size(n: int) -> str:
    """``n`` bytes in KiB, MiB or GiB, four significant digits."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:,.4g} {unit}"
    return f"{n / 1024:,.4g} KiB"


def _engine_needs(config: Mapping, report: dict) -> list[str]:
    """What an engine must implement beyond RoPE: learned attention sinks,
    multi-token-prediction layers, and the fixed state of layers without KV."""
    text, model_type = config_reader._text_config(config)
    out = []
    if model_type == "gpt_oss":
        out.append("learned attention sinks: one learned logit per head joins each "
                   "softmax's denominator (GptOssAttention.sinks), not StreamingLLM's "
                   "kept first tokens; an engine without them computes other weights")
    if text.get("use_mtp") or text.get("num_mtp_modules"):
        out.append(f"{text.get('num_mtp_modules') or 'its'} multi-token-prediction "
                   f"module(s) (use_mtp, num_mtp_modules): transformers builds none; "
                   f"an engine that runs them for speculative decoding caches their "
                   f"keys and values too")
    mtp = text.get("num_nextn_predict_layers") or 0
    cache = report.get("kv_cache")
    if mtp:
        extra = ""
        if cache and cache["kv_layers"]:
            per = cache["bytes_per_token"] // cache["kv_layers"]
            extra = f", {mtp * per / 1024:,.4g} KiB per token more"
        out.append(f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers): "
                   f"transformers 4.57 builds none; an engine that runs them for "
                   f"speculative decoding caches their keys and values too{extra}")
    if cache and cache.get("fixed_state"):
        state = cache["fixed_state"]
        out.append(f"keep the fixed state of layers without KV, "
                   f"{_size(state['bytes'])} per sequence at any length, and update "
                   f"it per request: {state['what']}")
    elif cache and any(not info["kv"] for kind, info in cache["by_layer_type"].items()
                       if kind != "shared_kv"):
        out.append("layers without KV (linear attention, convolution or Mamba) keep a "
                   "fixed state per request, not sized here for this engine")
    return out


def _fmt_ranges(ranges: list) -> str:
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges) or "none"


def _fmt_strided(ranges: list) -> str:
    """Pair indices as runs of equal step: ``0-60 step 3, 61-63``."""
    idx = [i for a, b in ranges for i in range(a, b + 1)]
    runs, start = [], 0
    while start < len(idx):
        end = start
        step = idx[start + 1] - idx[start] if start + 1 < len(idx) else 1
        while end + 1 < len(idx) and idx[end + 1] - idx[end] == step:
            end += 1
        a, b = idx[start], idx[end]
        runs.append(f"{a}" if a == b else f"{a}-{b}" + (f" step {step}" if step > 1
                                                        else ""))
        start = end + 1
    return ", ".join(runs) or "none"


def format_report(report: dict) -> str:
    """The report of :func:`inspect_config` as a few lines of text."""
    text = _format_report(report)
    for version, reasons in (report.get("known_disagreements") or {}).items():
        unbuilt = reasons[0].startswith("the conformance sweep could not build")
        text += (f"  {'not verified':<19}transformers {version} "
                 + ("was not run on this model type: " if unbuilt else
                    "runs this model type differently from this report on its "
                    "default tiny model: ")
                 + f"{reasons[0]}"
                 + (f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else "")
                 + "; compare with --crosscheck\n")
    return text


def _format_report(report: dict) -> str:
    title = f"{report['name']} ({report.get('model_type') or 'unknown model_type'})"
    if report["scheme"] == "ALiBi":
        return (f"{title}\n  positions          ALiBi, no rotary embedding\n"
                f"  heads              {report['heads']} (slopes "
                f"{report['slope_min']:.3g} .. {report['slope_max']:.3g})\n"
                + _without_rope_rows(report))
    if report["scheme"] == "T5 relative buckets":
        enc, dec = report["encoder"], report["decoder"]
        return (f"{title}\n  positions          T5 relative buckets, no rotary embedding\n"
                f"  buckets            {report['num_buckets']}, max_distance "
                f"{report['max_distance']}\n"
                f"  encoder            bidirectional: {enc['past']} buckets for past "
                f"keys (distance 0 included), {enc['future']} for future ones; "
                f"{enc['exact_past']} exact, one for every distance >= "
                f"{enc['last_from']}\n"
                f"  decoder            causal: {dec['past']} buckets for past keys, "
                f"{dec['exact_past']} exact, one for every distance >= "
                f"{dec['last_from']}; future keys share bucket 0\n")
    if report["scheme"] != "rotary":
        return (f"{title}\n  positions          {report['scheme']}, no rotary "
                f"embedding\n" + _without_rope_rows(report))
    lines = [f"{title}, config layout: {report['layout']}"]

    def row(label: str, text: str) -> None:
        lines.append(f"  {label:<19}{text}")

    factor = f", factor {report['factor']:g}" if report["factor"] else ""
    row("method", f"{report['rope_type']} ({report['method']}{factor}), attention "
                  f"factor {report['attention_factor']:.6g}")
    base = f"base {report['base']:,.10g}"
    if report.get("effective_base"):
        base = (f"effective base {report['effective_base']:,.6g} (rope_theta "
                f"{report['base']:,.10g} x alpha^(d/(d-2)))")
    row("rotary dim", f"{report['rotary_dim']} of head_dim {report['head_dim']} "
                      f"({report['pairs']} pairs), {base}")
    row("pairs", "features 2i and 2i + 1 (interleaved)"
        if report["pair_layout"] == "interleaved"
        else "features i and i + d/2 (half split, rotate_half)")
    extended, train = report["extended_length"], report["train_length"]
    if report["train_length_from"] == "original_max_position_embeddings":
        lengths = f"L = {train:,} (original_max_position_embeddings, before extension)"
    elif report["train_length_from"] == "window":
        lengths = (f"L = {train:,} (the config states no length; every rotating "
                   f"layer attends within this window, so no distance reaches it)")
    else:
        lengths = f"L = {train:,} (max_position_embeddings, the length the config allows)"
    if extended is not None and extended == report["max_position_embeddings"]:
        lengths += f", L' = {extended:,} (max_position_embeddings)"
    elif extended:
        lengths += (f", L' = {extended:,} (factor x L; max_position_embeddings "
                    f"{report['max_position_embeddings']:,})")
    elif report["rope_type"] == "linear":
        lengths += "; the config names no length before its linear scaling"
    elif report["rope_type"] == "dynamic":
        lengths += ("; plain frequencies up to L, beyond it the base grows with "
                    "the current length")
    else:
        lengths += ", no extension configured"
    row("lengths", lengths)
    low, high = report["wavelength_extended"]
    low_t, high_t = report["wavelength_trained"]
    row("wavelengths", f"{low:.3g} .. {high:.3g} tokens" +
        ("" if (low, high) == (low_t, high_t) else
         f" (before extension: {low_t:.3g} .. {high_t:.3g})"))
    row("full turn within L", f"{report['full_turn_pairs']} of {report['pairs']} pairs "
                              f"(critical dimension {report['critical_dimension']})")
    where = f"at {report['target_length']:,} tokens"
    if report["target_length"] != extended:
        where += f" ({report['target_length'] / train:.3g} x L)"
    if report["window"]:
        where += (f", judged at the window {report['window']:,} (no distance "
                  f"above it occurs)")
    row("out of range", f"{report['out_of_range_count']} pairs {where}: "
                        f"{_fmt_ranges(report['out_of_range_pairs'])}")
    constant = math.prod(f["value"] for f in report["logit_factors"]
                         if f["value"] is not None)
    row("logit factors", f"{constant:.6g} in all on q·k (constant part)")
    for f in report["logit_factors"]:
        value = "" if f["value"] is None else f" = {f['value']:.6g}"
        row("", f"{f['name']}: {f['formula']}{value} ({f['source']})")
    if report["layer_summary"]:
        row("layers", report["layer_summary"])
        windowed = [e for e in report["layers"] if e["rope"] and e["window"]]
        for e in {(e["rope"]["kind"], e["window"]): e for e in windowed}.values():
            row("", f"{_attention_name(e)} layers (window {e['window']:,}): "
                    f"{e['out_of_range_count']} pairs out of range at "
                    f"{e['judged_at']:,}")
    for message in report.get("warnings", []):
        row("warning", message)
    _serving_rows(report, row)
    if report["mrope"]:
        fmt = _fmt_strided if report["mrope_interleaved"] else _fmt_ranges
        row("M-RoPE axes", ("interleaved: " if report["mrope_interleaved"] else
                            "contiguous: ") + "; ".join(
            f"{axis} {info['pairs']} pairs ({fmt(info['ranges'])})"
            for axis, info in report["mrope"].items()))
    return "\n".join(lines) + "\n"


def _without_rope_rows(report: dict) -> str:
    """The layer, softmax and serving rows of a report without RoPE."""
    lines: list[str] = []

    def row(label: str, text: str) -> None:
        lines.append(f"  {label:<19}{text}")

    if report.get("layer_summary"):
        row("layers", report["layer_summary"])
    for f in report.get("logit_factors", []):
        row("softmax scale", f"{f['value']:.6g} = {f['formula']} ({f['source']})")
    for message in report.get("warnings", []):
        row("warning", message)
    _serving_rows(report, row)
    return "".join(line + "\n" for line in lines)


def _serving_rows(report: dict, row) -> None:
    for message in report.get("transformers_warnings", []):
        row("transformers warns", message)
    freq = report.get("frequencies")
    if freq:
        row("frequencies", freq["cache"])
        if report["rope_type"] not in ("default", "dynamic"):
            row("short prompts", f"{freq['short_prompt_pairs_changed']} of "
                f"{report['pairs']} pairs differ from the pre-trained frequencies at "
                f"every length, short prompts included (a static method applies "
                f"to every prompt)" if report["rope_type"] != "longrope" else
                f"{freq['short_prompt_pairs_changed']} of {report['pairs']} pairs "
                f"run the short factors up to L, not the pre-trained frequencies")
    errors = report.get("angle_error")
    if errors:
        row("angle error", f"max |cos, sin error| just below "
            f"{report['angle_error_length']:,}"
            f" ({report['angle_error_frequencies']}): " + ", ".join(
                f"{name} angles " + ("overflow" if value is None else f"{value:.2g}")
                for name, value in errors.items()))
    cache = report.get("kv_cache")
    if cache:
        parts = "; ".join(
            f"{ATTENTION.get(kind, kind)} {info['layers']} layers "
            + (f"{info['bytes_per_token'] / 1024:,.4g} KiB/token" if info["kv"]
               else "no KV")
            + (f", window {info['window']:,} (keeps {info['cap']:,} tokens"
               + (", allocated at the first token)" if info.get("preallocated")
                  else ")")
               if info["window"] and info["cap"] else
               f", window {info['window']:,}" if info["window"] else "")
            for kind, info in cache["by_layer_type"].items())
        row("KV cache", f"{cache['bytes_per_token'] / 1024:,.4g} KiB per token "
            f"({cache['engine']}"
            + (f" {cache['transformers_version']}" if cache.get("transformers_version")
               else "") + f": {cache['formula']}; {parts}); "
            f"{cache['bytes_at_length'] / 2**30:,.4g} GiB at {cache['length']:,} "
            f"tokens" + _kv_engine_suffix(cache))
        if cache.get("fixed_state"):
            state = cache["fixed_state"]
            row("", f"plus a fixed state of {_size(state['bytes'])} per sequence: "
                    f"{state['what']}")
    elif "kv_cache" in report:
        row("KV cache", "needs num_hidden_layers, which the config omits")
    elif report.get("kv_cache_not_covered"):
        row("KV cache", report["kv_cache_not_covered"])
    if report.get("serving_verdict"):
        row("serving", report["serving_verdict"])
    for need in report.get("engine_needs", []):
        row("engine must", need)
    rope_facts = report.get("engine_rope")
    if rope_facts and "fails" in rope_facts:
        row("engine RoPE", f"{rope_facts['engine']}: {rope_facts['fails']}")
    elif rope_facts and "unknown" not in rope_facts and rope_facts.get("rope_type"):
        _engine_rows(row, rope_facts)


def _engine_rows(row, facts: dict) -> None:
    """The engine's RoPE rows, each naming the engine: pairs, factor and
    schedule; DeepSeek's softmax factor; its frequencies against
    transformers'."""
    e, factor = facts["engine"], facts["factor"]
    row("engine RoPE",
        f"{e}: pairs {facts['pairs']}; factor {factor:.6g} on cos and sin "
        f"(logits x {factor**2:.6g}); frequencies change: {facts['when']}"
        if isinstance(factor, float) else
        f"{e}: pairs {facts['pairs']}; frequencies change: {facts['when']}")
    if facts.get("logit_scale", 1.0) != 1.0:
        row("engine softmax",
            f"{e}: scale x {facts['logit_scale']:.6g} (mscale(factor, mscale_all_dim)^2, "
            f"on top of the factor on cos and sin)")
    freq = facts.get("frequencies")
    if freq and e != "transformers":
        notes = "; ".join(facts.get("notes") or [])
        if freq.get("engine_pairs") is not None:
            said = (f"rotates {2 * freq['engine_pairs']} features of each head where "
                    f"transformers rotates {2 * freq['pairs']}, so every frequency "
                    f"differs")
        elif freq["pairs_differ"]:
            said = (f"differ from transformers' in {freq['pairs_differ']} of "
                    f"{freq['pairs']} pairs, by up to {freq['max_ratio']:.4g}x")
        else:
            said = "transformers' own, within float32 rounding"
        row("engine freqs",
            f"{e}: " + said
            + (f" ({notes})" if notes else "") + f"; computed by {facts['via']}")


def crosscheck_vllm(config: Mapping, report: Mapping, *,
                    max_model_len: int | None = None) -> tuple[bool, str]:
    """``--crosscheck --engine vllm``: vLLM 0.33.0's own rotary embedding
    (vendored, :func:`posenc_lib.tools.engines.vllm.vllm_rope`) against
    transformers' cos and sin (its float32 arithmetic: one product per angle;
    its frequencies for its default request, as the report compares them), at
    positions up to the report's length, and against the report's claim that
    vLLM's frequencies are, or are not, transformers'.

    Tolerance per coefficient, from float32 rounding: each side rounds the
    angle ``m theta`` once (``u |m theta|``), the frequencies may differ by
    ``8 u theta`` (Llama 3's and LongRoPE's formulas, a few roundings; 0 for
    the others), cos and sin are 1-ulp kernels (``2u`` each side), and the
    factor rounds once: ``f (2u |m theta| + 8u |m| theta + 6u)``. Positions
    are limited to where that bound stays below 1/4 for every pair; the line
    says so when that cuts the report's length.

    Returns:
        ``(ok, text)``: ``ok`` is false when a pair the report calls equal to
        transformers' exceeds the bound, or one it calls different does not.
    """
    import torch

    from .. import scaling

    u = 2.0 ** -24
    run0 = engines.vllm_rope(config, max_model_len=max_model_len)
    if run0 is None:
        return True, ("crosscheck vllm: vLLM runs no RoPE of its own for this model "
                      "(Transformers backend, or none)")
    length = int(report.get("supported_length") or 2)
    theta_max = float(run0["inv_freq"].abs().max())
    reach = int(0.25 / ((10 * u) * theta_max))
    last = max(1, min(length - 1, reach))
    positions = sorted({1, last // 3, (2 * last) // 3, last})
    run = engines.vllm_rope(config, max_model_len=max_model_len, positions=positions)
    half = run["inv_freq"].numel()
    rows = run["rows"][2:]
    with warnings.catch_warnings():  # transformers' default request, as the report's
        warnings.simplefilter("ignore")
        tf_inv, tf_factor = scaling.rope_from_config(config, reference="transformers",
                                                     dtype=torch.float32)
    claimed_equal = (report.get("engine_rope", {}).get("frequencies") or {}).get(
        "pairs_differ", 0) == 0 if report.get("engine_rope", {}).get("engine") == "vllm" else None
    if tf_inv.numel() != half:  # a different rotary share: nothing to compare pairwise
        ok = claimed_equal is False
        return ok, (f"crosscheck vllm: vLLM 0.33.0 {run['class']} (vendored, run) "
                    f"rotates {2 * half} features of each head, transformers "
                    f"{2 * tf_inv.numel()} (the report says its frequencies "
                    f"{'equal' if claimed_equal else 'differ from'} transformers'): "
                    f"{'as reported' if ok else 'CONTRADICTS THE REPORT'}")
    m = torch.tensor(positions, dtype=torch.float32)[:, None]
    angle = m * tf_inv.float()[None, :]
    tf_rows = torch.cat((angle.cos() * tf_factor, angle.sin() * tf_factor), dim=-1)
    mt = m.double() * tf_inv.double()[None, :]
    bound = tf_factor * (2 * u * mt + 8 * u * mt + 6 * u)
    bound = torch.cat((bound, bound), dim=-1)
    excess = ((rows.double() - tf_rows.double()).abs() / bound).max().item()
    within = excess <= 1
    ok = within if claimed_equal in (True, None) else not within
    cut = (f"; positions cut to {last:,} (beyond it the float32 bound exceeds 1/4)"
           if last < length - 1 else "")
    return ok, (f"crosscheck vllm: vLLM 0.33.0 {run['class']} (vendored, run) vs "
                f"transformers' float32 cos/sin at positions {positions}: max |diff| / "
                f"bound = {excess:.3g} ({half} pairs; the report says its frequencies "
                f"{'equal' if claimed_equal else 'differ from'} transformers'){cut}: "
                f"{'as reported' if ok else 'CONTRADICTS THE REPORT'}")


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one ``error: ...`` line (exit 2), as
    every other failure of the command line is."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def _length_arg(text: str) -> int:
    """``--target-length``: an integer (``131072``, ``131_072`` or ``1.31072e5``)
    from 1 to :data:`posenc_lib._validate.MAX_LENGTH`."""
    try:
        value = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not (math.isfinite(number) and number.is_integer()):
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        value = int(number)
    try:
        return _validate.length("--target-length", value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _front_door(error: BaseException, source) -> str:
    """The one line the command line prints for ``error``. A ``ValueError``
    names the field or file already; anything else (a ``TypeError`` or
    ``OverflowError`` from a value no check foresaw, an ``OSError``, a
    ``RecursionError``, a ``MemoryError``) is named with its type and the
    config it came from, so that it can be reported."""
    if isinstance(error, ValueError):
        return str(error)
    if isinstance(error, OSError):
        where = error.filename if error.filename is not None else source
        return f"cannot read {where}: {error.strerror or error}"
    if isinstance(error, RecursionError):
        return (f"{source} nests its fields too deeply to read (more levels than "
                f"Python's recursion limit, {sys.getrecursionlimit():,})")
    return (f"{source}: a value of this config could not be used "
            f"({type(error).__name__}: {error}); check its fields' types and ranges")


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m posenc_lib inspect CONFIG.json|MODEL [--json]
    [--target-length N] [--engine transformers|vllm|sglang|llama.cpp]
    [--max-model-len N] [--baseline SHIPPED] [--crosscheck [--python PATH]]``.

    Returns 0, or 2 for a config (or a cross-check) that cannot be read, or 1
    when ``--crosscheck`` finds a mismatch."""
    parser = _Parser(
        prog="python -m posenc_lib inspect",
        description="Report what a model's positional set-up does, from its config.json.")
    parser.add_argument("source", nargs="?",
                        help="path to a config.json or a model directory, or a "
                             "model name (see --list)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--target-length", type=_length_arg, default=None,
                        help="length at which to count pairs out of range (an "
                             f"integer, 1 to 2**53 = {_validate.MAX_LENGTH:,})")
    parser.add_argument("--engine", choices=ENGINES, default="transformers",
                        help="whose KV cache and RoPE conventions to report (vllm, "
                             "sglang: vLLM 0.33.0's and SGLang 0.5.23's own rotary "
                             "code, vendored and run; llama.cpp: a model of its "
                             "source that make engines checks against a build; KV "
                             "caches sized for transformers, vllm and llama.cpp)")
    parser.add_argument("--cache-dtype", default=None, metavar="TYPE",
                        help="the engine's KV-cache type: vLLM's --kv-cache-dtype "
                             "(auto, fp8, fp8_e4m3, fp8_e5m2, ...) or llama.cpp's "
                             "-ctk/-ctv (f16, q8_0, q4_0, ...)")
    parser.add_argument("--max-model-len", type=int, default=None,
                        help="the context the engine serves (vLLM's --max-model-len, "
                             "llama.cpp's -c): LongRoPE's factors are chosen from it "
                             "once; default max_position_embeddings")
    parser.add_argument("--crosscheck", action="store_true",
                        help="build a tiny model of the config's class with the "
                             "installed transformers and compare every layer's "
                             "cos/sin, the attention scaling and the cache bytes "
                             "with this report")
    parser.add_argument("--python", default=None, metavar="PATH",
                        help="with --crosscheck: run the tiny model with this "
                             "interpreter (a venv with transformers 5.x, say)")
    parser.add_argument("--baseline", default=None, metavar="SHIPPED",
                        help="the config the model shipped with (a config.json or a "
                             "model name): compare this config's frequencies and "
                             "logit factor with the ones it was trained with")
    parser.add_argument("--list", action="store_true", help="list the known models")
    args = parser.parse_args(argv)
    if args.python is not None and not args.crosscheck:
        parser.error("--python runs the cross-check in another interpreter: give "
                     "--crosscheck too")
    if args.list:
        print("\n".join(model_names()))
        return 0
    if args.source is None:
        parser.error(f"give a config.json or a model name; known models: "
                     f"{', '.join(model_names())}")
    try:
        name, config = load_config(args.source)
        report = inspect_config(config, target_length=args.target_length, name=name,
                                engine=args.engine, max_model_len=args.max_model_len,
                                cache_dtype=args.cache_dtype)
        text = json.dumps(report, indent=1) + "\n" if args.json else \
            format_report(report)
    except Exception as error:  # the front door: one line, exit 2, never a traceback
        print(f"error: {_front_door(error, args.source)}", file=sys.stderr)
        return 2
    if args.baseline is not None:
        try:
            _, shipped = load_config(args.baseline)
            against = compare_to_baseline(config, shipped,
                                          target_length=args.target_length)
        except Exception as error:  # as above, naming the baseline
            print(f"error: --baseline: {_front_door(error, args.baseline)}",
                  file=sys.stderr)
            return 2
        if args.json:
            report = {**report, "baseline": against}
            text = json.dumps(report, indent=1) + "\n"
        else:
            text += format_baseline(against)
    print(text, end="")
    if args.crosscheck:
        from . import crosscheck

        try:
            result = crosscheck.crosscheck(config, python=args.python)
        except (ValueError, ImportError) as error:
            print(f"crosscheck error: {error}", file=sys.stderr)
            return 2
        except Exception as error:  # as above: one line, exit 2
            print(f"crosscheck error: {_front_door(error, args.source)}",
                  file=sys.stderr)
            return 2
        print(crosscheck.format_result(result), end="")
        ok = result["ok"]
        if args.engine == "vllm":
            engine_ok, text = crosscheck_vllm(config, report, max_model_len=args.max_model_len)
            print(text)
            ok = ok and engine_ok
        return 0 if ok else 1
    return 0


def crosscheck_main(argv: Sequence[str] | None = None) -> int:
    """``python -m posenc_lib crosscheck CONFIG|MODEL [--python PATH]
    [--tokens N]``: the inspector's report, then the cross-check (with
    ``--python``, the tiny model runs in that interpreter). Returns 0 when
    they agree, 1 on a mismatch, 2 when the check cannot run."""
    from . import crosscheck

    parser = argparse.ArgumentParser(prog="python -m posenc_lib crosscheck",
                                     description=crosscheck_main.__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", help="a config.json, a model directory "
                        "or a model name (python -m posenc_lib inspect --list)")
    parser.add_argument("--python", default=None, help="the interpreter that builds "
                        "and runs the tiny model (e.g. a transformers 5.x venv)")
    parser.add_argument("--tokens", type=int, default=10)
    parser.add_argument("--stdin-json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.stdin_json:  # the child side of --python: config in, result out
        print(json.dumps(crosscheck.crosscheck(json.load(sys.stdin),
                                                tokens=args.tokens)))
        return 0
    if args.source is None:
        parser.error("give a config.json or a model name")
    try:
        name, config = load_config(args.source)
        print(format_report(inspect_config(config, name=name)), end="")
        result = crosscheck.crosscheck(config, tokens=args.tokens, python=args.python)
    except (ValueError, ImportError) as error:
        print(f"crosscheck error: {error}", file=sys.stderr)
        return 2
    print(crosscheck.format_result(result), end="")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
