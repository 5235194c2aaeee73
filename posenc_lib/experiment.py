"""Does it extrapolate? Train small byte-level language models, evaluate them long.

Every model in :data:`posenc_lib.lm.SCHEMES` is trained on windows of
``train_length`` bytes of Python standard-library source code and evaluated on
held-out files at 1x, 2x, 4x and 8x that length. The RoPE model is also
evaluated, without fine-tuning, with the context-extension methods of
:mod:`posenc_lib.scaling` (PI, NTK-aware, dynamic NTK, YaRN) set to the factor
``eval_length / train_length``.

Run the full experiment (about half an hour on two CPU cores) with::

    python -m posenc_lib.experiment --out results/length_generalization.json

``--smoke`` runs the same code on a tiny configuration in seconds (the test
suite does this). The results file records the configuration and its hash,
seeds, library and torch versions, the data digest and the wall time.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import platform
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import Tensor

from . import _validate, lm

__all__ = ["TRAIN_FILES", "EVAL_FILES", "EXTENSIONS", "Config", "load_bytes", "train_model",
           "per_position_loss", "evaluate", "run", "load_results", "RESULTS_PATH",
           "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
RESULTS_PATH = Path(__file__).resolve().parents[1] / "results" / "length_generalization.json"

#: Standard-library modules used for training (top-level ``.py`` files present
#: in CPython 3.10 to 3.12).
TRAIN_FILES = (
    "argparse", "ast", "base64", "bisect", "calendar", "cmd", "codecs", "configparser",
    "contextlib", "copy", "csv", "dataclasses", "datetime", "difflib", "enum", "fnmatch",
    "fractions", "ftplib", "functools", "getopt", "gettext", "glob", "gzip", "heapq",
    "hmac", "imaplib", "inspect", "ipaddress", "locale", "mailbox", "numbers", "operator",
    "optparse", "pathlib", "pickle", "pprint", "queue", "random", "shlex", "shutil",
    "smtplib", "socket", "statistics", "string", "subprocess", "tarfile", "tempfile",
    "textwrap", "threading", "timeit", "tokenize", "traceback", "typing", "uuid",
    "warnings", "weakref",
)
#: Held-out modules, never seen in training.
EVAL_FILES = (
    "bdb", "codeop", "colorsys", "filecmp", "graphlib", "hashlib", "keyword", "linecache",
    "netrc", "opcode", "platform", "plistlib", "poplib", "pyclbr", "quopri", "reprlib",
    "runpy", "sched", "selectors", "socketserver", "symtable", "tabnanny", "trace",
    "tracemalloc", "webbrowser", "zipapp",
)
#: Context-extension methods applied to the trained RoPE model at inference.
EXTENSIONS = ("linear", "ntk", "dynamic", "yarn")


@dataclass(frozen=True)
class Config:
    """Everything that determines the results. Its :meth:`hash` names the run."""

    train_files: tuple = TRAIN_FILES
    eval_files: tuple = EVAL_FILES
    train_length: int = 64
    eval_multipliers: tuple = (1, 2, 4, 8)
    eval_windows: int = 48
    position_buckets: int = 16
    schemes: tuple = lm.SCHEMES
    extensions: tuple = EXTENSIONS
    d_model: int = 64
    n_layers: int = 3
    n_heads: int = 4
    batch_size: int = 32
    steps: int = 4000
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.01
    t5_num_buckets: int = 16
    t5_max_distance: int = 32
    rope_base: float = 10000.0
    xpos_scale_base: float = 512.0
    seed: int = 0
    threads: int = 2
    log_every: int = 50

    def __post_init__(self):
        _validate.positive_int("train_length", self.train_length, minimum=2)
        _validate.positive_int("steps", self.steps)
        _validate.positive_int("eval_windows", self.eval_windows)
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(f"d_model ({self.d_model}) / n_heads ({self.n_heads}) must be an "
                             "even integer (RoPE needs an even head size)")
        for name in self.schemes:
            _validate.one_of("schemes", name, lm.SCHEMES)
        for name in self.extensions:
            _validate.one_of("extensions", name, EXTENSIONS)
        if self.extensions and "rope" not in self.schemes:
            raise ValueError("extensions need the 'rope' scheme in schemes")
        longest = self.train_length * max(self.eval_multipliers)
        if longest % self.position_buckets:
            raise ValueError(f"position_buckets ({self.position_buckets}) must divide the "
                             f"longest evaluation length ({longest})")

    @classmethod
    def smoke(cls) -> "Config":
        """A tiny configuration of the same code, for tests (a few seconds)."""
        return cls(train_files=TRAIN_FILES[:2], eval_files=EVAL_FILES[:2], train_length=16,
                   eval_multipliers=(1, 2), eval_windows=4, position_buckets=4, d_model=16,
                   n_layers=1, n_heads=2, batch_size=4, steps=6, warmup=2, log_every=2)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def hash(self) -> str:
        """SHA-256 of the canonical JSON of the configuration (first 16 hex digits)."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def eval_lengths(self) -> list[int]:
        return [self.train_length * m for m in self.eval_multipliers]


def load_bytes(modules: Sequence[str]) -> tuple[Tensor, str]:
    """Concatenate the source of standard-library ``modules`` as a byte tensor.

    Returns:
        ``(n_bytes,)`` uint8 tensor and the SHA-256 of the bytes.
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    chunks = []
    for name in modules:
        path = stdlib / f"{name}.py"
        if not path.is_file():
            raise ValueError(f"modules: {name!r} has no file {path}")
        chunks.append(path.read_bytes())
    data = b"\n\n".join(chunks)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8), hashlib.sha256(data).hexdigest()


def _build_model(config: Config, scheme_name: str) -> lm.DecoderLM:
    scheme = lm.make_scheme(
        scheme_name, d_model=config.d_model, n_heads=config.n_heads,
        max_positions=max(config.eval_lengths), t5_num_buckets=config.t5_num_buckets,
        t5_max_distance=config.t5_max_distance, rope_base=config.rope_base,
        xpos_scale_base=config.xpos_scale_base)
    return lm.DecoderLM(256, config.d_model, config.n_layers, config.n_heads, scheme)


def train_model(config: Config, scheme_name: str, data: Tensor, *, progress: bool = True):
    """Train one model on random windows of ``data``.

    Returns:
        ``(model, log)`` where ``log`` holds the training loss every
        ``log_every`` steps and the wall time.
    """
    torch.manual_seed(config.seed)
    model = _build_model(config, scheme_name)
    generator = torch.Generator().manual_seed(config.seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr,
                                  weight_decay=config.weight_decay)

    def lr_factor(step):  # linear warm-up, then cosine decay to 10 %
        if step < config.warmup:
            return (step + 1) / config.warmup
        t = (step - config.warmup) / max(1, config.steps - config.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    length = config.train_length
    steps = range(config.steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc=f"train {scheme_name}", leave=False, file=sys.stderr)
    losses, start = [], time.perf_counter()
    model.train()
    for step in steps:
        starts = torch.randint(0, data.numel() - length - 1, (config.batch_size,),
                               generator=generator)
        batch = torch.stack([data[s:s + length + 1] for s in starts.tolist()]).long()
        logits = model(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256),
                                                 batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % config.log_every == 0 or step == config.steps - 1:
            losses.append([step, round(loss.item(), 5)])
    model.eval()
    return model, {"seconds": round(time.perf_counter() - start, 2), "loss_curve": losses}


def _windows(data: Tensor, length: int, count: int) -> Tensor:
    """``count`` evenly spaced windows of ``length + 1`` bytes (inputs and targets)."""
    if data.numel() < length + 1:
        raise ValueError(f"the evaluation data ({data.numel()} bytes) is shorter than one "
                         f"window of {length + 1}")
    starts = torch.linspace(0, data.numel() - length - 1, count).long()
    return torch.stack([data[s:s + length + 1] for s in starts.tolist()]).long()


@torch.no_grad()
def per_position_loss(model: lm.DecoderLM, windows: Tensor, *, chunk: int | None = None,
                      batch_size: int = 16) -> Tensor:
    """Cross-entropy (nats) at every position of every window.

    With ``chunk``, the loss of positions ``[e - chunk, e)`` comes from a
    forward pass over the prefix ``[0, e)``: the model sees the sequence grow,
    as in generation, which is what dynamic NTK scaling responds to.

    Returns:
        ``(n_windows, length)`` tensor.
    """
    inputs, targets = windows[:, :-1], windows[:, 1:]
    length = inputs.shape[1]
    ends = list(range(chunk, length + 1, chunk)) if chunk else [length]
    if ends[-1] != length:
        ends.append(length)
    out = torch.empty(inputs.shape, dtype=torch.float64)
    for b in range(0, inputs.shape[0], batch_size):
        rows = slice(b, b + batch_size)
        done = 0
        for end in ends:
            logits = model(inputs[rows, :end])[:, done:end]
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, 256), targets[rows, done:end].reshape(-1), reduction="none")
            out[rows, done:end] = loss.view(logits.shape[0], -1).double()
            done = end
    return out


def _summarise(losses: Tensor, buckets: int) -> dict:
    mean = losses.mean().item()
    per_bucket = losses.mean(0).view(buckets, -1).mean(-1) if losses.shape[1] % buckets == 0 \
        else losses.mean(0)
    return {"loss": round(mean, 5), "ppl": round(math.exp(mean), 4),
            "bucket_ppl": [round(math.exp(v), 4) for v in per_bucket.tolist()]}


def evaluate(config: Config, model: lm.DecoderLM, data: Tensor, *,
             extension: str | None = None) -> dict:
    """Perplexity at every evaluation length, overall and per position bucket.

    ``extension`` sets a context-extension method on a RoPE model, with
    ``factor = length / train_length`` (at least 1).
    """
    results = {}
    scheme = model.scheme
    for length in config.eval_lengths:
        factor = max(1.0, length / config.train_length)
        chunk = None
        if extension is not None:
            if not isinstance(scheme, lm.RopeScheme):
                raise ValueError("extension needs a model with the 'rope' scheme")
            if extension == "linear":
                scheme.set_scaling("linear", factor=factor)
            elif extension == "ntk":
                scheme.set_scaling("ntk", factor=factor)
            elif extension == "dynamic":
                scheme.set_scaling("dynamic", factor=1.0,
                                   max_position_embeddings=config.train_length)
                chunk = config.train_length
            elif extension == "yarn":
                scheme.set_scaling("yarn", factor=factor,
                                   original_max_position_embeddings=config.train_length)
        buckets = config.position_buckets * length // max(config.eval_lengths)
        losses = per_position_loss(model, _windows(data, length, config.eval_windows),
                                   chunk=chunk)
        results[str(length)] = _summarise(losses, max(buckets, 1))
    if extension is not None:
        scheme.set_scaling("default")
    return results


def run(config: Config, *, progress: bool = True) -> dict:
    """Train every scheme, evaluate it (and the RoPE extensions); return the results."""
    from . import __version__

    start = time.perf_counter()
    torch.set_num_threads(config.threads)
    train_data, train_digest = load_bytes(config.train_files)
    eval_data, eval_digest = load_bytes(config.eval_files)
    models = {}
    for name in config.schemes:
        model, log = train_model(config, name, train_data, progress=progress)
        models[name] = {"train": log, "eval": evaluate(config, model, eval_data)}
        if progress:
            print(f"{name:12s} trained in {log['seconds']:.0f} s, ppl "
                  + " ".join(f"{k}:{v['ppl']:.2f}" for k, v in models[name]["eval"].items()),
                  file=sys.stderr)
        if name == "rope":
            for extension in config.extensions:
                key = f"rope+{extension}"
                models[key] = {"base_model": "rope",
                               "eval": evaluate(config, model, eval_data, extension=extension)}
                if progress:
                    print(f"{key:12s} ppl " + " ".join(
                        f"{k}:{v['ppl']:.2f}" for k, v in models[key]["eval"].items()),
                        file=sys.stderr)
    return {
        "schema_version": SCHEMA_VERSION,
        "config": config.to_dict(),
        "config_hash": config.hash(),
        "environment": {"posenc_lib": __version__, "torch": torch.__version__,
                        "python": platform.python_version(), "platform": platform.platform(),
                        "threads": torch.get_num_threads()},
        "data": {"train_bytes": train_data.numel(), "eval_bytes": eval_data.numel(),
                 "train_sha256": train_digest, "eval_sha256": eval_digest},
        "wall_time_s": round(time.perf_counter() - start, 1),
        "models": models,
    }


def load_results(path: str | Path = RESULTS_PATH, *, config: Config | None = None) -> dict:
    """Load stored results and refuse them if they come from another configuration.

    Raises:
        ValueError: if the file's schema version or config hash does not match
            ``config`` (default: :class:`Config` ()), i.e. the results are stale.
    """
    config = Config() if config is None else config
    results = json.loads(Path(path).read_text())
    if results.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"path: {path} has schema_version {results.get('schema_version')}, "
                         f"expected {SCHEMA_VERSION}")
    if results.get("config_hash") != config.hash():
        raise ValueError(f"path: {path} was produced by configuration "
                         f"{results.get('config_hash')}, but the current one is "
                         f"{config.hash()}: re-run `python -m posenc_lib.experiment`")
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train and evaluate the length-"
                                     "generalization experiment.")
    parser.add_argument("--out", type=Path, default=RESULTS_PATH,
                        help="where to write the JSON results (default: %(default)s)")
    parser.add_argument("--smoke", action="store_true", help="tiny configuration")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    args = parser.parse_args(argv)
    config = Config.smoke() if args.smoke else Config()
    results = run(config, progress=not args.quiet)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out} (config {results['config_hash']}, "
          f"{results['wall_time_s']:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
