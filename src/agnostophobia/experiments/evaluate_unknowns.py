"""``agnostophobia evaluate RUN [--unknowns NAME_OR_PATH ...] [--replace]``.

Without ``--unknowns``: recomputes a run's metrics, figures and report from its stored
outputs. With them: runs every trained model (best-validation weights) on each new set and
computes that set alone -- every applicable detector's scores on it (the fitted ones fitted
once per model, on its training knowns, and only when a new set needs them; the other sets'
scores come from ``detector_scores.npz``, which is extended), its metrics rows, its figures --
then rewrites ``metrics.json`` (the other sets' rows kept where the file records the scores
they came from: :func:`kept_results`) and the report. The result equals a full evaluation
(``tests/experiments/test_evaluate_unknowns.py``); ``--replace`` recomputes the replaced sets alone.
An unknown set is a registered dataset name, an ``.npz`` in our layout (``x_test``, ``x``
or ``images``: uint8 (N, H, W) grey or (N, H, W, 3) RGB), or a folder of images of any
sizes. It is prepared by :func:`agnostophobia.data.preprocess.prepare_images` with the
input spec of the protocol the run was trained on (read from the run's config), i.e.
exactly as that protocol prepared its own sets (Sec. 5): a registered dataset keeps its
own kind and declared frame, a user's set is taken to be of the protocol's kind (glyphs
for LeNet++, whose polarity is checked; photographs for CIFAR, which have none).

Everything that can be refused is refused before anything is written: the set names first
(never ``known``, never one name twice, never a set whose evaluation the run finished unless
``replace``), then every input is read, checked and prepared, and the models run; a set the
run holds but did not finish is refused too unless it holds exactly these outputs (then the
same command was killed or stopped before it finished, and running it again finishes it).
Only then are outputs written, then metrics.json, figures and report, all or nothing
(:meth:`agnostophobia.rundir.RunDir.all_or_nothing`): a command stopped part-way (a full disk,
an error, Ctrl-C; a kill, at the next command) leaves the run's last result byte for byte.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from agnostophobia.data.inputs import model_input, read_unknowns, run_input, unknown_set_name
from agnostophobia.deploy.request import ModelRequest
from agnostophobia.errors import DataError
from agnostophobia._reading import read_input_text
from agnostophobia._runlock import run_lock
from agnostophobia.detectors.stored import ModelScores, RunSettings, model_scores, run_settings, stored_model_scores
from agnostophobia.training.outputs import load_outputs, save_outputs
from agnostophobia.training.records import check_run, read_checkpoint_config
from agnostophobia.rundir import CONFIG_SCORES_FILE, SCORES_FILE, ModelDir, RunDir
from agnostophobia.training.trained import load_trained_model
from agnostophobia.training.device import resolve_device
from agnostophobia._log import log_info

KNOWN = "known"  # the run's own known test set (D_c) in outputs.npz


def check_set_names(specs: Sequence[str], names: Sequence[str]) -> None:
    """Refuse names that would overwrite the known set or each other."""
    for spec, name in zip(specs, names):
        if name == KNOWN:
            raise DataError(f"--unknowns {spec}: an unknown set must not be called {KNOWN!r} "
                            f"(the run's known test set); rename it")
        if "__" in name:
            raise DataError(f"--unknowns {spec}: a set name must not contain '__'; rename it")
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    if twice:
        raise DataError(f"--unknowns: more than one set would be called {twice[0]!r}; rename one")


def check_finished_sets(run_dir: Path, names: Sequence[str]) -> None:
    """Refuse (without ``--replace``), before any input is read, a set whose evaluation the run
    finished: ``metrics.json`` has its rows and ``report.md`` was written after it (the last
    thing an evaluation writes). A set held but not finished is left to :func:`check_held_sets`."""
    clash = [name for name in names if name in finished_sets(run_dir)]
    if clash:
        raise _already_holds(run_dir, clash)


def finished_sets(run_dir: Path) -> set:
    """The sets of the run's last finished evaluation (:func:`check_finished_sets`)."""
    run = RunDir(run_dir)
    try:
        if run.report.stat().st_mtime_ns < run.metrics.stat().st_mtime_ns:
            return set()  # metrics.json written, the report not yet: stopped half-way
        rows = json.loads(read_input_text(run.metrics))["per_seed"]  # a FIFO in its place: refused, not waited on
    except (OSError, ValueError, KeyError, TypeError, RecursionError, DataError):
        return set()
    return {row.get("unknowns") for row in rows if isinstance(row, dict)} if isinstance(rows, list) else set()


def check_held_sets(run_dir: Path, computed: Dict[Path, Dict[str, Dict]]) -> None:
    """Refuse (without ``--replace``) a set the run already holds with other outputs than the
    ``computed`` ones. A set held with the same outputs and not finished was written by this
    same command, killed or stopped before it finished: running the command again finishes it,
    with the result of a run never interrupted."""
    clash = sorted({name for model_dir, sets in computed.items()
                    for name, stored in load_outputs(model_dir.outputs).items()
                    if name in sets and not _same_outputs(stored, sets[name])})
    if clash:
        raise _already_holds(run_dir, clash)


def _already_holds(run_dir: Path, names: Sequence[str]) -> DataError:
    return DataError(f"{run_dir} already holds unknown set(s) {', '.join(map(repr, names))}; "
                     f"add --replace to replace them, or rename the input")


def _same_outputs(stored: Dict[str, np.ndarray], computed: Dict[str, np.ndarray]) -> bool:
    """Whether two outputs of one set agree (up to the rounding of another thread count)."""
    return all(key in stored and stored[key].shape == value.shape and np.allclose(stored[key], value, rtol=1e-5,
                                                                                  atol=1e-6)
               for key, value in computed.items())


def evaluate_run(request: ModelRequest, unknowns: Sequence[str] = (), plots: bool = True, replace: bool = False,
                 log=log_info) -> Path:
    """``agnostophobia evaluate``: the metrics, report and figures of every model of
    ``request.run`` computed again from its stored outputs; with ``unknowns``, those sets are
    first run through every model and added (the other sets are not recomputed).

    Args:
        request: the run, and where networks compute what must be computed (``data_dir``:
            where named unknown sets are read from; ``device``); it chooses no model, every one
            is evaluated.
        unknowns: unknown sets to add: registered names, ``.npz`` files, image folders or files.
        plots: draw the figures again.
        replace: an unknown set the run already holds is computed again (default: refused).
        log: receives one line per step.

    Returns:
        The path of the written ``metrics.json``.
    """
    from agnostophobia.experiments.reproduce import finish_run

    request.check_reads("evaluate_run", "data_dir", "device")
    run_dir, data_dir, device = request.run, request.data_dir, request.device
    if device:
        device = resolve_device(device)  # a bad --device stops before any work; resolved once, passed down
    records = check_run(run_dir)  # every record valid and in agreement, before anything is written
    settings = run_settings(records)  # settings that could not score stop here
    records.warn_versions(stacklevel=2)
    if not unknowns:
        request.warn_unused("without --unknowns, evaluate reads the run's stored outputs: no data is read and no "
                            "network run", "data_dir", "device", stacklevel=2)
    model_dirs = sorted(model_dir for _, _, model_dir in records.models)
    prepared, names = {}, []
    if unknowns:  # every input is checked, read and prepared before the run is touched
        check_set_names(unknowns, [unknown_set_name(spec) for spec in unknowns])
        if not replace:
            check_finished_sets(run_dir, [unknown_set_name(spec) for spec in unknowns])
        sets = [read_unknowns(spec, data_dir) for spec in unknowns]
        configs = {d: records.checkpoint_configs.get(d) or read_checkpoint_config(d.best) for d in model_dirs}
        for cfg in configs.values():  # one preparation per input spec, shared by the models trained with it
            spec = run_input(cfg)
            if spec not in prepared:
                prepared[spec] = [model_input(s, cfg) for s in sets]
        names = [s.name for s in sets]
        del sets  # the prepared copies are all that is needed from here on
        computed = {d: _unknown_outputs(d, names, prepared[run_input(configs[d])], device, log) for d in model_dirs}
        if not replace:
            check_held_sets(run_dir, computed)
    with run_lock(run_dir, create=False), RunDir(run_dir).all_or_nothing():  # stopped part-way: as it was
        meta = records.meta or {"experiment": "", "budget": None}  # a run whose training did not finish
        if not unknowns:
            return finish_run(run_dir, meta, plots=plots, log=log)
        # what the run already holds, read before its outputs change: the other sets are not recomputed
        caches = _score_caches(records.models, settings)
        run = RunDir(run_dir)  # every file this writes, checked before the first is: a refusal leaves the run as it was
        run.check_writable_all([*(path for d in model_dirs for path in (d.outputs, d.fitted)),
                                *(c.model_dir.file(c.file) for c in caches),
                                run.metrics, run.report, *([run.figures] if plots else [])])
        held = [stored_model_scores(c.model_dir, c.approach, c.settings, c.file) for c in caches]
        for model_dir in model_dirs:
            save_outputs(model_dir.outputs, {**load_outputs(model_dir.outputs), **computed[model_dir]})
        for c, old in zip(caches, held):  # score the new sets alone; the caches are extended
            model_scores(c.model_dir, c.approach, c.settings, reuse=old.without(names) if old else None, file=c.file)
        matrix = {(c.seed, c.approach): old for c, old in zip(caches, held) if c.file == SCORES_FILE}
        previous = kept_results(run_dir, matrix, names)
        return finish_run(run_dir, meta, plots=plots, log=log, previous=previous, splits=names)


class ScoreCache(NamedTuple):
    """One model's detector scores with one set of settings, as ``file`` keeps them."""

    seed: int
    approach: str
    model_dir: ModelDir
    settings: Dict
    file: str


def _score_caches(models, settings: RunSettings) -> List[ScoreCache]:
    """Every score cache the report reads: each model's scores with its detector settings
    (tune-detectors' choices where made) and, for a tuned model, those with the config's
    settings (the report's default-against-chosen table)."""
    caches = []
    for seed, approach, model_dir in models:
        caches.append(ScoreCache(seed, approach, model_dir, settings.for_approach(approach), SCORES_FILE))
        if settings.tuned.get(approach):
            caches.append(ScoreCache(seed, approach, model_dir, settings.config, CONFIG_SCORES_FILE))
    return caches


def kept_results(run_dir: Path, held: Dict[Tuple[int, str], Optional[ModelScores]],
                 recomputed: Sequence[str]) -> Dict[Tuple[int, str], Dict[Tuple[str, str], Dict]]:
    """The per-seed results of ``metrics.json`` that stay as they are: per model whose
    ``metrics.json`` rows were computed from the detector scores ``held`` (same fingerprint),
    every row but those of the ``recomputed`` sets. A model without such rows is computed anew."""
    try:
        metrics = json.loads(read_input_text(RunDir(run_dir).metrics))
        fingerprints, per_seed = metrics["scores_fingerprints"], metrics["per_seed"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError, DataError):  # none, or from before fingerprints: compute all
        return {}
    kept: Dict[Tuple[int, str], Dict[Tuple[str, str], Dict]] = {}
    for (seed, approach), scores in held.items():
        if scores is None or not isinstance(fingerprints, dict) or \
                fingerprints.get(RunDir.run_key(seed, approach)) != scores.fingerprint:
            continue
        kept[seed, approach] = {(row["detector"], row["unknowns"]): row for row in per_seed
                                if isinstance(row, dict) and row.get("seed") == seed and row.get("approach") == approach
                                and row.get("unknowns") not in recomputed}
    return kept


def _unknown_outputs(model_dir: ModelDir, names: Sequence[str], inputs: Sequence[np.ndarray], device,
                     log) -> Dict[str, Dict[str, np.ndarray]]:
    """Each new set's outputs by the model of ``model_dir``, as its own test sets were predicted."""
    trained = load_trained_model(model_dir, device)
    outputs = {}
    for name, images in zip(names, inputs):
        logits, features = trained.outputs(images)
        outputs[name] = {"logits": logits, "features": features, "labels": np.full(len(logits), -1, np.int64)}
        log(f"{model_dir}: evaluated {len(logits):,} samples of {name!r}")
    return outputs
