"""Deployment: the step after the paper's evaluation.

* :mod:`.calibration`: ``calibrate`` -- a threshold per trained model chosen on the
  validation split (FPR <= T on its negatives), never on test data, in ``calibration.json``;
  what it gives on the test sets, beside Table 2's oracle readout, for the report;
* :class:`OpenSetClassifier`: a trained model with that threshold, ``predict`` -> class or
  -1 ("unknown"), on CPU or CUDA;
* :mod:`.predict`: ``predict RUN INPUT...`` on image files, folders and ``.npz`` files;
* :mod:`.export`: one self-contained TorchScript, ``torch.export`` or ONNX file with the
  network, the score and the threshold.
"""
from .calibration import CALIBRATION, calibrate_run, calibration_entry, read_calibration
from .classifier import OpenSetClassifier

__all__ = ["CALIBRATION", "OpenSetClassifier", "calibrate_run", "calibration_entry", "read_calibration"]
