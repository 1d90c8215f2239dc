"""Fixed colours, names and axis labels shared by every figure.

One colour per approach (evaluation row) across all figures, from the colour-blind-safe
Okabe–Ito palette; the rows that share a trained network also differ in line style
(``objectosphere-scaled`` is dashed). The ten digit classes use matplotlib's ``tab10``.
Known and unknown samples keep the paper's green / red meaning, in the Okabe–Ito shades
that stay apart for red-green colour blindness.
"""
from __future__ import annotations

import zlib
from typing import Dict, List, Optional, Tuple

from matplotlib import colormaps

from agnostophobia.baselines.ensemble import ROW_TITLES as BASELINE_TITLES
from agnostophobia.losses import LOSSES
from agnostophobia.metrics.rows import row_title

# Okabe & Ito (2008), "Color Universal Design".
OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky blue": "#56B4E9", "bluish green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish purple": "#CC79A7",
}

#: Colour of every evaluation row / approach, the same in every figure.
APPROACH_COLORS: Dict[str, str] = {
    "softmax": OKABE_ITO["orange"],
    "background": OKABE_ITO["sky blue"],
    "entropic": OKABE_ITO["bluish green"],
    "objectosphere": OKABE_ITO["blue"],
    "objectosphere-scaled": OKABE_ITO["vermillion"],
    "openmax": OKABE_ITO["reddish purple"],
    "ensemble": OKABE_ITO["black"],
    # the training peers: Paul Tol's colour-blind safe "muted" scheme, apart from the paper's colours
    "outlier-exposure": "#882255", "energy-regularized": "#999933", "mixoe": "#AA4499",
    "maximal-entropy": "#332288", "logitnorm": "#DDCC77", "vos": "#CC6677",
}
#: Line style per row; rows not listed are solid.
APPROACH_LINESTYLES: Dict[str, str] = {"objectosphere-scaled": "--", "ensemble": "-."}
# an approach that fine-tunes (its loss's ``fine_tune``) is drawn in the colour of the loss it
# subclasses, dotted: the same loss, trained from another start
for _name in LOSSES.names():
    _base = [n for n in LOSSES.names() if LOSSES.get(n) is LOSSES.get(_name).__mro__[1]]
    if LOSSES.get(_name).fine_tune is not None and _base and _base[0] in APPROACH_COLORS:
        APPROACH_COLORS[_name], APPROACH_LINESTYLES[_name] = APPROACH_COLORS[_base[0]], ":"

MODEL_NAMES: Dict[str, str] = {"lenet++": "LeNet++", "resnet18": "ResNet-18"}

#: Known samples (D_c) and unknown samples (D_a / D_b) in histograms.
KNOWN_COLOR = OKABE_ITO["bluish green"]
UNKNOWN_COLOR = OKABE_ITO["vermillion"]
#: Unknown samples in deep-feature plots (the paper's black dots).
UNKNOWN_POINT_COLOR = "#000000"
#: Class borders in deep-feature plots: dark dashes on a white halo (the paper's grey-white).
BORDER_COLOR = "0.25"

# Fallback for rows that have no fixed colour: matplotlib's colour-blind Tableau palette,
# picked by a stable hash of the name (so a row keeps its colour from figure to figure).
_FALLBACK = ["#006BA4", "#FF800E", "#ABABAB", "#595959", "#5F9ED1", "#C85200", "#898989",
             "#A2C8EC", "#FFBC79", "#CFCFCF"]

LABEL_FPR = "FPR (fraction of unknowns accepted)"
LABEL_FP_COUNT = "false positives (number of unknowns accepted)"
LABEL_CCR = "CCR (fraction of knowns correctly classified)"
LABEL_MAGNITUDE = "‖F‖ (deep-feature magnitude)"
LABEL_DENSITY = "density (normalised)"
LABEL_COUNT_LOG = "count (log)"
LABEL_PROBABILITY = "softmax probability"
LABEL_THRESHOLD = "confidence threshold θ"


def approach_color(name: str) -> str:
    """Fixed colour of an approach or evaluation row.

    Args:
        name: an approach (``entropic``) or an evaluation row (``entropic/knn``); a name without a
            fixed colour gets a stable fallback.

    Returns:
        A matplotlib colour, a hex string (``#rrggbb``).

    Examples:
        >>> from agnostophobia.plotting import approach_color
        >>> approach_color("objectosphere") == approach_color("objectosphere")  # fixed across figures
        True
        >>> approach_color("objectosphere").startswith("#")
        True
    """
    if name in APPROACH_COLORS:
        return APPROACH_COLORS[name]
    return _FALLBACK[zlib.crc32(name.encode()) % len(_FALLBACK)]


def approach_linestyle(name: str) -> str:
    return APPROACH_LINESTYLES.get(name, "-")


def approach_name(name: str) -> str:
    """Display name of an approach or evaluation row, as declared beside its code: the loss's or
    detector's ``title`` (``metrics.rows.row_title``) or the baseline's (``baselines``).

    Args:
        name: an approach (``entropic``) or an evaluation row (``entropic/knn``).

    Returns:
        The display name (the ``name`` itself where nothing declares one).

    Examples:
        >>> from agnostophobia.plotting import approach_name
        >>> approach_name("objectosphere"), approach_name("entropic")
        ('Objectosphere', 'Entropic Open-Set')
    """
    return BASELINE_TITLES.get(name) or row_title(name)


def model_name(model: Optional[str]) -> str:
    if not model:
        return "model"
    return MODEL_NAMES.get(model, model)


def class_colors(num_classes: int) -> List[Tuple[float, float, float, float]]:
    """``tab10`` for up to 10 classes, ``tab20`` up to 20, evenly spaced ``turbo`` beyond."""
    if num_classes <= 10:
        return [colormaps["tab10"](i) for i in range(num_classes)]
    if num_classes <= 20:
        return [colormaps["tab20"](i) for i in range(num_classes)]
    cmap = colormaps["turbo"]
    return [cmap(i / max(num_classes - 1, 1)) for i in range(num_classes)]


def title(*parts: Optional[str]) -> str:
    """``"LeNet++ · Entropic Open-Set · Devanagari unknowns"`` from the non-empty parts."""
    return " · ".join(p for p in parts if p)
