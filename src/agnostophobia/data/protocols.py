"""The paper's open-set protocols as objects: which data is known (D_c'), which is a
known unknown for training (D_b', label -1), and which sets are unknown at test time.

``build_protocol(name, data_dir=None, seed=0, **limits)`` builds one by name from
``PROTOCOLS``. All sampling (validation hold-out and the optional CPU-budget limits)
is seeded and class-stratified, with a separate random stream per purpose, so that
changing one limit never changes which samples another part selects.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from agnostophobia.errors import ConfigError, DataError
from agnostophobia.registry import Registry
from agnostophobia.data.datasets import (CIFAR100_COARSE, CIFAR10_CLASSES, DATASETS, DIGITS, LETTERS,
                                         DatasetSplit, load_dataset)
from agnostophobia.data.fetch import FetchedFile, fetch_missing
from agnostophobia.data.paths import PathLike, data_dir as resolve_data_dir
from agnostophobia.data.preprocess import (AUTHORS, AUTHORS_NOTES, LENET_INPUT, OURS, PREPROCESSINGS, RESNET_INPUT,
                                           InputSpec, prepare_images)


@dataclass
class Split:
    name: str
    images: np.ndarray   # uint8 (N, C, H, W), preprocessed for the protocol's model
    labels: np.ndarray   # int64 (N,), known class 0..C-1, or -1 for unknown
    negative_class: Optional[np.ndarray] = None  # int64 (N,): index into OpenSetProtocol.negative_class_names of each negative's source class, -1 for knowns; None where unknown

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass
class OpenSetProtocol:
    name: str
    num_classes: int
    input_shape: tuple                 # (1, 28, 28) or (3, 32, 32)
    train: Split                       # D_c' knowns + D_b' known unknowns (label -1)
    val: Split                         # held-out knowns (+ held-out known unknowns, label -1)
    test_known: Split                  # D_c
    test_unknowns: Dict[str, Split]    # name -> unknown set, all labels -1
    notes: List[str]                   # data substitutions and deviations, for reports
    class_names: List[str] = field(default_factory=list)
    negative_class_names: List[str] = field(default_factory=list)
    # How the images were prepared, where that is not our preparation (preprocessing: authors), for reports
    preprocessing_notes: List[str] = field(default_factory=list)

    def sizes(self) -> Dict[str, Dict[str, int]]:
        """Sample counts: ``{"train": {"known": n, "unknown": m}, ...}``."""
        def count(s: Split) -> Dict[str, int]:
            return {"known": int((s.labels >= 0).sum()), "unknown": int((s.labels < 0).sum())}
        out = {"train": count(self.train), "val": count(self.val), "test_known": count(self.test_known)}
        out.update({f"test_unknowns/{k}": count(v) for k, v in self.test_unknowns.items()})
        return out


PROTOCOLS: Registry[Callable[..., OpenSetProtocol]] = Registry("protocol")
LIMITS = ("max_known_train", "max_unknown_train", "max_val", "max_test_per_set")


def build_protocol(name, data_dir: Optional[PathLike] = None, seed: int = 0, data_loading: str = "memory",
                   preprocessing: str = OURS, **limits) -> OpenSetProtocol:
    """Build a registered protocol, or a protocol from files when ``name`` is a mapping
    (:func:`agnostophobia.data.file_protocols.build_file_protocol`; ``data_dir`` unused).

    ``preprocessing``: ``ours`` (default) or ``authors``, the authors' data preparation
    (``data.preprocess``), which applies to :data:`AUTHORS_PROTOCOLS` only.

    ``limits``: ``max_known_train``, ``max_unknown_train`` (training samples of D_c'
    and D_b'), ``max_val`` (cap on the held-out knowns and, separately, on the held-out
    known unknowns), ``max_test_per_set`` (cap on D_c and on every unknown test set);
    ``None`` keeps all. ``val_fraction`` (default 0.2) sets the hold-out size.
    ``data_loading`` (memory, stream, auto) applies to a protocol from files only; the
    registered protocols are always held in memory (``data.streaming``).
    """
    check_limits(limits, seed)
    check_preprocessing(name, preprocessing)
    if isinstance(name, dict):
        from agnostophobia.data.file_protocols import build_file_protocol  # imports this module

        return build_file_protocol(name, seed=int(seed), data_loading=data_loading, **limits)
    return PROTOCOLS.get(name)(data_dir=data_dir, seed=int(seed), preprocessing=preprocessing, **limits)


def check_limits(limits: Dict, seed) -> None:
    """A :class:`ConfigError` naming the first bad protocol limit or seed."""
    for key, value in limits.items():
        if key not in LIMITS + ("val_fraction",):
            raise ConfigError(f"unknown protocol option {key!r}; known: {', '.join(LIMITS + ('val_fraction',))}")
        if key == "val_fraction":
            if not isinstance(value, (int, float)) or not 0 < value < 1:
                raise ConfigError(f"val_fraction must be in (0, 1), got {value!r}")
        elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
            raise ConfigError(f"{key} must be a positive integer or None, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")


def require_datasets(names, data_dir: Optional[PathLike] = None, needed_by: str = "", fetch: bool = False,
                     allow_unverified: bool = False, progress: Optional[bool] = None,
                     log: Callable[[str], None] = print) -> List[FetchedFile]:
    """Make sure every dataset of ``names`` is in the data directory.

    Without ``fetch``, raise one :class:`DataError` naming every absent dataset, with the
    single ``agnostophobia data fetch`` command that gets them all. With ``fetch``, download
    them instead (:func:`~agnostophobia.data.fetch.fetch_missing`; that line is still
    raised when they cannot be fetched). Returns the records of the files fetched.
    """
    root = resolve_data_dir(data_dir)
    missing = [DATASETS.get(n) for n in names if DATASETS.get(n).find(root) is None]
    if not missing:
        return []
    targets = " ".join(dict.fromkeys(info.fetch_as or info.name for info in missing))
    if len(missing) == 1:
        message = f"{missing[0].name} not found in {root}; {missing[0].fetch_hint()}"
    else:
        message = (f"{', '.join(i.name for i in missing[:-1])} and {missing[-1].name} not found in {root}; "
                   f"get them with `agnostophobia data fetch {targets}`")
    message += f" ({needed_by})" if needed_by else ""
    if not fetch:
        raise DataError(message)
    return fetch_missing([i.name for i in missing], root, message, allow_unverified=allow_unverified,
                         progress=progress, log=log)


# The datasets each protocol reads: `reproduce` checks them before it writes anything.
PROTOCOL_DATASETS = {"lenet++": ("mnist", "letters", "devanagari", "notmnist", "cifar10"),
                     "cifar": ("cifar100", "svhn", "cifar10"), "cifar10-split": ("cifar10",),
                     "mnist-notmnist": ("mnist", "notmnist")}
PROTOCOL_DATA_HINTS = {"cifar": "the `cifar` protocol needs CIFAR-10, CIFAR-100 and SVHN; "
                                "`--protocol cifar10-split` runs on CIFAR-10 alone"}


# How each protocol prepares its images (model input, and the kind of images it trains on).
# `evaluate` reads the protocol name from a run's config and prepares a user's set with the
# same spec, so an evaluate-time set takes exactly the path the protocol's own sets took.
PROTOCOL_INPUTS: Dict[str, InputSpec] = {"lenet++": LENET_INPUT, "cifar": RESNET_INPUT,
                                         "cifar10-split": RESNET_INPUT, "mnist-notmnist": LENET_INPUT}


# The protocols the authors' data preparation applies to: its sets are those of their MNIST/data_prep.py.
AUTHORS_PROTOCOLS = ("lenet++",)


def check_preprocessing(protocol, preprocessing) -> None:
    """A :class:`ConfigError` naming the config key ``preprocessing`` unless ``protocol`` (a
    registered name, or the mapping of a protocol from files) can be prepared that way."""
    if preprocessing not in PREPROCESSINGS:
        raise ConfigError(f"config key 'preprocessing': must be one of {', '.join(PREPROCESSINGS)}, "
                          f"got {preprocessing!r}")
    if preprocessing == AUTHORS and not (isinstance(protocol, str) and protocol in AUTHORS_PROTOCOLS):
        what = "a protocol from files" if isinstance(protocol, dict) else f"protocol {protocol!r}"
        raise ConfigError(f"config key 'preprocessing': 'authors' (the authors' MNIST/data_prep.py) applies to "
                          f"the {', '.join(AUTHORS_PROTOCOLS)} protocol only, not to {what}; use 'ours'")


def protocol_input(protocol, preprocessing: str = OURS) -> InputSpec:
    """The :class:`InputSpec` a protocol prepares its images with: a registered protocol's
    name, or the mapping of a protocol from files (as a run's config stores it), prepared
    as ``preprocessing`` says (:func:`check_preprocessing`)."""
    if isinstance(protocol, dict):
        from agnostophobia.data.file_protocols import file_protocol_input  # imports this module

        check_preprocessing(protocol, preprocessing)
        return file_protocol_input(protocol)
    PROTOCOLS.get(protocol)  # a clear error for an unknown name
    if protocol not in PROTOCOL_INPUTS:
        raise ConfigError(f"protocol {protocol!r} declares no input preparation (data.protocols.PROTOCOL_INPUTS)")
    check_preprocessing(protocol, preprocessing)
    return replace(PROTOCOL_INPUTS[protocol], preprocessing=preprocessing)


def require_protocol_data(name, data_dir: Optional[PathLike] = None, fetch: bool = False,
                          allow_unverified: bool = False, progress: Optional[bool] = None,
                          log: Callable[[str], None] = print) -> List[FetchedFile]:
    """:func:`require_datasets` for a registered protocol (no check for other names, nor for
    a protocol from files, which reads no registered dataset)."""
    if not isinstance(name, str):
        return []
    return require_datasets(PROTOCOL_DATASETS.get(name, ()), data_dir, PROTOCOL_DATA_HINTS.get(name, ""),
                            fetch=fetch, allow_unverified=allow_unverified, progress=progress, log=log)


# ------------------------------------------------------------------ sampling
def purpose_rng(seed: int, purpose: str) -> np.random.Generator:
    """An independent, reproducible stream per (seed, purpose)."""
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(purpose.encode())]))


def _allocate(counts: np.ndarray, total: int) -> np.ndarray:
    """Split ``total`` over classes proportionally to ``counts`` (largest remainder)."""
    exact = counts * (total / counts.sum())
    base = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - base), kind="stable")
    base[order[: total - base.sum()]] += 1
    return base


def stratified_split(labels: np.ndarray, fraction: float, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    """Indices ``(keep, held_out)``; ``held_out`` is ``round(fraction * N)`` samples,
    drawn per class in proportion to the class sizes. Both sorted."""
    if len(labels) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    classes, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    n_held = _allocate(counts, int(round(fraction * len(labels))))
    held = []
    for c in range(len(classes)):
        idx = np.flatnonzero(inverse == c)
        held.append(rng.permutation(idx)[: n_held[c]])
    held = np.sort(np.concatenate(held)) if held else np.zeros(0, np.int64)
    keep = np.setdiff1d(np.arange(len(labels)), held, assume_unique=True)
    return keep, held


def stratified_subset(labels: np.ndarray, n: Optional[int], rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of ``n`` samples, class proportions preserved; all when ``n`` is None."""
    if n is None or n >= len(labels):
        return np.arange(len(labels))
    _, held = stratified_split(labels, n / len(labels), rng)
    return held


class _Builder:
    """Collects subsampling, preprocessing and notes for one protocol build."""

    def __init__(self, name: str, seed: int, limits: dict, preprocessing: str = OURS):
        self.name, self.seed, self.limits = name, seed, limits
        self.val_fraction = limits.get("val_fraction", 0.2)
        self.input = protocol_input(name, preprocessing)
        self.notes: List[str] = []
        self.preprocessing_notes: List[str] = list(AUTHORS_NOTES) if preprocessing == AUTHORS else []

    @property
    def authors(self) -> bool:
        return self.input.preprocessing == AUTHORS

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def absorb(self, ds: DatasetSplit) -> DatasetSplit:
        for n in ds.notes:
            self.note(n)
        return ds

    def cap(self, labels: np.ndarray, key: str, purpose: str, what: str) -> np.ndarray:
        idx = stratified_subset(labels, self.limits.get(key), purpose_rng(self.seed, f"{self.name}/{purpose}"))
        if len(idx) < len(labels):
            self.note(f"{what}: subsampled {len(labels)} -> {len(idx)} ({key}, class-stratified, seed {self.seed})")
        return idx

    def images(self, ds: DatasetSplit, idx: np.ndarray, what: str) -> np.ndarray:
        return prepare_images(ds.images[idx], self.input, name=f"{what} ({ds.source})",
                              kind=DATASETS.get(ds.dataset).kind, padding=ds.meta.get("padding", 0))

    def train_val(self, ds: DatasetSplit, labels: np.ndarray, part: str, train_key: str,
                  what: str, negative_class: Optional[np.ndarray] = None) -> Tuple[Split, Split]:
        """Hold out ``val_fraction`` of ``ds`` (stratified by its own classes), cap both parts.
        ``negative_class`` (per sample of ``ds``, or None) follows the samples kept."""
        keep, held = stratified_split(ds.labels, self.val_fraction, purpose_rng(self.seed, f"{self.name}/{part}-val"))
        keep = keep[self.cap(ds.labels[keep], train_key, f"{part}-train", f"{what} train")]
        held = held[self.cap(ds.labels[held], "max_val", f"{part}-val-cap", f"{what} validation")]
        return (Split(f"{part}-train", self.images(ds, keep, what), labels[keep], _take(negative_class, keep)),
                Split(f"{part}-val", self.images(ds, held, what), labels[held], _take(negative_class, held)))

    def test(self, ds: DatasetSplit, labels: np.ndarray, name: str, what: str) -> Split:
        idx = self.cap(ds.labels, "max_test_per_set", f"test-{name}", what)
        return Split(name, self.images(ds, idx, what), labels[idx])


def _take(values: Optional[np.ndarray], idx: np.ndarray) -> Optional[np.ndarray]:
    return None if values is None else np.asarray(values, np.int64)[idx]


def _negative_class_of(split: Split) -> Optional[np.ndarray]:
    """The split's ``negative_class``; a split of knowns only has none to lose: all -1."""
    if split.negative_class is not None:
        return split.negative_class
    return np.full(len(split), -1, np.int64) if (split.labels >= 0).all() else None


def _concat(name: str, *parts: Split) -> Split:
    marks = [_negative_class_of(p) for p in parts]
    negative_class = None if any(m is None for m in marks) else np.concatenate(marks)
    return Split(name, np.concatenate([p.images for p in parts]), np.concatenate([p.labels for p in parts]),
                 negative_class)


def _unknown(ds: DatasetSplit) -> np.ndarray:
    return np.full(len(ds), -1, np.int64)


# ------------------------------------------------------------------ LeNet++
@PROTOCOLS.register("lenet++")
def lenet_protocol(data_dir=None, seed: int = 0, preprocessing: str = OURS, **limits) -> OpenSetProtocol:
    """Sec. 3/5: MNIST digits known, EMNIST letters as D_b', four unknown test sets."""
    b = _Builder("lenet++", seed, limits, preprocessing)
    mnist = b.absorb(load_dataset("mnist", "train", data_dir))
    k_train, k_val = b.train_val(mnist, mnist.labels, "known", "max_known_train", "MNIST")
    del mnist
    letters = b.absorb(load_dataset("letters", "train", data_dir))
    u_train, u_val = b.train_val(letters, _unknown(letters), "unknown", "max_unknown_train", "letters",
                                 negative_class=letters.labels)  # letter a-z = 0..25
    del letters
    mnist_test = b.absorb(load_dataset("mnist", "test", data_dir))
    test_known = b.test(mnist_test, mnist_test.labels, "known", "MNIST test")
    unknowns = {}
    for key, dataset, split, what in (("letters", "letters", "test", "letters test (D_b)"),
                                      ("devanagari", "devanagari", "test", "Devanagari"),
                                      ("notmnist", "notmnist", "test", "notMNIST"),
                                      ("cifar10", "cifar10", "test", "CIFAR-10 test")):
        ds = b.absorb(load_dataset(dataset, split, data_dir))
        unknowns[key] = b.test(ds, _unknown(ds), key, what)
    b.note(f"validation: seeded class-stratified {b.val_fraction:.0%} hold-out of MNIST train and of letters "
           f"train (the authors split 80/20 without a seed)")
    if b.authors:
        b.note("cifar10 unknowns: the CIFAR-10 test set (10,000) instead of the authors' data_batch_1")
        b.preprocessing_notes.append(
            "cifar10 unknowns: still the CIFAR-10 test set, not the authors' data_batch_1 (the first 10,000 "
            "training images): our staged CIFAR-10 training images are a JPEG re-encoded, class-sorted copy")
    else:
        b.note("cifar10 unknowns: the CIFAR-10 test set (10,000) instead of the authors' data_batch_1; grey = "
               "BT.601 luma of RGB (PIL 'L'), upright, antialiased resize to 28x28 (no transpose/BGR bugs)")
        b.note("polarity: every glyph set is white on black (checked: median border pixel below 128)")
    return OpenSetProtocol("lenet++", 10, b.input.shape, _concat("train", k_train, u_train),
                           _concat("val", k_val, u_val), test_known, unknowns, b.notes, list(DIGITS),
                           negative_class_names=list(LETTERS), preprocessing_notes=b.preprocessing_notes)


# ------------------------------------------------------- MNIST vs notMNIST
@PROTOCOLS.register("mnist-notmnist")
def mnist_notmnist_protocol(data_dir=None, seed: int = 0, preprocessing: str = OURS, **limits) -> OpenSetProtocol:
    """Fig. 3 (Sec. 4.3): MNIST digits known, notMNIST the unknowns, no known unknowns and no
    validation split: the adversarially trained MLP ensemble (Lakshminarayanan et al. 2017)
    trains on every MNIST training image and keeps its last epoch. ``max_known_train`` and
    ``max_test_per_set`` cap the sets (class-stratified); ``max_val`` has nothing to cap."""
    b = _Builder("mnist-notmnist", seed, limits, preprocessing)
    mnist = b.absorb(load_dataset("mnist", "train", data_dir))
    idx = b.cap(mnist.labels, "max_known_train", "known-train", "MNIST train")
    train = Split("train", b.images(mnist, idx, "MNIST"), mnist.labels[idx].astype(np.int64))
    del mnist
    mnist_test = b.absorb(load_dataset("mnist", "test", data_dir))
    test_known = b.test(mnist_test, mnist_test.labels.astype(np.int64), "known", "MNIST test")
    notmnist = b.absorb(load_dataset("notmnist", "test", data_dir))
    unknowns = {"notmnist": b.test(notmnist, _unknown(notmnist), "notmnist", "notMNIST")}
    b.note("no validation split: every MNIST training image is trained on and the last epoch is kept")
    b.note("polarity: every glyph set is white on black (checked: median border pixel below 128)")
    no_val = Split("val", train.images[:0], train.labels[:0])
    return OpenSetProtocol("mnist-notmnist", 10, b.input.shape, train, no_val, test_known, unknowns, b.notes,
                           list(DIGITS))


# -------------------------------------------------------------------- CIFAR
# D_b' = CIFAR-100 super-classes 0-9, D_a = 10-19 (see docs/data.md for why).
CIFAR_DB_COARSE = tuple(range(10))


@PROTOCOLS.register("cifar")
def cifar_protocol(data_dir=None, seed: int = 0, preprocessing: str = OURS, **limits) -> OpenSetProtocol:
    """Sec. 5: CIFAR-10 known; half of the CIFAR-100 super-classes as D_b', the other
    half (test images) and SVHN test as unknowns."""
    b = _Builder("cifar", seed, limits, preprocessing)
    # Fail on the optional, usually absent sets, all named at once, before the slow CIFAR-10 decode.
    require_protocol_data("cifar", data_dir)
    c100_train = b.absorb(load_dataset("cifar100", "train", data_dir))
    c100_test = b.absorb(load_dataset("cifar100", "test", data_dir))
    svhn = b.absorb(load_dataset("svhn", "test", data_dir))
    c10 = b.absorb(load_dataset("cifar10", "train", data_dir))
    k_train, k_val = b.train_val(c10, c10.labels, "known", "max_known_train", "CIFAR-10")
    del c10
    db = np.isin(c100_train.extra["coarse"], CIFAR_DB_COARSE)
    neg = _subset(c100_train, db)
    db_index = np.full(len(CIFAR100_COARSE), -1, np.int64)  # super-class -> its index among D_b' classes
    db_index[list(CIFAR_DB_COARSE)] = np.arange(len(CIFAR_DB_COARSE))
    u_train, u_val = b.train_val(neg, _unknown(neg), "unknown", "max_unknown_train", "CIFAR-100 D_b'",
                                 negative_class=db_index[neg.extra["coarse"]])
    c10_test = b.absorb(load_dataset("cifar10", "test", data_dir))
    test_known = b.test(c10_test, c10_test.labels, "known", "CIFAR-10 test")
    in_db = np.isin(c100_test.extra["coarse"], CIFAR_DB_COARSE)
    da, db_test = _subset(c100_test, ~in_db), _subset(c100_test, in_db)
    unknowns = {"cifar100": b.test(da, _unknown(da), "cifar100", "CIFAR-100 D_a test"),
                "svhn": b.test(svhn, _unknown(svhn), "svhn", "SVHN test"),
                "cifar100-db": b.test(db_test, _unknown(db_test), "cifar100-db", "CIFAR-100 D_b test")}
    b.note("CIFAR-100 super-classes 0-9 (" + ", ".join(CIFAR100_COARSE[:10]) + ") are D_b' (training "
           "negatives); 10-19 (" + ", ".join(CIFAR100_COARSE[10:]) + ") are D_a, test images only")
    b.note(f"CIFAR-100 D_a test has {len(da)} images (10 super-classes x 500); the paper reports 4,500")
    b.note(f"validation: seeded class-stratified {b.val_fraction:.0%} hold-out of CIFAR-10 train and of D_b'")
    return OpenSetProtocol("cifar", 10, b.input.shape, _concat("train", k_train, u_train), _concat("val", k_val, u_val),
                           test_known, unknowns, b.notes, list(CIFAR10_CLASSES),
                           negative_class_names=[CIFAR100_COARSE[c] for c in CIFAR_DB_COARSE])


def _subset(ds: DatasetSplit, mask: np.ndarray) -> DatasetSplit:
    return DatasetSplit(ds.dataset, ds.split, ds.images[mask], ds.labels[mask], ds.class_names, ds.source,
                        ds.format, list(ds.notes), {k: v[mask] for k, v in ds.extra.items()}, dict(ds.meta))


# ----------------------------------------------------------- CIFAR-10 split
# Each unknown group holds one vehicle and one animal, and each of its classes has a
# close known sibling (dog~cat, truck~automobile; horse~deer, ship~airplane), so the
# task is neither "animal vs vehicle" nor far-OOD.
CIFAR10_KNOWN = (0, 1, 2, 3, 4, 6)      # airplane automobile bird cat deer frog -> 0..5
CIFAR10_NEGATIVE = (7, 8)               # horse ship: D_b' (training negatives)
CIFAR10_UNKNOWN = (5, 9)                # dog truck: D_a (test only)


@PROTOCOLS.register("cifar10-split")
def cifar10_split_protocol(data_dir=None, seed: int = 0, preprocessing: str = OURS, **limits) -> OpenSetProtocol:
    """CIFAR-10 alone: 6 known classes, 2 known-unknown classes, 2 unknown-unknown classes."""
    b = _Builder("cifar10-split", seed, limits, preprocessing)
    remap = np.full(10, -1, np.int64)
    remap[list(CIFAR10_KNOWN)] = np.arange(len(CIFAR10_KNOWN))
    train = b.absorb(load_dataset("cifar10", "train", data_dir))
    known = _subset(train, np.isin(train.labels, CIFAR10_KNOWN))
    k_train, k_val = b.train_val(known, remap[known.labels], "known", "max_known_train", "CIFAR-10 known")
    neg = _subset(train, np.isin(train.labels, CIFAR10_NEGATIVE))
    del train, known
    negative_index = np.full(10, -1, np.int64)
    negative_index[list(CIFAR10_NEGATIVE)] = np.arange(len(CIFAR10_NEGATIVE))
    u_train, u_val = b.train_val(neg, _unknown(neg), "unknown", "max_unknown_train", "CIFAR-10 negatives",
                                 negative_class=negative_index[neg.labels])
    test = b.absorb(load_dataset("cifar10", "test", data_dir))
    tk = _subset(test, np.isin(test.labels, CIFAR10_KNOWN))
    da, db = _subset(test, np.isin(test.labels, CIFAR10_UNKNOWN)), _subset(test, np.isin(test.labels, CIFAR10_NEGATIVE))
    names = [CIFAR10_CLASSES[c] for c in CIFAR10_KNOWN]
    b.note(f"CIFAR-10 split: known {', '.join(names)}; D_b' (training negatives) "
           f"{', '.join(CIFAR10_CLASSES[c] for c in CIFAR10_NEGATIVE)}; D_a (test only) "
           f"{', '.join(CIFAR10_CLASSES[c] for c in CIFAR10_UNKNOWN)}")
    return OpenSetProtocol("cifar10-split", len(CIFAR10_KNOWN), b.input.shape, _concat("train", k_train, u_train),
                           _concat("val", k_val, u_val), b.test(tk, remap[tk.labels], "known", "CIFAR-10 known test"),
                           {"cifar10-dog-truck": b.test(da, _unknown(da), "cifar10-dog-truck", "CIFAR-10 dog+truck test"),
                            "cifar10-horse-ship": b.test(db, _unknown(db), "cifar10-horse-ship",
                                                         "CIFAR-10 horse+ship test")},
                           b.notes, names, [CIFAR10_CLASSES[c] for c in CIFAR10_NEGATIVE])


# ------------------------------------------------------- cross-class calibration
#: The evaluation set of unknowns in a :func:`hold_out_negative_classes` protocol.
HELD_OUT_NEGATIVES = "held-out-classes"


def split_negative_classes(protocol: OpenSetProtocol, seed: int) -> Tuple[List[int], List[int]]:
    """Sec. 6, cross-class calibration: the protocol's negative classes (D_b') in two halves,
    ``(trained, held_out)``, sorted indices into ``protocol.negative_class_names``.

    The halves are disjoint and cover every negative class; a seeded permutation (its own
    random stream) decides, so one data seed always gives the same halves. With an odd
    number of classes the trained half has the extra one. Raises :class:`DataError` where
    the protocol does not keep its negatives' classes or has fewer than two.
    """
    names = protocol.negative_class_names
    if not names or protocol.train.negative_class is None or protocol.val.negative_class is None:
        raise DataError(f"protocol {protocol.name!r} does not keep the class of its negatives (D_b'), "
                        f"so its negative classes cannot be split for cross-class calibration")
    if len(names) < 2:
        raise DataError(f"protocol {protocol.name!r} has {len(names)} negative class; cross-class calibration "
                        f"needs at least two (one to train on, one held out)")
    order = purpose_rng(seed, f"{protocol.name}/cross-class").permutation(len(names))
    n_trained = len(names) - len(names) // 2
    return sorted(order[:n_trained].tolist()), sorted(order[n_trained:].tolist())


def _select(split: Split, mask: np.ndarray, name: Optional[str] = None) -> Split:
    return Split(name or split.name, split.images[mask], split.labels[mask], _take(split.negative_class, mask))


def hold_out_negative_classes(protocol: OpenSetProtocol, seed: int) -> OpenSetProtocol:
    """The protocol for cross-class calibration (Sec. 6): train on the knowns and the
    negatives of one half of the negative classes (:func:`split_negative_classes`), and
    evaluate on validation data only.

    * ``train``: the knowns and the trained half's negatives; the held-out half's training
      images are dropped (never seen).
    * ``val`` (model selection by validation loss, as in every run): the validation knowns
      and the trained half's validation negatives.
    * ``test_known``: the validation knowns; ``test_unknowns[HELD_OUT_NEGATIVES]``: the
      validation negatives of the held-out classes, which no training step has seen.
      The protocol's own test sets are dropped, so tuning on this protocol never reads
      test data.
    """
    trained, held_out = split_negative_classes(protocol, seed)
    names = protocol.negative_class_names
    in_held = {part: np.isin(getattr(protocol, part).negative_class, held_out) for part in ("train", "val")}
    unseen = _select(protocol.val, in_held["val"], HELD_OUT_NEGATIVES)
    train = _select(protocol.train, ~in_held["train"])
    if len(unseen) == 0 or not (train.labels < 0).any():
        raise DataError(f"protocol {protocol.name!r}: cross-class calibration needs training negatives of the "
                        f"trained classes and validation negatives of the held-out ones; got {int((train.labels < 0).sum())} "
                        f"and {len(unseen)} (raise max_unknown_train / max_val)")
    note = (f"cross-class calibration (Sec. 6), data seed {seed}: trained on the negatives of "
            f"{', '.join(names[i] for i in trained)}; validation unknowns = held-out validation negatives of "
            f"{', '.join(names[i] for i in held_out)} (never trained on); test data not used")
    return OpenSetProtocol(protocol.name, protocol.num_classes, protocol.input_shape, train,
                           _select(protocol.val, ~in_held["val"]),
                           _select(protocol.val, protocol.val.labels >= 0, "known"), {HELD_OUT_NEGATIVES: unseen},
                           protocol.notes + [note], list(protocol.class_names), list(names),
                           list(protocol.preprocessing_notes))
