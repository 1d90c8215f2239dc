"""A trained model of a run with a reject option: its class, or "unknown" (-1) where the score
falls below the threshold chosen on validation data (``calibrate``)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch

from agnostophobia.data.inputs import run_input
from agnostophobia.data.preprocess import prepare_images
from agnostophobia.detectors import Detector
from agnostophobia.detectors.stored import NotFitted, detector_settings, fitted_detector, top_scores
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.losses import known_columns
from agnostophobia.training.outputs import load_fit_outputs, run_config
from agnostophobia.training.trained import TrainedModel, load_trained_model

from .calibration import calibrate_models, calibration_entry, resolve_model

UNKNOWN = -1
UNKNOWN_NAME = "unknown"


class OpenSetClassifier:
    """Predicts a known class or -1 ("unknown") with one trained model of a run, its score
    and the threshold ``calibrate`` chose on validation data (FPR <= T on the validation
    negatives; never on test data)::

        from agnostophobia.deploy import OpenSetClassifier
        clf = OpenSetClassifier.from_run("runs/lenet++-cpu", approach="entropic")
        x = torch.rand(8, 1, 28, 28)                 # float (N, C, H, W) in [0, 1], or uint8 images
        labels = clf.predict(x)                      # int64 (N,), -1 = unknown
        print([clf.class_names[c] if c >= 0 else "unknown" for c in labels], clf.threshold)

    ``x`` is a float tensor or array (N, C, H, W) in [0, 1], prepared as for training (LeNet++:
    grey 28x28, white glyph on black, pixel / 255; black on white for a run with ``preprocessing:
    authors``), or uint8 images as stored ((N, H, W) grey, (N, H, W, 3) RGB, any size; glyphs
    white on black whatever the run), which go through the one preparation path,
    :func:`agnostophobia.data.preprocess.prepare_images`, with the run's input spec
    (:func:`agnostophobia.data.inputs.run_input`).
    The network runs on ``device`` (default: the run's, e.g. CUDA) in the run's precision
    (``precision`` overrides it: the exported files compute in fp32, see ``export``); the
    score is the registered detector's (:mod:`agnostophobia.detectors`), the one the
    threshold was chosen on: the score in the predicted class's column.
    """

    def __init__(self, trained: TrainedModel, detector: Detector, threshold: float, class_names: Sequence[str],
                 approach: str, seed: int, calibration: Optional[dict] = None):
        self.trained = trained
        self.detector = detector
        self.threshold = float(threshold)
        self.class_names: List[str] = list(class_names)
        self.approach = approach
        self.seed = seed
        self.calibration = calibration or {}
        self.num_classes = known_columns(approach, trained.num_outputs)
        self.input_spec = run_input(trained.config)

    @classmethod
    def from_run(cls, run_dir, approach: Optional[str] = None, detector: Optional[str] = None, seed: int = 0,
                 device: Optional[str] = None, precision: Optional[str] = None, fpr: Optional[float] = None,
                 data_dir=None, log=print) -> "OpenSetClassifier":
        """The model ``seed<seed>/<approach>`` of ``run_dir`` (default: the run's first approach
        trained with negatives) with ``detector`` (default: its paper score) and the stored
        threshold; ``fpr`` calibrates that threshold first (FPR <= fpr on validation data)."""
        run_dir = Path(run_dir)
        model_dir, approach, detector = resolve_model(run_dir, approach, detector, seed)
        if fpr is not None:
            calibrate_models(run_dir, fpr, [(seed, approach, detector)], data_dir, device, log)
        entry = calibration_entry(run_dir, approach, detector, seed)
        trained = load_trained_model(model_dir, device, precision)
        num_classes = known_columns(approach, trained.num_outputs)
        try:
            fitted = fitted_detector(detector, load_fit_outputs(model_dir), num_classes,
                                     detector_settings(run_config(run_dir)))
        except NotFitted as exc:
            raise AgnostophobiaError(f"{model_dir}: detector {detector!r}: {exc}") from None
        names = entry.get("class_names") or [str(c) for c in range(num_classes)]
        return cls(trained, fitted, entry["threshold"], names, approach, seed, entry)

    # ------------------------------------------------------------------ inputs
    def model_input(self, x):
        """``x`` as the network's input: a float tensor in [0, 1], or prepared uint8 images."""
        if isinstance(x, torch.Tensor) and x.dtype == torch.uint8:
            x = x.cpu().numpy()
        if isinstance(x, np.ndarray) and x.dtype == np.uint8:
            if x.ndim == 4 and x.shape[1:] == self.input_spec.shape:
                return x  # prepared already
            return prepare_images(x, self.input_spec, name="x")
        x = torch.as_tensor(x)
        if not x.is_floating_point() or x.ndim != 4 or tuple(x.shape[1:]) != self.input_spec.shape:
            raise AgnostophobiaError(f"x: expected a float tensor (N, {', '.join(map(str, self.input_spec.shape))}) "
                                     f"in [0, 1] or uint8 images, got {x.dtype} {tuple(x.shape)}")
        if x.numel() and not (torch.isfinite(x).all() and x.min() >= 0 and x.max() <= 1):
            raise AgnostophobiaError("x: float input must lie in [0, 1] (pixel / 255); pass stored images as uint8")
        return x

    # ------------------------------------------------------------------ decisions
    def decide(self, x) -> Tuple[np.ndarray, np.ndarray]:
        """``(labels, scores)``: int64 labels (N,), -1 for unknown, and float64 scores (N,)."""
        logits, features = self.trained.outputs(self.model_input(x))
        if not len(logits):
            return np.empty(0, np.int64), np.empty(0)
        predicted, score = top_scores(self.detector, {"logits": logits, "features": features}, self.num_classes)
        return np.where(score >= self.threshold, predicted, UNKNOWN).astype(np.int64), score

    def scores(self, x) -> np.ndarray:
        """The per-sample score (N,) float64 the threshold acts on; larger = more known."""
        return self.decide(x)[1]

    def predict(self, x) -> np.ndarray:
        """int64 labels (N,): the predicted class, or -1 where the score is below the threshold."""
        return self.decide(x)[0]

    def label_names(self, labels: Sequence[int]) -> List[str]:
        return [self.class_names[c] if c >= 0 else UNKNOWN_NAME for c in labels]

    @property
    def detector_name(self) -> str:
        return self.detector.name

    def __repr__(self) -> str:
        return (f"OpenSetClassifier({self.approach}, seed {self.seed}, {self.detector_name} >= {self.threshold:.6g}, "
                f"{self.trained.device}, {self.trained.precision})")
