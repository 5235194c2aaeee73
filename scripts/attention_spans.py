"""What each layer of every causal-LM type attends to, measured on its tiny
model, for ``tests/test_attention_spans.py``.

The inspector says, layer by layer, whether a layer attends to every earlier
token, to the last ``W`` (a sliding window) or within a chunk, and judges the
frequencies at the window where "no distance above it occurs". That is a claim
about the model's attention, not its cache: a config may carry window keys
that only the cache reads (a Llama ``config.json`` with ``layer_types``), so
the cache slides while the prompt's mask does not.

For every type and window form of ``scripts/window_keys.py`` (the same dicts,
built the same way), each decoder block's input is replaced, on the way in, by
a fresh tensor that requires a gradient, so that no gradient flows from one
block into another. A block's output at position ``t`` depends on its input at
``j != t`` only through attention (the residual, norms and MLP act on each
position alone), so the positions ``j`` whose input gets a nonzero gradient
from a random projection of the output at ``t`` are the ones ``t`` attends to.
Measured twice: over a prompt of ``TOKENS - 1`` tokens (every ``t``), and for
one more token decoded through the cache the prompt filled (the gradient flows
through the cached keys and values into the prompt's inputs). Run under each
transformers (``make attention-spans``)::

    python scripts/attention_spans.py --out results/attention-spans-4.json
    /path/to/venv5/bin/python scripts/attention_spans.py \\
        --out results/attention-spans-5.json

A form the class or its model refuses is stored with the error; a type whose
blocks could not be probed (not one block per layer, say) with its reason.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a class default that names a hub file
sys.path.insert(0, str(ROOT / "scripts"))

import window_keys  # the same forms, built the same way

TOKENS = window_keys.TOKENS


class NotProbed(Exception):
    """The blocks cannot be probed this way (the reason is the message)."""


def _hidden(args, kwargs):
    """``(where, tensor)`` of a block's hidden-states argument."""
    import torch

    if "hidden_states" in kwargs and isinstance(kwargs["hidden_states"], torch.Tensor):
        return "hidden_states", kwargs["hidden_states"]
    if args and isinstance(args[0], torch.Tensor):
        return 0, args[0]
    return None, None


def _first_tensor(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return getattr(out, "last_hidden_state", None) or getattr(out, "hidden_states", None)


#: A change below this many units of rounding of the output's size is the
#: arithmetic's, not the input's: a position no query attends to contributes an
#: exact 0 (its softmax weight underflows), but a mixture of experts that
#: groups the tokens by expert sums them in another order when a perturbed
#: token changes its expert (GraniteMoeHybrid: 1.5e-8 on outputs of size 7).
#: 1,024 bounds the length of any sum in a tiny model (hidden sizes <= 256);
#: a position attended to moves the output by 1e-2 or more, the input being
#: perturbed by 8 times its size.
ROUNDING_UNITS = 1024


def _changed(a, b) -> bool:
    """Whether ``a`` differs from ``b`` by more than rounding (``ROUNDING_UNITS``)."""
    import torch

    eps = torch.finfo(a.dtype).eps
    return bool((a - b).abs().max() > ROUNDING_UNITS * eps * (1 + b.abs().max()))


#: Softmax temperature during the measurement. A position that a query attends
#: to but whose weight underflows (a saturated softmax: Gemma 4's normalized
#: queries and keys at scale 1) looks masked; dividing every score by this
#: flattens the weights, while a masked score (-inf, or the dtype's minimum;
#: older models' -10,000 too, at 8) still underflows to an exact 0.
TEMPERATURE = 8.0


@contextlib.contextmanager
def _flattened():
    """Within the block, ``softmax`` and ``scaled_dot_product_attention`` (the
    eager and the SDPA attention) see every score divided by ``TEMPERATURE``."""
    import torch
    import torch.nn.functional as F

    softmax, sdpa = F.softmax, F.scaled_dot_product_attention
    tensor_softmax, torch_softmax = torch.Tensor.softmax, torch.softmax

    def flat_softmax(x, *args, **kwargs):
        return softmax(x / TEMPERATURE, *args, **kwargs)

    def flat_tensor_softmax(x, *args, **kwargs):
        return tensor_softmax(x / TEMPERATURE, *args, **kwargs)

    def flat_torch_softmax(x, *args, **kwargs):
        return torch_softmax(x / TEMPERATURE, *args, **kwargs)

    def flat_sdpa(query, key, value, *args, scale=None, **kwargs):
        scale = query.shape[-1] ** -0.5 if scale is None else scale
        return sdpa(query, key, value, *args, scale=scale / TEMPERATURE, **kwargs)

    F.softmax, F.scaled_dot_product_attention = flat_softmax, flat_sdpa
    torch.Tensor.softmax, torch.softmax = flat_tensor_softmax, flat_torch_softmax
    try:
        yield
    finally:
        F.softmax, F.scaled_dot_product_attention = softmax, sdpa
        torch.Tensor.softmax, torch.softmax = tensor_softmax, torch_softmax


def _call(model, ids, start: int, kwargs: dict):
    """``model`` on ``ids`` at positions ``start, start + 1, ...``, passed as
    ``generate()`` passes them where the forward takes ``cache_position`` (an
    empty hybrid cache may count a token: 4.57.6's GraniteMoeHybrid then starts
    at 1, and its prompt attends one token ahead; 4.57.6's RecurrentGemma,
    which keeps its cache in its modules, starts again at 0 without them)."""
    import torch

    step = {"input_ids": ids, "use_cache": True, **kwargs}
    if "cache_position" in inspect.signature(model.forward).parameters:
        step["cache_position"] = torch.arange(start, start + ids.shape[1])
    return model(**step)


def spans(model, built) -> dict:
    """``{"prefill": [[visible j for each t] per block], "decode": [visible j
    per block]}`` (positions as ints; see the module docstring), with
    ``"decode_error"`` where decoding one token through the cache fails."""
    import torch

    from posenc_lib.tools import tiny_model
    from posenc_lib.tools.crosscheck import generation_cache

    stacks = tiny_model._decoder_stacks(model)
    if len(stacks) != 1:
        raise NotProbed(f"{len(stacks)} stacks of blocks")
    blocks = stacks[0]
    state: dict = {"phase": None, "j": None, "sign": 0}
    clean: dict = {}    # (phase, block) -> the block's input in the clean run
    outputs: dict = {}  # (phase, block) -> its output in the current run
    gen = torch.Generator().manual_seed(0)
    delta: dict = {}

    def pre(index, module, args, kwargs):
        where, x = _hidden(args, kwargs)
        if where is None:
            raise NotProbed(f"block {index}: no hidden-states argument")
        key = (state["phase"], index)
        if key in outputs:
            raise NotProbed(f"block {index} ran twice in one forward pass")
        if state["j"] is None:
            clean[key] = x.detach().clone()
            return None
        if clean[key].shape != x.shape:
            raise NotProbed(f"block {index}: input of another shape in a second run")
        y = clean[key].clone()
        if state["phase"] == "prefill":
            if index not in delta:
                delta[index] = torch.randn(y.shape[-1], generator=gen, dtype=y.dtype)
            y[0, state["j"]] += state["sign"] * delta[index] * 8 * (
                1 + y[0, state["j"]].abs().max())
        if where == "hidden_states":
            return args, {**kwargs, "hidden_states": y}
        return (y, *args[1:]), kwargs

    def post(index, module, args, kwargs, out):
        y = _first_tensor(out)
        if y is None:
            raise NotProbed(f"block {index}: no output tensor")
        outputs[(state["phase"], index)] = y.detach().clone()

    vocab = getattr(built, "vocab_size", None) or 16
    ids = torch.arange(TOKENS)[None] % max(vocab - 3, 1) + min(3, vocab - 1)
    prompt = TOKENS - 1
    params = inspect.signature(model.forward).parameters
    # 5.x's RecurrentGemma takes the cache as "cache" and returns none of its own
    cache_name = "past_key_values" if "past_key_values" in params else "cache"

    def run(j, sign):
        """One prefill of the prompt and one decoded token, the inputs of every
        block perturbed at prompt position ``j`` by ``sign`` times a random
        vector (``j=None``: the clean run); ``(outputs, decode error)``."""
        state.update(phase="prefill", j=j, sign=sign)
        torch.manual_seed(0)
        kwargs = generation_cache(model, built)
        cache = kwargs.get("past_key_values")
        if cache is None and cache_name == "cache":
            from transformers import DynamicCache

            cache = DynamicCache(config=built)
            kwargs = {"cache": cache}
        outputs.clear()
        out = _call(model, ids[:, :prompt], 0, kwargs)
        cache = getattr(out, "past_key_values", None) or cache
        state["phase"] = "decode"
        error = None
        try:
            _call(model, ids[:, prompt:], prompt, {cache_name: cache})
        except NotProbed:
            raise
        except Exception as e:  # noqa: BLE001 -- stored; the prompt still measured
            error = f"{type(e).__name__}: {str(e)[:200]}"
        return dict(outputs), error

    hooks = []
    for i, b in enumerate(blocks):
        hooks.append(b.register_forward_pre_hook(
            lambda m, a, k, i=i: pre(i, m, a, k), with_kwargs=True))
        hooks.append(b.register_forward_hook(
            lambda m, a, k, o, i=i: post(i, m, a, k, o), with_kwargs=True))
    try:
        with torch.no_grad(), _flattened():
            base, decode_error = run(None, 0)
            # both signs: where a query's softmax is saturated, a key pushed one
            # way gets a weight that underflows; pushed the other way, it wins
            perturbed = [[run(j, sign)[0] for sign in (1, -1)] for j in range(prompt)]
    finally:
        for h in hooks:
            h.remove()
    n = len(blocks)
    missing = [b for b in range(n) if ("prefill", b) not in base]
    if missing:
        raise NotProbed(f"blocks {missing} did not run")
    prefill = [[sorted(j for j in range(prompt) if any(
                    _changed(p[("prefill", b)][0, t], base[("prefill", b)][0, t])
                    for p in perturbed[j]))
                for t in range(prompt)] for b in range(n)]
    out = {"prefill": prefill, "decode": None}
    if decode_error:
        out["decode_error"] = decode_error
    elif all(("decode", b) in base for b in range(n)):
        out["decode"] = [sorted([j for j in range(prompt) if any(
                                     _changed(p[("decode", b)], base[("decode", b)])
                                     for p in perturbed[j])] + [prompt])
                         for b in range(n)]
    return out


def measure(model_type: str) -> dict:
    """Each form of ``model_type``: ``{"raw", "prefill", "decode"}``, or
    ``{"raw", "refused": why}``."""
    cls, written = window_keys.written_forms(model_type)
    out = {}
    for name, raw in written:
        entry = {"raw": raw}
        try:  # the model's own attention (SDPA where it has it, as by default)
            built, model = window_keys.tiny_of(cls, raw)
        except Exception as error:  # noqa: BLE001 -- transformers' own refusal
            entry["refused"] = f"{type(error).__name__}: {str(error)[:200]}"
            out[name] = entry
            continue
        entry["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
        try:
            entry.update(spans(model, built))
        except NotProbed as error:
            entry["not_probed"] = str(error)
        except Exception as error:  # noqa: BLE001 -- transformers' own refusal
            entry["refused"] = f"{type(error).__name__}: {str(error)[:200]}"
        out[name] = entry
    return out


def fields() -> dict:
    """Over every model type the installed transformers registers: ``{"registered":
    [...], "defines": [...]}``, the latter those whose config class (or a
    composite's ``text_config``), built with its defaults, has a
    ``layer_types`` attribute (4.57.6's GraniteMoeHybrid: ``None``; 5.x's Bamba:
    a property); the others keep a ``layer_types`` key as an attribute their
    model's attention never reads."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    registered, defines = [], []  # defines: the attribute, if None by default
    for model_type in sorted(CONFIG_MAPPING.keys()):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                config = CONFIG_MAPPING[model_type]()
        except Exception:  # noqa: BLE001, S112 -- a class without defaults: not listed
            continue
        text = getattr(config, "text_config", None) or config
        # a composite's text model type too, where no class of its own is
        # registered (4.57.6's emu3_text_model, mllama_text_model)
        names = {model_type, getattr(text, "model_type", None) or model_type}
        registered.extend(names)
        if hasattr(text, "layer_types") or hasattr(config, "layer_types"):
            defines.extend(names)
    return {"registered": sorted(set(registered)), "defines": sorted(set(defines))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--types", default=None, help="comma-separated model types")
    parser.add_argument("--fields-only", action="store_true",
                        help="recompute only the stored file's 'fields' (about 50 s)")
    args = parser.parse_args(argv)
    if args.fields_only:
        import transformers

        stored = json.loads(args.out.read_text())
        assert stored["transformers"] == transformers.__version__, stored["transformers"]
        stored["fields"] = fields()
        args.out.write_text(json.dumps(stored, sort_keys=True, default=str) + "\n")
        return 0

    out = {**window_keys.sweep(measure, args.types),
           "command": f"python scripts/attention_spans.py --out {args.out.name}",
           "fields": None if args.types else fields()}
    args.out.write_text(json.dumps(out, sort_keys=True, default=str) + "\n")
    print(f"{len(out['types'])} types -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
