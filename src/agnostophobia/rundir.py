"""The run directory as one object: every path of a run is named here, and nowhere else.

A run directory holds::

    config.yaml               the resolved configuration (+ approaches, seeds, budget), and the run's marker
    run_meta.json             what the command that trained it recorded (+ library versions), and the marker
    timings.json, wall_time.json, classes.json, data_notes.json, preprocessing_notes.json
                              what the training recorded beside run_meta.json
    data_sources.json         what the protocol was built from (checked when a command rebuilds its split)
    calibration.json          thresholds chosen on validation data (``calibrate``)
    data_fetched.json         the data files ``reproduce`` downloaded for the run
    detector_settings.json    the detector settings chosen on validation data (``tune-detectors``)
    metrics.json, report.md   every number of the run and its report (``evaluate``, ``reproduce``)
    comparison.json, comparison.md  every (approach, detector) ranked on validation data (``compare``)
    figures/                  the figures (``plot``)
    .undo/                    while ``evaluate`` writes: what it replaced, put back if it stops part-way
    data_split/               an imagefolder protocol's split: train.csv, val.csv, test.csv, class_names.txt
    seed<N>/<approach>/       one trained model: best.pt / last.pt (with the config it was trained
                              with), metrics.csv, outputs.npz, fit_outputs.npz, val_outputs.npz,
                              detector_scores.npz (+ detector_scores_config.npz when tuned),
                              fitted_detectors.npz, last_layer.npz

Readers take their paths from :class:`RunDir`; writers write through :meth:`RunDir.write`, the
one place that checks where a run's file may be written (the atomic write of
:mod:`agnostophobia._atomic` underneath). The layout is the one runs have always had: old
runs load unchanged. Whether a folder is a run at all is read from its records, never from these
names: config.yaml and run_meta.json carry the project's marker and the run's id
(``training.records.run_marker``; the check is ``training.records.is_run``, which reads them). A shared helper
(it imports only ``_atomic`` and ``errors``), so that every layer that reads or writes a run,
``data.fetch`` included, takes its paths from here.
"""
from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Tuple

from agnostophobia import _journal
from agnostophobia._atomic import atomic_write, check_replaceable
from agnostophobia._journal import UNDO, UNDO_DONE
from agnostophobia._runpath import RunTree, relative_parts
from agnostophobia.errors import AgnostophobiaError, RecordError

# ------------------------------------------------------------------- the run's own records
CONFIG = "config.yaml"
RUN_META = "run_meta.json"
CALIBRATION = "calibration.json"
TUNED_SETTINGS = "detector_settings.json"
TIMINGS = "timings.json"          # seconds of training per run, keyed by :meth:`RunDir.run_key`
WALL_TIME = "wall_time.json"      # the training's wall time (less than the runs' sum when they run concurrently)
CLASSES = "classes.json"          # the protocol's class names (and the negatives' source classes)
DATA_NOTES = "data_notes.json"    # what the data preparation said (cuts, substitutes, defects)
DATA_SOURCES = "data_sources.json"  # the fingerprint of each file the protocol was built from (data.fingerprint)
PREPROCESSING_NOTES = "preprocessing_notes.json"  # the authors' preparation's notes (preprocessing: authors)
METRICS = "metrics.json"          # every number of the run (evaluate, reproduce); ablate reads its steps'
DATA_FETCHED = "data_fetched.json"  # the data files fetched for the run (``data.fetch``)
REPORT = "report.md"
COMPARISON = "comparison.json"    # every (approach, detector) ranked on validation data (compare)
COMPARISON_TABLE = "comparison.md"  # the same ranking as a table
BENCHMARK = "benchmark.json"      # every approach x detector with intervals and tests (benchmark)
BENCHMARK_TABLE = "benchmark.md"  # the benchmark's report
LOCK = ".lock"                    # one command at a time (:mod:`agnostophobia._runlock`)
FIGURES = "figures"
SPLIT = "data_split"              # how a protocol split the user's images (imagefolder: the CSVs to reuse)
# ------------------------------------------------------------------ each model's files
BEST = "best.pt"
LAST = "last.pt"
HISTORY = "metrics.csv"           # the training's per-epoch losses and validation numbers
OUTPUTS = "outputs.npz"
FIT_OUTPUTS = "fit_outputs.npz"
VAL_OUTPUTS = "val_outputs.npz"
SCORES_FILE = "detector_scores.npz"
#: The scores with the config's detector settings, kept beside those with the chosen ones in a tuned run.
CONFIG_SCORES_FILE = "detector_scores_config.npz"
FITTED_FILE = "fitted_detectors.npz"
#: The network's last (logit) layer on F: weight, and bias where it has one (ViM, ReAct, ASH, SCALE read it).
LAST_LAYER = "last_layer.npz"
#: A fine-tuning approach's record of the network it started from (training.fine_tune).
FINE_TUNE_START = "fine_tune_start.json"

#: Every file name a run's top folder holds, and every file name of one of its model folders.
RECORDS = (CONFIG, RUN_META, CALIBRATION, TUNED_SETTINGS, TIMINGS, WALL_TIME, CLASSES, DATA_NOTES, DATA_SOURCES,
           PREPROCESSING_NOTES, METRICS, DATA_FETCHED, REPORT, COMPARISON, COMPARISON_TABLE, BENCHMARK,
           BENCHMARK_TABLE, LOCK)
MODEL_FILES = (BEST, LAST, HISTORY, OUTPUTS, FIT_OUTPUTS, VAL_OUTPUTS, SCORES_FILE, CONFIG_SCORES_FILE, FITTED_FILE,
               LAST_LAYER, FINE_TUNE_START)
#: The checkpoints a model folder holds, by the name a caller asks for.
CHECKPOINTS = {"best": BEST, "last": LAST}

#: A seed folder's name; N without leading zeros, so that no two folders name one seed.
SEED_FOLDER = re.compile(r"seed(0|[1-9][0-9]*)")
#: A model's name within its run (the keys of timings.json and of report fingerprints).
RUN_KEY = re.compile(rf"{SEED_FOLDER.pattern}/[A-Za-z0-9_.+-]+")


#: The longest name that becomes one component of a run's paths (a loss, detector, dataset, protocol
#: or unknown set): room for the prefixes and suffixes a file name adds, under the usual 255 bytes.
MAX_NAME_LENGTH = 100


def check_path_name(name, what: str) -> str:
    """Refuse (one line naming it) a ``name`` that becomes one component of a run's paths (an
    approach's folder, a set's figures and arrays) but could not be one: not a string, empty,
    ``.`` or ``..``, holding a path separator or a NUL, or over :data:`MAX_NAME_LENGTH`
    characters. Checked once where a name enters (a registry, an unknown set's file name), so
    that nothing is written under a name that escapes the run or cannot be written at all."""
    if not isinstance(name, str) or not name:
        raise AgnostophobiaError(f"{what} {name!r}: a name must be a non-empty string")
    separators = {"/", "\\", "\0", os.sep, os.altsep or "/"}
    if name in (".", "..") or any(sep in name for sep in separators):
        raise AgnostophobiaError(f"{what} {name!r}: a name becomes a file or folder name of a run, so it must be one "
                                 f"path component (no '/', '\\', NUL, and not '.' or '..')")
    if len(name) > MAX_NAME_LENGTH:
        raise AgnostophobiaError(f"{what} {name[:40]!r}...: a name becomes a file or folder name of a run, so it "
                                 f"must be at most {MAX_NAME_LENGTH} characters, has {len(name)}")
    return name


def _fail(path, what: str):
    raise RecordError(f"{path}: {what}")


def _within(root: str, path: str) -> bool:
    return os.path.commonpath([root, path]) == root


def seed_folder(seed: int) -> str:
    """``seed<N>``, the folder of one seed's models."""
    return f"seed{seed}"


@dataclass(frozen=True, order=True)
class ModelDir:
    """One trained model's folder, ``RUN/seed<N>/<approach>``: the paths of its files. Every
    model-file path is named here (a test checks that none is composed elsewhere)."""

    path: Path

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))

    @classmethod
    def at(cls, folder) -> "ModelDir":
        """The model folder ``folder``, given as a ``str``, a ``Path`` or already a ``ModelDir``:
        the one conversion, made where a public function takes a folder a user names (the
        library's own layers pass the ``ModelDir`` of :meth:`RunDir.model` or :meth:`RunDir.models`)."""
        return folder if isinstance(folder, ModelDir) else cls(folder)

    def __str__(self) -> str:
        return str(self.path)  # a message names the folder, as it did when it was a path

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def run(self) -> "RunDir":
        """The run this model folder lies in (``RUN`` of ``RUN/seed<N>/<approach>``)."""
        return RunDir(self.path.parent.parent)

    @property
    def approach(self) -> str:
        """The folder's name: the approach the model was trained with."""
        return self.path.name

    def sibling(self, approach: str) -> "ModelDir":
        """The model folder of ``approach`` trained with the same seed (a fine-tuning's start)."""
        return ModelDir(self.path.parent / approach)

    def file(self, name: str) -> Path:
        """The model's file ``name``, one of :data:`MODEL_FILES` (for code that picks the file)."""
        if name not in MODEL_FILES:
            raise ValueError(f"{name!r} is not a model file ({', '.join(MODEL_FILES)})")
        return self.path / name

    def checkpoint(self, which: str = "best") -> Path:
        """``best.pt`` or ``last.pt`` (``which``: ``"best"`` or ``"last"``)."""
        return self.path / CHECKPOINTS[which]

    best = property(lambda self: self.path / BEST, doc="the best-validation checkpoint, ``best.pt``")
    last = property(lambda self: self.path / LAST, doc="the last epoch's full-state checkpoint, ``last.pt``")
    history = property(lambda self: self.path / HISTORY, doc="the per-epoch history, ``metrics.csv``")
    outputs = property(lambda self: self.path / OUTPUTS, doc="the test sets' logits and features, ``outputs.npz``")
    fit_outputs = property(lambda self: self.path / FIT_OUTPUTS, doc="the training knowns' outputs detectors fit on")
    val_outputs = property(lambda self: self.path / VAL_OUTPUTS, doc="the validation split's outputs (calibration)")
    scores = property(lambda self: self.path / SCORES_FILE, doc="every detector's scores, ``detector_scores.npz``")
    config_scores = property(lambda self: self.path / CONFIG_SCORES_FILE,
                             doc="the scores with the config's detector settings in a tuned run")
    fitted = property(lambda self: self.path / FITTED_FILE, doc="the fitted detectors, ``fitted_detectors.npz``")
    last_layer = property(lambda self: self.path / LAST_LAYER, doc="the logit layer on F, ``last_layer.npz``")
    fine_tune_start = property(lambda self: self.path / FINE_TUNE_START,
                               doc="a fine-tuned model's record of its start, ``fine_tune_start.json``")


@dataclass(frozen=True)
class RunDir:
    """One run directory, ``root``: the paths of its records, models and figures, and the one
    way to write any of them (:meth:`write`)."""

    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def holding(cls, path) -> "RunDir":
        """The run whose file ``path`` is: ``RUN`` for ``RUN/seed<N>/<approach>/<name>`` (a model's
        file), else the file's folder (``RUN/<name>``)."""
        folder = Path(path).parent
        return cls(folder.parent.parent if SEED_FOLDER.fullmatch(folder.parent.name) else folder)

    # ------------------------------------------------------------------- records
    @property
    def config(self) -> Path:
        return self.root / CONFIG

    @property
    def run_meta(self) -> Path:
        return self.root / RUN_META

    @property
    def calibration(self) -> Path:
        return self.root / CALIBRATION

    @property
    def tuned_settings(self) -> Path:
        return self.root / TUNED_SETTINGS

    @property
    def timings(self) -> Path:
        return self.root / TIMINGS

    @property
    def wall_time(self) -> Path:
        return self.root / WALL_TIME

    @property
    def classes(self) -> Path:
        return self.root / CLASSES

    @property
    def data_notes(self) -> Path:
        return self.root / DATA_NOTES

    @property
    def data_sources(self) -> Path:
        return self.root / DATA_SOURCES

    @property
    def preprocessing_notes(self) -> Path:
        return self.root / PREPROCESSING_NOTES

    @property
    def data_fetched(self) -> Path:
        return self.root / DATA_FETCHED

    @property
    def metrics(self) -> Path:
        return self.root / METRICS

    @property
    def report(self) -> Path:
        return self.root / REPORT

    @property
    def comparison(self) -> Path:
        return self.root / COMPARISON

    @property
    def comparison_table(self) -> Path:
        return self.root / COMPARISON_TABLE

    @property
    def benchmark(self) -> Path:
        return self.root / BENCHMARK

    @property
    def benchmark_table(self) -> Path:
        return self.root / BENCHMARK_TABLE

    @property
    def figures(self) -> Path:
        return self.root / FIGURES

    @property
    def data_split(self) -> Path:
        return self.root / SPLIT

    # -------------------------------------------------------------------- models
    @staticmethod
    def run_key(seed: int, approach: str) -> str:
        """``seed<N>/<approach>``: one model's name within its run (timings, fingerprints, logs)."""
        return f"{seed_folder(seed)}/{approach}"

    def model_dir(self, seed: int, approach: str) -> Path:
        """The model folder's path (:meth:`model` gives the folder itself, which the layers pass)."""
        return self.root / seed_folder(seed) / approach

    def model(self, seed: int, approach: str) -> ModelDir:
        """The model folder of ``approach`` trained with ``seed``, naming its files."""
        return ModelDir(self.model_dir(seed, approach))

    def checkpoint(self, seed: int, approach: str, which: str = "best") -> Path:
        """The model's ``best.pt`` or ``last.pt`` (``which``: ``"best"`` or ``"last"``)."""
        return self.model(seed, approach).checkpoint(which)

    def outputs(self, seed: int, approach: str) -> Path:
        return self.model(seed, approach).outputs

    def last_checkpoints(self) -> List[Path]:
        """Every ``seed<N>/<approach>/last.pt`` (a training that was started)."""
        return sorted(self.root.glob(f"seed*/*/{LAST}"))

    def models(self) -> List[Tuple[int, str, ModelDir]]:
        """``(seed, approach, model)`` of every ``seed<N>/<approach>/outputs.npz``, checked:
        seed folders and model folders are real directories (not links), named ``seed<N>``
        (N without leading zeros, so no two name one seed): a link to another seed would count
        one model twice (a second seed with std 0)."""
        found = []
        for seed_dir in sorted(self.root.glob("seed*")):
            if not re.fullmatch(r"seed\d+", seed_dir.name) or not seed_dir.is_dir():
                continue
            if not SEED_FOLDER.fullmatch(seed_dir.name):
                _fail(seed_dir, "a seed folder is named seed<N> without leading zeros (seed0, seed1, ...)")
            for model_dir in sorted(seed_dir.iterdir()):
                if not (model_dir / OUTPUTS).exists():
                    continue
                for path in (seed_dir, model_dir, model_dir / OUTPUTS):
                    if path.is_symlink():
                        _fail(path, "is a symbolic link; a run's seeds and models must be its own folders and "
                                    "files, not links to others (which would count one model twice)")
                found.append((int(seed_dir.name[len("seed"):]), model_dir.name, ModelDir(model_dir)))
        return found

    # --------------------------------------------------------------------- writing
    def write(self, path, writer: Callable[[str], None]) -> None:
        """Write the run's file ``path`` atomically: ``writer(tmp_path)`` writes it whole, then it
        replaces ``path`` (:func:`agnostophobia._atomic.atomic_write`). Every writer of a run's
        files writes through here (or :meth:`open_in_place` for the lock), so that every check of
        where a run's file may be written is made in this one place (:meth:`check_writable`).
        Inside :meth:`all_or_nothing` the undo journal records the change first."""
        path = Path(path)
        self.check_writable(path)
        journal = _UNDO_OPEN.get(os.path.realpath(self.root))
        if journal is None:
            atomic_write(path, writer)
            return
        parts = relative_parts(self.root, path)
        kept = journal.before_replace(parts)

        def journaled(tmp: str) -> None:
            writer(tmp)
            journal.wrote(parts, tmp)  # recorded before the rename puts it in place
        try:
            atomic_write(path, journaled)
        except BaseException:
            if kept:  # the file did not change: nothing to put back (and no second name left on it)
                journal.forget_kept(parts)
            raise

    def open_in_place(self, path, flags: int, mode: int = 0o644) -> int:
        """``os.open`` of the run's file ``path`` for a write made in place (the lock), never
        following a link on the way or at the end (:meth:`RunTree.open
        <agnostophobia._runpath.RunTree.open>`); the opened file is checked again on its
        ``fstat``, so a link swapped in after the check is refused too, before a byte of it
        changes. Returns the descriptor."""
        path = Path(path)
        self.check_writable(path)
        fd = self.tree.open(relative_parts(self.root, os.path.abspath(path)), flags, mode)
        try:
            check_own_regular_file(path, os.fstat(fd))
        except BaseException:
            os.close(fd)
            raise
        return fd

    def check_writable(self, path: Path) -> None:
        """Every check of where a file of this run may be written, before anything is: ``path``
        is one of the run's files, reached through no link below the run folder (each folder on
        the way is opened without following one, :class:`~agnostophobia._runpath.RunTree`), and
        is (where it exists) the run's own regular file: not a symbolic link, not a FIFO or
        device, not hard-linked to another name (whose content a write in place would change too)."""
        parts = relative_parts(self.root, os.path.abspath(path))
        if not parts:
            raise RecordError(f"{path}: not a file of the run {self.root}")
        found = self.tree.lstat(parts)
        if found is not None:
            check_own_regular_file(path, found)

    @property
    def tree(self) -> RunTree:
        """The run's paths, reached without following a link below its folder."""
        return RunTree(self.root)

    def check_tree(self) -> int:
        """Refuse (one line naming it) a link, a FIFO, socket or device, or a file with a second
        name anywhere under the run, other than the kept versions of an unfinished command's
        undo journal. Returns how many entries it read."""
        allowed = set()
        for parts, found in self.tree.walk((UNDO,)):
            allowed.add((found.st_dev, found.st_ino))
        return self.tree.check_tree(skip=(UNDO, UNDO_DONE), allowed=allowed)

    def check_writable_all(self, paths) -> None:
        """:meth:`check_writable` of every path a command will write, before it writes the first:
        a refusal then leaves the run as it was. A folder (``figures``) is checked as the folder
        its files are written into, and each file it holds."""
        for path in map(Path, paths):
            if path.is_dir() and not path.is_symlink():
                self.check_writable(path / ".check")  # the folder stays within the run
                for held in sorted(path.iterdir()):
                    self.check_writable(held)
            elif path.name == FIGURES:  # a link in the folder's place, or a file: refused naming it
                self.check_writable(path / ".check")
            else:
                self.check_writable(path)

    # ------------------------------------------------------------- all or nothing
    @contextlib.contextmanager
    def all_or_nothing(self) -> Iterator[None]:
        """Every file the ``with`` block writes through :meth:`write` (in this process or one
        forked from it: a figure's) is put back as it was if the block fails: a command stopped
        part-way by a full disk, an error or Ctrl-C leaves the run's last good result byte for
        byte. Before a file is first replaced, the undo journal (:mod:`agnostophobia._journal`)
        records its size and hash and keeps its old version by a hard link under ``.undo/old/``
        (no copy: a full disk still allows it); a file new to the run is recorded as new, and
        what is written is recorded before it is renamed into place. Undoing is renames and
        removals of the recorded names only, each verified first. On success ``.undo`` is renamed
        away in one step, then removed. A command killed inside the block (SIGKILL, power loss)
        leaves ``.undo``: the next command that takes the run's lock undoes it first
        (:meth:`undo_unfinished`). Held under the run's exclusive lock."""
        self.undo_unfinished()
        key = os.path.realpath(self.root)
        journal = _journal.Journal(self.tree)
        journal.begin()
        _UNDO_OPEN[key] = journal
        try:
            yield
        except BaseException:
            _UNDO_OPEN.pop(key, None)
            self.undo_unfinished()
            raise
        _UNDO_OPEN.pop(key, None)
        self._drop_undo()

    def undo_unfinished(self) -> None:
        """Put back what a command stopped inside :meth:`all_or_nothing` changed (each kept
        version renamed back, each new file removed), after every step is verified against the
        journal; then drop the journal. A journal that does not verify is refused in one line,
        changing nothing (:class:`~agnostophobia._journal.UnverifiableJournal`). Safe to repeat."""
        _journal.undo_unfinished(self.tree)

    def _drop_undo(self) -> None:
        _journal.drop(self.tree)

    def own_files(self) -> List[Path]:
        """Every file this run holds or may come to hold: its records, and each model's files."""
        model_dirs = [model_dir for seed_dir in self.root.glob("seed*") if SEED_FOLDER.fullmatch(seed_dir.name)
                      and seed_dir.is_dir() for model_dir in seed_dir.iterdir() if model_dir.is_dir()]
        return [self.root / name for name in RECORDS] + [d / name for d in model_dirs for name in MODEL_FILES]

    def check_output(self, out, option: str = "--out") -> None:
        """Refuse (one line) an output path of a command reading this run that names one of the
        run's own files (:meth:`own_files`, its figures, its lock), however it is reached: by
        its path, through a link, or as a hard link to one. Nothing of the run is ever overwritten
        by a command's output. Nor is anything but a regular file or a new name (a FIFO, a device)."""
        check_replaceable(out, option)
        target = os.path.realpath(out)
        if any(_within(os.path.realpath(folder), target) for folder in (self.figures, self.data_split)):
            raise AgnostophobiaError(f"{option} {out}: is a file of the run {self.root}; write the output elsewhere")
        for own in self.own_files():
            if os.path.realpath(own) == target or (os.path.exists(out) and own.exists() and os.path.samefile(own, out)):
                raise AgnostophobiaError(f"{option} {out}: is the run's own {own.name} ({own}); "
                                         f"write the output elsewhere")


#: The undo journal of each run (by real path) whose :meth:`RunDir.all_or_nothing` block is open
#: in this process (a forked figure process inherits it).
_UNDO_OPEN: Dict[str, "_journal.Journal"] = {}

_LINK_REFUSED = ("refusing to write through a symbolic link: a command writes a run's files only where they are "
                 "the run's own regular files; remove the link and run the command again")


def check_own_regular_file(path, found: os.stat_result) -> None:
    """Refuse (one line naming ``path``) a run's file, as ``lstat``/``fstat`` ``found`` it, that a
    write must not change: a symbolic link, anything but a regular file, or a file with
    another hard link (a write in place, or a reader taking it for this model's own, would reach
    the other name's file too)."""
    if stat.S_ISLNK(found.st_mode):
        raise RecordError(f"{path}: {_LINK_REFUSED}")
    if not stat.S_ISREG(found.st_mode):
        raise RecordError(f"{path}: is not a regular file (a FIFO, socket, device or folder); a run's file must "
                          f"be a regular file; remove it and run the command again")
    if found.st_nlink > 1:
        raise RecordError(f"{path}: is hard-linked ({found.st_nlink} names share this file); a run's file must be "
                          f"its own, not another's (copy a run with `cp -r`, not hard links); remove the other "
                          f"names or copy the file, then run the command again")


def check_model_file(path) -> None:
    """Refuse (one line naming it) a model's file ``RUN/seed<N>/<approach>/NAME`` that is not the
    model's own: a symbolic link, or a hard link to the same-named file of another model of the
    run (read as this model's, it would give that model's thresholds and numbers). A file hard-linked
    only outside the run (a run copied with ``cp -al``) is read as it is."""
    path = Path(path)
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(found.st_mode):
        raise RecordError(f"{path}: is a symbolic link; a model's files must be its own, not links to another's "
                          f"(which would give that model's results as this one's)")
    if found.st_nlink > 1 and SEED_FOLDER.fullmatch(path.parent.parent.name):
        run = path.parent.parent.parent
        for other in run.glob(f"seed*/*/{path.name}"):
            if other.parent != path.parent and os.path.samefile(other, path):
                raise RecordError(f"{path}: is a hard link to {other}; a model's files must be its own (read as "
                                  f"this model's, it would give that model's results as this one's)")


def write_run_file(path, writer: Callable[[str], None]) -> None:
    """:meth:`RunDir.write` for a writer that holds only the file's path (a model's file, or a
    record at the top of the run)."""
    RunDir.holding(path).write(path, writer)
