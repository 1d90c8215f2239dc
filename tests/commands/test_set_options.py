"""``train`` and ``reproduce`` take ``--set KEY=VALUE`` (issue 33, item 6): one-off overrides,
read as YAML values and checked as the config file's own keys are, with the file's wording."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from runs import run_main
from agnostophobia.errors import ConfigError
from agnostophobia.training.config import load_experiment, parse_set_option
from agnostophobia.training.records.run_config import read_checkpoint_config

from tests.data.file_protocols.test_imagefolder import make_tree, mapping


@pytest.mark.parametrize("text, parsed", [
    ("epochs=5", ("epochs", 5)), ("lr=0.5", ("lr", 0.5)), ("loss.xi=20", ("loss.xi", 20)),
    ("name= my run", ("name", "my run")), ("tensorboard=false", ("tensorboard", False)),
    ("cpu_threads=", ("cpu_threads", None)), ("approaches=[softmax, entropic]", ("approaches", ["softmax", "entropic"])),
    ("name=a=b", ("name", "a=b")), ("lr=1e-3", ("lr", 1e-3)),  # as the config file reads it: a number
])
def test_values_are_read_as_yaml(text, parsed):
    assert parse_set_option(text) == parsed


@pytest.mark.parametrize("text", ["epochs", "=5", "loss..xi=1", ".xi=1"])
def test_a_malformed_option_is_refused(text):
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_set_option(text)


def experiment(tmp_path: Path, **keys):
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({"protocol": "lenet++", "approaches": ["objectosphere"],
                                      "loss": {"xi": 50, "lambda": 1.0e-4},
                                      "budgets": {"smoke": {"epochs": 1}}, **keys}))
    return config


def test_a_dotted_key_sets_one_key_of_its_mapping_after_the_budget(tmp_path):
    loaded = load_experiment(experiment(tmp_path)).for_budget("smoke")
    changed = loaded.with_set_options([parse_set_option(t) for t in ("loss.xi=20", "epochs=3", "seeds=2",
                                                                    "model_kwargs.feature_dim=3")])
    assert changed.train.loss == {"xi": 20, "lambda_": 1.0e-4}  # lambda kept
    assert changed.train.epochs == 3 and changed.seeds == 2 and changed.train.model_kwargs["feature_dim"] == 3
    assert changed.for_approach("objectosphere", 0).loss == {"xi": 20, "lambda_": 1.0e-4}


def test_a_nested_protocol_key_keeps_the_mapping_and_paths_resolve_from_here(tmp_path, monkeypatch):
    config = experiment(tmp_path, protocol=mapping(Path("photos")))
    monkeypatch.chdir(tmp_path / "..")
    changed = load_experiment(config).with_set_options([("protocol.val_fraction", 0.3), ("protocol.split", "s")])
    assert changed.train.protocol["val_fraction"] == 0.3 and changed.train.protocol["known"] == ["seven", "one", "four"]
    assert changed.train.protocol["root"] == str(tmp_path / "photos")  # the file's, relative to the file
    assert changed.train.protocol["split"] == str(tmp_path.parent / "s")  # the command line's, relative to here


@pytest.mark.parametrize("key, value", [("epochs", 0), ("loss.xi", "big"), ("lr", "fast"), ("batched_seeds", "x"),
                                        ("nope", 1), ("protocol", "nope"), ("first_seed", -1), ("first_seed", "5"), ("seeds", "x"),
                                        ("first_seed", 2**63 - 1 + 1)])
def test_a_bad_value_has_the_config_files_wording_behind_set_key(tmp_path, key, value):
    top, *inner = key.split(".")
    with pytest.raises(ConfigError) as in_file:
        load_experiment(experiment(tmp_path, **{top: {inner[0]: value} if inner else value}))
    with pytest.raises(ConfigError) as on_command_line:
        load_experiment(experiment(tmp_path / "..")).with_set_options([(key, value)])
    assert str(on_command_line.value) == f"--set {key}: {in_file.value}"


def test_a_dotted_key_into_a_value_that_is_not_a_mapping_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"^--set epochs.x: config key 'epochs' holds 70, not a mapping"):
        load_experiment(experiment(tmp_path)).with_set_options([("epochs.x", 1)])


def test_train_records_the_overrides_and_refuses_a_bad_one_before_writing(tmp_path, capsys):
    make_tree(tmp_path / "photos")
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({"protocol": mapping(Path("photos")), "approaches": ["softmax"], "epochs": 5,
                                      "batch_size": 16, "tensorboard": False}))
    code, _, err = run_main(["train", config, "--out", tmp_path / "bad", "--set", "epochs=-1"], capsys)
    assert code == 1 and err == ["agnostophobia: error: --set epochs: config key 'epochs': must be an integer in [1, 100000], "
                                 "got -1"]
    assert not (tmp_path / "bad").exists()
    code, _, err = run_main(["train", config, "--out", tmp_path / "bad", "--set", "epochs"], capsys)
    assert code == 2 and len(err) == 1 and "argument --set: --set 'epochs': expected KEY=VALUE" in err[0]
    run = tmp_path / "run"
    assert run_main(["train", config, "--out", run, "--no-progress", "--set", "epochs=1",
                     "--set", "protocol.test_fraction=0.25"], capsys)[0] == 0
    written = yaml.safe_load((run / "config.yaml").read_text())
    assert written["epochs"] == 1 and written["protocol"]["test_fraction"] == 0.25
    assert json.loads((run / "run_meta.json").read_text())["command"].endswith(
        "--set epochs=1 --set protocol.test_fraction=0.25")


def test_first_seed_trains_fresh_seeds_under_their_own_numbers(tmp_path, capsys):
    """A confirmatory run on fresh seeds: ``first_seed=5`` with 2 seeds trains seeds 5 and 6, each
    in its own folder, with that training seed, and the records say which."""
    make_tree(tmp_path / "photos")
    config = tmp_path / "experiment.yaml"
    config.write_text(yaml.safe_dump({"protocol": mapping(Path("photos")), "approaches": ["softmax"], "epochs": 1,
                                      "batch_size": 16, "tensorboard": False}))
    run = tmp_path / "run"
    assert run_main(["train", config, "--out", run, "--no-progress", "--seeds", "2", "--set", "first_seed=5"],
                    capsys)[0] == 0
    assert sorted(p.name for p in run.glob("seed*")) == ["seed5", "seed6"]
    for seed in (5, 6):
        assert read_checkpoint_config(run / f"seed{seed}" / "softmax" / "best.pt")["seed"] == seed
    assert yaml.safe_load((run / "config.yaml").read_text())["first_seed"] == 5
    assert json.loads((run / "run_meta.json").read_text())["seeds_varied"].startswith("training seeds 5-6 ")
    code, _, err = run_main(["train", config, "--out", tmp_path / "big", "--seeds", "2", "--set",
                             f"first_seed={2**63 - 1}"], capsys)
    assert code == 1 and "pass the largest seed" in err[0]


def test_reproduce_takes_set_too(tmp_path, capsys):
    code, _, err = run_main(["reproduce", "lenet++", "--budget", "smoke", "--out", tmp_path / "r", "--set",
                          "loss.xi=-1"], capsys)
    assert code == 1 and len(err) == 1 and err[0].startswith("agnostophobia: error: --set loss.xi: config key "
                                                             "'loss.xi': ")
    assert not (tmp_path / "r").exists()
    code, _, err = run_main(["reproduce", "ensemble", "--set", "epochs=1"], capsys)
    assert code == 1 and err == ["agnostophobia: error: --set applies to a config's experiment, not to "
                                 "'reproduce ensemble'"]


@pytest.mark.parametrize("program, typed", [("/opt/u/agnostophobia/.venv/bin/pytest", False),
                                            ("/src/agnostophobia/.venv/lib/python3.11/site-packages/pytest/__main__.py",
                                             False),
                                            ("/opt/u/agnostophobia/run_my_sweep.py", False),
                                            ("/usr/local/bin/agnostophobia", True),
                                            ("/site-packages/agnostophobia/__main__.py", True)])
def test_a_run_records_the_typed_command_only_from_the_command_line(monkeypatch, program, typed):
    """A program whose path merely holds the name (a checkout called agnostophobia) is a library
    caller: the run records the command its call stands for, not that program's arguments."""
    from agnostophobia.experiments.run_record import is_the_command_line

    monkeypatch.setattr(sys, "argv", [program, "-q"])
    assert is_the_command_line() is typed
