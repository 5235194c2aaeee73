"""Mutation check: do the unit tests and the book's own cells catch planted bugs?

Each :class:`Mutant` is one realistic bug from this field (the kind that ships
in public code), written as an exact text substitution in one file of
``posenc_lib``. For every mutant the harness

1. copies the working tree (tracked and untracked, not ignored files) to a
   temporary folder and applies the substitution there, never in the checkout;
2. runs the unit tests on the copy (``pytest -x -m "not browser and not
   mutation" tests``) with ``PYTHONPATH`` pointing at the copy, so that
   ``import posenc_lib`` loads the mutant and not the editable install;
3. runs nbval on the notebooks of the chapter(s) that derive the mutated
   formula, alone, so that only the chapter's *own* cells can catch it.

A mutant is *caught* by a step when that step fails. The un-mutated copy is run
first and must pass both steps, or the harness stops. Usage::

    make mutants                          # every mutant, prints the table
    python tests/helpers/mutation.py --list       # the catalogue
    python tests/helpers/mutation.py --only rope-conj-dropped alibi-slope-popular

The full run takes tens of minutes, so it is not part of ``make test``;
``tests/test_mutation.py`` runs one mutant end to end and checks that every
mutant's text still occurs exactly once in the library, so the harness cannot
rot silently.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


@dataclass(frozen=True)
class Mutant:
    """One planted bug: replace ``old`` (which must occur exactly once) by ``new``.

    Args:
        id: short name, used on the command line.
        path: the mutated file, relative to the repository root.
        old: the exact text replaced; must occur once in ``path``.
        new: its replacement.
        chapters: the notebooks (``book/<name>.ipynb``) whose own cells should
            catch the bug.
        bug: the real-world mistake the mutant imitates.
    """

    id: str
    path: str
    old: str
    new: str
    chapters: tuple
    bug: str


def _m(id, path, old, new, chapters, bug):
    return Mutant(id, f"posenc_lib/{path}", old, new, tuple(chapters), bug)


#: The catalogue. Keep each substitution minimal: one realistic slip.
MUTANTS: tuple[Mutant, ...] = (
    # ---- attention (chapter 1) --------------------------------------------------------
    _m("causal-excludes-self", "attention.py",
       "    return j <= i\n", "    return j < i\n",
       ["01_why_positions"], "causal mask off by one: a query may not see itself"),
    _m("causal-cache-offset", "attention.py",
       "unsqueeze(1) + (n_k - n_q)", "unsqueeze(1)",
       ["01_why_positions"], "queries placed first instead of last when keys are cached"),
    _m("attention-scale-dk", "attention.py",
       "scale = 1.0 / math.sqrt(q.shape[-1])", "scale = 1.0 / q.shape[-1]",
       ["01_why_positions"], "scores scaled by 1/d instead of 1/sqrt(d)"),
    # ---- absolute encodings (chapter 2) -------------------------------------------------
    _m("sinusoid-exponent-i", "absolute.py",
       "base ** (-2.0 * i / dim)", "base ** (-1.0 * i / dim)",
       ["02_absolute"], "frequency exponent i/d instead of 2i/d"),
    _m("sinusoid-sin-cos-swapped", "absolute.py",
       "table[..., 0::2] = torch.sin(angles)", "table[..., 0::2] = -torch.sin(angles)",
       ["02_absolute"], "sign slip in the sine features"),
    _m("sinusoid-positions-float16", "absolute.py",
       "p = torch.as_tensor(positions).to(dtype)",
       "p = torch.as_tensor(positions).to(torch.float16).to(dtype)",
       ["02_absolute"], "positions cast to a low-precision dtype before the angles"),
    # ---- relative encodings (chapter 3) -------------------------------------------------
    _m("relative-sign-flipped", "relative.py",
       "return key[None, :] - query[:, None]", "return query[:, None] - key[None, :]",
       ["03_relative"], "relative position query - key instead of key - query"),
    _m("rel-shift-off-by-one", "relative.py",
       "return padded[..., 1:, :].reshape(*batch, n_q, n_r)",
       "return padded[..., :-1, :].reshape(*batch, n_q, n_r)",
       ["03_relative"], "Transformer-XL's rel_shift keeps the wrong rows (off by one)"),
    _m("t5-exact-log-boundary", "relative.py",
       "max_exact = num_buckets // 2  # distances", "max_exact = num_buckets // 4  # distances",
       ["03_relative"], "T5's exact/log bucket boundary at N/4 instead of N/2"),
    _m("t5-bidirectional-side", "relative.py",
       "buckets += (relative_position > 0).to(torch.int64) * num_buckets",
       "buckets += (relative_position < 0).to(torch.int64) * num_buckets",
       ["03_relative"], "T5's bidirectional buckets put past and future on the wrong side"),
    _m("shaw-clip-short", "relative.py",
       "return relative_position.to(torch.int64).clamp(-k, k) + k",
       "return relative_position.to(torch.int64).clamp(-k + 1, k - 1) + k",
       ["03_relative"], "Shaw's clip one short: offsets +-(k - 1) already share the end labels"),
    _m("deberta-index-sign", "relative.py",
       "return (k - relative_position).clamp(0, 2 * k - 1)",
       "return (k + relative_position).clamp(0, 2 * k - 1)",
       ["03_relative"], "DeBERTa's index from key minus query instead of query minus key"),
    # ---- RoPE (chapter 4) ---------------------------------------------------------------
    _m("rope-inv-freq-exponent", "rope.py",
       "exponent = torch.arange(0, dim, 2, dtype=torch.float64) / dim",
       "exponent = torch.arange(0, dim // 2, dtype=torch.float64) / dim",
       ["04_rope"], "inv_freq exponent i/d instead of 2i/d"),
    _m("rope-layout-confusion", "rope.py",
       "    if layout == \"half\":\n        return t.chunk(2, dim=-1)\n",
       "    if layout == \"half\":\n        return t[..., 0::2], t[..., 1::2]\n",
       ["04_rope"], "rotate-half weights paired as if interleaved"),
    _m("rope-rotation-sign", "rope.py",
       "    out_first.addcmul_(second, sin, value=-1)\n    out_second.addcmul_(first, sin)\n",
       "    out_first.addcmul_(second, sin)\n    out_second.addcmul_(first, sin, value=-1)\n",
       ["04_rope"], "sin sign flipped: keys and queries turn backwards (R_{m-n})"),
    _m("rope-rotate-quarter-sign", "rope.py",
       "    torch.neg(second, out=out_first)\n    out_second.copy_(first)\n",
       "    out_first.copy_(second)\n    torch.neg(first, out=out_second)\n",
       ["04_rope"], "rotate_half returns (b, -a) instead of (-b, a)"),
    _m("rope-conjugate-dropped", "rope.py",
       "h = q_pairs * k_pairs.conj()", "h = q_pairs * k_pairs",
       ["04_rope"], "the dropped conjugate in the complex form of the score"),
    _m("rope-positions-bfloat16", "rope.py",
       "    cast = p.to(inv_freq.dtype)\n",
       "    cast = p.to(torch.bfloat16).to(inv_freq.dtype)\n",
       ["04_rope"], "positions cast to bfloat16 before the angles"),
    _m("reference-transformers-rounded-once", "scaling.py",
       "torch.int64).to(dtype=torch.float32) / dim",
       "torch.int64).to(dtype=torch.float64) / dim",
       ["recipes/check_your_port"],
       "a transformers-exact reference computed in float64 and rounded once"),
    _m("serving-kv-cache-keys-only", "serving.py",
       'per_layer = kv_heads * (head["key_dim"] + head["value_dim"])',
       'per_layer = kv_heads * head["key_dim"]',
       [], "a KV-cache size that counts the keys and forgets the values"),
    _m("serving-sliding-window-ignored", "serving.py",
       'if window and engine == "transformers":', 'if False and window:',
       [], "a KV-cache size that ignores the sliding window of local layers"),
    _m("inspect-target-ratio-fixed", "tools/inspector.py",
       "{report['target_length'] / train:.3g} x L", "{2:.3g} x L",
       [], "the target length labelled as twice L whatever it is"),
    # ---- multi-dimensional RoPE (chapter 5) --------------------------------------------
    _m("mrope-section-order", "multidim.py",
       "return torch.repeat_interleave(axes, torch.tensor(sections))",
       "return torch.repeat_interleave(axes.flip(0), torch.tensor(sections).flip(0))",
       ["05_multidim"], "M-RoPE sections assigned in reverse order (width first)"),
    _m("mrope-text-resume-off-by-one", "multidim.py",
       "start = int(ids.max()) + 1", "start = int(ids.max()) + 2",
       ["05_multidim"], "text after a vision block resumes one id too late"),
    _m("mrope-interleave-reversed", "multidim.py",
       "for axis, left in enumerate(remaining):",
       "for axis, left in reversed(list(enumerate(remaining))):",
       ["05_multidim"], "interleaved M-RoPE's round-robin visits the axes in reverse"),
    _m("mrope-absolute-time-round", "multidim.py",
       "ids[0] = time.floor().long()", "ids[0] = time.round().long()",
       ["05_multidim"], "Qwen2.5-VL's absolute time rounded instead of floored"),
    _m("videorope-spatial-from-block-start", "multidim.py",
       "ids = torch.stack([tau, tau + grid[1] - centre[0],\n"
       "                               tau + grid[2] - centre[1]])",
       "ids = torch.stack([tau, start + grid[1] - centre[0],\n"
       "                               start + grid[2] - centre[1]])",
       ["05_multidim"], "VideoRoPE's spatial ids centred on the block start, not on "
       "each frame's temporal id"),
    # ---- context extension (chapter 6) --------------------------------------------------
    _m("ntk-exponent-dropped", "scaling.py",
       "    return base * factor ** (dim / (dim - 2))\n", "    return base * factor\n",
       ["06_extension"], "NTK-aware base without the exponent d/(d-2)"),
    _m("dynamic-ntk-plain-ratio", "scaling.py",
       "scale = factor * length / max_len - (factor - 1)", "scale = length / max_len",
       ["06_extension"], "dynamic NTK scale n/L instead of factor*n/L - (factor - 1)"),
    _m("yarn-ramp-inverted", "scaling.py",
       "return inv_freq * (1 - weight) + inv_freq / factor * weight, attention_factor",
       "return inv_freq * weight + inv_freq / factor * (1 - weight), attention_factor",
       ["06_extension"], "YaRN ramp inverted: fast pairs interpolated, slow kept"),
    _m("yarn-temperature-log10", "scaling.py",
       "0.1 * weight * math.log(scale) + 1.0", "0.1 * weight * math.log10(scale) + 1.0",
       ["06_extension"], "YaRN's 0.1 ln s + 1 written with log10"),
    _m("llama3-smoothing-inverted", "scaling.py",
       "return inv_freq * smooth + inv_freq / factor * (1 - smooth), 1.0",
       "return inv_freq * (1 - smooth) + inv_freq / factor * smooth, 1.0",
       ["06_extension"], "Llama 3 smoothing weights swapped"),
    _m("longrope-switch-at-L", "scaling.py",
       "rescale = long if seq_len is not None and seq_len > length else short",
       "rescale = long if seq_len is not None and seq_len >= length else short",
       ["06_extension"], "LongRoPE switches to the long factors one position early"),
    _m("alibi-slope-popular", "alibi.py",
       "return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]",
       "return [2.0 ** (-8.0 / k) for k in range(1, n + 1)]",
       ["06_extension"], "ALiBi's popular wrong slope formula 1/2^(8/k)"),
    _m("alibi-interleave-wrong-half", "alibi.py",
       "_power_of_two_slopes(2 * closest)[0::2]", "_power_of_two_slopes(2 * closest)[1::2]",
       ["06_extension"], "non-power-of-2 heads take the wrong interleaved slopes"),
    _m("xpos-exponent-sign", "xpos.py",
       "sign = 1.0 if kind == \"query\" else -1.0", "sign = -1.0 if kind == \"query\" else 1.0",
       ["06_extension"], "xPos query/key exponent signs swapped"),
    _m("xpos-zeta-spacing", "xpos.py",
       "return ((2 * i / dim + gamma) / (1 + gamma)).to(dtype)",
       "return ((i / dim + gamma) / (1 + gamma)).to(dtype)",
       ["06_extension"], "xPos's zeta spaced by i/d instead of 2i/d"),
    _m("attention-factor-cos-only", "rope.py",
       "        cos, sin = cos * attention_factor, sin * attention_factor\n"
       "    return cos, sin\n",
       "        cos = cos * attention_factor\n    return cos, sin\n",
       ["06_extension"], "the cached cos/sin table scales cos by the attention factor "
       "and forgets sin"),
    _m("attention-factor-sin-only", "rope.py",
       "        cos, sin = cos * attention_factor, sin * attention_factor\n"
       "    return _rotate_pairs(",
       "        sin = sin * attention_factor\n    return _rotate_pairs(",
       ["06_extension"], "the rotation scales sin by the attention factor and forgets cos"),
    _m("deepseek-mscale-ratio-inverted", "scaling.py",
       "return get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)",
       "return get_mscale(factor, mscale_all_dim) / get_mscale(factor, mscale)",
       ["06_extension"], "DeepSeek's mscale ratio inverted (invisible while the keys "
       "are equal)"),
    # ---- the measured experiment (chapter 7) ------------------------------------------
    _m("interval-normal-quantile", "tools/experiment/stats.py",
       "half = float(stats.t.ppf(0.5 + confidence / 2, t.df)) * t.se",
       "half = float(stats.norm.ppf(0.5 + confidence / 2)) * t.se",
       ["07_experiment"], "a normal quantile for the mean of three seeds (2 degrees of "
       "freedom): intervals 2.2 times too narrow"),
    # ---- positions in a running model (chapter 8) ---------------------------------------
    _m("padding-positions-arange", "positions.py",
       "return (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)",
       "return torch.arange(mask.shape[-1]).expand_as(mask)",
       ["08_practice"], "left-padded rows numbered with arange, padding counted"),
    _m("packing-mask-no-documents", "positions.py",
       "return same_document & (index[None, :] <= index[:, None])",
       "return index[None, :] <= index[:, None]",
       ["08_practice"], "packed documents share one causal mask: they see each other"),
    _m("rerotate-sign", "rope.py",
       "        shift = torch.tensor([delta])\n", "        shift = torch.tensor([-delta])\n",
       ["08_practice"], "cached keys moved by -delta instead of +delta"),
    # ---- reading a model's config (chapter 9) ---------------------------------------------
    _m("yarn-original-ignored", "config_reader.py",
       "            original = block_original or max_len\n",
       "            original = max_len or block_original\n",
       ["09_models"], "YaRN reads max_position_embeddings, not the rope block's "
       "original_max_position_embeddings"),
    _m("partial-rotary-ignored", "config_reader.py",
       "    dim = int(head_dim * partial)\n", "    dim = head_dim\n",
       ["09_models"], "partial_rotary_factor ignored: the whole head is rotated"),
    _m("inspect-mrope-interleave-ignored", "tools/inspector.py",
       '    if rule == "blocks":\n', '    if rule != "hw-alternate":\n',
       ["09_models"], "the mrope_interleaved flag read and ignored: contiguous blocks "
       "reported for Qwen3-VL"),
    _m("inspect-t5-both-directions", "tools/inspector.py",
       '        out[part] = {"past": len(past), "future": len(future),',
       '        out[part] = {"past": len(ranges), "future": len(future),',
       ["09_models"], "T5's buckets counted over both directions: 32 \"per direction\""),
    _m("inspect-pair-layout-half", "config_reader.py",
       'INTERLEAVED_PAIRS = {"deepseek_v3": "rope_interleave", "ernie4_5": True,',
       'INTERLEAVED_PAIRS = {"ernie4_5": True,',
       ["09_models"], "DeepSeek-V3's interleaved q_pe/k_pe taken for the half split "
       "that other models use"),
    _m("linear-extended-by-factor", "config_reader.py",
       'if self.rope_type == "yarn" and self.factor is not None and self.factor > 1:',
       'if self.factor is not None and self.factor > 1:',
       ["09_models"], "linear scaling's max_position_embeddings taken as the length "
       "before extension (Gemma 3 reported at 8 x 131,072)"),
    _m("llama3-keep-wins-crossed", "scaling.py",
       "smooth = torch.where(divide, 0.0, torch.where(keep, 1.0, smooth))",
       "smooth = torch.where(keep, 1.0, torch.where(divide, 0.0, smooth))",
       ["09_models"], "Llama 3 bands with low_freq_factor > high_freq_factor: a pair "
       "both kept and divided is kept (transformers divides it)"),
    _m("hunyuan-alpha-ignored", "config_reader.py",
       '        alpha = block.pop("alpha", None) or None\n',
       '        alpha = block.pop("alpha", None) and None\n',
       ["09_models"], "Hunyuan's NTK alpha dropped: plain RoPE, 1000x off on the "
       "slowest pair"),
    _m("config-first-problem-only", "config_reader.py",
       "        if len(self.messages) == 1:\n", "        if self.messages:\n",
       ["09_models"], "a config's first problem reported, the others hidden"),
    _m("layer-local-keeps-scaling", "per_layer.py",
       '        out["rope_scaling"] = None\n',
       '        out["rope_scaling"] = out.get("rope_scaling")\n',
       ["09_models"], "Gemma 3's / OLMo 3's local layers given the global layers' "
       "scaling"),
    _m("layer-local-global-base", "per_layer.py",
       'out["rope_theta"] = _field(text, model_type, "rope_local_base_freq", used)',
       'out["rope_theta"] = _field(text, model_type, "rope_theta", used)',
       ["09_models"], "Gemma 3's sliding layers given rope_theta, not "
       "rope_local_base_freq"),
    _m("layer-nope-inverted", "per_layer.py",
       'if kind in ("linear_attention", "conv", "mamba") or not no_rope[i] or',
       'if kind in ("linear_attention", "conv", "mamba") or no_rope[i] or',
       ["09_models"], "no_rope_layers read the way its name suggests: 1 taken for "
       "a NoPE layer"),
    _m("layer-cohere2-global-rotates", "per_layer.py",
       'elif model_type in ("cohere2", "cohere2_moe", "flint") and not (',
       'elif model_type in ("cohere2x", "cohere2_moe", "flint") and not (',
       ["09_models"], "Cohere 2's full-attention layers given RoPE (they are NoPE)"),
    _m("layer-exaone4-ignores-null-window", "per_layer.py",
       '                window is not None and kind != "sliding_attention":',
       '                kind != "sliding_attention":',
       [], "EXAONE 4 without a window: its full layers taken for NoPE"),
    _m("granite-nope-ignored", "config_reader.py",
       'return model_type == "granitemoehybrid" and \\',
       'return model_type == "granitemoehybridx" and \\',
       [], "Granite 4.0 without position_embedding_type 'rope' given a RoPE"),
    _m("layer-lfm2-conv-rotates", "per_layer.py",
       'kinds = ["full_attention" if i in attending else "conv" for i in range(n)]',
       'kinds = ["full_attention" for i in range(n)]',
       ["09_models"], "LFM2's convolution layers taken for attention layers"),
    _m("layer-pattern-off-by-one", "per_layer.py",
       'kinds = ["sliding_attention" if (i + 1) % period else "full_attention"',
       'kinds = ["sliding_attention" if i % period else "full_attention"',
       ["09_models"], "the global layer placed first in each period instead of last"),
    _m("inspect-layer-window-ignored", "tools/inspector.py",
       "    judged = target if window is None else min(target, window)\n"
       "    out = scaling.out_of_range_pairs(parts[",
       "    judged = target\n"
       "    out = scaling.out_of_range_pairs(parts[",
       ["09_models"], "a sliding-window layer judged against the whole context, "
       "though it never sees a distance beyond its window"),
    _m("proportional-keeps-slow-pairs", "scaling.py",
       "    inv_freq[int(share * dim // 2):] = 0.0\n",
       "    inv_freq[int(share * dim):] = 0.0\n",
       [], "p-RoPE keeps twice the pairs it should (p·d pairs instead of "
       "p·d/2)"),
    _m("per-type-parameters-ignored", "per_layer.py",
       "    if config_reader.is_per_layer_type(nested):\n",
       "    if False:\n",
       [], "5.x per-layer-type rope_parameters: every layer given the "
       "full-attention layers' RoPE"),
    _m("ledger-mscale-not-squared", "logit_scale.py",
       'out.append({"name": "softmax mscale, squared", "value": m * m,',
       'out.append({"name": "softmax mscale, squared", "value": m,',
       ["09_models"], "DeepSeek's softmax mscale applied once, not squared"),
    _m("logn-log-p", "temperature.py",
       "    return (torch.log1p(p) / math.log(length)).clamp(min=1.0)\n",
       "    return (torch.log(p) / math.log(length)).clamp(min=1.0)\n",
       ["10_beyond"], "log-n scale ln p instead of ln(p + 1): the query counted out of "
       "its own keys"),
    _m("sinks-recent-off-by-one", "remap.py",
       "    first_recent = torch.clamp(m - r + 1, min=s)[:, None]",
       "    first_recent = torch.clamp(m - r, min=s)[:, None]",
       ["10_beyond"], "StreamingLLM's cache keeps r + 1 recent tokens (the query not "
       "counted in recent_size)"),
    _m("entropy-shift-forgotten", "temperature.py",
       "        weights *= shifted\n", "        weights *= block * scale\n",
       ["10_beyond"], "the stabilising shift dropped from one half of the entropy formula"),
    _m("householder-diagonal-unreflected", "scaling.py",
       "        columns[j, j] = reflected\n", "",
       ["06_extension"], "the least-squares QR keeps a column's old top entry as R's "
       "diagonal"),
    # ---- the retrieval results' readers (chapter 7) ----------------------------------
    _m("retrieval-cells-other-band", "retrieval.py",
       'key=lambda c: cells[c]["length"])', 'key=lambda c: -cells[c]["length"])',
       [], "a band's cells read longest item first, so outcomes no "
       "longer line up with the lengths asked for"),
    # ---- the figures' renderer (no chapter derives it: unit tests only) ---------------------
    _m("glyph-subpixel-ignored", "figures/_base.py",
       "px & 0x3F, py & 0x3F,", "0, 0,",
       [], "glyph bitmaps cached per glyph, not per sub-pixel position"),
    _m("glyph-origin-absolute", "figures/_base.py",
       "hit = (image, bitmap.left - (px >> 6), bitmap.top - (py >> 6))",
       "hit = (image, bitmap.left, bitmap.top)",
       [], "a cached glyph replayed where it was first drawn"),
    _m("glyph-angle-ignored", "figures/_base.py",
       "slant, extend, angle,\n", "slant, extend,\n",
       [], "rotated and upright glyphs share one cache entry"),
    _m("set-ticks-view-kept", "figures/_base.py",
       "            shared.set_view_interval(min(ticks), max(ticks))  # only ever widens\n",
       "            pass\n",
       [], "fixed ticks outside the view limits, which set_ticks would have widened"),
    _m("legend-key-without-text", "figures/_base.py",
       "text.get_text(), _artist_key(text),", "_artist_key(text),",
       [], "a cached legend reused after its labels changed"),
    _m("legend-key-without-anchor", "figures/_base.py",
       "tuple(legend.get_bbox_to_anchor().bounds), legend._loc", "legend._loc",
       [], "a cached legend reused after its axes moved"),
    _m("legend-best-cached", "figures/_base.py",
       "    if legend._loc == 0 or legend.get_draggable():", "    if legend.get_draggable():",
       [], "a legend placed by loc='best' reused after the data moved"),
    _m("skeleton-without-axes", "figures/_base.py",
       "            _skeletons[key] = pickle.dumps(fig, protocol=pickle.HIGHEST_PROTOCOL)\n",
       "            _skeletons[key] = pickle.dumps(new_figure(width, height),\n"
       "                                           protocol=pickle.HIGHEST_PROTOCOL)\n",
       [], "the cached empty figure pickled before its axes were added"),
    _m("steady-limit-coarse", "figures/_base.py",
       "_STEPS = (1.0, 1.2, 1.5,", "_STEPS = (1.0, 1.2,",
       [], "a limit ladder with a gap (up to 67 % of empty headroom)"),
    _m("figures-drawn-below-shown-width", "figures/_base.py",
       "    return max(float(DPI), SHOWN_WIDTH * (1 + 2.0 ** -30) / width)\n",
       "    return float(DPI)\n",
       [], "one dpi for every figure: a 6.4 in figure is drawn 512 px wide and the "
           "book enlarges it to 752 px (tests/test_browser.py catches it on a build)"),
    # ---- portability round: checks that could not fail before ---------------------------
    _m("ridge-sqrt-forgotten", "scaling.py",
       "math.sqrt(ridge) * torch.eye(n, dtype=dtype)", "ridge * torch.eye(n, dtype=dtype)",
       ["06_extension"], "the ridge stacked as kappa*I instead of sqrt(kappa)*I (kappa^2 used)"),
    _m("multiaxis-last-axis-dropped", "multidim.py",
       "    for a in range(n_axes):\n        mine = axis == a\n",
       "    for a in range(n_axes - 1):\n        mine = axis == a\n",
       ["05_multidim"], "a loop over the axes that stops one short: the width ids are ignored"),
    # ---- serving: KV cache from the layer layout, engines, cross-check ---------------
    _m("serving-kv-on-every-layer", "serving.py",
       "kv = kind not in NO_KV", "kv = True",
       [], "KV bytes counted on convolution, linear-attention and Mamba layers too"),
    _m("serving-window-keeps-all", "serving.py",
       'info["cap"] = window if preallocated else window - 1',
       'info["cap"] = window',
       [], "a sliding cache sized at the window, not the window - 1 tokens kept"),
    _m("serving-chunk-is-full", "serving.py",
       'windows += [x.window for x in layout if x.attention == "chunked_attention"]',
       "windows += []",
       [], "Llama 4's chunked layers cached like full ones"),
    _m("serving-head-dim-from-hidden", "serving.py",
       "filled = config_reader._with_defaults(text, {}, model_type)", "filled = dict(text)",
       [], "the cache's head_dim from hidden_size / heads, not the class default"),
    _m("serving-vllm-mla-decompressed", "serving.py",
       'if mla is not None and (engine == "vllm" or modelled.startswith("5.")):',
       'if mla is not None and (False or modelled.startswith("5.")):',
       [], "vLLM's MLA cache sized like transformers' decompressed keys and values"),
    _m("serving-vllm-sliding-no-spare-block", "serving.py",
       "length), block) + 1) * block", "length), block) + 0) * block",
       [], "vLLM's sliding-window reservation without the block the window straddles"),
    _m("serving-recurrent-state-model-dtype", "serving.py",
       "per = conv * b + vh * kd * vd * 4", "per = conv * b + vh * kd * vd * b",
       [], "Qwen3-Next's recurrent state sized in the model dtype, not float32"),
    _m("serving-lfm2-state-conv-layers-only", "serving.py",
       "        layers = len(layout)\n",
       '        layers = sum(x.attention == "conv" for x in layout)\n',
       [], "LFM2's conv state counted on conv layers only (transformers allocates all)"),
    _m("inspect-angle-error-plain", "tools/inspector.py",
       "frequencies=extended if configured else None", "frequencies=None",
       [], "the angle error of plain RoPE labelled as the configured method's"),
    _m("inspect-kv-at-twice-L", "tools/inspector.py",
       "target_length or supported, engine", "target, engine",
       [], "the KV cache sized at 2L, a length the config does not support"),
    _m("inspect-no-sinks", "tools/inspector.py",
       'if model_type == "gpt_oss":', 'if model_type == "gpt-oss":',
       [], "gpt-oss's learned attention sinks not flagged"),
    _m("crosscheck-cache-not-compared", "tools/crosscheck.py",
       'if (kv, state) != (predicted["bytes_at_length"], fixed):', "if False:",
       [], "a cross-check that never compares the cache bytes"),
    _m("crosscheck-cos-not-compared", "tools/crosscheck.py",
       "if (err > tol).any():", "if False:",
       [], "a cross-check that never compares cos and sin"),
    _m("serving-vllm-conv-state-full-kernel", "serving.py",
       'per = (get("conv_L_cache") - 1) * hidden * b',
       'per = get("conv_L_cache") * hidden * b',
       [], "vLLM's convolution state sized at the kernel, not kernel - 1 steps"),
    _m("inspect-angle-error-at-2L", "tools/inspector.py",
       "rope.dim, rope.base, kv_length,", "rope.dim, rope.base, target,",
       [], "the angle error at 2L, a length the config does not support"),
    _m("serving-no-layer-types-all-full", "serving.py",
       '    window = text.get("sliding_window")\n    if model_type in ("qwen2_moe", "qwen3_moe")',
       '    window = None\n    if model_type in ("qwen2_moe", "qwen3_moe")',
       [], "a config class without layer_types cached full, though DynamicCache slides"),
    _m("rope-factor-applied-once", "rope.py",
       "once a pair\n    cos, sin = angles.cos(), angles.sin()\n"
       "    if attention_factor != 1.0:\n"
       "        cos, sin = cos * attention_factor, sin * attention_factor",
       "once a pair\n    cos, sin = angles.cos(), angles.sin()\n"
       "    if attention_factor != 1.0:\n"
       "        cos, sin = cos * attention_factor**0.5, sin * attention_factor**0.5",
       ["recipes/extend_and_serve"],
       "YaRN's factor applied once to the logits (sqrt on cos and sin), not squared"),
    # ---- intervals for chapter 7 (accuracies, clusters, Holm) ----------------------------
    _m("accuracy-seeds-pooled", "tools/experiment/stats.py",
       "    var = seed_var + item_var\n", "    var = item_var\n",
       ["07_experiment"], "0/1 outcomes of several seeds pooled as if independent: the "
       "seed-to-seed variation left out of the accuracy's interval"),
    _m("accuracy-wilson-only", "tools/experiment/stats.py",
       "        low = np.minimum(low, special.expit(special.logit(adjusted) - q * logit_se))\n",
       "", ["07_experiment"], "Wilson's interval alone near the ceiling: the skew of a "
       "few seeds' accuracies ignored"),
    _m("clustered-df-uncapped", "tools/experiment/stats.py",
       "    df = min(df, float(max(seeds - 1, n_groups - 1)))\n", "",
       ["07_experiment"], "Satterthwaite's degrees of freedom above what 25 clusters allow"),
    _m("clustered-narrower-than-seeds", "tools/experiment/stats.py",
       "        half = max(half, seed_half)\n", "",
       ["07_experiment"], "a clustered interval narrower than its own seed component"),
    _m("holm-levels-nominal", "tools/experiment/stats.py",
       "            stop = 1 - alpha / (m - k) if stop is None else stop\n",
       "            stop = 1 - alpha if stop is None else stop\n",
       ["07_experiment"], "intervals beside Holm's verdicts printed at the unadjusted "
       "level, so an interval can exclude 0 beside 'not distinguishable'"),
    _m("xpos-scale-base-default", "tools/experiment/training.py",
       "                   xpos_scale_base=config.xpos_scale_base,",
       "                   xpos_scale_base=512.0,",
       ["07_experiment"], "the model built with xPos's default scale_base 512, not the "
       "configured one"),
    _m("task-rows-one-length", "tools/experiment/training.py",
       "        lengths = low + (torch.rand(count, generator=generator) * (m + 1 - low)).long()\n",
       "        lengths = torch.full((count,), m)\n",
       [], "every training row puts its query at the same position, so a model can "
       "learn where the query is instead of how to find its key"),
    _m("position-task-query-rebound", "retrieval.py",
       "        others = [j for j in range(k) if j != q]\n",
       "        others = list(range(k))\n",
       [], "a pair between the answer and the query may rebind the query key, so the "
       "stored answer is no longer its last binding"),
    _m("offset-hits-padded-read", "tools/experiment/offset.py",
       "                x = inputs[at, :n]\n", "                x = inputs[at]\n",
       [], "every item read at the padded batch's last column, not at its own query"),
    _m("offset-rows-second-answer-shifted", "tools/experiment/offset.py",
       "            answer = row[row.index(key) + task.width]\n",
       "            answer = row[row.index(key) + task.width - 1]\n",
       [], "a later query's target one position before its key's answer"),
    _m("offset-panel-holds-in-train", "tools/experiment/offset.py",
       "    held_cells = [cell for cell in cells if cell != IN_TRAIN]\n",
       "    held_cells = list(cells)\n",
       [], "the margin counted over the in-train cell too, so it is not the stored "
       "panel's margin"),
    _m("offset-figure-one-cell", "figures/experiment.py",
       "lambda name, cell: np.asarray(results[\"outcomes\"][name][cell]))",
       "lambda name, cell: np.asarray(results[\"outcomes\"][name][cells[-1]]))",
       [], "the offset figure draws one cell's outcomes in every cell"),
    _m("offset-row-ranges-ignore-length", "tools/experiment/offset.py",
       "    L = study.config.train_length if length is None else length\n",
       "    L = study.config.train_length\n",
       ["07_experiment"], "the fine-tunes' rows of 2L measured as rows of L"),
    # ---- chapter 7: the paired accuracy interval and the reader panel ------------------
    _m("accuracy-difference-normal-quantile", "tools/experiment/stats.py",
       "    df = np.full(np.shape(d), float(seeds - 1))\n",
       "    df = np.full(np.shape(d), 1e9)\n",
       [], "a normal quantile for a t statistic on five seeds' differences"),
    _m("accuracy-difference-unpaired", "tools/experiment/stats.py",
       "    var = per_seed.var(-1, ddof=1) / seeds\n",
       "    var = (x.mean(-1).var(-1, ddof=1) + y.mean(-1).var(-1, ddof=1)) / seeds\n",
       [], "a paired difference given the variance of two independent means: what "
       "the seeds share comes back into the interval"),
    _m("reader-counting-no-tie-break", "retrieval.py",
       'out["counting"].append(_pick([(q, -o) for _, q, o, _ in found], at))',
       'out["counting"].append(_pick([q for _, q, o, _ in found], at))',
       ["07_experiment"], "the counting reader counts the query key only, so the "
       "values after the answer tie with it and the panel understates what it solves"),
    # ---- chapters 1-4: checks that could not fail before ------------------------------
    _m("rope-additive-not-rotation", "rope.py",
       "    return _rotate_pairs(x, cos.to(x.dtype), sin.to(x.dtype), layout, rotary_dim)\n",
       "    return x + torch.as_tensor(positions, dtype=x.dtype)[..., None]\n",
       ["04_rope"], "a position added to q and k (q + m·1) instead of a rotation"),
    _m("xl-embedding-bfloat16-offsets", "relative.py",
       "rows = absolute.sinusoidal_rows(distances, d_model, base, dtype=dtype)",
       "rows = absolute.sinusoidal_rows(\n        torch.as_tensor(distances).to(torch.bfloat16), d_model, base, dtype=dtype)",
       ["03_relative"], "Transformer-XL's offsets stored in bfloat16 before the sinusoid"),
    _m("overview-drops-cope", "figures/overview.py",
       '("KERPLE, FIRE, CoPE", "ch-relative")', '("KERPLE, FIRE", "ch-relative")',
       [], "the introduction's map leaves out an encoding its table lists"),
    # ---- the designs of 2025-26 (chapter 6) -------------------------------------------
    _m("designs-proportional-extra-pair", "rope.py",
       "    theta[rotating:] = 0.0\n", "    theta[rotating + 1:] = 0.0\n",
       ["06_extension"], "p-RoPE keeps one slow pair more than int(p·head_dim // 2)"),
    _m("designs-trailing-frequencies-first", "designs.py",
       '    if convention.startswith("trailing"):  # the slice is the last',
       '    if False:  # the slice is the last',
       ["06_extension"], "trailing slice: the frequencies put on the first pairs, as a "
       "kernel that assumes the first slice rotates"),
    _m("designs-rnope-full-first", "designs.py",
       "    return [\"full_attention\" if (i + 1) % full_every == 0",
       "    return [\"full_attention\" if i % full_every == 0",
       ["06_extension"], "RNoPE-SWA: the full (NoPE) layer first in each period, not last"),
    _m("attention-fused-no-causal", "attention.py",
       "    if causal:\n        blocked = torch.zeros(",
       "    if False:\n        blocked = torch.zeros(",
       [], "the fused attention path forgets the causal mask"),
    _m("lm-p-rope-every-pair", "lm.py",
       "            head_dim, fraction, base, dtype=torch.float32), persistent=False)",
       "            head_dim, 1.0, base, dtype=torch.float32), persistent=False)",
       [], "the trained p-RoPE scheme turns every pair (plain RoPE)"),
    _m("lm-rnope-full-layer-rotates", "lm.py",
       '        return [sliding if kind == "sliding_attention" else {}',
       '        return [sliding if kind == "sliding_attention" else rope_hooks',
       [], "RNoPE-SWA's full-attention layer keeps RoPE"),
    _m("lm-rnope-cached-window-wider", "lm.py",
       "        outside = j <= i - self.scheme.window\n",
       "        outside = j < i - self.scheme.window\n",
       [], "RNoPE-SWA's cached path sees one key more than its window"),
    _m("designs-window-one-wider", "designs.py",
       "    return (j <= i) & (j > i - window)\n", "    return (j <= i) & (j >= i - window)\n",
       [], "sliding window one key wider than window (window + 1 keys with itself)"),
    _m("designs-drope-norm-sum", "designs.py",
       "    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n",
       "    x = x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)\n",
       [], "DroPE's QK-norm divides by the root of the sum, not the mean, of squares"),
    _m("designs-fope-half-turn", "designs.py",
       "        keep = theta > 2 * math.pi / length\n",
       "        keep = theta > math.pi / length\n",
       ["06_extension"], "FoPE keeps frequencies that turn only half a circle within L"),
    _m("designs-fope-pad-identity", "designs.py",
       "head_dim: int, *, sin_padding: float = 1.0)",
       "head_dim: int, *, sin_padding: float = 0.0)",
       ["06_extension"], "FoPE's padded pairs given the identity (sin = 0), not the "
       "cos = sin = 1 of vLLM and of the authors' code"),
    _m("designs-pope-bias-on-query", "designs.py",
       "    return apply_pope(q, q_positions, inv_freq) @ apply_pope(\n"
       "        k, k_positions, inv_freq, bias=bias).mT\n",
       "    return apply_pope(q, q_positions, inv_freq, bias=bias) @ apply_pope(\n"
       "        k, k_positions, inv_freq).mT\n",
       ["06_extension"], "PoPE's phase bias added to the queries instead of the keys "
       "(the angle turns by -δ instead of +δ)"),
    _m("designs-pope-no-softplus", "designs.py",
       "    magnitude = torch.nn.functional.softplus(x)\n", "    magnitude = x\n",
       ["06_extension"], "PoPE without softplus: raw features as magnitudes, so a "
       "negative one puts content back in the angle (by π)"),
    # ---- diagnose (recipes) -----------------------------------------------------------
    _m("diagnose-flat-ladder-unnamed", "tools/diagnose/explanation.py",
       "            torch.ones_like(expected)))", "            expected.flip(0).flip(0)))",
       [], "the integer-division exponent (every pair at 1 rad per position) "
           "not tested directly"),
    _m("diagnose-offset-not-fitted", "tools/diagnose/fit.py",
       "    if best == 0:\n        return None", "    if True:\n        return None",
       [], "a rotation at position 0 not explained as a position offset"),
    _m("diagnose-shift-not-probed", "tools/diagnose/structure.py",
       "y1 = _call(fn, x, first + shift, timeout)", "y1 = _call(fn, x, first, timeout)",
       [], "fn never called with shifted positions: a lost KV-cache offset unseen"),
    _m("diagnose-swap-unnamed", "tools/diagnose/explanation.py",
       "bool((quarter <= 1e-4).all())", "bool((quarter <= -1.0).all())",
       [], "a quarter-turn phase with a reversed rotation not named as cos/sin swapped"),
    _m("diagnose-attention-factor-ignored", "tools/diagnose/rope_fn.py",
       "        if g is not None:\n            fit.fitted[\"attention_factor\"] = g",
       "        if g is None:\n            fit.fitted[\"attention_factor\"] = g",
       [], "the rotated features' length not compared with the attention factor"),
    _m("diagnose-rising-ladder-not-reversed", "tools/diagnose/rope_fn.py",
       "    flipped = (direct is None and len(pairs) > 2",
       "    flipped = (direct is None and len(pairs) > 2 ** 20",
       [], "a rising ladder fitted as it comes: its slowest pair taken for pair 0"),
    _m("diagnose-scaled-reference-dropped", "tools/diagnose/explanation.py",
       "        candidates.append(([], [], expected))\n", "",
       [], "a correct scaled RoPE compared with plain RoPE only"),
    _m("grader-t5-one-setting", "tools/exercises.py",
       "_T5_CASES = ((32, 128), (16, 64), (64, 256))", "_T5_CASES = ((32, 128),)",
       [], "a grader that tries only the default bucket setting"),
    _m("grader-shift-positive-k-only", "tools/exercises.py",
       "_SHIFT_KS = (1, 5, 17, 0, -1, -3, -12)", "_SHIFT_KS = (1, 5, 17)",
       [], "a grader that tries only positive offsets, so abs(k) passes"),
    # ---- config reading: warnings, accepted edge values, references (chapter 9) ------
    _m("warns-without-validation", "serving.py",
       "    if not isinstance(block, Mapping) or not validates_rope(config):\n",
       "    if not isinstance(block, Mapping):\n",
       ["09_models"], "transformers' validator warnings listed for config classes "
       "that never run it (Llama 4, EXAONE 4)"),
    _m("inspector-warns-unvalidated", "tools/inspector.py",
       "        and (validated or not issubclass(item.category, scaling.RopeConfigWarning))))",
       "        ))",
       ["09_models"], "a validator-style warning shown for a class that logs nothing"),
    _m("factor-below-one-refused", "scaling.py",
       '    factor = _validate.finite_float("factor", value, greater_than=0.0)\n'
       "    if factor < 1:",
       '    factor = _validate.finite_float("factor", value, at_least=1.0)\n'
       "    if factor < 1:",
       ["09_models"], "a factor below 1, which transformers computes after a "
       "warning, refused"),
    _m("yarn-attention-zero-refused", "scaling.py",
       "attention_factor,\n                                                  at_least=0.0)",
       "attention_factor,\n                                                  "
       "greater_than=0.0)",
       ["09_models"], "YaRN's attention_factor 0, which transformers computes, refused"),
    _m("first-problem-only", "scaling.py",
       '        problems.append(f"rope_type {rope_type!r} needs {missing}")',
       '        raise ValueError(f"rope_type {rope_type!r} needs {missing}")',
       [], "an error that names the first problem of a call and hides the others"),
    _m("dynamic-reference-int-length", "scaling.py",
       "        length = torch.tensor(seq_len, dtype=torch.int64)\n",
       "        length = seq_len\n",
       [], "the dynamic base rescaled in Python floats, not in float32 as a running "
       "module's dynamic_rope_update does"),
    _m("ledger-factor-not-squared", "logit_scale.py",
       '                "value": attention_factor ** 2,',
       '                "value": attention_factor,',
       ["09_models"], "the cos/sin factor put on the logits once, not squared"),
    _m("ledger-factor-dropped", "logit_scale.py",
       '                "value": attention_factor ** 2,',
       '                "value": 1.0,',
       ["09_models"], "the cos/sin factor left out of the logit ledger"),
    _m("per-layer-imports-scaling", "per_layer.py",
       "from . import config_reader, _validate\n",
       "from . import config_reader, _validate, scaling  # noqa: F401\n",
       [], "an import cycle between per_layer and scaling"),
    _m("v5-sliding-base-from-rope-theta", "config_reader.py",
       "        given = text.get(local_key) if local_key else None\n",
       '        given = text.get("rope_theta")\n',
       [], "Gemma 3's sliding layers given rope_theta instead of "
       "rope_local_base_freq (5.x layout)"),
    _m("v5-legacy-scaling-dropped", "config_reader.py",
       "        params[\"full_attention\"].update(scaling)\n",
       "        pass\n",
       [], "a legacy rope_scaling beside 5.x rope_parameters ignored (5.x merges it)"),
    _m("deepseek-family-unaliased", "config_reader.py",
       "    model_type = MODEL_TYPE_ALIASES.get(model_type, model_type)\n",
       "",
       ["09_models"], "Kimi K2 and DeepSeek-V3.2 read as unknown models: half-split "
       "pairs and no softmax mscale, though they run DeepSeek-V3's attention"),
    _m("warnings-without-class-length", "serving.py",
       '    max_len = text.get("max_position_embeddings",  # Gemma 3\'s class fills it in\n',
       '    max_len = text.get("max_position_embeddings", None and  # (class default lost)\n',
       [], "a validator check skipped where the config class fills in the length"),
    # ---- engines (recipe: what your engine does with this config) ---------------------
    _m("cpp-factor-copied-from-transformers", "tools/engines/compare.py",
       'return {"inv_freq": llama_cpp_inv_freq(config, n_ctx=n_ctx), "factor": p["net_factor"],',
       'return {"inv_freq": llama_cpp_inv_freq(config, n_ctx=n_ctx), "factor": tf_out["factor"],',
       ["recipes/engines"], "llama.cpp's factor copied from transformers' instead of "
       "computed from its context code"),
    _m("cpp-yarn-factor-not-cancelled", "tools/engines/llama_cpp.py",
       "    out *= 1.0 / (1.0 + 0.1 * math.log(factor))\n", "",
       ["recipes/engines"], "YaRN's 1 + 0.1 ln s applied twice (llama.cpp #17945)"),
    _m("cpp-norm-rotates-halves", "tools/engines/llama_cpp.py",
       '    if mode == "norm":\n        x0, x1', '    if mode == "neox":\n        x0, x1',
       ["recipes/engines"], "NORM and NEOX pairings swapped"),
    _m("convert-permute-no-swap", "tools/engines/llama_cpp.py",
       ".swapaxes(1, 2)", ".swapaxes(1, 1)",
       ["recipes/engines"], "the converter's q/k permutation left out"),
    _m("cpp-yarn-ramp-over-features", "tools/engines/llama_cpp.py",
       "        y = (i0 // 2 - low) / max(0.001, high - low)",
       "        y = (i0 - low) / max(0.001, high - low)",
       ["recipes/engines"], "ggml's YaRN ramp indexed by feature instead of pair"),
    _m("vllm-gpt-oss-truncate-dropped", "tools/engines/vllm.py",
       '"truncate": params.get("truncate", True)}',
       '"truncate": True}',
       ["recipes/engines"], "gpt-oss's truncate not passed to vLLM's get_rope (before "
       "vllm-project/vllm PR #28244)"),
    _m("cpp-shift-allows-imrope", "tools/engines/llama_cpp.py",
       'not in ("mrope", "imrope")', 'not in ("mrope",)',
       ["recipes/engines"], "interleaved M-RoPE (Qwen3-VL) cache treated as shiftable"),
    _m("sglang-yarn-forwards-attention-factor", "tools/engines/sglang.py",
       '    rope_scaling: dict | None = dict(params)\n',
       '    rope_scaling: dict | None = dict(params)\n'
       '    rope_scaling["attn_factor"] = params.get("attention_factor", 1.0)\n',
       ["recipes/engines"], "transformers' attention_factor copied into SGLang's attn_factor, so the "
       "YaRN factor is applied twice (sglang #33558)"),
    _m("sglang-deepseek-softmax-mscale-dropped", "tools/engines/sglang.py",
       "            logit_scale = mscale * mscale\n", "            logit_scale = 1.0\n",
       ["recipes/engines"], "DeepSeek's softmax mscale**2 (SGLang's compute_mla_mscale_scaling) "
       "left out of SGLang's model-file arguments"),
    _m("sglang-qwen3-next-partial-dropped", "tools/engines/sglang.py",
       'partial = float(text.get("partial_rotary_factor", 0.25))', "partial = 1.0",
       ["recipes/engines"], "Qwen3-Next's partial_rotary_factor not passed to SGLang's get_rope: "
       "all 256 features rotated instead of 64"),
    _m("sglang-gemma3-get-rope-path", "tools/engines/sglang.py",
       '        native = "transformers"\n', "        native = None\n",
       ["recipes/engines"], "Gemma 3 under SGLang read from its get_rope call, which only the "
       "AMX forward_cpu uses (the linear factor 8 is lost there)"),
    _m("sglang-cache-rows-off-by-one", "tools/engines/sglang.py",
       "rows = [p for p in self._positions if p < t.shape[0]]",
       "rows = [p + 1 for p in self._positions if p + 1 < t.shape[0]]",
       ["recipes/engines"], "the short-cache proxy reads the cache one row late"),
    _m("sglang-deepseek-ignores-rope-interleave", "tools/engines/sglang.py",
       '"deepseek_v3": ("rope_interleave", _SG', '"deepseek_v3": (False, _SG',
       ["recipes/engines"], "DeepSeek's rope_interleave ignored, as vLLM does (PR #40267)"),
    _m("vllm-llama4-not-permuted", "tools/engines/vllm.py",
       'VLLM_LOAD_PERMUTED = {"llama4"}', "VLLM_LOAD_PERMUTED: set = set()",
       ["recipes/engines"], "Llama 4's q/k rows not permuted at load: NEOX on the "
       "checkpoint's neighbour layout"),
    _m("vllm-ernie-neox", "tools/engines/vllm.py",
       '"ernie4_5": (False, _VM', '"ernie4_5": (True, _VM',
       ["recipes/engines"], "ERNIE 4.5 left at get_rope's default NEOX"),
    _m("vllm-llama4-permute-no-swap", "tools/engines/vllm.py",
       ".transpose(1, 2)", ".transpose(1, 1)",
       [], "the load-time q/k permutation left out"),
    _m("partial-on-adjacent-pairs", "designs.py",
       'if convention.endswith("adjacent") or convention == "trailing":',
       'if convention.startswith("partial") or convention == "trailing":',
       ["06_extension"], "the NeoX slice (partial_rotary_factor) built on adjacent pairs"),
    _m("trailing-on-rotate-half", "designs.py",
       'if convention.endswith("adjacent") or convention == "trailing":',
       'if convention.endswith("adjacent"):',
       ["06_extension"], "MLA's trailing slice built on rotate-half pairs"),
    _m("glm4-in-neox-row", "conventions.py",
       '"partial_adjacent", 4, "(d·p, False)", "glm4.py',
       '"partial", 4, "(d·p, False)", "glm4.py',
       ["06_extension"], "GLM-4 put in the NeoX row (GLM-4.5's layout)"),
    _m("yarn-upper-clamp-half", "scaling.py",
       "return max(low, 0), min(high, dim - 1)",
       "return max(low, 0), min(high, dim // 2 - 1)",
       ["06_extension"], "YaRN's upper correction index clamped at the last pair, "
       "not at dim - 1 as transformers"),
    # ---- transformers' warnings per version; chapter 10's checks ---------------------
    _m("warnings5-implicit-one-warned", "serving.py",
       "        if implicit != factor and implicit != 1:\n",
       "        if implicit != factor:\n",
       [], "transformers 5's YaRN ratio warning without its exemption for equal "
       "lengths (4.57's condition)"),
    _m("entropy-minus-one-nat", "temperature.py",
       "    return torch.logsumexp(scores, dim=dim) - (p * finite).sum(dim)\n",
       "    return torch.logsumexp(scores, dim=dim) - (p * finite).sum(dim) - 1\n",
       ["10_beyond"], "attention entropy one nat low (within the old vacuous bounds)"),
    _m("self-extend-divide-floored", "remap.py",
       " - torch.tensor(w / g, dtype=torch.float32)",
       " - torch.tensor(w // g, dtype=torch.float32)",
       ["10_beyond"], "LongLM's prefill shift w - w/G read as the paper's w - w//G"),
    # ---- KV-cache sizing per engine (llama.cpp's run, vLLM 0.33.0's spec classes) ----
    _m("cpp-mla-caches-v-too", "tools/engines/kv_cache.py",
       'k_n, v_n = mla["kv_lora_rank"] + mla["qk_rope_head_dim"], 0',
       'k_n, v_n = mla["kv_lora_rank"] + mla["qk_rope_head_dim"], mla["kv_lora_rank"]',
       ["recipes/engines"], "llama.cpp's MLA cache sized with a separate V of the latent "
       "(1,088 values a token for DeepSeek-V3; its cache holds K only, 576)"),
    _m("cpp-swa-cache-without-ubatch", "tools/engines/kv_cache.py",
       "min(cells, window + ubatch)", "min(cells, window)",
       ["recipes/engines"], "llama.cpp's SWA cache sized to the window alone, without "
       "the n_ubatch tokens of the batch in flight"),
    _m("vllm-fp8-two-bytes", "tools/engines/kv_cache.py",
       '"float32": 4, "fp8": 1,', '"float32": 4, "fp8": 2,',
       ["recipes/engines"], "vLLM's fp8 KV cache counted at the model's 2 bytes per value"),
    _m("mrope-absolute-time-float-floor", "multidim.py",
       "* tokens_per_second * _FLOOR_LIFT", "* tokens_per_second",
       ["05_multidim"], "Qwen2.5-VL's absolute time floored in float64: a whole "
       "t·s·r rounded to just below itself loses an id (t = 7, 3 fps, r = 3: 13)"),
    # ---- chapter 6, population checks (the figures' sliders, generated settings) ------
    _m("pi-factor-floored", "scaling.py",
       'return _default_inv_freq(dim, base) / _shrink_factor(factor, "linear"), 1.0',
       'return _default_inv_freq(dim, base) / math.floor(_shrink_factor(factor, "linear")), 1.0',
       ["06_extension"], "PI's factor parsed as an integer (1.5 read as 1)"),
    _m("ntk-base-float32", "scaling.py",
       "    return _default_inv_freq(dim, ntk_base(base, factor, dim)), 1.0",
       "    return _default_inv_freq(dim, float(torch.tensor(ntk_base(base, factor, dim), "
       "dtype=torch.float32))), 1.0",
       ["06_extension"], "NTK-aware base rounded to float32 (slow pairs off by ~1e-6, "
       "under torch.allclose's default atol)"),
    _m("yarn-beta-slow-fixed", "scaling.py",
       "    low, high = pair_index(beta_fast), pair_index(beta_slow)",
       "    low, high = pair_index(beta_fast), pair_index(1.0)",
       ["06_extension"], "YaRN's ramp ends at r = 1 whatever beta_slow says"),
    _m("yarn-base-hardcoded", "scaling.py",
       "        return dim * math.log(length / (turns * 2 * math.pi)) / (2 * math.log(base))",
       "        return dim * math.log(length / (turns * 2 * math.pi)) / (2 * math.log(10000.0))",
       ["06_extension"], "YaRN's correction range computed with base 10^4, whatever the base"),
    _m("dynamic-ntk-length-blocks", "scaling.py",
       "    length = max_len if seq_len is None else max(seq_len, max_len)\n",
       "    length = max_len if seq_len is None else max(seq_len, max_len)\n"
       "    length = -(-length // 1024) * 1024\n",
       ["06_extension"], "dynamic NTK's length rounded up to blocks of 1 024 tokens"),
    _m("yarn-mscale-alone-used", "scaling.py",
       "    if mscale and mscale_all_dim:\n"
       "        return get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)",
       "    if mscale:\n"
       "        return get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim or 0.0)",
       ["06_extension"], "DeepSeek's mscale applied without mscale_all_dim (transformers "
       "ignores it)"),
    _m("llama3-context-default", "scaling.py",
       "                                  high_freq_factor=4.0,\n"
       "                                  original_max_position_embeddings=length,",
       "                                  high_freq_factor=4.0,\n"
       "                                  original_max_position_embeddings=4096,",
       ["06_extension"], "Llama 3's bands at a default context of 4 096 tokens, not the "
       "model's"),
    # ---- chapters 8-9: population checks (prompts drawn at random, a forward pass) ----
    _m("mrope-video-next-id-temporal", "multidim.py",
       "        start = int(ids.max()) + 1                          # largest id so far",
       '        start = int(ids[0].max() if kind == "video" else ids.max()) + 1  # bug',
       ["08_practice"], "M-RoPE: the id after a video taken from its temporal ids "
       "only (wrong when the grid is wider than long; the printed prompts pass)"),
    _m("qwen3vl-flag-only", "tools/inspector.py",
       '"qwen3_vl": ("stride3", (24, 20, 20))', '"qwen3_vl": ("blocks", (24, 20, 20))',
       ["09_models"], "Qwen3-VL's M-RoPE reported as contiguous blocks, as Qwen2-VL's "
       "(Qwen3-VL's rotary code always interleaves, whatever mrope_interleaved says)"),
    _m("exaone4-rotates-full-layers", "per_layer.py",
       '                window is not None and kind != "sliding_attention":',
       '                window is not None and kind == "sliding_attention":',
       ["09_models"], "EXAONE 4's rotating and NoPE layers swapped (the attention "
       "rotates where it slides or no window is set)"),
    _m("rope-partial-base-ignored", "rope.py",
       "        return inv_freq(rotary_dim, base, dtype=dtype)\n",
       "        return inv_freq(rotary_dim, dtype=dtype)\n",
       ["04_rope"], "partial rotary frequencies built with the default base 10000, "
       "whatever rope_theta says"),
    _m("glm4v-mrope-from-flag", "tools/inspector.py",
       '"glm4v": ("blocks", (8, 12, 12))', '"glm4vx": ("blocks", (8, 12, 12))',
       [], "GLM-4.1V's M-RoPE type missing from the inspector's table: its axes "
       "refused although its rotary code is known"),
    _m("glm4v-pairs-halves", "config_reader.py",
       '"helium": True, "llama4": True, "glm4v": True,',
       '"helium": True, "llama4": True,',
       [], "GLM-4.1V's pairs reported as halves (its apply function pairs neighbours)"),
    _m("gptj-pairs-halves", "config_reader.py",
       '"deepseek_v2": True, "gptj": True, "codegen": True,',
       '"deepseek_v2": True, "codegen": True,',
       [], "GPT-J's pairs reported as halves (rotate_every_two pairs neighbours)"),
    # ---- M-RoPE of transformers 5.x, judged from results/mrope-5.json --------------------
    _m("mrope-ernie-as-blocks", "tools/inspector.py",
       '"ernie4_5_vl_moe": ("hw-alternate", (22, 22, 20))',
       '"ernie4_5_vl_moe": ("blocks", (22, 22, 20))',
       [], "ERNIE-4.5-VL's M-RoPE read as Qwen2-VL's blocks in its config's order "
       "(its code alternates height and width pairs, then time)"),
    _m("mrope-stride3-smallest-section", "tools/inspector.py",
       "            for i in range(a, min(3 * sections[a], pairs), 3):\n",
       "            for i in range(a, min(3 * min(sections), pairs), 3):\n",
       [], "Qwen3-VL-style interleaving stops every axis at the smallest section "
       "(right for the released [24, 20, 20], wrong for other sections)"),
    _m("legacy-rotary-keys-everywhere", "config_reader.py",
       "    if not unread:\n        return text\n",
       "    if True:\n        return text\n",
       [], "rotary_pct, rotary_emb_base and rotary_dim read on every model type "
       "(only GPT-NeoX, GPT-J and CodeGen read them)"),
    _m("kv-heads-null-is-default", "serving.py",
       'and "num_key_value_heads" not in text:',
       "and True:",
       [], "an explicit null num_key_value_heads read as the class default (the "
       "class turns null into the query heads)"),
    _m("crosscheck-freqs-cis-unread", "tools/crosscheck.py",
       "if isinstance(out, torch.Tensor) and out.is_complex():",
       "if False:",
       [], "crosscheck unpacks Llama 4's and DeepSeek-V2's complex freqs_cis as (cos, sin)"),
    _m("kv-defaults-ernie-missing", "_validate_config.py",
       '"ernie4_5": 2,', "",
       [], "ERNIE 4.5's class default of 2 key heads missing from KV_HEADS_DEFAULTS "
       "(a config without the field sized with the query heads)"),
    _m("defaults-nemotron-share-missing", "_defaults.py",
       '"nemotron": {"rope_theta": 10000.0, "partial_rotary_factor": 0.5},',
       '"nemotron": {"rope_theta": 10000.0},',
       [], "Nemotron's class default partial_rotary_factor 0.5 dropped: a config "
       "without it is read as rotating the whole head"),
    _m("defaults-scaled-default-unread", "config_reader.py",
       "    if scaled_used:\n", "    if False:\n",
       [], "a class whose default rope_scaling is scaled (Apertus, gpt-oss): a config "
       "without the key read unscaled"),
    _m("cache-layer-types-key-unread", "serving.py",
       "    if (window is not None and isinstance(raw_types, (list, tuple))",
       "    if (False and isinstance(raw_types, (list, tuple))",
       [], "a layer_types key on a class that does not define it (StarCoder2, GLM-4): "
       "DynamicCache follows it, the library slid every layer"),
    _m("kv-defaults-text-type-unread", "serving.py",
       "    table_type = next((t for t in (model_type, ",
       "    table_type = next((t for t in (",
       [], "KV_HEADS_DEFAULTS looked up under the composite's type only (Qwen3.5 "
       "text configs sized with the query heads)"),
    _m("crosscheck-seq-len-module", "tools/crosscheck.py",
       "    if _takes_seq_len(module):\n        return _SeqLenRotary",
       "    if False:\n        return _SeqLenRotary",
       [], "crosscheck calls PhiMoE's and Open-Llama's seq_len rotary modules with "
       "positions"),
    _m("partial-unread-open-llama", "config_reader.py",
       'PARTIAL_UNREAD = ("chameleon", "dbrx", "open-llama", "roformer")',
       'PARTIAL_UNREAD = ("chameleon", "dbrx", "roformer")',
       [], "Open-Llama read as rotating a partial_rotary_factor share (its rotary "
       "module covers the whole head_dim)"),
    _m("cache-walk-recurrent-as-kv", "tools/cache_walk.py",
       'STATE_PARTS = ("conv", "ssm", "recurrent", "rg_lru", "linear_cache")',
       'STATE_PARTS = ("conv", "ssm", "rg_lru", "linear_cache")',
       [], "the cache walk counts recurrent state as keys and values"),
    _m("crosscheck-layer-type-module", "tools/crosscheck.py",
       '    if types and hasattr(module, f"{types[index]}_inv_freq"):',
       '    if False:',
       [], "crosscheck reads transformers 5.x's per-layer-type rotary module as one "
       "without inv_freq (it raised on Gemma 3, OLMo 3, ...)"),
    # the layer patterns, rules and caches of the 5.x population (stop 66)
    _m("pattern-flint-last-layer-slides", "per_layer.py",
       '"flint": lambda t, n, get: [_kind(i < 2 or i % 4 == 1 or i == n - 1)',
       '"flint": lambda t, n, get: [_kind(i < 2 or i % 4 == 1)',
       [], "Flint's last layer read as sliding (its class makes it full attention)"),
    _m("afmoe-global-layers-rotate", "per_layer.py",
       'elif model_type in ("afmoe", "lara_mini") and kind != "sliding_attention":',
       'elif model_type in ("afmoex", "lara_mini") and kind != "sliding_attention":',
       [], "AFMoE's full-attention layers given RoPE (AfmoeAttention rotates "
       "only its local layers)"),
    _m("dsa-indexer-cache-dropped", "serving.py",
       '            indexer_per_token = indexer["layers"] * indexer["index_head_dim"] * width',
       '            indexer_per_token = 0 * indexer["index_head_dim"] * width',
       [], "the sparse-attention indexer's key cache left out of the KV bytes"),
    _m("mimo-sliding-heads-single", "serving.py",
       'KV_HEADS_MULTIPLE = {"mimo_v2_flash": {"sliding_attention": 2}}',
       'KV_HEADS_MULTIPLE = {"mimo_v2_flash": {"sliding_attention": 1}}',
       [], "MiMo-V2-Flash's sliding layers given the full layers' KV heads"),
    _m("beam-none-rope-rotates", "per_layer.py",
       "            and nested[kind] is None)",
       "            and nested[kind] is None and False)",
       [], "a 5.x rope_parameters entry of None read as a rotating layer"),
    _m("gemma4-global-head-from-head-dim", "config_reader.py",
       'override = {"head_dim": text.get("global_head_dim", 512)}',
       'override = {"head_dim": text.get("head_dim", 512)}',
       [], "Gemma 4's full-attention head size read from head_dim, not "
       "global_head_dim"),
    _m("per-layer-heads-ignored-in-cache", "serving.py",
       "            if index in own:\n",
       "            if index in own and False:\n",
       [], "the KV cache sized with the global head on layers with their own "
       "(per_layer_config)"),
    _m("gemma4-softmax-scale-sqrt", "logit_scale.py",
       'if model_type in ("gemma3n", "gemma4", "gemma4_unified"):',
       'if model_type in ("gemma3n",):',
       [], "Gemma 4's softmax scale taken as head_dim^-1/2 (it calls attention "
       "with scaling 1)"),
    _m("gemma4-last-layer-not-forced", "config_reader.py",
       "        kinds[-1] = \"full_attention\"  # the class forces it",
       "        pass  # the class forces it",
       [], "Gemma 4's last layer left sliding (the class makes it full attention)"),
    _m("cpmant-dim-head-ignored", "serving.py",
       'if model_type == "cpmant":  # CpmAntAttention: its own dim_head',
       'if model_type == "cpmantx":  # CpmAntAttention: its own dim_head',
       [], "CPM-Ant's KV head taken as hidden_size / heads (it has dim_head)"),
    _m("cpmant-prompt-tokens-dropped", "serving.py",
       'tokens = _validate.nonnegative_int("prompt_length", get("prompt_length"))',
       'tokens = 0',
       [], "CPM-Ant's prompt tokens left out of the cache"),
    _m("jetmoe-kv-channels-ignored", "config_reader.py",
       'if text is None and model_type == "jetmoe":',
       'if text is None and model_type == "jetmoex":',
       [], "JetMoE's head size taken from hidden_size / heads (it is kv_channels)"),
    _m("kimi-linear-rotates", "config_reader.py",
       '"kimi_linear": "no positional encoding (NoPE)",',
       '"kimi_linearx": "no positional encoding (NoPE)",',
       [], "Kimi Linear's MLA layers taken to rotate (its k_rot is never rotated)"),
    _m("qwen3-5-state-unsized", "serving.py",
       'GATED_DELTANET = ("qwen3_next", "qwen3_5", "qwen3_5_moe", "olmo_hybrid", "lara_mini",',
       'GATED_DELTANET = ("qwen3_next", "qwen3_5_moe", "olmo_hybrid", "lara_mini",',
       [], "Qwen3.5's gated-DeltaNet state sized as a Mamba state"),
    _m("minimax-m3-rotary-dim-read", "config_reader.py",
       '"rotary_dim": ("gptj", "codegen", "minimax_m2")}',
       '"rotary_dim": ("gptj", "codegen", "minimax_m2", "minimax_m3_vl")}',
       [], "MiniMax-M3's unread rotary_dim taken as its rotated share"),
    _m("mla-nope-softmax-head", "logit_scale.py",
       'text.get("qk_rope_head_dim", 64))',
       'head_dim)',
       [], "an MLA model without RoPE: its softmax scale from the whole key head"),
    _m("granite-swa-zero-theta-rotates", "per_layer.py",
       "        elif _layer_theta(text, model_type, i, n) == 0:\n",
       "        elif _layer_theta(text, model_type, i, n) == -1:\n",
       [], "GraniteSWA's layers with layer_rope_theta 0 given RoPE (they are NoPE)"),
    _m("granite-swa-layer-theta-ignored", "per_layer.py",
       '            out["rope_parameters"] = {**block, "rope_theta": theta}',
       '            out["rope_parameters"] = {**block}',
       [], "GraniteSWA's per-layer base ignored (every layer at the global one)"),
    _m("lfm3-state-unsized", "serving.py",
       'if model_type in ("lfm3", "lfm2_moe") or (model_type == "lfm2"',
       'if model_type in ("lfm3x", "lfm2_moe") or (model_type == "lfm2"',
       [], "LFM3's convolution state sized as 4.57.6's LFM2 (on every layer)"),
    _m("dots1-window-layers-ignored", "per_layer.py",
       '        _kind(get("sliding_window") is None or i < _validate.nonnegative_int(',
       '        _kind(get("sliding_window") is not None or i < _validate.nonnegative_int(',
       [], "Dots1's layers past max_window_layers read as full attention"),
    _m("gemma4-default-rope-missing", "config_reader.py",
       '    for name in ("gemma4", "gemma4_unified")}',
       '    for name in ("gemma4x",)}',
       [], "a Gemma 4 config without rope_parameters refused (its class fills in "
       "one block per layer type)"),
    _m("cache-5x-layer-types-ignored", "serving.py",
       "    if model_type in LAYER_TYPED or model_type in LAYER_TYPED_5:\n",
       "    if model_type in LAYER_TYPED:\n",
       [], "transformers 5.x's cache of a class that fills in layer_types taken to "
       "slide on every layer when the config sets a window"),
    _m("zaya-state-no-delayed-values", "serving.py",
       '        delayed = head["kv_heads"] * head["key_dim"] // 2\n',
       '        delayed = 0\n',
       [], "ZAYA's delayed-value state left out of the fixed state"),
    _m("partial-5x-whole-head-ignored", "config_reader.py",
       '    return 1.0 if major >= 5 else partial\n',
       '    return partial\n',
       [], "transformers 5.x's plain RoPE of a Llama-style class read with the "
       "config's partial_rotary_factor (5.x rotates the whole head)"),
    _m("partial-5x-set-missing-llama", "config_reader.py",
       '    "lfm3", "llama", "llama4_text", ',
       '    "lfm3", "llama4_text", ',
       [], "one Llama-style class left out of the 5.x whole-head list"),
    _m("partial-unread-5x-block-kept", "config_reader.py",
       '        if in_block:  # 5.x: its rotary module is built over head_dim all the same\n',
       '        if False:  # 5.x: its rotary module is built over head_dim all the same\n',
       [], "DBRX's partial_rotary_factor inside a 5.x rope_parameters read (its "
       "rotary module rotates the whole head)"),
    _m("gpt-neox-top-level-factor-read", "config_reader.py",
       '            config.pop(lost)\n    filled = dict(config)\n',
       '    filled = dict(config)\n',
       [], "GPT-NeoX's top-level partial_rotary_factor or rope_theta read (its "
       "config class replaces both by rotary_pct and rotary_emb_base)"),
    _m("crosscheck-composite-text-unshrunk", "tools/crosscheck.py",
       '        params |= set(std_inspect.signature(text_class.__init__).parameters)\n',
       '        pass\n',
       [], "a composite's text model built at full vocabulary and MLP width"),
    _m("text-class-defaults-unstripped", "_defaults.py",
       '                       if name.endswith("_text")\n',
       '                       if False\n',
       [], "a text class's defaults (Qwen3.5's quarter rotation) lost when its "
       "type is read without the _text suffix"),
    _m("deltanet-recurrent-state-model-dtype", "serving.py",
       '        per = conv * b + vh * kd * vd * 4\n',
       '        per = conv * b + vh * kd * vd * b\n',
       [], "the gated-DeltaNet recurrent state sized in the model's dtype "
       "(transformers keeps it in float32)"),
    _m("bailing-recurrent-state-model-dtype", "serving.py",
       '        return {"bytes": layers * (conv * b + heads * d * d * 4), "layers": layers,\n',
       '        return {"bytes": layers * (conv * b + heads * d * d * b), "layers": layers,\n',
       [], "Bailing-hybrid's recurrent state sized in the model's dtype"),
    _m("granite-5x-ssm-state-model-dtype", "serving.py",
       '        return _mamba2_state(layers, conv, ssm, b, transformers_version,\n',
       '        return _mamba2_state(layers, conv, ssm, b, None,\n',
       [], "Granite 4.0's SSM state sized in the model's dtype under transformers "
       "5.x (its DynamicCache keeps the float32 state the layer computes)"),
    _m("crosscheck-composite-tower-full", "tools/crosscheck.py",
       '        one = {k: 1 for k in OTHER_PART_LAYERS if k in params}\n',
       '        one = {}\n',
       [], "a composite's vision tower built at its full depth"),
    _m("roformer-base-unknown", "config_reader.py",
       '              "roformer": 10000.0}',
       '              }',
       [], "RoFormer's fixed base 10,000 not known (its config names none)"),
    _m("roformer-pairs-halves", "config_reader.py",
       '                     "roformer": True,\n',
       '',
       [], "RoFormer's neighbouring-feature pairs read as halves"),
    _m("roformer-table-limit-unsaid", "tools/inspector.py",
       '            config_reader.FIXED_BASE:\n',
       '            ():\n',
       [], "a model with a sinusoidal table advised to extend through rope_scaling"),
    _m("table-model-reads-rope-scaling", "config_reader.py",
       '    if name in FIXED_BASE:  # a table built from the base alone: no method read\n',
       '    if False:  # a table built from the base alone: no method read\n',
       [], "a GPT-J/CodeGen/RoFormer config's rope_scaling applied (their table "
       "reads none)"),
    _m("pattern-qwen4-exp-first-layer-indexed", "per_layer.py",
       '        "indexed_attention" if (i + 1) % _validate.positive_int(\n',
       '        "indexed_attention" if i % _validate.positive_int(\n',
       [], "Qwen4-Exp's indexed layers counted from the first layer"),
    _m("pattern-zamba-prefix-dropped", "per_layer.py",
       '    return ["mamba", "mamba", "hybrid"] + [\n',
       '    return [] + [\n',
       [], "Zamba's three leading blocks (mamba, mamba, hybrid) left out"),
    _m("pattern-kimi-linear-one-indexed", "per_layer.py",
       '            kinds[layer - 1] = kind\n',
       '            kinds[min(layer, n - 1)] = kind\n',
       [], "Kimi Linear's 1-indexed layer lists read from 0"),
    _m("pattern-recurrent-gemma-attention-full", "per_layer.py",
       '        "linear_attention" if kind == "recurrent" else "sliding_attention"\n',
       '        "linear_attention" if kind == "recurrent" else "full_attention"\n',
       [], "RecurrentGemma's local attention blocks read as full attention"),
    _m("zamba-rotates", "config_reader.py",
       'NOT_ROTARY["zamba"] = "no positional encoding (NoPE)"\n',
       '',
       [], "Zamba's attention read as rotating (ZambaAttention builds no rotary "
       "embedding)"),
    _m("zamba-head-from-hidden", "serving.py",
       '            "attention_head_dim", 2 * _validate.positive_int("hidden_size", hidden)\n',
       '            "attention_head_dim", _validate.positive_int("hidden_size", hidden)\n',
       [], "Zamba's attention head taken as hidden_size / heads (it attends over "
       "the hidden state and the embeddings, twice as wide)"),
    _m("zamba-softmax-whole-head", "logit_scale.py",
       '        out.append({"name": "softmax scale", "value": (head_dim / 2) ** -0.5,\n',
       '        out.append({"name": "softmax scale", "value": head_dim ** -0.5,\n',
       [], "Zamba's softmax scale from its whole (doubled) head"),
    _m("v5-flat-block-read", "config_reader.py",
       '    flat = name in V5_NESTED_DEFAULTS and _is_flat_block(nested) and \\\n',
       '    flat = False and _is_flat_block(nested) and \\\n',
       [], "a one-block rope_parameters of Gemma 3 / OLMo 3 (5.x) read, though the "
       "class adds its per-type entries and the model reads only those"),
    _m("layer-entry-unmarked", "per_layer.py",
       '            out["rope_parameters"] = dict(nested[entry.attention])\n'
       '            out[config_reader.LAYER_TYPE_KEY] = entry.attention\n',
       '            out["rope_parameters"] = dict(nested[entry.attention])\n',
       [], "a layer's own rope_parameters entry taken for a file's one-block "
       "rope_parameters (and replaced by the class defaults)"),
    _m("defaults-5-changed-ignored", "config_reader.py",
       "    if changed and _reading_major(transformers_version) >= 5:\n",
       "    if changed and False:\n",
       ["09_models"], "a field a 5.x config class fills in with another default than 4.57.6's "
       "(Cohere's, Falcon-H1's, OLMo 3's, Persimmon's rope_theta) read as 4.57.6's"),
    _m("olmo3-sliding-top-base", "per_layer.py",
       "    return five if major >= 5 else top\n", "    return top\n",
       ["09_models"], "OLMo 3's sliding layers of a 4.x-layout file given the top-level base "
       "under 5.x (Olmo3Config gives them its default)"),
    _m("falcon-h1-state-unsized", "serving.py",
       '    if model_type == "falcon_h1":\n', '    if False:\n',
       [], "Falcon-H1's Mamba state (on every layer) not counted"),
    _m("falcon-h1-keys-slide", "serving.py",
       '                 "falcon_h1": "FalconHybridMambaAttentionDynamicCache"}',
       '                 "falcon_h1_": "FalconHybridMambaAttentionDynamicCache"}',
       [], "Falcon-H1's keys and values capped at a sliding_window it never uses"),
    _m("recurrent-gemma-keys-grow", "serving.py",
       "            if preallocated:\n", "            if False:\n",
       [], "RecurrentGemma's attention buffer (4.57.6) counted as growing with the "
       "tokens, not allocated for the whole window at the first one"),
    _m("recurrent-gemma-lru-in-dtype", "serving.py",
       "lru * 4 + lru * steps * b", "lru * b + lru * steps * b",
       [], "RecurrentGemma's RG-LRU state in the model's dtype (it is float32)"),
    _m("nemotron-h-ssm-in-dtype", "serving.py",
       "            return {\"bytes\": layers * (conv * b + ssm * 4), \"layers\": layers,\n"
       "                    \"what\": what}\n        if model_type == \"recurrent_gemma\":",
       "            return {\"bytes\": layers * (conv * b + ssm * b), \"layers\": layers,\n"
       "                    \"what\": what}\n        if model_type == \"recurrent_gemma\":",
       [], "Nemotron-H's SSM state in the model's dtype (5.24.0 keeps it in float32)"),
    _m("nemotron-h-legacy-names", "serving.py",
       'legacy = {"n_groups": "mamba_n_groups", "conv_kernel": "mamba_d_conv"}',
       "legacy = {}",
       [], "Nemotron-H's mamba_n_groups / mamba_d_conv (old names its class still "
       "reads) ignored for the class defaults"),
    _m("nemotron-h-layers-from-count", "config_reader.py",
       '    if text.get("model_type") == "nemotron_h":  # the block list\'s length\n',
       '    if False:\n',
       [], "Nemotron-H's layer count read from num_hidden_layers, which its class "
       "ignores (the block pattern's length counts)"),
    _m("longcat-decoder-layers", "config_reader.py",
       "        return 2 * layers\n    hidden = _validate", "        return layers\n    hidden = _validate",
       [], "LongCat-Flash's cache layers counted as its decoder layers (each holds "
       "two attention sublayers, each with its own cache)"),
    _m("alias-target-wins", "config_reader.py",
       "    return own if given is None else given\n",
       "    return given if own is None else own\n",
       [], "JetMoE's kv_channels (GLM-4-MoE-Lite's qk_rope_head_dim) kept beside a "
       "head_dim that its class's attribute_map sets after it"),
    _m("bamba-state-unsized", "serving.py",
       '    "bamba": {"mamba_n_heads": 128,', '    "bamba_": {"mamba_n_heads": 128,',
       [], "Bamba's Mamba-2 state not counted"),
    _m("bamba-layer-types-read", "per_layer.py",
       '    "bamba": ("attn_layer_indices", "5.x refuses the key", True),\n',
       '',
       [], "a layer_types key read for Bamba, whose 4.57.6 class takes its attention "
       "layers from attn_layer_indices"),
    _m("names-last-wins", "config_reader.py",
       "            value = out[given[0]]\n", "            value = out[given[-1]]\n",
       [], "of two names a config class maps onto one field, the one it overwrites "
       "read (BLOOM's hidden_size over n_embed, GPT-2's n_layer over num_hidden_layers)"),
    _m("names-union-read", "config_reader.py",
       "        given = [n for n in order if n in out and (out[n] is not None\n",
       "        given = [n for n in names[name] if n in out and (out[n] is not None\n",
       [], "every name any class uses read as the field, whatever this class reads "
       "(n_layer in a Llama config)"),
    _m("names-table-unused", "config_reader.py",
       "        config = _class_names(dict(config), model_type)\n",
       "        config = dict(config)\n",
       ["recipes/read_a_config"], "a config read with every name any class uses, "
       "not the names its own class reads (DBRX's max_seq_len missed)"),
    _m("one-release-read-as-both", "config_reader.py",
       '    five = layout == "5.x" or _only_release(model_type) == 5\n',
       '    five = layout == "5.x"\n',
       ["09_models"], "a 4.x-layout YaRN or LongRoPE file of a type only transformers 5.x "
       "registers refused as if 4.57.6 read it too (Qwen3.5, CWM)"),
    _m("block-wins-for-both", "config_reader.py",
       "    if key not in values or _only_release(model_type) != 5:\n",
       "    if key not in values:\n",
       [], "the rope block's base read over a top-level one for every type, though "
       "4.57.6 reads the top level (BitNet, Granite)"),
    _m("names-installed-release-only", "config_reader.py",
       "    if here is None and there is None:\n        return text\n",
       "    if here is None:\n        return text\n",
       [], "a type only the other transformers release registers read with every "
       "name (Step-3.5's num_attention_groups under 4.57.6)"),
    _m("hrm-blocks-as-layers", "config_reader.py",
       '            "num_hidden_layers": blocks * high * (low + 1)}',
       '            "num_hidden_layers": blocks}',
       [], "HRM-Text's blocks per stack read as its layers, not one cache layer per "
       "attention call of the recurrent forward"),
    _m("mimo-window-is-size", "config_reader.py",
       '    window = _validate.positive_int("sliding_window_size", size) + 1\n',
       '    window = _validate.positive_int("sliding_window_size", size)\n',
       [], "MiMo-V2-Flash's sliding_window_size read as the window (the class adds "
       "the query: size + 1)"),
    _m("swin-width-given-wins-4x", "config_reader.py",
       "    if major >= 5 and text.get(\"hidden_size\") is not None:\n",
       "    if text.get(\"hidden_size\") is not None:\n",
       [], "a Swin hidden_size read from the file under 4.57.6, whose class computes "
       "it from embed_dim and depths"),
    _m("nested-strays-kept", "config_reader.py",
       "    if not strays:\n        return text\n",
       "    if strays or not strays:\n        return text\n",
       [], "a partial_rotary_factor beside the per-layer-type RoPE blocks read as a "
       "block (the library refused Gemma 4, Beam, ZAYA files transformers accepts)"),
    _m("v4-compress-theta-fills-nested", "config_reader.py",
       '            entry.setdefault("rope_theta", theta)\n',
       '            entry.setdefault("rope_theta", theta if label == "main" else '
       'text.get("compress_rope_theta") or 160000.0)\n',
       [], "DeepSeek-V4's compressed entry without a base given compress_rope_theta; "
       "the class fills both entries from rope_theta"),
    _m("v4-buffer-once", "serving.py",
       "+ 4 * (n % r) * (d + i) * b", "+ 2 * (n % r) * (d + i) * b",
       [], "DeepSeek-V4's compressed-sparse open block counted once (it holds "
       "values and gates of two widths)"),
    _m("v4-overlap-model-dtype", "serving.py",
       "(r * (d + i) * (b + 4) if n >= r else 0)", "(r * (d + i) * 2 * b if n >= r else 0)",
       [], "DeepSeek-V4's overlap gates sized in the model's dtype (they are float32 "
       "beside position_bias)"),
    _m("v4-growth-one-layer", "serving.py",
       'info.update(rate=r, bytes_per_token=info["layers"] * (width * b / r',
       'info.update(rate=r, bytes_per_token=(width * b / r',
       [], "DeepSeek-V4's growth per token given for one layer of a kind, not all "
       "of them (the inspector printed 0.32 KiB a token for 6.4 KiB)"),
    _m("v4-window-one-bounded", "serving.py",
       "    grows = 1 if w == 1 else 0\n", "    grows = 0\n",
       [], "DeepSeek-V4's window of 1 taken as bounded (its cache keeps every token)"),
    _m("zamba2-ssm-model-dtype-5x", "serving.py",
       "                transformers_version, \"per layer a Mamba-2\")",
       "                None, \"per layer a Mamba-2\")",
       [], "Zamba2's SSM state sized in the model's dtype under 5.x (5.24.0 keeps "
       "it in float32)"),
    _m("zamba2-head-hidden-over-heads", "config_reader.py",
       "    head = 2 * _validate.positive_int(\"hidden_size\", hidden) // \\\n",
       "    head = _validate.positive_int(\"hidden_size\", hidden) // \\\n",
       [], "Zamba2's head read as hidden_size / heads (its attention's head is twice "
       "that: it attends over the hidden states and the original embeddings)"),
    _m("zamba2-rope-without-switch", "per_layer.py",
       "                                         or not text.get(\"use_mem_rope\", False)):\n",
       "                                         ):\n",
       [], "Zamba2's shared attention read as rotating without use_mem_rope"),
    _m("qwen4-no-indexer", "serving.py",
       '               or (name == "qwen4_exp" and kind == "full_attention")]',
       '               and name != "qwen4_exp"]',
       [], "Qwen4-Exp's indexer keys left out of its cache"),
    _m("only-5x-read-as-installed", "serving.py",
       "    return MIMICKED_VERSIONS[5] if 5 in only and 4 not in only else None\n",
       "    return None\n",
       [], "a type only transformers 5.x registers sized as the installed 4.57.6 "
       "would (GLM-5's decompressed keys, 46 times its latent and indexer keys)"),
    _m("qwen4-ple-unsized", "serving.py",
       "                return {\"bytes\": layers * per + ple * b, \"layers\": layers,",
       "                return {\"bytes\": layers * per, \"layers\": layers,",
       [], "Qwen4-Exp's per-layer-embedding convolution state left out"),
    # ---- Inkling's text models (transformers 5.x; tests/test_generated_caches.py) ----
    _m("inkling-sliding-full-heads", "serving.py",
       '                   if kind == "hybrid_sliding"}',
       '                   if kind == "sliding_attention"}',
       [], "Inkling's sliding layers cached with the full layers' heads, not swa_*"),
    _m("inkling-state-model-dtype", "serving.py",
       "per = {kind: 4 * steps", "per = {kind: b * steps",
       [], "Inkling's convolution states in the model's dtype (they stay float32)"),
    _m("inkling-state-full-heads", "serving.py",
       'for kind, h in (("hybrid", full), ("hybrid_sliding", sliding))',
       'for kind, h in (("hybrid", full), ("hybrid_sliding", full))',
       [], "the key and value convolutions of a sliding layer sized with the full "
       "layers' heads"),
    _m("inkling-loop-no-copies", "serving.py",
       "    return list(kinds[start:end]) * (passes - 1)", "    return []",
       [], "Inkling 2 Loop's looped layers cached once, not once per pass"),
    _m("inkling-loop-config-ignored", "serving.py",
       "value = loop.get(override, text.get(key)) if override else text.get(key)",
       "value = text.get(key)",
       [], "Inkling 2 Loop's loop_config read as if absent"),
    _m("inkling-kernel-alias-loses", "serving.py",
       "    if alias is not None and alias in text:",
       "    if alias is not None and alias in text and key not in text:",
       [], "conv_kernel_size read over its alias sconv_kernel_size, which the class "
       "lets win"),
    _m("inkling-v1-scale-sqrt", "logit_scale.py",
       'power = -1.0 if model_type == "inkling" else -0.5', "power = -0.5",
       [], "Inkling's softmax scale taken as head_dim^-1/2 (it is 1/head_dim)"),
    _m("inkling-local-ids-ignored", "per_layer.py",
       'if _v1 and t.get("local_layer_ids") is not None',
       'if False and t.get("local_layer_ids") is not None',
       [], "InklingTextConfig's local_layer_ids ignored (the (i + 1) % 6 rule used)"),
    _m("inkling-window-plus-one", "per_layer.py",
       '        elif kind == "hybrid_sliding" and model_type in INKLING:\n'
       "            span = window\n",
       '        elif kind == "hybrid_sliding" and model_type in INKLING:\n'
       "            span = window + 1\n",
       [], "Inkling's sliding_window_size read as MiMo's (the window plus one)"),
    # ---- Mllama's cross-attention layers (tests/test_per_layer.py, 4.57.6 live) ----
    _m("mllama-cross-rotates", "per_layer.py",
       '        elif kind == "cross_attention":  # Mllama',
       '        elif kind == "cross_attention_":  # Mllama',
       [], "Mllama's cross-attention layers read as rotating"),
    _m("mllama-cross-list-ignored", "per_layer.py",
       "        cross = set(_MLLAMA_CROSS if cross is None else cross)",
       "        cross = set(_MLLAMA_CROSS)",
       [], "Mllama's cross_attention_layers replaced by the class default"),
    _m("mllama-cross-caches", "serving.py",
       '         "cross_attention": "the keys and values',
       '         "cross_attention_": "the keys and values',
       [], "Mllama's cross-attention layers sized as caching keys and values per "
       "text token"),
    _m("mllama-cache-window-ignored", "serving.py",
       '    if model_type in ("mllama", "mllama_text_model"):\n        # MllamaTextConfig',
       '    if model_type in ("mllama_",):\n        # MllamaTextConfig',
       [], "Mllama's cache sized without the sliding_window or layer_types keys its "
       "DynamicCache reads"),
    _m("mllama-layer-types-as-layers", "per_layer.py",
       "        # which serving._layer_cache_kinds follows)\n        given = None",
       "        # which serving._layer_cache_kinds follows)\n        pass",
       [], "a layer_types key given to Mllama read as its layers (the cross-attention "
       "layers lost)"),
    _m("crosscheck-text-model-base", "tools/crosscheck.py",
       'base = model.model if own is not None else getattr(model, "language_model", model)',
       'base = getattr(model, "language_model", model)',
       [], "the crosscheck looks for a text model's layers on its causal LM, not "
       "its decoder"),
    _m("whole-head-5-mllama-missing", "config_reader.py",
       '"mixtral", "mllama_text_model",', '"mixtral",',
       [], "Mllama's 5.x default RoPE read as rotating partial_rotary_factor of the "
       "head"),
    _m("beyond-every-module-unused", "tools/tiny_model.py",
       "                if i not in used:\n                    row[\"unused\"] = True",
       "                if True:\n                    row[\"unused\"] = True",
       [], "every rotary module marked unused, so none is judged past L"),
    _m("beyond-unused-judged", "tools/conformance.py",
       'for row in [r for r in beyond["rows"] if not r.get("unused")] if ropes else ():',
       'for row in beyond["rows"] if ropes else ():',
       [], "a rotary module no layer uses judged past L (4.57.6's Gemma 3 local module "
       "with every layer full)"),
    _m("qwen3-moe-window-without-switch", "serving.py",
       'if model_type in ("qwen2_moe", "qwen3_moe") and not text.get("use_sliding_window"):',
       'if model_type in ("qwen2_moe",) and not text.get("use_sliding_window"):',
       [], "Qwen3-MoE's sliding_window read without use_sliding_window (every layer "
       "sized as a sliding one)"),
    _m("cpmant-window-prompt-fixed", "serving.py",
       '            if any(kind in ("sliding_attention", "chunked_attention")\n'
       '                   for kind, _ in _cache_kinds(config, engine)[0]):',
       '            if False:',
       [], "CPM-Ant's prompt tokens sized as fixed beside a cache that slides over them"),
    # ---- what each layer attends to (tests/test_attention_spans.py) ----
    _m("key-only-layer-types-read", "per_layer.py",
       "            raw_type in _key_only_types().get(major, ()) and \\\n",
       "            raw_type in () and \\\n",
       [], "a layer_types key read as the attention where the config class does not "
       "define it (its model's masks never read it; only the cache does)"),
    _m("slides-every-layer-phi3-missing", "per_layer.py",
       '4: frozenset({"doge", "mistral", "mixtral", "phi3", "phi4_multimodal", "phimoe",',
       '4: frozenset({"doge", "mistral", "mixtral", "phi4_multimodal", "phimoe",',
       [], "Phi-3's sliding_window ignored by the layer layout (every layer read as "
       "global where its one mask slides)"),
    _m("qwen2-moe-4x-by-max-window-layers", "per_layer.py",
       '    elif model_type in ("qwen3_moe", "qwen2_moe"):',
       '    elif model_type in ("qwen3_moe",):',
       [], "4.57.6's Qwen2-MoE read as Qwen2 (only the layers past max_window_layers "
       "slide, where its one mask slides every layer)"),
    _m("minimax-window-ignored", "per_layer.py",
       '            span = window  # its "full_attention" layers: the sliding mask',
       '            span = None  # its "full_attention" layers: the sliding mask',
       [], "MiniMax's full attention layers read as global under sliding_window"),
    _m("phimoe-4x-switch-ignored", "per_layer.py",
       '        if model_type == "phimoe" and major < 5 and not text.get("use_sliding_window",',
       '        if model_type == "phimoe_" and major < 5 and not text.get("use_sliding_window",',
       [], "4.57.6's PhiMoE read as sliding where a use_sliding_window key of false "
       "turns its mask off"),
    _m("never-slides-minimax-m3-missing", "per_layer.py",
       'NEVER_SLIDES = {5: frozenset({"minimax_m3_vl"})}',
       'NEVER_SLIDES = {5: frozenset()}',
       [], "MiniMax-M3-VL's sliding_attention layers read as sliding where its model "
       "builds only the causal mask"),
    # ---- vLLM's layers, as its own classes build them (tests/test_vllm_layers.py) ----
    _m("vllm-engine-wide-window-ignored", "serving.py",
       "        engine_wide = window if types is None or all(",
       "        engine_wide = None if types is None or all(",
       ["recipes/engines"], "vLLM's engine-wide window ignored: a lone "
       "sliding_window read as no window on classes that pass none of their own "
       "(Llama, OPT, ...)"),
    _m("vllm-llama-layer-types-unread", "serving.py",
       '    "mellum", "ministral3", "mistral", "muse_glimmer", "olmo", "olmo2", "olmo3",',
       '    "mellum", "ministral3", "muse_glimmer", "olmo", "olmo2", "olmo3",',
       [], "vLLM's Mistral read as ignoring layer_types (its llama.py gives each "
       "sliding entry the window)"),
    _m("vllm-cohere2-extra-token-missing", "serving.py",
       "                own = window + (model_type in VLLM_WINDOW_PLUS_ONE)",
       "                own = window",
       ["recipes/engines"], "Cohere 2's sliding layers under vLLM read as "
       "sliding_window tokens, not sliding_window + 1"),
    _m("vllm-mla-slides", "serving.py",
       "            w = None if mla or model_type in VLLM_WITHOUT_CACHE_CONFIG else (",
       "            w = None if model_type in VLLM_WITHOUT_CACHE_CONFIG else (",
       [], "vLLM's MLA layers given the engine-wide window"),
    _m("vllm-falcon-slides", "serving.py",
       'VLLM_WITHOUT_CACHE_CONFIG = frozenset({"falcon"})',
       "VLLM_WITHOUT_CACHE_CONFIG = frozenset()",
       [], "vLLM's Falcon read as sliding under a sliding_window key (its attention "
       "is built without the cache config)"),
    _m("vllm-minicpm3-latent", "serving.py",
       'VLLM_MLA_DECOMPRESSED = frozenset({"minicpm3"})',
       "VLLM_MLA_DECOMPRESSED = frozenset()",
       [], "MiniCPM3 sized as MLA's latent under vLLM, which caches its decompressed "
       "heads"),
    _m("vllm-zamba2-grouped-heads", "serving.py",
       '    if model_type == "zamba2":\n        return {**head, "kv_heads"',
       '    if model_type == "zamba2_":\n        return {**head, "kv_heads"',
       [], "Zamba2's attention under vLLM sized with num_key_value_heads (its class "
       "has no grouped KV heads)"),
    _m("vllm-qwen2-refusal-missing", "serving.py",
       "            if first != len(layout):",
       "            if False:",
       [], "a Qwen2 config with mixed layer types sized for vLLM, whose Qwen2Model "
       "refuses it"),
    _m("vllm-qwen2-refusal-text-types-only", "serving.py",
       'VLLM_QWEN2_MODEL = frozenset({"qwen2", "qwen3", "qwen2_vl", "qwen2_5_vl", '
       '"qwen3_vl"})',
       'VLLM_QWEN2_MODEL = frozenset({"qwen2", "qwen3"})',
       [], "a Qwen2.5-VL config with mixed layer types sized for vLLM, whose "
       "language model (vLLM's Qwen2 model) refuses it"),
    _m("vllm-qwen2-vl-max-window-default", "serving.py",
       'VLLM_QWEN2_MAX_WINDOW_LAYERS = {"qwen2_vl": 80, "qwen2_5_vl": 80}',
       'VLLM_QWEN2_MAX_WINDOW_LAYERS = {"qwen2_vl": 28, "qwen2_5_vl": 80}',
       [], "Qwen2-VL's max_window_layers default read as Qwen2's 28 (its text "
       "class has 80)"),
    _m("vllm-qwen3-vl-missing-max-window-layers", "serving.py",
       "            if first is None:\n                # Qwen2Model.__init__ reads",
       "            if False:\n                # Qwen2Model.__init__ reads",
       [], "a Qwen3-VL config with mixed layer types sized for vLLM, whose Qwen2 "
       "model fails reading the max_window_layers its class lacks"),
    # ---- vLLM's rotary module, as its own classes build it (tests/test_vllm_rope_forms.py)
    _m("vllm-gpt-oss-partial-read", "tools/engines/vllm.py",
       '        args["head_size"] = config_reader._head_dim(text)\n',
       "",
       [], "gpt-oss under vLLM rotating a partial_rotary_factor share of each head, "
       "where its model file builds its own RoPE dict without it"),
    _m("vllm-rotary-pct-unread", "tools/engines/vllm.py",
       "    return int(head * float(alias)) if dim == head else dim",
       "    return dim",
       [], "a rotary_pct key read as no partial rotation under vLLM, whose "
       "patch_rope_parameters reads it for every model"),
    _m("vllm-rotary-failure-as-crash", "tools/engines/vllm.py",
       "        if where is None:\n            raise\n",
       "        raise\n",
       [], "vLLM's own rotary failure on a config (an integer linear factor) "
       "surfacing as a TypeError from the library instead of a report row"),
    _m("engine-freqs-share-compared-pairwise", "tools/engines/compare.py",
       "    if engine_freq.numel() != tf_freq.numel():\n        n = max(",
       "    if False:\n        n = max(",
       [], "an engine that rotates another share of each head compared pair by "
       "pair with transformers (a shape error in the report)"),
    _m("crosscheck-share-compared-pairwise", "tools/inspector.py",
       "    if tf_inv.numel() != half:  # a different rotary share",
       "    if False:  # a different rotary share",
       [], "--crosscheck --engine vllm comparing cos/sin of different rotary "
       "sizes element by element"),
    # ---- clear errors on configs the sweeps hold (tests/test_clear_errors.py) ----
    _m("inkling-attention-names-crash", "serving.py",
       "            other = sorted({k for k in kinds if k not in per})\n            if other:",
       "            other = sorted({k for k in kinds if k not in per})\n            if False:",
       [], "an Inkling config whose layer_types names attention layers crashing "
       "with a KeyError instead of a ValueError that names them"),
    _m("deepseek-v4-label-keyerror", "per_layer.py",
       "            label = config_reader.DEEPSEEK_V4_LABELS.get(entry.attention)",
       "            label = config_reader.DEEPSEEK_V4_LABELS[entry.attention]",
       [], "a DeepSeek-V4 layer type outside its three crashing the inspector "
       "with a KeyError"),
    _m("vllm-qwen3-5-refusal-missing", "serving.py",
       'VLLM_GATED_DELTA_NET = frozenset({"qwen3_next", "qwen3_5", "qwen3_5_moe"})',
       'VLLM_GATED_DELTA_NET = frozenset({"qwen3_next"})',
       [], "a Qwen3.5 config with a sliding layer sized for vLLM, whose decoder "
       "layer refuses it (as Qwen3-Next's does)"),
    _m("vllm-deepseek-v4-sized", "serving.py",
       '        if model_type == "deepseek_v4":\n            # deepseek_v4.py: per layer',
       '        if False:\n            # deepseek_v4.py: per layer',
       [], "DeepSeek-V4 sized for vLLM as plain latent layers, where vLLM keeps "
       "five caches per layer"),
    _m("vllm-muse-glimmer-layer-types-unread", "serving.py",
       '"ministral3", "mistral", "muse_glimmer",',
       '"ministral3", "mistral",',
       [], "Muse Glimmer's sliding layers (a multimodal class's language model "
       "that passes a window per layer) read as full under vLLM"),
    _m("vllm-qwen3-next-refusal-missing", "serving.py",
       '        if model_type in VLLM_GATED_DELTA_NET and types is not None and \\\n',
       '        if False and types is not None and \\\n',
       [], "a Qwen3-Next config with a sliding layer sized for vLLM, whose decoder "
       "layer refuses it"),
    _m("inspector-vllm-layers-from-transformers", "tools/inspector.py",
       "            layout = serving._vllm_layout(config)",
       "            layout = per_layer.layer_layout(config)",
       [], "the report's layers line under --engine vllm judged at transformers' "
       "windows, not vLLM's"),
    _m("vllm-falcon-fp8", "tools/engines/kv_cache.py",
       "    ignored = b is not None and model_type in serving.VLLM_WITHOUT_CACHE_CONFIG",
       "    ignored = False",
       [], "Falcon's cache sized at one byte per value under vLLM's --kv-cache-dtype "
       "fp8, which its attention never sees"),
    _m("inspector-ignored-key-as-python-warnings", "tools/inspector.py",
       "              config_reader.IgnoredKeyWarning)",
       "              )",
       [], "an ignored key re-emitted as a Python warning per reading of the "
       "layers, not listed once in the report"),
    _m("vllm-window-switch-ignored", "serving.py",
       '        if model_type in WINDOW_SWITCHED and not text.get("use_sliding_window"):',
       "        if False:",
       [], "Qwen's sliding_window read under vLLM though use_sliding_window is false "
       "(the config class nulls it)"),
    # ---- window keys a class does not define (tests/test_window_keys.py) ----
    _m("modernbert-window-from-key-4x", "config_reader.py",
       '    if major >= 5 and "sliding_window" in text:\n        if text["sliding_window"] is None:',
       '    if "sliding_window" in text:\n        if text["sliding_window"] is None:',
       [], "ModernBERT-decoder's window read from a sliding_window key where 4.57.6's "
       "class sets local_attention // 2"),
    _m("modernbert-local-attention-ignored", "config_reader.py",
       '    window = _validate.positive_int("local_attention", local) // 2',
       '    window = 64',
       [], "ModernBERT-decoder's local_attention ignored (the class default window "
       "kept)"),
    _m("llama4-4x-chunk-window-from-chunk", "serving.py",
       '            windows = [text.get("sliding_window")] if text.get("sliding_window") else []',
       '            windows = []',
       [], "4.57.6's chunked layers sized by attention_chunk_size where a "
       "sliding_window key is set (DynamicCache reads that first)"),
    _m('zamba2-4x-layer-types-read', "per_layer.py",
       '"zamba2": ("layers_block_type", "5.x reads the key as that field", False)}',
       '}',
       [], "a layer_types key read as Zamba2's layers under 4.57.6 (whose class never reads it)"),
    _m('recurrent-gemma-layer-types-read', "per_layer.py",
       '    "recurrent_gemma": ("block_types", "5.x refuses the key", True),\n',
       '',
       [], "a layer_types key read as RecurrentGemma's layers (its class takes block_types)"),
    _m("names-null-as-absent", "config_reader.py",
       "given = [n for n in order if n in out and (out[n] is not None\n"
       "                                                   or n not in null_absent)]",
       "given = [n for n in order if n in out and (out[n] is not None)]",
       [], "a null alias read as absent (Inkling's sliding_window null beside "
       "sliding_window_size read as the size)"),
    _m("names-null-always-a-value", "config_reader.py",
       "given = [n for n in order if n in out and (out[n] is not None\n"
       "                                                   or n not in null_absent)]",
       "given = [n for n in order if n in out]",
       [], "a null keyword that the class pops and tests for None (BLOOM's n_embed) "
       "read as the field's value"),
    # ---- Dory and Dots 3 Note (transformers 5.x; tests/test_generated_caches.py) ----
    _m("dory-saved-form-unhalved", "config_reader.py",
       'out["layer_types"] = list(kinds)[::2]', 'out["layer_types"] = list(kinds)',
       [], "Dory's saved form read with its \"mlp\" entries as layers"),
    _m("dory-no-pass-copies", "serving.py",
       'copies = kinds[first:first + middle] * (text["n_recurrent_loops"] - 1)',
       "copies = []",
       [], "Dory's further passes of its recurrent layers not cached apart"),
    _m("dory-last-loop-copies", "serving.py",
       '    if mode == "last_loop":', '    if mode == "last_loop!":',
       [], "Dory's last_loop cache given per_loop's copies"),
    _m("dots3-indexer-model-dtype", "serving.py",
       'INDEXER_FLOAT32 = frozenset({"dots3_note"})', "INDEXER_FLOAT32 = frozenset()",
       [], "Dots 3 Note's indexer keys in the model's dtype (they are float32)"),
    _m("dots3-swa-keywords-ignored", "config_reader.py",
       'out["per_layer_config"] = {i: dict(swa) for i, kind in enumerate(kinds)',
       'out["per_layer_config"] = {i: {} for i, kind in enumerate(kinds)',
       [], "Dots 3 Note's swa_* keywords ignored (sliding layers sized as indexed)"),
    _m("dots3-share-from-top", "config_reader.py",
       'first.get("qk_rope_head_dim", top[0]) / first.get("head_dim", top[1]))',
       "top[0] / top[1])",
       [], "Dots 3 Note's rotary share taken from the top-level sizes on every type"),
    _m("dots3-use-dsa-not-renaming", "config_reader.py",
       "kinds = [new if kind == old else kind for kind in kinds]",
       "kinds = list(kinds)",
       [], "Dots 3 Note's given full_attention layers not renamed indexed (use_dsa)"),
    _m("dots3-sliding-base-top", "config_reader.py",
       '"rope_theta": swa_theta if kind == "sliding_attention" else theta}',
       '"rope_theta": theta}',
       [], "Dots 3 Note's swa_rope_theta ignored"),
    _m("dots3-layer-latent-ignored", "serving.py",
       'own[index] = {"kv_heads": 1, "key_dim": rank, "value_dim": rot}',
       "pass",
       [], "an MLA layer's own kv_lora_rank (per_layer_config) ignored"),
    _m("zaya-head-dim-hidden-over-heads", "_defaults.py",
       '    "zaya": {"head_dim": 128},', '    "zaya": {},',
       [], "a ZAYA config without head_dim read with hidden_size / heads (256), "
       "not its class's 128"),
    _m("dots3-scale-head-dim", "logit_scale.py",
       '(fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]) ** -0.5',
       '(fields["qk_nope_head_dim"] + fields["head_dim"]) ** -0.5',
       [], "Dots 3 Note's softmax scale from head_dim, not the rotated part"),
)


# --------------------------------------------------------------------------------------


def occurrences(mutant: Mutant, root: Path = ROOT) -> int:
    """How many times ``mutant.old`` occurs in its file under ``root``."""
    path = root / mutant.path
    return path.read_text().count(mutant.old) if path.is_file() else 0


def _tree_files(root: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, check=True, capture_output=True).stdout.decode().split("\0")
    return [p for p in listed if p and (root / p).is_file()]


def copy_tree(dest: Path, root: Path = ROOT) -> None:
    """Copy the working tree's tracked and untracked-but-not-ignored files to ``dest``."""
    for rel in _tree_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)


def apply(mutant: Mutant, tree: Path) -> None:
    """Apply ``mutant`` to the copy at ``tree``; refuse if its text is not there once."""
    path = tree / mutant.path
    text = path.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise ValueError(f"mutant {mutant.id!r}: its text occurs {count} times in "
                         f"{mutant.path}, expected exactly once")
    path.write_text(text.replace(mutant.old, mutant.new))


def _run(cmd: list[str], tree: Path, timeout: float) -> tuple[bool | None, float, str]:
    """Run ``cmd`` in ``tree`` with the copy first on the path; (passed, seconds, tail).

    ``passed`` is ``None`` when the command ran past ``timeout``."""
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1",
               POSENC_LIB_FRONTEND="live", MPLBACKEND="Agg")
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=timeout)
        passed, out = done.returncode == 0, done.stdout + done.stderr
    except subprocess.TimeoutExpired as error:
        # Neither caught nor missed: the table says "timed out" (rerun with less load).
        passed, out = None, f"timed out after {timeout:.0f} s\n{error.stdout or ''}"
    return passed, time.perf_counter() - start, "\n".join(out.strip().splitlines()[-3:])


def unit_command(tests: list[str] | None = None) -> list[str]:
    return [PYTHON, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
            "-m", "not browser and not mutation", *(tests or ["tests"])]


def notebook_command(chapters: tuple) -> list[str]:
    return [PYTHON, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--nbval-lax",
            "--nbval-current-env", *(f"book/{c}.ipynb" for c in chapters)]


TIMED_OUT = "timed out"   # an outcome that is neither caught nor missed


@dataclass
class Outcome:
    mutant: Mutant | None
    unit_caught: bool | None
    book_caught: bool | None
    unit_s: float = 0.0
    book_s: float = 0.0
    unit_tail: str = ""
    book_tail: str = ""


def check(mutant: Mutant | None, *, tests: list[str] | None = None, unit: bool = True,
          book: bool = True, chapters: tuple | None = None,
          timeout: float = 900.0) -> Outcome:
    """Run the unit tests and the chapter notebooks on a mutated copy of the tree.

    ``mutant=None`` checks the un-mutated copy (both steps must then pass).
    """
    chapters = chapters if chapters is not None else (mutant.chapters if mutant else ())
    with tempfile.TemporaryDirectory(prefix="posenc-mutant-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        if mutant is not None:
            apply(mutant, tree)
        outcome = Outcome(mutant, None, None)
        if unit:
            passed, outcome.unit_s, outcome.unit_tail = _run(unit_command(tests), tree, timeout)
            outcome.unit_caught = TIMED_OUT if passed is None else not passed
        if book and chapters:
            passed, outcome.book_s, outcome.book_tail = _run(notebook_command(chapters),
                                                             tree, timeout)
            outcome.book_caught = TIMED_OUT if passed is None else not passed
    return outcome


def _mark(value) -> str:
    if value is TIMED_OUT:
        return "timed out"
    return "-" if value is None else ("caught" if value else "**missed**")


def table(outcomes: list[Outcome]) -> str:
    rows = ["| mutant | file | bug it imitates | unit tests | book cells (chapter) |",
            "| --- | --- | --- | --- | --- |"]
    for o in outcomes:
        m = o.mutant
        rows.append(f"| `{m.id}` | `{m.path.removeprefix('posenc_lib/')}` | {m.bug} | "
                    f"{_mark(o.unit_caught)} | {_mark(o.book_caught)}"
                    + (f" ({', '.join(c[:2] for c in m.chapters)})" if m.chapters else "")
                    + " |")
    n = len(outcomes)
    unit = sum(o.unit_caught is True for o in outcomes)
    booked = [o for o in outcomes if o.book_caught is not None]
    book = sum(o.book_caught is True for o in booked)
    rows.append("")
    rows.append(f"Caught by the unit tests: {unit}/{n} ({100 * unit / max(n, 1):.0f} %).")
    rows.append(f"Caught by the book's own cells: {book}/{len(booked)} "
                f"({100 * book / max(len(booked), 1):.0f} %).")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run these mutants only")
    parser.add_argument("--list", action="store_true", help="print the catalogue and exit")
    parser.add_argument("--no-book", action="store_true", help="skip the notebooks")
    parser.add_argument("--no-unit", action="store_true", help="skip the unit tests")
    parser.add_argument("--tests", nargs="+", metavar="PATH",
                        help="unit test files to run instead of the whole suite")
    parser.add_argument("--skip-baseline", action="store_true",
                        help="do not check the un-mutated tree first")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds per step before it counts as timed out (default 900)")
    parser.add_argument("--verbose", action="store_true",
                        help="print the last lines of every failing step")
    args = parser.parse_args(argv)

    chosen = list(MUTANTS)
    if args.only:
        known = {m.id: m for m in MUTANTS}
        unknown = [i for i in args.only if i not in known]
        if unknown:
            parser.error(f"unknown mutant id(s) {unknown}; see --list")
        chosen = [known[i] for i in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.id:28s} {m.path:32s} {', '.join(m.chapters):28s} {m.bug}")
        return 0
    stale = [m.id for m in chosen if occurrences(m) != 1]
    if stale:
        print(f"these mutants no longer match the library: {stale}", file=sys.stderr)
        return 2

    from tqdm.auto import tqdm

    if not args.skip_baseline:
        chapters = tuple(sorted({c for m in chosen for c in m.chapters}))
        base = check(None, tests=args.tests, unit=not args.no_unit, book=not args.no_book,
                     chapters=chapters, timeout=args.timeout)
        if base.unit_caught not in (False, None) or base.book_caught not in (False, None):
            print("the un-mutated tree fails; fix that first:\n"
                  f"{base.unit_tail}\n{base.book_tail}", file=sys.stderr)
            return 1
        print(f"baseline passes (unit {base.unit_s:.0f} s, book {base.book_s:.0f} s)",
              file=sys.stderr)
    outcomes = []
    for m in tqdm(chosen, desc="mutants", file=sys.stderr):
        o = check(m, tests=args.tests, unit=not args.no_unit, book=not args.no_book,
                  timeout=args.timeout)
        outcomes.append(o)
        tqdm.write(f"{m.id:28s} unit {_mark(o.unit_caught):10s} ({o.unit_s:4.0f} s)  "
                   f"book {_mark(o.book_caught):10s} ({o.book_s:4.0f} s)", file=sys.stderr)
        if args.verbose:
            for caught, tail in ((o.unit_caught, o.unit_tail), (o.book_caught, o.book_tail)):
                if caught:
                    tqdm.write("    " + tail.replace("\n", "\n    "), file=sys.stderr)
    print(table(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
