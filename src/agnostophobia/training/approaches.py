"""The four approaches of the paper (Sec. 3-4), found by name: how each network is trained.

=============  =====================  ===============================================
approach       loss (Sec. 4)          network outputs
=============  =====================  ===============================================
softmax        cross-entropy, knowns  C logits; trained on knowns only
background     C+1 cross-entropy      C known logits + 1 background logit (last)
entropic       J_E (Eq. 1)            C logits
objectosphere  J_R (Eq. 2)            C logits
=============  =====================  ===============================================

How a trained network is scored is not the approach's business: every applicable
detector (``agnostophobia.detectors``) scores every approach; the paper's pairings and
their display names are ``agnostophobia.metrics.rows``.
"""
from __future__ import annotations

from dataclasses import dataclass

from agnostophobia.registry import Registry


@dataclass(frozen=True)
class Approach:
    name: str
    uses_unknowns: bool            # trains on D_b' (softmax thresholding does not)
    background_class: bool = False  # one logit more than known classes: the background class, last


APPROACHES: Registry = Registry("approach")
for _approach in (
    Approach("softmax", uses_unknowns=False),
    Approach("background", uses_unknowns=True, background_class=True),
    Approach("entropic", uses_unknowns=True),
    Approach("objectosphere", uses_unknowns=True),
):
    APPROACHES.register(_approach.name)(_approach)
