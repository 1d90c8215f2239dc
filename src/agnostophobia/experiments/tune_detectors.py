"""``agnostophobia tune-detectors RUN [--fpr T] [--detector D ...] [--approach A ...]``: each
detector's settings chosen on the run's validation data, never on test data.

Bisgin, Palechor, Suter & Günther (2024) choose a post-processor's settings by CCR at an FPR
on validation knowns and validation negatives. Here, for every trained model of the run:

1. each detector with a declared grid (:class:`~agnostophobia.detectors._base.Setting`; k of
   k-NN, tail size and alpha of OpenMax, tail size and cover threshold of EVM, the GPD tail
   fraction of PostMax) is fitted on the model's own training knowns (``fit_outputs.npz``) at
   every point of its grid, the config's other settings kept;
2. each point is scored on the stored validation split (``val_outputs.npz``, split ``val``:
   validation knowns and the negatives held out of training) by the CCR at ``--fpr``
   (Eq. 3, :func:`agnostophobia.metrics.ccr_at_fpr`), the mean over the run's seeds;
3. the best point per (approach, detector) is kept (ties: the config's setting, then the
   grid's order) in ``RUN/detector_settings.json``, written atomically under the run's lock,
   with every grid point's numbers and a digest of what they were computed from (the models'
   ``fit_outputs.npz``, ``val_outputs.npz`` and ``last_layer.npz``, the config's settings, the
   grid, the FPR, the detector's score scale and the package version). Tuned again with the same
   digest, an (approach, detector) keeps its grid's numbers instead of fitting every point again
   (a ``benchmark`` run again after its training finished, or with another ``--min-accuracy``),
   and so does one that got no setting (``untuned``: not applicable, or no grid point fitted).
   A point whose validation scores tie a known with a negative for more than
   :data:`~agnostophobia.metrics.TIE_FLAG` of the samples on some model
   (:func:`~agnostophobia.metrics.tied_share`) is chosen only where every point does: its CCR
   was decided partly by how ties were broken, not by the score (e.g. ASH-B on LeNet++'s 2-d
   features gives every sample without a positive entry one and the same score).

The detector matrix (``<approach>/<detector>`` rows of ``evaluate``/``reproduce``),
``calibrate``, ``predict`` and ``export`` then score with the chosen settings
(:meth:`~agnostophobia.detectors.stored.RunSettings.for_approach`); the paper's own rows of Table 2
(e.g. the softmax model's ``openmax``) are not tuned and keep the config's settings.
A run whose validation split holds no negatives (``mnist-notmnist``) is refused, and so is a
target FPR its validation negatives cannot support (FPR < 10/#negatives,
:mod:`agnostophobia.metrics.resolution`): the refusal names the number of negatives, the
smallest FPR they support and the supported values, before anything is fitted.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import agnostophobia
from agnostophobia._validation import check_fpr
from agnostophobia._runlock import run_lock
from agnostophobia.deploy.request import ModelRequest
from agnostophobia.detectors import DETECTORS
from agnostophobia.detectors._base import setting_grid
from agnostophobia.detectors.stored import (NotFitted, applicable_detectors, config_settings, detector_inputs,
                                            fitted_detector, hash_model_files, read_run_settings)
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.losses import known_columns
from agnostophobia.metrics import (DEFAULT_FPR, TIE_FLAG, ccr_at_fpr, default_fpr, supports_fpr,
                                   tied_share, unsupported_fpr_message)
from agnostophobia.metrics.resolution import negatives_for
from agnostophobia.metrics.rows import paper_rows
from agnostophobia.training.outputs import load_fit_outputs, validation_with_negatives
from agnostophobia.training.records import check_run, read_tuned_settings
from agnostophobia.rundir import FIT_OUTPUTS, LAST_LAYER, TUNED_SETTINGS, VAL_OUTPUTS, ModelDir, RunDir
from agnostophobia._log import log_info

_FORMAT = 1


def tunable_detectors() -> List[str]:
    """Registered detectors that declare a tuning grid."""
    return [name for name in DETECTORS.names() if setting_grid(name)]


def tune_detectors(request: ModelRequest, detectors: Optional[Sequence[str]] = None, processes: int = 1,
                   log: Callable[[str], None] = log_info) -> Dict:
    """Choose, store and return the settings (see the module docstring) of ``detectors``
    (default: every one that declares a grid) for the run ``request.run``'s approaches
    (``request.approaches``, default: all), by the validation CCR at ``request.fpr`` (default:
    :func:`~agnostophobia.metrics.default_fpr` of the fewest validation negatives of a model). Where a detector tuned
    gets no setting (no grid point fits every model, or reaches the FPR), nothing is written and an error says what would have been (``request.partial``: the
    settings chosen are written, and the detectors without one keep what the run held for
    them). ``processes``: approaches tuned at a time, each in its own process (the same choices
    as one after another)."""
    request.check_reads("tune_detectors", "approach", "approaches", "fpr", "partial")
    run_dir, approaches, partial = request.run, request.chosen_approaches(), request.partial
    if request.fpr is not None:
        check_fpr(request.fpr, error=AgnostophobiaError)
    records = check_run(run_dir, "tune")
    settings = config_settings(records)  # each grid point keeps the config's other settings
    models = _selected_models(run_dir, records.models, approaches)
    detectors = _selected_detectors(detectors)
    validation = {model_dir: _validation(model_dir) for _, _, model_dir in models}
    fpr = request.fpr
    if fpr is None:
        fpr = default_fpr(min(_negatives(val) for val in validation.values()))
        if fpr is None:  # the negatives support no FPR: refused below, at the default, without a line before
            fpr = DEFAULT_FPR
        else:
            log(f"target FPR {fpr:g}: the default" + ("" if fpr == DEFAULT_FPR else
                f", the smallest the validation negatives support ({DEFAULT_FPR:g} needs "
                f"{negatives_for(DEFAULT_FPR):,})"))
    check_supported_fpr(float(fpr), validation)
    chosen, candidates, untuned = {}, {}, []
    by_approach = {approach: [model_dir for _, a, model_dir in models if a == approach]
                   for approach in dict.fromkeys(approach for _, approach, _ in models)}
    inputs = {approach: _inputs_digests(approach, detectors, settings, float(fpr), dirs)
              for approach, dirs in by_approach.items()}
    kept = _kept_grids(records.tuned, inputs)
    # only what is left to fit: an approach with nothing left starts no process (a resumed benchmark)
    todo = {approach: [name for name in _tuned_on(approach, detectors) if name not in kept.get(approach, {})]
            for approach in by_approach}
    grids = _approach_grids_of(by_approach, todo, settings, float(fpr), processes, validation)
    outcomes: Dict[str, Dict[str, Dict]] = {}  # the detectors that got no setting, and why, for the next tuning
    for approach in by_approach:
        for name, (why, grid) in kept.get(approach, {}).items():
            if grid is not None:
                log(f"{approach}/{name}: the grid's validation numbers kept from the last tuning (the same models, "
                    f"validation outputs, settings and FPR)")
            grids[approach].append((name, why, grid))
        grids[approach].sort(key=lambda entry: detectors.index(entry[0]))
        for name, why, grid in grids[approach]:
            if why:  # no grid point could change that: say why, as the matrix does
                outcomes.setdefault(approach, {})[name] = {"digest": inputs[approach][name], "why": why, "grid": None}
                log(f"{approach}/{name}: not applicable ({why}); not tuned")
                continue
            best = _best(name, grid, settings.get(name, {}))
            candidates.setdefault(approach, {})[name] = grid
            if best is None:
                outcomes.setdefault(approach, {})[name] = {"digest": inputs[approach][name], "why": None, "grid": grid}
                untuned.append(f"{approach}/{name}")
                log(f"{approach}/{name}: no setting of its grid could be fitted on every model of the approach "
                    f"(why: the notes of `agnostophobia evaluate`); not tuned")
                continue
            chosen.setdefault(approach, {})[name] = best["settings"]
            passed = [g for g in grid if g["val_ccr"] is not None and g["val_ccr"] > best["val_ccr"]]
            log(f"{approach}/{name}: {_shown(best['settings'])} (validation CCR at FPR {fpr:g}: "
                f"{best['val_ccr']:.4f})" + (f"; passed over, their scores tie: {len(passed)} setting(s) up to "
                                             f"{max(g['val_ccr'] for g in passed):.4f}" if passed else ""))
    if untuned and not partial:  # all or nothing: the run's earlier choices are kept byte for byte
        would = ", ".join(f"{a}/{d}" for a, names in chosen.items() for d in names) or "nothing"
        raise AgnostophobiaError(f"tune-detectors at FPR {fpr:g}: no setting could be chosen for {', '.join(untuned)} "
                                 f"(nothing written, {TUNED_SETTINGS} is as it was; --partial would write the "
                                 f"settings chosen for: {would})")
    for key in untuned:  # --partial: a detector without a setting keeps what the run held for it
        approach, name = key.split("/", 1)
        candidates[approach].pop(name)
    return _store(run_dir, float(fpr), chosen, candidates, inputs, outcomes)


def _inputs_digests(approach: str, detectors: Sequence[str], settings: Dict, fpr: float,
                    model_dirs: List[ModelDir]) -> Dict[str, str]:
    """``{detector: digest}`` of what each of the approach's grids is computed from: the package
    version, the detector's score scale, its grid, the config's other settings, the FPR and the bytes
    of each model's training, validation and last-layer outputs (read once for every detector).
    Equal digests, equal numbers."""
    files = hashlib.sha256()
    for model_dir in model_dirs:
        hash_model_files(files, model_dir, (FIT_OUTPUTS, VAL_OUTPUTS, LAST_LAYER))
    return {name: hashlib.sha256(json.dumps(
        [_FORMAT, agnostophobia.__version__, approach, name, DETECTORS.get(name).SCORE_SCALE, setting_grid(name),
         settings.get(name, {}), fpr, files.hexdigest()], sort_keys=True, default=str).encode()).hexdigest()
        for name in detectors}


def _kept_grids(stored: Optional[Dict], inputs: Dict[str, Dict[str, str]]
                ) -> Dict[str, Dict[str, Tuple[Optional[str], Optional[List[Dict]]]]]:
    """What ``detector_settings.json`` holds for an (approach, detector) whose stored digest equals
    today's (``inputs``): ``{approach: {detector: (why not applicable, grid)}}``, from ``untuned``
    (not applicable, or no grid point fitted; the last outcome) or else ``candidates``; nothing from a
    file written before digests were kept."""
    if not stored:
        return {}
    kept: Dict[str, Dict[str, Tuple[Optional[str], Optional[List[Dict]]]]] = {}
    for approach, digests in inputs.items():
        for name, digest in digests.items():
            outcome = stored.get("untuned", {}).get(approach, {}).get(name)
            grid = stored.get("candidates", {}).get(approach, {}).get(name)
            if outcome is not None and outcome.get("digest") == digest:
                kept.setdefault(approach, {})[name] = (outcome.get("why"), outcome.get("grid"))
            elif grid is not None and stored.get("inputs", {}).get(approach, {}).get(name) == digest:
                kept.setdefault(approach, {})[name] = (None, grid)
    return kept


def _approach_grids_of(by_approach: Dict[str, List[Path]], detectors: Dict[str, List[str]], settings: Dict, fpr: float,
                       processes: int, validation: Dict[Path, Dict[str, np.ndarray]]
                       ) -> Dict[str, List[Tuple[str, Optional[str], Optional[List[Dict]]]]]:
    """:func:`approach_grids` of every approach: one after another (on the validation outputs
    already read), or ``processes`` approaches at a time in their own processes, each reading its
    own (the grids are independent; the fits are mostly single-threaded Python and numpy, so two
    processes use two cores where one would leave one idle). ``detectors``: those to tune, per approach."""
    busy = {approach: dirs for approach, dirs in by_approach.items() if detectors[approach]}
    grids: Dict[str, List] = {approach: [] for approach in by_approach}
    if processes <= 1 or len(busy) < 2:
        grids.update({approach: approach_grids(approach, dirs, detectors[approach], settings, fpr,
                                               {d: validation[d] for d in dirs})
                      for approach, dirs in busy.items()})
        return grids
    from agnostophobia.training.concurrent import Job, run_jobs, threads_per_run

    processes = min(processes, len(busy))
    jobs = [Job(approach, approach_grids, (approach, dirs, detectors[approach], settings, fpr))
            for approach, dirs in busy.items()]
    run_jobs(jobs, processes, threads_per_run(processes), on_start=lambda job: None,
             on_done=lambda job, result: grids.__setitem__(job.name, result))
    return grids


def approach_grids(approach: str, model_dirs: List[ModelDir], detectors: List[str], settings: Dict,
                   fpr: float, validation: Optional[Dict[Path, Dict[str, np.ndarray]]] = None
                   ) -> List[Tuple[str, Optional[str], Optional[List[Dict]]]]:
    """For each of ``detectors`` on ``approach``'s models: ``(name, why not applicable, None)``, or
    ``(name, None, grid)`` with every grid point's mean validation CCR (:func:`_score_grid`).
    ``detectors``: those left to tune, already without the paper's rows and those that do not apply
    (:func:`_tuned_on`). ``validation``: the models' stored validation outputs where already read
    (None: read here, as a child process does)."""
    if validation is None:
        validation = {model_dir: _validation(model_dir) for model_dir in model_dirs}
    out = []
    for name in detectors:
        why = _not_applicable(name, validation[model_dirs[0]], approach)
        grid = None if why else _score_grid(name, settings.get(name, {}), model_dirs, validation, approach, fpr)
        out.append((name, why, grid))
    return out


def _tuned_on(approach: str, detectors: Sequence[str]) -> List[str]:
    """Those of ``detectors`` tuned on ``approach``'s models: the ones that apply to it, but for its
    paper's rows, which keep the config's settings."""
    kept = {detector for detector, _ in paper_rows(approach)}
    return [d for d in detectors if d in applicable_detectors(approach) and d not in kept]


def _selected_models(run_dir: Path, models, approaches: Optional[Sequence[str]]):
    if not approaches:
        return models
    trained = {approach for _, approach, _ in models}
    for approach in approaches:
        if approach not in trained:
            raise AgnostophobiaError(f"--approach {approach}: {run_dir} holds no {approach} model; "
                                     f"trained: {', '.join(sorted(trained))}")
    return [model for model in models if model[1] in approaches]


def _selected_detectors(detectors: Optional[Sequence[str]]) -> List[str]:
    tunable = tunable_detectors()
    for name in detectors or ():
        DETECTORS.get(name)  # an unknown name: one line naming it
        if name not in tunable:
            raise AgnostophobiaError(f"--detector {name}: it declares no settings to tune; "
                                     f"tunable: {', '.join(tunable)}")
    return list(detectors) if detectors else tunable


def _validation(model_dir: ModelDir) -> Dict[str, np.ndarray]:
    """The model's stored validation split; refused without one or without negatives."""
    return validation_with_negatives(model_dir, "run `agnostophobia calibrate` once to store them, then tune",
                                     "detector settings cannot be chosen on validation data (e.g. mnist-notmnist "
                                     "has no validation unknowns)")


def _negatives(val: Dict[str, np.ndarray]) -> int:
    """The negatives (label -1) of a stored validation split."""
    return int((np.asarray(val["labels"]) < 0).sum())


def check_supported_fpr(fpr: float, validation: Dict[Path, Dict[str, np.ndarray]]) -> None:
    """Refuse a target FPR that the validation negatives of some model cannot support (fewer than
    10 false positives allowed): one line naming the count, the smallest supported FPR and the
    supported values (:func:`~agnostophobia.metrics.unsupported_fpr_message`)."""
    counts = {model_dir: _negatives(val) for model_dir, val in validation.items()}
    fewest = min(counts, key=counts.get)
    if not supports_fpr(fpr, counts[fewest]):
        raise AgnostophobiaError(f"--fpr {fpr:g}: {unsupported_fpr_message(fpr, counts[fewest])} "
                                 f"({fewest.val_outputs}); choose a supported --fpr, or validate on more negatives")


def _not_applicable(name: str, val: Dict[str, np.ndarray], approach: str) -> Optional[str]:
    """Why detector ``name`` does not apply to the approach's networks (their validation outputs'
    known columns and feature dimension), or None."""
    num_classes = known_columns(approach, val["logits"].shape[1])
    return DETECTORS.get(name).not_applicable(num_classes, val["features"].shape[1])


def _score_grid(name: str, base: Dict, model_dirs: List[ModelDir], validation: Dict, approach: str,
                fpr: float) -> List[Dict]:
    """Every grid point of detector ``name`` with its mean validation CCR over ``model_dirs``
    (None where it could not be fitted on some model, or the FPR is unreachable) and the largest
    share of its validation scores that ties a known with a negative."""
    results = []
    for point in setting_grid(name):
        values = {**base, **point}
        numbers = [_validation_numbers(name, values, model_dir, validation[model_dir], approach, fpr)
                   for model_dir in model_dirs]
        usable = not any(n is None for n in numbers)
        results.append({"settings": point, "val_ccr": float(np.mean([n[0] for n in numbers])) if usable else None,
                        "val_tied_share": max(n[1] for n in numbers) if usable else None})
    return results


def _validation_numbers(name: str, values: Dict, model_dir: ModelDir, val: Dict[str, np.ndarray], approach: str,
                        fpr: float) -> Optional[Tuple[float, float]]:
    """``(CCR at fpr, tied share)`` of the detector on the model's validation split; None where it
    cannot be fitted or the CCR is undefined."""
    num_classes = known_columns(approach, val["logits"].shape[1])
    try:
        detector = fitted_detector(name, load_fit_outputs(model_dir), num_classes, {name: values},
                                   model_dir=model_dir)
        scores = detector.scores(detector_inputs(detector, val["logits"], num_classes), val["features"])
    except (NotFitted, ValueError):
        return None
    labels = np.asarray(val["labels"], dtype=np.int64)
    ccr = float(ccr_at_fpr(scores, labels, [fpr])[0])
    return None if math.isnan(ccr) else (ccr, float(tied_share(scores.max(axis=1), labels)))


def _best(name: str, grid: List[Dict], config: Dict) -> Optional[Dict]:
    """The point of largest validation CCR among those whose scores tie at most :data:`TIE_FLAG`
    (all usable points where none does); equal CCRs go to the config's setting (or the declared
    default), then to the grid's order."""
    usable = [g for g in grid if g["val_ccr"] is not None]
    if not usable:
        return None
    usable = [g for g in usable if g["val_tied_share"] <= TIE_FLAG] or usable
    top = max(g["val_ccr"] for g in usable)
    tied = [g for g in usable if g["val_ccr"] == top]
    declared = DETECTORS.get(name).SETTINGS
    own = [g for g in tied if all(config.get(k, declared[k].default) == v for k, v in g["settings"].items())]
    return (own or tied)[0]


def _store(run_dir: Path, fpr: float, chosen: Dict, candidates: Dict, inputs: Dict[str, Dict[str, str]],
           outcomes: Dict[str, Dict[str, Dict]]) -> Dict:
    """Merge into ``detector_settings.json`` (other approaches and detectors kept), atomically,
    under the run's lock; each grid with the digest of its inputs (:func:`_inputs_digests`), and
    under ``untuned`` each detector that got no setting (``why`` not applicable, or its ``grid``
    with no point fitted) with its digest."""
    with run_lock(run_dir, create=False):
        stored = read_tuned_settings(run_dir) or {"chosen": {}, "candidates": {}}
        merged_chosen, merged_candidates = stored["chosen"], stored.get("candidates", {})
        merged_inputs, merged_untuned = stored.get("inputs", {}), stored.get("untuned", {})
        for approach, grids in candidates.items():
            for name in grids:  # a detector tuned again replaces its old choice, even by none
                merged_chosen.get(approach, {}).pop(name, None)
            merged_chosen.setdefault(approach, {}).update(chosen.get(approach, {}))
            merged_candidates.setdefault(approach, {}).update(grids)
            merged_inputs.setdefault(approach, {}).update({name: inputs[approach][name] for name in grids})
            for name in grids:  # tuned now: its last outcome without a setting is over
                merged_untuned.get(approach, {}).pop(name, None)
        for approach, names in outcomes.items():
            merged_untuned.setdefault(approach, {}).update(names)
        data = {"format": _FORMAT, "target_fpr": fpr, "split": "val",
                "rule": "largest mean CCR at target_fpr on the validation knowns and negatives "
                        "(val_outputs.npz), detectors fitted on the training knowns (fit_outputs.npz)",
                "chosen": merged_chosen, "candidates": merged_candidates, "inputs": merged_inputs,
                "untuned": merged_untuned}
        run = RunDir(run_dir)
        run.write(run.tuned_settings, lambda tmp: Path(tmp).write_text(json.dumps(data, indent=1, sort_keys=True)))
        read_run_settings(run_dir)  # what was written reads back, each choice as its detector declares it
    return data


def _shown(values: Dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())
