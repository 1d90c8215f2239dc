"""VOS (agnostophobia.losses.vos): its float64 reference, checked by tests/contracts/test_loss_references.py;
the queues and the synthesis are tested in tests/losses/test_peers.py."""
import torch

from references import log_softmax_row, loss_reference


@loss_reference("vos")
def vos_term(loss, z, features, y):
    """Du et al. 2022 before synthesis starts: cross-entropy on the knowns; unknowns add nothing."""
    return -log_softmax_row(z)[y] if y >= 0 else torch.zeros((), dtype=torch.float64)
