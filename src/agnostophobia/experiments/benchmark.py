r"""``agnostophobia benchmark PROTOCOL --budget converged|smoke``: every registered training method
with every applicable post-processor, on converged networks, with intervals over seeds and tests
of significance, in one report.

One command does what a reviewer of the field asks of a comparison (Vaze et al., ICLR 2022: open-set
scores follow closed-set accuracy, so an unconverged network ranks training length, not methods):

1. **Train** every registered approach (:data:`~agnostophobia.losses.LOSSES`) for ``--seeds``
   seeds (default 3, as OpenOOD) at the budget, through ``reproduce`` (:func:`~agnostophobia.
   experiments.reproduce.reproduce`): the same run folder, records, per-sample outputs, report and
   Fig. 1/OSCR figures; an interrupted benchmark continues where it stopped (finished models are
   kept, an unfinished one resumes from its last epoch), and runs train two at a time where
   ``concurrent_runs: auto`` finds that faster.
2. **Choose each detector's settings on validation data only** (``tune-detectors``, at the
   smallest FPR of 10⁻², 10⁻¹, ... the validation negatives support; ``--partial``: a detector
   without a setting keeps the config's).
3. **Score** every (approach, detector) on every test set through the one code path of ``compare``
   (:func:`~agnostophobia.deploy.compare.compare_models`: the reachable-FPR rule, CCR only at
   FPR ≥ 10/#negatives), per seed.
4. **Report** (``benchmark.md``, ``benchmark.json``): per row and unknown set, the area under the
   OSCR curve (Eq. 3, linear FPR axis, :func:`~agnostophobia.metrics.oscr_area`; for the paper's
   rows also over a log FPR axis from 10/#unknowns, the low-FPR end), AUROC and CCR at
   the supported FPRs, each as the mean over seeds with its 95 % t interval
   (:func:`~agnostophobia.metrics.seed_interval`); the network's closed-set accuracy, a row below
   the protocol's declared threshold (LeNet++ 0.985, CIFAR 0.90;
   :attr:`~agnostophobia.data.protocol_types.ProtocolSpec.converged_accuracy`) marked *not converged*
   and left out of ranks and tests, as is an approach trained on fewer seeds than the others; the
   share of scores that ties decide
   (:func:`~agnostophobia.metrics.tied_share`, flagged above 1 %); comparisons of the OSCR area
   averaged over the unknown-unknown (D_a) sets in three families (:data:`FAMILIES`): the
   **primary** one, each approach with its paper's detector against Entropic Open-Set with its
   paper's, and two **secondary** ones, each approach against Entropic Open-Set with the same
   detector and each detector against max-softmax on the same network. Each comparison is the mean
   paired difference over seeds with its t interval, its standard error floored by a paired
   bootstrap over the shared test samples (:func:`sample_replicates`,
   :func:`~agnostophobia.metrics.paired_difference`), decided against the margin :data:`MARGIN`
   declared before the run (:func:`~agnostophobia.metrics.decide`: better, worse, equivalent or
   not resolved at the run's seeds), with Holm's correction within each family (each family at
   :data:`ALPHA`, not the whole report); and a paragraph written from the numbers, which says the
   smallest difference each family resolves.

The report covers the approaches the run's ``config.yaml`` lists (the last call's, ``--set
approaches=`` included); models of others in the folder are named in its notes, not scored.
Everything is read from the stored outputs: rerunning after the training finished only recomputes
the tables (seconds to minutes).
"""
from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agnostophobia._log import log_info
from agnostophobia._runlock import run_lock
from agnostophobia.data.protocols import unknown_set  # the registered protocols declare their sets there
from agnostophobia.deploy.request import ModelRequest
from agnostophobia.errors import AgnostophobiaError, TrainingDiverged
from agnostophobia.experiments.request import RunRequest
from agnostophobia.metrics import (BETTER, EQUIVALENT, NOT_RESOLVED, TIE_FLAG, WORSE, decide, fpr_keys,
                                   oscr_area_resamples, paired_difference, resample_weights, resampled_se,
                                   seed_interval, smallest_resolved_difference, supported_fprs, supports_fpr)
from agnostophobia.rundir import RunDir

_FORMAT = 2  # 2: three families of tests, each with its decision against MARGIN (1: "significant" per test)
#: Seeds per approach unless ``--seeds`` says otherwise: OpenOOD's three; a paired test needs two.
DEFAULT_SEEDS = 3
#: The reference of the approach families (the primary one: each approach with its paper's
#: detector against this approach with its paper's; the secondary one: the same detector) and of
#: the detector family (same network).
REFERENCE_APPROACH = "entropic"
REFERENCE_DETECTOR = "softmax"
#: The level of each family's tests: Holm's correction holds it within a family, not across them.
ALPHA = 0.05
#: The margin, declared before any run: a difference of mean D_a OSCR area smaller than this does not
#: matter, and one shown to lie within it (its 90 % interval inside +-MARGIN) is "equivalent". Half a
#: point of area: the tables print three decimals, and on the converged LeNet++ networks trained with
#: negatives the 95 % intervals over 3 seeds are +-0.002 to +-0.005 (docs/guide/benchmark.md): a
#: smaller difference is neither one a reader acts on nor one 3 seeds can tell from the seeds' noise.
MARGIN = 0.005
#: Resamples and seed of the paired bootstrap over the test samples that floors each difference's
#: standard error (the same resamples for every network, detector and seed: paired).
BOOTSTRAP_RESAMPLES = 200
BOOTSTRAP_SEED = 55
#: The families of comparisons (``benchmark.json``'s ``tests``), each Holm-adjusted on its own:
#: (its name in the report, what is compared with what).
FAMILIES = {
    "primary": ("primary", "each approach with its paper's detector against Entropic Open-Set with its paper's, "
                           "max-softmax"),
    "approaches": ("secondary: approaches", "each approach against Entropic Open-Set with the same detector, for "
                                            "the detectors the primary family does not compare"),
    "detectors": ("secondary: detectors", "each detector against max-softmax on the same network"),
}
#: FPR at which ``tune-detectors`` chooses settings, where the validation negatives support it.
TUNE_FPR = 1e-2
#: The shipped protocols ``benchmark`` takes by name: (the config, the ``--set`` options it needs).
SHIPPED = {"lenet++": ("lenet++", ()), "cifar": ("cifar", ()),
           "cifar10-split": ("cifar", (("protocol", "cifar10-split"),))}


# ------------------------------------------------------------------------ what is run
def experiment_for(target: str) -> Tuple[str, Tuple[Tuple[str, object], ...]]:
    """The config and ``--set`` options of ``target``: a shipped protocol's name (:data:`SHIPPED`),
    or the path of an experiment YAML (a user's own protocol or image folder)."""
    if target in SHIPPED:
        return SHIPPED[target]
    if Path(target).is_file():
        return target, ()
    raise AgnostophobiaError(f"benchmark {target!r}: not a shipped protocol ({', '.join(SHIPPED)}) nor an "
                             f"experiment YAML file (for your own images: a config with protocol: "
                             f"{{type: imagefolder, ...}}, docs/own-images.md)")


def tune_fpr(negatives: int) -> Optional[float]:
    """:data:`TUNE_FPR`, or the smallest FPR of the series the validation negatives support (None:
    fewer than 10 negatives support none)."""
    if supports_fpr(TUNE_FPR, negatives):
        return TUNE_FPR
    supported = supported_fprs(negatives)
    return min(supported) if supported else None


def benchmark(target: str, request: Optional[RunRequest] = None, min_accuracy: Optional[float] = None,
              log: Callable[[str], None] = log_info) -> Path:
    """Train, tune, score and report (the module docstring); returns ``benchmark.md``'s path.
    ``target``: a protocol's name, a protocol YAML or an image folder; ``request``: the budget,
    seeds (default 3), output folder and training choices (its ``experiment`` is set here, from
    ``target``)."""
    from agnostophobia.experiments.reproduce import reproduce
    from agnostophobia.losses import LOSSES

    config, protocol_options = experiment_for(target)
    request = (request or RunRequest(config)).but(experiment=config)
    seeds, budget = (DEFAULT_SEEDS if request.seeds is None else request.seeds), request.budget
    if seeds < 2:
        raise AgnostophobiaError(f"--seeds {seeds}: a benchmark needs at least 2 seeds for its intervals and "
                                 f"paired tests (default {DEFAULT_SEEDS})")
    _check_min_accuracy(min_accuracy)
    name = Path(target).stem if target not in SHIPPED else target
    out = request.out or Path("runs") / f"benchmark-{name}-{budget or 'config'}"
    options = (*protocol_options, ("approaches", list(LOSSES.names())), *request.set_options)
    try:
        reproduce(request.but(seeds=seeds, out=out, set_options=options), log=log)
    except TrainingDiverged as error:
        raise _without(error, [value for key, value in options if key == "approaches"][-1], out) from None
    return write_benchmark(out, min_accuracy, log=log)


def _without(error: TrainingDiverged, approaches: Sequence[str], out: Path) -> TrainingDiverged:
    """The divergence of one approach's run, with how to benchmark the others: the networks
    finished so far are kept in ``out``, and the same command without that approach continues."""
    if error.approach is None or error.approach not in approaches:
        return error
    others = ", ".join(a for a in approaches if a != error.approach)
    return TrainingDiverged(f"{error}. The networks finished so far are kept in {out}; to benchmark the other "
                            f"approaches, run the same command again with --set \"approaches=[{others}]\"",
                            approach=error.approach)


def _check_min_accuracy(value: Optional[float]) -> None:
    if value is not None and (isinstance(value, bool) or not 0 < value <= 1):
        raise AgnostophobiaError(f"--min-accuracy {value!r}: a closed-set accuracy in (0, 1]")


def benchmarked_approaches(records) -> Tuple[List[str], List[str]]:
    """The approaches the report covers, and the ones left out: those the run's ``config.yaml``
    lists under ``approaches`` (what the last ``benchmark`` call trained, ``--set approaches=``
    included) that have a model in the folder. A model of another approach (one an earlier call
    trained, or that diverged and was set aside) stays in the folder but is not scored: a report
    is of the approaches it was asked for."""
    trained = list(dict.fromkeys(approach for _, approach, _ in records.models))
    asked = records.config.get("approaches") or trained
    return [a for a in trained if a in asked], [a for a in trained if a not in asked]


def _tune(run_dir: Path, approaches: Sequence[str], log) -> str:
    """``tune-detectors`` on the run's validation data; what the report says of it."""
    from agnostophobia.deploy.compare import validation_negatives
    from agnostophobia.experiments.tune_detectors import tune_detectors

    negatives = validation_negatives(run_dir)
    fpr = tune_fpr(negatives)
    if fpr is None:
        return f"not tuned: {negatives} validation negatives support no FPR; every detector has the config's settings"
    try:
        from agnostophobia.training.concurrent import available_cores

        tune_detectors(ModelRequest(run_dir, approaches=approaches, fpr=fpr, partial=True), processes=available_cores(),
                       log=log)
    except AgnostophobiaError as exc:
        return f"not tuned ({exc}); every detector has the config's settings"
    return f"tuned by tune-detectors on the validation split at FPR {fpr:g} ({negatives:,} validation negatives)"


def write_benchmark(run_dir, min_accuracy: Optional[float] = None, log: Callable[[str], None] = log_info) -> Path:
    """Tune the detectors on validation data, score every row and write ``benchmark.json`` and
    ``benchmark.md`` (each atomically, under the run's lock) from a trained run's stored outputs."""
    from agnostophobia.deploy.compare import compare_models
    from agnostophobia.training.records import check_run

    run_dir = Path(run_dir)
    _check_min_accuracy(min_accuracy)
    records = check_run(run_dir, "benchmark")
    approaches, left_out = benchmarked_approaches(records)
    tuning = _tune(run_dir, approaches, log)
    threshold = min_accuracy if min_accuracy is not None else _declared_accuracy(records.config)
    with run_lock(run_dir, create=False):
        comparison = compare_models(run_dir, approaches=approaches, curves=True)
        models = [m for m in records.models if m[1] in approaches]
        result = summarise(comparison.rows, threshold, sample_replicates(models, _stored_scores(run_dir, records)))
        notes = [f"{approach}: its models are in the folder, but it is not among this benchmark's approaches "
                 f"(config.yaml)" for approach in left_out]
        result.update({"format": _FORMAT, "tuning": tuning, "notes": notes + comparison.notes,
                       "val_negatives": comparison.val_negatives, "test_sets": comparison.test_sets,
                       "fprs": comparison.fprs, "meta": _meta(records.meta)})
        run = RunDir(run_dir)
        json_path, md_path = run.benchmark, run.benchmark_table
        result["oscr_figures"] = oscr_figures(run_dir, result, comparison)
        text = markdown(result, run_dir.name)
        run.write(json_path, lambda tmp: Path(tmp).write_text(json.dumps(result, indent=1, default=float)))
        run.write(md_path, lambda tmp: Path(tmp).write_text(text))
    for line in result["summary"]:
        log(line)
    log(f"written: {md_path} and {json_path}")
    return md_path


def _stored_scores(run_dir: Path, records) -> Callable:
    """``scores_of(model_dir, approach)``: a model's detector scores with the settings ``compare``
    scored it with (the config's, or those ``tune-detectors`` chose), read from the scores it kept."""
    from agnostophobia.detectors.stored import detector_settings, model_scores, model_settings, run_tuned_settings

    config, tuned = detector_settings(records.config), run_tuned_settings(run_dir)
    return lambda model_dir, approach: model_scores(model_dir, approach, model_settings(config, tuned, approach))


def _bootstrap_weights(split: str, n: int) -> np.ndarray:
    """The resamples of a test split of ``n`` samples: seeded by its name and size, so the same for
    every network, detector and seed that shares the split (a paired bootstrap)."""
    return resample_weights(n, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED + zlib.crc32(f"{split}:{n}".encode()))


def sample_replicates(models: Sequence[Tuple[int, str, Path]], scores_of: Callable) -> Optional[Dict]:
    """Each row's mean D_a OSCR area on every resample of the paired bootstrap over the test
    samples: ``{(approach, detector): {seed: (BOOTSTRAP_RESAMPLES,) array}}``, the knowns resampled
    once for every set (D_c is shared) and each D_a set on its own (:func:`_bootstrap_weights`).
    ``models``: the run's (seed, approach, model folder); ``scores_of(model_dir, approach)``: that
    model's :class:`~agnostophobia.detectors.stored.ModelScores`. None where the models' test
    splits differ in their labels (they are then not the same samples: no pairing)."""
    replicates: Dict[Tuple[str, str], Dict[int, np.ndarray]] = {}
    seen: Dict[str, np.ndarray] = {}
    for seed, approach, model_dir in models:
        scores = scores_of(model_dir, approach)
        for split, labels in scores.labels.items():
            if not np.array_equal(seen.setdefault(split, labels), labels):
                return None
        sets = [s for s in scores.unknown_sets if not unknown_set(s).known_unknowns] or scores.unknown_sets
        if not sets:
            continue
        known = _bootstrap_weights("known", len(scores.labels["known"]))
        unknown = {s: _bootstrap_weights(s, len(scores.labels[s])) for s in sets}
        for detector in scores.detectors:
            if any(s not in scores.top[detector] for s in ("known", *sets)):
                continue
            areas = [oscr_area_resamples(*scores.known_vs_unknown(detector, s), known, unknown[s]) for s in sets]
            replicates.setdefault((approach, detector), {})[seed] = np.mean(areas, axis=0)
    return replicates


def _declared_accuracy(config: Dict) -> Optional[float]:
    from agnostophobia.data.protocols import protocol_spec

    protocol = config.get("protocol")
    return protocol_spec(protocol).converged_accuracy if isinstance(protocol, str) else None


def _meta(meta: Optional[Dict]) -> Dict:
    """What the report's header says of the run, from its record (``run_meta.json``, already read)."""
    meta = meta or {}
    keys = ("experiment", "budget", "seeds", "command", "device", "wall_time_s", "precision", "versions",
            "timings_s")
    return {key: meta[key] for key in keys if key in meta}


# ------------------------------------------------------------------------ the statistics
def _interval(values: Sequence[Optional[float]]) -> Optional[Dict]:
    """Mean and 95 % t interval over seeds, the interval cut to [0, 1] (every statistic here is a
    rate or an area in it; with few seeds a t interval reaches past both ends). None: a seed lacks it."""
    if not values or any(v is None for v in values):
        return None
    interval = seed_interval(values)
    return {"mean": interval.estimate, "low": float(np.clip(interval.low, 0, 1)),
            "high": float(np.clip(interval.high, 0, 1)), "seeds": interval.n}


def network_accuracy(rows: List[Dict], approach: str) -> Optional[List[float]]:
    """Per seed, the closed-set accuracy of the approach's network on the test knowns: its arg-max
    class, read from the max-softmax row (any row of the approach where that one is missing)."""
    mine = [r for r in rows if r["approach"] == approach and r["test"]]
    mine.sort(key=lambda r: r["detector"] != REFERENCE_DETECTOR)
    if not mine:
        return None
    first = next(iter(mine[0]["test"].values()))
    return first["per_seed"]["closed_set_accuracy"]


def unknown_unknowns(row: Dict) -> List[str]:
    """The row's test sets of unknown unknowns (D_a); all of them where none is declared so."""
    sets = [name for name in row["test"] if not unknown_set(name).known_unknowns]
    return sets or list(row["test"])


def mean_oscr(row: Dict, statistic: str = "oscr") -> Optional[List[float]]:
    """Per seed, the OSCR area averaged over the row's D_a test sets: what rows are ranked and tested
    on (``statistic="oscr_log"``: the area over the log FPR axis, shown beside it). None where a set
    or a seed lacks it."""
    sets = unknown_unknowns(row)
    values = [row["test"][name]["per_seed"][statistic] for name in sets]
    if not sets or any(v is None or None in v for v in values):
        return None
    return [float(v) for v in np.mean(values, axis=0)]


def _cells(numbers: Dict) -> Dict:
    per_seed = numbers["per_seed"]
    return {"oscr": _interval(per_seed["oscr"]), "oscr_log": _interval(per_seed["oscr_log"]),
            "auroc": _interval(per_seed["auroc"]),
            "ccr_at_fpr": {key: _interval(values) for key, values in per_seed["ccr_at_fpr"].items()},
            "tied_share": float(np.mean(per_seed["tied_share"])), "num_negative": numbers["num_negative"]}


def summarise(rows: List[Dict], min_accuracy: Optional[float], replicates: Optional[Dict] = None) -> Dict:
    """Rows with intervals, convergence, ranks, tests and the paragraph (``benchmark.json``).
    ``replicates``: ``{(approach, detector): {seed: (B,) array}}``, each row's mean D_a OSCR on the
    paired bootstrap's resamples of the test samples (:func:`sample_replicates`), which floor each
    difference's standard error; None: the seeds' spread alone (the report says so)."""
    approaches = list(dict.fromkeys(r["approach"] for r in rows))
    accuracy = {a: network_accuracy(rows, a) for a in approaches}
    run_seeds = max((len(r["seed_ids"]) for r in rows), default=0)
    out_rows = []
    for row in rows:
        acc = accuracy[row["approach"]]
        converged = None if min_accuracy is None or acc is None else bool(np.mean(acc) >= min_accuracy)
        out_rows.append({"approach": row["approach"], "detector": row["detector"], "row": row["row"],
                         "settings": row["settings"], "settings_from": row["settings_from"],
                         "seeds": row["seed_ids"], "closed_set_accuracy": _interval(acc) if acc else None,
                         "converged": converged, "complete": len(row["seed_ids"]) == run_seeds,
                         "mean_oscr_per_seed": mean_oscr(row), "mean_oscr_log_per_seed": mean_oscr(row, "oscr_log"),
                         "test": {name: _cells(numbers) for name, numbers in row["test"].items()}})
    _rank(out_rows)
    tests = {family: _family(out_rows, family, replicates) for family in FAMILIES}
    floored = any(t["se_samples"] is not None for family in tests.values() for t in family)
    result = {"min_accuracy": min_accuracy, "rows": out_rows, "tests": tests, "alpha": ALPHA, "margin": MARGIN,
              "families": {family: {"kind": kind, "compares": compares, "resolution":
                                    family_resolution(tests[family], run_seeds)}
                           for family, (kind, compares) in FAMILIES.items()},
              "sample_floor": ({"resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED} if floored else None),
              "seeds": run_seeds, "accuracy": {a: _interval(v) if v else None for a, v in accuracy.items()}}
    result["summary"] = what_the_data_says(result)
    return result


def _rankable(row: Dict) -> bool:
    """Converged (or no threshold), trained on every seed of the run (an approach whose other seeds
    are still to train would be ranked on fewer seeds than its rivals), and scored on a D_a set."""
    return row["converged"] is not False and row["complete"] and row["mean_oscr_per_seed"] is not None


def _rank(rows: List[Dict]) -> None:
    """Rows best first by mean OSCR over the D_a sets; a row not converged gets no rank and follows."""
    rows.sort(key=lambda r: (not _rankable(r), -(np.mean(r["mean_oscr_per_seed"]) if r["mean_oscr_per_seed"]
                                                  else -np.inf)))
    rank = 0
    for row in rows:
        row["rank"] = (rank := rank + 1) if _rankable(row) else None


def _pairs(rows: List[Dict], family: str) -> List[Tuple[Dict, Dict]]:
    """(row, reference row) of each comparison of ``family`` (:data:`FAMILIES`), both rankable and
    on the same seeds: ``primary``, each approach with its paper's detector against Entropic
    Open-Set with its paper's; ``approaches``, each approach against Entropic Open-Set with the
    same detector, less the pairs of ``primary``; ``detectors``, each detector against max-softmax
    on the same network."""
    by_key = {(r["approach"], r["detector"]): r for r in rows if _rankable(r)}
    primary_reference = by_key.get((REFERENCE_APPROACH, _papers_detector(REFERENCE_APPROACH)))
    pairs = []
    for row in rows:
        if not _rankable(row):
            continue
        if family == "primary":
            if row["approach"] == REFERENCE_APPROACH or not is_papers_detector(row["approach"], row["detector"]):
                continue
            base = primary_reference
        elif family == "approaches":
            if row["approach"] == REFERENCE_APPROACH:
                continue
            base = by_key.get((REFERENCE_APPROACH, row["detector"]))
            if base is not None and base is primary_reference and is_papers_detector(row["approach"], row["detector"]):
                continue  # the same comparison is in the primary family
        else:
            if row["detector"] == REFERENCE_DETECTOR:
                continue
            base = by_key.get((row["approach"], REFERENCE_DETECTOR))
        if base is not None and base["seeds"] == row["seeds"]:
            pairs.append((row, base))
    return pairs


def _replicates(row: Dict, replicates: Optional[Dict]) -> Optional[np.ndarray]:
    """(seeds, B) bootstrap replicates of the row's mean D_a OSCR, in the row's seed order; None
    where any seed lacks them."""
    if not replicates:
        return None
    by_seed = replicates.get((row["approach"], row["detector"]))
    if not by_seed or any(seed not in by_seed for seed in row["seeds"]):
        return None
    return np.stack([by_seed[seed] for seed in row["seeds"]])


def _finite(value: float) -> Optional[float]:
    return float(value) if np.isfinite(value) else None


def _family(rows: List[Dict], family: str, replicates: Optional[Dict] = None) -> List[Dict]:
    """Each comparison of ``family`` on the per-seed mean D_a OSCR: the mean paired difference over
    seeds, its standard error (the seeds' spread, floored by the paired bootstrap over the test
    samples where ``replicates`` hold the two rows'), its 95 % t interval and p, and the decision
    against :data:`MARGIN` (:func:`~agnostophobia.metrics.decide`: Holm within this family)."""
    tests, differences = [], []
    for row, base in _pairs(rows, family):
        mine, theirs = _replicates(row, replicates), _replicates(base, replicates)
        sample_se = resampled_se(mine, theirs) if mine is not None and theirs is not None else None
        difference = paired_difference(row["mean_oscr_per_seed"], base["mean_oscr_per_seed"], sample_se=sample_se)
        interval = difference.interval(1 - ALPHA)
        differences.append(difference)
        tests.append({"row": row["row"], "approach": row["approach"], "detector": row["detector"],
                      "against": base["row"], "family": family, "difference": difference.difference,
                      "interval": [_finite(interval.low), _finite(interval.high)], "se": difference.se,
                      "se_seeds": difference.se_seeds, "se_samples": sample_se, "p": _finite(difference.p_value),
                      "seeds": difference.n})
    for test, decision in zip(tests, decide(differences, MARGIN, ALPHA)):
        test["p_holm"] = decision.p_holm
        test["equivalence_interval"] = [_finite(decision.equivalence.low), _finite(decision.equivalence.high)]
        test["decision"] = decision.verdict
    return tests


def family_resolution(tests: List[Dict], seeds: int) -> Optional[Dict]:
    """What a family of ``tests`` over ``seeds`` seeds resolves: its median standard error and the
    smallest difference sure to be called better or worse at it
    (:func:`~agnostophobia.metrics.smallest_resolved_difference`, Holm's strictest step over the
    family's size, at least :data:`MARGIN`); None for an empty family."""
    if not tests or seeds < 2:
        return None
    se = float(np.median([t["se"] for t in tests]))
    return {"tests": len(tests), "median_se": se,
            "smallest_resolved": smallest_resolved_difference(se, seeds, ALPHA, len(tests), MARGIN)}


def mark(test: Optional[Dict]) -> str:
    """A test's decision as the tables print it: better, worse, equivalent, not resolved (n seeds)."""
    if test is None:
        return ""
    if test["decision"] == NOT_RESOLVED:
        return f"not resolved ({test['seeds']} seeds)"
    return test["decision"]


def _fmt(cell: Optional[Dict], digits: int = 3) -> str:
    if cell is None:
        return "N/A"
    if cell["seeds"] < 2 or not np.isfinite(cell["low"]):
        return f"{cell['mean']:.{digits}f}"
    return f"{cell['mean']:.{digits}f} [{cell['low']:.{digits}f}, {cell['high']:.{digits}f}]"


def _resolution_said(resolution: Dict) -> str:
    smallest = resolution["smallest_resolved"]
    said = f"With its median standard error ({resolution['median_se']:.4f}) it resolves differences from "
    if smallest >= 1:  # an area difference lies in [-1, 1]
        return said + f"{smallest:.2f} up: none of areas in [0, 1]; more seeds are needed."
    return said + f"{smallest:.4f} up."


def _decisions_said(result: Dict) -> List[str]:
    """One sentence per family of tests: what was decided, and the smallest difference it resolves."""
    lines = []
    seeds = result["seeds"]
    for family, (kind, compares) in FAMILIES.items():
        tests = result["tests"][family]
        if not tests:
            lines.append(f"{kind.capitalize()} family, {compares}: nothing to test (the rows are not converged, "
                         f"or on fewer than two seeds).")
            continue
        named = {verdict: [t["row"] for t in tests if t["decision"] == verdict] for verdict in (BETTER, WORSE)}
        counts = {verdict: sum(t["decision"] == verdict for t in tests) for verdict in (EQUIVALENT, NOT_RESOLVED)}
        resolution = result["families"][family]["resolution"]
        lines.append(f"{kind.capitalize()} family, {compares}: {len(tests)} test{'s' if len(tests) != 1 else ''}, "
                     f"Holm's correction within this family at {ALPHA}, margin {MARGIN}: {len(named[BETTER])} better "
                     f"({', '.join(named[BETTER]) or 'none'}), {len(named[WORSE])} worse "
                     f"({', '.join(named[WORSE]) or 'none'}), {counts[EQUIVALENT]} equivalent (within "
                     f"±{MARGIN}), {counts[NOT_RESOLVED]} not resolved at {seeds} seeds. "
                     + _resolution_said(resolution))
    if any(result["tests"].values()):
        floor = result.get("sample_floor")
        lines.append(f"Standard errors: the seeds' spread of each paired difference, floored by a paired bootstrap "
                     f"over the shared test samples ({floor['resamples']} resamples)." if floor else
                     "Standard errors: the seeds' spread alone (no per-sample scores were read for the bootstrap "
                     "floor), so a difference that barely moves between seeds may be called resolved.")
    return lines


def what_the_data_says(result: Dict) -> List[str]:
    """A few sentences from the numbers: the best row, what the tests decided, what was not
    converged, where ties decide."""
    rows = result["rows"]
    lines = []
    ranked = [r for r in rows if r["rank"] is not None]
    if ranked:
        top = ranked[0]
        lines.append(f"Best by mean OSCR over the unknown-unknown sets: {top['row']} "
                     f"({np.mean(top['mean_oscr_per_seed']):.3f} over {len(top['seeds'])} seeds), "
                     f"of {len(ranked)} ranked rows.")
    lines += _decisions_said(result)
    loose = sorted({r["approach"] for r in rows if r["converged"] is False})
    if loose:
        acc = ", ".join(f"{a} {result['accuracy'][a]['mean']:.3f}" for a in loose if result["accuracy"].get(a))
        lines.append(f"Not converged (closed-set accuracy below {result['min_accuracy']}), so neither ranked nor "
                     f"tested: {acc}.")
    elif result["min_accuracy"] is None:
        lines.append("No convergence threshold is declared for this protocol (--min-accuracy): every row is ranked, "
                     "whatever its closed-set accuracy.")
    partial = {r["approach"]: len(r["seeds"]) for r in rows if not r["complete"]}
    if partial:
        lines.append(f"Trained on fewer seeds than the run's {result['seeds']} (the rest still to train), so neither "
                     f"ranked nor tested: " + ", ".join(f"{a} ({n} of {result['seeds']})" for a, n in partial.items())
                     + ".")
    tied = sorted({r["row"] for r in rows for cell in r["test"].values() if cell["tied_share"] > TIE_FLAG})
    if tied:
        lines.append(f"Ties decide more than {TIE_FLAG:.0%} of the ranking in: {', '.join(tied)} (marked †).")
    return lines


# ------------------------------------------------------------------------ the figures
def oscr_figures(run_dir: Path, result: Dict, comparison) -> Dict[str, str]:
    """Per unknown-unknown set, the OSCR curves (mean over seeds, ± 1 std) of every approach with its
    paper's detector, written into the run's ``figures/benchmark_oscr_SET.png``; ``{set: path}``
    relative to the run (none where matplotlib is missing). The curves are those ``comparison``
    kept while scoring (``compare_models(..., curves=True)``): nothing is scored twice."""
    try:
        from agnostophobia.plotting.panels import new_figure, oscr_series, plot_oscr, save_figure
        from agnostophobia.plotting.run import figure_writer
    except ImportError:
        return {}
    from agnostophobia.losses import LOSSES

    converged = {r["approach"]: r["converged"] for r in result["rows"]}
    curves: Dict[str, Dict[str, List]] = {}
    for (seed, approach, detector, unknown), (ccr, fpr, unknowns) in comparison.curves.items():
        if is_papers_detector(approach, detector) and not unknown_set(unknown).known_unknowns:
            curves.setdefault(unknown, {}).setdefault(approach, []).append(((ccr, fpr), unknowns))
    figures_dir = RunDir(run_dir).figures
    write = figure_writer(run_dir, figures_dir)
    written = {}
    for unknown, by_approach in curves.items():
        fig, axes = new_figure(panel_size=(7.4, 4.4))
        series = [oscr_series(approach, [c for c, _ in runs], min(n for _, n in runs),
                              label=f"{LOSSES.get(approach).title} ({LOSSES.get(approach).default_detector})"
                                    + (" (not converged)" if converged.get(approach) is False else ""))
                  for approach, runs in by_approach.items()]
        plot_oscr(series, ax=axes[0, 0], title=f"OSCR, {unknown_set(unknown).title}: each approach with its "
                                                f"paper's detector")
        path = save_figure(fig, figures_dir / f"benchmark_oscr_{unknown}", ("png",), write)[0]
        written[unknown] = str(path.relative_to(run_dir))
    return written


# ------------------------------------------------------------------------ the report
def markdown(result: Dict, run_name: str) -> str:
    meta = result["meta"]
    sets = list(result["test_sets"])
    keys = fpr_keys(result["fprs"])
    lines = [f"# Benchmark: {meta.get('experiment', run_name)}", "",
             f"Run `{run_name}`: budget {meta.get('budget')}, {meta.get('seeds')} seeds, device "
             f"{meta.get('device')}, precision {meta.get('precision')}, training wall time "
             f"{meta.get('wall_time_s', 0) / 60:.1f} min, torch {meta.get('versions', {}).get('torch', '?')}. "
             f"Detector settings: {result['tuning']}.", "",
             "Each cell: mean over seeds [95 % t interval over seeds, cut to [0, 1]]. OSCR: area under the OSCR curve "
             "(CCR against FPR, linear FPR axis; at most the closed-set accuracy). Rows ranked by the OSCR "
             "averaged over the unknown-unknown (D_a) sets; † ties decide more than 1 % of that set's "
             "ranking.", "", *decision_rule(result), "",
             "## What the data says", "", *[f"- {line}" for line in result["summary"]], ""]
    marks = _marks(result["tests"])
    lines += _papers_rows(result, sets, marks)
    lines += _matrix(result["rows"])
    header = ["rank", "approach/detector", "closed-set acc.", *(f"{s} OSCR" for s in sets),
              "vs EOS, same detector (secondary)", "vs MSP (secondary)"]
    lines += ["## OSCR", "", _row_md(header), _rule(header)]
    for row in result["rows"]:
        cells = [str(row["rank"]) if row["rank"] else "—", _label(row), _fmt(row["closed_set_accuracy"])]
        cells += [_fmt(row["test"].get(s, {}).get("oscr")) + _tie(row, s) for s in sets]
        cells += [marks["approaches"].get(row["row"], ""), marks["detectors"].get(row["row"], "")]
        lines.append(_row_md(cells))
    for s in sets:
        header = ["approach/detector", "AUROC", *(f"CCR@{k}" for k in keys), "tied share"]
        lines += ["", f"## {s} ({result['test_sets'][s]:,} unknowns)", "", _row_md(header), _rule(header)]
        for row in result["rows"]:
            cell = row["test"].get(s)
            if cell is None:
                continue
            lines.append(_row_md([_label(row), _fmt(cell["auroc"]),
                                  *(_fmt(cell["ccr_at_fpr"].get(k)) for k in keys), f"{cell['tied_share']:.4f}"]))
    header = ["family", "row", "against", "difference [95 % interval]", "SE (seeds, samples)", "p", "p (Holm)",
              "90 % interval", "decision"]
    lines += ["", "## Tests", "", f"Difference: mean over seeds of the row's mean D_a OSCR minus the reference's. "
              f"SE: the larger of the seeds' standard error and the test samples' (paired bootstrap; '—' where not "
              f"computed). Holm's correction within each family; the 90 % interval is what the equivalence test "
              f"reads against ±{MARGIN}.", "", _row_md(header), _rule(header)]
    for family, (kind, _) in FAMILIES.items():
        for t in result["tests"][family]:
            samples = "—" if t["se_samples"] is None else f"{t['se_samples']:.4f}"
            lines.append(_row_md([kind, t["row"], t["against"],
                                  f"{t['difference']:+.4f} {_bounds(t['interval'])}",
                                  f"{t['se']:.4f} ({t['se_seeds']:.4f}, {samples})", _p(t["p"]), _p(t["p_holm"]),
                                  _bounds(t["equivalence_interval"]), mark(t)]))
    if result["notes"]:
        lines += ["", "Not scored:", "", *[f"- {n}" for n in result["notes"]]]
    for unknown, path in result.get("oscr_figures", {}).items():
        lines += ["", f"![OSCR curves on {unknown}]({path})"]
    lines += ["", "Figures of the paper's rows (Fig. 1, OSCR curves) and the paper's tables of this run: `report.md`.",
              ""]
    return "\n".join(lines)


def _papers_detector(approach: str) -> str:
    from agnostophobia.losses import LOSSES

    return LOSSES.get(approach).default_detector


def is_papers_detector(approach: str, detector: str) -> bool:
    """Whether ``detector`` is the score the paper of ``approach`` thresholds (its loss's
    ``default_detector``): the training methods compared as published."""
    from agnostophobia.losses import LOSSES

    return detector == LOSSES.get(approach).default_detector


def papers_rows(rows: List[Dict]) -> List[Dict]:
    """The rows of each approach with its paper's detector (:func:`is_papers_detector`), ranked."""
    return [r for r in rows if is_papers_detector(r["approach"], r["detector"])]


def _papers_rows(result: Dict, sets: List[str], marks: Dict) -> List[str]:
    """The short table first: one row per approach, with its paper's detector and the mean OSCR
    over the unknown-unknown sets the ranking reads."""
    header = ["approach", "detector", "closed-set acc.", "mean D_a OSCR", "mean D_a OSCR, log FPR",
              *(f"{s} OSCR" for s in sets), "vs EOS (primary)"]
    lines = ["## Each approach with its paper's detector", "",
             "OSCR, log FPR: the area under the same curve over a log FPR axis from the smallest FPR each set "
             "resolves (10/#unknowns) to 1, normalised to [0, 1]: it reads the low-FPR end, where networks "
             "that reject almost every unknown differ, which the linear area hardly weighs.", "",
             _row_md(header), _rule(header)]
    for row in papers_rows(result["rows"]):
        mean = _interval(row["mean_oscr_per_seed"]) if row["mean_oscr_per_seed"] else None
        mean_log = _interval(row["mean_oscr_log_per_seed"]) if row["mean_oscr_log_per_seed"] else None
        cells = [row["approach"] + _marked(row),  # the row's label is the approach's name: marked once
                 row["detector"], _fmt(row["closed_set_accuracy"]), _fmt(mean), _fmt(mean_log)]
        cells += [_fmt(row["test"].get(s, {}).get("oscr")) + _tie(row, s) for s in sets]
        lines.append(_row_md([*cells, marks["primary"].get(row["row"], "")]))
    keys = fpr_keys(result["fprs"])
    if keys:  # the low-FPR end, which the OSCR area on its linear axis weighs little
        header = ["approach", "detector", *(f"{s} CCR@{keys[0]}" for s in sets)]
        lines += ["", f"CCR at {keys[0]}, the smallest FPR of the report's columns, the same rows. "
                  f"{_columns_resolution(result)}", "", _row_md(header), _rule(header)]
        for row in papers_rows(result["rows"]):
            cells = [_fmt(row["test"].get(s, {}).get("ccr_at_fpr", {}).get(keys[0])) for s in sets]
            lines.append(_row_md([row["approach"], row["detector"], *cells]))
    return [*lines, ""]


def _columns_resolution(result: Dict) -> str:
    """Where the CCR columns' FPRs come from, and what the test sets would resolve: the columns are
    the FPRs the validation negatives support (a CCR at FPR >= 10/#negatives), each test set resolves
    down to 10/#unknowns, which may be smaller."""
    negatives = result.get("val_negatives")
    validation = (f"the {negatives:,} validation negatives" if negatives else "the validation negatives")
    tests = ", ".join(f"{name} {10 / n:.2g}" for name, n in result["test_sets"].items() if n)
    return (f"The columns are the FPRs {validation} support (10/#negatives, rounded up to the series 1e-4, 2e-4, "
            f"5e-4, 1e-3, ...); each test set alone resolves down to 10/#unknowns: {tests}.")


def _matrix(rows: List[Dict]) -> List[str]:
    """Every approach (a line, in the order of the short table) with every detector (a column):
    the mean D_a OSCR over seeds; the best detector of each approach in bold; "—" where a
    detector does not apply to the approach or was not scored."""
    approaches = list(dict.fromkeys(r["approach"] for r in papers_rows(rows) + rows))
    detectors = sorted({r["detector"] for r in rows})
    cell = {(r["approach"], r["detector"]): float(np.mean(r["mean_oscr_per_seed"]))
            for r in rows if r["mean_oscr_per_seed"]}
    header = ["approach", *detectors]
    lines = ["## Every approach with every detector (mean D_a OSCR)", "", _row_md(header), _rule(header)]
    for approach in approaches:
        mine = [cell[(approach, d)] for d in detectors if (approach, d) in cell]
        best = max(mine) if mine else None
        texts = [("—" if (approach, d) not in cell else
                  f"**{cell[(approach, d)]:.3f}**" if cell[(approach, d)] == best else f"{cell[(approach, d)]:.3f}")
                 for d in detectors]
        lines.append(_row_md([approach, *texts]))
    return [*lines, ""]


def _label(row: Dict) -> str:
    return row["row"] + _marked(row)


def _marked(row: Dict) -> str:
    """Why a row is not ranked, as the tables say it."""
    return (" (not converged)" if row["converged"] is False else "") + \
        ("" if row["complete"] else f" (incomplete: {len(row['seeds'])} seed(s))")


def _tie(row: Dict, name: str) -> str:
    cell = row["test"].get(name)
    return " †" if cell is not None and cell["tied_share"] > TIE_FLAG else ""


def _marks(tests: Dict) -> Dict[str, Dict[str, str]]:
    return {family: {t["row"]: mark(t) for t in family_tests} for family, family_tests in tests.items()}


def _bounds(ends: Sequence[Optional[float]]) -> str:
    return "[—]" if None in ends else f"[{ends[0]:+.4f}, {ends[1]:+.4f}]"


def _p(value: Optional[float]) -> str:
    return "undefined" if value is None else f"{value:.3g}"


def decision_rule(result: Dict) -> List[str]:
    """The report's paragraph on what its marks mean."""
    seeds = result["seeds"]
    return [f"Marks: each comparison of the mean D_a OSCR over seeds, decided against a margin declared before the "
            f"run (±{MARGIN}): **better**/**worse**, the row is above/below its reference by at least the margin, "
            f"with Holm-adjusted p below {ALPHA} within its family; **equivalent**, the 90 % interval of "
            f"the difference lies inside ±{MARGIN} (two one-sided tests at {ALPHA}); **not resolved ({seeds} "
            f"seeds)**, neither: the data cannot say at this number of seeds. The standard error of a difference "
            f"is the seeds' spread, floored by a paired bootstrap over the shared test samples. Families, each "
            f"Holm-adjusted on its own at {ALPHA} (not the whole report): "
            + "; ".join(f"{kind}, {compares}" for kind, compares in FAMILIES.values()) + "."]


def _row_md(cells: Sequence[str]) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def _rule(header: Sequence[str]) -> str:
    return "|" + "---|" * len(header)
