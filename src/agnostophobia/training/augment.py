"""What a batch of stored images becomes before the network: :func:`to_input` (uint8 to [0, 1]),
and in training the crop-flip augmentation (config key ``augment: crop-flip``).

Crop-flip is split in two so that a training step stays free of host synchronisation: the
random draws are made on the host (:func:`crop_flip_draws`, from generators that are the same on
every device), reach the device in one asynchronous copy, and are applied there in one gather
(:func:`apply_crop_flip`). A protocol streamed from image files is augmented as it is decoded
instead (:mod:`agnostophobia.data.streaming`, the same ``CROP_PADDING``).
"""
from __future__ import annotations

from typing import Optional

import torch

from agnostophobia.data.streaming import CROP_PADDING, PADDING_MODES


def to_input(images: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """Model input in [0, 1]: stored uint8 images divided by 255; float images as they are."""
    x = images.float().div_(255.0) if images.dtype == torch.uint8 else images.float()
    return x.contiguous(memory_format=torch.channels_last) if channels_last and x.dim() == 4 else x


def crop_flip_draws(generator, n: int, offset: int = 0, batch_size: Optional[int] = None,
                    pad: int = CROP_PADDING) -> torch.Tensor:
    """The host draws of the crop-flip (random crop with padding and horizontal flip, the usual
    CIFAR augmentation) for ``n`` samples (of each seed: ``generator`` may be a list of one per
    seed, each seed drawn for by its own generator as in its separate run): a (3, S * n) tensor of
    vertical and horizontal shifts and flips. The ``n`` samples may be the part from ``offset`` of
    a batch of ``batch_size`` (a DDP process's shard): the draws are those of the whole batch, so
    each sample is augmented as in one process. The generators are the same on every device."""
    generators = list(generator) if isinstance(generator, (list, tuple)) else [generator]
    return torch.cat([_crop_flip_draws(g, pad, n, offset, batch_size or n) for g in generators], dim=1)


def apply_crop_flip(x: torch.Tensor, draws: torch.Tensor, pad: int = CROP_PADDING,
                    mode: str = PADDING_MODES[0]) -> torch.Tensor:
    """The crop-flip of ``x`` ((..., C, H, W); several seeds: (S, n, C, H, W)) by ``draws`` of
    :func:`crop_flip_draws` already on its device: one gather there, with no host
    synchronisation. The padding is zeros (``mode`` ``"constant"``) or the image mirrored at its
    border (``"reflect"``, airbench's)."""
    shape = x.shape
    return _crop_flip_apply(x.reshape(-1, *shape[-3:]), draws, pad, mode).view(shape)


def _crop_flip_draws(generator: torch.Generator, pad: int, n: int, offset: int, batch_size: int) -> torch.Tensor:
    """(3, n): vertical and horizontal shifts and flips of the ``n`` samples from ``offset`` of a batch."""
    mine = slice(offset, offset + n)
    dy = torch.randint(0, 2 * pad + 1, (batch_size,), generator=generator)[mine]
    dx = torch.randint(0, 2 * pad + 1, (batch_size,), generator=generator)[mine]
    flip = (torch.rand(batch_size, generator=generator) < 0.5)[mine]
    return torch.stack([dy, dx, flip.long()])


def _crop_flip_apply(x: torch.Tensor, draws: torch.Tensor, pad: int, mode: str) -> torch.Tensor:
    n, channels, h, w = x.shape
    dy, dx, flip = draws
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad), mode=mode)
    rows = dy[:, None] + torch.arange(h, device=x.device)                      # (n, h)
    cols = torch.arange(w, device=x.device)
    cols = torch.where(flip[:, None] > 0, w - 1 - cols, cols) + dx[:, None]   # (n, w), mirrored where flipped
    samples = torch.arange(n, device=x.device)[:, None, None, None]
    planes = torch.arange(channels, device=x.device)[None, :, None, None]
    return padded[samples, planes, rows[:, None, :, None], cols[:, None, None, :]].contiguous()
