"""``metrics.json`` and ``report.md`` of a reproduction, from its stored outputs."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from agnostophobia.data.fetch import fetch_record_lines
from agnostophobia.data.file_protocols import PATH_KEYS
from agnostophobia.data.protocols import unknown_set
from agnostophobia.deploy.calibration import RULE, threshold_results
from agnostophobia.detectors import DETECTORS, build_detector
from agnostophobia.detectors.stored import ModelScores, RunSettings, model_scores, read_run_settings
from agnostophobia.metrics import PAPER_FPR_VALUES, TIE_FLAG, ccr_at_fpr, supported_fprs
from agnostophobia.training.records import MARKER_KEYS
from agnostophobia.experiments.run_metrics import FPR_KEYS, aggregate_seeds, entropy_magnitude_table, evaluate_model
from agnostophobia.experiments.paper_numbers import PAPER_PROTOCOLS, PAPER_SIZES, TABLE1, TABLE2
from agnostophobia.metrics.rows import PAPER_ROWS, is_paper_row, row_sort_key
from agnostophobia.training.outputs import load_outputs
from agnostophobia.rundir import CONFIG_SCORES_FILE, RunDir

def set_title(name: str) -> str:
    """How the report names an unknown set: its declared label (:func:`unknown_set`), as a cell (:func:`set_cell`)."""
    return set_cell(unknown_set(name).label)


def set_cell(name: str) -> str:
    """A set's name as the report writes it: ``|`` (a file or folder may be named so, and
    ``evaluate --unknowns`` keeps the name) escaped, so that it never splits a table's cell."""
    return name.replace("|", "\\|")


# Table 1 of the paper is the LeNet++ experiment only.
TABLE1_EXPERIMENT = "lenet++"


def collect_results(run_dir: Path, settings: RunSettings, previous: Optional[Dict] = None):
    """Per-seed results (every detector on every model, with the run's detector ``settings``),
    Table 1 rows and the notes on detectors that could not be evaluated, from every
    ``seed*/<approach>/outputs.npz``; and each model's scores fingerprint. ``previous``: per
    ``(seed, approach)``, results already computed from these same scores (``evaluate
    --unknowns``), by ``(detector, unknowns)``, kept as they are (Table 1's means are cheap:
    always computed)."""
    per_seed, table1, skipped, fingerprints, not_applicable = [], [], [], {}, {}
    for seed, approach, model_dir in RunDir(run_dir).models():  # tune-detectors' choices where made
        scores = model_scores(model_dir, approach, settings.for_approach(approach))
        fingerprints[RunDir.run_key(seed, approach)] = scores.fingerprint
        computed = (previous or {}).get((seed, approach))
        per_seed += [{**result, "seed": seed} for result in evaluate_model(approach, scores, computed=computed)]
        skipped += [f"{detector} on the {approach} model (seed {seed}): {note}"
                    for detector, note in scores.notes.items()]
        for detector, why in scores.not_applicable.items():  # the matrix's cell says it, with its reason
            not_applicable.setdefault(approach, {})[detector] = why
        outputs = load_outputs(model_dir.outputs)
        table1 += [{**row, "seed": seed} for row in entropy_magnitude_table(approach, outputs)]
    if not per_seed:
        raise ValueError(f"run directory {run_dir} holds no seed*/<approach>/outputs.npz; nothing to report")
    return per_seed, table1, skipped, fingerprints, not_applicable


def write_metrics(run_dir: Path, meta: Dict, previous: Optional[Dict] = None) -> Dict:
    """Compute every number of the run and write ``metrics.json`` atomically (``previous``:
    see :func:`collect_results`).

    Detector settings come from the run's ``config.yaml`` and ``detector_settings.json``, read
    once here (:func:`~agnostophobia.detectors.stored.read_run_settings`), as the figures read them."""
    settings = read_run_settings(run_dir)
    per_seed, table1, skipped, fingerprints, not_applicable = collect_results(run_dir, settings, previous)
    metrics = {
        # the run's record, less the marker: it tells which folder is the run, not how its numbers were made
        **{key: value for key, value in meta.items() if key not in MARKER_KEYS},
        "fpr_readout": "CCR at FPR t = the largest CCR(theta) over thresholds with FPR(theta) <= t "
                       "(Eq. 3 of the paper); null where t < 1/#unknowns",
        "detectors": {name: build_detector(name, **settings.config.get(name, {})).settings()
                      for name in DETECTORS.names()},
        "results": aggregate_seeds(per_seed, ("row", "unknowns")),
        "table1": aggregate_seeds(table1, ("approach", "split")),
        "skipped": skipped,
        "not_applicable": not_applicable,  # approach -> detector -> why the detector does not apply
        "per_seed": per_seed,
        "scores_fingerprints": fingerprints,  # the detector scores behind per_seed, per model
    }
    tuned = tuned_detector_metrics(run_dir, settings)
    if tuned:
        metrics["tuned_detectors"] = tuned
    at_threshold = validation_threshold_metrics(run_dir, settings)
    if at_threshold:
        metrics["at_validation_threshold"] = at_threshold
    run = RunDir(run_dir)
    run.write(run.metrics, lambda tmp: Path(tmp).write_text(json.dumps(metrics, indent=1, default=json_default)))
    return metrics


def tuned_detector_metrics(run_dir: Path, settings: RunSettings) -> Optional[Dict]:
    """Per (approach, detector) that ``tune-detectors`` tuned and unknown set: the config's and
    the validation-chosen settings, and the test CCR at the tuning's target FPR with each (mean
    and std over seeds); None when the run was not tuned."""
    if settings.target_fpr is None:
        return None
    fpr, tuned, config = settings.target_fpr, settings.tuned, settings.config
    per_seed = []
    for seed, approach, model_dir in RunDir(run_dir).models():
        if not tuned.get(approach):
            continue
        chosen_settings = settings.for_approach(approach)
        scores = {"config": model_scores(model_dir, approach, config, file=CONFIG_SCORES_FILE),
                  "chosen": model_scores(model_dir, approach, chosen_settings)}  # the matrix's own, cached
        for detector in tuned[approach]:
            ccrs = {name: _test_ccrs(detector, held, fpr) for name, held in scores.items()}
            for unknown in ccrs["chosen"]:
                per_seed.append({"approach": approach, "detector": detector, "unknowns": unknown, "seed": seed,
                                 "config_settings": _shown(build_detector(detector, **config.get(detector, {}))),
                                 "chosen_settings": _shown(build_detector(detector, **chosen_settings[detector])),
                                 "test_ccr_config": ccrs["config"].get(unknown), "test_ccr_chosen": ccrs["chosen"][unknown]})
    return {"target_fpr": fpr, "split": settings.tuned_split,
            "results": aggregate_seeds(per_seed, ("approach", "detector", "unknowns"))}


def _shown(detector) -> str:
    """A detector's settings as ``key=value, ...`` (a string: seeds are averaged key by key otherwise)."""
    return ", ".join(f"{key}={value}" for key, value in detector.settings().items())


def _test_ccrs(detector: str, held: ModelScores, fpr: float) -> Dict:
    """{unknown set: test CCR at ``fpr``} of ``detector`` in one model's scores ``held`` (None:
    not fitted or unreachable FPR)."""
    result = {}
    for unknown in held.unknown_sets:
        if detector not in held.top:
            result[unknown] = None
            continue
        ccr = float(ccr_at_fpr(*held.known_vs_unknown(detector, unknown), [fpr])[0])
        result[unknown] = None if np.isnan(ccr) else ccr
    return result


def tuned_detectors_markdown(metrics: Dict) -> List[str]:
    """The section on settings chosen on validation data: per tuned detector, the config's and
    the chosen settings and the test CCR with each, side by side."""
    section = metrics.get("tuned_detectors")
    if not section:
        return []
    fpr = section["target_fpr"]
    lines = ["", "## Detector settings chosen on validation data", "",
             f"`agnostophobia tune-detectors` chose each setting by CCR at FPR {fpr:g} on the validation knowns and "
             "negatives (`val_outputs.npz`), the detectors fitted on the training knowns; the test sets were not "
             "read. The `<approach>/<detector>` rows above use the chosen settings; the paper's own rows keep the "
             f"config's. Test CCR at FPR {fpr:g}, mean ± std over seeds.", "",
             "| approach | detector | unknowns | config's settings | chosen settings | test CCR (config) "
             "| test CCR (chosen) |", "|---|---|---|---|---|---:|---:|"]
    for r in sorted(section["results"], key=lambda r: (row_sort_key(r["approach"]), r["detector"], r["unknowns"])):
        lines.append(f"| {r['approach']} | {_title(r['detector'])} | {set_title(r['unknowns'])}"
                     f" | {r['config_settings']} | {r['chosen_settings']} | "
                     f"{format_value(r['test_ccr_config'], r.get('test_ccr_config_std'))} | "
                     f"{format_value(r['test_ccr_chosen'], r.get('test_ccr_chosen_std'))} |")
    return lines + [""]


# The keys that tell one validation-chosen threshold (and the unknown set it is read on) apart.
THRESHOLD_KEYS = ("approach", "detector", "target_fpr", "unknowns")


def validation_threshold_metrics(run_dir: Path, settings: RunSettings) -> Optional[Dict]:
    """What the thresholds of ``calibration.json`` (chosen on validation data) give on the test
    sets, mean and std over seeds, beside the oracle CCR at the same FPR; None when the run
    was not calibrated."""
    per_seed, notes = threshold_results(run_dir, settings)
    if not per_seed and not notes:
        return None
    return {"rule": RULE,
            "readout": "test CCR on D_c and test FPR on each unknown set with accept score >= threshold; oracle: "
                       "CCR at the target FPR with the threshold chosen on that test set (Table 2's readout)",
            "results": aggregate_seeds(per_seed, THRESHOLD_KEYS), "notes": notes, "per_seed": per_seed}


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
    paper_sizes = reproduces_the_paper(metrics)  # the paper's set sizes beside ours, on its protocols only
    lines = []
    by_unknown: Dict[str, List[Dict]] = {}
    for result in metrics["results"]:
        by_unknown.setdefault(result["unknowns"], []).append(result)
    for unknown, results in by_unknown.items():
        results = sorted((r for r in results if is_paper_row(r["row"])), key=lambda r: row_sort_key(r["row"]))
        if not results:
            continue
        n = results[0]["num_unknown"]
        size = f"{n:,}" + (f" (paper: {PAPER_SIZES[unknown]:,})" if unknown in PAPER_SIZES and paper_sizes else "")
        lines += [f"#### Unknowns: {set_title(unknown)} — {size} samples, "
                  f"{results[0]['num_known']:,} knowns", ""]
        lines += ccr_table_markdown(results, lambda r: r["row"], paper.get(unknown, {})) + [""]
    return "\n".join(lines)


#: The mark of a cell whose ranking ties decide in part (:func:`tie_flag`).
TIE_MARK = "†"


def tie_flag(result: Dict) -> str:
    """`` †`` where more than :data:`~agnostophobia.metrics.TIE_FLAG` (1 %) of the row's samples
    score exactly as a sample of the other kind (``tied_share``, mean over seeds): ties decide
    that much of its ranking; else "" (a row from before ``tied_share`` was recorded too)."""
    share = result.get("tied_share")
    return f" {TIE_MARK}" if share is not None and share > TIE_FLAG else ""


def tie_note(results: Sequence[Dict]) -> List[str]:
    """The line under a table with a flagged cell: what the mark means, and each flagged row's share."""
    flagged = [r for r in results if tie_flag(r)]
    if not flagged:
        return []
    shares = "; ".join(dict.fromkeys(f"{r.get('row', r.get('approach'))} on {set_cell(r['unknowns'])}: "
                                     f"{100 * r['tied_share']:.1f} %" for r in flagged))
    return ["", f"{TIE_MARK} more than {100 * TIE_FLAG:g} % of the samples tie: that share of the samples "
                f"score exactly as a sample of the other kind (known vs unknown), and no threshold parts them "
                f"(`tied_share` in metrics.json): {shares}."]


def ccr_table_markdown(results: List[Dict], label, paper: Optional[Dict[str, Sequence]] = None) -> List[str]:
    """Rows of CCR at FPR (mean ± std over seeds), closed-set accuracy and AUROC; ``label(r)``
    is a row's first cell, marked † where more than 1 % of the samples tie across the kinds (:func:`tie_flag`,
    explained under the table); a row whose ``row`` has numbers in ``paper`` gets them below it."""
    paper = paper or {}
    lines = ["| Algorithm | " + " | ".join(f"CCR@{k}" for k in FPR_KEYS) + " | closed-set acc. | AUROC |",
             "|---|" + "---:|" * (len(FPR_KEYS) + 2)]
    for r in results:
        std = r.get("ccr_at_fpr_std") or {}
        cells = [format_value(r["ccr_at_fpr"][k], std.get(k)) for k in FPR_KEYS]
        accuracy = format_value(r["closed_set_accuracy"], r.get("closed_set_accuracy_std"))
        lines.append(f"| {label(r)}{tie_flag(r)} | " + " | ".join(cells) + f" | {accuracy} | "
                     f"{format_value(r['auroc'])} |")
        reference = paper.get(r["row"])
        if reference:
            lines.append(f"| *paper: {label(r)}* | " + " | ".join(f"*{format_value(v)}*" for v in reference) +
                         " | | |")
    return lines + tie_note(results)


def table1_markdown(metrics: Dict, experiment: str = TABLE1_EXPERIMENT) -> str:
    with_paper = experiment == TABLE1_EXPERIMENT
    lines = ["| Algorithm | split | n | entropy (nats) | ‖F‖ |" + (" paper entropy | paper ‖F‖ |" * with_paper),
             "|---|---|---:|---:|---:|" + ("---:|---:|" * with_paper)]
    for row in sorted(metrics["table1"], key=lambda r: row_sort_key(r["approach"])):
        side = "known" if row["split"] == "known" else "unknown"
        paper = TABLE1.get(row["approach"], {}).get(side)
        paper_cells = (f" {paper[0][0]:.3f} ± {paper[0][1]:.3f} | {paper[1][0]:.2f} ± {paper[1][1]:.2f} |"
                       if paper and row["split"] in ("known", "devanagari") else " | |") if with_paper else ""
        lines.append(f"| {row['approach']} | {set_cell(row['split'])} | {row['n']:,} | "
                     f"{row['entropy_mean']:.3f} ± {row['entropy_std']:.3f} | "
                     f"{row['magnitude_mean']:.2f} ± {row['magnitude_std']:.2f} |{paper_cells}")
    return "\n".join(lines)


def relative_paths(protocol, run_dir: Path):
    """A protocol from files as the report shows it: each of its paths (stored absolute, so that the
    run rebuilds its split from anywhere) relative to the run directory, as ``../data/images``:
    a report names no folder of the machine it was written on."""
    if not isinstance(protocol, dict):
        return protocol
    base = Path(run_dir).absolute()
    return {key: os.path.relpath(value, base) if key in PATH_KEYS and isinstance(value, str) and os.path.isabs(value)
            else value for key, value in protocol.items()}


def detector_notes(metrics: Dict) -> List[str]:
    """A section per evaluated detector that has something to say about how it was applied
    (its ``report_note``), with the settings it ran with."""
    lines = []
    for name in dict.fromkeys(r.get("detector") for r in metrics["results"]):
        if name in DETECTORS and DETECTORS.get(name).report_note:
            detector = DETECTORS.get(name)
            settings = metrics.get("detectors", {}).get(name, {})
            lines += ["", f"### {detector.title}", "", f"- {detector.report_note}", f"- settings: {settings}"]
    return lines


def _detector_columns(results: List[Dict]) -> List[str]:
    """Detectors in report order: those of the paper's rows first, in their order, then by name."""
    paper = [row.detector for row in PAPER_ROWS]
    found = {r["detector"] for r in results}
    return [d for d in dict.fromkeys(paper) if d in found] + sorted(found - set(paper))


def _title(detector: str) -> str:
    return DETECTORS.get(detector).title if detector in DETECTORS else detector


def matrix_fpr(num_unknown: Optional[int]) -> Optional[str]:
    """The FPR key of the matrix's CCR on a set of ``num_unknown`` unknowns: the smallest of Table 2's
    FPRs they support (FPR >= 10/#unknowns, :mod:`agnostophobia.metrics.resolution`); None: none."""
    if not num_unknown:
        return None
    supported = supported_fprs(num_unknown, PAPER_FPR_VALUES)
    return FPR_KEYS[PAPER_FPR_VALUES.index(supported[0])] if supported else None


def _matrix_table(cell: Dict, approaches: List[str], detectors: List[str], not_applicable: Dict, value, std) -> List[str]:
    """One approach x detector table: ``value(r)`` per cell (``std(r)`` beside), bold where best."""
    values = [value(r) for r in cell.values() if value(r) is not None]
    best = max(values) if values else None
    lines = ["| approach | " + " | ".join(_title(d) for d in detectors) + " |", "|---|" + "---:|" * len(detectors)]
    for approach in approaches:
        cells = []
        for detector in detectors:
            r = cell.get((approach, detector))
            if r is None:
                cells.append("not applicable" if detector in not_applicable.get(approach, {}) else "—")
                continue
            text = format_value(value(r), std(r))
            cells.append((f"**{text}**" if value(r) is not None and value(r) == best else text) + tie_flag(r))
        lines.append(f"| {approach} | " + " | ".join(cells) + " |")
    return lines


def matrix_markdown(metrics: Dict) -> str:
    """The approach x detector matrix per unknown set: CCR at the smallest of Table 2's FPRs the set's
    unknowns support (none below 100 unknowns) and AUROC, bold where best."""
    results = [r for r in metrics["results"] if "detector" in r]
    if not results:
        return ""
    detectors = _detector_columns(results)
    approaches = sorted({r["approach"] for r in results}, key=row_sort_key)
    not_applicable = metrics.get("not_applicable") or {}
    detectors += [d for d in dict.fromkeys(d for notes in not_applicable.values() for d in notes) if d not in detectors]
    lines = []
    for unknown in dict.fromkeys(r["unknowns"] for r in results):
        cell = {(r["approach"], r["detector"]): r for r in results if r["unknowns"] == unknown}
        count = min((r["num_unknown"] for r in cell.values() if r.get("num_unknown")), default=None)
        key = matrix_fpr(count)
        lines += [f"#### Unknowns: {set_title(unknown)}" + (f" — {count:,} unknowns" if count else ""), ""]
        if key is not None:
            lines += [f"CCR at FPR {key}:", ""]
            lines += _matrix_table(cell, approaches, detectors, not_applicable, lambda r: r["ccr_at_fpr"].get(key),
                                   lambda r: (r.get("ccr_at_fpr_std") or {}).get(key)) + [""]
        else:
            lines += [f"No CCR: {count or 'too few'} unknowns support none of Table 2's FPRs (FPR >= 10/#unknowns).", ""]
        if all("auroc" in r for r in cell.values()):
            lines += ["AUROC:", ""]
            lines += _matrix_table(cell, approaches, detectors, not_applicable, lambda r: r["auroc"],
                                   lambda r: r.get("auroc_std")) + [""]
        note = tie_note(list(cell.values()))
        if note:
            lines += note[1:] + [""]
    reasons = dict.fromkeys(f"{detector}: {why}" for notes in not_applicable.values() for detector, why in notes.items())
    if reasons:
        lines += ["Not applicable: " + "; ".join(reasons), ""]
    return "\n".join(lines)


def additions_markdown(metrics: Dict) -> str:
    """Areas under the OSCR curve and the worst / best class's CCR at FPR 1e-2, per paper row."""
    rows = sorted((r for r in metrics["results"] if is_paper_row(r.get("row", "")) and "oscr_auc" in r),
                  key=lambda r: row_sort_key(r["row"]))
    if not rows:
        return ""
    lines = ["| unknowns | row | OSCR area (linear FPR) | OSCR area (log FPR 1e-4..1) | worst class CCR@1e-2 "
             "| best class CCR@1e-2 |", "|---|---|---:|---:|---:|---:|"]
    for unknown in dict.fromkeys(r["unknowns"] for r in metrics["results"]):
        for r in (r for r in rows if r["unknowns"] == unknown):
            lines.append(f"| {set_cell(unknown)} | {r['row']} | {format_value(r['oscr_auc'])} | "
                         f"{format_value(r['oscr_auc_log'])} | {format_value(r['class_ccr_worst'])} | "
                         f"{format_value(r['class_ccr_best'])} |")
    return "\n".join(lines)


def _threshold_text(value: float, std: Optional[float]) -> str:
    """A threshold to 8 significant digits: scores near 1 (a saturated softmax) stay apart."""
    return f"{value:.8g}" + (f" ± {std:.2g}" if std else "")


def validation_threshold_markdown(metrics: Dict) -> List[str]:
    """The section "At the threshold chosen on validation data": per approach and unknown set,
    test CCR and test FPR at the threshold ``calibrate`` chose, beside the oracle CCR@FPR."""
    section = metrics.get("at_validation_threshold")
    if not section:
        return []
    lines = ["", "## At the threshold chosen on validation data", "",
             "Table 2 chooses each threshold on the test set itself, which no deployed system can do. Here each "
             "model's threshold was chosen by `agnostophobia calibrate` on the validation split alone (held-out "
             f"knowns and held-out negatives; rule: {section['rule']}). Test CCR (on D_c) and test FPR (on each "
             "unknown set) at that threshold are what a deployment gets; the oracle is Table 2's CCR at the "
             "target FPR, its threshold chosen on the test set. Mean ± std over seeds.", ""]
    if section["results"]:
        lines += ["| approach | score | target FPR | threshold | val. FPR | val. CCR | unknowns | test FPR | test CCR "
                  "| oracle CCR@target |", "|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
        rows = sorted(section["results"], key=lambda r: (row_sort_key(r["approach"]), r["detector"], r["target_fpr"]))
        for r in rows:
            std = lambda key: r.get(f"{key}_std")  # noqa: E731
            lines.append(f"| {r['approach']} | {_title(r['detector'])} | {r['target_fpr']:g} | "
                         f"{_threshold_text(r['threshold'], std('threshold'))} | "
                         f"{format_value(r['val_fpr'], std('val_fpr'))} | {format_value(r['val_ccr'], std('val_ccr'))} | "
                         f"{set_title(r['unknowns'])} | "
                         f"{format_value(r['test_fpr'], std('test_fpr'))} | {format_value(r['test_ccr'], std('test_ccr'))}"
                         f" | {format_value(r['oracle_ccr'], std('oracle_ccr'))} |")
    lines += [f"- {note}" for note in section.get("notes", [])]
    return lines + [""]


def _run_protocol(metrics: Dict):
    """The protocol the run trained on (a name, or a protocol-from-files mapping); a run recorded
    before ``train_config`` was: its experiment's."""
    return metrics.get("train_config", {}).get("protocol", metrics.get("experiment", ""))


def reproduces_the_paper(metrics: Dict) -> bool:
    """Whether the run reproduces the paper: trained on one of the paper's protocols (its report
    is a reproduction), not on a variant or a user's own data (an evaluation)."""
    protocol = _run_protocol(metrics)
    return isinstance(protocol, str) and protocol in PAPER_PROTOCOLS and not metrics.get("config_protocol")


def has_paper_numbers(metrics: Dict) -> bool:
    """Whether the paper reports numbers for this run: a paper experiment on its own protocol."""
    experiment = metrics.get("experiment", "")
    return reproduces_the_paper(metrics) and experiment in TABLE2 and _run_protocol(metrics) == experiment


def write_report(run_dir: Path, metrics: Dict, figures: Optional[Dict[str, List[str]]] = None,
                 sections: Sequence[str] = ()) -> Path:
    """``report.md``: setup, Table 2 and Table 1 with the paper's numbers, the approach x
    detector matrix, figures. ``sections``: markdown lines of an experiment's own results
    (e.g. the ensemble of Fig. 3), placed before Table 2."""
    run_dir = Path(run_dir)
    budget = metrics.get("budget")
    name = metrics.get("experiment", "")
    # the paper's numbers only beside a paper experiment on its own protocol: a config that merely
    # shares the name (a user's protocol, a variant) measures something else
    experiment = name if has_paper_numbers(metrics) else ""
    title = f"budget `{budget}`" if budget else "the config as written, no budget applied"
    kind = "Reproduction" if reproduces_the_paper(metrics) else "Evaluation"
    lines = [f"# {kind}: {name} ({title})", ""]
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
    for key in ("command", "device", "precision", "wall_time_s", "seeds", "seeds_varied", "approaches", "class_names",
                "negative_class_names"):
        if key in metrics:
            lines.append(f"- **{key}**: {metrics[key]}")
    for key, value in metrics.get("train_config", {}).items():
        lines.append(f"- `{key}`: {relative_paths(value, run_dir) if key == 'protocol' else value}")
    lines += detector_notes(metrics)
    if metrics.get("skipped"):
        lines += ["", "### Not evaluated", ""] + [f"- {note}" for note in metrics["skipped"]]
    if metrics.get("data_notes"):
        lines += ["", "### Data", ""] + [f"- {note}" for note in metrics["data_notes"]]
    if metrics.get("preprocessing_notes"):  # preprocessing: authors, every quirk of their data preparation
        lines += ["", "### Preprocessing: the authors' data preparation", ""] + \
            [f"- {note}" for note in metrics["preprocessing_notes"]]
    if fetched := fetch_record_lines(run_dir):  # RUN/data_fetched.json: what reproduce downloaded
        lines += ["", "### Data fetched for this run", ""] + fetched
    paper_note = ("Paper values in italics." if experiment in TABLE2
                  else "The paper reports no numbers for this run's protocol.")
    table1_note = ("The paper reports D_a without naming the set; its values are shown beside our Devanagari row."
                   if experiment == TABLE1_EXPERIMENT else "The paper's Table 1 covers the LeNet++ experiment only.")
    lines += list(sections)
    lines += ["", "## Table 2: CCR at FPR", "",
              f"Readout: {metrics['fpr_readout']}. {paper_note}", "",
              table2_markdown(metrics, experiment)]
    lines += validation_threshold_markdown(metrics)
    lines += tuned_detectors_markdown(metrics)
    lines += ["## Table 1: entropy and deep-feature magnitude", "",
              f"Mean ± std over samples. {table1_note}", "", table1_markdown(metrics, experiment), ""]
    matrix = matrix_markdown(metrics)
    if matrix:
        lines += ["## Every detector on every trained approach", "",
                  "Rows: the trained networks; columns: the detectors (`agnostophobia.detectors`) applied to "
                  "them; the background network's detectors see its C known columns, only the background "
                  "score reads its extra column. Per unknown set: CCR at the smallest of Table 2's FPRs that "
                  "its unknowns support (FPR >= 10/#unknowns: at least ten false positives allowed), and AUROC. "
                  "Bold: the best cell per table; not applicable: the reason is under the table; —: the detector "
                  "could not be fitted (see Setup). Every cell's full numbers are in `metrics.json` (`row` "
                  "`<approach>/<detector>`, or the paper's name). `agnostophobia compare` ranks the same pairs on "
                  "validation data, the way to choose one.", "",
                  matrix, "### Areas under the OSCR curve and per-class CCR (the paper's rows)", "",
                  "OSCR area: the CCR-at-FPR step curve integrated over FPR in [0, 1], and over log10 FPR "
                  "from 1e-4 to 1 divided by 4 (both in [0, closed-set accuracy]). Per class: the CCR of the "
                  "worst and the best known class at the single threshold that gives FPR 1e-2.", "",
                  additions_markdown(metrics), ""]
    if figures:
        lines += ["## Figures", ""]
        for title, paths in figures.items():
            lines += [f"### {title}", ""] + [f"![{Path(p).stem}]({p})" for p in paths] + [""]
    run = RunDir(run_dir)
    run.write(run.report, lambda tmp: Path(tmp).write_text("\n".join(lines)))
    return run.report
