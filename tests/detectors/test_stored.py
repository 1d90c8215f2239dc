"""Scores of every applicable detector on a stored model (``detectors.stored``): the right
logit columns per network, fitted detectors fitted once, the file reused while nothing changed."""
from __future__ import annotations

import numpy as np
import pytest

from agnostophobia.detectors import DETECTORS, KNNDetector, OpenMax, build_detector, detector_applies
from agnostophobia.detectors.stored import SCORES_FILE, KeptFits, detector_settings, model_scores
from agnostophobia.training import records
from agnostophobia.rundir import FITTED_FILE, LAST_LAYER, ModelDir
from agnostophobia.errors import ConfigError
from agnostophobia.training.outputs import save_last_layer, save_outputs

C = 4
SETTINGS = {"knn": {"k": 5}, "openmax": {"tail_size": 10, "alpha": 2}}


EXTRA = 2  # feature dimensions the logits ignore, so that D = C + 2 > C and ViM applies


def last_layer(background=False):
    """A bias-free logit layer: class c along e_c (and a background row), blind to the EXTRA dimensions."""
    weights = np.concatenate([np.eye(C) * 3, np.full((1, C), 0.25)]) if background else np.eye(C) * 3
    return np.hstack([weights, np.zeros((len(weights), EXTRA))])


def split(rng, n, unknown=False, background=False):
    labels = np.full(n, -1) if unknown else rng.integers(0, C, n)
    features = rng.normal(0, 0.3, (n, C)) + (0 if unknown else np.eye(C)[labels])
    features = np.hstack([features, rng.normal(0, 0.3, (n, EXTRA))])
    return {"logits": (features @ last_layer(background).T).astype(np.float32),
            "features": features.astype(np.float32), "labels": labels}


def make_model(model_dir, background=False, seed=0, fit=True, unknowns=("devanagari",), layer=True):
    rng = np.random.default_rng(seed)
    outputs = {"known": split(rng, 80, background=background),
               **{name: split(rng, 40, unknown=True, background=background) for name in unknowns}}
    save_outputs(model_dir / "outputs.npz", outputs)
    if fit:
        save_outputs(model_dir / "fit_outputs.npz", {"train": split(rng, 120, background=background)})
    if layer:
        save_last_layer(model_dir / LAST_LAYER, {"weight": last_layer(background)})
    return outputs


def test_every_applicable_detector_scores_the_right_columns(tmp_path):
    outputs = make_model(tmp_path / "bg", background=True)
    stored = model_scores(tmp_path / "bg", "background", SETTINGS)
    assert stored.num_classes == C and stored.unknown_sets == ["devanagari"]
    # the background score applies here; cac scores cac networks alone (their logits are anchor distances)
    assert set(stored.detectors) == set(DETECTORS.names()) - {"cac"}
    known = outputs["known"]
    for name in stored.detectors:
        detector = build_detector(name, **SETTINGS.get(name, {}))
        if detector.needs_fit:
            continue
        if detector.needs_last_layer:
            detector.use_last_layer(last_layer(background=True)[:C])
        logits = known["logits"] if detector.reads_background_column else known["logits"][:, :C]
        direct = detector.scores(logits, known["features"])
        got = stored.scores(name, "known")
        np.testing.assert_array_equal(got.argmax(1), direct.argmax(1), err_msg=name)
        np.testing.assert_array_equal(got.max(1), direct.max(1), err_msg=name)
    # a network without a background class: the background score does not apply
    make_model(tmp_path / "ent")
    assert set(model_scores(tmp_path / "ent", "entropic", SETTINGS).detectors) == set(DETECTORS.names()) - {
        name for name in DETECTORS.names() if DETECTORS.get(name).reads_background_column} - {"cac"}


def test_known_vs_unknown_labels_and_the_fitted_detectors_see_the_known_columns(tmp_path):
    make_model(tmp_path / "bg", background=True)
    stored = model_scores(tmp_path / "bg", "background", SETTINGS)
    scores, labels = stored.known_vs_unknown("knn", "devanagari")
    assert scores.shape == (120, C) and (labels[80:] == -1).all() and (labels[:80] >= 0).all()
    assert "openmax" in stored.detectors and "knn" in stored.detectors


def test_fitted_detectors_are_fitted_once_and_the_stored_scores_reused(tmp_path, monkeypatch):
    fits = []
    for cls in (KNNDetector, OpenMax):
        original = cls.fit
        monkeypatch.setattr(cls, "fit", lambda self, *a, _f=original: fits.append(self.name) or _f(self, *a))
    make_model(tmp_path, seed=1)
    first = model_scores(tmp_path, "entropic", SETTINGS)
    assert sorted(fits) == ["knn", "openmax"] and (tmp_path / SCORES_FILE).exists()
    again = model_scores(tmp_path, "entropic", SETTINGS)
    assert sorted(fits) == ["knn", "openmax"]  # read back, not refitted
    for name in first.detectors:
        np.testing.assert_array_equal(again.scores(name, "devanagari"), first.scores(name, "devanagari"))
    model_scores(tmp_path, "entropic", {**SETTINGS, "knn": {"k": 7}})  # other settings: computed anew
    assert sorted(fits) == ["knn", "knn", "openmax"]  # OpenMax's fit restored (fitted_detectors.npz)
    make_model(tmp_path, seed=1, unknowns=("devanagari", "notmnist"), fit=False)  # a set added
    assert model_scores(tmp_path, "entropic", SETTINGS).unknown_sets == ["devanagari", "notmnist"]
    assert sorted(fits) == ["knn", "knn", "knn", "openmax"]  # k-NN keeps no state: its fit is a copy


def test_kept_fits_are_of_these_training_outputs_and_never_trusted_when_damaged(tmp_path, monkeypatch):
    """fitted_detectors.npz: an entry restores only for the training outputs and settings it was
    fitted on; one whose arrays changed is refitted, and the file is rewritten whole."""
    fits = []
    original = OpenMax.fit
    monkeypatch.setattr(OpenMax, "fit", lambda self, *a: fits.append(self.tail_size) or original(self, *a))
    make_model(tmp_path, seed=2)
    first = model_scores(tmp_path, "entropic", SETTINGS)
    kept = tmp_path / FITTED_FILE
    kept_detectors = sorted(e["meta"]["detector"] for e in records.read_fitted_detectors(kept).values())
    assert kept_detectors == sorted(n for n in first.detectors if DETECTORS.get(n).FITTED_STATE)
    (tmp_path / SCORES_FILE).unlink()
    again = model_scores(tmp_path, "entropic", SETTINGS)
    assert fits == [10]  # restored
    np.testing.assert_array_equal(again.scores("openmax", "devanagari"), first.scores("openmax", "devanagari"))
    with np.load(kept) as data:
        arrays = dict(data)
    entry = next(key for key in arrays if key.endswith("__weibull_scale_"))
    arrays[entry] = arrays[entry] * 2  # a changed number: its digest no longer matches
    np.savez(kept, **arrays)
    (tmp_path / SCORES_FILE).unlink()
    damaged = model_scores(tmp_path, "entropic", SETTINGS)
    assert fits == [10, 10]
    np.testing.assert_array_equal(damaged.scores("openmax", "devanagari"), first.scores("openmax", "devanagari"))
    kept.write_bytes(b"not an npz")
    (tmp_path / SCORES_FILE).unlink()
    model_scores(tmp_path, "entropic", SETTINGS)
    assert fits == [10, 10, 10]
    assert sorted(e["meta"]["detector"] for e in records.read_fitted_detectors(kept).values()) == kept_detectors
    rng = np.random.default_rng(9)  # other training outputs: every entry of the old ones is dropped
    save_outputs(tmp_path / "fit_outputs.npz", {"train": split(rng, 120)})
    model_scores(tmp_path, "entropic", SETTINGS)
    assert fits == [10, 10, 10, 10]
    assert {e["meta"]["fit"] for e in records.read_fitted_detectors(kept).values()} == \
        {KeptFits(ModelDir.at(tmp_path)).fit_digest()}


def test_a_kept_fit_on_the_last_layer_is_refitted_when_the_layer_changes(tmp_path, monkeypatch):
    """ViM's principal space is fitted around the layer's origin: a kept fit of another layer
    (last_layer.npz rewritten, or recomputed from another best.pt) is never restored."""
    from agnostophobia.detectors.vim import ViM

    fits = []
    original = ViM.fit
    monkeypatch.setattr(ViM, "fit", lambda self, *a: fits.append(1) or original(self, *a))
    make_model(tmp_path)
    first = model_scores(tmp_path, "entropic", SETTINGS)
    (tmp_path / SCORES_FILE).unlink()
    model_scores(tmp_path, "entropic", SETTINGS)
    assert len(fits) == 1  # restored while the layer is the same
    layer = last_layer()  # a bias moves the origin u = -pinv(W) b that ViM's space is fitted around
    save_last_layer(tmp_path / LAST_LAYER, {"weight": layer, "bias": np.array([1.0, -1.0, 0.5, 2.0])})
    (tmp_path / SCORES_FILE).unlink()
    again = model_scores(tmp_path, "entropic", SETTINGS)
    assert len(fits) == 2
    assert not np.allclose(again.scores("vim", "devanagari"), first.scores("vim", "devanagari"))


def test_missing_training_outputs_and_failed_fits_are_notes(tmp_path):
    make_model(tmp_path / "a", fit=False)
    stored = model_scores(tmp_path / "a", "softmax", SETTINGS)
    assert "knn" not in stored.detectors and "fit_outputs.npz" in stored.notes["knn"]
    make_model(tmp_path / "b")
    stored = model_scores(tmp_path / "b", "softmax", {"openmax": {"tail_size": 1000}})
    assert "openmax" not in stored.detectors and "tail_size=1000" in stored.notes["openmax"]


#: The detectors that read the last layer of the entropic networks here (cac reads a cac network's: below).
LAST_LAYER_DETECTORS = sorted(n for n in DETECTORS.names()
                              if DETECTORS.get(n).needs_last_layer and detector_applies(n, "entropic"))


def test_a_model_without_a_last_layer_skips_the_detectors_that_read_it_with_a_one_line_note(tmp_path):
    """An older run: no last_layer.npz and no best.pt to recompute it from; every other detector scores."""
    make_model(tmp_path, layer=False)
    stored = model_scores(tmp_path, "entropic", SETTINGS)
    assert LAST_LAYER_DETECTORS == ["ash", "react", "scale", "vim"]
    for name in LAST_LAYER_DETECTORS:
        assert name not in stored.detectors
        assert stored.notes[name] == ("not evaluated: no last layer is stored (last_layer.npz) and there is no "
                                      "best.pt to read it from")
    assert {"knn", "mahalanobis", "relative-mahalanobis", "gen"} <= set(stored.detectors)


def test_an_older_run_has_its_last_layer_recomputed_from_best_pt_once(tmp_path):
    """The checkpoint's logits layer (a bias where it has one: the ensemble's MLP) is written beside
    the outputs, then read from there; the scores are those of the layer handed over directly."""
    import torch

    from agnostophobia.models import build_model

    make_model(tmp_path, layer=False)
    weight, bias = last_layer(), np.arange(C, dtype=np.float64) / 10
    config = {"model": "mlp", "model_kwargs": {"hidden": [C + EXTRA]}, "approach": "entropic", "seed": 0}
    state = {**build_model("mlp", C, **config["model_kwargs"]).state_dict(),  # checked as the run's network
             "logits.weight": torch.tensor(weight), "logits.bias": torch.tensor(bias)}
    torch.save({"model": state, "config": config}, tmp_path / "best.pt")
    stored = model_scores(tmp_path, "entropic", SETTINGS)
    assert set(LAST_LAYER_DETECTORS) <= set(stored.detectors)
    kept = records.read_last_layer(tmp_path / LAST_LAYER)
    np.testing.assert_array_equal(kept["weight"], weight)
    np.testing.assert_array_equal(kept["bias"], bias)
    outputs = records.read_outputs(tmp_path / "outputs.npz")["known"]
    direct = build_detector("ash").use_last_layer(weight, bias).scores(outputs["logits"], outputs["features"])
    np.testing.assert_array_equal(stored.scores("ash", "known").max(1), direct.max(1))
    (tmp_path / "best.pt").unlink()  # read from last_layer.npz from now on
    assert set(LAST_LAYER_DETECTORS) <= set(model_scores(tmp_path, "entropic", {"ash": {"variant": "p"}}).detectors)


def test_a_cac_model_is_scored_at_its_anchor_means_from_its_last_layer_and_skipped_without_one(tmp_path):
    """The cac detector (``anchors: means``) of a cac model reads the stored last layer (CAC's linear layer
    z = W F) and is fitted on the training outputs, as when handed them directly; ``anchors: fixed`` reads
    the logits alone, and a model without a last layer has the one-line note for its default only."""
    outputs = make_model(tmp_path / "cac")
    stored = model_scores(tmp_path / "cac", "cac", {})
    fit = records.read_outputs(tmp_path / "cac" / "fit_outputs.npz")["train"]
    direct = build_detector("cac").use_last_layer(last_layer()).fit(fit["logits"], fit["features"], fit["labels"])
    known = outputs["known"]
    np.testing.assert_array_equal(stored.scores("cac", "known").max(1),
                                  direct.scores(known["logits"], known["features"]).max(1))
    make_model(tmp_path / "old", layer=False)
    assert "cac" not in model_scores(tmp_path / "old", "cac", {}).detectors
    assert "cac" in model_scores(tmp_path / "old", "cac", {"cac": {"anchors": "fixed"}}).detectors


def test_vim_is_not_applicable_where_the_features_have_no_more_dimensions_than_classes(tmp_path):
    """LeNet++'s 2-D features with 10 classes: the note says so, and why."""
    rng = np.random.default_rng(0)
    layer = np.eye(C)[:, :2] * 3  # D = 2 < C = 4

    def two_d(n, unknown=False):
        features = rng.normal(size=(n, 2))
        return {"logits": features @ layer.T, "features": features,
                "labels": np.full(n, -1) if unknown else rng.integers(0, C, n)}

    save_outputs(tmp_path / "outputs.npz", {"known": two_d(50), "devanagari": two_d(20, unknown=True)})
    save_outputs(tmp_path / "fit_outputs.npz", {"train": two_d(200)})
    save_last_layer(tmp_path / LAST_LAYER, {"weight": layer})
    stored = model_scores(tmp_path, "entropic", SETTINGS)
    assert "vim" not in stored.detectors
    assert stored.notes["vim"].startswith("not applicable: ViM needs more feature dimensions than classes (D=2 <= C=4)")
    assert {"react", "ash", "scale", "mahalanobis"} <= set(stored.detectors)
    assert list(stored.not_applicable) == ["vim"] and stored.not_applicable["vim"].startswith("ViM needs more")


def test_the_matrix_says_not_applicable_with_the_reason():
    """A detector that does not apply is "not applicable" in the matrix, its reason under the table; a cell
    that is missing for another reason (a failed fit) stays "—"."""
    from agnostophobia.experiments.report import matrix_markdown

    def row(approach, detector, ccr):
        return {"row": f"{approach}/{detector}", "approach": approach, "detector": detector, "unknowns": "devanagari",
                "ccr_at_fpr": {"1e-2": ccr}, "num_unknown": 1000, "auroc": ccr + 0.1}

    why = "ViM needs more feature dimensions than classes (D=2 <= C=10)"
    metrics = {"results": [row("entropic", "softmax", 0.5), row("softmax", "softmax", 0.4),
                           row("softmax", "vim", 0.3)],
               "not_applicable": {"entropic": {"vim": why}}}
    text = matrix_markdown(metrics)
    assert "| entropic | **0.5000** | not applicable |" in text
    assert f"Not applicable: vim: {why}" in text
    metrics["not_applicable"] = {}
    assert "applicable" not in matrix_markdown(metrics) and "—" in matrix_markdown(metrics)


def test_the_matrix_reads_ccr_only_where_the_unknowns_support_it_and_always_auroc():
    """1,000 unknowns support 1e-2 (ten false positives), 999 only 1e-1; 99 support no FPR of
    Table 2: AUROC alone, said so."""
    from agnostophobia.experiments.report import matrix_markdown

    def metrics(n):
        return {"results": [{"row": "entropic", "approach": "entropic", "detector": "softmax", "unknowns": "letters",
                             "ccr_at_fpr": {"1e-4": None, "1e-3": 0.1, "1e-2": 0.5, "1e-1": 0.7},
                             "num_unknown": n, "auroc": 0.8}]}

    assert "CCR at FPR 1e-2:" in matrix_markdown(metrics(1000)) and "**0.5000**" in matrix_markdown(metrics(1000))
    assert "CCR at FPR 1e-1:" in matrix_markdown(metrics(999)) and "**0.7000**" in matrix_markdown(metrics(999))
    few = matrix_markdown(metrics(99))
    assert "No CCR: 99 unknowns support none of Table 2's FPRs" in few and "CCR at FPR" not in few
    assert "AUROC:" in few and "**0.8000**" in few


def test_a_damaged_last_layer_is_one_line_naming_the_file_and_key(tmp_path):
    make_model(tmp_path)
    np.savez(tmp_path / LAST_LAYER, weight=np.full((C, C + EXTRA), np.nan))
    with pytest.raises(records.RecordError, match=r"last_layer.npz: weight: 24 non-finite value\(s\)"):
        model_scores(tmp_path, "entropic", SETTINGS)
    np.savez(tmp_path / LAST_LAYER, weight=last_layer(), bias=np.zeros(C + 1))
    with pytest.raises(records.RecordError, match=r"last_layer.npz: bias: must be a float array \(4,\)"):
        model_scores(tmp_path, "entropic", SETTINGS)


def test_a_damaged_scores_file_is_recomputed(tmp_path):
    make_model(tmp_path)
    before = model_scores(tmp_path, "objectosphere", SETTINGS)
    (tmp_path / SCORES_FILE).write_bytes(b"not an npz")
    after = model_scores(tmp_path, "objectosphere", SETTINGS)
    np.testing.assert_array_equal(after.scores("knn", "known"), before.scores("knn", "known"))


def test_settings_are_read_from_keys_named_like_detectors():
    config = {"openmax": {"tail_size": 5}, "knn": {"k": 3}, "lr": 0.1, "model": "lenet++"}
    assert detector_settings(config) == {"openmax": {"tail_size": 5}, "knn": {"k": 3}}
    with pytest.raises(ValueError, match="knn"):
        build_detector("knn", **{"neighbours": 3})


# ------------------------------------------------------------------ detectors: {NAME: {setting: value}}
def test_any_detectors_settings_are_read_from_the_detectors_mapping():
    config = {"detectors": {"evm": {"tail_size": 10, "cover_threshold": 0.7}, "postmax": {"tail_fraction": 0.5}}}
    assert detector_settings(config) == config["detectors"]


def test_the_old_top_level_keys_mean_the_same_and_detectors_wins_where_both_set_a_key():
    old = {"openmax": {"tail_size": 5, "alpha": 2}, "knn": {"k": 3}}
    assert detector_settings(old) == detector_settings({"detectors": old}) == old
    both = {"knn": {"k": 3, "normalize": False}, "detectors": {"knn": {"k": 7}}}
    assert detector_settings(both) == {"knn": {"k": 7, "normalize": False}}


@pytest.mark.parametrize("config, path", [
    ({"detectors": {"knn": {"k": "x"}}}, "detectors.knn.k"),
    ({"detectors": {"knn": {"neighbours": 3}}}, "detectors.knn.neighbours"),
    ({"detectors": {"knm": {"k": 3}}}, "detectors.knm"),
    ({"detectors": {"postmax": {"tail_fraction": 0}}}, "detectors.postmax.tail_fraction"),
    ({"detectors": {"evm": {"cover_threshold": True}}}, "detectors.evm.cover_threshold"),
    ({"detectors": {"knn": 5}}, "detectors.knn"),
    ({"knn": {"k": 0}}, "knn.k"),
])
def test_a_bad_setting_is_one_line_naming_its_key_path(config, path):
    with pytest.raises(ConfigError) as info:
        detector_settings(config, "budgets.cpu.")
    message = str(info.value)
    assert f"'budgets.cpu.{path}'" in message and "\n" not in message


def test_tuned_settings_override_the_config_per_approach_only():
    from agnostophobia.detectors.stored import RunSettings

    config = {"knn": {"k": 50, "normalize": True}, "openmax": {"tail_size": 20}}
    settings = RunSettings(config, {"entropic": {"knn": {"k": 7}}}, target_fpr=0.01)
    assert settings.for_approach("entropic") == {"knn": {"k": 7, "normalize": True}, "openmax": {"tail_size": 20}}
    assert settings.for_approach("softmax") == config


def test_an_experiment_config_carries_the_detectors_mapping_and_old_configs_load_unchanged():
    from agnostophobia.training.config import parse_experiment

    new = parse_experiment({"approaches": ["entropic"], "detectors": {"knn": {"k": 7}, "evm": {"tail_size": 20}}})
    # k from detectors.knn; what the config leaves out is the detector's declared default, written nowhere else
    assert detector_settings(new.train.to_dict())["knn"] == {"k": 7}
    from agnostophobia.detectors import DETECTORS
    built = DETECTORS.get("knn")(**detector_settings(new.train.to_dict())["knn"])
    assert (built.k, built.normalize, built.class_conditional) == (7, True, False)
    assert new.train.openmax == {} and new.train.knn == {}  # TrainConfig holds no detector's defaults
    assert detector_settings(new.train.to_dict())["evm"] == {"tail_size": 20}
    old = parse_experiment({"approaches": ["entropic"], "openmax": {"tail_size": 3, "alpha": 2}, "knn": {"k": 4}})
    assert old.train.detectors == {}
    assert detector_settings(old.train.to_dict()) == {"openmax": {"tail_size": 3, "alpha": 2}, "knn": {"k": 4}}
