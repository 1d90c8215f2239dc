"""Tests of the training peers (issue 34) beyond their float64 references (each in its own test
module, tests/losses/test_<module>.py, checked by tests/contracts/test_loss_references.py): the
formula-free identities between them, the batch hooks and the queues, and pytorch-ood 0.4.0 where it implements the same loss (the conventions that differ named and
converted). Tiny random tensors, CPU, seconds."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

from agnostophobia.deploy.calibration import default_detector
from agnostophobia.detectors import DETECTORS
from agnostophobia.losses import LOSSES, PAPER_APPROACHES, REDUCTIONS, build_loss
from references import log_softmax_row
from tests.losses.test_mixoe import mixoe_term

with warnings.catch_warnings():  # pytorch-ood's imports warn about things this test does not use
    warnings.simplefilter("ignore")
    import pytorch_ood.loss as ood

C, N = 5, 40
# the fine-tuning variants are these losses again, started from a softmax network (tests/training/test_fine_tune.py)
PEERS = [name for name in LOSSES.registered() if name not in PAPER_APPROACHES and LOSSES.get(name).fine_tune is None]
#: The package's own peers, whose seed batching this file knows (only MixOE and VOS keep state
#: between steps); a loss added later is checked by the registry-wide tests and its own test file.
OWN_PEERS = ("outlier-exposure", "energy-regularized", "maximal-entropy", "logitnorm", "mixoe", "vos")
DOUBLE = torch.float64


def batch(seed=0, n=N, knowns=True, negatives=True, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    logits = scale * torch.randn(n, C, generator=g, dtype=DOUBLE)
    labels = torch.randint(0, C, (n,), generator=g)
    if negatives:
        labels[torch.rand(n, generator=g) < (0.4 if knowns else 2)] = -1
    weights = 3 * torch.rand(n, generator=g, dtype=DOUBLE)
    return logits, labels, weights


# each loss's float64 reference is in its own test module (tests/losses/test_<module>.py), checked with
# every registered loss's by tests/contracts/test_loss_references.py
def reference_mean(name, terms, labels):
    known = labels >= 0
    cls = LOSSES.get(name)
    if cls.mean_per_term:  # each expectation over its own samples
        return sum(terms[part].sum() / max(int(part.sum()), 1) for part in (known, ~known))
    return terms.sum() / (len(labels) if cls.trains_on_unknowns else max(int(known.sum()), 1))


# --------------------------------------------------------------------------- formula-free identities
def test_outlier_exposure_on_knowns_alone_is_cross_entropy():
    logits, labels, _ = batch(4, negatives=False)
    torch.testing.assert_close(build_loss("outlier-exposure", C)(logits, labels), F.cross_entropy(logits, labels),
                               rtol=1e-6, atol=0)


def test_outlier_exposure_on_negatives_alone_is_lambda_times_entropic_unknown_term():
    logits, _, _ = batch(5)
    negatives = -torch.ones(N, dtype=torch.long)
    oe = build_loss("outlier-exposure", C, outlier_weight=0.7)
    torch.testing.assert_close(oe(logits, negatives), 0.7 * build_loss("entropic", C)(logits, negatives),
                               rtol=1e-6, atol=0)


def test_outlier_exposure_at_weight_one_averaged_over_the_batch_is_entropic_open_set():
    """The ablation's first step (docs/training-peers.md): OE with lambda = 1 and one mixed-batch
    mean is EOS on any batch; per-term averaging, the other factor, differs from it."""
    logits, labels, w = batch(7)
    eos = build_loss("entropic", C)
    as_eos = build_loss("outlier-exposure", C, outlier_weight=1.0, outlier_average="batch")
    for weight in (None, w):
        torch.testing.assert_close(as_eos(logits, labels, sample_weight=weight),
                                   eos(logits, labels, sample_weight=weight), rtol=1e-6, atol=0)
    per_term = build_loss("outlier-exposure", C, outlier_weight=1.0)(logits, labels)
    assert not torch.isclose(per_term, eos(logits, labels), rtol=1e-3)
    with pytest.raises(ValueError, match="outlier_average"):
        build_loss("outlier-exposure", C, outlier_average="mixed")


def test_maximal_entropy_on_negatives_equals_entropic_open_set():
    logits, _, w = batch(6)
    negatives = -torch.ones(N, dtype=torch.long)
    for reduction in REDUCTIONS:
        torch.testing.assert_close(build_loss("maximal-entropy", C, reduction=reduction)(logits, negatives, w),
                                   build_loss("entropic", C, reduction=reduction)(logits, negatives, w),
                                   rtol=1e-6, atol=0)


def test_logitnorm_is_unchanged_when_a_logit_row_is_scaled():
    logits, labels, _ = batch(7, negatives=False)
    scales = torch.rand(N, 1, dtype=DOUBLE) * 100 + 1e-3
    loss = build_loss("logitnorm", C, reduction="none")
    torch.testing.assert_close(loss(logits * scales, labels), loss(logits, labels), rtol=1e-6, atol=0)


# --------------------------------------------------------------------------- pytorch-ood 0.4.0
@pytest.fixture
def float64_default():
    """pytorch-ood allocates its per-sample buffers in the default dtype (``torch.zeros(B)``) and
    refuses to put float64 values into them: the comparisons run with float64 as the default."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def test_outlier_exposure_matches_pytorch_ood(float64_default):
    """Same per-sample terms (their ``alpha`` is our ``outlier_weight``). The convention that differs:
    their ``'mean'`` divides the sum by the whole batch, ours each term by its own count (as the
    authors' code)."""
    logits, labels, _ = batch(8)
    ours = build_loss("outlier-exposure", C, outlier_weight=0.3, reduction="none")(logits, labels)
    theirs = ood.OutlierExposureLoss(alpha=0.3, reduction="none")(logits, labels)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0)
    known = labels >= 0
    per_term = theirs[known].sum() / known.sum() + theirs[~known].sum() / (~known).sum()
    torch.testing.assert_close(build_loss("outlier-exposure", C, outlier_weight=0.3)(logits, labels),
                               per_term, rtol=1e-6, atol=0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_energy_regularized_matches_pytorch_ood(reduction):
    """Their ``alpha``, ``margin_in``, ``margin_out`` are our ``energy_weight``, ``energy_margin_in``,
    ``energy_margin_out``; their ``'mean'`` is per term as ours. Margins near the energies of these
    logits, so that both hinges are active."""
    logits, labels, _ = batch(9)
    ours = build_loss("energy-regularized", C, energy_weight=0.2, energy_margin_in=-4.0, energy_margin_out=-2.0,
                      reduction=reduction)(logits, labels)
    theirs = ood.EnergyRegularizedLoss(alpha=0.2, margin_in=-4.0, margin_out=-2.0, reduction=reduction)(logits, labels)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0)


def test_logitnorm_matches_pytorch_ood():
    """Their ``t`` is our τ. They add 1e-7 to the norm, we divide by the norm itself (scale invariance
    exact); with norms of ~10 the difference is below rtol 1e-6. Both leave the negatives out (they
    drop them with a warning, we give them 0 and count the knowns)."""
    logits, labels, _ = batch(10, scale=6.0)
    for reduction in ("mean", "sum"):
        ours = build_loss("logitnorm", C, temperature=0.04, reduction=reduction)(logits, labels)
        with pytest.warns(UserWarning, match="Discarding samples"):  # negatives: they warn, we count them 0
            theirs = ood.LogitNorm(t=0.04, reduction=reduction)(logits, labels)
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0)


def test_entropic_and_objectosphere_match_pytorch_ood(float64_default):
    """EOS: the same, mean over the batch. Objectosphere: their ``alpha`` is our λ (``lambda_``), and
    their call is the old form ``(logits, features, target)``."""
    logits, labels, w = batch(11)
    features = torch.randn(N, 7, dtype=DOUBLE) * 2
    for reduction in REDUCTIONS:
        torch.testing.assert_close(build_loss("entropic", C, reduction=reduction)(logits, labels),
                                   ood.EntropicOpenSetLoss(reduction=reduction)(logits, labels), rtol=1e-6, atol=0)
        ours = build_loss("objectosphere", C, xi=3.0, lambda_=0.1, reduction=reduction)(logits, labels,
                                                                                       features=features)
        theirs = ood.ObjectosphereLoss(alpha=0.1, xi=3.0, reduction=reduction)(logits, features, labels)
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=0)


def test_vos_uncertainty_loss_matches_pytorch_ood():
    """Their ``VOSRegLoss`` with the virtual outliers' logits as the negatives of its batch. Conventions
    that differ: their energy is E = -log sum ReLU(w) e^z, the input of φ; ours is the score s = -E (the
    authors' code), so their φ is ours with its weight negated; their total adds the knowns' mean
    cross-entropy, subtracted here; their ``alpha`` is our β (1 here)."""
    torch.manual_seed(0)
    logits, labels, _ = batch(12, negatives=False)
    outlier_logits = 3 * torch.randn(6, C, dtype=DOUBLE)
    vos = build_loss("vos", C).double()
    phi = torch.nn.Linear(1, 2).double()
    weights_energy = torch.nn.Linear(C, 1).double()
    with torch.no_grad():
        phi.weight.copy_(-vos.uncertainty.weight)
        phi.bias.copy_(vos.uncertainty.bias)
        weights_energy.weight.copy_(vos.energy_weights[None])
    theirs = ood.VOSRegLoss(phi, weights_energy, alpha=1.0)(torch.cat([logits, outlier_logits]),
                                                           torch.cat([labels, -torch.ones(6, dtype=torch.long)]))
    ours = vos.uncertainty_loss(logits, labels >= 0, outlier_logits)
    torch.testing.assert_close(ours, theirs - F.cross_entropy(logits, labels), rtol=1e-6, atol=0)


# --------------------------------------------------------------------------- declarations
@pytest.mark.parametrize("name", PEERS)
def test_each_peer_declares_its_papers_detector_and_tunable_settings(name):
    cls = LOSSES.get(name)
    assert cls.default_detector in DETECTORS and default_detector(name) == cls.default_detector
    settings = cls.hyperparameters()
    assert all(len(s.grid) >= 2 and s.default in s.grid for s in settings.values())
    loss = build_loss(name, C)  # from the declared defaults alone
    assert {k: getattr(loss, k) for k in settings} == {k: s.default for k, s in settings.items()}
    if name in OWN_PEERS:  # the package's own peers: each tunable, only MixOE and VOS not batched over seeds
        assert settings and cls.batches_over_seeds is (name not in ("mixoe", "vos"))


def test_the_paper_detectors_are_the_defaults():
    expected = {
        "softmax": "softmax", "background": "background", "entropic": "softmax", "objectosphere": "softmax",
        "outlier-exposure": "softmax", "energy-regularized": "energy", "mixoe": "softmax",
        "maximal-entropy": "softmax", "logitnorm": "softmax", "vos": "energy",
        "outlier-exposure-ft": "softmax", "energy-regularized-ft": "energy", "mixoe-ft": "softmax"}
    assert {name: default_detector(name) for name in expected} == expected  # the package's own losses


# --------------------------------------------------------------------------- MixOE's batch hook
def mixed_batch(seed=13):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(12, 1, 8, 8, generator=g, dtype=DOUBLE)
    labels = torch.tensor([0, 1, 2, -1, -1, 3, -1, -1, -1, -1, 4, -1])
    return x, labels


def partner_of(x, mixed, labels, share, row):
    """The known row j with mixed[row] == share * x[j] + (1 - share) * x[row] (mixup)."""
    for j in torch.nonzero(labels >= 0).flatten().tolist():
        if torch.allclose(mixed[row], share * x[j] + (1 - share) * x[row], rtol=1e-12, atol=1e-12):
            return j
    return None


def test_mixup_mixes_each_negative_with_a_known_and_trains_towards_the_mixed_target():
    torch.manual_seed(0)
    x, labels = mixed_batch()
    loss = build_loss("mixoe", C, mix="mixup", mix_weight=2.0).double()
    mixed = loss.mix_batch(x, labels)
    share = loss._share
    assert 0 < share < 1
    assert torch.equal(mixed[labels >= 0], x[labels >= 0])  # knowns as they were
    logits = torch.randn(12, C, dtype=DOUBLE)
    expected = []
    for row, y in enumerate(labels.tolist()):
        log_s = log_softmax_row(logits[row])
        if y >= 0:
            expected.append(-log_s[y])
            continue
        partner = partner_of(x, mixed, labels, share, row)
        assert partner is not None, row
        soft_target = torch.full((C,), (1 - share) / C, dtype=DOUBLE)
        soft_target[labels[partner]] += share  # lambda e_y + (1 - lambda) uniform
        expected.append(2.0 * -(soft_target * log_s).sum())
    terms = torch.stack(expected)
    torch.testing.assert_close(loss(logits, labels), reference_mean("mixoe", terms, labels), rtol=1e-10, atol=0)
    loss.eval()  # outside training a negative is an unmixed outlier: lambda = 0
    plain = torch.stack([mixoe_term(loss, z, None, y) for z, y in zip(logits, labels.tolist())])
    torch.testing.assert_close(loss(logits, labels), reference_mean("mixoe", plain, labels), rtol=1e-10, atol=0)


def test_cutmix_pastes_a_box_of_the_negative_and_its_share_is_the_known_area():
    torch.manual_seed(3)
    x, labels = mixed_batch(14)
    loss = build_loss("mixoe", C, mix="cutmix").double()
    mixed = loss.mix_batch(x, labels)
    for row in torch.nonzero(labels < 0).flatten().tolist():
        from_negative = (mixed[row] == x[row])
        known_rows = [j for j in torch.nonzero(labels >= 0).flatten().tolist()
                      if torch.equal(torch.where(from_negative, x[row], x[j]), mixed[row])]
        assert known_rows, row  # every pixel is the negative's or one known's
        assert abs(1 - from_negative.double().mean().item() - loss._share) < 1e-12


def test_a_batch_without_knowns_is_left_unmixed():
    x, _ = mixed_batch()
    labels = -torch.ones(12, dtype=torch.long)
    loss = build_loss("mixoe", C).double()
    assert torch.equal(loss.mix_batch(x, labels), x)
    assert torch.equal(loss._partners, labels)


# --------------------------------------------------------------------------- VOS's queues and outliers
def test_vos_queues_keep_the_last_features_of_each_class():
    vos = build_loss("vos", 3, queue_size=4).double()
    expected = {c: [] for c in range(3)}
    g = torch.Generator().manual_seed(15)
    for step in range(5):
        labels = torch.randint(-1, 3, (7,), generator=g)
        features = torch.randn(7, 2, generator=g, dtype=DOUBLE)
        vos(torch.randn(7, 3, dtype=DOUBLE), labels, features=features)
        for feature, y in zip(features, labels.tolist()):
            if y >= 0:
                expected[y] = (expected[y] + [feature])[-4:]
        for c in range(3):
            assert int(vos.filled[c]) == len(expected[c])
            if expected[c]:  # the newest last, as the authors' queue
                torch.testing.assert_close(vos.queue[c, 4 - len(expected[c]):], torch.stack(expected[c]))


def test_vos_keeps_the_least_likely_draws_under_the_fitted_gaussians():
    vos = build_loss("vos", 3, queue_size=6, candidates=50, selected=2).double()
    vos.queue = torch.randn(3, 6, 2, dtype=DOUBLE) + torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])[:, None]
    torch.manual_seed(16)
    outliers = vos._virtual_outliers()
    # the reference: the same standard-normal draws, turned into samples of N(mu_c, Sigma) and ranked by density
    torch.manual_seed(16)
    draws = torch.randn(3, 50, 2, dtype=DOUBLE)
    means = vos.queue.mean(1)
    centred = torch.cat([vos.queue[c] - means[c] for c in range(3)])
    sigma = centred.T @ centred / len(centred) + 1e-4 * torch.eye(2, dtype=DOUBLE)
    for c in range(3):
        samples = means[c] + draws[c] @ torch.linalg.cholesky(sigma).T
        density = torch.distributions.MultivariateNormal(means[c], covariance_matrix=sigma).log_prob(samples)
        least_likely = samples[density.argsort()[:2]]
        got = outliers[2 * c:2 * c + 2]
        assert all(any(torch.allclose(row, other, rtol=1e-9, atol=1e-12) for other in least_likely) for row in got)


def test_vos_adds_its_uncertainty_term_only_once_every_queue_is_full():
    vos = build_loss("vos", 2, queue_size=3, candidates=20).double()
    head = torch.nn.Linear(2, 2, bias=False).double()
    vos.attach(torch.nn.ModuleDict({"logits": head}))  # a network whose logit layer is `logits`
    vos.begin_epoch(1, 2)  # round(0.4 * 2) = 1: synthesising from the second epoch
    assert vos.synthesising
    features = torch.randn(4, 2, dtype=DOUBLE)
    labels = torch.tensor([0, 0, 0, 1])
    logits = head(features)
    first = vos(logits, labels, features=features)  # class 1 has 1 of 3 features: cross-entropy alone
    torch.testing.assert_close(first, F.cross_entropy(logits, labels))
    vos(logits, labels.flip(0), features=features)
    vos(logits, torch.tensor([1, 1, 0, 1]), features=features)
    assert bool((vos.filled == 3).all())
    assert vos(logits, labels, features=features) > F.cross_entropy(logits, labels)


def test_vos_state_round_trips_into_a_fresh_loss():
    vos = build_loss("vos", 3, queue_size=4).double()
    vos(torch.randn(6, 3, dtype=DOUBLE), torch.tensor([0, 1, 2, 0, 1, -1]), features=torch.randn(6, 5, dtype=DOUBLE))
    fresh = build_loss("vos", 3, queue_size=4).double()
    fresh.load_state_dict(vos.state_dict())
    assert fresh.state_dict().keys() == vos.state_dict().keys()
    for key, value in vos.state_dict().items():
        assert torch.equal(fresh.state_dict()[key], value), key


def test_a_constructor_default_that_differs_from_its_declaration_is_refused_where_it_is_defined():
    """One declaration per default: a loss (or detector) whose keyword default says otherwise than
    its ``SETTINGS`` is a ``TypeError`` when the class is defined, never two silent defaults."""
    from agnostophobia.losses import OpenSetLoss
    from agnostophobia.settings import Setting

    with pytest.raises(TypeError, match=r"keyword weight=0.3 differs from its declared default 0.5"):
        class Drifted(OpenSetLoss):  # noqa: F841
            SETTINGS = {"weight": Setting(float, 0.5, low=0)}

            def __init__(self, num_classes, weight: float = 0.3, reduction="mean"):
                super().__init__(num_classes, reduction)

            def forward(self, logits, labels, sample_weight=None):
                return logits.sum()
