"""Adding a loss is its registered class alone: a loss registered here, with its own facts
(background class or not) and its own hyper-parameter, is an approach of a config, trains,
and is scored by the detectors that apply to it, with no other edit."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from agnostophobia.detectors import DETECTORS, detector_applies
from agnostophobia.detectors.stored import model_scores
from agnostophobia.errors import ConfigError
from agnostophobia.losses import LOSSES, OpenSetLoss, known_columns
from agnostophobia.training.config import parse_experiment
from agnostophobia.training.outputs import save_outputs
from agnostophobia.training.outputs import predict
from agnostophobia.training.fitting import fit
from synthetic import synthetic_protocol


def tempered_loss(with_background: bool):
    class TemperedLoss(OpenSetLoss):
        """Cross-entropy of logits / temperature; unknowns as the background class, if any."""
        trains_on_unknowns = with_background
        background_class = with_background

        def __init__(self, num_classes: int, temperature: float, reduction: str = "mean"):
            super().__init__(num_classes, reduction)
            if not temperature > 0:
                raise ValueError(f"temperature must be > 0, got {temperature!r}")
            self.temperature = temperature

        def forward(self, logits, labels, sample_weight=None):
            logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
            target = torch.where(labels >= 0, labels, torch.full_like(labels, self.num_classes))
            if not self.background_class:  # knowns only: unknowns add nothing
                target = torch.where(labels >= 0, labels, torch.full_like(labels, -100))
            per_sample = F.cross_entropy(logits / self.temperature, target, reduction="none", ignore_index=-100)
            return self._reduce(per_sample, labels, weight)

    return TemperedLoss


@pytest.fixture(params=[True, False], ids=["background", "no-background"])
def new_loss(request, monkeypatch):
    name = "tempered-" + request.node.callspec.id
    monkeypatch.setitem(LOSSES._items, name, tempered_loss(request.param))  # registered for this test only
    return name, request.param


def test_a_new_loss_trains_and_is_scored_by_the_detectors_that_apply(new_loss, tmp_path):
    name, with_background = new_loss
    protocol = synthetic_protocol()
    experiment = parse_experiment({"approaches": [name], "loss": {"temperature": 2.0}, "epochs": 1,
                                   "batch_size": 16, "lr": 1e-3, "tensorboard": False, "progress": False})
    cfg = experiment.for_approach(name, 0)
    run = fit(cfg, protocol, tmp_path)
    assert run.loss_fn.temperature == 2.0 and run.loss_fn.num_outputs == protocol.num_classes + with_background
    outputs = {}
    for split in (protocol.test_known, *protocol.test_unknowns.values()):
        logits, features = predict(run.model, split.images)
        outputs[split.name] = {"logits": logits, "features": features, "labels": split.labels}
    save_outputs(tmp_path / "outputs.npz", outputs)
    known = protocol.train.labels >= 0  # fitted detectors learn from the training knowns (fit_outputs.npz)
    train_logits, train_features = predict(run.model, protocol.train.images[known])
    save_outputs(tmp_path / "fit_outputs.npz", {"train": {"logits": train_logits, "features": train_features,
                                                          "labels": protocol.train.labels[known]}})
    assert known_columns(name, train_logits.shape[1]) == protocol.num_classes
    stored = model_scores(tmp_path, name, {"knn": {"k": 3}, "openmax": {"tail_size": 5}})
    applicable = {d for d in DETECTORS.names() if detector_applies(d, name)}
    reads_background = {d for d in DETECTORS.names() if DETECTORS.get(d).reads_background_column}
    for_others = {d for d in DETECTORS.names() if DETECTORS.get(d).approaches}  # cac: a cac network's distances
    assert applicable == set(DETECTORS.names()) - for_others - (set() if with_background else reads_background)
    assert set(stored.detectors) | set(stored.notes) == applicable and stored.num_classes == protocol.num_classes
    for detector in stored.detectors:
        assert stored.scores(detector, "known").shape == (len(protocol.test_known.labels), protocol.num_classes)


def test_a_new_loss_needs_its_settings(new_loss):
    name, _ = new_loss
    with pytest.raises(ConfigError, match="temperature"):
        parse_experiment({"approaches": [name]}).for_approach(name, 0)
    with pytest.raises(ConfigError, match="temperature must be > 0"):
        parse_experiment({"approaches": [name], "loss": {"temperature": 0}}).for_approach(name, 0)
