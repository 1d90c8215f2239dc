"""One request from the command line down: which figures of a run ``plot`` draws, and how.

The ``plot`` handler (``plotting/cli.py``) builds one :class:`PlotRequest` from the parsed
command line and :func:`~agnostophobia.plotting.run.draw_run` takes it whole, as the training
commands take a :class:`~agnostophobia.experiments.request.RunRequest`;
:func:`~agnostophobia.plotting.run.plot_run` is the plain function for scripts.
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, Optional, Tuple

from agnostophobia.plotting.features import DEFAULT_MAX_POINTS
from agnostophobia.rundir import RunDir


@dataclasses.dataclass(frozen=True)
class PlotRequest:
    """What ``plot`` (or a command drawing a run's figures after its work) asked for.

    Args:
        run: A run directory with ``seed<k>/<approach>/outputs.npz`` files.
        formats: Any of ``png`` (default), ``pdf``, ``svg`` (anything matplotlib writes; ``--format``).
        out: Where the figures go (``--out``); default ``RUN/figures``.
        max_points: Deep-feature plots show at most this many knowns and unknowns (seeded subsample, noted
            on the plot; ``--max-points``); None shows all.
        splits: Draw again only the figures of these unknown sets, and any other whose files are
            missing (``evaluate --unknowns`` adds a set); None: all.
        workers: Processes drawing at once (1: in this process, one after another; None: one per
            usable core, at most ``plotting.run.MAX_WORKERS``).

    Examples:
        >>> from agnostophobia.plotting import PlotRequest
        >>> request = PlotRequest("runs/lenet++-cpu", formats=["png", "pdf"], workers=1)
        >>> request.formats, request.out_dir.as_posix()
        (('png', 'pdf'), 'runs/lenet++-cpu/figures')
    """

    run: Any
    formats: Tuple[str, ...] = ("png",)
    out: Any = None
    max_points: Optional[int] = DEFAULT_MAX_POINTS
    splits: Optional[Tuple[str, ...]] = None
    workers: Optional[int] = None

    def __post_init__(self):
        object.__setattr__(self, "run", Path(self.run))
        if isinstance(self.formats, str):
            raise ValueError(f"formats must be a sequence of format names, got the string {self.formats!r}")
        object.__setattr__(self, "formats", tuple(self.formats))
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))
        if self.splits is not None:
            object.__setattr__(self, "splits", tuple(self.splits))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "PlotRequest":
        """The request of ``plot``'s parsed command line (a flag not given keeps the default).

        Args:
            args: ``plot``'s parsed arguments (``argparse.Namespace``).

        Returns:
            The :class:`PlotRequest`.
        """
        given = {field.name: getattr(args, field.name, None) for field in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in given.items() if value is not None})

    @property
    def out_dir(self) -> Path:
        """Where the figures go.

        Returns:
            ``out``, else ``RUN/figures``.
        """
        return self.out if self.out is not None else RunDir(self.run).figures
