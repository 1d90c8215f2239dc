"""One request from the command line down: what a training command asked for.

The handlers of ``train``, ``reproduce``, ``tune``, ``benchmark`` and ``ablate``
(``experiments/cli.py``) build one :class:`RunRequest` from the parsed command line; the
library functions behind them take it whole, and hand it on (``benchmark`` and ``ablate``
call ``reproduce`` with a changed copy, :meth:`RunRequest.but`). So each flag is read in one
place, and a script asks for a run with the same object::

    from agnostophobia.experiments.request import RunRequest
    from agnostophobia.experiments.reproduce import train_run

    train_run(RunRequest("experiment.yaml", out="runs/mine", budget="cpu", seeds=3))
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from agnostophobia.data.protocols import protocol_spec
from agnostophobia.errors import ConfigError
from agnostophobia.training.config import ExperimentConfig, load_experiment


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """A training command's request; every field but ``experiment`` may be left at its default,
    and None means: the config's value.

    Parameters
    ----------
    experiment : str or os.PathLike
        An experiment YAML file, or the name of a shipped one (``lenet++``, ``cifar``, ``ensemble``).
    out : str or os.PathLike, optional
        The run folder (each command has its default, e.g. ``runs/NAME-BUDGET``).
    budget : str, optional
        A budget the experiment's YAML defines (``--budget``).
    seeds : int, optional
        Seeds per approach (``--seeds``).
    set_options : sequence of (str, object)
        ``--set KEY=VALUE`` overrides, applied after the budget.
    approaches : sequence of str, optional
        Train (or tune) only these approaches (``--approach``).
    resume : bool
        Continue a run this command started (``train --resume``, ``tune --resume``).
    data_dir, device, preprocessing : str, optional
        ``--data-dir``, ``--device``, ``--preprocessing``.
    progress : bool
        Show progress bars (``--no-progress``: False).
    concurrent_runs, batched_seeds, cuda_graph : optional
        ``--concurrent-runs``, ``--batched-seeds``, ``--cuda-graph``.
    plots : bool
        Draw the figures after training (``reproduce --no-plots``: False).
    protocol : str, optional
        ``reproduce --protocol``: another registered protocol for the experiment.
    fetch, allow_unverified : bool
        ``reproduce``: download missing datasets (``--no-fetch``: False), and accept files
        without a published checksum (``--allow-unverified``).
    lenet_run : str or os.PathLike, optional
        ``reproduce ensemble --lenet-run``: the LeNet++ run whose models Fig. 3 compares.
    split : int, optional
        ``--split K``: the one split to run of a protocol with splits (``osr-mnist``,
        ``osr-cifar10``); None: every split (:meth:`split_runs`).
    """

    experiment: Any
    out: Any = None
    budget: Optional[str] = None
    seeds: Optional[int] = None
    set_options: Tuple[Tuple[str, Any], ...] = ()
    approaches: Optional[Tuple[str, ...]] = None
    resume: bool = False
    data_dir: Any = None
    device: Optional[str] = None
    progress: bool = True
    preprocessing: Optional[str] = None
    concurrent_runs: Any = None
    batched_seeds: Any = None
    cuda_graph: Optional[bool] = None
    plots: bool = True
    protocol: Optional[str] = None
    fetch: bool = True
    allow_unverified: bool = False
    lenet_run: Any = None
    split: Optional[int] = None

    def __post_init__(self):
        # tuples: a frozen request holds no list a callee could change under another
        object.__setattr__(self, "set_options", tuple(tuple(pair) for pair in self.set_options))
        if self.approaches is not None:
            object.__setattr__(self, "approaches", tuple(self.approaches))
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))

    @classmethod
    def from_args(cls, args: argparse.Namespace, experiment) -> "RunRequest":
        """The request of a parsed command line (the sub-commands' flags, ``experiments/cli.py``);
        a flag the command does not have keeps the field's default."""
        given = vars(args)
        negated = {"progress": "no_progress", "plots": "no_plots", "fetch": "no_fetch"}
        renamed = {"approaches": "approach"}
        values: Dict[str, Any] = {"experiment": experiment}
        for field in dataclasses.fields(cls):
            if field.name in negated and negated[field.name] in given:
                values[field.name] = not given[negated[field.name]]
            elif given.get(renamed.get(field.name, field.name)) is not None and field.name != "experiment":
                values[field.name] = given[renamed.get(field.name, field.name)]
        return cls(**values)

    def but(self, **changes) -> "RunRequest":
        """A copy with ``changes`` (field names), e.g. one ablation step's budget and folder."""
        return dataclasses.replace(self, **changes)

    def load(self, budget: Optional[str] = None) -> ExperimentConfig:
        """The experiment at ``budget`` (default: the request's), ``--set`` not yet applied: an
        undefined budget is refused here, the one place that checks it, before anything is written."""
        budget = self.budget if budget is None else budget
        loaded = load_experiment(self.experiment)
        if budget is not None and budget not in loaded.budgets:
            raise ConfigError(f"--budget {budget!r} is not defined in the config {self.experiment}; "
                              f"defined budgets: {', '.join(sorted(loaded.budgets)) or 'none'}")
        return loaded.for_budget(budget)

    def train_overrides(self) -> Dict[str, Any]:
        """The request's choices that are :class:`~agnostophobia.training.config.TrainConfig` keys,
        where it made one."""
        chosen = {"data_dir": str(self.data_dir) if self.data_dir else None, "device": self.device or None,
                  "preprocessing": self.preprocessing or None, "cuda_graph": self.cuda_graph,
                  "protocol_split": self.split}
        return {"progress": self.progress, **{key: value for key, value in chosen.items() if value is not None}}

    def split_runs(self, experiment: ExperimentConfig, out: Path) -> List[Tuple[Optional[int], Path]]:
        """The runs this request makes of ``experiment`` (``--set`` and ``--protocol`` applied) in
        ``out``: ``[(None, out)]`` for a protocol without splits; for one with splits (``osr-mnist``,
        ``osr-cifar10``), one run folder per split, ``out/split-K``: the request's ``split``, else
        the config's ``protocol_split``, else every split, as the literature reports them (each
        split's numbers, and their mean and spread over the splits).

        Raises:
            ~agnostophobia.errors.ConfigError: ``--split`` for a protocol without splits, or not
                one of its splits (one line naming ``--split`` and the protocol).
        """
        spec = protocol_spec(experiment.train.protocol)
        spec.check_split(self.split, "--split")
        if not spec.splits:
            return [(None, Path(out))]
        chosen = self.split if self.split is not None else experiment.train.protocol_split
        splits = range(len(spec.splits)) if chosen is None else [chosen]
        return [(k, split_folder(out, k)) for k in splits]


def split_folder(out, split: int) -> Path:
    """The run folder of split ``split`` in the folder ``out`` of a protocol with splits."""
    return Path(out) / f"split-{split}"
