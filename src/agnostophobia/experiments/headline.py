"""The headline a command prints once a run has numbers: one row per trained approach, scored
by its default detector (the score the paper thresholds it with, as ``calibrate`` and
``predict`` use it), with CCR at FPR 1e-3, 1e-2 and 1e-1 and AUROC per unknown set; mean over
seeds. The full approach x detector matrix stays in ``report.md``.

``evaluate`` and ``reproduce`` read it from their metrics; ``train``, which writes no metrics,
scores only these default detectors on the stored outputs (:func:`trained_headline_rows`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List

from agnostophobia.deploy.calibration import default_detector
from agnostophobia.detectors.stored import read_run_settings, score_outputs
from agnostophobia.experiments.run_metrics import aggregate_seeds, evaluate_model
from agnostophobia.metrics.rows import row_sort_key
from agnostophobia.rundir import RunDir
from agnostophobia.training.outputs import load_fit_outputs, load_outputs

#: The headline's FPR columns (keys of a result's ``ccr_at_fpr``).
HEADLINE_FPRS = ("1e-3", "1e-2", "1e-1")


def headline_rows(results: List[Dict]) -> List[Dict]:
    """The result rows (``metrics.json``'s ``results``) of each approach with its default detector."""
    return sorted((r for r in results if "approach" in r and r.get("detector") == default_detector(r["approach"])),
                  key=lambda r: (row_sort_key(r["approach"]), r["unknowns"]))


def trained_headline_rows(run_dir: Path) -> List[Dict]:
    """:func:`headline_rows` computed from the stored outputs, scoring only the default detectors
    (with the run's detector settings), so ``train`` can print it without evaluating the matrix."""
    settings = read_run_settings(run_dir)
    per_seed = []
    for seed, approach, model_dir in RunDir(run_dir).models():
        scores = score_outputs(load_outputs(model_dir.outputs), load_fit_outputs(model_dir), approach,
                               settings.for_approach(approach), only=[default_detector(approach)])
        per_seed += [{**result, "seed": seed} for result in evaluate_model(approach, scores)]
    return headline_rows(aggregate_seeds(per_seed, ("row", "unknowns")))


def headline_table(rows: List[Dict], every_detector: str) -> str:
    """The rows as an aligned plain-text table, for a terminal; ``every_detector`` says where
    the other detectors' numbers are (the report, or the command that writes it)."""
    header = ["approach", "detector", "unknowns"] + [f"CCR@{k}" for k in HEADLINE_FPRS] + ["AUROC"]
    table = [header] + [[r["approach"], r["detector"], r["unknowns"]]
                        + [_number(r["ccr_at_fpr"].get(k)) for k in HEADLINE_FPRS] + [_number(r.get("auroc"))]
                        for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
             for line in table]
    seeds = max((r.get("seeds", 1) for r in rows), default=1)
    note = f"mean of {seeds} seeds; " if seeds > 1 else ""
    return "\n".join([f"headline: each approach with its default detector ({note}N/A: too few unknowns for the "
                      f"FPR; every detector: {every_detector})"] + lines)


def _number(value) -> str:
    return "N/A" if value is None else f"{value:.4f}"
