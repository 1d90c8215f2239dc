"""The run record a training command leaves: ``config.yaml`` (:func:`write_config`, written before
the training) and, after it, ``run_meta.json`` (:func:`write_run_record`, from what the training
hands back, :class:`StoredTraining`, and the command that asked for it, :class:`RunCommand`),
both carrying the run's marker and id
(:mod:`~agnostophobia.training.records.run_marker`: how a folder is known as a run); beside them what a
continued training reads back and checks: ``classes.json``, ``data_notes.json``,
``preprocessing_notes.json`` and ``data_sources.json``.

``train``, ``reproduce`` and ``reproduce ensemble`` write them from
:mod:`agnostophobia.experiments.reproduce` (``tune`` writes each point's ``config.yaml``); their
checked readers are :mod:`agnostophobia.training.records`, a layer below.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch

from agnostophobia._yaml import dump_yaml
from agnostophobia.errors import ConfigError
from agnostophobia.rundir import DATA_SOURCES, RecordError, RunDir
from agnostophobia.training import distributed
from agnostophobia.training.concurrent import threads_per_run
from agnostophobia.training.device import cpu_model
from agnostophobia.training.config import ExperimentConfig
from agnostophobia.training.records import (RUN_ID_KEY, check_data_sources, code_version, library_versions, marked_run_id,
                                            new_run_id, read_classes, read_data_sources, read_run_config, run_marker)


@dataclasses.dataclass
class StoredTraining:
    """What :func:`~agnostophobia.experiments.reproduce.train_and_store` hands the run's record (``run_meta.json``): the seconds of each
    run (``seedS/APPROACH``), the training's wall time and how it ran, and the protocol's notes and
    class names (read back from the run's records when nothing was trained)."""

    timings_s: Dict[str, float]
    training_wall_s: float = 0.0
    concurrent_runs: int = 1
    batched_seeds: bool = False
    data_notes: List[str] = dataclasses.field(default_factory=list)
    classes: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
    preprocessing_notes: List[str] = dataclasses.field(default_factory=list)


def is_the_command_line() -> bool:
    """Whether this process is the ``agnostophobia`` command (its script, or ``python -m
    agnostophobia``), whose words a run records as they were typed. A program that calls the
    library is not, even where its path holds the name (a checkout called agnostophobia)."""
    if not sys.argv or not sys.argv[0]:
        return False
    program = Path(sys.argv[0])
    return program.name == "agnostophobia" or (program.name == "__main__.py" and program.parent.name == "agnostophobia")


def write_config(out: Path, experiment: ExperimentConfig, budget: Optional[str]) -> None:
    """``config.yaml``: the run's marker first, then the resolved configuration. The marker's id is
    the run's own from its first config.yaml on: a run continued (or killed, then run again) keeps
    it, so that its run_meta.json, written at the end, carries the id of its config.yaml."""
    run = RunDir(out)
    run_id = marked_run_id(read_run_config(out, required=False)) or new_run_id()
    resolved = {**run_marker(run_id), **experiment.train.to_dict(), "approaches": experiment.approaches,
                "seeds": experiment.seeds, "budget": budget}
    if experiment.first_seed:  # written only where set, so a default run's record reads as before
        resolved["first_seed"] = experiment.first_seed
    run.write(run.config, lambda tmp: Path(tmp).write_text(dump_yaml(resolved)))


def recorded_run_id(out: Path) -> str:
    """The id that the run's config.yaml, written before its training, carries."""
    run_id = marked_run_id(read_run_config(out))
    if run_id is None:  # config.yaml replaced while the run trained
        raise RecordError(f"{RunDir(out).config}: carries no run id ({RUN_ID_KEY}), though this command wrote one "
                          f"before it trained; it was changed meanwhile: run the command again")
    return run_id


def seeds_varied(experiment: ExperimentConfig) -> str:
    """What differs between the seeds of a run, for its report."""
    first, last = experiment.seed_numbers[0], experiment.seed_numbers[-1]
    trained = f"training seed {first}" if first == last else f"training seeds {first}-{last}"
    return (f"{trained} (network initialisation, data order, augmentation); data seed "
            f"{experiment.train.data_seed} fixed (validation split, training subsample)")


@dataclasses.dataclass(frozen=True)
class RunCommand:
    """The command that made a run, as its records repeat it: the ``line`` to type to make it
    again (where the run was not made from the command line itself), the ``budget`` it ran at,
    and, for ``reproduce --protocol``, the protocol the experiment's config names
    (``config_protocol``: the run is then a variant, not comparable to the paper)."""

    line: str  # the command line that makes the run again
    budget: Optional[str]  # the budget it ran at (None: the config's values)
    config_protocol: Optional[str] = None  # reproduce --protocol: the protocol the config names


def write_run_record(out: Path, experiment: ExperimentConfig, stored: StoredTraining, command: RunCommand,
                     device: torch.device) -> Dict:
    """``run_meta.json``: what ``evaluate``, ``plot`` and ``predict`` need to know of a run."""
    train_cfg = experiment.train
    budget, config_protocol = command.budget, command.config_protocol
    world = distributed.current()
    runs = stored.concurrent_runs
    meta = {
        **run_marker(recorded_run_id(out)),  # what makes the folder known as this run (records.run_marker)
        "experiment": train_cfg.name, "budget": budget, "seeds": experiment.seeds,
        "seeds_varied": seeds_varied(experiment), "approaches": experiment.approaches,
        "command": " ".join(["agnostophobia"] + sys.argv[1:]) if is_the_command_line() else command.line,
        "device": f"{device} ({cpu_model()}, "
                  f"{torch.get_num_threads()} threads)" + (f" x {world.size} processes (DDP)" if world.distributed else "")
                  + (f", {runs} runs at a time, {train_cfg.cpu_threads or threads_per_run(runs)} thread(s) each" if runs > 1 else ""),
        "wall_time_s": round(stored.training_wall_s, 1),
        "concurrent_runs": runs,
        "batched_seeds": stored.batched_seeds,  # seeds of an approach trained as one model
        "precision": experiment.precision_chosen or train_cfg.precision,  # and why: the report's Setup says it
        "train_config": {k: v for k, v in train_cfg.to_dict().items()
                         if k not in ("approach", "seed", "progress", "tensorboard", "data_dir", "name")},
        **stored.classes,
        "data_notes": stored.data_notes,
        "timings_s": stored.timings_s,
        "versions": library_versions(),  # evaluate and predict name a library that differs later
        "code": code_version(),  # which code made the run: the version, and the commit of a checkout
    }
    if stored.preprocessing_notes:  # preprocessing: authors, every quirk for the report
        meta["preprocessing_notes"] = stored.preprocessing_notes
    if config_protocol and train_cfg.protocol != config_protocol:  # a variant: not comparable to the paper
        meta["config_protocol"] = config_protocol
    run = RunDir(out)
    run.write(run.run_meta, lambda tmp: Path(tmp).write_text(json.dumps(meta, indent=1)))
    return meta


def protocol_classes(protocol) -> Dict[str, List[str]]:
    """The class names a run's reports and outputs carry (and the negatives' source classes)."""
    classes = {"class_names": list(protocol.class_names)}
    if protocol.negative_class_names:
        classes["negative_class_names"] = list(protocol.negative_class_names)
    return classes


def check_recorded_classes(out: Path, protocol) -> None:
    """Refuse to continue a run whose recorded class names (``classes.json``) are not the
    protocol's now, in the same order: its models' outputs would be read with other labels."""
    recorded = read_classes(out)
    if recorded is not None and recorded["class_names"] != list(protocol.class_names):
        raise ConfigError(f"{RunDir(out).classes}: the run was trained with the classes {recorded['class_names']}, "
                          f"the protocol now gives {list(protocol.class_names)}; a changed class order would "
                          f"relabel the trained models (restore the config's classes, or train into a new --out)")


def record_data_sources(run: RunDir, protocol, trained_before: bool, log) -> None:
    """Check the data of a run that continues against its record (``data_sources.json``), or
    write the record: a new run's, or that of a run from before the record, which says once that
    its earlier training is unrecorded and continues on the files of now."""
    if read_data_sources(run.root) is not None:
        check_data_sources(run.root, protocol, log)
        return
    if trained_before:
        log(f"{run.root}: no record of the data it was trained on so far ({DATA_SOURCES}, a run from before it); "
            f"recording the files it continues on")
    run.write(run.data_sources, lambda tmp: Path(tmp).write_text(json.dumps(protocol.sources, indent=1)))


def record_or_read(run: RunDir, path: Path, value, read: Callable[[], Any], default):
    """Write ``value`` to the run's record ``path`` as JSON; None: what an earlier call wrote, by
    ``read`` (its checked reader in ``training.records``), or ``default``."""
    if value is None:
        stored = read()
        return default if stored is None else stored
    run.write(path, lambda tmp: Path(tmp).write_text(json.dumps(value, indent=1)))
    return value
