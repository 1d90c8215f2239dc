"""Moving small tensors between the host and the training device without making the host wait.

On CUDA the host queues kernels ahead of the GPU; reading a value back (``item()``, ``tolist()``,
``bool(tensor)``, a boolean mask, ``nonzero``) or copying from pageable host memory waits until
the GPU has caught up, so the GPU idles while the host queues the next step. The training loop
therefore keeps its sums and flags on the device and moves values only through these helpers
(issue 21: one H100 epoch made 2,288 such synchronisations). On the CPU they cost nothing extra.
"""
from __future__ import annotations

from typing import List

import torch


def to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """A host tensor on ``device`` without a host synchronisation: on CUDA an asynchronous copy
    from pinned memory (a copy from pageable memory waits for the GPU); on the CPU the tensor itself."""
    device = torch.device(device)
    if device.type == "cpu":
        return tensor
    if device.type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def read_once(*tensors: torch.Tensor) -> List[float]:
    """The values of several small tensors, flattened in order, as Python floats read in one
    host synchronisation (float64: integer counts below 2**53 and float32 sums come back exactly)."""
    return torch.cat([t.detach().reshape(-1).double() for t in tensors]).tolist()


class HostCopy:
    """A small device tensor copied to the host while the device goes on working.

    :meth:`start` queues the copy (on CUDA into pinned memory, with an event after it);
    :meth:`done` says, without waiting, whether it has arrived; :meth:`read` returns its values,
    waiting only if the copy has not arrived yet (on the CPU it always has).
    """

    def __init__(self, device):
        self.device = torch.device(device)
        self.host = None
        self.event = None

    @property
    def started(self) -> bool:
        return self.host is not None

    def start(self, tensor: torch.Tensor) -> None:
        on_cuda = self.device.type == "cuda"
        self.host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=on_cuda)
        self.host.copy_(tensor.detach(), non_blocking=on_cuda)
        self.event = torch.cuda.Event() if on_cuda else None
        if self.event is not None:
            self.event.record()

    def done(self) -> bool:
        return self.started and (self.event is None or self.event.query())

    def read(self) -> List:
        """The copied values (a list); the copy is then consumed."""
        if self.event is not None and not self.event.query():
            self.event.synchronize()  # the device is still behind the point of start(): wait for it
        values, self.host, self.event = self.host.tolist(), None, None
        return values
