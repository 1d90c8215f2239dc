"""All figures of a run, drawn from its stored per-sample outputs (no retraining).

``plot_run(RUN)`` writes into ``RUN/figures/``, for every unknown set of the run
(Devanagari first, as in the paper, then the EMNIST letters D_b, then the other D_a sets):

=====================================  =================================================
``features_<set>.<fmt>``               deep features, one panel per approach (Fig. 1 top);
                                       2-D feature models only, first seed
``softmax_hist_<set>.<fmt>``           softmax-score histograms, log counts (Fig. 1 bottom)
``magnitude_hist_<set>.<fmt>``         normalised ‖F‖ histograms (Fig. 2)
``oscr_<set>.<fmt>``                   OSCR curves of the paper's rows, log FPR (Fig. 1d)
``oscr_counts_<set>.<fmt>``            the same against the number of false positives
=====================================  =================================================

``<set>`` is the set's name made safe for a file name, numbered where two names would give the
same one (``oscr_a_b.png``, ``oscr_a_b-2.png``: :func:`set_file_stems`).

With several seeds the OSCR curves are the seeds' mean with a ± std band; the other
figures show the first seed. The OSCR curves are drawn from the same stored detector
scores as the run's metrics (``detectors.stored.model_scores``: OpenMax is fitted once
per model, with the settings of the run's ``config.yaml``).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import re
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from matplotlib.figure import Figure

from agnostophobia.detectors import build_detector, feature_magnitude
from agnostophobia.losses import LOSSES, known_columns
from agnostophobia.detectors.stored import (ModelScores, RunSettings, detector_inputs, model_scores, read_run_settings,
                                            run_settings)
from agnostophobia.data.protocols import unknown_set
from agnostophobia.metrics import oscr
from agnostophobia.metrics.rows import own_detector, paper_rows, row_sort_key
from agnostophobia.plotting import style
from agnostophobia.plotting.request import PlotRequest
from agnostophobia.plotting.curves import oscr_series, plot_oscr
from agnostophobia.plotting.features import (DEFAULT_MAX_POINTS, DeepFeatures, Subsample, logit_weights,
                                             plot_features)
from agnostophobia.plotting.histograms import (MAGNITUDE_LABELS, SOFTMAX_LABELS, plot_magnitude_histogram,
                                               plot_softmax_histogram, softmax_histogram_values)
from agnostophobia.plotting.panels import new_figure, save_figure, supported_formats
from agnostophobia.training.outputs import load_outputs, run_config
from agnostophobia.rundir import RunDir
from agnostophobia._atomic import atomic_write
from agnostophobia.training.concurrent import available_cores, die_with_parent
from agnostophobia.training.records import check_run
from agnostophobia._log import log_info

#: Formats the report can embed, in order of preference (the path returned per figure).
EMBEDDABLE = ("png", "svg")
#: Above this relative residual the logits are not ``W F`` (bias, non-linear head): no borders.
MAX_BORDER_RESIDUAL = 1e-3

Outputs = Dict[str, Dict[str, np.ndarray]]


def check_formats(formats: Sequence[str]) -> List[str]:
    """Lower-cased, de-duplicated formats that matplotlib can write.

    Args:
        formats: file formats (``png``, ``pdf``, ``svg``, ...), or one as a string.

    Returns:
        The formats, lower-cased, in their first order.

    Raises:
        ValueError: a format matplotlib cannot write.

    Examples:
        >>> from agnostophobia.plotting import check_formats
        >>> check_formats(["PNG", "pdf", "png"])
        ['png', 'pdf']
    """
    if isinstance(formats, str):
        formats = [formats]
    wanted = list(dict.fromkeys(f.lower().lstrip(".") for f in formats))
    if not wanted:
        raise ValueError("no figure format given (choose from png, pdf, svg)")
    known = supported_formats()
    bad = [f for f in wanted if f not in known]
    if bad:
        raise ValueError(f"unknown figure format(s) {', '.join(bad)}; matplotlib writes {', '.join(known)}")
    return wanted


def _unknown_key(split: str, order: List[str]):
    rank = {"devanagari": 0, "letters": 1}.get(split, 2)
    return rank, order.index(split)


def _probabilities(approach: str, data: Dict[str, np.ndarray]) -> np.ndarray:
    """Known-class probabilities the paper thresholds the approach with (its own detector:
    the softmax, or the C+1 softmax of the background network)."""
    detector = build_detector(own_detector(approach) or "softmax")
    num_classes = known_columns(approach, data["logits"].shape[1])
    return detector.probabilities(detector_inputs(detector, data["logits"], num_classes))  # not the log-odds scores


class RunFigure(NamedTuple):
    """One figure of a run: its report section, file stem (no extension) and the Figure.

    Examples:
        >>> from agnostophobia.plotting import RunFigure, new_figure
        >>> figure, axes = new_figure()
        >>> shown = RunFigure(section="letters", stem="oscr_letters", figure=figure)
        >>> shown.stem, axes.shape
        ('oscr_letters', (1, 1))
    """

    section: str  # the report section it belongs to (one per unknown set)
    stem: str  # its file name without the extension
    figure: Figure  # the matplotlib Figure


def set_file_stems(names: Sequence[str]) -> Dict[str, str]:
    """Each set name's part of a file name, one to one: the name made safe for a file name
    (names may come from user-given paths), and, where two names would give the same part
    ("a b" and "a_b"; "A" and "a" on a case-insensitive file system), the later one numbered
    (``a_b-2``), so that no set's figures overwrite another's. Give the names in the order
    the sets were added to the run: a set added later never renames an earlier one's files."""
    stems: Dict[str, str] = {}
    taken: set = set()
    for name in names:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "unknowns"
        stem, number = base, 1
        while stem.casefold() in taken:
            number += 1
            stem = f"{base}-{number}"
        stems[name] = stem
        taken.add(stem.casefold())
    return stems


def plot_run(run_dir, formats: Sequence[str] = ("png",), out_dir=None, *,
             max_points: Optional[int] = DEFAULT_MAX_POINTS,
             log: Callable[[str], None] = log_info) -> Dict[str, List[str]]:
    """Draw every figure of a run into ``out_dir`` (default ``RUN/figures``).

    Args:
        run_dir: a run directory with ``seed<k>/<approach>/outputs.npz`` files.
        formats: any of ``png`` (default), ``pdf``, ``svg`` (anything matplotlib writes).
        max_points: deep-feature plots show at most this many knowns and unknowns (seeded
            subsample, noted on the plot); None shows all.
        log: receives one line per figure or panel that is skipped, and why.
        out_dir: where the figures go; default ``RUN/figures``.

    Returns:
        ``{section title: [figure paths relative to run_dir]}``, one section per unknown set,
        one path per figure in the first embeddable format requested (png, else svg, else
        the first format); every requested format is written.

    Raises:
        FileNotFoundError: ``run_dir`` does not exist.
        ValueError: no outputs to plot, or a format matplotlib cannot write.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import numpy as np
        >>> from agnostophobia.training.outputs import save_outputs
        >>> run = Path(tempfile.mkdtemp())  # a run's stored outputs, written here by hand
        >>> rng = np.random.default_rng(0)
        >>> def split(n, known):  # 2-D features of three known classes, or of unknowns (label -1)
        ...     labels = rng.integers(0, 3, n) if known else np.full(n, -1)
        ...     features = rng.normal(size=(n, 2)) + (3 * np.eye(3, 2)[labels] if known else 0)
        ...     logits = features @ np.array([[2.0, 0.0, -2.0], [0.0, 2.0, -2.0]])
        ...     return {"logits": logits.astype(np.float32), "features": features.astype(np.float32),
        ...             "labels": labels}
        >>> save_outputs(run / "seed0" / "softmax" / "outputs.npz", {"known": split(60, True),
        ...                                                          "devanagari": split(30, False)})
        >>> from agnostophobia.plotting import plot_run
        >>> plot_run(run, log=lambda line: None)  # log: why a panel is left out (no OpenMax here)
        {'Unknown unknowns: Devanagari (D_a), Figs. 1 and 2': ['figures/features_devanagari.png', ...]}
        >>> import shutil; shutil.rmtree(run)  # the example leaves nothing behind
    """
    return draw_run(PlotRequest(run_dir, formats, out_dir, max_points), log)[0]


def draw_run(request: PlotRequest, log: Callable[[str], None] = log_info) -> Tuple[Dict[str, List[str]], List[Path]]:
    """:func:`plot_run` for a whole :class:`~agnostophobia.plotting.request.PlotRequest`, also
    returning every file written (all formats).

    ``request.splits``: draw only the figures of these unknown sets, and any other whose files
    are missing; the sections list every figure all the same. ``request.workers``: processes
    drawing at once (on this project's idle 2-core machine two processes drew the `cpu` LeNet++
    run's 20 figures in 4.4–4.6 s against 8.6–8.8 s in one). Each drawing process dies with the
    command that started it (``training.concurrent.die_with_parent``).

    Args:
        request: the run, the formats, where the figures go, and which are drawn again.
        log: receives one line per figure or panel that is skipped, and why.

    Returns:
        ``(sections, files)``, what :func:`plot_run` returns and every file written.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import numpy as np
        >>> from agnostophobia.training.outputs import save_outputs
        >>> run = Path(tempfile.mkdtemp())  # a run's stored outputs, written here by hand
        >>> rng = np.random.default_rng(0)
        >>> def split(n, known):  # 2-D features of three known classes, or of unknowns (label -1)
        ...     labels = rng.integers(0, 3, n) if known else np.full(n, -1)
        ...     features = rng.normal(size=(n, 2)) + (3 * np.eye(3, 2)[labels] if known else 0)
        ...     logits = features @ np.array([[2.0, 0.0, -2.0], [0.0, 2.0, -2.0]])
        ...     return {"logits": logits.astype(np.float32), "features": features.astype(np.float32),
        ...             "labels": labels}
        >>> save_outputs(run / "seed0" / "softmax" / "outputs.npz", {"known": split(60, True),
        ...                                                          "devanagari": split(30, False)})
        >>> from agnostophobia.plotting import PlotRequest, draw_run
        >>> sections, files = draw_run(PlotRequest(run, formats=("svg",)), log=lambda line: None)
        >>> sorted(path.name for path in files)
        ['features_devanagari.svg', 'magnitude_hist_devanagari.svg', 'oscr_counts_devanagari.svg',
         'oscr_devanagari.svg', 'softmax_hist_devanagari.svg']
        >>> import shutil; shutil.rmtree(run)  # the example leaves nothing behind
    """
    run_dir, splits, max_points = request.run, request.splits, request.max_points
    formats = check_formats(request.formats)
    out_dir = request.out_dir
    write = figure_writer(run_dir, out_dir)
    preferred = next((f for f in EMBEDDABLE if f in formats), formats[0])
    sections: Dict[str, List[str]] = {}
    wanted: List[_PlannedFigure] = []
    for item in _plan_run_figures(run_dir, max_points=max_points, log=log):
        sections.setdefault(item.section, []).append(
            Path(os.path.relpath(out_dir / f"{item.stem}.{preferred}", run_dir)).as_posix())
        if splits is None or item.split in splits or \
                not all((out_dir / f"{item.stem}.{fmt}").exists() for fmt in formats):
            wanted.append(item)
    if write is not atomic_write:  # every figure file of the run checked before the first is drawn
        RunDir(run_dir).check_writable_all([out_dir / f"{item.stem}.{fmt}" for item in wanted for fmt in formats])
    return sections, _draw_all(wanted, out_dir, formats, request.workers, write)


def figure_writer(run_dir: Path, out_dir: Path) -> Callable:
    """How figures in ``out_dir`` are written: into the run (its ``figures/``) by the run's one
    writer, which refuses a folder or file linked out of the run (checked here, before any figure
    is drawn); anywhere else atomically."""
    run = RunDir(run_dir)
    if os.path.commonpath([os.path.abspath(run_dir), os.path.abspath(out_dir)]) != os.path.abspath(run_dir):
        return atomic_write
    run.check_writable(out_dir / "figure.png")
    return run.write


#: At most this many processes draw figures at once.
MAX_WORKERS = 8
_PENDING: List["_PlannedFigure"] = []  # what forked drawing processes inherit; set only while they run


def _draw_one(index: int, out_dir: Path, formats: Sequence[str], write: Callable) -> List[Path]:
    figure = _PENDING[index].make()
    try:
        return save_figure(figure, out_dir / _PENDING[index].stem, formats, write)
    finally:
        figure.clear()


def _draw_all(items: List["_PlannedFigure"], out_dir: Path, formats: Sequence[str],
              workers: Optional[int], write: Callable) -> List[Path]:
    """Draw and save ``items``: in forked processes (each figure is drawn and rendered in its
    own, from the run data read once here), or here one by one with one CPU or one figure.
    Processes, not threads: rendering holds the GIL (measured: threads were no faster)."""
    global _PENDING
    workers = min(available_cores() if workers is None else workers, MAX_WORKERS, len(items))
    _PENDING = items
    try:
        if workers <= 1 or "fork" not in mp.get_all_start_methods():
            return [path for i in range(len(items)) for path in _draw_one(i, out_dir, formats, write)]
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork"), initializer=die_with_parent,
                                 initargs=(os.getpid(),)) as pool:
            done = pool.map(_draw_one, range(len(items)), [out_dir] * len(items), [formats] * len(items),
                            [write] * len(items))
            return [path for paths in done for path in paths]
    finally:
        _PENDING = []


def check_run_records(run_dir) -> None:
    """Every record the figures read, checked and in agreement (``training.records.check_run``),
    and the run's detector settings able to score; raises one line otherwise."""
    run_settings(check_run(run_dir, "plot"))


def _load_run(run_dir: Path, log) -> Dict[str, Dict[int, Outputs]]:
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    runs: Dict[str, Dict[int, Outputs]] = {}
    for seed, approach, model_dir in RunDir(run_dir).models():
        outputs = load_outputs(model_dir.outputs)
        if approach not in LOSSES:
            log(f"plot: {approach} (seed {seed}) is not a registered approach; skipped")
        elif "known" not in outputs:
            log(f"plot: {approach} (seed {seed}) has no 'known' split; skipped")
        else:
            runs.setdefault(approach, {})[seed] = outputs
    if not runs:
        raise ValueError(f"run directory {run_dir} holds no seed*/<approach>/outputs.npz of a registered "
                         "approach; nothing to plot")
    return runs


def iter_run_figures(run_dir, *, max_points: Optional[int] = DEFAULT_MAX_POINTS,
                     log: Callable[[str], None] = log_info) -> Iterator[RunFigure]:
    """Build the figures of :func:`plot_run` one at a time, without saving them.

    One :class:`RunFigure` at a time, in report order: per unknown set, ``features_<set>``
    (2-D feature models only), ``softmax_hist_<set>``, ``magnitude_hist_<set>``,
    ``oscr_<set>`` and ``oscr_counts_<set>``. The run is read before the first figure, so
    errors about it are raised by the first ``next()``.

    Args:
        run_dir, max_points, log: as for :func:`plot_run`.

    Yields:
        :class:`RunFigure`: one figure and the name it is saved under.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> import numpy as np
        >>> from agnostophobia.training.outputs import save_outputs
        >>> run = Path(tempfile.mkdtemp())  # a run's stored outputs, written here by hand
        >>> rng = np.random.default_rng(0)
        >>> def split(n, known):  # 2-D features of three known classes, or of unknowns (label -1)
        ...     labels = rng.integers(0, 3, n) if known else np.full(n, -1)
        ...     features = rng.normal(size=(n, 2)) + (3 * np.eye(3, 2)[labels] if known else 0)
        ...     logits = features @ np.array([[2.0, 0.0, -2.0], [0.0, 2.0, -2.0]])
        ...     return {"logits": logits.astype(np.float32), "features": features.astype(np.float32),
        ...             "labels": labels}
        >>> save_outputs(run / "seed0" / "softmax" / "outputs.npz", {"known": split(60, True),
        ...                                                          "devanagari": split(30, False)})
        >>> import matplotlib.pyplot as plt
        >>> from agnostophobia.plotting import iter_run_figures
        >>> for item in iter_run_figures(run, log=lambda line: None):  # nothing is saved
        ...     print(item.stem)
        ...     plt.close(item.figure)
        features_devanagari
        softmax_hist_devanagari
        magnitude_hist_devanagari
        oscr_devanagari
        oscr_counts_devanagari
        >>> import shutil; shutil.rmtree(run)  # the example leaves nothing behind
    """
    for item in _plan_run_figures(run_dir, max_points=max_points, log=log):
        yield RunFigure(item.section, item.stem, item.make())


class _PlannedFigure(NamedTuple):
    """A figure of a run before it is drawn: ``make()`` draws it."""

    section: str
    stem: str
    split: str
    make: Callable[[], Figure]


def _plan_run_figures(run_dir, *, max_points: Optional[int], log: Callable[[str], None]) -> Iterator[_PlannedFigure]:
    """The figures of :func:`iter_run_figures`, each with the function that draws it. The run
    and its stored detector scores are read before the first is yielded."""
    run = _LoadedRun(Path(run_dir), Subsample(max_points), log)
    stems = set_file_stems(run.split_order)
    for split in run.unknown_sets:
        have = [a for a in run.approaches if split in run.first[a] and len(run.first[a][split]["labels"])]
        if not have:
            continue
        run.scores.prefetch(run.runs, have, split)  # read here, once: drawing processes only draw
        section = unknown_set(split).heading
        with_features = [a for a in have if a in run.weights]
        if with_features:
            yield _PlannedFigure(section, f"features_{stems[split]}", split,
                                 partial(run.features_figure, with_features, split))
        yield _PlannedFigure(section, f"softmax_hist_{stems[split]}", split, partial(run.softmax_figure, have, split))
        yield _PlannedFigure(section, f"magnitude_hist_{stems[split]}", split,
                             partial(run.magnitude_figure, have, split))
        for counts, stem in ((False, f"oscr_{stems[split]}"), (True, f"oscr_counts_{stems[split]}")):
            yield _PlannedFigure(section, stem, split, partial(run.oscr_figure, have, split, counts))


def _split_order(runs: Dict[str, Dict[int, Outputs]], approaches: List[str]) -> List[str]:
    """The unknown sets of the run, in the order they were added (first seen)."""
    order: List[str] = []
    for a in approaches:
        for outputs in runs[a].values():
            order += [s for s in outputs if s != "known" and s not in order]
    return order


def _border_weights(first: Dict[str, Outputs], approaches: List[str], log) -> Dict[str, Optional[np.ndarray]]:
    """The logit weights of each approach with 2-D features (None where its logits are not ``W F``).

    Deep-feature plots need 2-D features; the logit weights are fitted once per approach, on the
    known test set: the borders of one set's figure do not change when another set is added."""
    weights: Dict[str, Optional[np.ndarray]] = {}
    for a in approaches:
        dim = first[a]["known"]["features"].shape[1]
        if dim != 2:
            log(f"plot: no deep-feature plot for {a}: its features are {dim}-D (needs 2-D)")
            continue
        w, residual = logit_weights(first[a]["known"]["features"], first[a]["known"]["logits"])
        if residual > MAX_BORDER_RESIDUAL:
            log(f"plot: class borders of {a} omitted: its logits are not linear in F "
                f"(relative residual {residual:.2g}; a logit layer with bias?)")
            w = None
        weights[a] = w
    return weights


class _LoadedRun:
    """A run read for its figures: each approach's outputs per seed (``runs``) and of its first seed
    (``first``), its unknown sets, the logit weights of its 2-D feature models, its stored detector
    scores and what every figure's title says of the run. Each ``*_figure`` method draws one figure
    of one unknown set for the approaches given."""

    def __init__(self, run_dir: Path, shown: Subsample, log: Callable[[str], None]):
        self.runs = _load_run(run_dir, log)
        self.approaches = sorted(self.runs, key=row_sort_key)
        self.first = {a: self.runs[a][min(self.runs[a])] for a in self.approaches}
        self.split_order = _split_order(self.runs, self.approaches)
        self.unknown_sets = sorted(self.split_order, key=lambda s: _unknown_key(s, self.split_order))
        if not self.unknown_sets:
            log(f"plot: {run_dir} has no unknown test set (only 'known'); no figures to draw")
        config = run_config(run_dir)
        self.model_title = style.model_name(config["model"]) if config.get("model") else None
        self.caveat = " (smoke budget: not a result)" if config.get("budget") == "smoke" else ""
        self.scores = _StoredScores(run_dir, read_run_settings(run_dir), log)
        self.weights = _border_weights(self.first, self.approaches, log)
        self.shown = shown

    def _suptitle(self, fig: Figure, kind: str, split: str, detail: str) -> None:
        fig.suptitle(style.title(self.model_title, kind, unknown_set(split).label, detail) + self.caveat, fontsize=11)

    def _seed_note(self, approach: str) -> str:
        return f"seed {min(self.runs[approach])}"

    def features_figure(self, approaches: List[str], split: str) -> Figure:
        fig, axes = new_figure(len(approaches), panel_size=(3.6, 3.7))
        for ax, a in zip(axes[0], approaches):
            known, unknown = self.first[a]["known"], self.first[a][split]
            features = DeepFeatures(known["features"], known["labels"], unknown["features"], weights=self.weights[a],
                                    num_classes=_probabilities(a, known).shape[1],
                                    unknown_label=unknown_set(split).label)
            plot_features(features, ax=ax, shown=self.shown, title=style.approach_name(a), legend=False)
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right center", fontsize=8, markerscale=5,
                   frameon=False, handletextpad=0.2, title="class", title_fontsize=8)
        self._suptitle(fig, "deep features", split, self._seed_note(approaches[0]))
        return fig

    def softmax_figure(self, approaches: List[str], split: str) -> Figure:
        fig, axes = new_figure(len(approaches), panel_size=(3.6, 3.0))
        labels = (SOFTMAX_LABELS[0], f"{unknown_set(split).label}: max known class")
        for ax, a in zip(axes[0], approaches):
            known, unknown = self.first[a]["known"], self.first[a][split]
            values = softmax_histogram_values(_probabilities(a, known), known["labels"], _probabilities(a, unknown))
            plot_softmax_histogram(values, ax=ax, title=style.approach_name(a), legend=False, labels=labels)
        _shared_legend(fig, axes[0, 0])
        self._suptitle(fig, "softmax scores", split, self._seed_note(approaches[0]))
        return fig

    def magnitude_figure(self, approaches: List[str], split: str) -> Figure:
        fig, axes = new_figure(len(approaches), panel_size=(3.6, 3.0))
        labels = (MAGNITUDE_LABELS[0], unknown_set(split).label)
        for ax, a in zip(axes[0], approaches):
            known, unknown = self.first[a]["known"], self.first[a][split]
            plot_magnitude_histogram((feature_magnitude(known["features"]), feature_magnitude(unknown["features"])),
                                     ax=ax, title=style.approach_name(a), legend=False, labels=labels)
        _shared_legend(fig, axes[0, 0])
        self._suptitle(fig, "deep-feature magnitudes", split, self._seed_note(approaches[0]))
        return fig

    def oscr_figure(self, approaches: List[str], split: str, counts: bool) -> Figure:
        series, n_seeds = self._oscr_series(approaches, split, counts)
        fig, axes = new_figure(panel_size=(7.6, 4.4))
        plot_oscr(series, ax=axes[0, 0], counts=counts)
        self._suptitle(fig, "OSCR", split,
                       f"mean ± std over {n_seeds} seeds" if n_seeds > 1 else self._seed_note(approaches[0]))
        return fig

    def _oscr_series(self, approaches: List[str], split: str, counts: bool):
        """One series per paper row of each approach, averaged over the seeds that have ``split``.

        The scores are the run's stored detector scores, so the curves are those behind the
        report's numbers; a row whose detector could not be evaluated for a seed (e.g. no
        training outputs to fit OpenMax on) is left out for that seed.
        """
        series, n_seeds = [], 1
        for a in approaches:
            seeds = [s for s in sorted(self.runs[a]) if split in self.runs[a][s]]
            n_seeds = max(n_seeds, len(seeds))
            for detector, row in paper_rows(a):
                curves, n_unknown = [], 1
                for s in seeds:
                    model = self.scores.get(a, s, detector)
                    if model is None:
                        continue
                    values, labels = model.known_vs_unknown(detector, split)
                    fpr, ccr, _ = oscr(values, labels, counts=counts)
                    curves.append((fpr, ccr))
                    n_unknown = max(n_unknown, int((labels < 0).sum()))
                if curves:
                    series.append(oscr_series(row, curves, n_unknown, counts=counts))
        return series, n_seeds


def _shared_legend(fig: Figure, ax) -> None:
    """One legend below a row of histogram panels (the sample sizes differ per panel: dropped)."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, [lab.split(" (n=")[0] for lab in labels], loc="outside lower center", ncols=2,
               fontsize=8, frameon=False)


class _StoredScores:
    """The stored detector scores of each (approach, seed), read once; says once per model
    and detector why a curve is missing."""

    def __init__(self, run_dir: Path, settings: RunSettings, log):
        # the metrics' settings (tune-detectors' choices where made): the figures show the same detectors
        self.run_dir, self.settings, self.log = run_dir, settings, log
        self._models: Dict[Tuple[str, int], ModelScores] = {}
        self._said: set = set()

    def prefetch(self, runs: Dict[str, Dict[int, Outputs]], approaches: List[str], split: str) -> None:
        """Read (or compute) the scores every OSCR curve of ``split`` needs, and say here, once,
        which curves are missing."""
        for a in approaches:
            for seed in (s for s in sorted(runs[a]) if split in runs[a][s]):
                for detector, _ in paper_rows(a):
                    self.get(a, seed, detector)

    def get(self, approach: str, seed: int, detector: str) -> Optional[ModelScores]:
        key = (approach, seed)
        if key not in self._models:
            self._models[key] = model_scores(RunDir(self.run_dir).model_dir(seed, approach), approach,
                                             self.settings.for_approach(approach))
        model = self._models[key]
        if detector in model.detectors:
            return model
        if (approach, seed, detector) not in self._said:
            self._said.add((approach, seed, detector))
            reason = model.notes.get(detector, "it does not apply to this model")
            self.log(f"plot: no {detector} curve for {approach} seed {seed}: {reason}")
        return None
