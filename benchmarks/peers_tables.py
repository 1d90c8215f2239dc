"""The tables of docs/training-peers.md and docs/post-processors.md from an evaluated run:

    python benchmarks/peers_tables.py RUN [--also RUN ...] [--sets NAME ...] [--fpr 1e-2]
    python benchmarks/peers_tables.py --steps LABEL=RUN:APPROACH ... [--fpr 1e-2]

* per unknown set, every approach with the detector its loss's paper scores with (its
  ``default_detector``): CCR at FPR 10^-3, 10^-2 and 10^-1, and AUROC, each as the mean over the
  run's seeds with the min-max in brackets; and closed-set accuracy;
* per unknown set, every approach x every detector: CCR at ``--fpr``, mean over the seeds (the
  detectors' settings as ``tune-detectors`` chose them on validation data, where the run was
  tuned), "not applicable" where a detector does not apply, with the reason under the table.

* with ``--steps``, an ablation: one row per step (a run and an approach), CCR at ``--fpr`` on
  each unknown set and closed-set accuracy.

The numbers are read from ``RUN/metrics.json`` (``agnostophobia evaluate RUN`` writes it); nothing
is computed anew. ``--sets`` picks unknown sets by name (default: all).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this tree's package

from agnostophobia.detectors import DETECTORS  # noqa: E402
from agnostophobia.experiments.report import row_sort_key, set_title  # noqa: E402
from agnostophobia.losses import LOSSES  # noqa: E402

FPRS = ("1e-3", "1e-2", "1e-1")


def spread(values: List[Optional[float]], digits: int = 3) -> str:
    """``mean [min-max]`` of the seeds' values; "—" where any seed has none (an FPR below 1/#unknowns)."""
    if not values or any(v is None for v in values):
        return "—"
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{min(values):.{digits}f}–{max(values):.{digits}f}]"


def per_seed_rows(metrics: Dict, unknown: str) -> Dict:
    """(approach, detector) -> the per-seed rows of one unknown set."""
    rows: Dict = {}
    for row in metrics["per_seed"]:
        if row.get("unknowns") == unknown and "detector" in row:
            rows.setdefault((row["approach"], row["detector"]), []).append(row)
    return rows


def default_detector_table(metrics: Dict, unknown: str) -> List[str]:
    rows = per_seed_rows(metrics, unknown)
    lines = ["| approach | detector | CCR @ 1e-3 | CCR @ 1e-2 | CCR @ 1e-1 | AUROC | closed-set accuracy |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for approach in sorted(metrics["approaches"], key=row_sort_key):
        detector = LOSSES.get(approach).default_detector
        seeds = rows.get((approach, detector), [])
        cells = [spread([r["ccr_at_fpr"].get(fpr) for r in seeds]) for fpr in FPRS]
        cells += [spread([r["auroc"] for r in seeds]), spread([r["closed_set_accuracy"] for r in seeds])]
        lines.append(f"| {approach} | {detector} | " + " | ".join(cells) + " |")
    return lines


def matrix_table(metrics: Dict, unknown: str, fpr: str) -> List[str]:
    rows = per_seed_rows(metrics, unknown)
    detectors = list(DETECTORS.names())
    not_applicable = metrics.get("not_applicable") or {}
    lines = ["| approach | " + " | ".join(f"`{d}`" for d in detectors) + " |",
             "|---|" + "---:|" * len(detectors)]
    best = {}
    for approach in metrics["approaches"]:
        for detector in detectors:
            values = [r["ccr_at_fpr"].get(fpr) for r in rows.get((approach, detector), [])]
            if len(values) == metrics["seeds"] and None not in values:  # a mean over every seed, or none
                best[(approach, detector)] = sum(values) / len(values)
    top_of_row = {a: max((v for (a2, _), v in best.items() if a2 == a), default=None) for a in metrics["approaches"]}
    top_of_column = {d: max((v for (_, d2), v in best.items() if d2 == d), default=None) for d in detectors}
    for approach in sorted(metrics["approaches"], key=row_sort_key):
        cells = []
        for detector in detectors:
            value = best.get((approach, detector))
            if value is None:
                applies = detector not in not_applicable.get(approach, {})
                cells.append("—" if applies else "not applicable")
                continue
            text = f"{value:.3f}"
            if value == top_of_column[detector]:
                text = f"*{text}*"
            if value == top_of_row[approach]:
                text = f"**{text}**"
            cells.append(text)
        lines.append(f"| {approach} | " + " | ".join(cells) + " |")
    reasons = dict.fromkeys(f"{d}: {why}" for notes in not_applicable.values() for d, why in notes.items())
    if reasons:
        lines += ["", "Not applicable: " + "; ".join(reasons)]
    return lines


def steps_table(steps: List[str], fpr: str) -> List[str]:
    """One row per ``LABEL=RUN:APPROACH`` (an ablation's steps): CCR at ``fpr`` on each unknown
    set and closed-set accuracy with the approach's default detector, mean [min-max] over seeds."""
    parsed = []
    for step in steps:
        label, _, where = step.rpartition("=")  # a label may hold "=", a path does not
        run, _, approach = where.rpartition(":")
        parsed.append((label, json.loads((Path(run) / "metrics.json").read_text()), approach))
    sets = list(dict.fromkeys(r["unknowns"] for r in parsed[0][1]["per_seed"]))
    lines = ["| step | " + " | ".join(f"{set_title(u)}: CCR @ {fpr}" for u in sets) + " | closed-set accuracy |",
             "|---|" + "---:|" * (len(sets) + 1)]
    for label, metrics, approach in parsed:
        detector = LOSSES.get(approach).default_detector
        cells = []
        for unknown in sets:
            seeds = per_seed_rows(metrics, unknown).get((approach, detector), [])
            cells.append(spread([r["ccr_at_fpr"].get(fpr) for r in seeds]))
        seeds = per_seed_rows(metrics, sets[0]).get((approach, detector), [])
        cells.append(spread([r["closed_set_accuracy"] for r in seeds]))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def merge(metrics: Dict, extra: Dict, where: Path) -> None:
    """``extra``'s approaches added to ``metrics`` (refused where they overlap or the seeds differ)."""
    overlap = set(metrics["approaches"]) & set(extra["approaches"])
    if overlap or extra["seeds"] != metrics["seeds"]:
        raise SystemExit(f"{where}: approaches {sorted(overlap)} already in the run, or {extra['seeds']} seed(s) "
                         f"against {metrics['seeds']}")
    metrics["approaches"] = metrics["approaches"] + extra["approaches"]
    metrics["per_seed"] = metrics["per_seed"] + extra["per_seed"]
    metrics["not_applicable"] = {**(metrics.get("not_applicable") or {}), **(extra.get("not_applicable") or {})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, nargs="?")
    parser.add_argument("--sets", nargs="*", help="unknown sets (default: every set of the run)")
    parser.add_argument("--fpr", default="1e-2", choices=FPRS, help="the matrix's FPR")
    parser.add_argument("--steps", nargs="+", metavar="LABEL=RUN:APPROACH",
                        help="instead: an ablation's steps, one row each")
    parser.add_argument("--also", nargs="+", type=Path, default=[], metavar="RUN",
                        help="runs of further approaches on the same protocol and seeds, as rows of the same tables")
    args = parser.parse_args()
    if args.steps:
        print("\n".join(steps_table(args.steps, args.fpr)))
        return 0
    metrics = json.loads((args.run / "metrics.json").read_text())
    for extra in args.also:
        merge(metrics, json.loads((extra / "metrics.json").read_text()), extra)
    sets = args.sets or list(dict.fromkeys(r["unknowns"] for r in metrics["per_seed"]))
    print(f"{args.run}: {metrics.get('experiment')}, budget {metrics.get('budget')}, {metrics['seeds']} seed(s)")
    for unknown in sets:
        print(f"\n#### {set_title(unknown)}: each approach with its paper's detector\n")
        print("\n".join(default_detector_table(metrics, unknown)))
    for unknown in sets:
        print(f"\n#### {set_title(unknown)}: CCR at FPR {args.fpr}, every approach x every detector "
              f"(bold: best of the row; italic: best of the column)\n")
        print("\n".join(matrix_table(metrics, unknown, args.fpr)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
