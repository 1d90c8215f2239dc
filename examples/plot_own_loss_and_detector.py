"""
Your own loss and detector, from outside the package
====================================================

A loss is an ``OpenSetLoss`` registered in ``LOSSES``; a detector is a ``Detector``
registered in ``DETECTORS``. Registered from your own code (or from an installed package
through the ``agnostophobia.plugins`` entry points), they are found by name like the
built-in ones: ``approaches: [squared]`` and ``detectors: {margin: {scale: 2.0}}`` in an
experiment YAML, ``tune``, ``tune-detectors``, ``calibrate``, ``predict`` and ``export``,
and the settings reference of this site, which iterates the registries. Their settings are
declared once (a ``Setting`` class attribute, or inferred from an annotated keyword with a
default) and checked on construction.
"""
# %%
# A loss
# ------
# A subclass of ``OpenSetLoss`` with a ``forward(logits, labels, sample_weight=None)``. The
# base class checks the inputs (shapes, the label rule) and reduces as ``reduction`` says.
# ``push`` is an annotated keyword with a default: a float setting, inferred, checked when the
# loss is built from a config.
import matplotlib.pyplot as plt
import numpy as np
import torch

from agnostophobia.detectors import DETECTORS, Detector, Setting, TorchScore, build_detector
from agnostophobia.detectors import place_in_predicted_column, register
from agnostophobia.losses import LOSSES, OpenSetLoss, build_loss
from agnostophobia.metrics import ccr_at_fpr, oscr

STEPS, SEED = 100, 0
torch.set_num_threads(1)  # a network this small: one thread is faster than two that wait for each other


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


LOSSES.register("squared")(SquaredLoss)

# %%
# A detector
# ----------
# A subclass of ``Detector`` with ``_scores(logits, features)`` returning (N, C) per-class
# scores, larger = more known. ``scale`` is declared once, as a class attribute: its type,
# default, range and the grid ``tune-detectors`` searches; the constructor
# ``MarginDetector(*, scale=1.0)`` is made from it and checks the value. ``_torch_score`` is
# the same score in torch operations, which ``export`` puts in the exported file.
class MarginDetector(Detector):
    """The top logit minus the second, times ``scale``."""

    title = "Margin"
    scale = Setting(float, 1.0, low=0, low_open=True, grid=(0.5, 1.0, 2.0), doc="multiplies the margin")

    def _scores(self, logits, features):
        top2 = np.sort(logits, axis=1)[:, -2:]
        return place_in_predicted_column(self.scale * (top2[:, 1] - top2[:, 0]), logits)

    def _torch_score(self):  # the same score in torch, for `export`
        scale = self.scale
        return TorchScore(lambda logits, features, predicted:
                          scale * (logits.topk(2, dim=1).values[:, 0] - logits.topk(2, dim=1).values[:, 1]))


register("margin")(MarginDetector)

# %%
# Found by name, checked against the declarations
# -----------------------------------------------
print("losses:", LOSSES.names())
print("detectors:", DETECTORS.names())
print("squared's settings:", {k: (s.type.__name__, s.default) for k, s in build_loss("squared", 3).hyperparameters().items()})
try:
    build_detector("margin", scale=-1.0)
except ValueError as error:
    print("checked against the declaration:", error)

# %%
# Trained and scored
# ------------------
# A few steps on generated data: 3 known classes and negatives (label -1) in between; at test
# time new samples of both, scored by the built-in softmax and the registered margin.
torch.manual_seed(SEED)
rng = np.random.default_rng(SEED)
centres = np.array([[3, 0], [-3, 0], [0, 3]], np.float32)


def samples(n):
    x = np.concatenate([rng.normal(c, 0.5, (n, 2)) for c in centres] + [rng.normal(0, 0.5, (n, 2))])
    y = np.concatenate([np.repeat(np.arange(3), n), -np.ones(n, int)])
    return torch.tensor(x, dtype=torch.float32), y


x, y = samples(100)
x_test, y_test = samples(100)
net = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
loss_fn = build_loss("squared", 3, push=0.5)
optimiser = torch.optim.Adam(net.parameters(), lr=0.01)
for step in range(STEPS):
    optimiser.zero_grad()
    loss = loss_fn(net(x), torch.from_numpy(y))
    loss.backward()
    optimiser.step()
with torch.no_grad():
    logits = net(x_test)
fig, ax = plt.subplots(figsize=(5, 3.6))
for name in ("softmax", "margin"):
    scores = build_detector(name).scores(logits, None)
    print(f"{name:8} CCR at FPR 0.05, 0.1: {np.round(ccr_at_fpr(scores, y_test, [0.05, 0.1]), 3)}")
    fpr, ccr, _ = oscr(scores, y_test)
    ax.plot(fpr, ccr, label=name, drawstyle="steps-post")
ax.set_xscale("log")
ax.set_xlabel("false positive rate")
ax.set_ylabel("correct classification rate")
ax.set_title("the registered loss, two detectors")
ax.legend()
fig.tight_layout()
