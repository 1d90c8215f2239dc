"""Images decoded on the fly, for protocols from files too large to hold in memory (issue 11).

The in-memory path (every image decoded and prepared once, held as ``uint8``) stays for the
paper's protocols: it is what makes them fast. A protocol from files whose training set would
not fit (:func:`~agnostophobia.data.image_files.choose_loading`) keeps its image *paths* instead:

* :class:`~agnostophobia.data.image_files.ImageFiles` stands where a
  :class:`~agnostophobia.data.protocols.ProtocolSplit` holds its ``uint8 (N, C, S, S)`` array:
  indexing with a slice, a mask or indices gives another :class:`ImageFiles` (a view, no
  decoding), an integer gives one prepared image, and ``np.asarray`` decodes the view. So
  prediction over a split (``predict`` slices it in batches) decodes one batch at a time.
* :class:`StreamingDataset` is the ``torch.utils.data.Dataset`` the training loop reads
  through worker processes (``training.loaders``). Its keys are ``(epoch, index)``, so the
  random crop and flip of ``augment: crop-flip`` (torchvision transforms v2) are drawn from
  ``(seed, epoch, index)`` alone: the same whatever the number of workers.

Every image takes the one preparation path, :func:`~agnostophobia.data.preprocess.prepare_image`
(the per-image conversion of ``prepare_images``: shorter side resized, centre crop); the model
receives ``uint8`` images scaled to [0, 1] on the device, as on the in-memory path, and a
backbone's mean/std normalisation is inside the model.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
import torch

from agnostophobia.data.image_files import ImageFiles
from agnostophobia.errors import DataError

CROP_PADDING = 4   # crop-flip: random crop after zero padding, as the in-memory path (training.augment.apply_crop_flip)
#: What fills crop-flip's padding (config key crop_padding_mode): zeros, or the image mirrored at its border.
PADDING_MODES = ("constant", "reflect")


def item_seed(seed: int, epoch: int, index: int) -> int:
    """The augmentation seed of one image in one epoch: a function of these three only."""
    return int(np.random.SeedSequence([seed, epoch, index]).generate_state(1)[0])


class StreamingDataset(torch.utils.data.Dataset):
    """``(epoch, index) -> (index, uint8 image tensor, error)`` over :class:`ImageFiles`.

    A file that fails to decode is not raised in the worker (PyTorch would wrap it into a
    multi-line traceback) but returned as its one-line message, with a blank image; the
    loader raises it in the main process (``training.loaders``).
    """

    def __init__(self, files: ImageFiles, seed: int = 0, augment: str = "none", padding: int = CROP_PADDING,
                 padding_mode: str = PADDING_MODES[0]):
        from torchvision.transforms import v2

        self.files, self.seed, self.augment = files, seed, augment
        self.transform = None
        if augment == "crop-flip":
            self.transform = v2.Compose([v2.RandomCrop(files.spec.size, padding=padding, padding_mode=padding_mode),
                                         v2.RandomHorizontalFlip()])

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, key: Tuple[int, int]):
        epoch, index = key
        try:
            image = torch.from_numpy(np.require(self.files.load(index), requirements="W"))  # decoded: read-only
        except DataError as exc:
            return index, torch.zeros(self.files.spec.shape, dtype=torch.uint8), str(exc)
        if self.transform is not None:
            # torchvision draws from the global generator: seed it per image, and restore it,
            # so that a worker-less loader leaves the training's random state as it found it
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(item_seed(self.seed, epoch, index))
                image = self.transform(image)
        return index, image, ""
