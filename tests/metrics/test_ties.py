"""Tie-free scores (issue 41, item 1): every detector's scores resolve as finely as the statistic
it thresholds, on logits at LogitNorm's scale (norms >= 1,000, where the max-softmax is exactly 1
in float64) and on inputs beyond each saturating map's support; the tie statistic of
``agnostophobia.metrics`` that every evaluation records, and the report's flag."""
from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.special
import scipy.stats
import torch

from agnostophobia.detectors import DETECTORS, build_detector
from agnostophobia.experiments.report import ccr_table_markdown, matrix_markdown
from agnostophobia.metrics import TIE_FLAG, auroc, ccr_at_fpr, oscr_area, summarize, tied_share

# A network of 5 known classes and a background class (the last logit) on 32-D features, its logit
# layer bias-free: knowns scatter around their class's centre, unknowns around the origin, wider.
C, D = 5, 32
RNG = np.random.default_rng(41)
CENTRES = 3.0 * RNG.normal(size=(C, D))
WEIGHTS = np.vstack([CENTRES / np.linalg.norm(CENTRES, axis=1, keepdims=True), 0.3 * RNG.normal(size=(1, D))]) \
    + 0.05 * RNG.normal(size=(C + 1, D))
SETTINGS = {"knn": {"k": 4}, "openmax": {"tail_size": 8, "alpha": 2}, "evm": {"tail_size": 10}}
#: LogitNorm's networks reach logit norms of about 2,600; every sample here has at least 1,000.
LEAST_NORM = 1000.0


def at_scale(seed: int, n: int, unknown: bool = False):
    """(logits (N, C+1), features (N, D), labels): each sample's features scaled so that its
    logits' norm is 1,000 to 3,000."""
    rng = np.random.default_rng(seed)
    labels = np.full(n, -1) if unknown else rng.integers(0, C, n)
    features = (0.0 if unknown else CENTRES[labels]) + (2.0 if unknown else 1.0) * rng.normal(size=(n, D))
    norm = np.linalg.norm(features @ WEIGHTS[:C].T, axis=1, keepdims=True)
    features = features * (LEAST_NORM * rng.uniform(1, 3, (n, 1)) / norm)
    return features @ WEIGHTS.T, features, labels


def columns(detector, logits):
    """What a detector sees of the background-class network: all C+1 columns or the C known ones."""
    return logits if detector.reads_background_column else logits[:, :C]


TRAIN_LOGITS, TRAIN_FEATURES, TRAIN_LABELS = at_scale(10, 400)
# the test set: 300 knowns, then 300 unknowns (logits, features and labels each concatenated)
LOGITS, FEATURES, LABELS = map(np.concatenate, zip(at_scale(11, 300), at_scale(12, 300, unknown=True)))


def fitted_at_scale(name: str, **settings):
    detector = build_detector(name, **{**SETTINGS.get(name, {}), **settings})
    if detector.needs_last_layer:
        detector.use_last_layer(WEIGHTS[:C])
    return detector.fit(TRAIN_LOGITS[:, :C], TRAIN_FEATURES, TRAIN_LABELS)


def share_tied(top: np.ndarray) -> float:
    """Share of the samples whose score equals another sample's (of either kind)."""
    _, inverse, counts = np.unique(top, return_inverse=True, return_counts=True)
    return float(np.mean(counts[inverse] > 1))


def top_scores(detector, logits, features) -> np.ndarray:
    return detector.scores(columns(detector, logits), features).max(axis=1)


def test_the_test_data_is_at_logitnorms_scale_where_the_max_softmax_is_exactly_one():
    assert np.linalg.norm(LOGITS[:, :C], axis=1).min() >= 1000
    probabilities = scipy.special.softmax(LOGITS[:, :C], axis=1).max(axis=1)
    assert np.mean(probabilities == 1.0) > 0.5  # what the probability scale tied
    assert tied_share(probabilities, LABELS) > 0.5


def test_max_softmax_gets_the_ccr_and_auroc_of_its_float64_log_odds():
    """The issue's case: the max-softmax of logits at LogitNorm's scale ranks as the top class's
    log-odds :math:`l_t - \\ln \\sum_{j \\ne t} e^{l_j}`, computed here in float64 on its own."""
    known = LOGITS[:, :C]
    top = known.argmax(axis=1)
    others = np.where(np.arange(C)[None, :] == top[:, None], -np.inf, known)
    log_odds = known[np.arange(len(known)), top] - scipy.special.logsumexp(others, axis=1)
    reference = np.full_like(known, -np.inf)
    reference[np.arange(len(known)), top] = log_odds
    reference[np.isinf(reference)] = log_odds.min() - 1.0
    scores = build_detector("softmax").scores(known)
    np.testing.assert_array_equal(scores.argmax(axis=1), top)
    np.testing.assert_allclose(scores.max(axis=1), log_odds, rtol=1e-12)
    fprs = [0.01, 0.05, 0.1, 0.5]
    np.testing.assert_array_equal(ccr_at_fpr(scores, LABELS, fprs), ccr_at_fpr(reference, LABELS, fprs))
    assert auroc(scores.max(axis=1), LABELS) == auroc(log_odds, LABELS)
    assert oscr_area(scores, LABELS) == oscr_area(reference, LABELS)
    assert ccr_at_fpr(scores, LABELS, [0.1])[0] > 0.5  # the probabilities' CCR here: 0, every known tied at 1.0
    assert tied_share(scores.max(axis=1), LABELS) == 0


@pytest.mark.parametrize("name", DETECTORS.names())
def test_every_detector_keeps_samples_apart_at_logitnorms_scale(name):
    detector = fitted_at_scale(name)
    top = top_scores(detector, LOGITS, FEATURES)
    assert np.isfinite(top).all()
    assert share_tied(top) < 0.01, name
    assert tied_share(top, LABELS) < 0.01, name


# ------------------------------------------------------------------ beyond a saturating map's support
def far_inputs(seed: int, n: int = 400, norm: float = 1e4):
    """Logits and features in random directions, far from every class (their norms about ``norm``)."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, TRAIN_FEATURES.shape[1])) * norm
    return features @ WEIGHTS.T, features


def spread_inputs(seed: int, n: int = 400):
    """Features along the class directions and across, scaled from 1e-2 to 1e4 times the training
    data, so that the normalised logits run from below every fitted location to above every end."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, TRAIN_FEATURES.shape[1])) * np.exp(rng.uniform(np.log(1e-2), np.log(1e4),
                                                                                  (n, 1)))
    features[: n // 2] += CENTRES[rng.integers(0, C, n // 2)] * rng.uniform(-300, 3000, (n // 2, 1))
    return features @ WEIGHTS.T, features


def bounded(gpd, location, scale):
    """A GPD of shape -0.5 (bounded support [location, location + 2 scale]) in place of the fit's."""
    gpd = np.array(gpd, dtype=np.float64)
    gpd[..., 0], gpd[..., 1], gpd[..., 2] = -0.5, location, scale
    return gpd


@pytest.mark.parametrize("name", ["postmax", "ghost"])
def test_a_gpd_score_keeps_samples_apart_below_its_location_and_above_its_upper_end(name):
    detector = fitted_at_scale(name)
    logits, features = spread_inputs(3)
    if name == "postmax":
        values = logits[:, :C].max(axis=1) / np.linalg.norm(features, axis=1)
    else:
        from agnostophobia.detectors.ghost import ghost_normalised_logit
        values = ghost_normalised_logit(logits[:, :C], features, logits[:, :C].argmax(axis=1), detector.mean_,
                                        detector.std_)
    low, high = np.quantile(values, [0.3, 0.5])
    detector.gpd_ = bounded(detector.gpd_, low, (high - low) / 2)  # 30 % below, 50 % above the end
    if name == "postmax":
        detector.gpd_ = tuple(detector.gpd_)
    probability = scipy.stats.genpareto.cdf(values, -0.5, loc=low, scale=(high - low) / 2)
    assert np.mean(probability == 0) > 0.25 and np.mean(probability == 1) > 0.45  # what the CDF tied
    top = top_scores(detector, logits, features)
    assert share_tied(top) < 0.01
    np.testing.assert_array_equal(np.argsort(top, kind="stable"), np.argsort(values, kind="stable"))
    inside = (probability > 0) & (probability < 1 - 2.0 ** -26)
    np.testing.assert_allclose(top[inside], probability[inside], rtol=1e-12)  # unchanged where not saturated
    torch_top = detector.torch_score()(torch.from_numpy(logits[:, :C]), torch.from_numpy(features),
                                       torch.from_numpy(logits[:, :C].argmax(axis=1)))
    np.testing.assert_allclose(torch_top.numpy(), top, rtol=1e-12)


def test_postmax_below_its_fitted_location_still_ranks_by_the_normalised_logit():
    detector = fitted_at_scale("postmax")
    rng = np.random.default_rng(4)  # away from every class: every logit negative, at LogitNorm's scale
    features = -WEIGHTS[:C].sum(axis=0) * rng.uniform(1, 3, (400, 1)) + rng.normal(size=(400, D))
    features *= 1000 / np.linalg.norm(features, axis=1, keepdims=True)
    logits = features @ WEIGHTS.T
    values = logits[:, :C].max(axis=1) / np.linalg.norm(features, axis=1)
    below = values < detector.gpd_[1]
    assert below.sum() > 300
    assert (scipy.stats.genpareto.cdf(values[below], *detector.gpd_) == 0).all()  # what the CDF tied
    top = top_scores(detector, logits[below], features[below])
    assert (top <= 0).all()  # below every score of a sample above the location (those are > 0)
    np.testing.assert_array_equal(np.argsort(top, kind="stable"), np.argsort(values[below], kind="stable"))
    assert len(np.unique(top)) == below.sum()


@pytest.mark.parametrize("name, settings", [("openmax", {}), ("evm", {"distance": "cosine"}),
                                            ("evm", {"distance": "euclidean"})])
def test_openmax_and_the_evm_keep_samples_far_from_every_class_apart(name, settings):
    detector = fitted_at_scale(name, **settings)
    logits, features = far_inputs(5)
    top = top_scores(detector, logits, features)
    assert np.isfinite(top).all()
    assert share_tied(top) < 0.01


@pytest.mark.parametrize("name", DETECTORS.names())
def test_every_detector_keeps_samples_far_from_every_class_apart(name):
    detector = fitted_at_scale(name)
    logits, features = far_inputs(6)
    top = top_scores(detector, logits, features)
    assert np.isfinite(top).all()
    assert share_tied(top) < 0.01, name


# ------------------------------------------------------------------ the tie statistic and the report's flag
def test_tied_share_counts_the_samples_that_tie_with_one_of_the_other_kind():
    confidence = np.array([1.0, 1.0, 0.5, 0.2, 1.0, 0.7, 0.2, 0.2])
    labels = np.array([0, 1, 2, 0, -1, -1, -1, -1])
    # knowns 1.0, 1.0 tie with the unknown 1.0; the known 0.2 with the unknowns 0.2, 0.2; 0.5 and 0.7 do not
    assert tied_share(confidence, labels) == pytest.approx(6 / 8)
    assert tied_share(np.arange(8.0), labels) == 0.0
    assert tied_share(np.ones(8), labels) == 1.0
    rng = np.random.default_rng(0)
    values, kinds = rng.integers(0, 20, 300).astype(float), np.where(rng.random(300) < 0.4, -1, 1)
    pairs = values[:, None] == values[None, :]
    other = (kinds[:, None] < 0) != (kinds[None, :] < 0)
    assert tied_share(values, kinds) == pytest.approx((pairs & other).any(axis=1).mean())
    with pytest.raises(ValueError):
        tied_share(confidence, np.zeros(8, dtype=int))  # no unknowns: nothing to tie with


def test_every_evaluation_row_records_its_tied_share():
    probabilities = scipy.special.softmax(LOGITS[:, :C], axis=1)
    assert summarize(probabilities, LABELS)["tied_share"] > 0.5
    assert summarize(build_detector("softmax").scores(LOGITS[:, :C]), LABELS)["tied_share"] == 0


def result(approach, detector, share):
    return {"approach": approach, "detector": detector, "row": f"{approach}/{detector}", "unknowns": "letters",
            "ccr_at_fpr": {"1e-4": None, "1e-3": None, "1e-2": 0.5, "1e-1": 0.6}, "closed_set_accuracy": 0.9,
            "auroc": 0.8, "tied_share": share}


def test_the_report_flags_a_cell_where_ties_decide_more_than_one_percent():
    assert TIE_FLAG == 0.01
    rows = [result("logitnorm", "softmax", 0.731), result("logitnorm", "energy", 0.01), result("softmax", "softmax", 0)]
    table = "\n".join(ccr_table_markdown(rows, lambda r: r["row"]))
    assert "| logitnorm/softmax † |" in table and "| logitnorm/energy |" in table
    assert "more than 1 % of the samples tie" in table and "logitnorm/softmax on letters: 73.1 %" in table
    assert "energy on letters" not in table
    matrix = matrix_markdown({"results": rows})
    assert matrix.count("†") == 2  # the cell and the note under its table
    assert "samples tie" not in "\n".join(ccr_table_markdown(rows[1:], lambda r: r["row"]))
    old = {key: value for key, value in rows[0].items() if key != "tied_share"}  # a metrics.json from before
    assert "†" not in "\n".join(ccr_table_markdown([old], lambda r: r["row"]))


def test_a_calibration_entry_records_its_score_scale_and_a_bad_one_is_refused(tmp_path):
    from agnostophobia.deploy.calibration import current_scale
    from agnostophobia.training.records import RecordError, read_calibration

    entry = {"approach": "softmax", "detector": "softmax", "seed": 0, "target_fpr": 0.1, "threshold": 2.5}
    assert not current_scale(entry)  # recorded before scales were: scale 1, the probability
    assert current_scale({**entry, "score_scale": 2}) and current_scale({**entry, "detector": "energy"})
    for scale, ok in ((2, True), (0, False), ("2", False), (True, False)):
        (tmp_path / "calibration.json").write_text(
            json.dumps({"format": 1, "entries": [{**entry, "score_scale": scale}]}))
        if ok:
            assert read_calibration(tmp_path)["entries"][0]["score_scale"] == 2
        else:
            with pytest.raises(RecordError, match="score_scale"):
                read_calibration(tmp_path)


def test_a_threshold_chosen_again_on_a_new_scale_says_what_changed(tmp_path):
    """A cac threshold chosen on the fixed anchors' scores (scale 1) is chosen again, its note naming the
    anchor means; a max-softmax one's still names the tie-free scores."""
    from agnostophobia.deploy.calibration import current_scale, old_scale_note

    softmax = {"approach": "softmax", "detector": "softmax", "seed": 0, "target_fpr": 0.1, "threshold": 2.5}
    cac = {**softmax, "approach": "cac", "detector": "cac", "threshold": -2.0, "score_scale": 1}
    assert not current_scale(cac) and current_scale({**cac, "score_scale": 2})
    both = old_scale_note([softmax, cac], tmp_path)
    assert "before the detectors' scores were tie-free" in both and "; before the cac score measured" in both
    assert "anchor means" not in old_scale_note([softmax], tmp_path)


# ------------------------------------------------------------------ issue 55, item 8: saturating inputs, the registry's claims
def claimed_settings(name: str):
    """The detector's defaults, and each other value of each categorical setting (a variant may tie
    where the others do not: ASH-B)."""
    settings = [{}]
    for key, setting in DETECTORS.get(name).SETTINGS.items():
        values = setting.choices or ((True, False) if setting.type is bool else ())
        settings += [{key: value} for value in values if value != setting.default]
    return settings


def saturating_inputs(seed: int, n: int = 300):
    """{family: (logits, features)} where a detector's statistic saturates: every entry of F above
    every training entry (beyond any clip fitted on them: ReAct's corner), no positive entry (what
    ASH and SCALE sum is 0), and huge logits (norms 1e4 to 1e6: every softmax rounds to 1)."""
    rng = np.random.default_rng(seed)
    scale = np.exp(rng.uniform(0, 9, (n, 1)))
    above = TRAIN_FEATURES.max() + np.abs(rng.normal(size=(n, D))) * scale
    negative = -np.abs(rng.normal(size=(n, D))) * np.exp(rng.uniform(-3, 6, (n, 1)))
    huge = rng.normal(size=(n, D))
    huge *= np.exp(rng.uniform(np.log(1e4), np.log(1e6), (n, 1))) / np.linalg.norm(huge @ WEIGHTS[:C].T, axis=1,
                                                                                   keepdims=True)
    return {name: (features @ WEIGHTS.T, features) for name, features in
            (("above every clip", above), ("no positive entry", negative), ("huge logits", huge))}


SATURATING = saturating_inputs(55)
CLAIMS = [(name, settings) for name in DETECTORS.names() for settings in claimed_settings(name)]


@pytest.mark.parametrize("name, settings", CLAIMS, ids=[f"{n}-{s}" for n, s in CLAIMS])
def test_every_detector_that_claims_to_be_tie_free_keeps_saturating_inputs_apart(name, settings):
    """Distinct inputs where the statistic saturates get distinct scores, unless the detector says
    which inputs it scores alike (Detector.ties); and where it says so, they do tie."""
    detector = fitted_at_scale(name, **settings)
    claim = detector.ties()
    shares = {}
    for family, (logits, features) in SATURATING.items():
        top = top_scores(detector, logits, features)
        assert np.isfinite(top).all(), (name, settings, family)
        shares[family] = share_tied(top)
    if claim is None:
        assert shares == {family: 0.0 for family in SATURATING}, (name, settings, shares)
    else:
        assert max(shares.values()) > 0.5, (name, settings, claim, shares)  # the declared ties are real


def test_react_continues_at_the_corner_with_the_unclipped_energy():
    """Every sample whose entries all reach the clip had one score, the corner's energy; it now
    ranks by its unclipped energy between the clipped energies below and above the corner, and the
    paper's score comes back from it."""
    detector = fitted_at_scale("react")
    logits, features = SATURATING["above every clip"]
    clipped = scipy.special.logsumexp(np.minimum(features, detector.threshold_) @ WEIGHTS[:C].T, axis=1)
    assert np.ptp(clipped) < 1e-9 * abs(clipped[0])  # what the paper's score tied: every sample
    top = top_scores(detector, logits, features)
    unclipped = scipy.special.logsumexp(features @ WEIGHTS[:C].T, axis=1)
    np.testing.assert_array_equal(np.argsort(top, kind="stable"), np.argsort(unclipped, kind="stable"))
    everywhere = np.concatenate([features, FEATURES])
    scores = top_scores(detector, everywhere @ WEIGHTS.T, everywhere)
    paper = scipy.special.logsumexp(np.minimum(everywhere, detector.threshold_) @ WEIGHTS[:C].T, axis=1)
    np.testing.assert_allclose(detector.clipped_energy(scores), paper, rtol=1e-12)
    apart = paper[:, None] < paper[None, :] - 1e-9 * np.abs(paper).max()  # distinct clipped energies keep their order
    assert (scores[:, None] < scores[None, :])[apart].all()
    torch_top = detector.torch_score()(torch.from_numpy(everywhere @ WEIGHTS[:C].T), torch.from_numpy(everywhere),
                                       torch.from_numpy((everywhere @ WEIGHTS[:C].T).argmax(axis=1)))
    np.testing.assert_allclose(torch_top.numpy(), scores, rtol=1e-12)
    assert DETECTORS.get("react").SCORE_SCALE == 2  # a threshold chosen on the clipped energy is chosen again


def declared_ties():
    """{detector: the settings whose scores tie}, from the registry (Detector.ties)."""
    declared = {}
    for name, settings in CLAIMS:
        detector = build_detector(name, **settings)
        if detector.ties() is not None:
            declared.setdefault(name, []).append(settings)
    return declared


def test_the_docs_list_of_tie_free_scores_is_the_registrys():
    """docs/post-processors.md says which detectors tie (and where); the list is the registry's: every
    detector whose score changed to be tie-free (``SCORE_SCALE`` above 1) or that declares ties is in the
    section's table, and the declared ties are exactly those Detector.ties says. A detector added with a
    tie-free score of its own (scale 1, no declared tie) has nothing to add there."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs/post-processors.md").read_text()
    section = text.split("## Tie-free scores", 1)[1].split("\n## ", 1)[0]
    named = lambda part: {name for name in DETECTORS.names() if f"`{name}`" in part}  # noqa: E731
    changed = {name for name in DETECTORS.names() if DETECTORS.get(name).SCORE_SCALE > 1}
    assert changed | set(declared_ties()) <= named(section)
    [line] = [line for line in section.splitlines() if line.startswith("Declared ties")]
    declared = declared_ties()
    assert named(line) == set(declared) == {"ash"}
    assert all(f"`{key}: {value}`" in line for settings in declared["ash"] for key, value in settings.items())
    assert "ReAct" not in section.split("| the others |", 1)[-1].split("\n", 1)[0]  # no longer "no saturating map"
