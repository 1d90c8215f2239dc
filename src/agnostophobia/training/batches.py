"""The order in which an epoch's training samples are drawn, cut into batches of ``batch_size``
by the training loop (:func:`~agnostophobia.training.trainer.train_steps`).

* ``negatives_per_batch: 0`` (the default): one shuffled order of every sample (:func:`epoch_order`);
  a batch holds knowns and negatives in the proportion chance gives it, and an epoch is one pass
  over both.
* ``negatives_per_batch: n`` (an approach that trains on negatives): every batch holds
  ``batch_size - n`` knowns and ``n`` negatives (:class:`BatchPlan`), and an epoch is one pass over
  the knowns, the negatives cycling, reshuffled at each pass. This is how Outlier Exposure's code
  draws its batches (Hendrycks et al., ICLR 2019; ``MNIST/oe_tune.py``: a loader of 50 knowns zipped
  with one of 100 negatives, the epoch ending with the knowns), as do the fine-tunes that extend it.

Both orders are functions of (seed, epoch) only, so a resumed run sees the batches an uninterrupted
one would. A negative drawn twice in one epoch of a split of image files read while training gets
the same crop and flip both times (those are seeded by epoch and sample).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from agnostophobia.errors import ConfigError


def _generator(seed: int, epoch: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + epoch)


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The shuffled sample order of one epoch, a function of (seed, epoch) only."""
    return torch.randperm(n, generator=_generator(seed, epoch))


@dataclass(frozen=True)
class BatchPlan:
    """Batches of ``batch_size - negatives`` knowns and ``negatives`` negatives (the config key
    ``negatives_per_batch``), from the training samples ``known`` and ``negative`` (indices)."""

    known: torch.Tensor
    negative: torch.Tensor
    batch_size: int
    negatives: int

    @classmethod
    def for_labels(cls, labels: np.ndarray, batch_size: int, negatives: int) -> Optional["BatchPlan"]:
        """The plan for training ``labels`` (>= 0 known, < 0 negative); None when ``negatives`` is 0."""
        if not negatives:
            return None
        labels = np.asarray(labels)
        known, negative = np.flatnonzero(labels >= 0), np.flatnonzero(labels < 0)
        if not len(negative) or not len(known):
            which = "negatives" if not len(negative) else "knowns"
            raise ConfigError(f"config key 'negatives_per_batch' is {negatives}, but the training split has no "
                              f"{which}: set it to 0")
        return cls(torch.from_numpy(known), torch.from_numpy(negative), batch_size, negatives)

    @property
    def knowns_per_batch(self) -> int:
        return self.batch_size - self.negatives

    @property
    def steps(self) -> int:
        """Batches an epoch: one pass over the knowns, the last batch short of knowns where they do not divide."""
        return math.ceil(len(self.known) / self.knowns_per_batch)

    def __len__(self) -> int:
        """Samples an epoch: every known once, and ``negatives`` in each batch."""
        return len(self.known) + self.steps * self.negatives

    def order(self, seed: int, epoch: int) -> torch.Tensor:
        """The epoch's samples, batch after batch, each batch's knowns and negatives interleaved
        evenly (:func:`interleaved`), so that the contiguous shards DDP cuts a batch into hold them
        in the batch's proportion (``training.distributed``)."""
        generator = _generator(seed, epoch)
        known = self.known[torch.randperm(len(self.known), generator=generator)]
        needed = self.steps * self.negatives
        passes = math.ceil(needed / len(self.negative))
        negative = torch.cat([self.negative[torch.randperm(len(self.negative), generator=generator)]
                              for _ in range(passes)])[:needed].view(self.steps, self.negatives)
        per = self.knowns_per_batch
        batches = [interleaved(known[step * per:(step + 1) * per], negative[step]) for step in range(self.steps)]
        return torch.cat(batches)


def interleaved(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """``first`` and ``second`` in one sequence, each spread evenly over it in its own order: the
    i-th of ``first``'s k at (i + 1/2) / k of the way, the j-th of ``second``'s m at (j + 1/2) / m."""
    where = torch.cat([(torch.arange(len(first)) + 0.5) / max(len(first), 1),
                       (torch.arange(len(second)) + 0.5) / max(len(second), 1)])
    return torch.cat([first, second])[torch.argsort(where, stable=True)]
