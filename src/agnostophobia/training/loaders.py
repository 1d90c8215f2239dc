"""The streaming path of the training loop: a split whose images are files (a protocol from
files built with ``data_loading: stream``, or ``auto`` on a large set; ``data.image_files``)
is read through a ``torch.utils.data.DataLoader`` with worker processes instead of being
held on the device as :class:`~agnostophobia.training.trainer.TensorData`.

Exactness, as on the in-memory path:

* order: :class:`EpochSampler` yields the trainer's ``epoch_order(n, seed, epoch)``, so the
  same seed gives the same batches in either path;
* augmentation: each image's random crop and flip come from ``(seed, epoch, index)``
  (``data.streaming.item_seed``), not from a worker's state, so 0 or 8 workers give the
  same batches;
* resume: the sampler's position is the epoch, and checkpoints are written at the end of
  an epoch (``last.pt`` ``epoch``), so a resumed run starts the next epoch's order exactly
  where an uninterrupted one would. The loader draws its base seed from its own generator,
  so reading data never advances the training's random state (kept in the checkpoint).
"""
from __future__ import annotations

import os
from typing import Callable, Iterator, Optional, Tuple

import numpy as np
import torch

from agnostophobia.data.image_files import ImageFiles
from agnostophobia.data.streaming import StreamingDataset
from agnostophobia.errors import DataError

Order = Callable[[int, int, int], torch.Tensor]   # (n, seed, epoch) -> permutation


def default_workers() -> int:
    """Decoding processes when ``num_workers`` is not set: up to 4, never more than the CPUs."""
    return min(4, os.cpu_count() or 1)


class EpochSampler(torch.utils.data.Sampler):
    """``(epoch, index)`` keys in the order ``order(n, seed, epoch)``; :meth:`set_epoch` moves it on."""

    def __init__(self, n: int, seed: int, order: Order):
        self.n, self.seed, self.order, self.epoch = n, seed, order, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Tuple[int, int]]:
        epoch = self.epoch
        return iter([(epoch, i) for i in self.order(self.n, self.seed, epoch).tolist()])


class _DeviceImages:
    """``images[batch]`` of :class:`StreamedData`: the batch decoded (in this process) onto the device."""

    def __init__(self, files: ImageFiles, device: torch.device):
        self.files, self.device = files, device

    def __getitem__(self, batch) -> torch.Tensor:
        return torch.from_numpy(np.asarray(self.files[batch])).to(self.device)


class StreamedData:
    """A split read from its files: labels (and loss weights) on the device, as in
    :class:`~agnostophobia.training.trainer.TensorData`; images decoded when a batch is read."""

    def __init__(self, files: ImageFiles, labels: np.ndarray, device: torch.device):
        self.files, self.device = files, torch.device(device)
        self.labels = torch.from_numpy(np.asarray(labels, dtype=np.int64)).to(self.device)
        self.weights: Optional[torch.Tensor] = None
        self.loader: Optional[torch.utils.data.DataLoader] = None

    @classmethod
    def from_split(cls, split, device, knowns_only: bool = False) -> "StreamedData":
        files, labels = split.images, np.asarray(split.labels, dtype=np.int64)
        if knowns_only:
            files, labels = files[labels >= 0], labels[labels >= 0]
        return cls(files, labels, device)

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def weights_of(self, batch) -> Optional[torch.Tensor]:
        return None if self.weights is None else self.weights[batch]

    @property
    def images(self) -> _DeviceImages:
        """Slices decoded in this process (evaluation reads the validation split this way)."""
        return _DeviceImages(self.files, self.device)

    def batches(self, cfg, epoch: int, order: Order) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        """``(indices, uint8 images)`` on the device, batch by batch, in epoch ``epoch``'s order.
        A file that cannot be read any more is one :class:`DataError` naming it."""
        if self.loader is None:
            self.loader = self._loader(cfg, order)
        self.loader.sampler.set_epoch(epoch)
        for idx, images, errors in self.loader:
            error = next((e for e in errors if e), None)
            if error is not None:
                raise DataError(error)
            yield idx.to(self.device, non_blocking=True), images.to(self.device, non_blocking=True)

    def _loader(self, cfg, order: Order) -> torch.utils.data.DataLoader:
        workers = default_workers() if cfg.num_workers is None else cfg.num_workers
        return torch.utils.data.DataLoader(
            StreamingDataset(self.files, cfg.seed, cfg.augment), batch_size=cfg.batch_size,
            sampler=EpochSampler(len(self), cfg.seed, order), num_workers=workers,
            pin_memory=self.device.type == "cuda", generator=torch.Generator().manual_seed(cfg.seed))


def device_data(split, device, knowns_only: bool, in_memory: Callable):
    """:class:`StreamedData` for a split of files, else ``in_memory(split, device, knowns_only)``."""
    if isinstance(split.images, ImageFiles):
        return StreamedData.from_split(split, device, knowns_only)
    return in_memory(split, device, knowns_only)
