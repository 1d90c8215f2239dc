"""Open-set protocols described by files: a folder tree, or ``path,label`` CSV files.

A protocol names the paper's sets (Sec. 1, used throughout Sec. 5): known classes (D_c'
for training, D_c for testing), known unknowns or *negatives* (D_b' in training and
validation with label -1, D_b in testing) and unknown unknowns (D_a, test only).

``type: folders``
    ``ROOT/<split>/<class>/<image>`` for split = train, val, test, and three lists of
    class-folder names: ``known`` (class index = position in sorted order), ``negative``
    (D_b', D_b) and ``unknown`` (D_a, test only).
``type: csv``
    one file per split, ``path,label`` with image paths relative to ``root``: label >= 0
    a known class, -1 a negative, -2 an unknown (test only). This is the convention of
    openset-imagenet (Palechor, Bhoumik, Guenther, WACV 2023), so its protocol files work
    as they are: no header (a ``path,label`` header line is recognised), spaces after the
    comma allowed. An optional third column names a negative's source class (name or id);
    it is ignored on other lines. Optional ``class_names``: a file with one name per line;
    without it the known labels must be 0..K-1 for the K known labels of the train file.
    A path must stay under ``root`` (``../`` or an absolute path elsewhere is a problem)
    unless ``allow_outside_root: true``.
``type: imagefolder``
    one ``ROOT/<class>/<image>`` tree (torchvision's ImageFolder layout), not yet split, and the
    three lists of class-folder names; here a known class's index is its position in ``known``
    as the config lists it. Each known and negative class is split into train, val and test
    (seeded by the data seed, stratified by class, ``val_fraction`` / ``test_fraction``, paths
    sorted so every machine draws the same split); unknown classes are test only. The split is
    written to the run as CSV files of the ``csv`` type (:func:`split_tables`); ``split: DIR``
    reuses such a folder, read by the CSV reader.

In an experiment YAML the ``protocol`` key takes the mapping (:func:`parse_file_protocol`).
Every path in it is relative to the YAML file's directory; :func:`resolve_paths` makes
them absolute when the file is loaded, so a run's ``config.yaml`` resolves them from
anywhere. Images are decoded with :func:`~agnostophobia.data.formats.decode_image` and
prepared by :func:`~agnostophobia.data.preprocess.prepare_images` (shorter side resized,
centre-cropped to ``image_size``), the path every protocol's images take.

Before anything is built, one pass lists every problem of the protocol, each naming its
file or class (:func:`check_file_protocol`), leakage included: the same file (its real path)
in two splits, or twice in one split unless ``allow_duplicates: true``;
:func:`build_file_protocol` raises them as one :class:`DataError`. The test negatives and
test unknowns become two unknown test sets, ``negatives`` (D_b) and ``unknowns`` (D_a).

The package: ``spec`` (the mapping, :class:`FileProtocolSpec`), one reader per type
(``csv_files``, ``folders``, ``imagefolder``), ``check`` (the listing, leakage and the decoding
pass) and ``build`` (the protocol and its declaration, :class:`FileProtocol`). Every name is
importable from here.
"""
from __future__ import annotations

from agnostophobia.data.file_protocols.build import (PARTS, FileProtocol, build_file_protocol, describe,
                                                     file_protocol_spec, file_sources)
from agnostophobia.data.file_protocols.check import CHUNK, MAX_SHOWN, check_file_protocol, list_protocol, raise_problems
from agnostophobia.data.file_protocols.imagefolder import MIN_SPLIT_IMAGES, split_class, split_tables
from agnostophobia.data.file_protocols.spec import (CLASS_NAMES_FILE, COMMON_KEYS, MAX_CLASSES, NEGATIVE, PATH_KEYS,
                                                    SPLIT_FILES, SPLITS, TYPE_KEYS, TYPES, UNKNOWN, FileProtocolSpec,
                                                    Item, Listing, is_file_protocol, parse_file_protocol, resolve_paths)

__all__ = ["CHUNK", "CLASS_NAMES_FILE", "COMMON_KEYS", "FileProtocol", "FileProtocolSpec", "Item", "Listing",
           "MAX_CLASSES", "MAX_SHOWN", "MIN_SPLIT_IMAGES", "NEGATIVE", "PARTS", "PATH_KEYS", "SPLITS", "SPLIT_FILES",
           "TYPES", "TYPE_KEYS", "UNKNOWN", "build_file_protocol", "check_file_protocol", "describe",
           "file_protocol_spec", "file_sources", "is_file_protocol", "list_protocol", "parse_file_protocol",
           "raise_problems", "resolve_paths", "split_class", "split_tables"]
