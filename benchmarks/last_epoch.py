"""The last epoch against the kept checkpoint: a copy of a finished run in which every model of the
given approaches holds its last epoch (``last.pt``) as its result (``best.pt``), with its stored
outputs, scores and fitted detectors removed, so that the same ``agnostophobia benchmark`` command on
the copy computes them again from the last epoch and reports it beside the original's.

Why: the LeNet++ ``converged`` budget keeps the checkpoint of the lowest validation loss for every
approach (the Agnostophobia authors' rule), where the fine-tunes' authors keep the last epoch
(Outlier Exposure's ``oe_tune.py``; MixOE and the energy fine-tune follow it). The benchmark's
recipes list that departure; this measures what it costs, seed by seed, with the same networks: the
copy differs from the run only in the checkpoint each of those models keeps (a model that kept its
last epoch anyway reads the same in both, which checks the copy).

Nothing of the run is changed; the copy's folder must not exist. The copy's networks of the other
approaches (the fine-tunes' start networks among them) are the run's, their outputs kept.

    agnostophobia benchmark lenet++ --budget converged --seeds 4 --set "approaches=[softmax, mixoe-ft]" --out runs/A
    python benchmarks/last_epoch.py runs/A runs/A-last --approaches mixoe-ft
    agnostophobia benchmark lenet++ --budget converged --seeds 4 --set "approaches=[softmax, mixoe-ft]" --out runs/A-last
    python benchmarks/last_epoch.py --compare runs/A runs/A-last --approaches mixoe-ft

``--compare`` reads the two runs' ``benchmark.json`` and prints, for each approach with its paper's
detector, the last epoch minus the kept checkpoint in mean D_a OSCR area (linear and log-FPR) over
the seeds the two share: the paired difference over seeds with its 95 % t interval and the
benchmark's decision against its margin, Holm over the approaches named (the seeds' spread alone:
the two networks of a seed are the same training stopped at two epochs, and the test samples' share
is not added, so the interval is the narrower one), and the validation accuracy of both.
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

from agnostophobia.errors import RecordError
from agnostophobia.experiments.benchmark_comparisons import MARGIN
from agnostophobia.experiments.benchmark_rows import papers_detector, papers_rows
from agnostophobia.metrics import decide, paired_difference
from agnostophobia.rundir import RunDir
from agnostophobia.training.checkpoint import load_checkpoint, save_checkpoint

#: What a model's outputs and scores are computed into, after its checkpoint: removed in the copy,
#: so that the benchmark computes them again from the checkpoint the copy keeps.
DERIVED = ("outputs", "fit_outputs", "val_outputs", "last_layer", "scores", "config_scores", "fitted")
#: The run's files computed from every model's scores (``compare``, ``benchmark``, ``calibrate``,
#: ``tune-detectors``): removed, so that nothing in the copy is read from the run's checkpoints.
RUN_DERIVED = ("comparison", "comparison_table", "benchmark", "benchmark_table", "calibration", "tuned_settings")


def keep_last_epoch(model) -> dict:
    """``model``'s ``best.pt`` replaced by its last epoch, in ``best.pt``'s form; what it kept before and
    keeps now (epochs and validation losses; the last one from the history ``last.pt`` holds)."""
    last, best = load_checkpoint(model.last), load_checkpoint(model.best)
    if not last.get("finished"):
        sys.exit(f"{model}: its training did not finish (last.pt is not the last epoch of its schedule)")
    val_loss = float(last["history"][-1]["val_loss"])
    save_checkpoint(model.best, {"model": last["model"], "epoch": last["epoch"], "val_loss": val_loss,
                                 "config": last["config"]})
    for name in DERIVED:
        getattr(model, name).unlink(missing_ok=True)
    return {"model": str(model), "kept_epoch": best["epoch"], "last_epoch": last["epoch"],
            "kept_val_loss": best["val_loss"], "last_val_loss": val_loss}


def papers_row(run: Path, approach: str) -> dict:
    """The row of ``approach`` with its paper's detector in ``run``'s ``benchmark.json``, read through
    the run's path rule (no link followed at any component)."""
    folder = RunDir(run)
    try:
        text = folder.tree.read_bytes((folder.benchmark.name,))
    except FileNotFoundError:
        sys.exit(f"{run}: no benchmark.json; run the benchmark command on it first")
    except RecordError as refused:  # a link, FIFO or second name where the report should be
        sys.exit(str(refused))
    rows = [row for row in papers_rows(json.loads(text)["rows"]) if row["approach"] == approach]
    if not rows:
        sys.exit(f"{run}: benchmark.json has no row of {approach} with {papers_detector(approach)}")
    return rows[0]


def per_seed(row: dict, values, seeds) -> list:
    """The values of one of ``row``'s per-seed lists at ``seeds``, in that order."""
    by_seed = dict(zip(row["seeds"], values))
    return [by_seed[seed] for seed in seeds]


#: The per-seed mean D_a areas compared: the linear one the benchmark's tests read, which at LeNet++'s
#: ceiling compares closed-set accuracy, and the log-FPR one, which reads the low-FPR end.
METRICS = {"oscr": "OSCR", "oscr_log": "OSCR, log FPR"}


def compare(kept_run: Path, last_run: Path, approaches) -> str:
    """A Markdown table of the last epoch against the kept checkpoint, per approach and metric
    (:data:`METRICS`; each metric a family of its own for Holm), as the module docstring says."""
    lines = ["| approach (detector) | seeds | val. acc. kept / last | mean D_a area | kept / last | "
             f"last - kept [95 % t interval] | decision (margin {MARGIN}, Holm over {len(approaches)}) |",
             "|---|---|---|---|---|---|---|"]
    pairs = {}  # approach -> (kept row, last row, the seeds both hold, the validation accuracy of each)
    for approach in approaches:
        kept, last = papers_row(kept_run, approach), papers_row(last_run, approach)
        seeds = sorted(set(kept["seeds"]) & set(last["seeds"]))
        if len(seeds) < 2:
            sys.exit(f"{approach}: the runs share {len(seeds)} seed(s); a paired difference needs two")
        accuracy = [np.mean(per_seed(r, r["accuracy_per_seed"]["val"], seeds)) for r in (kept, last)]
        pairs[approach] = (kept, last, seeds, accuracy)
    for metric, title in METRICS.items():
        values = {approach: [per_seed(r, r["mean_da_per_seed"][metric], seeds) for r in (kept, last)]
                  for approach, (kept, last, seeds, _) in pairs.items()}
        differences = [paired_difference(last_values, kept_values) for kept_values, last_values in values.values()]
        for (approach, (_, _, seeds, accuracy)), difference, decision in zip(pairs.items(), differences,
                                                                            decide(differences, MARGIN)):
            means = [np.mean(v) for v in values[approach]]
            interval = difference.interval(0.95)  # four decimals: the effects read here are below the tables' three
            lines.append(f"| {approach} ({papers_detector(approach)}) | {len(seeds)} | {accuracy[0]:.4f} / {accuracy[1]:.4f} "
                         f"| {title} | {means[0]:.4f} / {means[1]:.4f} "
                         f"| {interval.estimate:+.4f} [{interval.low:+.4f}, {interval.high:+.4f}] | {decision.verdict} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a finished run (benchmark, reproduce or train)")
    p.add_argument("copy", type=Path, help="the copy to write (must not exist); with --compare, its benchmarked copy")
    p.add_argument("--approaches", nargs="+", required=True, help="whose models keep their last epoch in the copy")
    p.add_argument("--compare", action="store_true", help="print the two benchmarked runs' comparison, write nothing")
    args = p.parse_args(argv)
    if args.compare:
        print(compare(args.run, args.copy, args.approaches))
        return 0
    if args.copy.exists():
        sys.exit(f"{args.copy}: exists; the copy is written to a new folder")
    if not any(approach in args.approaches for _, approach, _ in RunDir(args.run).models()):
        sys.exit(f"{args.run}: no model of {', '.join(args.approaches)}")
    shutil.copytree(args.run, args.copy, symlinks=True)
    run = RunDir(args.copy)
    for name in RUN_DERIVED:
        getattr(run, name).unlink(missing_ok=True)
    changed = [keep_last_epoch(model) for _, approach, model in run.models() if approach in args.approaches]
    for row in changed:
        print(f"{row['model']}: kept epoch {row['kept_epoch']} (validation loss {row['kept_val_loss']:.4f}), "
              f"now epoch {row['last_epoch']} ({row['last_val_loss']:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
