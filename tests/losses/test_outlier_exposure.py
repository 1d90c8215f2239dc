"""Outlier Exposure (agnostophobia.losses.outlier_exposure): its float64 reference, checked by
tests/contracts/test_loss_references.py; its identities and pytorch-ood's are in tests/losses/test_peers.py."""
from references import log_softmax_row, loss_reference, uniform_cross_entropy


@loss_reference("outlier-exposure")
def outlier_exposure_term(loss, z, features, y):
    """Hendrycks et al. 2019, Sec. 4.2: cross-entropy on a known, lambda * H(U; S) on a negative."""
    return -log_softmax_row(z)[y] if y >= 0 else loss.outlier_weight * uniform_cross_entropy(z, loss.num_classes)
