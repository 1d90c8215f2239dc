"""Entropic Open-Set (paper Eq. 1, agnostophobia.losses.entropic): its float64 reference, checked by
tests/contracts/test_loss_references.py; the lemmas on it are in tests/losses/test_losses.py."""
from references import log_softmax_row, loss_reference, uniform_cross_entropy


@loss_reference("entropic")
def entropic_term(loss, z, features, y):
    """-log S_y for a known; -1/C sum_c log S_c for an unknown (Eq. 1)."""
    return -log_softmax_row(z)[y] if y >= 0 else uniform_cross_entropy(z, loss.num_classes)
