"""Helpers of tests/training/test_distributed.py that run in the processes it starts.

As a script it is the ``agnostophobia`` command with the synthetic protocol registered, for
``torchrun ... tests/_support/ddp_helpers.py train CONFIG --out DIR``; a process of rank > 0 records
every file it writes, creates, renames or removes under ``$DDP_TEST_WATCH`` in
``$DDP_TEST_WATCH/../writes-rank<RANK>.txt`` (a Python audit hook: nothing escapes it).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_protocol  # noqa: E402

# Sizes that make every kind of batch occur with 2 processes and a global batch of 20: full
# batches, a last one of odd size (69 = 3 x 20 + 9 training samples, 45 knowns = 2 x 20 + 5).
SIZES = {"n_known": 45, "n_unknown": 24}


def synthetic_factory(data_dir=None, seed: int = 0, **limits):
    return synthetic_protocol(**SIZES)


def synthetic_spec():
    """The declaration of the ``synthetic`` protocol (1x28x28 grey squares, as LeNet++ takes)."""
    from agnostophobia.data.preprocess import LENET_INPUT
    from agnostophobia.data.protocols import ProtocolSpec

    return ProtocolSpec("synthetic", synthetic_factory, LENET_INPUT)


def register_synthetic(items=None) -> None:
    """Add ``synthetic`` to the protocols (``items``: the registry's dict, e.g. monkeypatched)."""
    from agnostophobia.data.protocols import PROTOCOLS

    items = PROTOCOLS._items if items is None else items
    items.setdefault("synthetic", synthetic_spec())


def record_writes(watched: Path, log: Path) -> None:
    """Write one line to ``log`` for every file system change this process makes under ``watched``."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)  # before the hook: not recorded
    changes = {"os.mkdir", "os.remove", "os.rename", "os.replace", "os.rmdir", "os.truncate", "os.symlink",
               "os.link", "shutil.rmtree", "shutil.copyfile", "shutil.move"}
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & write_flags)
        elif event in changes:
            path, writing = args[0], True
        else:
            return
        if writing and isinstance(path, (str, bytes, os.PathLike)):
            target = os.path.abspath(os.fsdecode(path))
            if target.startswith(str(watched)):
                os.write(fd, f"{event} {target}\n".encode())

    sys.addaudithook(hook)


def equivalence_worker(rank: int, world_size: int, port: int, configs, out: str, locked: str) -> None:
    """One process of a DDP run of every config in ``configs`` (``torch.multiprocessing`` entry point).

    First, rank 0 tries to take the lock of the run ``locked``, which the test holds: every
    process must stop with that error, not wait for rank 0.
    """
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    from agnostophobia._runlock import RunInUse, run_lock
    from agnostophobia.training.distributed import process_group
    from agnostophobia.training.fitting import fit

    with process_group(torch.device("cpu")) as world:
        assert world.size == world_size and world.rank == rank
        try:
            world.from_main(lambda: run_lock(locked).__enter__())
            raise AssertionError(f"rank {rank}: the lock held by the test was taken")
        except RunInUse as exc:
            assert str(exc).startswith("rank 0: run " if rank else "run "), exc
        for name, cfg in configs.items():
            fit(cfg, synthetic_factory(), Path(out) / name)


if __name__ == "__main__":
    watched = os.environ.get("DDP_TEST_WATCH")
    rank = int(os.environ.get("RANK", "0"))
    if watched and rank > 0:
        record_writes(Path(watched).resolve(), Path(watched).resolve().parent / f"writes-rank{rank}.txt")
    register_synthetic()
    from agnostophobia.cli import main

    raise SystemExit(main(sys.argv[1:]))
