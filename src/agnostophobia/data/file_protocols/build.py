"""The :class:`OpenSetProtocol` a mapping describes (:func:`build_file_protocol`, after the check
pass), its parts capped by the limits, its notes for the report and the fingerprints of what it
was built from; and its declaration as a protocol (:class:`FileProtocol`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from agnostophobia.data.file_protocols.check import CHUNK, _read_split, list_protocol, raise_problems
from agnostophobia.data.file_protocols.imagefolder import split_tables
from agnostophobia.data.file_protocols.spec import (NEGATIVE, SPLITS, FileProtocolSpec, Item, Listing, _title,
                                                    parse_file_protocol, resolve_paths)
from agnostophobia.data.fingerprint import file_fingerprint, listing_fingerprint
from agnostophobia.data.image_files import ImageFiles, choose_loading
from agnostophobia.data.preprocess import OURS
from agnostophobia.data.protocol_types import (OpenSetProtocol, ProtocolSpec, ProtocolSplit, UnknownSet, check_limits,
                                               declare_unknown_sets, purpose_rng, stratified_subset)
from agnostophobia.errors import ConfigError

# (part, split, the labels it takes, the limit that caps it)
PARTS = (("train-known", "train", "known", "max_known_train"),
         ("train-negative", "train", "negative", "max_unknown_train"),
         ("val-known", "val", "known", "max_val"),
         ("val-negative", "val", "negative", "max_val"),
         ("test-known", "test", "known", "max_test_per_set"),
         ("test-negative", "test", "negative", "max_test_per_set"),
         ("test-unknown", "test", "unknown", "max_test_per_set"))


def build_file_protocol(mapping, seed: int = 0, data_loading: str = "memory", **limits) -> OpenSetProtocol:
    """The :class:`OpenSetProtocol` a mapping describes, after the check pass (every image is
    opened; any problem raises one :class:`DataError` listing them, before anything is built).

    ``data_loading`` (``data.image_files.choose_loading``): ``memory`` prepares every image now;
    ``stream`` keeps the paths (each split's images are an :class:`ImageFiles`, decoded when
    read) after the same check pass, and prepares only a first chunk of each split, so that
    the set-level checks of ``prepare_images`` (glyph polarity) still run; ``auto`` streams
    when the decoded training set would not fit comfortably in memory.

    ``limits`` as for the registered protocols (``max_known_train``, ``max_unknown_train``,
    ``max_val``, ``max_test_per_set``): seeded, stratified by class (negatives by their
    source class where known). ``val_fraction`` does not apply: the protocol has its own val.

    Args:
        mapping: the ``protocol:`` mapping of an experiment YAML (``type: folders``, ``csv`` or
            ``imagefolder`` and its keys, see the module docstring), or the
            :class:`FileProtocolSpec` ``parse_file_protocol`` made of one. Its relative paths
            are taken from the current directory (a config's were made absolute when it was
            loaded, by ``resolve_paths``).
        seed: the data seed: it draws an imagefolder protocol's split and every subsample.
        data_loading: ``"memory"``, ``"stream"`` or ``"auto"`` (as above).
        **limits: caps on the number of samples, each None for all: ``max_known_train`` (the
            training knowns), ``max_unknown_train`` (the training negatives, D_b'), ``max_val``
            (the val knowns and, apart, the val negatives) and ``max_test_per_set`` (each of the
            test knowns, negatives and unknowns).

    Returns:
        The protocol, its splits' images ``uint8 (N, C, S, S)`` (in memory or streamed), their
        labels (``>= 0`` known, -1 negative or unknown), its notes (what was subsampled or
        streamed), the split files an imagefolder protocol was split into and the fingerprints
        of its files.

    Raises:
        ConfigError: a bad key or value of ``mapping``, ``data_loading`` not one of the three,
            a key of ``limits`` that is not a cap (or ``val_fraction``), or a bad cap or seed.
        ~agnostophobia.errors.DataError: the protocol's problems (:func:`check_file_protocol`),
            listed in one error.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import make_glyph_folders
        >>> folder = tempfile.TemporaryDirectory()
        >>> root = Path(folder.name) / "glyphs"  # two negative classes, a few images of each
        >>> layout = make_glyph_folders(root, negative=("diag", "cross"), per_split={"train": 4, "val": 2, "test": 2})
        >>> from agnostophobia.data import build_file_protocol
        >>> protocol = build_file_protocol(layout)
        >>> protocol.num_classes, protocol.train.images.shape, protocol.negative_class_names
        (3, (20, 1, 28, 28), ['cross', 'diag'])
        >>> folder.cleanup()
    """
    spec = mapping if isinstance(mapping, FileProtocolSpec) else parse_file_protocol(mapping)
    if "val_fraction" in limits:
        raise ConfigError("protocol_limits: val_fraction does not apply to a protocol from files "
                          + ("(an imagefolder protocol takes protocol.val_fraction)" if spec.type == "imagefolder"
                             else "(its val split is given)"))
    check_limits(limits, seed)  # a misspelled cap is refused, never silently ignored
    listing = list_protocol(spec, seed)
    chosen, notes = _choose(listing, seed, limits)
    n_train = sum(len(chosen[p]) for p, s, _, _ in PARTS if s == "train")
    stream = choose_loading(data_loading, n_train, spec.input.shape) == "stream"
    prepared = _read_chosen(spec, listing, chosen, stream)
    if listing.repeats:
        notes.append("allow_duplicates: " + ", ".join(f"{n} {split} entries repeat a file listed earlier in the "
                                                      f"split" for split, n in listing.repeats.items())
                     + "; each entry counts as a sample")
    if stream:
        notes.append(f"data loading: streamed ({n_train} training images decoded on the fly, "
                     f"data_loading: {data_loading})")
    protocol = _assemble(spec, listing, chosen, prepared, notes)
    if spec.type == "imagefolder":
        protocol.split_files = split_tables(spec, listing)
    protocol.sources = file_sources(spec, listing)
    return protocol


def _read_chosen(spec: FileProtocolSpec, listing: Listing, chosen: Dict[str, List[int]],
                 stream: bool) -> Dict[str, Optional[Dict[int, np.ndarray]]]:
    """Each split's chosen images, read and prepared, by index (None for a streamed split: only its
    first chunk is read, for the set-level checks); every problem of the protocol, the listing's
    and the images', raised together before anything is built."""
    problems = list(listing.problems)
    prepared = {}
    for split in SPLITS:
        keep = sorted(set().union(*(chosen[p] for p, s, _, _ in PARTS if s == split)))
        images = _read_split(listing.splits[split], set(keep[:CHUNK] if stream else keep), spec, split, problems)
        prepared[split] = None if stream else dict(zip(keep, images)) if not problems else {}
    raise_problems(spec, problems)
    return prepared


def file_sources(spec: FileProtocolSpec, listing: Listing) -> Dict[str, Dict[str, object]]:
    """What the protocol was built from (``data.fingerprint``): each split list's content (its
    CSV files and class-name file), and the path, size and mtime of every image it lists."""
    lists = dict(spec.files)
    if spec.class_names is not None:
        lists["class names"] = spec.class_names
    sources = {f"split list {name}": file_fingerprint(path) for name, path in lists.items()}
    images = [item.path for items in listing.splits.values() for item in items]
    sources["images"] = listing_fingerprint(spec.root, images)
    return sources


def _role(label: int) -> str:
    return "known" if label >= 0 else "negative" if label == NEGATIVE else "unknown"


def _choose(listing: Listing, seed: int, limits: Dict) -> Tuple[Dict[str, List[int]], List[str]]:
    """Indices (into each split's items) of every part, capped by ``limits``."""
    chosen, notes = {}, []
    sources = {name: i for i, name in enumerate(listing.negative_class_names)}
    for part, split, role, key in PARTS:
        items = listing.splits[split]
        idx = np.array([i for i, item in enumerate(items) if _role(item.label) == role], np.int64)
        strata = np.array([items[i].label if role == "known" else sources.get(items[i].source, -1) for i in idx],
                          np.int64)
        keep = idx[stratified_subset(strata, limits.get(key), purpose_rng(seed, f"files/{part}"))]
        if len(keep) < len(idx):
            notes.append(f"{part}: subsampled {len(idx)} -> {len(keep)} ({key}, class-stratified, seed {seed})")
        chosen[part] = keep.tolist()
    return chosen, notes


def _split(name: str, idx: Sequence[int], items: List[Item], images: Optional[Dict[int, np.ndarray]],
           spec: FileProtocolSpec, sources: Optional[Dict[str, int]]) -> ProtocolSplit:
    """The split of the items ``idx``; ``images`` None: streamed (their files, read on demand)."""
    idx = sorted(idx)
    labels = np.array([max(items[i].label, NEGATIVE) for i in idx], np.int64)  # unknowns (-2) are -1 here
    negative_class = None
    if sources is not None:
        negative_class = np.array([sources[items[i].source] if items[i].label == NEGATIVE else -1 for i in idx],
                                  np.int64)
    if images is None:
        stacked = ImageFiles([items[i].path for i in idx], spec.input)
    else:
        stacked = np.stack([images[i] for i in idx]) if idx else np.zeros((0, *spec.input.shape), np.uint8)
    return ProtocolSplit(name, stacked, labels, negative_class)


# The two unknown sets of every protocol from files: the test negatives (classes trained as
# negatives, D_b) and the test unknowns (classes never seen in training, D_a).
declare_unknown_sets(UnknownSet("negatives", "the protocol's test negatives", known_unknowns=True),
                     UnknownSet("unknowns", "the protocol's test unknowns"))


def _assemble(spec: FileProtocolSpec, listing: Listing, chosen, prepared, notes: List[str]) -> OpenSetProtocol:
    names = listing.negative_class_names
    sources = {n: i for i, n in enumerate(names)} if names else None

    def split(name, split_name, *parts, with_sources=True):
        idx = [i for p in parts for i in chosen[p]]
        return _split(name, idx, listing.splits[split_name], prepared[split_name], spec,
                      sources if with_sources else None)

    unknowns = {"negatives": split("negatives", "test", "test-negative"),
                "unknowns": split("unknowns", "test", "test-unknown", with_sources=False)}
    unknowns = {k: v for k, v in unknowns.items() if len(v)}
    protocol = OpenSetProtocol(f"{spec.type}:{spec.root}", len(listing.class_names), spec.input.shape,
                               split("train", "train", "train-known", "train-negative"),
                               split("val", "val", "val-known", "val-negative"),
                               split("known", "test", "test-known"), unknowns, [], list(listing.class_names),
                               list(names))
    protocol.notes = describe(spec, listing, protocol) + notes
    return protocol


def describe(spec: FileProtocolSpec, listing: Listing, protocol: OpenSetProtocol) -> List[str]:
    """Notes for the report: the sets, the class names (shortened) and the preparation."""
    def some(names: Sequence[str]) -> str:
        return ", ".join(names[:30]) + (f", ... ({len(names) - 30} more)" if len(names) > 30 else "")

    sizes = protocol.sizes()
    notes = [_title(spec),
             f"known classes D_c ({protocol.num_classes}): {some(listing.class_names)}"]
    if spec.type != "csv":
        notes.append(f"negatives D_b' / D_b ({len(spec.negative)}): {some(sorted(set(spec.negative))) or 'none'}; "
                     f"unknowns D_a, test only ({len(spec.unknown)}): {some(list(spec.unknown)) or 'none'}")
    elif listing.negative_class_names:
        notes.append(f"negatives' source classes ({len(listing.negative_class_names)}): "
                     f"{some(listing.negative_class_names)}")
    notes.append(f"train: {sizes['train']['known']} knowns + {sizes['train']['unknown']} negatives (D_b'); "
                 f"val: {sizes['val']['known']} + {sizes['val']['unknown']}; test sets: known (D_c) "
                 f"{sizes['test_known']['known']}, " + ", ".join(
                     f"{k} ({'D_b' if k == 'negatives' else 'D_a'}) {len(v)}" for k, v in protocol.test_unknowns.items()))
    colour = "grey (BT.601 luma)" if spec.channels == 1 else "RGB"
    notes.append(f"images: {colour}, shorter side resized to {spec.image_size} (antialiased bilinear), centre "
                 f"crop {spec.image_size}x{spec.image_size}; kind {spec.kind}"
                 + ("; glyph polarity checked (white on black)" if spec.kind == "glyph" else ""))
    return notes


@dataclass(frozen=True)
class FileProtocol(ProtocolSpec):
    """The declaration of a protocol from files, like a registered protocol's
    (:func:`file_protocol_spec`): it reads no registered dataset and allows ``ours`` only."""

    mapping: Mapping[str, Any] = field(default_factory=dict)  # the config's ``protocol`` value
    files: Optional[FileProtocolSpec] = None                  # the checked mapping
    check_by_building = True  # its files are checked when it is built (the check pass)

    @property
    def what(self) -> str:
        return "a protocol from files"

    def config_value(self, base_dir) -> Dict[str, Any]:
        return resolve_paths(self.mapping, base_dir)

    def make(self, data_dir=None, seed: int = 0, preprocessing: str = OURS, data_loading: str = "memory",
             **limits) -> OpenSetProtocol:
        """:func:`build_file_protocol` (``data_dir`` unused: every path is in the mapping)."""
        self.check_preprocessing(preprocessing)
        return self.build(self.files, seed=seed, data_loading=data_loading, **limits)


def file_protocol_spec(mapping: Mapping[str, Any], where: str = "protocol") -> FileProtocol:
    """The declaration of the protocol a ``protocol:`` mapping describes (checked by
    :func:`parse_file_protocol`; no file is read)."""
    files = parse_file_protocol(mapping, where)
    return FileProtocol(f"{files.type}:{files.root}", build_file_protocol, files.input, mapping=dict(mapping),
                        files=files)
