"""
Your own loss and detector, from outside the package
====================================================

A loss is an ``OpenSetLoss`` registered in ``LOSSES``; a detector is a ``Detector``
registered in ``DETECTORS``. Registered from your own code (or from an installed package
through the ``agnostophobia.plugins`` entry points), they are found by name like the
built-in ones: ``approaches: [squared]`` and ``detectors: {margin: {scale: 2.0}}`` in an
experiment YAML, ``tune``, ``tune-detectors``, ``calibrate``, ``predict`` and ``export``,
and the settings reference of this site, which iterates the registries. Their settings are
declared once (``SETTINGS``, or inferred from an annotated keyword with a default) and
checked on construction.
"""
# %%
import argparse

import numpy as np
import torch

from agnostophobia.detectors import DETECTORS, Detector, Setting, TorchScore, build_detector
from agnostophobia.detectors import place_in_predicted_column, register
from agnostophobia.losses import LOSSES, OpenSetLoss, build_loss
from agnostophobia.metrics import ccr_at_fpr


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="register a loss and a detector from outside the package")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def define_and_register():
    """The two classes, registered once per process (importing this file registers nothing)."""

    class SquaredLoss(OpenSetLoss):
        """Cross-entropy for knowns; for unknowns the squared logits, times ``push``."""

        title = "Squared"
        uses_features = False
        trains_on_unknowns = True

        def __init__(self, num_classes: int, reduction: str = "mean", push: float = 1.0):
            super().__init__(num_classes, reduction)  # ``push``: a float setting, inferred
            self.push = push

        def forward(self, logits, labels, sample_weight=None):
            logits, labels, weight = self._check_inputs(logits, labels, sample_weight)
            known = labels >= 0
            ce = torch.nn.functional.cross_entropy(logits, labels.clamp(min=0), reduction="none")
            per_sample = torch.where(known, ce, self.push * logits.pow(2).mean(dim=1))
            return self._reduce(per_sample, labels, weight)

    class MarginDetector(Detector):
        """The top logit minus the second, times ``scale``."""

        title = "Margin"
        SETTINGS = {"scale": Setting(float, 1.0, low=0, low_open=True, grid=(0.5, 1.0, 2.0),
                                     doc="multiplies the margin")}

        def __init__(self, scale: float = 1.0):
            self._take_settings(scale=scale)

        def _scores(self, logits, features):
            top2 = np.sort(logits, axis=1)[:, -2:]
            return place_in_predicted_column(self.scale * (top2[:, 1] - top2[:, 0]), logits)

        def _torch_score(self):  # the same score in torch, for `export`
            scale = self.scale
            return TorchScore(lambda logits, features, predicted:
                              scale * (logits.topk(2, dim=1).values[:, 0] - logits.topk(2, dim=1).values[:, 1]))

    if "squared" not in LOSSES:
        LOSSES.register("squared")(SquaredLoss)
    if "margin" not in DETECTORS:
        register("margin")(MarginDetector)


def run(args) -> None:
    define_and_register()
    print("losses:", LOSSES.names())
    print("detectors:", DETECTORS.names())
    print("squared's settings:", {k: (s.type.__name__, s.default) for k, s in build_loss("squared", 3).hyperparameters().items()})
    try:
        build_detector("margin", scale=-1.0)
    except ValueError as error:
        print("checked against the declaration:", error)

    # A few steps on generated data: 3 known classes, negatives (label -1) in between.
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    centres = np.array([[3, 0], [-3, 0], [0, 3]], np.float32)
    x = np.concatenate([rng.normal(c, 0.5, (100, 2)) for c in centres] + [rng.normal(0, 0.5, (100, 2))])
    y = np.concatenate([np.repeat(np.arange(3), 100), -np.ones(100, int)])
    x, y = torch.tensor(x, dtype=torch.float32), torch.from_numpy(y)
    net = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    loss_fn = build_loss("squared", 3, push=0.5)
    optimiser = torch.optim.Adam(net.parameters(), lr=0.01)
    for step in range(args.steps):
        optimiser.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        logits = net(x)
    for name in ("softmax", "margin"):
        scores = build_detector(name).scores(logits, None)
        print(f"{name:8} CCR at FPR 0.05, 0.1: {np.round(ccr_at_fpr(scores, y, [0.05, 0.1]), 3)} (on its training data)")


# %%
# Registered, checked, trained, scored
# ------------------------------------
if __name__ == "__main__":
    run(parse_args())
