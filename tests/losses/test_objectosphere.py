"""The Objectosphere loss (paper Eq. 2, agnostophobia.losses.objectosphere): its float64 reference,
checked by tests/contracts/test_loss_references.py; Theorem 2 and the gradients at zero features are in
tests/losses/test_losses.py."""
import torch

from references import loss_reference
from tests.losses.test_entropic import entropic_term


# xi in the middle of the test features' norms, so both sides of max(xi - ||F||, 0) are exercised;
# a lambda large enough that the feature term visibly matters
@loss_reference("objectosphere", xi=2.0, lambda_=0.1)
def objectosphere_term(loss, z, features, y):
    """J_E + lambda * max(xi - ||F||, 0)^2 for a known, + lambda * ||F||^2 for an unknown (Eq. 2)."""
    norm = torch.sqrt((features ** 2).sum())
    penalty = max(loss.xi - norm.item(), 0.0) ** 2 if y >= 0 else norm ** 2
    return entropic_term(loss, z, features, y) + loss.lambda_ * penalty
