"""Protocol types, their declarations and the registry, and the seeded sampling every
protocol builder uses: the module below the builders (``data.paper_protocols``, the paper's;
``data.file_protocols``, protocols from files) and the factory above them (``data.protocols``).

An open-set protocol (Sec. 1, used throughout Sec. 5) says which data is known (D_c'), which
is a known unknown for training (D_b', label -1), and which sets are unknown at test time.
Each protocol is declared once, as a :class:`ProtocolSpec` registered beside its builder
(:func:`register_protocol`), the way a dataset is one ``DatasetInfo``.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from agnostophobia.errors import ConfigError, DataError
from agnostophobia.registry import Registry
from agnostophobia.data.fetch import Downloader, FetchedFile, require_datasets
from agnostophobia.data.paths import PathLike
from agnostophobia.data.preprocess import OURS, PREPROCESSINGS, InputSpec
from agnostophobia._log import log_info
from agnostophobia._validation import check_seed


@dataclass
class ProtocolSplit:
    """One split of an open-set protocol (train, val, the known test set or one unknown set):
    images prepared for the protocol's model, open-set labels (-1: unknown). Built from
    datasets' :class:`~agnostophobia.data.datasets.DatasetSplit` (as stored, own labels).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import ProtocolSplit
        >>> val = ProtocolSplit("val", np.zeros((4, 1, 28, 28), np.uint8), np.array([0, 1, -1, -1]))
        >>> len(val), int((val.labels < 0).sum())  # two known unknowns (label -1)
        (4, 2)
    """

    name: str            # the split: "train", "val", "known" or the unknown set's name
    images: np.ndarray   # uint8 (N, C, H, W), preprocessed for the protocol's model
    labels: np.ndarray   # int64 (N,), known class 0..C-1, or -1 for unknown
    negative_class: Optional[np.ndarray] = None  # int64 (N,): index into OpenSetProtocol.negative_class_names of each negative's source class, -1 for knowns; None where unknown

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass
class OpenSetProtocol:
    """An open-set protocol's data, prepared for its model: the training and validation splits
    (knowns and, for the approaches that train on them, known unknowns labelled -1), the known
    test set D_c and each unknown test set (paper Sec. 4.1; :func:`build_protocol` builds one).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import OpenSetProtocol, ProtocolSplit
        >>> def split(name, labels):
        ...     return ProtocolSplit(name, np.zeros((len(labels), 1, 28, 28), np.uint8), np.array(labels))
        ...
        >>> protocol = OpenSetProtocol("toy", 2, (1, 28, 28), train=split("train", [0, 1, -1]),
        ...                            val=split("val", [0, -1]), test_known=split("known", [0, 1]),
        ...                            test_unknowns={"letters": split("letters", [-1, -1])}, notes=[])
        >>> protocol.sizes()["train"], protocol.sizes()["test_unknowns/letters"]
        ({'known': 2, 'unknown': 1}, {'known': 0, 'unknown': 2})
    """

    name: str                          # the protocol's name (lenet++, cifar10, a file protocol's)
    num_classes: int                   # the known classes C
    input_shape: tuple                 # (1, 28, 28) or (3, 32, 32)
    train: ProtocolSplit                       # D_c' knowns + D_b' known unknowns (label -1)
    val: ProtocolSplit                         # held-out knowns (+ held-out known unknowns, label -1)
    test_known: ProtocolSplit                  # D_c
    test_unknowns: Dict[str, ProtocolSplit]    # name -> unknown set, all labels -1
    notes: List[str]                   # data substitutions and deviations, for reports
    class_names: List[str] = field(default_factory=list)   # each known class's name, by label
    negative_class_names: List[str] = field(default_factory=list)  # the classes of the known unknowns (D_b')
    # How the images were prepared, where that is not our preparation (preprocessing: authors), for reports
    preprocessing_notes: List[str] = field(default_factory=list)
    # Files that say how the protocol split its images (file name -> text), written into the run's
    # split folder so that a user can read the split and reuse it (an imagefolder protocol's CSVs)
    split_files: Dict[str, str] = field(default_factory=dict)
    # What it was built from (``data.fingerprint``): "mnist/train" -> {"path", "size", "sha256"},
    # or a file protocol's listing. A run records them; a command that rebuilds its split checks them.
    sources: Dict[str, Dict[str, object]] = field(default_factory=dict)

    def sizes(self) -> Dict[str, Dict[str, int]]:
        """Sample counts of each split.

        Returns:
            A mapping from each split's name (``train``, ``val``, ``test_known``,
            ``test_unknowns/<name>``) to its ``{"known": n, "unknown": m}`` counts.
        """
        def count(s: ProtocolSplit) -> Dict[str, int]:
            return {"known": int((s.labels >= 0).sum()), "unknown": int((s.labels < 0).sum())}
        out = {"train": count(self.train), "val": count(self.val), "test_known": count(self.test_known)}
        out.update({f"test_unknowns/{k}": count(v) for k, v in self.test_unknowns.items()})
        return out


@dataclass(frozen=True)
class ProtocolSpec:
    """Everything about one protocol that is known before it is built, declared once.

    ``build(data_dir=None, seed=0, preprocessing="ours", **limits)`` builds it; ``input`` is how it
    prepares its images (model input and image kind; ``evaluate`` prepares a user's set the same
    way); ``datasets`` the registered datasets it reads (checked, or fetched, before a run writes
    anything; ``data_hint`` is added to that error); ``preprocessings`` the data preparations it
    allows (``data.preprocess``; ``authors`` only where the authors' own sets exist).
    """

    name: str
    build: Callable[..., OpenSetProtocol]
    input: InputSpec
    datasets: Tuple[str, ...] = ()
    preprocessings: Tuple[str, ...] = (OURS,)
    data_hint: str = ""
    # The closed-set accuracy at or above which a network trained on this protocol counts as
    # converged (``benchmark`` marks a row below it "not converged" and ranks it nowhere); None:
    # no declared threshold (a user's protocol: ``benchmark --min-accuracy``).
    converged_accuracy: Optional[float] = None
    # A protocol of the open-set literature's splits (Neal et al. 2018): each split's known classes,
    # by the dataset's label, in the order they are numbered 0..C-1; () for a protocol of one split.
    # A build of it names one (``split``: ``build_protocol(..., split=K)``, config key
    # ``protocol_split``, ``--split K``).
    splits: Tuple[Tuple[int, ...], ...] = ()
    # Where the negatives (D_b', label -1) of a protocol come from when they are no part of its own
    # dataset: the title of that declared outside set (``"EMNIST letters train"``). The rows of an
    # approach that trains on negatives are then *extra data* in reports (as OpenOOD keeps methods
    # trained with outliers apart); "" where the negatives are the protocol's own classes.
    outside_negatives: str = ""
    # The metric its benchmark ranks rows by (a key of ``experiments.ranking_candidates.RANKING_CANDIDATES``),
    # declared once from the validation pairs of every run published by 2026-12-05, pooled
    # (docs/guide/benchmark-statistics.md, "Choosing the ranking metric"; docs/result_ranking.py recomputes it); ``benchmark
    # --ranking-metric`` overrides it; "": none declared, and each run's rule chooses on its validation data.
    ranking_metric: str = ""
    # True where building is what checks the protocol (its files): `reproduce` builds it before
    # anything of the run is written; the others' data is checked by `require_data`.
    check_by_building = False

    @property
    def what(self) -> str:
        """How an error names the protocol."""
        return f"protocol {self.name!r}"

    def config_value(self, base_dir: PathLike) -> Any:
        """What a config's ``protocol`` key holds for this protocol, any file path in it made
        absolute against ``base_dir`` (a registered protocol: its name)."""
        return self.name

    def check_preprocessing(self, preprocessing) -> None:
        """A :class:`ConfigError` naming the config key ``preprocessing`` unless the protocol
        can be prepared that way."""
        if preprocessing not in PREPROCESSINGS:
            raise ConfigError(f"config key 'preprocessing': must be one of {', '.join(PREPROCESSINGS)}, "
                              f"got {preprocessing!r}")
        if preprocessing not in self.preprocessings:
            allowing = [name for name in PROTOCOLS.registered() if preprocessing in PROTOCOLS.get(name).preprocessings]
            raise ConfigError(f"config key 'preprocessing': {preprocessing!r} (the authors' MNIST/data_prep.py) "
                              f"applies to the {', '.join(allowing)} protocol only, not to {self.what}; use 'ours'")

    def input_for(self, preprocessing: str = OURS) -> InputSpec:
        """The :class:`InputSpec` the protocol prepares its images with, prepared as
        ``preprocessing`` says (:meth:`check_preprocessing`)."""
        self.check_preprocessing(preprocessing)
        return replace(self.input, preprocessing=preprocessing)

    def check_split(self, split, where: str = "config key 'protocol_split'", required: bool = False) -> None:
        """A :class:`ConfigError` naming ``where`` unless ``split`` suits the protocol: one of its
        splits' indices where it has splits, None where it has none (and None allowed for a
        protocol with splits unless ``required``)."""
        if split is None:
            if required and self.splits:
                raise ConfigError(f"{self.what} has {len(self.splits)} splits; name one, "
                                  f"0-{len(self.splits) - 1} ({where})")
            return
        if not self.splits:
            having = [n for n in PROTOCOLS.registered() if PROTOCOLS.get(n).splits]
            raise ConfigError(f"{where} {split!r}: {self.what} has no splits (the protocols with splits: "
                              f"{', '.join(having) or 'none'})")
        if isinstance(split, bool) or not isinstance(split, (int, np.integer)) or not 0 <= split < len(self.splits):
            raise ConfigError(f"{where} {split!r}: {self.what} has splits 0-{len(self.splits) - 1}")

    def require_data(self, data_dir: Optional[PathLike] = None, fetch: bool = False, allow_unverified: bool = False,
                     progress: Optional[bool] = None, log: Callable[[str], None] = log_info) -> List[FetchedFile]:
        """:func:`~agnostophobia.data.fetch.require_datasets` for the datasets it reads."""
        return require_datasets(self.datasets, data_dir, self.data_hint, fetch=fetch,
                                downloader=Downloader(allow_unverified=allow_unverified, progress=progress, log=log))

    def make(self, data_dir: Optional[PathLike] = None, seed: int = 0, preprocessing: str = OURS,
             data_loading: str = "memory", **limits) -> OpenSetProtocol:
        """Build it. ``data_loading`` applies to a protocol from files only: a registered
        protocol is always held in memory (``data.streaming``). A protocol with splits takes
        ``split`` (:meth:`check_split`) among ``limits``."""
        self.check_preprocessing(preprocessing)
        return self.build(data_dir=data_dir, seed=seed, preprocessing=preprocessing, **limits)


PROTOCOLS: Registry[ProtocolSpec] = Registry("protocol", path_names=True)


#: How far an unknown set lies from the knowns (:class:`UnknownSet`): near, far, or not declared.
NEAR, FAR = "near", "far"
PROXIMITIES = (NEAR, FAR, "")


@dataclass(frozen=True)
class UnknownSet:
    """An unknown test set's facts, declared once beside the protocol that builds it: how
    reports, figures and notes name it.

    ``known_unknowns`` marks a D_b set: test images of the classes whose training images are the
    negatives D_b' (Sec. 3); the others are D_a, classes never seen in training. ``figures``
    names the paper's figures that show the set, where any do. ``proximity`` is how far the set
    lies from the knowns, as OpenOOD v1.5 groups its sets (Zhang et al. 2023): ``near`` (other
    classes of the knowns' own kind of images, e.g. CIFAR-10 dog and truck beside its other classes),
    ``far`` (another domain, e.g. digits or letters beside photographs); "" where not declared
    (a user's set). A benchmark reports a protocol's far D_a sets apart where it also has near ones
    (:func:`~agnostophobia.experiments.benchmark_rows.ranked_sets`).
    """

    name: str
    title: str
    known_unknowns: bool = False
    figures: str = ""
    proximity: str = ""  # near | far | "" (not declared)

    def __post_init__(self):
        if self.proximity not in PROXIMITIES:
            raise ValueError(f"unknown set {self.name!r}: proximity {self.proximity!r} is not one of {PROXIMITIES}")

    @property
    def role(self) -> str:
        return "D_b" if self.known_unknowns else "D_a"

    @property
    def label(self) -> str:
        """Its name in a table cell, a legend or a note: ``EMNIST letters test (D_b)``."""
        return f"{self.title} ({self.role})"

    @property
    def heading(self) -> str:
        """Its section heading: ``Known unknowns: EMNIST letters test (D_b)``."""
        kind = "Known unknowns" if self.known_unknowns else "Unknown unknowns"
        return f"{kind}: {self.label}" + (f", {self.figures}" if self.figures else "")


#: Every declared unknown test set by name, from the protocols' declarations
#: (:func:`register_protocol`'s ``unknown_sets``) and the file protocols' two sets.
UNKNOWN_SETS: Registry[UnknownSet] = Registry("unknown set", path_names=True)


def declare_unknown_sets(*sets: UnknownSet) -> None:
    for unknown_set in sets:
        UNKNOWN_SETS.register(unknown_set.name)(unknown_set)


def unknown_set(name: str) -> UnknownSet:
    """The declaration of the unknown set ``name``; a set a user added (``evaluate --unknowns``)
    is declared nowhere and is named as given, as unknown unknowns (D_a)."""
    return UNKNOWN_SETS.get(name) if name in UNKNOWN_SETS else UnknownSet(name, name)


# Many parameters, on purpose: each is one independent fact of the protocol's declaration (the
# fields of ProtocolSpec, and the unknown sets it builds), given by keyword where the builder is
# declared, as a dataclass takes its fields; a record passed instead would only repeat them.
def register_protocol(name: str, input: InputSpec, datasets: Tuple[str, ...] = (),
                      preprocessings: Tuple[str, ...] = (OURS,), data_hint: str = "",
                      unknown_sets: Tuple[UnknownSet, ...] = (), converged_accuracy: Optional[float] = None,
                      splits: Tuple[Tuple[int, ...], ...] = (), outside_negatives: str = "",
                      ranking_metric: str = ""):
    """Decorator: register the builder it decorates as protocol ``name``, with its declaration
    (:class:`ProtocolSpec`) and that of the unknown test sets it builds; the builder is returned
    unchanged. A builder of a protocol with ``splits`` takes ``split`` (an index into them)."""
    def add(build: Callable[..., OpenSetProtocol]) -> Callable[..., OpenSetProtocol]:
        PROTOCOLS.register(name)(ProtocolSpec(name, build, input, tuple(datasets), tuple(preprocessings), data_hint,
                                                converged_accuracy, tuple(tuple(s) for s in splits),
                                                outside_negatives, ranking_metric))
        declare_unknown_sets(*unknown_sets)
        return build

    return add


# ------------------------------------------------------------------ sampling
def purpose_rng(seed: int, purpose: str) -> np.random.Generator:
    """An independent, reproducible random stream per (seed, purpose).

    Args:
        seed: the data seed.
        purpose: what the stream draws for (``"lenet++/train-val"``, ...): each purpose gets its own.

    Returns:
        A :class:`numpy.random.Generator`, the same stream for the same ``(seed, purpose)``.

    Examples:
        >>> from agnostophobia.data import purpose_rng
        >>> a = purpose_rng(0, "validation split").integers(100, size=3)
        >>> b = purpose_rng(0, "validation split").integers(100, size=3)
        >>> c = purpose_rng(0, "training subsample").integers(100, size=3)
        >>> bool((a == b).all()), bool((a == c).all())  # the same stream per (seed, purpose), another per purpose
        (True, False)
    """
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
    drawn per class in proportion to the class sizes. Both sorted.

    Args:
        labels: (N,) the samples' classes.
        fraction: the share held out, in [0, 1].
        rng: the random stream (e.g. :func:`purpose_rng`).

    Returns:
        ``(keep, held_out)``, two sorted int64 NumPy arrays of indices into ``labels``.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import stratified_split
        >>> labels = np.array([0, 0, 0, 0, 1, 1, 1, 1])
        >>> keep, held_out = stratified_split(labels, fraction=0.5, rng=np.random.default_rng(0))
        >>> len(keep), np.bincount(labels[held_out])  # half of each class held out
        (4, array([2, 2]))
    """
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
    """Sorted indices of ``n`` samples, class proportions preserved; all when ``n`` is None.

    Args:
        labels: (N,) the samples' classes.
        n: how many to keep, or None.
        rng: the random stream (e.g. :func:`purpose_rng`).

    Returns:
        A sorted int64 NumPy array of indices into ``labels``.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.data import stratified_subset
        >>> labels = np.array([0, 0, 0, 0, 0, 0, 1, 1, 1])
        >>> np.bincount(labels[stratified_subset(labels, 6, np.random.default_rng(0))])  # 2:1, as in labels
        array([4, 2])
    """
    if n is None or n >= len(labels):
        return np.arange(len(labels))
    _, held = stratified_split(labels, n / len(labels), rng)
    return held


def select_rows(values: Optional[np.ndarray], idx: np.ndarray) -> Optional[np.ndarray]:
    """``values[idx]`` as int64 (a split's ``negative_class``); None stays None."""
    return None if values is None else np.asarray(values, np.int64)[idx]



# ------------------------------------------------------- cross-class calibration
#: The evaluation set of unknowns in a :func:`hold_out_negative_classes` protocol.
HELD_OUT_NEGATIVES = "held-out-classes"


def split_negative_classes(protocol: OpenSetProtocol, seed: int) -> Tuple[List[int], List[int]]:
    """Sec. 6, cross-class calibration: the protocol's negative classes (D_b') in two halves,
    ``(trained, held_out)``, sorted indices into ``protocol.negative_class_names``.

    The halves are disjoint and cover every negative class; a seeded permutation (its own
    random stream) decides, so one data seed always gives the same halves. With an odd
    number of classes the trained half has the extra one.

    Args:
        protocol: a protocol that keeps its negatives' classes.
        seed: the data seed.

    Returns:
        ``(trained, held_out)``, two sorted lists of class indices.

    Raises:
        ~agnostophobia.errors.DataError: the protocol does not keep its negatives' classes or
            has fewer than two.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import make_glyph_folders
        >>> folder = tempfile.TemporaryDirectory()
        >>> root = Path(folder.name) / "glyphs"  # two negative classes, a few images of each
        >>> layout = make_glyph_folders(root, negative=("diag", "cross"), per_split={"train": 4, "val": 2, "test": 2})
        >>> from agnostophobia.data import build_file_protocol, split_negative_classes
        >>> protocol = build_file_protocol(layout)
        >>> trained, held_out = split_negative_classes(protocol, seed=0)  # indices into negative_class_names
        >>> sorted(trained + held_out), len(trained) == len(held_out) == 1
        ([0, 1], True)
        >>> split_negative_classes(protocol, seed=0) == (trained, held_out)  # one data seed, the same halves
        True
        >>> folder.cleanup()
    """
    names = protocol.negative_class_names
    if not names or protocol.train.negative_class is None or protocol.val.negative_class is None:
        raise DataError(f"protocol {protocol.name!r} does not keep the class of its negatives (D_b'), "
                        f"so its negative classes cannot be split for cross-class calibration")
    if len(names) < 2:
        raise DataError(f"protocol {protocol.name!r} has {len(names)} negative class; cross-class calibration "
                        f"needs at least two (one to train on, one held out)")
    # a protocol from files is named "type:ROOT"; its stream leaves the path out, so a folder moved
    # or copied elsewhere gets the same halves from the same data seed
    family = protocol.name.split(":", 1)[0]
    stream = f"{protocol.name}/cross-class" if family == protocol.name else f"{family}/{'|'.join(names)}/cross-class"
    order = purpose_rng(seed, stream).permutation(len(names))
    n_trained = len(names) - len(names) // 2
    return sorted(order[:n_trained].tolist()), sorted(order[n_trained:].tolist())


def _select(split: ProtocolSplit, mask: np.ndarray, name: Optional[str] = None) -> ProtocolSplit:
    return ProtocolSplit(name or split.name, split.images[mask], split.labels[mask],
                         select_rows(split.negative_class, mask))


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

    Args:
        protocol, seed: as for :func:`split_negative_classes`.

    Returns:
        The :class:`OpenSetProtocol` described above.

    Raises:
        ~agnostophobia.errors.DataError: the held-out half has no validation negatives, or the
            trained half no training negatives.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import make_glyph_folders
        >>> folder = tempfile.TemporaryDirectory()
        >>> root = Path(folder.name) / "glyphs"  # two negative classes, a few images of each
        >>> layout = make_glyph_folders(root, negative=("diag", "cross"), per_split={"train": 4, "val": 2, "test": 2})
        >>> from agnostophobia.data import build_file_protocol, hold_out_negative_classes
        >>> protocol = build_file_protocol(layout)
        >>> calibration = hold_out_negative_classes(protocol, seed=0)  # Sec. 6: train on one half of the negatives
        >>> len(protocol.negative_class_names), sorted(calibration.test_unknowns)
        (2, ['held-out-classes'])
        >>> folder.cleanup()
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
                           list(protocol.preprocessing_notes), sources=dict(protocol.sources))


#: The caps a protocol takes (``protocol_limits`` in a config; ``build_protocol(..., **limits)``).
LIMITS = ("max_known_train", "max_unknown_train", "max_val", "max_test_per_set")


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
    check_seed(seed, "seed", ConfigError)
