"""LogitNorm (agnostophobia.losses.logitnorm): its float64 reference, checked by
tests/contracts/test_loss_references.py."""
import torch

from references import log_softmax_row, loss_reference


@loss_reference("logitnorm")
def logitnorm_term(loss, z, features, y):
    """Wei et al. 2022, Eq. 5: cross-entropy of z / (tau ||z||) on the knowns; unknowns add nothing."""
    normalised = z / (loss.logitnorm_temperature * torch.sqrt((z ** 2).sum()))
    return -log_softmax_row(normalised)[y] if y >= 0 else torch.zeros((), dtype=torch.float64)
