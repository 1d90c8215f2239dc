"""The overview's numbers of the centred-unknowns reading (``result_facts`` gathers them into
:data:`FACTS`): whether the frame that MNIST leaves empty, and the D_a glyph sets fill, accounts for
the converged softmax's CCR gap to the paper on Devanagari, read as ``docs/provenance.md`` declared
before the networks trained (``lenet-centred-unknowns``): the same networks read on each set as
prepared and centred, the paired difference over the seeds against the benchmark's margin
(``benchmarks/centred_unknowns.py`` wrote the record)."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, List

from result_preparation import OURS, PAPER_FPR
from result_runs import num, run, signed

RECORD = Path(__file__).resolve().parent / "results" / "centred-unknowns-lenet.json"
#: The names the pages give the approaches and sets of the record.
APPROACHES = {"softmax": "softmax", "entropic": "Entropic Open-Set"}
SETS = {"devanagari": "Devanagari", "notmnist": "notMNIST"}


@lru_cache(maxsize=None)
def record() -> Dict:
    return json.loads(RECORD.read_text(encoding="utf-8"))


def reading_said(approach: str, name: str) -> str:
    """One approach on one set: its mean CCR as prepared → centred, and the paired difference with its
    95 % t interval over the seeds and the declared verdict."""
    reading = record()["readings"][approach][name]
    difference, low, high = reading["difference"][:3]
    return (f"{num(reading['prepared_interval'][0])} → {num(reading['centred_interval'][0])}, "
            f"{signed(difference, 4)} [{signed(low, 4)}, {signed(high, 4)}], *{reading['verdict']}*")


def readings_said(approach: str) -> str:
    return "; ".join(f"{SETS[name]} {reading_said(approach, name)}" for name in SETS)


def frame_said() -> str:
    """The frame's-ink AUROC of each set against the knowns, as prepared → centred."""
    auroc = record()["frame_ink_auroc"]
    return ", ".join(f"{SETS[name]} {num(auroc['prepared'][name], 3)} → {num(auroc['centred'][name], 3)}"
                     for name in SETS)


def paper(name: str) -> float:
    """The paper's softmax CCR on ``name`` at the FPR its Table 2 column gives for the lowest the test
    sets resolve."""
    return run(OURS)["paper"]["ccr"][name]["softmax"][PAPER_FPR]


def shares_of_gap(name: str) -> List[float]:
    """The ends of softmax's paired interval (centred − as prepared, 95 %, seed-only as declared) on
    ``name``, each as a share in per cent of the gap between its CCR as prepared and the paper's: the
    far end first."""
    reading = record()["readings"]["softmax"][name]
    gap = reading["prepared_interval"][0] - paper(name)
    return [100 * abs(end) / gap for end in reading["difference"][1:3]]


def gap_share(name: str = "devanagari") -> str:
    """The most of the gap between softmax's CCR as prepared and the paper's that centring can account
    for, by the far end of the paired interval: a share, in per cent."""
    return f"{shares_of_gap(name)[0]:.0f} %"


def gap_share_interval(name: str = "notmnist") -> str:
    """The share of the gap that centring accounts for, from the near end to the far end of the
    paired interval, in per cent: the estimate alone would claim more than its interval allows
    (review 1206a, m5)."""
    low, high = sorted(shares_of_gap(name))
    return f"{low:.0f} % to {high:.0f} %"


FACTS: Dict[str, Callable[[], str]] = {
    "centred_softmax_devanagari": lambda: reading_said("softmax", "devanagari"),
    "centred_softmax": lambda: readings_said("softmax"),
    "centred_eos": lambda: readings_said("entropic"),
    "centred_frame": frame_said,
    "centred_share": gap_share,
    "centred_notmnist_share": gap_share_interval,
    "centred_notmnist_paper": lambda: num(paper("notmnist")),
    "centred_notmnist": lambda: num(record()["readings"]["softmax"]["notmnist"]["centred_interval"][0]),
}
