"""Numbers of a run, computed from its stored per-sample outputs (no retraining).

For every evaluation row (approach x score, see ``training.approaches``) and every
unknown set: CCR at FPR 1e-4..1e-1 (Sec. 4.3, ``metrics.ccr_at_fpr``; NaN/null where
the unknown set is too small for the FPR), closed-set accuracy, AUROC and FPR at 95 %
TPR of the max score, and Table 1's entropy and feature-magnitude statistics.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from agnostophobia.metrics import PAPER_FPR_VALUES, auroc, ccr_at_fpr, fpr_at_tpr
from agnostophobia.detectors import OpenMax, build_detector, feature_magnitude, softmax_entropy
from agnostophobia.training.approaches import APPROACHES

FPR_TARGETS = PAPER_FPR_VALUES  # the columns of the paper's Table 2


def fpr_keys(targets: Sequence[float]) -> List[str]:
    """JSON keys of FPR targets: 1e-4 -> "1e-4"."""
    return [f"{t:.0e}".replace("e-0", "e-") for t in targets]


FPR_KEYS = tuple(fpr_keys(FPR_TARGETS))


def fit_openmax(fit_outputs: Optional[Dict[str, np.ndarray]], params: Optional[Dict] = None) -> OpenMax:
    """OpenMax fitted on the training knowns' logits (activation vectors)."""
    if fit_outputs is None:
        raise ValueError("the 'openmax' row needs the training outputs (fit_outputs.npz) of the softmax model")
    known = fit_outputs["labels"] >= 0
    return OpenMax(**(params or {})).fit(fit_outputs["logits"][known], None, fit_outputs["labels"][known])


def split_scores(score: str, split: Dict[str, np.ndarray], openmax: Optional[OpenMax] = None) -> np.ndarray:
    """(N, C) scores of one split; ``openmax`` is the fitted model for the 'openmax' score."""
    if score == "openmax":
        return openmax.scores(split["logits"])
    return build_detector(score).scores(split["logits"], split["features"])


def known_vs_unknown(outputs: Dict[str, Dict[str, np.ndarray]], unknown: str, score: str,
                     openmax: Optional[OpenMax] = None):
    """Scores (N, C) and labels (N,) of D_c followed by one unknown set."""
    known, other = outputs["known"], outputs[unknown]
    scores = np.concatenate([split_scores(score, known, openmax), split_scores(score, other, openmax)])
    labels = np.concatenate([known["labels"], np.full(len(other["labels"]), -1, dtype=np.int64)])
    return scores, labels


def evaluate_outputs(approach: str, outputs: Dict[str, Dict[str, np.ndarray]],
                     fpr_targets: Sequence[float] = FPR_TARGETS, fit_outputs=None,
                     openmax_params: Optional[Dict] = None, skipped: Optional[List[str]] = None) -> List[Dict]:
    """One result dict per (evaluation row of ``approach``, unknown set).

    The 'openmax' row is evaluated only when ``fit_outputs`` (the training knowns'
    outputs) are given; when OpenMax cannot be fitted (e.g. a class has fewer correctly
    classified training samples than the tail size) the row is left out and the reason
    appended to ``skipped``."""
    results = []
    unknown_sets = [name for name in outputs if name != "known"]
    for row, score in APPROACHES.get(approach).evaluations:
        openmax = None
        if score == "openmax":
            if fit_outputs is None:
                continue
            try:
                openmax = fit_openmax(fit_outputs, openmax_params)
            except ValueError as exc:
                if skipped is not None:
                    skipped.append(f"{row} ({approach} model): not evaluated, OpenMax could not be fitted: {exc}")
                continue
        for unknown in unknown_sets:
            scores, labels = known_vs_unknown(outputs, unknown, score, openmax)
            confidence = scores.max(axis=1)
            ccr = ccr_at_fpr(scores, labels, fpr_targets)
            known = labels >= 0
            results.append({
                "approach": row,
                "trained": approach,
                "score": score,
                "unknowns": unknown,
                "num_known": int(known.sum()),
                "num_unknown": int((~known).sum()),
                "ccr_at_fpr": {key: finite_or_none(v) for key, v in zip(fpr_keys(fpr_targets), ccr)},
                "closed_set_accuracy": float((scores[known].argmax(1) == labels[known]).mean()),
                "auroc": float(auroc(confidence, labels)),
                "fpr_at_95tpr": float(fpr_at_tpr(confidence, labels, 0.95)),
            })
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
    """Mean and std over seeds of results that share ``keys`` (e.g. approach, unknowns)."""
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


def finite_or_none(value) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _std(values):
    values = [v for v in values if v is not None]
    return float(np.std(values)) if values else None
