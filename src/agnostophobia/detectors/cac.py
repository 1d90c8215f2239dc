"""CAC's distance-based rejection score (Miller, Sünderhauf, Milford and Dayoub, "Class Anchor
Clustering: a Loss for Distance-based Open Set Recognition", WACV 2021, Sec. 3), on a network trained
with the ``cac`` loss, whose logits are the negated distances of its linear layer's output z to the
class anchors: by default as the authors evaluate it, with the anchors moved to the mean z of each
class's correctly classified training knowns (dimitymiller/cac-openset, ``eval_cacOpenset.py`` and
``utils.py`` ``find_anchor_means``); with ``anchors: fixed`` on the network's own anchors α·e_k."""
from __future__ import annotations

import numpy as np
import torch
from scipy.spatial.distance import cdist
from scipy.special import logsumexp

from agnostophobia.losses.cac import anchor_distances

from ._base import (Detector, Setting, TorchScore, as_float64, check_training_data, picked,
                    place_in_predicted_column, register)
from .mahalanobis import class_means


#: Below :math:`\ln |s| = ` this, :math:`|s|` is continued in log space instead of underflowing.
LOG_CUT = -700.0


def _continued(lib, top, rest):
    r"""The score :math:`s = l_t \sigma(a)` from the top logit :math:`l_t` and :math:`a = \ln \sum_{j \ne t}
    e^{l_j - l_t}` (numpy or torch), tie-free: with :math:`m = \ln |l_t| + \ln \sigma(a)`, :math:`s` itself
    where :math:`m >` :data:`LOG_CUT`; below it, where :math:`s` would round to 0, a CAC sample's
    (:math:`l_t < 0`) continues upwards as :math:`(c - m) - e^{c}` (above every score of the first regime,
    larger for smaller :math:`|s|`), any other's as :math:`e^{c} / (1 + c - m)`."""
    tiny = np.finfo(np.float64).tiny
    if lib is torch:
        log_q = -torch.logaddexp(torch.zeros_like(rest), -rest)
        size = torch.log(torch.clamp(top.abs(), min=tiny))
    else:
        log_q = -np.logaddexp(0.0, -rest)
        size = np.log(np.maximum(np.abs(top), tiny))
    m = size + log_q
    exact = lib.sign(top) * lib.exp(lib.maximum(m, lib.full_like(m, LOG_CUT)))
    cut = float(np.exp(LOG_CUT))
    beyond = lib.where(top < 0, (LOG_CUT - m) - cut, cut / (1 + lib.clamp(LOG_CUT - m, min=0)
                                                             if lib is torch else 1 + np.maximum(LOG_CUT - m, 0)))
    return lib.where(m > LOG_CUT, exact, beyond)


def cac_scores(logits) -> np.ndarray:
    r"""(N,) :math:`-d_t (1 - \mathrm{softmin}(d)_t)` at the predicted class t, with :math:`d = -l`: minus
    CAC's rejection score :math:`\min_k d_k (1 - \mathrm{softmin}(d)_k)` (attained at the nearest anchor t
    where the distances are >= 0). :math:`1 - \mathrm{softmin}(d)_t` is the sigmoid of
    :math:`a = \ln \sum_{j \ne t} e^{l_j - l_t}`, exact where the softmin rounds to 1; where the product
    would round to 0 it is continued in log space (tie-free; on a CAC network's logits, all <= 0, the
    order stays the paper's).

    Args:
        logits: the (N, C) logits of a CAC network (the negated distances), a NumPy array or tensor.

    Returns:
        The (N,) float64 scores, larger = more known.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors.cac import cac_scores
        >>> distances = np.array([[1.0, 5.0], [3.0, 3.0]])
        >>> cac_scores(-distances).round(4)  # -1·(1 - 1/(1 + e^-4)), -3·(1 - 1/2)
        array([-0.018, -1.5  ])
    """
    x = as_float64(logits, "logits")
    rows = np.arange(len(x))
    top = x.argmax(axis=1)
    if x.shape[1] == 1:  # one class: softmin 1, nothing to reject against
        return np.zeros(len(x))
    shifted = x - x[rows, top][:, None]
    shifted[rows, top] = -np.inf
    return _continued(np, x[rows, top], logsumexp(shifted, axis=1))


def _torch_cac_score(logits: torch.Tensor, features: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """:func:`cac_scores` in torch operations, for ``export``."""
    top = picked(logits, predicted)
    own = torch.arange(logits.shape[1], device=logits.device)[None, :] == predicted[:, None]
    shifted = torch.where(own, torch.full_like(logits, -torch.inf), logits - top[:, None])
    rest = torch.logsumexp(shifted, dim=1)
    finite = torch.isfinite(rest)
    return torch.where(finite, _continued(torch, top, torch.where(finite, rest, torch.zeros_like(rest))),
                       torch.zeros_like(top))


#: Where the ``cac`` detector measures the distances from: ``means``, the mean z of each class's correctly
#: classified training knowns (the authors' evaluation); ``fixed``, the network's anchors α·e_k.
ANCHORS = ("means", "fixed")


def anchor_means(z: np.ndarray, logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(C, C) the mean z of each class's correctly classified training knowns (the arg-max of the logits is
    the label), the authors' ``find_anchor_means(..., only_correct=True)``: their ``gather_outputs``
    keeps the samples whose arg-max of z is the label, the same samples, as the nearest of the anchors
    α·e_k is the largest entry of z. A class none of whose training samples is classified right (a network
    barely trained; the authors' mean would be NaN) takes the mean z of all its samples; a ``ValueError``
    names the classes without any."""
    num_classes = logits.shape[1]
    counts = np.bincount(labels, minlength=num_classes)
    if (counts == 0).any():
        missing = np.flatnonzero(counts == 0)
        raise ValueError(f"class(es) {', '.join(map(str, missing[:5]))} have no training sample; CAC's anchor "
                         "means need one per class (anchors: fixed needs none)")
    correct = logits.argmax(axis=1) == labels
    kept = correct | (np.bincount(labels[correct], minlength=num_classes) == 0)[labels]
    return class_means(z[kept], labels[kept], num_classes)


@register("cac")
class CACDetector(Detector):
    r"""CAC's distance-based rejection score (Miller et al., WACV 2021, Sec. 3) on a ``cac`` network. With
    :math:`d_k` the distance of the network's linear output :math:`z = W F + b` to anchor :math:`k`,

    .. math:: s(x) = -\,d_t(x)\,\bigl(1 - \mathrm{softmin}(d(x))_t\bigr),\qquad t = \arg\min_k d_k(x),

    larger = more known (continued in log space where it would round to 0: :func:`cac_scores`); the paper
    rejects where :math:`\min_k d_k (1 - \mathrm{softmin}(d)_k)` (which is attained at t) is large.

    ``anchors: means`` (the default), as the authors evaluate (dimitymiller/cac-openset,
    ``eval_cacOpenset.py``: ``find_anchor_means(..., only_correct=True)`` then ``net.set_anchors``):
    fitted on the training knowns, the anchors are the means :math:`\mu_k` of z over each class's
    correctly classified samples (all of its samples where none is: ``anchor_means``), and
    :math:`d_k = \lVert z - \mu_k \rVert`, z from the features and the network's last layer (CAC's
    ``AnchorDistances`` keeps the linear layer's weight and bias:
    :meth:`~agnostophobia.detectors.Detector.use_last_layer`).
    ``anchors: fixed``: the network's own anchors α·e_k, whose distances are its negated logits,
    :math:`d = -l`; nothing fitted, features and last layer not read.

    One number per sample, in the column of the network's prediction (the nearest fixed anchor, the
    arg-max of z): the score is the authors', the prediction stays the network's. Applies to ``cac``
    networks alone (:attr:`approaches`): on other logits the product has no meaning.

    Conventions that differ: the authors' accuracy reads the nearest mean, not the nearest anchor; their
    means also average the horizontally flipped training images (except MNIST and SVHN), here the
    training knowns' stored outputs; their ``gather_outputs`` / ``metrics.auroc`` take the minimum of the
    score over every class, here the nearest anchor's (the same, the distances being >= 0).
    pytorch-ood 0.4.0's ``CACLoss.score`` is :math:`-\max_k d_k (1 - \mathrm{softmin}(d)_k)` on the fixed
    anchors, the largest class's product instead of the smallest, and no anchor means.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import build_detector
        >>> distances = np.array([[1.0, 5.0, 5.0], [3.0, 3.0, 3.0]])  # near anchor 0; equally far from all
        >>> build_detector("cac", anchors="fixed").scores(-distances).max(axis=1).round(4)
        array([-0.0353, -2.    ])
        >>> z = np.array([[9.0, 1.0], [8.0, 0.0], [1.0, 9.0], [2.0, 1.0]])  # four training knowns' z (W = I)
        >>> logits = -np.linalg.norm(z[:, None, :] - 10.0 * np.eye(2), axis=2)  # a cac network's, α = 10
        >>> detector = build_detector("cac").use_last_layer(np.eye(2)).fit(logits, z, np.array([0, 0, 1, 1]))
        >>> detector.anchor_means_  # the last sample, nearest anchor 0, is misclassified: left out
        array([[8.5, 0.5],
               [1. , 9. ]])
    """

    title = "CAC rejection score"
    approaches = ("cac",)
    needs_fit = True  # anchors: means (an instance with anchors: fixed reads no fit, features or layer)
    needs_features = True
    needs_last_layer = True  # the linear layer z = W F + b that CAC's anchor distances read
    FITTED_STATE = ("anchor_means_",)
    SCORE_SCALE = 2  # the distances to the anchor means (1: to the network's fixed anchors)
    SCALE_CHANGE = ("the cac score measured its distances from the training knowns' anchor means (the authors' "
                    "evaluation)")
    report_note = ("Miller et al. (WACV 2021), as the authors evaluate it (eval_cacOpenset.py): the distances of "
                   "the linear output z to the mean z of each class's correctly classified training knowns; "
                   "anchors: fixed keeps the network's anchors α·e_k.")
    anchors = Setting(str, "means", choices=ANCHORS,
                      doc="where the distances are measured from: 'means', the mean linear output z of each "
                          "class's correctly classified training knowns (the authors' evaluation); 'fixed', the "
                          "network's anchors α·e_k (its logits)",
                      source="dimitymiller/cac-openset, eval_cacOpenset.py: ``find_anchor_means(..., "
                             "only_correct=True)`` then ``net.set_anchors``; pytorch-ood 0.4.0 ``CACLoss.score``: "
                             "the fixed anchors",
                      differs="the means leave out the authors' horizontally flipped training images (all "
                              "datasets but MNIST and SVHN)")

    def __post_init__(self):
        if self.anchors == "fixed":  # the network's logits are its distances: nothing else is read
            self.needs_fit = self.needs_features = self.needs_last_layer = False

    def fit(self, train_logits, train_features, train_labels) -> "CACDetector":
        if self.anchors == "fixed":
            return super().fit(train_logits, train_features, train_labels)
        logits, features, labels = check_training_data(train_logits, train_features, train_labels, need_features=True)
        self._check_last_layer(logits, features)
        self.anchor_means_ = anchor_means(self._linear(features), logits, labels)
        self._fitted = True
        return self

    def _linear(self, features: np.ndarray) -> np.ndarray:
        """z = W F + b, the linear layer CAC's anchor distances read."""
        return features @ self.weight_.T + self.bias_

    def _scores(self, logits, features):
        if self.anchors == "fixed":
            return place_in_predicted_column(cac_scores(logits), logits)
        distances = cdist(self._linear(features), self.anchor_means_)  # Euclidean
        return place_in_predicted_column(cac_scores(-distances), logits)

    def _torch_score(self):
        if self.anchors == "fixed":
            return TorchScore(_torch_cac_score)
        return TorchScore(_torch_cac_means_score, weight=self.weight_, bias=self.bias_,
                          anchor_means=self.anchor_means_)


def _torch_cac_means_score(logits, features, predicted, weight, bias, anchor_means) -> torch.Tensor:
    """The score of ``anchors: means`` in torch operations: :func:`_torch_cac_score` of the negated
    distances of z = W F + b to the anchor means, at the nearest mean."""
    negated = -anchor_distances(features @ weight.T + bias, anchor_means)
    return _torch_cac_score(negated, features, negated.argmax(dim=1))
