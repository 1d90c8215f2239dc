"""The paper's datasets by name: where they come from, how they are laid out on disk,
and how to load one split of them.

``DATASETS`` maps a name to a :class:`DatasetInfo` (official download URLs and
checksums, label convention, layouts); :func:`load_dataset` returns one split as a
:class:`DatasetSplit`. For every dataset the prepared ``.npz`` layout (see
``docs/data.md``) is preferred over the official files when both are present.

Labels are always returned as int64 ``0..num_classes-1``; conventions of the files
(EMNIST's a=1, SVHN's 10 for the digit 0, NHCD's per-group numbering) are undone by the
loaders and recorded in ``DatasetInfo.label_convention``.

One module per dataset family, each loader beside its :class:`DatasetInfo`; what they
share is in :mod:`._base`:

==================  ==========================================================
:mod:`.mnist`       ``mnist``
:mod:`.letters`     ``letters``, ``nist_sd19_vowels``, ``az_handwritten_sample``
:mod:`.notmnist`    ``notmnist``
:mod:`.devanagari`  ``nhcd``, ``dhcd``, ``devanagari``
:mod:`.cifar`       ``cifar10``, ``cifar100``
:mod:`.svhn`        ``svhn``
==================  ==========================================================

Adding a dataset is a module that calls ``register_dataset(DatasetInfo(...))`` beside its
loader, and its name in the import of the family modules below.
"""
from agnostophobia.data.datasets._base import (DATASETS, DatasetInfo, DatasetSplit, Resource, SplitUnavailable,
                                               load_dataset)
# Importing a family's module registers its datasets, in this order (the order of DATASETS.names()).
from agnostophobia.data.datasets import mnist, letters, notmnist, devanagari, cifar, svhn  # noqa: F401
from agnostophobia.data.datasets.mnist import DIGITS
from agnostophobia.data.datasets.letters import LETTERS
from agnostophobia.data.datasets.notmnist import NOTMNIST_CLASSES
from agnostophobia.data.datasets.devanagari import DHCD_CLASSES
from agnostophobia.data.datasets.cifar import CIFAR10_CLASSES, CIFAR100_CLASSES, CIFAR100_COARSE, FINE_TO_COARSE

__all__ = [
    "DATASETS", "DatasetInfo", "DatasetSplit", "Resource", "SplitUnavailable", "load_dataset",
    "DIGITS", "LETTERS", "NOTMNIST_CLASSES", "DHCD_CLASSES", "CIFAR10_CLASSES", "CIFAR100_CLASSES",
    "CIFAR100_COARSE", "FINE_TO_COARSE",
]
