"""CAC (agnostophobia.losses.cac): its float64 reference, checked by
tests/contracts/test_loss_references.py; the loss against pytorch-ood 0.4.0's ``CACLoss`` and against the
authors' own code (tests/fixtures/arpl_cac_reference.json, written by
tests/fixtures/make_arpl_cac_reference.py from dimitymiller/cac-openset); the anchor-distance layer.
The trainer's part (the layer trained and kept) is tested with ARPL's in tests/losses/test_arpl.py."""
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from agnostophobia.losses import CACLoss, build_loss, with_logit_layer
from agnostophobia.losses.cac import AnchorDistances
from agnostophobia.models import build_model
from references import loss_reference

with warnings.catch_warnings():  # pytorch-ood's imports warn about things this test does not use
    warnings.simplefilter("ignore")
    import pytorch_ood.loss as ood

REFERENCE = json.loads((Path(__file__).parents[1] / "fixtures" / "arpl_cac_reference.json").read_text())["cac"]
DOUBLE = torch.float64
C, N = 5, 40


@loss_reference("cac", cac_weight=0.3)
def cac_term(loss, z, features, y):
    """Miller et al. 2021, Sec. 3, on the distances d = -z: log(1 + sum_{j != y} e^(d_y - d_j)) + λ d_y on
    the knowns; unknowns add nothing."""
    if y < 0:
        return torch.zeros((), dtype=DOUBLE)
    d = [-v for v in z.tolist()]
    tuplet = math.log(1 + sum(math.exp(d[y] - d[j]) for j in range(len(d)) if j != y))
    return torch.tensor(tuplet + loss.cac_weight * d[y], dtype=DOUBLE)


def distances(seed, n=N):
    g = torch.Generator().manual_seed(seed)
    return 6 * torch.rand(n, C, generator=g, dtype=DOUBLE), torch.randint(0, C, (n,), generator=g)


def test_the_loss_equals_pytorch_ood_where_it_follows_the_authors():
    """pytorch-ood 0.4.0's ``CACLoss(magnitude, alpha)`` (their ``alpha`` is our λ ``cac_weight``) on the same
    distances. Conventions that differ: their Tuplet term leaves out the last class instead of the true one
    (``non_target = arange(C - 1)``; the swap meant for the true class never happens) and sums e^0 = 1 for
    the true class, so the two agree on samples of the last class only, checked here to rtol 1e-5; on the
    others theirs is ours with that sum (checked below). Their ``distance`` is squared, the authors' and
    ours Euclidean: both are given the same distances."""
    d, _ = distances(1)
    labels = torch.full((N,), C - 1)
    ours = build_loss("cac", C, cac_weight=0.1).double()(-d, labels)
    theirs = ood.CACLoss(C, magnitude=10.0, alpha=0.1)(d, labels)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=0)


def test_pytorch_ood_leaves_out_the_last_class_instead_of_the_true_one():
    """The difference named above, exactly: theirs = λ mean d_y + mean log(1 + sum_{j < C-1} e^(d_y - d_j))."""
    d, labels = distances(2)
    true = d.gather(1, labels[:, None])[:, 0]
    as_theirs = 0.1 * true.mean() + torch.log(1 + torch.exp(true[:, None] - d[:, :C - 1]).sum(1)).mean()
    torch.testing.assert_close(ood.CACLoss(C, magnitude=10.0, alpha=0.1)(d, labels), as_theirs, rtol=1e-12, atol=0)
    assert not torch.isclose(build_loss("cac", C, cac_weight=0.1).double()(-d, labels), as_theirs)


def test_the_distances_and_the_loss_equal_the_authors_code():
    """The authors' ``distance_classifier`` (Euclidean, float64) and ``CACLoss`` (train_cacOpenset.py) on
    their fixed inputs: the anchor-distance layer's logits are minus their distances, and the loss and its
    two terms equal theirs, to rtol 1e-5 (measured: ~1e-16)."""
    z = torch.tensor(REFERENCE["z"], dtype=DOUBLE)
    labels = torch.tensor(REFERENCE["labels"])
    num_classes = z.shape[1]
    identity = torch.nn.Linear(num_classes, num_classes, bias=False).double()
    with torch.no_grad():
        identity.weight.copy_(torch.eye(num_classes))
    layer = AnchorDistances(identity, REFERENCE["alpha"])
    with torch.no_grad():
        logits = layer(z)
    np.testing.assert_allclose(-logits.detach().numpy(), REFERENCE["distances"], rtol=1e-5, atol=0)
    loss = build_loss("cac", num_classes, cac_magnitude=REFERENCE["alpha"], cac_weight=REFERENCE["lbda"]).double()
    np.testing.assert_allclose(float(loss(logits, labels)), REFERENCE["loss"], rtol=1e-5, atol=0)
    tuplet = build_loss("cac", num_classes, cac_weight=0.0).double()(logits, labels)
    np.testing.assert_allclose(float(tuplet), REFERENCE["tuplet"], rtol=1e-5, atol=0)
    anchor = -logits.gather(1, labels[:, None]).mean()
    np.testing.assert_allclose(float(anchor), REFERENCE["anchor"], rtol=1e-5, atol=0)
    assert len(REFERENCE["commit"]) == 40


def test_the_network_outputs_negated_distances_to_fixed_anchors_and_keeps_its_state_dict():
    torch.manual_seed(0)
    plain = build_model("lenet++", num_outputs=4)
    model = with_logit_layer(build_model("lenet++", num_outputs=4), build_loss("cac", 4, cac_magnitude=7.0))
    assert isinstance(model.logits, AnchorDistances)
    assert {k: v.shape for k, v in model.state_dict().items()} == {k: v.shape for k, v in plain.state_dict().items()}
    logits, features = model(torch.rand(3, 1, 28, 28))
    z = features.double() @ model.logits.weight.double().T
    expected = -torch.cdist(z, 7.0 * torch.eye(4, dtype=DOUBLE))
    torch.testing.assert_close(logits.double(), expected, rtol=1e-5, atol=1e-5)
    assert not model.logits.anchors.requires_grad and "logits.anchors" not in model.state_dict()


def test_a_layer_that_is_not_linear_to_the_classes_is_refused():
    from agnostophobia.errors import ConfigError
    with pytest.raises(ConfigError, match="not a linear layer"):
        CACLoss(3).logit_layer(torch.nn.Linear(2, 4))
