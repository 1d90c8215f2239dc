r"""``agnostophobia compare RUN [--fpr T]``: which (approach, detector) to deploy, answered from
validation data alone.

Every (trained approach, applicable detector) of a run is scored on each model's validation
split (``val_outputs.npz``, split ``val``: held-out knowns and the negatives held out of
training), each detector with the settings ``tune-detectors`` chose on that same split where it
chose any (else the config's; the paper's own rows keep the config's), fitted on the model's
training knowns. Per row, mean (and std) over the run's seeds:

* validation AUROC of known-vs-negative detection (:func:`~agnostophobia.metrics.auroc`, on the
  per-sample score a threshold acts on), validation CCR at every FPR the validation negatives
  support (:func:`~agnostophobia.metrics.reported_fprs`: FPR >= 10/#negatives) and validation
  closed-set accuracy;
* the same columns on every test set of the run (D_c with one unknown set, as Table 2 reads
  them; a CCR only where that set's unknowns support the FPR), beside them, never used to rank.

The rows are ranked by validation CCR at ``--fpr`` when given (it must be supported), else at
:func:`~agnostophobia.metrics.default_fpr` of the validation negatives (1 % where they support
it, else the smallest FPR they support; ``tune-detectors`` tunes at the same FPR), and by
validation AUROC only where they support no FPR (fewer than 20). Ties go to the higher validation
AUROC (the declared second key; the table marks each such rank with "="), then to the
registry's order of approaches and the detector's name. The
ranking, the numbers and how they were read are written to ``RUN/comparison.json`` and the table
to ``RUN/comparison.md`` (each atomically, under the run's lock; a refused comparison writes
nothing). The top of the same ranking at a target FPR is what ``detector="best"`` deploys
(:mod:`~agnostophobia.deploy.best`).

Bisgin, Palechor, Suter & Günther (2024) choose post-processors by CCR at an FPR on validation
knowns and negatives; Hendrycks & Gimpel (ICLR 2017) for AUROC. This module is the one code path
every ranking of a run's detectors takes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from agnostophobia._validation import check_fpr
from agnostophobia._log import log_info
from agnostophobia._runlock import run_lock
from agnostophobia.detectors import DETECTORS, build_detector
from agnostophobia.detectors.stored import KeptFits, ModelScores, model_scores, run_settings, score_outputs
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.metrics import (aupr_in, aupr_out, auroc, ccr_at_fpr, default_fpr, fpr_at_tpr, oscr, oscr_area,
                                   reported_fprs, smallest_supported_fpr, supports_fpr, tied_share, unsupported_fpr_message)
from agnostophobia.metrics.rows import row_label, row_sort_key
from agnostophobia.metrics.summary import fpr_keys
from agnostophobia.rundir import ModelDir, RunDir
from agnostophobia.training.outputs import load_fit_outputs, validation_with_negatives
from agnostophobia.training.records import check_run

from .request import ModelRequest

_FORMAT = 1
VALIDATION = "val"
RANK_RULE = ("ranked by the validation CCR at the target FPR (--fpr; without it the default: 1 % where the "
             "validation negatives support it, else the smallest FPR they support; the validation AUROC only where "
             "they support none), mean over seeds; ties: the higher validation AUROC, then the registry's order of "
             "approaches and the detector's name; test sets are shown, never ranked on; a CCR is read only at "
             "FPR >= 10/#negatives of its set")


@dataclass
class Comparison:
    """A run's (approach, detector) rows, ranked; see the module docstring."""

    rows: List[Dict]           # ranked, best first
    fprs: List[float]          # the CCR columns (supported by the validation negatives)
    rank_fpr: Optional[float]  # the FPR ranked by; None: ranked by validation AUROC (no FPR supported)
    val_negatives: int         # the fewest validation negatives of any model
    test_sets: Dict[str, int]  # unknown set -> its unknowns (the fewest of any model)
    notes: List[str]           # rows that could not be scored, and why
    rank_fpr_is_default: bool = False  # no --fpr given: ranked at default_fpr(val_negatives)
    #: (seed, approach, detector, unknown set) -> (CCR, FPR) of the test OSCR curve and the set's unknowns;
    #: kept only when asked (``compare_models(..., curves=True)``): figures drawn without scoring again
    curves: Dict[Tuple[int, str, str, str], Tuple[np.ndarray, np.ndarray, int]] = field(default_factory=dict,
                                                                                         repr=False)

    def as_json(self) -> Dict:
        return {"format": _FORMAT, "rule": RANK_RULE, "split": VALIDATION, "rank_fpr": self.rank_fpr,
                "rank_fpr_is_default": self.rank_fpr_is_default,
                "fprs": self.fprs, "val_negatives": self.val_negatives, "test_sets": self.test_sets,
                "rows": self.rows, "notes": self.notes}


# ------------------------------------------------------------------------ scoring one model
def _validation(model_dir: ModelDir, run_dir: Path) -> Dict[str, np.ndarray]:
    return validation_with_negatives(model_dir, f"run `agnostophobia calibrate {run_dir} --fpr T` once to store "
                                     f"them, then compare", "detectors cannot be compared on validation data")


#: The statistics of :func:`_numbers` a benchmark may rank by (its ranking candidates), each computed by
#: :func:`ranking_statistic`.
RANKING_STATISTICS = ("auroc", "oscr", "oscr_log", "ccr_at_lowest_fpr")


def ranking_statistic(name: str, scores: np.ndarray, labels: np.ndarray, lowest: float) -> Optional[float]:
    """One of :data:`RANKING_STATISTICS` of (N, C) ``scores`` and labels (N,) (< 0: negative), as every
    row's numbers read it and as the benchmark's bootstrap over the validation samples reads it again
    on each resample (one definition for both): the AUROC of the per-sample score (the maximum over
    classes), the OSCR area over a linear FPR axis, over a log one from ``lowest`` (the smallest FPR
    the negatives resolve, 10/#negatives) to 1, and the CCR at ``lowest``. None where the negatives
    do not define it (the log area with ``lowest`` at 1 or above, the CCR above 1 or not finite)."""
    if name == "auroc":
        return float(auroc(scores.max(axis=1), labels))
    if name == "oscr":
        return float(oscr_area(scores, labels))
    if name == "oscr_log":
        return float(oscr_area(scores, labels, log_fpr=True, min_fpr=lowest)) if lowest < 1 else None
    if name != "ccr_at_lowest_fpr":
        raise ValueError(f"ranking_statistic({name!r}): one of {', '.join(RANKING_STATISTICS)}")
    at_lowest = float(ccr_at_fpr(scores, labels, [lowest])[0]) if lowest <= 1 else None
    return at_lowest if at_lowest is not None and np.isfinite(at_lowest) else None


def _numbers(scores: np.ndarray, labels: np.ndarray, fprs: Sequence[float], num_negatives: int) -> Dict:
    """AUROC of the per-sample score, the area under the OSCR curve (linear FPR axis; ``oscr_log``:
    over a log FPR axis from the smallest FPR the negatives resolve, 10/#negatives, to 1, which
    weighs the low-FPR end the linear area hardly reads; None with fewer than 11), CCR at each
    of ``fprs`` (None where the negatives do not support it) and at that smallest FPR itself
    (``ccr_at_lowest_fpr``, None with fewer than 10), FPR at 95 % TPR, AUPR-In and AUPR-Out
    (:func:`~agnostophobia.metrics.fpr_at_tpr`, :func:`~agnostophobia.metrics.aupr_in`,
    :func:`~agnostophobia.metrics.aupr_out`), closed-set accuracy and the share of samples whose
    score ties with one of the other kind, of (N, C) ``scores`` and labels (N,) (< 0: negative)."""
    known = labels >= 0
    ccr = ccr_at_fpr(scores, labels, fprs) if len(fprs) else []
    top = scores.max(axis=1)
    lowest = smallest_supported_fpr(num_negatives)
    return {**{name: ranking_statistic(name, scores, labels, lowest) for name in RANKING_STATISTICS},
            "fpr_at_95tpr": float(fpr_at_tpr(top, labels, 0.95)), "aupr_in": float(aupr_in(top, labels)),
            "aupr_out": float(aupr_out(top, labels)),
            "tied_share": float(tied_share(top, labels)),
            "ccr_at_fpr": {key: (float(v) if supports_fpr(t, num_negatives) and np.isfinite(v) else None)
                           for key, t, v in zip(fpr_keys(fprs), fprs, ccr)},
            "closed_set_accuracy": float((scores[known].argmax(axis=1) == labels[known]).mean()),
            "num_known": int(known.sum()), "num_negative": num_negatives}


def _model_rows(model: Tuple[int, str, Path], settings: Dict, val: Dict[str, np.ndarray], fprs: Sequence[float],
                with_tests: bool, curves: Optional[Dict] = None) -> Tuple[Dict[str, Dict], Dict[str, str], ModelScores]:
    """{detector: {"val": numbers, "test": {set: numbers}}} of one ``model`` (``(seed, approach,
    model_dir)``, as the run's records list it), {detector: note} and the validation scores the
    numbers were read from (for :func:`compare_models`' ``val_scores``: scored once); each test OSCR
    curve into ``curves`` where given (see :attr:`Comparison.curves`)."""
    seed, approach, model_dir = model
    tests: Optional[ModelScores] = model_scores(model_dir, approach, settings) if with_tests else None
    fits = KeptFits(model_dir)  # the fits model_scores kept: restored, not fitted again
    held = score_outputs({VALIDATION: val}, load_fit_outputs(model_dir), approach, settings, kept=fits)
    labels = np.asarray(val["labels"], np.int64)
    negatives = int((labels < 0).sum())
    rows = {}
    for detector in held.detectors:
        row = {"val": _numbers(held.scores(detector, VALIDATION), labels, fprs, negatives), "test": {}}
        if tests is not None and detector in tests.top:
            for unknown in tests.unknown_sets:
                values, test_labels = tests.known_vs_unknown(detector, unknown)
                row["test"][unknown] = _numbers(values, test_labels, fprs, int((test_labels < 0).sum()))
                if curves is not None:
                    curves[seed, approach, detector, unknown] = (*oscr(values, test_labels)[:2],
                                                                 int((test_labels < 0).sum()))
        rows[detector] = row
    return rows, dict(held.notes), held


# ------------------------------------------------------------------------ the whole run
def _settings_shown(detector: str, values: Dict) -> str:
    shown = build_detector(detector, **values.get(detector, {})).settings()
    return ", ".join(f"{key}={value}" for key, value in shown.items())


def _source(detector: str, approach: str, tuned: Dict) -> str:
    if not DETECTORS.get(detector).SETTINGS:
        return "no settings"
    return "tune-detectors (validation)" if detector in tuned.get(approach, {}) else "config"


#: The per-model numbers of a row that are averaged over seeds (beside the CCR at each FPR).
SEED_STATISTICS = ("auroc", "oscr", "oscr_log", "ccr_at_lowest_fpr", "fpr_at_95tpr", "aupr_in", "aupr_out",
                   "closed_set_accuracy", "tied_share")
#: The validation statistics :func:`rank` can rank by (``by=``): each higher-is-better.
RANKABLE = ("auroc", "oscr", "oscr_log", "ccr_at_lowest_fpr", "aupr_in", "aupr_out", "closed_set_accuracy")


def _mean_std(values: List[Optional[float]]) -> Tuple[Optional[float], Optional[float]]:
    present = [v for v in values if v is not None]
    if not present or len(present) < len(values):  # a seed without the number: no mean over the others
        return None, None
    return float(np.mean(present)), float(np.std(present))


def _merge(per_seed: List[Dict]) -> Dict:
    """Mean and std over seeds of :func:`_numbers` dicts, and each seed's values (``per_seed``, in
    the run's seed order: what intervals and paired tests over seeds read)."""
    merged: Dict = {"seeds": len(per_seed)}
    for key in SEED_STATISTICS:
        merged[key], merged[key + "_std"] = _mean_std([n[key] for n in per_seed])
    merged["ccr_at_fpr"], merged["ccr_at_fpr_std"] = {}, {}
    for key in per_seed[0]["ccr_at_fpr"]:
        merged["ccr_at_fpr"][key], merged["ccr_at_fpr_std"][key] = _mean_std([n["ccr_at_fpr"][key] for n in per_seed])
    merged["per_seed"] = {**{key: [n[key] for n in per_seed] for key in SEED_STATISTICS},
                          "ccr_at_fpr": {key: [n["ccr_at_fpr"][key] for n in per_seed]
                                         for key in per_seed[0]["ccr_at_fpr"]}}
    merged["num_known"] = min(n["num_known"] for n in per_seed)
    merged["num_negative"] = min(n["num_negative"] for n in per_seed)
    return merged


def _check_fpr(fpr: Optional[float], negatives: int) -> None:
    if fpr is None:
        return
    check_fpr(fpr, error=AgnostophobiaError)
    if not supports_fpr(fpr, negatives):
        raise AgnostophobiaError(f"--fpr {fpr:g}: {unsupported_fpr_message(fpr, negatives)}; compare at a "
                                 f"supported --fpr, or without --fpr (ranked at the default FPR the negatives support)")


def _checked(run_dir: Path, fpr: Optional[float], approaches: Optional[Sequence[str]]):
    """The run's records, the models compared, their validation outputs and the fewest validation
    negatives; every refusal (a damaged record, an unknown approach, no validation negatives, an
    unsupported ``fpr``) raised here, before anything is scored or locked."""
    records = check_run(run_dir, "compare")
    trained = list(dict.fromkeys(a for _, a, _ in records.models))
    for approach in approaches or ():
        if approach not in trained:
            raise AgnostophobiaError(f"--approach {approach}: {run_dir} holds no {approach} model; "
                                     f"trained: {', '.join(trained)}")
    models = [m for m in records.models if not approaches or m[1] in approaches]
    validation = {model_dir: _validation(model_dir, run_dir) for _, _, model_dir in models}
    negatives = min(int((np.asarray(v["labels"]) < 0).sum()) for v in validation.values())
    _check_fpr(fpr, negatives)
    return records, models, validation, negatives


def validation_negatives(run_dir) -> int:
    """The fewest validation negatives of any model of the run (refused as :func:`compare_models` is)."""
    return _checked(Path(run_dir), None, None)[3]


def compare_models(run_dir, fpr: Optional[float] = None, approaches: Optional[Sequence[str]] = None,
                   with_tests: bool = True, curves: bool = False,
                   val_scores: Optional[Callable[[int, str, str, np.ndarray, np.ndarray], None]] = None) -> Comparison:
    """Score and rank every (approach, detector) of the run (or of ``approaches``); nothing is
    written but the detector caches. Refused (one line) before any scoring where the run has no
    validation negatives or ``fpr`` is not supported by them; without ``fpr``, ranked at
    :func:`~agnostophobia.metrics.default_fpr` of the validation negatives. ``curves``: keep every
    test OSCR curve in :attr:`Comparison.curves`. ``val_scores(seed, approach, detector, scores,
    labels)``: called with each model's validation (N, C) scores of each detector and their labels,
    the ones its validation numbers were read from, for a caller that reads them further without
    scoring them again (the benchmark's bootstrap over the validation samples)."""
    run_dir = Path(run_dir)
    records, models, validation, negatives = _checked(run_dir, fpr, approaches)
    trained = list(dict.fromkeys(a for _, a, _ in records.models))
    rank_fpr = float(fpr) if fpr is not None else default_fpr(negatives)
    fprs = sorted(set(reported_fprs(negatives)) | ({rank_fpr} if rank_fpr is not None else set()))
    scoring = run_settings(records)  # the config's settings, and tune-detectors' choices
    per_row: Dict[Tuple[str, str], List[Dict]] = {}
    notes: List[str] = []
    kept_curves: Optional[Dict] = {} if curves else None
    for model in models:
        seed, approach, model_dir = model
        settings = scoring.for_approach(approach)
        rows, why, held = _model_rows(model, settings, validation[model_dir], fprs, with_tests, kept_curves)
        for detector in held.detectors if val_scores is not None else ():
            val_scores(seed, approach, detector, held.scores(detector, VALIDATION), held.labels[VALIDATION])
        for detector, numbers in rows.items():
            per_row.setdefault((approach, detector), []).append({**numbers, "settings": settings, "seed": seed})
        notes += [f"{approach}/{detector} (seed {seed}): {note}" for detector, note in why.items()]
    seeds = {a: sum(1 for _, b, _ in models if b == a) for a in trained}
    rows = [_row(approach, detector, group, scoring.tuned) for (approach, detector), group in per_row.items()
            if len(group) == seeds[approach]]  # a detector not scored on every seed has no mean
    test_sets: Dict[str, int] = {}
    for row in rows:
        for unknown, numbers in row["test"].items():
            test_sets[unknown] = min(test_sets.get(unknown, numbers["num_negative"]), numbers["num_negative"])
    return Comparison(rank(rows, rank_fpr), fprs, rank_fpr, negatives, test_sets, notes,
                      rank_fpr_is_default=fpr is None and rank_fpr is not None, curves=kept_curves or {})


def _row(approach: str, detector: str, group: List[Dict], tuned: Dict) -> Dict:
    tests = [g["test"] for g in group]
    common = [u for u in tests[0] if all(u in t for t in tests)]
    return {"approach": approach, "detector": detector, "row": row_label(approach, detector),
            "title": DETECTORS.get(detector).title, "settings": _settings_shown(detector, group[0]["settings"]),
            "settings_from": _source(detector, approach, tuned), "seed_ids": [g["seed"] for g in group],
            "val": _merge([g["val"] for g in group]),
            "test": {u: _merge([t[u] for t in tests]) for u in common}}


def ranked_value(fpr: Optional[float], by: Optional[str] = None) -> Callable[[Dict], Optional[float]]:
    """The validation value :func:`rank` orders a row by, its first key: ``by`` where given, else
    the CCR at ``fpr``, else (``fpr`` None) the AUROC."""
    if by is not None:
        return lambda row: row["val"].get(by)
    if fpr is None:
        return lambda row: row["val"]["auroc"]
    key = fpr_keys([fpr])[0]
    return lambda row: row["val"]["ccr_at_fpr"].get(key)


#: Decimals a ranked statistic is compared at: a mean of the same numbers summed in another order
#: differs in its last bits (1e-16 seen between two detectors' identical validation areas), which
#: must tie, not decide a rank.
RANK_DECIMALS = 12


def settled(value):
    """``value`` (a number, or a tuple holding numbers) rounded to :data:`RANK_DECIMALS`, as ranks
    and ties compare it."""
    if isinstance(value, tuple):
        return tuple(settled(part) for part in value)
    return round(float(value), RANK_DECIMALS) if isinstance(value, (float, np.floating)) else value


def rank(rows: List[Dict], fpr: Optional[float], by: Optional[str] = None) -> List[Dict]:
    """``rows`` best first: by validation CCR at ``fpr`` (None ranks last), else by validation
    AUROC; ties to the higher AUROC, then to the registry's order of approaches and the
    detector's name. Each row gets its ``rank``.
    ``by``: rank by that validation statistic (mean over seeds, one of :data:`RANKABLE`, higher
    better) instead, with the same ties (``benchmark`` ranks by the metric its rule chose)."""
    if by is not None and by not in RANKABLE:
        raise ValueError(f"rank(by={by!r}): one of {', '.join(RANKABLE)}")
    primary_of = ranked_value(fpr, by)

    def order(row: Dict):
        val, primary = row["val"], primary_of(row)
        auroc_value = settled(val["auroc"]) if val["auroc"] is not None else -np.inf
        return (primary is None, -(settled(primary) if primary is not None else 0.0), -auroc_value,
                row_sort_key(row["approach"]), row["detector"])

    ranked = sorted(rows, key=order)
    return [{**row, "rank": i + 1} for i, row in enumerate(ranked)]


# ------------------------------------------------------------------------ the table and the files
def _cell(value: Optional[float], digits: int = 4) -> str:
    return "N/A" if value is None else f"{value:.{digits}f}"


#: After a rank: the same validation value as the row above, ordered by the second key (AUROC).
TIE_MARK = "="


def ties_with_row_above(keys: Sequence) -> List[bool]:
    """Per entry of ``keys`` (the ranked rows' first keys, in rank order; None for a row that ties
    with nothing): whether it equals the one above, so that a later key decided its rank."""
    keys = [settled(key) for key in keys]
    return [i > 0 and key is not None and key == keys[i - 1] for i, key in enumerate(keys)]


def tied_with_row_above(comparison: Comparison) -> List[bool]:
    """Per ranked row: whether its first key (:func:`ranked_value`) equals the row above's, so that
    the second key decided its rank."""
    primary = ranked_value(comparison.rank_fpr)
    return ties_with_row_above([primary(row) for row in comparison.rows])


def table_rows(comparison: Comparison) -> Tuple[List[str], List[List[str]]]:
    """Header and cells of the ranking: validation columns first, then each test set's."""
    keys = fpr_keys(comparison.fprs)
    header = ["rank", "approach/detector", "settings", "val AUROC", *(f"val CCR@{k}" for k in keys), "val acc"]
    for unknown in comparison.test_sets:
        header += [f"{unknown} AUROC", *(f"{unknown} CCR@{k}" for k in keys)]
    header += ["test acc"]
    cells = []
    for tied, row in zip(tied_with_row_above(comparison), comparison.rows):
        val = row["val"]
        line = [f"{row['rank']}{TIE_MARK if tied else ''}", f"{row['approach']}/{row['detector']}",
                row["settings"] or "—", _cell(val["auroc"]),
                *(_cell(val["ccr_at_fpr"].get(k)) for k in keys), _cell(val["closed_set_accuracy"])]
        for unknown in comparison.test_sets:
            test = row["test"].get(unknown)
            line += [_cell(test and test["auroc"]), *(_cell(test and test["ccr_at_fpr"].get(k)) for k in keys)]
        first = next(iter(row["test"].values()), None)
        line += [_cell(first and first["closed_set_accuracy"])]
        cells.append(line)
    return header, cells


def describe(comparison: Comparison, run_dir) -> List[str]:
    """What the table is, in a few lines (heads both the printed and the written table)."""
    if comparison.rank_fpr is None:
        by = "validation AUROC (the validation negatives support no FPR)"
    else:
        by = f"validation CCR at FPR {comparison.rank_fpr:g}"
        if comparison.rank_fpr_is_default:
            by += (" (the default without --fpr: 1 % where the validation negatives support it, else the smallest "
                   "FPR they support; tune-detectors tunes at the same)")
    ties = sum(tied_with_row_above(comparison))
    tie_line = (f" {ties} row(s) tie with the row above on that value ('{TIE_MARK}' after the rank): ordered by "
                f"the second key, the higher validation AUROC, then the registry's order." if ties else "")
    sets = ", ".join(f"{name} ({n:,} unknowns)" for name, n in comparison.test_sets.items())
    fprs = ", ".join(f"{t:g}" for t in comparison.fprs) or "none (fewer than 20 negatives)"
    return [f"Every (approach, detector) of {run_dir}, ranked by {by} (mean over seeds).{tie_line} Validation: "
            f"{comparison.val_negatives:,} negatives, so CCR at FPR {fprs} (a CCR is read only at FPR >= "
            f"10/#negatives). Test sets, beside, never ranked on: {sets or 'none'}. Settings: chosen by "
            f"tune-detectors on validation data where it chose them, else the config's; N/A: the set's negatives "
            f"do not support the FPR."]


def markdown(comparison: Comparison, run_dir) -> str:
    header, cells = table_rows(comparison)
    lines = ["# Comparison on validation data", "", *describe(comparison, run_dir), "",
             "| " + " | ".join(header) + " |", "|" + "---:|" * 1 + "---|---|" + "---:|" * (len(header) - 3)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in line) + " |" for line in cells]
    if comparison.notes:
        lines += ["", "Not compared:", ""] + [f"- {note}" for note in comparison.notes]
    return "\n".join(lines) + "\n"


def text_table(comparison: Comparison) -> str:
    """The ranking as aligned plain text, for the terminal."""
    header, cells = table_rows(comparison)
    widths = [max(len(row[i]) for row in [header, *cells]) for i in range(len(header))]
    fmt = lambda row: "  ".join(c.ljust(w) if i in (1, 2) else c.rjust(w)  # noqa: E731
                                for i, (c, w) in enumerate(zip(row, widths)))
    return "\n".join([fmt(header), *(fmt(row) for row in cells)])


def compare_run(request: ModelRequest, log: Callable[[str], None] = log_info) -> Comparison:
    """``agnostophobia compare``: rank (:func:`compare_models`), then write ``comparison.json``
    and ``comparison.md`` into the run, each atomically, under the run's lock.

    Args:
        request: The run, and what to rank: ``approaches`` (default: every trained one) and
            ``fpr`` (the FPR to rank at; default: 1 % where the validation negatives support it,
            else the smallest FPR they support). A field compare does not read (``detector``, ``seed``,
            ...) is refused; ``data_dir`` is said to have no effect (compare reads no data).
        log: Where the table and the notes are said.

    Returns:
        The :class:`Comparison` written.

    Examples:
        >>> import contextlib, io, tempfile
        >>> from pathlib import Path
        >>> import yaml
        >>> from agnostophobia.cli import run_command
        >>> from agnostophobia.data import make_glyph_folders
        >>> folder = Path(tempfile.mkdtemp())  # a run of a small network on glyph folders, 20 negatives to validate on
        >>> layout = make_glyph_folders(folder / "glyphs", per_split={"train": 6, "val": 20, "test": 4})
        >>> config = {"name": "glyphs", "protocol": layout, "model": "mlp", "model_kwargs": {"hidden": [16]},
        ...           "approaches": ["entropic"], "epochs": 1, "batch_size": 8, "tensorboard": False}
        >>> _ = (folder / "glyphs.yaml").write_text(yaml.safe_dump(config))
        >>> with contextlib.redirect_stdout(io.StringIO()):  # the training's lines
        ...     run_command("train", folder / "glyphs.yaml", "--out", folder / "run", "--no-progress")
        >>> from agnostophobia.deploy import ModelRequest, compare_run
        >>> comparison = compare_run(ModelRequest(folder / "run"), log=lambda line: None)
        >>> comparison.rank_fpr, comparison.rows[0]["approach"]  # 20 negatives support an FPR of 0.5 at the least
        (0.5, 'entropic')
        >>> import shutil; shutil.rmtree(folder)  # the example leaves nothing behind
    """
    request.check_reads("compare_run", "approach", "approaches", "fpr", "data_dir")
    request.warn_unused("compare ranks the run's stored validation outputs: it reads no data", "data_dir",
                        stacklevel=2)
    run_dir, fpr, approaches = Path(request.run), request.fpr, request.chosen_approaches()
    _checked(run_dir, fpr, approaches)  # a refusal leaves the run as it was, its lock file included
    with run_lock(run_dir, create=False):
        comparison = compare_models(run_dir, fpr, approaches)
        run = RunDir(run_dir)
        data = json.dumps(comparison.as_json(), indent=1)
        table = markdown(comparison, run_dir.name)
        run.write(run.comparison, lambda tmp: Path(tmp).write_text(data))
        run.write(run.comparison_table, lambda tmp: Path(tmp).write_text(table))
    for line in describe(comparison, run_dir):
        log(line)
    log(text_table(comparison))
    for note in comparison.notes:
        log(f"not compared: {note}")
    log(f"written: {run.comparison_table} and {run.comparison}")
    return comparison
