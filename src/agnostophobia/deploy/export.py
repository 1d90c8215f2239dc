"""``agnostophobia export RUN --format torchscript|pt2|onnx --out FILE``: one self-contained file
holding the network (normalisation inside), the score as torch operations and the
validation-chosen threshold, usable without agnostophobia installed.

The file's model takes a float tensor (N, C, H, W) with values in [0, 1], prepared exactly
as for training (LeNet++: grey 28x28, white glyph on black, pixel / 255, or black on white for
a run with ``preprocessing: authors``; CIFAR ResNet: RGB 32x32, pixel / 255; the file's
metadata says which), and returns ``(labels, scores)``: int64 labels (N,), -1 for
"unknown", and float64 scores (N,), the per-sample score the decision compares with the
threshold. The network runs in fp32 (whatever precision the run trained in: bf16 does not
export portably); the score is computed in float64 from the fp32 logits and features, as
:mod:`agnostophobia.detectors` computes it: the deployment arithmetic
(:mod:`.calibration`) in which ``calibrate`` chose the threshold on validation outputs and
in which ``predict`` and :class:`~agnostophobia.deploy.OpenSetClassifier` decide, so the
file decides as they do.

Scores: every closed-form detector (``softmax``, ``background``, ``objectosphere-scaled``,
``max-logit``, ``entropy``, ``magnitude``, ``energy``) and ``knn``, whose normalised
training features are stored in the file (its size grows with the training set: 8 bytes
x D per training known, and a batch of N holds an N x #training distance matrix).
``openmax`` and ``evm`` are refused, each with its reason (:data:`NOT_EXPORTED`).

``torchscript``: :func:`torch.jit.trace`, loads with :func:`torch.jit.load`; ``pt2``:
:func:`torch.export.export`, loads with :func:`torch.export.load`; ``onnx``:
:func:`torch.onnx.export` (dynamo), runs in onnxruntime. The batch dimension is dynamic in
all three. Each file carries ``agnostophobia.json`` (class names, threshold, approach,
detector, input spec) as extra file / metadata.
"""
from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path
from typing import Callable, Dict, Optional

import torch
from torch import nn

import agnostophobia
from agnostophobia._atomic import atomic_write
from agnostophobia.data.preprocess import INPUT_CONVENTIONS
from agnostophobia.detectors import Detector
from agnostophobia.errors import AgnostophobiaError

from .calibration import DEPLOY_PRECISION, arithmetic, resolve_model
from .classifier import OpenSetClassifier

FORMATS = ("torchscript", "pt2", "onnx")
METADATA = "agnostophobia.json"


def _picked(values: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """The value of each row's predicted column."""
    return values.gather(1, predicted[:, None])[:, 0]


def _norm(features: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(features, dim=1)


class _Score(nn.Module):
    """Per-sample score (N,) float64 from float64 logits (N, C or C+1), features (N, D) and the
    predicted class (the arg-max of the C known logits); larger = more known."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.num_classes = num_classes

    def known(self, logits: torch.Tensor) -> torch.Tensor:
        return logits[:, :self.num_classes]


class SoftmaxScore(_Score):
    def forward(self, logits, features, predicted):
        return _picked(torch.softmax(self.known(logits), dim=1), predicted)


class BackgroundScore(_Score):
    def forward(self, logits, features, predicted):  # the C+1 softmax, read at a known column
        return _picked(torch.softmax(logits, dim=1), predicted)


class ScaledObjectosphereScore(_Score):
    def forward(self, logits, features, predicted):
        return _picked(torch.softmax(self.known(logits), dim=1), predicted) * _norm(features)


class MaxLogitScore(_Score):
    def forward(self, logits, features, predicted):
        return _picked(self.known(logits), predicted)


class EntropyScore(_Score):
    def forward(self, logits, features, predicted):
        log_p = torch.log_softmax(self.known(logits), dim=1)
        return (log_p.exp() * log_p).sum(dim=1)


class MagnitudeScore(_Score):
    def forward(self, logits, features, predicted):
        return _norm(features)


class EnergyScore(_Score):
    def __init__(self, num_classes: int, temperature: float):
        super().__init__(num_classes)
        self.temperature = float(temperature)

    def forward(self, logits, features, predicted):
        return self.temperature * torch.logsumexp(self.known(logits) / self.temperature, dim=1)


class KNNScore(_Score):
    """Minus the distance to the k-th nearest (normalised) training feature, the training
    features stored as a buffer (:class:`agnostophobia.detectors.KNNDetector`)."""

    def __init__(self, num_classes: int, detector):
        super().__init__(num_classes)
        self.k, self.normalize, self.class_conditional = detector.k, detector.normalize, detector.class_conditional
        reference = torch.as_tensor(detector.reference_, dtype=torch.float64)
        self.register_buffer("reference", reference)
        self.register_buffer("reference_sq", (reference * reference).sum(dim=1))
        self.register_buffer("reference_labels", torch.as_tensor(detector.reference_labels_, dtype=torch.int64))

    def forward(self, logits, features, predicted):
        if self.normalize:  # a zero feature vector stays zero, as in l2_normalize
            norm = _norm(features)[:, None]
            features = torch.where(norm > 0, features / norm, torch.zeros_like(features))
        squared = (features * features).sum(dim=1, keepdim=True) + self.reference_sq[None] \
            - 2.0 * features @ self.reference.T
        if self.class_conditional:  # only the predicted class's training features count
            other = self.reference_labels[None] != predicted[:, None]
            squared = squared.masked_fill(other, float("inf"))
        kth = torch.topk(squared, self.k, dim=1, largest=False).values.max(dim=1).values
        return -kth.clamp_min(0.0).sqrt()


def gpd_cdf(values: torch.Tensor, shape: torch.Tensor, loc: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    r"""The generalized Pareto CDF of :func:`agnostophobia.detectors.postmax.gpd_cdf` (scipy's
    ``genpareto.cdf``) in torch operations, broadcasting over the parameters:
    :math:`1 - (1 + \xi z)^{-1/\xi}` (:math:`-\mathrm{expm1}(-z)` for :math:`\xi = 0`) with
    :math:`z = (v - \mu)/\sigma`, 0 below the support and 1 above it (:math:`\xi < 0`)."""
    z = ((values - loc) / scale).clamp_min(0.0)
    z = torch.where(shape < 0, torch.minimum(z, -1.0 / torch.where(shape < 0, shape, -1.0)), z)
    safe = torch.where(shape == 0, torch.ones_like(shape), shape)
    return torch.where(shape == 0, -torch.expm1(-z), -torch.expm1(-torch.log1p(safe * z) / safe))


class PostMaxScore(_Score):
    """The GPD CDF of the maximum logit over ||F|| (:class:`agnostophobia.detectors.PostMax`)."""

    def __init__(self, num_classes: int, detector):
        super().__init__(num_classes)
        self.register_buffer("gpd", torch.tensor(detector.gpd_, dtype=torch.float64))

    def forward(self, logits, features, predicted):
        norm = _norm(features)
        top = self.known(logits).max(dim=1).values
        value = torch.where(norm > 0, top / torch.where(norm > 0, norm, torch.ones_like(norm)), torch.zeros_like(top))
        return gpd_cdf(value, self.gpd[0], self.gpd[1], self.gpd[2])


class GhostScore(_Score):
    """The predicted class's logit over the sum of its features' absolute z-scores, through that
    class's GPD CDF (:class:`agnostophobia.detectors.GHOST`)."""

    def __init__(self, num_classes: int, detector):
        super().__init__(num_classes)
        self.register_buffer("mean", torch.tensor(detector.mean_, dtype=torch.float64))
        self.register_buffer("std", torch.tensor(detector.std_, dtype=torch.float64))
        self.register_buffer("gpd", torch.tensor(detector.gpd_, dtype=torch.float64))

    def forward(self, logits, features, predicted):
        z_sum = ((features - self.mean[predicted]).abs() / self.std[predicted]).sum(dim=1)
        value = _picked(self.known(logits), predicted) / z_sum.clamp_min(torch.finfo(torch.float64).tiny)
        shape, loc, scale = self.gpd[predicted].unbind(dim=1)
        return gpd_cdf(value, shape, loc, scale)


#: Detectors whose score is not exported, and why (one line each; ``export`` refuses them).
NOT_EXPORTED = {
    "openmax": "its Weibull recalibration of the logits has no torch implementation here",
    "evm": "it predicts the class of the nearest extreme vector, not the network's arg-max, which the exported "
           "module's labels are",
}

#: Detector name -> its score as torch operations, from the fitted detector and C.
TORCH_SCORES: Dict[str, Callable[[Detector, int], _Score]] = {
    "softmax": lambda d, c: SoftmaxScore(c),
    "background": lambda d, c: BackgroundScore(c),
    "objectosphere-scaled": lambda d, c: ScaledObjectosphereScore(c),
    "max-logit": lambda d, c: MaxLogitScore(c),
    "entropy": lambda d, c: EntropyScore(c),
    "magnitude": lambda d, c: MagnitudeScore(c),
    "energy": lambda d, c: EnergyScore(c, d.temperature),
    "knn": lambda d, c: KNNScore(c, d),
    "postmax": lambda d, c: PostMaxScore(c, d),
    "ghost": lambda d, c: GhostScore(c, d),
}


class DeployedClassifier(nn.Module):
    """Network, score and threshold in one module: ``forward(x) -> (labels, scores)``."""

    def __init__(self, network: nn.Module, score: _Score, threshold: float, num_classes: int):
        super().__init__()
        self.network = network
        self.score = score
        self.num_classes = num_classes
        self.register_buffer("threshold", torch.tensor(float(threshold), dtype=torch.float64))

    def forward(self, x: torch.Tensor):
        logits, features = self.network(x)
        logits, features = logits.double(), features.double()
        predicted = logits[:, :self.num_classes].argmax(dim=1)
        scores = self.score(logits, features, predicted)
        return predicted.masked_fill(scores < self.threshold, -1), scores


def check_exportable(detector: str) -> None:
    if detector not in TORCH_SCORES:
        why = NOT_EXPORTED.get(detector, "it has no torch implementation")
        raise AgnostophobiaError(f"export: detector {detector!r} is not exported: {why}; exportable: "
                                 f"{', '.join(TORCH_SCORES)}")


def torch_score(detector: Detector, num_classes: int) -> _Score:
    """The fitted ``detector``'s per-sample score as a torch module."""
    check_exportable(detector.name)
    return TORCH_SCORES[detector.name](detector, num_classes)


def deployable(classifier: OpenSetClassifier) -> DeployedClassifier:
    """``classifier`` as one fp32 CPU module (its network copied, in eval mode)."""
    score = torch_score(classifier.detector, classifier.num_classes)
    network = copy.deepcopy(classifier.trained.model).float().cpu().to(memory_format=torch.contiguous_format)
    module = DeployedClassifier(network, score, classifier.threshold, classifier.num_classes).eval()
    return module.requires_grad_(False)  # inference only: outputs a user can turn into numpy directly


def metadata(classifier: OpenSetClassifier, fmt: str) -> str:
    spec = classifier.input_spec
    return json.dumps({
        "format": fmt, "agnostophobia": agnostophobia.__version__, "approach": classifier.approach,
        "detector": classifier.detector_name, "seed": classifier.seed, "threshold": classifier.threshold,
        "target_fpr": classifier.calibration.get("target_fpr"), "class_names": classifier.class_names,
        "input": {"shape": ["N", *spec.shape], "dtype": "float32", "range": [0, 1], "kind": spec.kind,
                  "preprocessing": spec.preprocessing, "preparation": INPUT_CONVENTIONS[spec.preprocessing]},
        "outputs": {"labels": "int64 (N,), the class index, -1 = unknown",
                    "scores": "float64 (N,), accepted when >= threshold"},
        "precision": arithmetic(DEPLOY_PRECISION)})


def export_classifier(classifier: OpenSetClassifier, out: Path, fmt: str) -> Path:
    """Write ``classifier`` as one ``fmt`` file at ``out`` (atomically)."""
    if fmt not in FORMATS:
        raise AgnostophobiaError(f"--format {fmt!r}: must be one of {', '.join(FORMATS)}")
    module = deployable(classifier)
    example = torch.rand(2, *classifier.input_spec.shape)
    batch = {0: torch.export.Dim("batch", min=1)}
    info = metadata(classifier, fmt)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit's deprecation notice; tracing is what we want
        if fmt == "torchscript":
            traced = torch.jit.trace(module, (example,))
            atomic_write(out, lambda tmp: torch.jit.save(traced, tmp, _extra_files={METADATA: info}))
        elif fmt == "pt2":
            program = torch.export.export(module, (example,), dynamic_shapes=(batch,))
            atomic_write(out, lambda tmp: _save_pt2(program, tmp, info))
        else:
            program = _onnx_program(module, example, batch)
            program.model.metadata_props[METADATA] = info
            atomic_write(out, lambda tmp: program.save(tmp, external_data=False))
    return Path(out)


def _save_pt2(program, tmp: str, info: str) -> None:
    with open(tmp, "wb") as handle:  # a file object: a path not ending in .pt2 draws a warning
        torch.export.save(program, handle, extra_files={METADATA: info})


def _onnx_program(module: nn.Module, example: torch.Tensor, batch):
    try:
        import onnxscript  # noqa: F401  (torch.onnx's dynamo exporter needs it)
    except ImportError:
        raise AgnostophobiaError("export --format onnx needs the packages onnx and onnxscript "
                                 "(pip install 'agnostophobia[test]' or pip install onnx onnxscript)") from None
    return torch.onnx.export(module, (example,), dynamo=True, dynamic_shapes=(batch,), input_names=["images"],
                             output_names=["labels", "scores"], verbose=False)


def export_run(run_dir, out: Path, fmt: str, approach: Optional[str] = None, detector: Optional[str] = None,
               seed: int = 0, fpr: Optional[float] = None, data_dir=None, log=print) -> Path:
    """``agnostophobia export``: one model of ``run_dir`` with its calibrated threshold."""
    if fmt not in FORMATS:
        raise AgnostophobiaError(f"--format {fmt!r}: must be one of {', '.join(FORMATS)}")
    _, approach, detector = resolve_model(Path(run_dir), approach, detector, seed)
    check_exportable(detector)  # before any work: a calibration with --fpr writes
    classifier = OpenSetClassifier.from_run(run_dir, approach, detector, seed, device="cpu",
                                            precision=DEPLOY_PRECISION, fpr=fpr, data_dir=data_dir, log=log)
    path = export_classifier(classifier, Path(out), fmt)
    log(f"exported {classifier.approach} (seed {classifier.seed}) with {classifier.detector_name} >= "
        f"{classifier.threshold:.6g} as {fmt}: {path} (fp32; input float (N, "
        f"{', '.join(map(str, classifier.input_spec.shape))}) in [0, 1]; output (labels, scores))")
    return path
