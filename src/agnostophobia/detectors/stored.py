"""The scores of every applicable detector on one stored model, fitted once, kept on disk.

A run stores each trained model's per-sample outputs (``training.outputs``); metrics and
figures both read the detectors' scores through :func:`model_scores`, which fits each
fitted detector (k-NN, OpenMax) once on the model's own training knowns
(``fit_outputs.npz``), scores every split, and keeps the result beside the outputs in
``detector_scores.npz``. The file is reused while the outputs, the training outputs,
the detector settings and the package version are unchanged (a content fingerprint),
so a run's metrics and its figures show the same fitted detectors. The fingerprint holds each
detector's ``SCORE_SCALE`` too: scores kept before a scale changed are computed again.

What is kept per (detector, split) is what every open-set metric reads of an (N, C)
score matrix: the predicted class and its score; :meth:`ModelScores.scores` rebuilds an
equivalent matrix (:func:`~agnostophobia.detectors._base.scores_from_top`).

Applicability: a detector that ``reads_background_column`` applies to a network trained
with a background class only (the loss's ``background_class``; :func:`detector_applies`) and sees all C+1 logits;
every other detector applies to every network and sees its C known columns.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

import agnostophobia
from agnostophobia.losses import LOSSES, known_columns
from agnostophobia.errors import ConfigError
from agnostophobia.rundir import FIT_OUTPUTS, OUTPUTS, SCORES_FILE, ModelDir, RecordError, RunDir, write_run_file
from agnostophobia.settings import check_settings
from agnostophobia.training.outputs import load_fit_outputs, load_outputs
from agnostophobia.training.records import (RunRecords, read_detector_scores, read_fitted_detectors, read_run_config,
                                           read_tuned_settings)
from agnostophobia.training.trained import load_last_layer

from ._base import DETECTORS, Detector, build_detector, detector_applies, scores_from_top

_FORMAT = 1  # bump when the file's layout or the meaning of a stored value changes

Settings = Dict[str, Dict]


def detector_settings(config: Dict, where: str = "") -> Settings:
    """Settings per detector from a run's resolved config: ``detectors: {NAME: {setting:
    value}}`` for any registered detector, and the older top-level keys named like a detector
    (``openmax: {tail_size: 20, ...}``, ``knn: {k: 50}``), which mean the same;
    ``detectors.NAME`` wins where both set a key.

    Each value is checked against the :class:`~agnostophobia.settings.Setting` its detector
    declares, so settings that could not score are a :class:`ConfigError` naming the key path (``where`` prefixes it:
    ``budgets.cpu.``) before anything trains or is written."""
    nested = config.get("detectors") or {}
    if not isinstance(nested, dict):
        raise ConfigError(f"config key '{where}detectors': must be a mapping of detector name to settings, "
                          f"got {nested!r}")
    for name in nested:
        if name not in DETECTORS:
            raise ConfigError(f"config key '{where}detectors.{name}': no such detector; "
                              f"registered: {', '.join(DETECTORS.names())}")
    settings = {}
    for name in DETECTORS.names():
        merged = {}
        for path, values in ((f"{where}{name}", config.get(name)), (f"{where}detectors.{name}", nested.get(name))):
            if values is None:
                continue
            check_detector_settings(name, values, path)  # each value is checked alone: so is their union
            merged.update(values)
        if config.get(name) is not None or name in nested:
            settings[name] = merged
    return settings


@dataclass(frozen=True)
class RunSettings:
    """The detector settings a run's models score with, read and checked once
    (:func:`run_settings`, :func:`read_run_settings`) and passed whole to every reader: the
    config's (``config``: :func:`detector_settings` of ``config.yaml``) and those
    ``tune-detectors`` chose on validation data (``tuned``: ``{approach: {detector: {setting:
    value}}}`` from ``detector_settings.json``; {} when the run was never tuned), each value
    checked against its detector's declaration."""

    config: Settings = field(default_factory=dict)
    tuned: Dict[str, Settings] = field(default_factory=dict)
    target_fpr: Optional[float] = None  # the FPR tune-detectors chose at; None: never tuned
    tuned_split: str = "val"  # the split it chose on

    def for_approach(self, approach: str) -> Settings:
        """The settings the detectors of the ``approach`` model score with: the config's, each
        detector's overridden by what ``tune-detectors`` chose for that approach."""
        chosen = self.tuned.get(approach, {})
        return {**self.config, **{name: {**self.config.get(name, {}), **values} for name, values in chosen.items()}}


def run_settings(records: RunRecords) -> RunSettings:
    """The :class:`RunSettings` of the run whose records
    :func:`~agnostophobia.training.records.check_run` read (its ``config.yaml`` and
    ``detector_settings.json``); a value its detector refuses is a one-line
    :class:`ConfigError` naming the file and the key."""
    return _with_tuned(records.run_dir, config_settings(records), records.tuned)


def config_settings(records: RunRecords) -> Settings:
    """The ``config`` of :func:`run_settings` alone, for the reader that replaces the tuned
    choices rather than scoring with them (``tune-detectors``: a damaged choice it tunes again is
    repaired, not refused)."""
    return _config_settings(records.run_dir, records.config)


def read_run_settings(run_dir) -> RunSettings:
    """:func:`run_settings` of a run whose other records are not read (a classifier of one model,
    the figures, the report of a run just trained): its ``config.yaml`` (none: outputs stored by
    hand, the detectors' defaults) and ``detector_settings.json``, read and checked here."""
    settings = _config_settings(run_dir, read_run_config(run_dir, required=False))
    return _with_tuned(run_dir, settings, read_tuned_settings(run_dir))


def _config_settings(run_dir, config: Dict) -> Settings:
    try:
        return detector_settings(config)
    except ConfigError as exc:
        raise ConfigError(f"{RunDir(run_dir).config}: {exc}") from None


def _with_tuned(run_dir, settings: Settings, stored: Optional[Dict]) -> RunSettings:
    """``settings`` with the choices of ``stored`` (``detector_settings.json`` as its reader
    returns it), each checked against its detector's declaration."""
    if stored is None:
        return RunSettings(settings)
    try:
        for approach, detectors in stored["chosen"].items():
            for name, values in detectors.items():
                if name not in DETECTORS:
                    raise ConfigError(f"key 'chosen.{approach}.{name}': no such detector")
                check_detector_settings(name, values, f"chosen.{approach}.{name}")
    except ConfigError as exc:
        raise ConfigError(f"{RunDir(run_dir).tuned_settings}: {exc}") from None
    return RunSettings(settings, stored["chosen"], stored["target_fpr"], stored.get("split", "val"))


def check_detector_settings(name: str, values, where: str) -> None:
    """``values`` as the detector ``name`` declares them (:data:`~.Detector.SETTINGS`, which its
    constructor checks too, so nothing is built to find out); a :class:`ConfigError` naming
    ``where.key``."""
    if not isinstance(values, dict):
        raise ConfigError(f"config key {where!r}: must be a mapping of settings, got {values!r}")
    check_settings(DETECTORS.get(name).SETTINGS, values, where, f"detector {name!r}")


def applicable_detectors(approach: str) -> List[str]:
    """Registered detectors that apply to a network trained with the loss ``approach``."""
    return [name for name in DETECTORS.names() if detector_applies(name, approach)]


def detector_inputs(detector: Detector, logits: np.ndarray, num_classes: int) -> np.ndarray:
    """The logit columns ``detector`` reads: all (background class included) or the C known ones."""
    return logits if detector.reads_background_column else logits[:, :num_classes]


#: How the note of a detector that does not apply to a model begins (:class:`NotApplicable`).
NOT_APPLICABLE = "not applicable: "


@dataclass
class ModelScores:
    """Every applicable detector's scores on every split of one trained model."""

    num_classes: int
    labels: Dict[str, np.ndarray]                                   # split -> (N,)
    top: Dict[str, Dict[str, Tuple[np.ndarray, np.ndarray]]]        # detector -> split -> (predicted, score)
    notes: Dict[str, str] = field(default_factory=dict)             # detector -> why it was not evaluated
    fingerprint: str = ""                                           # of the files and settings scored

    def without(self, splits) -> "ModelScores":
        """These scores less the ``splits`` named (to be scored again: a replaced set)."""
        keep = lambda mapping: {s: v for s, v in mapping.items() if s not in splits}  # noqa: E731
        return ModelScores(self.num_classes, keep(self.labels), {d: keep(t) for d, t in self.top.items()},
                           dict(self.notes), self.fingerprint)

    @property
    def detectors(self) -> List[str]:
        return list(self.top)

    @property
    def not_applicable(self) -> Dict[str, str]:
        """Detector -> why it does not apply to this model (:class:`NotApplicable`'s notes)."""
        return {name: note[len(NOT_APPLICABLE):] for name, note in self.notes.items()
                if note.startswith(NOT_APPLICABLE)}

    @property
    def unknown_sets(self) -> List[str]:
        return [split for split in self.labels if split != "known"]

    def scores(self, detector: str, split: str) -> np.ndarray:
        """(N, C) scores of ``detector`` on ``split`` (arg-max and maximum as computed)."""
        predicted, score = self.top[detector][split]
        return scores_from_top(predicted, score, self.num_classes)

    def known_vs_unknown(self, detector: str, unknown: str) -> Tuple[np.ndarray, np.ndarray]:
        """Scores (N, C) and labels (N,) of D_c followed by one unknown set (labels -1)."""
        scores = np.concatenate([self.scores(detector, "known"), self.scores(detector, unknown)])
        labels = np.concatenate([self.labels["known"], np.full(len(self.labels[unknown]), -1, dtype=np.int64)])
        return scores, labels


class NotFitted(ValueError):
    """A fitted detector that cannot be fitted on a model's stored training outputs."""

    @property
    def note(self) -> str:
        """What a report says in place of the detector's numbers."""
        return f"not evaluated: {self}"


class NotApplicable(NotFitted):
    """A detector that does not apply to this model (ViM where the features have no more
    dimensions than there are classes)."""

    @property
    def note(self) -> str:
        return f"{NOT_APPLICABLE}{self}"


class KeptFits:
    """The fitted detectors of one model, kept in its ``fitted_detectors.npz`` so that a run's
    detectors are fitted once: the metrics, the report's default-against-chosen table,
    ``evaluate --unknowns``, ``calibrate``, ``predict`` and ``export`` all restore the same fit.

    An entry is found by a digest of the package version, the detector, its settings, the
    number of known columns and the bytes of ``fit_outputs.npz``; it holds the detector's
    declared :attr:`~agnostophobia.detectors._base.Detector.FITTED_STATE` and a digest of those
    arrays. A file or entry that is damaged, stale or does not restore is ignored and the
    detector fitted anew (never trusted); entries of other training outputs are dropped when
    the file is next written. :meth:`save` writes once what was fitted (atomically; a
    read-only run is left as it is)."""

    def __init__(self, model: ModelDir):
        self.model = model
        self.path = model.fitted
        self._fit_path = model.fit_outputs
        self._fit_digest: Optional[str] = None
        self._entries: Optional[Dict[str, Dict]] = None
        self._new: Dict[str, Dict] = {}

    def fit_digest(self) -> str:
        if self._fit_digest is None:
            self._fit_digest = _file_digest(self._fit_path)
        return self._fit_digest

    def _key(self, detector: Detector, num_classes: int) -> str:
        # a fit on the last layer (ViM's principal space) is another fit when the layer differs
        layer = _state_digest({"weight": detector.weight_, "bias": detector.bias_}) \
            if detector.needs_last_layer and detector.weight_ is not None else None
        return hashlib.sha256(json.dumps([_FORMAT, agnostophobia.__version__, detector.name, detector.settings(),
                                          num_classes, self.fit_digest(), layer], sort_keys=True,
                                         default=str).encode()).hexdigest()[:32]

    def entries(self) -> Dict[str, Dict]:
        if self._entries is None:
            try:
                self._entries = read_fitted_detectors(self.path) if self.path.exists() else {}
            except RecordError:  # damaged: refitted, and the file rewritten whole
                self._entries = {}
        return self._entries

    def restore(self, detector: Detector, num_classes: int) -> Optional[Detector]:
        """``detector`` as it was fitted on these training outputs, or None (not kept, or not whole)."""
        entry = self.entries().get(self._key(detector, num_classes))
        if entry is None or entry["meta"].get("detector") != detector.name \
                or entry["meta"].get("digest") != _state_digest(entry["state"]):
            return None
        try:
            return detector.restore_fitted_state(entry["state"])
        except ValueError:
            return None

    def keep(self, detector: Detector, num_classes: int) -> None:
        state = detector.fitted_state()
        if not state or any(value.dtype == object for value in state.values()):
            return  # nothing worth keeping (k-NN), or not storable as plain arrays
        self._new[self._key(detector, num_classes)] = {
            "meta": {"detector": detector.name, "settings": detector.settings(), "fit": self.fit_digest(),
                     "digest": _state_digest(state)}, "state": state}

    def save(self) -> None:
        if not self._new:
            return
        fit = self.fit_digest()
        entries = {key: entry for key, entry in self.entries().items() if entry["meta"].get("fit") == fit}
        entries.update(self._new)
        arrays = {}
        for key, entry in entries.items():
            arrays[f"{key}__meta"] = np.array(json.dumps(entry["meta"], sort_keys=True, default=str))
            arrays.update({f"{key}__{name}": value for name, value in entry["state"].items()})

        def write(tmp: str) -> None:
            with open(tmp, "wb") as handle:
                np.savez(handle, **arrays)

        try:
            write_run_file(self.path, write)
        except OSError:  # a read-only run: fitted again next time
            return
        self._entries, self._new = entries, {}


def _state_digest(state: Dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(state):
        value = np.ascontiguousarray(state[name])
        digest.update(json.dumps([name, value.dtype.str, value.shape]).encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    hash_file(digest, path)
    return digest.hexdigest()


def hash_file(digest, path: Path) -> None:
    """Feed the bytes of ``path`` (nothing when it does not exist) to ``digest``."""
    if path.exists():
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)


def fitted_detector(name: str, fit_outputs: Optional[Dict[str, np.ndarray]], num_classes: int,
                    settings: Optional[Settings] = None, kept: Optional[KeptFits] = None,
                    model_dir: Optional[ModelDir] = None) -> Detector:
    """The detector ``name`` with the run's ``settings``, fitted on the model's own training
    knowns (``fit_outputs.npz``) when it learns from them; :class:`NotFitted` says why not
    (:class:`NotApplicable` where it does not apply to the model).
    ``kept``: the model's kept fits (:class:`KeptFits`, of the model whose ``fit_outputs`` these
    are): restored from there when kept, else fitted and added (written by ``kept.save()``).
    A detector that ``needs_last_layer`` is given the known-class rows of the model's logit layer
    (``last_layer.npz`` of ``model_dir``, or of ``kept``'s model; an older run's from ``best.pt``)."""
    detector = build_detector(name, **(settings or {}).get(name, {}))
    if fit_outputs is not None:
        why = detector.not_applicable(num_classes, fit_outputs["features"].shape[1])
        if why:
            raise NotApplicable(why)
    if detector.needs_last_layer:
        _give_last_layer(detector, model_dir or (kept.model if kept is not None else None), num_classes)
    if not detector.needs_fit:
        return detector
    if fit_outputs is None:
        raise NotFitted(f"no training outputs ({FIT_OUTPUTS}) are stored for this model")
    restored = kept.restore(detector, num_classes) if kept is not None else None
    if restored is not None:
        return restored
    try:
        detector.fit(fit_outputs["logits"][:, :num_classes], fit_outputs["features"], fit_outputs["labels"])
    except ValueError as exc:  # e.g. fewer correctly classified samples than OpenMax's tail size
        raise NotFitted(f"it could not be fitted: {exc}") from None
    if kept is not None:
        kept.keep(detector, num_classes)
    return detector


def _give_last_layer(detector: Detector, model_dir: Optional[ModelDir], num_classes: int) -> None:
    """The model's logit layer, its C known-class rows, handed to ``detector``; :class:`NotFitted`
    (one line) where the model has none to give."""
    if model_dir is None:
        raise NotFitted("it reads the network's last layer, and no model directory was given to read it from")
    layer, why = load_last_layer(model_dir)
    if layer is None:
        raise NotFitted(why)
    try:
        detector.use_last_layer(layer["weight"][:num_classes],
                                layer["bias"][:num_classes] if "bias" in layer else None)
    except ValueError as exc:
        raise NotFitted(f"its last layer does not fit this model: {exc}") from None


def top_scores(detector: Detector, outputs: Dict[str, np.ndarray], num_classes: int) -> Tuple[np.ndarray, np.ndarray]:
    """``(predicted class, its score)`` per sample of one split's stored outputs: the
    per-sample score every threshold acts on."""
    scores = detector.scores(detector_inputs(detector, outputs["logits"], num_classes), outputs["features"])
    predicted = scores.argmax(axis=1)
    return predicted, scores[np.arange(len(predicted)), predicted]


def score_outputs(outputs: Dict[str, Dict[str, np.ndarray]], fit_outputs: Optional[Dict[str, np.ndarray]],
                  approach: str, settings: Optional[Settings] = None, kept: Optional[KeptFits] = None,
                  only: Optional[Sequence[str]] = None) -> ModelScores:
    """Fit (once) and run every applicable detector (or those of ``only``) on stored outputs;
    see :func:`model_scores`. ``kept``: the model's kept fits (:class:`KeptFits`), restored
    from and added to (:func:`score_new_splits` keeps an earlier cache's splits)."""
    settings = settings or {}
    num_classes = known_columns(approach, next(iter(outputs.values()))["logits"].shape[1])
    top: Dict[str, Dict[str, Tuple[np.ndarray, np.ndarray]]] = {}
    notes: Dict[str, str] = {}
    for name in applicable_detectors(approach) if only is None else only:
        try:
            detector = fitted_detector(name, fit_outputs, num_classes, settings, kept)
        except NotFitted as exc:
            notes[name] = exc.note
            continue
        top[name] = {split: top_scores(detector, data, num_classes) for split, data in outputs.items()}
    labels = {split: np.asarray(data["labels"], dtype=np.int64) for split, data in outputs.items()}
    return ModelScores(num_classes, labels, top, notes)


def score_new_splits(outputs, fit_outputs, approach: str, settings: Settings, reuse: ModelScores,
                     fits: Optional[KeptFits]) -> ModelScores:
    """:func:`score_outputs` where ``reuse`` holds scores of these same detectors, settings and
    training outputs on some of the splits (an earlier cache): those are kept, only the other
    splits are scored, and a detector that scores nothing new is not fitted at all."""
    num_classes = known_columns(approach, next(iter(outputs.values()))["logits"].shape[1])
    top: Dict[str, Dict[str, Tuple[np.ndarray, np.ndarray]]] = {}
    notes: Dict[str, str] = {}
    for name in applicable_detectors(approach):
        if name in reuse.notes:  # it could not be fitted on these training outputs: it still cannot
            notes[name] = reuse.notes[name]
            continue
        kept = reuse.top.get(name, {})
        new = [split for split in outputs if split not in kept]
        detector = None
        if new:
            try:
                detector = fitted_detector(name, fit_outputs, num_classes, settings, fits)
            except NotFitted as exc:
                notes[name] = exc.note
                continue
        top[name] = {split: kept[split] if split in kept else top_scores(detector, data, num_classes)
                     for split, data in outputs.items()}
    labels = {split: np.asarray(data["labels"], dtype=np.int64) for split, data in outputs.items()}
    return ModelScores(num_classes, labels, top, notes)


def stored_model_scores(model_dir: Union[str, Path, ModelDir], approach: str, settings: Optional[Settings] = None,
                        file: str = SCORES_FILE) -> Optional[ModelScores]:
    """The scores ``file`` (``detector_scores.npz``) holds when they are those of the model's
    present outputs and these settings; None otherwise. Nothing is computed."""
    model = ModelDir.at(model_dir)
    fingerprint = _fingerprint(model, LOSSES.get(approach).background_class, settings or {})
    return _read(model.file(file), fingerprint)


def model_scores(model_dir: Union[str, Path, ModelDir], approach: str, settings: Optional[Settings] = None,
                 reuse: Optional[ModelScores] = None, file: str = SCORES_FILE) -> ModelScores:
    """The detectors' scores of the model stored in ``model_dir`` (trained as ``approach``; its
    folder as a path, or the ``rundir.ModelDir`` of ``RunDir.model``),
    read from ``file`` (``detector_scores.npz``; a tuned run's report keeps the scores with
    the config's settings in ``detector_scores_config.npz``) when it matches, else computed
    with the model's kept fits (:class:`KeptFits`) and written there.

    ``reuse``: :func:`stored_model_scores` taken before splits were added to (or replaced in)
    ``outputs.npz``, less the replaced splits (:meth:`ModelScores.without`): only the splits
    it lacks are scored (``evaluate --unknowns``)."""
    model = ModelDir.at(model_dir)
    settings = settings or {}
    background_class = LOSSES.get(approach).background_class
    fingerprint = _fingerprint(model, background_class, settings)
    path = model.file(file)
    cached = _read(path, fingerprint)
    if cached is not None:
        return cached
    fits = KeptFits(model)
    outputs, fit_outputs = load_outputs(model.outputs), load_fit_outputs(model)
    result = score_outputs(outputs, fit_outputs, approach, settings, kept=fits) if reuse is None else \
        score_new_splits(outputs, fit_outputs, approach, settings, reuse, fits)
    fits.save()
    result.fingerprint = fingerprint
    try:
        _write(path, fingerprint, result)
    except OSError:  # a read-only run: the scores are recomputed next time
        pass
    return result


def run_scores(run_dir) -> Callable[[Union[str, Path, ModelDir], str], ModelScores]:
    """``scores_of(model_dir, approach)`` for the models of run ``run_dir``: each model's detector
    scores (:func:`model_scores`) with the settings the run scores it with (the config's, or those
    ``tune-detectors`` chose), read once, here: call it after any tuning, whose choices the
    records read before it do not hold."""
    scoring = read_run_settings(run_dir)
    return lambda model_dir, approach: model_scores(model_dir, approach, scoring.for_approach(approach))


def _fingerprint(model: ModelDir, background_class: bool, settings: Settings) -> str:
    digest = hashlib.sha256()
    # each detector's score scale: scores kept from before a scale changed (tie-free scores) are stale
    scales = {name: DETECTORS.get(name).SCORE_SCALE for name in DETECTORS.names()}
    digest.update(json.dumps([_FORMAT, agnostophobia.__version__, DETECTORS.names(), background_class,
                              settings, scales], sort_keys=True, default=str).encode())
    hash_model_files(digest, model, (OUTPUTS, FIT_OUTPUTS))
    return digest.hexdigest()


def hash_model_files(digest, model: ModelDir, names: Sequence[str]) -> None:
    """Feed each of the model's files ``names`` (its name, then its bytes; nothing for one that
    does not exist) to ``digest``."""
    for name in names:
        digest.update(name.encode())
        hash_file(digest, model.file(name))


def _write(path: Path, fingerprint: str, result: ModelScores) -> None:
    arrays = {"__fingerprint": np.array(fingerprint), "__num_classes": np.array(result.num_classes),
              "__notes": np.array(json.dumps(result.notes))}
    for split, labels in result.labels.items():
        arrays[f"labels__{split}"] = labels
    for detector, splits in result.top.items():
        for split, (predicted, score) in splits.items():
            arrays[f"{detector}__{split}__predicted"] = predicted
            arrays[f"{detector}__{split}__score"] = score

    def write(tmp: str) -> None:
        with open(tmp, "wb") as handle:  # a file object: np.savez would append ".npz" to a name
            np.savez(handle, **arrays)

    write_run_file(path, write)


def _read(path: Path, fingerprint: str) -> Optional[ModelScores]:
    """The stored scores when the file is valid (the records' reader checks it) and of these
    outputs and settings; None otherwise: a cache that is stale, damaged or foreign is
    recomputed, never trusted."""
    if not path.exists():
        return None
    try:
        stored = read_detector_scores(path)
    except RecordError:
        return None
    if stored["fingerprint"] != fingerprint:
        return None
    return ModelScores(stored["num_classes"], stored["labels"], stored["top"], stored["notes"], fingerprint)
