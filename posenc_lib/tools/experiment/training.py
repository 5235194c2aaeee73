"""Building and training the models: one trainer (:func:`fit`) for both
studies, the language model on text and the retrieval task, and the fine-tunes
of the trained RoPE model."""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Callable

import torch
from torch import Tensor

from ... import _validate, lm, retrieval
from .config import FINETUNES, MODELS, Config
from .data import _split

def build_model(config: Config, name: str, seed: int) -> lm.DecoderLM:
    """The model ``name`` of :data:`MODELS` at initialisation.

    Every weight the models share (embedding, blocks, output) comes from a
    generator seeded with ``seed`` alone, so it is identical across encodings;
    the scheme's own parameters come from a separate generator.
    """
    _validate.one_of("name", name, list(MODELS))
    spec = MODELS[name]
    options = dict(d_model=config.d_model, n_heads=config.n_heads,
                   max_positions=config.eval_length,
                   t5_num_buckets=config.t5_num_buckets,
                   t5_max_distance=config.t5_max_distance, rope_base=config.rope_base,
                   xpos_scale_base=config.xpos_scale_base,
                   p_rope_fraction=config.p_rope_fraction, swa_window=config.swa_window,
                   full_every=config.full_every)
    options.update(spec.options)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(10_000 + seed)
        scheme = lm.make_scheme(spec.scheme, **options)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return lm.DecoderLM(lm.VOCAB_SIZE, config.d_model, config.n_layers,
                            config.n_heads, scheme)


def lr_factor(config: Config, step: int) -> float:
    """The learning-rate multiplier at ``step``: linear warm-up, then cosine to 10 %."""
    if step < config.warmup:
        return (step + 1) / config.warmup
    t = (step - config.warmup) / max(1, config.steps - config.warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))


def _plant(config: Config, rows: Tensor, generator: torch.Generator) -> Tensor:
    """The copy task mixed into training: in the first ``train_plant_fraction``
    of the rows ``(b, L + 1)``, a random string of ``probe_length`` symbols of
    ``probe_symbols`` replaces the text at a random target position and again
    at a random distance ``D`` (``probe_length <= D``, both copies inside the
    window). The retrieval probe asks for the same skill at distances up to
    ``8L``."""
    k, L = config.probe_length, config.train_length
    alphabet = torch.tensor(config.probe_symbols, dtype=torch.uint8)
    rows = rows.clone()
    for r in range(round(config.train_plant_fraction * rows.shape[0])):
        distance = int(torch.randint(k, L - k, (1,), generator=generator))
        start = 1 + int(torch.randint(0, L - distance - k, (1,), generator=generator))
        secret = alphabet[torch.randint(0, len(alphabet), (k,), generator=generator)]
        # row index = target index + 1 (the row starts with the byte before)
        rows[r, start + 1:start + 1 + k] = secret
        rows[r, start + distance + 1:start + distance + 1 + k] = secret
    return rows


def fit(config, model: lm.DecoderLM, next_batch: Callable[[], tuple[Tensor, Tensor]], *,
        device: torch.device, desc: str = "train", progress: bool = False,
        log_row: Callable | None = None) -> tuple[list, float]:
    """The training loop both studies share (the language model and the
    retrieval task, :func:`train_model`): AdamW, the learning rate of
    :func:`lr_factor`, cross-entropy on every target that is not -100,
    gradients clipped to norm 1, ``config.steps`` steps.

    Args:
        config: any object with ``lr``, ``weight_decay``, ``warmup``,
            ``steps`` and ``log_every`` (this module's :class:`Config`, or
            one with the fine-tune's schedule).
        next_batch: returns the next ``(inputs, targets)``, ``(b, n)`` int64
            on the CPU (-100: not scored), or ``(inputs, targets, weights)``
            with ``(b, n)`` float weights: the loss is then
            ``sum(weights · cross-entropy)`` (weights of unscored targets 0).
        log_row: ``log_row(step, loss, logits, targets)`` -> the row logged
            every ``log_every`` steps and at the last (default
            ``[step, loss rounded to 4 digits]``).

    Returns:
        ``(curve, seconds)``: the logged rows and the wall time.
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr,
                                  weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(config, s))
    if log_row is None:
        def log_row(step, loss, logits, targets):
            return [step, round(loss.item(), 4)]
    steps = range(config.steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc=desc, leave=False, file=sys.stderr)
    curve, start = [], time.perf_counter()
    model.train()
    for step in steps:
        batch = [t.to(device) for t in next_batch()]
        inputs, targets = batch[0], batch[1]
        logits = model(inputs)
        if len(batch) == 3:
            each = torch.nn.functional.cross_entropy(
                logits.reshape(-1, lm.VOCAB_SIZE), targets.reshape(-1),
                reduction="none").view(targets.shape)
            loss = (each * batch[2]).sum()
        else:
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, lm.VOCAB_SIZE),
                                                     targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % config.log_every == 0 or step == config.steps - 1:
            curve.append(log_row(step, loss, logits, targets))
    model.eval()
    return curve, round(time.perf_counter() - start, 2)


def _task_rows(config: Config, length: int, count: int, generator: torch.Generator,
               bos: bool) -> tuple[Tensor, Tensor]:
    """``count`` training rows of the retrieval task, ``length`` positions each.

    A row starts with an item of :func:`posenc_lib.retrieval.make_position_items`:
    its distance drawn uniformly from every distance that fits in
    ``m = length - 2 (task_queries - 1)`` positions, then (for
    ``task_lengths="varied"``) its length ``n`` uniformly from the shortest
    item that holds that distance to ``m``, else ``n = m``. The item is
    followed by ``task_queries - 1`` more queries: after the first query the
    row holds its answer, then another key, its answer, and so on, every query
    a different key. Each query's answer is the value of its key's last
    binding, so the later queries ask the same question of the same item
    (writing a query's answer after it binds that key to the value it already
    had). The rest of the row is filler. Only the answers are targets, and a
    causal model's answers do not depend on what follows them. A test item is
    the row up to its first query.

    Returns:
        ``(inputs, targets)``, ``(count, length)`` int64; -100 where not scored.
    """
    task, extra = config.task, config.task_queries - 1
    m = length - 2 * extra
    top = max(d for d in range(1, m) if task.shortest(d) <= m)
    distances = torch.randint(1, top + 1, (count,), generator=generator)
    if config.task_lengths == "varied":
        # n uniform in [shortest(D), m]
        low = torch.tensor([task.shortest(int(d)) for d in distances])
        lengths = low + (torch.rand(count, generator=generator) * (m + 1 - low)).long()
        filler = torch.tensor(task.filler_symbols)
        inputs = filler[torch.randint(0, len(filler), (count, length), generator=generator)]
    else:   # no filler after the queries: the rows of the first design, draw for draw
        lengths = torch.full((count,), m)
        inputs = torch.empty(count, length, dtype=torch.long)
    targets = torch.full((count, length), -100, dtype=torch.long)
    answers = torch.empty(count, dtype=torch.long)
    for n in sorted(set(lengths.tolist())):
        rows = (lengths == n).nonzero().flatten()
        items, answers[rows], _ = retrieval.make_position_items(
            task, n, distances[rows], generator, bos=bos)
        inputs[rows, :n] = items
        targets[rows, n - 1] = answers[rows]
    keys, values = torch.tensor(task.keys), set(task.value_symbols)
    for r in range(count):
        n = int(lengths[r])
        row = inputs[r, :n].tolist()
        last = {}                                   # key -> value of its last binding
        for p in range(n - 2):
            if row[p] in task.keys and row[p + 1] in values:
                last[row[p]] = row[p + 1]
        others = keys[torch.randperm(len(keys), generator=generator)].tolist()
        others = [k for k in others if k != row[-1]][:extra]
        answer = int(answers[r])
        for j, key in enumerate(others):
            at = n + 2 * j                          # the previous answer, then the key
            inputs[r, at], inputs[r, at + 1] = answer, key
            answer = last[key]
            targets[r, at + 1] = answer
    return inputs, targets


STUDIES = ("text", "task")


def _batches(config: Config, data: Tensor, bos: bool, generator: torch.Generator,
             length: int, study: str) -> Callable:
    """The training batches of a study, ``length`` positions per row.

    ``"text"``: ``batch_size`` windows of ``data`` (the copy task planted in
    some, :func:`_plant`), every target scored. ``"task"``: ``task_batch``
    rows of the retrieval task (:func:`_task_rows`), only the answers scored.
    """
    _validate.one_of("study", study, STUDIES)

    def text():
        starts = torch.randint(0, data.numel() - length - 1, (config.batch_size,),
                               generator=generator)
        rows = torch.stack([data[s:s + length + 1] for s in starts.tolist()])
        return _split(_plant(config, rows, generator), bos)

    def task():
        return _task_rows(config, length, config.task_batch, generator, bos)

    return text if study == "text" else task


def _log_row(step, loss, logits, targets):
    """Logged every ``log_every`` steps: step, loss, and the accuracy on the
    scored targets of a retrieval batch (every target of a text batch is
    scored; its row has no accuracy)."""
    row = [step, round(loss.item(), 4)]
    scored = targets != -100
    if not scored.all():
        hit = logits.argmax(-1)[scored] == targets[scored]
        row.append(round(float(hit.float().mean()), 4))
    return row


#: Where each study's batch generator is seeded (plus the seed): training,
#: then fine-tuning. A study of its own (``batches`` of :func:`train_model`)
#: draws from a stream no other study uses.
_STREAMS = {"text": (20_000, 40_000), "task": (30_000, 50_000),
            "offset": (60_000, 70_000)}


def train_model(config: Config, name: str, seed: int, data: Tensor, *, study: str = "text",
                device: str | torch.device = "cpu", progress: bool = False,
                batches: Callable | None = None):
    """Train model ``name`` with ``seed`` (with :func:`fit`) for one study:
    ``"text"``, language modelling on random windows of ``data``, or
    ``"task"``, the retrieval task alone for ``task_steps`` steps (``data``
    unused; the learning-rate schedule of :func:`lr_factor` stretched to them).

    The batches (and the copy task planted in some text windows, ``_plant``)
    depend on ``seed`` and the study only, so every model sees the same ones.
    ``batches``: for another task, ``batches(generator, length, bos)`` returns
    the function that draws the next ``(inputs, targets)`` (study
    ``"offset"``: ``posenc_lib.tools.experiment.offset``); it is
    trained for ``task_steps`` steps, as the task.

    Returns:
        ``(model, log)``; ``log`` holds the training loss every ``log_every``
        steps (and, for the task, the batch accuracy), the wall time, and for
        the learned table the norm of its rows beyond ``train_length`` after
        training over their initial norm.
    """
    device = torch.device(device)
    model = build_model(config, name, seed).to(device)
    bos = MODELS[name].bos
    _validate.one_of("study", study, list(_STREAMS))
    if (study == "offset") != (batches is not None):
        raise ValueError("batches: pass it for study 'offset', and only then")
    generator = torch.Generator().manual_seed(_STREAMS[study][0] + seed)
    table = getattr(model.scheme, "table", None)
    if table is not None:
        initial = table.table.weight.detach().clone()
    L = config.train_length
    schedule = config if study == "text" else dataclasses.replace(config,
                                                                  steps=config.task_steps)
    draw = (batches(generator, L, bos) if batches is not None
            else _batches(config, data, bos, generator, L, study))
    curve, seconds = fit(schedule, model, draw,
                         device=device, progress=progress,
                         desc=f"train {name} seed {seed} ({study})", log_row=_log_row)
    log = {"seconds": seconds, "loss_curve": curve}
    if table is not None:
        final = table.table.weight.detach().cpu()
        initial = initial.cpu()
        log["table_norm_ratio"] = {
            "unused": float(final[L:].norm() / initial[L:].norm()),
            "unused_rowwise_spread": float(
                (final[L:].norm(dim=1) / initial[L:].norm(dim=1)).std()),
            "used": float(final[:L].norm() / initial[:L].norm()),
        }
    return model, log


def finetune_model(config: Config, name: str, model: lm.DecoderLM, seed: int, data: Tensor,
                   *, study: str = "text", device: str | torch.device = "cpu",
                   progress: bool = False, batches: Callable | None = None):
    """Fine-tune a copy of the trained ``"rope"`` ``model`` of a study as
    :data:`FINETUNES` ``[name]`` says: ``finetune_steps`` steps at peak
    learning rate ``finetune_lr`` (warm-up ``finetune_warmup``, cosine to
    10 %), on the study's batches at ``length · train_length`` positions,
    drawn from a generator of their own (the same for every fine-tune).

    Returns:
        ``(model, log)`` as :func:`train_model`.
    """
    import copy

    _validate.one_of("name", name, list(FINETUNES))
    spec = FINETUNES[name]
    model = copy.deepcopy(model).to(torch.device(device))
    spec.configure(model, config.train_length)
    schedule = dataclasses.replace(config, steps=config.finetune_steps, lr=config.finetune_lr,
                                   warmup=config.finetune_warmup,
                                   log_every=max(1, config.finetune_steps // 10))
    _validate.one_of("study", study, list(_STREAMS))
    if (study == "offset") != (batches is not None):
        raise ValueError("batches: pass it for study 'offset', and only then")
    generator = torch.Generator().manual_seed(_STREAMS[study][1] + seed)
    length, bos = spec.length * config.train_length, MODELS["rope"].bos
    draw = (batches(generator, length, bos) if batches is not None
            else _batches(config, data, bos, generator, length, study))
    curve, seconds = fit(schedule, model, draw, device=torch.device(device),
                         progress=progress, desc=f"fine-tune {name} seed {seed} ({study})",
                         log_row=_log_row)
    return model, {"seconds": seconds, "loss_curve": curve}
