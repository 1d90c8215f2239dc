"""Inverse-frequency sample weights, as the authors trained.

Where they apply: the training pipeline weights by default (config key ``sample_weighting``,
default ``true`` in :class:`~agnostophobia.training.config.TrainConfig` and every shipped
config, as the authors' Keras training passed ``sample_weight``); a loss module called
directly is a plain loss and weights nothing unless it is given ``sample_weight`` (it cannot
know the training set's class counts). Set ``sample_weighting: false`` for unweighted training.

The authors' Keras code weighted each digit class c by 100/N_c and all letters (the
known unknowns, D_b') together as one class, 100/N_unknown, so that every known class
and the unknown group carry the same total weight. Compute the class weights once over
the whole training set with :func:`inverse_frequency_class_weights`, then map each batch
with :func:`sample_weights` and pass the result as a loss's ``sample_weight``.
"""
from __future__ import annotations

import torch

from .._validation import check_labels, to_numpy
from ._base import check_num_classes, check_tensor_storage, int64_label_tensor


def inverse_frequency_class_weights(labels, num_classes: int, per_class_total: float | None = None) -> torch.Tensor:
    """Class weights ``T / N_k`` of length C+1; index C (the last) is the unknown group.

    ``N_k`` counts training samples of known class k (label k) or, for k = C, all
    unknowns (label < 0) together. Every group present thus sums to the same total T:
    ``per_class_total`` if given (the authors used 100), else ``N / K`` with K the number
    of groups present, which makes the mean sample weight 1 and keeps the loss on the
    unweighted scale (the two choices differ by a constant factor only). A group absent
    from ``labels`` gets weight 0 (it never occurs, so its weight is never used).

    Args:
        labels: the whole training set's labels, shape ``(N,)`` (a tensor, array or sequence of
            integers): ``0..C-1`` known classes, negative the known unknowns.
        num_classes: C, the number of known classes.
        per_class_total: T, the total weight of each group present (a finite number > 0); None:
            ``N / K``.

    Returns:
        The class weights, a float tensor of shape ``(C+1,)`` in torch's default dtype.

    Raises:
        ValueError: ``labels`` is empty, not 1-D, not integers or has a label ``>= C``;
            ``num_classes`` is not a positive integer; ``per_class_total`` is not finite and > 0.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import inverse_frequency_class_weights
        >>> labels = torch.tensor([0, 0, 0, 1, -1, -1])
        >>> inverse_frequency_class_weights(labels, num_classes=2)  # classes 0, 1, then the unknowns
        tensor([0.6667, 2.0000, 1.0000])
    """
    num_classes = check_num_classes(num_classes)
    raw = to_numpy(labels, "labels")
    arr = check_labels(raw, n=raw.shape[0] if raw.ndim else 0, num_classes=num_classes, name="labels")
    if arr.size == 0:
        raise ValueError("labels is empty; need the training set's labels")
    labels_t = torch.as_tensor(arr)
    groups = torch.where(labels_t >= 0, labels_t, torch.full_like(labels_t, num_classes))
    counts = torch.bincount(groups, minlength=num_classes + 1).to(torch.get_default_dtype())
    present = counts > 0
    if per_class_total is None:
        total = arr.size / int(present.sum())
    else:
        total = float(per_class_total)
        if not total > 0 or total == float("inf"):
            raise ValueError(f"per_class_total must be a finite number > 0, got {per_class_total!r}")
    weights = torch.zeros_like(counts)
    weights[present] = total / counts[present]
    return weights


def sample_weights(labels, class_weights) -> torch.Tensor:
    """Per-sample weights for a batch: ``class_weights[label]``, or ``class_weights[C]``
    for unknowns (label < 0). Returned on ``labels``' device, in ``class_weights``' dtype.

    Args:
        labels: a batch's labels, shape ``(N,)``: ``0..C-1`` known classes, negative unknowns.
        class_weights: the weights of the C known classes and the unknown group, shape
            ``(C+1,)`` (:func:`inverse_frequency_class_weights`).

    Returns:
        The sample weights, shape ``(N,)``, to pass as a loss's ``sample_weight``.

    Raises:
        ValueError: ``class_weights`` is not of shape ``(C+1,)`` with C >= 1, ``labels`` is not
            1-D integers, or a label is ``>= C``.

    Examples:
        >>> import torch
        >>> from agnostophobia.losses import sample_weights
        >>> sample_weights(torch.tensor([0, 1, -1]), torch.tensor([0.5, 2.0, 1.0]))  # label < 0 takes the last
        tensor([0.5000, 2.0000, 1.0000])
    """
    if isinstance(class_weights, torch.Tensor):
        check_tensor_storage(class_weights, "class_weights")
    labels = int64_label_tensor(labels)
    class_weights = torch.as_tensor(class_weights)
    if class_weights.dim() != 1 or class_weights.shape[0] < 2:
        raise ValueError(
            f"class_weights must have shape (C+1,) with C >= 1, got shape {tuple(class_weights.shape)}"
        )
    if labels.dim() != 1:
        raise ValueError(f"labels must have shape (N,), got shape {tuple(labels.shape)}")
    num_classes = class_weights.shape[0] - 1
    if labels.numel() and int(labels.max()) >= num_classes:
        raise ValueError(
            f"labels contains {int(labels.max())}, but class_weights covers only "
            f"{num_classes} known classes plus the unknown group"
        )
    groups = torch.where(labels >= 0, labels, torch.full_like(labels, num_classes))
    return class_weights.to(labels.device)[groups]
