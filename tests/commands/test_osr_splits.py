"""The literature's splits end to end: ``reproduce osr-mnist --budget smoke --split 0`` on the real
staged data, ``train osr-cifar10 --budget smoke`` over every split on small synthetic files (one run
folder per split), and the one-line refusals of a split that does not exist."""
from __future__ import annotations

import json

import pytest
import yaml

from agnostophobia.cli import main
from agnostophobia.data.datasets import CIFAR10_CLASSES
from agnostophobia.data.osr_protocols import OSR_CIFAR10_SPLITS, OSR_MNIST_SPLITS


@pytest.fixture(scope="module")
def mnist_split_run(real_data_dir, tmp_path_factory):
    """Split 3 of osr-mnist at the smoke budget, two approaches: one on the knowns only, one on letters."""
    out = tmp_path_factory.mktemp("osr-mnist") / "run"
    code = main(["reproduce", "osr-mnist", "--budget", "smoke", "--split", "3", "--out", str(out), "--no-progress",
                 "--no-plots", "--data-dir", str(real_data_dir), "--set", "approaches=[softmax, entropic]"])
    assert code == 0
    return out


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_reproduce_one_split_writes_one_run_folder(mnist_split_run):
    assert sorted(p.name for p in mnist_split_run.iterdir()) == ["split-3"]
    run = mnist_split_run / "split-3"
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["protocol"] == "osr-mnist" and config["protocol_split"] == 3
    classes = json.loads((run / "classes.json").read_text())
    assert classes["class_names"] == [str(d) for d in OSR_MNIST_SPLITS[3]] == ["3", "7", "8", "4", "0", "5"]
    metrics = json.loads((run / "metrics.json").read_text())
    assert {r["unknowns"] for r in metrics["results"]} == {"osr-mnist-unknown"}
    assert {r["approach"] for r in metrics["results"]} >= {"softmax", "entropic"}
    notes = json.loads((run / "data_notes.json").read_text())
    assert any(n.startswith("split 3 (Neal et al.") and "unknown (test images only) 1, 2, 6, 9" in n for n in notes)
    assert "--split 3" in (run / "run_meta.json").read_text()


@pytest.mark.slow  # a real-data smoke reproduction (module fixture): make test stays within 10 minutes; CI runs it with the slow tests
def test_reproduce_again_with_the_split_resumes_it(mnist_split_run, real_data_dir):
    before = {p: p.stat().st_mtime_ns for p in mnist_split_run.glob("split-3/seed0/*/best.pt")}
    assert before and main(["reproduce", "osr-mnist", "--budget", "smoke", "--split", "3", "--out", str(mnist_split_run),
                            "--no-progress", "--no-plots", "--data-dir", str(real_data_dir),
                            "--set", "approaches=[softmax, entropic]"]) == 0
    assert before == {p: p.stat().st_mtime_ns for p in mnist_split_run.glob("split-3/seed0/*/best.pt")}


@pytest.fixture(scope="module")
def cifar_all_splits(tmp_path_factory):
    """osr-cifar10 at the smoke budget without --split, on small synthetic files: all five splits."""
    from tests.conftest import Synth

    root = tmp_path_factory.mktemp("osr-cifar10")
    synth = Synth(root / "data")
    synth.cifar10_npz(per_class=(10, 4))
    synth.letters_npz(per_class=(2, 1))
    out = root / "run"
    code = main(["train", "osr-cifar10", "--budget", "smoke", "--approach", "softmax", "--out", str(out),
                 "--no-progress", "--data-dir", str(synth.root), "--set", "batch_size=32"])
    assert code == 0
    return out


def test_train_without_split_trains_every_split_in_its_own_folder(cifar_all_splits):
    assert sorted(p.name for p in cifar_all_splits.iterdir()) == [f"split-{k}" for k in range(5)]
    for k, known in enumerate(OSR_CIFAR10_SPLITS):
        run = cifar_all_splits / f"split-{k}"
        assert yaml.safe_load((run / "config.yaml").read_text())["protocol_split"] == k
        names = json.loads((run / "classes.json").read_text())["class_names"]
        assert names == [CIFAR10_CLASSES[c] for c in known]  # label i is the list's i-th class
        assert (run / "seed0" / "softmax" / "outputs.npz").is_file()


def test_train_again_without_resume_is_refused_before_training(cifar_all_splits, capsys):
    before = {p: p.stat().st_mtime_ns for p in cifar_all_splits.glob("split-*/seed0/softmax/best.pt")}
    assert main(["train", "osr-cifar10", "--budget", "smoke", "--approach", "softmax",
                 "--out", str(cifar_all_splits)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"agnostophobia: error: --out {cifar_all_splits}: split-0 already holds a run; add --resume to "
                   f"continue it, or choose another --out")
    assert before == {p: p.stat().st_mtime_ns for p in cifar_all_splits.glob("split-*/seed0/softmax/best.pt")}


@pytest.mark.parametrize("argv, message", [
    (["train", "osr-mnist", "--split", "7"], "--split 7: protocol 'osr-mnist' has splits 0-4"),
    (["reproduce", "osr-cifar10", "--split", "5"], "--split 5: protocol 'osr-cifar10' has splits 0-4"),
    (["benchmark", "osr-mnist", "--split", "9"], "--split 9: protocol 'osr-mnist' has splits 0-4"),
    (["train", "lenet++", "--split", "0"],
     "--split 0: protocol 'lenet++' has no splits (the protocols with splits: osr-mnist, osr-cifar10)"),
    (["reproduce", "cifar", "--split", "1"],
     "--split 1: protocol 'cifar' has no splits (the protocols with splits: osr-mnist, osr-cifar10)"),
    (["benchmark", "cifar10-split", "--split", "0"],
     "--split 0: protocol 'cifar10-split' has no splits (the protocols with splits: osr-mnist, osr-cifar10)"),
    (["train", "osr-mnist", "--set", "protocol_split=5"],
     "--set protocol_split: config key 'protocol_split' 5: protocol 'osr-mnist' has splits 0-4"),
])
def test_a_split_that_does_not_exist_is_one_line_and_writes_nothing(argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*argv, "--budget", "smoke", "--out", str(out)]) == 1
    assert capsys.readouterr().err.strip() == f"agnostophobia: error: {message}"
    assert not out.exists()
