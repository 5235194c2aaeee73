"""What every study's run shares: the processes (``torchrun``) and their
devices, how jobs are shared among them, and checkpoints written atomically."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import torch

if TYPE_CHECKING:
    from .config import Config


def _environment(device: torch.device, world_size: int) -> dict:
    from ... import __version__

    return {"posenc_lib": __version__, "torch": torch.__version__,
            "python": platform.python_version(), "platform": platform.platform(),
            "threads": torch.get_num_threads(), "device": str(device),
            "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                            else platform.processor() or platform.machine()),
            "world_size": world_size}


def _save(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)   # atomic: an interrupted run never leaves half a file


def _load_or_run(checkpoint: Path | None, build: Callable, train: Callable, device):
    """A model from its checkpoint (``build()`` then the stored weights), or
    ``train()`` and store it."""
    if checkpoint is not None and checkpoint.is_file():
        saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
        model = build()
        model.load_state_dict(saved["state_dict"])
        return model.to(device).eval(), saved["log"]
    model, log = train()
    if checkpoint is not None:
        state = {k: v.cpu() for k, v in model.state_dict().items()}
        _save({"state_dict": state, "log": log}, checkpoint)
    return model, log


def _distributed(device: str | None) -> tuple[int, int, torch.device]:
    """``(rank, world_size, device)``; joins the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if world == 1:
        return 0, 1, device
    import torch.distributed as dist

    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", _local_gpu(int(os.environ.get("LOCAL_RANK", "0")),
                                                 torch.cuda.device_count()))
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        import datetime

        # Ranks may finish hours apart; the final gather must wait for all.
        # gloo even on GPUs: the only collective is that gather of Python
        # objects (through the CPU), and NCCL cannot put two ranks on one GPU.
        dist.init_process_group(backend="gloo", timeout=datetime.timedelta(hours=24))
    return dist.get_rank(), dist.get_world_size(), device


def _local_gpu(local_rank: int, gpus: int) -> int:
    """The GPU of a process: local rank ``k`` takes GPU ``k mod gpus``, so that
    several processes share each GPU when there are more processes than GPUs
    (``torchrun --nproc_per_node 8`` on one GPU: all eight on ``cuda:0``)."""
    if gpus < 1:
        raise ValueError("device: cuda was asked for, but no GPU is visible; pass "
                         "--device cpu")
    return int(local_rank) % int(gpus)


def _share(config: Config, jobs: list, world: int) -> list[list[int]]:
    """Job indices per rank: longest first, each to the least loaded rank.

    A RoPE job also evaluates every extension; count it as
    ``1 + len(extensions) / 4`` trainings (measured: about that)."""
    cost = [1 + ((len(config.extensions) + 3 * len(config.finetunes)) / 4
                 if name == "rope" else 0) for name, _ in jobs]
    load, share = [0.0] * world, [[] for _ in range(world)]
    for i in sorted(range(len(jobs)), key=lambda i: (-cost[i], i)):
        rank = min(range(world), key=lambda r: (load[r], r))
        share[rank].append(i)
        load[rank] += cost[i]
    return [sorted(s) for s in share]


def _run_shared(config: "Config", rank: int, world: int, work: Callable, *,
                progress: bool, desc: str = "models") -> dict | None:
    """Every (model, seed) job of ``config``, seed by seed (an interrupted run
    has whole seeds done first), shared among the ranks (:func:`_share`):
    ``work(name, seed, show)`` runs one job (``show``: whether it may print
    progress). Rank 0 gathers every rank's results.

    Returns:
        ``{(name, seed): result}`` in job order on rank 0, ``None`` on the others.
    """
    jobs = [(name, seed) for seed in config.seeds for name in config.models]
    mine = [(i, jobs[i]) for i in _share(config, jobs, world)[rank]]
    bar = None
    if progress and rank == 0:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(mine), desc=desc, file=sys.stderr)
    done = {}
    for index, (name, seed) in mine:
        if bar is not None:
            bar.set_postfix_str(f"{name} seed {seed}")
        done[index] = work(name, seed, bar is not None)
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    if world > 1:
        import torch.distributed as dist

        gathered = [None] * world
        dist.all_gather_object(gathered, done)
        done = {k: v for part in gathered for k, v in part.items()}
        if rank != 0:
            return None
    return {jobs[i]: done[i] for i in sorted(done)}
