"""Batches of a fixed number of knowns and negatives (``negatives_per_batch``) and the per-step cosine
(``scheduler: cosine-per-step``): how Outlier Exposure's code and the fine-tunes that extend it draw and
schedule their steps (``fine_tune_exact``)."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from agnostophobia.errors import ConfigError
from agnostophobia.training.batches import BatchPlan
from agnostophobia.training.config import TrainConfig
from agnostophobia.training.schedules import COSINE_FLOOR
from agnostophobia.training.trainer import Training, train_one_epoch


def _labels(knowns=50, negatives=17, seed=0):
    labels = np.r_[np.arange(knowns) % 3, -np.ones(negatives, dtype=np.int64)]
    return np.random.default_rng(seed).permutation(labels)


@pytest.mark.parametrize("knowns,negatives,batch_size,per_batch", [(50, 17, 12, 8), (48, 100, 12, 4), (7, 3, 5, 1)])
def test_each_batch_holds_its_knowns_and_negatives_and_an_epoch_passes_over_the_knowns_once(
        knowns, negatives, batch_size, per_batch):
    labels = _labels(knowns, negatives)
    plan = BatchPlan.for_labels(labels, batch_size, per_batch)
    order = plan.order(seed=3, epoch=1)
    batches = order.split(batch_size)
    assert len(order) == len(plan) and len(batches) == plan.steps == math.ceil(knowns / (batch_size - per_batch))
    for batch in batches:
        batch_labels = labels[batch.numpy()]
        assert (batch_labels < 0).sum() == per_batch
        # interleaved: the two halves DDP's two processes take hold half the negatives each, to one
        half = len(batch) // 2
        assert abs(2 * int((batch_labels[:half] < 0).sum()) - per_batch) <= 2
    assert sorted(order[labels[order.numpy()] >= 0].tolist()) == sorted(np.flatnonzero(labels >= 0).tolist())
    drawn = np.bincount(order[labels[order.numpy()] < 0].numpy(), minlength=len(labels))[labels < 0]
    assert drawn.max() - drawn.min() <= 1  # the negatives cycle: none drawn twice before every one once


def test_the_order_is_a_function_of_seed_and_epoch_only():
    plan = BatchPlan.for_labels(_labels(), 12, 8)
    assert torch.equal(plan.order(1, 2), BatchPlan.for_labels(_labels(), 12, 8).order(1, 2))
    assert not torch.equal(plan.order(1, 2), plan.order(1, 3))
    assert not torch.equal(plan.order(1, 2), plan.order(2, 2))
    assert BatchPlan.for_labels(_labels(), 12, 0) is None


def test_a_split_without_negatives_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="negatives_per_batch.*no negatives"):
        BatchPlan.for_labels(np.arange(10) % 3, 12, 4)


def test_the_config_refuses_a_batch_without_knowns_and_a_captured_per_step_schedule():
    with pytest.raises(ConfigError, match="negatives_per_batch"):
        TrainConfig(batch_size=8, negatives_per_batch=8).validate()
    with pytest.raises(ConfigError, match="cosine-per-step"):
        TrainConfig(scheduler="cosine-per-step", cuda_graph=True).validate()


def _protocol(n=96, classes=3):
    rng = np.random.default_rng(0)
    labels = np.where(np.arange(n) % 4 == 3, -1, np.arange(n) % classes).astype(np.int64)
    images = rng.integers(0, 255, (n, 1, 28, 28)).astype(np.uint8)
    split = SimpleNamespace(images=images, labels=labels)
    return SimpleNamespace(name="synthetic", num_classes=classes, train=split, val=split)


def _config(**keys):
    return TrainConfig(**{"approach": "outlier-exposure", "model": "lenet++", "epochs": 2, "batch_size": 12,
                          "lr": 0.01, "optimizer": "sgd", "device": "cpu", "precision": "fp32",
                          "tensorboard": False, "progress": False, **keys})


def test_the_trainer_draws_the_plans_batches_and_steps_the_cosine_as_outlier_exposures_code():
    """The lr of every step is Outlier Exposure's ``cosine_annealing(step, epochs * len(loader), 1,
    1e-6 / lr)`` (MNIST/oe_tune.py), written out here as the authors wrote it."""
    protocol = _protocol()
    run = Training(_config(negatives_per_batch=8, scheduler="cosine-per-step"), protocol)
    knowns = int((protocol.train.labels >= 0).sum())
    assert run.steps_per_epoch == math.ceil(knowns / 4) == run.batch_plan.steps
    seen, negatives = [], []
    run.optimizer.register_step_pre_hook(lambda optimizer, args, kwargs: seen.append(optimizer.param_groups[0]["lr"]))
    original = run.loss_fn.forward
    run.loss_fn.forward = lambda logits, labels, *rest, **kw: (negatives.append(int((labels < 0).sum())),
                                                               original(logits, labels, *rest, **kw))[1]
    row = train_one_epoch(run, 0)
    total, lr = 2 * run.steps_per_epoch, 0.01
    authors = [lr * (1e-6 / lr + (1 - 1e-6 / lr) * 0.5 * (1 + np.cos(step / total * np.pi)))
               for step in range(run.steps_per_epoch)]
    assert seen == pytest.approx(authors, rel=1e-9) and COSINE_FLOOR == 1e-6
    assert negatives == [8] * run.steps_per_epoch
    assert math.isfinite(row["train_loss"])


def test_an_approach_on_knowns_only_ignores_negatives_per_batch():
    run = Training(_config(approach="softmax", negatives_per_batch=8), _protocol())
    assert run.batch_plan is None and run.steps_per_epoch == math.ceil(72 / 12)


def test_fine_tune_exact_trains_a_fine_tune_with_its_authors_batch_and_schedule():
    from agnostophobia.losses import LOSSES
    from agnostophobia.training import load_experiment

    experiment = load_experiment("lenet++")
    cfg = experiment.with_set_options([("fine_tune_exact", True)]).for_approach("outlier-exposure-ft", seed=0)
    mnist = LOSSES.get("outlier-exposure-ft").fine_tune.for_images("glyph")
    assert (cfg.batch_size, cfg.negatives_per_batch, cfg.scheduler, cfg.lr) == (150, 100, "cosine-per-step", mnist.lr)
    shared = experiment.for_approach("outlier-exposure-ft", seed=0)
    assert (shared.batch_size, shared.negatives_per_batch, shared.scheduler) == (
        experiment.train.batch_size, 0, "cosine")


@pytest.mark.parametrize("size", [2, 3])
def test_each_process_under_ddp_takes_its_share_of_a_batchs_knowns_and_negatives(size):
    """DDP cuts every global batch into contiguous shards (``training.distributed``): each holds the
    batch's proportion of negatives, to one, and together they are the batch."""
    from agnostophobia.training.distributed import World

    labels = _labels(knowns=60, negatives=40)
    plan = BatchPlan.for_labels(labels, 24, 16)
    order = plan.order(seed=0, epoch=0)
    per_rank = [list(World(rank, size).shards(order, 24)) for rank in range(size)]
    for step, whole in enumerate(order.split(24)):
        parts = [per_rank[rank][step].indices for rank in range(size)]
        assert torch.equal(torch.cat(parts), whole)
        for part in parts:
            share = 16 * len(part) / len(whole)
            assert abs(int((labels[part.numpy()] < 0).sum()) - share) <= 1
