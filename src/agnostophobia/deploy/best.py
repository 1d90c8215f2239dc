"""``detector="best"``: the top of :mod:`~agnostophobia.deploy.compare`'s ranking, chosen on
validation data alone, for every command that deploys a detector.

A :class:`~agnostophobia.deploy.request.ModelRequest` with ``detector="best"`` is resolved here,
by the library functions themselves (:func:`~agnostophobia.deploy.calibration.calibrate_run`,
:func:`~agnostophobia.deploy.predict.predict_files`,
:func:`~agnostophobia.deploy.export.export_run`,
:meth:`OpenSetClassifier.from_run <agnostophobia.deploy.OpenSetClassifier.from_run>`), so a
script asks for the best detector as ``--detector best`` does on the command line::

    from agnostophobia.deploy import ModelRequest
    from agnostophobia.deploy.calibration import calibrate_run

    calibrate_run(ModelRequest("runs/own-images", fpr=0.2, detector="best"))

The rule is compare's: the highest validation CCR at the target FPR, mean over seeds; ties go to
the higher validation AUROC. The test sets are never read. Bisgin, Palechor, Suter & Günther
(2024) choose post-processors by CCR at an FPR on validation knowns and negatives.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from agnostophobia._log import log_info
from agnostophobia.errors import AgnostophobiaError
from agnostophobia.metrics.summary import fpr_keys
from agnostophobia.rundir import RunDir
from agnostophobia.training import records

from .compare import compare_models
from .request import ModelRequest

#: What ``detector`` (``--detector``) takes for the top of the ranking.
BEST = "best"


@dataclass
class Choice:
    """The top of the ranking at a target FPR: what ``detector="best"`` deploys, and why."""

    approach: str
    detector: str
    why: str


def best_choice(run_dir, fpr: float, approaches: Optional[Sequence[str]] = None,
                only: Optional[Callable[[str], bool]] = None, among: str = "") -> Choice:
    """The (approach, detector) of the highest validation CCR at ``fpr`` among the run's models.

    :func:`~agnostophobia.deploy.compare.compare_models` on validation data alone (test sets not
    read); refused (one line) where the validation negatives do not support ``fpr`` or no row has
    a CCR there.

    Args:
        run_dir: The run directory.
        fpr: The target false-positive rate on the validation negatives.
        approaches: Only these trained approaches (default: every one).
        only: Only the detectors it accepts (e.g. those export can write); default: every one.
        among: Words naming that restriction in the reason (``" that export can write"``).

    Returns:
        The :class:`Choice`, its ``why`` naming the CCR, the runner-up and the validation data.
    """
    comparison = compare_models(run_dir, fpr, approaches, with_tests=False)
    key = fpr_keys([fpr])[0]
    scored = [r for r in comparison.rows if r["val"]["ccr_at_fpr"].get(key) is not None
              and (only is None or only(r["detector"]))]
    if not scored:
        raise AgnostophobiaError(f"--detector best: no detector{among} of {run_dir} has a validation CCR at FPR "
                                 f"{fpr:g} (every mean over seeds is missing); choose a --detector by name")
    top = scored[0]
    seeds = top["val"]["seeds"]
    over = f"{seeds} seeds" if seeds != 1 else "1 seed"
    why = (f"the highest validation CCR at FPR {fpr:g}: {top['val']['ccr_at_fpr'][key]:.4f} "
           f"(AUROC {top['val']['auroc']:.4f}){_runner_up(scored, key)}; {top['val']['num_known']:,} validation "
           f"knowns and {top['val']['num_negative']:,} negatives, mean over {over}, among "
           f"{len(scored)} (approach, detector) pairs{among}"
           + (f" of {', '.join(approaches)}" if approaches else ""))
    return Choice(top["approach"], top["detector"], why)


def _runner_up(scored: List[dict], key: str) -> str:
    if len(scored) < 2:
        return ""
    top, second = scored[0], scored[1]
    tie = " (a tie on CCR: the higher validation AUROC ranks first)" \
        if second["val"]["ccr_at_fpr"][key] == top["val"]["ccr_at_fpr"][key] else ""
    return (f"; next: {second['approach']}/{second['detector']} {second['val']['ccr_at_fpr'][key]:.4f} "
            f"(AUROC {second['val']['auroc']:.4f}){tie}")


def best_detectors(request: ModelRequest, log: Callable[[str], None] = log_info) -> ModelRequest:
    """A request over several models (``calibrate``) with ``detector="best"`` resolved.

    Without ``approaches``: the top (approach, detector) of the run; with them, the top detector
    of each. Every choice is made, and said with why, before anything is calibrated.

    Args:
        request: A request with ``detector="best"`` and ``fpr`` (the FPR to rank at).
        log: Where each choice is said.

    Returns:
        ``request`` with ``detector_of`` (``{approach: detector}``) in place of ``detector``, and
        ``approaches`` left to ``detector_of``; a request without ``detector="best"`` unchanged.

    Raises:
        ~agnostophobia.errors.AgnostophobiaError: no ``fpr``, an FPR the validation negatives do
            not support, or no detector with a validation CCR there: one line, before anything
            is written.

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
        >>> from agnostophobia.deploy import ModelRequest, best_detectors
        >>> chosen = best_detectors(ModelRequest(folder / "run", fpr=0.5, detector="best"), log=lambda line: None)
        >>> list(chosen.detector_of), chosen.detector
        (['entropic'], None)
        >>> import shutil; shutil.rmtree(folder)  # the example leaves nothing behind
    """
    if request.detector != BEST:
        return request
    if request.fpr is None:
        raise AgnostophobiaError(f"{request.run}: detector {BEST!r} (the top of compare's ranking) needs fpr, the "
                                 f"false positive rate to rank at (--fpr T)")
    approaches = request.chosen_approaches()
    groups = [approaches] if not approaches else [[approach] for approach in dict.fromkeys(approaches)]
    choices = [best_choice(request.run, request.fpr, group) for group in groups]
    for choice in choices:
        log(f"--detector best: {choice.approach}/{choice.detector}: {choice.why}")
    return request.but(detector=None, approach=None, approaches=None,
                       detector_of={choice.approach: choice.detector for choice in choices})


def best_model(request: ModelRequest, log: Callable[[str], None] = log_info,
               exportable_only: bool = False) -> ModelRequest:
    """A request for one model (``predict``, ``export``, ``from_run``) with ``detector="best"``
    resolved to the top (approach, detector) at ``request.fpr``, said with why.

    Without ``fpr``: the target FPR of the calibration that ``calibrate --detector best`` stored,
    the one FPR at which the top's own threshold (seed ``request.seed``) is in
    ``calibration.json``; refused in one line where there is none, or several.

    Args:
        request: A request with ``detector="best"`` (and ``approach`` to choose within one approach).
        log: Where the choice is said.
        exportable_only: Choose among the detectors ``export`` can write.

    Returns:
        ``request`` with ``approach`` and ``detector`` filled in; a request without
        ``detector="best"`` unchanged.

    Raises:
        ~agnostophobia.errors.AgnostophobiaError: an FPR the validation negatives do not support,
            no detector with a validation CCR there, or (without ``fpr``) no stored threshold of the
            top detector, or thresholds at several FPRs: one line.

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
        >>> from agnostophobia.deploy import ModelRequest, best_model
        >>> chosen = best_model(ModelRequest(folder / "run", fpr=0.5, detector="best"), log=lambda line: None)
        >>> chosen.approach, chosen.detector != "best"
        ('entropic', True)
        >>> import shutil; shutil.rmtree(folder)  # the example leaves nothing behind
    """
    if request.detector != BEST:
        return request
    only, among = None, ""
    if exportable_only:
        from agnostophobia.detectors import DETECTORS

        only = lambda name: DETECTORS.get(name).why_not_exportable() is None  # noqa: E731
        among = " that export can write"
    choice, fpr = _at_target(request, only, among)
    log(f"--detector best at FPR {fpr:g}: {choice.approach}/{choice.detector}: {choice.why}")
    return request.but(approach=choice.approach, detector=choice.detector)


def _at_target(request: ModelRequest, only, among: str) -> Tuple[Choice, float]:
    """The top at ``request.fpr``, or at the one stored target FPR where the top's threshold is."""
    run_dir, approach, seed = request.run, request.approach, request.seed
    approaches = [approach] if approach else None
    if request.fpr is not None:
        return best_choice(run_dir, request.fpr, approaches, only, among), float(request.fpr)
    entries = [e for e in (records.read_calibration(run_dir) or {}).get("entries", [])
               if e["seed"] == seed and e.get("threshold") is not None and (not approach or e["approach"] == approach)]
    found = []
    for target in sorted({e["target_fpr"] for e in entries}):
        try:
            choice = best_choice(run_dir, target, approaches, only, among)
        except AgnostophobiaError:  # a target the negatives do not support: no ranking there
            continue
        if any((e["approach"], e["detector"], e["target_fpr"]) == (choice.approach, choice.detector, target)
               for e in entries):
            found.append((choice, target))
    if len(found) == 1:
        return found[0]
    where = f"{RunDir(run_dir).calibration} (seed {seed}{', ' + approach if approach else ''})"
    if not found:
        raise AgnostophobiaError(f"--detector best: {where} holds no threshold of the top detector{among} at its "
                                 f"target FPR; run `agnostophobia calibrate {run_dir} --fpr T --detector best` "
                                 f"first, or pass --fpr T")
    raise AgnostophobiaError(f"--detector best: {where} holds the top detector's threshold at several FPRs ("
                             f"{', '.join(f'{c.approach}/{c.detector} at {t:g}' for c, t in found)}); pass --fpr T")
