"""``metrics.json`` and ``report.md`` of a reproduction, from its stored outputs."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

from agnostophobia.experiments.evaluation import FPR_KEYS, aggregate_seeds, entropy_magnitude_table, evaluate_outputs
from agnostophobia.experiments.outputs import iter_run_outputs, load_fit_outputs
from agnostophobia.experiments.paper_numbers import PAPER_SIZES, TABLE1, TABLE2
from agnostophobia._atomic import atomic_write
from agnostophobia.data.fetch import fetch_record_lines
from agnostophobia.training.approaches import row_sort_key

UNKNOWN_TITLES = {"letters": "EMNIST letters test (D_b, known unknowns)", "devanagari": "Devanagari",
                  "notmnist": "notMNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100 subset", "svhn": "SVHN",
                  "cifar100-db": "CIFAR-100 D_b test (super-classes 0-9, known unknowns)",
                  "cifar10-dog-truck": "CIFAR-10 dog + truck test (D_a)",
                  "cifar10-horse-ship": "CIFAR-10 horse + ship test (D_b, known unknowns)"}
# Table 1 of the paper is the LeNet++ experiment only.
TABLE1_EXPERIMENT = "lenet++"


def collect_results(run_dir: Path, openmax_params: Optional[Dict] = None):
    """Per-seed results and Table 1 rows from every ``seed*/<approach>/outputs.npz``."""
    per_seed, table1, skipped = [], [], []
    for seed, approach, outputs in iter_run_outputs(run_dir):
        fit_outputs = load_fit_outputs(Path(run_dir) / f"seed{seed}" / approach)
        for result in evaluate_outputs(approach, outputs, fit_outputs=fit_outputs, openmax_params=openmax_params,
                                       skipped=skipped):
            per_seed.append({**result, "seed": seed})
        for row in entropy_magnitude_table(approach, outputs):
            table1.append({**row, "seed": seed})
    if not per_seed:
        raise ValueError(f"run directory {run_dir} holds no seed*/<approach>/outputs.npz; nothing to report")
    return per_seed, table1, skipped


def write_metrics(run_dir: Path, meta: Dict) -> Dict:
    """Compute every number of the run and write ``metrics.json`` atomically."""
    per_seed, table1, skipped = collect_results(run_dir, meta.get("train_config", {}).get("openmax"))
    metrics = {
        **meta,
        "fpr_readout": "CCR at FPR t = the largest CCR(theta) over thresholds with FPR(theta) <= t "
                       "(Eq. 3 of the paper); null where t < 1/#unknowns",
        "results": aggregate_seeds(per_seed, ("approach", "unknowns")),
        "table1": aggregate_seeds(table1, ("approach", "split")),
        "skipped": skipped,
        "per_seed": per_seed,
    }
    atomic_write(Path(run_dir) / "metrics.json",
                 lambda tmp: Path(tmp).write_text(json.dumps(metrics, indent=1, default=json_default)))
    return metrics


def json_default(value):
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def format_value(value: Optional[float], std: Optional[float] = None, digits: int = 4) -> str:
    if value is None:
        return "N/A"
    text = f"{value:.{digits}f}"
    if std is not None and std > 0:
        text += f" ± {std:.{digits}f}"
    return text


def table2_markdown(metrics: Dict, experiment: str) -> str:
    paper = TABLE2.get(experiment, {})
    lines = []
    by_unknown: Dict[str, List[Dict]] = {}
    for result in metrics["results"]:
        by_unknown.setdefault(result["unknowns"], []).append(result)
    for unknown, results in by_unknown.items():
        results = sorted(results, key=lambda r: row_sort_key(r["approach"]))
        n = results[0]["num_unknown"]
        size = f"{n:,}" + (f" (paper: {PAPER_SIZES[unknown]:,})" if unknown in PAPER_SIZES else "")
        lines += [f"#### Unknowns: {UNKNOWN_TITLES.get(unknown, unknown)} — {size} samples, "
                  f"{results[0]['num_known']:,} knowns", "",
                  "| Algorithm | " + " | ".join(f"CCR@{k}" for k in FPR_KEYS) + " | closed-set acc. | AUROC |",
                  "|---|" + "---:|" * (len(FPR_KEYS) + 2)]
        for r in results:
            std = r.get("ccr_at_fpr_std") or {}
            cells = [format_value(r["ccr_at_fpr"][k], std.get(k)) for k in FPR_KEYS]
            lines.append(f"| {r['approach']} | " + " | ".join(cells) +
                         f" | {format_value(r['closed_set_accuracy'])} | {format_value(r['auroc'])} |")
            reference = paper.get(unknown, {}).get(r["approach"])
            if reference:
                lines.append(f"| *paper: {r['approach']}* | " + " | ".join(f"*{format_value(v)}*" for v in reference) +
                             " | | |")
        lines.append("")
    return "\n".join(lines)


def table1_markdown(metrics: Dict, experiment: str = TABLE1_EXPERIMENT) -> str:
    with_paper = experiment == TABLE1_EXPERIMENT
    lines = ["| Algorithm | split | n | entropy (nats) | ‖F‖ |" + (" paper entropy | paper ‖F‖ |" * with_paper),
             "|---|---|---:|---:|---:|" + ("---:|---:|" * with_paper)]
    for row in sorted(metrics["table1"], key=lambda r: row_sort_key(r["approach"])):
        side = "known" if row["split"] == "known" else "unknown"
        paper = TABLE1.get(row["approach"], {}).get(side)
        paper_cells = (f" {paper[0][0]:.3f} ± {paper[0][1]:.3f} | {paper[1][0]:.2f} ± {paper[1][1]:.2f} |"
                       if paper and row["split"] in ("known", "devanagari") else " | |") if with_paper else ""
        lines.append(f"| {row['approach']} | {row['split']} | {row['n']:,} | "
                     f"{row['entropy_mean']:.3f} ± {row['entropy_std']:.3f} | "
                     f"{row['magnitude_mean']:.2f} ± {row['magnitude_std']:.2f} |{paper_cells}")
    return "\n".join(lines)


def write_report(run_dir: Path, metrics: Dict, figures: Optional[Dict[str, List[str]]] = None) -> Path:
    """``report.md``: setup, Table 2 and Table 1 with the paper's numbers, figures."""
    run_dir = Path(run_dir)
    budget = metrics.get("budget")
    experiment = metrics.get("experiment", "")
    title = f"budget `{budget}`" if budget else "the config as written, no budget applied"
    lines = [f"# Reproduction: {experiment} ({title})", ""]
    if budget is None:
        pass  # `train CONFIG` without --budget: the config is the user's own protocol, not a shortened paper run
    elif budget == "smoke":
        lines += ["> **Smoke budget: not a result.** A few hundred samples and one epoch, to check that the "
                  "pipeline runs end to end. Do not read anything into these numbers.", ""]
    elif budget != "paper":
        lines += [f"> **Shortened run (`{budget}` budget).** Fewer samples and epochs than the paper's protocol "
                  "(see Setup); the numbers are from this run, not the paper's.", ""]
    if metrics.get("config_protocol"):
        used = metrics.get("train_config", {}).get("protocol")
        lines += [f"> **Protocol variant `{used}`, not the paper's `{metrics['config_protocol']}` protocol.** "
                  f"The paper's numbers for this experiment were measured on a different protocol (other known "
                  f"classes, other unknowns, other set sizes); they are **not comparable** and are not shown. "
                  f"Which classes are known, known unknown (D_b') and unknown (D_a) is listed under Data.", ""]
    lines += ["## Setup", ""]
    for key in ("command", "device", "wall_time_s", "seeds", "seeds_varied", "approaches"):
        if key in metrics:
            lines.append(f"- **{key}**: {metrics[key]}")
    for key, value in metrics.get("train_config", {}).items():
        lines.append(f"- `{key}`: {value}")
    if any(r["approach"] == "openmax" for r in metrics["results"]):
        params = metrics.get("train_config", {}).get("openmax", {})
        lines += ["", "### OpenMax", "",
                  f"- Bendale & Boult (CVPR 2016) on the softmax model's logits, {params}: mean activation "
                  "vectors and Weibull tails (libMR FitHigh semantics, our own fit) from correctly classified "
                  "training knowns; alpha-rank recalibration; softmax over C+1.",
                  "- Deviations from the agnostophobia authors' OpenMax, all deliberate: logits instead of "
                  "softmax values; the unknown activation is sum_i v_i (1 - w_i) without mixing in the "
                  "class-0 score; only correctly classified samples (their code used all)."]
    if metrics.get("skipped"):
        lines += ["", "### Not evaluated", ""] + [f"- {note}" for note in metrics["skipped"]]
    if metrics.get("data_notes"):
        lines += ["", "### Data", ""] + [f"- {note}" for note in metrics["data_notes"]]
    if fetched := fetch_record_lines(run_dir):  # RUN/data_fetched.json: what reproduce downloaded
        lines += ["", "### Data fetched for this run", ""] + fetched
    paper_note = ("Paper values in italics." if experiment in TABLE2
                  else "The paper reports no numbers for this run's protocol.")
    table1_note = ("The paper reports D_a without naming the set; its values are shown beside our Devanagari row."
                   if experiment == TABLE1_EXPERIMENT else "The paper's Table 1 covers the LeNet++ experiment only.")
    lines += ["", "## Table 2: CCR at FPR", "",
              f"Readout: {metrics['fpr_readout']}. {paper_note}", "",
              table2_markdown(metrics, experiment), "## Table 1: entropy and deep-feature magnitude", "",
              f"Mean ± std over samples. {table1_note}", "", table1_markdown(metrics, experiment), ""]
    if figures:
        lines += ["## Figures", ""]
        for title, paths in figures.items():
            lines += [f"### {title}", ""] + [f"![{Path(p).stem}]({p})" for p in paths] + [""]
    path = run_dir / "report.md"
    atomic_write(path, lambda tmp: Path(tmp).write_text("\n".join(lines)))
    return path
