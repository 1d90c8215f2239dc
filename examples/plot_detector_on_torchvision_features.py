"""
A detector on a torchvision backbone's features
===============================================

Detectors read a network's logits and deep features; they do not care which network. Here
torchvision's ResNet-18 with the package's open-set head (``TorchvisionBackbone``: the
trunk, a deep-feature layer F and a bias-free logit layer), randomly initialised (no weights
are downloaded), on generated 32x32 colour images: three known colours, and unknowns of
random noise. The k-NN detector (Sun et al. 2022), fitted on the training knowns' features,
is compared with scores that read the logits only. An untrained network's logits carry
little; its features already separate what looks unlike the training data.
"""
# %%
import argparse

import matplotlib.pyplot as plt
import numpy as np
import torch

from agnostophobia.detectors import build_detector
from agnostophobia.metrics import auroc
from agnostophobia.models import TorchvisionBackbone


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="detectors on a random-init torchvision ResNet-18's features")
    p.add_argument("--architecture", default="resnet18", help="a torchvision classification model")
    p.add_argument("--per-class", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def images(rng, colour, n):
    """(n, 3, 32, 32) float images in [0, 1]: a colour with texture, or noise (colour None)."""
    if colour is None:
        return rng.random((n, 3, 32, 32), dtype=np.float32)
    base = np.asarray(colour, np.float32)[None, :, None, None]
    return np.clip(base + rng.normal(0, 0.08, (n, 3, 32, 32)), 0, 1).astype(np.float32)


def run(args) -> None:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    colours = [(0.9, 0.2, 0.2), (0.2, 0.8, 0.2), (0.2, 0.3, 0.9)]
    net = TorchvisionBackbone(args.architecture, num_outputs=3, feature_dim=32).eval()

    def outputs(x):
        with torch.no_grad():
            logits, features = net(torch.from_numpy(x))
        return logits.numpy(), features.numpy()

    train_x = np.concatenate([images(rng, c, args.per_class) for c in colours])
    train_y = np.repeat(np.arange(3), args.per_class)
    test_x = np.concatenate([images(rng, c, args.per_class // 2) for c in colours] + [images(rng, None, args.per_class)])
    test_y = np.concatenate([np.repeat(np.arange(3), args.per_class // 2), -np.ones(args.per_class, int)])
    train_logits, train_features = outputs(train_x)
    test_logits, test_features = outputs(test_x)
    # An untrained network classifies at random: tell k-NN the network's own predictions are
    # the classes, as a fitted detector sees "correctly classified training knowns".
    train_pred = train_logits.argmax(axis=1)
    print(f"{'detector':10} AUROC (knowns vs noise)")
    fig, axes = plt.subplots(2, 2, figsize=(7, 4.4))  # 2 x 2: a readable thumbnail
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


# %%
# Scores and their AUROC
# ----------------------
if __name__ == "__main__":
    run(parse_args())
