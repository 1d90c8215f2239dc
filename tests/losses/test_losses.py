"""Tests of agnostophobia.losses: paper lemmas/theorems, reductions,
weights and input checks. Everything runs on tiny random tensors (seconds, CPU). Each loss's float64
reference is in its own test module (tests/losses/test_<module>.py), checked by tests/contracts/test_loss_references.py."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from agnostophobia.errors import ConfigError
from agnostophobia.losses import (
    LOSSES,
    loss_settings,
    REDUCTIONS,
    BackgroundClassLoss,
    EntropicOpenSetLoss,
    ObjectosphereLoss,
    OpenSetLoss,
    SoftmaxLoss,
    PAPER_APPROACHES,
    build_loss,
    inverse_frequency_class_weights,
    sample_weights,
)

C, M, N = 5, 7, 40
XI, LAM = 2.0, 0.1  # a large lambda so the feature term visibly matters
LOSS_KWARGS = {"objectosphere": {"xi": XI, "lambda_": LAM}}
HYPO = settings(max_examples=60, deadline=None)


def make_loss(name, num_classes=C, **kwargs):
    return build_loss(name, num_classes, **{**LOSS_KWARGS.get(name, {}), **kwargs})


def make_batch(name, seed=0, n=N, num_classes=C, dtype=torch.float64, device="cpu"):
    """Random logits/features/labels with both knowns and unknowns; features have
    norms on both sides of XI so both branches of max(xi - ||F||, 0) are exercised."""
    g = torch.Generator().manual_seed(seed)
    width = LOSSES.get(name)(num_classes, **LOSS_KWARGS.get(name, {})).num_outputs
    logits = 3 * torch.randn(n, width, generator=g, dtype=dtype)
    features = torch.randn(n, M, generator=g, dtype=dtype) * torch.rand(n, 1, generator=g, dtype=dtype) * 2
    labels = torch.randint(-3, num_classes, (n,), generator=g)
    labels[0], labels[1] = -1, num_classes - 1
    weights = torch.rand(n, generator=g, dtype=dtype) * 3
    return logits.to(device), features.to(device), labels.to(device), weights.to(device)


def declared_mean(name, per_sample, labels):
    """``'mean'`` from the per-sample losses as the loss declares it: over the batch, over the knowns
    (a loss that does not train on unknowns), or each term over its own count (``mean_per_term``)."""
    if LOSSES.get(name).mean_per_term:
        known = labels >= 0
        return sum(per_sample[part].sum() / max(int(part.sum()), 1) for part in (known, ~known))
    return per_sample.sum() / (len(labels) if LOSSES.get(name).trains_on_unknowns else int((labels >= 0).sum()))


@pytest.mark.parametrize("name", LOSSES.names())
def test_reductions_consistent(name):
    logits, features, labels, w = make_batch(name, seed=4)
    for weight in (None, w):
        per = {r: make_loss(name, reduction=r)(logits, labels, features=features, sample_weight=weight) for r in REDUCTIONS}
        assert per["none"].shape == (N,)
        torch.testing.assert_close(per["sum"], per["none"].sum())
        torch.testing.assert_close(per["mean"], declared_mean(name, per["none"], labels))
    if LOSSES.get(name).trains_on_unknowns and not LOSSES.get(name).mean_per_term:  # 'mean' == 'none'.mean()
        torch.testing.assert_close(per["mean"], per["none"].mean())


def test_background_equals_cross_entropy_with_unknowns_relabelled():
    logits, _, labels, _ = make_batch("background", seed=5)
    relabelled = torch.where(labels < 0, torch.full_like(labels, C), labels)
    for reduction in REDUCTIONS:
        got = BackgroundClassLoss(C, reduction=reduction)(logits, labels)
        torch.testing.assert_close(got, F.cross_entropy(logits, relabelled, reduction=reduction))


def test_softmax_ignores_unknowns():
    logits, _, labels, _ = make_batch("softmax", seed=6)
    known = labels >= 0
    expected = F.cross_entropy(logits[known], labels[known])
    torch.testing.assert_close(SoftmaxLoss(C)(logits, labels), expected)
    # Changing the unknown rows changes nothing, and they receive no gradient.
    shuffled = logits.clone()
    shuffled[~known] = 100 * torch.randn_like(shuffled[~known])
    shuffled.requires_grad_(True)
    loss = SoftmaxLoss(C)(shuffled, labels)
    torch.testing.assert_close(loss, expected)
    loss.backward()
    assert torch.all(shuffled.grad[~known] == 0)
    assert torch.all(shuffled.grad[known].abs().sum(1) > 0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_softmax_batch_of_only_unknowns_is_zero_with_graph(reduction):
    logits = torch.randn(6, C, requires_grad=True)
    loss = SoftmaxLoss(C, reduction=reduction)(logits, -torch.ones(6, dtype=torch.long))
    assert torch.all(loss == 0) and loss.requires_grad
    loss.sum().backward()
    assert torch.all(logits.grad == 0)


# --------------------------------------------------------------------------- paper lemmas and theorems
def unknown_je(logits):
    """J_E of unknown samples, per sample."""
    logits = torch.as_tensor(logits, dtype=torch.float64)
    return EntropicOpenSetLoss(logits.shape[1], reduction="none")(logits, -torch.ones(len(logits), dtype=torch.long))


@HYPO
@given(num_classes=st.integers(2, 20), eta=st.floats(-50, 50), seed=st.integers(0, 2**31 - 1),
       scale=st.floats(1e-2, 10))
def test_lemma_2_equal_logits_minimise_je_for_unknowns(num_classes, eta, seed, scale):
    g = torch.Generator().manual_seed(seed)
    equal = torch.full((1, num_classes), eta, dtype=torch.float64)
    delta = scale * torch.randn(16, num_classes, generator=g, dtype=torch.float64)
    at_equal = unknown_je(equal)
    perturbed = unknown_je(equal + delta)
    torch.testing.assert_close(at_equal, torch.tensor([math.log(num_classes)], dtype=torch.float64))
    spread = delta.max(1).values - delta.min(1).values
    # Never lower, and strictly higher as soon as the logits are no longer all equal.
    assert torch.all(perturbed[spread > 1e-3] > at_equal + 1e-12)
    assert torch.all(perturbed >= at_equal - 1e-12)
    # Brute force: -(1/C) sum_c log(exp(l_c) / sum exp(l)), plain numpy without shifting.
    shifted = (equal + delta).numpy() - eta  # keep exp() in range; J_E is shift-invariant
    brute = -np.mean(np.log(np.exp(shifted) / np.exp(shifted).sum(1, keepdims=True)), axis=1)
    np.testing.assert_allclose(perturbed.numpy(), brute, rtol=1e-9)


@HYPO
@given(num_classes=st.integers(2, 12), seed=st.integers(0, 2**31 - 1))
def test_lemma_1_equal_softmax_minimises_je_for_unknowns(num_classes, seed):
    # Any point S on the simplex, fed as logits log S, gives J_E >= log C = J_E(uniform).
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(num_classes, 0.7), size=32)
    loss = unknown_je(np.log(probs))
    np.testing.assert_allclose(loss.numpy(), -np.log(probs).mean(1), rtol=1e-9)
    assert torch.all(loss >= math.log(num_classes) - 1e-12)


def test_theorem_1_bias_free_layer_maps_zero_features_to_equal_logits():
    torch.manual_seed(0)
    layer = torch.nn.Linear(M, C, bias=False).double()
    with torch.no_grad():
        logits0 = layer(torch.zeros(1, M, dtype=torch.float64))
        logits_random = layer(3 * torch.randn(200, M, dtype=torch.float64))
    assert torch.all(logits0 == 0)
    at_zero = unknown_je(logits0)
    torch.testing.assert_close(at_zero, torch.tensor([math.log(C)], dtype=torch.float64))
    assert torch.all(unknown_je(logits_random) > at_zero)


def test_theorem_2_objectosphere_unique_minimum_at_zero_features():
    torch.manual_seed(1)
    dim = C + 4  # M > C, so features orthogonal to every W_c exist
    layer = torch.nn.Linear(dim, C, bias=False).double()
    loss = ObjectosphereLoss(C, xi=XI, lambda_=LAM, reduction="none")

    def j_r(feats):
        feats = feats.reshape(-1, dim)
        with torch.no_grad():
            return loss(layer(feats), -torch.ones(len(feats), dtype=torch.long), features=feats)

    at_zero = j_r(torch.zeros(dim, dtype=torch.float64))
    torch.testing.assert_close(at_zero, torch.tensor([math.log(C)], dtype=torch.float64))
    # Random nonzero features, of every size.
    feats = torch.randn(300, dim, dtype=torch.float64) * torch.logspace(-3, 2, 300, dtype=torch.float64)[:, None]
    assert torch.all(j_r(feats) > at_zero)
    # Features in the null space of W: J_E cannot tell them from F = 0, J_R can.
    null_basis = torch.linalg.svd(layer.weight.detach()).Vh[C:]
    orth = torch.randn(50, dim - C, dtype=torch.float64) @ null_basis
    torch.testing.assert_close(layer(orth).detach(), torch.zeros(50, C, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(unknown_je(layer(orth).detach()), at_zero.expand(50))
    assert torch.all(j_r(orth) > at_zero)
    torch.testing.assert_close(j_r(orth) - at_zero, LAM * (orth ** 2).sum(1))


@pytest.mark.parametrize("xi", [0.0, XI])
def test_objectosphere_gradients_finite_at_zero_features(xi):
    logits = torch.randn(4, C, requires_grad=True)
    features = torch.zeros(4, M, requires_grad=True)
    labels = torch.tensor([0, 3, -1, -2])
    value = ObjectosphereLoss(C, xi=xi, lambda_=LAM)(logits, labels, features=features)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(features.grad).all() and torch.isfinite(logits.grad).all()
    assert torch.all(features.grad[2:] == 0)  # unknowns: gradient 2F = 0 at F = 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", LOSSES.names())
def test_saturated_logits_give_finite_loss_and_gradients(name, dtype):
    g = torch.Generator().manual_seed(7)
    logits, features, labels, _ = make_batch(name, seed=7, dtype=dtype)
    logits = (1e4 * torch.sign(torch.randn(logits.shape, generator=g))).to(dtype).requires_grad_(True)
    features = (1e4 * features).requires_grad_(True)
    for reduction in REDUCTIONS:
        value = make_loss(name, reduction=reduction)(logits, labels, features=features)
        assert torch.isfinite(value).all(), reduction
        value.sum().backward()
        assert torch.isfinite(logits.grad).all()
        assert features.grad is None or torch.isfinite(features.grad).all()
    # The saturated losses are huge but still exact: a known sample at -1e4 vs +1e4 costs 2e4.
    row = torch.full((1, C), -1e4, dtype=dtype)
    row[0, 1] = 1e4
    if name in ("entropic", "softmax"):
        torch.testing.assert_close(make_loss(name)(row, torch.tensor([0])), torch.tensor(2e4, dtype=dtype))


# --------------------------------------------------------------------------- registry, dtype, device
def test_registry_and_metadata():
    # the package's own; a loss registered beside them (docs/architecture.md) needs no edit here
    assert {"background", "energy-regularized", "energy-regularized-ft", "entropic", "logitnorm", "maximal-entropy",
            "mixoe", "mixoe-ft", "objectosphere", "outlier-exposure", "outlier-exposure-ft", "softmax",
            "vos"} <= set(LOSSES.names())
    assert LOSSES.names() == sorted(LOSSES.registered())
    assert LOSSES.registered()[:4] == list(PAPER_APPROACHES)  # the paper's four first, in its order
    expected = {"softmax": (SoftmaxLoss, False, C), "background": (BackgroundClassLoss, False, C + 1),
                "entropic": (EntropicOpenSetLoss, False, C), "objectosphere": (ObjectosphereLoss, True, C)}
    for name, (cls, uses_features, width) in expected.items():
        loss = make_loss(name)
        assert type(loss) is cls and isinstance(loss, (OpenSetLoss, torch.nn.Module))
        assert loss.uses_features is uses_features and loss.num_outputs == width
    assert make_loss("objectosphere").xi == XI and make_loss("objectosphere").lambda_ == LAM


def test_build_loss_rejects_unknown_names_and_bad_kwargs():
    with pytest.raises(ValueError, match="unknown loss 'cross'"):
        build_loss("cross", C)
    with pytest.raises(ConfigError, match="xii"):
        build_loss("objectosphere", C, xii=1.0)
    with pytest.raises(ConfigError, match="xi"):
        build_loss("entropic", C, xi=1.0)


@pytest.mark.parametrize("name", LOSSES.names())
def test_every_loss_builds_from_its_declared_defaults_alone(name):
    """``build_loss(name, C)`` with nothing else (Objectosphere: the authors' xi = 50, lambda = 1e-4)."""
    loss = build_loss(name, C)
    for keyword, setting in loss_settings(name).items():
        assert getattr(loss, keyword) == setting.default
    if name == "objectosphere":
        assert (loss.xi, loss.lambda_) == (50.0, 1e-4)


@pytest.mark.parametrize("name", LOSSES.names())
def test_output_dtype_follows_input(name):
    for dtype in (torch.float32, torch.float64):
        logits, features, labels, w = make_batch(name, dtype=dtype)
        assert make_loss(name)(logits, labels, features=features, sample_weight=w.numpy()).dtype == dtype
        # int32 labels and plain-list labels are accepted as well
        torch.testing.assert_close(make_loss(name)(logits, labels.int(), features=features),
                                   make_loss(name)(logits, labels.tolist(), features=features))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", LOSSES.names())
def test_cuda_matches_cpu(name):
    logits, features, labels, w = make_batch(name, seed=8, dtype=torch.float32)
    for reduction in REDUCTIONS:
        loss = make_loss(name, reduction=reduction)
        # moved as the trainer moves it: a loss's parameters and state (VOS's queues) live beside the model
        cuda_loss = copy.deepcopy(loss).to("cuda")
        cpu = loss(logits, labels, features=features, sample_weight=w)
        cuda_logits = logits.cuda().requires_grad_(True)
        gpu = cuda_loss(cuda_logits, labels.cuda(), features=features.cuda(), sample_weight=w.cuda())
        assert gpu.device.type == "cuda"
        torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-5, atol=1e-5)
        gpu.sum().backward()
        assert torch.isfinite(cuda_logits.grad).all()


# --------------------------------------------------------------------------- inverse-frequency weights
@HYPO
@given(labels=st.lists(st.integers(-3, 5), min_size=1, max_size=200), per_class_total=st.none() | st.floats(1, 500))
def test_inverse_frequency_weights_balance_every_group(labels, per_class_total):
    labels = np.array(labels)
    weights = inverse_frequency_class_weights(labels, 6, per_class_total=per_class_total)
    assert weights.shape == (7,)
    per_sample = sample_weights(torch.as_tensor(labels), weights).double()
    groups = np.where(labels >= 0, labels, 6)
    totals = np.array([per_sample[torch.as_tensor(groups == k)].sum().item() for k in range(7)])
    present = np.isin(np.arange(7), groups)
    target = per_class_total if per_class_total is not None else len(labels) / present.sum()
    np.testing.assert_allclose(totals[present], target, rtol=1e-5)
    assert np.all(weights.numpy()[~present] == 0)
    if per_class_total is None:  # default scale: mean sample weight 1
        np.testing.assert_allclose(per_sample.mean().item(), 1.0, rtol=1e-5)


def test_inverse_frequency_weights_match_the_authors_scheme():
    # 3 digit classes of sizes 10, 20, 40 and 50 letters: digits 100/N_c, letters 100/50.
    labels = np.concatenate([np.zeros(10), np.ones(20), np.full(40, 2), np.full(50, -1)]).astype(int)
    weights = inverse_frequency_class_weights(torch.as_tensor(labels), 3, per_class_total=100)
    torch.testing.assert_close(weights, torch.tensor([10.0, 5.0, 2.5, 2.0]))
    batch = torch.tensor([2, -1, 0, -7])
    torch.testing.assert_close(sample_weights(batch, weights), torch.tensor([2.5, 2.0, 10.0, 2.0]))
    # Plugged into a loss: Keras-style weighted mean sum(w l) / N.
    logits = torch.randn(4, 3, dtype=torch.float64)
    w = sample_weights(batch, weights).double()
    unweighted = EntropicOpenSetLoss(3, reduction="none")(logits, batch)
    torch.testing.assert_close(EntropicOpenSetLoss(3)(logits, batch, w), (w * unweighted).sum() / 4)


# --------------------------------------------------------------------------- bad input
def _bad_batch_cases(name):
    logits, features, labels, w = make_batch(name, n=6)
    width = logits.shape[1]
    return [
        ("logits", dict(logits=logits[0])),
        ("logits", dict(logits=logits[None])),
        ("logits", dict(logits=torch.zeros(6, width + 1, dtype=torch.float64))),
        ("logits", dict(logits=torch.zeros(6, width, dtype=torch.long))),
        ("logits", dict(logits=torch.zeros(0, width), features=torch.zeros(0, M), labels=torch.zeros(0, dtype=torch.long))),
        ("logits", dict(logits=logits.numpy())),
        ("labels", dict(labels=labels[:5])),
        ("labels", dict(labels=torch.full((6,), C))),
        ("labels", dict(labels=labels.double())),
        ("labels", dict(labels=labels[:, None])),
        ("sample_weight", dict(sample_weight=w[:5])),
        ("sample_weight", dict(sample_weight=-w)),
        ("sample_weight", dict(sample_weight=torch.full((6,), float("nan")))),
    ], dict(logits=logits, features=features, labels=labels, sample_weight=None)


@pytest.mark.parametrize("name", LOSSES.names())
def test_bad_batches_raise_value_error_naming_the_argument(name):
    cases, good = _bad_batch_cases(name)
    loss = make_loss(name)
    loss(**good)  # the untouched batch is fine
    for argument, change in cases:
        with pytest.raises(ValueError, match=argument):
            loss(**{**good, **change})


@pytest.mark.parametrize("check_values", [True, False], ids=["checked", "trainer"])
@pytest.mark.parametrize("name", LOSSES.names())
def test_tensors_without_values_or_not_dense_name_the_argument(name, check_values):
    """A meta tensor (a shape, no values) or a sparse one fails in one ValueError naming the
    argument, also with the value checks off as the trainer runs them: before, meta logits
    gave a meta "loss" silently there, and a deep torch error otherwise."""
    logits, features, labels, w = make_batch(name, n=6)
    good = dict(logits=logits, features=features, labels=labels, sample_weight=w)
    loss = make_loss(name)
    loss.check_values = check_values
    arguments = ["logits", "labels", "sample_weight"] + (["features"] if loss.uses_features else [])
    for argument in arguments:
        for bad, problem in ((good[argument].to("meta"), "is on the meta device"),
                             (good[argument].to_sparse(), "must be a dense tensor")):
            with pytest.raises(ValueError, match=f"^{argument} {problem}"):
                loss(**{**good, argument: bad})


def test_weight_helpers_refuse_meta_tensors_naming_the_argument():
    with pytest.raises(ValueError, match="^labels is on the meta device"):
        sample_weights(torch.tensor([0, 1]).to("meta"), torch.ones(3))
    with pytest.raises(ValueError, match="^class_weights is on the meta device"):
        sample_weights(torch.tensor([0, 1]), torch.ones(3, device="meta"))
    with pytest.raises(ValueError, match="^labels is on the meta device"):
        inverse_frequency_class_weights(torch.tensor([0, 1]).to("meta"), 2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_features_on_another_device_than_the_logits_name_both():
    logits, features, labels, _ = make_batch("objectosphere", n=6, dtype=torch.float32)
    with pytest.raises(ValueError, match="^features is on cpu but logits on cuda:0"):
        make_loss("objectosphere")(logits.cuda(), labels.cuda(), features=features)
    # labels and weights hold no gradient: they are moved to the logits' device
    loss = make_loss("objectosphere")(logits.cuda(), labels, features=features.cuda(), sample_weight=torch.ones(6))
    assert loss.device.type == "cuda"


def test_bad_features_raise_value_error():
    logits, features, labels, _ = make_batch("objectosphere", n=6)
    loss = make_loss("objectosphere")
    for bad in (features[:5], features[0], None, features.long()):
        with pytest.raises(ValueError, match="features"):
            loss(logits, labels, features=bad)


@pytest.mark.parametrize("name", LOSSES.names())
def test_bad_constructor_arguments(name):
    for bad in ("avg", None, "MEAN"):
        with pytest.raises(ValueError, match=f"reduction.*{bad!r}"):
            make_loss(name, reduction=bad)
    for bad in (0, -2, 2.5, True, "10"):
        with pytest.raises(ValueError, match="num_classes"):
            make_loss(name, num_classes=bad)
    if name == "objectosphere":
        for argument in ("xi", "lambda_"):
            for bad in (-1.0, float("nan"), float("inf"), "big", True):
                with pytest.raises(ValueError, match=argument):
                    make_loss(name, **{argument: bad})


def test_weight_helpers_reject_bad_input():
    with pytest.raises(ValueError, match="labels"):
        inverse_frequency_class_weights([0, 1, 3], 3)
    with pytest.raises(ValueError, match="labels"):
        inverse_frequency_class_weights([], 3)
    with pytest.raises(ValueError, match="labels"):
        inverse_frequency_class_weights([0.5, 1.0], 3)
    with pytest.raises(ValueError, match="num_classes"):
        inverse_frequency_class_weights([0, 1], 0)
    with pytest.raises(ValueError, match="per_class_total"):
        inverse_frequency_class_weights([0, 1], 2, per_class_total=0)
    with pytest.raises(ValueError, match="class_weights"):
        sample_weights(torch.tensor([0, 1]), torch.ones(3, 2))
    with pytest.raises(ValueError, match="labels"):
        sample_weights(torch.tensor([0, 3]), torch.ones(4))
    with pytest.raises(ValueError, match="labels"):
        sample_weights(torch.tensor([0.0, 1.0]), torch.ones(4))


# --------------------------------------------------------------------------- one call form (issue 33)
@pytest.mark.parametrize("width", [1, 2, 32])
@pytest.mark.parametrize("name", LOSSES.names())
def test_every_loss_takes_the_keyword_call_form_with_features_of_any_width(name, width):
    """``loss(logits, labels, features=..., sample_weight=...)`` for every loss, forward and backward,
    some labels -1; a loss that does not read the features ignores them (same value without)."""
    logits, _, labels, w = make_batch(name, seed=9)
    labels[:3] = -1
    loss = make_loss(name).double()
    logits.requires_grad_(True)
    features = torch.randn(len(labels), width, dtype=torch.float64, requires_grad=True)
    value = loss(logits, labels, features=features, sample_weight=w)
    assert value.shape == () and torch.isfinite(value)
    value.backward()
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0
    if not loss.uses_features:
        assert features.grad is None
        torch.testing.assert_close(loss(logits, labels, sample_weight=w), value)
        torch.testing.assert_close(loss(logits, labels, w), value)  # weights may be positional


def test_the_old_objectosphere_call_form_is_told_apart_and_warned_about_once(monkeypatch):
    logits, features, labels, w = make_batch("objectosphere", seed=10)
    loss = make_loss("objectosphere")
    monkeypatch.setattr(OpenSetLoss, "_warned_old_call", False)
    expected = loss(logits, labels, features=features, sample_weight=w)
    with pytest.warns(DeprecationWarning, match="features=features"):
        old = loss(logits, features, labels, sample_weight=w)
    torch.testing.assert_close(old, expected)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second old call warns no more
        torch.testing.assert_close(loss(logits, features, labels, w), expected)
    with pytest.raises(TypeError, match="features given twice"):
        loss(logits, features, labels, features=features)


def test_a_loss_reading_features_must_take_them_in_forward():
    with pytest.raises(TypeError, match="uses_features = True, but its forward takes no 'features'"):
        class Broken(OpenSetLoss):  # noqa: F841
            uses_features = True

            def forward(self, logits, labels, sample_weight=None):
                return logits.sum()


def test_a_loss_written_without_features_is_called_without_them():
    """A loss whose forward is ``forward(logits, labels, sample_weight=None)`` (the form
    docs/architecture.md shows) is handed no features, whatever the caller passes."""
    seen = []

    class Plain(OpenSetLoss):
        def forward(self, logits, labels, sample_weight=None):
            seen.append(sample_weight)
            logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
            return self._reduce(F.cross_entropy(logits, labels.clamp(min=0), reduction="none"), labels, weight)

    loss, logits, labels = Plain(3), torch.randn(4, 3), torch.tensor([0, 1, 2, -1])
    torch.testing.assert_close(loss(logits, labels, features=torch.randn(4, 2)), loss(logits, labels))
    with pytest.raises(TypeError, match="needs labels"):
        loss(logits)
    with pytest.raises(TypeError, match="positional"):
        loss(logits, labels, torch.ones(4), torch.ones(4))


# ------------------------------------------------- one setting name, two losses' declarations
@pytest.fixture
def two_losses_sharing_a_name(monkeypatch):
    """Two losses registered after every other, both reading ``shared_knob``: the first allows
    [0, 1], the second any value down to -10 (as two peers' margins may)."""
    from agnostophobia.losses import LOSSES, OpenSetLoss
    from agnostophobia.settings import Setting

    def loss_class(declared):
        class Knobbed(OpenSetLoss):
            SETTINGS = {"shared_knob": declared}

            def __init__(self, num_classes: int, shared_knob: float = 0.5, reduction: str = "mean"):
                super().__init__(num_classes, reduction)
                self.shared_knob = shared_knob
        return Knobbed

    monkeypatch.setitem(LOSSES._items, "knob-unit", loss_class(Setting(float, 0.5, low=0, high=1)))
    monkeypatch.setitem(LOSSES._items, "knob-wide", loss_class(Setting(float, 0.5, low=-10)))


def test_a_loss_setting_is_checked_by_the_loss_that_reads_it(two_losses_sharing_a_name):
    """A name two losses declare: a value is checked against the trained approach's own
    declaration, not the first-registered one's (which refused -5 for `knob-wide` before)."""
    from agnostophobia.errors import ConfigError
    from agnostophobia.training.config import TrainConfig

    TrainConfig(approach="knob-wide", loss={"shared_knob": -5.0}).validate()
    with pytest.raises(ConfigError, match="shared_knob.*knob-unit"):
        TrainConfig(approach="knob-unit", loss={"shared_knob": -5.0}).validate()
    # a key the trained approach never reads: refused only where no loss would accept it
    TrainConfig(approach="softmax", loss={"shared_knob": -5.0}).validate()
    with pytest.raises(ConfigError, match="shared_knob"):
        TrainConfig(approach="softmax", loss={"shared_knob": -50.0}).validate()


@pytest.fixture(params=["wide first", "unit first"])
def two_losses_declaring_a_name_differently(request, monkeypatch):
    """Two losses that declare ``shared_depth`` differently (an integer from 1, default 3; a number
    from 0, default 0.5), registered after every other in either order: no answer may depend on it."""
    from agnostophobia.losses import LOSSES, OpenSetLoss
    from agnostophobia.settings import Setting

    def loss_class(declared):
        class Deep(OpenSetLoss):
            shared_depth = declared

            def forward(self, logits, labels, sample_weight=None):
                return logits.sum()
        return Deep

    losses = {"depth-int": loss_class(Setting(int, 3, low=1)), "depth-float": loss_class(Setting(float, 0.5, low=0))}
    for name in sorted(losses, reverse=request.param == "wide first"):
        monkeypatch.setitem(LOSSES._items, name, losses[name])


def test_no_loss_setting_answer_depends_on_the_order_of_registration(two_losses_declaring_a_name_differently):
    from types import SimpleNamespace

    from agnostophobia.experiments.tune import TuneSetup, parse_param
    from agnostophobia.losses import every_loss_setting

    assert set(every_loss_setting()["shared_depth"]) == {"depth-int", "depth-float"}
    name, values = parse_param("shared_depth=0.5,2")
    assert values == (0.5, 2.0) and all(type(v) is float for v in values)  # one loss reads a float: not made an int
    experiment = SimpleNamespace(train=SimpleNamespace(loss={}))
    tuning = TuneSetup("c.yaml", experiment, None, None, {"shared_depth": (1.0, 2.0)}, ["depth-int", "depth-float"],
                       [], {}, 0.01)
    assert tuning.base_of("depth-int") == {"shared_depth": 3.0}  # each approach's own default breaks a tie
    assert tuning.base_of("depth-float") == {"shared_depth": 0.5}
    assert tuning.base == {"shared_depth": {"depth-int": 3.0, "depth-float": 0.5}}
    experiment.train.loss = {"shared_depth": 2}
    assert tuning.base == {"shared_depth": 2.0}


def test_tune_checks_a_grid_against_the_tuned_approaches_own_declarations(two_losses_sharing_a_name):
    from agnostophobia.errors import ConfigError
    from agnostophobia.experiments.tune import check_grid, parse_params

    grid = parse_params(["shared_knob=-5,0.5"])  # some loss accepts each value
    check_grid(grid, ["knob-wide"])
    with pytest.raises(ConfigError, match="-5.*knob-unit"):
        check_grid(grid, ["knob-wide", "knob-unit"])
    with pytest.raises(ConfigError, match="-50"):
        parse_params(["shared_knob=-50"])


def test_a_former_setting_name_names_one_setting_and_no_setting_has_it_now():
    """A renamed setting keeps its old name loading (``Setting.formerly``, read by the config, ``build_loss``
    and ``tune --param``); that is unambiguous only while no loss's setting is called so now and every loss
    that declared it renamed it alike."""
    from agnostophobia.losses import every_loss_setting, renamed_loss_settings

    current = every_loss_setting()
    became = {}
    for keyword, by_approach in current.items():
        for approach, declared in by_approach.items():
            for former in declared.formerly:
                assert former not in current, (approach, former)
                assert became.setdefault(former, keyword) == keyword, (approach, former)
    assert renamed_loss_settings() == became
    assert became["logitnorm_temperature"] == "temperature"  # the package's own: LogitNorm's τ
