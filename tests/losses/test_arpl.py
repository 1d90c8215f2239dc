"""ARPL (agnostophobia.losses.arpl): its float64 reference, checked by
tests/contracts/test_loss_references.py; its logits and loss against the authors' own code
(tests/fixtures/arpl_cac_reference.json, written by tests/fixtures/make_arpl_cac_reference.py from
iCGY96/ARPL's ``loss/ARPLoss.py`` and ``loss/Dist.py``); its reciprocal points and radius trained and
kept through the trainer."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from agnostophobia.losses import ARPLoss, build_loss, with_logit_layer
from agnostophobia.losses.arpl import ReciprocalPoints
from agnostophobia.models import build_model
from references import log_softmax_row, loss_reference

REFERENCE = json.loads((Path(__file__).parents[1] / "fixtures" / "arpl_cac_reference.json").read_text())["arpl"]
DOUBLE = torch.float64


@loss_reference("arpl", arpl_weight=0.3, arpl_temperature=2.0)
def arpl_term(loss, z, features, y):
    """Chen et al. 2021, Sec. 3: cross-entropy of z / T, plus λ max(0, |F - P^y|^2 / D - R + 1) on the
    knowns (P: the loss's reciprocal points, R its radius); unknowns add nothing."""
    if y < 0:
        return torch.zeros((), dtype=DOUBLE)
    point = loss.points.detach().double()[y]
    distance = sum((f - p) ** 2 for f, p in zip(features.tolist(), point.tolist())) / len(features)
    margin = max(0.0, distance - float(loss.radius.detach()) + 1.0)
    return -log_softmax_row(z / loss.arpl_temperature)[y] + loss.arpl_weight * margin


def arpl_network(points, width):
    """A reciprocal-points layer holding ``points`` (float64), and a loss reading it."""
    loss = build_loss("arpl", len(points), arpl_weight=0.1).double()
    layer = loss.logit_layer(torch.nn.Linear(width, len(points), bias=False)).double()
    with torch.no_grad():
        layer.weight.copy_(torch.as_tensor(points, dtype=DOUBLE))
    return loss, layer


@pytest.mark.parametrize("run", range(len(REFERENCE["runs"])))
def test_logits_and_loss_equal_the_authors_code(run):
    """The logits (the network's, through ReciprocalPoints) and the batch loss of the authors'
    ``ARPLoss(x, y, labels)``, on their fixed inputs and parameters, to rtol 1e-5 in float64 (measured:
    0). Their ``weight_pl`` / ``temp`` are our ``arpl_weight`` / ``arpl_temperature``."""
    settings = REFERENCE["runs"][run]
    features = torch.tensor(REFERENCE["features"], dtype=DOUBLE)
    labels = torch.tensor(REFERENCE["labels"])
    loss, layer = arpl_network(REFERENCE["points"], features.shape[1])
    loss = build_loss("arpl", layer.out_features, arpl_weight=settings["weight_pl"],
                      arpl_temperature=settings["temp"]).double()
    loss.logit_layer(layer)
    with torch.no_grad():
        loss.radius.fill_(REFERENCE["radius"])
    logits = layer(features)
    np.testing.assert_allclose(logits.detach().numpy(), settings["logits"], rtol=1e-5, atol=0)
    value = loss(logits, labels, features=features)
    np.testing.assert_allclose(float(value.detach()), settings["loss"], rtol=1e-5, atol=0)


def test_the_reference_was_made_from_a_recorded_commit_of_the_authors_code():
    assert len(REFERENCE["commit"]) == 40 and REFERENCE["files"] == ["loss/__init__.py", "loss/ARPLoss.py",
                                                                     "loss/Dist.py"]
    features = np.asarray(REFERENCE["features"])
    points = np.asarray(REFERENCE["points"])
    margins = ((features - points[REFERENCE["labels"]]) ** 2).mean(1) - REFERENCE["radius"] + 1
    assert (margins > 0).any()  # the margin term is part of what the reference checks


def test_the_network_outputs_distances_to_its_reciprocal_points_and_keeps_its_state_dict_names():
    torch.manual_seed(0)
    plain = build_model("lenet++", num_outputs=10)
    loss = build_loss("arpl", 10)
    model = with_logit_layer(build_model("lenet++", num_outputs=10), loss)
    assert isinstance(model.logits, ReciprocalPoints) and loss.points is model.logits.weight
    assert {k: v.shape for k, v in model.state_dict().items()} == {k: v.shape for k, v in plain.state_dict().items()}
    logits, features = model(torch.rand(3, 1, 28, 28))
    points = model.logits.weight
    expected = ((features[:, None] - points[None]) ** 2).mean(-1) - features @ points.T
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)


def test_the_margin_term_trains_the_points_and_the_radius():
    loss, layer = arpl_network(np.eye(3, 2), 2)
    features = torch.tensor([[3.0, 0.0], [0.0, 0.2]], dtype=DOUBLE, requires_grad=True)
    loss(layer(features), torch.tensor([0, 1]), features=features).backward()
    assert layer.weight.grad.abs().sum() > 0 and loss.radius.grad is not None and float(loss.radius.grad) < 0


def test_a_network_without_reciprocal_points_is_refused_by_attach():
    from agnostophobia.errors import ConfigError
    with pytest.raises(ConfigError, match="no reciprocal points"):
        ARPLoss(10).attach(build_model("lenet++", num_outputs=10))


@pytest.mark.parametrize("approach", ["arpl", "cac"])
def test_a_tiny_training_trains_and_keeps_the_distance_layer_and_loss_state(tmp_path, approach):
    """Through the trainer: the points / the linear layer before the anchors and ARPL's radius are trained
    (they move), kept in the checkpoints (points: ``model``'s ``logits.weight``; R: ``loss`` of last.pt), and
    the network loaded back outputs the logits the run stored."""
    from agnostophobia.data import make_glyph_folders
    from agnostophobia.rundir import ModelDir
    from agnostophobia.training import TrainConfig, fit, load_trained_model, protocol_for
    from agnostophobia.training.checkpoint import load_checkpoint

    layout = make_glyph_folders(tmp_path / "glyphs", per_split={"train": 6, "val": 2, "test": 2})
    config = TrainConfig(protocol=layout, model="mlp", model_kwargs={"hidden": [16]}, approach=approach, epochs=2,
                         batch_size=8, lr=0.05, device="cpu", progress=False, tensorboard=False,
                         precision="fp32")  # the logits are compared at 1e-5: on a CPU with bf16, auto may take it
    protocol = protocol_for(config)
    training = fit(config, protocol, tmp_path / "run")
    saved = ModelDir(tmp_path / "run")
    last, best = load_checkpoint(saved.last), load_checkpoint(saved.best)
    assert set(best["model"]) == set(last["model"]) and "logits.weight" in best["model"]
    if approach == "arpl":
        assert set(last["loss"]) == {"radius"} and float(last["loss"]["radius"]) != 0.0  # R moved from 0
        assert training.loss_fn.points is training.model.logits.weight  # the margin term reads the network's
    trained = load_trained_model(tmp_path / "run", device="cpu")
    assert type(trained.model.logits).__name__ == {"arpl": "ReciprocalPoints", "cac": "AnchorDistances"}[approach]
    torch.testing.assert_close(trained.model.state_dict(), best["model"])
    images = protocol.test_known.images
    logits, features = trained.outputs(images)
    # the logits are the distance layer's on the network's own features, as the run computed them
    expected = trained.model.logits(torch.from_numpy(features)).detach().numpy()
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)
    training.model.load_state_dict(best["model"])
    with torch.no_grad():
        run_logits = training.model.eval()(torch.from_numpy(np.asarray(images)).float() / 255)[0].numpy()
    np.testing.assert_allclose(logits, run_logits, rtol=1e-5, atol=1e-5)
