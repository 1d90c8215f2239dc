"""The two baselines of the paper (Sec. 4, agnostophobia.losses.baselines): their float64 references,
checked by tests/contracts/test_loss_references.py with every registered loss."""
import torch

from references import log_softmax_row, loss_reference


@loss_reference("softmax")
def softmax_term(loss, z, features, y):
    """Cross-entropy on the knowns; an unknown sample adds nothing."""
    return -log_softmax_row(z)[y] if y >= 0 else torch.zeros((), dtype=torch.float64)


@loss_reference("background")
def background_term(loss, z, features, y):
    """Cross-entropy with the unknowns relabelled as the extra class C."""
    return -log_softmax_row(z)[y if y >= 0 else loss.num_classes]
