"""Sub-commands ``train``, ``evaluate``, ``reproduce``, ``tune``, ``tune-detectors``, ``benchmark``, ``ablate``
and ``plot``.

The parsers import nothing heavy (``--help`` and an argument error answer without torch or
numpy); each command imports what it runs."""
from __future__ import annotations

import argparse
from pathlib import Path

from agnostophobia.deploy.cli import fpr_rate
from agnostophobia.experiments.preflight import before_loading
from agnostophobia.experiments.ranking_candidates import RANKING_CANDIDATES
from agnostophobia.rundir import DATA_FETCHED, TUNED_SETTINGS
from agnostophobia.training.auto_options import check_batched_seeds, check_concurrent_runs

PREPROCESSING_HELP = ("data preparation, overriding the config key 'preprocessing': ours (default: corrected) or "
                      "authors (the authors' MNIST/data_prep.py: per-set inversion, CIFAR transposed and grey as BGR, "
                      "bicubic resizing, no polarity check; lenet++ only; docs/data.md)")


def positive_int(text: str) -> int:
    """argparse type for counts: ``--seeds 0`` would train nothing and report success."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def split_index(text: str) -> int:
    """argparse type for ``--split``: a split's index, checked against the protocol's splits later
    (``RunRequest.split_runs``: the protocol is known once the config is read)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a split's index, an integer >= 0, got {text!r}")
    return value


SPLIT_HELP = ("of a protocol with splits (osr-mnist, osr-cifar10: 0-4), run only split K, into OUT/split-K "
              "(default: every split, one run folder each)")


def concurrent_runs(text: str):
    """argparse type for ``--concurrent-runs``: auto or an integer >= 1."""
    try:
        return check_concurrent_runs(text, "--concurrent-runs")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None


def batched_seeds(text: str):
    """argparse type for ``--batched-seeds``: auto, true or false."""
    try:
        return check_batched_seeds(text, "--batched-seeds")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None


def preprocessing(text: str) -> str:
    """argparse type for ``--preprocessing``: a name of ``data.preprocess.PREPROCESSINGS``, read
    only when the flag is given (that module loads numpy; ``--help`` must not)."""
    from agnostophobia.data.preprocess import PREPROCESSINGS

    if text not in PREPROCESSINGS:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(PREPROCESSINGS)}, got {text!r}")
    return text


def set_option(text: str):
    """argparse type for ``--set KEY=VALUE``: (key, value read as YAML), checked later with the config."""
    from agnostophobia.training.config import parse_set_option

    try:
        return parse_set_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


SET_HELP = ("override one config key for this run, after the budget (repeatable): KEY=VALUE, the value read as "
            "YAML, a dotted KEY for a nested one (loss.xi=20, protocol.val_fraction=0.2); checked as the config "
            "file is")


def add_commands(subparsers) -> None:
    """The experiment commands, in the order ``--help`` lists them."""
    common, runs = _shared_options()
    _add_reproduce(subparsers, common, runs)
    _add_train(subparsers, common, runs)
    _add_evaluate(subparsers, common)
    _add_tune(subparsers, common)
    _add_tune_detectors(subparsers)
    _add_benchmark(subparsers, common, runs)
    _add_ablate(subparsers, common)


def _shared_options():
    """The options several commands share, as argparse parents: ``common`` (where the data is,
    the device, progress bars) and ``runs`` (how a training command trains its runs)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", help="dataset directory (default: $AGNOSTOPHOBIA_DATA or the user cache)")
    common.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda when available)")
    common.add_argument("--no-progress", action="store_true", help="no progress bar")
    runs = argparse.ArgumentParser(add_help=False)
    runs.add_argument("--concurrent-runs", type=concurrent_runs, metavar="auto|N",
                      help="runs (approaches x seeds) trained at the same time, one process each, the threads "
                           "shared out (default: the config's concurrent_runs; auto: 2 on a CPU with 2+ cores, "
                           "4 on a GPU, 1 for runs of under 50,000 training images)")
    runs.add_argument("--batched-seeds", type=batched_seeds, metavar="auto|true|false",
                      help="train the seeds of each approach as one batched model (default: the config's "
                           "batched_seeds; auto: off until a GPU has shown batched CCR equal to separate runs)")
    runs.add_argument("--set", type=set_option, action="append", default=[], dest="set_options",
                      metavar="KEY=VALUE", help=SET_HELP)
    runs.add_argument("--cuda-graph", action=argparse.BooleanOptionalAction, default=None,
                      help="capture each run's training step in a CUDA graph and replay it (CUDA only; default: "
                           "the config's cuda_graph, false; not yet measured on a GPU)")
    runs.add_argument("--split", type=split_index, metavar="K", help=SPLIT_HELP)
    return common, runs


def _add_reproduce(subparsers, common, runs) -> None:
    """``reproduce``: a paper experiment end to end."""
    p = subparsers.add_parser("reproduce", parents=[common, runs],
                              help="reproduce a paper experiment end to end (train, evaluate, report, figures)")
    p.add_argument("experiment", help="lenet++ (Tables 1-2, Figs. 1-2), cifar (Table 2, lower half), "
                                      "ensemble (Fig. 3), or an experiment config path")
    p.add_argument("--protocol", help="run the experiment on another protocol, e.g. cifar --protocol cifar10-split "
                                      "(trained on CIFAR-10 alone, runs without CIFAR-100/SVHN)")
    p.add_argument("--lenet-run", type=Path, help="ensemble only: a LeNet++ reproduction to compare against "
                                                  "(default: runs/lenet++-BUDGET when it exists)")
    p.add_argument("--budget",
                   help="a budget the experiment's config defines; the shipped ones: smoke (<1 min, not a result), "
                        "cpu (a shortened run for 2 CPU cores: <=45 min for lenet++ and cifar, <=20 min for "
                        "ensemble), paper (the authors' protocol), tune (lenet++: what `tune` trains each grid point "
                        "with), peers (lenet++ and cifar: the six training peers beside the paper's four); "
                        "default: paper with CUDA, else cpu")
    p.add_argument("--seeds", type=positive_int, help="number of seeds (default: the budget's)")
    p.add_argument("--out", type=Path, help="output directory (default: runs/EXPERIMENT-BUDGET); "
                                            "an existing one is resumed")
    p.add_argument("--no-plots", action="store_true", help="skip the figures")
    p.add_argument("--no-fetch", action="store_true", help="stop and explain instead of downloading missing datasets")
    p.add_argument("--allow-unverified", action="store_true",
                   help="also download datasets without a published checksum (notMNIST, NHCD); the sha256 "
                        f"received is recorded in OUT/{DATA_FETCHED}")
    p.add_argument("--preprocessing", type=preprocessing, metavar="NAME",
                   help=PREPROCESSING_HELP + "; the default --out gains the suffix -authors")
    p.set_defaults(func=_reproduce, before_loading=before_loading)


def _add_train(subparsers, common, runs) -> None:
    """``train``: the approaches of an experiment config."""
    p = subparsers.add_parser("train", parents=[common, runs],
                              help="train approaches from an experiment config (also under torchrun: DDP)")
    p.add_argument("config", help="experiment YAML (path, or the name of a shipped config)")
    p.add_argument("--approach", action="append", help="train only this approach (repeatable)")
    p.add_argument("--budget", help="apply the overrides of this budget of the config")
    p.add_argument("--seeds", type=positive_int, help="number of seeds (default: the config's)")
    p.add_argument("--out", type=Path, required=True, help="run directory")
    p.add_argument("--resume", action="store_true", help="continue the run already in --out")
    p.add_argument("--preprocessing", type=preprocessing, metavar="NAME", help=PREPROCESSING_HELP)
    p.set_defaults(func=_train, before_loading=before_loading)


def _add_evaluate(subparsers, common) -> None:
    """``evaluate``: a run's metrics and report."""
    p = subparsers.add_parser("evaluate", parents=[common],
                              help="metrics and report of a run; optionally on further unknown sets")
    p.add_argument("run", type=Path, help="run directory written by train or reproduce")
    p.add_argument("--unknowns", nargs="+", default=[], metavar="NAME_OR_PATH",
                   help="registered dataset names, .npz files in our layout, or image folders")
    p.add_argument("--replace", action="store_true",
                   help="replace unknown sets of the same name that the run already holds")
    p.set_defaults(func=_evaluate)


def _add_tune(subparsers, common) -> None:
    """``tune``: loss parameters by cross-class calibration (Sec. 6)."""
    p = subparsers.add_parser("tune", parents=[common],
                              help="choose loss parameters (xi, lambda) by cross-class calibration (paper Sec. 6): "
                                   "train on half of the negative classes, score on the other half")
    p.add_argument("config", help="experiment YAML (path, or the name of a shipped config, e.g. lenet++)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2,...",
                   help="a parameter and its values (repeatable; the grid is their product), e.g. "
                        "--param xi=10,50,100 --param lambda=1e-4,1e-3,1e-2")
    p.add_argument("--budget", help="a budget of the config (default: its 'tune' budget where it has one)")
    p.add_argument("--out", type=Path, help="output directory, one run per grid point "
                                            "(default: runs/EXPERIMENT-tune)")
    p.add_argument("--fpr", type=float, default=1e-2,
                   help="choose by the validation CCR at this FPR (default 1e-2)")
    p.add_argument("--seeds", type=positive_int, help="training seeds per point (default: the budget's)")
    p.add_argument("--approach", action="append",
                   help="tune this approach (repeatable; default: every approach of the config whose loss reads "
                        "a tuned parameter, i.e. objectosphere for xi and lambda)")
    p.add_argument("--detector", help="score to threshold (default: each approach's paper score)")
    p.add_argument("--split", type=split_index, metavar="K",
                   help="of a protocol with splits (osr-mnist, osr-cifar10: 0-4), the split to tune on (required "
                        "there; default --out: runs/EXPERIMENT-tune[-BUDGET]-split-K)")
    p.add_argument("--resume", action="store_true", help="continue the tuning run in --out: finished points are "
                                                         "kept, an interrupted one resumes from its last epoch")
    p.set_defaults(func=_tune)


def _add_tune_detectors(subparsers) -> None:
    """``tune-detectors``: each detector's settings on the run's validation data."""
    p = subparsers.add_parser("tune-detectors",
                              help="choose each detector's settings (k-NN's k, OpenMax's tail size and alpha, EVM's "
                                   "tail size and cover threshold, PostMax's tail fraction) by CCR at an FPR on the "
                                   f"run's validation knowns and negatives; stored in RUN/{TUNED_SETTINGS}")
    p.add_argument("run", type=Path, help="a run directory (reproduce/train output)")
    p.add_argument("--fpr", type=fpr_rate,
                   help="target FPR of the validation CCR (default: 0.01 where the validation negatives support it, "
                        "else the smallest FPR they support); refused below 10/#validation negatives")
    p.add_argument("--detector", nargs="+", dest="detectors",
                   help="detectors to tune (default: every one that declares a grid)")
    p.add_argument("--approach", nargs="+", help="trained approaches to tune for (default: every one of the run)")
    p.add_argument("--partial", action="store_true",
                   help="where some detectors get no setting, still write those chosen (default: write nothing, "
                        "keep detector_settings.json as it was, and say what this would write)")
    p.set_defaults(func=_tune_detectors)


def _add_benchmark(subparsers, common, runs) -> None:
    """``benchmark``: every training method x every post-processor on one protocol."""
    p = subparsers.add_parser("benchmark", parents=[common, runs],
                              help="every training method x every post-processor on one protocol, several seeds: "
                                   "train, tune the detectors on validation data, and one report of OSCR, AUROC "
                                   "and CCR with intervals over seeds, closed-set accuracy, ties and paired tests")
    p.add_argument("protocol", help="lenet++, cifar10-split (and cifar10-split-b, its second class partition), "
                                    "cifar, osr-mnist, osr-cifar10 (five splits each: --split), or an experiment "
                                    "YAML (your own protocol or image folder)")
    p.add_argument("--budget", help="a budget of the protocol's config: converged (networks trained to the "
                                    "protocol's closed-set accuracy threshold) or smoke (a minute, not a result)")
    p.add_argument("--seeds", type=positive_int, help="seeds per approach (default 5; at least 2)")
    p.add_argument("--out", type=Path, help="output directory (default: runs/benchmark-PROTOCOL-BUDGET); an "
                                            "existing one continues where it stopped")
    p.add_argument("--min-accuracy", type=float, metavar="A",
                   help="closed-set accuracy of the validation knowns below which a network counts as not "
                        "converged (default: the protocol's, 0.985 for lenet++ and 0.90 for the CIFAR protocols; "
                        "none for your own)")
    p.add_argument("--accuracy-margin", type=float, metavar="M",
                   help="converge softmax by --min-accuracy and every other approach when its validation accuracy "
                        "is not worse than softmax's by M or more (the low end of the paired 90%% t interval over "
                        "seeds above -M), instead of the threshold (How the benchmark decides; needs softmax). Derive "
                        "M, do not tune it: two binomial standard errors of one network's accuracy at the threshold "
                        "on the validation knowns, 2*sqrt(t(1-t)/n), is 0.0134 on cifar10-split")
    p.add_argument("--ranking-metric", choices=tuple(RANKING_CANDIDATES), metavar="METRIC",
                   help="rank by this metric, declared before the report (default: the metric the protocol "
                        "declares, How the benchmark decides; a protocol that declares none, e.g. your own: the "
                        "rule that chooses one on validation data): " + ", ".join(RANKING_CANDIDATES))
    p.set_defaults(func=_benchmark)


def _add_ablate(subparsers, common) -> None:
    """``ablate``: the config's ablation steps and their table."""
    p = subparsers.add_parser("ablate", parents=[common],
                              help="the config's ablation steps, each a reproduction adding one factor toward the "
                                   "authors' protocol, and one table of them")
    p.add_argument("config", help="experiment YAML with an 'ablation:' list (e.g. the shipped lenet++)")
    p.add_argument("--out", type=Path, help="output directory, one run per step (default: runs/EXPERIMENT-ablation); "
                                            "finished steps are kept, an interrupted one resumes")
    p.add_argument("--seeds", type=positive_int, help="seeds per step (default: each step's budget's)")
    p.add_argument("--step", action="append", metavar="BUDGET",
                   help="run only this step (repeatable); the table shows every finished step")
    p.add_argument("--fpr", action="append", metavar="FPR",
                   help="a readout of the table, of 1e-4 1e-3 1e-2 1e-1 (repeatable; default: 1e-3 and 1e-2)")
    p.set_defaults(func=_ablate)


def _request(args, experiment):
    """The one request of this command line (``experiments/request.py``): built here, once."""
    from agnostophobia.experiments.request import RunRequest

    return RunRequest.from_args(args, experiment)


def _reproduce(args) -> int:
    from agnostophobia.training.distributed import require_one_process

    require_one_process("reproduce")
    if args.experiment == "ensemble":
        from agnostophobia.experiments.reproduce_ensemble import reproduce_ensemble
        if args.set_options:
            raise ValueError("--set applies to a config's experiment, not to 'reproduce ensemble'")
        if args.split is not None:
            raise ValueError("--split applies to a protocol with splits (osr-mnist, osr-cifar10), not to "
                             "'reproduce ensemble'")
        reproduce_ensemble(_request(args, "ensemble"))
        return 0
    if args.lenet_run:
        raise ValueError("--lenet-run applies to 'reproduce ensemble' only")
    from agnostophobia.experiments.reproduce import reproduce
    reproduce(_request(args, args.experiment))
    return 0


def _train(args) -> int:
    from agnostophobia.experiments.reproduce import train_run

    train_run(_request(args, args.config))
    return 0


def _evaluate(args) -> int:
    from agnostophobia.deploy.request import ModelRequest
    from agnostophobia.experiments.evaluate_unknowns import evaluate_run
    from agnostophobia.training.distributed import require_one_process

    require_one_process("evaluate")
    evaluate_run(ModelRequest.from_args(args), unknowns=args.unknowns, replace=args.replace)
    return 0


def _tune(args) -> int:
    from agnostophobia.experiments.tune import tune

    tune(_request(args, args.config), args.param, fpr=args.fpr, detector=args.detector)
    return 0


def _tune_detectors(args) -> int:
    from agnostophobia.deploy.request import ModelRequest
    from agnostophobia.experiments.tune_detectors import tune_detectors

    tune_detectors(ModelRequest.from_args(args), args.detectors)
    return 0


def _benchmark(args) -> int:
    from agnostophobia.experiments.benchmark import benchmark
    from agnostophobia.training.distributed import require_one_process

    require_one_process("benchmark")
    # the positional PROTOCOL is the benchmark's target, not reproduce's --protocol variant
    benchmark(args.protocol, _request(args, None).but(protocol=None), min_accuracy=args.min_accuracy,
              accuracy_margin=args.accuracy_margin, ranking=args.ranking_metric)
    return 0


def _ablate(args) -> int:
    from agnostophobia.experiments.ablate import ablate
    from agnostophobia.training.distributed import require_one_process

    require_one_process("ablate")
    ablate(_request(args, args.config), steps=args.step, **({"fprs": args.fpr} if args.fpr else {}))
    return 0
