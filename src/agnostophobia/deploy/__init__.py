"""Deployment: the step after the paper's evaluation.

* :mod:`.calibration`: ``calibrate`` -- a threshold per trained model chosen on the
  validation split (FPR <= T on its negatives), never on test data, in ``calibration.json``;
  what it gives on the test sets, beside Table 2's oracle readout, for the report;
* :class:`OpenSetClassifier`: a trained model with that threshold, ``predict`` -> class or
  -1 ("unknown"), on CPU or CUDA;
* :mod:`.predict`: ``predict RUN INPUT...`` on image files, folders and ``.npz`` files;
* :class:`ModelRequest`: which models of a run a command reads (the request the
  ``compare``, ``calibrate``, ``predict``, ``export``, ``evaluate`` and ``tune-detectors``
  handlers build once and the library functions take whole);
* :func:`compare_run`: every (approach, detector) of a run ranked on validation data;
  :func:`best_model` and :func:`best_detectors`: ``detector="best"``, the top of that ranking,
  as every command that deploys a detector resolves it;
* :mod:`.export`: one self-contained ``torch.export``, ONNX or TorchScript file with the
  network, the score and the threshold.

Attributes are imported on first use: the command line imports this package to build its
parsers, and ``agnostophobia --help`` must not load torch.
"""
from __future__ import annotations

from agnostophobia._lazy import lazy_attributes

_EXPORTS = {
    "CALIBRATION": "calibration", "calibrate_run": "calibration", "calibration_entry": "calibration",
    "read_calibration": "calibration", "OpenSetClassifier": "classifier", "ModelRequest": "request",
    "compare_run": "compare", "best_detectors": "best", "best_model": "best",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
