"""Issue 31, item 8: every public function that takes labels or a seed checks them, by one rule.

Labels: a value that does not fit an int64 (as a float, a uint64 or a Python integer), NaN,
inf or a fraction is a ``ValueError`` naming ``labels``, at every entry point (metrics, the
detectors' ``fit``, the losses and their weight helpers, ``OpenSetClassifier``); a plain cast
made 1e20 an unknown before. Integral floats (0.0, -1.0) stay accepted where floats are.
Seeds: an int (not a bool, not a string) in 0..2**63-1, in the API and in a config.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from agnostophobia import metrics
from agnostophobia.detectors import DETECTORS, build_detector
from agnostophobia.losses import LOSSES
from agnostophobia.losses.weights import inverse_frequency_class_weights, sample_weights

C = 3
SCORES = np.array([[0.9, 0.05, 0.05], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.2, 0.5, 0.3]])
GOOD = [0, 1, -1, 2]


def bad_labels():
    """Each way a label value can fail to be an int64 class index, in every container: the
    bad value at position 1 of a good label vector."""
    def at_one(value, dtype=None):
        labels = list(GOOD)
        labels[1] = value
        return np.array(labels, dtype=dtype) if dtype else labels

    return {
        "float-1e20": at_one(1e20, np.float64),
        "float-minus-1e20": at_one(-1e20, np.float64),
        "float-2**63": at_one(2.0**63, np.float64),
        "float32-1e30": at_one(1e30, np.float32),
        "python-int-10**30": at_one(10**30),
        "python-int-minus-10**30": at_one(-(10**30)),
        "python-int-2**64": at_one(2**64),
        "uint64-2**63": np.array([0, 2**63, 1, 2], np.uint64),
        "uint64-max": np.array([0, 2**64 - 1, 1, 2], np.uint64),
        "nan": at_one(float("nan"), np.float64),
        "inf": at_one(float("inf"), np.float64),
        "fraction": at_one(0.5, np.float64),
        "tensor-float-1e20": torch.tensor(at_one(1e20, np.float64)),
    }


BAD = bad_labels()


def metric_calls():
    confidence = SCORES.max(axis=1)
    return {
        "oscr": lambda y: metrics.oscr(SCORES, y),
        "ccr_at_fpr": lambda y: metrics.ccr_at_fpr(SCORES, y),
        "oscr_area": lambda y: metrics.oscr_area(SCORES, y),
        "class_ccr_at_fpr": lambda y: metrics.class_ccr_at_fpr(SCORES, y, 0.5),
        "threshold_at_fpr": lambda y: metrics.threshold_at_fpr(SCORES, y, 0.5),
        "auroc": lambda y: metrics.auroc(confidence, y),
        "fpr_at_tpr": lambda y: metrics.fpr_at_tpr(confidence, y),
        "precision_recall": lambda y: metrics.precision_recall(confidence, y),
        "accuracy_vs_confidence": lambda y: metrics.accuracy_vs_confidence(SCORES, y),
        "entropy_magnitude_stats": lambda y: metrics.entropy_magnitude_stats(confidence, confidence, y),
        "summarize": lambda y: metrics.summarize(SCORES, y),
    }


METRICS = metric_calls()


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize("metric", METRICS.values(), ids=METRICS.keys())
def test_every_metric_refuses_labels_that_are_no_int64(metric, bad):
    metric(GOOD)  # the good labels are fine
    with pytest.raises(ValueError, match="labels"):
        metric(bad)


@pytest.mark.parametrize("metric", METRICS.values(), ids=METRICS.keys())
def test_integral_float_labels_stay_accepted_by_the_metrics(metric):
    as_floats = metric(np.array(GOOD, np.float64))
    as_ints = metric(np.array(GOOD))
    assert repr(as_floats) == repr(as_ints)


def _ten_per_class():
    """Logits 2 F[:, :C] of features with one dimension more than classes (so that ViM applies)."""
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(C), 12)
    features = np.eye(C + 1)[labels] * 3 + 0.2 * rng.normal(size=(len(labels), C + 1))
    return features[:, :C] * 2, features, labels


SMALL = {"knn": {"k": 2}, "openmax": {"tail_size": 5}, "evm": {"tail_size": 5}}


def _built(name):
    """The detector, given the last layer of ``_ten_per_class``'s logits where it reads one."""
    detector = build_detector(name, **SMALL.get(name, {}))
    return detector.use_last_layer(2 * np.eye(C, C + 1)) if detector.needs_last_layer else detector


@pytest.mark.parametrize("name", DETECTORS.names())
def test_every_detector_fit_refuses_labels_that_are_no_int64(name):
    """Post-hoc detectors learn nothing from fit, but check what they are given all the same."""
    logits, features, labels = _ten_per_class()
    _built(name).fit(logits, features, labels.astype(np.float64))  # integral floats
    for key, value in {"float-1e20": 1e20, "float-2**63": 2.0**63, "nan": np.nan, "fraction": 0.5}.items():
        bad = labels.astype(np.float64)
        bad[3] = value
        with pytest.raises(ValueError, match="train_labels"):
            _built(name).fit(logits, features, bad)
    for bad in (np.where(labels == 1, 2**63, labels).astype(np.uint64), [10**30] + labels[1:].tolist()):
        with pytest.raises(ValueError, match="train_labels.*int64"):
            _built(name).fit(logits, features, bad)


LOSS_BAD = {key: value for key, value in BAD.items() if not key.startswith(("nan", "inf", "fraction"))}


@pytest.mark.parametrize("bad", LOSS_BAD.values(), ids=LOSS_BAD.keys())
@pytest.mark.parametrize("name", LOSSES.names())
def test_every_loss_refuses_labels_that_are_no_int64_naming_them(name, bad):
    loss = LOSSES.get(name)(C, **({"xi": 1.0, "lambda_": 0.1} if name == "objectosphere" else {}))
    logits = torch.zeros(4, loss.num_outputs)
    features = torch.ones(4, 2)
    loss(logits, torch.tensor(GOOD), features=features)
    with pytest.raises(ValueError, match="^labels"):
        loss(logits, bad, features=features)


@pytest.mark.parametrize("bad", LOSS_BAD.values(), ids=LOSS_BAD.keys())
def test_the_weight_helpers_refuse_labels_that_are_no_int64(bad):
    with pytest.raises(ValueError, match="^labels"):
        sample_weights(bad, torch.ones(C + 1))
    with pytest.raises(ValueError, match="^labels"):
        inverse_frequency_class_weights(bad, C)


def test_the_classifier_names_labels_that_are_no_int64():
    from agnostophobia.deploy import OpenSetClassifier
    from agnostophobia.errors import AgnostophobiaError

    classifier = OpenSetClassifier.__new__(OpenSetClassifier)  # label_names reads the class names only
    classifier.class_names = ["a", "b", "c"]
    assert classifier.label_names(np.array([0.0, -1.0, 2.0])) == ["a", "unknown", "c"]
    for bad in BAD.values():
        with pytest.raises(AgnostophobiaError, match="^labels"):
            classifier.label_names(bad)


# ------------------------------------------------------------------ seeds
BAD_SEEDS = {"str": "0", "bool": True, "float": 0.0, "negative": -1, "2**63": 2**63, "2**64": 2**64}


@pytest.mark.parametrize("seed", BAD_SEEDS.values(), ids=BAD_SEEDS.keys())
def test_a_seed_must_be_an_int_in_the_int64_range_everywhere(seed, tmp_path):
    from agnostophobia.data import build_protocol
    from agnostophobia.deploy.calibration import resolve_model
    from agnostophobia.errors import ConfigError
    from agnostophobia.training.config import TrainConfig

    with pytest.raises(ValueError, match="seed must be an integer in 0..2\\*\\*63-1"):
        resolve_model(tmp_path, "entropic", None, seed)  # before the run is read: no run here
    with pytest.raises(ConfigError, match="seed must be an integer in 0..2\\*\\*63-1"):
        build_protocol("lenet++", tmp_path, seed=seed)
    for key in ("seed", "data_seed"):
        with pytest.raises(ConfigError, match=f"{key}.*must be an integer in 0..2\\*\\*63-1"):
            TrainConfig(**{key: seed}).validate()


def test_the_largest_seed_is_accepted():
    from agnostophobia.training.config import TrainConfig

    assert TrainConfig(seed=2**63 - 1, data_seed=2**63 - 1).validate().seed == 2**63 - 1


# ------------------------------------------------------------------ the polarity of every accepted layout
@pytest.fixture(scope="module")
def classifier():
    """An untrained LeNet++ behind an :class:`OpenSetClassifier` (no run needed)."""
    from agnostophobia.deploy import OpenSetClassifier
    from agnostophobia.detectors.stored import fitted_detector
    from agnostophobia.models import build_model
    from agnostophobia.training.trained import TrainedModel

    model = build_model("lenet++", 10, activation="prelu").eval()
    trained = TrainedModel(model, {"protocol": "lenet++"}, torch.device("cpu"), "fp32", False, 8)
    return OpenSetClassifier(trained, fitted_detector("softmax", None, 10, {}), 0.5, [str(d) for d in range(10)],
                             "softmax", 0)


def _glyphs(n=6):
    """White squares on black, 28x28: the polarity LeNet++ takes."""
    images = np.zeros((n, 28, 28), np.uint8)
    images[:, 8:20, 8:20] = 255
    return images


LAYOUTS = {
    "stored-grey": lambda g: g,
    "stored-rgb": lambda g: np.repeat(g[..., None], 3, axis=-1),
    "prepared-uint8": lambda g: g[:, None],
    "prepared-uint8-tensor": lambda g: torch.from_numpy(g[:, None].copy()),
    "float-tensor": lambda g: torch.from_numpy(g[:, None].astype(np.float32) / 255),
    "float-array": lambda g: g[:, None].astype(np.float64) / 255,
}


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_every_accepted_layout_of_inverted_glyphs_is_refused_by_polarity(classifier, layout):
    from agnostophobia.errors import DataError

    assert classifier.predict(layout(_glyphs())).shape == (6,)
    with pytest.raises(DataError, match="^x: looks like a black glyph on white"):
        classifier.predict(layout(255 - _glyphs()))


def test_the_plotting_panels_refuse_labels_that_are_no_int64():
    from agnostophobia.plotting.histograms import softmax_histogram_values

    probs = SCORES / SCORES.sum(axis=1, keepdims=True)
    softmax_histogram_values(probs, np.array([0.0, 1.0, 2.0, 1.0]), probs)
    for bad in BAD.values():
        with pytest.raises(ValueError, match="^known_labels"):
            softmax_histogram_values(probs, bad, probs)
