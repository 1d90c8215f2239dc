"""
A detector on a torchvision backbone's features
===============================================

Detectors read a network's logits and deep features; they do not care which network. Here
torchvision's ResNet-18 with the package's open-set head (``TorchvisionBackbone``: the
trunk, a deep-feature layer F and a bias-free logit layer), randomly initialised (no weights
are downloaded), on generated 32x32 colour images. The k-NN detector (Sun et al. 2022),
fitted on the training knowns' features, is compared with scores that read the logits only.
"""
# %%
# The network and the images
# --------------------------
# Three known colours with texture, and unknowns of random noise. Any torchvision
# classification model name works (``resnet50``, ``convnext_tiny``, ...); it returns
# ``(logits, features)`` like every network of the package.
import matplotlib.pyplot as plt
import numpy as np
import torch

from agnostophobia.detectors import build_detector
from agnostophobia.metrics import auroc
from agnostophobia.models import TorchvisionBackbone

PER_CLASS, SEED = 40, 0
torch.manual_seed(SEED)
rng = np.random.default_rng(SEED)
colours = [(0.9, 0.2, 0.2), (0.2, 0.8, 0.2), (0.2, 0.3, 0.9)]
net = TorchvisionBackbone("resnet18", num_outputs=3, feature_dim=32).eval()


def images(colour, n):
    """(n, 3, 32, 32) float images in [0, 1]: a colour with texture, or noise (colour None)."""
    if colour is None:
        return rng.random((n, 3, 32, 32), dtype=np.float32)
    base = np.asarray(colour, np.float32)[None, :, None, None]
    return np.clip(base + rng.normal(0, 0.08, (n, 3, 32, 32)), 0, 1).astype(np.float32)


def outputs(x):
    with torch.no_grad():
        logits, features = net(torch.from_numpy(x))
    return logits.numpy(), features.numpy()


# %%
# Logits and deep features
# ------------------------
# One forward pass per set: the training knowns (40 per colour) and a test set of 20 per
# colour plus 40 noise images (label -1). Detectors take these arrays, or tensors on any
# device.
train_x = np.concatenate([images(c, PER_CLASS) for c in colours])
test_x = np.concatenate([images(c, PER_CLASS // 2) for c in colours] + [images(None, PER_CLASS)])
test_y = np.concatenate([np.repeat(np.arange(3), PER_CLASS // 2), -np.ones(PER_CLASS, int)])
train_logits, train_features = outputs(train_x)
test_logits, test_features = outputs(test_x)
print("logits", test_logits.shape, "features", test_features.shape)

# %%
# Four detectors, one fitted
# --------------------------
# softmax, max-logit and energy read the logits and need no fitting; k-NN is fitted on the
# training knowns' features. An untrained network classifies at random, so k-NN is told that
# the network's own predictions are the classes, as a fitted detector sees "correctly
# classified training knowns". An untrained network's logits carry little; its features
# already separate what looks unlike the training data.
train_pred = train_logits.argmax(axis=1)
print(f"{'detector':10} AUROC (knowns vs noise)")
fig, axes = plt.subplots(2, 2, figsize=(7, 4.4))
for ax, (name, settings) in zip(axes.flat, (("softmax", {}), ("max-logit", {}), ("energy", {}), ("knn", {"k": 5}))):
    detector = build_detector(name, **settings)
    if detector.needs_fit:
        detector.fit(train_logits, train_features, train_pred)
    score = detector.scores(test_logits, test_features).max(axis=1)  # larger = more known
    print(f"{name:10} {auroc(score, test_y):.3f}")
    ax.hist([score[test_y >= 0], score[test_y < 0]], bins=20, label=["knowns", "noise"])
    ax.set_title(f"{name}: AUROC {auroc(score, test_y):.2f}", fontsize=9)
    ax.set_yticks([])
axes.flat[0].legend(fontsize=8)
fig.supxlabel("score (larger = more known)", fontsize=9)
fig.tight_layout()
