"""``agnostophobia reproduce EXPERIMENT``: train every approach on one protocol, evaluate
on every unknown set, store per-sample outputs, then write metrics, report and figures.

Interrupted runs resume: finished approaches are skipped, an unfinished one continues
from its last epoch checkpoint.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, Dict, List, Optional, Sequence, Tuple

import torch
from agnostophobia._yaml import dump_yaml

from agnostophobia.data.preprocess import OURS
from agnostophobia.data.protocols import protocol_spec, require_protocol_data
from agnostophobia.errors import ConfigError
from agnostophobia.losses import LOSSES
from agnostophobia.detectors.stored import detector_settings
from agnostophobia.models import build_model
from agnostophobia.training.outputs import store_outputs
from agnostophobia.experiments.report import write_metrics, write_report
from agnostophobia.experiments.headline import headline_rows, headline_table, trained_headline_rows
from agnostophobia.experiments.request import RunRequest
from agnostophobia.experiments.run_record import (RunCommand, StoredTraining, check_recorded_classes,
                                                  protocol_classes, record_data_sources, record_or_read, write_config,
                                                  write_run_record)
from agnostophobia.training import distributed
from agnostophobia.training.concurrent import (Job, check_concurrent_runs, resolve_concurrent_runs, run_jobs,
                                               threads_per_run)
from agnostophobia.training.config import ExperimentConfig, TrainConfig, check_approaches, check_seeds, protocol_for
from agnostophobia.training.epoch_log import use_tensorboard
from agnostophobia.training.fine_tune import check_starts, start_approach
from agnostophobia.training.precision import choose_precision
from agnostophobia.training.records import (RecordError, check_data_sources, check_run_folder, check_training_records,
                                            read_classes, read_data_sources, read_notes, read_run_config,
                                            read_timings, read_wall_time)
from agnostophobia.rundir import DATA_NOTES, PREPROCESSING_NOTES, ModelDir, RunDir
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.loaders import is_streamed
from agnostophobia.training.seed_batch import batches_over_seeds, check_batched_seeds, resolve_batched_seeds
from agnostophobia.training.cuda_graph import check_cuda_graph
from agnostophobia.training.device import resolve_device
from agnostophobia.training.resume import check_resumable, is_finished
from agnostophobia.training.fitting import fit, fit_seeds
from agnostophobia._runlock import run_lock
from agnostophobia._log import log_info


def default_budget() -> str:
    return "paper" if torch.cuda.is_available() else "cpu"


def file_protocol_first(cfg: TrainConfig):
    """A protocol from files, built (and so checked) before anything of the run is written,
    and the model tried on its input; None for a registered protocol (built when needed)."""
    if not protocol_spec(cfg.protocol).check_by_building:
        return None
    protocol = protocol_for(cfg)
    check_model_input(cfg, protocol)
    return protocol


def check_model_input(cfg: TrainConfig, protocol) -> None:
    """One forward pass of the untrained model on two blank inputs of the protocol's shape,
    so that a model that cannot take them (LeNet++ needs 1x28x28) is one clear line."""
    model = build_model(cfg.model, num_outputs=protocol.num_classes + 1, **cfg.model_kwargs).eval()
    try:
        with torch.no_grad():
            model(torch.zeros(2, *protocol.input_shape))
    except RuntimeError as exc:
        shape = "x".join(map(str, protocol.input_shape))
        raise ConfigError(f"config key 'model': {cfg.model!r} cannot take the protocol's {shape} input "
                          f"(image_size and channels of the protocol; model_kwargs): "
                          f"{str(exc).splitlines()[0]}") from None


def train_and_store(experiment: ExperimentConfig, out: Path, device: torch.device, log=log_info,
                    make_protocol: Optional[Callable[[TrainConfig], Any]] = None,
                    protocol=None) -> StoredTraining:
    """Train (or resume) every approach and seed on ``device`` (resolved once by the command,
    :func:`configure`); returns the protocol notes, class names and timings. ``protocol``: the
    run's protocol when already built (else built when needed).

    ``make_protocol(cfg)`` gives the protocol to train on when one is needed (default
    :func:`protocol_for`; ``tune`` passes its cross-class variant). The runs train one after
    another, or ``experiment.concurrent_runs`` at a time in child processes
    (:mod:`agnostophobia.training.concurrent`). Under DDP every process trains each run in turn;
    rank 0 alone reads and writes ``out`` and predicts the stored outputs (in dataset order, on
    whole sets) while the others wait (``training.distributed``).
    """
    world = distributed.current()
    log = log if world.is_main else (lambda message: None)
    run = RunDir(out)
    timings = read_timings(out) if world.is_main else {}
    # a run from before wall_time.json trained one run after another: its wall time was the sum
    wall = (read_wall_time(out) if world.is_main else None) or {
        "training_s": sum(timings.values()), "concurrent_runs": 1}
    pending = pending_runs(experiment, run, world, log)
    if pending and protocol is None:
        protocol = (make_protocol or protocol_for)(pending[0][0])
    if protocol is not None and world.is_main:
        record_protocol(run, protocol, bool(timings), log)
    batched = bool(pending) and resolve_batched_seeds(experiment.batched_seeds, device, experiment.seeds,
                                                      world.distributed, is_streamed(protocol.train))
    units = training_units(pending, batched, world)  # a batch of seeds is one unit of concurrency
    processes = 1 if world.distributed or not units else resolve_concurrent_runs(
        experiment.concurrent_runs, device, len(units), experiment.train.epochs * len(protocol.train.labels))
    start, before = time.perf_counter(), wall["training_s"]

    def done(unit: List[Tuple[TrainConfig, ModelDir]], seconds: float) -> None:
        for cfg, _ in unit:  # a batch's seconds are shared out among its seeds
            key = run_key(cfg)
            timings[key] = timings.get(key, 0.0) + seconds / len(unit)
        run.write(run.timings, lambda tmp: Path(tmp).write_text(json.dumps(timings, indent=1)))
        # the wall time, summed over the invocations, after each unit: a killed invocation keeps what it finished
        wall.update(training_s=before + time.perf_counter() - start, concurrent_runs=processes, batched_seeds=batched)
        run.write(run.wall_time, lambda tmp: Path(tmp).write_text(json.dumps(wall, indent=1)))
        log(f"{unit_name(unit)}: done in {seconds:.0f} s")

    if processes > 1:
        # a cpu_threads the config sets is kept as it is, also for the last runs
        threads = experiment.train.cpu_threads or threads_per_run(processes)
        log(f"training {len(pending)} runs as {len(units)} unit(s), {processes} at a time in their own processes, "
            f"{threads} thread(s) each (concurrent_runs: {experiment.concurrent_runs}, "
            f"batched_seeds: {experiment.batched_seeds})")
    # fine-tunes after every other run: each starts from a network of the first phase (training.fine_tune)
    for phase in (units_from_scratch(units, True), units_from_scratch(units, False)):
        if processes == 1:
            for unit in phase:
                log(starting(unit, protocol, device))
                seconds = fit_and_store_unit(unit, protocol, device)
                if world.is_main:
                    done(unit, seconds)
                world.barrier()  # the other processes wait while rank 0 predicts
        elif phase:
            # one bar per process would garble the terminal: each run logs its start and end instead
            quiet = {unit_name(unit): [(dataclasses.replace(cfg, progress=False), model) for cfg, model in unit]
                     for unit in phase}
            jobs = [Job(name, fit_and_store_unit, (unit, protocol, device)) for name, unit in quiet.items()]
            run_jobs(jobs, processes, threads,
                     on_start=lambda job, quiet=quiet: log(starting(quiet[job.name], protocol, device)),
                     on_done=lambda job, seconds, quiet=quiet: done(quiet[job.name], seconds),
                     share_out=experiment.train.cpu_threads is None)
    if not world.is_main:
        return StoredTraining(timings)
    return stored_training(run, timings, wall, protocol)


def pending_runs(experiment: ExperimentConfig, run: RunDir, world, log) -> List[Tuple[TrainConfig, ModelDir]]:
    """Every (approach, seed) of ``experiment`` still to train (or continue), with its model
    folder; a run that finished earlier with its outputs stored is kept, and said so."""
    pending = []
    for seed in experiment.seed_numbers:
        for approach in experiment.approaches:
            cfg = experiment.for_approach(approach, seed)
            if world.from_main(lambda: is_kept(run, cfg)):
                log(f"[seed {seed}] {approach}: finished earlier, kept")
            else:
                pending.append((cfg, run.model(seed, approach)))
    return pending


def record_protocol(run: RunDir, protocol, continued: bool, log) -> None:
    """What the run records of the protocol it trains on, before it trains: its classes checked
    against the run's, the data it was built from (``continued``: a run that trained before),
    and the split it made of the user's files."""
    check_recorded_classes(run.root, protocol)
    record_data_sources(run, protocol, continued, log)
    for name, text in protocol.split_files.items():
        run.write(run.data_split / name, lambda tmp, text=text: Path(tmp).write_text(text))


def stored_training(run: RunDir, timings: Dict[str, float], wall: Dict, protocol) -> StoredTraining:
    """What the training hands the run's record: its seconds, and the protocol's notes and class
    names, recorded now (``protocol``: the one trained on) or read back (a run resumed with nothing
    left to train)."""
    out = run.root
    # written only where there are any (preprocessing: authors); a resumed run reads them back
    preprocessing_notes = list(protocol.preprocessing_notes) if protocol else []
    return StoredTraining(
        timings, training_wall_s=wall["training_s"], concurrent_runs=wall["concurrent_runs"],
        batched_seeds=bool(wall.get("batched_seeds", False)),
        data_notes=record_or_read(run, run.data_notes, list(protocol.notes) if protocol else None,
                                  lambda: read_notes(out, DATA_NOTES), []),
        classes=record_or_read(run, run.classes, protocol_classes(protocol) if protocol else None,
                               lambda: read_classes(out), {}),
        preprocessing_notes=record_or_read(run, run.preprocessing_notes, preprocessing_notes or None,
                                           lambda: read_notes(out, PREPROCESSING_NOTES), []))


def units_from_scratch(units: List[List[Tuple[TrainConfig, ModelDir]]], scratch: bool) -> List[List[Tuple[TrainConfig, ModelDir]]]:
    """The ``units`` that train from scratch (``scratch``), or those that fine-tune another run's network."""
    return [unit for unit in units if (start_approach(unit[0][0].approach) is None) == scratch]


def is_kept(run: RunDir, cfg: TrainConfig) -> bool:
    """Whether the run of ``cfg`` (an approach and seed) finished earlier with its outputs stored."""
    model = run.model(cfg.seed, cfg.approach)
    return model.outputs.exists() and is_finished(model, cfg)


def run_key(cfg: TrainConfig) -> str:
    """A run's name in ``timings.json`` and in messages: ``seedS/APPROACH``."""
    return RunDir.run_key(cfg.seed, cfg.approach)


def training_units(pending: List[Tuple[TrainConfig, ModelDir]], batched: bool, world) -> List[List[Tuple[TrainConfig, ModelDir]]]:
    """The pending runs as units that train together: with ``batched``, the seeds of one approach
    that continue from the same epoch (a killed batch, or seeds added with ``--seeds``, resume as
    such groups); otherwise, or for a seed alone, one run per unit."""
    if not batched:
        return [[run] for run in pending]
    groups: Dict[Tuple[str, int], List[Tuple[TrainConfig, ModelDir]]] = {}
    alone = []  # runs of a loss that cannot be batched over seeds: one unit each
    for approach in dict.fromkeys(cfg.approach for cfg, _ in pending if not batches_over_seeds(cfg.approach)):
        print(f"batched_seeds: {approach} trains its seeds one by one (its loss cannot be batched over seeds)",
              file=sys.stderr)
    for cfg, model in pending:
        if not batches_over_seeds(cfg.approach):
            alone.append([(cfg, model)])
            continue
        epoch = world.from_main(lambda: saved_epoch(model))
        groups.setdefault((cfg.approach, epoch), []).append((cfg, model))
    return list(groups.values()) + alone


def saved_epoch(model: ModelDir) -> int:
    """The epochs the model folder's ``last.pt`` holds (0 without one)."""
    last = model.last
    return int(load_checkpoint(last)["epoch"]) if last.exists() else 0


def unit_name(unit: List[Tuple[TrainConfig, ModelDir]]) -> str:
    """``[seed S] APPROACH`` for one run, ``[seeds S, T, ...] APPROACH`` for seeds batched."""
    seeds = ", ".join(str(cfg.seed) for cfg, _ in unit)
    return f"[{'seeds' if len(unit) > 1 else 'seed'} {seeds}] {unit[0][0].approach}"


def starting(unit: List[Tuple[TrainConfig, ModelDir]], protocol, device) -> str:
    cfg = unit[0][0]
    if all(is_finished(model, run_cfg) for run_cfg, model in unit):  # e.g. a copied run: it only predicts
        return f"{unit_name(unit)}: trained ({cfg.epochs} epoch(s)); predicting its stored outputs on {device}"
    n_known = int((protocol.train.labels >= 0).sum())
    n_unknown = len(protocol.train.labels) - n_known if LOSSES.get(cfg.approach).trains_on_unknowns else 0
    batched = f", {len(unit)} seeds batched as one model" if len(unit) > 1 else ""
    return (f"{unit_name(unit)}: training on {n_known:,} knowns + {n_unknown:,} known unknowns "
            f"for {cfg.epochs} epoch(s) on {device}{batched}")


def fit_and_store_unit(unit: List[Tuple[TrainConfig, ModelDir]], protocol, device: torch.device) -> float:
    """Train (or resume) one run, or seeds batched (:func:`fit_seeds`), and store each run's outputs;
    returns the seconds it took. Under DDP every process trains and rank 0 alone stores; a child
    process of a concurrent reproduction is one process."""
    start = time.perf_counter()
    if len(unit) == 1:
        (cfg, model), = unit
        runs = [fit(cfg, protocol, model, resume=True, device=device)]
    else:
        runs = fit_seeds(unit[0][0], protocol, {cfg.seed: model for cfg, model in unit}, device=device)
    if distributed.current().is_main:
        for run, (_, model) in zip(runs, unit):
            store_outputs(run, protocol, model)
    return time.perf_counter() - start


def continued_precision(out) -> Optional[str]:
    """The precision (``fp32`` or ``bf16``) the run in ``out`` was trained with, None where ``out``
    holds no run. ``precision: auto`` decides by the device (and on a CPU by a timing probe), so a
    run resumed on another machine, or with another thread count, could decide otherwise and then be
    refused by its own checkpoints; it keeps its first decision instead."""
    if out is None:
        return None
    try:
        recorded = read_run_config(out, required=False).get("precision")
    except RecordError:  # a damaged record: the resume's own checks say what is wrong with it
        return None
    return recorded if recorded in ("fp32", "bf16") else None


def configure(experiment: ExperimentConfig, request: Optional[RunRequest] = None, log=log_info,
              **train_overrides) -> Tuple[ExperimentConfig, torch.device]:
    """The experiment with the ``request``'s choices (and ``train_overrides``, config keys a
    command sets itself) applied and checked, and the device it trains on: resolved here, once
    per command, and passed down from here. ``log`` gets one line: the precision chosen and why
    (also kept for ``run_meta.json`` and the report)."""
    request = request or RunRequest(None)  # no command line: the config's values
    experiment.train = dataclasses.replace(experiment.train, **request.train_overrides(),
                                           **train_overrides).validate()
    check_detectors(experiment)
    device = resolve_device(experiment.train.device)  # "cuda" without a GPU stops here, before any write
    for approach in experiment.approaches:  # so does cuda_graph, also for a loss whose step it cannot capture
        check_cuda_graph(experiment.train.cuda_graph, device, distributed.current().distributed, approach)
    # "auto" becomes what this device gets, so that config.yaml, checkpoints and reports say it;
    # a run being continued keeps the precision it was trained with (the choice is never made twice)
    kept = continued_precision(request.out) if experiment.train.precision == "auto" else None
    chosen, why = choose_precision(experiment.train.precision, device)
    if kept and kept != chosen:
        experiment.precision_chosen = (f"{kept} (auto: as the run in {request.out} being continued was trained; "
                                       f"here auto chooses {chosen})")
        experiment.train.precision = kept
    else:  # the same words as the run's first invocation: a resumed run's records equal an uninterrupted one's
        experiment.precision_chosen = f"{chosen} ({why})"
        experiment.train.precision = chosen
    if distributed.launched_rank() == 0:  # under torchrun: once, not once per process
        log(f"precision: {experiment.precision_chosen}")
    experiment.train.tensorboard = use_tensorboard(experiment.train.tensorboard)  # true without it stops here
    if request.seeds is not None:
        experiment.seeds = check_seeds(request.seeds, "--seeds", experiment.first_seed)
    if request.concurrent_runs is not None:
        experiment.concurrent_runs = check_concurrent_runs(request.concurrent_runs, "--concurrent-runs")
    if request.batched_seeds is not None:
        experiment.batched_seeds = check_batched_seeds(request.batched_seeds, "--batched-seeds")
    return experiment, device


def check_detectors(experiment: ExperimentConfig) -> None:
    """The detector settings of the config and of every budget, built as the evaluation will
    build them: a run that could not be evaluated is never trained (``budgets.cpu.openmax.tail_size``)."""
    for budget, overrides in experiment.budgets.items():
        detector_settings(overrides, f"budgets.{budget}.")
    detector_settings(experiment.train.to_dict())


def check_existing_run(experiment: ExperimentConfig, out: Path) -> None:
    """Refuse, before anything is written, to continue a run trained with another config, or
    one whose training records (timings, wall time, classes, notes) are damaged."""
    check_run_folder(out)
    check_training_records(out)
    check_fine_tune_starts(experiment, out)
    for seed in experiment.seed_numbers:
        for approach in experiment.approaches:
            check_resumable(RunDir(out).model(seed, approach), experiment.for_approach(approach, seed))


def check_fine_tune_starts(experiment: ExperimentConfig, out: Path) -> None:
    """A fine-tune's start must train in this run, or be trained in ``out`` already for every seed."""
    elsewhere = {start_approach(a) for a in experiment.approaches} - {None} - set(experiment.approaches)
    check_starts(experiment.approaches, [start for start in elsewhere if all(
        is_kept(RunDir(out), experiment.for_approach(start, seed)) for seed in experiment.seed_numbers)])


def train_run(request: RunRequest, log=log_info) -> Path:
    """``agnostophobia train``: train the approaches of the request's experiment config into
    ``request.out`` and leave the same record (``config.yaml``, ``run_meta.json``) as ``reproduce``.
    ``request.preprocessing`` (ours | authors) overrides the config's data preparation;
    ``request.set_options``, the ``--set`` pairs, override config keys after the budget.

    Started by torchrun, every process calls this and trains with DDP; rank 0 alone holds the
    run's lock and writes (``training.distributed``). A protocol with splits (``osr-mnist``,
    ``osr-cifar10``) trains one run per split into ``OUT/split-K`` (``request.split``, else every
    split; with ``resume``, a split not yet started starts)."""
    if request.out is None:
        raise ConfigError("train: the request names no output folder (--out)")
    runs = request.split_runs(request.load().with_set_options(request.set_options), request.out)
    if runs[0][0] is not None:  # a protocol with splits: one run folder per split, OUT/split-K
        check_split_folders(runs, request.resume)
        for split, folder in runs:
            _train_one(request.but(split=split, out=folder, resume=request.resume and folder.exists()), log)
        return request.out
    return _train_one(request, log)


def check_split_folders(runs: Sequence[Tuple[Optional[int], Path]], resume: bool) -> None:
    """Before any split trains: a split's folder holding a run is continued only with ``--resume``."""
    for _, folder in runs:
        if not resume and RunDir(folder).last_checkpoints():
            raise ValueError(f"--out {folder.parent}: {folder.name} already holds a run; add --resume to continue "
                             f"it, or choose another --out")


def _train_one(request: RunRequest, log=log_info) -> Path:
    """One run of ``train``: a protocol's one split, or a protocol without splits."""
    experiment, device = configure(request.load().with_set_options(request.set_options), request, log=log)
    out, approaches, resume = request.out, request.approaches, request.resume
    if approaches:
        experiment.approaches = check_approaches(list(dict.fromkeys(approaches)))
    check_fine_tune_starts(experiment, out)  # a config error before any data is looked for
    protocol = file_protocol_first(experiment.train)  # a broken one stops here: nothing written
    if not resume and not out.exists():  # a fresh run: its datasets must be there before anything is written
        require_protocol_data(experiment.train.protocol, experiment.train.data_dir)
    command = (f"agnostophobia train {request.experiment} --out {out.parent if request.split is not None else out}"
               f"{split_flag(request)}{set_flags(request.set_options)}")
    meta = _Train(experiment, device, out, request.budget, command, protocol=protocol, log=log, resume=resume).run()
    if meta is not None:  # rank 0
        log(headline_table(trained_headline_rows(out), f"agnostophobia evaluate {out}"))
        log(f"trained {', '.join(experiment.approaches)} into {out}; next: agnostophobia evaluate {out}")
    return out


def split_flag(request: RunRequest) -> str:
    """``--split K`` as the run records would repeat it; '' for a protocol without splits."""
    return f" --split {request.split}" if request.split is not None else ""


def set_flags(set_options: Sequence[Tuple[str, Any]]) -> str:
    """The ``--set`` options as the command line the run records would repeat them."""
    return "".join(f" --set {key}={dump_yaml(value, flow=True).strip().removesuffix('...').strip()}"
                   for key, value in set_options)


@dataclasses.dataclass
class TrainingCommand:
    """The one sequence of ``train``, ``reproduce`` and ``reproduce ensemble`` once the experiment
    is configured (and its ``device`` resolved, :func:`configure`): :meth:`run` locks the run
    (:meth:`claim`: its checks, then its lock), writes its records (:meth:`first`, then
    ``config.yaml``), trains and stores every run, records it (``run_meta.json``, with
    ``command``), then :meth:`then` (meta), all inside the lock. A command says what it does at
    those steps by overriding them. ``protocol``: the run's protocol when already built (else
    built when needed); ``config_protocol``: the paper protocol the config named (the record's).

    Under torchrun every process joins the group here (one process: nothing happens) and trains;
    rank 0 alone claims, writes and records, and gets the run record (the others get None)."""

    experiment: ExperimentConfig
    device: torch.device
    out: Path
    budget: Optional[str]
    command: str
    protocol: Any = None
    config_protocol: Optional[str] = None
    log: Callable[[str], None] = log_info

    def claim(self) -> ContextManager:
        """The run's checks, then its lock (held until :meth:`run` ends)."""
        return run_lock(self.out)

    def first(self) -> None:
        """What the command writes or says before ``config.yaml``."""

    def then(self, meta: Dict) -> None:
        """What the command does with the run record once every run is trained and recorded."""

    def run(self) -> Optional[Dict]:
        experiment, out, log = self.experiment, self.out, self.log
        with distributed.process_group(self.device) as world, contextlib.ExitStack() as lock:
            world.check_batch_size(experiment.train.batch_size)

            def locked() -> None:
                lock.enter_context(self.claim())

            world.from_main(locked)  # rank 0 checks and locks the run; the others wait, and stop with its error
            protocol = self.protocol
            if world.is_main:
                protocol = self._checked_protocol()
                self.first()
                write_config(out, experiment, self.budget)
            stored = train_and_store(experiment, out, self.device, log, protocol=protocol)
            if not world.is_main:
                return None
            meta = write_run_record(out, experiment, stored,
                                    RunCommand(self.command, self.budget, self.config_protocol), self.device)
            self.then(meta)
        return meta

    def _checked_protocol(self):
        """The run's protocol, checked against the run's records before ``config.yaml`` is
        rewritten: built here for a run that trains on from recorded data sources."""
        experiment, out, protocol = self.experiment, self.out, self.protocol
        if protocol is None and read_data_sources(out) is not None and not all(
                is_kept(RunDir(out), experiment.for_approach(approach, seed))
                for seed in experiment.seed_numbers for approach in experiment.approaches):
            protocol = protocol_for(experiment.train)  # a run that trains on: its data is checked first
        if protocol is not None:  # refused before config.yaml is rewritten
            check_recorded_classes(out, protocol)
            if read_data_sources(out) is not None:
                check_data_sources(out, protocol, self.log)
        return protocol


@dataclasses.dataclass
class _Train(TrainingCommand):
    """``train``: a run there is continued only with ``resume`` (:func:`claim_run`)."""

    resume: bool = False

    def claim(self) -> ContextManager:
        return claim_run(self.experiment, self.out, self.resume)


def claim_run(experiment: ExperimentConfig, out: Path, resume: bool):
    """The run lock of ``out``, after the checks that it may be (re)used for ``experiment``:
    a run there is continued only with ``resume``, and ``resume`` needs a run there (its
    ``config.yaml``, written first, or a checkpoint) rather than starting a new one."""
    checkpoints = bool(RunDir(out).last_checkpoints())
    if checkpoints and not resume:
        raise ValueError(f"--out {out} already holds a run; add --resume to continue it, or choose another --out")
    if resume and not (checkpoints or RunDir(out).config.is_file()):
        raise ValueError(f"--resume: --out {out} holds no run to continue (no config.yaml, no checkpoint); "
                         f"leave out --resume to start one there")
    check_existing_run(experiment, out)
    return run_lock(out)


def reproduce(request: RunRequest, log=log_info) -> Path:
    """``agnostophobia reproduce``; ``request.preprocessing`` (ours | authors) overrides the config's
    data preparation. A run prepared otherwise than ``ours`` goes by default to
    ``runs/NAME-BUDGET-PREPROCESSING`` (so it never lands in, or resumes, an ``ours`` run); it keeps the
    experiment's name, so its report still shows the paper's numbers, which the authors measured on their
    own preparation. ``request.set_options``: the ``--set`` pairs, applied after the budget;
    ``request.protocol``: another registered protocol (a variant, named NAME-PROTOCOL). A protocol with
    splits (``osr-mnist``, ``osr-cifar10``) makes one run per split, ``OUT/split-K``
    (:meth:`~agnostophobia.experiments.request.RunRequest.split_runs`: ``request.split``, else every
    split); returns OUT."""
    budget = request.budget or default_budget()
    experiment, _, variant = reproduced_experiment(request, budget)
    name = variant.get("name", experiment.train.name)
    preprocessing = request.preprocessing or experiment.train.preprocessing
    prepared = "" if preprocessing == OURS else f"-{preprocessing}"
    out = request.out or Path("runs") / f"{name}-{budget}{prepared}"
    runs = request.split_runs(dataclasses.replace(experiment, train=dataclasses.replace(experiment.train, **variant)),
                              out)
    if runs[0][0] is None:
        return _reproduce_one(request.but(budget=budget, out=out), log)
    for split, folder in runs:  # a protocol with splits: one run folder per split, OUT/split-K
        _reproduce_one(request.but(budget=budget, out=folder, split=split), log)
    return out


def reproduced_experiment(request: RunRequest, budget: str) -> Tuple[ExperimentConfig, Optional[str], Dict[str, Any]]:
    """The experiment ``reproduce`` runs at ``budget`` (``--set`` applied, not yet configured), the
    paper protocol's name in the config before ``--set``, and the config keys of a ``--protocol``
    variant (none: {})."""
    experiment = request.load(budget)
    # a paper protocol's name before --set: `--set protocol=cifar10-split` is a variant too
    config_protocol = experiment.train.protocol if isinstance(experiment.train.protocol, str) else None
    experiment = experiment.with_set_options(request.set_options)
    variant = {}
    if request.protocol and request.protocol != experiment.train.protocol:
        from agnostophobia.data import PROTOCOLS

        PROTOCOLS.get(request.protocol)  # a clear error for an unknown name
        variant = {"protocol": request.protocol, "name": f"{experiment.train.name}-{request.protocol}"}
    return experiment, config_protocol, variant


def _reproduce_one(request: RunRequest, log=log_info) -> Path:
    """One run of ``reproduce`` into ``request.out``: a protocol's one split, or a protocol without
    splits."""
    budget = request.budget
    experiment, config_protocol, variant = reproduced_experiment(request, budget)
    experiment, device = configure(experiment, request, log=log, **variant)
    out = request.out
    check_existing_run(experiment, out)  # check first, write after: a refused resume changes nothing
    protocol = file_protocol_first(experiment.train)
    fetched = []
    if not out.exists():  # a fresh run: fetch missing data (or stop and explain) before writing anything
        fetched = require_protocol_data(experiment.train.protocol, experiment.train.data_dir, fetch=request.fetch,
                                        allow_unverified=request.allow_unverified,
                                        progress=None if request.progress else False, log=log)
    command = (f"agnostophobia reproduce {request.experiment} --budget {budget}{split_flag(request)}"
               f"{set_flags(request.set_options)}")
    _Reproduce(experiment, device, out, budget, command, protocol=protocol, config_protocol=config_protocol, log=log,
               fetched=fetched, plots=request.plots).run()
    return out


@dataclasses.dataclass
class _Reproduce(TrainingCommand):
    """``reproduce``: the record of the data it fetched first; the metrics, figures and report after."""

    fetched: List = dataclasses.field(default_factory=list)
    plots: bool = True

    def first(self) -> None:
        if self.fetched:
            from agnostophobia.data.fetch import write_fetch_record

            write_fetch_record(self.out, self.fetched)
        self.log(f"agnostophobia reproduce {self.experiment.train.name}: budget {self.budget}, "
                 f"{self.experiment.seeds} seed(s), output in {self.out}")

    def then(self, meta: Dict) -> None:
        finish_run(self.out, meta, plots=self.plots, log=self.log)


def finish_run(out: Path, meta: Dict, plots: bool = True, log=log_info, previous: Optional[Dict] = None,
               splits=None) -> Path:
    """metrics.json, figures and report.md from the run's stored outputs. ``previous``: results
    kept (``report.collect_results``); ``splits``: draw only these sets' figures (and missing ones)."""
    metrics = write_metrics(out, meta, previous)
    figures = _plot(out, log, splits) if plots else None
    report = write_report(out, metrics, figures)
    log(f"report: {report}\nmetrics: {RunDir(out).metrics}")
    log(headline_table(headline_rows(metrics["results"]), str(report)))
    return report


def _plot(out: Path, log, splits=None):
    try:
        from agnostophobia.plotting.request import PlotRequest
        from agnostophobia.plotting.run import draw_run
    except ImportError:
        return None
    return draw_run(PlotRequest(out, splits=splits))[0]
