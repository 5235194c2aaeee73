"""Check your own RoPE: what is wrong with it, fitted from its outputs.

:func:`diagnose_rope` treats a user's ``fn(x, positions)`` as a black box.
RoPE is linear in ``x``, so feeding the ``dim`` unit vectors at once (as a
batch) reads off the whole matrix ``M(p)`` that ``fn`` applies at each probed
position ``p``. Everything is then *fitted* from those matrices, not matched
against a list of known mutants:

1. **which features rotate together**: the off-diagonal entries of ``M(p)``
   give each feature's partner, hence the layout (``(i, i + r/2)`` for
   ``"half"``, ``(2i, 2i + 1)`` for ``"interleaved"``) and the number ``r`` of
   rotated features;
2. **the angle of every pair at every position**, from its 2x2 block; its
   sign says which way the pair turns;
3. **the frequency of every pair**, by unwrapping the angle over positions
   0..63 and refining it at the powers of two up to 4096 (which every float
   format holds exactly), then the geometric ladder ``θ_i = exp(a·i)`` through
   them, whose slope ``a = -(2/d)·ln(base)`` gives the base, or shows a wrong
   exponent (``i/d``: half the slope);
4. **the positions ``fn`` really used**, at positions that bfloat16 (above
   256) and float16 (above 2048) cannot hold: the significand width whose
   rounding reproduces the angles.

Before that, ``fn`` is called with the positions shifted and permuted (a
``fn`` that rotates by the index in the sequence ignores them), the common
length of the rotated features is read off (the attention factor of a scaled
RoPE) and a rotation already applied at position 0 is taken out and
explained (``M(p) = R(p + c)``: a position offset ``c``; a quarter turn with
the rotation reversed: cos and sin swapped). Ladders that the geometric fit
cannot read (flat, rising, reversed, or a scaled RoPE's and its known bugs)
are tested directly.

The fitted model is simulated and compared with every probed matrix; what it
does not reproduce is reported as ``"not-rope"``. ``fn`` is clean only when
it also reproduces the intended RoPE (``base``, ``layout``, ``rotary_dim``,
``rope_scaling``) at every probed position.

:func:`diagnose_inv_freq` does the same for the ``inv_freq`` a user's code
computes for a model's ``config.json``: it names the known variant or known
bug (the book's mutation catalogue) that reproduces it.

Run from a shell::

    python -m posenc_lib diagnose path/to/module.py:function --dim 128 \\
        --base 500000 --layout half
    python -m posenc_lib diagnose path/to/module.py:function \\
        --config path/to/config.json

The package, by phase: ``structure`` (probing ``fn``: calls, shapes, which
features rotate together, the angle of every pair), ``fit`` (the frequency fit
and the position map), ``explanation`` (which known variant or bug reproduces
what was fitted), ``findings`` (the :class:`Diagnosis` and the order of the
codes), ``messages`` (``MESSAGES[code]``, the text of every code); the entry
points ``rope_fn`` (:func:`diagnose_rope`) and ``inv_freq``
(:func:`diagnose_inv_freq`); the command line ``cli``.
"""

from __future__ import annotations

from . import explanation as _explanation
from . import findings as _findings
from .cli import main
from .findings import Diagnosis
from .inv_freq import diagnose_inv_freq
from .messages import MESSAGES  # noqa: F401  (the table of texts)
from .rope_fn import diagnose_rope
from .structure import round_significand

#: The findings :func:`diagnose_rope` can return, in the order it lists them
#: (defined in ``findings``; their texts are ``MESSAGES[code]``).
CODES = _findings.CODES

#: What :func:`diagnose_inv_freq` can name: known variants (another rope_type
#: than the config's) and known bugs (mostly the book's mutation catalogue),
#: each with its text from ``MESSAGES`` (defined in ``explanation``).
INV_FREQ_CODES = _explanation.INV_FREQ_CODES

__all__ = ["CODES", "INV_FREQ_CODES", "Diagnosis", "diagnose_rope", "diagnose_inv_freq",
           "round_significand", "main"]
