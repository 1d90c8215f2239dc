"""Table 1 statistics: mean and std of entropy and feature magnitude, knowns vs unknowns."""
import numpy as np
import pytest

from agnostophobia.metrics import EntropyMagnitudeStats, MeanStd, entropy_magnitude_stats


def test_values_by_hand():
    entropy = [0.0, 0.2, 2.0, 2.2, 2.4]
    magnitude = [90.0, 100.0, 1.0, 2.0, 3.0]
    stats = entropy_magnitude_stats(entropy, magnitude, [3, 0, -1, -1, -5])
    assert isinstance(stats, EntropyMagnitudeStats)
    assert stats.known_entropy == pytest.approx(MeanStd(0.1, 0.1, 2))
    assert stats.unknown_entropy == pytest.approx(MeanStd(2.2, np.sqrt(0.08 / 3), 3))
    assert stats.known_magnitude == pytest.approx(MeanStd(95.0, 5.0, 2))
    assert stats.unknown_magnitude == pytest.approx(MeanStd(2.0, np.sqrt(2 / 3), 3))
    assert str(stats.known_magnitude) == "95.000 ± 5.000"


def test_matches_numpy_on_random_data():
    rng = np.random.default_rng(0)
    entropy, magnitude = rng.random(500) * 2.3, rng.gamma(2.0, 20.0, 500)
    labels = rng.integers(-1, 10, 500)
    stats = entropy_magnitude_stats(entropy, magnitude, labels)
    k = labels >= 0
    assert stats.known_entropy.mean == pytest.approx(entropy[k].mean())
    assert stats.unknown_magnitude.std == pytest.approx(magnitude[~k].std())
    assert stats.unknown_entropy.n == (~k).sum()


def test_torch_input():
    torch = pytest.importorskip("torch")
    stats = entropy_magnitude_stats(torch.tensor([0.1, 2.0]), torch.tensor([50.0, 1.0]), torch.tensor([0, -1]))
    assert stats.known_magnitude.mean == pytest.approx(50.0)


@pytest.mark.parametrize("entropy, magnitude, labels, match", [
    ([0.1, np.nan], [1.0, 2.0], [0, -1], "entropy contains .*NaN"),
    ([0.1, 0.2], [1.0, np.inf], [0, -1], "magnitude contains .*inf"),
    ([0.1, 0.2], [1.0, 2.0, 3.0], [0, -1], "magnitude has 3 entries but entropy has 2"),
    ([0.1, 0.2], [1.0, 2.0], [0, -1, 1], "labels has 3 entries"),
    ([0.1, 0.2], [1.0, -2.0], [0, -1], "magnitude must be >= 0"),
    ([0.1, 0.2], [1.0, 2.0], [0, 1], "labels has no unknown"),
    ([0.1, 0.2], [1.0, 2.0], [-1, -1], "labels has no known"),
    ([], [], [], "entropy is empty"),
    ([[0.1, 0.2]], [1.0, 2.0], [0, -1], r"entropy must have shape \(N,\)"),
])
def test_bad_input(entropy, magnitude, labels, match):
    with pytest.raises(ValueError, match=match):
        entropy_magnitude_stats(np.array(entropy), np.array(magnitude), np.array(labels))
