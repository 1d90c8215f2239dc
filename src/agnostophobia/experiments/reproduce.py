"""``agnostophobia reproduce EXPERIMENT``: train every approach on one protocol, evaluate
on every unknown set, store per-sample outputs, then write metrics, report and figures.

Interrupted runs resume: finished approaches are skipped, an unfinished one continues
from its last epoch checkpoint.
"""
from __future__ import annotations

import dataclasses
import json
import platform
import sys
import time
from pathlib import Path
from typing import Dict, Optional

import torch
import yaml

from agnostophobia.data import build_protocol
from agnostophobia.experiments.outputs import FIT_OUTPUTS, save_outputs
from agnostophobia.experiments.report import write_metrics, write_report
from agnostophobia.training.approaches import APPROACHES
from agnostophobia._atomic import atomic_write
from agnostophobia.training.config import ExperimentConfig, TrainConfig, load_experiment
from agnostophobia.training.trainer import fit, is_finished, predict, resolve_device


def default_budget() -> str:
    return "paper" if torch.cuda.is_available() else "cpu"


def protocol_for(cfg: TrainConfig, seed: int):
    return build_protocol(cfg.protocol, data_dir=cfg.data_dir, seed=seed, **cfg.protocol_limits)


def run_outputs(run, protocol) -> Dict[str, Dict]:
    """Per-sample logits, features and labels on D_c and every unknown set."""
    outputs = {}
    for name, split in [("known", protocol.test_known), *protocol.test_unknowns.items()]:
        logits, features = predict(run.model, split.images, run.cfg.eval_batch_size, run.device,
                                   run.cfg.channels_last)
        outputs[name] = {"logits": logits, "features": features, "labels": split.labels}
    return outputs


def fit_outputs(run, protocol) -> Dict:
    known = protocol.train.labels >= 0
    logits, features = predict(run.model, protocol.train.images[known], run.cfg.eval_batch_size, run.device,
                               run.cfg.channels_last)
    return {"logits": logits, "features": features, "labels": protocol.train.labels[known]}


def train_and_store(experiment: ExperimentConfig, out: Path, log=print) -> Dict:
    """Train (or resume) every approach and seed; returns the protocol notes and timings."""
    timings_path = out / "timings.json"
    timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
    notes = []
    for seed in range(experiment.seeds):
        protocol = None
        for approach in experiment.approaches:
            cfg = experiment.for_approach(approach, seed)
            run_dir = out / f"seed{seed}" / approach
            if (run_dir / "outputs.npz").exists() and is_finished(run_dir, cfg):
                log(f"[seed {seed}] {approach}: finished earlier, kept")
                continue
            if protocol is None:
                protocol = protocol_for(cfg, seed)
                notes = list(protocol.notes)
            start = time.perf_counter()
            n_known = int((protocol.train.labels >= 0).sum())
            n_unknown = len(protocol.train.labels) - n_known if APPROACHES.get(approach).uses_unknowns else 0
            log(f"[seed {seed}] {approach}: training on {n_known:,} knowns + {n_unknown:,} known unknowns "
                f"for {cfg.epochs} epoch(s) on {resolve_device(cfg.device)}")
            run = fit(cfg, protocol, run_dir, resume=True)
            if approach == "softmax":  # OpenMax is fitted on the training knowns' logits
                save_outputs(run_dir / FIT_OUTPUTS, {"train": fit_outputs(run, protocol)})
            save_outputs(run_dir / "outputs.npz", run_outputs(run, protocol))
            key = f"seed{seed}/{approach}"
            timings[key] = timings.get(key, 0.0) + time.perf_counter() - start
            atomic_write(timings_path, lambda tmp: Path(tmp).write_text(json.dumps(timings, indent=1)))
            log(f"[seed {seed}] {approach}: done in {timings[key]:.0f} s")
    if not notes:
        notes_path = out / "data_notes.json"
        notes = json.loads(notes_path.read_text()) if notes_path.exists() else []
    else:
        atomic_write(out / "data_notes.json", lambda tmp: Path(tmp).write_text(json.dumps(notes, indent=1)))
    return {"data_notes": notes, "timings_s": timings}


def reproduce(experiment_name: str, budget: Optional[str] = None, seeds: Optional[int] = None,
              out: Optional[Path] = None, data_dir: Optional[str] = None, device: Optional[str] = None,
              progress: bool = True, plots: bool = True, protocol: Optional[str] = None, log=print,
              fetch: bool = True, allow_unverified: bool = False) -> Path:
    budget = budget or default_budget()
    experiment = load_experiment(experiment_name).for_budget(budget)
    overrides = {"progress": progress}
    config_protocol = experiment.train.protocol
    if protocol and protocol != experiment.train.protocol:
        from agnostophobia.data import PROTOCOLS

        PROTOCOLS.get(protocol)  # a clear error for an unknown name
        overrides.update(protocol=protocol, name=f"{experiment.train.name}-{protocol}")
    if data_dir:
        overrides["data_dir"] = str(data_dir)
    if device:
        overrides["device"] = device
    experiment.train = dataclasses.replace(experiment.train, **overrides).validate()
    if seeds is not None:
        if seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {seeds}")
        experiment.seeds = seeds
    name = experiment.train.name
    out = Path(out or Path("runs") / f"{name}-{budget}")
    fetched = []
    if not out.exists():  # a fresh run: fetch missing data (or stop and explain) before writing anything
        from agnostophobia.data.protocols import require_protocol_data

        fetched = require_protocol_data(experiment.train.protocol, experiment.train.data_dir, fetch=fetch,
                                        allow_unverified=allow_unverified, progress=None if progress else False,
                                        log=log)
    out.mkdir(parents=True, exist_ok=True)
    if fetched:
        from agnostophobia.data.fetch import write_fetch_record

        write_fetch_record(out, fetched)
    resolved = {**experiment.train.to_dict(), "approaches": experiment.approaches, "seeds": experiment.seeds,
                "budget": budget}
    atomic_write(out / "config.yaml", lambda tmp: Path(tmp).write_text(yaml.safe_dump(resolved, sort_keys=False)))
    log(f"agnostophobia reproduce {name}: budget {budget}, {experiment.seeds} seed(s), output in {out}")
    stored = train_and_store(experiment, out, log)
    train_cfg = experiment.train
    meta = {
        "experiment": name, "budget": budget, "seeds": experiment.seeds, "approaches": experiment.approaches,
        "command": " ".join(["agnostophobia"] + sys.argv[1:]) if sys.argv and "agnostophobia" in sys.argv[0]
        else f"agnostophobia reproduce {experiment_name} --budget {budget}",
        "device": f"{resolve_device(train_cfg.device)} ({platform.processor() or platform.machine()}, "
                  f"{torch.get_num_threads()} threads)",
        "wall_time_s": round(sum(stored["timings_s"].values()), 1),
        "train_config": {k: v for k, v in train_cfg.to_dict().items()
                         if k not in ("approach", "seed", "progress", "tensorboard", "data_dir", "name")},
        "data_notes": stored["data_notes"],
        "timings_s": stored["timings_s"],
    }
    if experiment.train.protocol != config_protocol:  # a variant: the report must not compare it to the paper
        meta["config_protocol"] = config_protocol
    atomic_write(out / "run_meta.json", lambda tmp: Path(tmp).write_text(json.dumps(meta, indent=1)))
    finish_run(out, meta, plots=plots, log=log)
    return out


def finish_run(out: Path, meta: Dict, plots: bool = True, log=print) -> Path:
    """metrics.json, figures and report.md from the run's stored outputs."""
    metrics = write_metrics(out, meta)
    figures = _plot(out, log) if plots else None
    report = write_report(out, metrics, figures)
    log(f"report: {report}\nmetrics: {out / 'metrics.json'}")
    return report


def _plot(out: Path, log):
    try:
        from agnostophobia.plotting import plot_run
    except ImportError:
        return None
    return plot_run(out)
