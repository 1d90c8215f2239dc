"""The experiment-level keys (:mod:`agnostophobia.training.experiment_keys`): ``first_seed`` and
``seeds`` together name the training seeds, each a valid seed, or a one-line error naming the key."""
from __future__ import annotations

import pytest

from agnostophobia.errors import ConfigError
from agnostophobia.training.config import load_experiment
from agnostophobia.training.experiment_keys import MAX_SEEDS, check_first_seed, check_seeds


@pytest.mark.parametrize("first_seed, seeds, numbers", [(0, 1, [0]), (0, 3, [0, 1, 2]), (5, 5, [5, 6, 7, 8, 9]),
                                                        (2**63 - 2, 2, [2**63 - 2, 2**63 - 1])])
def test_seed_numbers_run_from_first_seed(first_seed, seeds, numbers):
    experiment = load_experiment("lenet++").with_overrides({"seeds": seeds, "first_seed": first_seed})
    assert list(experiment.seed_numbers) == numbers


@pytest.mark.parametrize("first_seed, seeds, message", [
    (-1, 1, "must be an integer >= 0, got -1"), (True, 1, "must be an integer >= 0, got True"),
    (1.0, 1, "must be an integer >= 0, got 1.0"), (2**63 - 1, 2, "2 seeds from first_seed 9223372036854775807"),
])
def test_a_bad_first_seed_names_the_key(first_seed, seeds, message):
    with pytest.raises(ConfigError, match="^config key 'first_seed': " + message):
        check_first_seed(first_seed, seeds)


def test_seeds_past_the_largest_seed_are_refused_as_seeds_too():
    with pytest.raises(ConfigError, match="^--seeds: 3 seeds from first_seed 9223372036854775806 pass"):
        check_seeds(3, "--seeds", 2**63 - 2)
    with pytest.raises(ConfigError, match="at most"):
        check_seeds(MAX_SEEDS + 1)
    assert check_seeds(MAX_SEEDS) == MAX_SEEDS
