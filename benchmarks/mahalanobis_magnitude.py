"""Why Mahalanobis scores the unknowns above the knowns on some networks: a check on a benchmark
run's stored features, no training (docs/osr-splits.md, "Mahalanobis below chance").

For each network of the run (every seed of the approaches asked for), on the stored test outputs:

- the AUROC (knowns positive) of the run's own ``mahalanobis`` scores (``detector_scores.npz``);
- the same detector written independently: class means and one shared covariance
  (:class:`sklearn.covariance.EmpiricalCovariance`) of the stored training features, the negated
  smallest squared distance; and pytorch-ood 0.4.0's ``Mahalanobis`` where it is installed (both
  without input preprocessing);
- the same independent detector on L2-normalised features (the magnitude removed);
- the mean smallest squared distance (d2) in that metric of the known and the unknown test
  samples and of the origin (a zero feature vector);
- the mean feature norm of the known and the unknown test samples, and the share of the
  within-class variance that lies along each class mean's own direction (the "radial" one, the
  magnitude), against one direction's share if the variance were spread evenly (1/D).

A shared covariance whose within-class spread lies mostly along the magnitude discounts that
direction, which is where the unknowns differ (a smaller norm, Sec. 4 of the paper): then the
unknowns sit close to the class means in the Mahalanobis metric.

    python benchmarks/mahalanobis_magnitude.py runs/osr-cifar10/split-0 --approaches softmax entropic \
        --json docs/results/mahalanobis-osr-cifar10-split-0.json
"""
import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.covariance import EmpiricalCovariance
from sklearn.metrics import roc_auc_score

from agnostophobia.detectors.mahalanobis import class_means


def auroc(known: np.ndarray, unknown: np.ndarray) -> float:
    return float(roc_auc_score(np.r_[np.ones(len(known)), np.zeros(len(unknown))], np.r_[known, unknown]))


def mahalanobis_scorer(features: np.ndarray, labels: np.ndarray):
    """The negated smallest squared Mahalanobis distance to a class mean, one covariance shared by
    the classes (Lee et al. 2018, without input preprocessing), written without the package's code:
    it is what the run's scores are checked against."""
    means = np.stack([features[labels == c].mean(0) for c in np.unique(labels)])
    precision = EmpiricalCovariance(assume_centered=True).fit(features - means[np.searchsorted(
        np.unique(labels), labels)]).precision_

    def score(x: np.ndarray) -> np.ndarray:
        return -np.stack([np.einsum("ij,jk,ik->i", x - m, precision, x - m) for m in means], 1).min(1)
    return score


def pytorch_ood_auroc(train, labels, known, unknown):
    try:
        import torch
        from pytorch_ood.detector import Mahalanobis
    except ImportError:
        return None
    detector = Mahalanobis(torch.nn.Identity())
    detector.fit_features(torch.tensor(train, dtype=torch.float32), torch.tensor(labels))
    scores = [-detector.predict_features(torch.tensor(x, dtype=torch.float32)).numpy() for x in (known, unknown)]
    return auroc(*scores)


def radial_share(features: np.ndarray, labels: np.ndarray) -> float:
    """The share of the within-class variance along each sample's class-mean direction."""
    means = class_means(features, labels, int(labels.max()) + 1)[labels]  # the package's (labels 0..C-1)
    centred = features - means
    radial = (centred * means / np.linalg.norm(means, axis=1, keepdims=True)).sum(1)
    return float(radial.var() / centred.var(0).sum())


def check(model_dir: Path) -> dict:
    fit, outputs = np.load(model_dir / "fit_outputs.npz"), np.load(model_dir / "outputs.npz")
    stored = np.load(model_dir / "detector_scores.npz")
    train, labels = fit["train__features"].astype(np.float64), fit["train__labels"]
    unknown_set = next(k.split("__")[0] for k in outputs.files if k.endswith("__features") and k != "known__features")
    known, unknown = (outputs[f"{name}__features"].astype(np.float64) for name in ("known", unknown_set))
    normalised = [x / np.linalg.norm(x, axis=1, keepdims=True) for x in (train, known, unknown)]
    plain, on_directions = mahalanobis_scorer(train, labels), mahalanobis_scorer(normalised[0], labels)
    return {"run's mahalanobis": auroc(stored["mahalanobis__known__score"],
                                       stored[f"mahalanobis__{unknown_set}__score"]),
            "max-softmax": auroc(stored["softmax__known__score"], stored[f"softmax__{unknown_set}__score"]),
            "independent": auroc(plain(known), plain(unknown)),
            "pytorch-ood": pytorch_ood_auroc(train, labels, known, unknown),
            "L2-normalised": auroc(on_directions(normalised[1]), on_directions(normalised[2])),
            "d2 known": float(-plain(known).mean()), "d2 unknown": float(-plain(unknown).mean()),
            "d2 origin": float(-plain(np.zeros((1, train.shape[1])))[0]),
            "norm known": float(np.linalg.norm(known, axis=1).mean()),
            "norm unknown": float(np.linalg.norm(unknown, axis=1).mean()),
            "radial share": radial_share(train, labels), "even share": 1 / train.shape[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a benchmark run folder (seed*/APPROACH/ inside)")
    parser.add_argument("--approaches", nargs="+", default=["softmax"])
    parser.add_argument("--json", type=Path, help="also write the numbers to this file (per network)")
    args = parser.parse_args()
    results = {f"{seed.name}/{approach}": check(seed / approach)
               for seed in sorted(args.run.glob("seed*")) for approach in args.approaches
               if (seed / approach / "detector_scores.npz").is_file()}
    if not results:
        raise SystemExit(f"{args.run}: no seed*/APPROACH/detector_scores.npz for {', '.join(args.approaches)}")
    keys = list(next(iter(results.values())))
    print("| network | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for name, numbers in results.items():
        print(f"| {name} | " + " | ".join("—" if v is None else f"{v:.4f}" for v in numbers.values()) + " |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
