"""``agnostophobia data check|list`` through ``agnostophobia.cli.main``: exit codes and one-line errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from agnostophobia.cli import main
from agnostophobia.data import DATASETS


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err.strip().splitlines()


def test_check_all_with_missing_optional_sets_exits_0(synth, capsys):
    synth.mnist_npz()
    rc, out, err = run(capsys, "data", "check", "--data-dir", str(synth.root))
    assert rc == 0 and err == []
    assert "mnist" in out and "histogram: 30 30 30" in out
    assert "cifar100 not found in" in out and "agnostophobia data fetch cifar100" in out


def test_check_explicit_missing_exits_1_with_one_line(synth, capsys):
    rc, out, err = run(capsys, "data", "check", "cifar100", "--data-dir", str(synth.root))
    assert rc == 1 and len(err) == 1
    assert err[0] == (f"agnostophobia: error: cifar100 not found in {synth.root}; "
                      f"get it with `agnostophobia data fetch cifar100`")


def test_check_truncated_file_exits_1_even_without_names(synth, capsys):
    synth.mnist_npz()
    path = synth.root / "mnist" / "mnist.npz"
    path.write_bytes(path.read_bytes()[:1000])
    for argv in (["data", "check", "mnist"], ["data", "check"]):
        rc, out, err = run(capsys, *argv, "--data-dir", str(synth.root))
        assert rc == 1 and len(err) == 1
        assert str(path) in err[0] and "truncated" in err[0] and "agnostophobia data fetch mnist" in err[0]


@pytest.mark.parametrize("x, y, problem", [
    (np.zeros((4, 28, 28, 3), np.uint8), np.zeros(4, np.uint8), "shape"),
    (np.zeros((4, 28, 28), np.int16), np.zeros(4, np.uint8), "uint8"),
    (np.zeros((4, 28, 28), np.uint8), np.array([0, 1, 2, 27]), "label 27 out of range"),
])
def test_check_malformed_file(synth, capsys, x, y, problem):
    np.savez(synth.dir("notmnist") / "notmnist.npz", x_test=x, y_test=y)
    rc, out, err = run(capsys, "data", "check", "notmnist", "--data-dir", str(synth.root))
    assert rc == 1 and len(err) == 1 and problem in err[0] and "notmnist.npz" in err[0]


def test_check_json(synth, capsys):
    synth.lenet_set()
    rc, out, err = run(capsys, "data", "check", "--json", "--data-dir", str(synth.root))
    report = json.loads(out)
    assert rc == 0 and report["ok"] and report["failures"] == []
    ds = report["datasets"]
    assert set(ds) == set(DATASETS.names())
    assert ds["mnist"]["status"] == "ok" and ds["mnist"]["splits"]["train"]["count"] == 300
    assert ds["mnist"]["splits"]["test"]["histogram"] == [10] * 10
    assert ds["devanagari"]["splits"]["test"]["count"] == 144
    assert ds["cifar10"]["splits"]["train"]["format"] == "jpeg-npz"
    assert ds["svhn"]["status"] == "missing" and "fetch svhn" in ds["svhn"]["message"]
    assert ds["mnist"]["splits"]["train"]["median_border_pixel"] == 0


def test_check_json_failure(synth, capsys):
    (synth.dir("letters") / "letters.npz").write_bytes(b"garbage")
    rc, out, err = run(capsys, "data", "check", "letters", "--json", "--data-dir", str(synth.root))
    report = json.loads(out)
    assert rc == 1 and not report["ok"] and report["datasets"]["letters"]["status"] == "error"
    assert len(err) == 1 and "letters.npz" in err[0]


def test_check_unknown_name(capsys, tmp_path):
    rc, out, err = run(capsys, "data", "check", "emnist", "--data-dir", str(tmp_path))
    assert rc == 1 and len(err) == 1 and "unknown dataset 'emnist'" in err[0]


def test_check_uses_environment_variable(synth, capsys, monkeypatch):
    synth.notmnist_npz()
    monkeypatch.setenv("AGNOSTOPHOBIA_DATA", str(synth.root))
    rc, out, err = run(capsys, "data", "check", "notmnist")
    assert rc == 0 and str(synth.root) in out


def test_default_data_dir_honours_xdg(monkeypatch, tmp_path):
    from agnostophobia.data import data_dir

    monkeypatch.delenv("AGNOSTOPHOBIA_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert data_dir() == tmp_path / "agnostophobia" / "data"
    assert data_dir("/x") == type(tmp_path)("/x")


def test_list(capsys):
    rc, out, err = run(capsys, "data", "list")
    assert rc == 0 and "c58f30108f718f92721af3b95e74349a" in out and "NO CHECKSUM" in out
    rc, out, err = run(capsys, "data", "list", "--json")
    rows = json.loads(out)
    assert rows["cifar100"]["resources"][0]["md5"] == "eb9058c3a382ffc7106e4002c42a8d85"
    assert rows["devanagari"]["fetch_as"] == "nhcd"


def test_data_without_action_prints_help(capsys):
    rc, out, err = run(capsys, "data")
    assert rc == 2 and "fetch" in out
