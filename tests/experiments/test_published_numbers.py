"""The published numbers beside the standard splits' rows (``experiments.published_numbers``):
each entry names a registered protocol with splits, approach and detector, gives one number per
split, and its means are the ones its source reports."""
from __future__ import annotations

import pytest

from agnostophobia.data import PROTOCOLS
from agnostophobia.detectors import DETECTORS
from agnostophobia.experiments.benchmark_splits import splits_markdown, summarise_splits
from agnostophobia.experiments.published_numbers import PUBLISHED, published_columns
from agnostophobia.losses import LOSSES


@pytest.mark.parametrize("row", PUBLISHED, ids=lambda row: f"{row.protocol}-{row.approach}")
def test_every_published_row_names_registered_things_and_one_number_per_split(row):
    splits = PROTOCOLS.get(row.protocol).splits
    assert splits and row.approach in LOSSES.names() and row.detector in DETECTORS.names()
    for metric in ("oscr", "auroc", "accuracy"):
        values = getattr(row, metric)
        assert values == () or (len(values) == len(splits) and all(0 < v <= 1 for v in values))
    assert row.source and row.differs


def test_the_arpl_rerun_means_are_the_ones_its_log_gives():
    """iCGY96/ARPL issue #2: mean OSCR 83.85, AUROC about 86.09, accuracy about 94.3 over the five
    splits; its split 0 (known classes 2, 4, 1, 7, 9, 6) is ours 4, the one with the lowest OSCR its 2."""
    (rerun,) = [row for row in PUBLISHED if row.protocol == "osr-cifar10" and row.approach == "softmax"]
    assert rerun.mean("oscr") == pytest.approx(0.83854, abs=5e-5)
    assert rerun.mean("auroc") == pytest.approx(0.86087, abs=5e-5)
    assert rerun.mean("accuracy") == pytest.approx(0.94317, abs=5e-5)
    assert PROTOCOLS.get("osr-cifar10").splits[4] == (2, 4, 1, 7, 9, 6) and rerun.oscr[4] == 0.8446526
    assert min(rerun.oscr) == rerun.oscr[2]


def _row(approach, oscr, accuracy):
    return {"approach": approach, "detector": "softmax", "converged": True, "seeds": [0],
            "mean_oscr_per_seed": [oscr], "mean_da_per_seed": {"oscr": [oscr], "auroc": [0.85]},
            "accuracy_per_seed": {"test": [accuracy], "val": [accuracy]},
            "closed_set_accuracy": {"mean": accuracy}, "val": {"per_seed": {"oscr": [oscr]}},
            "test": {"osr-cifar10-unknown": {"auroc": {"mean": 0.85}}}}


def test_the_splits_page_puts_the_published_number_and_our_difference_beside_the_row():
    results = [(k, {"rows": [_row("softmax", 0.80, 0.90), _row("logitnorm", 0.82, 0.91)]}) for k in range(5)]
    summary = summarise_splits(results, extra_data=[], protocol="osr-cifar10")
    softmax = next(r for r in summary["rows"] if r["approach"] == "softmax")
    assert softmax["published"] == published_columns("osr-cifar10", "softmax", "softmax")
    assert not next(r for r in summary["rows"] if r["approach"] == "logitnorm")["published"]
    text = splits_markdown(summary, "osr-cifar10", "EMNIST letters train")
    assert "| 0.8000 ± 0.0000 | 0.8385 [1] | 0.8500 ± 0.0000 | 0.8609 [1] |" in text
    assert "OSCR 0.8000 against 0.8385 (-0.0385)" in text
    assert "closed-set accuracy 0.9000 against 0.9432 (-0.0432)" in text
    ratio = 0.80 / 0.90 - 0.83854 / 0.94317  # the OSCR gap left when each area is divided by its ceiling
    assert f"OSCR / accuracy {0.80 / 0.90:.4f} against {0.83854 / 0.94317:.4f} ({ratio:+.4f})" in text
    # the OSCR difference split into the accuracy's part and the ratio's, symmetric in the two, adding up to it
    mine, theirs = 0.80 / 0.90, 0.83854 / 0.94317
    by_accuracy, by_ratio = (0.90 - 0.94317) * (mine + theirs) / 2, (mine - theirs) * (0.90 + 0.94317) / 2
    assert by_accuracy + by_ratio == pytest.approx(0.80 - 0.83854)
    assert f"{by_accuracy:+.4f} goes with the accuracy and {by_ratio:+.4f} with the ratio" in text
    assert "1. a rerun of the ARPL authors' code" in text and "issue #2" in text


def test_a_protocol_without_published_numbers_has_no_such_section():
    results = [(0, {"rows": [_row("softmax", 0.80, 0.90)]})]
    text = splits_markdown(summarise_splits(results, extra_data=[], protocol="osr-mnist"), "osr-mnist", "")
    assert "Beside other runs' numbers" not in text and "published OSCR" not in text
    assert "| softmax | softmax | 0.8000 | 0.8000 | 0.8500 | 0.9000 | 0.8000 | 1/1 |" in text
