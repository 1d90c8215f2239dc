"""Several training runs of one experiment at the same time, one process each.

A reproduction trains independent runs (approaches x seeds) on the same protocol. On a
small device one run cannot keep it busy: on this project's 2-core CPU, two runs with one
thread each train the ``cpu`` budgets' networks faster together than one run after another
with two threads (ResNet-18 width 16, bf16: 1,284 vs 1,110 images/s; PReLU LeNet++: 769 vs
704; activation-free LeNet++: 856 vs 852, no loss; ``benchmarks/bench_concurrency.py``),
because a single step leaves cores idle in its serial parts (small BatchNorm, PReLU and
optimiser kernels, Python). On a GPU, LeNet++ is far too small to fill the device, and
several processes overlap one another's kernel launches (issue 14, item 4).

``concurrent_runs`` (config key, ``--concurrent-runs``) is ``auto`` or a number. ``auto``:
on a CPU, two runs at a time when there are at least two cores (measured here); on a GPU,
up to four runs on the one device (not measured in this project: no GPU was available to
it); one at a time when each run trains on fewer than 50,000 images (epochs x training
set), too short to pay for starting a process. The CPU's threads are shared out evenly
between the running processes.

Each run is a child process started with ``spawn`` (the start method CUDA needs). Its
checkpoints are its own, so an interrupted reproduction resumes each run from its last
epoch as before. When fewer runs are left than processes (the end of a reproduction), the
last ones are given the threads of those that finished. Children die with their parent
(``PR_SET_PDEATHSIG`` on Linux): a killed reproduction leaves no orphan writing into the run. A run that fails stops new ones from
starting; those already running finish (their work would otherwise be lost), then the
first failure is raised, naming the run.
"""
from __future__ import annotations

import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any, Callable, Dict, List, Sequence, Tuple

import torch

from agnostophobia.errors import AgnostophobiaError
from agnostophobia.training.auto_options import AUTO, check_concurrent_runs  # noqa: F401  (its home: light)

# A child process needs about 4 s to start here (importing torch, torchvision and the package,
# receiving the protocol) and concurrency gains 9-16 %: below about a minute of training per run
# (the smoke budgets, the tests) one run after another is faster.
AUTO_MIN_IMAGES_PER_RUN = 50_000
GPU_AUTO_RUNS = 4  # LeNet++-sized runs sharing one GPU; a choice, not a measurement (see module doc)
_PR_SET_PDEATHSIG = 1
# parent -> child: "read your thread count again"; None where there are no POSIX signal masks
_MORE_THREADS = signal.SIGUSR1 if hasattr(signal, "pthread_sigmask") else None


class RunProcessFailed(AgnostophobiaError):
    """A run's process ended without finishing (killed, out of memory); its checkpoints are kept.
    One of the errors the command line shows as one line: the message says how to resume."""


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve_concurrent_runs(value, device: torch.device, runs: int, images_per_run: int) -> int:
    """How many of ``runs`` pending runs train at the same time on ``device``; ``images_per_run``:
    the images one run trains on (epochs x training set), which decides ``auto`` for short runs."""
    value = check_concurrent_runs(value)
    if value == AUTO:
        if images_per_run < AUTO_MIN_IMAGES_PER_RUN:
            return 1
        value = GPU_AUTO_RUNS if torch.device(device).type == "cuda" else (2 if available_cores() >= 2 else 1)
    return max(1, min(value, runs))


def threads_per_run(processes: int) -> int:
    return max(1, available_cores() // max(processes, 1))


@dataclass
class Job:
    """One run for a child process: ``function(*args)`` returns a picklable result."""

    name: str
    function: Callable
    args: Tuple


def run_jobs(jobs: Sequence[Job], processes: int, threads: int, on_start: Callable[[Job], None],
             on_done: Callable[[Job, Any], None], share_out: bool = True) -> None:
    """Run ``jobs`` in at most ``processes`` child processes at a time, ``threads`` torch threads each
    (with ``share_out``, raised for the last jobs when fewer are left than processes).

    ``on_start(job)`` and ``on_done(job, result)`` are called in this process as jobs start and finish
    (results arrive in the order the jobs finish). Raises the first failure after the running jobs end.
    """
    context = multiprocessing.get_context("spawn")
    pending: List[Job] = list(jobs)
    running: Dict[int, Tuple[Job, Any, Any, Any]] = {}  # sentinel -> (job, process, receiving end, threads)
    failures: List[BaseException] = []
    try:
        while pending and not failures or running:
            while pending and len(running) < processes and not failures:
                job = pending.pop(0)
                receive, send = context.Pipe(duplex=False)
                share = context.Value("i", threads, lock=False)  # the child's thread count, raised later
                process = context.Process(target=_child, args=(job, share, send, os.getpid()),
                                          name=f"agnostophobia {job.name}")
                _start_with_signal_blocked(process)
                send.close()  # the child holds the other end; EOF here once it exits
                running[process.sentinel] = (job, process, receive, share)
                on_start(job)
            # before waiting, not only after a job ends: a job started when the others had already
            # ended (the last of a reproduction, started as the one before it ended) gets its share too
            if share_out and running and (failures or not pending):
                _share_out(processes * threads, running.values())
            for sentinel in wait(list(running)):
                job, process, receive, _ = running.pop(sentinel)
                outcome = _outcome(job, process, receive)
                if isinstance(outcome, BaseException):
                    failures.append(outcome)
                else:
                    on_done(job, outcome)
    finally:  # an error or Ctrl-C here: stop the children; each resumes from its last epoch
        for _, process, _, _ in running.values():
            process.terminate()
        for _, process, _, _ in running.values():
            process.join()
    if failures:
        raise failures[0]


def _share_out(total_threads: int, running) -> None:
    """Give the last runs the threads of those that finished (the end of a reproduction, when
    fewer runs are left than processes): each gets its share of ``total_threads``."""
    share = max(1, total_threads // len(running))
    for _, process, _, threads in running:
        if _MORE_THREADS is not None and share > threads.value:
            threads.value = share
            os.kill(process.pid, _MORE_THREADS)


def _start_with_signal_blocked(process) -> None:
    """Start ``process`` with :data:`_MORE_THREADS` blocked: a signal sent before the child
    has its handler waits instead of killing it (the mask survives fork and exec)."""
    if _MORE_THREADS is None:
        process.start()
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {_MORE_THREADS})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _outcome(job: Job, process, receive):
    """The job's result, or the exception that ended it."""
    message = None
    try:
        if receive.poll():
            message = receive.recv()
    except (EOFError, OSError):
        pass
    finally:
        receive.close()
    process.join()
    if message is None:
        code = process.exitcode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        return RunProcessFailed(f"the process training {job.name} ended with {how} before it finished "
                                f"(out of memory, or killed); its checkpoints are kept: run the same command "
                                f"again to resume it")
    return message[1]  # the result, or the exception (already made transferable by the child)


def _child(job: Job, threads, send, parent: int) -> None:
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the parent, which stops the children
    torch.set_num_threads(threads.value)
    if _MORE_THREADS is not None:  # the parent gives this run more threads when others have ended
        signal.signal(_MORE_THREADS, lambda *_: torch.set_num_threads(threads.value))
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {_MORE_THREADS})
    from agnostophobia.training.allocator import keep_freed_memory

    keep_freed_memory()  # as the command line does in the parent
    try:
        result = ("ok", job.function(*job.args))
    except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent, which raises it
        result = ("error", _transferable(exc, job.name))
    send.send(result)
    send.close()


def _transferable(exc: BaseException, name: str) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError with its text and traceback."""
    try:
        copy = pickle.loads(pickle.dumps(exc))
        if type(copy) is type(exc) and str(copy) == str(exc):
            return exc
    except Exception:  # noqa: BLE001 - an exception class that cannot be pickled
        pass
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return RuntimeError(f"{name}: {type(exc).__name__}: {exc}\n{detail}")


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies (Linux), so that no run trains (or figure is
    drawn) on unsupervised; call it first thing in a child, with the parent's pid."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL("libc.so.6").prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(1)
