"""Numbers other runs reported on the open-set literature's standard splits (``osr-mnist``,
``osr-cifar10``; docs/osr-splits.md), for the columns ``benchmark-splits.md`` puts beside our rows.

Each :class:`PublishedRow` is one reported result: the protocol, the approach and detector of ours
it stands beside, its numbers per split (fractions, as ours, in *our* numbering of the splits), where
it was read (a paper's table, or a rerun of the authors' code that its users posted), and what
differs from our run. OSCR is the area under the OSCR curve on a linear FPR axis with the unknown
classes pooled: the definition of OpenAUC (Wang et al., NeurIPS 2022) and of our linear OSCR area. A
number computed by another code base (ARPL's ``compute_oscr``) is set beside ours as that code
computed it.

Only numbers read in their source are entered: the OpenAUC paper's and Vaze et al.'s tables could
not be read here and are not entered.
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Optional, Tuple

import numpy as np


class PublishedRow(NamedTuple):
    """One reported result on a protocol with splits, per split in our numbering of the splits."""
    protocol: str
    approach: str            # our approach it stands beside
    detector: str            # the score it thresholds, as our detector's name
    source: str              # where the numbers were read
    differs: str             # what differs from our run of the approach
    oscr: Tuple[float, ...] = ()      # linear OSCR area (OpenAUC's definition) per split
    auroc: Tuple[float, ...] = ()
    accuracy: Tuple[float, ...] = ()  # closed-set accuracy on the test knowns

    def mean(self, metric: str) -> Optional[float]:
        """The mean over the splits of ``metric`` (``oscr``, ``auroc``, ``accuracy``); None where not published."""
        values = getattr(self, metric)
        return float(np.mean(values)) if values else None


#: ARPL's ``osr.py`` runs ``split.py``'s lists last first (its result column ``i`` is the list
#: ``len - 1 - i``), so the log's columns are reversed here: its column 0, known classes
#: [2, 4, 1, 7, 9, 6], is our split 4.
PUBLISHED: Tuple[PublishedRow, ...] = (
    PublishedRow(
        "osr-cifar10", "softmax", "softmax",
        source="a rerun of the ARPL authors' code, `python osr.py --dataset cifar10 --loss Softmax` "
               "(iCGY96/ARPL issue #2, 2021-05-22: its log of the five splits)",
        differs="ARPL's classifier32 (a VGG-like network of 9 convolutions) trained on all 30,000 training images "
                "of the six known classes (ours: 24,000, after a 20 % hold-out for validation), the original "
                "CIFAR-10 images (ours are a JPEG copy), random crops with 4-pixel zero padding and flips (ours: "
                "2-pixel reflected padding and flips, and flip-and-translate test-time augmentation), SGD lr 0.1 "
                "(momentum 0.9, weight decay 1e-4; ours 5e-4) with steps at 30, 60 and 90 over 100 epochs (ours: "
                "one-cycle over 12), batch 64 (ours 256) (datasets/osr_dataloader.py, osr.py); the last epoch's "
                "network, one seed per split; the score is the maximum softmax probability (ARPL's Softmax loss "
                "returns the softmax as its logits)",
        oscr=(0.8494574, 0.8488180, 0.8082762, 0.8414960, 0.8446526),
        auroc=(0.8672412, 0.8677234, 0.8434555, 0.8559652, 0.8699761),
        accuracy=(0.9518333, 0.9530000, 0.9135000, 0.9558333, 0.9416667)),
)


def published_for(protocol: str) -> List[PublishedRow]:
    """The published rows of ``protocol``, in the order declared."""
    return [row for row in PUBLISHED if row.protocol == protocol]


def published_columns(protocol: str, approach: str, detector: str) -> List[Dict]:
    """The published results beside our ``approach`` with ``detector`` on ``protocol``: each as
    ``{"source": index into published_for(protocol), "oscr", "auroc", "accuracy"}`` (means over splits)."""
    return [{"source": i, **{m: row.mean(m) for m in ("oscr", "auroc", "accuracy")}}
            for i, row in enumerate(published_for(protocol))
            if row.approach == approach and row.detector == detector]
