"""Leave out one field a config class fills in, and compare the library's
reading of the shorter config with its reading of the whole one (used by
``tests/test_class_defaults.py``; see ``scripts/class_defaults.py``)."""

from __future__ import annotations

import warnings

import torch

from posenc_lib import scaling, serving

#: The fields that fix the global rotary frequencies (4.x and 5.x names).
FIELDS = ("rope_scaling", "rope_parameters", "rope_theta", "partial_rotary_factor",
          "head_dim", "rotary_pct", "rotary_emb_base", "qk_rope_head_dim")


def _read(config: dict, version: str | None = None, layer: int | None = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return scaling.rope_from_config(config, dtype=torch.float64, layer=layer,
                                            transformers_version=version)
        except ValueError as error:
            return error


def problems(full: dict, version: str | None = None) -> dict[str, str]:
    """``{field: what went wrong}`` over :data:`FIELDS`; ``{"*": reason}`` when
    the library refuses the class's whole default config. Both configs are
    read as transformers ``version`` reads them (default: the installed one)."""
    layer = None
    whole = _read(full, version)
    if isinstance(whole, ValueError) and "with layer=i" in str(whole):
        # one rope_parameters entry per layer type and none for full_attention
        # (Dots 3 Note): the first layer's frequencies, which are asked for so
        layer = 0
        whole = _read(full, version, layer)
    if isinstance(whole, ValueError):
        return {"*": f"refused: {whole}"[:200]}
    found = {}
    for field in FIELDS:
        if full.get(field) is None:
            continue  # the class leaves it unset: nothing to fill in
        short = _read({k: v for k, v in full.items() if k != field}, version, layer)
        if isinstance(short, ValueError):
            found[field] = f"refused: {short}"[:200]
        elif (whole is None) != (short is None):
            found[field] = f"rotary {whole is not None} vs {short is not None}"
        elif whole is not None and not (
                whole[0].shape == short[0].shape and torch.equal(whole[0], short[0])
                and whole[1] == short[1]):
            found[field] = (f"inv_freq {tuple(short[0].shape)} vs "
                            f"{tuple(whole[0].shape)}, attention factor "
                            f"{short[1]} vs {whole[1]}")
    return found


def _kv_heads(config: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return serving.cache_head(config)
        except ValueError as error:
            return error


def kv_problem(full: dict) -> str | None:
    """What goes wrong when ``num_key_value_heads`` is left out of the class's
    default config (the class fills in the stored value), or ``None``."""
    if full.get("num_key_value_heads") is None:
        return None
    whole = _kv_heads(full)
    if isinstance(whole, ValueError):
        return None  # the library refuses the whole config: not this field's doing
    short = _kv_heads({k: v for k, v in full.items() if k != "num_key_value_heads"})
    if isinstance(short, ValueError):
        return f"refused: {short}"[:200]
    if short != whole:
        return (f"key heads {short.get('kv_heads')} vs {whole.get('kv_heads')} "
                f"the class fills in")
    return None
