"""``agnostophobia reproduce ensemble``: the paper's Fig. 3b/3c -- an adversarially trained deep
ensemble of MLPs (``baselines.ensemble``) against the LeNet++ models trained with our losses.

It runs through the machinery of every experiment: ``configs/ensemble.yaml`` is read by
``training.config.load_experiment`` (budgets included), the members are trained by the
shared trainer (one training seed per member; FGSM through ``adversarial_epsilon``) and
their outputs stored by ``training.outputs`` (``RUN/seed<m>/softmax/``), resumed and locked
like any run; metrics, figures and report come from ``experiments.report`` and
``plotting``. What this module adds is the ensemble itself -- the members' averaged
probabilities and their square, evaluated on MNIST test (D_c) vs notMNIST (D_a) with the
rows' shared numbers (``metrics.summarize``) -- the scaling-invariance check, the LeNet++
rows read from a LeNet++ run's stored detector scores, and the Fig. 3 section of the report.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
from scipy.special import expit

from agnostophobia.baselines.ensemble import ROW_TITLES, average_probabilities, scaling_invariance, squared_scores
from agnostophobia.data.protocols import unknown_set
from agnostophobia.detectors import softmax_scores
from agnostophobia.detectors.stored import model_scores, read_run_settings
from agnostophobia.experiments.run_metrics import aggregate_seeds
from agnostophobia.experiments.paper_numbers import TABLE2
from agnostophobia.experiments.report import ccr_table_markdown, format_value, write_metrics, write_report
from agnostophobia.experiments.reproduce import TrainingCommand, check_existing_run, configure, default_budget
from agnostophobia.experiments.request import RunRequest
from agnostophobia.metrics import summarize
from agnostophobia.metrics.ood import CONFIDENCE_GRID, mean_confidence_curves
from agnostophobia.plotting.style import approach_name
from agnostophobia.training.outputs import load_outputs
from agnostophobia.rundir import RunDir
from agnostophobia._log import log_info

#: The unknown set of Fig. 3 (a split of the ``mnist-notmnist`` protocol).
UNKNOWN = "notmnist"
#: LeNet++ models drawn beside the ensemble, each thresholded by its max softmax as in Fig. 3.
LENET_APPROACHES = ("softmax", "entropic", "objectosphere")

DEVIATIONS = [
    "**Hyper-parameters we chose.** Lakshminarayanan et al. fix the architecture (3 hidden layers of 200 ReLU "
    "units), M = 5, the NLL, FGSM adversarial training at epsilon = 1 % of the input range and Adam; the "
    "batch size (100), learning rate (1e-3, Adam's default betas) and number of epochs (`paper`: 40) are "
    "our choices.",
    "**No batch normalisation** (the architecture specified for this baseline); `model_kwargs: {batch_norm: "
    "true}` adds BatchNorm1d after every hidden linear layer.",
    "**All training images, last epoch.** No validation split and no early stopping: every member trains on "
    "the whole MNIST training set (or the budget's stratified subset) and keeps its last epoch's weights.",
    "**Adversarial examples are clipped to [0, 1]**, the valid pixel range, and made from the gradient of the "
    "batch-mean NLL with the weights of the current step (its sign per pixel is that of each sample's own "
    "NLL). Clean and adversarial NLL have equal weight.",
    "**Preprocessing of the LeNet++ experiment**: white-on-black 28x28 (`data.preprocess.prepare_images`), x / 255, "
    "flattened; no mean/std normalisation, so epsilon = 0.01 is 1 % of the input range.",
    "**Unknowns are notMNIST_small (18,724)**, the set of the paper's Table 2; knowns are the 10,000 MNIST "
    "test images. The confidence is the ensemble's maximum averaged probability.",
    "**Squared MLP** = the averaged probabilities squared element-wise, not renormalised (the paper's "
    "\"softmax scores scaled by simply squaring them\").",
    "**Members are training seeds 0..M-1** of one run (`--seeds` sets M); each member's numbers with every "
    "detector are in the tables below the Fig. 3 section (mean ± std over the members).",
    "**Dhamija et al. published no ensemble code** (docs/references.md), so their own training settings for "
    "Fig. 3 are unknown; this is our reading of Lakshminarayanan et al.",
]


def reproduce_ensemble(request: Optional[RunRequest] = None, log=log_info) -> Path:
    """Train (or resume) the members, evaluate the ensemble against notMNIST, write metrics,
    figures and report.

    ``request`` (default: the shipped ``configs/ensemble.yaml`` as it is): ``experiment``, that
    config or another experiment YAML; ``budget``, a budget of the config (default: paper with CUDA,
    else cpu); ``seeds``, the number of members (default: the config's, 5); ``out``, the run
    directory (default ``runs/ensemble-BUDGET``; an existing one is resumed); ``lenet_run``, a
    LeNet++ reproduction whose softmax / entropic / objectosphere models are compared (default
    ``runs/lenet++-BUDGET`` when it exists); ``preprocessing`` overrides the config key
    (``authors`` is refused: it applies to lenet++ only); ``plots``: draw the figures.
    """
    request = request or RunRequest("ensemble")
    budget = request.budget or default_budget()
    experiment, device = configure(request.load(budget), request)
    lenet_run = _lenet_run(request.lenet_run, budget)
    out = request.out or Path("runs") / f"{experiment.train.name}-{budget}"
    check_existing_run(experiment, out)  # check first, write after: a refused resume changes nothing
    if not out.exists():
        from agnostophobia.data.protocols import require_protocol_data

        require_protocol_data(experiment.train.protocol, experiment.train.data_dir)

    _Ensemble(experiment, device, out, budget, f"agnostophobia reproduce ensemble --budget {budget}", log=log,
              lenet_run=lenet_run, plots=request.plots).run()
    return out


@dataclasses.dataclass
class _Ensemble(TrainingCommand):
    """``reproduce ensemble``: the members trained and recorded, then the ensemble evaluated
    against the LeNet++ run ``lenet_run`` and reported (figures with ``plots``)."""

    lenet_run: Optional[Path] = None
    plots: bool = True

    def first(self) -> None:
        self.log(f"agnostophobia reproduce ensemble: budget {self.budget}, {self.experiment.seeds} MLP member(s), "
                 f"{self.experiment.train.epochs} epoch(s); output in {self.out}")

    def then(self, meta: Dict) -> None:  # inside the run lock, after the members are trained and recorded
        out = self.out
        meta["ensemble"], compared = evaluate_ensemble(out, self.lenet_run)
        metrics = write_metrics(out, meta)
        figures = _figures(out, compared, self.budget, self.log) if self.plots else None
        report = write_report(out, metrics, figures, sections=ensemble_section(metrics))
        self.log(f"report: {report}\nmetrics: {RunDir(out).metrics}")


def _lenet_run(lenet_run, budget: str) -> Optional[Path]:
    if lenet_run is not None:
        if not Path(lenet_run).is_dir():
            raise ValueError(f"--lenet-run {lenet_run}: no such directory")
        return Path(lenet_run)
    default = Path("runs") / f"lenet++-{budget}"
    return default if default.is_dir() else None


def _member_scores(run_dir: Path) -> Tuple[np.ndarray, np.ndarray, List[int]]:
    """The members' averaged softmax on D_c followed by D_a, the labels, and the member seeds."""
    probs: Dict[str, List[np.ndarray]] = {"known": [], UNKNOWN: []}
    labels, members = {}, []
    for seed, _, model_dir in RunDir(run_dir).models():
        outputs = load_outputs(model_dir.outputs)
        for split in probs:
            probs[split].append(softmax_scores(outputs[split]["logits"]))
            labels[split] = outputs[split]["labels"]
        members.append(seed)
    if not members:
        raise ValueError(f"{run_dir} holds no trained member (seed*/<approach>/outputs.npz)")
    scores = np.concatenate([average_probabilities(probs["known"]), average_probabilities(probs[UNKNOWN])])
    return scores, np.concatenate([labels["known"], np.full(len(labels[UNKNOWN]), -1, np.int64)]), members


def _lenet_scores(lenet_run: Path) -> Dict[str, List[Tuple[np.ndarray, np.ndarray]]]:
    """Max-softmax scores of the LeNet++ models on their own D_c and notMNIST, per approach and seed,
    read from the run's stored detector scores (the same ones as its own report): log-odds, the
    ``softmax`` detector's scale (``scipy.special.expit`` gives the max-softmax)."""
    settings = read_run_settings(lenet_run)  # as its report reads them
    found: Dict[str, List[Tuple[np.ndarray, np.ndarray]]] = {}
    for _, approach, model_dir in RunDir(lenet_run).models():
        if approach in LENET_APPROACHES:
            stored = model_scores(model_dir, approach, settings.for_approach(approach))
            if UNKNOWN in stored.unknown_sets and "softmax" in stored.detectors:
                found.setdefault(approach, []).append(stored.known_vs_unknown("softmax", UNKNOWN))
    return found


def evaluate_ensemble(run_dir: Path, lenet_run: Optional[Path] = None):
    """``(summary for metrics.json, {row: (display, [(scores, labels), ...])})``: the ensemble,
    its square and the LeNet++ rows with the shared row numbers, the scaling-invariance check
    and the confidence curves of Fig. 3b."""
    scores, labels, members = _member_scores(run_dir)
    compared = {"ensemble": (ROW_TITLES["ensemble"], [(scores, labels)]),
                "ensemble-squared": (ROW_TITLES["ensemble-squared"], [(squared_scores(scores), labels)])}
    results = [{"model": "mlp-ensemble", "row": row, "display": compared[row][0], "unknowns": UNKNOWN,
                "members": len(members), **summarize(*compared[row][1][0])} for row in ROW_TITLES]
    notes = ["no LeNet++ run (none given with --lenet-run, and runs/lenet++-BUDGET does not exist)"]
    if lenet_run is not None:
        lenet = _lenet_scores(lenet_run)
        per_seed = [{"model": "lenet++", "row": approach, "display": approach_name(approach), "unknowns": UNKNOWN,
                     "seed": seed, **summarize(s, y)}
                    for approach, pairs in lenet.items() for seed, (s, y) in enumerate(pairs)]
        results += aggregate_seeds(per_seed, ("model", "row"))
        # Fig. 3b's axis is the confidence itself: the max-softmax, expit of the stored log-odds (the
        # detector's tie-free scale); the rows' numbers above are read from the log-odds
        compared.update({a: (approach_name(a), [(expit(s), y) for s, y in pairs]) for a, pairs in lenet.items()})
        notes = ([f"LeNet++ rows from {lenet_run}: {', '.join(f'{a} ({len(p)} seed(s))' for a, p in lenet.items())}; "
                  "max-softmax scores of its stored detector scores on its own 'known' and 'notmnist' outputs"]
                 if lenet else [f"LeNet++ run {lenet_run}: no {'/'.join(LENET_APPROACHES)} model with a "
                                f"'{UNKNOWN}' split; no LeNet++ rows"])
    summary = {
        "results": results,
        "members": members,
        "invariance": scaling_invariance(scores, labels),
        "confidence_curves": {"thresholds": CONFIDENCE_GRID.tolist(),
                              "rows": {row: {kind: [None if not np.isfinite(v) else float(v) for v in values]
                                             for kind, values in mean_confidence_curves(pairs).items()}
                                       for row, (_, pairs) in compared.items()}},
        "lenet_run": str(lenet_run) if lenet_run is not None else None,
        "lenet_notes": notes,
        "deviations": DEVIATIONS,
    }
    return summary, compared


def _figures(out: Path, compared, budget: str, log) -> Dict[str, List[str]]:
    """The run's figures (members) and Fig. 3b / 3c (ensemble, its square, LeNet++ rows)."""
    from agnostophobia.plotting import plot_run
    from agnostophobia.plotting.comparison import ComparedRow, Comparison, comparison_figures

    rows = [ComparedRow(row, display, pairs) for row, (display, pairs) in compared.items()]
    note = " — smoke budget, not a result" if budget == "smoke" else ""
    comparison = Comparison(rows, unknown_set(UNKNOWN).title, underlay="ensemble-squared", note=note)
    figures = comparison_figures(comparison, RunDir(out).figures, stems=("fig3b_confidence", "fig3c_oscr"),
                                 titles=("Fig. 3b: precision and accuracy vs confidence threshold",
                                         "Fig. 3c: OSCR curves"), relative_to=out)
    return {**figures, **plot_run(out, log=log)}


def ensemble_section(metrics: Dict) -> List[str]:
    """The report's Fig. 3 section: the ensemble's rows beside LeNet++'s, the scaling check,
    the deviations."""
    ensemble = metrics["ensemble"]
    paper = TABLE2.get("lenet++", {}).get(UNKNOWN, {})
    lenet_paper = {r["row"]: paper[r["row"]] for r in ensemble["results"]
                   if r["model"] == "lenet++" and r["row"] in paper}
    inv = ensemble["invariance"]
    lines = ["## Fig. 3: the adversarially trained MLP ensemble against our losses (notMNIST as unknowns)", "",
             f"Readout: {metrics['fpr_readout']}. The ensemble averages the softmax of {len(ensemble['members'])} "
             "member(s); LeNet++ rows are mean ± std over that run's seeds, with the paper's Table 2 values in "
             "italics (the paper gives no table for the ensemble).", ""]
    lines += ccr_table_markdown(ensemble["results"], lambda r: f"{r['model']}: {r['display']}", lenet_paper)
    lines += ["", "### Scaling invariance (the paper's \"prone to scaling errors\")", "",
              f"- OSCR curves of the ensemble and the squared ensemble identical: "
              f"**{'yes' if inv['oscr_identical'] else 'NO'}** ({inv['oscr_points']:,} points); CCR@FPR identical: "
              f"**{'yes' if inv['ccr_at_fpr_identical'] else 'NO'}**; precision-vs-confidence differs by up to "
              f"{format_value(inv['precision_max_abs_difference'])} (at threshold "
              f"{format_value(inv['at_threshold'], digits=3)}).", "", "### LeNet++ comparison", ""]
    lines += [f"- {note}" for note in ensemble["lenet_notes"]]
    lines += ["", "### Deviations from Lakshminarayanan et al. (2017), and why", ""]
    lines += [f"- {d}" for d in ensemble["deviations"]] + [""]
    return lines
