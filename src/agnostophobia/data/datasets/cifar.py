"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009): CIFAR-10 is the known classes D_c of the
ResNet-18 experiment and unknowns D_a of the LeNet++ one; CIFAR-100's super-classes give
the ResNet-18 experiment's D_b and D_a (Sec. 5)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

from agnostophobia.errors import DataError
from agnostophobia.data import formats as F
from agnostophobia.data.datasets._base import (DatasetInfo, DatasetSplit, Resource, SplitUnavailable, dataset_paths,
                                               npz_optional, npz_split, npz_xy, register_dataset)

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR100_CLASSES = tuple("""apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus
butterfly camel can castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup
dinosaur dolphin elephant flatfish forest fox girl hamster house kangaroo keyboard lamp lawn_mower leopard lion
lizard lobster man maple_tree motorcycle mountain mouse mushroom oak_tree orange orchid otter palm_tree pear
pickup_truck pine_tree plain plate poppy porcupine possum rabbit raccoon ray road rocket rose sea seal shark shrew
skunk skyscraper snail snake spider squirrel streetcar sunflower sweet_pepper table tank telephone television
tiger tractor train trout tulip turtle wardrobe whale willow_tree wolf woman worm""".split())
CIFAR100_COARSE = ("aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables",
                   "household_electrical_devices", "household_furniture", "insects", "large_carnivores",
                   "large_man-made_outdoor_things", "large_natural_outdoor_scenes",
                   "large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates", "people",
                   "reptiles", "small_mammals", "trees", "vehicles_1", "vehicles_2")
# fine label -> coarse label (the standard CIFAR-100 mapping; each coarse id occurs 5 times)
FINE_TO_COARSE = np.array([
    4, 1, 14, 8, 0, 6, 7, 7, 18, 3, 3, 14, 9, 18, 7, 11, 3, 9, 7, 11,
    6, 11, 5, 10, 7, 6, 13, 15, 3, 15, 0, 11, 1, 10, 12, 14, 16, 9, 11, 5,
    5, 19, 8, 8, 15, 13, 14, 17, 18, 10, 16, 4, 17, 4, 2, 0, 17, 4, 18, 17,
    10, 3, 2, 12, 12, 16, 12, 1, 9, 19, 2, 10, 0, 1, 16, 12, 9, 13, 15, 13,
    16, 19, 2, 4, 6, 19, 5, 5, 8, 19, 18, 1, 2, 15, 6, 0, 17, 8, 14, 13], np.int64)


def _cifar_batches(src: Path, members: Sequence[str]) -> List[Tuple[str, Dict[str, object]]]:
    """Parse the named batch files of a CIFAR tar.gz or extracted folder, in order."""
    arch = F.Archive(src)
    got = {}
    for name, data in arch.iter_files(lambda n: n.split("/")[-1] in members):
        got.setdefault(name.split("/")[-1], (name, data))
    missing = [m for m in members if m not in got]
    if missing:
        raise DataError(f"{src}: missing batch file(s) {', '.join(missing)} (incomplete download?)")
    return [(f"{src}:{got[m][0]}", F.parse_cifar_pickle(got[m][1], f"{src}:{got[m][0]}")) for m in members]


_STAGED_CIFAR_NOTE = ("cifar10: real CIFAR-10 images re-encoded as JPEG q75 4:2:0 (not bit-exact; pixel "
                      "error about +-5, up to +-15), sorted by class")


def _load_cifar10(root: Path, split: str) -> DatasetSplit:
    d, npz = dataset_paths(root, "cifar10", split, ("train", "test"))
    jpeg = d / "cifar10_train_jpeg.npz"
    names = list(CIFAR10_CLASSES)
    if npz.exists() or jpeg.exists():
        if npz.exists():
            try:
                out = npz_split(npz, "cifar10", split, names, (32, 32, 3))
                if jpeg.exists():  # the staged copy: both splits come from the JPEG images
                    out.notes.append(_STAGED_CIFAR_NOTE)
                return out
            except SplitUnavailable:
                if split != "train" or not jpeg.exists():
                    raise
        elif split == "test":
            raise DataError(f"{npz}: file not found (only {jpeg.name} is present)")
        # Decoded lazily, only when the train split is asked for, and cached outside the data dir.
        x = F.check_images(F.decode_jpeg_npz(jpeg, "train_jpeg", "train_jpeg_offsets"), str(jpeg), (32, 32), 3)
        with F.open_npz(jpeg) as z:
            y = F.check_labels(F.npz_array(z, jpeg, "y_train"), f"{jpeg}: y_train", len(x), 10)
        return DatasetSplit("cifar10", split, x, y, names, str(jpeg), "jpeg-npz", notes=[_STAGED_CIFAR_NOTE])
    src = F.first_existing([d / "cifar-10-python.tar.gz", d / "cifar-10-batches-py"])
    if src is None:
        raise DataError(f"{d}: no cifar10.npz, cifar-10-python.tar.gz or cifar-10-batches-py/")
    members = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
    xs, ys = [], []
    for where, batch in _cifar_batches(src, members):
        x = F.cifar_images(batch, where)
        xs.append(x)
        ys.append(F.check_labels(F.cifar_labels(batch, "labels", where), where, len(x), 10))
    return DatasetSplit("cifar10", split, np.concatenate(xs), np.concatenate(ys), names, str(src), "cifar-python")


def _cifar10_notes() -> Tuple[str, ...]:
    return ("The staged copy is a lossy JPEG re-encoding of the real CIFAR-10, sorted by class; "
            "the test split is stored decoded in cifar10.npz, the train split as JPEG bytes.",)


register_dataset(DatasetInfo(
    name="cifar10", title="CIFAR-10 (Krizhevsky 2009)", directory="cifar10",
    splits=("train", "test"), required_splits=("train", "test"), num_classes=10, class_names=CIFAR10_CLASSES,
    kind="natural",
    label_convention="0 airplane .. 9 truck (standard order), unchanged",
    npz_layout="cifar10/cifar10.npz: x_test uint8 (10000,32,32,3) RGB NHWC, y_test, optional x_train/y_train; "
               "or the train split as cifar10/cifar10_train_jpeg.npz: train_jpeg uint8 bytes, "
               "train_jpeg_offsets int64 (N+1,), y_train",
    official_layout="cifar10/cifar-10-python.tar.gz (read in place) or cifar10/cifar-10-batches-py/",
    candidates=("cifar10/cifar10.npz", "cifar10/cifar-10-python.tar.gz", "cifar10/cifar-10-batches-py",
                "cifar10/cifar10_train_jpeg.npz"),
    resources=(Resource("cifar-10-python.tar.gz", ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
                        md5="c58f30108f718f92721af3b95e74349a", checksum_source="torchvision.datasets.CIFAR10.tgz_md5"),),
    loader=_load_cifar10, notes=_cifar10_notes(),
))


def _load_cifar100(root: Path, split: str) -> DatasetSplit:
    d, npz = dataset_paths(root, "cifar100", split, ("train", "test"))
    names = list(CIFAR100_CLASSES)
    if npz.exists():
        x, y = npz_xy(npz, split, (32, 32), 3, 100)
        coarse = npz_optional(npz, f"y_{split}_coarse", len(y))
        where, src, fmt = f"{npz}: y_{split}_coarse", str(npz), "npz"
    else:
        src_path = F.first_existing([d / "cifar-100-python.tar.gz", d / "cifar-100-python"])
        if src_path is None:
            raise DataError(f"{d}: no cifar100.npz, cifar-100-python.tar.gz or cifar-100-python/")
        ((where, batch),) = _cifar_batches(src_path, [split])
        x = F.cifar_images(batch, where)
        y = F.check_labels(F.cifar_labels(batch, "fine_labels", where), where, len(x), 100)
        coarse = F.cifar_labels(batch, "coarse_labels", where)
        src, fmt = str(src_path), "cifar-python"
    if coarse is not None:
        coarse = F.check_labels(coarse, where, len(y), 20)
        if np.any(coarse != FINE_TO_COARSE[y]):
            raise DataError(f"{where}: coarse labels disagree with the standard fine->coarse map")
    return DatasetSplit("cifar100", split, x, y, names, src, fmt, extra={"coarse": FINE_TO_COARSE[y]})


register_dataset(DatasetInfo(
    name="cifar100", title="CIFAR-100 (Krizhevsky 2009), fine and coarse labels", directory="cifar100",
    splits=("train", "test"), required_splits=("train", "test"), num_classes=100, class_names=CIFAR100_CLASSES,
    kind="natural", optional=True,
    label_convention="fine labels 0..99 (alphabetical, apple=0); extra['coarse'] = 20 super-classes 0..19 "
                     "via the standard fine->coarse map",
    npz_layout="cifar100/cifar100.npz: x_train uint8 (50000,32,32,3) RGB, y_train fine 0..99, x_test, y_test, "
               "optional y_train_coarse/y_test_coarse (checked against the map)",
    official_layout="cifar100/cifar-100-python.tar.gz (read in place) or cifar100/cifar-100-python/{train,test,meta}",
    candidates=("cifar100/cifar100.npz", "cifar100/cifar-100-python.tar.gz", "cifar100/cifar-100-python"),
    resources=(Resource("cifar-100-python.tar.gz", ("https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",),
                        md5="eb9058c3a382ffc7106e4002c42a8d85", checksum_source="torchvision.datasets.CIFAR100.tgz_md5"),),
    loader=_load_cifar100,
))
