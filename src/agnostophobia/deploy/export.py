"""``agnostophobia export RUN [--format pt2|onnx|torchscript] --out FILE``: one self-contained file
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

Scores: the detector's own torch score (:meth:`~agnostophobia.detectors.Detector.torch_score`,
written beside its numpy score in its module), its fitted arrays inside the file; this
module holds no score of its own. ``knn``'s normalised training features are stored in the
file (its size grows with the training set: 8 bytes x D per training known, and a batch of
N holds an N x #training distance matrix). A detector without a torch score is refused with
the reason its class declares (``NOT_EXPORTABLE``: ``openmax``, ``evm``); :func:`exportable`
lists the others.

``pt2`` (the default): :func:`torch.export.export`, loads with :func:`torch.export.load`;
``onnx``: :func:`torch.onnx.export` (dynamo), runs in onnxruntime (the ``[onnx]`` extra);
``torchscript``: :func:`torch.jit.trace`, loads with :func:`torch.jit.load` (deprecated by
PyTorch: one note says so, instead of torch's warnings). The batch dimension is dynamic in
all three. Each file carries ``agnostophobia.json`` (class names, threshold, approach,
detector, input spec) as extra file / metadata.
"""
from __future__ import annotations

import copy
import importlib.util
import io
import json
import warnings
from pathlib import Path
from typing import List

import torch
from torch import nn

import agnostophobia
from agnostophobia._atomic import atomic_write
from agnostophobia.data.preprocess import INPUT_CONVENTIONS
from agnostophobia.detectors import DETECTORS, TorchScore
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.rundir import RunDir
from agnostophobia.training.records import check_run

from .best import best_model
from .calibration import DEPLOY_PRECISION, arithmetic, resolve_model
from .classifier import OpenSetClassifier
from .formats import DEFAULT_FORMAT, FORMATS
from .request import ModelRequest
from agnostophobia._log import log_info

METADATA = "agnostophobia.json"


class DeployedClassifier(nn.Module):
    """Network, score and threshold in one module: ``forward(x) -> (labels, scores)``. The score
    reads the logit columns its detector reads (all, background class included, when
    ``all_columns``; else the C known ones), as :func:`~agnostophobia.detectors.stored.detector_inputs`
    gives the numpy score."""

    def __init__(self, network: nn.Module, score: TorchScore, threshold: float, num_classes: int,
                 all_columns: bool = False):
        super().__init__()
        self.network = network
        self.score = score
        self.num_classes = num_classes
        self.all_columns = all_columns
        self.register_buffer("threshold", torch.tensor(float(threshold), dtype=torch.float64))

    def forward(self, x: torch.Tensor):
        logits, features = self.network(x)
        logits, features = logits.double(), features.double()
        known = logits[:, :self.num_classes]
        predicted = known.argmax(dim=1)
        scores = self.score(logits if self.all_columns else known, features, predicted)
        return predicted.masked_fill(scores < self.threshold, -1), scores


def exportable() -> List[str]:
    """The registered detectors that declare a torch score."""
    return [name for name in DETECTORS.names() if DETECTORS.get(name).why_not_exportable() is None]


def check_exportable(detector: str) -> None:
    """Nothing when the detector registered as ``detector`` declares a torch score; else one line
    with the reason it declares and the detectors that can be exported."""
    why = DETECTORS.get(detector).why_not_exportable()
    if why is not None:
        raise AgnostophobiaError(f"export: detector {detector!r} is not exported: {why}; exportable: "
                                 f"{', '.join(exportable())}")


def deployable(classifier: OpenSetClassifier) -> DeployedClassifier:
    """``classifier`` as one fp32 CPU module (its network copied, in eval mode)."""
    detector = classifier.detector
    check_exportable(detector.name)
    network = copy.deepcopy(classifier.trained.model).float().cpu().to(memory_format=torch.contiguous_format)
    module = DeployedClassifier(network, detector.torch_score(), classifier.threshold, classifier.num_classes,
                                all_columns=detector.reads_background_column).eval()
    return module.requires_grad_(False)  # inference only: outputs a user can turn into numpy directly


def metadata(classifier: OpenSetClassifier, fmt: str) -> str:
    spec = classifier.input_spec
    return json.dumps({
        "format": fmt, "agnostophobia": agnostophobia.__version__, "approach": classifier.approach,
        "detector": classifier.detector_name, "seed": classifier.seed, "threshold": classifier.threshold,
        "score_scale": classifier.detector.SCORE_SCALE,
        "target_fpr": classifier.calibration.get("target_fpr"), "class_names": classifier.class_names,
        "input": {"shape": ["N", *spec.shape], "dtype": "float32", "range": [0, 1], "kind": spec.kind,
                  "preprocessing": spec.preprocessing, "preparation": INPUT_CONVENTIONS[spec.preprocessing]},
        "outputs": {"labels": "int64 (N,), the class index, -1 = unknown",
                    "scores": "float64 (N,), accepted when >= threshold"},
        "precision": arithmetic(DEPLOY_PRECISION)})


TORCHSCRIPT_NOTE = ("note: TorchScript is deprecated by PyTorch; --format pt2 writes the same model with "
                    "torch.export, its successor")


def export_classifier(classifier: OpenSetClassifier, out: Path, fmt: str = DEFAULT_FORMAT) -> Path:
    """Write ``classifier`` as one ``fmt`` file at ``out`` (atomically)."""
    check_format(fmt)
    module = deployable(classifier)
    example = torch.rand(2, *classifier.input_spec.shape)
    batch = {0: torch.export.Dim("batch", min=1)}
    info = metadata(classifier, fmt)
    with torch.no_grad():
        if fmt == "pt2":
            program = torch.export.export(module, (example,), dynamic_shapes=(batch,))
            _write_bytes(out, lambda buffer: torch.export.save(program, buffer, extra_files={METADATA: info}))
        elif fmt == "onnx":
            program = _onnx_program(module, example, batch)
            program.model.metadata_props[METADATA] = info
            atomic_write(out, lambda tmp: program.save(tmp, external_data=False))
        else:
            # torch.jit warns of its deprecation once per traced method and on saving; TORCHSCRIPT_NOTE says it once
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                traced = torch.jit.trace(module, (example,))
                _write_bytes(out, lambda buffer: torch.jit.save(traced, buffer, _extra_files={METADATA: info}))
    return Path(out)


def check_format(fmt: str) -> None:
    """``fmt`` one of :data:`FORMATS`, and the packages it needs installed (``onnx``: the
    ``[onnx]`` extra): a one-line error before any work otherwise."""
    if fmt not in FORMATS:
        raise AgnostophobiaError(f"--format {fmt!r}: must be one of {', '.join(FORMATS)}")
    if fmt == "onnx":
        missing = [name for name in ("onnx", "onnxscript") if importlib.util.find_spec(name) is None]
        if missing:  # torch.onnx's dynamo exporter needs both
            raise AgnostophobiaError(f"export --format onnx needs {' and '.join(missing)}, not installed: "
                                     f"pip install 'agnostophobia[onnx]'")


def _write_bytes(out: Path, save) -> None:
    """``save(buffer)`` into memory, then the bytes written atomically to ``out`` by Python: torch's
    own file writer aborts the process (SIGABRT) on a full disk, where Python's raises ENOSPC,
    which the command reports in one line (and the temporary file is removed). A buffer, not a
    path, also keeps torch.export from warning about a file name not ending in .pt2."""
    buffer = io.BytesIO()
    save(buffer)
    atomic_write(out, lambda tmp: Path(tmp).write_bytes(buffer.getbuffer()))


def _onnx_program(module: nn.Module, example: torch.Tensor, batch):
    return torch.onnx.export(module, (example,), dynamo=True, dynamic_shapes=(batch,), input_names=["images"],
                             output_names=["labels", "scores"], verbose=False)


def export_run(request: ModelRequest, out: Path, fmt: str = DEFAULT_FORMAT, log=log_info) -> Path:
    """``agnostophobia export``: the one model ``request`` chooses (``approach``, ``detector``,
    ``seed``; ``fpr`` calibrates its threshold first, from ``data_dir``), with its calibrated
    threshold, on the CPU in fp32, as one ``fmt`` file at ``out``."""
    # an export is computed on the CPU in fp32: no device or precision to choose
    request.check_reads("export_run", "approach", "detector", "seed", "fpr", "data_dir")
    check_format(fmt)  # before any work, as the detector below
    if fmt == "torchscript":
        log(TORCHSCRIPT_NOTE)
    RunDir(request.run).check_output(out)  # an export never replaces a file of the run it reads
    check_run(request.run, "export").warn_versions(stacklevel=2)  # broken records stop here, as for predict
    request = best_model(request, log, exportable_only=True)  # detector "best": among those export writes
    _, approach, detector = resolve_model(request.run, request.approach, request.detector, request.seed)
    check_exportable(detector)  # before any work: a calibration with --fpr writes
    classifier = OpenSetClassifier.from_run(request.but(approach=approach, detector=detector, device="cpu",
                                                        precision=DEPLOY_PRECISION), log=log)
    path = export_classifier(classifier, Path(out), fmt)
    log(f"exported {classifier.approach} (seed {classifier.seed}) with {classifier.detector_name} >= "
        f"{classifier.threshold:.6g} as {fmt}: {path} (fp32; input float (N, "
        f"{', '.join(map(str, classifier.input_spec.shape))}) in [0, 1]; output (labels, scores))")
    return path
