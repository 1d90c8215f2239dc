"""The streaming path of the training loop: a split whose images are files (a protocol from
files built with ``data_loading: stream``, or ``auto`` on a large set; ``data.image_files``)
is read through a ``torch.utils.data.DataLoader`` with worker processes instead of being
held on the device as :class:`~agnostophobia.training.trainer.TensorData`.

Exactness, as on the in-memory path:

* order: :class:`EpochBatches` hands the loader the batches the training loop cut from the
  trainer's ``epoch_order(n, seed, epoch)`` (under DDP, this process's shards), so the same
  seed gives the same batches in either path;
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
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from agnostophobia.data.image_files import ImageFiles
from agnostophobia.data.streaming import StreamingDataset
from agnostophobia.errors import DataError


def default_workers() -> int:
    """Decoding processes when ``num_workers`` is not set: up to 4, never more than the CPUs."""
    return min(4, os.cpu_count() or 1)


class EpochBatches(torch.utils.data.Sampler):
    """The batches of one epoch as lists of ``(epoch, index)`` keys: the shards the training
    loop was handed (the trainer's ``epoch_order``, cut by ``distributed.World.shards``), set by
    :meth:`plan` before each epoch. A batch sampler: the loader reads exactly these batches."""

    def __init__(self):
        self.batches: List[List[Tuple[int, int]]] = []

    def plan(self, epoch: int, batches: Sequence[Sequence[int]]) -> None:
        self.batches = [[(epoch, i) for i in batch] for batch in batches]

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[List[Tuple[int, int]]]:
        return iter(self.batches)


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
        labels = np.asarray(labels, dtype=np.int64)
        self.labels = torch.from_numpy(labels).to(self.device)
        self.num_known = int((labels >= 0).sum())  # counted on the host
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

    augmented_on_read = True  # crop-flip is drawn per image as it is decoded (seeded by epoch and index)

    def read(self, shards: Iterable, cfg, epoch: int) -> Iterator[Tuple[object, torch.Tensor]]:
        """``(shard, uint8 images of its indices)`` on the device for each shard of epoch ``epoch``,
        decoded by the loader's workers in the shards' order. A file that cannot be read any more
        is one :class:`DataError` naming it."""
        shards = list(shards)
        if self.loader is None:
            self.loader = self._loader(cfg)
        # the epoch's indices in one read from the device (one host synchronisation per epoch, not per batch)
        flat = torch.cat([shard.indices for shard in shards]).tolist() if shards else []
        ends = np.cumsum([len(shard.indices) for shard in shards]).tolist()
        self.loader.batch_sampler.plan(epoch, [flat[a:b] for a, b in zip([0] + ends[:-1], ends)])
        for shard, (_, images, errors) in zip(shards, self.loader):
            error = next((e for e in errors if e), None)
            if error is not None:
                raise DataError(error)
            yield shard, images.to(self.device, non_blocking=True)

    def _loader(self, cfg) -> torch.utils.data.DataLoader:
        workers = default_workers() if cfg.num_workers is None else cfg.num_workers
        return torch.utils.data.DataLoader(
            StreamingDataset(self.files, cfg.seed, cfg.augment, cfg.crop_padding, cfg.crop_padding_mode),
            batch_sampler=EpochBatches(),
            num_workers=workers, pin_memory=self.device.type == "cuda",
            generator=torch.Generator().manual_seed(cfg.seed))


def is_streamed(split) -> bool:
    """Whether ``split``'s images are files read while training (:class:`StreamedData`)."""
    return isinstance(split.images, ImageFiles)


def device_data(split, device, knowns_only: bool, in_memory: Callable):
    """:class:`StreamedData` for a split of files, else ``in_memory(split, device, knowns_only)``."""
    if is_streamed(split):
        return StreamedData.from_split(split, device, knowns_only)
    return in_memory(split, device, knowns_only)
