"""The record :func:`diagnose_rope` and :func:`diagnose_inv_freq` return
(:class:`Diagnosis`), the codes :func:`diagnose_rope` can find, in the order it
lists them (:data:`CODES`), and the last phase: assembling the findings.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

#: The findings :func:`diagnose_rope` can return, in the order it lists them.
CODES = ("positions-ignored", "layout", "cos-sin-swapped", "rotation-reversed",
         "position-offset", "position-map", "frequency-reversed", "frequency-exponent",
         "frequency-dtype", "frequency", "base", "scaling", "attention-factor", "positions-precision",
         "partial-rotary", "pair-block", "pass-through", "not-rope", "not-fitted")


@dataclass(frozen=True)
class Diagnosis:
    """What :func:`diagnose_rope` or :func:`diagnose_inv_freq` found.

    Attributes:
        findings: the codes of the bugs found (see :data:`CODES` and
            :data:`INV_FREQ_CODES`); empty when the implementation is correct
            within float32 rounding.
        explanation: plain sentences: what was found, the evidence, the
            fitted values and the fix.
        fitted: the fitted values (layout, rotated features, base, exponent,
            sign, position precision, largest angle error), for programs.
    """

    findings: list
    explanation: str
    fitted: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """``True`` when nothing was found."""
        return not self.findings

    def __str__(self) -> str:
        head = "findings: " + (", ".join(self.findings) if self.findings else "none")
        body = "\n".join(textwrap.fill(line, 88) for line in self.explanation.split("\n"))
        return f"{head}\n{body}"


@dataclass
class _Fit:
    findings: list
    lines: list
    fitted: dict


def _order(codes):
    order = {code: k for k, code in enumerate(CODES)}
    return sorted(set(codes), key=order.__getitem__)


def _not_rope(fit: _Fit, why: str) -> Diagnosis:
    fit.lines.append(f"Not RoPE: {why}. None of the known bugs ("
                     + ", ".join(CODES[:-1]) + ") explains it.")
    fit.fitted["not_rope"] = why
    return Diagnosis(["not-rope"], "\n".join(fit.lines), fit.fitted)


def _finish(fit: _Fit) -> Diagnosis:
    order = {code: k for k, code in enumerate(CODES)}
    findings = sorted(set(fit.findings), key=order.__getitem__)
    return Diagnosis(findings, "\n".join(fit.lines), fit.fitted)
