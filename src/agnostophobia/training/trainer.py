"""Training and evaluation loop in the style of torchvision's reference ``train.py``:
``train_one_epoch``, ``evaluate_seeds``; the epochs of ``fit`` and the files they write are :mod:`.fitting`'s.

* Device-agnostic (CPU, CUDA; ``precision``: fp32 or bf16 autocast where native), seeded, deterministic on the CPU:
  the data order of epoch ``e`` depends only on ``(seed, e)``, so a resumed run sees
  exactly the batches an uninterrupted one would. On CUDA a resumed run restores the same
  state (weights, optimiser, every RNG, epoch, data order) and is bit-identical to an
  uninterrupted one only with ``deterministic: true`` (:func:`.device.use_deterministic_algorithms`).
* No host synchronisation per step (issue 21): sums, counts and the divergence flag stay on
  the device, host data reaches it by asynchronous copies (:mod:`.hostsync`), and each
  epoch's training and validation read their results back once, at their end.
* One step function (:func:`training_step`) for every batch; with ``cuda_graph`` the steps of
  full batches are replayed from a CUDA graph of it (:mod:`.cuda_graph`).
* A non-finite training loss is noticed within :data:`DIVERGENCE_CHECK_EVERY` steps all the
  same (a flag kept on the device, copied to the host without waiting), as is a non-finite
  validation loss: the run stops with :class:`TrainingDiverged` and keeps the checkpoints
  of the last good epoch.
* After every epoch the model's folder gets its checkpoints (:mod:`.resume`, which also decides
  when a run may continue) and its logs (:mod:`.epoch_log`: ``metrics.csv``, TensorBoard): :mod:`.fitting`.
* Started by torchrun, every process runs this loop on its shard of each global batch in
  DistributedDataParallel; rank 0 alone writes (:mod:`agnostophobia.training.distributed`).
* One seed, or several trained as one stacked model (:mod:`.seed_batch`): the loop is the same,
  the seed layout (:func:`~.seed_batch.seed_layout`) holds what differs.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from agnostophobia.errors import TrainingDiverged
from agnostophobia.losses import build_loss, inverse_frequency_class_weights, sample_weights, with_logit_layer
from agnostophobia.models import build_model, loaded_weights
from agnostophobia._killpoints import kill_point
from agnostophobia.training import augment, device as devices, distributed
from agnostophobia.training.adversarial import adversarial_loss
from agnostophobia.training.batches import BatchPlan, epoch_order
from agnostophobia.training.checkpoint import seed_everything
from agnostophobia.training.compiled import CompiledOrEager, resolve_compile
from agnostophobia.training.config import TrainConfig
from agnostophobia.training.cuda_graph import (CapturedStep, check_cuda_graph, cuda_capture, plain_optimizer_state,
                                               set_capturable)
from agnostophobia.training.hostsync import HostCopy, read_once, to_device
from agnostophobia.training.loaders import device_data, is_streamed
from agnostophobia.training.precision import autocast, resolve_precision
from agnostophobia.training.schedules import STEPWISE_SCHEDULERS, build_scheduler
from agnostophobia.training.seed_batch import seed_layout

# A non-finite training loss stops the run within this many optimiser steps (DivergenceWatch);
# the flag is also read at every epoch's end.
DIVERGENCE_CHECK_EVERY = 50


@dataclass
class TensorData:
    """Images (uint8, N x C x H x W), labels (int64, -1 = unknown) and, with sample
    weighting, each sample's loss weight, as tensors on a device."""

    images: torch.Tensor
    labels: torch.Tensor
    weights: Optional[torch.Tensor] = None
    num_known: Optional[int] = None  # samples with a label >= 0, counted on the host (None: not yet)

    @classmethod
    def from_split(cls, split, device, knowns_only: bool = False) -> "TensorData":
        images, labels = np.asarray(split.images), np.asarray(split.labels, dtype=np.int64)
        if knowns_only:
            keep = labels >= 0
            images, labels = images[keep], labels[keep]
        return cls(torch.from_numpy(np.ascontiguousarray(images)).to(device),
                   torch.from_numpy(labels).to(device), num_known=int((labels >= 0).sum()))

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def weights_of(self, batch) -> Optional[torch.Tensor]:
        """The loss weights of the samples ``batch`` (indices or a slice); None without weighting."""
        return None if self.weights is None else self.weights[batch]

    augmented_on_read = False  # crop-flip is drawn per batch by the training loop

    def read(self, shards: Iterable, cfg, epoch: int) -> Iterator[Tuple[object, torch.Tensor]]:
        """``(shard, uint8 images of its indices)`` for each shard of an epoch (the interface
        :class:`~agnostophobia.training.loaders.StreamedData` shares)."""
        for shard in shards:
            yield shard, self.images[shard.indices]


def known_count(data) -> int:
    """How many samples of ``data`` have a known label (counted once, on the host where it can be)."""
    if getattr(data, "num_known", None) is None:
        data.num_known = int((data.labels >= 0).sum())
    return data.num_known


def host_labels(split, knowns_only: bool) -> np.ndarray:
    """The labels of ``split`` the trainer keeps (knowns only for an approach without unknowns)."""
    labels = np.asarray(split.labels, dtype=np.int64)
    return labels[labels >= 0] if knowns_only else labels


def initialise_from_data(model: torch.nn.Module, split) -> None:
    """A model's data-dependent initialisation (e.g. :class:`~agnostophobia.models.AirbenchNet`'s
    patch whitening) from the training ``split``'s images, where it declares one; a resumed run
    then loads its checkpoint over it. A split of files read while training is not decoded here:
    such a model keeps its default initialisation there."""
    initialise = getattr(model, "initialise_from_data", None)
    if initialise is None or is_streamed(split):
        return
    images = np.asarray(split.images)  # a view: the model reads the few it needs
    if len(images):
        initialise(torch.from_numpy(np.ascontiguousarray(images)))


class Training:
    """The pieces of one run: model, loss, optimiser, scheduler, data, device.

    With ``seeds`` (a list), the runs of ``cfg`` with those seeds as one stacked model
    (:mod:`.seed_batch`): :attr:`model` is a :class:`~.seed_batch.StackedSeeds`, losses, sums and
    flags carry a leading seed dimension (:attr:`seed_shape`), and each seed keeps its own
    initialisation, data order and augmentation. Without, one run, as it always was. What
    differs between the two is held by :attr:`seed_layout`, never asked here.
    """

    def __init__(self, cfg: TrainConfig, protocol, device: Optional[torch.device] = None,
                 seeds: Optional[Sequence[int]] = None):
        cfg.validate()
        self.seed_layout = seed_layout(seeds)
        self.seed_cfgs = [cfg] if seeds is None else [dataclasses.replace(cfg, seed=seed) for seed in seeds]
        self.cfg = self.seed_cfgs[0]  # what the seeds share
        self.seed_shape = self.seed_layout.shape
        self.world = distributed.current()  # one process, or this one's place under torchrun
        self.world.check_batch_size(cfg.batch_size)
        self.device = self.world.place(device or devices.resolve_device(cfg.device))
        if cfg.deterministic:
            devices.use_deterministic_algorithms(self.device)
        self.num_classes = protocol.num_classes
        self.seed_layout.check(self.device, self.world.distributed, is_streamed(protocol.train), cfg.approach)
        models = []
        for seed_cfg in self.seed_cfgs:  # each network initialised as its separate run initialises it
            seed_everything(seed_cfg.seed)
            self.loss_fn = build_loss(cfg.approach, self.num_classes, **cfg.loss_settings())
            # the logit layer as the loss trains it: a distance-based loss (ARPL, CAC) puts its own there
            models.append(with_logit_layer(build_model(cfg.model, num_outputs=self.loss_fn.num_outputs,
                                                       **cfg.model_kwargs), self.loss_fn))
            initialise_from_data(models[-1], protocol.train)
        # network: what trains the model, DDP under torchrun; compiled where the config asks (.compiled)
        # channels_last where it is asked for and oneDNN computes it correctly (device.channels_last_is_safe)
        self.channels_last = cfg.channels_last and devices.channels_last_is_safe(models[0], self.device)
        self.weights_loaded = loaded_weights(models[0])  # the config's starting weights, said when a run starts
        self.model, self.network = self.seed_layout.place(models, self.world, self.device, self.channels_last)
        self.compiled = resolve_compile(cfg.compile, self.device, bool(self.seed_shape), self.world.distributed)[0]
        if self.compiled:
            self.network = CompiledOrEager(self.network)
        self.loss_fn.to(self.device).attach(self.model)  # a loss's own parameters and state live beside the model
        knowns_only = not self.loss_fn.trains_on_unknowns
        # a split of image files (a streamed protocol from files) is read through worker processes
        self.train_data = device_data(protocol.train, self.device, knowns_only, TensorData.from_split)
        self.val_data = device_data(protocol.val, self.device, knowns_only, TensorData.from_split)
        if len(self.train_data) == 0:
            raise ValueError(f"protocol {protocol.name!r}: the training split has no usable samples")
        train_labels = host_labels(protocol.train, knowns_only)  # on the host: nothing is read back from the device
        # batches of fixed knowns and negatives (negatives_per_batch), or one shuffled order (None)
        self.batch_plan = None if knowns_only else BatchPlan.for_labels(
            train_labels, cfg.batch_size, cfg.negatives_per_batch)
        self._check_labels(protocol)
        self.class_weights = None
        if cfg.sample_weighting:
            self.class_weights = inverse_frequency_class_weights(train_labels, self.num_classes)
            val_labels = host_labels(protocol.val, knowns_only)
            for data, labels in ((self.train_data, train_labels), (self.val_data, val_labels)):
                data.weights = sample_weights(torch.from_numpy(labels), self.class_weights).to(self.device)
            self.class_weights = self.class_weights.to(self.device)
        # the step captured in a CUDA graph (config key cuda_graph): refused in one line where it cannot be
        self.graphed = check_cuda_graph(cfg.cuda_graph, self.device, self.world.distributed, cfg.approach)
        # Adam's step counters on the device, where a graph replays them (the CPU tests' stand-in needs none)
        self.capturable = self.graphed and self.device.type == "cuda"
        self.optimizer = self._optimizer()
        self.scheduler = self._scheduler()
        self.precision = resolve_precision(cfg.precision, self.device)
        # what the training steps add to: one allocation per run (a captured step writes to the
        # same memory at every replay), zeroed by train_steps at each epoch's start
        self.step_sums = StepSums.zeros(self.seed_shape, self.device)
        self.captured_step = self.capture_step(cuda_capture) if self.graphed else None

    def capture_step(self, capture) -> CapturedStep:
        """The run's :func:`training_step` on full batches, replayed from a graph ``capture`` makes
        (:func:`~.cuda_graph.cuda_capture`; the CPU tests pass a stand-in)."""
        share = self.cfg.batch_size / self.world.size  # a full batch (DDP is refused with cuda_graph)
        return CapturedStep(lambda images, indices, draws: training_step(self, images, indices, draws, share),
                            lambda: tuple(group["lr"] for group in self.optimizer.param_groups), self.device, capture)

    def _check_labels(self, protocol) -> None:
        """Check every label once (on the host), so the loss need not read labels back per batch."""
        for name in ("train", "val"):
            labels = np.asarray(getattr(protocol, name).labels)
            if len(labels) and int(labels.max()) >= self.num_classes:
                raise ValueError(f"protocol {protocol.name!r}: the {name} split has label {int(labels.max())}, "
                                 f"but only {self.num_classes} known classes (0..{self.num_classes - 1})")
        self.loss_fn.check_values = False

    @property
    def steps_scheduler(self) -> bool:
        """Whether the learning-rate schedule moves after every step (onecycle, cosine-per-step), not every epoch."""
        return self.cfg.scheduler in STEPWISE_SCHEDULERS

    @property
    def epoch_length(self) -> int:
        """Samples an epoch draws: each training sample once, or as :attr:`batch_plan` draws them."""
        return len(self.train_data) if self.batch_plan is None else len(self.batch_plan)

    @property
    def steps_per_epoch(self) -> int:
        return self.world.steps_per_epoch(self.epoch_length, self.cfg.batch_size)

    def _optimizer(self):
        params, cfg = [*self.model.parameters(), *self.loss_fn.parameters()], self.cfg
        if cfg.optimizer == "adam":  # captured: its step counters on the device (cuda_graph)
            adam = torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay, capturable=self.capturable)
            adam._warned_capturable_if_run_uncaptured = True  # warm-up and last batches step uncaptured, as they must
            return adam
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                               nesterov=cfg.momentum > 0)

    def _scheduler(self):
        return build_scheduler(self.optimizer, self.cfg, self.steps_per_epoch)

    def batch_loss(self, x, y, weights=None, shared: bool = False):
        """The loss (mean over the batch) and logits. In training mode through :attr:`network`
        (DDP under torchrun); in eval mode through the plain model, which syncs nothing.

        Seeds stacked: every seed's loss (S,) and logits (S, N, C) from one call; ``x``, ``y``
        and ``weights`` have a seed dimension, or with ``shared`` all seeds see the same ones."""
        network = self.network if self.model.training else self.model
        return self.seed_layout.map(self._one_seed_loss, network, x, y, weights, shared)

    def _one_seed_loss(self, network, x, y, weights):
        # a captured step must not keep autocast's cast weights from one replay to the next
        with autocast(self.device, self.precision, cache=not self.graphed):
            logits, features = network(x)
        loss = self.loss_fn(logits.float(), y, features=features.float(), sample_weight=weights)
        return loss, logits

    def training_loss(self, x, y, weights=None):
        """:meth:`batch_loss`, plus the loss of FGSM examples when the config asks for adversarial
        training (``adversarial_epsilon > 0``; ``training.adversarial``)."""
        if self.cfg.adversarial_epsilon > 0:
            return adversarial_loss(lambda xs, ys: self.batch_loss(xs, ys, weights), x, y,
                                    self.cfg.adversarial_epsilon)
        return self.batch_loss(x, y, weights)

    def correct_knowns(self, logits, y) -> torch.Tensor:
        """Known samples classified correctly (a device tensor; per seed when stacked). No mask: an
        unknown's label is negative and never equals a predicted class, and a boolean mask would
        cost a host sync."""
        return (logits[..., :self.num_classes].argmax(-1) == y).sum(-1)

    def epoch_order(self, epoch: int) -> torch.Tensor:
        """The epoch's sample order (n,), or each seed's (S, n), on the device."""
        plan = self.batch_plan
        orders = [epoch_order(len(self.train_data), cfg.seed, epoch) if plan is None else plan.order(cfg.seed, epoch)
                  for cfg in self.seed_cfgs]
        return to_device(self.seed_layout.stack(orders), self.device)

    def augment_generator(self, epoch: int) -> List[torch.Generator]:
        """The host generators of the epoch's augmentation draws, one per seed."""
        return [torch.Generator().manual_seed(cfg.seed * 7_919 + epoch) for cfg in self.seed_cfgs]

    # -- each seed as a separate run holds it (checkpoints, stored outputs) ---------------------
    def seed_state(self, seed_index: int) -> Dict:
        """Seed ``seed_index``'s model, optimiser and scheduler state dicts, in a separate run's form."""
        model, optimizer = self.seed_layout.state(self.model, self.optimizer, seed_index)
        # an eager run's form whatever this one's cuda_graph: it resumes with the key on or off
        return {"model": model, "optimizer": plain_optimizer_state(optimizer), "scheduler": self.scheduler.state_dict(),
                "loss": self.loss_fn.state_dict()}  # a loss's parameters and state (VOS), empty for most

    def load_seed_states(self, saved: Sequence[Dict], where: Sequence[str]) -> None:
        """Continue from each seed's checkpoint (``last.pt`` of separate or stacked runs alike)."""
        self.seed_layout.load_states(self.model, self.optimizer, saved, where)
        set_capturable(self.optimizer, self.capturable)  # a saved state's flag is the saving run's, not this one's
        self.scheduler.load_state_dict(saved[0]["scheduler"])
        self.loss_fn.load_state_dict(saved[0].get("loss", {}))  # checkpoints before losses had state: none

    def load_seed_weights(self, seed_index: int, state: Dict) -> None:
        """Seed ``seed_index``'s network gets the weights ``state`` (e.g. of its ``best.pt``)."""
        self.seed_layout.load_weights(self.model, seed_index, state)

    def seed_run(self, seed_index: int) -> "SeedRun":
        """Seed ``seed_index``'s trained network as a plain module, with what predicting needs."""
        model = self.seed_layout.seed_model(self.model, seed_index)
        if self.channels_last:
            model.to(memory_format=torch.channels_last)
        return SeedRun(model, self.seed_cfgs[seed_index], self.device, self.precision, self.channels_last)


@dataclass
class SeedRun:
    """What :func:`agnostophobia.training.outputs.store_outputs` reads of a trained run."""

    model: torch.nn.Module
    cfg: TrainConfig
    device: torch.device
    precision: str
    channels_last: bool  # the memory format it trained in (Training.channels_last)


class DivergenceWatch:
    """Notices a non-finite training loss without a host synchronisation per batch.

    Two scalars stay on the device: whether a non-finite loss has been seen, and how many
    steps of the epoch came before the first one. Every ``DIVERGENCE_CHECK_EVERY // 2`` steps
    (:meth:`update`) they are copied to the host without waiting (:class:`.hostsync.HostCopy`);
    a copy is read at once if it has arrived (always on the CPU), else at the next such step,
    waiting then if the device is still that far behind (on a GPU it never is in practice). So a
    non-finite loss stops the run within :data:`DIVERGENCE_CHECK_EVERY` steps; the epoch's end
    reads the flags with its other results (:meth:`flags`, :meth:`raise_if_diverged`).
    """

    def __init__(self, run: Training, epoch: int, sums: "StepSums"):
        self.run, self.epoch = run, epoch
        self.seen, self.steps_before = sums.seen, sums.steps_before  # per seed when stacked; the steps write them
        self.every = max(1, DIVERGENCE_CHECK_EVERY // 2)
        self.copy = HostCopy(run.device)

    def check(self, step: int) -> None:
        """After training step ``step`` (counting from 0), whose loss the step recorded on the
        device (:meth:`StepSums.record_loss`)."""
        if (step + 1) % self.every:
            return
        if self.copy.started:  # from `every` steps ago: on a GPU it has long arrived
            self.raise_if_diverged(self.copy.read())
        self.copy.start(self.flags())
        if self.copy.done():
            self.raise_if_diverged(self.copy.read())

    def flags(self) -> torch.Tensor:
        """``[seen, -steps_before]`` (each per seed when stacked) on the device; under DDP the
        earliest non-finite loss of any process."""
        flags = torch.stack([self.seen.long(), -self.steps_before])
        self.run.world.max_(flags)
        return flags

    def raise_if_diverged(self, values: Sequence) -> None:
        """Raise :class:`TrainingDiverged` for the values of :meth:`flags` read on the host (a flat
        list: the seeds' ``seen``, then their ``-steps_before``), naming the first seed that diverged."""
        count = len(self.run.seed_cfgs)
        for cfg, seen, minus_steps_before in zip(self.run.seed_cfgs, values[:count], values[count:2 * count]):
            if seen:
                step, steps_per_epoch = int(-minus_steps_before) + 1, self.run.steps_per_epoch
                global_step = self.epoch * steps_per_epoch + step
                raise diverged(cfg, self.epoch + 1,
                               f"the training loss became non-finite at step {step} of {steps_per_epoch} "
                               f"of the epoch (global step {global_step}, counting from 1)")


def diverged(cfg: TrainConfig, epoch: int, what: str) -> TrainingDiverged:
    """The one-line error for a run whose ``epoch`` (counting from 1) produced a non-finite loss."""
    kept = (f"the checkpoints of epoch {epoch - 1} are kept" if epoch > 1
            else "no epoch finished, so no checkpoint was written")
    return TrainingDiverged(f"{cfg.approach} (seed {cfg.seed}) diverged in epoch {epoch}: {what}; {kept}; "
                            f"try a lower lr", approach=cfg.approach)


@dataclass
class StepSums:
    """The device tensors the training steps add to (each per seed when stacked): allocated once
    per run (:meth:`Training.step_sums`), zeroed at each epoch's start."""

    loss_sum: torch.Tensor       # the batch losses times the batch sizes (summed over DDP processes at the end)
    correct: torch.Tensor        # known samples classified correctly
    seen: torch.Tensor           # whether a non-finite loss was seen (DivergenceWatch)
    steps_before: torch.Tensor   # steps of the epoch before the first non-finite loss

    @classmethod
    def zeros(cls, shape, device) -> "StepSums":
        return cls(torch.zeros(shape, device=device), torch.zeros(shape, dtype=torch.long, device=device),
                   torch.zeros(shape, dtype=torch.bool, device=device), torch.zeros(shape, dtype=torch.long, device=device))

    def zero_(self) -> "StepSums":
        for tensor in (self.loss_sum, self.correct, self.seen, self.steps_before):
            tensor.zero_()
        return self

    def record_loss(self, loss: torch.Tensor) -> None:
        """Whether ``loss`` is non-finite, and how many steps came before the first that was, on the device."""
        self.seen |= ~torch.isfinite(loss.detach())
        self.steps_before += ~self.seen


@dataclass
class EpochSums:
    """What the steps of an epoch accumulated on the device; read once, at the epoch's end."""

    loss_sum: torch.Tensor
    correct: torch.Tensor
    watch: DivergenceWatch


def training_step(run: Training, images: torch.Tensor, indices: torch.Tensor, draws: Optional[torch.Tensor],
                  share: float, loss_scale=None) -> None:
    """One optimiser step on the batch of uint8 ``images`` (the samples ``indices`` of the
    training data), adding its loss, correct knowns and divergence flags to the run's
    ``step_sums`` (one allocation per run, which a captured step writes at every replay). Everything
    stays on the device and nothing is read back, so the step can be captured in a CUDA graph
    (:mod:`.cuda_graph`) as it is.

    ``draws``: the batch's crop-flip draws on the device (None: no augmentation here); ``share``:
    the global batch size over the processes (the loss sum's weight); ``loss_scale``: under DDP,
    this process's share of the global-batch mean (None in one process)."""
    x, y = augment.to_input(images, run.channels_last), run.train_data.labels[indices]
    if draws is not None:
        x = augment.apply_crop_flip(x, draws, run.cfg.crop_padding, run.cfg.crop_padding_mode)
    x = run.loss_fn.mix_batch(x, y)  # the loss's batch hook (MixOE); the identity for most losses
    loss, logits = run.training_loss(x, y, run.train_data.weights_of(indices))
    if loss_scale is not None:
        loss = loss * loss_scale
    run.optimizer.zero_grad(set_to_none=True)
    loss.sum().backward()  # stacked seeds: seed s's loss depends on seed s's weights alone
    run.optimizer.step()
    sums = run.step_sums
    sums.loss_sum += loss.detach() * share  # loss * global batch / W, summed over processes at the end
    sums.correct += run.correct_knowns(logits.detach(), y)
    sums.record_loss(loss)


def train_steps(run: Training, epoch: int, bar=None) -> EpochSums:
    """The optimiser steps of one epoch (:func:`training_step`), in its seeded order, with no
    host synchronisation on the way (except a rare :class:`DivergenceWatch` wait); results stay
    on the device. Seeds stacked: each step takes every seed's next batch in its own order, at
    once. With ``cuda_graph`` every full batch is replayed from the captured step."""
    cfg, data, world = run.cfg, run.train_data, run.world
    run.model.train()
    run.loss_fn.train().begin_epoch(epoch, cfg.epochs)  # the loss's epoch hook (VOS starts synthesising)
    world.seed_epoch(cfg.seed, epoch)
    order = run.epoch_order(epoch)
    known_labels = None if run.loss_fn.trains_on_unknowns else data.labels  # what the loss averages over
    augment_rng = run.augment_generator(epoch) if cfg.augment == "crop-flip" and not data.augmented_on_read else None
    step_sums = run.step_sums.zero_()
    watch = DivergenceWatch(run, epoch, step_sums)
    shards = world.shards(order, cfg.batch_size, known_labels)
    for step, (shard, images) in enumerate(data.read(shards, cfg, epoch)):
        n = shard.indices.shape[-1]
        draws = None if augment_rng is None else to_device(
            augment.crop_flip_draws(augment_rng, n, shard.offset, shard.global_size, cfg.crop_padding), run.device)
        if run.captured_step is not None and n == cfg.batch_size:
            run.captured_step(images, shard.indices, draws)
        else:  # eager: no cuda_graph, or the short last batch
            training_step(run, images, shard.indices, draws, shard.global_size / world.size, shard.loss_scale)
        if run.steps_scheduler:
            run.scheduler.step()
        kill_point("train-step")
        watch.check(step)
        if bar is not None:
            bar.update(1)
    return EpochSums(step_sums.loss_sum, step_sums.correct, watch)


def train_one_epoch(run: Training, epoch: int, bar=None) -> Dict[str, float]:
    """One pass over the training data in the epoch's seeded order (:func:`train_steps`), its
    results read back in one host synchronisation at the end.

    Raises :class:`TrainingDiverged` when a loss is non-finite (noticed within
    :data:`DIVERGENCE_CHECK_EVERY` steps, and at the latest at the epoch's end).
    """
    return _one_run(run, train_one_epoch_seeds(run, epoch, bar))


def train_one_epoch_seeds(run: Training, epoch: int, bar=None) -> List[Dict[str, float]]:
    """:func:`train_one_epoch` of each seed (one row; one per seed when stacked)."""
    start = time.perf_counter()
    sums = train_steps(run, epoch, bar)
    flags = sums.watch.flags()
    run.world.sum_(sums.loss_sum, sums.correct)
    values = read_once(flags, sums.loss_sum, sums.correct)
    count = len(run.seed_cfgs)
    sums.watch.raise_if_diverged(values[:2 * count])
    if not run.steps_scheduler:
        run.scheduler.step()
    run.world.sync_buffers(run.model)
    seconds = time.perf_counter() - start  # after the read: on a GPU, every step has run by then
    data, drawn = run.train_data, run.epoch_length
    return [{"train_loss": loss_sum / drawn, "train_acc": int(correct) / max(known_count(data), 1),
             "train_images_per_s": drawn / seconds, "train_seconds": seconds}
            for loss_sum, correct in zip(values[2 * count:3 * count], values[3 * count:])]


def _one_run(run: Training, rows: List[Dict[str, float]]) -> Dict[str, float]:
    if run.seed_shape:
        raise ValueError("this run trains several seeds as one model: use the *_seeds function, "
                         "which returns a row per seed")
    return rows[0]


@torch.inference_mode()
def evaluate_seeds(run: Training, data: TensorData) -> List[Dict[str, float]]:
    """Mean loss (the selection criterion) and accuracy on knowns over ``data``, of each seed (one
    row; one per seed when stacked)."""
    loss_sums, corrects = evaluation_sums(run, data)
    if not len(data):  # no validation split: nothing measured (fit then keeps the last epoch)
        return [{"val_loss": float("nan"), "val_acc": float("nan")} for _ in run.seed_cfgs]
    values = read_once(loss_sums, corrects)  # the one host synchronisation of the evaluation
    count = len(run.seed_cfgs)
    return [{"val_loss": loss_sum / len(data), "val_acc": int(correct) / max(known_count(data), 1)}
            for loss_sum, correct in zip(values[:count], values[count:])]


@torch.inference_mode()
def evaluation_sums(run: Training, data: TensorData) -> Tuple[torch.Tensor, torch.Tensor]:
    """The summed loss (float64, as Python floats were) and the correct knowns over ``data``,
    accumulated on the device without a host synchronisation (summed over DDP processes)."""
    run.model.eval()
    run.loss_fn.eval()  # a loss with state (VOS) keeps it as it was
    loss_sum = torch.zeros(run.seed_shape, dtype=torch.float64, device=run.device)
    correct = torch.zeros(run.seed_shape, dtype=torch.long, device=run.device)
    for i in run.world.eval_starts(len(data), run.cfg.eval_batch_size):  # all batches in one process
        batch = slice(i, i + run.cfg.eval_batch_size)
        x = augment.to_input(data.images[batch], run.channels_last)
        y = data.labels[batch]
        loss, logits = run.batch_loss(x, y, data.weights_of(batch), shared=True)  # stacked: every seed sees them
        loss_sum += loss.double() * len(y)
        correct += run.correct_knowns(logits, y)
    run.world.sum_(loss_sum, correct)
    return loss_sum, correct
