"""The toy network outputs of the detectors' examples (``detectors.toy``): shapes and dtypes, one
draw per seed, the classes' geometry, the test pair (near class 0; off every class) and the
one-line errors."""
from __future__ import annotations

import numpy as np
import pytest

from agnostophobia.detectors import ToyOutputs, make_toy_outputs


def test_the_default_outputs_have_the_examples_shapes_and_dtypes():
    toy = make_toy_outputs()
    assert isinstance(toy, ToyOutputs)
    shapes = {"train_logits": (60, 3), "train_features": (60, 4), "train_labels": (60,),
              "last_layer_weight": (3, 4), "test_logits": (2, 3), "test_features": (2, 4)}
    for name, shape in shapes.items():
        value = getattr(toy, name)
        assert value.shape == shape, name
        assert value.dtype == (np.int64 if name == "train_labels" else np.float64), name
    np.testing.assert_array_equal(toy.last_layer_weight, np.eye(3, 4))
    np.testing.assert_array_equal(toy.train_labels, np.repeat(np.arange(3), 20))
    np.testing.assert_array_equal(toy.train_logits, toy.train_features @ toy.last_layer_weight.T)
    np.testing.assert_array_equal(toy.test_logits, toy.test_features @ toy.last_layer_weight.T)


def test_other_sizes_give_other_shapes():
    toy = make_toy_outputs(samples_per_class=7, num_classes=5, feature_dim=9)
    assert toy.train_logits.shape == (35, 5) and toy.train_features.shape == (35, 9)
    assert toy.test_logits.shape == (2, 5) and toy.test_features.shape == (2, 9)
    np.testing.assert_array_equal(np.bincount(toy.train_labels), [7] * 5)


def test_the_draw_is_the_one_the_examples_made_by_hand():
    rng = np.random.default_rng(0)
    weight = np.eye(3, 4)
    features = 4 * weight[np.repeat(np.arange(3), 20)] + rng.normal(size=(60, 4))
    toy = make_toy_outputs()
    np.testing.assert_array_equal(toy.train_features, features)
    np.testing.assert_array_equal(toy.test_features, [[4.0, 0.1, 0.1, 0.1], [0.0, 0.0, 0.0, 8.0]])


def test_a_seed_gives_one_draw_and_another_seed_another():
    first, again, other = make_toy_outputs(seed=3), make_toy_outputs(seed=3), make_toy_outputs(seed=4)
    np.testing.assert_array_equal(first.train_features, again.train_features)
    np.testing.assert_array_equal(first.train_logits, again.train_logits)
    assert not np.array_equal(first.train_features, other.train_features)
    np.testing.assert_array_equal(first.test_features, other.test_features)  # the test pair is fixed


def test_each_class_mean_lies_separation_along_its_own_axis():
    toy = make_toy_outputs(samples_per_class=400, num_classes=3, feature_dim=5, separation=6.0)
    for c in range(3):
        mean = toy.train_features[toy.train_labels == c].mean(axis=0)
        np.testing.assert_allclose(mean, 6.0 * np.eye(5)[c], atol=0.2)  # noise of std 1, 400 samples
    assert (toy.train_logits.argmax(axis=1) == toy.train_labels).mean() > 0.99


def test_the_first_test_sample_is_class_0_and_the_second_far_from_every_class():
    for separation in (4.0, 10.0):
        toy = make_toy_outputs(separation=separation, num_classes=4, feature_dim=6)
        assert int(toy.test_logits[0].argmax()) == 0
        means = np.stack([toy.train_features[toy.train_labels == c].mean(axis=0) for c in range(4)])
        near = np.linalg.norm(toy.test_features[0] - means, axis=1)
        far = np.linalg.norm(toy.test_features[1] - means, axis=1)
        assert near.argmin() == 0 and near.min() < 1.5
        assert far.min() > 2 * separation * 0.9  # the last axis: no class's
        np.testing.assert_array_equal(toy.test_logits[1], 0.0)


def test_the_outputs_are_frozen():
    toy = make_toy_outputs()
    with pytest.raises(AttributeError):
        toy.train_logits = None


@pytest.mark.parametrize("arguments, named", [
    ({"num_classes": 1}, "num_classes must be an integer >= 2, got 1"),
    ({"feature_dim": 3}, "feature_dim must be an integer >= 4, got 3"),
    ({"num_classes": 4, "feature_dim": 2}, "feature_dim must be an integer >= 5, got 2"),
    ({"samples_per_class": 1}, "samples_per_class must be an integer >= 2, got 1"),
    ({"samples_per_class": 2.5}, "samples_per_class must be an integer >= 2, got 2.5"),
    ({"num_classes": True}, "num_classes must be an integer >= 2, got True"),
    ({"separation": 0.0}, "separation must be a finite number > 0, got 0.0"),
    ({"separation": float("nan")}, "separation must be a finite number > 0, got nan"),
    ({"separation": "4"}, "separation must be a finite number > 0, got '4'"),
    ({"seed": -1}, "seed must be an integer in 0..2**63-1, got -1"),
])
def test_an_argument_out_of_range_is_named_in_one_line(arguments, named):
    with pytest.raises(ValueError) as error:
        make_toy_outputs(**arguments)
    assert str(error.value) == named and "\n" not in str(error.value)
