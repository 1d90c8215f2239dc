"""Experiment YAML as people write it (issue 31, item 3): exponent floats are numbers, aliases
and repeated keys are refused at once with the file and line, repeated approaches and seed
counts beyond 10,000 are refused, and the package writes no YAML it would refuse to read."""
import time

import pytest
import yaml
from runs import refused_config_line

from agnostophobia._yaml import dump_yaml, load_yaml
from agnostophobia.training.config import load_experiment


@pytest.mark.parametrize("text, value", [("1e-3", 1e-3), ("5e-4", 5e-4), ("1E-3", 1e-3), ("-2e+5", -2e5),
                                         ("+3e2", 300.0), ("1.5e-2", 0.015), ("2.", 2.0), (".5", 0.5)])
def test_an_exponent_without_a_dot_is_a_number(text, value):
    assert load_yaml(f"lr: {text}\n") == {"lr": value}


@pytest.mark.parametrize("text, value", [("12", 12), ("'1e-3'", "1e-3"), ("1e", "1e"), ("e5", "e5"),
                                         ("0x1f", 31), ("1_000", 1000), ("yes", True)])
def test_other_scalars_keep_their_meaning(text, value):
    assert load_yaml(f"v: {text}\n") == {"v": value}


def test_a_config_with_lr_1e_minus_3_trains_with_that_rate(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("lr: 1e-3\nloss: {lambda: 5e-4}\napproaches: [objectosphere]\n")
    experiment = load_experiment(path)
    assert experiment.train.lr == 0.001 and experiment.train.loss["lambda_"] == 5e-4


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(9))

REFUSED = [  # (id, text, what the one line must say)
    ("alias-bomb", ALIAS_BOMB, "line 1"),
    ("alias", "epochs: &n 3\nbatch_size: *n\n", "anchors and aliases"),
    ("alias-in-list", "approaches: [&s softmax, *s]\n", "anchors and aliases"),
    ("merge-key", "budgets: {smoke: {<<: {epochs: 1}}}\n", "merge keys"),
    ("duplicate-key", "epochs: 3\nlr: 0.1\nepochs: 4\n", "key 'epochs' is given twice"),
    ("duplicate-nested-key", "budgets:\n  smoke:\n    lr: 0.1\n    lr: 1e-3\n", "line 4"),
    ("approach-twice", "approaches: [softmax, entropic, softmax]\n", "'softmax' is listed twice"),
    ("seeds-beyond-2-63", f"seeds: {2**63 + 1}\n", "'seeds'"),
]


@pytest.mark.parametrize("text, names", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_config_is_refused_in_one_line_naming_file_and_line(text, names, tmp_path, capsys):
    line = refused_config_line(text, tmp_path, capsys)
    assert names in line, line
    assert "bad.yaml" in line or names.startswith("'"), line  # YAML errors name the file; key errors the key


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path):
    from agnostophobia.errors import ConfigError
    from agnostophobia.training.config import read_yaml

    path = tmp_path / "bomb.yaml"
    path.write_text(ALIAS_BOMB)  # 9**10 strings once expanded
    started = time.monotonic()
    with pytest.raises(ConfigError, match="bomb.yaml: not valid YAML at line 1"):
        read_yaml(path)
    assert time.monotonic() - started < 1


def test_the_seed_count_is_bounded_so_no_command_loops_for_ever(tmp_path):
    from agnostophobia.errors import ConfigError
    from agnostophobia.training.config import MAX_SEEDS, check_seeds

    assert check_seeds(MAX_SEEDS) == MAX_SEEDS
    for count in (MAX_SEEDS + 1, 2**63, 2**63 + 1):
        with pytest.raises(ConfigError, match="at most 10,000 seeds"):
            check_seeds(count)


def test_the_package_writes_a_value_used_twice_without_an_alias():
    shared = [1, 2]
    text = dump_yaml({"a": shared, "b": shared})
    assert "&" not in text and "*" not in text and load_yaml(text) == {"a": [1, 2], "b": [1, 2]}
    assert yaml.safe_load(text) == load_yaml(text)
