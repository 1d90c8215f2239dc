"""MixOE (agnostophobia.losses.mixoe): its float64 reference, checked by tests/contracts/test_loss_references.py;
the mixing of the batch hook is tested in tests/losses/test_peers.py."""
from references import log_softmax_row, loss_reference, uniform_cross_entropy


@loss_reference("mixoe")
def mixoe_term(loss, z, features, y):
    """Zhang et al. 2023 with lambda = 0 (no batch hook): cross-entropy on a known, beta * H(U; S) on a negative."""
    return -log_softmax_row(z)[y] if y >= 0 else loss.mix_weight * uniform_cross_entropy(z, loss.num_classes)
