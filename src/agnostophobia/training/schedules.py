"""The learning-rate schedules of the config key ``scheduler``, as factors of ``lr``.

* ``none``: constant.
* ``cosine``: half a cosine from ``lr`` to 0 over the epochs, stepped after each epoch
  (:class:`torch.optim.lr_scheduler.CosineAnnealingLR`).
* ``step``: ``lr`` times ``gamma`` every ``step_size`` epochs.
* ``onecycle``: stepped after each optimiser step (:func:`one_cycle`): airbench's short schedule.
* ``cosine-per-step``: stepped after each optimiser step: half a cosine over all steps from ``lr``
  down to :data:`COSINE_FLOOR` (:class:`torch.optim.lr_scheduler.CosineAnnealingLR` over steps),
  the schedule of Outlier Exposure's code (Hendrycks et al., ICLR 2019; ``MNIST/oe_tune.py``,
  ``CIFAR/oe_tune.py``) and of the fine-tunes that extend it (the energy loss's ``CIFAR/train.py``,
  MixOE's ``train/train_mixoe.py``).
"""
from __future__ import annotations

import functools

import torch

SCHEDULERS = ("none", "cosine", "step", "onecycle", "cosine-per-step")
#: the schedules whose learning rate changes after every optimiser step, not every epoch
STEPWISE_SCHEDULERS = ("onecycle", "cosine-per-step")
#: the learning rate ``cosine-per-step`` ends at: the ``1e-6`` of Outlier Exposure's ``cosine_annealing``
COSINE_FLOOR = 1e-6


def one_cycle(step: int, total: int, warmup: float) -> float:
    """The ``onecycle`` schedule's factor of ``lr`` after ``step`` optimiser steps of ``total``:
    linear from 1/5 to 1 over the first ``warmup`` fraction, then linear to 0 at the last step
    (airbench's triangular schedule, Jordan 2024, arXiv:2404.00498)."""
    peak = max(1, round(warmup * total))
    if step < peak:
        return 0.2 + 0.8 * step / peak
    return max(0.0, (total - step) / max(1, total - peak))


def build_scheduler(optimizer: torch.optim.Optimizer, cfg, steps_per_epoch: int):
    """The learning-rate scheduler of ``cfg.scheduler`` for ``optimizer``; one in
    :data:`STEPWISE_SCHEDULERS` is stepped after every optimiser step, the others after every epoch."""
    total = cfg.epochs * steps_per_epoch
    if cfg.scheduler == "onecycle":
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, functools.partial(one_cycle, total=total, warmup=cfg.warmup_fraction))
    if cfg.scheduler == "cosine-per-step":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total, 1), eta_min=COSINE_FLOOR)
    if cfg.scheduler == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=cfg.epochs)
    if cfg.scheduler == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=cfg.step_size, gamma=cfg.gamma)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: 1.0)
