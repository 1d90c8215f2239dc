"""The benchmark over a protocol's splits (``benchmark-splits.md``): per split and mean ± std over
the splits, the extra-data rows apart, read from each split's ``benchmark.json`` (written by hand
here: the smoke benchmark itself is too slow for the suite, docs/osr-splits.md)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from agnostophobia.experiments.benchmark_splits import (extra_data_approaches, over_splits, splits_markdown,
                                                        summarise_splits, write_split_summary)


def row(approach, detector, oscr, auroc, accuracy, val_oscr, converged=True):
    """A split report's row as ``benchmark.json`` holds it: per-seed numbers at seeds 0..len(oscr)-1,
    its validation accuracy above or below the threshold of :func:`result`."""
    seeds = list(range(len(oscr)))
    return {"approach": approach, "detector": detector, "converged": converged, "seeds": seeds,
            "mean_oscr_per_seed": oscr, "mean_da_per_seed": {"oscr": oscr, "auroc": [auroc] * len(seeds)},
            "accuracy_per_seed": {"test": [accuracy] * len(seeds), "val": [0.99 if converged else 0.9] * len(seeds)},
            "closed_set_accuracy": {"mean": accuracy}, "val": {"per_seed": {"oscr": val_oscr}},
            "test": {"osr-mnist-unknown": {"auroc": {"mean": auroc}}}}


def result(shift):
    return {"min_accuracy": 0.985,
            "rows": [row("softmax", "softmax", [0.80 + shift, 0.82 + shift], 0.90, 0.99, [0.7, 0.7]),
                     row("softmax", "knn", [0.5, 0.5], 0.5, 0.99, [0.9, 0.9]),  # not its paper's detector
                     row("softmax", "max-logit", [0.6, 0.6], 0.6, 0.99, [0.65, 0.65]),  # MLS: the literature's
                     row("entropic", "softmax", [0.85 + shift, 0.87 + shift], 0.92, 0.98, [0.95, 0.95]),
                     row("logitnorm", "softmax", [0.70, 0.70], 0.80, 0.97, [0.6, 0.6], converged=False)]}


def test_mean_and_sample_std_over_splits():
    assert over_splits([0.5, 0.7, None]) == {"mean": pytest.approx(0.6), "std": pytest.approx(np.std([0.5, 0.7], ddof=1)),
                                             "splits": 2}
    assert over_splits([0.5]) == {"mean": 0.5, "std": None, "splits": 1}
    assert over_splits([None]) is None


def test_the_extra_data_rows_are_apart_and_each_group_ordered_by_validation():
    summary = summarise_splits([(0, result(0.0)), (2, result(0.1))], extra_data=["entropic"])
    assert [(r["approach"], r["detector"], r["extra_data"]) for r in summary["rows"]] == [
        ("softmax", "softmax", False), ("softmax", "max-logit", False), ("logitnorm", "softmax", False),
        ("entropic", "softmax", True)]  # entropic's higher validation OSCR: apart; knn is no row
    softmax = summary["rows"][0]
    assert softmax["detector"] == "softmax" and sorted(softmax["per_split"]) == [0, 2]
    assert softmax["oscr"]["mean"] == pytest.approx(np.mean([0.81, 0.91]))
    assert softmax["oscr"]["std"] == pytest.approx(np.std([0.81, 0.91], ddof=1))
    assert summary["rows"][2]["converged_splits"] == 0
    text = splits_markdown(summary, "osr-mnist", "EMNIST letters train")
    known_only, extra = text.split("## Known classes only")[1].split("## Extra data")
    assert "| softmax | softmax | 0.8100 | 0.9100 | 0.8600 ± 0.0707 |" in known_only and "entropic" not in known_only
    assert "(EMNIST letters train)" in extra and "| entropic | softmax |" in extra
    assert "| logitnorm (not converged on 2 of 2 splits) | softmax | 0.7000* | 0.7000* |" in known_only
    assert text.count("* not converged on that split") == 1  # one note, after the tables
    assert "published OSCR" not in text and "No number another run published" in text  # osr-mnist has none


def test_a_row_not_converged_on_a_split_follows_the_converged_rows_and_no_order_is_checked_with_it():
    """The benchmark's rule on the summary page: a marked row is listed after the others whatever its
    validation area, and the adjacent-order check reads only the rows converged on every split."""
    def with_best_unconverged(shift):
        base = result(shift)
        base["rows"][-1] = row("logitnorm", "softmax", [0.70, 0.70], 0.80, 0.97, [0.99, 0.99], converged=False)
        return base

    summary = summarise_splits([(0, with_best_unconverged(0.0)), (2, with_best_unconverged(0.1))], extra_data=[])
    known = [r["approach"] + "/" + r["detector"] for r in summary["rows"] if not r["extra_data"]]
    assert known == ["entropic/softmax", "softmax/softmax", "softmax/max-logit", "logitnorm/softmax"]
    text = splits_markdown(summary, "osr-mnist", "EMNIST letters train")
    assert text.index("| softmax | max-logit |") < text.index("| logitnorm (not converged on 2 of 2 splits) |")
    assert "for 2 pairs" not in text and "of 3 pairs" not in text  # three converged rows: two adjacent pairs
    assert "listed after the rows that converged on every split" in text


def test_the_page_says_which_order_the_splits_resolve_and_which_splits_repeat_a_class_set():
    """Rows are ordered by validation OSCR: the page shows it, says on which negatives it is measured,
    whether each adjacent pair's paired difference over the splits is resolved, that osr-cifar10's
    splits 0 and 1 are one class set, and what each approach is (ARPL without CS)."""
    summary = summarise_splits([(k, result(0.01 * k)) for k in range(5)], extra_data=["entropic"])
    summary.update(protocol="osr-cifar10", outside_negatives="EMNIST letters train")
    text = splits_markdown(summary, "osr-cifar10", "EMNIST letters train")
    assert "| validation OSCR | converged splits |" in text
    softmax = summary["rows"][0]
    assert f"| {softmax['val_oscr']['mean']:.4f} ± {softmax['val_oscr']['std']:.4f} | 5/5 |" in text
    assert "held-out images of the outside set (EMNIST letters train), not the unknown classes" in text
    # softmax/softmax and softmax/max-logit differ by the same amount on every split: resolved; logitnorm,
    # not converged, is listed after them and not checked
    assert "The order of the two rows is resolved" in text
    assert "Splits 0 and 1 hold the same known classes" in text and "5 splits are 4 class partitions" in text
    # the order's test counts that class set once: splits 0 and 1 averaged, 4 differences, not 5
    from agnostophobia.experiments.benchmark_splits import _order_resolved
    above = {"per_split": {str(k): {"val_oscr": v} for k, v in enumerate([0.9, 0.5, 0.6, 0.6, 0.6])}}
    below = {"per_split": {str(k): {"val_oscr": 0.5} for k in range(5)}}
    assert "not resolved" not in _order_resolved([above, below], [[0, 1]])  # 0.2, 0.1, 0.1, 0.1
    assert "not resolved" in _order_resolved([above, below], [])  # 0.4, 0.0, 0.1, 0.1, 0.1
    assert "`arpl`" not in text and "`entropic`, Entropic Open-Set" in text
    from agnostophobia.losses import LOSSES
    assert "(without CS)" in LOSSES.get("arpl").title
    # two rows whose validation differences change sign over the splits: not resolved
    results = [(k, result(0.0)) for k in range(3)]
    for k, (_, res) in enumerate(results):
        res["rows"][2]["val"]["per_seed"]["oscr"] = [0.9 + (0.2 if k % 2 else -0.2)] * 2  # max-logit
    text = splits_markdown(summarise_splits(results, extra_data=[], protocol="osr-mnist"), "osr-mnist", "")
    # neither pair of the converged rows is resolved (logitnorm, not converged, is not checked)
    assert "for none of the 2 pairs, not resolved" in text and "not a finding" in text
    assert "hold the same known classes" not in text


def test_every_split_is_read_at_the_seeds_all_splits_have():
    """Split 0 trains three seeds for its own report, the others one: the summary reads seed 0 on
    each, so that split 0's column is one network like the others' (the literature's form)."""
    three, one = result(0.0), result(0.1)
    for r in one["rows"]:
        for key in ("oscr", "auroc"):
            r["mean_da_per_seed"][key] = r["mean_da_per_seed"][key][:1]
        r["seeds"], r["accuracy_per_seed"] = [0], {k: v[:1] for k, v in r["accuracy_per_seed"].items()}
        r["val"]["per_seed"]["oscr"] = r["val"]["per_seed"]["oscr"][:1]
    three["rows"][0].update(seeds=[0, 1, 2], accuracy_per_seed={"test": [0.99] * 3, "val": [0.99, 0.9, 0.9]})
    three["rows"][0]["mean_da_per_seed"]["oscr"] = [0.80, 0.5, 0.5]
    summary = summarise_splits([(0, three), (2, one)], extra_data=[])
    softmax = next(r for r in summary["rows"] if (r["approach"], r["detector"]) == ("softmax", "softmax"))
    assert summary["seeds"] == [0]
    assert softmax["per_split"][0]["oscr"] == pytest.approx(0.80)  # seed 0's, not the mean of 0.80, 0.5, 0.5
    assert softmax["per_split"][0]["converged"] is True  # seed 0's validation accuracy, 0.99
    assert "A number per split is the network of seed 0" in splits_markdown(summary, "osr-mnist", "")


def test_a_fine_tune_off_its_authors_recipe_is_marked():
    from agnostophobia.experiments.benchmark_recipes import RECIPE_MARK

    departs = result(0.0)
    departs["recipes"] = {"entropic": {"start": "softmax", "differs": "its schedule"}, "softmax": {"start": None}}
    text = splits_markdown(summarise_splits([(0, departs), (1, result(0.1))], extra_data=[]), "osr-mnist", "")
    assert f"| entropic ({RECIPE_MARK}) | softmax |" in text and f"| softmax ({RECIPE_MARK})" not in text
    assert text.count(f"The mark *{RECIPE_MARK}*") == 1


def test_which_approaches_are_extra_data():
    approaches = ["softmax", "entropic", "outlier-exposure", "logitnorm"]
    assert extra_data_approaches("osr-mnist", approaches) == (["entropic", "outlier-exposure"],
                                                             "EMNIST letters train")
    assert extra_data_approaches("lenet++", approaches) == ([], "")  # its negatives are the protocol's own D_b'


def test_write_split_summary_reads_each_splits_benchmark(tmp_path):
    runs = []
    for k in (1, 4):
        folder = tmp_path / f"split-{k}"
        folder.mkdir()
        (folder / "config.yaml").write_text("protocol: osr-mnist\nprotocol_split: %d\n" % k)
        (folder / "benchmark.json").write_text(json.dumps(result(0.05 * k)))
        runs.append((k, folder))
    table = write_split_summary(tmp_path, runs, log=lambda line: None)
    assert table == tmp_path / "benchmark-splits.md"
    summary = json.loads((tmp_path / "benchmark-splits.json").read_text())
    assert summary["splits"] == [1, 4] and summary["protocol"] == "osr-mnist"
    assert [r["approach"] for r in summary["rows"] if r["extra_data"]] == ["entropic"]
    assert "OSCR split 1 | OSCR split 4" in table.read_text()


def test_the_summary_keeps_the_splits_an_earlier_call_benchmarked(tmp_path):
    from agnostophobia.experiments.benchmark import benchmarked_splits

    for k, benchmarked in ((0, True), (2, False), (3, True)):
        folder = tmp_path / f"split-{k}"
        folder.mkdir()
        (folder / "config.yaml").write_text("protocol: osr-mnist\nprotocol_split: %d\n" % k)
        if benchmarked:
            (folder / "benchmark.json").write_text(json.dumps(result(0.0)))
    assert benchmarked_splits(tmp_path, "osr-mnist", [0]) == [(0, tmp_path / "split-0"), (3, tmp_path / "split-3")]
    assert [k for k, _ in benchmarked_splits(tmp_path, "osr-mnist", [2])] == [0, 2, 3]  # the asked one, benchmarked now
