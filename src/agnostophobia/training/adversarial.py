r"""Adversarial training with the fast gradient sign method (Goodfellow, Shlens & Szegedy,
ICLR 2015), as Lakshminarayanan, Pritzel & Blundell (NIPS 2017) train the members of the
deep ensemble the paper compares with (Fig. 3):

.. math::

    x' = \mathrm{clip}_{[0,1]}\bigl(x + \epsilon\,\mathrm{sign}\,\nabla_x \ell(\theta, x, y)\bigr),
    \qquad \mathcal{L} = \ell(\theta, x, y) + \ell(\theta, x', y),

with :math:`\ell` the batch's training loss and :math:`\epsilon` in input units (inputs are
``x / 255`` in [0, 1], so 0.01 is 1 % of the range). The trainer applies it to any
approach when the config sets ``adversarial_epsilon > 0`` (:func:`adversarial_loss`).

The gradient is that of the batch-mean loss; its sign per pixel equals that of each
sample's own loss (a positive factor) unless the model mixes samples (batch norm in
training mode). Pixels with a zero gradient do not move.
"""
from __future__ import annotations

from typing import Callable, Tuple

import torch


def fgsm_step(x: torch.Tensor, grad: torch.Tensor, epsilon: float) -> torch.Tensor:
    """``clip(x + epsilon * sign(grad), 0, 1)``, detached."""
    return (x.detach() + epsilon * grad.sign()).clamp_(0.0, 1.0)


def adversarial_loss(batch_loss: Callable[[torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]],
                     x: torch.Tensor, y: torch.Tensor, epsilon: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(loss(x) + loss(x'), logits(x))`` for ``batch_loss(x, y) -> (loss, logits)``; the clean
    forward pass is shared between the loss and the input gradient."""
    x = x.detach().requires_grad_(True)
    clean, logits = batch_loss(x, y)
    # batched seeds: one loss per seed, each a function of its own seed's inputs alone
    (grad,) = torch.autograd.grad(clean.sum(), x, retain_graph=True)
    adversarial, _ = batch_loss(fgsm_step(x, grad, epsilon), y)
    return clean + adversarial, logits

