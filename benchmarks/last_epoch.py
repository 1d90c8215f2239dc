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
"""
import argparse
import shutil
import sys
from pathlib import Path

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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="a finished run (benchmark, reproduce or train)")
    p.add_argument("copy", type=Path, help="the copy to write (must not exist)")
    p.add_argument("--approaches", nargs="+", required=True, help="whose models keep their last epoch in the copy")
    args = p.parse_args(argv)
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
