"""The epochs of a training and the files they leave in each model's folder: :func:`fit` (one
seed) and :func:`fit_seeds` (the seeds of one approach as one stacked model), on the one loop of
:mod:`.trainer`. A run continues from its ``last.pt`` (:mod:`.resume` decides when it may); after
every epoch each seed's ``rundir.ModelDir`` gets its checkpoints,
``metrics.csv`` and TensorBoard scalars (:mod:`.epoch_log`), written by rank 0 alone under DDP.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Union

from tqdm.auto import tqdm

from agnostophobia._killpoints import kill_point
from agnostophobia._log import log_info
from agnostophobia.rundir import ModelDir
from agnostophobia.training import device as devices
from agnostophobia.training.checkpoint import load_checkpoint, set_rng_state
from agnostophobia.training.config import TrainConfig
from agnostophobia.training.epoch_log import close_tensorboard, log_scalars, open_tensorboard, write_history
from agnostophobia.training.fine_tune import record_start, start_approach, start_weights
from agnostophobia.training.resume import check_same_epoch, remove_killed_writes, save_epoch, saved_run
from agnostophobia.training.trainer import SeedRun, Training, diverged, evaluate_seeds, train_one_epoch_seeds


def fit(cfg: TrainConfig, protocol, run_dir, resume: bool = True, device=None,
        stop_after_epoch: Optional[int] = None) -> Training:
    """Train ``cfg.approach`` on ``protocol``; write checkpoints and logs into ``run_dir``.

    Temporary files a killed run left behind are deleted. Under DDP (``torchrun``) every process
    calls this; rank 0 alone reads and writes ``run_dir`` and returns the best weights, the
    others return the last ones.

    Args:
        cfg: the run's :class:`~agnostophobia.training.TrainConfig` (one approach, one seed), e.g.
            :meth:`ExperimentConfig.for_approach <agnostophobia.training.ExperimentConfig.for_approach>`.
        protocol: the run's data, an :class:`~agnostophobia.data.OpenSetProtocol`
            (:func:`~agnostophobia.training.protocol_for` builds the config's).
        run_dir: the model's folder (``best.pt``, ``last.pt``, ``metrics.csv``): a path, or the
            ``rundir.ModelDir`` of ``RunDir.model(seed, approach)``; made if missing.
        resume: continue an existing ``run_dir/last.pt`` (a finished run is only reloaded),
            under the config it was trained with; False starts again.
        device: where to train (a :class:`torch.device`); default: the config's ``device``.
        stop_after_epoch: end after this epoch, as a kill would (for tests); None trains to the end.

    Returns:
        The run (model, loss, optimiser, data) with the best-validation weights loaded; its
        ``model`` is the trained network, which returns ``(logits, features)``.

    Raises:
        ~agnostophobia.errors.TrainingDiverged: a training or validation loss became non-finite;
            the checkpoints of the last good epoch stay as they were.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from agnostophobia.data import make_glyph_folders
        >>> from agnostophobia.training import TrainConfig, fit, protocol_for
        >>> folder = tempfile.TemporaryDirectory()
        >>> layout = make_glyph_folders(Path(folder.name) / "glyphs", per_split={"train": 6, "val": 2, "test": 2})
        >>> config = TrainConfig(protocol=layout, model="mlp", model_kwargs={"hidden": [16]}, epochs=1,  # a small network
        ...                      batch_size=8, device="cpu", progress=False, tensorboard=False)
        ...
        >>> run = Path(folder.name) / "run"
        >>> training = fit(config, protocol_for(config), run)  # one epoch of Entropic Open-Set (Sec. 4.1)
        >>> sorted(path.name for path in run.iterdir())  # best.pt: the lowest validation loss
        ['best.pt', 'last.pt', 'metrics.csv']
        >>> folder.cleanup()
    """
    run = Training(cfg, protocol, device)
    _fit(run, [ModelDir.at(run_dir)], resume, stop_after_epoch)
    return run


def fit_seeds(cfg: TrainConfig, protocol, folders: Mapping[int, Union[str, Path, ModelDir]], resume: bool = True,
              device=None, stop_after_epoch: Optional[int] = None) -> List[SeedRun]:
    """:func:`fit` of ``cfg`` with each seed of ``folders`` (seed -> its model folder, a path or the
    ``rundir.ModelDir`` of ``RunDir.model(seed, approach)``), trained as one
    stacked model (:mod:`.seed_batch`); each seed's folder gets the files a separate run writes.
    The seeds' checkpoints, where they exist, must be at the same epoch. Returns each seed's
    best-validation network, in the order of ``folders``. A seed that diverges stops the batch
    (:class:`TrainingDiverged` naming it); every seed keeps the checkpoints of the last good epoch."""
    run = Training(cfg, protocol, device, seeds=list(folders))
    _fit(run, [ModelDir.at(folder) for folder in folders.values()], resume, stop_after_epoch)
    return [run.seed_run(i) for i in range(len(folders))]


def _fit(run: Training, models: List[ModelDir], resume: bool, stop_after_epoch: Optional[int]) -> None:
    """The epochs of :func:`fit` and :func:`fit_seeds`: each seed's history, best epoch and files."""
    cfg, world, count = run.cfg, run.world, len(run.seed_cfgs)
    states = [{"epoch": 0, "history": [], "best_val_loss": float("inf"), "best_epoch": 0} for _ in range(count)]
    # every process continues rank 0's run
    saved = [world.from_main(lambda: saved_run(model, seed_cfg, resume))
             for model, seed_cfg in zip(models, run.seed_cfgs)]
    check_same_epoch(saved, models)
    if saved[0] is not None:
        run.load_seed_states(saved, [str(model.last) for model in models])
        set_rng_state(saved[0]["rng"])
        states = [{k: one[k] for k in states[0]} for one in saved]
    elif start_approach(cfg.approach) is not None:  # a fine-tune's first epoch: the start network's weights
        for i, model in enumerate(models):
            weights, record = world.from_main(lambda model=model: start_weights(model, cfg))
            run.load_seed_weights(i, weights)
            if world.is_main:
                record_start(model, record)
    elif run.weights_loaded is not None and world.is_main:  # not said on resuming: last.pt replaces them
        log_info(f"{cfg.approach}: {run.weights_loaded}")
    if world.is_main:
        for model in models:
            remove_killed_writes(model)
    restore_threads = devices.limit_cpu_threads(run.device, cfg.cpu_threads)
    writers = [open_tensorboard(model.path, cfg.tensorboard if world.is_main else False) for model in models]
    seeds = ("seeds " if run.seed_shape else "seed ") + ", ".join(str(seed_cfg.seed) for seed_cfg in run.seed_cfgs)
    bar = tqdm(total=run.steps_per_epoch * cfg.epochs, initial=run.steps_per_epoch * states[0]["epoch"],
               disable=not (cfg.progress and world.is_main), desc=f"{cfg.approach} ({seeds})",
               unit="batch", dynamic_ncols=True, leave=False)
    try:
        for epoch in range(states[0]["epoch"], cfg.epochs):
            lr = run.optimizer.param_groups[0]["lr"]
            rows = [{"epoch": epoch + 1, "lr": lr, **train, **val} for train, val in
                    zip(train_one_epoch_seeds(run, epoch, bar), evaluate_seeds(run, run.val_data))]
            for seed_cfg, row in zip(run.seed_cfgs, rows):  # no seed's epoch is recorded if one diverged
                if len(run.val_data) and not math.isfinite(row["val_loss"]):  # NaN is "not measured" without val data
                    raise diverged(seed_cfg, epoch + 1, f"the validation loss is {row['val_loss']}")
            bar.set_postfix(loss=f"{rows[0]['train_loss']:.3f}", val=f"{rows[0]['val_loss']:.3f}",
                            acc=f"{rows[0]['val_acc']:.3f}")
            for i, (state, row) in enumerate(zip(states, rows)):
                state["history"].append(row)
                state["epoch"] = epoch + 1
                improved = (cfg.keep_checkpoint == "last" or row["val_loss"] < state["best_val_loss"]
                            or not len(run.val_data))  # no validation data: keep the last
                if improved:
                    state["best_val_loss"], state["best_epoch"] = row["val_loss"], epoch + 1
                if world.is_main:
                    _record_epoch(run, i, models[i], state, improved, writers[i])
            if stop_after_epoch is not None and epoch + 1 >= stop_after_epoch:
                break
    finally:
        restore_threads()
        bar.close()
        for writer in writers:
            close_tensorboard(writer)
    for i, model in enumerate(models):
        if world.is_main and model.best.exists():
            run.load_seed_weights(i, load_checkpoint(model.best)["model"])


def _record_epoch(run: Training, seed_index: int, model: ModelDir, state: Dict, improved: bool, writer) -> None:
    """The files of the epoch just trained of seed ``seed_index`` (the run's one seed when not
    stacked; its row: the last of ``state``'s history) in its folder ``model``: its checkpoints
    (:func:`.resume.save_epoch`), ``metrics.csv``, TensorBoard scalars. A checkpoint holds one
    plain network's state dict, also under DDP and with stacked seeds."""
    row = state["history"][-1]
    save_epoch(model, run.seed_cfgs[seed_index], state, run.seed_state(seed_index), row["val_loss"], improved)
    write_history(model.history, state["history"])
    kill_point("epoch-end")
    log_scalars(writer, row, state["epoch"])
