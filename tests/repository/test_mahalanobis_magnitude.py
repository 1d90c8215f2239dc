"""The Mahalanobis check (benchmarks/mahalanobis_magnitude.py): its independent detector agrees with
pytorch-ood's on random features, and on features whose within-class spread lies along the
magnitude, with unknowns of a smaller norm, it reads below chance where the L2-normalised one does not."""
import numpy as np
from repo_paths import REPO, load_module

check = load_module("mahalanobis_magnitude", REPO / "benchmarks" / "mahalanobis_magnitude.py")


def test_the_independent_detector_gives_pytorch_oods_auroc():
    """Ours is checked against pytorch-ood in tests/detectors; the script's own is checked here."""
    import pytest

    pytest.importorskip("pytorch_ood")
    rng = np.random.default_rng(0)
    train, labels = rng.normal(size=(300, 5)) + np.repeat(np.eye(5)[:3] * 3, 100, axis=0), np.repeat(np.arange(3), 100)
    known, unknown = rng.normal(size=(40, 5)) + np.eye(5)[0] * 3, rng.normal(size=(40, 5)) * 2
    score = check.mahalanobis_scorer(train, labels)
    expected = check.auroc(score(known), score(unknown))
    assert 0.6 < expected and abs(check.pytorch_ood_auroc(train, labels, known, unknown) - expected) < 1e-6


def test_a_spread_along_the_magnitude_puts_shorter_unknowns_near_the_means():
    """Knowns spread along their class's direction (the magnitude) and a little in every other; the
    unknowns are shorter and lie between two classes' directions. Whitened, a known lies about D
    from its mean, a short unknown less far: Mahalanobis puts it above the knowns. Without the
    magnitude (L2-normalised features) its direction gives it away."""
    rng = np.random.default_rng(1)
    dim, classes = 64, 4
    axes = np.eye(dim)[:classes]

    def knowns(n):
        c = rng.integers(0, classes, n)
        return axes[c] * (10.0 + 3.0 * rng.normal(size=n))[:, None] + 0.3 * rng.normal(size=(n, dim)), c

    train, labels = knowns(4000)
    known, _ = knowns(500)
    pairs = rng.integers(0, classes, (500, 2))
    between = (axes[pairs[:, 0]] + axes[(pairs[:, 0] + 1) % classes]) / np.sqrt(2)
    unknown = 0.5 * (between * 10.0 + 0.3 * rng.normal(size=(500, dim)))
    score = check.mahalanobis_scorer(train, labels)
    assert check.radial_share(train, labels) > 0.5  # an even spread: 1/64
    assert check.auroc(score(known), score(unknown)) < 0.5
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    on_directions = check.mahalanobis_scorer(unit(train), labels)
    assert check.auroc(on_directions(unit(known)), on_directions(unit(unknown))) > 0.9
