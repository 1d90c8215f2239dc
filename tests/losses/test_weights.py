"""Where sample weights apply (issue 33, item 4): the training pipeline weights by default, as
the authors' Keras training did; a loss module called directly weights nothing unless given
``sample_weight``. Both defaults are pinned here, so a change to either is a decision."""
from __future__ import annotations

import torch

from agnostophobia.losses import build_loss, inverse_frequency_class_weights, sample_weights
from agnostophobia.training.config import TrainConfig, load_experiment


def test_the_pipeline_weights_by_default_as_the_authors_did():
    assert TrainConfig().sample_weighting is True
    assert load_experiment("lenet++").train.sample_weighting and load_experiment("cifar").train.sample_weighting


def test_a_loss_called_directly_is_unweighted_unless_given_weights():
    torch.manual_seed(0)
    logits, features = torch.randn(6, 3), torch.randn(6, 2)
    labels = torch.tensor([0, 0, 0, 0, 1, -1])
    loss = build_loss("entropic", 3)
    plain = loss(logits, labels, features=features)
    assert torch.equal(plain, loss(logits, labels, features=features, sample_weight=torch.ones(6)))
    weights = sample_weights(labels, inverse_frequency_class_weights(labels, 3))
    assert not torch.allclose(plain, loss(logits, labels, features=features, sample_weight=weights))
