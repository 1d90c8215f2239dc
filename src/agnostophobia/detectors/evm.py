r"""The Extreme Value Machine (Rudd, Jain, Scheirer & Boult, "The Extreme Value Machine", TPAMI
2018; authors' code: Vastlab/vast, ``opensetAlgos/EVM.py``): the detector ``evm``, fitted on
the deep features of a model's correctly classified training knowns.

Fitting (the paper's margin distribution and Probability of Inclusion, then its model
reduction):

1. For each training sample :math:`x_i` of class :math:`c`, the margin distances to the
   samples of the other classes are half their distances, :math:`m_{ij} = d(x_i, x_j) / 2`
   (the margin lies half-way to a negative); a Weibull is fitted by maximum likelihood
   (location 0; :func:`~agnostophobia.detectors._evt.fit_weibull_rows`, OpenMax's
   fit too, all samples at once) to the ``tail_size`` smallest of them, giving
   :math:`(\kappa_i, \lambda_i)`.
2. The Probability of Inclusion of a point :math:`x'` in the class of :math:`x_i`:

   .. math:: \Psi(x_i, x') = \exp\Big(-\big(d(x_i, x') / \lambda_i\big)^{\kappa_i}\Big).

3. Model reduction: within each class, :math:`x_i` covers :math:`x_j` when
   :math:`\Psi(x_i, x_j) \ge \varsigma` (``cover_threshold``), i.e. when
   :math:`d(x_i, x_j) \le \lambda_i (-\ln \varsigma)^{1/\kappa_i}`; the greedy set cover
   keeps the sample covering most still-uncovered samples until all are covered. The
   kept samples are the class's *extreme vectors* (EVs).

Scoring: the EVM's probability that :math:`x` belongs to class :math:`c` is
:math:`P_c(x) = \max_{i \in EV_c} \Psi(x_i, x)`. The (N, C) scores hold it as
:math:`s_c = -\ln(-\ln P_c) = \max_{i \in EV_c} \kappa_i \ln(\lambda_i / d(x_i, x))`, a
strictly increasing function of :math:`P_c` (:math:`P_c = \exp(-e^{-s_c})`,
:meth:`EVM.probabilities`): thresholds and OSCR are the same, but the order survives
where :math:`P_c` rounds to 0 (far samples) or 1 (samples near an EV) in float64. The
EVM's arg-max may differ from the network's (``keeps_prediction`` False). A distance of 0
is raised to the smallest positive double, so every score is finite.

Distance ``d``: ``cosine`` (:math:`1 - \cos`, the default: the distance Bisgin et al. 2024
ran the authors' EVM with, ``openset-imagenet-comparison`` ``distance_metric: cosine``,
and the default of the ``evm`` pip package) or ``euclidean`` (the paper's
:math:`\lVert x_i - x' \rVert`, Vastlab/vast's default).

Deviations from Vastlab/vast, all deliberate: the Weibull is the paper's two-parameter
fit to the margins themselves and :math:`\Psi` its survival function, where vast fits
libMR's ``FitLow`` to translated distances (translate amount 1) and scales them by a
``distance_multiplier`` of 0.55 instead of the paper's 1/2; only correctly classified
training knowns are used, as by Bisgin et al. and by our OpenMax. A margin of 0 (a
negative at the same point) is raised to 1e-12 times the sample's largest tail margin, and
a sample whose ``tail_size`` margins are all equal cannot have a Weibull: it is left out
(counted in ``n_left_out_``).

Memory: the margin search is the chunked k-nearest search of the k-NN detector
(:func:`~agnostophobia.detectors.knn.k_smallest_distances`), the set cover and the
scores compute distance blocks of at most ``2**22`` entries, so nothing grows with the
square of the training set (``benchmarks/bench_detectors.py``: 100,000 training knowns); a
class of at most 8,192 samples keeps its set cover's boolean matrix (at most 64 MB), read
again by the greedy loop instead of computed again.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ._base import Detector, Setting, check_columns, check_training_data, register
from ._evt import fit_weibull_rows
from .knn import METRICS, NeighbourSearch, _Metric, k_smallest_distances

#: Entries of one distance block in the set cover and the scoring (32 MB in float64).
BLOCK_ENTRIES = 1 << 22
#: A class of at most this many rows squared keeps its whole cover matrix (one byte an entry,
#: 64 MB) for the set cover's lazy greedy loop, which otherwise computes most of its distance
#: blocks again (tune-detectors fits the EVM at 12 grid points on every model).
COVER_MATRIX_ENTRIES = 1 << 26
#: A zero margin is raised to this fraction of the sample's largest tail margin.
ZERO_MARGIN = 1e-12


def log_log_inclusion(distances: torch.Tensor, shape: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    r""":math:`-\ln(-\ln \Psi) = \kappa \ln(\lambda / d)` of :math:`\Psi = \exp(-(d / \lambda)^\kappa)`;
    columns = extreme vectors (their ``shape`` κ, ``scale`` λ)."""
    return shape * (torch.log(scale) - torch.log(distances.clamp_min(np.finfo(float).tiny)))


def greedy_set_cover(points: torch.Tensor, radius: torch.Tensor, metric: _Metric) -> np.ndarray:
    r"""Indices, in the order chosen, of a greedy cover of ``points`` (prepared rows of one
    class): row i covers row j when ``d(i, j) <= radius[i]``, and every row covers itself.

    The greedy choice, the row covering most uncovered rows, is found lazily: every
    row's count is an upper bound (counts only fall as rows get covered), so the exact
    counts of the rows with the largest bounds, in blocks, decide it; picks continue
    from one block while its best exact count reaches the largest bound outside it. Ties
    go to the larger bound, then the lower index.
    """
    n = len(points)
    bias = metric.bias(points)
    rows = int(min(max(BLOCK_ENTRIES // n, 16), n))

    def computed_covers(index: np.ndarray) -> torch.Tensor:
        index_t = torch.from_numpy(index)
        inside = metric.block(points[index_t], points, bias) <= radius[index_t, None]
        inside[torch.arange(len(index)), index_t] = True
        return inside

    blocks = [computed_covers(np.arange(i, min(i + rows, n))) for i in range(0, n, rows)]
    bound = np.concatenate([_row_counts(block).numpy() for block in blocks])
    if n * n <= COVER_MATRIX_ENTRIES:  # the same booleans, read again instead of computed again
        matrix = torch.cat(blocks)
        covers = lambda index: matrix[torch.from_numpy(index)]  # noqa: E731
    else:
        covers = computed_covers
    del blocks
    uncovered = torch.ones(n, dtype=torch.bool)
    chosen = []
    while uncovered.any():
        order = np.lexsort((np.arange(n), -bound))
        block, outside = order[:rows], (bound[order[rows]] if n > rows else 0)
        inside = covers(block) & uncovered
        counts = _row_counts(inside)
        while True:
            best = int(torch.argmax(counts))  # the first maximum: the block is in (bound, index) order
            if counts[best] == 0 or counts[best] < outside:
                break
            chosen.append(int(block[best]))
            # the counts lose the columns the pick newly covers, counted in those columns alone:
            # all picks together touch each column once, where counting whole rows again after
            # each pick read the block once per pick
            newly = torch.nonzero(inside[best]).squeeze(1)
            uncovered[newly] = False
            counts -= _row_counts(inside[:, newly])
            inside[:, newly] = False
        bound[block] = counts.numpy()
    return np.array(chosen, dtype=np.int64)


def _row_counts(inside: torch.Tensor) -> torch.Tensor:
    """The True entries of each row of a boolean block, as int64: summed as bytes into int32,
    about half the time of ``sum`` of the bools, which widens every entry to int64 (the set cover
    spends much of its time counting)."""
    return inside.view(torch.uint8).sum(dim=1, dtype=torch.int32).long()


@register("evm")
class EVM(Detector):
    r"""Extreme Value Machine on the deep features (Rudd et al., TPAMI 2018); formulas in the
    module docstring.

    Parameters: ``tail_size`` (margins per Weibull, default 50), ``cover_threshold``
    :math:`\varsigma \in (0, 1]` (default 0.5), ``distance`` (``cosine``, default, or
    ``euclidean``), ``query_chunk`` / ``reference_chunk`` (block sizes of the margin search).
    Attributes after :meth:`fit`: ``ev_features_`` (E, D), ``ev_shape_``, ``ev_scale_``,
    ``ev_class_`` (E,) the extreme vectors grouped by class, ``n_left_out_``.

    Examples:
        >>> from agnostophobia.detectors import EVM, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = EVM(tail_size=5).fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    needs_fit = True
    needs_features = True
    FITTED_STATE = ("ev_features_", "ev_shape_", "ev_scale_", "ev_class_", "num_classes_", "n_left_out_")
    keeps_prediction = False  # the class with the largest inclusion probability, not the largest logit
    NOT_EXPORTABLE = ("it predicts the class of the nearest extreme vector, not the network's arg-max, which the "
                      "exported module's labels are")
    title = "EVM"
    report_note = ("Rudd et al. (TPAMI 2018) on each model's deep features: per correctly classified training "
                   "known, a Weibull on half its distances to the nearest other-class samples; greedy set cover "
                   "of extreme vectors; class score = max inclusion probability over the class's extreme vectors.")

    # 12 grid points, as OpenMax's and k-NN's (tune-detectors fits each on every model): the tail
    # sizes the cpu LeNet++ run chose from (10, 20, 50, 100) were 10 and 100, so those two remain
    tail_size = Setting(int, 50, low=2, grid=(10, 100), doc="margins per Weibull fit (a fit needs 2)")
    cover_threshold = Setting(float, 0.5, low=0, high=1, low_open=True, grid=(0.3, 0.5, 0.7),
                              doc="ς of the model reduction (Rudd et al., TPAMI 2018): a sample covers another "
                                  "of its class whose probability of inclusion is at least ς; smaller keeps "
                                  "fewer extreme vectors")
    # tuned too: cosine ignores the feature magnitude, which is what separates unknowns in a
    # 2-D LeNet++ (Fig. 2) and what Objectosphere trains; measured on the cpu LeNet++ run
    distance = Setting(str, "cosine", choices=METRICS, grid=METRICS,
                       doc="d, between deep features: 'cosine' (1 - cos, as the evm package and Bisgin et al. "
                           "2024 run it) or 'euclidean' (the paper's)")
    query_chunk = Setting(int, 1024, low=1, recorded=False,
                          doc="rows per block of the margin search (memory and speed only, not recorded)")
    reference_chunk = Setting(int, 8192, low=1, recorded=False,
                              doc="other-class rows per block of the margin search: at most query_chunk x "
                                  "reference_chunk distances exist at a time (memory and speed only, not "
                                  "recorded)")

    def _margins(self, features: np.ndarray, labels: np.ndarray, c: int) -> np.ndarray:
        """(N_c, tail_size) smallest margins (half distances) of class c's samples to the others."""
        negatives = features[labels != c]
        if len(negatives) < self.tail_size:
            raise ValueError(f"class {c} has {len(negatives)} correctly classified training sample(s) of other "
                             f"classes, fewer than tail_size={self.tail_size}")
        chunks = NeighbourSearch(query_chunk=self.query_chunk, reference_chunk=self.reference_chunk)
        return 0.5 * k_smallest_distances(features[labels == c], negatives, self.tail_size, self.distance, chunks)

    def fit(self, train_logits, train_features, train_labels) -> "EVM":
        logits, features, labels = check_training_data(train_logits, train_features, train_labels, True)
        num_classes = logits.shape[1]
        correct = logits.argmax(axis=1) == labels
        features, labels = features[correct], labels[correct]
        metric = _Metric(self.distance)
        evs, shapes, scales, classes = [], [], [], []
        self.n_left_out_ = 0
        for c in range(num_classes):
            if not (labels == c).any():
                raise ValueError(f"class {c} has no correctly classified training sample; the EVM needs one")
            margins = self._margins(features, labels, c)
            margins = np.maximum(margins, ZERO_MARGIN * margins[:, -1:])
            fittable = margins[:, 0] < margins[:, -1]  # ascending: all equal <=> first == last
            self.n_left_out_ += int((~fittable).sum())
            if not fittable.any():
                raise ValueError(f"class {c}: every sample's {self.tail_size} smallest margins are all equal; "
                                 "no Weibull can be fitted")
            shape, scale = fit_weibull_rows(margins[fittable], name=f"class {c} margins")
            members = features[labels == c][fittable]
            radius = scale * (-math.log(self.cover_threshold)) ** (1.0 / shape)
            kept = greedy_set_cover(metric.prepare(members), torch.from_numpy(radius), metric)
            evs.append(members[kept])
            shapes.append(shape[kept])
            scales.append(scale[kept])
            classes.append(np.full(len(kept), c))
        self.ev_features_, self.ev_shape_ = np.concatenate(evs), np.concatenate(shapes)
        self.ev_scale_, self.ev_class_ = np.concatenate(scales), np.concatenate(classes)
        self.num_classes_ = num_classes
        self._fitted = True
        return self

    def _scores(self, logits, features):
        check_columns(self, logits, features, self.num_classes_, self.ev_features_.shape[1])
        metric = _Metric(self.distance)
        out = np.zeros((len(features), self.num_classes_))
        for c in range(self.num_classes_):
            members = self.ev_class_ == c
            ev = metric.prepare(self.ev_features_[members])
            bias, shape = metric.bias(ev), torch.from_numpy(self.ev_shape_[members])
            scale = torch.from_numpy(self.ev_scale_[members])
            rows = max(BLOCK_ENTRIES // len(ev), 1)
            for q0 in range(0, len(features), rows):
                q = metric.prepare(features[q0:q0 + rows])
                score = log_log_inclusion(metric.block(q, ev, bias), shape, scale)
                out[q0:q0 + len(q), c] = score.max(dim=1).values.numpy()
        return out

    def probabilities(self, logits, features) -> np.ndarray:
        r"""(N, C) probabilities of inclusion :math:`P_c = \max_{i \in EV_c} \Psi(x_i, x)`.

        Returns:
            An (N, C) float64 NumPy array in [0, 1].
        """
        return np.exp(-np.exp(-self.scores(logits, features)))
