"""The shared checks of ``agnostophobia._validation``: one rule per kind of value, wherever it enters."""
import re

import numpy as np
import pytest


# ------------------------------------------------------------- the one rule for a target FPR
BAD_RATES = [0, -0.1, 1.5, float("nan"), float("inf"), True, "0.1", None]


def fpr_entry_points():
    """Every place a target false positive rate enters, each as a function of the value that
    raises on a bad one."""
    import argparse

    from agnostophobia.deploy.calibration import check_target
    from agnostophobia.deploy.cli import fpr_rate
    from agnostophobia.experiments.tune import check_fpr as tune_fpr

    def flag(value):
        if value is None:
            raise argparse.ArgumentTypeError("None never comes from a command line")
        return fpr_rate(str(value))
    return {"calibrate/export/predict": check_target, "tune": tune_fpr, "command-line --fpr": flag}


@pytest.mark.parametrize("value", BAD_RATES, ids=repr)
def test_every_entry_point_refuses_a_bad_target_fpr_by_one_rule(value):
    import argparse

    from agnostophobia._validation import FPR_RULE
    for where, check in fpr_entry_points().items():
        if value == "0.1" and where == "command-line --fpr":
            continue  # text is what a command line gives
        with pytest.raises((ValueError, argparse.ArgumentTypeError)) as refused:
            check(value)
        assert value is None or FPR_RULE in str(refused.value), (where, str(refused.value))


@pytest.mark.parametrize("value", [1e-4, 0.5, 1, np.float32(0.1)])
def test_every_entry_point_takes_a_good_target_fpr(value):
    for check in fpr_entry_points().values():
        assert check(value if not isinstance(value, np.floating) else float(value)) == pytest.approx(float(value))


def test_one_device_rule_for_the_config_and_the_device_resolver():
    from agnostophobia._validation import DEVICE_RULE, is_device_name
    from agnostophobia.errors import ConfigError
    from agnostophobia.training.config import parse_experiment
    from agnostophobia.training.device import resolve_device

    assert all(is_device_name(n) for n in ("auto", "cpu", "mps", "cuda", "cuda:0", "cuda:12"))
    assert not any(is_device_name(n) for n in ("gpu", "cuda:", "cuda:x", "CPU", "", None, 0))
    with pytest.raises(ConfigError, match=f"device.*must be {re.escape(DEVICE_RULE)}"):
        parse_experiment({"device": "gpu", "tensorboard": False}).train.validate()
    for name in ("gpu", "xpu"):  # not a name torch knows; a name torch knows that is not ours
        with pytest.raises(ConfigError, match=re.escape(f"({DEVICE_RULE})")):
            resolve_device(name)


# ------------------------------------------------------------- labels
@pytest.mark.parametrize("labels", [[True, -1], (0, False), [[1, np.bool_(True)]]], ids=repr)
def test_a_boolean_among_labels_is_refused_not_read_as_0_or_1(labels):
    from agnostophobia._validation import check_labels, int64_labels

    with pytest.raises(ValueError, match="labels must be integers, got a boolean"):
        int64_labels(labels)
    with pytest.raises(ValueError, match="labels must be integers, got a boolean"):
        check_labels(labels, len(labels))
