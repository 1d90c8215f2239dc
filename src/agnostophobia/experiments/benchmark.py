r"""``agnostophobia benchmark PROTOCOL --budget converged|smoke``: every registered training method
with every applicable post-processor, on converged networks, with intervals over seeds and tests
of significance, in one report.

One command does what a reviewer of the field asks of a comparison (Vaze et al., ICLR 2022: open-set
scores follow closed-set accuracy, so an unconverged network ranks training length, not methods):

1. **Train** every registered approach (:data:`~agnostophobia.losses.LOSSES`) for ``--seeds``
   seeds (default 5: an interval over 3 seeds is too wide to tell converged methods apart; OpenOOD uses 3) at the budget, through ``reproduce`` (:func:`~agnostophobia.
   experiments.reproduce.reproduce`): the same run folder, records, per-sample outputs, report and
   Fig. 1/OSCR figures; an interrupted benchmark continues where it stopped (finished models are
   kept, an unfinished one resumes from its last epoch), and runs train two at a time where
   ``concurrent_runs: auto`` finds that faster. An approach whose training diverges is set aside
   with the fine-tunes that start from it, and the others go on (:func:`set_aside`; the report's
   notes say why).
2. **Choose each detector's settings on validation data only** (``tune-detectors``, at the
   smallest FPR of 10⁻², 10⁻¹, ... the validation negatives support; ``--partial``: a detector
   without a setting keeps the config's).
3. **Score** every (approach, detector) on every test set through the one code path of ``compare``
   (:func:`~agnostophobia.deploy.compare.compare_models`: the reachable-FPR rule, CCR only at
   FPR ≥ 10/#negatives), per seed.
4. **Report** (``benchmark.md``, ``benchmark.json``): per row and unknown set, the area under the OSCR
   curve (Eq. 3, linear FPR axis, :func:`~agnostophobia.metrics.oscr_area`; for the paper's rows also
   over a log FPR axis from 10/#unknowns, the low-FPR end), AUROC, FPR at 95 % TPR, AUPR-In, AUPR-Out
   and CCR at the supported FPRs and at 10/#unknowns, each as the mean over seeds with its 95 % t
   interval (:func:`~agnostophobia.metrics.seed_interval`); the network's closed-set accuracy on the
   test knowns and on the validation knowns, a network whose *validation* accuracy is below the
   protocol's declared threshold (LeNet++ 0.985, CIFAR 0.90;
   :attr:`~agnostophobia.data.protocol_types.ProtocolSpec.converged_accuracy`) marked *not converged*
   and left out of ranks, tests and bold marks, as is an approach trained on fewer seeds than the
   others; the share of scores that ties decide (:func:`~agnostophobia.metrics.tied_share`, flagged
   above 1 %); comparisons of the OSCR area averaged over the unknown-unknown (D_a) sets in five
   families (:data:`~agnostophobia.experiments.benchmark_comparisons.FAMILIES`): the **primary** one,
   each approach with its paper's detector against Entropic Open-Set with its paper's, and three
   **secondary** ones, each approach trained on the knowns alone against softmax (both with their
   papers' detectors), each approach against Entropic Open-Set with the same detector and each
   detector against max-softmax on the same network, and the primary family's pairs on the area over a
   log FPR axis (on a protocol whose negatives are an outside set the
   others never saw, the literature's splits, or in a run without Entropic Open-Set, the approaches
   are compared with softmax instead: :func:`~agnostophobia.experiments.benchmark_rows.reference_approach`).
   Each comparison is the mean paired difference over seeds
   with its t interval, its standard error the seeds' spread and a paired bootstrap over the shared
   test samples added in quadrature
   (:func:`~agnostophobia.experiments.benchmark_comparisons.sample_replicates`,
   :func:`~agnostophobia.metrics.paired_difference`), decided against the margin
   :data:`~agnostophobia.experiments.benchmark_comparisons.MARGIN` declared before the run
   (:func:`~agnostophobia.metrics.decide`: better, worse, equivalent or not resolved at the run's
   seeds), with Holm's correction within each family (each family at
   :data:`~agnostophobia.experiments.benchmark_comparisons.ALPHA`, not the whole report); and a
   paragraph written from the numbers, which says the smallest difference each family resolves.

**The benchmark's choices on validation data, the test sets read once.** Convergence, the detectors' settings, the
ranking metric, the rank, the best row and each approach's best (bold) detector are read from the
validation split (held-out knowns and the negatives held out of training, as ``compare`` scores them;
a rank's tests add the validation samples' share from a paired bootstrap over them to the seeds' spread,
:func:`~agnostophobia.experiments.benchmark_ranking.with_validation_se`);
the test sets give only the numbers reported and the comparisons' decisions, and the report has a table
of which split each choice used
(:func:`~agnostophobia.experiments.benchmark_report.choices_and_splits`), with any choice of the
network's recipe made on test images before the run (``chosen_on_test_images``). The ranking metric is chosen
among :data:`~agnostophobia.experiments.benchmark_ranking.RANKING_CANDIDATES` by
:data:`~agnostophobia.experiments.benchmark_ranking.RANKING_RULE` from each candidate's gap to
closed-set accuracy and its separation of the converged approaches in seed half-widths
(:func:`~agnostophobia.experiments.benchmark_ranking.candidate_numbers`,
:func:`~agnostophobia.experiments.benchmark_ranking.ranking_metric`): on LeNet++ the linear OSCR area is
bounded by closed-set accuracy and nearly reaches it for every approach trained with negatives, so it
cannot separate them. A registered protocol declares the metric its benchmark ranks by
(:attr:`~agnostophobia.data.protocol_types.ProtocolSpec.ranking_metric`, read from the pooled validation pairs
of every run published by 2026-12-05), and ``--ranking-metric`` overrides it; the rule chooses where
neither does (a user's protocol). The families of comparisons still test the linear OSCR area against
:data:`~agnostophobia.experiments.benchmark_comparisons.MARGIN`, declared for that area.

The report covers the approaches the run's ``config.yaml`` lists (the last call's, ``--set
approaches=`` included); models of others in the folder are named in its notes, not scored.
Everything is read from the stored outputs: rerunning after the training finished only recomputes
the tables (seconds to minutes).

This module is the command: what is run, the tuning, the scoring and ``benchmark.json``
(:func:`summarise`). The rest is one module per concept: ``benchmark_rows`` (each row's numbers
over seeds, the reference rows and which rows count), ``benchmark_ranking`` (the ranking metric's
rule and the ranks, on validation data), ``benchmark_comparisons`` (the families of comparisons,
the paired bootstrap, the margin and the decisions) and ``benchmark_report`` (``benchmark.md``'s
tables and text).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from agnostophobia._log import log_info
from agnostophobia._runlock import run_lock
from agnostophobia.data.protocols import unknown_set  # the registered protocols declare their sets there
from agnostophobia.deploy.request import ModelRequest
from agnostophobia.errors import AgnostophobiaError, TrainingDiverged
from agnostophobia.experiments.benchmark_comparisons import (ALPHA, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, MARGIN,
                                                             SampleReplicates, ValidationBootstrap, compare_families,
                                                             families, family_resolution, sample_replicates)
from agnostophobia.experiments.benchmark_ranking import (BY_FLAG, RANKING_CANDIDATES, check_ranking_metric,
                                                         rank_rows, ranking_metric, validation_bootstrap,
                                                         with_validation_se)
from agnostophobia.experiments.benchmark_report import markdown
from agnostophobia.experiments.benchmark_summary import what_the_data_says
from agnostophobia.experiments.benchmark_rows import (cells, check_accuracy_rule, converged_by_rule, far_sets,
                                                      interval_over_seeds, is_papers_detector, mean_oscr,
                                                      network_accuracy, ranked_sets, reference_approach)
from agnostophobia.experiments.benchmark_splits import extra_data_approaches, write_split_summary
from agnostophobia.experiments.request import RunRequest
from agnostophobia.rundir import RunDir

#: The keys of the run's config the report gives as the budget's recipe, the one every approach from
#: scratch trains with.
BUDGET_RECIPE = ("optimizer", "lr", "weight_decay", "scheduler", "epochs", "batch_size")
_FORMAT = 6  # 6: the ranks' validation bootstrap (val_se_samples, val_bootstrap); 5: the log-FPR area's family;
#              4: the knowns-only family; 3: every choice on validation data, the ranking metric chosen by
#              RANKING_RULE; 2: three families of tests, each with its decision against MARGIN (1: "significant")
#: Seeds per approach unless ``--seeds`` says otherwise: five (issue 55: OpenOOD's three give a 95 % t
#: half-width of 4.30 standard errors, against 2.78 at five); a paired test needs two.
DEFAULT_SEEDS = 5
#: The shipped protocols ``benchmark`` takes by name: (the config, the ``--set`` options it needs).
SHIPPED = {"lenet++": ("lenet++", ()), "cifar": ("cifar", ()),
           "cifar10-split": ("cifar", (("protocol", "cifar10-split"),)),
           "cifar10-split-b": ("cifar", (("protocol", "cifar10-split-b"),)),
           "osr-mnist": ("osr-mnist", ()), "osr-cifar10": ("osr-cifar10", ())}


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


def benchmark(target: str, request: Optional[RunRequest] = None, min_accuracy: Optional[float] = None,
              log: Callable[[str], None] = log_info, accuracy_margin: Optional[float] = None,
              ranking: Optional[str] = None) -> Path:
    """Train, tune, score and report (the module docstring); returns ``benchmark.md``'s path.
    ``target``: a protocol's name, a protocol YAML or an image folder; ``request``: the budget,
    seeds (default 5), output folder and training choices (its ``experiment`` is set here, from
    ``target``); ``accuracy_margin``: converge by the rule with an interval
    (:func:`~agnostophobia.experiments.benchmark_rows.converged_by_rule`) instead of the threshold;
    ``ranking``: a ranking metric declared before the run (``--ranking-metric``), in the place of the
    protocol's declared one or the rule (:func:`declared_ranking`)
    (:func:`~agnostophobia.experiments.benchmark_ranking.ranking_metric`)."""
    from agnostophobia.experiments.reproduce import reproduce
    from agnostophobia.losses import LOSSES

    config, protocol_options = experiment_for(target)
    request = (request or RunRequest(config)).but(experiment=config)
    seeds, budget = (DEFAULT_SEEDS if request.seeds is None else request.seeds), request.budget
    _check_min_accuracy(min_accuracy)
    _check_accuracy_margin(accuracy_margin)
    if ranking is not None:  # before any training
        check_ranking_metric(ranking)
    name = Path(target).stem if target not in SHIPPED else target
    out = request.out or Path("runs") / f"benchmark-{name}-{budget or 'config'}"
    options = (*protocol_options, ("approaches", list(LOSSES.names())), *request.set_options)
    request = request.but(seeds=seeds, out=out, set_options=options)
    experiment = request.load(budget).with_set_options(options)
    runs = request.split_runs(experiment, out)  # checks --split first
    _check_seeds(seeds, has_splits=runs[0][0] is not None)
    if accuracy_margin is not None and seeds < 2:
        raise AgnostophobiaError(f"--accuracy-margin {accuracy_margin}: the rule reads a paired interval over "
                                 f"seeds; give --seeds 2 or more")
    approaches, diverged = [value for key, value in options if key == "approaches"][-1], {}
    while True:  # an approach that diverges is set aside, and the others go on (issue 55)
        try:
            reproduce(request.but(set_options=(*options, ("approaches", approaches))), log=log)
            break
        except TrainingDiverged as error:
            approaches = set_aside(error, approaches, diverged)
            log(f"set aside: {diverged[error.approach]}; the benchmark goes on with the other "
                f"{len(approaches)} approaches")
    tables = [write_benchmark(folder, min_accuracy, log=log, diverged=diverged, accuracy_margin=accuracy_margin,
                              ranking=ranking) for _, folder in runs]
    if runs[0][0] is None:
        return tables[0]
    asked = [split for split, _ in runs]
    return write_split_summary(out, benchmarked_splits(out, experiment.train.protocol, asked), log=log)


def benchmarked_splits(out: Path, protocol: str, asked: Sequence[int]) -> List[Tuple[int, Path]]:
    """The split folders of ``out`` (a benchmark of ``protocol``) its summary covers: the ``asked``
    splits, and every other split an earlier call benchmarked there (its ``benchmark.json`` written),
    so that ``--split 0 --seeds 3`` after a run of every split at one seed adds seeds to split 0
    without dropping the others from ``benchmark-splits.md``."""
    from agnostophobia.data.protocols import protocol_spec
    from agnostophobia.experiments.request import split_folder

    return [(k, split_folder(out, k)) for k in range(len(protocol_spec(protocol).splits))
            if k in asked or RunDir(split_folder(out, k)).benchmark.is_file()]


def set_aside(error: TrainingDiverged, approaches: Sequence[str], diverged: Dict[str, str]) -> List[str]:
    """The approaches left after ``error``'s approach diverged: it is set aside, with every fine-tune
    that starts from its networks; ``diverged`` gains why, one line each (the report's notes). What
    finished is kept; a later call tries a set-aside approach again (from its last good checkpoint), so
    that a changed recipe is not refused by an old record. Raised again where the error names no
    approach of the list, or none is left."""
    from agnostophobia.training.fine_tune import start_approach

    if error.approach is None or error.approach not in approaches:
        raise error
    diverged[error.approach] = str(error)
    for approach in approaches:
        if start_approach(approach) == error.approach:
            diverged[approach] = f"not trained: it fine-tunes {error.approach}'s networks, and {error.approach} diverged"
    left = [approach for approach in approaches if approach not in diverged]
    if not left:
        raise TrainingDiverged(f"{error}; no approach of the benchmark is left to train", approach=error.approach)
    return left


def _check_seeds(seeds: int, has_splits: bool) -> None:
    """At least 2 seeds for the intervals and paired tests; a protocol with splits also takes 1, the
    literature's form (one network per split, the spread over the splits), its reports without
    intervals or tests."""
    if seeds < (1 if has_splits else 2):
        raise AgnostophobiaError(f"--seeds {seeds}: a benchmark needs at least 2 seeds for its intervals and "
                                 f"paired tests (default {DEFAULT_SEEDS}); a protocol with splits also takes 1, "
                                 f"one network per split")


def _check_accuracy_margin(value: Optional[float]) -> None:
    if value is not None and not 0 < value < 1:
        raise AgnostophobiaError(f"--accuracy-margin {value!r}: a difference of closed-set accuracy in (0, 1)")


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
    from agnostophobia.metrics import default_fpr

    negatives = validation_negatives(run_dir)
    fpr = default_fpr(negatives)
    if fpr is None:
        return f"not tuned: {negatives} validation negatives support no FPR; every detector has the config's settings"
    try:
        from agnostophobia.training.concurrent import available_cores

        tune_detectors(ModelRequest(run_dir, approaches=approaches, fpr=fpr, partial=True), processes=available_cores(),
                       log=log)
    except AgnostophobiaError as exc:
        return f"not tuned ({exc}); every detector has the config's settings"
    return f"tuned by tune-detectors on the validation split at FPR {fpr:g} ({negatives:,} validation negatives)"


def write_benchmark(run_dir, min_accuracy: Optional[float] = None, log: Callable[[str], None] = log_info,
                    diverged: Optional[Dict[str, str]] = None, accuracy_margin: Optional[float] = None,
                    ranking: Optional[str] = None) -> Path:
    """Tune the detectors on validation data, score every row and write ``benchmark.json`` and
    ``benchmark.md`` (each atomically, under the run's lock) from a trained run's stored outputs.
    ``diverged``: the approaches this call set aside and why (:func:`set_aside`), named in the
    report's notes and under ``diverged`` in ``benchmark.json``; ``accuracy_margin`` and
    ``ranking``: as :func:`benchmark`'s."""
    from agnostophobia.deploy.compare import compare_models
    from agnostophobia.detectors.stored import run_scores
    from agnostophobia.losses import trained_on_negatives
    from agnostophobia.training.records import check_run

    run_dir, diverged = Path(run_dir), diverged or {}
    _check_min_accuracy(min_accuracy)
    _check_accuracy_margin(accuracy_margin)
    records = check_run(run_dir, "benchmark")
    approaches, left_out = benchmarked_approaches(records)
    threshold = min_accuracy if min_accuracy is not None else _declared_accuracy(records.config)
    check_accuracy_rule(threshold, accuracy_margin, approaches,  # before the tuning and scoring it would waste
                        seeds=len({seed for seed, approach, _ in records.models if approach in approaches}))
    tuning = _tune(run_dir, approaches, log)
    declared = Declared(accuracy_margin, *declared_ranking(records.config, ranking))
    # the bootstrap over the validation samples, of the metric that will rank (every candidate where the rule chooses)
    val_bootstrap = ValidationBootstrap([declared.ranking] if declared.ranking else list(RANKING_CANDIDATES))
    with run_lock(run_dir, create=False):
        comparison = compare_models(run_dir, approaches=approaches, curves=True, val_scores=val_bootstrap)
        models = [m for m in records.models if m[1] in approaches]
        extra, outside = extra_data_approaches(records.config.get("protocol"), approaches)
        replicates = sample_replicates(models, run_scores(run_dir))._replace(val=val_bootstrap.replicates)
        result = summarise(comparison.rows, threshold, replicates, extra_data=extra,
                           negatives=trained_on_negatives(approaches), declared=declared)
        notes = left_out_notes(left_out, diverged)
        if extra:  # a protocol whose negatives are an outside set (osr-mnist, osr-cifar10)
            notes.append(f"extra data: {', '.join(extra)} trained on negatives from an outside set ({outside}) that "
                         f"the other approaches never saw; their rows are marked (extra data) and ranked apart, "
                         f"after the others, their ranks counted among themselves")
        result["recipes"] = training_recipes(approaches, records.config)
        result["budget_recipe"] = {key: records.config.get(key) for key in BUDGET_RECIPE}
        result["chosen_on_test_images"] = _chosen_on_test_images(records.config.get("model"))
        result["trained_on_negatives"] = trained_on_negatives(approaches)
        result["paper"] = papers_numbers(records.meta, list(comparison.test_sets))
        result.update({"format": _FORMAT, "tuning": tuning, "notes": notes + comparison.notes, "diverged": diverged,
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


def left_out_notes(left_out: Sequence[str], diverged: Dict[str, str]) -> List[str]:
    """The report's notes of the approaches it does not score: each set aside after a divergence
    (why, from :func:`set_aside`), and each whose models are in the folder from an earlier call."""
    notes = [f"{approach}: set aside, the benchmark went on without it ({why})" for approach, why in diverged.items()]
    return notes + [f"{approach}: its models are in the folder, but it is not among this benchmark's approaches "
                    f"(config.yaml)" for approach in left_out if approach not in diverged]


def papers_numbers(meta: Optional[Dict], sets: Sequence[str]) -> Dict:
    """The paper's Table 2 for the run's test sets, ``{"ccr": {set: {approach: {fpr: CCR}}}, "sizes":
    {set: the paper's number of unknowns}}``, where the run is a paper experiment on its own protocol
    (:func:`~agnostophobia.experiments.report.has_paper_numbers`); empty otherwise."""
    from agnostophobia.experiments.paper_numbers import PAPER_SIZES, TABLE2, TABLE2_FPRS
    from agnostophobia.experiments.report import has_paper_numbers

    if not meta or not has_paper_numbers(meta):
        return {}
    table = TABLE2[meta["experiment"]]
    ccr = {s: {a: dict(zip(TABLE2_FPRS, values)) for a, values in table[s].items()} for s in sets if s in table}
    return {"ccr": ccr, "sizes": {s: PAPER_SIZES[s] for s in ccr if s in PAPER_SIZES}} if ccr else {}


def training_recipes(approaches: Sequence[str], config: Dict) -> Dict[str, Dict]:
    """How each approach of the run trained, for the report's "Training recipes": a fine-tune's
    authors' recipe for the protocol's images (``start``, its schedule as the run applies it, with
    ``fine_tune_epochs`` and ``fine_tune_exact``: :meth:`~agnostophobia.losses.FineTune.schedule`,
    the recipe's ``source`` and what ``differs`` here, epochs other than the recipe's included:
    :meth:`~agnostophobia.losses.FineTune.departures`); ``start`` None for an approach trained from scratch with the budget's recipe."""
    from agnostophobia.training.fine_tune import recipe, trained_at

    out, exact, epochs = {}, bool(config.get("fine_tune_exact")), config.get("fine_tune_epochs")
    for approach in approaches:
        chosen = recipe(approach, config.get("protocol"))
        out[approach] = {"start": None} if chosen is None else {
            "start": chosen.start, **chosen.schedule(epochs, exact), "source": chosen.source,
            "differs": chosen.departures(exact, epochs, start=trained_at(config), keep=config.get("keep_checkpoint"))}
    return out


def _declared_accuracy(config: Dict) -> Optional[float]:
    from agnostophobia.data.protocols import protocol_spec

    protocol = config.get("protocol")
    return protocol_spec(protocol).converged_accuracy if isinstance(protocol, str) else None


def declared_ranking(config: Dict, flag: Optional[str] = None) -> Tuple[Optional[str], str]:
    """The ranking metric a run declares, and who declared it: ``--ranking-metric`` (``flag``) where
    given, else the protocol's registration (:attr:`~agnostophobia.data.protocol_types.ProtocolSpec.ranking_metric`),
    else ``(None, ...)``: the rule chooses on the run's validation data (a user's protocol)."""
    from agnostophobia.data.protocols import protocol_spec

    if flag is not None:
        return flag, BY_FLAG
    protocol = config.get("protocol")
    metric = protocol_spec(protocol).ranking_metric if isinstance(protocol, str) else ""
    return (metric or None), (protocol if metric else BY_FLAG)


def _meta(meta: Optional[Dict]) -> Dict:
    """What the report's header says of the run, from its record (``run_meta.json``, already read)."""
    meta = meta or {}
    keys = ("experiment", "budget", "seeds", "command", "device", "wall_time_s", "precision", "versions",
            "code", "timings_s")
    return {key: meta[key] for key in keys if key in meta}


def _chosen_on_test_images(model: Optional[str]) -> Optional[str]:
    """What the run's network declares of its recipe as chosen on test images, before the benchmark's
    rules (``CHOSEN_ON_TEST_IMAGES`` beside the network's code); None for the others."""
    from agnostophobia.models import MODELS

    return getattr(MODELS.get(model), "CHOSEN_ON_TEST_IMAGES", None) if model in MODELS else None


# ------------------------------------------------------------------------ benchmark.json
class Declared(NamedTuple):
    """The reading rules a run declares on the command line or its protocol declares, beside the threshold."""
    accuracy_margin: Optional[float] = None  # --accuracy-margin: converge by the rule with an interval
    ranking: Optional[str] = None  # the metric that ranks, in the rule's place
    ranking_by: str = BY_FLAG  # who declared it: --ranking-metric, or the protocol's name


def summarise(rows: List[Dict], min_accuracy: Optional[float], replicates: SampleReplicates = SampleReplicates(),
              extra_data: Sequence[str] = (), negatives: Sequence[str] = (), declared: Declared = Declared()) -> Dict:
    """Rows with intervals, convergence, ranks, tests and the paragraph (``benchmark.json``).
    ``replicates``: each row's mean D_a OSCR areas (linear and log-FPR) on the paired bootstrap's
    resamples of the test samples, and its validation ranking metrics on those of the validation
    samples (:class:`~agnostophobia.experiments.benchmark_comparisons.SampleReplicates`), which add
    to each comparison's and each rank's standard error (the ranks' as one number a pair of ranked
    rows, :func:`~agnostophobia.experiments.benchmark_ranking.with_validation_se`, and
    ``val_bootstrap``); None in it: the seeds' spread alone (the report says so).
    ``extra_data``: the approaches trained on an outside set of negatives
    (:func:`~agnostophobia.experiments.benchmark_splits.extra_data_approaches`): their rows are
    marked and ranked apart (:func:`~agnostophobia.experiments.benchmark_ranking.rank_rows`).
    ``negatives``: the approaches trained on negatives (:func:`~agnostophobia.losses.trained_on_negatives`),
    of the protocol or an outside set, whose images the validation negatives hold out: their rows are
    ranked apart too, and the ranking metric's rule does not read them. ``declared``: the convergence
    rule with an interval instead of the threshold
    (:func:`~agnostophobia.experiments.benchmark_rows.converged_by_rule`), and a ranking metric
    declared before the run (:func:`~agnostophobia.experiments.benchmark_ranking.ranking_metric`)."""
    approaches = list(dict.fromkeys(r["approach"] for r in rows))
    sets = list(dict.fromkeys(name for r in rows for name in r["test"]))
    accuracy = {a: network_accuracy(rows, a) for a in approaches}
    val_accuracy = {a: network_accuracy(rows, a, "val") for a in approaches}
    run_seeds = max((len(r["seed_ids"]) for r in rows), default=0)
    # judged on the validation knowns: the test sets are read once, for the numbers reported
    accuracy_margin = declared.accuracy_margin
    convergence = converged_by_rule(val_accuracy, min_accuracy, accuracy_margin)
    out_rows = []
    for row in rows:
        acc, val_acc = accuracy[row["approach"]], val_accuracy[row["approach"]]
        converged = convergence[row["approach"]]
        out_rows.append({"approach": row["approach"], "detector": row["detector"], "row": row["row"],
                         "settings": row["settings"], "settings_from": row["settings_from"],
                         "seeds": row["seed_ids"],
                         "closed_set_accuracy": interval_over_seeds(acc) if acc else None,
                         "val_closed_set_accuracy": interval_over_seeds(val_acc) if val_acc else None,
                         "accuracy_per_seed": {"val": val_acc, "test": acc},
                         "converged": converged, "complete": len(row["seed_ids"]) == run_seeds,
                         "extra_data": row["approach"] in extra_data, "negatives": row["approach"] in negatives,
                         "mean_oscr_per_seed": mean_oscr(row), "mean_oscr_log_per_seed": mean_oscr(row, "oscr_log"),
                         "mean_far_oscr_per_seed": mean_oscr(row, far=True),
                         "mean_da_per_seed": {key: mean_oscr(row, key) for key in RANKING_CANDIDATES},
                         "val": row["val"],
                         "test": {name: cells(numbers) for name, numbers in row["test"].items()}})
    ranking = ranking_metric(out_rows, declared=declared.ranking, declared_by=declared.ranking_by)
    out_rows = with_validation_se(rank_rows(out_rows, ranking["chosen"]), ranking["chosen"], replicates.val)
    reference = reference_approach(approaches, extra_data)
    tests = compare_families(out_rows, reference, replicates)
    bootstrapped = any(t["se_samples"] is not None for family in tests.values() for t in family)
    result = {"min_accuracy": min_accuracy, "accuracy_margin": accuracy_margin, "rows": out_rows, "tests": tests, "alpha": ALPHA, "margin": MARGIN,
              "reference": reference,
              "families": {family: {"kind": kind, "compares": compares, "resolution":
                                    family_resolution(tests[family], run_seeds)}
                           for family, (kind, compares) in families(reference).items()},
              "sample_bootstrap": ({"resamples": BOOTSTRAP_RESAMPLES, "seed": BOOTSTRAP_SEED}
                                   if bootstrapped else None),
              "val_bootstrap": validation_bootstrap(out_rows, ranking["chosen"]),
              "seeds": run_seeds, "ranking": ranking, "ranked_sets": ranked_sets(sets), "far_sets": far_sets(sets),
              "accuracy": {a: {"val": interval_over_seeds(val_accuracy[a]) if val_accuracy[a] else None,
                               "test": interval_over_seeds(accuracy[a]) if accuracy[a] else None}
                           for a in approaches}}
    result["summary"] = what_the_data_says(result)
    return result


# ------------------------------------------------------------------------ the figures
def oscr_figures(run_dir: Path, result: Dict, comparison) -> Dict[str, str]:
    """Per unknown-unknown set, the OSCR curves (mean over seeds, ± 1 std) of every approach with its
    paper's detector, from the FPR of 10 false positives (the resolution the tables state) to 1,
    written into the run's ``figures/benchmark_oscr_SET.png``; ``{set: path}`` relative to the run
    (none where matplotlib is missing). The curves are those ``comparison`` kept while scoring
    (``compare_models(..., curves=True)``): nothing is scored twice."""
    try:
        from agnostophobia.plotting.curves import oscr_series, plot_oscr
        from agnostophobia.plotting.panels import new_figure, save_figure
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
        # from the FPR the tables call resolved (10 false positives): further left, one unknown decides a step
        fewest = min(n for runs in by_approach.values() for _, n in runs)
        plot_oscr(series, ax=axes[0, 0], title=f"OSCR, {unknown_set(unknown).title}: each approach with its "
                                                f"paper's detector", xlim=(min(10 / fewest, 1.0), 1.0))
        path = save_figure(fig, figures_dir / f"benchmark_oscr_{unknown}", ("png",), write)[0]
        written[unknown] = str(path.relative_to(run_dir))
    return written
