"""The metrics a benchmark can rank by (:mod:`agnostophobia.experiments.benchmark_ranking` chooses
one by its rule, or ranks by one declared before the run), kept apart from the ranking's code so that
the command line can offer them without importing it."""
from __future__ import annotations

from agnostophobia.errors import AgnostophobiaError

#: The candidates for the metric rows are ranked by: the statistic (of each set's numbers,
#: :func:`~agnostophobia.deploy.compare.compare_models`) and its name in the report. The linear OSCR
#: area is the paper's (Eq. 3); the log-FPR area reads the low-FPR end from the smallest FPR a set
#: resolves (10/#negatives); AUROC the OOD literature's; CCR at that smallest FPR (10/#negatives,
#: not rounded to a series) the strictest operating point the set supports.
RANKING_CANDIDATES = {"oscr": "linear OSCR area", "oscr_log": "log-FPR OSCR area", "auroc": "AUROC",
                      "ccr_at_lowest_fpr": "CCR at the lowest resolved FPR"}


def check_ranking_metric(metric) -> str:
    """A declared ranking metric: one of :data:`RANKING_CANDIDATES`' keys."""
    if metric not in RANKING_CANDIDATES:
        raise AgnostophobiaError(f"--ranking-metric {metric!r}: one of {', '.join(RANKING_CANDIDATES)}")
    return metric
