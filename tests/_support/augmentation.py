"""The crop-flip of a batch in one call, for tests that augment outside the trainer: the trainer's
two halves (:func:`~agnostophobia.training.augment.crop_flip_draws` on the host, then
:func:`~agnostophobia.training.augment.apply_crop_flip` on the device) joined as a step joins them."""
from __future__ import annotations

from typing import Optional

import torch

from agnostophobia.data.streaming import CROP_PADDING, PADDING_MODES
from agnostophobia.training.augment import apply_crop_flip, crop_flip_draws
from agnostophobia.training.hostsync import to_device


def crop_flip(x: torch.Tensor, generator, pad: int = CROP_PADDING, offset: int = 0,
              batch_size: Optional[int] = None, mode: str = PADDING_MODES[0]) -> torch.Tensor:
    """``x`` ((n, C, H, W), or (S, n, C, H, W) with ``generator`` a list of S) cropped and flipped
    by the draws of ``generator``; ``offset`` and ``batch_size`` as for ``crop_flip_draws`` (a
    shard of a batch)."""
    draws = crop_flip_draws(generator, x.shape[-4], offset, batch_size, pad)
    return apply_crop_flip(x, to_device(draws, x.device), pad, mode)
