"""Tests of agnostophobia.plotting on synthetic run directories (no training, seconds)."""
from __future__ import annotations

import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_hex
from PIL import Image

from agnostophobia.cli import main
from agnostophobia.training.outputs import save_outputs
from agnostophobia.plotting import (APPROACH_COLORS, CurveSeries, DeepFeatures, PlotRequest, Subsample, class_borders,
                                    draw_run, iter_run_figures, logit_weights, oscr_on_grid, oscr_series,
                                    plot_confidence_curves, plot_features, plot_magnitude_histogram, plot_oscr,
                                    plot_run, plot_softmax_histogram, softmax_histogram_values, subsample_note)
from agnostophobia.plotting import style
from agnostophobia.plotting.features import BORDER_GID, ORIGIN_AXIS_GID, SUBSAMPLE_NOTE_GID
from agnostophobia.detectors import background_scores, softmax_scores
from agnostophobia.metrics.rows import ROW_ORDER


def unit(degrees) -> np.ndarray:
    rad = np.deg2rad(np.asarray(degrees, dtype=float))
    return np.stack([np.cos(rad), np.sin(rad)], axis=1)


# Four classes on the axes: borders at 45, 135, 225, 315 degrees.
W4 = unit([0, 90, 180, 270])
W4_BORDERS = [45, 135, 225, 315]
# Background network: 4 known classes at 0..180 degrees, the background class at 270.
W_BG = unit([0, 60, 120, 180, 270])
W_BG_BORDERS = [30, 90, 150, 225, 315]
KNOWN_ANGLES = {"softmax": [0, 90, 180, 270], "objectosphere": [0, 90, 180, 270], "background": [0, 60, 120, 180]}
WEIGHTS = {"softmax": W4, "objectosphere": W4, "background": W_BG}


def split(rng, n, angles=None, radius=(3.0, 6.0), dim=2):
    """Knowns around their class direction (within 12 degrees), or unknowns near the origin."""
    if angles is not None:
        labels = rng.integers(0, len(angles), n)
        angles = np.asarray(angles, float)[labels] + rng.uniform(-12, 12, n)
        r = rng.uniform(*radius, n)
    else:
        labels = np.full(n, -1)
        angles = rng.uniform(0, 360, n)
        r = rng.uniform(0, 1.5, n)
    feats = r[:, None] * unit(angles)
    if dim > 2:
        feats = np.concatenate([feats, rng.normal(0, 0.1, (n, dim - 2))], axis=1)
    return feats, labels


def make_run(root: Path, approaches=("softmax", "background", "objectosphere"), seeds=1, n_known=120,
             n_unknown=60, dim=2, bias=0.0, config="model: lenet++\nbudget: cpu\nopenmax: {tail_size: 5}\n",
             fit_outputs=True, unknowns=("letters", "devanagari")) -> Path:
    """A run directory in the layout of ``training.outputs``; the softmax model also gets the
    training outputs (``fit_outputs.npz``) that its OpenMax row is fitted on."""
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        for approach in approaches:
            w = WEIGHTS[approach]
            if dim > 2:
                w = np.concatenate([w, np.zeros((len(w), dim - 2))], axis=1)
            scale = (15.0, 30.0) if approach == "objectosphere" else (3.0, 6.0)
            outputs = {}
            for name, n, angles in (("known", n_known, KNOWN_ANGLES[approach]),
                                    *((u, n_unknown, None) for u in unknowns)):
                feats, labels = split(rng, n, angles, scale, dim)
                logits = feats @ w.T + bias * np.arange(len(w))
                outputs[name] = {"logits": logits.astype(np.float32), "features": feats.astype(np.float32),
                                 "labels": labels.astype(np.int64)}
            save_outputs(root / f"seed{seed}" / approach / "outputs.npz", outputs)
            if approach == "softmax" and fit_outputs:
                feats, labels = split(rng, 80, angles=KNOWN_ANGLES[approach], dim=dim)
                save_outputs(root / f"seed{seed}" / approach / "fit_outputs.npz",
                             {"train": {"logits": (feats @ w.T).astype(np.float32),
                                        "features": feats.astype(np.float32), "labels": labels}})
    if config is not None:
        (root / "config.yaml").write_text(config)
    return root


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return make_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def run_figures(run_dir):
    return {item.stem: item for item in iter_run_figures(run_dir, log=lambda _: None)}


def border_angles(ax) -> list:
    angles = []
    for line in ax.lines:
        if line.get_gid() == BORDER_GID:
            x, y = line.get_xdata()[-1], line.get_ydata()[-1]
            angles.append(math.degrees(math.atan2(y, x)) % 360)
    return sorted(angles)


def is_png(path: Path) -> bool:
    data = path.read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n") or len(data) < 1000:
        return False
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        return image.size[0] > 100 and image.size[1] > 100


def is_pdf(path: Path) -> bool:
    data = path.read_bytes()
    return data.startswith(b"%PDF-") and b"%%EOF" in data[-64:] and len(data) > 1000


def is_svg(path: Path) -> bool:
    root = ET.parse(path).getroot()
    return root.tag.endswith("svg") and path.stat().st_size > 1000


# ------------------------------------------------------------------ class borders

def test_class_borders_of_four_axis_classes():
    np.testing.assert_allclose(np.degrees(class_borders(W4)), W4_BORDERS, atol=1e-9)


def test_class_borders_background_column_is_a_class():
    np.testing.assert_allclose(np.degrees(class_borders(W_BG)), W_BG_BORDERS, atol=1e-9)


def test_class_borders_depend_on_weight_magnitude():
    # l_0 = x, l_1 = 2y: equal where tan(phi) = 1/2.
    expected = math.degrees(math.atan(0.5))
    np.testing.assert_allclose(np.degrees(class_borders([[1, 0], [0, 2]])), [expected, expected + 180], atol=1e-9)


def test_class_borders_skip_classes_that_never_win():
    # A tiny middle class between two strong ones never wins: only the two outer borders remain.
    w = np.concatenate([unit([0, 90, 180, 270]), 0.01 * unit([45])])
    np.testing.assert_allclose(np.degrees(class_borders(w)), W4_BORDERS, atol=1e-9)


@pytest.mark.parametrize("w", [[[1.0, 0.0]], [[1.0, 2.0], [1.0, 2.0]], np.zeros((3, 2))])
def test_class_borders_degenerate(w):
    assert class_borders(w).size == 0


def test_class_borders_rejects_non_2d():
    with pytest.raises(ValueError, match=r"\(C, 2\)"):
        class_borders(np.ones((3, 3)))


def test_logit_weights_recovers_w_and_detects_bias():
    rng = np.random.default_rng(1)
    feats = rng.normal(size=(200, 2))
    w, residual = logit_weights(feats, feats @ W_BG.T)
    np.testing.assert_allclose(w, W_BG, atol=1e-10)
    assert residual < 1e-10
    _, residual = logit_weights(feats, feats @ W_BG.T + 3.0 * np.arange(5))
    assert residual > 0.1


# ------------------------------------------------------------------- feature plot

def test_plot_features_draws_one_scatter_per_class_plus_unknowns_and_the_borders():
    rng = np.random.default_rng(0)
    feats, labels = split(rng, 200, KNOWN_ANGLES["softmax"])
    unknown, _ = split(rng, 50)
    ax = plot_features(DeepFeatures(feats, labels, unknown, weights=W4, num_classes=4))
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(scatters) == 5
    assert [c.get_label() for c in scatters] == ["0", "1", "2", "3", "unknowns"]
    assert sum(len(c.get_offsets()) for c in scatters[:4]) == 200 and len(scatters[4].get_offsets()) == 50
    assert to_hex(scatters[4].get_facecolor()[0]) == "#000000"
    for c, scatter in enumerate(scatters[:4]):  # each class in its own tab10 colour, at its own points
        assert to_hex(scatter.get_facecolor()[0]) == to_hex(style.class_colors(4)[c])
        np.testing.assert_allclose(scatter.get_offsets(), feats[labels == c])
    np.testing.assert_allclose(border_angles(ax), W4_BORDERS, atol=1.0)
    assert {line.get_linestyle() for line in ax.lines if line.get_gid() == BORDER_GID} == {"--"}  # dashed
    assert sum(line.get_gid() == ORIGIN_AXIS_GID for line in ax.lines) == 2  # axes cross at the origin
    assert ax.get_xlim()[0] < 0 < ax.get_xlim()[1] and ax.get_ylim()[0] < 0 < ax.get_ylim()[1]
    assert not [t for t in ax.texts if t.get_gid() == SUBSAMPLE_NOTE_GID]  # nothing subsampled
    assert len(ax.get_legend().get_texts()) == 5


def test_plot_features_without_weights_draws_no_borders():
    rng = np.random.default_rng(0)
    feats, labels = split(rng, 40, KNOWN_ANGLES["softmax"])
    ax = plot_features(DeepFeatures(feats, labels))
    assert border_angles(ax) == [] and len(ax.collections) == 4


def test_plot_features_subsamples_and_says_so():
    rng = np.random.default_rng(0)
    feats, labels = split(rng, 120, KNOWN_ANGLES["softmax"])
    unknown, _ = split(rng, 90)

    def draw(seed):
        ax = plot_features(DeepFeatures(feats, labels, unknown, num_classes=4), shown=Subsample(50, seed=seed))
        return ax, np.concatenate([c.get_offsets() for c in ax.collections])

    ax, points = draw(seed=0)
    notes = [t.get_text() for t in ax.texts if t.get_gid() == SUBSAMPLE_NOTE_GID]
    assert notes == ["showing 50 of 120 knowns,\n50 of 90 unknowns (random subsample)"]
    assert len(points) == 100
    np.testing.assert_array_equal(points, draw(seed=0)[1])        # seeded: the same points again
    assert not np.array_equal(points, draw(seed=1)[1])
    assert subsample_note(5000, 10000) == "showing 5,000 of 10,000 knowns (random subsample)"
    assert subsample_note(10, 10, 3, 3) is None


def test_plot_features_rejects_non_2d_features():
    with pytest.raises(ValueError, match="2-D features"):
        DeepFeatures(np.zeros((5, 3)), np.zeros(5, int))


# ------------------------------------------------------------------- histograms

def test_softmax_histogram_values_use_correct_class_and_max_known_class():
    logits = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0]])
    unknown_logits = np.array([[0.5, 0.4, 3.0]])
    probs = softmax_scores(logits)
    known, unknown = softmax_histogram_values(probs, [1, 1], softmax_scores(unknown_logits))
    np.testing.assert_allclose(known, probs[:, 1])
    np.testing.assert_allclose(unknown, softmax_scores(unknown_logits).max(1))
    # Background: the C+1 softmax, background column dropped: max over the known columns only.
    known, unknown = softmax_histogram_values(background_scores(logits), [0, 1], background_scores(unknown_logits))
    full = softmax_scores(unknown_logits)[0]
    np.testing.assert_allclose(unknown, [full[:2].max()])
    np.testing.assert_allclose(known, [softmax_scores(logits)[0, 0], softmax_scores(logits)[1, 1]])


def test_plot_softmax_histogram_log_counts():
    rng = np.random.default_rng(0)
    ax = plot_softmax_histogram((rng.uniform(0.5, 1, 300), rng.uniform(0.1, 0.6, 100)))
    assert len(ax.patches) == 2 and ax.get_yscale() == "log"
    assert ax.get_ylabel() == style.LABEL_COUNT_LOG and ax.get_xlim() == (0, 1)
    assert [to_hex(p.get_facecolor()) for p in ax.patches] == [style.KNOWN_COLOR.lower(), style.UNKNOWN_COLOR.lower()]


def test_plot_magnitude_histogram_is_normalised():
    rng = np.random.default_rng(0)
    known, unknown = rng.uniform(5, 10, 1000), rng.uniform(0, 1, 10)
    ax = plot_magnitude_histogram((known, unknown), bins=20)
    assert len(ax.patches) == 2 and ax.get_ylabel() == style.LABEL_DENSITY and "‖F‖" in ax.get_xlabel()
    edges = np.linspace(0, max(known.max(), unknown.max()), 21)
    for patch, values in zip(ax.patches, (known, unknown)):  # density: the heights of np.histogram(density=True)
        expected = np.histogram(values, edges, density=True)[0].max()
        assert patch.get_path().vertices[:, 1].max() == pytest.approx(expected)


# ------------------------------------------------------------------------ OSCR

def test_oscr_on_grid_is_the_best_ccr_at_or_below_each_fpr():
    fpr = np.array([0.0, 0.25, 0.5, 1.0])
    ccr = np.array([0.1, 0.2, 0.3, 0.4])
    got = oscr_on_grid(fpr, ccr, [0.1, 0.25, 0.3, 0.5 - 1e-12, 1.0])
    np.testing.assert_allclose(got, [0.1, 0.2, 0.2, 0.3, 0.4])  # 0.5 - 1e-12 is 0.5 within rounding
    np.testing.assert_allclose(oscr_on_grid([0.5, 1.0], [0.6, 0.8], [0.1]), [0.0])  # nothing accepted yet


def test_oscr_series_single_seed_is_exact_and_multi_seed_is_mean_with_band():
    fpr_a, ccr_a = np.array([0, 0.25, 0.5, 0.75, 1.0]), np.array([0.2, 0.4, 0.6, 0.8, 0.9])
    fpr_b, ccr_b = np.array([0, 0.5, 1.0]), np.array([0.0, 0.4, 0.7])
    single = oscr_series("entropic", [(fpr_a, ccr_a)], n_unknown=4)
    np.testing.assert_allclose(single.x, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(single.y, [0.4, 0.6, 0.8, 0.9])
    assert single.low is None
    both = oscr_series("entropic", [(fpr_a, ccr_a), (fpr_b, ccr_b)], n_unknown=4, points=51)
    assert both.x[0] == 0.25 and both.x[-1] == 1.0 and both.seeds == 2
    at = np.argmin(np.abs(both.x - 0.5))  # the middle of the log grid, 0.5 up to rounding
    assert both.x[at] == pytest.approx(0.5)
    assert both.y[at] == pytest.approx((0.6 + 0.4) / 2)
    assert both.low[at] == pytest.approx(0.4) and both.high[at] == pytest.approx(0.6)
    assert both.y[0] == pytest.approx((0.4 + 0.0) / 2)  # seed b accepts no unknown at FPR 1/4
    assert both.y[-1] == pytest.approx(0.8)


def test_plot_oscr_one_line_per_row_and_bands():
    x = np.array([0.01, 0.1, 1.0])
    ax = plot_oscr([("softmax", x, [0.1, 0.5, 0.9]),
                    CurveSeries("objectosphere", x, [0.5, 0.8, 0.9], x * 0 + 0.4, x * 0 + 0.95, seeds=3),
                    CurveSeries("objectosphere-scaled", x, [0.6, 0.8, 0.9], x * 0 + 0.5, x * 0 + 0.95, seeds=3)])
    assert len(ax.lines) == 3 and ax.get_xscale() == "log"
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 2
    assert [to_hex(line.get_color()) for line in ax.lines] == [
        APPROACH_COLORS[k].lower() for k in ("softmax", "objectosphere", "objectosphere-scaled")]
    assert ax.lines[2].get_linestyle() == "--"
    assert ax.get_xlabel() == style.LABEL_FPR and ax.get_ylabel() == style.LABEL_CCR
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["Softmax", "Objectosphere", "Objectosphere (S·‖F‖)"]
    assert "3 seeds" in legend.get_title().get_text()
    assert plot_oscr([("softmax", [1, 10, 100], [0.1, 0.2, 0.3])], counts=True).get_xlabel() == style.LABEL_FP_COUNT


def test_plot_confidence_curves():
    t = np.linspace(0, 1, 11)
    ax = plot_confidence_curves([("entropic", t, t),
                                 CurveSeries("ensemble", t, np.where(t > 0.8, np.nan, t ** 2), label="MLP (squared)")],
                                ylabel="precision")
    assert len(ax.lines) == 2
    assert to_hex(ax.lines[0].get_color()) == APPROACH_COLORS["entropic"].lower()
    assert to_hex(ax.lines[1].get_color()) == APPROACH_COLORS["ensemble"].lower()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["Entropic Open-Set", "MLP (squared)"]
    assert ax.get_ylabel() == "precision" and "threshold" in ax.get_xlabel()


def test_display_names_are_the_titles_declared_by_losses_detectors_and_baselines(monkeypatch):
    """One source: figures show the ``title`` a loss or detector declares beside its code, in
    its own rows too; other rows keep their name."""
    from agnostophobia.baselines.ensemble import ROW_TITLES
    from agnostophobia.detectors import DETECTORS
    from agnostophobia.losses import LOSSES

    assert [style.approach_name(a) for a in LOSSES.names()] == [LOSSES.get(a).title for a in LOSSES.names()]
    monkeypatch.setattr(LOSSES.get("objectosphere"), "title", "Ring")
    monkeypatch.setattr(DETECTORS.get("openmax"), "title", "EVT")
    assert style.approach_name("objectosphere") == "Ring"
    assert style.approach_name("objectosphere-scaled") == "Ring (S·‖F‖)"
    assert style.approach_name("openmax") == "EVT"
    assert style.approach_name("ensemble") == ROW_TITLES["ensemble"]
    assert style.approach_name("entropic/knn") == "entropic/knn"


def test_palette_fixed_and_distinct_for_every_row_and_baseline():
    rows = list(ROW_ORDER)  # the paper's rows and the ensemble of Fig. 3
    colors = [style.approach_color(row) for row in rows]
    assert all(row in APPROACH_COLORS for row in rows)
    assert len(set(colors)) == len(rows)
    assert set(colors) <= set(style.OKABE_ITO.values())
    assert style.approach_color("something-new") == style.approach_color("something-new")
    assert len({to_hex(c) for c in style.class_colors(10)}) == 10


# -------------------------------------------------------------------- plot_run

def test_plot_run_writes_every_figure_as_valid_png(run_dir):
    sections = plot_run(run_dir, log=lambda _: None)
    assert list(sections) == ["Unknown unknowns: Devanagari (D_a), Figs. 1 and 2",
                              "Known unknowns: EMNIST letters test (D_b), supplementary figure"]
    kinds = ["features", "softmax_hist", "magnitude_hist", "oscr", "oscr_counts"]
    for paths, split in zip(sections.values(), ("devanagari", "letters")):
        assert paths == [f"figures/{kind}_{split}.png" for kind in kinds]
        for path in paths:
            assert is_png(run_dir / path), path
    assert sorted(p.suffix for p in (run_dir / "figures").iterdir()) == [".png"] * 10


def test_figures_drawn_in_processes_equal_those_drawn_one_by_one(tmp_path):
    run_dir = make_run(tmp_path / "run", approaches=("softmax", "objectosphere"), n_known=40, n_unknown=20)
    one, _ = draw_run(PlotRequest(run_dir, out=tmp_path / "one", workers=1), log=lambda _: None)
    two, written = draw_run(PlotRequest(run_dir, out=tmp_path / "two", workers=2), log=lambda _: None)
    assert len(written) == 10
    assert [Path(p).name for paths in one.values() for p in paths] == \
        [Path(p).name for paths in two.values() for p in paths]
    for path in written:
        assert path.read_bytes() == (tmp_path / "one" / path.name).read_bytes(), path.name


DRAWING_PARENT = """
import os, sys, time
import agnostophobia.plotting.run as run

def write_pid_and_sleep(index, out_dir, formats, write):
    with open(sys.argv[1 + index], "w") as file:
        file.write(str(os.getpid()))
    time.sleep(120)
    return []

run._draw_one = write_pid_and_sleep  # inherited by the forked drawing processes
run._draw_all([None, None], sys.argv[1], ("png",), None, None)  # None: one process per core (at least 2 here)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_drawing_processes_die_with_the_command_that_started_them(tmp_path):
    """Figures are drawn in one process per core by default; a killed `reproduce` or `evaluate`
    leaves none of them behind."""
    from runs import assert_children_die_with_their_parent
    from agnostophobia.training.concurrent import available_cores

    if available_cores() < 2:
        pytest.skip("one usable core: figures are drawn in the command's own process")
    script = tmp_path / "draw.py"
    script.write_text(DRAWING_PARENT)
    assert_children_die_with_their_parent(script, [tmp_path / "a.pid", tmp_path / "b.pid"])


def test_draw_run_redraws_only_the_sets_named_and_missing_figures(tmp_path):
    run_dir = make_run(tmp_path / "run", approaches=("softmax",), n_known=40, n_unknown=20)
    every, _ = draw_run(PlotRequest(run_dir, workers=1), log=lambda _: None)
    (run_dir / "figures" / "oscr_letters.png").unlink()
    again, written = draw_run(PlotRequest(run_dir, workers=1, splits={"devanagari"}), log=lambda _: None)
    assert again == every  # the report still lists every figure
    assert sorted(p.name for p in written) == sorted(
        [f"{kind}_devanagari.png" for kind in ("features", "softmax_hist", "magnitude_hist", "oscr", "oscr_counts")]
        + ["oscr_letters.png"])


def test_plot_run_pdf_svg_and_out_dir(tmp_path):
    run_dir = make_run(tmp_path / "run", approaches=("objectosphere",), n_known=40, n_unknown=20,
                       unknowns=("devanagari",))
    out = tmp_path / "elsewhere"
    sections, written = draw_run(PlotRequest(run_dir, ["PDF", "svg", "pdf"], out), log=lambda _: None)
    assert len(written) == 10 and {p.suffix for p in written} == {".pdf", ".svg"}
    for path in written:
        assert (is_pdf if path.suffix == ".pdf" else is_svg)(path), path
    first = next(iter(sections.values()))[0]  # svg is embeddable, pdf is not: the report gets the svg
    assert first.endswith("features_devanagari.svg") and (run_dir / first).resolve() == out / "features_devanagari.svg"


def test_run_figures_draw_the_expected_series(run_figures):
    features = run_figures["features_devanagari"].figure
    panels = [ax for ax in features.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["Softmax", "Background", "Objectosphere"]
    for ax, borders in zip(panels, (W4_BORDERS, W_BG_BORDERS, W4_BORDERS)):
        assert len([c for c in ax.collections if isinstance(c, PathCollection)]) == 4 + 1
        np.testing.assert_allclose(border_angles(ax), borders, atol=1.0)  # W recovered from the stored outputs
    assert features.get_suptitle() == "LeNet++ · deep features · Devanagari (D_a) · seed 0"

    oscr_ax = run_figures["oscr_devanagari"].figure.axes[0]
    assert [line.get_label() for line in oscr_ax.lines] == [
        "Softmax", "OpenMax", "Background", "Objectosphere", "Objectosphere (S·‖F‖)"]
    assert not [c for c in oscr_ax.collections if isinstance(c, PolyCollection)]  # one seed: no band
    assert oscr_ax.get_xlim()[0] == pytest.approx(1 / 60)
    counts_ax = run_figures["oscr_counts_devanagari"].figure.axes[0]
    assert len(counts_ax.lines) == 5 and counts_ax.get_xlim() == pytest.approx((1, 60))
    # Letters (D_b) get the same panels.
    assert run_figures["softmax_hist_letters"].section.startswith("Known unknowns")
    hist_axes = [ax for ax in run_figures["softmax_hist_letters"].figure.axes if ax.get_title()]
    assert len(hist_axes) == 3 and all(len(ax.patches) == 2 and ax.get_yscale() == "log" for ax in hist_axes)
    mag_axes = [ax for ax in run_figures["magnitude_hist_devanagari"].figure.axes if ax.get_title()]
    assert len(mag_axes) == 3 and all(len(ax.patches) == 2 for ax in mag_axes)


def test_plot_run_oscr_is_the_metric_curve(run_dir, run_figures):
    """The drawn softmax curve equals metrics.oscr on the stored outputs."""
    from agnostophobia.training.outputs import load_outputs
    from agnostophobia.metrics import oscr

    data = load_outputs(run_dir / "seed0" / "softmax" / "outputs.npz")
    scores = np.concatenate([softmax_scores(data["known"]["logits"]), softmax_scores(data["devanagari"]["logits"])])
    labels = np.concatenate([data["known"]["labels"], -np.ones(60, int)])
    fpr, ccr, _ = oscr(scores, labels)
    line = run_figures["oscr_devanagari"].figure.axes[0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), oscr_on_grid(fpr, ccr, line.get_xdata()))
    assert line.get_ydata()[-1] == pytest.approx(ccr[-1])  # closed-set accuracy at FPR 1


def test_plot_run_with_several_seeds_draws_mean_and_band(tmp_path):
    run = make_run(tmp_path / "run", approaches=("softmax", "objectosphere"), seeds=2, n_known=60, n_unknown=30)
    figures = {f.stem: f.figure for f in iter_run_figures(run, log=lambda _: None)}
    ax = figures["oscr_devanagari"].axes[0]
    assert len(ax.lines) == 4  # softmax, openmax, objectosphere, objectosphere-scaled
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 4
    assert "2 seeds" in ax.get_legend().get_title().get_text()
    assert "mean ± std over 2 seeds" in figures["oscr_devanagari"].get_suptitle()
    assert "seed 0" in figures["features_devanagari"].get_suptitle()


def test_plot_run_leaves_out_openmax_without_fit_outputs(tmp_path):
    run = make_run(tmp_path / "run", approaches=("softmax",), n_known=40, n_unknown=20, fit_outputs=False)
    messages = []
    figures = {f.stem: f.figure for f in iter_run_figures(run, log=messages.append)}
    assert [line.get_label() for line in figures["oscr_letters"].axes[0].lines] == ["Softmax"]
    assert sum("fit_outputs.npz" in m for m in messages) == 1  # said once, not per figure


def test_plot_run_skips_feature_plots_of_high_dimensional_features(tmp_path):
    run = make_run(tmp_path / "run", approaches=("softmax",), dim=3, n_known=40, n_unknown=20, config=None)
    messages = []
    stems = [f.stem for f in iter_run_figures(run, log=messages.append)]
    assert not [s for s in stems if s.startswith("features_")]
    assert "oscr_devanagari" in stems and "magnitude_hist_letters" in stems
    assert any("3-D" in m and "softmax" in m for m in messages)


def test_plot_run_omits_borders_when_the_logit_layer_has_a_bias(tmp_path):
    run = make_run(tmp_path / "run", approaches=("softmax",), bias=2.0, n_known=40, n_unknown=20)
    messages = []
    figures = {f.stem: f.figure for f in iter_run_figures(run, log=messages.append)}
    ax = figures["features_devanagari"].axes[0]
    assert border_angles(ax) == [] and len(ax.collections) == 5
    assert any("borders" in m and "bias" in m for m in messages)


def test_plot_run_errors(tmp_path, run_dir):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_run(tmp_path / "empty")
    with pytest.raises(FileNotFoundError):
        plot_run(tmp_path / "missing")
    with pytest.raises(ValueError, match="unknown figure format"):
        plot_run(run_dir, formats=["png", "docx"])


# ------------------------------------------------------------------------- CLI

def test_cli_plot(tmp_path, capsys):
    run = make_run(tmp_path / "run", approaches=("objectosphere",), n_known=40,
                   n_unknown=20, unknowns=("letters",))
    assert main(["plot", str(run)]) == 0
    assert "wrote 5 file(s)" in capsys.readouterr().out
    assert is_png(run / "figures" / "oscr_letters.png")
    assert main(["plot", str(run), "--format", "pdf", "svg", "--out", str(tmp_path / "figs"),
                 "--max-points", "10"]) == 0
    assert is_pdf(tmp_path / "figs" / "features_letters.pdf") and is_svg(tmp_path / "figs" / "oscr_letters.svg")
    assert main(["plot", str(run), "--format", "docx"]) == 1


def test_cli_plot_error_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["plot", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("agnostophobia: error:") and "nothing to plot" in err and err.count("\n") == 1


def test_plotting_uses_no_pyplot_and_cli_import_is_lazy(tmp_path):
    run = make_run(tmp_path / "run", approaches=("background",), n_known=30, n_unknown=10, unknowns=("letters",))
    code = (
        "import sys\n"
        "import agnostophobia.plotting.cli\n"
        "assert 'matplotlib' not in sys.modules, 'plotting.cli imported matplotlib'\n"
        "from agnostophobia.plotting import plot_run\n"
        f"plot_run({str(run)!r}, log=lambda _: None)\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_metrics_and_figures_share_one_fitted_openmax_with_the_settings_of_config_yaml(tmp_path, monkeypatch):
    from agnostophobia.detectors import OpenMax
    from agnostophobia.experiments.report import write_metrics

    run = make_run(tmp_path / "run", approaches=("softmax",), n_known=60, n_unknown=30, unknowns=("devanagari",))
    fits = []
    original = OpenMax.fit
    monkeypatch.setattr(OpenMax, "fit", lambda self, *args: fits.append(self.tail_size) or original(self, *args))
    # run_meta's copy of the settings is not a second source: config.yaml's tail_size 5 is used
    metrics = write_metrics(run, {"train_config": {"openmax": {"tail_size": 1000}}})
    figures = {f.stem: f.figure for f in iter_run_figures(run, log=lambda _: None)}
    assert fits == [5]  # fitted once, for the metrics and the figures together
    row = next(r for r in metrics["results"] if r["row"] == "openmax")
    line = next(line for line in figures["oscr_devanagari"].axes[0].lines if line.get_label() == "OpenMax")
    assert line.get_ydata()[-1] == pytest.approx(row["closed_set_accuracy"])


def test_no_code_outside_detectors_chooses_behaviour_by_comparing_a_name_with_openmax():
    import re

    import agnostophobia

    package = Path(agnostophobia.__file__).parent
    comparison = re.compile(r"""(==|!=|\bin\b|\bis\b)\s*[\(\[{]?\s*["']openmax["']|["']openmax["']\s*(==|!=|\bin\b)""")
    offenders = [f"{path.relative_to(package)}:{number}: {line.strip()}"
                 for path in package.rglob("*.py") if "detectors" not in path.parts
                 for number, line in enumerate(path.read_text().splitlines(), 1) if comparison.search(line)]
    assert offenders == []


@pytest.mark.parametrize("split", ["cifar10-horse-ship", "cifar100-db", "negatives"])
def test_the_test_sets_of_training_negatives_are_titled_known_unknowns(split):
    from agnostophobia.data.protocols import unknown_set

    title = unknown_set(split).heading
    assert title.startswith("Known unknowns") and "(D_b" in title and "D_a" not in title
