"""Benchmark: predictions per second of a deployed LeNet++ on the CPU, batch 1 and batch 256:
the eager :class:`~agnostophobia.deploy.OpenSetClassifier` (network in torch, score by the
detector registry in numpy), the eager export module (network and score in torch), and each
exported file (TorchScript, torch.export, ONNX in onnxruntime), every one deciding with the
same score and threshold.

Without ``--run`` the network has randomly initialised weights (LeNet++ as the paper's
protocol builds it, PReLU, 2-D features) and the threshold is 0.5: the time per prediction
does not depend on the weights. With ``--run`` a calibrated run's model is used.

    .venv/bin/python benchmarks/bench_predict.py [--run RUN [--approach A] [--detector D]]
        [--batches 1 256] [--seconds 2] [--threads N]

Prints one row per (implementation, batch): predictions per second (median of five timed
rounds of at least ``--seconds / 5`` each) and the time per call.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from agnostophobia.deploy import OpenSetClassifier
from agnostophobia.deploy.export import FORMATS, deployable, export_classifier
from agnostophobia.detectors import build_detector
from agnostophobia.models import build_model
from agnostophobia.training.precision import bf16_is_native
from agnostophobia.training.trained import TrainedModel

ROUNDS = 5


def random_classifier(precision: str) -> OpenSetClassifier:
    """LeNet++ with random weights, the max-softmax score and threshold 0.5 (no run needed)."""
    model = build_model("lenet++", 10, activation="prelu", feature_dim=2).eval()
    model.to(memory_format=torch.channels_last)
    config = {"protocol": "lenet++", "model": "lenet++", "precision": precision}
    trained = TrainedModel(model, config, torch.device("cpu"), precision, True, 1024)
    return OpenSetClassifier(trained, build_detector("softmax"), 0.5, [str(d) for d in range(10)], "entropic", 0,
                             {"target_fpr": None})


def per_second(predict, x: torch.Tensor, seconds: float) -> float:
    """Predictions per second: the median of ROUNDS timed rounds, each at least seconds/ROUNDS long."""
    predict(x)  # warm-up (allocations, lazy initialisation)
    rates = []
    for _ in range(ROUNDS):
        calls, start = 0, time.perf_counter()
        while True:
            predict(x)
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds / ROUNDS:
                break
        rates.append(calls * len(x) / elapsed)
    return statistics.median(rates)


def implementations(classifier: OpenSetClassifier, folder: Path):
    """(name, function float images (N, C, H, W) -> labels) for the eager and exported models."""
    found = [("eager OpenSetClassifier", classifier.predict)]
    if bf16_is_native("cpu") and classifier.trained.precision == "fp32":
        bf16 = OpenSetClassifier(
            TrainedModel(classifier.trained.model, classifier.trained.config, classifier.trained.device, "bf16", True,
                         1024), classifier.detector, classifier.threshold, classifier.class_names, classifier.approach,
            classifier.seed, classifier.calibration)
        found.append(("eager OpenSetClassifier, bf16", bf16.predict))
    module = deployable(classifier)
    found.append(("eager export module (fp32)", lambda x: _no_grad(module, x)))
    for fmt in FORMATS:
        path = export_classifier(classifier, folder / f"model.{fmt}", fmt)
        if fmt == "torchscript":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                loaded = torch.jit.load(str(path))
            found.append(("TorchScript (torch.jit.load)", lambda x, m=loaded: _no_grad(m, x)))
        elif fmt == "pt2":
            loaded = torch.export.load(str(path)).module()
            found.append(("torch.export (torch.export.load)", lambda x, m=loaded: _no_grad(m, x)))
        else:
            import onnxruntime

            session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            found.append(("ONNX (onnxruntime)", lambda x, s=session: s.run(["labels"], {"images": x.numpy()})[0]))
    return found


def _no_grad(module, x):
    with torch.no_grad():
        return module(x)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a calibrated run (default: random LeNet++ weights)")
    parser.add_argument("--approach")
    parser.add_argument("--detector")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 256])
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per implementation and batch")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: PyTorch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.run:
        classifier = OpenSetClassifier.from_run(args.run, approach=args.approach, detector=args.detector,
                                                device="cpu")
        source = f"run {args.run}: {classifier.approach} / {classifier.detector_name}, {classifier.trained.precision}"
    else:
        classifier = random_classifier("fp32")
        source = "LeNet++ with randomly initialised weights, max-softmax score, fp32"
    print(f"predictions per second on the CPU ({torch.get_num_threads()} torch threads); {source}")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        found = implementations(classifier, Path(folder))
        print(f"| implementation | " + " | ".join(f"batch {b}: predictions/s (ms/call)" for b in args.batches) + " |")
        print("|---|" + "---:|" * len(args.batches))
        for name, predict in found:
            cells = []
            for batch in args.batches:
                x = torch.from_numpy(rng.random((batch, *classifier.input_spec.shape), dtype=np.float32))
                rate = per_second(predict, x, args.seconds)
                cells.append(f"{rate:,.0f} ({1000 * batch / rate:.2f})")
            print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
