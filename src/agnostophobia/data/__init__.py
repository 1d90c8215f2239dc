"""Datasets of the paper, their official downloads, and the open-set protocols.

- ``DATASETS`` / ``load_dataset(name, split, data_dir=None) -> DatasetSplit``: one split as
  stored (uint8 images, int64 labels 0..C-1, class names, source, notes).
- ``fetch(names, ...)`` / ``fetch_dataset``: verified, atomic download of the official files.
- ``check(names, data_dir)``: presence, counts, histograms, broken-file detection.
- ``PROTOCOLS`` / ``build_protocol(name, data_dir=None, seed=0, **limits) -> OpenSetProtocol``; ``name``
  may also be the mapping of a protocol from files (a folder tree or ``path,label`` CSV files,
  ``file_protocols``), whose problems ``check_file_protocol`` lists;
  ``hold_out_negative_classes(protocol, seed)``: its variant for cross-class calibration (Sec. 6).
- ``to_lenet`` / ``to_chw`` / ``rgb_to_grey``: model-input preprocessing (uint8).

The data directory: ``data_dir`` argument > ``$AGNOSTOPHOBIA_DATA`` > ``~/.cache/agnostophobia/data``.
See ``docs/data.md`` for layouts and conventions.
"""
from agnostophobia.data.check import check, check_dataset
from agnostophobia.data.datasets import (DATASETS, DatasetInfo, DatasetSplit, FINE_TO_COARSE, Resource,
                                         SplitUnavailable, load_dataset)
from agnostophobia.data.fetch import download, fetch, fetch_dataset
from agnostophobia.data.paths import cache_dir, data_dir
from agnostophobia.data.preprocess import border_mean, check_polarity, rgb_to_grey, to_chw, to_lenet
from agnostophobia.data.protocols import (PROTOCOLS, OpenSetProtocol, ProtocolSplit, build_protocol,
                                          hold_out_negative_classes, purpose_rng, split_negative_classes,
                                          stratified_split, stratified_subset)
from agnostophobia.data.file_protocols import build_file_protocol, check_file_protocol

__all__ = [
    "DATASETS", "DatasetInfo", "DatasetSplit", "FINE_TO_COARSE", "Resource", "SplitUnavailable", "load_dataset",
    "download", "fetch", "fetch_dataset", "check", "check_dataset", "cache_dir", "data_dir",
    "border_mean", "check_polarity", "rgb_to_grey", "to_chw", "to_lenet",
    "PROTOCOLS", "OpenSetProtocol", "ProtocolSplit", "build_protocol", "purpose_rng", "stratified_split",
    "stratified_subset", "split_negative_classes", "hold_out_negative_classes",
    "build_file_protocol", "check_file_protocol",
]
