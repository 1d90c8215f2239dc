"""``agnostophobia tune CONFIG --param xi=10,50,100 --param lambda=1e-4,1e-3,1e-2``:
cross-class calibration of the loss hyper-parameters (paper Sec. 6).

"One trains with a subset of the background classes, say half of them, then tests on
the remaining unseen background classes" (Sec. 6; Sec. 4.2 says the same of xi). Here:

1. The protocol is built once with the data seed and split by
   :func:`~agnostophobia.data.protocols.hold_out_negative_classes`: training uses the
   knowns and the negatives of one half of the negative classes (for LeNet++: 13 of the
   26 letters); the validation knowns and the validation negatives of the *other* half
   (classes no training step has seen) are the evaluation sets. Test data is never read.
2. Every point of the grid (the Cartesian product of the ``--param`` values) is its own
   run directory ``OUT/xi=50,lambda=0.0001/``, trained, stored and resumed by the same
   machinery as ``reproduce`` (:func:`~agnostophobia.experiments.reproduce.train_and_store`).
   Only approaches whose loss reads a tuned parameter are trained (Objectosphere for xi
   and lambda, Eq. 2); the others would give the same network at every point.
3. Each point is scored by the CCR at ``--fpr`` (default 1e-2) on those validation sets
   with the approach's paper score (Objectosphere: its softmax, the LeNet++ row of Table 2),
   the best point is chosen (ties: the config's own values, then the smallest), and
   ``OUT/tune.json`` and ``OUT/tune.md`` hold the whole grid, the choice and the split.
   ``OUT/chosen-<approach>.yaml`` is the config with the chosen values, ready for
   ``agnostophobia reproduce``.
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from agnostophobia._validation import check_fpr as check_rate
from agnostophobia._yaml import dump_yaml

from agnostophobia._atomic import atomic_write
from agnostophobia._runlock import run_lock
from agnostophobia.data.protocols import (HELD_OUT_NEGATIVES, hold_out_negative_classes, protocol_spec,
                                          split_negative_classes)
from agnostophobia.detectors import DETECTORS, detector_applies
from agnostophobia.detectors.stored import detector_settings, model_scores
from agnostophobia.errors import ConfigError, TrainingDiverged
from agnostophobia.experiments.request import RunRequest
from agnostophobia.experiments.reproduce import (check_existing_run, configure, default_budget,
                                                 protocol_for, train_and_store)
from agnostophobia.experiments.run_record import write_config
from agnostophobia.losses import LOSSES, every_loss_setting, loss_settings, renamed_loss_settings, setting_problem
from agnostophobia.metrics import ccr_at_fpr
from agnostophobia.metrics.rows import own_detector
from agnostophobia.metrics.summary import finite_or_none
from agnostophobia.rundir import LOCK, RunDir
from agnostophobia.settings import Setting
from agnostophobia.training.config import ExperimentConfig, load_experiment, read_yaml, resolve_config_path
from agnostophobia.training.loss_keys import LOSS_ALIASES, with_loss_keys_moved
from agnostophobia._log import log_info

#: The FPR the choice is made at, unless ``--fpr`` says otherwise.
DEFAULT_FPR = 1e-2
#: FPRs shown beside it in the table, for information.
INFO_FPRS = (1e-3, 1e-2, 1e-1)


# ------------------------------------------------------------------ the grid
def tunable_parameters() -> Dict[str, Tuple[str, Dict[str, Setting]]]:
    """``{command-line name: (keyword, {approach: setting})}`` of every hyper-parameter some
    registered loss reads (declared, or inferred from its constructor), spelled as in the YAML
    (``lambda`` for the keyword ``lambda_``), with the declaration of each loss that reads it."""
    spelled = {keyword: name for name, keyword in LOSS_ALIASES.items()}
    return {spelled.get(keyword, keyword): (keyword, declared) for keyword, declared in every_loss_setting().items()}


def format_value(value: Optional[float]) -> str:
    """Shortest exact spelling of a grid value: 50.0 -> '50', 1e-4 -> '0.0001'; None (a
    parameter the config leaves unset) -> 'unset'."""
    if value is None:
        return "unset"
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def parse_param(text: str) -> Tuple[str, Tuple[float, ...]]:
    """``"xi=10,50,100"`` -> ``("xi", (10.0, 50.0, 100.0))``; one-line errors naming ``--param``."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep or not name or not values.strip():
        raise ConfigError(f"--param {text!r}: expected NAME=V1,V2,... (e.g. xi=10,50,100)")
    name = renamed_loss_settings().get(name, name)  # a setting's former name, as a config's loss: reads it
    tunable = tunable_parameters()
    if name not in tunable:
        raise ConfigError(f"--param {text!r}: unknown parameter {name!r}; tunable (read by a loss): "
                          f"{', '.join(tunable)}")
    numeric = [setting.type for setting in tunable[name][1].values() if setting.type in (int, float)]
    if not numeric:
        kinds = sorted({setting.type.__name__ for setting in tunable[name][1].values()})
        raise ConfigError(f"--param {text!r}: {name} is {' or '.join(kinds)}, not a number; tune searches numbers")
    parsed = []
    for item in values.split(","):
        try:
            value = float(item)
        except ValueError:
            raise ConfigError(f"--param {text!r}: {item.strip()!r} is not a number") from None
        if all(kind is int for kind in numeric) and value.is_integer():
            value = int(value)
        problem = setting_problem(tunable[name][0], value)  # any loss's range; the tuned ones': check_grid
        if problem:
            raise ConfigError(f"--param {text!r}: {item.strip()!r}: {name} {problem}")
        if value in parsed:
            raise ConfigError(f"--param {text!r}: the value {format_value(value)} is given twice")
        parsed.append(value)
    return name, tuple(parsed)


def parse_params(texts: Sequence[str]) -> Dict[str, Tuple[float, ...]]:
    """Every ``--param``, in the order given; each name once."""
    if not texts:
        raise ConfigError(f"give at least one --param NAME=V1,V2,... (tunable: {', '.join(tunable_parameters())})")
    params: Dict[str, Tuple[float, ...]] = {}
    for text in texts:
        name, values = parse_param(text)
        if name in params:
            raise ConfigError(f"--param {name} is given twice; list all its values in one --param {name}=V1,V2,...")
        params[name] = values
    return params


def check_grid(params: Dict[str, Tuple[float, ...]], approaches: Sequence[str]) -> None:
    """Every grid value checked against the declaration of each tuned approach whose loss reads
    the parameter (two losses may declare one name with different ranges)."""
    tunable = tunable_parameters()
    for name, values in params.items():
        for value in values:
            problem = setting_problem(tunable[name][0], value, approaches)
            if problem:
                raise ConfigError(f"--param {name}: {format_value(value)}: {name} {problem}")


def grid_points(params: Dict[str, Tuple[float, ...]]) -> List[Dict[str, float]]:
    """The Cartesian product of the values, first parameter slowest."""
    return [dict(zip(params, values)) for values in itertools.product(*params.values())]


def point_name(point: Dict[str, float]) -> str:
    """The run directory of a grid point: ``xi=50,lambda=0.0001``."""
    return ",".join(f"{name}={format_value(value)}" for name, value in point.items())


def tuned_approaches(candidates: Sequence[str], params: Sequence[str],
                     requested: Optional[Sequence[str]] = None) -> Tuple[List[str], List[str]]:
    """``(tuned, not tuned)``: the approaches whose loss reads at least one tuned parameter,
    among ``requested`` (each must read one) or else among the config's ``candidates``."""
    keywords = {tunable_parameters()[p][0] for p in params}
    for approach in requested or ():
        if approach not in LOSSES:  # a clear error for an unknown name
            raise ConfigError(f"unknown approach {approach!r}; {LOSSES.hint(approach)}")
    reads = {a: keywords & set(loss_settings(a)) for a in dict.fromkeys([*candidates, *(requested or [])])}
    if requested:
        for approach in requested:
            if not reads[approach]:
                raise ConfigError(f"--approach {approach}: its loss reads none of {', '.join(params)}, so every "
                                  f"grid point would train the same network")
        return list(dict.fromkeys(requested)), [a for a in candidates if a not in requested]
    tuned = [a for a in candidates if reads[a]]
    if not tuned:
        raise ConfigError(f"no approach of the config ({', '.join(candidates)}) has a loss that reads "
                          f"{', '.join(params)}; nothing to tune")
    return tuned, [a for a in candidates if not reads[a]]


# ------------------------------------------------------------------ scoring
def point_scores(point_dir: Path, experiment: ExperimentConfig, approach: str, detector: str,
                 fprs: Sequence[float]) -> List[List[Optional[float]]]:
    """Validation CCR at each of ``fprs``, one list per seed: the stored outputs of the
    validation knowns ("known") against the held-out classes' negatives, scored with
    ``detector`` through the shared detector machinery."""
    settings = detector_settings(experiment.train.to_dict())
    per_seed = []
    for seed in experiment.seed_numbers:
        model_dir = RunDir(point_dir).model(seed, approach)
        scores = model_scores(model_dir, approach, settings)
        if detector not in scores.top:
            raise ConfigError(f"detector {detector!r} on {model_dir}: "
                              f"{scores.notes.get(detector, 'not applicable to this approach')}")
        values, labels = scores.known_vs_unknown(detector, HELD_OUT_NEGATIVES)
        per_seed.append([finite_or_none(v) for v in ccr_at_fpr(values, labels, fprs)])
    return per_seed


def mean_or_none(values: Sequence[Optional[float]]) -> Optional[float]:
    """The mean over seeds; None where a seed could not measure it (too few unknowns)."""
    return None if any(v is None for v in values) else float(np.mean(values))


def choose(rows: List[Dict], base: Dict[str, float], fpr_index: int) -> Optional[Dict]:
    """The row with the highest CCR at the selection FPR; ties: the config's own values
    (``base``), then the smallest values, in ``--param`` order. None if no row has one."""
    measured = [r for r in rows if r["ccr"][fpr_index] is not None]
    if not measured:
        return None
    best = max(r["ccr"][fpr_index] for r in measured)
    tied = [r for r in measured if r["ccr"][fpr_index] == best]
    for row in tied:
        if row["params"] == base:
            return row
    return min(tied, key=lambda r: tuple(r["params"].values()))


# ------------------------------------------------------------------ the command
@dataclass
class TuneSetup:
    """What every grid point shares: the experiment, the grid and the selection rule."""

    config: str
    experiment: ExperimentConfig
    device: torch.device  # resolved once (configure), every grid point trains on it
    budget: Optional[str]
    params: Dict[str, Tuple[float, ...]]
    approaches: List[str]
    not_tuned: List[str]
    detectors: Dict[str, str]
    fpr: float

    @property
    def fprs(self) -> List[float]:
        return sorted({*INFO_FPRS, self.fpr})

    def base_of(self, approach: str) -> Dict[str, Optional[float]]:
        """The config's own values of the tuned parameters for ``approach`` (the authors' for
        lenet++): under ``loss:``, else the default its own loss declares (for one its loss does
        not read, the default of the losses that do, where they agree). None: unset."""
        tunable = tunable_parameters()
        values = {}
        for name in self.params:
            keyword, readers = tunable[name]
            defaults = {setting.default for setting in readers.values()}
            default = readers[approach].default if approach in readers else \
                defaults.pop() if len(defaults) == 1 else None
            value = self.experiment.train.loss.get(keyword, default)
            values[name] = None if value is None else float(value)
        return values

    @property
    def base(self) -> Dict[str, Union[Optional[float], Dict[str, Optional[float]]]]:
        """The config's own values of the tuned parameters, for the record: one value each, or,
        where the tuned approaches' losses declare different defaults, ``{approach: value}``."""
        values: Dict[str, Union[Optional[float], Dict[str, Optional[float]]]] = {}
        readers = {name: [a for a in self.approaches if tunable_parameters()[name][0] in loss_settings(a)]
                   for name in self.params}
        for name in self.params:
            by_approach = {a: self.base_of(a)[name] for a in readers[name] or self.approaches[:1]}
            distinct = set(by_approach.values())
            values[name] = distinct.pop() if len(distinct) == 1 else by_approach
        return values

    def experiment_at(self, point: Dict[str, float]) -> ExperimentConfig:
        tunable = tunable_parameters()
        experiment = copy.deepcopy(self.experiment)
        loss = {**experiment.train.loss, **{tunable[n][0]: v for n, v in point.items()}}
        experiment.train = dataclasses.replace(experiment.train, loss=loss).validate()
        return experiment


def check_fpr(fpr) -> float:
    return check_rate(fpr, error=ConfigError)


def check_detectors(approaches: Sequence[str], detector: Optional[str]) -> Dict[str, str]:
    """The score each tuned approach is thresholded with: ``detector``, or the paper's."""
    chosen = {}
    for approach in approaches:
        name = detector or own_detector(approach) or "softmax"
        DETECTORS.get(name)  # a clear error for an unknown name
        if not detector_applies(name, approach):
            raise ConfigError(f"--detector {name}: applies to a network with a background class only, "
                              f"not to {approach}")
        chosen[approach] = name
    return chosen


def default_out(experiment: ExperimentConfig, budget: Optional[str]) -> Path:
    """``runs/NAME-tune[-BUDGET][-split-K]``: a protocol's splits tune into folders of their own."""
    suffix = "" if budget == "tune" else f"-{budget or 'config'}"
    split = experiment.train.protocol_split
    return Path("runs") / (f"{experiment.train.name}-tune{suffix}" + ("" if split is None else f"-split-{split}"))


def setup(request: RunRequest, params: Sequence[str], fpr: float = DEFAULT_FPR,
          detector: Optional[str] = None) -> TuneSetup:
    """Check every argument and resolve the experiment, before anything is written."""
    parsed = parse_params(params)
    fpr = check_fpr(fpr)
    budget = request.budget
    if budget is None and "tune" in load_experiment(request.experiment).budgets:
        budget = "tune"
    experiment, device = configure(request.load(budget), request)
    # a protocol with splits tunes on one, named: its choice is then the settings of every split
    protocol_spec(experiment.train.protocol, "protocol").check_split(experiment.train.protocol_split, "--split",
                                                                     required=True)
    tuned, not_tuned = tuned_approaches(experiment.approaches, list(parsed), request.approaches)
    check_grid(parsed, tuned)
    experiment.approaches = tuned
    return TuneSetup(str(request.experiment), experiment, device, budget, parsed, tuned, not_tuned,
                     check_detectors(tuned, detector), fpr)


def tune(request: RunRequest, params: Sequence[str], fpr: float = DEFAULT_FPR, detector: Optional[str] = None,
         log=log_info) -> Path:
    """Cross-class calibration (Sec. 6) of ``params`` over a grid, for the request's experiment
    (``request.approaches``: tune only these; ``request.resume``: continue in ``request.out``);
    returns ``OUT/tune.json``."""
    tuning = setup(request, params, fpr, detector)
    out = request.out or default_out(tuning.experiment, tuning.budget)
    resume = request.resume
    points = grid_points(tuning.params)
    started = any(run.last_checkpoints() for run in point_runs(out))
    if started and not resume:
        raise ConfigError(f"--out {out} already holds a tuning run; add --resume to continue it, or choose another --out")
    if not resume and not started:
        check_tuning_folder(out, points)
    if resume and not (started or any(run.config.exists() for run in point_runs(out))):
        raise ConfigError(f"--resume: --out {out} holds no tuning run to continue (no grid point); "
                          f"leave out --resume to start one there")
    for point in points:  # a refused resume changes nothing
        check_existing_run(tuning.experiment_at(point), out / point_name(point))
    log(f"agnostophobia tune {tuning.config}: budget {tuning.budget or 'none (the config as is)'}, "
        f"{len(points)} grid point(s) of {', '.join(tuning.params)}, tuning {', '.join(tuning.approaches)}"
        + (f" (not {', '.join(tuning.not_tuned)}: their losses read none of them)" if tuning.not_tuned else "")
        + f", choosing by validation CCR at FPR {tuning.fpr:g}; output in {out}")
    # built before anything is written: a protocol without negative classes stops here
    data_seed = tuning.experiment.train.data_seed
    protocol = hold_out_negative_classes(protocol_for(tuning.experiment.train), data_seed)
    split = describe_split(protocol, data_seed)
    log(f"negative classes, data seed {data_seed}: trained on {', '.join(split['trained'])}; "
        f"held out as validation unknowns: {', '.join(split['held_out'])}")
    with run_lock(out):
        rows = []
        for number, point in enumerate(points, 1):
            log(f"[{number}/{len(points)}] {point_name(point)}")
            rows += train_point(tuning, point, out, protocol, log)
        record = tune_record(tuning, rows, split, protocol, out)
        write_results(out, record)
    log(f"tune: {out / 'tune.md'}")
    for approach, chosen in record["chosen"].items():
        log(f"{approach}: " + (chosen["summary"] if chosen else record["not_chosen"][approach]))
    return out / "tune.json"


def check_tuning_folder(out: Path, points) -> None:
    """A new tuning writes ``tune.json``, ``tune.md`` and a run per grid point into ``out``: only
    into a new or empty folder (an empty lock aside), or one whose only entries are its grid
    points' runs (a tuning killed before its first checkpoint). A folder of the user's own files
    is refused in one line naming the first, before anything is written."""
    if not out.is_dir():
        return
    ours = {point_name(point) for point in points} | {LOCK}
    others = sorted(entry for entry in out.iterdir() if entry.name not in ours)
    if others:
        raise ConfigError(f"--out {out}: is a folder of other files, not a tuning run of this project (it holds "
                          f"{others[0]}); tune into a new or empty folder, or add --resume to continue a tuning")


def point_runs(out: Path) -> List[RunDir]:
    """The run of every grid point already in ``out`` (one folder each)."""
    return [RunDir(point) for point in sorted(out.iterdir()) if point.is_dir()] if out.is_dir() else []


def train_point(tuning: TuneSetup, point: Dict[str, float], out: Path, protocol, log) -> List[Dict]:
    """Train (or resume, or keep) one grid point and score it: one row per tuned approach."""
    experiment, point_dir = tuning.experiment_at(point), out / point_name(point)
    write_config(point_dir, experiment, tuning.budget)
    status, timings = "trained", {}
    try:
        timings = train_and_store(experiment, point_dir, tuning.device, log,
                                  make_protocol=lambda cfg: protocol).timings_s
    except TrainingDiverged as exc:  # one bad corner of the grid does not stop the others
        status = f"diverged: {exc}"
        log(f"{point_name(point)}: {status}")
    rows = []
    for approach in tuning.approaches:
        row = {"point": point_name(point), "params": dict(point), "approach": approach,
               "detector": tuning.detectors[approach], "status": status,
               "runs": [f"{point_name(point)}/{RunDir.run_key(s, approach)}" for s in experiment.seed_numbers],
               "wall_s": round(sum(timings.get(RunDir.run_key(s, approach), 0.0) for s in experiment.seed_numbers), 1),
               "ccr_per_seed": None, "ccr": [None] * len(tuning.fprs)}
        if status == "trained":
            per_seed = point_scores(point_dir, experiment, approach, tuning.detectors[approach], tuning.fprs)
            row["ccr_per_seed"] = per_seed
            row["ccr"] = [mean_or_none(column) for column in zip(*per_seed)]
        rows.append(row)
    return rows


def describe_split(protocol, data_seed: int) -> Dict:
    """The two halves of the negative classes by name, as :func:`hold_out_negative_classes` drew them."""
    names = protocol.negative_class_names
    trained, held_out = split_negative_classes(protocol, data_seed)
    return {"data_seed": data_seed, "trained": [names[i] for i in trained], "held_out": [names[i] for i in held_out],
            "rule": "a permutation of the negative classes drawn with the data seed; the first half "
                    "(the larger one for an odd count) is trained on"}


def tune_record(tuning: TuneSetup, rows: List[Dict], split: Dict, protocol, out: Path) -> Dict:
    """Everything ``tune.json`` holds: the grid's table, the choice, the split, the budget."""
    train_cfg = tuning.experiment.train
    index = tuning.fprs.index(tuning.fpr)
    n_unknown = len(protocol.test_unknowns[HELD_OUT_NEGATIVES])
    chosen, not_chosen, configs = {}, {}, {}
    for approach in tuning.approaches:
        best = choose([r for r in rows if r["approach"] == approach], tuning.base_of(approach), index)
        if best is None:
            chosen[approach] = None
            trained = any(r["status"] == "trained" for r in rows if r["approach"] == approach)
            not_chosen[approach] = (
                f"nothing chosen: {n_unknown} validation unknowns cannot resolve FPR {tuning.fpr:g} (that needs "
                f"{math.ceil(1 / tuning.fpr)}); the same command with --resume --fpr {resolvable_fpr(n_unknown):g} "
                f"chooses from the points trained" if trained else "nothing chosen: every point diverged")
            continue
        configs[approach] = write_chosen_config(out, tuning, approach, best["params"])
        values = ", ".join(f"{n} = {format_value(v)}" for n, v in best["params"].items())
        chosen[approach] = {"params": best["params"], "point": best["point"], "ccr": best["ccr"][index],
                            "summary": f"chosen {values} (validation CCR {best['ccr'][index]:.4f} at FPR "
                                       f"{tuning.fpr:g}); train with it: {final_command(tuning, configs[approach])}",
                            "config": configs[approach].name, "command": final_command(tuning, configs[approach])}
    images = len(protocol.train) if any(LOSSES.get(a).trains_on_unknowns for a in tuning.approaches) \
        else int((protocol.train.labels >= 0).sum())
    return {
        "command": "tune", "config": tuning.config, "experiment": train_cfg.name, "budget": tuning.budget,
        "protocol_split": train_cfg.protocol_split, "params": {n: list(v) for n, v in tuning.params.items()},
        "config_values": tuning.base,
        "approaches": tuning.approaches, "not_tuned": tuning.not_tuned, "detectors": tuning.detectors,
        "fpr": tuning.fpr, "fpr_values": tuning.fprs, "seeds": tuning.experiment.seeds,
        "selection": f"highest mean validation CCR at FPR {tuning.fpr:g}; ties: the config's values, then the "
                     f"smallest (in --param order)",
        "negative_classes": split,
        "training": {"protocol": train_cfg.protocol, "protocol_limits": train_cfg.protocol_limits,
                     "known": int((protocol.train.labels >= 0).sum()),
                     "negatives": int((protocol.train.labels < 0).sum()), "epochs": train_cfg.epochs,
                     "images_per_point": images * train_cfg.epochs * tuning.experiment.seeds,
                     "precision": train_cfg.precision, "model": train_cfg.model, "model_kwargs": train_cfg.model_kwargs},
        "validation": {"known": int((protocol.test_known.labels >= 0).sum()), "unknown": n_unknown,
                       "unknown_set": HELD_OUT_NEGATIVES},
        "grid": rows, "chosen": chosen, "not_chosen": not_chosen,
        "wall_time_s": round(sum(r["wall_s"] for r in rows), 1), "data_notes": protocol.notes + protocol.preprocessing_notes,
    }


def resolvable_fpr(n_unknown: int) -> float:
    """The smallest power of ten at least one false positive among ``n_unknown`` resolves."""
    return 10.0 ** math.ceil(math.log10(1 / n_unknown)) if n_unknown else 1.0


def write_chosen_config(out: Path, tuning: TuneSetup, approach: str, values: Dict[str, float]) -> Path:
    """The tuned config with the chosen values, at its top level and in every budget that
    set them, so that ``reproduce`` trains with them whatever budget it is given."""
    data = with_loss_keys_moved(read_yaml(resolve_config_path(tuning.config)))
    budgets = {name: with_loss_keys_moved(overrides) for name, overrides in (data.get("budgets") or {}).items()}
    if budgets:
        data["budgets"] = budgets
    tunable = tunable_parameters()
    for name, value in values.items():
        keyword = tunable[name][0]
        for level in (data, *budgets.values()):  # the config's loss: and each budget's that sets it
            if level is data or keyword in (level.get("loss") or {}):
                level.setdefault("loss", {})[keyword] = value
    path = out / f"chosen-{approach}.yaml"
    header = (f"# {tuning.config} with {', '.join(f'{n} = {format_value(v)}' for n, v in values.items())}, chosen "
              f"for {approach} by cross-class calibration (agnostophobia tune; see tune.md beside this file)\n")
    atomic_write(path, lambda tmp: Path(tmp).write_text(header + dump_yaml(data)))
    return path


def final_command(tuning: TuneSetup, config: Path) -> str:
    budget = default_budget()
    flag = f" --budget {budget}" if budget in tuning.experiment.budgets else ""
    return (f"agnostophobia reproduce {config}{flag} "
            f"--out runs/{tuning.experiment.train.name}-tuned{'-' + budget if flag else ''}")


# ------------------------------------------------------------------ output
def write_results(out: Path, record: Dict) -> None:
    atomic_write(out / "tune.json", lambda tmp: Path(tmp).write_text(json.dumps(record, indent=1)))
    atomic_write(out / "tune.md", lambda tmp: Path(tmp).write_text(tune_markdown(record)))


def _config_value_text(value) -> str:
    """A config value as ``tune.md`` shows it: one number, or each approach's where they differ."""
    if isinstance(value, dict):
        return ", ".join(f"{format_value(v)} ({approach})" for approach, v in value.items())
    return format_value(value)


def _cell(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def tune_markdown(record: Dict) -> str:
    """``tune.md``: the split, the budget, the whole grid's table and the choice."""
    split, train, val = record["negative_classes"], record["training"], record["validation"]
    params, fprs = list(record["params"]), record["fpr_values"]
    not_tuned = (f"; not tuned: {', '.join(record['not_tuned'])} (their losses read none of "
                 f"{', '.join(params)})" if record["not_tuned"] else "")
    lines = [
        f"# Cross-class calibration of {', '.join(params)} (paper Sec. 6)", "",
        f"Config `{record['config']}`"
        + ("" if record.get("protocol_split") is None else
           f" (tuned on split {record['protocol_split']}; the chosen config trains every split)")
        + ", budget " + (f"`{record['budget']}`" if record["budget"] else "none")
        + f", {record['seeds']} training seed(s). "
        f"Tuned: {', '.join(record['approaches'])}{not_tuned}.", "",
        f"**Negative classes**, split by data seed {split['data_seed']} ({split['rule']}):", "",
        f"* trained on ({len(split['trained'])}): {', '.join(split['trained'])}",
        f"* held out, validation unknowns only ({len(split['held_out'])}): {', '.join(split['held_out'])}", "",
        f"**Per point**: {train['known']:,} knowns + {train['negatives']:,} negatives of the trained classes, "
        f"{train['epochs']} epoch(s): {train['images_per_point']:,} training images ({train['precision']}). "
        f"**Validation**: {val['known']:,} held-out knowns against {val['unknown']:,} held-out negatives of the "
        f"held-out classes. Test data is not read.", "",
        f"**Selection**: {record['selection']}; score: "
        + ", ".join(f"{a}: {d}" for a, d in record["detectors"].items()) + ".", "",
        "| " + " | ".join(params) + " | approach | " + " | ".join(
            f"**CCR@{f:g}**" if f == record["fpr"] else f"CCR@{f:g}" for f in fprs) + " | status | time |",
        "|" + "---|" * (len(params) + len(fprs) + 3),
    ]
    for row in record["grid"]:
        mark = " ✓" if (record["chosen"].get(row["approach"]) or {}).get("point") == row["point"] else ""
        cells = [format_value(row["params"][p]) for p in params] + [row["approach"] + mark]
        cells += [_cell(v) for v in row["ccr"]] + [row["status"].split(":")[0], f"{row['wall_s']:.0f} s"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Config values: " + ", ".join(f"{n} = {_config_value_text(v)}" for n, v in record["config_values"].items())
              + ". ✓ = chosen. n/a: too few validation unknowns to resolve that FPR.", ""]
    for approach, chosen in record["chosen"].items():
        if chosen:
            lines += [f"**{approach}**: {chosen['summary'].split('; train with it')[0]}.", "",
                      f"Train with it: `{chosen['command']}`", ""]
        else:
            lines += [f"**{approach}**: {record['not_chosen'][approach]}.", ""]
    lines += ["## Data notes", ""] + [f"* {note}" for note in record["data_notes"]]
    return "\n".join(lines) + "\n"
