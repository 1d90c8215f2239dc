"""The open-set protocols, found by name or described by files, and built.

``build_protocol(name, data_dir=None, seed=0, **limits)`` builds a registered protocol
(``PROTOCOLS``: the paper's, ``data.paper_protocols``) or, where ``name`` is a mapping, a
protocol from files (``data.file_protocols``). Either way it goes through the protocol's one
declaration, a :class:`~agnostophobia.data.protocol_types.ProtocolSpec`, and
:func:`protocol_spec` is the one place that tells a name from a mapping.

Layout: ``data.protocol_types`` (types, declarations, registry, sampling, cross-class
calibration) is below the builders, ``data.paper_protocols`` and ``data.file_protocols``;
this factory is above them. Every name this module exported before the split is still
importable from it.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from agnostophobia.errors import ConfigError
from agnostophobia.data.fetch import FetchedFile, require_datasets
from agnostophobia.data.file_protocols import file_protocol_spec, is_file_protocol
from agnostophobia.data.paper_protocols import (CIFAR10_KNOWN, CIFAR10_NEGATIVE, CIFAR10_SPLIT, CIFAR10_SPLIT_B,
                                                CIFAR10_UNKNOWN, CIFAR_DB_COARSE, cifar10_split_b_protocol,
                                                cifar10_split_protocol, cifar_protocol,
                                                lenet_protocol, mnist_notmnist_protocol)
from agnostophobia.data.osr_protocols import (OSR_CIFAR10_SPLITS, OSR_MNIST_SPLITS, osr_cifar10_protocol,
                                              osr_mnist_protocol)
from agnostophobia.data.paths import PathLike
from agnostophobia.data.preprocess import OURS, InputSpec
from agnostophobia.data.protocol_types import (HELD_OUT_NEGATIVES, LIMITS, PROTOCOLS, UNKNOWN_SETS, OpenSetProtocol,
                                               ProtocolSpec, check_limits, ProtocolSplit, UnknownSet, hold_out_negative_classes,
                                               purpose_rng, unknown_set,
                                               register_protocol, split_negative_classes, stratified_split,
                                               stratified_subset)
from agnostophobia._log import log_info

__all__ = [
    "PROTOCOLS", "ProtocolSpec", "register_protocol", "protocol_spec", "build_protocol", "check_limits", "LIMITS",
    "UNKNOWN_SETS", "UnknownSet", "unknown_set",
    "check_preprocessing", "protocol_input", "require_protocol_data", "require_datasets", "FetchedFile",
    "OpenSetProtocol", "ProtocolSplit", "purpose_rng", "stratified_split", "stratified_subset",
    "HELD_OUT_NEGATIVES", "split_negative_classes", "hold_out_negative_classes",
    "lenet_protocol", "mnist_notmnist_protocol", "cifar_protocol", "cifar10_split_protocol", "cifar10_split_b_protocol",
    "osr_mnist_protocol", "osr_cifar10_protocol", "OSR_MNIST_SPLITS", "OSR_CIFAR10_SPLITS",
    "CIFAR_DB_COARSE", "CIFAR10_KNOWN", "CIFAR10_NEGATIVE", "CIFAR10_UNKNOWN", "CIFAR10_SPLIT", "CIFAR10_SPLIT_B",
]

def protocol_spec(protocol: Any, where: Optional[str] = None) -> ProtocolSpec:
    """The declaration of ``protocol``: a registered protocol's name, or the mapping of a
    protocol from files (as an experiment YAML and a run's config store it).

    ``where``: the config key ``protocol`` came from; a name that is not registered then
    raises a :class:`ConfigError` naming that key (else the registry's "unknown protocol").
    """
    if is_file_protocol(protocol):
        return file_protocol_spec(protocol, where or "protocol")
    if where is not None and not (isinstance(protocol, str) and protocol in PROTOCOLS):
        raise ConfigError(f"config key {where!r}: must be one of {PROTOCOLS.names()}, or a mapping describing "
                          f"a protocol from files, got {protocol!r}")
    return PROTOCOLS.get(protocol)


def build_protocol(name, data_dir: Optional[PathLike] = None, seed: int = 0, data_loading: str = "memory",
                   preprocessing: str = OURS, split: Optional[int] = None, **limits) -> OpenSetProtocol:
    """Build a registered protocol, or a protocol from files when ``name`` is a mapping
    (:func:`agnostophobia.data.file_protocols.build_file_protocol`).

    Args:
        name: a registered protocol (``lenet++``, ``cifar10``, ...; ``PROTOCOLS``), or the
            mapping of a protocol from files (as under ``protocol:`` in an experiment YAML).
        data_dir: the datasets' folder; default: as for :func:`data_dir` (unused by a protocol
            from files).
        seed: the data seed: the validation split and every subsample are drawn with it.
        data_loading: ``memory``, ``stream`` or ``auto``; applies to a protocol from files only,
            the registered protocols are always held in memory (``data.streaming``).
        preprocessing: ``ours`` (default) or ``authors``, the authors' data preparation
            (``data.preprocess``), where the protocol's declaration allows it (lenet++).
        split: which of its splits a protocol with splits builds (``osr-mnist``, ``osr-cifar10``:
            0-4, ``data.osr_protocols``); required there, refused for any other protocol.
        **limits: ``max_known_train``, ``max_unknown_train`` (training samples of D_c' and
            D_b'), ``max_val`` (cap on the held-out knowns and, separately, on the held-out
            known unknowns), ``max_test_per_set`` (cap on D_c and on every unknown test set);
            ``None`` keeps all. ``val_fraction`` (default 0.2) sets the hold-out size.

    Returns:
        The :class:`OpenSetProtocol`.

    Raises:
        ~agnostophobia.errors.ConfigError: an unknown protocol or a bad limit.
        ~agnostophobia.errors.DataError: a dataset it reads is missing or malformed.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import make_glyph_folders
        >>> folder = tempfile.TemporaryDirectory()
        >>> layout = make_glyph_folders(Path(folder.name) / "glyphs", per_split={"train": 6, "val": 2, "test": 2})
        >>> from agnostophobia.data import build_protocol
        >>> protocol = build_protocol(layout, max_known_train=9)  # a mapping: a protocol from files, capped
        >>> protocol.train.images.shape, sorted(protocol.test_unknowns)  # 9 knowns and the 6 negatives
        ((15, 1, 28, 28), ['negatives', 'unknowns'])
        >>> folder.cleanup()
    """
    check_limits(limits, seed)
    spec = protocol_spec(name)
    spec.check_split(split, "split", required=True)
    chosen = {"split": int(split)} if spec.splits else {}
    return spec.make(data_dir=data_dir, seed=int(seed), preprocessing=preprocessing,
                     data_loading=data_loading, **chosen, **limits)


def check_preprocessing(protocol, preprocessing) -> None:
    """A :class:`ConfigError` naming the config key ``preprocessing`` unless ``protocol`` (a
    registered name, or the mapping of a protocol from files) can be prepared that way."""
    protocol_spec(protocol).check_preprocessing(preprocessing)


def protocol_input(protocol, preprocessing: str = OURS) -> InputSpec:
    """The :class:`InputSpec` a protocol prepares its images with: a registered protocol's
    name, or the mapping of a protocol from files (as a run's config stores it), prepared
    as ``preprocessing`` says. `evaluate` prepares a user's set with the same spec, so an
    evaluate-time set takes exactly the path the protocol's own sets took."""
    return protocol_spec(protocol).input_for(preprocessing)


def require_protocol_data(name, data_dir: Optional[PathLike] = None, fetch: bool = False,
                          allow_unverified: bool = False, progress: Optional[bool] = None,
                          log: Callable[[str], None] = log_info) -> List[FetchedFile]:
    """:func:`~agnostophobia.data.fetch.require_datasets` for the datasets a protocol reads
    (none for a protocol from files)."""
    return protocol_spec(name).require_data(data_dir, fetch=fetch, allow_unverified=allow_unverified,
                                            progress=progress, log=log)
