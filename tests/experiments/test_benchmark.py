"""``agnostophobia benchmark``: every approach x detector, intervals over seeds, convergence marks,
paired tests with Holm's correction, tie flags, and a report that resumes.

The statistics are checked on rows built here (fast); the whole command runs at the smoke budget on
the real LeNet++ protocol under the ``slow`` marker (CI runs it)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from agnostophobia.experiments.benchmark import (REFERENCE_APPROACH, REFERENCE_DETECTOR, benchmarked_approaches,
                                                 experiment_for, markdown, summarise, tune_fpr)
from agnostophobia.rundir import BENCHMARK as BENCHMARK_JSON, BENCHMARK_TABLE as BENCHMARK_MD
from agnostophobia.errors import AgnostophobiaError


def _numbers(oscr, accuracy, tied=0.0):
    return {"per_seed": {"oscr": list(oscr), "oscr_log": [o * o for o in oscr], "auroc": [min(1.0, o + 0.1) for o in oscr],
                         "closed_set_accuracy": list(accuracy), "tied_share": [tied] * len(oscr),
                         "ccr_at_fpr": {"1e-1": [o / 2 for o in oscr]}},
            "num_negative": 1000}


def _row(approach, detector, oscr, accuracy, tied=0.0):
    """A row as compare_models gives it: one D_a set (devanagari) and one D_b set (letters)."""
    return {"approach": approach, "detector": detector, "row": f"{approach}/{detector}", "settings": "",
            "settings_from": "no settings", "seed_ids": list(range(len(oscr))),
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
    result.update({"meta": {}, "tuning": "config", "notes": [], "test_sets": {"letters": 1000, "devanagari": 1000},
                   "fprs": [0.1]})
    assert "objectosphere/softmax (incomplete: 1 seed(s))" in markdown(result, "run")
    assert not any("fewer seeds" in line for line in summarise(rows(), 0.985)["summary"])


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
    result = summarise(rows(), min_accuracy=0.985)
    approaches = {t["row"]: t for t in result["tests"]["approaches"]}
    detectors = {t["row"]: t for t in result["tests"]["detectors"]}
    # softmax vs EOS, each with its detector: two tests in the approach family
    assert set(approaches) == {"softmax/softmax", "softmax/max-logit"}
    assert approaches["softmax/softmax"]["against"] == "entropic/softmax"
    p = stats.ttest_rel([0.40, 0.45, 0.42], [0.60, 0.62, 0.61]).pvalue
    assert approaches["softmax/softmax"]["p"] == pytest.approx(p)
    ps = [approaches[r]["p"] for r in ("softmax/softmax", "softmax/max-logit")]
    order = np.argsort(ps)
    holm = np.minimum(1, np.maximum.accumulate([(2 - i) * ps[j] for i, j in enumerate(order)]))
    assert sorted(approaches[r]["p_holm"] for r in approaches) == pytest.approx(sorted(holm))
    assert approaches["softmax/softmax"]["difference"] < 0
    # detectors against max-softmax on the same network
    assert set(detectors) == {"entropic/max-logit", "softmax/max-logit"}
    assert detectors["entropic/max-logit"]["against"] == "entropic/softmax"


def test_ties_are_flagged_in_the_table_and_the_paragraph():
    result = summarise(rows(), min_accuracy=0.985)
    result.update({"meta": {"experiment": "lenet++", "budget": "smoke", "seeds": 3}, "tuning": "config",
                   "notes": [], "test_sets": {"letters": 1000, "devanagari": 1000}, "fprs": [0.1]})
    text = markdown(result, "run")
    line = next(row for row in text.splitlines() if row.startswith("| ") and "softmax/max-logit |" in row)
    assert "†" in line and "(not converged)" not in line
    assert "logitnorm/softmax (not converged)" in text
    assert any("softmax/max-logit" in line and "Ties decide" in line for line in result["summary"])


def test_the_report_opens_with_each_approach_and_its_papers_detector():
    """The short table: exactly the rows whose detector is the approach's paper score, ranked first,
    the unconverged one marked, each with its mean OSCR over the D_a sets and its interval."""
    from agnostophobia.losses import LOSSES

    result = summarise(rows(), min_accuracy=0.985)
    result.update({"meta": {}, "tuning": "config", "notes": [], "test_sets": {"letters": 1000, "devanagari": 1000},
                   "fprs": [0.1]})
    text = markdown(result, "run")
    section = text.split("## Each approach with its paper's detector", 1)[1].split("\n## ", 1)[0]
    oscr, ccr = section.split("CCR at the smallest FPR the test sets resolve (1e-1)", 1)
    table = [line for line in oscr.splitlines() if line.startswith("| ")][1:]
    expected = [r for r in result["rows"] if r["detector"] == LOSSES.get(r["approach"]).default_detector]
    assert [line.split(" | ")[1] for line in table] == [r["detector"] for r in expected]
    assert len(table) == len(expected) >= 2
    softmax = next(line for line in table if line.startswith("| softmax |"))
    mean = np.mean([0.40, 0.45, 0.42])
    assert f"{mean:.3f} [" in softmax.split(" | ")[3]
    mean_log = np.mean([0.40 ** 2, 0.45 ** 2, 0.42 ** 2])  # the D_a set's log-axis area (the D_b set's is left out)
    assert softmax.split(" | ")[4].startswith(f"{mean_log:.3f} [")
    assert any("(not converged)" in line for line in table if line.startswith("| logitnorm"))
    softmax_ccr = next(line for line in ccr.splitlines() if line.startswith("| softmax |"))
    assert "log FPR axis from the smallest FPR each set resolves" in oscr
    assert softmax_ccr.split(" | ")[3].startswith(f"{np.mean([0.20, 0.225, 0.21]):.3f} [")  # devanagari: oscr / 2


def test_the_matrix_holds_every_approach_and_detector_with_the_best_of_each_approach_in_bold():
    result = summarise(rows(), min_accuracy=0.985)
    result.update({"meta": {}, "tuning": "config", "notes": [], "test_sets": {"letters": 1000, "devanagari": 1000},
                   "fprs": [0.1]})
    text = markdown(result, "run")
    section = text.split("## Every approach with every detector (mean D_a OSCR)", 1)[1].split("\n## ", 1)[0]
    header, _, *lines = [line for line in section.splitlines() if line.startswith("|")]
    assert header == "| approach | max-logit | softmax |"
    by_approach = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in lines}
    assert set(by_approach) == {"entropic", "softmax", "logitnorm"}
    assert by_approach["entropic"] == ["**0.650**", "0.610 |"]  # the mean of 0.64, 0.66, 0.65 and its best
    assert by_approach["logitnorm"][0] == "—"  # no logitnorm/max-logit row


def test_targets_and_the_tuning_fpr():
    assert experiment_for("lenet++") == ("lenet++", ())
    assert experiment_for("cifar10-split") == ("cifar", (("protocol", "cifar10-split"),))
    with pytest.raises(AgnostophobiaError, match="not a shipped protocol"):
        experiment_for("no-such-protocol")
    assert tune_fpr(1000) == 0.01 and tune_fpr(200) == 0.05 and tune_fpr(9) is None


def test_a_diverged_approach_stops_the_benchmark_with_how_to_continue_without_it(tmp_path, monkeypatch):
    """A run that diverges stops the benchmark in one line that names it, keeps what finished, and
    gives the same command's --set that leaves that approach out (the others as they were)."""
    import pickle

    from agnostophobia.errors import TrainingDiverged
    from agnostophobia.experiments import benchmark as benchmark_module
    from agnostophobia.experiments import reproduce as reproduce_module
    from agnostophobia.experiments.request import RunRequest

    seen = {}

    def diverges(request, log=None):
        seen["approaches"] = dict(request.set_options)["approaches"]
        raise TrainingDiverged("energy-regularized (seed 0) diverged in epoch 1: the training loss became "
                               "non-finite; try a lower lr", approach="energy-regularized")

    monkeypatch.setattr(reproduce_module, "reproduce", diverges)
    request = RunRequest("lenet++", set_options=(("approaches", ["softmax", "energy-regularized", "entropic"]),),
                         out=tmp_path / "bench")
    (tmp_path / "bench").mkdir()
    earlier = {name: f"an earlier benchmark's {name}\n".encode() for name in (BENCHMARK_MD, BENCHMARK_JSON)}
    for name, content in earlier.items():  # the last good report of this folder
        (tmp_path / "bench" / name).write_bytes(content)
    with pytest.raises(TrainingDiverged) as caught:
        benchmark_module.benchmark("lenet++", request)
    for name, content in earlier.items():  # the refused run leaves it byte for byte
        assert (tmp_path / "bench" / name).read_bytes() == content
    message = str(caught.value)
    assert seen["approaches"] == ["softmax", "energy-regularized", "entropic"]  # the user's --set wins
    assert message.startswith("energy-regularized (seed 0) diverged in epoch 1") and "\n" not in message
    assert f"kept in {tmp_path / 'bench'}" in message
    assert message.endswith('--set "approaches=[softmax, entropic]"')
    assert caught.value.approach == "energy-regularized"
    copy = pickle.loads(pickle.dumps(caught.value))  # as a run trained in a child process reports it
    assert str(copy) == message and copy.approach == "energy-regularized"


@pytest.mark.slow
def test_benchmark_smoke_runs_every_approach_and_resumes(real_data_dir, tmp_path, capsys):
    """The command as CI runs it: every registered approach, 2 seeds, the report with intervals,
    accuracy, tie columns and tests; a second call keeps every model and rewrites the same tables."""
    from agnostophobia.cli import main
    from agnostophobia.experiments.benchmark import write_benchmark
    from agnostophobia.losses import LOSSES

    out = tmp_path / "bench"
    args = ["benchmark", "lenet++", "--budget", "smoke", "--seeds", "2", "--out", str(out), "--no-progress",
            "--data-dir", str(real_data_dir)]
    assert main(args) == 0
    result = json.loads((out / BENCHMARK_JSON).read_text())
    assert {r["approach"] for r in result["rows"]} == set(LOSSES.names())
    assert result["min_accuracy"] == 0.985 and all(r["converged"] is False for r in result["rows"])
    assert all(r["closed_set_accuracy"]["seeds"] == 2 for r in result["rows"])
    text = (out / BENCHMARK_MD).read_text()
    assert "## What the data says" in text and "tied share" in text and "(not converged)" in text
    figures = result["oscr_figures"]  # one per unknown-unknown set, drawn from the curves scored once
    assert figures and all((out / path).stat().st_size > 10_000 and path in text for path in figures.values())
    first = (out / BENCHMARK_JSON).read_bytes()
    capsys.readouterr()
    assert main(args) == 0  # resumed: nothing trained again, the same numbers
    assert "finished earlier, kept" in capsys.readouterr().out
    assert json.loads((out / BENCHMARK_JSON).read_bytes())["rows"] == json.loads(first)["rows"]
    # with a threshold every smoke network passes, rows are ranked and tested
    write_benchmark(out, min_accuracy=0.01)
    ranked = json.loads((out / BENCHMARK_JSON).read_text())
    assert all(r["rank"] is not None for r in ranked["rows"] if r["mean_oscr_per_seed"] is not None)
    assert ranked["tests"]["approaches"] and ranked["tests"]["detectors"]
    assert all(0 <= t["p_holm"] <= 1 and t["p_holm"] >= t["p"] for f in ranked["tests"].values() for t in f)
