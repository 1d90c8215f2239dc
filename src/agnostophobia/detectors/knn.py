r"""k-nearest-neighbour distance in deep-feature space (Sun, Ming, Zhu & Li, "Out-of-Distribution
Detection with Deep Nearest Neighbors", ICML 2022).

With :math:`z = F / \lVert F \rVert` the L2-normalised deep feature of a sample and
:math:`z_1, \dots, z_n` those of the training knowns, the score is

.. math:: s(x) = -\lVert z(x) - z_{(k)}(x) \rVert_2,

minus the Euclidean distance to the k-th nearest training feature: larger = more known.
Sun et al. normalise (``normalize=True``, the default here; without it the raw features
are compared) and search all training samples regardless of class
(``class_conditional=False``, the default; with True only the training samples of the
predicted class are searched). Their k: 50 for CIFAR-10 (the default here), 1000 for
ImageNet. A zero feature vector has no direction; it is kept as the zero vector, at
distance 1 from every normalised training feature.

The search is exact and chunked: at most ``query_chunk x reference_chunk`` distances
exist at a time (64 MB in float64 by default) while a running top-k per query is kept,
so 100,000 queries against 100,000 training features never hold the full distance
matrix (``benchmarks/bench_knn.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ._base import (Detector, Setting, TorchScore, check_columns, check_training_data, place_in_predicted_column,
                    register)


def l2_normalize(features: np.ndarray) -> np.ndarray:
    """Rows divided by their Euclidean norm; zero rows stay zero.

    Args:
        features: the rows, a float NumPy array of shape ``(N, D)``.

    Returns:
        The normalised rows, shape ``(N, D)``, a new array.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import l2_normalize
        >>> l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))
        array([[0.6, 0.8],
               [0. , 0. ]])
    """
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return np.divide(features, norms, out=np.zeros_like(features), where=norms > 0)


def _smallest(values: torch.Tensor, k: int) -> torch.Tensor:
    return torch.topk(values, min(k, values.shape[1]), dim=1, largest=False, sorted=False).values


#: Distances the chunked search computes: ``euclidean`` and ``cosine`` (1 - cos, in [0, 2]).
METRICS = ("euclidean", "cosine")


class _Metric:
    r"""A distance as a matrix product plus per-row terms, so that blocks are one ``addmm``.

    ``partial(q, block)`` is strictly increasing in the distance for a fixed query row
    and cheap (the query's own term is left out); ``finish(partial, q)`` turns it into
    the distance. Euclidean: :math:`\lVert r \rVert^2 - 2 q \cdot r`, finished by adding
    :math:`\lVert q \rVert^2` and taking the square root. Cosine: :math:`-\hat q \cdot \hat r`
    on L2-normalised rows, finished by adding 1 (a zero row stays zero: distance 1 to
    everything, as :func:`agnostophobia.detectors.openmax.cosine_distance` defines it).
    """

    def __init__(self, name: str, device: torch.device = torch.device("cpu")):
        if name not in METRICS:
            raise ValueError(f"distance must be one of {', '.join(METRICS)}, got {name!r}")
        self.name, self.device = name, device

    def prepare(self, rows: np.ndarray) -> torch.Tensor:
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        return torch.from_numpy(l2_normalize(rows) if self.name == "cosine" else rows).to(self.device)

    def bias(self, reference: torch.Tensor) -> torch.Tensor:
        if self.name == "cosine":
            return torch.zeros(reference.shape[0], dtype=reference.dtype, device=reference.device)
        return (reference * reference).sum(dim=1)

    def partial(self, q: torch.Tensor, reference: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.addmm(bias, q, reference.T, alpha=-2.0 if self.name == "euclidean" else -1.0)

    def finish(self, partial: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The distances, computed in place in ``partial`` (a fresh block: no copies of it)."""
        if self.name == "cosine":
            return partial.add_(1.0).clamp_(0.0, 2.0)
        return partial.add_((q * q).sum(dim=1, keepdim=True)).clamp_min_(0.0).sqrt_()

    def block(self, q: torch.Tensor, reference: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """The full (m, n) distances of prepared rows ``q`` to prepared rows ``reference``."""
        return self.finish(self.partial(q, reference, bias), q)


def search_device(device: Optional[str] = "auto") -> torch.device:
    """Where the distance search runs: ``auto`` (or None) is the GPU when CUDA is available;
    a named device that does not exist is a one-line :class:`ConfigError`."""
    from agnostophobia.training.device import resolve_device

    return resolve_device("auto" if device is None else str(device))


#: The largest feature dimension at which the CPU searches with a k-d tree (``scipy.spatial.cKDTree``)
#: instead of brute force. Measured by ``benchmarks/bench_detectors.py --crossover`` (100,000 training
#: and 20,000 query rows, k = 50, 2 cores): the tree wins by 10-60x at D <= 8 and loses from D = 16 on,
#: as a k-d tree's pruning fails in high dimension (others measured 4.2 s -> 42 s at D = 64).
KDTREE_MAX_DIM = 8
#: How the nearest rows are found: ``auto`` (a k-d tree on the CPU at D <= KDTREE_MAX_DIM, else brute
#: force), or either one.
SEARCHES = ("auto", "brute", "kdtree")


@dataclass(frozen=True)
class NeighbourSearch:
    """How :func:`k_smallest_distances` searches: by which method, on which device and in blocks of
    which size. Memory and speed only: every search finds the same distances (to rounding, 1e-6).

    Args:
        method: ``"auto"`` (a k-d tree on the CPU at ``D <= KDTREE_MAX_DIM``, else brute force),
            ``"brute"`` or ``"kdtree"`` (always on the CPU).
        device: where brute force runs: ``"auto"`` or None (CUDA when available, else the CPU),
            or a device name (``"cpu"``, ``"cuda:1"``, ...).
        query_chunk: query rows per block of the brute-force search.
        reference_chunk: reference rows per block: at most ``query_chunk x reference_chunk``
            distances exist at a time (64 MB in float64 at the defaults).

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import NeighbourSearch, k_smallest_distances
        >>> reference = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
        >>> small_blocks = NeighbourSearch(method="brute", device="cpu", query_chunk=1, reference_chunk=2)
        >>> k_smallest_distances(np.array([[0.0, 0.0]]), reference, k=2, search=small_blocks)
        array([[0., 5.]])
    """

    method: str = "auto"
    device: Optional[str] = "auto"
    query_chunk: int = 1024
    reference_chunk: int = 8192


def k_smallest_distances(queries: np.ndarray, reference: np.ndarray, k: int, distance: str = "euclidean",
                         search: NeighbourSearch = NeighbourSearch()) -> np.ndarray:
    r"""(M, k) distances of each query row to its k nearest reference rows, ascending.

    Brute force: one ``query_chunk x reference_chunk`` block of :class:`_Metric` ``partial``
    values (float64) at a time; the k smallest per query are carried from block to block, so
    memory does not grow with the number of references. The search's ``device``: where the
    blocks are computed (:func:`search_device`; ``auto``: CUDA when available, else the CPU); the
    same float64 arithmetic on either, so the distances agree to rounding (``tests``: 1e-6).
    On the CPU at low dimension (method ``auto``, D <= :data:`KDTREE_MAX_DIM`) an exact
    k-d tree search finds the same neighbours (:func:`kdtree_smallest`); on a GPU and at high D
    brute force stays.

    Args:
        queries: the query rows, a float NumPy array of shape ``(M, D)``.
        reference: the rows searched, shape ``(n, D)`` (a detector's training knowns).
        k: how many nearest rows, ``1 <= k <= n``.
        distance: ``"euclidean"`` or ``"cosine"`` (:math:`1 - \cos`, in [0, 2]; a zero row is at
            distance 1 from every row).
        search: how the rows are searched (:class:`NeighbourSearch`: method, device, block sizes);
            default: ``auto`` on ``auto`` in blocks of 1024 x 8192.

    Returns:
        The ``(M, k)`` float64 distances, ascending along each row.

    Raises:
        ValueError: ``k`` is outside ``1..n``, or the search's method or ``distance`` is not one
            of its values.
        ConfigError: the search's device names no device this machine has.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import NeighbourSearch, k_smallest_distances
        >>> reference = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
        >>> k_smallest_distances(np.array([[0.0, 0.0]]), reference, k=2, search=NeighbourSearch(device="cpu"))
        array([[0., 5.]])
    """
    n_ref = reference.shape[0]
    if not 1 <= k <= n_ref:
        raise ValueError(f"k={k} needs at least k reference samples, got {n_ref}")
    if search.method not in SEARCHES:
        raise ValueError(f"search must be one of {', '.join(SEARCHES)}, got {search.method!r}")
    metric = _Metric(distance, search_device(search.device))
    low_dimension = reference.shape[1] <= KDTREE_MAX_DIM and metric.device.type == "cpu"
    if search.method == "kdtree" or search.method == "auto" and low_dimension:
        return kdtree_smallest(queries, reference, k, distance)
    ref = metric.prepare(reference)
    bias = metric.bias(ref)
    out = np.empty((queries.shape[0], k))
    query_chunk, reference_chunk = search.query_chunk, search.reference_chunk
    for q0 in range(0, queries.shape[0], query_chunk):
        q = metric.prepare(queries[q0:q0 + query_chunk])
        best = None  # (m, <=k) smallest partial values so far
        for r0 in range(0, n_ref, reference_chunk):
            part = _smallest(metric.partial(q, ref[r0:r0 + reference_chunk], bias[r0:r0 + reference_chunk]), k)
            # reduce the block first: only (m, 2k) values are ever concatenated
            best = part if best is None else _smallest(torch.cat([best, part], dim=1), k)
        out[q0:q0 + len(q)] = metric.finish(best.sort(dim=1).values, q).cpu().numpy()
    return out


def kdtree_smallest(queries: np.ndarray, reference: np.ndarray, k: int, distance: str = "euclidean") -> np.ndarray:
    r"""(M, k) ascending distances to the k nearest reference rows by an exact k-d tree search
    (``scipy.spatial.cKDTree``, on as many threads as torch uses). Cosine: on L2-normalised rows,
    where :math:`1 - \cos = \lVert \hat q - \hat r 
Vert^2 / 2`; a zero row (no direction) is at
    distance 1 from everything, as :class:`_Metric` defines it, so it is searched apart."""
    from scipy.spatial import cKDTree

    if distance not in METRICS:
        raise ValueError(f"distance must be one of {', '.join(METRICS)}, got {distance!r}")
    queries = np.ascontiguousarray(queries, dtype=np.float64)
    reference = np.ascontiguousarray(reference, dtype=np.float64)
    if distance == "euclidean":
        return _tree_query(cKDTree(reference), queries, k)
    out = np.ones((len(queries), k))  # a zero query: distance 1 to every reference row
    zero_reference = ~np.linalg.norm(reference, axis=1).astype(bool)
    directions = l2_normalize(reference[~zero_reference])
    found = np.linalg.norm(queries, axis=1) > 0
    if found.any() and len(directions):
        near = min(k, len(directions))
        halved = 0.5 * _tree_query(cKDTree(directions), l2_normalize(queries[found]), near) ** 2
        # the zero reference rows (at distance 1) join the candidates: sort them in
        zeros = np.ones((int(found.sum()), min(k, int(zero_reference.sum()))))
        out[found] = np.sort(np.concatenate([np.clip(halved, 0.0, 2.0), zeros], axis=1), axis=1)[:, :k]
    return out


def _tree_query(tree, queries: np.ndarray, k: int) -> np.ndarray:
    distances, _ = tree.query(queries, k=k, workers=torch.get_num_threads())
    return distances.reshape(len(queries), k)


def kth_neighbour_distance(queries: np.ndarray, reference: np.ndarray, k: int, query_chunk: int = 1024,
                           reference_chunk: int = 8192) -> np.ndarray:
    r"""(M,) Euclidean distance of each query row to its k-th nearest reference row
    (the last column of :func:`k_smallest_distances`).

    Args:
        queries, reference, k, query_chunk, reference_chunk: as for :func:`k_smallest_distances`
            (the search runs where its ``device="auto"`` puts it).

    Returns:
        The ``(M,)`` float64 distances.

    Raises:
        ValueError: ``k`` is outside ``1..n``.

    Examples:
        >>> import numpy as np
        >>> from agnostophobia.detectors import kth_neighbour_distance
        >>> reference = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
        >>> kth_neighbour_distance(np.array([[0.0, 0.0], [6.0, 8.0]]), reference, k=2)
        array([5., 5.])
    """
    chunks = NeighbourSearch(query_chunk=query_chunk, reference_chunk=reference_chunk)
    return k_smallest_distances(queries, reference, k, search=chunks)[:, k - 1]


@register("knn")
class KNNDetector(Detector):
    r"""Minus the distance to the k-th nearest training feature (Sun et al., ICML 2022):
    :math:`-\lVert \hat F(x) - \hat F_{(k)} \rVert_2` with :math:`\hat F = F / \lVert F \rVert`
    (when ``normalize``) and :math:`\hat F_{(k)}` the k-th nearest of the training knowns'.

    Parameters: ``k`` (default 50), ``normalize`` (L2-normalise features first, default
    True), ``class_conditional`` (search only the predicted class's training samples,
    default False), ``query_chunk`` / ``reference_chunk`` (block sizes of the search).
    Fitted on the training knowns' deep features. One number per sample, in the
    predicted class's column.

    Examples:
        >>> from agnostophobia.detectors import KNNDetector, make_toy_outputs
        >>> toy = make_toy_outputs()  # three known classes along the first three axes of F
        >>> detector = KNNDetector(k=5).fit(toy.train_logits, toy.train_features, toy.train_labels)
        >>> scores = detector.scores(toy.test_logits, toy.test_features)  # near class 0; off every class
        >>> scores.shape, int(scores[0].argmax()), bool(scores[0].max() > scores[1].max())  # class 0; known higher
        ((2, 3), 0, True)
    """

    needs_fit = True
    needs_features = True
    title = "k-NN"
    report_note = ("Sun et al. (ICML 2022): minus the distance to the k-th nearest training-known deep feature, "
                   "fitted on each model's own training knowns; exact, chunked search.")

    # Sun et al. (2022) chose k on validation data too; the grid spans their CIFAR-10 choice.
    k = Setting(int, 50, low=1, grid=(1, 5, 10, 20, 50, 100),
                doc="the score is minus the distance to the k-th nearest training known (Sun et al., ICML "
                    "2022: 50 on CIFAR-10, 1000 on ImageNet); at most the number of training knowns (of "
                    "the smallest class when class_conditional)")
    # tuned too: normalised features lose the magnitude (see EVM's distance)
    normalize = Setting(bool, True, grid=(True, False),
                        doc="L2-normalise the deep features before the search, as Sun et al. do; false: "
                            "compare the raw features, whose magnitude then counts")
    class_conditional = Setting(bool, False,
                                doc="search only the training knowns of the predicted class; false: all of "
                                    "them, regardless of class (Sun et al.)")
    query_chunk = Setting(int, 1024, low=1, recorded=False,
                          doc="test rows per block of the exact search (memory and speed only, not recorded)")
    reference_chunk = Setting(int, 8192, low=1, recorded=False,
                              doc="training rows per block: at most query_chunk x reference_chunk distances "
                                  "exist at a time (memory and speed only, not recorded)")

    def _prepare(self, features: np.ndarray) -> np.ndarray:
        return l2_normalize(features) if self.normalize else features

    def fit(self, train_logits, train_features, train_labels) -> "KNNDetector":
        logits, features, labels = check_training_data(train_logits, train_features, train_labels, True)
        counts = np.bincount(labels, minlength=logits.shape[1]) if self.class_conditional else [len(labels)]
        smallest = int(min(counts))
        if smallest < self.k:
            where = "a class" if self.class_conditional else "the training knowns"
            raise ValueError(f"k={self.k} exceeds the {smallest} training sample(s) of {where}; "
                             "choose a smaller k")
        self.reference_ = self._prepare(features)
        self.reference_labels_ = labels
        self.num_classes_ = logits.shape[1]
        self._fitted = True
        return self

    def _distance(self, queries: np.ndarray, reference: np.ndarray) -> np.ndarray:
        return kth_neighbour_distance(queries, reference, self.k, self.query_chunk, self.reference_chunk)

    def _scores(self, logits, features):
        check_columns(self, logits, features, self.num_classes_, self.reference_.shape[1])
        queries = self._prepare(features)
        if not self.class_conditional:
            return place_in_predicted_column(-self._distance(queries, self.reference_), logits)
        predicted = logits.argmax(axis=1)
        distance = np.empty(len(queries))
        for c in np.unique(predicted):
            rows = predicted == c
            distance[rows] = self._distance(queries[rows], self.reference_[self.reference_labels_ == c])
        return place_in_predicted_column(-distance, logits)

    def _torch_score(self):
        """The training features travel as buffers (8 bytes x D per training known; a batch of N
        holds an N x #training distance matrix), the labels too when the search is class-conditional."""
        reference = torch.tensor(self.reference_, dtype=torch.float64)
        fitted = {"reference": reference, "reference_sq": (reference * reference).sum(dim=1)}
        if self.class_conditional:
            fitted["reference_labels"] = self.reference_labels_
        return TorchScore(KthNeighbourScore(self.k, self.normalize), **fitted)


@dataclass(frozen=True)
class KthNeighbourScore:
    """The export of :class:`KNNDetector` with its settings ``k`` and ``normalize``: a formula of
    :class:`~agnostophobia.detectors.TorchScore`."""

    k: int
    normalize: bool

    def __call__(self, logits, features, predicted, reference, reference_sq, reference_labels=None) -> torch.Tensor:
        """Minus the Euclidean distance to the k-th nearest ``reference`` row, (N,), in one distance
        matrix; with ``reference_labels`` only the rows of each sample's predicted class count."""
        if self.normalize:  # a zero feature vector stays zero, as in l2_normalize
            norm = torch.linalg.vector_norm(features, dim=1)[:, None]
            features = torch.where(norm > 0, features / norm, torch.zeros_like(features))
        squared = (features * features).sum(dim=1, keepdim=True) + reference_sq[None] - 2.0 * features @ reference.T
        if reference_labels is not None:  # only the predicted class's training features count
            squared = squared.masked_fill(reference_labels[None] != predicted[:, None], float("inf"))
        kth = torch.topk(squared, self.k, dim=1, largest=False).values.max(dim=1).values
        return -kth.clamp_min(0.0).sqrt()
