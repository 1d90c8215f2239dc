r"""Adversarially trained deep ensemble of MLPs (Lakshminarayanan, Pritzel & Blundell, NIPS
2017), the baseline of the paper's Fig. 3b and 3c.

**Method.** ``M`` MLPs ``784 -> 200 -> 200 -> 200 -> 10`` (ReLU;
:func:`agnostophobia.models.mlp.build_mlp`) are trained on MNIST, each from its own random
initialisation and with its own data order (member m is training seed m), on the negative
log-likelihood plus the NLL of a fast-gradient-sign adversarial example made from the
current weights at every step (:func:`agnostophobia.training.adversarial.adversarial_loss`; the
trainer does it for any config with ``adversarial_epsilon > 0``):

.. math::

    x' = \mathrm{clip}_{[0,1]}\bigl(x + \epsilon\,\mathrm{sign}\,\nabla_x \ell(\theta, x, y)\bigr),
    \qquad \mathcal{L} = \ell(\theta, x, y) + \ell(\theta, x', y),

with ``epsilon`` = 1 % of the input range (inputs are ``x / 255``, so 0.01). The ensemble's
probabilities are the mean of the members' softmax outputs (:func:`average_probabilities`).

**Evaluation (paper Sec. 4.3).** The "squared MLP" scores are the ensemble's
probabilities squared (element-wise, not renormalised, :func:`squared_scores`): a
monotonic rescaling, so their OSCR curve and every CCR@FPR are identical to the
ensemble's (Fig. 3c), while the precision- and accuracy-vs-confidence curves move
(Fig. 3b) -- the paper's "prone to scaling errors" argument (:func:`scaling_invariance`).

The experiment (``agnostophobia reproduce ensemble``, ``configs/ensemble.yaml``) runs
through the machinery of every experiment: ``experiments.reproduce_ensemble``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Sequence

import numpy as np

from agnostophobia.metrics import PAPER_FPR_VALUES, ccr_at_fpr, oscr, precision_vs_confidence
from agnostophobia.metrics.ood import CONFIDENCE_GRID

#: Display names of the ensemble's evaluation rows (reports and figures): the averaged
#: probabilities and their square.
ROW_TITLES = {"ensemble": "MLP ensemble", "ensemble-squared": "Squared MLP ensemble"}


def average_probabilities(member_probs: Sequence[np.ndarray]) -> np.ndarray:
    """The ensemble's prediction: the mean of the members' probabilities, (N, C)."""
    if len(member_probs) == 0:
        raise ValueError("an ensemble needs at least one member")
    return np.mean(np.stack([np.asarray(p, dtype=np.float64) for p in member_probs]), axis=0)


def squared_scores(probs: np.ndarray) -> np.ndarray:
    """The paper's "squared MLP": the probabilities squared element-wise (not renormalised)."""
    return np.square(np.asarray(probs, dtype=np.float64))


def scaling_invariance(scores: np.ndarray, labels: np.ndarray, transform: Callable = squared_scores,
                       thresholds: np.ndarray = CONFIDENCE_GRID) -> Dict[str, Any]:
    """Compare OSCR, CCR@FPR and precision-vs-confidence of ``scores`` and ``transform(scores)``."""
    other = transform(scores)
    a, b = oscr(scores, labels), oscr(other, labels)
    ccr_a, ccr_b = ccr_at_fpr(scores, labels, PAPER_FPR_VALUES), ccr_at_fpr(other, labels, PAPER_FPR_VALUES)
    prec_a = precision_vs_confidence(scores, labels, thresholds).value
    prec_b = precision_vs_confidence(other, labels, thresholds).value
    diff = np.abs(prec_a - prec_b)
    has = np.isfinite(diff)
    where = int(np.flatnonzero(has)[np.argmax(diff[has])]) if has.any() else None
    return {"oscr_identical": bool(np.array_equal(a.fpr, b.fpr) and np.array_equal(a.ccr, b.ccr)),
            "oscr_points": int(len(a.fpr)),
            "ccr_at_fpr_identical": bool(np.array_equal(ccr_a, ccr_b, equal_nan=True)),
            "precision_max_abs_difference": float(diff[where]) if where is not None else None,
            "at_threshold": float(thresholds[where]) if where is not None else None}
