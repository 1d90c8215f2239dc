"""``agnostophobia benchmark``: every approach x detector, intervals over seeds, convergence marks,
paired tests with Holm's correction, tie flags, and a report that resumes.

The statistics are checked on rows built here (fast); the whole command runs at the smoke budget on
the real LeNet++ protocol under the ``slow`` marker (CI runs it)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scipy import stats

from agnostophobia.data.protocols import PROTOCOLS
from agnostophobia.experiments.benchmark import Declared, benchmarked_approaches, experiment_for, summarise
from agnostophobia.experiments.benchmark_comparisons import SampleReplicates
from agnostophobia.metrics import default_fpr
from agnostophobia.experiments.benchmark_report import markdown
from agnostophobia.experiments.benchmark_rows import REFERENCE_APPROACH, REFERENCE_DETECTOR, papers_detector
from agnostophobia.rundir import BENCHMARK as BENCHMARK_JSON, BENCHMARK_TABLE as BENCHMARK_MD
from agnostophobia.errors import AgnostophobiaError


def _numbers(oscr, accuracy, tied=0.0):
    return {"per_seed": {"oscr": list(oscr), "oscr_log": [o * o for o in oscr], "auroc": [min(1.0, o + 0.1) for o in oscr],
                         "ccr_at_lowest_fpr": [0.9 * o for o in oscr], "fpr_at_95tpr": [1 - o for o in oscr],
                         "aupr_in": list(oscr), "aupr_out": [o * o for o in oscr],
                         "closed_set_accuracy": list(accuracy), "tied_share": [tied] * len(oscr),
                         "ccr_at_fpr": {"1e-1": [o / 2 for o in oscr]}},
            "num_negative": 1000}


def _val(oscr, accuracy):
    """The validation numbers as compare_models merges them: each statistic's mean over seeds, and the
    seeds' values."""
    numbers = _numbers(oscr, accuracy)
    per_seed = numbers["per_seed"]
    means = {key: float(np.mean(values)) for key, values in per_seed.items() if key != "ccr_at_fpr"}
    return {**means, "ccr_at_fpr": {key: float(np.mean(v)) for key, v in per_seed["ccr_at_fpr"].items()},
            "per_seed": per_seed, "seeds": len(oscr), "num_negative": 1000}


def _row(approach, detector, oscr, accuracy, tied=0.0, val=None, val_accuracy=None):
    """A row as compare_models gives it: one D_a set (devanagari) and one D_b set (letters) on test, and
    the validation split (``val``, ``val_accuracy``: per seed, the test's where not given)."""
    return {"approach": approach, "detector": detector, "row": f"{approach}/{detector}", "settings": "",
            "settings_from": "no settings", "seed_ids": list(range(len(oscr))),
            "val": _val(oscr if val is None else val, accuracy if val_accuracy is None else val_accuracy),
            "test": {"letters": _numbers([0.5] * len(oscr), accuracy),
                     "devanagari": _numbers(oscr, accuracy, tied)}}


def rows():
    return [
        _row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.60, 0.62, 0.61], [0.99, 0.99, 0.99]),
        _row(REFERENCE_APPROACH, "max-logit", [0.64, 0.66, 0.65], [0.99, 0.99, 0.99]),
        _row("softmax", REFERENCE_DETECTOR, [0.40, 0.45, 0.42], [0.99, 0.99, 0.99]),
        _row("softmax", "max-logit", [0.41, 0.44, 0.43], [0.99, 0.99, 0.99], tied=0.2),
        _row("logitnorm", REFERENCE_DETECTOR, [0.90, 0.91, 0.92], [0.70, 0.72, 0.71]),  # best, but unconverged
    ]


def _report(result, **extra):
    """The report of a summarised ``result`` with what write_benchmark adds before writing it (the test
    sets of :func:`_row`, 1,000 unknowns each; ``extra`` overrides or adds keys)."""
    result.update({"meta": {}, "tuning": "config", "notes": [], "test_sets": {"letters": 1000, "devanagari": 1000},
                   "fprs": [0.1], **extra})
    return markdown(result, "run")


def test_one_seed_a_split_of_the_literatures_form_is_ranked_and_written_without_tests():
    # one network per split (benchmark osr-mnist --seeds 1): no paired test can be made, and the
    # report said so only after paired_difference had refused the single value
    one_seed = [_row(r["approach"], r["detector"], [0.6 + 0.01 * i], [0.99]) for i, r in enumerate(rows()[:4])]
    result = summarise(one_seed, min_accuracy=0.985)
    assert all(family == [] for family in result["tests"].values())
    assert [r["rank"] for r in result["rows"]] == [1, 2, 3, 4]
    assert sum("nothing to test" in line for line in result["summary"]) == len(result["tests"])


def test_rows_below_the_threshold_are_marked_and_never_ranked_or_tested():
    result = summarise(rows(), min_accuracy=0.985)
    by_row = {r["row"]: r for r in result["rows"]}
    assert by_row["logitnorm/softmax"]["converged"] is False and by_row["logitnorm/softmax"]["rank"] is None
    ranked = [r["row"] for r in result["rows"] if r["rank"] is not None]
    assert ranked == ["entropic/max-logit", "entropic/softmax", "softmax/max-logit", "softmax/softmax"]
    tested = {t["row"] for family in result["tests"].values() for t in family}
    assert "logitnorm/softmax" not in tested
    assert any("logitnorm 0.710" in line for line in result["summary"])
    # without a threshold every row is ranked, and the paragraph says so
    loose = summarise(rows(), min_accuracy=None)
    assert all(r["rank"] is not None for r in loose["rows"]) and loose["rows"][0]["row"] == "logitnorm/softmax"
    assert any("No convergence threshold" in line for line in loose["summary"])


def test_an_approach_on_fewer_seeds_than_the_run_is_marked_and_never_ranked_or_tested():
    """A benchmark stopped between seeds: the approach whose other seeds are still to train would be
    ranked on one seed against rivals on three; it is shown, marked, and left out of ranks and tests."""
    early = rows() + [_row("objectosphere", REFERENCE_DETECTOR, [0.95], [0.99])]  # best, but on one seed
    result = summarise(early, min_accuracy=0.985)
    by_row = {r["row"]: r for r in result["rows"]}
    assert by_row["objectosphere/softmax"]["complete"] is False and by_row["objectosphere/softmax"]["rank"] is None
    assert all(r["complete"] for name, r in by_row.items() if name != "objectosphere/softmax")
    assert result["rows"][0]["row"] == "entropic/max-logit"
    assert "objectosphere/softmax" not in {t["row"] for family in result["tests"].values() for t in family}
    assert any("objectosphere (1 of 3)" in line and "neither ranked nor tested" in line for line in result["summary"])
    assert "objectosphere/softmax (incomplete: 1 seed(s))" in _report(result)
    assert not any("fewer seeds" in line for line in summarise(rows(), 0.985)["summary"])


def test_rows_trained_on_extra_data_are_marked_and_ranked_apart():
    """On a protocol whose negatives are an outside set (osr-mnist, osr-cifar10), the approaches that
    train on them are ranked after the others, their ranks counted among themselves (E1, ...), and the
    others keep the ranks they have without them; the paragraph names the best of each group."""
    # the two entropic rows differ by 0.04-0.05 over the seeds: a difference that varies, so it can beat
    source = [row if row["row"] != f"{REFERENCE_APPROACH}/max-logit" else
              _row(REFERENCE_APPROACH, "max-logit", [0.64, 0.67, 0.65], [0.99, 0.99, 0.99]) for row in rows()]
    alone = summarise([r for r in source if r["approach"] == "softmax"], min_accuracy=0.985)
    result = summarise(source, min_accuracy=0.985, extra_data=[REFERENCE_APPROACH])
    ranked = [(r["row"], r["rank"], r["extra_data"]) for r in result["rows"] if r["rank"] is not None]
    assert ranked == [("softmax/max-logit", 1, False), ("softmax/softmax", 2, False),
                      ("entropic/max-logit", 1, True), ("entropic/softmax", 2, True)]
    assert [(r["row"], r["rank"]) for r in alone["rows"]] == [(row, rank) for row, rank, _ in ranked[:2]]
    # the two softmax rows lie 0.003 apart on validation, within the margin: no best among them
    assert any(line.startswith("No best row by") and "the first, softmax/max-logit" in line
               and "tied with it: softmax/softmax." in line for line in result["summary"])
    assert any(line.startswith("Best with extra data") and "entropic/max-logit" in line for line in result["summary"])
    text = _report(result)
    assert "| E1 | entropic/max-logit (extra data) |" in text and "| 1–2 | softmax/max-logit |" in text
    assert "ranked apart" in text
    plain = summarise(source, min_accuracy=0.985)
    assert "extra data" not in _report(plain)  # a protocol without: the report is as before
    # a difference that does not vary over seeds is no evidence: the fixture's constant 0.04 beats nothing
    constant = summarise(rows(), min_accuracy=0.985, extra_data=[REFERENCE_APPROACH])
    assert not any(line.startswith("Best with extra data") for line in constant["summary"])
    assert "| E1–2 | entropic/max-logit (extra data) |" in _report(constant)


def test_where_entropic_trained_on_extra_data_the_approaches_are_tested_against_softmax():
    """On the literature's splits EOS trained on an outside set: a test against it would weigh the
    letters, not the method, so the approach families compare with the knowns-only softmax; the
    reports name the reference the run used, and a run without extra data keeps EOS."""
    result = summarise(rows(), min_accuracy=0.985, extra_data=[REFERENCE_APPROACH])
    assert result["reference"] == "softmax"
    primary = {(t["row"], t["against"]) for t in result["tests"]["primary"]}
    assert primary == {("entropic/softmax", "softmax/softmax")}
    assert {t["against"] for t in result["tests"]["approaches"]} == {"softmax/max-logit"}
    assert "against softmax with its paper's" in result["families"]["primary"]["compares"]
    assert any(line.startswith("Primary family, each approach with its paper's detector against softmax")
               for line in result["summary"])
    text = _report(result)
    assert "vs softmax (primary)" in text and "vs EOS" not in text
    plain = summarise(rows(), min_accuracy=0.985)
    assert plain["reference"] == REFERENCE_APPROACH
    assert {t["against"] for t in plain["tests"]["primary"]} == {"entropic/softmax"}
    assert "vs EOS (primary)" in _report(plain)
    # the same where EOS is not in the run: an outside-data fine-tune alone, or no approach with negatives
    without_eos = [_row("outlier-exposure-ft", REFERENCE_DETECTOR, [0.70, 0.71, 0.72], [0.99] * 3)] + rows()[2:4]
    for extra in (["outlier-exposure-ft"], []):
        other = summarise(without_eos, min_accuracy=0.985, extra_data=extra)
        assert other["reference"] == "softmax"
        assert {(t["row"], t["against"]) for t in other["tests"]["primary"]} == {
            ("outlier-exposure-ft/softmax", "softmax/softmax")}


def test_the_report_covers_the_approaches_the_benchmark_was_asked_for():
    """Models of an approach the last call did not ask for (an earlier call's, one set aside after a
    divergence) stay in the folder and are left out of the report; the order is the folder's."""
    from types import SimpleNamespace

    models = [(seed, approach, None) for seed in (0, 1) for approach in ("entropic", "mixoe", "softmax")]
    records = SimpleNamespace(models=models, config={"approaches": ["softmax", "entropic", "vos"]})
    assert benchmarked_approaches(records) == (["entropic", "softmax"], ["mixoe"])
    records.config = {}  # a run trained without an approaches list: every model it holds
    assert benchmarked_approaches(records) == (["entropic", "mixoe", "softmax"], [])


def test_ranking_reads_only_the_unknown_unknown_sets():
    changed = rows()
    changed[2]["test"]["letters"] = _numbers([0.99] * 3, [0.99] * 3)  # softmax best on D_b only
    result = summarise(changed, min_accuracy=0.985)
    assert result["rows"][0]["row"] == "entropic/max-logit"


def test_intervals_are_t_intervals_over_seeds_cut_to_the_unit_range():
    result = summarise(rows(), min_accuracy=0.985)
    cell = next(r for r in result["rows"] if r["row"] == "softmax/softmax")["test"]["devanagari"]["oscr"]
    values = [0.40, 0.45, 0.42]
    low, high = stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values))
    assert cell["mean"] == pytest.approx(np.mean(values)) and cell["seeds"] == 3
    assert (cell["low"], cell["high"]) == (pytest.approx(max(low, 0)), pytest.approx(min(high, 1)))
    wide = summarise([_row("softmax", "softmax", [0.01, 0.9], [0.99, 0.99])], None)["rows"][0]
    assert wide["test"]["devanagari"]["oscr"]["low"] == 0.0  # the t interval would reach below 0


def test_paired_tests_match_scipy_and_are_holm_adjusted_per_family():
    """Without per-sample replicates each comparison is the paired t-test over seeds, Holm-adjusted
    within its family: the primary one (each approach with its paper's detector against EOS with
    its paper's) and the two secondary ones."""
    result = summarise(rows(), min_accuracy=0.985)
    primary = {t["row"]: t for t in result["tests"]["primary"]}
    approaches = {t["row"]: t for t in result["tests"]["approaches"]}
    detectors = {t["row"]: t for t in result["tests"]["detectors"]}
    # softmax thresholding against EOS, each with its paper's detector (max-softmax): the primary family
    assert set(primary) == {"softmax/softmax"} and primary["softmax/softmax"]["against"] == "entropic/softmax"
    reference = stats.ttest_rel([0.40, 0.45, 0.42], [0.60, 0.62, 0.61])
    assert primary["softmax/softmax"]["p"] == pytest.approx(reference.pvalue)
    assert primary["softmax/softmax"]["interval"] == pytest.approx(list(reference.confidence_interval(0.95)))
    assert primary["softmax/softmax"]["p_holm"] == pytest.approx(reference.pvalue)  # a family of one
    assert primary["softmax/softmax"]["difference"] < 0 and primary["softmax/softmax"]["se_samples"] is None
    # the same detector, other than the primary's: the secondary approach family
    assert set(approaches) == {"softmax/max-logit"} and approaches["softmax/max-logit"]["against"] == "entropic/max-logit"
    # detectors against max-softmax on the same network, Holm over their family of two
    assert set(detectors) == {"entropic/max-logit", "softmax/max-logit"}
    assert detectors["entropic/max-logit"]["against"] == "entropic/softmax"
    # entropic/max-logit is entropic/softmax + 0.04 on every seed: no spread, so no p (it was 0, "significant")
    assert detectors["entropic/max-logit"]["p"] is None and detectors["entropic/max-logit"]["decision"] == "not resolved"
    assert detectors["entropic/max-logit"]["p_holm"] == 1.0  # an undefined p counts as 1 in Holm's adjustment
    p = stats.ttest_rel([0.41, 0.44, 0.43], [0.40, 0.45, 0.42]).pvalue
    assert detectors["softmax/max-logit"]["p"] == pytest.approx(p)
    assert detectors["softmax/max-logit"]["p_holm"] == pytest.approx(min(1.0, 2 * p))  # the smaller of two: x2
    assert {t["family"] for family in result["tests"].values() for t in family} == {"primary", "approaches",
                                                                                     "detectors", "log_area"}
    assert result["tests"]["knowns"] == []  # logitnorm, the one approach trained on the knowns alone, is unconverged
    # the primary family's pairs again, on the log-FPR area (here the square of each seed's linear area)
    (log_test,) = result["tests"]["log_area"]
    assert (log_test["row"], log_test["against"]) == ("softmax/softmax", "entropic/softmax")
    on_log = stats.ttest_rel(np.square([0.40, 0.45, 0.42]), np.square([0.60, 0.62, 0.61]))
    assert log_test["p"] == pytest.approx(on_log.pvalue) and log_test["p"] != pytest.approx(reference.pvalue)
    assert log_test["interval"] == pytest.approx(list(on_log.confidence_interval(0.95)))
    assert result["families"]["log_area"]["kind"] == "secondary: log-FPR area"
    assert any(line.startswith("Secondary: log-FPR area family") for line in result["summary"])


def test_the_knowns_only_family_compares_approaches_without_negatives_with_softmax():
    """Review of 2026-12-04: an approach trained on the known classes alone is compared with softmax,
    the baseline it could replace, in a secondary family of its own; approaches trained on negatives
    are not in it, and where softmax is the reference the primary family already compares them."""
    detector = papers_detector("logitnorm")
    converged = [*rows()[:4], _row("logitnorm", detector, [0.47, 0.49, 0.50], [0.99, 0.99, 0.99]),
                 _row("outlier-exposure", papers_detector("outlier-exposure"), [0.6, 0.7, 0.65], [0.99] * 3)]
    result = summarise(converged, min_accuracy=0.985, negatives=["entropic", "outlier-exposure"])
    knowns = result["tests"]["knowns"]
    assert [(t["row"], t["against"]) for t in knowns] == [(f"logitnorm/{detector}", "softmax/softmax")]
    reference = stats.ttest_rel([0.47, 0.49, 0.50], [0.40, 0.45, 0.42])
    assert knowns[0]["p"] == pytest.approx(reference.pvalue) and knowns[0]["p_holm"] == pytest.approx(reference.pvalue)
    assert knowns[0]["interval"] == pytest.approx(list(reference.confidence_interval(0.95)))
    assert result["families"]["knowns"]["kind"] == "secondary: knowns only"
    text = _report(result)
    assert "| vs softmax (secondary: knowns only) |" in text and "Secondary: knowns only family" in text
    without_eos = summarise(converged[2:], min_accuracy=0.985, negatives=["outlier-exposure"])
    assert without_eos["reference"] == "softmax" and without_eos["tests"]["knowns"] == []
    assert any(t["row"] == f"logitnorm/{detector}" for t in without_eos["tests"]["primary"])


def test_ties_are_flagged_in_the_table_and_the_paragraph():
    result = summarise(rows(), min_accuracy=0.985)
    text = _report(result, meta={"experiment": "lenet++", "budget": "smoke", "seeds": 3})
    line = next(row for row in text.splitlines() if row.startswith("| ") and "softmax/max-logit |" in row)
    assert "†" in line and "(not converged)" not in line
    assert "logitnorm/softmax (not converged)" in text
    assert any("softmax/max-logit" in line and "of the samples tie across the kinds" in line
               for line in result["summary"])


def test_the_report_opens_with_each_approach_and_its_papers_detector():
    """The short table: exactly the rows whose detector is the approach's paper score, ranked first,
    the unconverged one marked, each with its mean OSCR over the D_a sets and its interval."""
    from agnostophobia.losses import LOSSES

    result = summarise(rows(), min_accuracy=0.985)
    text = _report(result)
    section = text.split("## Each approach with its paper's detector", 1)[1].split("\n## ", 1)[0]
    oscr, ccr = section.split("CCR at 1e-1, the smallest FPR of the report's columns", 1)
    table = [line for line in oscr.splitlines() if line.startswith("| ")][1:]
    expected = [r for r in result["rows"] if r["detector"] == LOSSES.get(r["approach"]).default_detector]
    assert [line.split(" | ")[1] for line in table] == [r["detector"] for r in expected]
    assert len(table) == len(expected) >= 2
    softmax = next(line for line in table if line.startswith("| softmax |"))
    mean = np.mean([0.40, 0.45, 0.42])
    assert f"{mean:.3f} [" in softmax.split(" | ")[4]  # after the test and the validation closed-set accuracy
    mean_log = np.mean([0.40 ** 2, 0.45 ** 2, 0.42 ** 2])  # the D_a set's log-axis area (the D_b set's is left out)
    assert softmax.split(" | ")[5].startswith(f"{mean_log:.3f} [")
    assert any("(not converged)" in line for line in table if line.startswith("| logitnorm"))
    softmax_ccr = next(line for line in ccr.splitlines() if line.startswith("| softmax |"))
    assert "log FPR axis from the smallest FPR each set resolves" in oscr
    assert softmax_ccr.split(" | ")[3].startswith(f"{np.mean([0.20, 0.225, 0.21]):.3f} [")  # devanagari: oscr / 2


def test_the_matrix_holds_every_approach_and_detector_with_the_best_of_each_approach_in_bold():
    result = summarise(rows(), min_accuracy=0.985)
    text = _report(result)
    section = text.split("## Every approach with every detector (mean D_a OSCR)", 1)[1].split("\n## ", 1)[0]
    header, _, *lines = [line for line in section.splitlines() if line.startswith("|")]
    assert header == "| approach | max-logit | softmax |"
    by_approach = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in lines}
    assert set(by_approach) == {"entropic", "softmax (tied on validation)", "logitnorm (not converged)"}
    # the mean of 0.64, 0.66, 0.65 with its 95 % t interval over the seeds, and the approach's best
    half = stats.t.ppf(0.975, 2) * np.std([0.64, 0.66, 0.65], ddof=1) / np.sqrt(3)
    assert by_approach["entropic"][0] == f"**0.650 [{0.65 - half:.3f}, {0.65 + half:.3f}]**"
    assert by_approach["entropic"][1].startswith("0.610 [")
    # softmax's two detectors lie 0.003 apart on validation, within the margin: neither is bold
    assert [cell.split(" [")[0] for cell in by_approach["softmax (tied on validation)"]] == ["0.427", "0.423"]
    assert by_approach["logitnorm (not converged)"][0] == "—"  # no logitnorm/max-logit row; not bold
    assert by_approach["logitnorm (not converged)"][1].startswith("0.910 [")


def test_targets_and_the_tuning_fpr():
    assert experiment_for("lenet++") == ("lenet++", ())
    assert experiment_for("cifar10-split") == ("cifar", (("protocol", "cifar10-split"),))
    with pytest.raises(AgnostophobiaError, match="not a shipped protocol"):
        experiment_for("no-such-protocol")
    assert default_fpr(1000) == 0.01 and default_fpr(200) == 0.05 and default_fpr(9) is None


def _diverging_reproduce(monkeypatch, diverge: set):
    """``reproduce`` replaced: it records the approaches of each call and raises TrainingDiverged for
    the first of them in ``diverge``, as a run trained in a child process reports it (pickled)."""
    import pickle

    from agnostophobia.errors import TrainingDiverged
    from agnostophobia.experiments import reproduce as reproduce_module

    calls = []

    def reproduce(request, log=None):
        approaches = dict(request.set_options)["approaches"]
        calls.append(list(approaches))
        for approach in approaches:
            if approach in diverge:
                raise pickle.loads(pickle.dumps(TrainingDiverged(
                    f"{approach} (seed 0) diverged in epoch 1: the training loss became non-finite", approach=approach)))
        return request.out

    monkeypatch.setattr(reproduce_module, "reproduce", reproduce)
    return calls


def test_a_diverged_approach_is_set_aside_with_its_fine_tunes_and_the_others_go_on(tmp_path, monkeypatch):
    """A divergence sets its approach aside, and every fine-tune that starts from its networks; the
    benchmark trains the others and the report's notes say why (before issue 55's review the command
    stopped and the user ran it again by hand without the approach)."""
    from agnostophobia.experiments import benchmark as benchmark_module
    from agnostophobia.experiments.request import RunRequest

    calls = _diverging_reproduce(monkeypatch, {"softmax", "energy-regularized"})
    written = {}
    monkeypatch.setattr(benchmark_module, "write_benchmark",
                        lambda folder, min_accuracy, log, diverged, accuracy_margin, ranking: written.update(diverged)
                        or folder / "benchmark.md")
    asked = ["softmax", "energy-regularized", "entropic", "outlier-exposure-ft", "mixoe-ft", "objectosphere"]
    request = RunRequest("lenet++", set_options=(("approaches", asked),), out=tmp_path / "bench")
    benchmark_module.benchmark("lenet++", request, log=lambda line: None)
    assert calls == [asked, ["energy-regularized", "entropic", "objectosphere"], ["entropic", "objectosphere"]]
    assert list(written) == ["softmax", "outlier-exposure-ft", "mixoe-ft", "energy-regularized"]
    assert written["softmax"].startswith("softmax (seed 0) diverged in epoch 1")
    assert written["mixoe-ft"] == "not trained: it fine-tunes softmax's networks, and softmax diverged"
    notes = benchmark_module.left_out_notes(["energy-regularized", "vos"], written)
    assert notes[0].startswith("softmax: set aside, the benchmark went on without it (softmax (seed 0) diverged")
    assert len(notes) == 5 and notes[-1].startswith("vos: its models are in the folder")  # not named twice


def test_a_benchmark_whose_every_approach_diverges_fails_and_leaves_the_last_report(tmp_path, monkeypatch):
    from agnostophobia.errors import TrainingDiverged
    from agnostophobia.experiments import benchmark as benchmark_module
    from agnostophobia.experiments.request import RunRequest

    _diverging_reproduce(monkeypatch, {"softmax", "entropic"})
    (tmp_path / "bench").mkdir()
    earlier = {name: f"an earlier benchmark's {name}\n".encode() for name in (BENCHMARK_MD, BENCHMARK_JSON)}
    for name, content in earlier.items():  # the last good report of this folder
        (tmp_path / "bench" / name).write_bytes(content)
    request = RunRequest("lenet++", set_options=(("approaches", ["softmax", "entropic"]),), out=tmp_path / "bench")
    with pytest.raises(TrainingDiverged, match=r"^entropic \(seed 0\) diverged in epoch 1: .*; no approach of the "
                                               r"benchmark is left to train$"):
        benchmark_module.benchmark("lenet++", request, log=lambda line: None)
    for name, content in earlier.items():  # the refused run leaves it byte for byte
        assert (tmp_path / "bench" / name).read_bytes() == content


@pytest.mark.slow
def test_benchmark_smoke_runs_every_approach_and_resumes(real_data_dir, tmp_path, capsys):
    """The command on every registered approach, 2 seeds, the report with intervals, accuracy, tie
    columns and tests; a second call keeps every model and reports the same numbers (called with a
    threshold every smoke network passes, so that it also ranks and tests: one resumed call checks
    both, as each call scores the whole run again). The smoke budget's images are cut to a third
    (its 30 networks' training and outputs were most of this test's 450 s in CI, two workers on two
    cores); the report reads the same way at any size."""
    from runs import SMALL_SMOKE

    from agnostophobia.cli import main
    from agnostophobia.losses import LOSSES

    out = tmp_path / "bench"
    args = ["benchmark", "lenet++", "--budget", "smoke", "--seeds", "2", "--out", str(out), "--no-progress",
            "--data-dir", str(real_data_dir), *SMALL_SMOKE]
    assert main(args) == 0
    result = json.loads((out / BENCHMARK_JSON).read_text())
    assert {r["approach"] for r in result["rows"]} == set(LOSSES.names())
    assert result["min_accuracy"] == 0.985 and all(r["converged"] is False for r in result["rows"])
    assert all(r["closed_set_accuracy"]["seeds"] == 2 for r in result["rows"])
    assert all(r["rank"] is None for r in result["rows"]) and not any(result["tests"].values())
    text = (out / BENCHMARK_MD).read_text()
    assert "## What the data says" in text and "tied share" in text and "(not converged)" in text
    assert "## Training recipes" in text and "(not the authors' recipe)" in text  # the fine-tunes' departures
    figures = result["oscr_figures"]  # one per unknown-unknown set, drawn from the curves scored once
    assert figures and all((out / path).stat().st_size > 10_000 and path in text for path in figures.values())
    capsys.readouterr()
    assert main(args + ["--min-accuracy", "0.01"]) == 0  # resumed: nothing trained again, the same numbers
    assert "finished earlier, kept" in capsys.readouterr().out
    ranked = json.loads((out / BENCHMARK_JSON).read_text())
    numbers = ("approach", "detector", "settings", "closed_set_accuracy", "val", "test", "mean_oscr_per_seed")
    key = lambda row: (row["approach"], row["detector"])  # noqa: E731
    assert [{k: r[k] for k in numbers} for r in sorted(ranked["rows"], key=key)] == \
        [{k: r[k] for k in numbers} for r in sorted(result["rows"], key=key)]
    # with a threshold every smoke network passes, rows are ranked and tested
    assert ranked["min_accuracy"] == 0.01
    assert all(r["rank"] is not None for r in ranked["rows"] if r["mean_oscr_per_seed"] is not None)
    assert ranked["tests"]["approaches"] and ranked["tests"]["detectors"]
    assert all(0 <= t["p_holm"] <= 1 and (t["p"] is None or t["p_holm"] >= t["p"])
               for f in ranked["tests"].values() for t in f)
    assert all(t["se_samples"] is not None and t["se"] >= t["se_samples"] > 0 for f in ranked["tests"].values()
               for t in f if t["difference"] != 0)  # every difference carries the test samples' bootstrap
    # the ranks read the validation samples' share too (M3): one number a pair of ranked rows, stored with them
    from agnostophobia.experiments.benchmark_ranking import (VAL_SE_SAMPLES, group_tests, ranked_group, resolved_ranks,
                                                             validation_se)

    chosen = ranked["ranking"]["chosen"]
    assert ranked["val_bootstrap"] == {"resamples": 200, "seed": 55, "metric": chosen}
    group = ranked_group(ranked["rows"], False)
    assert len(group) > 2 and all(set(r[VAL_SE_SAMPLES]) == {chosen} for r in group)
    # every pair has its share; two detectors that order the validation samples alike on every seed
    # read the same value on every resample, a share of 0 (it happened on CI's tiny networks)
    shares = [validation_se(a, b, chosen) for i, a in enumerate(group) for b in group[i + 1:]]
    assert all(share is not None and share >= 0 for share in shares) and max(shares) > 0
    first, second = next((a, b) for i, a in enumerate(group) for b in group[i + 1:]
                         if a["val"]["per_seed"][chosen] != b["val"]["per_seed"][chosen])
    bare = [{k: v for k, v in r.items() if k != VAL_SE_SAMPLES} for r in (first, second)]
    assert group_tests([first, second], chosen)[0][3] != group_tests(bare, chosen)[0][3]  # the ranks' tests read it
    assert len(resolved_ranks(ranked["rows"], chosen)) == len(ranked["rows"])
    assert "adds the validation samples' share" in (out / BENCHMARK_MD).read_text()


# ------------------------------------------------------------------ issue 55: decisions that mean what they say
def _near_rows(spread=1e-6):
    """EOS and a detector on it that differs by -0.0001 with a spread of ``spread`` over 3 seeds (the
    review's maximal-entropy/energy case, p 3e-5), and softmax 0.2 lower with a wide spread."""
    base = [0.9900, 0.9870, 0.9930]
    return [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, base, [0.99] * 3),
            _row(REFERENCE_APPROACH, "energy", [b - 1e-4 + spread * k for k, b in enumerate(base)], [0.99] * 3),
            _row("softmax", REFERENCE_DETECTOR, [0.70, 0.95, 0.72], [0.99] * 3)]


def _replicates_of(result_rows, se):
    """Bootstrap replicates per row and seed whose mean paired difference has standard error
    ``se``: each row's per-seed value plus one row-specific normal draw per resample, the same for
    every seed (the seeds share the test samples)."""
    rng = np.random.default_rng(0)
    noise = {(r["approach"], r["detector"]): rng.normal(0, se / np.sqrt(2), 400) for r in result_rows}
    return {(r["approach"], r["detector"]): {seed: value + noise[r["approach"], r["detector"]]
                                             for seed, value in zip(r["seed_ids"], _da(r))}
            for r in result_rows}


def _da(row):
    return row["test"]["devanagari"]["per_seed"]["oscr"]


def test_marks_are_decisions_and_no_difference_is_called_seed_to_seed_noise():
    """Issue 55, statement 2: '=' meant 'not significant after Holm' and was printed as 'within
    seed-to-seed noise'; the marks are now decisions, and the report says what each means."""
    result = summarise(rows(), min_accuracy=0.985)
    text = _report(result)
    assert "seed-to-seed noise" not in text and "▲" not in text and "▼" not in text
    assert not any(" = |" in line or "| = " in line for line in text.splitlines())
    decisions = {t["decision"] for family in result["tests"].values() for t in family}
    assert decisions <= {"better", "worse", "equivalent", "not resolved"}
    marks = {cell.strip() for line in text.splitlines() if line.startswith("| ") for cell in line.split("|")}
    assert "not resolved (3 seeds)" in marks and marks & {"worse", "worse (beyond margin)"}
    assert "vs EOS (primary)" in text and "vs EOS, same detector (secondary)" in text and "vs MSP (secondary)" in text
    assert "each Holm-adjusted on its own at 0.05 (not the whole report)" in text
    said = " ".join(result["summary"])
    assert "Primary family, each approach with its paper's detector" in said
    assert "Secondary: detectors family" in said and "not resolved at 3 seeds" in said
    # what each decision controls: Holm bounds a false better/worse of a zero difference; equivalence is per pair
    assert "equivalent (within ±0.005, each pair at 0.05, not adjusted)" in said
    assert "the difference is not 0 (Holm-adjusted p below 0.05 within its family) and its observed mean is at " \
           "least the margin" in text


def test_a_tiny_difference_that_barely_moves_between_seeds_is_not_called_worse():
    """The review's case: -0.0001 with a spread of 1e-6 is p ~ 1e-5 over the seeds alone; with the
    test samples' standard error added it is equivalent (inside the margin), and a large
    difference with a wide spread is not resolved at 3 seeds, not 'noise'."""
    bare = summarise(_near_rows(), min_accuracy=0.985)
    near = next(t for t in bare["tests"]["detectors"] if t["row"] == "entropic/energy")
    assert near["p"] < 1e-3 and near["se_samples"] is None
    assert near["decision"] != "worse"  # below the margin: never worse, even on the seeds alone
    bootstrapped = summarise(_near_rows(), min_accuracy=0.985,
                             replicates=SampleReplicates(_replicates_of(_near_rows(), 4e-4)))
    near = next(t for t in bootstrapped["tests"]["detectors"] if t["row"] == "entropic/energy")
    # the seeds' spread (about 1e-6) adds next to nothing in quadrature: the samples' share is the error
    assert near["se_samples"] == pytest.approx(4e-4, rel=0.15)
    assert near["se"] == pytest.approx(near["se_samples"], rel=1e-3)
    assert near["p"] > 0.5 and near["decision"] == "equivalent"
    far = next(t for t in bootstrapped["tests"]["primary"] if t["row"] == "softmax/softmax")
    assert far["difference"] < -0.1 and far["decision"] == "not resolved"
    assert bootstrapped["sample_bootstrap"] == {"resamples": 200, "seed": 55} and bare["sample_bootstrap"] is None
    assert any("a paired bootstrap over the shared test samples (200 resamples), added in quadrature" in line
               for line in bootstrapped["summary"])
    assert any("the seeds' spread alone" in line for line in bare["summary"])


def test_the_samples_share_is_the_spread_of_the_mean_paired_difference_over_resamples():
    from agnostophobia.metrics import resampled_se

    source = _near_rows()
    replicates = _replicates_of(source, 1e-3)
    result = summarise(source, min_accuracy=0.985, replicates=SampleReplicates(replicates))
    test = next(t for t in result["tests"]["detectors"] if t["row"] == "entropic/energy")
    mine = np.stack([replicates[("entropic", "energy")][s] for s in range(3)])
    theirs = np.stack([replicates[("entropic", "softmax")][s] for s in range(3)])
    assert test["se_samples"] == pytest.approx(resampled_se(mine, theirs))
    assert test["se"] == pytest.approx(np.hypot(test["se_seeds"], test["se_samples"]), rel=1e-12)
    d = test["difference"]
    assert test["p"] == pytest.approx(2 * stats.t.sf(abs(d) / test["se"], 2))
    half = stats.t.ppf(0.95, 2) * test["se"]
    assert test["equivalence_interval"] == pytest.approx([d - half, d + half])
    # a row whose replicates lack a seed falls back to the seeds' spread
    del replicates[("entropic", "energy")][1]
    partial = summarise(source, min_accuracy=0.985, replicates=SampleReplicates(replicates))
    assert next(t for t in partial["tests"]["detectors"] if t["row"] == "entropic/energy")["se_samples"] is None


def test_each_family_says_the_smallest_difference_it_resolves():
    from agnostophobia.experiments.benchmark_comparisons import MARGIN
    from agnostophobia.metrics import smallest_resolved_difference

    result = summarise(rows(), min_accuracy=0.985)
    for family, tests in result["tests"].items():
        resolution = result["families"][family]["resolution"]
        if not tests:  # the knowns-only family: its one approach is unconverged
            assert resolution is None
            continue
        se = np.median([t["se"] for t in tests])
        assert resolution["median_se"] == pytest.approx(se) and resolution["tests"] == len(tests)
        assert resolution["smallest_resolved"] == pytest.approx(
            smallest_resolved_difference(se, 3, 0.05, len(tests), MARGIN))
    line = next(line for line in result["summary"] if line.startswith("Primary family"))
    assert f"resolves differences from {result['families']['primary']['resolution']['smallest_resolved']:.4f} up" in line
    assert result["families"]["primary"]["kind"] == "primary" and result["margin"] == MARGIN == 0.005


def test_an_unconverged_papers_row_is_marked_once():
    """Issue 55, statement 13: a paper's row is labelled by its approach alone (row_label), and the
    short table added the mark to a label that already carried it."""
    from agnostophobia.metrics.rows import row_label

    source = rows()
    softmax = source[2]
    softmax["row"] = row_label("softmax", REFERENCE_DETECTOR)
    softmax["test"] = {name: _numbers(v["per_seed"]["oscr"], [0.9] * 3) for name, v in softmax["test"].items()}
    softmax["val"] = _val(softmax["test"]["devanagari"]["per_seed"]["oscr"], [0.9] * 3)  # judged on validation
    text = _report(summarise(source, min_accuracy=0.985))
    assert "(not converged) (not converged)" not in text
    assert "| softmax (not converged) | softmax |" in text



def test_a_fine_tune_that_departs_from_its_authors_recipe_is_marked_in_every_table():
    """Issue 55 item 5: the pages say "not the authors' recipe" beside those rows; the mark was in the
    short table and the recipes section only, not in the OSCR, per-set, CCR and detector tables."""
    recipe = {"start": "softmax", "optimizer": "sgd", "lr": 1e-3, "scheduler": "cosine", "epochs": 5,
              "source": "the paper", "differs": "a cosine step per epoch"}
    text = _report(summarise(rows(), min_accuracy=0.985), recipes={"logitnorm": recipe, "softmax": {}})
    sections = {part.split("\n", 1)[0]: part for part in text.split("\n## ")[1:]}
    for title in ("OSCR", "devanagari (D_a, 1,000 unknowns)", "Each approach with its paper's detector",
                  "Every approach with every detector (mean D_a OSCR)"):
        lines = [line for line in sections[title].splitlines() if "| logitnorm" in line]
        assert lines and all("(not the authors' recipe)" in line for line in lines), title
    untouched = [line for line in text.splitlines() if line.startswith("| ") and "logitnorm" not in line]
    assert untouched and not any("authors' recipe" in line for line in untouched)

def test_the_ccr_caption_says_where_its_fprs_come_from():
    """Issue 55, statement 5: the column was called 'the smallest FPR the test sets resolve'; it is
    the smallest the validation negatives support, and each test set resolves 10/#unknowns."""
    result = summarise(rows(), min_accuracy=0.985)
    result.update({"meta": {}, "tuning": "config", "notes": [], "fprs": [5e-3, 1e-2, 1e-1], "val_negatives": 4000,
                   "test_sets": {"letters": 10000, "devanagari": 10000}})
    text = markdown(result, "run")
    assert "the smallest FPR the test sets resolve" not in text
    assert "CCR at 5e-3, the smallest FPR of the report's columns" in text
    assert "the 4,000 validation negatives support" in text and "letters 0.001, devanagari 0.001" in text


def test_sample_replicates_resample_every_model_and_seed_alike():
    """The paired bootstrap of the report: the same resamples of each split for every network,
    detector and seed; the knowns once for every D_a set; the D_b set (letters) left out."""
    from agnostophobia.detectors.stored import ModelScores
    from agnostophobia.experiments.benchmark_comparisons import BOOTSTRAP_RESAMPLES, _bootstrap_weights, sample_replicates
    from agnostophobia.metrics import oscr_area_resamples

    rng = np.random.default_rng(1)
    known_labels = rng.integers(0, 3, 60)
    labels = {"known": known_labels, "letters": np.full(40, -1), "devanagari": np.full(50, -1),
              "notmnist": np.full(30, -1)}

    def scores(seed, approach):
        top = {}
        for detector in ("softmax", "energy"):
            r = np.random.default_rng(hash((seed, approach, detector)) % 2 ** 32)
            top[detector] = {split: (np.where(r.random(len(l)) < 0.9, np.maximum(l, 0), 0), r.normal(size=len(l))
                                     + (split == "known")) for split, l in labels.items()}
        return ModelScores(3, dict(labels), top)

    models = [(seed, approach, (seed, approach)) for seed in (0, 1) for approach in ("entropic", "softmax")]
    replicates = sample_replicates(models, lambda key, approach: scores(*key)).linear
    assert set(replicates) == {(a, d) for a in ("entropic", "softmax") for d in ("softmax", "energy")}
    model = scores(1, "softmax")
    known = _bootstrap_weights("known", 60)
    by_hand = np.mean([oscr_area_resamples(*model.known_vs_unknown("energy", s), known, _bootstrap_weights(s, n))
                       for s, n in (("devanagari", 50), ("notmnist", 30))], axis=0)
    np.testing.assert_array_equal(replicates[("softmax", "energy")][1], by_hand)
    assert by_hand.shape == (BOOTSTRAP_RESAMPLES,)
    # the log-FPR area's, each set's axis from the smallest FPR it resolves (10 / its size), on the same resamples
    logs = sample_replicates(models, lambda key, approach: scores(*key)).log
    by_hand_log = np.mean([oscr_area_resamples(*model.known_vs_unknown("energy", s), known, _bootstrap_weights(s, n),
                                               log_fpr=True, min_fpr=10 / n)
                           for s, n in (("devanagari", 50), ("notmnist", 30))], axis=0)
    np.testing.assert_array_equal(logs[("softmax", "energy")][1], by_hand_log)
    assert not np.allclose(by_hand_log, by_hand)
    np.testing.assert_array_equal(known, _bootstrap_weights("known", 60))  # seeded: deterministic
    assert not np.array_equal(_bootstrap_weights("devanagari", 50)[:, :30], _bootstrap_weights("notmnist", 30))
    # models whose test splits are not the same samples cannot be paired: no bootstrap
    other = dict(labels, known=np.roll(known_labels, 1))
    odd = lambda key, approach: ModelScores(3, other if key == (1, "softmax") else dict(labels),  # noqa: E731
                                            scores(*key).top)
    assert sample_replicates(models, odd) == SampleReplicates()  # no area of either axis (nor, here, validation)


def test_sample_replicates_on_asked_sets_read_those_alone():
    """``sets``: a second reading on other unknowns (a set added with ``evaluate --unknowns``) takes
    the asked sets alone, with the same resamples a report ranked on them would draw; a model that
    did not score an asked set has no replicates of it."""
    from agnostophobia.detectors.stored import ModelScores
    from agnostophobia.experiments.benchmark_comparisons import _bootstrap_weights, sample_replicates
    from agnostophobia.metrics import oscr_area_resamples

    rng = np.random.default_rng(2)
    labels = {"known": rng.integers(0, 2, 40), "near": np.full(30, -1), "more-near": np.full(70, -1)}

    def scores(seed, sets=("known", "near", "more-near")):
        r = np.random.default_rng(seed)
        top = {"softmax": {split: (np.maximum(labels[split], 0), r.normal(size=len(labels[split])) + (split == "known"))
                           for split in sets}}
        return ModelScores(2, {split: labels[split] for split in sets}, top)

    models = [(seed, "softmax", seed) for seed in (0, 1)]
    both = sample_replicates(models, lambda seed, approach: scores(seed)).linear
    alone = sample_replicates(models, lambda seed, approach: scores(seed), sets=["more-near"]).linear
    by_hand = oscr_area_resamples(*scores(1).known_vs_unknown("softmax", "more-near"),
                                  _bootstrap_weights("known", 40), _bootstrap_weights("more-near", 70))
    np.testing.assert_array_equal(alone[("softmax", "softmax")][1], by_hand)
    assert not np.array_equal(both[("softmax", "softmax")][1], by_hand)  # by default: the mean over both near sets
    lacking = lambda seed, approach: scores(seed, ("known", "near") if seed == 0 else tuple(labels))  # noqa: E731
    assert set(sample_replicates(models, lacking, sets=["more-near"]).linear[("softmax", "softmax")]) == {1}


def test_pooled_candidates_read_knowns_only_pairs_within_each_run_once():
    """The pooled ranking evidence: pairs of approaches trained on the known classes only, within one
    run, never across runs, and never a row trained on negatives (scored on its own training set); a
    run that reads the same networks again adds no pair; the separation is the rule's (difference of
    means over the mean 95 % half-width)."""
    from agnostophobia.experiments.benchmark_ranking import half_width, largest_separation, pooled_candidates

    first = summarise([_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.60, 0.62, 0.61], [0.99] * 3),
                       _row("outlier-exposure", papers_detector("outlier-exposure"), [0.50, 0.58, 0.55], [0.99] * 3),
                       _row("softmax", REFERENCE_DETECTOR, [0.40, 0.45, 0.42], [0.99] * 3),
                       _row("logitnorm", papers_detector("logitnorm"), [0.44, 0.47, 0.46], [0.99] * 3)],
                      min_accuracy=0.985, negatives=["entropic", "outlier-exposure"])["rows"]
    second = summarise([_row("softmax", REFERENCE_DETECTOR, [0.30, 0.31, 0.35], [0.99] * 3),
                        _row("logitnorm", papers_detector("logitnorm"), [0.33, 0.36, 0.34], [0.99] * 3)],
                       min_accuracy=0.985)["rows"]

    def separation(a, b):
        return abs(np.mean(a) - np.mean(b)) / ((half_width(a) + half_width(b)) / 2)

    by_hand = [separation([0.40, 0.45, 0.42], [0.44, 0.47, 0.46]),  # the first run's knowns-only pair
               separation([0.30, 0.31, 0.35], [0.33, 0.36, 0.34])]  # the second run's
    oscr = next(c for c in pooled_candidates([first, second]) if c["metric"] == "oscr")
    assert oscr["pairs"] == 2 and oscr["median_separation"] == pytest.approx(np.median(by_hand))
    assert pooled_candidates([first, second, first]) == pooled_candidates([first, second])  # read again: once
    assert next(c for c in pooled_candidates([second]) if c["metric"] == "oscr")["pairs"] == 1
    assert largest_separation([{"metric": "a", "median_separation": 1.0}, {"metric": "b", "median_separation": 1.0},
                               {"metric": "c", "median_separation": None}])["metric"] == "a"  # ties: the earlier
    assert largest_separation([{"metric": "c", "median_separation": None}]) is None


# ------------------------------------------------------------------ issue 55, items 2-3: every choice on validation data
def _set_val(row, metric, values):
    """Give ``row``'s validation ``metric`` these per-seed values (and their mean), as compare_models would."""
    row["val"]["per_seed"][metric] = list(values)
    row["val"][metric] = float(np.mean(values))
    return row


def _matrix_of(text):
    section = text.split("## Every approach with every detector (mean D_a OSCR)", 1)[1].split("\n## ", 1)[0]
    _, _, *lines = [line for line in section.splitlines() if line.startswith("|")]
    # each cell's mean and bold mark, its interval left out ("**0.650 [0.625, 0.675]**" -> "**0.650**")
    return {line.split(" | ")[0][2:]: [re.sub(r" \[[^]]*\]", "", cell.strip(" |")) for cell in line.split(" | ")[1:]]
            for line in lines}


def test_convergence_is_judged_on_the_validation_knowns_not_the_test_knowns():
    """Issue 55: convergence was read from the test knowns' accuracy. A network above the threshold on
    the test knowns but below it on the validation knowns is not converged (not ranked, tested or
    bold), and one below on test but above on validation is ranked; the report shows both numbers."""
    source = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.60, 0.62, 0.61], [0.99] * 3, val_accuracy=[0.97] * 3),
              _row(REFERENCE_APPROACH, "max-logit", [0.64, 0.66, 0.65], [0.99] * 3, val_accuracy=[0.97] * 3),
              _row("softmax", REFERENCE_DETECTOR, [0.40, 0.45, 0.42], [0.98] * 3, val_accuracy=[0.99] * 3),
              _row("softmax", "max-logit", [0.41, 0.44, 0.43], [0.98] * 3, val_accuracy=[0.99] * 3)]
    result = summarise(source, min_accuracy=0.985)
    by_row = {r["row"]: r for r in result["rows"]}
    assert by_row["entropic/softmax"]["converged"] is False and by_row["entropic/max-logit"]["rank"] is None
    assert by_row["softmax/softmax"]["converged"] is True and by_row["softmax/softmax"]["rank"] is not None
    assert [r["row"] for r in result["rows"] if r["rank"]] == ["softmax/max-logit", "softmax/softmax"]
    assert not any(t["row"].startswith("entropic") for family in result["tests"].values() for t in family)
    assert by_row["softmax/softmax"]["closed_set_accuracy"]["mean"] == pytest.approx(0.98)  # reported: test
    assert by_row["softmax/softmax"]["val_closed_set_accuracy"]["mean"] == pytest.approx(0.99)
    assert any("on the validation knowns below 0.985" in line and "entropic 0.970 (test 0.990)" in line
               for line in result["summary"])
    matrix = _matrix_of(_report(result))
    assert matrix["entropic (not converged)"] == ["0.650", "0.610"]  # marked, and no bold
    assert matrix["softmax (tied on validation)"] == ["0.427", "0.423"]  # 0.003 apart on validation


def test_the_rank_the_best_row_and_each_bold_detector_follow_validation_where_test_disagrees():
    """Issue 55: the best row and the bold best detector per approach were picked on test OSCR. Here
    test and validation disagree on every choice: the report follows validation and still shows the
    test numbers."""
    source = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.60, 0.62, 0.61], [0.99] * 3, val=[0.80, 0.81, 0.82]),
              _row(REFERENCE_APPROACH, "max-logit", [0.64, 0.66, 0.65], [0.99] * 3, val=[0.70, 0.72, 0.71]),
              _row("softmax", REFERENCE_DETECTOR, [0.40, 0.45, 0.42], [0.99] * 3, val=[0.55, 0.57, 0.56]),
              _row("softmax", "max-logit", [0.41, 0.44, 0.43], [0.99] * 3, val=[0.45, 0.46, 0.48])]
    # (validation differences that vary over seeds: a constant one is no evidence)
    result = summarise(source, min_accuracy=0.985)
    assert [r["row"] for r in result["rows"]] == ["entropic/softmax", "entropic/max-logit", "softmax/softmax",
                                                  "softmax/max-logit"]  # on test: max-logit first in each
    assert result["summary"][0].startswith(f"Best by validation {result['ranking']['title']}")
    assert "entropic/softmax (0." in result["summary"][0] and "test mean D_a OSCR 0.610" in result["summary"][0]
    from agnostophobia.experiments.benchmark_ranking import best_detectors

    assert best_detectors(result["rows"], result["ranking"]["chosen"]) == {"entropic": "softmax", "softmax": "softmax"}
    text = _report(result)
    matrix = _matrix_of(text)
    assert matrix["entropic"] == ["0.650", "**0.610**"] and matrix["softmax"] == ["0.427", "**0.423**"]
    oscr = text.split("\n## OSCR\n", 1)[1]
    first = next(line for line in oscr.splitlines() if line.startswith("| 1 |"))
    assert "entropic/softmax" in first and "0.610 [" in first  # ranked on validation, the test number shown


def test_an_approach_not_ranked_is_marked_in_the_matrix_and_never_bold():
    """Unconverged (validation accuracy) and incomplete approaches: marked in the matrix as in the other
    tables, with no bold cell, though their test numbers are the matrix's highest."""
    source = rows() + [_row("logitnorm", "max-logit", [0.95, 0.96, 0.97], [0.70, 0.72, 0.71]),
                       _row("objectosphere", REFERENCE_DETECTOR, [0.98], [0.99])]
    matrix = _matrix_of(_report(summarise(source, min_accuracy=0.985)))
    assert matrix["logitnorm (not converged)"] == ["0.960", "0.910"]
    assert matrix["objectosphere (incomplete: 1 seed(s))"] == ["—", "0.980"]
    assert sum("**" in cell for cells in matrix.values() for cell in cells) == 1  # entropic's (softmax's tie)


def test_the_report_states_the_split_each_choice_used():
    result = summarise(rows(), min_accuracy=0.985)
    text = _report(result)
    section = text.split("## Which split each choice used", 1)[1].split("\n## ", 1)[0]
    split_of = {line.split(" | ")[0][2:]: line.split(" | ")[1] for line in section.splitlines()
                if line.startswith("| ") and not line.startswith("| choice")}
    assert split_of == {"convergence (*not converged*: neither ranked, tested nor bold)": "validation",
                        "each detector's settings": "validation", "the ranking metric": "validation",
                        "rank": "validation", "best row, each approach's best detector (bold)": "validation",
                        "the numbers reported, the tests and their decisions": "test"}
    assert ("closed-set accuracy of the validation knowns, mean over seeds, at least 0.985, after the budget's fixed "
            "epochs: a threshold reached, not a plateau") in section
    assert "Every number shown is a test number unless its column says validation" in text
    # a network whose recipe was chosen on test images before the benchmark's rules says so (the CIFAR ones)
    from agnostophobia.experiments.benchmark import _chosen_on_test_images

    said = _chosen_on_test_images("airbench")
    assert said and "CIFAR-10 test images" in said and _chosen_on_test_images("lenet++") is None
    recipe = _report(result, chosen_on_test_images=said).split("## Which split each choice used", 1)[1]
    assert f"| the network's recipe, before this run | test | {said} |" in recipe
    assert f"rows are listed by the validation {result['ranking']['title']}" in text


def _three_approaches():
    """Three converged approaches, each with its paper's detector (max-softmax), whose validation
    AUROC separates them by many seed half-widths while every other validation candidate barely
    does; on the test sets it is the linear OSCR area that separates them most."""
    source = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.70, 0.80, 0.90], [0.99] * 3),
              _row("softmax", REFERENCE_DETECTOR, [0.10, 0.11, 0.12], [0.99] * 3),
              _row("objectosphere", REFERENCE_DETECTOR, [0.50, 0.51, 0.52], [0.99] * 3)]
    val = {REFERENCE_APPROACH: ([0.95, 0.96, 0.97], [0.80, 0.82, 0.84]), "softmax": ([0.94, 0.96, 0.98], [0.60, 0.61, 0.62]),
           "objectosphere": ([0.93, 0.96, 0.99], [0.70, 0.705, 0.71])}
    for row in source:
        base, auroc = val[row["approach"]]
        for metric in ("oscr", "oscr_log", "ccr_at_lowest_fpr"):
            _set_val(row, metric, base)
        _set_val(row, "auroc", auroc)
    noisy = {REFERENCE_APPROACH: [0.5, 0.7, 0.9], "softmax": [0.55, 0.7, 0.85], "objectosphere": [0.6, 0.7, 0.8]}
    for row in source:  # on the test set AUROC separates nothing
        row["test"]["devanagari"]["per_seed"]["auroc"] = noisy[row["approach"]]
    return source


def test_the_ranking_metric_is_chosen_by_the_declared_rule_on_validation_numbers():
    """Issue 55, item 3: for each candidate its gap to closed-set accuracy, the spread of the approaches'
    means and their median separation in seed half-widths; the rule (largest median separation on
    validation) picks AUROC here, though on test the linear OSCR area would win, and ranks by it."""
    from agnostophobia.experiments.benchmark_ranking import RANKING_CANDIDATES, RANKING_RULE, candidate_numbers

    assert "largest median separation" in RANKING_RULE and "validation" in RANKING_RULE
    assert list(RANKING_CANDIDATES) == ["oscr", "oscr_log", "auroc", "ccr_at_lowest_fpr"]
    result = summarise(_three_approaches(), min_accuracy=0.985)
    ranking = result["ranking"]
    assert ranking["chosen"] == "auroc" and ranking["split"] == "val"
    val = {c["metric"]: c for c in ranking["candidates"]["val"]}
    test = {c["metric"]: c for c in ranking["candidates"]["test"]}
    assert test["oscr"]["median_separation"] > 3 > 0.5 > test["auroc"]["median_separation"]  # test would not choose it
    # the numbers by hand: the 95 % t half-width over 3 seeds, and each pair's separation in their mean half-width
    half = lambda v: stats.t.ppf(0.975, 2) * stats.sem(v)  # noqa: E731
    aurocs = {"entropic": [0.80, 0.82, 0.84], "softmax": [0.60, 0.61, 0.62], "objectosphere": [0.70, 0.705, 0.71]}
    pairs = [abs(np.mean(aurocs[a]) - np.mean(aurocs[b])) / ((half(aurocs[a]) + half(aurocs[b])) / 2)
             for a, b in (("entropic", "softmax"), ("entropic", "objectosphere"), ("softmax", "objectosphere"))]
    assert val["auroc"]["median_separation"] == pytest.approx(np.median(pairs))
    assert val["auroc"]["approaches"] == 3 and val["auroc"]["spread"] == pytest.approx(0.82 - 0.61)
    assert val["auroc"]["median_half_width"] == pytest.approx(np.median([half(v) for v in aurocs.values()]))
    assert val["auroc"]["median_gap"] == pytest.approx(0.99 - 0.705)
    assert val["oscr"]["median_separation"] < 1 < val["auroc"]["median_separation"]
    assert candidate_numbers(result["rows"], "val") == ranking["candidates"]["val"]
    # ranked by validation AUROC: entropic, objectosphere, softmax (test OSCR would agree here; the order is AUROC's)
    assert [r["approach"] for r in result["rows"]] == ["entropic", "objectosphere", "softmax"]
    text = _report(result)
    section = text.split("## Choosing the ranking metric", 1)[1].split("\n## ", 1)[0]
    assert RANKING_RULE in section and "Chosen: **AUROC**" in section
    table = [line for line in section.splitlines() if line.startswith("| ") and "| validation |" in line]
    assert len(table) == 4 and table[2].startswith("| AUROC | validation | 3 |") and table[2].endswith("chosen |")
    assert sum(line.startswith("| ") and "| test (D_a mean) |" in line for line in section.splitlines()) == 4


def test_a_ranking_metric_declared_before_the_run_ranks_in_the_rules_place():
    """``benchmark --ranking-metric``: a metric fixed before the run (as a pre-registration fixes one)
    ranks the rows where the rule would have chosen another (AUROC here); the report says it was
    declared, the candidates' table is still shown, and a name that is no candidate is refused."""
    from agnostophobia.errors import AgnostophobiaError
    from agnostophobia.experiments.benchmark_ranking import RANKING_CANDIDATES, ranking_metric

    for metric in RANKING_CANDIDATES:
        result = summarise(_three_approaches(), min_accuracy=0.985, declared=Declared(ranking=metric))
        ranking = result["ranking"]
        assert ranking["chosen"] == metric and ranking["declared"] and f"--ranking-metric {metric}" in ranking["why"]
        means = {r["approach"]: np.mean(r["val"]["per_seed"][metric]) for r in result["rows"]}
        order = [r["approach"] for r in result["rows"] if r["rank"] is not None]
        assert [means[a] for a in order] == sorted(means.values(), reverse=True), (metric, means, order)
    assert summarise(_three_approaches(), min_accuracy=0.985)["ranking"]["declared"] is False
    text = _report(summarise(_three_approaches(), min_accuracy=0.985, declared=Declared(ranking="oscr")))
    section = text.split("## Choosing the ranking metric", 1)[1].split("\n## ", 1)[0]
    assert "Declared with `--ranking-metric`: **linear OSCR area** (`--ranking-metric oscr`)" in section
    assert "Validation rows decide" not in section and "| chosen |" not in section
    table = [line for line in section.splitlines() if line.startswith("| linear OSCR area | validation |")]
    assert len(table) == 1 and table[0].endswith("declared |")
    assert "| the ranking metric | declared (--ranking-metric) | linear OSCR area" in text
    assert "the ranking metric declared with --ranking-metric" in text and "the declared rule chose" not in text
    assert "(the ranking metric, declared with --ranking-metric)" in text and "metric, chosen on validation" not in text
    assert "the declared rule chose" in _report(summarise(_three_approaches(), min_accuracy=0.985))
    with pytest.raises(AgnostophobiaError, match="--ranking-metric 'oscr_area': one of oscr, oscr_log"):
        ranking_metric(result["rows"], declared="oscr_area")


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS.registered()))
def test_each_protocol_declares_a_candidate_or_none_and_benchmark_ranks_by_it_unless_the_flag_says_otherwise(protocol):
    """A registered protocol declares its ranking metric beside its other facts (``ranking_metric``):
    a candidate, or "" (the rule chooses). ``benchmark`` ranks by it without ``--ranking-metric``, and
    the flag overrides it; a user's protocol (a mapping) declares none. The report says who declared."""
    from agnostophobia.experiments.benchmark import declared_ranking
    from agnostophobia.experiments.benchmark_ranking import BY_FLAG, RANKING_CANDIDATES

    metric = PROTOCOLS.get(protocol).ranking_metric
    assert metric == "" or metric in RANKING_CANDIDATES
    assert declared_ranking({"protocol": protocol}) == ((metric, protocol) if metric else (None, BY_FLAG))
    assert declared_ranking({"protocol": protocol}, flag="auroc") == ("auroc", BY_FLAG)
    assert declared_ranking({"protocol": {"type": "imagefolder", "root": "x"}}) == (None, BY_FLAG)
    if not metric:
        return
    result = summarise(_three_approaches(), min_accuracy=0.985, declared=Declared(ranking=metric, ranking_by=protocol))
    ranking = result["ranking"]
    assert ranking["chosen"] == metric and ranking["declared"] and ranking["declared_by"] == protocol
    assert f"declared for the protocol {protocol} (--ranking-metric overrides it) before" in ranking["why"]
    text = _report(result)
    assert f"Declared for the protocol `{protocol}` (`--ranking-metric` overrides it): **{RANKING_CANDIDATES[metric]}**" in text
    assert f"| the ranking metric | declared (the protocol) | {RANKING_CANDIDATES[metric]}" in text
    assert f"the ranking metric declared for the protocol {protocol}" in text and "--ranking-metric)" not in text


def test_the_rule_reads_the_knowns_only_approaches_where_some_trained_on_an_outside_set():
    """On the literature's splits the validation negatives come from the outside set that the
    extra-data approaches trained on: the rule reads the others' separation only (here entropic's
    AUROC would widen it), and with one knowns-only approach left falls back to the paper's area."""
    apart = summarise(_three_approaches(), min_accuracy=0.985, extra_data=["entropic"])["ranking"]
    val = {c["metric"]: c for c in apart["candidates"]["val"]}
    half = lambda v: stats.t.ppf(0.975, 2) * stats.sem(v)  # noqa: E731
    softmax, objectosphere = [0.60, 0.61, 0.62], [0.70, 0.705, 0.71]  # the one pair left
    assert val["auroc"]["approaches"] == 2 and val["auroc"]["spread"] == pytest.approx(0.705 - 0.61)
    assert val["auroc"]["median_separation"] == pytest.approx(
        (0.705 - 0.61) / ((half(softmax) + half(objectosphere)) / 2))
    said = summarise(_three_approaches(), min_accuracy=0.985)["summary"]
    assert not any("No candidate metric separates" in line for line in said)  # AUROC separates them by 5.1
    # the separation is said beside the best row all the same (a reader weighs 1.01 half-widths himself)
    assert any(line.startswith("The chosen metric separates the 3 converged approaches it reads by a median")
               for line in said)
    noisy = _three_approaches()
    for row, auroc in zip(noisy, ([0.5, 0.7, 0.9], [0.55, 0.7, 0.85], [0.6, 0.7, 0.8])):
        _set_val(row, "auroc", auroc)  # every candidate's means now agree: nothing separates the approaches
    said = summarise(noisy, min_accuracy=0.985)["summary"]
    assert [line for line in said if line.startswith("No candidate metric separates the 3 converged approaches")
            and "a median 0.00 half-widths" in line and "not a finding" in line]
    alone = summarise(_three_approaches(), min_accuracy=0.985, extra_data=["entropic", "objectosphere"])["ranking"]
    assert alone["chosen"] == "oscr" and "fewer than two converged approaches" in alone["why"]


def test_with_fewer_than_two_converged_approaches_the_rule_falls_back_to_the_papers_area():
    one = [r for r in _three_approaches() if r["approach"] == "softmax"]
    ranking = summarise(one, min_accuracy=0.985)["ranking"]
    assert ranking["chosen"] == "oscr" and "fewer than two converged approaches" in ranking["why"]
    assert all(c["median_separation"] is None for c in ranking["candidates"]["val"])


def test_each_test_set_reports_fpr95_and_aupr_in_and_out():
    """Issue 55, item 3: FPR@95%TPR, AUPR-In and AUPR-Out per test set in benchmark.json and the report."""
    result = summarise(rows(), min_accuracy=0.985)
    cell = next(r for r in result["rows"] if r["row"] == "softmax/softmax")["test"]["devanagari"]
    assert cell["fpr_at_95tpr"]["mean"] == pytest.approx(1 - np.mean([0.40, 0.45, 0.42]))
    assert cell["aupr_in"]["mean"] == pytest.approx(np.mean([0.40, 0.45, 0.42]))
    assert cell["aupr_out"]["mean"] == pytest.approx(np.mean([0.40 ** 2, 0.45 ** 2, 0.42 ** 2]))
    assert cell["ccr_at_lowest_fpr"]["seeds"] == 3
    text = _report(result)
    section = text.split("## devanagari (D_a, 1,000 unknowns)", 1)[1].split("\n## ", 1)[0]
    header = next(line for line in section.splitlines() if line.startswith("| approach/detector"))
    assert "| FPR@95%TPR | AUPR-In | AUPR-Out |" in header and "CCR@0.01 (10/#unknowns)" in header
    line = next(line for line in section.splitlines() if line.startswith("| softmax/softmax |"))
    assert line.split(" | ")[2].startswith(f"{1 - np.mean([0.40, 0.45, 0.42]):.3f} [")
    assert "AUPR-In: average precision with the knowns positive" in section


# ------------------------------------------------------------------ issue 55 item 4: near and far unknowns apart
def _with_far(row, far_oscr):
    """``row`` as a protocol with near and far unknowns scores it: its D_a set renamed to the CIFAR-10
    split's near dog + truck set, and one far set (MNIST as RGB) at ``far_oscr``."""
    test = row["test"]
    accuracy = test["devanagari"]["per_seed"]["closed_set_accuracy"]
    row["test"] = {"cifar10-horse-ship": test["letters"], "cifar10-dog-truck": test.pop("devanagari"),
                   "mnist-rgb": _numbers(far_oscr, accuracy)}
    return row


def test_far_unknowns_are_averaged_apart_and_decide_nothing():
    """The rows are ranked and tested on the near D_a sets; the far ones are averaged apart and shown
    in their own column: a far set that reverses the order changes no rank and no test."""
    near_only = summarise([_with_far(r, [0.5] * 3) for r in rows()], min_accuracy=0.985)
    reversed_far = [_with_far(r, [1.0 - o for o in r["test"]["devanagari"]["per_seed"]["oscr"]])
                    for r in rows()]
    result = summarise(reversed_far, min_accuracy=0.985)
    assert result["ranked_sets"] == ["cifar10-dog-truck"] and result["far_sets"] == ["mnist-rgb"]
    assert [r["row"] for r in result["rows"]] == [r["row"] for r in near_only["rows"]]
    assert result["tests"] == near_only["tests"]
    eos = next(r for r in result["rows"] if r["row"] == "entropic/softmax")
    assert eos["mean_oscr_per_seed"] == pytest.approx([0.60, 0.62, 0.61])
    assert eos["mean_far_oscr_per_seed"] == pytest.approx([0.40, 0.38, 0.39])
    text = _report(result, test_sets={"cifar10-horse-ship": 1000, "cifar10-dog-truck": 1000, "mnist-rgb": 1000})
    assert "| mean near D_a OSCR |" in text and "| mean far D_a OSCR |" in text
    assert "the far sets (mnist-rgb) are averaged apart" in text


def test_a_protocol_whose_unknowns_are_all_far_says_so_and_ranks_on_them():
    """LeNet++'s unknown unknowns are all far (digits against letters, Devanagari, notMNIST, CIFAR-10):
    they are what the rows are ranked on, no far column is added, and the report says so."""
    result = summarise(rows(), min_accuracy=0.985)
    assert result["ranked_sets"] == ["devanagari"] and result["far_sets"] == []
    assert all(r["mean_far_oscr_per_seed"] is None for r in result["rows"])
    text = _report(result)
    assert "mean far D_a OSCR" not in text and "Every unknown-unknown set here is declared far from the knowns" in text


def test_every_shipped_unknown_set_declares_how_far_it_lies():
    """Every set a shipped protocol builds is declared near or far; a folder protocol's two sets are a
    user's, of unknown distance ("")."""
    from agnostophobia.data.protocol_types import PROXIMITIES, UNKNOWN_SETS, UnknownSet

    users = {"negatives", "unknowns"}  # the file protocols' sets (data.file_protocols)
    assert users <= set(UNKNOWN_SETS.names())
    for name in UNKNOWN_SETS.names():
        assert UNKNOWN_SETS.get(name).proximity == ("" if name in users else UNKNOWN_SETS.get(name).proximity)
        assert name in users or UNKNOWN_SETS.get(name).proximity in ("near", "far"), name
    assert set(PROXIMITIES) == {"near", "far", ""}
    with pytest.raises(ValueError, match="proximity 'close'"):
        UnknownSet("x", "x", proximity="close")


# ------------------------------------------------------------------ issue 55 item 5: the recipes
def test_fine_tunes_that_depart_from_their_authors_recipe_say_so_beside_their_row():
    """Each fine-tune's recipe comes from its loss's declaration for the protocol's images; a recipe
    that departs from the authors' is marked beside its row and its departures are listed, and the
    from-scratch approaches are named as trained with the budget's one recipe."""
    from agnostophobia.experiments.benchmark import training_recipes
    from agnostophobia.training.fine_tune import recipe

    source = rows() + [_row("outlier-exposure-ft", "softmax", [0.70, 0.71, 0.72], [0.99, 0.99, 0.99])]
    recipes = training_recipes(["softmax", "entropic", "outlier-exposure-ft"], {"protocol": "lenet++"})
    glyphs = recipe("outlier-exposure-ft", "lenet++")
    assert recipes["outlier-exposure-ft"]["lr"] == glyphs.lr == 1e-2  # OE's MNIST recipe on glyphs
    assert recipes["outlier-exposure-ft"]["differs"] == glyphs.departures() != ""
    assert recipes["softmax"]["start"] is None
    shortened = training_recipes(["outlier-exposure-ft"], {"protocol": "cifar10-split", "fine_tune_epochs": 1,
                                                           "fine_tune_exact": True})["outlier-exposure-ft"]
    assert shortened["epochs"] == 1  # a budget's fine_tune_epochs departs from the authors' 10, and says so
    assert shortened["differs"] == "1 epoch(s) (the config's fine_tune_epochs), the authors' 10"
    # the checkpoint kept: the last epoch's, as the authors' code, departs from nothing; another rule says so
    for keep, said in (("last", False), ("lowest-val-loss", True)):
        kept = training_recipes(["outlier-exposure-ft"], {"protocol": "cifar10-split", "fine_tune_exact": True,
                                                          "keep_checkpoint": keep})["outlier-exposure-ft"]
        assert ("keeps the epoch of the lowest validation loss" in kept["differs"]) is said, keep
    text = _report(summarise(source, min_accuracy=0.985), recipes=recipes)
    assert "| outlier-exposure-ft (not the authors' recipe) | softmax |" in text
    assert "| softmax | softmax |" in text  # from scratch: no mark
    section = text.split("## Training recipes")[1].split("\n## ")[0]
    assert "From scratch, with the budget's recipe" in section and "softmax, entropic" in section
    assert "mark *not the authors' recipe* is about a fine-tune's own recipe" in section  # and not the protocol's
    assert f"Here it departs: {glyphs.departures()}." in section and "SGD at lr 0.01, cosine schedule, 5 epoch(s)" in section
    assert "## Training recipes" not in _report(summarise(rows(), min_accuracy=0.985))  # an older benchmark.json


def test_fine_tunes_trained_exactly_as_their_authors_code_lose_the_batches_departure():
    """``fine_tune_exact: true``: the authors' batch of knowns and negatives and the per-step cosine; the
    departure they removed is no longer listed, and OE on CIFAR, whose recipe departs in nothing else,
    is no longer marked."""
    from agnostophobia.experiments.benchmark import training_recipes
    from agnostophobia.training.fine_tune import recipe

    shared = training_recipes(["outlier-exposure-ft"], {"protocol": "cifar10-split"})["outlier-exposure-ft"]
    exact = training_recipes(["outlier-exposure-ft"], {"protocol": "cifar10-split", "fine_tune_exact": True})[
        "outlier-exposure-ft"]
    assert shared["scheduler"] == "cosine" and "negatives_per_batch" not in shared and "128 + 256" in shared["differs"]
    assert (exact["scheduler"], exact["batch_size"], exact["negatives_per_batch"], exact["differs"]) == (
        "cosine-per-step", 384, 256, "")
    glyphs = training_recipes(["outlier-exposure-ft"], {"protocol": "lenet++", "fine_tune_exact": True})[
        "outlier-exposure-ft"]
    assert glyphs["differs"] == recipe("outlier-exposure-ft", "lenet++").differs != ""  # Adam's start remains
    text = _report(summarise(rows(), min_accuracy=0.985), recipes={"logitnorm": {**exact, "start": "softmax"}})
    assert "(not the authors' recipe)" not in text
    assert "cosine-per-step schedule, 10 epoch(s), batches of 128 knowns + 256 negatives" in text


@pytest.mark.parametrize("approach", ["outlier-exposure-ft", "energy-regularized-ft", "mixoe-ft"])
def test_a_start_network_trained_at_another_lr_per_sample_marks_the_fine_tune(approach):
    """The fine-tune's lr means something against the start network's lr per sample: the authors'
    baselines train at 0.1 on batches of 128. The CIFAR split's airbench network at 0.2 on 256 is the
    same per sample and adds no departure; osr-cifar10's at 0.1 on 256 is half, so the fine-tune's
    10⁻³ is twice what it is in their code, and the row is marked. On glyphs the recipe says it."""
    from agnostophobia.experiments.benchmark import training_recipes
    from agnostophobia.training.fine_tune import recipe

    def differs(protocol, lr, batch):
        config = {"protocol": protocol, "fine_tune_exact": True, "lr": lr, "batch_size": batch}
        return training_recipes([approach], config)[approach]["differs"]

    declared = recipe(approach, "cifar10-split")
    assert declared.start_lr == (0.1, 128)
    assert differs("cifar10-split", 0.2, 256) == differs("cifar10-split", None, None) == declared.differs
    halved = differs("osr-cifar10", 0.1, 256)
    assert "the start network trained at a peak lr of 0.1 on batches of 256" in halved and "is 2× what" in halved
    assert "2×" not in differs("lenet++", 3e-3, 128)  # the glyph recipe's own differs names Adam's start


def test_one_seed_is_the_literatures_form_on_a_protocol_with_splits_only(tmp_path, capsys):
    """``--seeds 1`` is refused where the intervals and tests need 2 (lenet++), before anything is
    written; a protocol with splits takes it (one network per split, the spread over the splits)."""
    from agnostophobia.cli import main
    from agnostophobia.experiments.benchmark import _check_seeds

    out = tmp_path / "bench"
    assert main(["benchmark", "lenet++", "--budget", "smoke", "--seeds", "1", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seeds 1: a benchmark needs at least 2 seeds" in err[0] and not out.exists()
    _check_seeds(1, has_splits=True)  # osr-mnist, osr-cifar10
    with pytest.raises(AgnostophobiaError, match="--seeds 0"):
        _check_seeds(0, has_splits=True)


# ------------------------------------------------------------------ what the review of a 4-seed preview asked
def test_the_paragraph_says_where_the_linear_area_is_at_its_ceiling_and_which_rows_are_below_chance():
    """Two approaches whose mean D_a OSCR is within CEILING_GAP of their closed-set accuracy: the
    paragraph says that the tests then compare accuracies; a detector whose OSCR is under half the
    accuracy (where a score blind to the unknowns lies) is named below chance. Neither sentence
    appears where no row is at the ceiling or below chance."""
    from agnostophobia.experiments.benchmark_summary import CEILING_GAP

    capped = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.9895, 0.9900, 0.9905], [0.99] * 3),
              _row("background", "background", [0.9895, 0.9897, 0.9899], [0.99] * 3),
              _row("softmax", REFERENCE_DETECTOR, [0.97, 0.96, 0.98], [0.99] * 3),
              _row("softmax", "max-logit", [0.30, 0.31, 0.32], [0.99] * 3),
              _row("background", "max-logit", [0.10, 0.45, 0.90], [0.99] * 3)]  # its interval reaches chance
    said = summarise(capped, min_accuracy=0.985)["summary"]
    ceiling = [line for line in said if line.startswith("At the ceiling")]
    assert len(ceiling) == 1 and "2 of the 3 converged approaches" in ceiling[0]
    assert f"within {CEILING_GAP} of their closed-set accuracy (entropic, background)" in ceiling[0]
    below = [line for line in said if line.startswith("Below chance")]
    assert len(below) == 1 and "softmax/max-logit 0.310 [0.285, 0.335]" in below[0] and "softmax/softmax" not in below[0]
    # a mean under half, but an interval reaching above it: not below chance, named apart
    assert "background/max-logit 0." not in below[0]
    assert below[0].endswith("1 more converged row has a mean under it and an interval that reaches above it: "
                             "background/max-logit.")
    # their low-FPR metrics lie 0.099 (CCR, 0.9 x OSCR here) below the accuracy: there they differ
    assert "CCR at the lowest resolved FPR (up to 0.099 below) read the low-FPR end, where they differ" in ceiling[0]
    crossing_only = summarise([capped[0], capped[2], capped[4]], min_accuracy=0.985)["summary"]
    below = [line for line in crossing_only if line.startswith("Below chance")]  # none wholly below: still named
    assert len(below) == 1 and "none with its whole 95 % interval" in below[0] and "1 with its mean: background/max-logit" in below[0]
    plain = summarise([capped[0], capped[2]], min_accuracy=0.985)["summary"]  # one at the ceiling: no sentence
    assert not any(line.startswith(("At the ceiling", "Below chance")) for line in plain)


def test_an_equivalent_call_between_two_rows_at_the_ceiling_is_marked_so_and_the_report_says_what_it_means():
    """An *equivalent* test whose two rows both sit within CEILING_GAP of their closed-set accuracy is
    marked "equivalent (at ceiling)" (there the area compares accuracies); one against a row below
    the ceiling, or a decision other than equivalent, keeps its plain mark; the report defines the
    mark only where a test carries it."""
    from agnostophobia.experiments.benchmark_comparisons import mark
    from agnostophobia.experiments.benchmark_summary import decision_rule
    from agnostophobia.experiments.benchmark_rows import rows_at_ceiling

    capped = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.9895, 0.9900, 0.9905], [0.99] * 3),
              _row("background", "background", [0.9895, 0.9897, 0.9899], [0.99] * 3),
              _row("softmax", REFERENCE_DETECTOR, [0.97, 0.96, 0.98], [0.99] * 3),
              _row("logitnorm", REFERENCE_DETECTOR, [0.70, 0.70, 0.70], [0.70] * 3)]  # at its ceiling, unconverged
    result = summarise(capped, min_accuracy=0.985)
    ceiling = rows_at_ceiling(result["rows"])
    reference = next(r["row"] for r in result["rows"] if r["approach"] == REFERENCE_APPROACH)
    background = next(r["row"] for r in result["rows"] if r["approach"] == "background")
    softmax = next(r["row"] for r in result["rows"] if r["approach"] == "softmax")
    assert sorted(ceiling) == sorted([reference, background])
    call = {"decision": "equivalent", "row": background, "against": reference, "seeds": 3, "difference": 0.0002,
            "se": 0.001, "se_seeds": 0.001, "se_samples": 0.0, "p": 0.9}
    assert mark(call, ceiling) == "equivalent (at ceiling)"
    assert mark(call) == "equivalent"
    assert mark({**call, "row": softmax}, ceiling) == "equivalent"
    assert mark({**call, "decision": "not resolved"}, ceiling) == "not resolved (3 seeds)"
    assert mark({**call, "decision": "worse"}, ceiling) == "worse"
    result["tests"] = {"primary": [call]}
    assert "**equivalent (at ceiling)**" in decision_rule(result)[0]
    result["tests"] = {"primary": [{**call, "row": softmax}]}
    assert "at ceiling" not in decision_rule(result)[0]


def test_a_difference_holm_puts_away_from_0_but_below_the_margin_is_marked_apart_from_not_resolved():
    """A not-resolved test whose Holm-adjusted p is below ALPHA (its mean under the margin, its 90 %
    interval not inside it) is marked "differs, below margin (n seeds)", one at or above ALPHA (or
    with no p) keeps "not resolved (n seeds)"; the report defines the mark only where a test carries it.
    Both read from decide's own verdicts on two families."""
    from agnostophobia.experiments.benchmark_comparisons import ALPHA, MARGIN, mark
    from agnostophobia.experiments.benchmark_summary import decision_rule
    from agnostophobia.metrics import decide, paired_difference

    # a difference of 0.8 margins, steady enough that Holm puts it away from 0, loose enough that its
    # 90 % interval reaches past the margin: the margin alone keeps it from a verdict
    steady = paired_difference([0.80 + 0.8 * MARGIN + e for e in (0.0, 0.002, -0.002, 0.001, -0.001)], [0.80] * 5)
    spread = paired_difference([0.80, 0.78, 0.83, 0.79, 0.81], [0.80, 0.80, 0.80, 0.80, 0.80])
    (small, unclear) = decide([steady, spread], MARGIN, ALPHA)
    assert small.verdict == unclear.verdict == "not resolved" and small.p_holm < ALPHA <= unclear.p_holm
    call = {"row": "softmax", "against": "entropic", "seeds": 5, "decision": small.verdict, "p_holm": small.p_holm}
    assert mark(call) == "differs, below margin (5 seeds)"
    assert mark({**call, "p_holm": unclear.p_holm}) == "not resolved (5 seeds)"
    assert mark({**call, "p_holm": None}) == "not resolved (5 seeds)"
    rows = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.80, 0.81, 0.82], [0.9] * 3)]
    result = summarise(rows, min_accuracy=0.85)
    result["tests"] = {"primary": [{**call, "difference": -0.003, "se": 0.0005, "se_seeds": 0.0005, "se_samples": 0.0,
                                    "p": 0.001}]}
    assert "**differs, below margin**" in decision_rule(result)[0]
    result["tests"]["primary"][0]["p_holm"] = unclear.p_holm
    assert "differs, below margin" not in decision_rule(result)[0]


def test_a_call_beyond_the_margin_is_marked_so_within_its_family_and_the_report_says_what_it_means():
    """A better or worse test whose minimum-effect p, Holm-adjusted within its family, is below ALPHA
    is marked "(beyond margin)"; a worse call whose mean just passes the margin keeps its plain mark,
    as does any call of another family whose own tests do not reach it; the report defines the mark
    only where a test carries it."""
    from agnostophobia.experiments.benchmark_comparisons import marks
    from agnostophobia.experiments.benchmark_summary import decision_rule

    rows = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.80, 0.81, 0.82], [0.9] * 3),
            _row("softmax", REFERENCE_DETECTOR, [0.70, 0.71, 0.72], [0.9] * 3),
            _row("background", "background", [0.7942, 0.8042, 0.8142], [0.9] * 3)]
    result = summarise(rows, min_accuracy=0.85)
    name = {r["approach"]: r["row"] for r in result["rows"]}

    def test(approach, difference, se):
        return {"decision": "worse", "row": name[approach], "against": name[REFERENCE_APPROACH], "seeds": 3,
                "difference": difference, "se": se, "se_seeds": se, "se_samples": 0.0, "p": 0.001}

    result["tests"] = {"primary": [test("softmax", -0.10, 0.002), test("background", -0.0058, 0.0002)]}
    assert marks(result)["primary"] == {name["softmax"]: "worse (beyond margin)", name["background"]: "worse"}
    assert "**(beyond margin)**" in decision_rule(result)[0]
    result["tests"] = {"primary": [test("background", -0.0058, 0.0002)]}
    assert marks(result)["primary"] == {name["background"]: "worse"}
    assert "beyond margin" not in decision_rule(result)[0]


def test_the_paragraph_says_when_the_low_fpr_end_is_at_the_ceiling_too():
    """Where the log-FPR area and CCR at the lowest resolved FPR of the approaches at the ceiling also
    lie within the margin of their accuracy, the paragraph says that the protocol's D_a sets do not
    rank them, instead of pointing to the low-FPR columns."""
    capped = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.9895, 0.9900, 0.9905], [0.99] * 3),
              _row("background", "background", [0.9895, 0.9897, 0.9899], [0.99] * 3)]
    for row in capped:  # the low-FPR metrics equal the linear area: at the ceiling too
        per_seed = row["test"]["devanagari"]["per_seed"]
        per_seed["oscr_log"] = per_seed["ccr_at_lowest_fpr"] = list(per_seed["oscr"])
    ceiling = [line for line in summarise(capped, min_accuracy=0.985)["summary"] if line.startswith("At the ceiling")]
    assert len(ceiling) == 1 and "this protocol's D_a sets do not rank them" in ceiling[0]
    assert "the log-FPR area lies within 0.0003 and CCR at the lowest FPR each set resolves within 0.0003" in ceiling[0]


def test_the_known_unknowns_are_labelled_d_b_and_the_budgets_recipe_is_given():
    """Every column and section of a set names its role (letters: D_b, the negatives' classes;
    devanagari: D_a); the report says who trained on the D_b classes, and the recipe every approach
    from scratch trained with."""
    result = summarise(rows(), min_accuracy=0.985)
    text = _report(result, trained_on_negatives=["entropic"], recipes={"softmax": {"start": None}},
                   budget_recipe={"optimizer": "adam", "lr": 0.003, "weight_decay": 0.0, "scheduler": "onecycle",
                                  "epochs": 3, "batch_size": 128})
    assert "| letters (D_b) OSCR | devanagari (D_a) OSCR |" in text
    assert "## letters (D_b, 1,000 unknowns)" in text and "## devanagari (D_a, 1,000 unknowns)" in text
    assert "D_b (letters): test images of the classes whose training images are the negatives of the approaches " \
           "trained with negatives (entropic)" in text
    assert "adam at lr 0.003, weight decay 0, onecycle schedule, 3 epoch(s), batches of 128" in text


def test_rows_not_scored_for_one_reason_are_one_line():
    """compare's notes, one per model, are grouped by their reason: the rows and seeds it covers on one
    line; a note of another form stays as it is."""
    result = summarise(rows(), min_accuracy=0.985)
    why = "not applicable: ViM needs more feature dimensions than classes"
    notes = [f"{a}/vim (seed {s}): {why}" for a in ("entropic", "softmax") for s in (0, 1, 2)]
    text = _report(result, notes=[*notes, "arpl/evm (seed 2): not evaluated: class 8 has none", "a note of its own"])
    section = text.split("Not scored:", 1)[1]
    assert f"- entropic/vim (seeds 0, 1, 2), softmax/vim (seeds 0, 1, 2): {why}" in section
    assert "- arpl/evm (seed 2): not evaluated: class 8 has none" in section and "- a note of its own" in section
    assert section.count("ViM") == 1


def test_the_papers_table_2_stands_beside_a_paper_experiments_rows_and_large_gaps_are_named():
    """A benchmark of the paper's LeNet++ protocol carries Table 2 for its D_a sets; the report puts it
    beside each paper approach's row at the FPRs both read, with both sets' sizes, and names each
    difference of at least PAPER_GAP. A user's config named lenet++ on other data gets none."""
    from agnostophobia.experiments.benchmark import papers_numbers
    from agnostophobia.experiments.benchmark_report import PAPER_GAP
    from agnostophobia.experiments.paper_numbers import TABLE2

    meta = {"experiment": "lenet++", "train_config": {"protocol": "lenet++"}}
    paper = papers_numbers(meta, ["letters", "devanagari"])
    assert set(paper["ccr"]) == {"devanagari"} and paper["sizes"] == {"devanagari": 10032}
    assert paper["ccr"]["devanagari"]["softmax"]["1e-1"] == TABLE2["lenet++"]["devanagari"]["softmax"][3]
    assert papers_numbers({"experiment": "lenet++", "train_config": {"protocol": {"type": "imagefolder"}}},
                          ["devanagari"]) == {}
    result = summarise(rows(), min_accuracy=0.985)
    text = _report(result, paper=paper)
    section = text.split("## Beside the paper", 1)[1].split("\n## ", 1)[0]
    softmax = TABLE2["lenet++"]["devanagari"]["softmax"][3]
    ours = 0.5 * np.mean([0.40, 0.45, 0.42])  # the rows' CCR@1e-1 is half their OSCR
    assert "| softmax | softmax |" in section and f"vs {softmax:.3f}" in section
    assert "devanagari 1,000 and 10,032" in section and "devanagari CCR@1e-1: here vs paper" in section
    assert abs(ours - softmax) >= PAPER_GAP
    assert f"softmax on devanagari at 1e-1: {ours:.3f} here, {softmax:.3f} in the paper" in section
    assert "## Beside the paper" not in _report(summarise(rows(), min_accuracy=0.985))  # not a paper run


def test_the_oscr_figures_start_at_the_fpr_the_tables_call_resolved(tmp_path, monkeypatch):
    """The benchmark's OSCR figure of a set starts at 10 false positives (10/#unknowns), the
    resolution its tables state, not at one unknown."""
    from types import SimpleNamespace

    import agnostophobia.plotting.curves as curves
    from agnostophobia.experiments.benchmark import oscr_figures

    seen = {}
    real = curves.plot_oscr
    monkeypatch.setattr(curves, "plot_oscr", lambda *a, **k: seen.update(xlim=k.get("xlim")) or real(*a, **k))
    fpr = np.r_[0.0, np.logspace(-3, 0, 20)]
    comparison = SimpleNamespace(curves={(seed, "softmax", "softmax", "devanagari"): (0.9 * fpr ** 0.1, fpr, 1000)
                                         for seed in (0, 1)})
    written = oscr_figures(tmp_path, {"rows": [{"approach": "softmax", "converged": True}]}, comparison)
    assert set(written) == {"devanagari"} and (tmp_path / written["devanagari"]).is_file()
    assert seen["xlim"] == (pytest.approx(0.01), 1.0)


def test_a_best_is_chosen_only_where_it_leads_by_the_margin_and_tied_rows_are_named():
    """Review of 2026-12-02: eleven detectors of one network read the same validation OSCR (their
    ceiling), and the first in the tie-break's (alphabetical) order was called best and set in bold.
    A choice on validation is made only where the first row leads every other by the margin; else
    the rows within the margin are named as tied, and none is bold."""
    from agnostophobia.experiments.benchmark_comparisons import MARGIN
    from agnostophobia.experiments.benchmark_ranking import validation_choice

    result = summarise(rows(), min_accuracy=0.985)
    best = next(line for line in result["summary"] if line.startswith("Best by"))
    assert "entropic/max-logit" in best and f"ahead of every other by the margin ({MARGIN}) or more" in best
    ceiling = [_row(REFERENCE_APPROACH, detector, [0.60, 0.62, 0.61], [0.99] * 3, val=[0.99, 0.99, 0.99])
               for detector in ("ash", "energy", "max-logit")]
    ceiling += [_row(REFERENCE_APPROACH, "softmax", [0.70, 0.72, 0.71], [0.99] * 3, val=[0.99 - MARGIN / 2] * 3)]
    tied = summarise(ceiling, min_accuracy=0.985)
    said = next(line for line in tied["summary"] if "by validation" in line)
    assert said.startswith("No best row by") and "does not beat 3 of the other 3 ranked rows" in said
    assert all(f"{REFERENCE_APPROACH}/{d}" in said for d in ("ash", "energy", "max-logit", "softmax"))
    metric = tied["ranking"]["chosen"]
    chosen, within = validation_choice([r for r in tied["rows"] if r["rank"]], metric)
    assert chosen is None and len(within) == 4
    matrix = _matrix_of(_report(tied))
    assert not any("**" in cell for cells in matrix.values() for cell in cells)
    assert f"{REFERENCE_APPROACH} (tied on validation)" in matrix
    # more than a margin ahead, the first is chosen
    ahead = summarise(ceiling[:1] + [_row("softmax", "softmax", [0.5] * 3, [0.99] * 3,
                                          val=[0.99 - 1.5 * MARGIN + e for e in (0.001, -0.001, 0.0)])],
                      min_accuracy=0.985)
    ranked = [r for r in ahead["rows"] if r["rank"]]
    assert validation_choice(ranked, "oscr")[0] is ranked[0]
    assert validation_choice(ranked, "auroc")[0] is None  # both at 1.0 there
    # a lead of 0.03 on the mean that the seeds do not bear out (paired differences +0.09, -0.09, +0.09)
    noisy = summarise([_row(REFERENCE_APPROACH, "ash", [0.6] * 3, [0.99] * 3, val=[0.99, 0.90, 0.99]),
                       _row(REFERENCE_APPROACH, "energy", [0.6] * 3, [0.99] * 3, val=[0.90, 0.99, 0.90])],
                      min_accuracy=0.985)
    chosen, within = validation_choice([r for r in noisy["rows"] if r["rank"]], "oscr")
    assert chosen is None and len(within) == 2
    # equal validation values: no row beats another, so each may rank anywhere (1-4), and '=' says the
    # tie-break ordered them
    table = _report(tied).split("\n## OSCR\n", 1)[1]
    assert "| 1–4 |" in table and "| 1–4= |" in table and "| 2" not in table


def test_a_rank_counts_the_rows_that_beat_it_on_validation_within_its_group():
    """Review of 2026-12-05 (N2): a ranked table ordered 65 rows by validation means that validation did
    not resolve, and read as a finding. A row's rank runs from one more than the rows of its group that
    beat it (the margin and a paired 95 % t interval above 0) to the group's size less the rows it
    beats; a row too noisy to be beaten or to beat may rank anywhere; the rows trained on negatives
    count among themselves; one seed resolves nothing."""
    from agnostophobia.experiments.benchmark_comparisons import MARGIN
    from agnostophobia.experiments.benchmark_ranking import rank_rows, resolved_ranks

    clear, jitter = [0.90, 0.91, 0.92], [0.001, -0.001, 0.0]  # a paired difference needs a spread to count
    source = [_row("softmax", "a", [0.6] * 3, [0.99] * 3, val=clear),
              _row("softmax", "b", [0.6] * 3, [0.99] * 3,
                   val=[v - 4 * MARGIN + e for v, e in zip(clear, jitter)]),  # beaten by a
              _row("softmax", "c", [0.6] * 3, [0.99] * 3,
                   val=[v - 8 * MARGIN - e for v, e in zip(clear, jitter)]),  # by a and b
              _row("softmax", "noisy", [0.6] * 3, [0.99] * 3, val=[0.99, 0.60, 0.80]),  # no one beats it
              _row(REFERENCE_APPROACH, "x", [0.6] * 3, [0.99] * 3, val=[0.5, 0.51, 0.52])]  # apart, alone
    ranked = rank_rows(summarise(source, min_accuracy=0.985, negatives=[REFERENCE_APPROACH])["rows"], "oscr")
    got = dict(zip((r["row"] for r in ranked), resolved_ranks(ranked, "oscr")))
    assert got == {"softmax/a": (1, 2), "softmax/b": (2, 3), "softmax/c": (3, 4), "softmax/noisy": (1, 4),
                   f"{REFERENCE_APPROACH}/x": (1, 1)}
    # a margin short, the paired difference clears nothing
    close = [_row("softmax", "a", [0.6] * 3, [0.99] * 3, val=clear),
             _row("softmax", "b", [0.6] * 3, [0.99] * 3, val=[v - MARGIN / 2 for v in clear])]
    ranked = rank_rows(summarise(close, min_accuracy=0.985)["rows"], "oscr")
    assert resolved_ranks(ranked, "oscr") == [(1, 2), (1, 2)]
    one_seed = [_row("softmax", d, [0.6], [0.99], val=[v]) for d, v in (("a", 0.9), ("b", 0.5))]
    ranked = rank_rows(summarise(one_seed, min_accuracy=0.985)["rows"], "oscr")
    assert resolved_ranks(ranked, "oscr") == [(1, 2), (1, 2)]
    unconverged = rank_rows(summarise(source[:1] + [_row("logitnorm", "y", [0.6] * 3, [0.5] * 3, val=clear)],
                                      min_accuracy=0.985)["rows"], "oscr")
    assert resolved_ranks(unconverged, "oscr") == [(1, 1), None]
    table = _report(summarise(source, min_accuracy=0.985, negatives=[REFERENCE_APPROACH])).split("\n## OSCR\n", 1)[1]
    assert "| 3–4 | softmax/c |" in table and "| 1–4 | softmax/noisy |" in table and "| N1 |" in table


def test_rows_trained_on_the_protocols_negatives_are_ranked_apart_and_the_metric_rule_skips_them():
    """On LeNet++ the validation negatives are held-out letters, which ten of its fifteen approaches train on:
    rows are scored on their own training distribution there. They are ranked apart (N1, ...) and the
    ranking metric's rule reads only the approaches trained on the known classes."""
    from agnostophobia.experiments.benchmark_ranking import candidate_numbers

    source = rows() + [_row("cac", "cac", [0.50, 0.52, 0.51], [0.99] * 3)]
    result = summarise(source, min_accuracy=0.985, negatives=[REFERENCE_APPROACH])
    ranked = [(r["row"], r["rank"]) for r in result["rows"] if r["rank"] is not None]
    assert ranked == [("cac/cac", 1), ("softmax/max-logit", 2), ("softmax/softmax", 3),
                      ("entropic/max-logit", 1), ("entropic/softmax", 2)]
    assert {c["approaches"] for c in candidate_numbers(result["rows"], "val")} == {2}  # softmax and cac
    text = _report(result)
    assert "| N1 | entropic/max-logit |" in text and "Rows ranked N1, N2" in text
    assert any(line.startswith("Best trained on negatives") and "entropic/max-logit" in line
               for line in result["summary"])


def test_the_paragraph_says_how_far_validations_order_carries_to_test():
    """A reviewer measured how little the CIFAR split's validation order predicts test's: the paragraph
    now says it, Spearman's rank correlation over the ranked rows, and where validation's first row
    stands on test. Here validation orders 4, 3, 2, 1 and test 3, 4, 1, 2: rho = 1 - 6 x 4 / (4 x 15)."""
    source = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.60, 0.62, 0.61], [0.99] * 3, val=[0.80, 0.81, 0.82]),
              _row(REFERENCE_APPROACH, "max-logit", [0.64, 0.66, 0.65], [0.99] * 3, val=[0.70, 0.71, 0.72]),
              _row("softmax", REFERENCE_DETECTOR, [0.40, 0.45, 0.42], [0.99] * 3, val=[0.55, 0.56, 0.57]),
              _row("softmax", "max-logit", [0.41, 0.44, 0.43], [0.99] * 3, val=[0.45, 0.46, 0.47])]
    said = [line for line in summarise(source, min_accuracy=0.985)["summary"] if line.startswith("Validation's order")]
    rho = stats.spearmanr([4, 3, 2, 1], [3, 4, 1, 2]).statistic
    assert f"{rho:.2f}" == "0.60" and len(said) == 1
    assert "4 rows trained on the knowns only: 0.60, their first (entropic/softmax) 2 of 4 on test" in said[0]
    two = [line for line in summarise(source[:2], min_accuracy=0.985)["summary"] if line.startswith("Validation's")]
    assert two == []  # two rows order nothing worth a correlation
    # the groups ranked apart are correlated apart: pooled, the gap between them would make the correlation
    apart = summarise(source, min_accuracy=0.985, negatives=[REFERENCE_APPROACH])["summary"]
    said = [line for line in apart if line.startswith("Validation's order")]
    assert said == []  # two rows in each group: nothing to correlate


def test_each_family_is_decided_again_at_other_margins():
    """How much of a page the margin carries: each family's verdicts at half, once, twice and four times
    the declared margin, by the same decision rule. A difference of 0.007 whose noise is 0.0005 is
    resolved at 0.0025 and 0.005 and within the margin (equivalent) at 0.01 and 0.02; one with no noise
    and an undefined p is never decided."""
    from agnostophobia.experiments.benchmark_summary import MARGINS_AGAIN, verdicts_at

    assert MARGINS_AGAIN == (0.0025, 0.005, 0.01, 0.02)
    clear = {"difference": 0.007, "se": 0.0005, "se_seeds": 0.0005, "se_samples": None, "p": 1e-6, "seeds": 5}
    undefined = {"difference": 0.007, "se": 0.0, "se_seeds": 0.0, "se_samples": 0.0, "p": None, "seeds": 5}
    counts = [verdicts_at([clear], margin) for margin in MARGINS_AGAIN]
    assert [c["resolved"] for c in counts] == [1, 1, 0, 0] and [c["equivalent"] for c in counts] == [0, 0, 1, 1]
    assert all(verdicts_at([undefined], m) == {"resolved": 0, "equivalent": 0, "not resolved": 1} for m in MARGINS_AGAIN)
    result = summarise(rows(), min_accuracy=0.985)
    said = [line for line in result["summary"] if line.startswith("The margin's weight")]
    assert len(said) == 1 and "0.005 (declared)" in said[0]
    for family, tests in result["tests"].items():  # at the declared margin: the run's own decisions
        if tests:
            declared = verdicts_at(tests, 0.005)
            assert declared["resolved"] == sum(t["decision"] in ("better", "worse") for t in tests)
            assert declared["not resolved"] == sum(t["decision"] == "not resolved" for t in tests)


def test_converged_approaches_with_single_seeds_below_the_threshold_are_counted():
    """Convergence is the mean over seeds; a reader who asks it of every seed is told which approaches
    have seeds below the threshold, how many reach it and the lowest. An unconverged one is not named here."""
    source = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.60, 0.62, 0.61], [0.99] * 3),
              _row("softmax", REFERENCE_DETECTOR, [0.40, 0.45, 0.42], [0.99] * 3, val_accuracy=[0.99, 0.982, 0.99]),
              _row("logitnorm", REFERENCE_DETECTOR, [0.90, 0.91, 0.92], [0.70, 0.72, 0.71])]
    said = [line for line in summarise(source, min_accuracy=0.985)["summary"] if line.startswith("Converged by the rule")]
    assert len(said) == 1 and said[0].endswith("seeds at or above it: softmax 2 of 3 (lowest 0.9820).")
    assert not any(line.startswith("Converged by the rule")
                   for line in summarise(source[:1], min_accuracy=0.985)["summary"])


def test_a_verdict_against_a_reference_at_chance_is_named_with_it():
    """A review found the CIFAR split's two *better* against entropic/mahalanobis (mean under half its
    accuracy, interval reaching above) printed without the caveat the wholly-below rows get."""
    from agnostophobia.experiments.benchmark_summary import _below_chance_said

    source = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.9895, 0.9900, 0.9905], [0.99] * 3),
              _row(REFERENCE_APPROACH, "max-logit", [0.10, 0.45, 0.90], [0.99] * 3),  # mean under half, interval above
              _row("softmax", "max-logit", [0.97, 0.96, 0.98], [0.99] * 3)]
    result = summarise(source, min_accuracy=0.985)
    verdicts = [t for tests in result["tests"].values() for t in tests if t["against"] == "entropic/max-logit"]
    assert verdicts, result["tests"]  # softmax/max-logit is compared with it
    for verdict in ("better", "not resolved"):
        for t in verdicts:
            t["decision"] = verdict
        said = _below_chance_said(result)[0]
        assert said.startswith("Below chance") and "1 with its mean: entropic/max-logit." in said
        assert ("reads a reference whose mean lies at or below chance: softmax/max-logit." in said) == (verdict == "better")


def test_a_score_the_paper_reports_as_its_own_row_is_in_the_primary_family():
    """A review found the paper's best CIFAR row, Scaled Objectosphere (Table 2), tested only in the
    secondary families. It is declared beside its loss (``papers_other_detectors``) and tested against
    Entropic Open-Set with its paper's detector in the primary family, where its report shows it."""
    from agnostophobia.losses import LOSSES

    assert LOSSES.get("objectosphere").papers_other_detectors == ("objectosphere-scaled",)
    source = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.60, 0.62, 0.61], [0.99] * 3),
              _row(REFERENCE_APPROACH, "objectosphere-scaled", [0.61, 0.63, 0.62], [0.99] * 3),
              _row("objectosphere", REFERENCE_DETECTOR, [0.60, 0.63, 0.61], [0.99] * 3),
              _row("objectosphere", "objectosphere-scaled", [0.70, 0.71, 0.72], [0.99] * 3),
              _row("objectosphere", "max-logit", [0.50, 0.51, 0.52], [0.99] * 3)]
    result = summarise(source, min_accuracy=0.985)
    primary = {(t["row"], t["against"]) for t in result["tests"]["primary"]}
    assert primary == {("objectosphere/softmax", "entropic/softmax"),
                       ("objectosphere/objectosphere-scaled", "entropic/softmax")}
    approaches = {(t["row"], t["against"]) for t in result["tests"]["approaches"]}
    assert ("objectosphere/objectosphere-scaled", "entropic/objectosphere-scaled") in approaches  # same detector
    assert not any(against == "entropic/softmax" for _, against in approaches)  # the primary pairs not repeated
    text = _report(result)
    assert "Scaled Objectosphere" in text


def test_the_accuracy_margin_converges_by_a_paired_interval_against_softmax():
    """--accuracy-margin (How the benchmark decides): softmax by the threshold, every other approach
    when the low end of the paired 90 % t interval of its validation accuracy minus softmax's lies
    above -margin; none where softmax misses the threshold; softmax must be in the run."""
    softmax_val = [0.990, 0.992, 0.991]
    close, far = [0.982, 0.985, 0.983], [0.960, 0.970, 0.950]
    source = [_row(REFERENCE_APPROACH, REFERENCE_DETECTOR, [0.60, 0.62, 0.61], [0.99] * 3, val_accuracy=close),
              _row("softmax", REFERENCE_DETECTOR, [0.40, 0.45, 0.42], [0.99] * 3, val_accuracy=softmax_val),
              _row("logitnorm", papers_detector("logitnorm"), [0.5, 0.5, 0.52], [0.99] * 3, val_accuracy=far)]
    by_threshold = summarise(source, min_accuracy=0.985)
    assert {r["approach"]: r["converged"] for r in by_threshold["rows"]} == {
        "entropic": False, "softmax": True, "logitnorm": False}
    result = summarise(source, min_accuracy=0.985, declared=Declared(accuracy_margin=0.01))
    low = stats.ttest_rel(close, softmax_val).confidence_interval(0.90).low
    assert -0.01 < low and stats.ttest_rel(far, softmax_val).confidence_interval(0.90).low < -0.01
    assert {r["approach"]: r["converged"] for r in result["rows"]} == {
        "entropic": True, "softmax": True, "logitnorm": False}
    assert result["accuracy_margin"] == 0.01 and result["tests"]["primary"]  # EOS is now tested
    text = _report(result)
    assert "every other approach's not worse than softmax's by 0.01 or more" in text
    assert any(line.startswith("Not converged (by the rule: softmax's") for line in result["summary"])
    missed = [dict(r, val=_val([0.5] * 3, [0.8, 0.81, 0.82])) if r["approach"] == "softmax" else r for r in source]
    missed_rows = summarise(missed, min_accuracy=0.985, declared=Declared(accuracy_margin=0.01))["rows"]
    assert not any(r["converged"] for r in missed_rows)
    with pytest.raises(ValueError, match="softmax is not among the approaches"):
        summarise([source[0], source[2]], min_accuracy=0.985, declared=Declared(accuracy_margin=0.01))
    with pytest.raises(ValueError, match="needs a threshold"):
        summarise(source, min_accuracy=None, declared=Declared(accuracy_margin=0.01))


def test_the_accuracy_rule_reads_a_difference_alike_on_every_seed():
    """Accuracies move in steps of one validation image: a difference the same on every seed has no
    spread, and the rule reads it itself (it was 'not converged' for any such difference)."""
    from agnostophobia.experiments.benchmark_rows import accuracy_not_worse, converged_by_rule

    softmax = [0.875, 0.75, 0.8125]  # binary fractions: each difference below is exact, the spread 0
    step = 2 ** -9  # about 0.002
    assert np.std(np.subtract([a - step for a in softmax], softmax)) == 0
    assert accuracy_not_worse([a - step for a in softmax], softmax, 0.01)
    assert accuracy_not_worse([a + step for a in softmax], softmax, 0.01)
    assert not accuracy_not_worse([a - 2 ** -6 for a in softmax], softmax, 0.01)  # about 0.016 worse
    with pytest.raises(ValueError, match="two seeds or more"):
        converged_by_rule({"softmax": [0.91], "cac": [0.90]}, 0.9, 0.01)


def test_the_accuracy_margin_is_two_binomial_standard_errors_at_the_threshold():
    """The rule's margin is derived from the validation set alone: twice scipy's binomial standard
    deviation of one network's count of right answers at the threshold, as a share of the knowns."""
    from scipy import stats

    from agnostophobia.experiments.benchmark_rows import accuracy_margin_for

    for threshold, knowns in ((0.90, 2000), (0.985, 12000), (0.5, 7)):
        assert accuracy_margin_for(threshold, knowns) == pytest.approx(2 * stats.binom(knowns, threshold).std() / knowns)
    for threshold, knowns in ((1.0, 100), (0.9, 0)):
        with pytest.raises(ValueError, match="threshold in"):
            accuracy_margin_for(threshold, knowns)


def test_a_refused_accuracy_margin_leaves_the_run_byte_for_byte(tiny_run, tmp_path):
    """``write_benchmark`` with the interval rule on a trained run of one seed (the rule reads a paired
    interval over seeds) is refused before it tunes or scores anything: every file of the run, a
    report written earlier included, stays byte for byte."""
    import shutil

    from agnostophobia.errors import AgnostophobiaError
    from agnostophobia.experiments import benchmark as benchmark_module

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / BENCHMARK_JSON).write_text('{"an earlier report": true}\n')
    before = {path: path.read_bytes() for path in run.rglob("*") if path.is_file()}
    with pytest.raises(AgnostophobiaError, match="two seeds or more"):
        benchmark_module.write_benchmark(run, accuracy_margin=0.01, log=lambda line: None)
    assert {path: path.read_bytes() for path in run.rglob("*") if path.is_file()} == before


def test_an_accuracy_margin_outside_zero_one_is_refused_before_training(tmp_path, capsys):
    from agnostophobia.cli import main

    code = main(["benchmark", "lenet++", "--accuracy-margin", "2", "--out", str(tmp_path / "run"), "--no-progress"])
    assert code != 0 and "--accuracy-margin 2.0: a difference of closed-set accuracy in (0, 1)" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_rank_reads_its_group_simultaneously_and_a_constant_difference_is_no_evidence():
    """Review of 2026-12-05 (M3): unadjusted seed intervals over thousands of pairs made the rank ranges
    too narrow, and a difference that does not vary over seeds (to the stored numbers' rounding) beat
    its rival as statement 7's constant difference once passed a test. The ranks read each pair's paired
    t-test Holm-adjusted over the group: a pair that clears 0.05 alone fails among many."""
    from scipy import stats

    from agnostophobia.experiments.benchmark_ranking import beaten_in_group, group_tests

    def row(name, values):
        return {"row": name, "seeds": [0, 1, 2], "val": {"per_seed": {"oscr": values}}}

    constant = [row("a", [0.8, 0.9, 0.7]), row("b", [0.8 - 0.1, 0.9 - 0.1, 0.7 - 0.1])]  # differences equal to 1e-16
    assert beaten_in_group(constant, "oscr") == set()
    a, b = [0.80, 0.81, 0.82], [0.78, 0.775, 0.80]  # alone: p about 0.04
    p_alone = stats.ttest_rel(a, b).pvalue
    assert 0.01 < p_alone < 0.05 and beaten_in_group([row("a", a), row("b", b)], "oscr") == {(0, 1)}
    far = [row(f"far{k}", [0.1 + k * 0.01, 0.12 + k * 0.01, 0.09 + k * 0.01]) for k in range(3)]
    crowd = [row("a", a), row("b", b), *far]
    tests = {(i, j): p for i, j, _, p in group_tests(crowd, "oscr")}
    assert tests[(0, 1)] > p_alone and (0, 1) not in beaten_in_group(crowd, "oscr")


# ------------------------------------------------------------------ M3: the validation samples' share of a rank's noise
def _together(se, spread=1e-4):
    """Two detectors on one network whose validation ``oscr`` moves together over 3 seeds, 0.01 apart
    with a spread of ``spread`` (alone: p about 1e-4, beaten), and replicates of their validation
    numbers on the resamples of the validation samples whose share of the pair's standard error is
    about ``se``: each row's own normal draw per resample, the same for every seed (the seeds share
    the validation samples)."""
    base = [0.800, 0.830, 0.770]
    group = [{"approach": "softmax", "detector": detector, "row": f"softmax/{detector}", "seeds": [0, 1, 2],
              "rank": rank, "val": {"per_seed": {"oscr": values}}}
             for rank, (detector, values) in enumerate((("softmax", base),
                                                        ("max-logit", [b - 0.01 + spread * k
                                                                       for k, b in enumerate(base)])), 1)]
    rng = np.random.default_rng(0)
    noise = {r["detector"]: rng.normal(0, se / np.sqrt(2), 200) for r in group}
    return group, {"oscr": {(r["approach"], r["detector"]): {s: v + noise[r["detector"]] for s, v in
                                                               zip(r["seeds"], r["val"]["per_seed"]["oscr"])}
                            for r in group}}


def test_a_pair_that_moves_together_over_seeds_is_not_beaten_once_the_validation_samples_add_their_share():
    """Review-1205e, M3 remainder: every seed scores the same validation samples, so two detectors on
    one network move together and a 0.01 difference with a seed spread of 1e-4 "beats" on the seeds
    alone. With the validation samples' share added in quadrature (the test side's statistic,
    paired_difference with resampled_se) the pair is not resolved and both rows share ranks 1-2; the
    share is stored once a pair and read back from the rows alone."""
    from agnostophobia.experiments.benchmark_ranking import (VAL_SE_SAMPLES, beaten_in_group, group_tests,
                                                             resolved_ranks, validation_se, with_validation_se)
    from agnostophobia.metrics import paired_difference, resampled_se

    group, replicates = _together(se=0.02)
    assert beaten_in_group(group, "oscr") == {(0, 1)} and resolved_ranks(group, "oscr") == [(1, 1), (2, 2)]
    floored = json.loads(json.dumps(with_validation_se(group, "oscr", replicates)))  # as benchmark.json holds it
    stacked = [np.stack([replicates["oscr"][r["approach"], r["detector"]][s] for s in r["seeds"]]) for r in group]
    assert floored[0][VAL_SE_SAMPLES] == {"oscr": {"softmax/max-logit": pytest.approx(resampled_se(*stacked))}}
    assert floored[1][VAL_SE_SAMPLES] == {"oscr": {}}  # the pair is stored once, on the row ahead
    assert validation_se(floored[1], floored[0], "oscr") == validation_se(floored[0], floored[1], "oscr") > 0.01
    assert validation_se(floored[0], floored[1], "auroc") is None  # a share of another metric is not read
    expected = paired_difference(*(r["val"]["per_seed"]["oscr"] for r in group),
                                 sample_se=resampled_se(*stacked))
    (_, _, difference, p_holm), = group_tests(floored, "oscr")
    assert difference == pytest.approx(0.01, abs=2e-4) and p_holm == pytest.approx(expected.p_value)
    assert p_holm > 0.05
    assert beaten_in_group(floored, "oscr") == set() and resolved_ranks(floored, "oscr") == [(1, 2), (1, 2)]
    # a share small beside the difference leaves it beaten: the floor adds noise, it does not forbid
    group, replicates = _together(se=1e-4)
    small = with_validation_se(group, "oscr", replicates)
    assert beaten_in_group(small, "oscr") == {(0, 1)}


def test_a_run_with_the_validation_bootstrap_stores_it_ranks_with_it_and_says_so():
    """summarise stores the validation samples' share per pair of ranked rows and ``val_bootstrap``; the
    ranks of the report read it back from the JSON alone; a run without it (every published run)
    ranks on the seeds and its report says so, computed from the JSON."""
    from agnostophobia.experiments.benchmark_ranking import VAL_SE_SAMPLES, resolved_ranks
    from agnostophobia.experiments.ranking_candidates import RANKING_CANDIDATES

    source = rows()
    rng = np.random.default_rng(1)
    noise = {(r["approach"], r["detector"]): rng.normal(0, 0.05, 200) for r in source}
    val = {metric: {key: {s: v + noise[key] for s, v in enumerate(r["val"]["per_seed"][metric])}
                    for r in source for key in [(r["approach"], r["detector"])]} for metric in RANKING_CANDIDATES}
    bare = json.loads(json.dumps(summarise(source, min_accuracy=0.985), default=float))
    floored = json.loads(json.dumps(summarise(source, min_accuracy=0.985, replicates=SampleReplicates(val=val)),
                                    default=float))
    chosen = floored["ranking"]["chosen"]
    assert floored["val_bootstrap"] == {"resamples": 200, "seed": 55, "metric": chosen}
    assert bare.get("val_bootstrap") is None and not any(VAL_SE_SAMPLES in r for r in bare["rows"])
    ranked = [r for r in floored["rows"] if r["rank"] is not None]
    assert len(ranked) == 4 and all(set(r[VAL_SE_SAMPLES]) == {chosen} for r in ranked)
    assert sum(len(r[VAL_SE_SAMPLES][chosen]) for r in ranked) == 4 * 3 // 2  # every pair of the group, once
    assert not any(VAL_SE_SAMPLES in r for r in floored["rows"] if r["rank"] is None)
    # a share of 0.05 a row leaves nothing resolved; the seeds alone resolve some pairs
    assert resolved_ranks(floored["rows"], chosen)[:4] == [(1, 4)] * 4
    assert resolved_ranks(bare["rows"], chosen)[:4] != [(1, 4)] * 4
    with_text, bare_text = _report(floored), _report(bare)
    assert "adds the validation samples' share, from a paired bootstrap over them (200 resamples" in with_text
    assert "stored no validation bootstrap" not in with_text
    assert "ranks read the seeds' spread alone: this run stored no validation bootstrap" in bare_text


def test_the_validation_resamples_are_the_rows_statistics_on_each_resample_and_paired():
    """With every weight 1 the resampled statistics are the row's own numbers (one definition,
    compare's ranking_statistic, and the test side's oscr_area_resamples); the default resamples are
    the same for every detector and seed of one split (paired); models whose validation labels
    differ are not paired, and nothing is kept."""
    from agnostophobia.deploy.compare import ranking_statistic
    from agnostophobia.experiments.benchmark_comparisons import ValidationBootstrap, validation_resamples
    from agnostophobia.experiments.ranking_candidates import RANKING_CANDIDATES
    from agnostophobia.metrics import smallest_supported_fpr

    rng = np.random.default_rng(2)
    labels = np.concatenate([rng.integers(0, 3, 60), np.full(40, -1)])
    scores = rng.random((100, 3)) + 0.5 * np.eye(3)[np.clip(labels, 0, 2)] * (labels >= 0)[:, None]
    ones = (np.ones((2, 60), np.int64), np.ones((2, 40), np.int64))
    resampled = validation_resamples(scores, labels, list(RANKING_CANDIDATES), weights=ones)
    lowest = smallest_supported_fpr(40)
    for metric in RANKING_CANDIDATES:
        assert resampled[metric] == pytest.approx([ranking_statistic(metric, scores, labels, lowest)] * 2, abs=1e-12)
    drawn = validation_resamples(scores, labels, ["oscr", "auroc"])
    assert {m: v.shape for m, v in drawn.items()} == {"oscr": (200,), "auroc": (200,)} and np.std(drawn["oscr"]) > 0
    assert np.array_equal(drawn["auroc"], validation_resamples(scores, labels, ["auroc"])["auroc"])
    few = validation_resamples(scores[:68], labels[:68], list(RANKING_CANDIDATES))  # 8 negatives: no FPR of 10/8
    assert few.keys() == {"oscr", "auroc"}
    bootstrap = ValidationBootstrap(["auroc"])
    assert bootstrap.replicates is None
    bootstrap(0, "softmax", "softmax", scores, labels)
    bootstrap(1, "softmax", "softmax", scores, labels)
    assert np.array_equal(bootstrap.replicates["auroc"]["softmax", "softmax"][1], drawn["auroc"])
    bootstrap(2, "softmax", "softmax", scores, labels[::-1])  # other samples: no pairing
    assert bootstrap.replicates is None
