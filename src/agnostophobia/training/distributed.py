"""Training on several processes with PyTorch's DistributedDataParallel (DDP):
``torchrun --nproc_per_node N -m agnostophobia train CONFIG --out DIR``.

torchrun starts N copies of the command and tells each its place (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``); :func:`process_group` joins them (``gloo`` on the CPU, ``nccl`` on CUDA, process
``LOCAL_RANK`` on ``cuda:LOCAL_RANK``). Without torchrun, or with one process, nothing here does
anything: the single-process path is today's, with no collective call and no extra host sync.

What a run under DDP is, and how it relates to the same run in one process:

* ``batch_size`` in the config is the **global** batch B: each of the W processes takes B/W
  samples of every step (an error unless W divides B).
* The data order of an epoch is the single process's (``epoch_order(n, seed, epoch)``): global
  batch b is cut into W contiguous shards, one per process (:meth:`World.shards`). A last, smaller
  batch is cut as evenly as possible; one with fewer samples than processes is dropped, so every
  process takes the same number of steps. Augmentation draws for the global batch, so every
  sample is cropped and flipped as in one process.
* The loss is the mean over the **global** batch. Each process scales its own batch-mean loss by
  ``W * d_local / d_global`` (d: samples, or known samples for the softmax loss, which averages
  over knowns only; with sample weights the mean is still ``sum w_i l_i / d``, Keras-style, see
  ``losses._base``). DDP averages gradients over the W processes, so the update is exactly the
  one-process update of the global batch whenever no layer mixes samples (no BatchNorm in
  training mode: LeNet++'s and the ResNets' BatchNorm use per-process batch statistics, as DDP
  always does).
* Rank 0 alone reads and writes the run directory (lock, checkpoints, metrics.csv, TensorBoard,
  outputs, records); what the others need from it (the state to resume, whether a run is
  finished) rank 0 sends them (:meth:`World.from_main`), so ``--out`` need only exist on rank
  0's node. A checkpoint holds the plain model's state dict: it resumes in one process and vice versa.
* Validation batches are dealt round-robin to the processes and their sums added up, so the
  validation loss and accuracy are those of one process. The stored outputs (``predict``) are
  computed by rank 0 alone, on the whole test sets in dataset order, while the others wait.
"""
from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple, Optional, TypeVar, Union

import torch
import torch.distributed as dist

from agnostophobia.errors import AgnostophobiaError, ConfigError

T = TypeVar("T")

# How long a process waits in a collective call: the others wait this long while rank 0 predicts
# a model's outputs on every test set and the training knowns, alone.
TIMEOUT = datetime.timedelta(hours=1)


class Shard(NamedTuple):  # a tuple: made once per step, it costs next to nothing
    """One process's part of a global batch.

    ``indices``: its samples; ``offset``: the position of the first in the global batch of
    ``global_size`` samples; ``loss_scale``: turns its batch-mean loss into its share of the
    global-batch mean (None in one process: nothing to scale).
    """

    indices: torch.Tensor
    offset: int
    global_size: int
    loss_scale: Union[None, float, torch.Tensor] = None


@dataclass(frozen=True)
class World:
    """This process's place among the processes of a run (one process: rank 0 of 1)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that reads and writes the run directory."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    # -- set-up ---------------------------------------------------------------------------
    def check_batch_size(self, batch_size: int) -> None:
        if batch_size % self.size:
            raise ConfigError(f"config key 'batch_size': {batch_size} is the global batch, split evenly over "
                              f"{self.size} processes; choose a multiple of {self.size}")

    def place(self, device: torch.device) -> torch.device:
        """``cuda`` is this process's own GPU, ``cuda:LOCAL_RANK``, under DDP."""
        if self.distributed and device.type == "cuda":
            return torch.device("cuda", self.local_rank)
        return device

    def wrap(self, model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
        """``model`` in DDP (which keeps the gradients equal across processes), or itself in one
        process. The plain model stays what checkpoints, evaluation and prediction use."""
        if not self.distributed:
            return model
        device_ids = [device.index] if device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)

    # -- the data of an epoch ---------------------------------------------------------------
    def steps_per_epoch(self, n: int, batch_size: int) -> int:
        full, rest = divmod(n, batch_size)
        return full + (rest >= self.size)  # one process: the last batch if it is not empty

    def shards(self, order: torch.Tensor, batch_size: int,
               known_labels: Optional[torch.Tensor] = None) -> Iterator[Shard]:
        """This process's shard of every global batch of ``order`` (see the module docstring).

        ``known_labels``: the labels of all samples, for a loss that averages over known samples
        only (``trains_on_unknowns`` false); None for one that averages over all samples.
        """
        total = order.shape[-1]
        if not self.distributed:  # order may be (S, n): batched seeds, each step a batch of each seed's order
            for start in range(0, total, batch_size):
                yield Shard(order[..., start:start + batch_size], 0, min(batch_size, total - start))
            return
        for start in range(0, total, batch_size):
            batch = order[start:start + batch_size]
            n = len(batch)
            if n < self.size:  # only the last batch can be this small; no process gets an empty one
                return
            lo, hi = self.rank * n // self.size, (self.rank + 1) * n // self.size
            local = batch[lo:hi]
            if known_labels is None:
                scale = self.size * (hi - lo) / n
            else:  # device-side counts: no host sync per step
                known_here = (known_labels[local] >= 0).sum().clamp(min=1)
                scale = self.size * known_here / (known_labels[batch] >= 0).sum().clamp(min=1)
            yield Shard(local, lo, n, scale)

    def eval_starts(self, n: int, batch_size: int) -> range:
        """The first indices of this process's evaluation batches: every W-th batch of one process."""
        return range(0, n, batch_size)[self.rank::self.size]

    def seed_epoch(self, seed: int, epoch: int) -> None:
        """Under DDP, a global RNG of its own per process and epoch (dropout masks differ between
        processes as between the samples of one batch), the same after a resume."""
        if self.distributed:
            torch.manual_seed((seed * 1_000_003 + epoch) * 4_099 + self.rank)

    # -- collectives (no-ops in one process) -------------------------------------------------
    def sum_(self, *tensors: torch.Tensor) -> None:
        """Add each tensor up over the processes, in place."""
        if self.distributed:
            for tensor in tensors:
                dist.all_reduce(tensor, op=dist.ReduceOp.SUM)

    def max_(self, tensor: torch.Tensor) -> None:
        """The element-wise maximum over the processes, in place."""
        if self.distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.MAX)

    def sync_buffers(self, model: torch.nn.Module) -> None:
        """Rank 0's buffers (BatchNorm statistics) to every process: the ones its checkpoint holds."""
        if self.distributed:
            for buffer in model.buffers():
                dist.broadcast(buffer, src=0)

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def from_main(self, compute: Callable[[], T]) -> T:
        """``compute()`` on rank 0, its result sent to every process.

        For whatever reads the run directory (only rank 0 does) and decides something all
        processes must agree on. If rank 0 fails, every process raises its error (one line,
        the same class where it is one of ours) instead of waiting for it forever.
        """
        if not self.distributed:
            return compute()
        message = [None]
        if self.is_main:
            try:
                message = [("ok", compute())]
            except Exception as exc:
                message = [("error", type(exc), str(exc))]
                dist.broadcast_object_list(message, src=0)
                raise
        dist.broadcast_object_list(message, src=0)
        if message[0][0] == "error":
            _, kind, text = message[0]
            raise (kind if issubclass(kind, AgnostophobiaError) else AgnostophobiaError)(f"rank 0: {text}")
        return message[0][1]


SINGLE = World()


def current() -> World:
    """The :class:`World` of the process group this process belongs to (one process when none)."""
    if not (dist.is_available() and dist.is_initialized()):
        return SINGLE
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))


def launched_processes() -> int:
    """How many processes torchrun started for this command (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def launched_rank() -> int:
    """This process's rank among those torchrun started (0 without torchrun), known before the
    process group is joined."""
    return int(os.environ.get("RANK", "0"))


def require_one_process(command: str) -> None:
    """Stop ``command`` before it does anything when torchrun started several copies of it:
    only ``train`` shares its work between processes."""
    if launched_processes() > 1:
        raise ConfigError(f"`agnostophobia {command}` runs in one process, not under torchrun "
                          f"(WORLD_SIZE={launched_processes()}); under torchrun run `agnostophobia train CONFIG "
                          f"--out DIR`, then `agnostophobia evaluate DIR` without torchrun")


@contextlib.contextmanager
def process_group(device: torch.device) -> Iterator[World]:
    """Join the processes torchrun started (from its environment variables) for the ``with``
    block; yields this process's :class:`World`. One process (no torchrun, or
    ``--nproc_per_node 1``): nothing is initialised. A group set up by the caller is used as it is.
    """
    if launched_processes() <= 1 or dist.is_initialized():
        yield current()
        return
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device_id = None
    if device.type == "cuda":
        if device.index not in (None, local_rank):
            raise ConfigError(f"device {device}: under torchrun each process uses its own GPU, cuda:LOCAL_RANK; "
                              f"set device to cuda or auto")
        torch.cuda.set_device(local_rank)
        device_id = torch.device("cuda", local_rank)
    elif device.type != "cpu":
        raise ConfigError(f"device {device}: DDP runs on cpu (gloo) or cuda (nccl)")
    dist.init_process_group("nccl" if device_id is not None else "gloo", timeout=TIMEOUT, device_id=device_id)
    try:
        yield current()
    finally:
        dist.destroy_process_group()
