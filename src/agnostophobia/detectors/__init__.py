"""Detectors: everything that turns a trained network's (logits, deep features) into
per-class scores (N, C), larger = more known -- the input of OSCR (Eq. 3), CCR at FPR
and every figure.

One interface (:class:`Detector`): ``fit(train_logits, train_features, train_labels)``
(a no-op for post-hoc scores), ``scores(logits, features) -> (N, C)`` and ``torch_score()``,
the same score as a torch module (:class:`TorchScore`) that ``export`` writes (a detector
that cannot be exported says why in ``NOT_EXPORTABLE``); found by name in :data:`DETECTORS`::

    detector = build_detector("knn", k=50).fit(train_logits, train_features, train_labels)
    scores = detector.scores(test_logits, test_features)
    exported = detector.torch_score()  # the same score in torch operations, for ``export``

The registered detectors are ``DETECTORS.names()``: the paper's five (``softmax``,
``background``, ``objectosphere-scaled``, ``entropy``, ``magnitude``) and the post-processors
published since. Each declares beside its code what the rest reads -- its ``title``, whether it is
fitted (``needs_fit``), reads the features, the last layer or the background column, the networks
it scores (``approaches``), its settings -- and its class docstring states its formula and source;
the API reference's table of the registries is generated from them, a plugin's detectors included,
so adding a detector edits no list here.

Scores are tie-free (score scale 2): a probability that float64 rounds to 1 would tie
confident knowns with confident unknowns, so softmax-based scores are log-odds; a
saturating map keeps the order of the statistic beneath it where it saturates
(``detectors.posthoc``, ``detectors.entropy``, ``detectors._evt.gpd_score``); ReAct, where every
entry of F reaches its clip, continues with the unclipped energy
(``detectors._base.continue_at_tie``). A detector
declares the inputs it scores alike (``Detector.ties()``: ASH-B, every sample without a positive
feature). A detector's ``SCORE_SCALE`` numbers its scale.

:func:`make_toy_outputs` draws small toy outputs (three classes, a last layer, a known and an
unknown test sample) for trying a detector, as the examples do.
"""
from ._base import (DETECTORS, Detector, NotExportable, NotFittedError, Setting, TorchScore, build_detector,
                    detector_applies, place_in_predicted_column, register, setting_grid)
from .cac import CACDetector, cac_scores
from .evm import EVM
from .ghost import GHOST
from .knn import KNNDetector, NeighbourSearch, k_smallest_distances, kth_neighbour_distance, l2_normalize
from .entropy import generalized_entropy, log_generalized_entropy, log_softmax_entropy, softmax_entropy
from .mahalanobis import Mahalanobis, RelativeMahalanobis
from .openmax import OpenMax
from .postmax import PostMax
from .posthoc import background_scores, feature_magnitude, scaled_objectosphere_scores, softmax_log_odds, softmax_scores
from .shaping import ASH, SCALE, ReAct
from .toy import ToyOutputs, make_toy_outputs
from .vim import ViM

__all__ = [
    "DETECTORS", "Detector", "NotExportable", "NotFittedError", "Setting", "TorchScore", "setting_grid",
    "build_detector", "detector_applies", "register", "place_in_predicted_column", "KNNDetector", "OpenMax", "EVM", "PostMax", "GHOST", "k_smallest_distances",
    "NeighbourSearch", "kth_neighbour_distance", "l2_normalize", "ViM", "Mahalanobis", "RelativeMahalanobis", "ReAct",
    "ASH", "SCALE",
    "generalized_entropy", "log_generalized_entropy", "log_softmax_entropy", "softmax_log_odds",
    "softmax_scores", "background_scores", "feature_magnitude", "scaled_objectosphere_scores", "softmax_entropy",
    "make_toy_outputs", "ToyOutputs", "CACDetector", "cac_scores",
]
