"""The benchmark of a protocol with splits (``osr-mnist``, ``osr-cifar10``; ``data.osr_protocols``)
over its splits: each split is a run folder ``OUT/split-K`` with its own ``benchmark.md``, and
``OUT/benchmark-splits.md`` (and ``.json``) puts them side by side as the open-set literature
reports them: per split, and the mean and standard deviation over the splits.

Each row is an approach with its paper's detector. Its numbers per split are those of the seeds
that every split has (one network per split in the literature's form, where split 0 also trains
more seeds for its own report; a split's extra seeds would otherwise weigh its column differently
from the others): the OSCR area averaged over the split's unknown-unknown (D_a) sets, AUROC on
them, and the closed-set accuracy on the test knowns. Over splits: the mean and the sample
standard deviation (ddof 1; Neal et al. 2018 and ARPL report mean ± std over their five splits).

An approach that trains on negatives, on a protocol whose negatives come from a declared outside
set (:attr:`~agnostophobia.data.protocol_types.ProtocolSpec.outside_negatives`), is *extra data*:
its rows are listed apart, after the rows of the approaches that see the known classes only, and
ordered among themselves (as OpenOOD keeps methods trained with outliers apart). Rows are ordered
by their mean validation OSCR area over splits; no test number orders them.

Beside a row that another run reported on the protocol (:mod:`.published_numbers`: a paper's table
or a rerun of its authors' code), that run's OSCR area (OpenAUC's definition: the linear OSCR area,
unknowns pooled, computed by that run's code), AUROC and closed-set accuracy, each with its source
and what differs from our run, and our difference to it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agnostophobia._atomic import atomic_write
from agnostophobia._log import log_info
from agnostophobia.experiments.benchmark_recipes import RECIPE_MARK, RECIPE_MARK_COVERS, departs_from_recipe
from agnostophobia.experiments.benchmark_report import sticky_tables
from agnostophobia.experiments.benchmark_rows import is_papers_detector
from agnostophobia.experiments.published_numbers import published_columns, published_for
from agnostophobia.metrics import seed_interval
from agnostophobia.rundir import RunDir

#: The files of the summary, in the folder that holds the splits' run folders.
SPLITS_TABLE = "benchmark-splits.md"
SPLITS_JSON = "benchmark-splits.json"


def _mean(values) -> Optional[float]:
    return None if not values or any(v is None for v in values) else float(np.mean(values))


#: Rows the literature's tables have beside each approach with its paper's detector: softmax's
#: network scored by its maximum logit (MLS, Vaze et al., ICLR 2022, Sec. 4), from the same network.
LITERATURE_ROWS = (("softmax", "max-logit"),)


def _at_seeds(values: Optional[Sequence], row_seeds: Sequence[int], seeds: Sequence[int]) -> Optional[float]:
    """The mean of a row's per-seed ``values`` (in the order of ``row_seeds``) at ``seeds``; None where
    the row lacks one of them."""
    if values is None or any(seed not in row_seeds for seed in seeds):
        return None
    return _mean([values[list(row_seeds).index(seed)] for seed in seeds])


def split_numbers(result: Dict, seeds: Sequence[int]) -> Dict[Tuple[str, str], Dict]:
    """``{(approach, detector): numbers}`` of one split's ``benchmark.json``: each approach with its
    paper's detector, and the :data:`LITERATURE_ROWS`; their means over ``seeds`` (``oscr``, ``auroc``
    over the D_a sets, ``accuracy`` on the test knowns, ``val_oscr`` on the validation split) and
    ``converged`` (the mean validation accuracy at those seeds against the run's threshold)."""
    out = {}
    threshold = result.get("min_accuracy")
    for row in result["rows"]:
        key = (row["approach"], row["detector"])
        if not is_papers_detector(*key) and key not in LITERATURE_ROWS:
            continue
        row_seeds = row["seeds"]
        val_accuracy = _at_seeds(row["accuracy_per_seed"]["val"], row_seeds, seeds)
        converged = (row.get("converged") if threshold is None or val_accuracy is None
                     else bool(val_accuracy >= threshold))
        out[key] = {
            "oscr": _at_seeds(row["mean_da_per_seed"]["oscr"], row_seeds, seeds),
            "auroc": _at_seeds(row["mean_da_per_seed"]["auroc"], row_seeds, seeds),
            "accuracy": _at_seeds(row["accuracy_per_seed"]["test"], row_seeds, seeds),
            "val_oscr": _at_seeds(row.get("val", {}).get("per_seed", {}).get("oscr"), row_seeds, seeds),
            "converged": converged}
    return out


def common_seeds(results: Sequence[Tuple[int, Dict]]) -> List[int]:
    """The seeds that every split's run trained (a row of a split may still lack one)."""
    per_split = [set(seed for row in result["rows"] for seed in row["seeds"]) for _, result in results]
    return sorted(set.intersection(*per_split)) if per_split else []


def over_splits(values: Sequence[Optional[float]]) -> Optional[Dict]:
    """Mean and sample standard deviation (ddof 1; None for one split) over the splits that have it."""
    kept = [v for v in values if v is not None]
    if not kept:
        return None
    return {"mean": float(np.mean(kept)), "std": float(np.std(kept, ddof=1)) if len(kept) > 1 else None,
            "splits": len(kept)}


def summarise_splits(results: Sequence[Tuple[int, Dict]], extra_data: Sequence[str], protocol: str = "") -> Dict:
    """The summary of the splits' ``benchmark.json`` results (``[(split, result)]``): one row per
    approach, its numbers per split and over them, ``extra_data`` marked, the rows of the approaches
    without extra data first, each group ordered by the mean validation OSCR area over splits; each
    row's ``published`` results on ``protocol`` (``published_sources`` says where each was read)."""
    seeds = common_seeds(results)
    per_split = {split: split_numbers(result, seeds) for split, result in results}
    keys = list(dict.fromkeys(key for numbers in per_split.values() for key in numbers))
    rows = []
    for approach, detector in keys:
        mine = {split: numbers[approach, detector] for split, numbers in per_split.items()
                if (approach, detector) in numbers}
        rows.append({"approach": approach, "detector": detector,
                     "extra_data": approach in extra_data, "per_split": mine,
                     **{key: over_splits([m[key] for m in mine.values()])
                        for key in ("oscr", "auroc", "accuracy", "val_oscr")},
                     "converged_splits": sum(1 for m in mine.values() if m["converged"] is not False),
                     "recipe_departs": any(departs_from_recipe(result, approach) for _, result in results)})
        rows[-1]["published"] = published_columns(protocol, approach, detector)
    # the marked rows (not converged on some split) after the others in each group
    rows.sort(key=lambda r: (r["extra_data"], not converged_everywhere(r), -(r["val_oscr"] or {"mean": -1.0})["mean"]))
    sources = [{"source": p.source, "differs": p.differs} for p in published_for(protocol)]
    return {"splits": [split for split, _ in results], "seeds": seeds, "rows": rows, "extra_data": list(extra_data),
            "published_sources": sources}


def _cell(numbers: Optional[Dict]) -> str:
    if numbers is None:
        return "–"
    return f"{numbers['mean']:.4f}" + (f" ± {numbers['std']:.4f}" if numbers["std"] is not None else "")


def _published_cell(row: Dict, metric: str) -> str:
    cells = [f"{p[metric]:.4f} [{p['source'] + 1}]" for p in row.get("published", []) if p[metric] is not None]
    return ", ".join(cells) or "–"


def published_comparison(summary: Dict) -> List[str]:
    """The lines of ``benchmark-splits.md`` that set each row with a published result against it:
    our mean over splits, the published one, the difference, and the sources with what differs."""
    lines = []
    for row in summary["rows"]:
        for published in row.get("published", []):
            parts = []
            for metric, name in (("oscr", "OSCR"), ("auroc", "AUROC"), ("accuracy", "closed-set accuracy")):
                ours, theirs = row.get(metric), published[metric]
                if ours is not None and theirs is not None:
                    parts.append(f"{name} {ours['mean']:.4f} against {theirs:.4f} ({ours['mean'] - theirs:+.4f})")
            parts += _beyond_accuracy(row, published)
            if parts:
                lines.append(f"- **{row['approach']}** ({row['detector']}) against [{published['source'] + 1}]: "
                             + "; ".join(parts) + ".")
    if not lines:
        return []
    sources = [f"{i + 1}. {s['source']}. What differs from our run: {s['differs']}."
               for i, s in enumerate(summary.get("published_sources", []))]
    intro = ("Our mean over the splits against another run's mean over the same five splits (numbered as ours, "
             "each computed by that run's code), and our difference to it. Open-set results rise with closed-set "
             "accuracy across networks (Vaze et al., ICLR 2022), so each comparison gives both, and the OSCR area "
             "over the closed-set accuracy (the area's ceiling): where that ratio is the same, the OSCR gap is the "
             "accuracy's.")
    return ["## Beside other runs' numbers", "", intro, ""] + lines + ["", "Sources:", ""] + sources + [""]


def _beyond_accuracy(row: Dict, published: Dict) -> List[str]:
    """The OSCR area over the closed-set accuracy (means over splits), ours against the published run's:
    how much of the OSCR gap the accuracy leaves unexplained ([]: a number missing)."""
    ours, accuracy = row.get("oscr"), row.get("accuracy")
    if not ours or not accuracy or published["oscr"] is None or not published["accuracy"]:
        return []
    mine, theirs = ours["mean"] / accuracy["mean"], published["oscr"] / published["accuracy"]
    # OSCR = accuracy * ratio: the symmetric split of a product's change, whose two parts add up to it
    # exactly and do not depend on which factor is changed first
    by_accuracy = (accuracy["mean"] - published["accuracy"]) * (mine + theirs) / 2
    by_ratio = (mine - theirs) * (accuracy["mean"] + published["accuracy"]) / 2
    return [f"OSCR / accuracy {mine:.4f} against {theirs:.4f} ({mine - theirs:+.4f}); of the OSCR difference, "
            f"{by_accuracy:+.4f} goes with the accuracy and {by_ratio:+.4f} with the ratio (the symmetric split "
            "of a product's change; the ratio, the AUROC of the correctly classified knowns against the unknowns, "
            "itself rises with accuracy across networks, so its part is not free of the accuracy)"]


#: Why the rows trained on the outside set are ordered but their order is not tested.
_EXTRA_ORDER = ("The order of these rows is read on held-out images of the set they trained on, their validation "
                "negatives, where they sit near their ceiling: it is not tested, and it is not a finding.")


def _order_resolved(rows: List[Dict], repeats: Sequence[Sequence[int]] = ()) -> str:
    """Whether the order of each two adjacent rows is resolved: the 95 % t interval of their mean paired
    difference in validation OSCR over the class partitions (the same split for both) excludes 0, each
    pair on its own. ``repeats``: the groups of splits that hold one class set
    (:func:`same_class_splits`); a group's differences are averaged into one, so that a class set
    counts once, not as two independent splits."""
    group_of = {split: tuple(group) for group in repeats for split in group}
    pairs = resolved = 0
    for above, below in zip(rows, rows[1:]):
        by_partition: Dict[tuple, List[float]] = {}
        for key in above["per_split"]:
            a, b = above["per_split"][key]["val_oscr"], below["per_split"].get(key, {}).get("val_oscr")
            if a is not None and b is not None:
                by_partition.setdefault(group_of.get(int(key), (int(key),)), []).append(a - b)
        differences = [float(np.mean(d)) for d in by_partition.values()]
        if len(differences) < 2:
            continue
        pairs += 1
        interval = seed_interval(differences)
        resolved += int(interval.low > 0 or interval.high < 0)
    if not pairs:
        return "The order of these rows rests on one class partition: it is not resolved."
    rule = ("(resolved where the 95 % t interval of the mean paired difference in validation OSCR over the class "
            "partitions excludes 0, splits that repeat a class set averaged into one; each pair at 0.05, not "
            "adjusted for the pairs)")
    if not resolved:
        which = "the two rows is" if pairs == 1 else f"adjacent rows is, for none of the {pairs} pairs,"
        return f"The order of {which} not resolved {rule}: it is within the splits' spread, not a finding."
    if pairs == 1:
        return f"The order of the two rows is resolved {rule}."
    return (f"The order of adjacent rows is resolved {rule} for {resolved} of {pairs} pairs"
            + ("." if resolved == pairs else "; the others' order is within the splits' spread, not a finding."))


def converged_everywhere(row: Dict) -> bool:
    """Whether the row converged on every split it has: only such rows are ordered and checked
    (the benchmark's rule: a row marked not converged is neither ranked nor tested)."""
    return row["converged_splits"] == len(row["per_split"])


def _approach_cell(row: Dict) -> str:
    """The row's approach with its marks: not converged on some splits, a fine-tune off its authors' recipe."""
    splits = len(row["per_split"])
    marks = [f"not converged on {splits - row['converged_splits']} of {splits} splits"] \
        if row["converged_splits"] < splits else []
    marks += [RECIPE_MARK] if row.get("recipe_departs") else []
    return row["approach"] + "".join(f" ({mark})" for mark in marks)


def _which_seeds(seeds: Optional[Sequence[int]]) -> str:
    """What a number per split is: the seeds every split trained (a summary written before they were
    recorded: each split's mean over its own seeds)."""
    if not seeds:
        return "the mean over that split's seeds"
    if len(seeds) == 1:
        return (f"the network of seed {seeds[0]}, the one seed that every split trained (the literature's form: one "
                "network per split; a split's own report has all its seeds)")
    return (f"the mean over seeds {', '.join(map(str, seeds))}, the seeds that every split trained (a split's own "
            "report has all its seeds)")


def same_class_splits(protocol: str) -> List[List[int]]:
    """The groups of ``protocol``'s splits that hold the same known classes (the published CIFAR-10
    lists repeat one class set as splits 0 and 1): their columns differ by the training's randomness only."""
    from agnostophobia.data.protocols import protocol_spec

    groups: Dict[Tuple[int, ...], List[int]] = {}
    for split, known in enumerate(protocol_spec(protocol).splits if protocol else ()):
        groups.setdefault(tuple(sorted(known)), []).append(split)
    return [group for group in groups.values() if len(group) > 1]


def _same_classes(summary: Dict) -> str:
    splits = summary["splits"]
    groups = [g for g in same_class_splits(summary.get("protocol", "")) if set(g) <= set(splits)]
    if not groups:
        return ""
    partitions = len(splits) - sum(len(g) - 1 for g in groups)  # each group of repeats is one class set
    return ("; ".join(f"Splits {' and '.join(map(str, g))} hold the same known classes" for g in groups)
            + " (as the published lists do): their columns differ by the training's randomness and the classes' "
            f"order only, and the {len(splits)} splits are {partitions} class partitions. ")


def _approach_titles(summary: Dict) -> str:
    """The approaches' names with their registered titles (e.g. that ``arpl`` is ARPL without CS)."""
    from agnostophobia.losses import LOSSES

    names = list(dict.fromkeys(r["approach"] for r in summary["rows"]))
    return "Approaches: " + "; ".join(f"`{name}`, {LOSSES.get(name).title}" for name in names if name in LOSSES) + ". "


def _validation_intro(summary: Dict) -> str:
    outside = summary.get("outside_negatives")
    negatives = (f"held-out images of the outside set ({outside}), not the unknown classes, for every row; the "
                 "extra-data rows trained on other images of that set" if outside else "its validation negatives")
    return ("validation OSCR: the linear OSCR area on the split's validation knowns against " + negatives + ". ")


def _cells_intro(summary: Dict) -> str:
    which = _which_seeds(summary.get("seeds"))
    papers = ("The papers that report these splits (ARPL, TPAMI 2021; CAC, WACV 2021; Vaze et al., ICLR 2022; "
              "OpenAUC, NeurIPS 2022) give their means over the splits in tables that could not be read here, so "
              "none of their numbers is entered. ")
    published = ("published: another run's number beside the row (a paper's table or a rerun of its authors' code), "
                 "its source numbered below. " if summary.get("published_sources") else
                 "No number another run published on this protocol could be read here, so no row shows one. ") + papers
    return (f"Splits {', '.join(map(str, summary['splits']))}; each split's own report is `split-K/benchmark.md`. "
            "Each row is an approach with its paper's detector (and softmax's network with the maximum logit, MLS, "
            f"as Vaze et al. report it). A number per split is {which}, and the last columns are the mean ± sample "
            "standard deviation (ddof 1) over the splits. OSCR (= OpenAUC): the area under the OSCR curve on a "
            "linear FPR axis, averaged over the split's unknown-unknown sets (one set here, the unknown classes "
            "pooled), OpenAUC's definition; AUROC on the same sets; accuracy: closed-set accuracy on the split's "
            f"test knowns; {_validation_intro(summary)}{published}Rows are ordered by the mean validation OSCR "
            "area over splits, the literature's metric (no test number orders them; each split's own report ranks "
            f"by its declared rule). {_same_classes(summary)}{_approach_titles(summary)}")


def _splits_body(summary: Dict, outside: str) -> List[str]:
    """The lines under the title: what the cells are, one table of the approaches that see the
    knowns only and one of the extra-data approaches, then the published numbers beside ours."""
    splits, published = summary["splits"], bool(summary.get("published_sources"))
    lines = [_cells_intro(summary), ""]
    header = ("| approach | detector | " + " | ".join(f"OSCR split {k}" for k in splits) + " | OSCR (= OpenAUC) | "
              + ("published OSCR | AUROC | published AUROC |" if published else "AUROC |")
              + " accuracy | validation OSCR | converged splits |")
    rule = "|" + "---|" * (header.count("|") - 1)
    groups = [("Known classes only", False), ("Extra data: trained on negatives from an outside set"
                                              + (f" ({outside})" if outside else ""), True)]
    for title, extra in groups:
        rows = sorted((r for r in summary["rows"] if r["extra_data"] == extra),
                      key=lambda r: not converged_everywhere(r))  # stable: a summary written before keeps its order
        if not rows:
            continue
        lines += [f"## {title}", "", header, rule]
        for r in rows:
            by_split = {int(k): numbers for k, numbers in r["per_split"].items()}  # JSON's keys are strings
            per = [f"{by_split[k]['oscr']:.4f}" + ("*" if by_split[k]["converged"] is False else "")
                   if by_split.get(k, {}).get("oscr") is not None else "–" for k in splits]
            middle = ([_cell(r["oscr"]), _published_cell(r, "oscr"), _cell(r["auroc"]), _published_cell(r, "auroc")]
                      if published else [_cell(r["oscr"]), _cell(r["auroc"])])
            lines.append(f"| {_approach_cell(r)} | {r['detector']} | " + " | ".join(per + middle)
                         + f" | {_cell(r['accuracy'])} | {_cell(r['val_oscr'])} | "
                         f"{r['converged_splits']}/{len(r['per_split'])} |")
        repeats = same_class_splits(summary.get("protocol", ""))
        ordered = [r for r in rows if converged_everywhere(r)]
        order = (_EXTRA_ORDER if extra else _order_resolved(ordered, repeats)) if len(ordered) > 1 else None
        lines += ["", *([order, ""] if order else [])]
    if any(m["converged"] is False for r in summary["rows"] for m in r["per_split"].values()):
        lines += ["\\* not converged on that split: the closed-set accuracy of its validation knowns is below the "
                  "protocol's threshold. The row's mean over splits and its AUROC and accuracy include those splits "
                  "(the row is marked); the last column counts the splits where the row converged. A marked row is "
                  "listed after the rows that converged on every split, and no order with it is checked; each "
                  "split's own report leaves a row that is not converged there out of its ranking and its tests.", ""]
    if any(r.get("recipe_departs") for r in summary["rows"]):
        lines += [RECIPE_MARK_COVERS + " Each split's own report says how its fine-tunes depart.", ""]
    if summary["extra_data"]:
        lines += ["The extra-data approaches trained on negatives the other approaches never saw, so a difference "
                  "between one of them and a row above measures the method and its outside data together, not the "
                  "method alone (OpenOOD keeps methods trained with outliers apart for this reason).", ""]
    return lines + published_comparison(summary)


def splits_markdown(summary: Dict, protocol: str, outside: str) -> str:
    """``benchmark-splits.md``: one table of the approaches that see the knowns only, one of the
    extra-data approaches, per split and mean ± std over the splits, the published numbers beside."""
    return "\n".join([f"# Benchmark of {protocol} over its splits", "", *_splits_body(summary, outside)])


def splits_site_page(summary: Dict, title: str, run_link: str) -> str:
    """The documentation's page of a benchmark over splits, written from its committed
    ``benchmark-splits.json`` alone by the code that writes ``benchmark-splits.md`` (no number typed by
    hand), each table in a container whose first column stays in place when it scrolls.

    Args:
        summary: the run's ``benchmark-splits.json``, as read.
        title: the page's title.
        run_link: how the page names its run, e.g. a link to its provenance entry.

    Returns:
        The page's Markdown (MyST).
    """
    lines = [f"# {title}", "", f"Run {run_link}, protocol `{summary['protocol']}`.", "",
             *_splits_body(summary, summary.get("outside_negatives", ""))]
    return "\n".join(sticky_tables(lines)).rstrip("\n") + "\n"


def extra_data_approaches(protocol, approaches: Sequence[str]) -> Tuple[List[str], str]:
    """The ``approaches`` that are extra data on ``protocol`` (a run config's value): those that train
    on negatives where the protocol declares its negatives an outside set; and that set's title."""
    from agnostophobia.data.protocols import protocol_spec
    from agnostophobia.losses import trained_on_negatives

    outside = protocol_spec(protocol).outside_negatives
    if not outside:
        return [], ""
    return trained_on_negatives(approaches), outside


def write_split_summary(out, runs: Sequence[Tuple[int, Path]], log: Callable[[str], None] = log_info) -> Path:
    """``OUT/benchmark-splits.md`` and ``.json`` from the ``benchmark.json`` of each split's run folder
    (``[(split, folder)]``, each written by ``write_benchmark``); returns the table's path."""
    from agnostophobia.training.records import read_run_config

    results = [(split, json.loads(RunDir(folder).benchmark.read_text())) for split, folder in runs]
    config = read_run_config(runs[0][1])
    approaches = list(dict.fromkeys(r["approach"] for _, result in results for r in result["rows"]))
    extra, outside = extra_data_approaches(config["protocol"], approaches)
    summary = summarise_splits(results, extra, config["protocol"])
    summary.update({"protocol": config["protocol"], "outside_negatives": outside})
    out = Path(out)
    table, data = out / SPLITS_TABLE, out / SPLITS_JSON
    atomic_write(data, lambda tmp: Path(tmp).write_text(json.dumps(summary, indent=1)))
    atomic_write(table, lambda tmp: Path(tmp).write_text(splits_markdown(summary, config["protocol"], outside)))
    log(f"written: {table} and {data}")
    return table
