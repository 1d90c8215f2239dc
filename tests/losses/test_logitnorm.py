"""LogitNorm (agnostophobia.losses.logitnorm): its float64 reference, checked by
tests/contracts/test_loss_references.py, and its former setting name still read."""
import pytest
import torch
import yaml

from agnostophobia.errors import AgnostophobiaWarning, ConfigError
from agnostophobia.experiments.tune import parse_param
from agnostophobia.losses import build_loss
from agnostophobia.training.config import load_experiment, parse_experiment
from agnostophobia.training.loss_keys import comparable_config
from references import log_softmax_row, loss_reference


@loss_reference("logitnorm")
def logitnorm_term(loss, z, features, y):
    """Wei et al. 2022, Eq. 5: cross-entropy of z / (tau ||z||) on the knowns; unknowns add nothing."""
    normalised = z / (loss.temperature * torch.sqrt((z ** 2).sum()))
    return -log_softmax_row(normalised)[y] if y >= 0 else torch.zeros((), dtype=torch.float64)


# ------------------------------------------------------------------ its former name, logitnorm_temperature
OLD = {"approaches": ["logitnorm"], "loss": {"logitnorm_temperature": 0.1}}
NEW = {"approaches": ["logitnorm"], "loss": {"temperature": 0.1}}


def test_a_config_with_the_former_name_loads_to_the_same_value(tmp_path):
    """τ was ``logitnorm_temperature`` until a loss's settings were checked among the losses alone;
    a config, a budget, a ``--set``, a run's record and ``build_loss`` with that name still set it."""
    old, new = parse_experiment(dict(OLD)), parse_experiment(dict(NEW))
    assert old.for_approach("logitnorm", 0).loss_settings() == {"temperature": 0.1}
    assert old.for_approach("logitnorm", 0) == new.for_approach("logitnorm", 0)
    budget = parse_experiment({"approaches": ["logitnorm"], "budgets": {"short": {"loss": {"logitnorm_temperature": 0.01}}}})
    assert budget.for_budget("short").train.loss == {"temperature": 0.01}
    assert new.with_set_options([("loss.logitnorm_temperature", 0.04)]).train.loss == {"temperature": 0.04}
    # a run trained before the rename: its config.yaml and checkpoints compare equal to today's config
    record = {**new.for_approach("logitnorm", 0).to_dict(), "loss": {"logitnorm_temperature": 0.1}}
    assert comparable_config(record) == comparable_config(new.for_approach("logitnorm", 0).to_dict())
    assert build_loss("logitnorm", 3, logitnorm_temperature=0.1).temperature == 0.1
    path = tmp_path / "old.yaml"  # a file says once where the name went
    path.write_text(yaml.safe_dump(OLD))
    with pytest.warns(AgnostophobiaWarning, match="loss.logitnorm_temperature: read as loss.temperature"):
        loaded = load_experiment(path)
    assert loaded.for_approach("logitnorm", 0).loss_settings() == {"temperature": 0.1}


def test_the_former_and_the_new_name_with_two_values_are_refused():
    both = {"approaches": ["logitnorm"], "loss": {"logitnorm_temperature": 0.1, "temperature": 0.2}}
    with pytest.raises(ConfigError, match="'logitnorm_temperature' and 'temperature' both set 'temperature'"):
        parse_experiment(both)
    assert parse_experiment({**both, "loss": {"logitnorm_temperature": 0.1, "temperature": 0.1}}).train.loss == {
        "temperature": 0.1}
    with pytest.raises(ConfigError, match="both set 'temperature'"):
        build_loss("logitnorm", 3, logitnorm_temperature=0.1, temperature=0.2)
    assert parse_param("logitnorm_temperature=0.01,0.1") == ("temperature", (0.01, 0.1))  # tune --param too
