"""The overview's numbers of the CIFAR split's second class partition (``result_facts`` gathers them
into :data:`FACTS`): its primary decisions beside the first partition's, for the approaches both
trained, and how far the two partitions order the same rows alike (``docs/provenance.md``,
``bench-cifar-b-5`` and ``bench-cifar-b-5-paper``, each declared its reading before training)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
from scipy import stats

from agnostophobia.experiments.benchmark_report import format_cell
from agnostophobia.experiments.benchmark_rows import is_papers_detector

import result_against_softmax
from result_pages import PAGES
from result_runs import CIFAR_PARTS, CIFAR_REPORT, DECIDING_PARTS, num, paper_row, run, run_marks, signed, t_interval

#: The runs of the second partition: the first, declared with three approaches, and the one that
#: continued its fifteen networks with the paper's two other approaches.
SECOND_RUNS = ("bench-cifar-b-5", "bench-cifar-b-5-paper")
#: The second partition's run whose rows and tests the sentences read: the widest.
SECOND_PARTITION = "bench-cifar-b-5-paper"
#: The first partition's part trained on the second partition's processor (a Xeon).
FIRST_XEON = "bench-cifar-5"


def primary(label: str, approach: str) -> Optional[Dict]:
    """Run ``label``'s primary test of ``approach`` with its paper's detector against EOS (not another
    score its paper reports, such as Scaled Objectosphere); None where the run has none (the approach
    not trained, or not converged)."""
    return next((t for t in run(label)["tests"]["primary"]
                 if t["approach"] == approach and is_papers_detector(approach, t["detector"])), None)


def first_part(approach: str) -> Optional[str]:
    """The first partition's deciding part that trained ``approach``: the overview's part where it
    did, else the first deciding part that did; None where none did."""
    return next((label for label in (CIFAR_REPORT, *DECIDING_PARTS) if approach in run(label)["accuracy"]), None)


def part_said(label: str) -> str:
    """``part 8``, linked to its page."""
    return f"[part {CIFAR_PARTS.index(label) + 1}]({Path(PAGES[label].page).name})"


def compared() -> List[str]:
    """The approaches the second partition trained besides the reference, in its rows' order."""
    reference = run(SECOND_PARTITION)["reference"]
    return list(dict.fromkeys(r["approach"] for r in run(SECOND_PARTITION)["rows"] if r["approach"] != reference))


def said(label: Optional[str], approach: str) -> str:
    """``−0.031 [−0.045, −0.017] *worse*, accuracy 0.904 [0.899, 0.909]`` (its validation accuracy,
    mean over the seeds [95 % t interval]), or why there is no test."""
    accuracy = None if label is None else run(label)["accuracy"].get(approach)
    if accuracy is None:
        return "not trained"
    test, shown = primary(label, approach), f"accuracy {format_cell(accuracy['val'])}"
    if test is not None:
        low, high = test["interval"]
        return f"{signed(test['difference'])} [{num(low)}, {num(high)}] *{run_marks(label)['primary'][test['row']]}*, {shown}"
    converged = next(r["converged"] for r in run(label)["rows"] if r["approach"] == approach)
    return f"{'no test' if converged else 'not converged'}, {shown}"


def partition_table() -> str:
    """Per approach: its primary test on each partition's runs."""
    heads = ["first partition (its part)", "first partition, part 1 (Xeon)",
             *(f"second partition, [`{label}`]({Path(PAGES[label].page).name}) "
               f"({len(run(label)['tests']['primary'])} primary tests)" for label in SECOND_RUNS)]
    lines = ["| approach against EOS (validation accuracy) | " + " | ".join(heads) + " |",
             "|---|" + "---|" * len(heads)]
    for approach in compared():
        part = first_part(approach)
        first = said(part, approach) + ("" if part is None else f" ({part_said(part)})")
        cells = [first, said(FIRST_XEON, approach), *(said(label, approach) for label in SECOND_RUNS)]
        lines.append(f"| {approach} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def repeated() -> str:
    """Which of the first partition's decisions the second repeats, and which it decides where the
    first did not."""
    same, differ, newly = [], [], []
    for approach in compared():
        part = first_part(approach)
        first, second = (None if part is None else primary(part, approach)), primary(SECOND_PARTITION, approach)
        if first is None or first["decision"] == "not resolved":
            if second is not None and second["decision"] != "not resolved":
                newly.append(f"{approach} *{second['decision']}*")
            continue
        (same if second is not None and second["decision"] == first["decision"] else differ).append(approach)
    parts = []
    if same:
        parts.append(f"{' and '.join(same)} {'repeats its' if len(same) == 1 else 'repeat their'} decision")
    if differ:
        parts.append(f"{' and '.join(differ)} {'does' if len(differ) == 1 else 'do'} not")
    if newly:
        parts.append(f"it decides where the first partition did not: {', '.join(newly)}")
    return "; ".join(parts) or "no decided test to repeat"


def accuracies() -> str:
    """Each approach's mean validation accuracy on the second partition."""
    return ", ".join(f"{approach} {num(values['val']['mean'])}"
                     for approach, values in run(SECOND_PARTITION)["accuracy"].items())


def knowns_said() -> str:
    """The second partition's knowns-only tests (an approach trained without negatives against softmax),
    each beside the first partition's decision of the same pair (computed from its stored values)."""
    first = {r["approach"]: decision.verdict
             for r, _, _, decision in result_against_softmax.knowns_only("CIFAR-10 split")}
    said = []
    for t in run(SECOND_PARTITION)["tests"].get("knowns", []):
        approach = t["row"].split("/")[0]
        low, high = t["interval"]
        said.append(f"{approach} against softmax reads {signed(t['difference'])} [{num(low)}, {num(high)}], "
                    f"*{t['decision']}* (the first partition: *{first.get(approach, 'not tested')}*)")
    return "; ".join(said) or "no approach trained without negatives besides softmax"


def far_difference(label: str, approach: str) -> np.ndarray:
    """Per seed, ``approach`` with its paper's detector minus EOS with its paper's on the mean far D_a
    OSCR (the far sets, averaged apart: shown, never tested) of run ``label``."""
    a, b = paper_row(label, approach), paper_row(label, run(label)["reference"])
    if a["seeds"] != b["seeds"]:
        raise ValueError(f"{label}: {approach} and the reference hold different seeds")
    return np.asarray(a["mean_far_oscr_per_seed"]) - np.asarray(b["mean_far_oscr_per_seed"])


def far_said() -> str:
    """Each compared approach against EOS on the far sets, on both partitions: mean difference over
    seeds, its 95 % t interval over seeds (the test samples' share not added: no test), and on how
    many seeds it is above 0."""
    said = []
    for approach in compared():
        cells = []
        for name, label in (("first", first_part(approach)), ("second", SECOND_PARTITION)):
            if label is None or primary(label, approach) is None:
                cells.append(f"{name} not tested")
                continue
            d = far_difference(label, approach)
            cells.append(f"{name} {signed(float(np.mean(d)))} {t_interval(d)} (above 0 on {int(np.sum(d > 0))} "
                         f"of {len(d)} seeds)")
        said.append(f"{approach} {', '.join(cells)}")
    return "; ".join(said)


def shared_rows() -> List[Tuple[str, str, float, float]]:
    """``(approach, detector, first, second)`` for every row both partitions converged: its mean near
    D_a OSCR over seeds on the first partition (the part that trained its approach) and the second."""
    out = []
    for row in run(SECOND_PARTITION)["rows"]:
        part = first_part(row["approach"])
        match = None if part is None else next((r for r in run(part)["rows"] if r["approach"] == row["approach"]
                                                and r["detector"] == row["detector"]), None)
        if match is None or not (row["converged"] and match["converged"]):
            continue
        values = (match["mean_oscr_per_seed"], row["mean_oscr_per_seed"])
        if all(v and None not in v for v in values):
            out.append((row["approach"], row["detector"], *(float(np.mean(v)) for v in values)))
    return out


def _rho(pairs: List[Tuple[float, float]]) -> str:
    first, second = zip(*pairs)
    return f"{num(stats.spearmanr(first, second).statistic, 2)} over {len(pairs)}"


def rank_agreement() -> str:
    """Spearman's rank correlation of the two partitions' mean near D_a OSCR: over every shared row,
    over the approaches with their papers' detectors, and the median over approaches of the order of
    the detectors on the same networks."""
    rows = shared_rows()
    papers = [(a, b) for approach, detector, a, b in rows if is_papers_detector(approach, detector)]
    within = []
    for approach in dict.fromkeys(r[0] for r in rows):
        pairs = [(a, b) for name, _, a, b in rows if name == approach]
        if len(pairs) >= 3:
            within.append(stats.spearmanr(*zip(*pairs)).statistic)
    return (f"ρ = {_rho([(a, b) for _, _, a, b in rows])} rows (approach and detector); {_rho(papers)} rows "
            f"of approaches with their papers' detectors; the detectors' order on each approach's networks, median "
            f"{num(np.median(within), 2)} over {len(within)} approaches ({num(min(within), 2)} to {num(max(within), 2)})")


FACTS: Dict[str, Callable[[], str]] = {
    "partition_table": partition_table,
    "partition_repeated": repeated,
    "partition_accuracies": accuracies,
    "partition_knowns": knowns_said,
    "partition_rank_agreement": rank_agreement,
    "partition_far": far_said,
}
