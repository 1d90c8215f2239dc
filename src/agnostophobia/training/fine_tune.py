"""Fine-tuning: an approach whose loss declares a :class:`~agnostophobia.losses.FineTune`
recipe (``outlier-exposure-ft``, ``energy-regularized-ft``, ``mixoe-ft``) starts from the trained
network of another approach of the same run and seed (its ``best.pt``), as Outlier Exposure, the
energy loss and MixOE are trained in their papers and in OpenOOD, instead of from scratch.

The model's folder records where it started (``fine_tune_start.json``: the start's approach, its
checkpoint relative to the seed's folder, the checkpoint's SHA-256 and epoch, and the recipe), written
before the first epoch; a resumed run continues from its own ``last.pt`` and reads no start again.
A start that is not trained is refused in one line before anything trains
(:func:`check_starts`).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

from agnostophobia.data.protocols import protocol_spec
from agnostophobia.errors import ConfigError
from agnostophobia.losses import LOSSES
from agnostophobia.rundir import FINE_TUNE_START, ModelDir, write_run_file
from agnostophobia.training.checkpoint import load_checkpoint


def start_approach(approach: str) -> Optional[str]:
    """The approach whose network ``approach`` fine-tunes (None: it trains from scratch)."""
    recipe = LOSSES.get(approach).fine_tune
    return None if recipe is None else recipe.start


def recipe(approach: str, protocol: Any = None):
    """The :class:`~agnostophobia.losses.FineTune` recipe a fine-tuning ``approach`` trains with on
    ``protocol`` (a registered protocol's name or a protocol from files, as a config holds it): its
    authors' recipe for the protocol's kind of images, MNIST's for glyphs; None for an approach that
    trains from scratch. ``protocol`` None: the recipe as declared."""
    declared = LOSSES.get(approach).fine_tune
    if declared is None or protocol is None:
        return declared
    return declared.for_images(protocol_spec(protocol, "protocol").input.kind)


def recipe_schedule(approach: str, epochs: Optional[int] = None, protocol: Any = None, exact: bool = False) -> Dict:
    """The config keys a fine-tuning ``approach``'s recipe on ``protocol`` sets over the run's ({}:
    none): its epochs, learning rate, schedule, optimizer and weight decay, and with ``exact`` (the
    config's ``fine_tune_exact``) the authors' batch of knowns and negatives
    (:meth:`~agnostophobia.losses.FineTune.schedule`); ``epochs`` (the config's ``fine_tune_epochs``),
    where set, replaces the recipe's epochs."""
    chosen = recipe(approach, protocol)
    return {} if chosen is None else chosen.schedule(epochs, exact)


#: The config keys a fine-tune's record (``fine_tune_start.json``) holds as it trained: those of
#: :meth:`~agnostophobia.losses.FineTune.schedule`, and the batch's two (an older record lacks them:
#: the run's batches trained it).
SCHEDULE_KEYS = ("epochs", "lr", "scheduler", "optimizer", "weight_decay")
BATCH_KEYS = ("batch_size", "negatives_per_batch")


def trained_schedule(model: ModelDir, approach: str, config: Dict) -> Dict:
    """The config keys a trained fine-tune of the run ``config`` was trained with over the run's:
    the schedule its ``fine_tune_start.json`` recorded (a run of an older version trained with the recipe
    of its day, and with the run's optimizer and weight decay where its record names none), else the
    schedule it would train with now (:func:`recipe_schedule`). ``{}`` for an approach that trains from
    scratch."""
    path = model.fine_tune_start
    epochs = config.get("fine_tune_epochs")
    if start_approach(approach) is None or not path.is_file():
        return recipe_schedule(approach, epochs, config.get("protocol"), bool(config.get("fine_tune_exact")))
    recorded = {"epochs": None, "lr": None, "scheduler": None,  # an older record: the run's optimizer trained it
                "optimizer": config.get("optimizer"), "weight_decay": config.get("weight_decay", 0.0),
                **json.loads(path.read_text(encoding="utf-8")).get("recipe", {})}
    schedule = {key: recorded[key] for key in SCHEDULE_KEYS}
    if epochs is not None:
        schedule["epochs"] = epochs
    return {**schedule, **{key: recorded[key] for key in BATCH_KEYS if key in recorded}}


def check_starts(approaches: Iterable[str], trained: Iterable[str] = ()) -> None:
    """Refuse a fine-tuning approach whose start is neither trained in this invocation
    (``approaches``) nor already (``trained``)."""
    available = set(approaches) | set(trained)
    for approach in approaches:
        start = start_approach(approach)
        if start is not None and start not in available:
            raise ConfigError(f"approach {approach!r} fine-tunes the same seed's {start!r} network, which this run "
                              f"neither has nor trains: add {start} to the approaches (it trains first)")


def start_weights(model: ModelDir, cfg) -> Tuple[Dict, Dict]:
    """The weights the fine-tuning run ``cfg`` (a :class:`~agnostophobia.training.config.TrainConfig`)
    starts from (the state dict of the same seed's start network, ``best.pt`` of the START folder
    beside the model's) and the record of them for :data:`FINE_TUNE_START` (its checkpoint named
    relative to the seed's folder, and the recipe: as declared, with the config keys as the run
    applies them and what departs from the authors' code)."""
    approach, protocol = cfg.approach, cfg.protocol
    chosen = recipe(approach, protocol)
    start = model.sibling(chosen.start)
    path = start.best
    if not path.is_file():
        raise ConfigError(f"{model}: {approach} fine-tunes {path}, which does not exist; train "
                          f"{chosen.start} for this seed first")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    checkpoint = load_checkpoint(path)
    record = {"approach": chosen.start, "checkpoint": path.relative_to(start.path.parent).as_posix(),
              "sha256": digest, "epoch": checkpoint.get("epoch"),
              "recipe": {**{key: value for key, value in chosen._asdict().items() if key != "glyphs"},
                         **{key: getattr(cfg, key) for key in (*SCHEDULE_KEYS, *BATCH_KEYS)},
                         "differs": chosen.departures(cfg.fine_tune_exact,
                                                      start=trained_at(checkpoint.get("config") or {}),
                                                      keep=cfg.keep_checkpoint)}}
    return checkpoint["model"], record


def trained_at(config: Dict) -> Optional[Tuple[float, int]]:
    """The peak lr and batch size a network trained with, read from its config (a start network's
    checkpoint's, or a run's for its networks from scratch); None where the config lacks either."""
    lr, batch = config.get("lr"), config.get("batch_size")
    return None if lr is None or batch is None else (lr, batch)


def record_start(model: ModelDir, record: Dict) -> None:
    write_run_file(model.fine_tune_start,
                   lambda tmp: Path(tmp).write_text(json.dumps(record, indent=1)))

