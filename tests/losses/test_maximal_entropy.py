"""The maximal-entropy loss (agnostophobia.losses.maximal_entropy): its float64 reference, checked by
tests/contracts/test_loss_references.py."""
from references import log_softmax_row, loss_reference, uniform_cross_entropy


@loss_reference("maximal-entropy")
def maximal_entropy_term(loss, z, features, y):
    """Vareto et al.: the margin m taken off the target logit of a known; H(U; S) on a negative."""
    if y < 0:
        return uniform_cross_entropy(z, loss.num_classes)
    shifted = z.clone()
    shifted[y] -= loss.margin
    return -log_softmax_row(shifted)[y]
