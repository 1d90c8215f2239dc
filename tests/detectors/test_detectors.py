"""The detector interface, parametrised over the registry (every detector: shape, finite values,
the network's prediction kept, OSCR invariance under monotonic transforms, fit state, its torch
score for ``export`` equal to its numpy score, at its defaults and at a point of its tuning grid, or a
declared reason why there is none; its declared grid inside its ranges, each tuned setting moving the
scores), read from what each detector declares beside its code, with no table of names to edit; and the
exact checks: max-logit = largest logit, energy = logsumexp, k-NN = brute force, OpenMax =
the numbers of the implementation it replaced (EVM, PostMax, GHOST: in their own test files)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.special
import scipy.stats
import torch

from agnostophobia.detectors import (DETECTORS, NeighbourSearch, NotExportable, NotFittedError, OpenMax,
                                     build_detector, k_smallest_distances, kth_neighbour_distance,
                                     place_in_predicted_column, setting_grid)
from agnostophobia.errors import ConfigError
from agnostophobia.losses import build_loss
from agnostophobia.metrics import ccr_at_fpr, oscr
from repo_paths import FIXTURES

C = 5
# small settings so that the tiny training set below is enough for the fitted detectors
SETTINGS = {"knn": {"k": 4}, "openmax": {"tail_size": 8, "alpha": 2}, "evm": {"tail_size": 10}}


# a bias-free logit layer: class directions +-e1, +-e2, e3; the background class last, along e4; four more
# feature dimensions the logits ignore (noise only), so that D = 8 > C and ViM applies
WEIGHTS = np.hstack([4.0 * np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [-1, 0, 0, 0], [0, -1, 0, 0],
                                     [0, 0, 0, 0.5]]), np.zeros((C + 1, 4))])


def unit_rows(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def network_outputs(seed: int, n: int, unknown: bool = False):
    """Logits (N, C+1: the last column is a background class) and 4-D features of a
    linear head; knowns cluster on their class direction, unknowns near the origin."""
    rng = np.random.default_rng(seed)
    labels = np.full(n, -1) if unknown else rng.integers(0, C, n)
    directions = unit_rows(WEIGHTS[labels, :4]) * rng.uniform(2, 4, (n, 1)) if not unknown else 0.0
    features = directions + 0.3 * rng.normal(size=(n, 4))
    features = np.hstack([features, 0.3 * rng.normal(size=(n, 4))])  # drawn last: the first four as they were
    return features @ WEIGHTS.T, features, labels


TRAIN_LOGITS, TRAIN_FEATURES, TRAIN_LABELS = network_outputs(0, 200)
KNOWN_LOGITS, KNOWN_FEATURES, KNOWN_LABELS = KNOWN = network_outputs(1, 120)
# the test set: the knowns, then 80 unknowns (logits, features and labels each concatenated)
TEST_LOGITS, TEST_FEATURES, TEST_LABELS = map(np.concatenate, zip(KNOWN, network_outputs(2, 80, unknown=True)))


def columns(detector, logits):
    """What a detector sees of a background-class network: all C+1 columns or the C known ones. A
    detector that scores the networks of its ``approaches`` alone (``cac``: negated anchor distances) sees
    the C logits as such a network outputs them: through the approach's logit layer on a linear layer
    that passes them on (:meth:`OpenSetLoss.logit_layer`)."""
    seen = logits if detector.reads_background_column else logits[:, :C]
    if not detector.approaches:
        return seen
    identity = torch.nn.Linear(C, C, bias=False).double()
    with torch.no_grad():
        identity.weight.copy_(torch.eye(C))
        return build_loss(detector.approaches[0], C).logit_layer(identity)(torch.as_tensor(seen[:, :C])).numpy()


def built(name: str, **settings):
    """The detector with the test's settings, given the known-class rows of the last layer where it reads it."""
    detector = build_detector(name, **{**SETTINGS.get(name, {}), **settings})
    return detector.use_last_layer(WEIGHTS[:C]) if detector.needs_last_layer else detector


def fitted(name: str, **settings):
    detector = built(name, **settings)
    known = TRAIN_LABELS >= 0
    train_logits = columns(detector, TRAIN_LOGITS)[:, :C]  # fitting always sees the C known classes
    return detector.fit(train_logits[known], TRAIN_FEATURES[known], TRAIN_LABELS[known])


def test_registry_lists_the_paper_scores_and_todays_post_hoc_scores():
    assert set(DETECTORS.names()) >= {"softmax", "background", "objectosphere-scaled", "entropy", "magnitude",
                                      "max-logit", "energy", "knn", "openmax", "evm", "postmax", "ghost", "vim",
                                      "mahalanobis", "relative-mahalanobis", "react", "ash", "scale", "gen"}


@pytest.fixture(scope="module", params=DETECTORS.names())
def detector(request):
    return fitted(request.param)


def test_scores_have_shape_n_by_c_and_are_finite_float64(detector):
    scores = detector.scores(columns(detector, TEST_LOGITS), TEST_FEATURES)
    assert scores.shape == (len(TEST_LABELS), C) and scores.dtype == np.float64
    assert np.isfinite(scores).all()


def test_the_prediction_stays_the_networks(detector):
    scores = detector.scores(columns(detector, TEST_LOGITS), TEST_FEATURES)
    same = scores.argmax(1) == TEST_LOGITS[:, :C].argmax(1)
    if detector.keeps_prediction:
        assert same.all()
    else:  # OpenMax may reorder classes, but not for the well-separated knowns here
        assert same[TEST_LABELS >= 0].mean() > 0.95


def test_scores_separate_knowns_from_unknowns_on_clear_data(detector):
    scores = detector.scores(columns(detector, TEST_LOGITS), TEST_FEATURES)
    assert ccr_at_fpr(scores, TEST_LABELS, [0.5])[0] > 0.5  # far above chance on this easy case


def _monotonic_transforms(scores):
    transforms = {"affine": lambda s: 3.0 * s + 7.0, "cube root": np.cbrt}
    if (scores > 0).all():  # log and square are strictly increasing on positive scores only
        transforms.update({"log": np.log, "square": np.square})
    return transforms


def test_oscr_is_invariant_under_monotonic_transforms_of_the_score(detector):
    scores = detector.scores(columns(detector, TEST_LOGITS), TEST_FEATURES)
    curve = oscr(scores, TEST_LABELS)
    assert len(curve.fpr) > 20
    for name, transform in _monotonic_transforms(scores).items():
        other = oscr(transform(scores), TEST_LABELS)
        np.testing.assert_array_equal(other.fpr, curve.fpr, err_msg=name)
        np.testing.assert_array_equal(other.ccr, curve.ccr, err_msg=name)


@pytest.mark.parametrize("name", DETECTORS.names())
def test_fit_state(name):
    detector = built(name)
    logits = columns(detector, TEST_LOGITS)
    if detector.needs_fit:
        with pytest.raises(NotFittedError, match=f"detector '{name}' is not fitted"):
            detector.scores(logits, TEST_FEATURES)
    else:  # post-hoc: fit is a no-op returning the detector itself
        before = detector.scores(logits, TEST_FEATURES)
        assert detector.fit(TRAIN_LOGITS[:, :C], TRAIN_FEATURES, TRAIN_LABELS) is detector
        np.testing.assert_array_equal(detector.scores(logits, TEST_FEATURES), before)


@pytest.mark.parametrize("name", [n for n in DETECTORS.names() if DETECTORS.get(n).FITTED_STATE])
def test_a_restored_fitted_state_scores_as_the_fit(name):
    """FITTED_STATE names the whole fit: a fresh detector given those arrays scores exactly as
    the fitted one (an attribute left out would fail here), and a state that lacks one is refused."""
    original = fitted(name)
    state = original.fitted_state()
    assert set(state) == set(original.FITTED_STATE)
    assert all(isinstance(value, np.ndarray) and value.dtype != object for value in state.values())
    fresh = built(name)
    restored = fresh.restore_fitted_state({key: value.copy() for key, value in state.items()})
    logits = columns(fresh, TEST_LOGITS)
    np.testing.assert_array_equal(restored.scores(logits, TEST_FEATURES), original.scores(logits, TEST_FEATURES))
    missing = dict(state)
    missing.pop(original.FITTED_STATE[0])
    with pytest.raises(ValueError, match=original.FITTED_STATE[0]):
        build_detector(name, **SETTINGS.get(name, {})).restore_fitted_state(missing)


@pytest.mark.parametrize("name", DETECTORS.names())
def test_torch_inputs_give_the_numpy_scores(name):
    detector = fitted(name)
    logits = columns(detector, TEST_LOGITS)
    np.testing.assert_allclose(detector.scores(torch.tensor(logits), torch.tensor(TEST_FEATURES)),
                               detector.scores(logits, TEST_FEATURES), rtol=1e-12)


# each registered detector with its defaults and at the first point of its declared tuning grid (every
# tuned setting away from its default, where the grid allows), and the settings that change its torch formula
TORCH_VARIANTS = [(name, {}) for name in DETECTORS.names()] + [
    (name, setting_grid(name)[0]) for name in DETECTORS.names() if setting_grid(name)] + [
    ("knn", {"k": 3, "class_conditional": True}), ("knn", {"k": 2, "normalize": False}),
    ("energy", {"temperature": 2.5}), ("ash", {"variant": "p"}), ("ash", {"variant": "b", "percentile": 65.0}),
    ("gen", {"top": 2, "gamma": 1.0})]


@pytest.mark.parametrize("name, settings", TORCH_VARIANTS, ids=lambda v: str(v) if isinstance(v, str) else
                         "-".join(f"{k}={x}" for k, x in v.items()) or "default")
def test_every_detector_writes_its_score_in_torch_or_says_why_not(name, settings):
    """Each detector's torch score (``export``) is its numpy score in the predicted class's column,
    on random outputs (scales from 0.1 to 10, a zero feature vector, the tiny test set too); a
    detector without one declares why in its own class."""
    cls = DETECTORS.get(name)
    detector = built(name, **settings)
    if cls.why_not_exportable() is not None:
        assert cls.NOT_EXPORTABLE and cls.why_not_exportable() == cls.NOT_EXPORTABLE
        with pytest.raises(NotExportable, match=f"^detector '{name}' is not exported: "):
            fitted(name).torch_score()
        return
    assert not cls.NOT_EXPORTABLE  # a torch score and a reason not to export: one is wrong
    if detector.needs_fit:
        with pytest.raises(NotFittedError):
            detector.torch_score()
    known = TRAIN_LABELS >= 0
    detector.fit(TRAIN_LOGITS[known, :C], TRAIN_FEATURES[known], TRAIN_LABELS[known])
    rng = np.random.default_rng(7)
    scale = rng.choice([0.1, 1.0, 10.0], size=(300, 1))
    logits = np.concatenate([TEST_LOGITS, scale * rng.normal(size=(300, C + 1))])
    features = np.concatenate([TEST_FEATURES, scale * rng.normal(size=(300, TEST_FEATURES.shape[1]))])
    features[-1] = 0.0
    inputs = columns(detector, logits)
    scores = detector.scores(inputs, features)
    predicted, top = logits[:, :C].argmax(axis=1), scores.max(axis=1)
    unique = (scores == top[:, None]).sum(axis=1) == 1  # not softmax * ||F|| = 0 everywhere for F = 0
    np.testing.assert_array_equal(scores.argmax(axis=1)[unique], predicted[unique])  # the exported labels
    got = detector.torch_score()(torch.from_numpy(inputs), torch.from_numpy(features), torch.from_numpy(predicted))
    assert got.dtype == torch.float64 and got.shape == (len(logits),)
    np.testing.assert_allclose(got.numpy(), top, rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", DETECTORS.names())
def test_cuda_tensors_give_the_cpu_scores(name):
    cpu = fitted(name)
    logits = columns(cpu, TEST_LOGITS)
    known = TRAIN_LABELS >= 0
    cuda = built(name).fit(
        torch.tensor(TRAIN_LOGITS[known, :C]).cuda(), torch.tensor(TRAIN_FEATURES[known]).cuda(),
        torch.tensor(TRAIN_LABELS[known]).cuda())
    np.testing.assert_allclose(cuda.scores(torch.tensor(logits).cuda(), torch.tensor(TEST_FEATURES).cuda()),
                               cpu.scores(logits, TEST_FEATURES), rtol=0, atol=1e-6)


def test_one_number_per_sample_sits_in_the_predicted_column():
    per_sample = np.array([-3.0, 0.0, 2.5, 1e300])
    logits = np.array([[0.0, 1.0, 0.5], [2.0, 1.0, 0.0], [0.0, 0.0, 3.0], [1.0, 0.0, 0.0]])
    scores = place_in_predicted_column(per_sample, logits)
    np.testing.assert_array_equal(scores.max(1), per_sample)
    np.testing.assert_array_equal(scores.argmax(1), [1, 0, 2, 0])
    assert np.isfinite(scores).all() and ((scores < per_sample[:, None]).sum(1) == 2).all()


def test_bad_settings_name_the_setting():
    with pytest.raises(ConfigError, match="knn.*neighbours"):
        build_detector("knn", neighbours=3)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        build_detector("knn", k=0)
    for k in (10**30, 2**63):  # no array holds it: refused where given, not at the first fit
        with pytest.raises(ValueError, match=r"k must be an integer that fits an int64 \(-2\*\*63..2\*\*63-1\), got "):
            build_detector("knn", k=k)
    with pytest.raises(ValueError, match="temperature"):
        build_detector("energy", temperature=-1.0)


# ------------------------------------------------------------------ exact checks

def test_max_logit_is_the_largest_logit():
    scores = build_detector("max-logit").scores(KNOWN_LOGITS[:, :C])
    np.testing.assert_array_equal(scores, KNOWN_LOGITS[:, :C])
    np.testing.assert_array_equal(scores.max(1), KNOWN_LOGITS[:, :C].max(1))


@pytest.mark.parametrize("temperature", [1.0, 2.5])
def test_energy_is_temperature_times_logsumexp(temperature):
    scores = build_detector("energy", temperature=temperature).scores(KNOWN_LOGITS[:, :C])
    expected = temperature * scipy.special.logsumexp(KNOWN_LOGITS[:, :C] / temperature, axis=1)
    np.testing.assert_allclose(scores.max(1), expected, rtol=1e-13)
    # stable where a naive exp would overflow
    big = build_detector("energy").scores(np.array([[1000.0, 999.0]]))
    assert big.max() == pytest.approx(1000.0 + np.log1p(np.exp(-1.0)), rel=1e-14)


def test_entropy_and_magnitude_are_the_table_1_quantities():
    logits = KNOWN_LOGITS[:, :C]
    entropy = scipy.stats.entropy(scipy.special.softmax(logits, axis=1), axis=1)
    np.testing.assert_allclose(build_detector("entropy").scores(logits).max(1), -entropy, rtol=1e-10)
    magnitude = np.sqrt((KNOWN_FEATURES ** 2).sum(1))
    np.testing.assert_allclose(build_detector("magnitude").scores(logits, KNOWN_FEATURES).max(1), magnitude,
                               rtol=1e-13)


def brute_force_kth_distance(queries, reference, k):
    distances = np.sqrt(((queries[:, None, :] - reference[None, :, :]) ** 2).sum(-1))
    return np.sort(distances, axis=1)[:, k - 1]


@pytest.mark.parametrize("k", [1, 4, 17])
def test_knn_equals_brute_force_on_normalised_features(k):
    known = TRAIN_LABELS >= 0
    detector = build_detector("knn", k=k, query_chunk=7, reference_chunk=11).fit(
        TRAIN_LOGITS[known, :C], TRAIN_FEATURES[known], TRAIN_LABELS[known])
    scores = detector.scores(TEST_LOGITS[:, :C], TEST_FEATURES)
    expected = brute_force_kth_distance(unit_rows(TEST_FEATURES), unit_rows(TRAIN_FEATURES[known]), k)
    np.testing.assert_allclose(scores.max(1), -expected, rtol=0, atol=1e-9)


def test_knn_without_normalisation_and_class_conditional_equal_brute_force():
    raw = build_detector("knn", k=3, normalize=False).fit(TRAIN_LOGITS[:, :C], TRAIN_FEATURES, TRAIN_LABELS)
    np.testing.assert_allclose(raw.scores(TEST_LOGITS[:, :C], TEST_FEATURES).max(1),
                               -brute_force_kth_distance(TEST_FEATURES, TRAIN_FEATURES, 3), atol=1e-9)
    per_class = build_detector("knn", k=3, class_conditional=True).fit(
        TRAIN_LOGITS[:, :C], TRAIN_FEATURES, TRAIN_LABELS)
    predicted = TEST_LOGITS[:, :C].argmax(1)
    expected = [brute_force_kth_distance(unit_rows(TEST_FEATURES[i:i + 1]),
                                         unit_rows(TRAIN_FEATURES[TRAIN_LABELS == predicted[i]]), 3)[0]
                for i in range(len(predicted))]
    np.testing.assert_allclose(per_class.scores(TEST_LOGITS[:, :C], TEST_FEATURES).max(1), -np.array(expected),
                               atol=1e-9)


def test_knn_chunks_do_not_change_the_result_and_k_is_checked():
    rng = np.random.default_rng(3)
    queries, reference = rng.normal(size=(50, 6)), rng.normal(size=(300, 6))
    whole = kth_neighbour_distance(queries, reference, 10, query_chunk=1000, reference_chunk=1000)
    np.testing.assert_allclose(kth_neighbour_distance(queries, reference, 10, 3, 7), whole, rtol=1e-12)
    np.testing.assert_allclose(whole, brute_force_kth_distance(queries, reference, 10), atol=1e-9)
    with pytest.raises(ValueError, match="k=201 exceeds the 200 training sample"):
        build_detector("knn", k=201).fit(TRAIN_LOGITS[:, :C], TRAIN_FEATURES, TRAIN_LABELS)
    with pytest.raises(ValueError, match="train_labels contains 3 negative"):
        build_detector("knn", k=2).fit(TRAIN_LOGITS[:3, :C], TRAIN_FEATURES[:3], [-1, -1, -1])


def test_knn_search_device_is_checked():
    rng = np.random.default_rng(4)
    queries, reference = rng.normal(size=(20, 5)), rng.normal(size=(90, 5))
    on_cpu = k_smallest_distances(queries, reference, 4, search=NeighbourSearch(device="cpu"))
    np.testing.assert_allclose(on_cpu[:, -1], brute_force_kth_distance(queries, reference, 4), atol=1e-9)
    np.testing.assert_allclose(k_smallest_distances(queries, reference, 4), on_cpu, rtol=0, atol=1e-9)  # auto
    with pytest.raises(ConfigError, match="'nowhere': not a device name"):
        k_smallest_distances(queries, reference, 4, search=NeighbourSearch(device="nowhere"))


@pytest.mark.cuda
@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_knn_search_on_cuda_equals_the_cpu(distance):
    """The chunked search on the GPU (auto picks it) gives the CPU's distances within 1e-6."""
    rng = np.random.default_rng(5)
    queries, reference = rng.normal(size=(3000, 84)), rng.normal(size=(20000, 84))
    search = NeighbourSearch(device="cpu", query_chunk=512, reference_chunk=4096)
    on_cpu = k_smallest_distances(queries, reference, 50, distance, search)
    for device in ("cuda", "auto"):
        on_device = NeighbourSearch(device=device, query_chunk=512, reference_chunk=4096)
        np.testing.assert_allclose(k_smallest_distances(queries, reference, 50, distance, on_device),
                                   on_cpu, rtol=0, atol=1e-6)
    known = TRAIN_LABELS >= 0
    detector = build_detector("knn", k=5).fit(TRAIN_LOGITS[known, :C], TRAIN_FEATURES[known], TRAIN_LABELS[known])
    expected = brute_force_kth_distance(unit_rows(TEST_FEATURES), unit_rows(TRAIN_FEATURES[known]), 5)
    np.testing.assert_allclose(detector.scores(TEST_LOGITS[:, :C], TEST_FEATURES).max(1), -expected, atol=1e-6)


def test_knn_zero_feature_is_at_distance_one_from_every_normalised_training_feature():
    detector = build_detector("knn", k=2).fit(TRAIN_LOGITS[:, :C], TRAIN_FEATURES, TRAIN_LABELS)
    assert detector.scores(TEST_LOGITS[:1, :C], np.zeros((1, TEST_FEATURES.shape[1]))).max() == pytest.approx(-1.0, abs=1e-12)


REFERENCE = json.loads((FIXTURES / "openmax_reference.json").read_text())


def _reference_training_data():
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(6), 150)
    return 8.0 * np.eye(6)[labels] + rng.standard_normal((labels.size, 6)), labels


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=lambda case: case["params"]["distance"])
def test_openmax_equals_the_numbers_of_the_implementation_it_replaced(case):
    train_x, train_y = _reference_training_data()
    test_x = np.array(REFERENCE["test_activations"])
    detector = build_detector("openmax", **case["params"]).fit(train_x, None, train_y)
    assert isinstance(detector, OpenMax)
    np.testing.assert_allclose(detector.weibull_shape_, case["weibull_shape"], rtol=1e-12)
    np.testing.assert_allclose(detector.weibull_scale_, case["weibull_scale"], rtol=1e-12)
    np.testing.assert_allclose(detector.weibull_loc_, case["weibull_loc"], rtol=1e-12)
    probabilities = np.array(case["probabilities"])
    # The parameters agree to an ulp. With libMR's translation the shapes are 10^5-10^6, and
    # the Weibull CDF moves by about k ulp = 2e-10 (relative) for one ulp of k or of the scale.
    np.testing.assert_allclose(detector.predict_proba(test_x), probabilities, rtol=5e-10, atol=1e-300)
    # the scores are the log-odds of those probabilities (tie-free, score scale 2): expit gives them back
    np.testing.assert_allclose(scipy.special.expit(detector.scores(test_x)), probabilities[:, :-1], rtol=5e-10,
                               atol=1e-300)
    # the old predict answered C (= 6) for "unknown"; the detector answers -1 like the rest of the package
    old = np.array(case["predict"])
    assert (old == 6).any()
    np.testing.assert_array_equal(detector.predict(test_x), np.where(old == 6, -1, old))


# ------------------------------------------------------------------ settings declared once (issue 23, item 4)
@pytest.mark.parametrize("name", DETECTORS.names())
def test_every_constructor_keyword_is_declared_with_the_constructors_default(name):
    import inspect

    cls = DETECTORS.get(name)
    parameters = inspect.signature(cls).parameters
    assert list(cls.SETTINGS) == list(parameters)
    for key, setting in cls.SETTINGS.items():
        assert setting.default == parameters[key].default, key
        assert setting.problem(setting.default) is None, key


@pytest.mark.parametrize("name", DETECTORS.names())
def test_every_grid_value_is_inside_its_range_and_builds(name):
    for key, setting in DETECTORS.get(name).SETTINGS.items():
        assert len(set(setting.grid)) == len(setting.grid), key
        for value in setting.grid:
            assert setting.problem(value) is None, (key, value)
            assert build_detector(name, **{key: value}).settings()[key] == value
    grid = setting_grid(name)
    assert len(grid) <= 12  # tune-detectors fits every point on every model
    for point in grid:
        build_detector(name, **point)


@pytest.mark.parametrize("name", [n for n in DETECTORS.names() if setting_grid(n)])
def test_every_tuned_setting_moves_the_scores(name):
    """``tune-detectors`` fits every point of the grid a detector declares beside its code (``setting_grid``:
    the product of its settings' grids); each tuned setting changes the scores at some value of its grid
    that the small training set here can fit, else its grid only multiplies the fits."""
    base = fitted(name)
    baseline = base.scores(columns(base, TEST_LOGITS), TEST_FEATURES)
    for key, setting in base.SETTINGS.items():
        moved = []
        for value in [v for v in setting.grid if v != getattr(base, key)]:
            try:
                detector = fitted(name, **{key: value})
            except ValueError:  # a tail longer than the tiny training set's classes (OpenMax's 50)
                continue
            moved.append(not np.array_equal(detector.scores(columns(detector, TEST_LOGITS), TEST_FEATURES), baseline))
        assert not setting.grid or any(moved), (key, setting.grid)


@pytest.mark.parametrize("name", DETECTORS.names())
def test_a_value_outside_the_declared_range_is_refused_by_the_declaration_and_the_constructor(name):
    for key, setting in DETECTORS.get(name).SETTINGS.items():
        if setting.type not in (int, float) or setting.low is None:
            continue
        below = setting.low if setting.low_open else setting.low - 1
        assert setting.problem(below) is not None
        with pytest.raises(ValueError):
            build_detector(name, **{key: below})


@pytest.mark.parametrize("name", [n for n in DETECTORS.names()
                                  if DETECTORS.get(n).needs_fit and DETECTORS.get(n).needs_features])
def test_inputs_of_other_widths_than_the_fit_are_refused_naming_the_detector(name):
    """One check (``_base.check_columns``) for every fitted detector that reads features."""
    detector = fitted(name)
    logits = columns(detector, TEST_LOGITS)[:, :C]
    with pytest.raises(ValueError, match=f"logits has {C - 1} columns but the detector '{name}' was fitted on {C}"):
        detector.scores(logits[:, :-1], TEST_FEATURES)
    with pytest.raises(ValueError, match=f"features has {TEST_FEATURES.shape[1] + 1} dimensions but the "
                                         f"detector '{name}' was fitted on {TEST_FEATURES.shape[1]}"):
        detector.scores(logits, np.hstack([TEST_FEATURES, TEST_FEATURES[:, :1]]))


# ------------------------------------------------------------------ the k-d tree at low dimension (issue 35)
@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
@pytest.mark.parametrize("dim", [2, 8, 9])
def test_the_kd_tree_finds_the_distances_brute_force_finds(distance, dim):
    """Exact either way, zero rows included (cosine: distance 1 to and from a zero row)."""
    rng = np.random.default_rng(dim)
    queries, reference = rng.normal(size=(150, dim)), rng.normal(size=(400, dim))
    queries[0], reference[[3, 9]] = 0.0, 0.0
    for k in (1, 6):
        brute = k_smallest_distances(queries, reference, k, distance, NeighbourSearch("brute", device="cpu"))
        tree = k_smallest_distances(queries, reference, k, distance, NeighbourSearch("kdtree", device="cpu"))
        np.testing.assert_allclose(tree, brute, rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="search must be one of auto, brute, kdtree, got 'ball'"):
        k_smallest_distances(queries, reference, 1, search=NeighbourSearch("ball"))


def test_the_cpu_searches_with_the_tree_up_to_the_measured_crossover_dimension(monkeypatch):
    from agnostophobia.detectors import knn

    used = []
    monkeypatch.setattr(knn, "kdtree_smallest", lambda *a, **k: used.append(a[0].shape[1]) or np.zeros((1, 1)))
    rng = np.random.default_rng(0)
    for dim in (2, knn.KDTREE_MAX_DIM, knn.KDTREE_MAX_DIM + 1):
        knn.k_smallest_distances(rng.normal(size=(1, dim)), rng.normal(size=(5, dim)), 1,
                                 search=knn.NeighbourSearch(device="cpu"))
    assert used == [2, knn.KDTREE_MAX_DIM]  # brute force above it (and always on a GPU)
