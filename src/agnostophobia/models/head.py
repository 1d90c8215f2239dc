"""The open-set head every model shares: deep features F, then a bias-free logit layer."""
from __future__ import annotations

import contextlib

import torch
from torch import nn


def _no_autocast(device_type: str):
    """Autocast switched off; nothing to switch off on a device without autocast (``meta``, on
    which tests trace a training step without data)."""
    if torch.amp.is_autocast_available(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()


def open_set_head(backbone_output: torch.Tensor, features: nn.Linear, logits: nn.Linear):
    """``(logits, F)`` computed in fp32 even inside a bf16 autocast region.

    The backbone's convolutions are where the FLOPs are; the head is tiny, and it is where
    the paper's quantities live: ‖F‖, which Objectosphere pushes towards 0 for unknowns
    and above ξ for knowns (Eq. 2), and the logits every score is read from. bf16 keeps
    8 bits of mantissa, so it would round ‖F‖ and turn nearly equal scores into ties that
    OSCR then counts together (Eq. 3).
    """
    with _no_autocast(backbone_output.device.type):
        deep_features = features(backbone_output.float())
        return logits(deep_features), deep_features
