"""``agnostophobia ablate CONFIG``: from a reduced budget toward the authors' protocol, one
factor at a time, each step a full reproduction (issue 15).

Our `cpu` reproduction differs from the paper's setup (Sec. 5 and the authors' code,
docs/references.md) in several ways at once: data preparation, the network's activations, the
learning rate, training length and training-set size. Which of them moves Table 2 toward the
paper's numbers can only be measured one at a time. An experiment YAML lists the steps under
``ablation:``, each a budget of that YAML and the factor it adds to the step before it::

    ablation:
      - {budget: ablation-0, adds: "our preparation, PReLU, lr 1e-3, 3 epochs, 6,000 + 6,000 images"}
      - {budget: ablation-1, adds: "the authors' preprocessing"}

Every step is trained and evaluated as ``reproduce CONFIG --budget STEP --out OUT/STEP`` would
(all approaches, ``--seeds`` seeds; resumable: a finished step is kept, an interrupted one
resumes from its last epoch). ``OUT/ablation.json`` and ``OUT/ablation.md`` then hold one
table: CCR at FPR 1e-3 and 1e-2 per approach and unknown set, per step, mean ± std over
seeds, with the paper's Table 2 row beside it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from agnostophobia._atomic import atomic_write
from agnostophobia.data.protocols import protocol_spec
from agnostophobia.errors import ConfigError
from agnostophobia.experiments.paper_numbers import TABLE2, TABLE2_FPRS as PAPER_FPRS
from agnostophobia.experiments.request import RunRequest
from agnostophobia.training.config import ExperimentConfig, load_experiment
from agnostophobia.training.records import read_metrics
from agnostophobia._log import log_info

FPRS = ("1e-3", "1e-2")  # the readouts the table shows by default (Table 2's columns 2 and 3)


def ablation_steps(experiment: ExperimentConfig, only: Optional[Sequence[str]] = None) -> List[Dict[str, str]]:
    """The ``ablation:`` steps of an experiment (``only``: a subset by budget name, in YAML order)."""
    steps = experiment.ablation
    if not steps:
        raise ConfigError(f"config {experiment.train.name!r} defines no 'ablation:' steps; "
                          "add a list of {budget: NAME, adds: TEXT} to its YAML")
    if only:
        unknown = sorted(set(only) - {step["budget"] for step in steps})
        if unknown:
            raise ConfigError(f"--step {', '.join(unknown)}: not an ablation step of {experiment.train.name!r}; "
                              f"its steps: {', '.join(step['budget'] for step in steps)}")
        steps = [step for step in steps if step["budget"] in only]
    return steps


def step_finished(step_out: Path, seeds: int, approaches: Sequence[str]) -> bool:
    """A step whose metrics were written for these seeds and approaches (reproduce writes
    metrics.json last, atomically)."""
    metrics = read_metrics(step_out)
    if metrics is None:
        return False
    return metrics.get("seeds") == seeds and list(metrics.get("approaches", [])) == list(approaches)


def ablate(request: RunRequest, steps: Optional[Sequence[str]] = None, fprs: Sequence[str] = FPRS,
           log=log_info) -> Path:
    """Train and evaluate every step of the request's experiment (or the ``steps`` named) into
    ``request.out``, then write the table of CCR at the FPRs ``fprs`` (of Table 2's 1e-4, 1e-3,
    1e-2, 1e-1). ``request.seeds``: seeds per step (default: each step's budget's)."""
    from agnostophobia.experiments.reproduce import reproduce

    fprs = check_fprs(fprs)
    experiment = load_experiment(request.experiment)
    chosen = ablation_steps(experiment, steps)
    out = request.out or Path("runs") / f"{experiment.train.name}-ablation"
    for step in chosen:
        budgeted = experiment.for_budget(step["budget"])
        n_seeds = request.seeds or budgeted.seeds
        step_out = out / step["budget"]
        if step_finished(step_out, n_seeds, budgeted.approaches):
            log(f"ablation step {step['budget']}: finished earlier, kept")
            continue
        log(f"ablation step {step['budget']}: {step['adds']}")
        reproduce(request.but(budget=step["budget"], seeds=n_seeds, out=step_out, plots=False), log=log)
    record = ablation_record(experiment, out, fprs)
    write_ablation(out, record)
    log(f"ablation table: {out / 'ablation.md'}")
    return out


def check_fprs(fprs: Sequence[str]) -> List[str]:
    wrong = [f for f in fprs if f not in PAPER_FPRS]
    if wrong or not fprs:
        raise ConfigError(f"--fpr {', '.join(wrong) or '(none)'}: choose from {', '.join(PAPER_FPRS)}")
    return list(dict.fromkeys(fprs))


def ablation_record(experiment: ExperimentConfig, out: Path, fprs: Sequence[str] = FPRS) -> Dict:
    """The table's numbers, read from every finished step's ``metrics.json``."""
    paper = TABLE2.get(protocol_spec(experiment.train.protocol).name, {})  # none for a protocol from files
    steps = []
    for step in experiment.ablation:
        metrics = read_metrics(out / step["budget"])
        if metrics is None:
            continue
        rows = [{"unknowns": r["unknowns"], "approach": r["row"], **{
                    f: {"mean": r["ccr_at_fpr"].get(f), "std": (r.get("ccr_at_fpr_std") or {}).get(f)} for f in fprs},
                 "closed_set_accuracy": {"mean": r["closed_set_accuracy"], "std": r.get("closed_set_accuracy_std")}}
                for r in metrics["results"] if r["row"] in experiment.approaches]  # the paper's score per approach
        steps.append({**step, "seeds": metrics["seeds"], "wall_time_s": metrics.get("wall_time_s"),
                      "train_config": metrics.get("train_config", {}), "rows": rows})
    paper_rows = {unknowns: {approach: dict(zip(PAPER_FPRS, values)) for approach, values in by_approach.items()}
                  for unknowns, by_approach in paper.items()}
    return {"experiment": experiment.train.name, "approaches": list(experiment.approaches), "fprs": list(fprs), "steps": steps, "paper": paper_rows}


def write_ablation(out: Path, record: Dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "ablation.json", lambda tmp: Path(tmp).write_text(json.dumps(record, indent=1)))
    atomic_write(out / "ablation.md", lambda tmp: Path(tmp).write_text(ablation_markdown(record)))


def _value(cell: Optional[Dict]) -> str:
    if not cell or cell.get("mean") is None:
        return "N/A"
    std = cell.get("std")
    return f"{cell['mean']:.3f}" + (f" ± {std:.3f}" if std is not None else "")


def _paper(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def ablation_markdown(record: Dict) -> str:
    """One table: rows (unknown set, then approach in the config's order), columns the paper and
    each step; each cell
    ``CCR@1e-3 / CCR@1e-2`` (mean ± std over the step's seeds)."""
    steps = record["steps"]
    lines = [f"# Ablation: {record['experiment']}, from a reduced budget toward the authors' protocol", "",
             "Each step adds one factor to the step before it:", ""]
    lines += [f"{i}. `{s['budget']}` ({s['seeds']} seeds, {s['wall_time_s'] or 0:.0f} s): {s['adds']}"
              for i, s in enumerate(steps)]
    lines += ["", f"CCR at FPR {' / '.join(record['fprs'])}, mean ± std over seeds (our readout, Eq. 3); "
                  "paper: Table 2.", ""]
    lines.append("| unknowns | approach | paper | " + " | ".join(f"{i}. {s['budget']}" for i, s in enumerate(steps)) + " |")
    lines.append("|---|---|---|" + "---|" * len(steps))
    sets = list(dict.fromkeys(r["unknowns"] for s in steps for r in s["rows"]))
    approaches = record.get("approaches") or sorted({r["approach"] for s in steps for r in s["rows"]})
    keys = [(u, a) for u in sets for a in approaches
            if any((r["unknowns"], r["approach"]) == (u, a) for s in steps for r in s["rows"])]
    for unknowns, approach in keys:
        paper = record["paper"].get(unknowns, {}).get(approach)
        paper_text = " / ".join(_paper(paper.get(f)) for f in record["fprs"]) if paper else "–"
        cells = []
        for s in steps:
            row = next((r for r in s["rows"] if (r["unknowns"], r["approach"]) == (unknowns, approach)), None)
            cells.append(" / ".join(_value(row and row[f]) for f in record["fprs"]) if row else "–")
        lines.append(f"| {unknowns} | {approach} | {paper_text} | " + " | ".join(cells) + " |")
    lines += ["", "Closed-set accuracy on the test knowns, mean ± std over seeds (how far each step trained):", "",
              "| approach | " + " | ".join(f"{i}. {s['budget']}" for i, s in enumerate(steps)) + " |",
              "|---|" + "---|" * len(steps)]
    for approach in approaches:
        cells = []
        for s in steps:
            row = next((r for r in s["rows"] if r["approach"] == approach), None)  # the same for every set
            cells.append(_value(row["closed_set_accuracy"]) if row else "–")
        lines.append(f"| {approach} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
