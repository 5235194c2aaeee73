"""Scoring a trained model: losses and hits per position (one pass, re-encoded,
or through a key-value cache), the sliding window, the retrieval probe, the
retrieval task's items, and the inference-time extensions; one cached unit of
evaluation at a time (:func:`_evaluate_unit`)."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from ... import _validate, lm
from .config import EXTENSIONS, Config
from .data import _probe_rows, _split

@torch.no_grad()
def position_losses(model: lm.DecoderLM, inputs: Tensor, targets: Tensor, *,
                    evaluation: str = "full", chunk: int | None = None,
                    batch_size: int = 16,
                    needed: Sequence[tuple[int, int]] | None = None) -> tuple[Tensor, Tensor]:
    """Cross-entropy (nats) and top-1 hit at every position.

    Args:
        inputs, targets: ``(b, n)`` int64.
        evaluation: ``"full"`` (one pass), ``"reencode"`` (the loss at
            positions ``[e - chunk, e)`` comes from a pass over the prefix
            ``[0, e)``) or ``"kv"`` (the same steps through a key-value cache).
        chunk: positions added per step for ``"reencode"`` and ``"kv"``.
        needed: ``(start, stop)`` ranges of the positions whose losses are
            needed (default: all); ``"reencode"`` skips the passes that score
            none of them, and leaves their losses NaN.

    Returns:
        ``(b, n)`` float32 losses and ``(b, n)`` bool hits.
    """
    _validate.one_of("evaluation", evaluation, ("full", "reencode", "kv"))
    n = inputs.shape[1]
    if evaluation == "full":
        ends = [n]
    else:
        chunk = _validate.positive_int("chunk", chunk)
        ends = list(range(chunk, n, chunk)) + [n]
    device = next(model.parameters()).device
    loss = torch.full(inputs.shape, math.nan, dtype=torch.float32)
    hit = torch.zeros(inputs.shape, dtype=torch.bool)
    for b in range(0, inputs.shape[0], batch_size):
        x, y = inputs[b:b + batch_size].to(device), targets[b:b + batch_size].to(device)
        done, cache = 0, []
        for end in ends:
            if evaluation == "reencode" and needed is not None and not any(
                    lo < end and done < hi for lo, hi in needed):
                done = end
                continue
            if evaluation == "kv":
                logits = model(x[:, done:end], cache=cache)
            else:
                logits = model(x[:, :end])[:, done:end]
            part = torch.nn.functional.cross_entropy(
                logits.reshape(-1, lm.VOCAB_SIZE), y[:, done:end].reshape(-1),
                reduction="none").view(logits.shape[:2])
            loss[b:b + batch_size, done:end] = part.float().cpu()
            hit[b:b + batch_size, done:end] = (logits.argmax(-1) == y[:, done:end]).cpu()
            done = end
    return loss, hit


def _buckets(loss: Tensor, size: int) -> np.ndarray:
    """``(b, n)`` -> ``(b, n / size)`` means of consecutive positions."""
    return loss.view(loss.shape[0], -1, size).mean(-1).numpy()


def _sliding_losses(config: Config, model, rows: Tensor, bos: bool) -> Tensor:
    """Every target seen through a window of ``train_length`` positions
    (stride ``train_length / 2``): positions beyond the training length never occur."""
    L, n = config.train_length, rows.shape[1] - 1
    stride = L // 2
    out = torch.empty(rows.shape[0], n)
    for b in range(0, n - L + 1, stride):
        inputs, targets = _split(rows[:, b:b + L + 1], bos)
        loss, _ = position_losses(model, inputs, targets, batch_size=config.eval_batch)
        keep = 0 if b == 0 else L - stride
        out[:, b + keep:b + L] = loss[:, keep:]
    return out


def _probe_scores(config: Config, model, data: Tensor, bos: bool, *,
                  configure: Callable[[int], str] | None = None) -> dict:
    """Loss and hit rate on the second copy (and loss on the first) per probe.

    ``configure(window_length) -> evaluation`` sets up an extension for a
    window of that length and says how to read it.
    """
    a, k = config.probe_offset, config.probe_length
    second_loss, second_hit, first_loss = [], [], []
    for distance in config.probe_distances:
        inputs, targets = _split(_probe_rows(config, data, distance), bos)
        evaluation = "full" if configure is None else configure(inputs.shape[1])
        loss, hit = position_losses(model, inputs, targets, evaluation=evaluation,
                                    chunk=config.dynamic_chunk, batch_size=config.eval_batch,
                                    needed=[(a, a + k), (a + distance, a + distance + k)])
        # The first symbol of a copy cannot be predicted; score the other k - 1.
        second = slice(a + distance + 1, a + distance + k)
        second_loss.append(loss[:, second].mean(1))
        second_hit.append(hit[:, second].float().mean(1))
        first_loss.append(loss[:, a + 1:a + k].mean(1))
    stack = lambda xs: torch.stack(xs, 1).numpy()  # noqa: E731  (probes, distances)
    return {"second_loss": stack(second_loss), "second_acc": stack(second_hit),
            "first_loss": stack(first_loss)}


@torch.no_grad()
def retrieval_hits(model: lm.DecoderLM, inputs: Tensor, answers: Tensor, values: Sequence[int],
                   *, bos: bool = True, batch_size: int = 16) -> np.ndarray:
    """Whether the model's answer to each item is right: the value of the item
    (a token of ``values`` in its row) with the largest logit at the last
    position, one full pass per item (a multiple choice among the item's own
    values, so guessing scores ``1 / values in the item``).

    Args:
        inputs: ``(items, n)`` int64, the query last; answers: ``(items,)``.
        bos: whether the model reads :data:`~posenc_lib.lm.BOS` first; else
            position 0 holds a copy of position 1, whatever that is (filler,
            or a key when the item's first pair starts there).

    Returns:
        ``(items,)`` bool.
    """
    inputs = inputs.clone()
    if not bos:
        inputs[:, 0] = inputs[:, 1]
    device = next(model.parameters(), torch.empty(0)).device
    allowed = torch.zeros(inputs.shape[0], lm.VOCAB_SIZE, dtype=torch.bool)
    is_value = torch.zeros(lm.VOCAB_SIZE, dtype=torch.bool)
    is_value[list(values)] = True
    allowed.scatter_(1, inputs, is_value[inputs])
    out = []
    for b in range(0, inputs.shape[0], batch_size):
        logits = model(inputs[b:b + batch_size].to(device))[:, -1].float().cpu()
        pick = logits.masked_fill(~allowed[b:b + batch_size], float("-inf")).argmax(-1)
        out.append(pick == answers[b:b + batch_size])
    return torch.cat(out).numpy()


def _retrieval_scores(config: Config, model, grid: dict, bos: bool, *,
                      configure: Callable[[int], None] | None = None) -> dict:
    out = {}
    for cell, (inputs, answers, _) in grid.items():
        if configure is not None:
            configure(inputs.shape[1])
        out[cell] = retrieval_hits(model, inputs, answers, config.task_values, bos=bos,
                                   batch_size=config.eval_batch)
    return out


def _evaluate_unit(config: Config, model, unit: str, eval_rows: Tensor, eval_data: Tensor,
                   bos: bool, grid: dict | None = None) -> dict:
    """One cached unit of evaluation: ``"full"``, ``"sliding"``, ``"probe"``,
    ``"retrieval"``, ``"ext:<name>"``, ``"probe:<name>"`` or ``"retrieval:<name>"``."""
    L, size = config.train_length, config.bucket
    if unit == "retrieval":
        return _retrieval_scores(config, model, grid, bos)
    if unit == "full":
        loss, _ = position_losses(model, *_split(eval_rows, bos), batch_size=config.eval_batch)
        return {"loss": _buckets(loss, size)}
    if unit == "sliding":
        return {"loss": _buckets(_sliding_losses(config, model, eval_rows, bos), size)}
    if unit == "probe":
        return _probe_scores(config, model, eval_data, bos)
    kind, name = unit.split(":")
    extension, scheme = EXTENSIONS[name], model.scheme
    try:
        if kind == "probe":
            def configure(length):
                extension.configure(scheme, max(1.0, length / L), L)
                return extension.evaluation
            return _probe_scores(config, model, eval_data, bos, configure=configure)
        if kind == "retrieval":
            return _retrieval_scores(config, model, grid, bos, configure=lambda n: (
                extension.configure(scheme, max(1.0, n / L), L)))
        out = {}
        factors = config.factors if extension.scaled else (config.max_multiplier,)
        for factor in factors:
            extension.configure(scheme, float(factor), L)
            inputs, targets = _split(eval_rows[:, :factor * L + 1], bos)
            loss, _ = position_losses(model, inputs, targets, evaluation=extension.evaluation,
                                      chunk=config.dynamic_chunk, batch_size=config.eval_batch)
            out[str(factor * L)] = _buckets(loss, size)
        return out
    finally:
        scheme.set_scaling("default")
        scheme.__dict__.pop("attention_hooks", None)   # an extension may replace it
