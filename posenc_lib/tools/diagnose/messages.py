"""``MESSAGES[code]``: the one-line text of every finding code, in one table.

:func:`~posenc_lib.tools.diagnose.diagnose_rope` returns codes from
:data:`~posenc_lib.tools.diagnose.CODES`;
:func:`~posenc_lib.tools.diagnose.diagnose_inv_freq` returns codes from
:data:`~posenc_lib.tools.diagnose.INV_FREQ_CODES`, whose values (the text
``diagnose_inv_freq`` prints after each code it names) are read from this
table. A code both entry points can return (``"frequency-exponent"``,
``"base"``) has one text. The sentences that carry fitted numbers (which
pair, which base, the fix) are built by the phase that fits them; a message
here may hold ``{name}`` placeholders, which every use fills with
``.format(name=...)`` (``tests/test_diagnose_messages.py`` checks that every
code the package can return has a message, that every message's code is
returned somewhere, and the placeholders).
"""

from __future__ import annotations

__all__ = ["MESSAGES"]

MESSAGES = {
    # -- diagnose_rope ---------------------------------------------------------------
    "positions-ignored": "positions ignored: fn rotates by the index in the sequence",
    "layout": "the pairs rotated together are not the intended layout's",
    "cos-sin-swapped": "cos and sin swapped",
    "rotation-reversed": "the rotation turns the other way (sin with the wrong sign)",
    "position-offset": "every position shifted by a constant",
    "position-map": "positions mapped to others (wrapped, clamped or tiled cache)",
    "frequency-reversed": "the frequency ladder runs the wrong way",
    "frequency-exponent": "exponent i/d instead of 2i/d",
    "frequency-dtype": "frequencies computed in a low-precision dtype",
    "frequency": "frequencies that no RoPE ladder explains",
    "base": "a base other than the config's rope_theta",
    "scaling": "frequencies are not those of the intended rope scaling",
    "attention-factor": "the rotated features are not scaled by the attention factor",
    "positions-precision": "positions rounded to a low-precision float",
    "partial-rotary": "not the intended number of rotated features",
    "pair-block": "a pair's 2x2 block is not a rotation",
    "pass-through": "features meant to pass through are changed",
    "not-rope": "fn is not a RoPE the fit can explain",
    "not-fitted": "the fit could not run on fn",
    # -- diagnose_inv_freq: known variants (another rope_type) and known bugs --------
    "scaling-ignored": "the config's rope scaling ignored: plain RoPE frequencies",
    "partial-rotary-ignored": ("partial_rotary_factor ignored: frequencies for the "
                               "whole head"),
    "linear-factor-multiplied": "linear scaling multiplies θ_i by factor instead of "
                                "dividing",
    "ntk-exponent-dropped": "NTK-aware base without the exponent d/(d-2)",
    "yarn-ramp-inverted": "YaRN ramp inverted: fast pairs interpolated, slow kept",
    "yarn-clamp-half-dim": "YaRN's correction range clamped at dim//2 - 1 instead of "
                           "dim - 1",
    "yarn-no-truncate": "YaRN's correction range not rounded outwards (truncate)",
    "yarn-original-ignored": "YaRN reads max_position_embeddings, not "
                             "original_max_position_embeddings",
    "llama3-smoothing-inverted": "Llama 3 smoothing weights swapped",
    "unknown": "none of the known variants or bugs reproduces it",
}
