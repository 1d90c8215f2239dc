"""The training step captured once in a CUDA graph and replayed (issue 21, item 2; config key
``cuda_graph``, off by default until a GPU session has measured it: ``benchmarks/bench_gpu.py``).

Why: on an H100 one LeNet++ training step launches about 200 small kernels, and launching them
bounds the step (one epoch: 6.54 s of CPU time in PyTorch operators against 1.16 s of GPU kernel
time; docs/guide/reproducing.md, "The `paper` budget on a GPU"). A CUDA graph records the step's kernels once;
each later step is one launch (PyTorch's whole-network capture, ``docs/notes/cuda.html``,
"CUDA Graphs"). What is captured is :func:`~agnostophobia.training.trainer.training_step`, the
one step the eager loop runs too, from the batch's uint8 images to the optimiser step and the
epoch's device sums:

* **Static inputs.** Before each replay the batch's images, its sample indices (labels and loss
  weights are gathered by them inside the graph) and its crop-flip draws are copied into buffers
  the graph reads; the sums it adds to are the run's (``Training.step_sums``), zeroed in place
  at each epoch's start.
* **Warm-up.** The run's first :data:`WARMUP_STEPS` full batches run eagerly on a side stream (the
  one every capture then uses), as the recipe asks: cuDNN's plans, library handles, the
  optimiser's state and the allocator are set up outside the capture. They are the epoch's real
  steps, not extra ones: nothing is trained twice.
* **Capture.** A capture records the step without running it, so the batch it was made on is then
  replayed like every later one.
* **Optimiser.** Adam runs with ``capturable=True``: its step counters live on the device (a
  counter on the host is read once, at the capture, and never again). A learning rate is a number
  baked into the graph; when the scheduler changes it (``cosine``: every epoch) the step is
  captured again before its next replay, so the schedule is followed exactly.
* **The short last batch** of an epoch (its size is not the batch size) runs eagerly, on the same
  parameters and optimiser state.
* **Checkpoints keep the plain form** (:func:`plain_optimizer_state`: Adam's counters on the host,
  ``capturable`` off), so a run resumes with ``cuda_graph`` on or off, on a GPU or a CPU.

Refused in one line (:func:`check_cuda_graph`): without a CUDA device, and under torchrun (DDP
reduces gradients in hooks between the backward kernels). On the CPU the same bookkeeping runs
with a stand-in for the capture that calls the step again at every replay (``eager_capture`` of
``tests/training/test_cuda_graph.py``), which checks everything but the graph itself; that file also
compares captured and eager training on CUDA.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Optional

import torch

from agnostophobia.errors import ConfigError
from agnostophobia.losses import LOSSES

# Eager steps before the first capture (PyTorch's recipe warms up with 3; 11 under DDP).
WARMUP_STEPS = 3


def check_cuda_graph(enabled: bool, device, distributed: bool, approach: str = "softmax") -> bool:
    """Whether the run's step is captured; ``cuda_graph: true`` where it cannot be is one line."""
    if not enabled:
        return False
    if not LOSSES.get(approach).replays_in_cuda_graph:
        raise ConfigError(f"config key 'cuda_graph': true cannot capture the step of {approach!r}: its loss "
                          f"changes from step to step in ways one captured step cannot replay; set cuda_graph: false")
    if torch.device(device).type != "cuda":
        raise ConfigError(f"config key 'cuda_graph': true needs a CUDA device; this run trains on "
                          f"{torch.device(device)} (set cuda_graph: false)")
    if distributed:
        raise ConfigError("config key 'cuda_graph': true cannot run under torchrun (DDP reduces gradients "
                          "between the backward kernels); set cuda_graph: false")
    return True


def cuda_capture(step: Callable[[], None], stream=None) -> Callable[[], None]:
    """Record ``step``'s kernels in a CUDA graph (without running them) on ``stream``, the one the
    warm-up ran on, so that library handles made lazily per stream (cuBLASLt's, hipBLASLt's)
    exist before the capture (PyTorch changed ``make_graphed_callables`` to do the same, pytorch
    PR 187745); returns its replay."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        step()
    return graph.replay  # the bound method keeps the graph, and so its memory pool, alive


class CapturedStep:
    """The training step of one run (:func:`~agnostophobia.training.trainer.training_step`)
    replayed from a CUDA graph for every full batch (see the module docstring).

    ``step(images, indices, draws)`` runs one optimiser step on those device tensors (``draws``
    None without augmentation) and adds to the run's device sums; ``learning_rates()`` returns
    what the optimiser would bake into a capture. ``capture``: :func:`cuda_capture`, or a stand-in.
    """

    def __init__(self, step: Callable, learning_rates: Callable[[], tuple], device: torch.device,
                 capture: Callable = cuda_capture, warmup_steps: Optional[int] = None):
        self._step, self._learning_rates, self.device = step, learning_rates, torch.device(device)
        self._capture = capture
        self.warmup_steps = WARMUP_STEPS if warmup_steps is None else warmup_steps
        self.warmed_up = 0
        self.captures = 0  # how many times the step was captured (a new learning rate captures again)
        self._replay: Optional[Callable[[], None]] = None
        self._captured_lrs: Optional[tuple] = None
        self._inputs = None  # (images, indices, draws) buffers the graph reads
        # one side stream for the warm-up and every capture (None off CUDA)
        self._stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None

    def __call__(self, images: torch.Tensor, indices: torch.Tensor, draws: Optional[torch.Tensor]) -> None:
        """One step on a full batch: eager while warming up, else copied into the static inputs and replayed."""
        self._fill(images, indices, draws)
        if self.warmed_up < self.warmup_steps:
            with self._side_stream():
                self._step(*self._inputs)
            self.warmed_up += 1
            return
        lrs = self._learning_rates()
        if self._replay is None or lrs != self._captured_lrs:
            self._replay = None  # the old graph and its memory go before the new capture
            self._replay = self._capture(lambda: self._step(*self._inputs), stream=self._stream)
            self._captured_lrs = lrs
            self.captures += 1
        self._replay()

    def _fill(self, images, indices, draws) -> None:
        if self._inputs is None:
            self._inputs = tuple(None if t is None else torch.empty_like(t) for t in (images, indices, draws))
        for buffer, value in zip(self._inputs, (images, indices, draws)):
            if (buffer is None) != (value is None) or (buffer is not None and buffer.shape != value.shape):
                raise ValueError("CapturedStep: a full batch must have the shapes of the first one")
            if buffer is not None:
                buffer.copy_(value, non_blocking=True)

    @contextlib.contextmanager
    def _side_stream(self):
        """The recipe's warm-up on a side stream on CUDA (the one the captures use); nothing elsewhere."""
        if self._stream is None:
            yield
            return
        self._stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self._stream):
            yield
        torch.cuda.current_stream(self.device).wait_stream(self._stream)


def set_capturable(optimizer: torch.optim.Optimizer, capturable: bool) -> None:
    """Adam's ``capturable`` flag and where its step counters live (on the device when capturable,
    else on the host, as a plain Adam keeps them); optimisers without the flag are left alone."""
    for group in optimizer.param_groups:
        if "capturable" not in group:
            continue
        group["capturable"] = capturable
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            step = state.get("step")
            if isinstance(step, torch.Tensor):
                state["step"] = step.to(device=param.device if capturable else "cpu", dtype=torch.float32)


def plain_optimizer_state(state: dict) -> dict:
    """An optimiser state dict in the form an eager run saves: ``capturable`` off and step counters
    on the host (new dicts; the live optimiser is not touched)."""
    groups = [{**group, "capturable": False} if group.get("capturable") else group for group in state["param_groups"]]
    entries = {index: ({**entry, "step": entry["step"].detach().to("cpu", torch.float32)}
                       if isinstance(entry.get("step"), torch.Tensor) and entry["step"].device.type != "cpu" else entry)
               for index, entry in state["state"].items()}
    return {**state, "state": entries, "param_groups": groups}
