"""Every registered loss against its float64 reference, the per-sample formula of its paper that its
own test module registers (``@loss_reference``, tests/_support/references.py): every reduction, with
and without sample weights, and on a batch of knowns only or of unknowns only. A loss added to the
registry, in the package or by a plugin, is checked here with no edit of this file."""
from __future__ import annotations

import pytest
import torch

from agnostophobia.losses import LOSSES, REDUCTIONS, build_loss
from references import LOSS_REFERENCES, find_reference

C, M, N = 5, 7, 40
DOUBLE = torch.float64


def reference_of(name: str):
    return find_reference(LOSSES, LOSS_REFERENCES, "loss", name)


def built(name: str, reduction: str = "mean"):
    return build_loss(name, C, reduction=reduction, **reference_of(name).settings).double()


def batch(name: str, seed: int, knowns: bool = True, unknowns: bool = True):
    """Float64 logits of the loss's width, features whose norms lie on both sides of 2, labels of
    both kinds (or of one), and sample weights."""
    g = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(N, built(name).num_outputs, generator=g, dtype=DOUBLE)
    features = torch.randn(N, M, generator=g, dtype=DOUBLE) * torch.rand(N, 1, generator=g, dtype=DOUBLE) * 2
    labels = torch.randint(0, C, (N,), generator=g)
    if unknowns:
        labels[torch.rand(N, generator=g) < (0.4 if knowns else 2)] = -1
    weights = 3 * torch.rand(N, generator=g, dtype=DOUBLE)
    return logits, features, labels, weights


def reference_terms(name, loss, logits, features, labels):
    formula = reference_of(name).formula
    return torch.stack([torch.as_tensor(formula(loss, z, f, y), dtype=DOUBLE)
                        for z, f, y in zip(logits, features, labels.tolist())])


def declared_mean(loss, terms, labels):
    """``'mean'`` as the loss declares it: each term over its own samples (``mean_per_term``), over the
    batch (a loss that trains on unknowns) or over the knowns."""
    known = labels >= 0
    if loss.mean_per_term:
        return sum(terms[part].sum() / max(int(part.sum()), 1) for part in (known, ~known))
    return terms.sum() / (len(labels) if loss.trains_on_unknowns else max(int(known.sum()), 1))


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", LOSSES.names())
def test_every_loss_matches_its_reference(name, reduction, weighted):
    for seed in range(2):
        logits, features, labels, w = batch(name, seed)
        w = w if weighted else None
        loss = built(name, reduction)
        got = loss(logits, labels, features=features, sample_weight=w)
        terms = reference_terms(name, loss, logits, features, labels) * (1 if w is None else w)
        expected = {"none": terms, "sum": terms.sum(), "mean": declared_mean(loss, terms, labels)}[reduction]
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kind", ["knowns only", "unknowns only"])
@pytest.mark.parametrize("name", LOSSES.names())
def test_a_batch_of_one_kind_gets_the_other_term_alone_never_nan(name, kind):
    logits, features, labels, w = batch(name, 3, knowns=kind == "knowns only", unknowns=kind == "unknowns only")
    logits.requires_grad_(True)
    loss = built(name)
    value = loss(logits, labels, features=features, sample_weight=w)
    value.backward()
    assert torch.isfinite(value) and torch.isfinite(logits.grad).all()
    terms = reference_terms(name, loss, logits.detach(), features, labels) * w
    torch.testing.assert_close(value, declared_mean(loss, terms, labels), rtol=1e-10, atol=1e-10)


def test_a_loss_without_a_reference_is_named_with_the_file_to_write(monkeypatch):
    monkeypatch.setitem(LOSSES._items, "no-reference", type("NoReference", (LOSSES.get("entropic").__base__,), {}))
    with pytest.raises(LookupError, match="'no-reference' has no float64 reference.*@loss_reference"):
        reference_of("no-reference")
