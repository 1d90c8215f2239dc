"""The command line: entry points and one-line errors."""
import subprocess
import sys

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
                   "cpu, paper, smoke, tune"]
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
