"""The confirmatory LeNet++ run's reading (``result_facts`` gathers its numbers into :data:`FACTS`):
the questions ``bench-lenet-5`` raised, asked of fresh networks (training seeds 5-9) and read as
``docs/provenance.md`` declared before they trained (``bench-lenet-5-confirm``). One family of four
tests, Holm-adjusted together: softmax and Objectosphere against Entropic Open-Set, each with
max-softmax, on the log-FPR and the linear OSCR area (mean over the D_a sets). *Better*/*worse*: the
minimum-effect test puts the difference beyond the margin; *equivalent*: its 90 % t interval inside
the margin; else not resolved. The same reading of ``bench-lenet-5`` (seeds 0-4) is what the run was
predicted to show."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

from agnostophobia.experiments.benchmark_comparisons import ALPHA, MARGIN
from agnostophobia.metrics import PairedDifference, beyond_margin, paired_difference

from result_runs import num, row, run, signed

#: The confirmatory run and the run whose questions it asks again.
CONFIRM, EXPLORATORY = "bench-lenet-5-confirm", "bench-lenet-5"
#: The reference and the rows tested against it, each its approach with its paper's detector (max-softmax).
REFERENCE, TESTED = "entropic", ("softmax", "objectosphere")
#: The co-primary metrics, each the per-seed mean over the D_a sets: benchmark.json's key and its name.
METRICS = {"oscr_log": "log-FPR OSCR area", "oscr": "linear OSCR area"}
#: The approaches' names as the pages give them.
NAMES = {"softmax": "softmax", "objectosphere": "Objectosphere", "entropic": "Entropic Open-Set"}
#: What the declaration predicted from ``bench-lenet-5``, per (row, metric).
PREDICTED = {("softmax", "oscr_log"): "worse", ("softmax", "oscr"): "not resolved",
             ("objectosphere", "oscr_log"): "equivalent", ("objectosphere", "oscr"): "equivalent"}


def _difference(label: str, name: str, metric: str) -> Optional[PairedDifference]:
    """Row ``name`` minus the reference on ``metric``, paired by seed: the linear area's standard error
    the benchmark's own (seeds and test-sample bootstrap, its primary test), the log-FPR area's the
    seeds' alone; None where either row did not converge or the benchmark did not test the pair."""
    first, reference = row(label, name), row(label, REFERENCE)
    if not (first["converged"] and reference["converged"]) or first["seeds"] != reference["seeds"]:
        return None
    if metric == "oscr_log":
        return paired_difference(first["mean_da_per_seed"][metric], reference["mean_da_per_seed"][metric])
    tests = [t for t in run(label)["tests"].get("primary", []) if t["row"] == name and t["against"] == REFERENCE]
    if len(tests) != 1:
        return None
    t = tests[0]
    return PairedDifference(t["difference"], t["se"], t["se_seeds"], t["se_samples"], t["seeds"] - 1,
                            float("nan") if t["p"] is None else t["p"], t["seeds"])


def family(label: str = CONFIRM) -> List[Dict]:
    """The four declared tests of run ``label``: row, metric, the difference and its 90 % interval, and
    the call (better, worse, equivalent, not resolved, or not converged)."""
    keys = [(name, metric) for name in TESTED for metric in METRICS]
    differences = {key: _difference(label, *key) for key in keys}
    tested = [key for key in keys if differences[key] is not None]
    beyond = dict(zip(tested, beyond_margin([differences[key] for key in tested], MARGIN, ALPHA)))
    out = []
    for key in keys:
        d = differences[key]
        if d is None:
            out.append({"row": key[0], "metric": key[1], "call": "not converged", "difference": None})
            continue
        ninety, ninety_five = d.interval(0.90), d.interval(0.95)
        low, high = ninety.low, ninety.high
        if beyond[key]:
            call = "better" if d.difference > 0 else "worse"
        elif -MARGIN < low and high < MARGIN:
            call = "equivalent"
        else:
            call = "not resolved"
        out.append({"row": key[0], "metric": key[1], "call": call, "difference": d.difference,
                    "interval": (ninety_five.low, ninety_five.high), "interval90": (low, high), "seeds": d.n})
    return out


def _said(test: Dict) -> str:
    if test["difference"] is None:
        return "*not converged*"
    low, high = test["interval"]
    return f"{signed(test['difference'], 4)} [{signed(low, 4)}, {signed(high, 4)}] *{test['call']}*"


def call_said(name: str, metric: str, label: str = CONFIRM) -> str:
    """``−0.041 [−0.052, −0.030] *worse*``: one declared test's difference, its 95 % interval and call."""
    return _said(next(t for t in family(label) if (t["row"], t["metric"]) == (name, metric)))


def accuracy_said() -> str:
    """Each approach's validation accuracy in the confirmatory run, mean over its seeds."""
    return ", ".join(f"{NAMES[a]} {num(row(CONFIRM, a)['val_closed_set_accuracy']['mean'])}"
                     for a in (*TESTED[:1], REFERENCE, *TESTED[1:]))


def predictions_held() -> str:
    """How many of the four declared predictions the confirmatory run bore out, and which did not."""
    missed = [f"{NAMES[t['row']]} on the {METRICS[t['metric']]} ({t['call']}, predicted {PREDICTED[t['row'], t['metric']]})"
              for t in family() if t["call"] != PREDICTED[t["row"], t["metric"]]]
    return f"{4 - len(missed)} of 4" + (f"; not: {'; '.join(missed)}" if missed else "")


FACTS: Dict[str, Callable[[], str]] = {
    "confirm_accuracy": accuracy_said,
    "confirm_softmax_log": lambda: call_said("softmax", "oscr_log"),
    "confirm_softmax_linear": lambda: call_said("softmax", "oscr"),
    "confirm_objectosphere_log": lambda: call_said("objectosphere", "oscr_log"),
    "confirm_objectosphere_linear": lambda: call_said("objectosphere", "oscr"),
    "confirm_predictions": predictions_held,
    "exploratory_softmax_log": lambda: call_said("softmax", "oscr_log", EXPLORATORY),
    "exploratory_softmax_linear": lambda: call_said("softmax", "oscr", EXPLORATORY),
    "exploratory_objectosphere_log": lambda: call_said("objectosphere", "oscr_log", EXPLORATORY),
    "exploratory_objectosphere_linear": lambda: call_said("objectosphere", "oscr", EXPLORATORY),
}
