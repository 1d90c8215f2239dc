"""No host synchronisation in the training loop (issue 21, item 1).

On the CPU a step is traced on the ``meta`` device, which holds shapes but no values: an
operation that needs a value on the host (``item()``, ``bool(tensor)``, a boolean mask,
``nonzero``, ``unique``) cannot run there, and :class:`HostSyncs` also records what would make
the host wait for a GPU although meta runs it (a blocking copy from the host, a host tensor
mixed into a device operation, a copy back to the host). On CUDA the same steps run under
``torch.cuda.set_sync_debug_mode("error")``.
"""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from agnostophobia.errors import TrainingDiverged
from agnostophobia.training import trainer
from agnostophobia.losses import LOSSES
from agnostophobia.losses import _base as loss_base
from agnostophobia.training.distributed import SINGLE
from agnostophobia.training.hostsync import HostCopy, read_once
from agnostophobia.training.trainer import (DivergenceWatch, StepSums, Training, evaluation_sums,
                                            train_one_epoch, train_steps)
from augmentation import crop_flip
from synthetic import synthetic_protocol
from tests.training.test_trainer import tiny_config

META = torch.device("meta")

# operations whose result the host must read from the device (a synchronisation on CUDA)
DATA_DEPENDENT = {"aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique2",
                  "aten::unique_dim", "aten::unique_consecutive", "aten::repeat_interleave", "aten::equal",
                  "aten::is_nonzero", "aten::bincount", "aten::histc", "aten::allclose"}
INDEXING = {"aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"}
COPIES = {"aten::_to_copy", "aten::copy_"}

# every approach; and with crop-flip augmentation and FGSM examples, which add host draws and a second pass
VARIANTS = [pytest.param(name, {}, id=name) for name in LOSSES.names()] + [
    pytest.param(name, {"augment": "crop-flip", "adversarial_epsilon": 0.01}, id=f"{name}-augment-fgsm")
    for name in LOSSES.names()]


class HostSyncs(TorchDispatchMode):
    """Records each operation on ``device`` that would make the host wait for a GPU."""

    def __init__(self, device: torch.device):
        super().__init__()
        self.device, self.found = device, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if name in COPIES or any(t.device == self.device for t in tensors):
            problem = self.problem(name, args, kwargs, tensors)
            if problem:
                self.found.append(f"{name}: {problem}")
        return func(*args, **kwargs)

    def problem(self, name, args, kwargs, tensors):
        if name in DATA_DEPENDENT:
            return "reads a value on the host"
        if name in INDEXING and any(t is not None and t.dtype in (torch.bool, torch.uint8) for t in args[1]):
            return "indexes with a boolean mask (nonzero on the host)"
        if name in COPIES:
            if not isinstance(args[0], torch.Tensor):  # a Python number made a tensor (vmap does): no copy
                return None
            source, target = (args[0], kwargs.get("device") or args[0].device) if name == "aten::_to_copy" \
                else (args[1], args[0].device)
            blocking = not kwargs.get("non_blocking", len(args) > 2 and args[2])
            if source.device.type == "cpu" and target == self.device and blocking:
                return "copies from the host without non_blocking"
            if source.device == self.device and torch.device(target).type == "cpu":
                return "copies to the host"
            return None
        if any(t.device.type == "cpu" and t.dim() > 0 for t in tensors):
            return "mixes a host tensor into a device operation"
        return None


def meta_run(approach, options, monkeypatch, seeds=None) -> Training:
    # the watch's copies to the host are tested below; meta tensors have no values to copy
    monkeypatch.setattr(trainer, "DIVERGENCE_CHECK_EVERY", 10 ** 6)
    # the losses refuse meta tensors from a user (tests/losses/test_losses.py); here meta is the tracer
    monkeypatch.setattr(loss_base, "check_tensor_storage", lambda tensor, name, device=None: tensor)
    cfg = tiny_config(approach=approach, precision="fp32", sample_weighting=True, **options)
    return Training(cfg, synthetic_protocol(), device=META, seeds=seeds)


@pytest.mark.parametrize("approach, options", VARIANTS)
def test_training_steps_of_every_approach_need_no_host_synchronisation(approach, options, monkeypatch):
    run = meta_run(approach, options, monkeypatch)
    with HostSyncs(META) as syncs:
        sums = train_steps(run, 0)
    assert syncs.found == []
    assert sums.loss_sum.device == META and sums.correct.device == META


@pytest.mark.parametrize("approach", LOSSES.names())
def test_validation_batches_need_no_host_synchronisation(approach, monkeypatch):
    run = meta_run(approach, {}, monkeypatch)
    with HostSyncs(META) as syncs:
        loss_sum, correct = evaluation_sums(run, run.val_data)
    assert syncs.found == [] and loss_sum.device == META


def test_the_sync_detector_sees_what_a_gpu_would_wait_for():
    """The detector of the tests above records each kind of synchronisation it claims to."""
    x, mask = torch.zeros(4, device=META), torch.tensor([True, False, True, False])
    with HostSyncs(META) as syncs:
        x[mask]
        x[torch.tensor([0, 2])]  # the index is on the host
        torch.arange(4).to(META)
        torch.arange(4).to(META, non_blocking=True)  # allowed: an asynchronous copy
    assert [entry.split(": ", 1)[1] for entry in syncs.found] == [
        "indexes with a boolean mask (nonzero on the host)", "mixes a host tensor into a device operation",
        "copies from the host without non_blocking"]


def reference_crop_flip(x, generator, pad=4, offset=0, batch_size=None, mode="constant"):
    """The per-sample loop the device crop-flip replaced (it read the draws as Python numbers and flipped by a mask);
    the padding by numpy's np.pad (zeros, or ``reflect``: mirrored without repeating the edge, as torch's)."""
    n, _, h, w = x.shape
    batch_size = batch_size or n
    padded = torch.from_numpy(np.pad(x.numpy(), ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode=mode))
    mine = slice(offset, offset + n)
    dy = torch.randint(0, 2 * pad + 1, (batch_size,), generator=generator)[mine].tolist()
    dx = torch.randint(0, 2 * pad + 1, (batch_size,), generator=generator)[mine].tolist()
    flip = (torch.rand(batch_size, generator=generator) < 0.5)[mine]
    out = torch.stack([padded[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(n)])
    out[flip] = out[flip].flip(-1)
    return out


@pytest.mark.parametrize("mode", ["constant", "reflect"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_crop_flip_on_the_device_equals_the_per_sample_loop_bit_for_bit(channels_last, mode):
    x = torch.rand(9, 3, 12, 10)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    for offset, size in ((0, None), (4, 13)):
        got = crop_flip(x, torch.Generator().manual_seed(3), offset=offset, batch_size=size, mode=mode)
        expected = reference_crop_flip(x, torch.Generator().manual_seed(3), offset=offset, batch_size=size,
                                       mode=mode)
        assert torch.equal(got, expected) and got.is_contiguous()


# ------------------------------------------------------------------ the divergence watch
def watch_for(epoch=0, steps_per_epoch=200):
    """The sums a step records its loss in, and the watch that reads them."""
    cfg = tiny_config()
    run = SimpleNamespace(device=torch.device("cpu"), world=SINGLE, cfg=cfg, seed_cfgs=[cfg], seed_shape=(),
                          steps_per_epoch=steps_per_epoch)
    sums = StepSums.zeros((), torch.device("cpu"))
    return sums, DivergenceWatch(run, epoch, sums)


@pytest.mark.parametrize("bad_step", [0, 23, 24, 25, 49, 120])
def test_a_lagging_device_stops_the_run_within_divergence_check_every_steps(bad_step, monkeypatch):
    """On a GPU the flags' copy to the host arrives some steps after it was queued; even if it
    never arrives before the next look (HostCopy.done always false), the run stops within
    DIVERGENCE_CHECK_EVERY steps of the first non-finite loss and names that step."""
    monkeypatch.setattr(HostCopy, "done", lambda self: False)
    sums, watch = watch_for()
    ran = 0
    with pytest.raises(TrainingDiverged, match=f"at step {bad_step + 1} of 200 of the epoch"):
        for step in range(200):
            ran = step + 1
            sums.record_loss(torch.tensor(float("nan") if step >= bad_step else 1.0))
            watch.check(step)
    assert ran - bad_step <= trainer.DIVERGENCE_CHECK_EVERY  # steps run from the bad one on, both counted


def test_read_once_returns_several_results_exactly():
    values = read_once(torch.tensor([1, -7]), torch.tensor(0.1, dtype=torch.float32), torch.tensor(2 ** 40))
    assert values == [1.0, -7.0, float(torch.tensor(0.1, dtype=torch.float32)), float(2 ** 40)]


# ------------------------------------------------------------------ on a GPU
@pytest.mark.cuda
@pytest.mark.parametrize("approach, options", VARIANTS)
def test_cuda_training_and_validation_steps_never_synchronise(approach, options, monkeypatch):
    """Steps of every approach (bf16, sample weights; with crop-flip and FGSM examples) and the
    validation batches under ``set_sync_debug_mode("error")``; the watch copies its flags every
    2nd step here, so its asynchronous copies run too."""
    monkeypatch.setattr(trainer, "DIVERGENCE_CHECK_EVERY", 4)
    cfg = tiny_config(approach=approach, device="cuda", precision="bf16", sample_weighting=True, batch_size=4,
                      **options)
    run = Training(cfg, synthetic_protocol())
    train_one_epoch(run, 0)  # warm-up: cuDNN and cuBLAS handles, allocator, pinned memory
    sums, loss_sum, correct = steps_under_sync_error(run)
    train_loss, _, val_loss, _ = read_once(sums.loss_sum, sums.correct, loss_sum, correct)
    assert torch.isfinite(torch.tensor([train_loss, val_loss])).all()


def steps_under_sync_error(run: Training, epoch: int = 1):
    """The training steps of ``epoch`` and the validation batches of a warmed-up CUDA run under
    ``set_sync_debug_mode("error")`` (any host synchronisation raises); their device sums."""
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        sums = train_steps(run, epoch)
        loss_sum, correct = evaluation_sums(run, run.val_data)
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    return sums, loss_sum, correct


@pytest.mark.cuda
def test_cuda_epoch_reads_the_host_a_fixed_number_of_times_whatever_its_steps(monkeypatch):
    """A whole epoch and its validation under ``set_sync_debug_mode("warn")``: as many
    synchronisations with 18 steps as with 6 (the epoch's end reads once, the watch never waits)."""
    import warnings

    def syncs(batch_size):
        run = Training(tiny_config(device="cuda", precision="bf16", batch_size=batch_size), synthetic_protocol())
        train_one_epoch(run, 0)
        torch.cuda.synchronize()
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                train_one_epoch(run, 1)
                trainer.evaluate_seeds(run, run.val_data)
        finally:
            torch.cuda.set_sync_debug_mode(previous)
        return sum("synchroniz" in str(w.message) for w in caught)

    assert syncs(4) == syncs(12)
