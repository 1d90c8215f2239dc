"""What ``train`` and ``evaluate`` print, and how a report is titled (issue 33, item 3): a
headline table of each approach with its default detector; a report on a protocol that is not
the paper's is an evaluation, without the paper's numbers."""
from __future__ import annotations

from pathlib import Path

import yaml

from agnostophobia.cli import main
from agnostophobia.experiments.headline import headline_rows, headline_table
from agnostophobia.experiments.report import has_paper_numbers, reproduces_the_paper, table2_markdown

from tests.data.file_protocols.test_imagefolder import make_tree, mapping


def result(approach, detector, unknowns, ccr=(None, 0.25, 0.5, 0.75), auroc=0.9, **more):
    keys = ("1e-4", "1e-3", "1e-2", "1e-1")
    return {"approach": approach, "detector": detector, "unknowns": unknowns, "row": f"{approach}/{detector}",
            "ccr_at_fpr": dict(zip(keys, ccr)), "auroc": auroc, "num_unknown": 10, "num_known": 20,
            "closed_set_accuracy": 0.9, **more}


def test_the_headline_is_each_approach_with_its_default_detector():
    results = [result("entropic", "max-logit", "a"), result("entropic", "softmax", "b"),
               result("entropic", "softmax", "a", ccr=(None, None, 0.5, 0.75)), result("background", "softmax", "a"),
               result("background", "background", "a"), result("softmax", "softmax", "a")]
    rows = headline_rows(results)
    assert [(r["approach"], r["detector"], r["unknowns"]) for r in rows] == [
        ("softmax", "softmax", "a"), ("background", "background", "a"), ("entropic", "softmax", "a"),
        ("entropic", "softmax", "b")]
    table = headline_table(rows, "RUN/report.md").splitlines()
    assert table[0].startswith("headline: each approach with its default detector") and "RUN/report.md" in table[0]
    assert table[1].split() == ["approach", "detector", "unknowns", "CCR@1e-3", "CCR@1e-2", "CCR@1e-1", "AUROC"]
    assert table[4].split() == ["entropic", "softmax", "a", "N/A", "0.5000", "0.7500", "0.9000"]
    assert len({len(line) for line in table[1:]}) == 1  # aligned


def test_only_a_paper_experiment_on_its_own_protocol_gets_the_papers_numbers():
    paper = {"experiment": "lenet++", "train_config": {"protocol": "lenet++"}}
    assert reproduces_the_paper(paper) and has_paper_numbers(paper)
    assert reproduces_the_paper({"experiment": "lenet++"})  # a run recorded before train_config
    ensemble = {"experiment": "ensemble", "train_config": {"protocol": "mnist-notmnist"}}
    assert reproduces_the_paper(ensemble) and not has_paper_numbers(ensemble)
    own = {"experiment": "lenet++", "train_config": {"protocol": {"type": "imagefolder"}}}
    variant = {"experiment": "cifar-cifar10-split", "config_protocol": "cifar",
               "train_config": {"protocol": "cifar10-split"}}
    renamed = {"experiment": "lenet++", "train_config": {"protocol": "cifar10-split"}}
    for metrics in (own, variant, renamed):
        assert not reproduces_the_paper(metrics) and not has_paper_numbers(metrics)
    rows = [result("softmax", "softmax", "notmnist", row="softmax")]
    assert "(paper: 18,724)" in table2_markdown({**paper, "results": rows}, "lenet++")
    assert "paper" not in table2_markdown({**own, "results": rows}, "")


def test_train_and_evaluate_print_the_headline_and_an_own_protocol_is_an_evaluation(tmp_path, capsys):
    make_tree(tmp_path / "photos")
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({"name": "lenet++", "protocol": mapping(Path("photos")),
                                      "approaches": ["softmax", "entropic"], "epochs": 1, "batch_size": 16,
                                      "tensorboard": False}))
    run = tmp_path / "run"
    assert main(["train", str(config), "--out", str(run), "--no-progress"]) == 0
    trained = capsys.readouterr().out
    assert f"every detector: agnostophobia evaluate {run})" in trained
    assert main(["evaluate", str(run)]) == 0
    evaluated = capsys.readouterr().out
    for out in (trained, evaluated):
        lines = out.splitlines()
        head = next(i for i, line in enumerate(lines) if line.startswith("approach  detector"))
        assert [line.split()[:3] for line in lines[head + 1:head + 5]] == [
            ["softmax", "softmax", "negatives"], ["softmax", "softmax", "unknowns"],
            ["entropic", "softmax", "negatives"], ["entropic", "softmax", "unknowns"]]
    # the same numbers, whether train scored the default detectors alone or evaluate scored them all
    assert trained[trained.index("approach  detector"):].split("\ntrained")[0] in evaluated
    report = (run / "report.md").read_text()
    assert report.startswith("# Evaluation: lenet++ (the config as written")  # named lenet++, not its protocol
    assert "*paper:" not in report and "(paper:" not in report and "paper entropy" not in report
