"""A trained model of a run with a reject option: its class, or "unknown" (-1) where the score
falls below the threshold chosen on validation data (``calibrate``)."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch

from agnostophobia._runlock import run_is_writable, run_read_lock
from agnostophobia._validation import int64_labels
from agnostophobia.data.inputs import run_input
from agnostophobia.data.preprocess import check_prepared_polarity, prepare_images
from agnostophobia.detectors import Detector
from agnostophobia.detectors.stored import (KeptFits, NotFitted, RunSettings, fitted_detector, read_run_settings,
                                            top_scores)
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.losses import known_columns
from agnostophobia.training.outputs import load_fit_outputs
from agnostophobia.rundir import RunDir
from agnostophobia.training.trained import TrainedModel, load_trained_model

from .calibration import (CALIBRATION, DEPLOY_PRECISION, calibrate_in_memory, calibrate_models, calibration_entry,
                          current_scale, entry_precision, entry_request, network_outputs, old_scale_note, rechosen,
                          resolve_model, unused_flags_said)
from .best import best_model
from agnostophobia._log import log_info

from .request import ModelRequest

UNKNOWN = -1
UNKNOWN_NAME = "unknown"


def threshold_in(entry: Dict, trained: TrainedModel, request: ModelRequest, settings: RunSettings,
                 log=log_info) -> Dict:
    """``entry`` if its threshold was chosen in ``trained``'s precision and on today's score scale;
    else the threshold chosen again, in memory, at the same target FPR on validation outputs in
    that precision (those of ``request.run``, computed from ``request.data_dir`` where not stored;
    the detector with the run's ``settings``): a threshold is never compared with scores computed
    in another arithmetic, nor on another scale (a threshold chosen before the scores were
    tie-free: said once)."""
    run_dir, data_dir = request.run, request.data_dir
    chosen_in = entry_precision(entry, RunDir(run_dir).model(entry["seed"], entry["approach"]))
    if not current_scale(entry):
        again = rechosen(entry, run_dir, settings, trained.precision, data_dir, str(trained.device))
        log(old_scale_note([again], run_dir) + ("" if chosen_in == trained.precision else
                                                f" (on validation outputs in {trained.precision})"))
        return again
    if chosen_in == trained.precision:
        return entry
    again = calibrate_in_memory(entry_request(entry, run_dir).but(precision=trained.precision, data_dir=data_dir,
                                                                   device=str(trained.device)), settings, log)
    log(f"{run_dir}: the stored threshold was chosen on {chosen_in} scores and this classifier computes in "
        f"{trained.precision}: threshold {again['threshold']:.6g} chosen on validation outputs in "
        f"{trained.precision} at FPR <= {entry['target_fpr']:g} (in memory)")
    return {**again, "class_names": entry.get("class_names") or again.get("class_names")}


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
    The network runs on ``device`` (default: the run's, e.g. CUDA) in fp32 and the score in
    float64, whatever precision the run trained in: the deployment arithmetic
    (:mod:`.calibration`) that ``calibrate`` chose the threshold in and the exported files
    compute in, so all three decide alike. ``precision="bf16"`` runs the network in bf16
    autocast; the threshold is then chosen again, in memory, on validation outputs in bf16
    (a bf16 score compared with an fp32 threshold would move decisions). The score is the
    registered detector's (:mod:`agnostophobia.detectors`): the score in the predicted
    class's column.

    Args:
        trained: the network, as :func:`agnostophobia.training.load_trained_model` loads it.
        detector: the score, a (fitted where it fits) detector of :mod:`agnostophobia.detectors`.
        threshold: a sample whose score is below it is "unknown" (-1).
        class_names: the known classes' names, by label.
        approach: the approach the network was trained with (its loss's name).
        seed: the model's seed in its run.

    :meth:`from_run` builds one from a run directory, and keeps the ``calibration.json`` entry
    the threshold comes from as ``calibration``; the constructor is for a network and a threshold
    of your own (``calibration`` empty: none).

    Examples:
        >>> import torch
        >>> from agnostophobia.deploy import OpenSetClassifier
        >>> from agnostophobia.detectors import build_detector
        >>> from agnostophobia.models import LeNetPlusPlus
        >>> from agnostophobia.training import TrainedModel
        >>> _ = torch.manual_seed(0)
        >>> network = LeNetPlusPlus(num_outputs=10).eval()  # untrained here; from_run loads a run's
        >>> trained = TrainedModel(network, {"protocol": "lenet++"}, torch.device("cpu"), "fp32", False, 64)
        >>> clf = OpenSetClassifier(trained, build_detector("softmax"), threshold=0.9,
        ...                         class_names=[str(c) for c in range(10)], approach="entropic", seed=0)
        >>> images = torch.zeros(3, 1, 28, 28)
        >>> images[:, :, 8:20, 12:16] = 1.0  # a white bar on black, as the network's inputs are
        >>> labels, scores = clf.decide(images)
        >>> labels.tolist(), scores.shape  # an untrained network is unsure of everything: all unknown (-1)
        ([-1, -1, -1], (3,))
        >>> clf.label_names([3, -1])
        ['3', 'unknown']
    """

    def __init__(self, trained: TrainedModel, detector: Detector, threshold: float, class_names: Sequence[str],
                 approach: str, seed: int):
        self.trained = trained
        self.detector = detector
        self.threshold = float(threshold)
        self.class_names: List[str] = list(class_names)
        self.approach = approach
        self.seed = seed
        self.calibration: Dict = {}  # the calibration.json entry of the threshold: from_run's, none for your own
        self.num_classes = known_columns(approach, trained.num_outputs)
        self.input_spec = run_input(trained.config)

    @classmethod
    def from_run(cls, run, log=log_info, **choices) -> "OpenSetClassifier":
        """The model ``seed<seed>/<approach>`` of the run ``run`` (default: the run's first
        approach trained with negatives, seed 0) with ``detector`` (default: its paper score) and
        the stored threshold; ``fpr`` calibrates that threshold first (FPR <= fpr on validation
        data), stored in ``calibration.json``, or kept in memory on a run this user cannot write.

        Args:
            run: the run directory, or a whole
                :class:`~agnostophobia.deploy.request.ModelRequest`.
            log: receives one line per step.
            **choices: the :class:`~agnostophobia.deploy.request.ModelRequest` fields this reads,
                as keywords: ``approach``, ``detector`` (``"best"``: the top of ``compare``'s
                ranking at ``fpr``, which it then needs), ``seed``, ``device`` (where the network
                runs; default: the run's), ``precision`` (``fp32``, the default, or ``bf16``),
                ``fpr`` (calibrate first, at this target FPR) and ``data_dir`` (where validation
                outputs must be computed again).

        Returns:
            The :class:`OpenSetClassifier`.

        Raises:
            ~agnostophobia.errors.AgnostophobiaError: the threshold was calibrated with other
                detector settings than the run's now, the detector cannot be fitted, or
                ``detector="best"`` comes without ``fpr``; one line saying what to run.
        """
        if isinstance(run, ModelRequest):
            request = run.but(**choices)
        else:
            request = ModelRequest(run, **choices)
        request.check_reads("OpenSetClassifier.from_run", "approach", "detector", "seed", "fpr", "data_dir", "device",
                            "precision")
        request = best_model(request, log)  # detector "best": the top of compare's ranking
        with unused_flags_said(request, "data_dir"):  # the network runs on request.device whatever else was stored
            return cls._from_request(request, log)

    @classmethod
    def _from_request(cls, request: ModelRequest, log) -> "OpenSetClassifier":
        run_dir, approach, detector, seed = request.run, request.approach, request.detector, request.seed
        device, fpr = request.device, request.fpr
        model_dir, approach, detector = resolve_model(run_dir, approach, detector, seed)
        precision = request.precision or DEPLOY_PRECISION
        scoring = read_run_settings(run_dir)  # the detector settings alone: the run's other records are not read
        if fpr is not None and run_is_writable(run_dir):
            calibrate_models(request, [(seed, approach, detector)], scoring, log)  # under the exclusive lock
            fpr = None
        with run_read_lock(run_dir):  # no writer changes the run while its records are read
            if fpr is None:
                entry = calibration_entry(run_dir, approach, detector, seed)
            else:
                entry = calibrate_in_memory(request.but(approach=approach, detector=detector,
                                                        precision=DEPLOY_PRECISION), scoring, log)
                log(f"{run_dir} is read-only: threshold {entry['threshold']:.6g} chosen on validation data at FPR "
                    f"<= {fpr:g} in memory, not stored in {CALIBRATION}")
            trained = load_trained_model(model_dir, device, precision)
            entry = threshold_in(entry, trained, request, scoring, log)
            num_classes = known_columns(approach, trained.num_outputs)
            settings = scoring.for_approach(approach)
            if entry.get("detector_settings", settings.get(detector, {})) != settings.get(detector, {}):
                raise AgnostophobiaError(
                    f"{run_dir}: the {approach}/{detector} threshold was calibrated with the settings "
                    f"{entry['detector_settings']}, the run's detector settings are now {settings.get(detector, {})} "
                    f"(tune-detectors or config.yaml changed them); run `agnostophobia calibrate {run_dir}` again")
            try:
                kept = KeptFits(model_dir)  # the fit the run's metrics and calibration used
                fitted = fitted_detector(detector, load_fit_outputs(model_dir), num_classes, settings, kept)
            except NotFitted as exc:
                raise AgnostophobiaError(f"{model_dir}: detector {detector!r}: {exc}") from None
            kept.save()
        names = entry.get("class_names") or [str(c) for c in range(num_classes)]
        classifier = cls(trained, fitted, entry["threshold"], names, approach, seed)
        classifier.calibration = entry
        return classifier

    # ------------------------------------------------------------------ inputs
    def model_input(self, x, name: str = "x"):
        """``x`` as the network's input: a float tensor in [0, 1], or prepared uint8 images.

        Args:
            x: a float tensor or array (N, C, H, W) in [0, 1], or uint8 images as stored.
            name: how the error message names ``x``.

        Returns:
            A float tensor (N, C, H, W) in [0, 1] as given, or a uint8 NumPy array (N, C, H, W)
            of prepared images.

        Raises:
            ~agnostophobia.errors.AgnostophobiaError: a shape, dtype, range or polarity that is
                not the network's input, in one line naming ``name``.
        """
        shape = f"(N, {', '.join(map(str, self.input_spec.shape))})"
        if isinstance(x, torch.Tensor) and x.device.type == "meta":
            raise AgnostophobiaError(f"{name}: a tensor on the meta device holds no values; pass a {shape} "
                                     f"tensor on the CPU or a GPU")
        if isinstance(x, torch.Tensor) and x.dtype == torch.uint8:
            x = x.cpu().numpy()
        if isinstance(x, np.ndarray) and x.dtype == np.uint8:
            if x.ndim == 4 and x.shape[1:] == self.input_spec.shape:
                check_prepared_polarity(x, self.input_spec, name=name)
                return x  # prepared already
            return prepare_images(x, self.input_spec, name=name)
        try:
            x = torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise AgnostophobiaError(f"{name}: expected a float tensor {shape} in [0, 1] or uint8 images, got "
                                     f"{type(x).__name__} ({str(exc).splitlines()[0]})") from None
        if not x.is_floating_point() or x.ndim != 4 or tuple(x.shape[1:]) != self.input_spec.shape:
            raise AgnostophobiaError(f"{name}: expected a float tensor {shape} in [0, 1] or uint8 images, got "
                                     f"{x.dtype} {tuple(x.shape)}")
        if x.numel() and not (torch.isfinite(x).all() and x.min() >= 0 and x.max() <= 1):
            raise AgnostophobiaError(f"{name}: float input must lie in [0, 1] (pixel / 255); pass stored images "
                                     f"as uint8")
        pixels = torch.round(x.detach() * 255).to(torch.uint8).cpu().numpy()
        check_prepared_polarity(pixels, self.input_spec, name=name)
        return x

    # ------------------------------------------------------------------ decisions
    def decide(self, x) -> Tuple[np.ndarray, np.ndarray]:
        """The decision on each sample and the score it rests on.

        Args:
            x: the images, as :meth:`model_input` takes them.

        Returns:
            ``(labels, scores)``: an (N,) int64 NumPy array of classes, -1 for unknown, and the
            (N,) float64 scores.
        """
        logits, features = network_outputs(self.trained, self.model_input(x))
        if not len(logits):
            return np.empty(0, np.int64), np.empty(0)
        predicted, score = top_scores(self.detector, {"logits": logits, "features": features}, self.num_classes)
        return np.where(score >= self.threshold, predicted, UNKNOWN).astype(np.int64), score

    def scores(self, x) -> np.ndarray:
        """The per-sample score the threshold acts on; larger = more known.

        Args:
            x: the images, as :meth:`model_input` takes them.

        Returns:
            An (N,) float64 NumPy array.
        """
        return self.decide(x)[1]

    def predict(self, x) -> np.ndarray:
        """The predicted class, or -1 where the score is below the threshold.

        Args:
            x: the images, as :meth:`model_input` takes them.

        Returns:
            An (N,) int64 NumPy array.
        """
        return self.decide(x)[0]

    def label_names(self, labels: Sequence[int]) -> List[str]:
        """The class name of each label, ``unknown`` for -1.

        Args:
            labels: class indices 0..C-1 or -1, as :meth:`predict` returns them.

        Returns:
            One name per label, in their order.

        Raises:
            ~agnostophobia.errors.AgnostophobiaError: naming the first label that is neither a
                class index nor -1.
        """
        try:
            values = int64_labels(labels, "labels")
        except ValueError as exc:
            raise AgnostophobiaError(f"labels: expected a sequence of integer class ids; {exc}") from None
        if values.ndim != 1:
            raise AgnostophobiaError(f"labels: expected a sequence of integer class ids, got shape {values.shape}")
        bad = np.flatnonzero((values < UNKNOWN) | (values >= len(self.class_names)))
        if bad.size:
            raise AgnostophobiaError(f"labels[{bad[0]}]: class id {values[bad[0]]} is neither a class of this model "
                                     f"(0..{len(self.class_names) - 1}) nor {UNKNOWN} (unknown)")
        return [self.class_names[c] if c >= 0 else UNKNOWN_NAME for c in values.tolist()]

    @property
    def detector_name(self) -> str:
        """The registered name of the detector whose score the threshold acts on."""
        return self.detector.name

    def __repr__(self) -> str:
        return (f"OpenSetClassifier({self.approach}, seed {self.seed}, {self.detector_name} >= {self.threshold:.6g}, "
                f"{self.trained.device}, {self.trained.precision})")
