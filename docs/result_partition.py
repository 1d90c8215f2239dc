"""The overview's numbers of the CIFAR split's second class partition (``result_facts`` gathers them
into :data:`FACTS`): its primary decisions beside the first partition's, for the approaches both
trained (``docs/provenance.md``, ``bench-cifar-b-5``, declared the reading before training)."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import result_against_softmax
from result_runs import CIFAR_REPORT, num, run, signed

#: The run of the second partition, and the first partition's runs its decisions are set beside: the
#: part the overview decides by (Zen 4), and the first part (the second partition's processor, a Xeon).
SECOND_PARTITION = "bench-cifar-b-5"
FIRST_PARTITION = {CIFAR_REPORT: "first partition, part 8 (Zen 4)", "bench-cifar-5": "first partition, part 1 (Xeon)"}


def primary(label: str, approach: str) -> Optional[Dict]:
    """Run ``label``'s primary test of ``approach`` (its paper's detector against EOS); None where the
    run has none (the approach not trained, or not converged)."""
    return next((t for t in run(label)["tests"]["primary"] if t["approach"] == approach), None)


def compared() -> List[str]:
    """The approaches the second partition trained besides the reference, in its rows' order."""
    reference = run(SECOND_PARTITION)["reference"]
    return list(dict.fromkeys(r["approach"] for r in run(SECOND_PARTITION)["rows"] if r["approach"] != reference))


def said(label: str, approach: str) -> str:
    """``−0.031 [−0.045, −0.017] *worse*, accuracy 0.904`` (its validation accuracy, mean over the
    seeds), or why there is no test."""
    accuracy = run(label)["accuracy"].get(approach)
    if accuracy is None:
        return "not trained"
    test, shown = primary(label, approach), f"accuracy {num(accuracy['val']['mean'])}"
    if test is not None:
        low, high = test["interval"]
        return f"{signed(test['difference'])} [{num(low)}, {num(high)}] *{test['decision']}*, {shown}"
    converged = next(r["converged"] for r in run(label)["rows"] if r["approach"] == approach)
    return f"{'no test' if converged else 'not converged'}, {shown}"


def partition_table() -> str:
    """Per approach: its primary test on each partition's runs."""
    labels = [*FIRST_PARTITION, SECOND_PARTITION]
    heads = [*FIRST_PARTITION.values(), "second partition (Xeon)"]
    lines = ["| approach against EOS (validation accuracy) | " + " | ".join(heads) + " |",
             "|---|" + "---|" * len(heads)]
    for approach in compared():
        lines.append(f"| {approach} | " + " | ".join(said(label, approach) for label in labels) + " |")
    return "\n".join(lines)


def repeated() -> str:
    """Which of the first partition's decisions (the overview's part) the second repeats."""
    same, differ = [], []
    for approach in compared():
        first, second = primary(CIFAR_REPORT, approach), primary(SECOND_PARTITION, approach)
        if first is None or first["decision"] == "not resolved":
            continue
        (same if second is not None and second["decision"] == first["decision"] else differ).append(approach)
    parts = []
    if same:
        parts.append(f"{' and '.join(same)} {'repeats its' if len(same) == 1 else 'repeat their'} decision")
    if differ:
        parts.append(f"{' and '.join(differ)} {'does' if len(differ) == 1 else 'do'} not")
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


FACTS: Dict[str, Callable[[], str]] = {
    "partition_table": partition_table,
    "partition_repeated": repeated,
    "partition_accuracies": accuracies,
    "partition_knowns": knowns_said,
}
