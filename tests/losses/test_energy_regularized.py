"""The energy-regularised loss (agnostophobia.losses.energy_regularized): its float64 reference,
checked by tests/contracts/test_loss_references.py."""
import torch

from references import log_softmax_row, loss_reference


@loss_reference("energy-regularized", energy_margin_in=-2.0, energy_margin_out=-4.0)  # both hinges active
def energy_regularized_term(loss, z, features, y):
    """Liu et al. 2020, Eq. 8 at T = 1: cross-entropy plus the squared hinges on the energy -logsumexp(z)."""
    energy = -torch.logsumexp(z, 0).item()
    if y >= 0:
        return -log_softmax_row(z)[y] + loss.energy_weight * max(energy - loss.energy_margin_in, 0) ** 2
    return torch.tensor(loss.energy_weight * max(loss.energy_margin_out - energy, 0) ** 2, dtype=torch.float64)
