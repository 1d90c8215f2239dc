"""The command line: entry points and one-line errors."""
import subprocess
import sys

import pytest

from imports import modules_imported

from agnostophobia import __version__
from agnostophobia.cli import main


def test_python_dash_m_entry_point():
    result = subprocess.run([sys.executable, "-m", "agnostophobia", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"agnostophobia {__version__}"


def test_every_command_is_wired(capsys):
    assert main([]) == 2
    help_text = capsys.readouterr().out
    for command in ("reproduce", "train", "evaluate", "tune", "plot", "data"):
        assert command in help_text


def test_bad_experiment_name_is_one_line(capsys):
    assert main(["reproduce", "no-such-experiment", "--budget", "smoke"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-experiment" in err[0] and "lenet++" in err[0]


def test_budgets_are_the_ones_the_experiment_config_defines(tmp_path, capsys):
    from agnostophobia.cli import build_parser

    assert main(["reproduce", "lenet++", "--budget", "huge"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["agnostophobia: error: --budget 'huge' is not defined in the config lenet++; "
                   "defined budgets: ablation-0, ablation-1, ablation-2, ablation-3, ablation-4, ablation-5, "
                   "converged, cpu, paper, peers, smoke, tune"]
    # a budget a user's config defines is a valid --budget: the CLI holds no list of its own
    config = tmp_path / "mine.yaml"
    config.write_text("name: mine\nbudgets: {tiny: {epochs: 1}}\n")
    args = build_parser().parse_args(["train", str(config), "--budget", "tiny", "--out", str(tmp_path / "o")])
    assert args.budget == "tiny"
    assert main(["train", str(config), "--budget", "smoke", "--out", str(tmp_path / "o")]) == 1
    assert "--budget 'smoke'" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_every_sub_command_has_its_help(capsys):
    """Each command a layer's add_commands wires answers --help with its own usage (exit 0)."""
    import argparse

    import pytest

    from agnostophobia.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert {"reproduce", "train", "evaluate", "calibrate", "predict", "export", "tune"} <= set(commands)
    for command in commands:
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([command, "--help"])
        assert exited.value.code == 0
        assert f"agnostophobia {command}" in capsys.readouterr().out


# What the command line answers before any command runs: help, the version, argument errors.
def every_command():
    """Every sub-command, a group's own (``data fetch``) included, as the argument lists that name it."""
    import argparse

    from agnostophobia.cli import build_parser

    def below(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield path + [name]
                    yield from below(sub, path + [name])

    return list(below(build_parser(), []))


ANSWERED_AT_ONCE = [
    (["--help"], 0), (["--version"], 0), ([], 2), (["data"], 2),
    *[(command + ["--help"], 0) for command in every_command()],
    (["train"], 2), (["data", "fetch"], 2),  # missing arguments
    (["--no-such-flag"], 2), (["evaluate", "run", "--no-such-flag"], 2),  # unknown flags
    (["export", "run", "--out", "m", "--format", "bogus"], 2),  # malformed arguments
    (["train", "c.yaml", "--out", "o", "--concurrent-runs", "0"], 2),
    (["train", "c.yaml", "--out", "o", "--batched-seeds", "maybe"], 2),
    (["train", "c.yaml", "--out", "o", "--preprocessing", "mine"], 2),
    (["reproduce", "lenet++", "--seeds", "0"], 2), (["calibrate", "run", "--fpr", "2"], 2),
    (["export", "run", "--out", "m", "--seed", "-1"], 2),
    (["calibrate", "run", "--fpr", "0.1", "--approach", "entropic", "--approach", "entropic"], 2),  # given twice
    (["benchmark", "lenet++", "--ranking-metric", "oscr_area"], 2),  # no candidate of the ranking
]


@pytest.mark.parametrize("args, code", ANSWERED_AT_ONCE, ids=lambda value: " ".join(value)
                         if isinstance(value, list) else str(value))
def test_help_version_and_argument_errors_import_no_heavy_library(args, code):
    """``--help`` takes ~6 s where it imports torch, 0.1 s where it does not; this checks the
    cause (what is imported), not a timing (benchmarks/bench_cli_start.py times it)."""
    assert modules_imported(args)[:2] == (code, [])


def test_the_import_probe_sees_a_heavy_import(tmp_path):
    """The check above can fail: a command that runs (``export`` of a run that has a config and
    no model: past the checks made before loading) imports torch."""
    (tmp_path / "config.yaml").write_text("approaches: [softmax]\n")
    code, imported, _ = modules_imported(["export", tmp_path, "--format", "pt2", "--out", tmp_path / "m.pt2"])
    assert code == 1 and "torch" in imported


@pytest.mark.parametrize("args, flag", [
    (["compare", "run", "--approach", "entropic", "--approach", "softmax", "--approach", "entropic"],
     "--approach entropic"),
    (["calibrate", "run", "--fpr", "0.1", "--approach", "softmax", "--approach", "softmax"], "--approach softmax"),
    (["train", "c.yaml", "--out", "o", "--set", "lr=0.1", "--set", "lr=0.1"], "--set lr=0.1"),
    (["tune-detectors", "run", "--detector", "knn", "knn"], "--detector knn"),
    (["ablate", "c.yaml", "--step", "base", "--step", "base"], "--step base"),
], ids=["compare", "calibrate", "set", "nargs", "ablate"])
def test_a_flag_given_the_same_value_twice_is_refused_in_one_line(capsys, args, flag):
    with pytest.raises(SystemExit) as exit:
        main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit.value.code == 2 and len(err) == 1 and f"error: {flag}: given twice" in err[0], err


def test_a_repeatable_flag_with_different_values_is_taken():
    from agnostophobia.cli import build_parser

    args = build_parser().parse_args(["compare", "run", "--approach", "entropic", "--approach", "softmax"])
    assert args.approach == ["entropic", "softmax"]
