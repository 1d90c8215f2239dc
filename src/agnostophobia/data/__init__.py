"""Datasets of the paper, their official downloads, and the open-set protocols.

- ``DATASETS`` / ``load_dataset(name, split, data_dir=None) -> DatasetSplit``: one split as
  stored (uint8 images, int64 labels 0..C-1, class names, source, notes).
- ``fetch(names, ...)`` / ``fetch_dataset``: verified, atomic download of the official files, from
  where and how a ``Downloader`` says (a mirror, unverified files, a timeout, progress, a log).
- ``check(names, data_dir)``: presence, counts, histograms, broken-file detection.
- ``PROTOCOLS`` / ``build_protocol(name, data_dir=None, seed=0, **limits) -> OpenSetProtocol``; ``name``
  may also be the mapping of a protocol from files (a folder tree or ``path,label`` CSV files,
  ``file_protocols``), whose problems ``check_file_protocol`` lists;
  ``hold_out_negative_classes(protocol, seed)``: its variant for cross-class calibration (Sec. 6).
- ``make_glyph_folders(root, known, negative, unknown)`` / ``draw_glyph``: a small synthetic
  folder protocol of 28x28 glyphs, for examples and first tries (no download).
- ``to_lenet`` / ``to_chw`` / ``rgb_to_grey``: model-input preprocessing (uint8).

The data directory: ``data_dir`` argument > ``$AGNOSTOPHOBIA_DATA`` > ``~/.cache/agnostophobia/data``.
See ``docs/data.md`` for layouts and conventions.

Attributes are imported on first use: the command line imports this package to build its
parsers, and ``agnostophobia --help`` must not load numpy and everything below it.
"""
from __future__ import annotations

import sys
import types

from agnostophobia._lazy import lazy_attributes

_EXPORTS = {
    "check": "check", "check_dataset": "check",
    "DATASETS": "datasets", "DatasetInfo": "datasets", "DatasetSplit": "datasets", "FINE_TO_COARSE": "datasets",
    "Resource": "datasets", "SplitUnavailable": "datasets", "load_dataset": "datasets",
    "Downloader": "fetch", "download": "fetch", "fetch": "fetch", "fetch_dataset": "fetch",
    "cache_dir": "paths", "data_dir": "paths",
    "border_mean": "preprocess", "check_polarity": "preprocess", "rgb_to_grey": "preprocess", "to_chw": "preprocess",
    "to_lenet": "preprocess",
    "PROTOCOLS": "protocols", "OpenSetProtocol": "protocols", "ProtocolSplit": "protocols",
    "build_protocol": "protocols", "hold_out_negative_classes": "protocols", "purpose_rng": "protocols",
    "split_negative_classes": "protocols", "stratified_split": "protocols", "stratified_subset": "protocols",
    "build_file_protocol": "file_protocols", "check_file_protocol": "file_protocols",
    "GLYPH_SHAPES": "glyphs", "draw_glyph": "glyphs", "make_glyph_folders": "glyphs",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())


class _Package(types.ModuleType):
    """Python names an imported submodule on its package (``data.check``, ``data.fetch``); where a
    function exported here has that name, the package's attribute stays the function, as it was
    when this package imported everything at once."""

    def __setattr__(self, name, value):
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
