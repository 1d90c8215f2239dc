"""Numbers of a run, computed from its stored per-sample outputs (no retraining).

Every applicable detector is evaluated on every trained approach (``detectors.stored``:
fitted detectors are fitted once, on each model's own training knowns); each
(approach, detector) pair is one row (``metrics.rows``: the paper's pairs keep the
paper's names) and gets, per unknown set, the numbers of ``metrics.summary``: CCR at
FPR 1e-4..1e-1 (Sec. 4.3; null where the unknown set is too small for the FPR),
closed-set accuracy, AUROC, FPR at 95 % TPR, the areas under the OSCR curve and the
worst and best class's CCR at FPR 1e-2. Table 1's entropy and feature-magnitude
statistics are per trained approach.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from agnostophobia.detectors import feature_magnitude, softmax_entropy
from agnostophobia.detectors.stored import ModelScores
from agnostophobia.metrics import PAPER_FPR_VALUES, summarize
from agnostophobia.metrics.rows import row_label
from agnostophobia.metrics.summary import FPR_KEYS  # noqa: F401  (re-exported)

FPR_TARGETS = PAPER_FPR_VALUES  # the columns of the paper's Table 2


def evaluate_model(approach: str, scores: ModelScores, fpr_targets: Sequence[float] = FPR_TARGETS,
                   computed: Optional[Dict[Tuple[str, str], Dict]] = None) -> List[Dict]:
    """One result dict per (detector evaluated on the ``approach`` model, unknown set).
    ``computed``: results of this model already computed, by (detector, unknown set), kept as they are."""
    results = []
    computed = computed or {}
    for detector in scores.detectors:
        row = row_label(approach, detector)
        for unknown in scores.unknown_sets:
            if (detector, unknown) in computed:
                results.append(computed[detector, unknown])
                continue
            values, labels = scores.known_vs_unknown(detector, unknown)
            results.append({"approach": approach, "detector": detector, "unknowns": unknown, "row": row,
                            **summarize(values, labels, fpr_targets)})
    return results


def entropy_magnitude_table(approach: str, outputs: Dict[str, Dict[str, np.ndarray]]) -> List[Dict]:
    """Table 1: mean and std of softmax entropy and ||F|| for D_c and each unknown set."""
    rows = []
    for split, data in outputs.items():
        entropy = softmax_entropy(data["logits"])
        magnitude = feature_magnitude(data["features"])
        rows.append({"approach": approach, "split": split, "n": int(len(entropy)),
                     "entropy_mean": float(entropy.mean()), "entropy_std": float(entropy.std()),
                     "magnitude_mean": float(magnitude.mean()), "magnitude_std": float(magnitude.std())})
    return rows


def aggregate_seeds(per_seed: List[Dict], keys: Sequence[str]) -> List[Dict]:
    """Mean and std over seeds of results that share ``keys`` (e.g. row, unknowns)."""
    groups: Dict[tuple, List[Dict]] = {}
    for result in per_seed:
        groups.setdefault(tuple(result[k] for k in keys), []).append(result)
    merged = []
    for group in groups.values():
        first = dict(group[0])
        first.pop("seed", None)
        first["seeds"] = len(group)
        for field, value in group[0].items():
            if isinstance(value, dict):  # ccr_at_fpr
                first[field] = {k: _mean([g[field][k] for g in group]) for k in value}
                first[field + "_std"] = {k: _std([g[field][k] for g in group]) for k in value}
            elif isinstance(value, float):
                first[field] = _mean([g[field] for g in group])
                first[field + "_std"] = _std([g[field] for g in group])
        merged.append(first)
    return merged


def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _std(values):
    values = [v for v in values if v is not None]
    return float(np.std(values)) if values else None
