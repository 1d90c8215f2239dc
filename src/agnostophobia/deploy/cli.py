"""Sub-commands ``compare``, ``calibrate``, ``predict`` and ``export``.

The parsers import nothing heavy (``--help`` and an argument error answer without torch or
numpy); each command imports what it runs."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agnostophobia.deploy.formats import DEFAULT_FORMAT, FORMATS
from agnostophobia.deploy.preflight import before_loading


def fpr_rate(text: str) -> float:
    """argparse type for ``--fpr``: a false positive rate in (0, 1]."""
    from agnostophobia._validation import FPR_RULE, is_rate  # numpy: only when --fpr is given

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not is_rate(value):
        raise argparse.ArgumentTypeError(f"{FPR_RULE}, e.g. 0.01, got {text!r}")
    return value


def seed_number(text: str) -> int:
    from agnostophobia._validation import SEED_RULE, is_seed  # numpy: only when --seed is given

    try:
        value = int(text)
    except ValueError:
        value = None
    if not is_seed(value):
        raise argparse.ArgumentTypeError(f"{SEED_RULE}, got {text!r}")
    return value


def add_commands(subparsers) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("run", type=Path, help="run directory written by reproduce or train")
    common.add_argument("--data-dir", help="dataset directory, to rebuild the validation split of a run trained "
                                           "before validation outputs were stored (default: $AGNOSTOPHOBIA_DATA)")
    one_model = argparse.ArgumentParser(add_help=False)
    one_model.add_argument("--approach", help="trained approach (default: the run's first trained with negatives)")
    one_model.add_argument("--detector", help="registered detector, or best: the top of `compare`'s ranking at the "
                                              "calibrated FPR (or --fpr) (default: the approach's paper score)")
    one_model.add_argument("--seed", type=seed_number, default=0, help="training seed (default: 0)")

    p = subparsers.add_parser("compare", parents=[common],
                              help="rank every (approach, detector) of a run on its validation data (AUROC, CCR at "
                                   "every FPR the validation negatives support, closed-set accuracy), the test sets "
                                   "beside; written to RUN/comparison.md and comparison.json")
    p.add_argument("--fpr", type=fpr_rate, metavar="T",
                   help="rank by the validation CCR at T (refused below 10/#validation negatives; default: the "
                        "FPR tune-detectors tunes at, 0.01 where the negatives support it, else the smallest they "
                        "support); ties to the higher validation AUROC")
    p.add_argument("--approach", action="append", help="compare only this approach's detectors (repeatable)")
    p.set_defaults(func=_compare, before_loading=before_loading)

    p = subparsers.add_parser("calibrate", parents=[common],
                              help="choose each model's threshold on validation data (FPR <= T on its negatives)")
    p.add_argument("--fpr", type=fpr_rate, required=True, metavar="T",
                   help="target false positive rate on the validation negatives, in (0, 1]")
    p.add_argument("--detector", help="registered detector for every approach, or best: the top of `compare`'s "
                                      "ranking at --fpr (of each --approach given) (default: each approach's "
                                      "paper score)")
    p.add_argument("--approach", action="append", help="calibrate only this approach (repeatable; default: all)")
    p.add_argument("--device", help="cpu, cuda or cuda:N, for validation outputs not stored (default: the run's)")
    p.add_argument("--partial", action="store_true",
                   help="where some models get no threshold at T, still write those that resolve (default: write "
                        "nothing, keep calibration.json as it was, and say what this would write)")
    p.set_defaults(func=_calibrate, before_loading=before_loading)

    p = subparsers.add_parser("predict", parents=[common, one_model],
                              help="classify images with a run's model: a class or 'unknown'")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="image files, folders of images, or .npz files "
                                                              "(x_test, x or images)")
    p.add_argument("--out", type=Path, help="write the rows to FILE.csv or FILE.json (default: a table on stdout)")
    p.add_argument("--fpr", type=fpr_rate, metavar="T", help="calibrate the threshold on validation data first")
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: the run's)")
    p.set_defaults(func=_predict, before_loading=before_loading)

    p = subparsers.add_parser("export", parents=[common, one_model],
                              help="one file with network, score and threshold: torch.export, ONNX or TorchScript")
    p.add_argument("--format", choices=FORMATS, default=DEFAULT_FORMAT,
                   help="pt2: torch.export (default); onnx: needs pip install 'agnostophobia[onnx]'; "
                        "torchscript: deprecated by PyTorch, kept for existing users")
    p.add_argument("--out", type=Path, required=True, help="the file to write")
    p.add_argument("--fpr", type=fpr_rate, metavar="T", help="calibrate the threshold on validation data first")
    p.set_defaults(func=_export, before_loading=before_loading)


def _compare(args) -> int:
    from agnostophobia.deploy.compare import compare_run
    from agnostophobia.deploy.request import ModelRequest

    compare_run(ModelRequest.from_args(args))
    return 0


def _calibrate(args) -> int:
    from agnostophobia.deploy.calibration import calibrate_run
    from agnostophobia.deploy.request import ModelRequest

    calibrate_run(ModelRequest.from_args(args))  # --detector best: chosen there, before anything is written
    return 0


def _predict(args) -> int:
    from agnostophobia.deploy.predict import check_output, format_table, predict_files, write_rows
    from agnostophobia.deploy.request import ModelRequest

    check_output(args.out, args.run)
    log = print if args.out else (lambda message: print(message, file=sys.stderr))  # stdout holds the table alone
    rows = predict_files(ModelRequest.from_args(args), args.inputs, log=log)
    if args.out:
        write_rows(rows, args.out)
        unknown = sum(row["label"] == "unknown" for row in rows)
        print(f"{len(rows):,} predictions ({unknown:,} unknown): {args.out}")
    else:
        print(format_table(rows))
    return 0


def _export(args) -> int:
    from agnostophobia.deploy.export import export_run
    from agnostophobia.deploy.request import ModelRequest

    export_run(ModelRequest.from_args(args), args.out, args.format)
    return 0
