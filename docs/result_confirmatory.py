"""The confirmatory runs' readings (``result_facts`` gathers their numbers into :data:`FACTS`): the
questions an earlier run raised, asked of fresh networks (training seeds 5-9) and read as
``docs/provenance.md`` declared before they trained.

- ``bench-lenet-5-confirm`` asks ``bench-lenet-5``'s questions: one family of four tests, softmax and
  Objectosphere against Entropic Open-Set on the log-FPR and the linear OSCR area (mean over the D_a
  sets), read from the run's ``benchmark.json``.
- ``bench-cifar-5-confirm`` asks the CIFAR split's primary question: one family of two tests,
  softmax against Entropic Open-Set on both areas of the 10,000 unused CIFAR-10 training images of
  dog and truck, read from the record ``near_set_study.py`` wrote (the same two tests on the 2,000
  test images are secondary).

Every test reads each row with max-softmax (its paper's detector). *Better*/*worse*: the
minimum-effect test, Holm-adjusted over the whole declared family (a test not read counts with p 1),
puts the difference beyond the margin; *equivalent*: its 90 % t interval inside the margin, with a
standard error above 0; else not resolved."""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from agnostophobia.experiments.benchmark_comparisons import ALPHA, MARGIN
from agnostophobia.experiments.benchmark_rows import CEILING_GAP
from agnostophobia.metrics import PairedDifference, holm, minimum_effect_p, paired_difference

from result_pages import DOCS
from result_runs import num, row, run, signed

#: The reference every test reads against, and the detector every row is read with (max-softmax).
REFERENCE, DETECTOR = "entropic", "softmax"
#: The metrics, each a per-seed area: its key and its name.
METRICS = {"oscr_log": "log-FPR OSCR area", "oscr": "linear OSCR area"}
#: The approaches' names as the pages give them.
NAMES = {"softmax": "softmax", "objectosphere": "Objectosphere", "entropic": "Entropic Open-Set"}
#: The CIFAR split's sets: the declared primary one (the 10,000 unused training images of dog and
#: truck) and the secondary one (the 2,000 test images).
PRIMARY_SET, SECONDARY_SET = "dog-truck-train", "cifar10-dog-truck"


class Declared(NamedTuple):
    """What a confirmatory run's entry in ``docs/provenance.md`` froze before it trained."""
    label: str  # the confirmatory run
    exploratory: str  # the run whose questions it asks again
    threshold: float  # the protocol's convergence threshold (validation accuracy, mean over seeds)
    tested: Tuple[str, ...]  # the rows tested against the reference
    predicted: Dict[Tuple[str, str], str]  # the call predicted, per (row, metric)


LENET = Declared("bench-lenet-5-confirm", "bench-lenet-5", 0.985, ("softmax", "objectosphere"),
                 {("softmax", "oscr_log"): "worse", ("softmax", "oscr"): "not resolved",
                  ("objectosphere", "oscr_log"): "equivalent", ("objectosphere", "oscr"): "equivalent"})
CIFAR = Declared("bench-cifar-5-confirm", "bench-cifar-5-xeon", 0.90, ("softmax",),
                 {("softmax", "oscr_log"): "worse", ("softmax", "oscr"): "worse"})
#: The training seeds each run trained: the confirmatory runs' declared ones, the exploratory runs'.
SEEDS = {LENET.label: [5, 6, 7, 8, 9], CIFAR.label: [5, 6, 7, 8, 9], LENET.exploratory: [0, 1, 2, 3, 4],
         CIFAR.exploratory: [0, 1, 2, 3, 4]}
#: Each CIFAR run's second reading on the primary set, as ``near_set_study.py read`` wrote it (of
#: a copy of the run folder, named the run's label or that label with ``-near``).
NEAR_RECORDS = {CIFAR.label: DOCS / "results" / "near-set-cifar-confirm.json",
                CIFAR.exploratory: DOCS / "results" / "near-set-xeon.json"}

#: Why a declared test was not read.
NOT_CONVERGED, SEEDS_DIFFER, NOT_TESTED = "not converged", "seeds differ", "not tested"


def _unread(declared: Declared, label: str, name: str) -> Optional[str]:
    """Why row ``name`` cannot be tested against the reference in run ``label`` (``declared``'s
    confirmatory or exploratory run), or None."""
    if run(label)["min_accuracy"] != declared.threshold:
        raise ValueError(f"{label}: threshold {run(label)['min_accuracy']}, declared {declared.threshold}")
    first, reference = row(label, name), row(label, REFERENCE)
    for r in (first, reference):
        if r["detector"] != DETECTOR:
            raise ValueError(f"{label}: row {r['row']} read with {r['detector']}, not max-softmax")
    if not (first["converged"] and reference["converged"]):
        return NOT_CONVERGED
    if not first["seeds"] == reference["seeds"] == SEEDS[label]:
        return SEEDS_DIFFER
    return None


def _stored(test: Dict) -> PairedDifference:
    return PairedDifference(test["difference"], test["se"], test["se_seeds"], test["se_samples"], test["seeds"] - 1,
                            float("nan") if test["p"] is None else test["p"], test["seeds"])


def _primary_test(tests: Dict[str, List[Dict]], name: str) -> Optional[PairedDifference]:
    found = [t for t in tests.get("primary", []) if t["row"] == name and t["against"] == REFERENCE]
    return _stored(found[0]) if len(found) == 1 else None


def lenet_difference(label: str, name: str, metric: str) -> Union[PairedDifference, str]:
    """Row ``name`` minus the reference on ``metric`` in LeNet++ run ``label``, paired by seed: the
    linear area's standard error the benchmark's own (seeds and test-sample bootstrap, its primary
    test), the log-FPR area's the seeds' alone; or why it is not read."""
    unread = _unread(LENET, label, name)
    if unread:
        return unread
    if metric == "oscr_log":
        return paired_difference(row(label, name)["mean_da_per_seed"][metric],
                                 row(label, REFERENCE)["mean_da_per_seed"][metric])
    return _primary_test(run(label)["tests"], name) or NOT_TESTED


@lru_cache(maxsize=None)
def near_record(label: str) -> Dict:
    """CIFAR run ``label``'s second reading (:data:`NEAR_RECORDS`)."""
    record = json.loads(NEAR_RECORDS[label].read_text(encoding="utf-8"))
    if record["run"] not in (label, f"{label}-near") or record["added_set"] != PRIMARY_SET:
        raise ValueError(f"{NEAR_RECORDS[label].name}: a reading of {record['run']} on {record['added_set']}, "
                         f"not of {label} on {PRIMARY_SET}")
    return record


def cifar_difference(name: str, metric: str, which: str = PRIMARY_SET, label: str = CIFAR.label,
                     log_samples: bool = False) -> Union[PairedDifference, str]:
    """Row ``name`` minus the reference on ``metric`` on CIFAR run ``label``'s set ``which``: the
    linear area's the record's primary test (seeds and that set's sample bootstrap), the log-FPR
    area's paired by seed with the seeds' spread alone (as declared), or with ``log_samples`` the
    test samples' share added in quadrature (a secondary reading, declared before the report); or
    why it is not read."""
    unread = _unread(CIFAR, label, name)
    if unread:
        return unread
    record = near_record(label)
    if metric == "oscr_log":
        per_seed = record["oscr_log_per_seed"][which]
        sample_se = record["oscr_log_se_samples"][which][name] if log_samples else None
        return paired_difference(per_seed[name], per_seed[REFERENCE], sample_se=sample_se)
    return _primary_test(record["tests"][which], name) or NOT_TESTED


def decide(differences: Dict[Tuple[str, str], Union[PairedDifference, str]]) -> List[Dict]:
    """The declared calls of one family, in its order: row, metric, the difference and its 95 % and
    90 % intervals, and the call (better, worse, equivalent, not resolved, or why it was not read)."""
    keys = list(differences)
    p = holm([minimum_effect_p(d, MARGIN) if isinstance(d, PairedDifference) else 1.0
              for d in differences.values()])
    out = []
    for key, d, p_holm in zip(keys, differences.values(), p):
        if not isinstance(d, PairedDifference):
            out.append({"row": key[0], "metric": key[1], "call": d, "difference": None})
            continue
        ninety, ninety_five = d.interval(0.90), d.interval(0.95)
        if p_holm < ALPHA:
            call = "better" if d.difference > 0 else "worse"
        elif d.se > 0 and -MARGIN < ninety.low and ninety.high < MARGIN:
            call = "equivalent"
        else:
            call = "not resolved"
        out.append({"row": key[0], "metric": key[1], "call": call, "difference": d.difference, "p_holm": float(p_holm),
                    "interval": (ninety_five.low, ninety_five.high), "interval90": (ninety.low, ninety.high),
                    "seeds": d.n})
    return out


def at_ceiling(label: str, name: str, metric: str) -> bool:
    """Whether row ``name`` and the reference both lie within ``CEILING_GAP`` of their closed-set
    accuracy on ``metric`` (mean over seeds and D_a sets) in run ``label``: an area bounded by the
    accuracy then compares accuracies, and *equivalent* says that they agree, not that the
    networks reject unknowns alike."""
    return all(r["closed_set_accuracy"]["mean"] - float(np.mean(r["mean_da_per_seed"][metric])) < CEILING_GAP
               for r in (row(label, name), row(label, REFERENCE)))


def family(label: str = LENET.label) -> List[Dict]:
    """The declared tests of LeNet++ run ``label`` (the confirmatory run or the exploratory one), each
    marked where both rows are :func:`at_ceiling` on its metric."""
    tests = decide({(name, metric): lenet_difference(label, name, metric)
                    for name in LENET.tested for metric in METRICS})
    return [dict(t, at_ceiling=at_ceiling(label, t["row"], t["metric"])) for t in tests]


def cifar_family(which: str = PRIMARY_SET, label: str = CIFAR.label, log_samples: bool = False) -> List[Dict]:
    """The declared tests of CIFAR run ``label`` on set ``which`` (the primary set, or the 2,000 test
    images: secondary); ``log_samples``: the log-FPR area's standard error with the test samples'
    share (secondary)."""
    return decide({(name, metric): cifar_difference(name, metric, which, label, log_samples)
                   for name in CIFAR.tested for metric in METRICS})


def _said(test: Dict) -> str:
    if test["difference"] is None:
        return f"*{test['call']}*"
    low, high = test["interval"]
    call = f"{test['call']} (at ceiling)" if test["call"] == "equivalent" and test.get("at_ceiling") else test["call"]
    return f"{signed(test['difference'], 4)} [{signed(low, 4)}, {signed(high, 4)}] *{call}*"


def call_said(name: str, metric: str, label: str = LENET.label) -> str:
    """``−0.041 [−0.052, −0.030] *worse*``: one declared test's difference, its 95 % interval and call."""
    return _said(next(t for t in family(label) if (t["row"], t["metric"]) == (name, metric)))


def cifar_call_said(metric: str, which: str = PRIMARY_SET, label: str = CIFAR.label, log_samples: bool = False) -> str:
    """CIFAR run ``label``'s softmax test on ``metric`` and set ``which``, as :func:`call_said` gives it."""
    return _said(next(t for t in cifar_family(which, label, log_samples) if t["metric"] == metric))


def accuracy_said(declared: Declared = LENET) -> str:
    """Each approach's validation accuracy in a confirmatory run, mean over its seeds."""
    return ", ".join(f"{NAMES[a]} {num(row(declared.label, a)['val_closed_set_accuracy']['mean'])}"
                     for a in (*declared.tested[:1], REFERENCE, *declared.tested[1:]))


def predictions_held(declared: Declared = LENET) -> str:
    """How many of a run's declared predictions it bore out, which not, and of those that held how
    many are findings: a *not resolved* is none, and an *equivalent* at the ceiling compares accuracies."""
    tests = family() if declared is LENET else cifar_family()
    held = [t for t in tests if t["call"] == declared.predicted[t["row"], t["metric"]]]
    missed = [f"{NAMES[t['row']]} on the {METRICS[t['metric']]} ({t['call']}, predicted "
              f"{declared.predicted[t['row'], t['metric']]})" for t in tests if t not in held]
    ceiling = sum(t["call"] == "equivalent" and bool(t.get("at_ceiling")) for t in held)
    unresolved = sum(t["call"] == "not resolved" for t in held)
    kinds = [f"{n} {what}" for n, what in ((ceiling, "equivalent at the ceiling, comparing accuracies"),
                                           (unresolved, "not resolved, no finding")) if n]
    said = f"{len(held)} of {len(tests)}"
    if kinds:
        said += f" ({len(held) - ceiling - unresolved} a finding; {', '.join(kinds)})"
    return said + (f"; not: {'; '.join(missed)}" if missed else "")


FACTS: Dict[str, Callable[[], str]] = {
    "confirm_accuracy": accuracy_said,
    "confirm_softmax_log": lambda: call_said("softmax", "oscr_log"),
    "confirm_softmax_linear": lambda: call_said("softmax", "oscr"),
    "confirm_objectosphere_log": lambda: call_said("objectosphere", "oscr_log"),
    "confirm_objectosphere_linear": lambda: call_said("objectosphere", "oscr"),
    "confirm_predictions": predictions_held,
    "exploratory_softmax_log": lambda: call_said("softmax", "oscr_log", LENET.exploratory),
    "exploratory_softmax_linear": lambda: call_said("softmax", "oscr", LENET.exploratory),
    "exploratory_objectosphere_log": lambda: call_said("objectosphere", "oscr_log", LENET.exploratory),
    "exploratory_objectosphere_linear": lambda: call_said("objectosphere", "oscr", LENET.exploratory),
    "cconfirm_accuracy": lambda: accuracy_said(CIFAR),
    "cconfirm_softmax_log": lambda: cifar_call_said("oscr_log"),
    "cconfirm_softmax_linear": lambda: cifar_call_said("oscr"),
    "cconfirm_softmax_log_test_images": lambda: cifar_call_said("oscr_log", SECONDARY_SET),
    "cconfirm_softmax_linear_test_images": lambda: cifar_call_said("oscr", SECONDARY_SET),
    "cconfirm_predictions": lambda: predictions_held(CIFAR),
    "cconfirm_softmax_log_samples": lambda: cifar_call_said("oscr_log", log_samples=True),
    "cexploratory_softmax_log": lambda: cifar_call_said("oscr_log", label=CIFAR.exploratory),
    "cexploratory_softmax_linear": lambda: cifar_call_said("oscr", label=CIFAR.exploratory),
}
