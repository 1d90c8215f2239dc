"""``agnostophobia calibrate RUN --fpr T``: a threshold on each trained model's score chosen on
the **validation** split alone (held-out knowns and held-out negatives, label -1), never on
test data, stored in ``RUN/calibration.json``.

Table 2 reads CCR at a fixed FPR by choosing the threshold on the test set itself (Sec. 4.3,
Eq. 3): an oracle no deployed system has. Here the threshold is the smallest whose FPR on
the validation negatives is at most T (:func:`agnostophobia.metrics.threshold_at_fpr`);
what it then gives on the test sets is in the report's section "At the threshold chosen on
validation data" (:func:`threshold_results`), beside the oracle.

``calibration.json``::

    {"format": 1, "rule": "...", "class_names": [...],
     "entries": [{"approach", "detector", "seed", "target_fpr", "threshold" (null: see "reason"),
                  "val_fpr", "val_ccr", "val_knowns", "val_negatives", "false_positives_allowed",
                  "detector_settings", "rule", "reason", "precision", "arithmetic", "score_scale"}, ...]}

One entry per (approach, detector, seed); calibrating again replaces the entries it
recomputes and keeps the others.

**The score's scale.** ``score_scale`` is the detector's ``SCORE_SCALE`` when the threshold was
chosen. The scores became tie-free in scale 2 (max-softmax is its log-odds, a saturating CDF goes
on past 0 and 1: :mod:`agnostophobia.detectors`), so a threshold recorded before (no
``score_scale``: scale 1) means something else on today's scores. ``predict``, ``export``,
:class:`~agnostophobia.deploy.OpenSetClassifier` and ``evaluate`` choose such a threshold again,
in memory, by the same rule at the entry's target FPR on the stored validation outputs, and say
so once (:func:`current_scale`, :func:`rechosen`); ``calibrate`` stores it.

**One deployment arithmetic.** A threshold is only valid for scores computed as the ones it
was chosen on: a score in bf16 differs from the same score in fp32 by far more than the gap
between neighbouring validation scores. Every deployed decision (``predict``,
:class:`~agnostophobia.deploy.OpenSetClassifier` by default, every exported file) computes
the network in fp32 and the score in float64 (:data:`DEPLOY_PRECISION`), whatever precision
the run trained in, and ``calibrate`` chooses thresholds on validation outputs in that
arithmetic, recorded in each entry (``precision``, ``arithmetic``). A consumer computing in
another precision (``OpenSetClassifier(precision="bf16")``) gets a threshold chosen again on
validation outputs in its own precision, never the stored one.

Validation outputs are stored at training time (``val_outputs.npz``: split "val" in the run's
precision and, for a run not trained in fp32, "val_fp32"); for a run trained before that, they
are computed from ``best.pt`` and the run's protocol, rebuilt with the run's config and data
seed, and stored (where the run may be written; else kept in memory).
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np

from agnostophobia._runlock import run_lock
from agnostophobia._validation import check_fpr, check_seed
from agnostophobia.detectors import DETECTORS, detector_applies
from agnostophobia.detectors.stored import (KeptFits, NotFitted, RunSettings, Settings, fitted_detector, model_scores,
                                            run_settings, top_scores)
from agnostophobia.detectors._base import scores_from_top
from agnostophobia.errors import AgnostophobiaError, AgnostophobiaWarning
from agnostophobia.losses import LOSSES, known_columns, trained_on_negatives
from agnostophobia.metrics import MIN_FALSE_POSITIVES, ccr_at_fpr, rates_at_threshold, threshold_at_fpr
from agnostophobia.metrics.rows import own_detector
from agnostophobia.training.outputs import SplitOutputs, load_fit_outputs, run_config
from agnostophobia.training import records
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.rundir import CALIBRATION, ModelDir, RunDir
from agnostophobia._log import log_info

from .best import best_detectors
from .request import ModelRequest
from .validation import (DEPLOY_PRECISION, Protocols, arithmetic, network_outputs,  # noqa: F401  (re-exported)
                         trained_precision, unused_flags_said, validation_outputs)

_FORMAT = 1
RULE = ("threshold = the smallest with FPR <= target on the validation negatives (label -1): just above the "
        "(k+1)-th highest negative score, k = floor(target x #negatives) false positives allowed; a sample is "
        "accepted as its predicted class when its score >= threshold, else 'unknown'; validation CCR counts the "
        "validation knowns classified correctly with score >= threshold; no test data is used")


# ----------------------------------------------------------------------- the run's models
def trained_models(run_dir: Path) -> List[Tuple[int, str, ModelDir]]:
    """``(seed, approach, model)`` of every trained model, in the run's order of approaches."""
    run_dir = Path(run_dir)
    models = records.run_models(run_dir)
    order = {name: i for i, name in enumerate(run_config(run_dir).get("approaches") or [])}
    return sorted(models, key=lambda m: (m[0], order.get(m[1], len(order)), m[1]))


def default_approach(run_dir: Path) -> str:
    """The run's first approach trained with negatives (the paper's point), else its first."""
    approaches = list(dict.fromkeys(approach for _, approach, _ in trained_models(run_dir)))
    with_negatives = trained_on_negatives(approaches)
    return (with_negatives or approaches)[0]


def default_detector(approach: str) -> str:
    """The score the paper thresholds ``approach`` with (as the report's Table 2 does): the one its
    loss declares (``default_detector``; e.g. energy for the energy-regularised loss), else softmax."""
    return own_detector(approach) or getattr(LOSSES.get(approach), "default_detector", "softmax") \
        if approach in LOSSES else "softmax"


def check_applicable(detector: str, approach: str, run_dir: Path) -> None:
    if not detector_applies(detector, approach):  # an unknown name: one line listing the registered ones
        raise AgnostophobiaError(f"{run_dir}: detector {detector!r} reads a background class, which the "
                                 f"{approach} model does not have; choose another --detector")


def resolve_model(run_dir: Path, approach: Optional[str] = None, detector: Optional[str] = None,
                  seed: int = 0) -> Tuple[ModelDir, str, str]:
    """``(model, approach, detector)`` of one trained model, defaults filled in; a
    one-line error naming what the run does not hold."""
    check_seed(seed, "seed", AgnostophobiaError)
    models = trained_models(run_dir)
    approach = approach or default_approach(run_dir)
    seeds = sorted(s for s, a, _ in models if a == approach)
    if not seeds:
        trained = ", ".join(dict.fromkeys(a for _, a, _ in models))
        raise AgnostophobiaError(f"{run_dir}: no trained approach {approach!r}; trained: {trained}")
    if seed not in seeds:
        raise AgnostophobiaError(f"{run_dir}: approach {approach!r} has no seed {seed}; trained seeds: "
                                 f"{', '.join(map(str, seeds))}")
    detector = detector or default_detector(approach)
    check_applicable(detector, approach, run_dir)
    return RunDir(run_dir).model(seed, approach), approach, detector


def check_target(fpr) -> float:
    return check_fpr(fpr, error=AgnostophobiaError)


@dataclass(frozen=True)
class ModelScore:
    """One model's score that a threshold is chosen on: the model (``approach``, ``seed``), the
    ``detector`` with the run's detector ``settings``, and what a fitted detector learns from
    (the model's ``fit_outputs``; ``kept``: its kept fits, :class:`KeptFits`)."""

    approach: str
    detector: str
    seed: int
    settings: Settings = field(default_factory=dict)
    fit_outputs: Optional[SplitOutputs] = None
    kept: Optional[KeptFits] = None

    @classmethod
    def stored(cls, model: ModelDir, seed: int, detector: str, settings: Settings) -> "ModelScore":
        """The score ``detector`` of the model in ``model`` (trained with ``seed``), fitted on its
        stored training outputs, with its kept fits."""
        return cls(model.approach, detector, seed, settings, load_fit_outputs(model), KeptFits(model))


def calibrate_model(val: SplitOutputs, score: ModelScore, fpr: float, precision: str = DEPLOY_PRECISION) -> Dict:
    """One entry of ``calibration.json``: the threshold on ``score`` (one model's detector) of the
    model's validation outputs ``val`` (computed with the network in ``precision``) that
    reaches FPR <= ``fpr`` on their negatives."""
    approach, detector_name, seed, settings, kept = score.approach, score.detector, score.seed, score.settings, \
        score.kept
    labels = np.asarray(val["labels"], np.int64)
    n_known, n_negative = int((labels >= 0).sum()), int((labels < 0).sum())
    entry = {"approach": approach, "detector": detector_name, "seed": seed, "target_fpr": fpr, "threshold": None,
             "val_fpr": None, "val_ccr": None, "val_knowns": n_known, "val_negatives": n_negative,
             "false_positives_allowed": None, "detector_settings": settings.get(detector_name, {}), "rule": RULE,
             "reason": None, "precision": precision, "arithmetic": arithmetic(precision),
             "score_scale": DETECTORS.get(detector_name).SCORE_SCALE}
    if n_negative == 0:
        return {**entry, "reason": "the validation split holds no negatives (label -1): this protocol validates "
                                   "without known unknowns, so no FPR can be measured on validation data"}
    if n_known == 0:
        return {**entry, "reason": "the validation split holds no knowns"}
    num_classes = known_columns(approach, val["logits"].shape[1])
    try:
        detector = fitted_detector(detector_name, score.fit_outputs, num_classes, settings, kept)
    except NotFitted as exc:
        return {**entry, "reason": f"detector {detector_name!r}: {exc}"}
    if kept is not None:
        kept.save()
    predicted, score = top_scores(detector, val, num_classes)
    point = threshold_at_fpr(scores_from_top(predicted, score, num_classes), labels, fpr)
    if point.allowed == 0:
        return {**entry, "reason": too_few_negatives(n_negative, fpr)}
    return {**entry, "threshold": point.threshold, "val_fpr": point.fpr, "val_ccr": point.ccr,
            "false_positives_allowed": point.allowed}


#: False positives the validation negatives should allow at the target: with fewer, the threshold is
#: the score of one of a handful of negatives, and the FPR it gives on new data varies widely
#: (the rule of :mod:`agnostophobia.metrics.resolution`).
ENOUGH_FALSE_POSITIVES = MIN_FALSE_POSITIVES


def negatives_needed(fpr: float, false_positives: int = 1) -> int:
    """Validation negatives that allow ``false_positives`` at FPR ``fpr``: ceil(k / fpr)."""
    return math.ceil(round(false_positives / fpr, 9))  # round: 1 / 0.1 is 10.000000000000002


def too_few_negatives(n_negative: int, fpr: float) -> str:
    """Why ``n_negative`` validation negatives give no threshold at ``fpr``: one false positive
    among them is already an FPR of 1/n."""
    return (f"the validation split holds {n_negative} negative(s): the smallest FPR they resolve is 1/{n_negative} = "
            f"{1 / n_negative:.3g}, above {fpr:g}; FPR {fpr:g} needs at least ceil(1/{fpr:g}) = "
            f"{negatives_needed(fpr)} validation negatives")


def _grouped(entries: List[Dict], why: Callable[[Dict], str]) -> str:
    """``models: why; models: why`` with the models that share a reason named together."""
    groups: Dict[str, List[str]] = {}
    for e in entries:
        groups.setdefault(why(e), []).append(f"{e['approach']}/{e['detector']} (seed {e['seed']})")
    return "; ".join(f"{', '.join(models)}: {reason}" for reason, models in groups.items())


def check_resolved(run_dir: Path, entries: List[Dict], fpr: float, written: bool = True, warn: bool = True) -> None:
    """A warning where a threshold rests on fewer than :data:`ENOUGH_FALSE_POSITIVES` allowed false
    positives (n x FPR < 10), and an error, one line, naming every model without a threshold and
    what became of the thresholds that resolve: ``written`` (``--partial``), or nothing written
    (``calibration.json`` left as it was) and what ``--partial`` would write."""
    few = [e for e in entries if e["threshold"] is not None and e["val_negatives"] * fpr < ENOUGH_FALSE_POSITIVES]
    if few and warn:
        warnings.warn(f"calibrate at FPR {fpr:g}: " + _grouped(few, lambda e: (
            f"the {e['val_negatives']} validation negatives allow {e['false_positives_allowed']} false positive(s), "
            f"fewer than {ENOUGH_FALSE_POSITIVES}, so the threshold rests on a handful of scores; "
            f"ceil({ENOUGH_FALSE_POSITIVES}/{fpr:g}) = {negatives_needed(fpr, ENOUGH_FALSE_POSITIVES)} "
            f"validation negatives would allow {ENOUGH_FALSE_POSITIVES}")), AgnostophobiaWarning, stacklevel=3)
    missing = [e for e in entries if e["threshold"] is None]
    if not missing:
        return
    resolved = [e for e in entries if e["threshold"] is not None]
    path = RunDir(run_dir).calibration
    if written:
        outcome = f"{len(resolved)} threshold(s) that resolve written to {path}"
    else:
        would = ", ".join(f"{e['approach']}/{e['detector']} (seed {e['seed']})" for e in resolved) or "nothing"
        outcome = (f"nothing written, {path.name} is as it was; --partial would write the {len(resolved)} "
                   f"threshold(s) that resolve: {would}")
    raise AgnostophobiaError(f"calibrate: no threshold at FPR {fpr:g} for " + _grouped(missing, lambda e: e["reason"])
                             + f" ({outcome})")


# ------------------------------------------------------------------------ calibration.json
def read_calibration(run_dir: Path) -> Optional[Dict]:
    """``RUN/calibration.json``, checked by the run records' reader, or None where there is none.

    Args:
        run_dir: the run directory.

    Returns:
        The file's content as a dict (one threshold entry per model), or None.

    Raises:
        ~agnostophobia.errors.AgnostophobiaError: a NaN or non-number threshold, a missing key:
            one line naming the file and the entry.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.deploy import read_calibration
        >>> with tempfile.TemporaryDirectory() as run:
        ...     print(read_calibration(Path(run)))  # a run that was never calibrated
        ...
        None
    """
    try:
        return records.read_calibration(run_dir)
    except records.RecordError as exc:
        raise AgnostophobiaError(f"{exc}; run `agnostophobia calibrate {run_dir} --fpr T` again") from None


def _key(entry: Dict) -> Tuple[str, str, int]:
    return entry["approach"], entry["detector"], entry["seed"]


def calibrate_models(request: ModelRequest, models: Iterable[Tuple[int, str, str]], settings: RunSettings,
                     log: Callable[[str], None] = log_info, warn: bool = False) -> Dict:
    """Calibrate ``(seed, approach, detector)`` models of ``request.run`` at ``request.fpr``, each
    scored with the run's detector ``settings``, and merge their entries into ``calibration.json``
    (written atomically, under the run's lock); validation outputs not stored are computed from
    ``request.data_dir`` on ``request.device`` (given where every one is stored, they are said to
    have no effect).

    Every entry is computed before anything is decided: where a model gets no threshold, nothing
    is written (:func:`check_resolved` says what ``partial`` would write) and the file keeps
    its working thresholds byte for byte. With ``partial`` the thresholds that resolve are
    written, and a model without one keeps its earlier entry (an entry saying why where it had
    none); the error naming the models without one follows."""
    run_dir, data_dir, device, partial = request.run, request.data_dir, request.device, request.partial
    fpr = check_target(request.fpr)
    protocols = Protocols(run_dir, data_dir, log)
    with unused_flags_said(request, "data_dir", "device"), run_lock(run_dir, create=False):
        calibration = read_calibration(run_dir) or {}
        entries = {_key(e): e for e in calibration.get("entries", [])}
        computed = []
        for seed, approach, detector in models:
            model = RunDir(run_dir).model(seed, approach)
            val = validation_outputs(model, protocols, device, log)  # in DEPLOY_PRECISION
            score = ModelScore.stored(model, seed, detector, settings.for_approach(approach))
            entry = calibrate_model(val, score, fpr)
            computed.append(entry)
            log(describe(entry))
        if not partial:
            check_resolved(run_dir, computed, fpr, written=False, warn=warn)  # all or nothing: refused before a write
        for entry in computed:
            if entry["threshold"] is not None or _key(entry) not in entries:  # never a working threshold lost
                entries[_key(entry)] = entry
        order = {approach: i for i, (_, approach, _) in enumerate(trained_models(run_dir))}
        calibration = {"format": _FORMAT, "rule": RULE,
                       "class_names": calibration.get("class_names") or class_names(run_dir, protocols),
                       "entries": sorted(entries.values(), key=lambda e: (e["seed"], order.get(e["approach"], -1),
                                                                          e["detector"]))}
        run = RunDir(run_dir)
        run.write(run.calibration, lambda tmp: Path(tmp).write_text(json.dumps(calibration, indent=1)))
    if partial:
        check_resolved(run_dir, computed, fpr, written=True, warn=warn)
    return calibration


def calibrate_run(request: ModelRequest, log: Callable[[str], None] = log_info) -> Path:
    """``agnostophobia calibrate``: every trained approach (or ``request.approaches``) and seed,
    each with its paper score (or ``request.detector``, on the models it applies to; or
    ``request.detector_of[approach]``, one detector per approach, as ``--detector best`` chooses
    them), at ``request.fpr``. Where every model resolves, the thresholds are written, in one
    write; where one does not, an :class:`~agnostophobia.errors.AgnostophobiaError` names it and
    nothing is written (``request.partial``: those that resolve are written first). An
    :class:`~agnostophobia.errors.AgnostophobiaWarning` names the models whose validation
    negatives allow fewer than 10 false positives at the FPR (:func:`check_resolved`).

    Args:
        request: the run and what to calibrate (:class:`~agnostophobia.deploy.request.ModelRequest`):
            ``fpr`` (required) is the target false-positive rate on the validation negatives, in
            (0, 1], each threshold the lowest with FPR <= ``fpr``; ``data_dir`` and ``device``
            serve where the run's validation outputs must be computed again. It chooses no one
            model (``seed``, ``approach``, ``precision``).
        log: receives one line per step (default: the package's logger, at INFO).

    Returns:
        The path of the written ``calibration.json``.

    Raises:
        ~agnostophobia.errors.AgnostophobiaError: an approach the run did not train, a
            ``detector`` that applies to none of the models, or a model without a threshold at
            ``fpr``, named; nothing is written (without ``partial``).

    Examples:
        >>> import contextlib, io, tempfile
        >>> from pathlib import Path
        >>> import yaml
        >>> from agnostophobia.cli import run_command
        >>> from agnostophobia.data import make_glyph_folders
        >>> folder = Path(tempfile.mkdtemp())  # a run of a small network on glyph folders, 20 negatives to validate on
        >>> layout = make_glyph_folders(folder / "glyphs", per_split={"train": 6, "val": 20, "test": 4})
        >>> config = {"name": "glyphs", "protocol": layout, "model": "mlp", "model_kwargs": {"hidden": [16]},
        ...           "approaches": ["entropic"], "epochs": 1, "batch_size": 8, "tensorboard": False}
        >>> _ = (folder / "glyphs.yaml").write_text(yaml.safe_dump(config))
        >>> with contextlib.redirect_stdout(io.StringIO()):  # the training's lines
        ...     run_command("train", folder / "glyphs.yaml", "--out", folder / "run", "--no-progress")
        >>> from agnostophobia.deploy import ModelRequest, calibrate_run
        >>> calibrate_run(ModelRequest(folder / "run", fpr=0.5), log=lambda line: None).name
        'calibration.json'
        >>> import shutil; shutil.rmtree(folder)  # the example leaves nothing behind
    """
    request.check_reads("calibrate_run", "approaches", "detector", "detector_of", "fpr", "data_dir", "device",
                        "partial")
    check_target(request.fpr)
    settings = run_settings(records.check_run(request.run))  # every record valid and in agreement, before a write
    request = best_detectors(request, log)  # detector "best": every choice made before anything is written
    run_dir, detector = request.run, request.detector
    models = trained_models(run_dir)
    trained = list(dict.fromkeys(a for _, a, _ in models))
    approaches = list(request.detector_of) if request.detector_of is not None else request.approaches
    for approach in approaches or ():
        if approach not in trained:
            raise AgnostophobiaError(f"{run_dir}: no trained approach {approach!r}; trained: {', '.join(trained)}")
    for name in ([detector] if detector is not None else []) + list((request.detector_of or {}).values()):
        DETECTORS.get(name)  # an unknown name: one line listing the registered ones
    wanted = (lambda approach: request.detector_of[approach]) if request.detector_of is not None else (
        lambda approach: detector or default_detector(approach))
    chosen = [(seed, approach, wanted(approach)) for seed, approach, _ in models
              if (not approaches or approach in approaches)
              and (detector is None or detector_applies(detector, approach))]
    if not chosen:
        raise AgnostophobiaError(f"{run_dir}: detector {detector!r} reads a background class, which none of the "
                                 f"models {', '.join(approaches or trained)} has; choose another --detector")
    calibrate_models(request, chosen, settings, log, warn=True)
    path = RunDir(run_dir).calibration
    log(f"calibration: {path}; `agnostophobia evaluate {run_dir}` adds what these thresholds give on the "
        f"test sets to the report")
    return path


def describe(entry: Dict) -> str:
    head = f"[seed {entry['seed']}] {entry['approach']} / {entry['detector']} at FPR <= {entry['target_fpr']:g}"
    if entry["threshold"] is None:
        return f"{head}: no threshold: {entry['reason']}"
    return (f"{head}: threshold {entry['threshold']:.6g} (validation: FPR {entry['val_fpr']:.4f} on "
            f"{entry['val_negatives']:,} negatives, CCR {entry['val_ccr']:.4f} on {entry['val_knowns']:,} knowns)")


def class_names(run_dir: Path, protocols: Protocols) -> List[str]:
    """The known classes' names: recorded in ``run_meta.json`` at training time, or from the
    run's rebuilt protocol for a run trained before they were."""
    meta = records.read_run_meta(run_dir) or {}
    if meta.get("class_names"):
        return list(meta["class_names"])
    _, _, model = trained_models(run_dir)[0]
    protocol = protocols.for_config(load_checkpoint(model.best)["config"])
    return list(protocol.class_names) or [str(c) for c in range(protocol.num_classes)]


def calibration_entry(run_dir: Path, approach: str, detector: str, seed: int) -> Dict:
    """The stored entry of one model and score in ``calibration.json``.

    Args:
        run_dir: the run directory.
        approach: the model's approach (its loss's name).
        detector: the score's registered detector name.
        seed: the model's seed.

    Returns:
        The entry (the threshold, its target FPR, the detector's settings, the class names, ...).

    Raises:
        ~agnostophobia.errors.AgnostophobiaError: there is no entry, or it has no threshold; the
            message says what to run.

    Examples:
        >>> import contextlib, io, tempfile
        >>> from pathlib import Path
        >>> import yaml
        >>> from agnostophobia.cli import run_command
        >>> from agnostophobia.data import make_glyph_folders
        >>> folder = Path(tempfile.mkdtemp())  # a run of a small network on glyph folders, 20 negatives to validate on
        >>> layout = make_glyph_folders(folder / "glyphs", per_split={"train": 6, "val": 20, "test": 4})
        >>> config = {"name": "glyphs", "protocol": layout, "model": "mlp", "model_kwargs": {"hidden": [16]},
        ...           "approaches": ["entropic"], "epochs": 1, "batch_size": 8, "tensorboard": False}
        >>> _ = (folder / "glyphs.yaml").write_text(yaml.safe_dump(config))
        >>> with contextlib.redirect_stdout(io.StringIO()):  # the training's lines
        ...     run_command("train", folder / "glyphs.yaml", "--out", folder / "run", "--no-progress")
        >>> from agnostophobia.deploy import ModelRequest, calibrate_run
        >>> calibrate_run(ModelRequest(folder / "run", fpr=0.5), log=lambda line: None).name
        'calibration.json'
        >>> from agnostophobia.deploy import calibration_entry
        >>> entry = calibration_entry(folder / "run", "entropic", "softmax", seed=0)
        >>> entry["target_fpr"], entry["val_negatives"], entry["false_positives_allowed"], entry["val_fpr"] <= 0.5
        (0.5, 20, 10, True)
        >>> import shutil; shutil.rmtree(folder)  # the example leaves nothing behind
    """
    calibration = read_calibration(run_dir)
    hint = (f"run `agnostophobia calibrate {run_dir} --fpr T --approach {approach} --detector {detector}` "
            f"(or pass --fpr T)")
    if calibration is None:
        raise AgnostophobiaError(f"{run_dir} has no {CALIBRATION}: no threshold was chosen on validation data yet; "
                                 f"{hint}")
    entry = next((e for e in calibration["entries"] if _key(e) == (approach, detector, seed)), None)
    if entry is None:
        raise AgnostophobiaError(f"{RunDir(run_dir).calibration} has no threshold for approach {approach!r}, detector "
                                 f"{detector!r}, seed {seed}; {hint}")
    check_threshold(entry, RunDir(run_dir).calibration)
    return {**entry, "class_names": calibration.get("class_names")}


def check_threshold(entry: Dict, source) -> None:
    if entry.get("threshold") is None:
        raise AgnostophobiaError(f"{source}: no threshold for {entry['approach']}/{entry['detector']} (seed "
                                 f"{entry['seed']}) at FPR {entry['target_fpr']:g}: {entry.get('reason')}")


def current_scale(entry: Dict) -> bool:
    """Whether ``entry``'s threshold was chosen on the scale its detector scores on today
    (``score_scale``; an entry without one was chosen on scale 1)."""
    return entry.get("score_scale", 1) == DETECTORS.get(entry["detector"]).SCORE_SCALE


def old_scale_note(entries: List[Dict], run_dir: Path) -> str:
    """One line on ``entries`` whose thresholds were chosen on an older score scale and have just been
    chosen again in memory (:func:`rechosen`)."""
    named = ", ".join(f"{e['approach']}/{e['detector']} (seed {e['seed']}, FPR <= {e['target_fpr']:g}: "
                      f"{e['threshold']:.6g})" for e in entries)
    changes = "; before ".join(dict.fromkeys(DETECTORS.get(e["detector"]).SCALE_CHANGE for e in entries))
    return (f"{RunDir(run_dir).calibration}: threshold(s) chosen on an older score scale, before {changes}; "
            f"chosen again by the same rule on the validation outputs at the same target FPR, in memory: {named}; "
            f"`agnostophobia calibrate {run_dir} --fpr T` stores them")


def rechosen(entry: Dict, run_dir: Path, settings: RunSettings, precision: Optional[str] = None, data_dir=None,
             device: Optional[str] = None) -> Dict:
    """``entry`` with its threshold chosen again in memory (:func:`calibrate_in_memory`: the stored
    validation outputs, else computed from ``best.pt``; the run's detector ``settings``) at its
    target FPR, with the network in ``precision`` (default: the entry's); nothing is written and
    nothing logged (the caller says it once: :func:`old_scale_note`)."""
    precision = precision or entry_precision(entry, RunDir(run_dir).model(entry["seed"], entry["approach"]))
    again = calibrate_in_memory(entry_request(entry, run_dir).but(precision=precision, data_dir=data_dir,
                                                                   device=device), settings, log=lambda line: None)
    return {**again, "class_names": entry.get("class_names") or again.get("class_names")}


def entry_precision(entry: Dict, model: ModelDir) -> str:
    """The network precision ``entry``'s threshold was chosen in: recorded, or (an entry from
    before that was recorded) the run's own, whose stored validation outputs it was chosen on."""
    return entry.get("precision") or trained_precision(load_checkpoint(model.best)["config"])


def entry_request(entry: Dict, run_dir) -> ModelRequest:
    """The request for the model of a calibration ``entry``, at its target FPR."""
    return ModelRequest(run_dir, approach=entry["approach"], detector=entry["detector"], seed=entry["seed"],
                        fpr=entry["target_fpr"], precision=entry.get("precision"))


def calibrate_in_memory(request: ModelRequest, settings: RunSettings, log: Callable[[str], None] = log_info) -> Dict:
    """The entry :func:`calibrate_models` would store for the one model ``request`` names in
    full (``approach``, ``detector``, ``seed``, ``fpr``), scored with the run's detector
    ``settings``, with the network in ``request.precision``, computed and returned without writing
    anything into the run (a read-only run, or a consumer computing in another precision than the
    stored threshold's)."""
    run_dir, approach, detector, seed = request.run, request.approach, request.detector, request.seed
    precision, data_dir, device = request.precision or DEPLOY_PRECISION, request.data_dir, request.device
    fpr = check_target(request.fpr)
    model = RunDir(run_dir).model(seed, approach)
    protocols = Protocols(run_dir, data_dir, log)
    val = validation_outputs(model, protocols, device, log, precision, store=False)
    score = ModelScore.stored(model, seed, detector, settings.for_approach(approach))
    entry = calibrate_model(val, score, fpr, precision)
    check_threshold(entry, f"{run_dir} (validation outputs in {precision})")
    stored = read_calibration(run_dir) or {}
    return {**entry, "class_names": stored.get("class_names") or class_names(run_dir, protocols)}


# ------------------------------------------------------------------ test sets at the thresholds
def threshold_results(run_dir: Path, settings: RunSettings,
                      log: Callable[[str], None] = log_info) -> Tuple[List[Dict], List[str]]:
    """Per (calibration entry, unknown set): the test CCR on D_c and the test FPR on the unknown
    set at the validation-chosen threshold (the detectors with the run's ``settings``), beside
    the oracle CCR at the target FPR read from the test set itself (Table 2's readout); and notes
    on entries without numbers. A threshold chosen on an older score scale is chosen again in
    memory (:func:`rechosen`), said once in a note and to ``log``."""
    calibration = read_calibration(run_dir)
    if calibration is None:
        return [], []
    rows, notes, scores, again = [], [], {}, []
    for entry in calibration["entries"]:
        approach, detector, seed = _key(entry)
        model = RunDir(run_dir).model(seed, approach)
        if not model.outputs.exists():
            notes.append(f"{approach}/{detector} (seed {seed}): the model is no longer in the run")
            continue
        if entry.get("threshold") is None:
            notes.append(f"{approach}/{detector} (seed {seed}) at FPR {entry['target_fpr']:g}: no threshold: "
                         f"{entry.get('reason')}")
            continue
        if detector in DETECTORS and not current_scale(entry):
            try:
                entry = rechosen(entry, run_dir, settings, device="cpu")
            except AgnostophobiaError as exc:
                notes.append(f"{approach}/{detector} (seed {seed}) at FPR {entry['target_fpr']:g}: its threshold was "
                             f"chosen on an older score scale and could not be chosen again ({exc}); run "
                             f"`agnostophobia calibrate {run_dir} --fpr {entry['target_fpr']:g}`")
                continue
            again.append(entry)
        if model not in scores:
            scores[model] = model_scores(model, approach, settings.for_approach(approach))
            stored_in = trained_precision(load_checkpoint(model.best)["config"])
            if stored_in != entry_precision(entry, model):
                notes.append(f"{approach} (seed {seed}): the thresholds were chosen on validation scores with the "
                             f"network in {entry_precision(entry, model)}, as deployed; the test rates beside them "
                             f"are read on the run's stored test outputs, computed in {stored_in}")
        stored = scores[model]
        if detector not in stored.top:
            notes.append(f"{approach}/{detector} (seed {seed}): {stored.notes.get(detector, 'not evaluated')}")
            continue
        for unknown in stored.unknown_sets:
            values, labels = stored.known_vs_unknown(detector, unknown)
            test_fpr, test_ccr = rates_at_threshold(values, labels, entry["threshold"])
            oracle = float(ccr_at_fpr(values, labels, entry["target_fpr"])[0])
            rows.append({"approach": approach, "detector": detector, "seed": seed, "target_fpr": entry["target_fpr"],
                         "unknowns": unknown, "threshold": entry["threshold"], "val_fpr": entry["val_fpr"],
                         "val_ccr": entry["val_ccr"], "test_fpr": test_fpr, "test_ccr": test_ccr,
                         "oracle_ccr": oracle if np.isfinite(oracle) else None,
                         "num_known": int((labels >= 0).sum()), "num_unknown": int((labels < 0).sum())})
    if again:
        notes.append(old_scale_note(again, run_dir))
        log(notes[-1])
    return rows, notes
