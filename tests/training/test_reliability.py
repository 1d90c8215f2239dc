"""Trainer reliability: resume on any device, diverging runs, checkpoints from elsewhere."""
import itertools
import os
import pickle
import random
import re
import signal
import sys

import numpy as np
import pytest
import torch
import yaml

from agnostophobia.cli import main
from agnostophobia.errors import AgnostophobiaError, ConfigError, TrainingDiverged
from agnostophobia.experiments import reproduce
from agnostophobia.training import trainer
from agnostophobia.training.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from agnostophobia.training.hostsync import HostCopy
from agnostophobia.training.fitting import fit
from agnostophobia.training.trainer import Training
from synthetic import synthetic_protocol
from tests.training.test_trainer import assert_same_weights, tiny_config, train_in_subprocess

# synthetic_protocol(): 48 knowns + 24 unknowns to train on, so entropic with batch 16 takes 5 steps
STEPS_PER_EPOCH = 5


# ------------------------------------------------------------------ resume on any device
@pytest.mark.filterwarnings("ignore:.*meta parameter")
def test_resume_restores_rng_on_the_cpu_whatever_the_training_device(tmp_path):
    """``torch.set_rng_state`` takes only a CPU tensor: a checkpoint mapped to the training
    device (here the meta device, standing in for CUDA) could not be resumed."""
    cfg = tiny_config(epochs=1, sample_weighting=False)  # class weights are counted from labels meta lacks
    fit(cfg, synthetic_protocol(), tmp_path)
    saved = load_checkpoint(tmp_path / "last.pt")["rng"]
    torch.manual_seed(12345)
    np.random.seed(12345)
    run = fit(cfg, synthetic_protocol(), tmp_path, device=torch.device("meta"))
    assert next(run.model.parameters()).device.type == "meta"
    assert torch.equal(torch.get_rng_state(), saved["torch"])
    assert np.array_equal(np.random.get_state()[1], saved["numpy"]["keys"].numpy())


@pytest.fixture
def restore_determinism():
    mode, benchmark = torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    yield
    torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    torch.backends.cudnn.benchmark = benchmark


def test_deterministic_flag_switches_on_deterministic_algorithms_and_must_match_on_resume(
        tmp_path, restore_determinism):
    torch.use_deterministic_algorithms(False)
    with pytest.raises(ConfigError, match="'deterministic'"):
        tiny_config(deterministic="yes")
    fit(tiny_config(epochs=1, deterministic=True), synthetic_protocol(), tmp_path)
    assert torch.are_deterministic_algorithms_enabled() and not torch.backends.cudnn.benchmark
    with pytest.raises(ConfigError, match="deterministic=True"):
        fit(tiny_config(epochs=1, deterministic=False), synthetic_protocol(), tmp_path, resume=True)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_resume_after_sigkill_equals_uninterrupted(tmp_path):
    """On CUDA, with deterministic algorithms, a killed and resumed run is bit-identical;
    every step runs in its own process, so the process-wide settings stay there."""
    cfg = tiny_config(epochs=4, device="cuda", deterministic=True)
    assert train_in_subprocess(cfg, tmp_path / "killed", kill_at="epoch-end:2") == -signal.SIGKILL
    assert load_checkpoint(tmp_path / "killed" / "last.pt")["epoch"] == 2
    assert train_in_subprocess(cfg, tmp_path / "killed") == 0
    assert train_in_subprocess(cfg, tmp_path / "full") == 0
    resumed, full = (load_checkpoint(tmp_path / name / "last.pt") for name in ("killed", "full"))
    assert resumed["epoch"] == full["epoch"] == 4 and "cuda" in full["rng"]
    assert_same_weights(full["model"], resumed["model"])
    for a, b in zip(full["rng"]["cuda"], resumed["rng"]["cuda"]):
        assert torch.equal(a, b)


# ------------------------------------------------------------------ diverging training
def nan_loss_from(monkeypatch, training_step=None, evaluation=None):
    """Make the loss NaN from the ``training_step``-th optimiser step (or the
    ``evaluation``-th validation batch) on, counting from 1 in this process."""
    real = Training.batch_loss
    train_calls, eval_calls = itertools.count(1), itertools.count(1)

    def batch_loss(self, x, y, weights=None, shared=False):
        loss, logits = real(self, x, y, weights, shared)
        calls, first = (train_calls, training_step) if self.model.training else (eval_calls, evaluation)
        if first is not None and next(calls) >= first:
            loss = loss * float("nan")
        return loss, logits

    monkeypatch.setattr(Training, "batch_loss", batch_loss)


def test_nonfinite_training_loss_stops_and_keeps_the_last_good_epoch(tmp_path, monkeypatch):
    cfg = tiny_config(epochs=3)
    fit(cfg, synthetic_protocol(), tmp_path, stop_after_epoch=1)
    kept = {name: (tmp_path / name).read_bytes() for name in ("last.pt", "best.pt", "metrics.csv")}
    nan_loss_from(monkeypatch, training_step=3)  # epoch 2 after resuming: step 3 of 5, global step 8
    with pytest.raises(TrainingDiverged) as caught:
        fit(cfg, synthetic_protocol(), tmp_path, resume=True)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("entropic (seed 1) diverged in epoch 2: the training loss became non-finite "
                              f"at step 3 of {STEPS_PER_EPOCH} of the epoch (global step 8, counting from 1)")
    assert "checkpoints of epoch 1 are kept" in message
    assert {name: (tmp_path / name).read_bytes() for name in kept} == kept
    assert not list(tmp_path.glob(".*.tmp"))


def test_divergence_flag_is_read_every_n_steps_yet_names_the_first_bad_step(tmp_path, monkeypatch):
    """The flag is copied every DIVERGENCE_CHECK_EVERY // 2 steps (read at once on the CPU) and at
    each epoch's end, so a run stops within DIVERGENCE_CHECK_EVERY steps even where the copy lags."""
    monkeypatch.setattr(trainer, "DIVERGENCE_CHECK_EVERY", 4)
    reads = []
    real_read = HostCopy.read
    monkeypatch.setattr(HostCopy, "read", lambda self: reads.append(1) or real_read(self))
    nan_loss_from(monkeypatch, training_step=STEPS_PER_EPOCH + 1)  # the first step of epoch 2
    with pytest.raises(TrainingDiverged, match=r"in epoch 2: .* at step 1 of 5 of the epoch \(global step 6,"):
        fit(tiny_config(epochs=3), synthetic_protocol(), tmp_path)
    # epoch 1: after steps 2 and 4 (its end reads with the loss); epoch 2: after step 2, seeing step 1's NaN
    assert len(reads) == 3
    assert load_checkpoint(tmp_path / "last.pt")["epoch"] == 1


def test_nonfinite_validation_loss_stops_before_saving_the_epoch(tmp_path, monkeypatch):
    nan_loss_from(monkeypatch, evaluation=2)  # 18 validation samples: one batch per epoch
    with pytest.raises(TrainingDiverged, match=r"^entropic \(seed 1\) diverged in epoch 2: the validation loss is nan;"):
        fit(tiny_config(epochs=3), synthetic_protocol(), tmp_path)
    assert load_checkpoint(tmp_path / "last.pt")["epoch"] == 1
    assert load_checkpoint(tmp_path / "best.pt")["epoch"] == 1
    assert len((tmp_path / "metrics.csv").read_text().splitlines()) == 2


def test_divergence_in_the_first_epoch_says_nothing_was_saved(tmp_path, monkeypatch):
    nan_loss_from(monkeypatch, training_step=2)
    with pytest.raises(TrainingDiverged, match="epoch 1: .*step 2 of 5.*no epoch finished, so no checkpoint"):
        fit(tiny_config(epochs=2), synthetic_protocol(), tmp_path)
    assert not (tmp_path / "last.pt").exists() and not (tmp_path / "best.pt").exists()


def test_a_train_command_resolves_its_device_once(tmp_path, monkeypatch):
    """``configure`` resolves the device; the run's process group, trainer and record get that one."""
    from agnostophobia.training import device as devices

    resolved = []

    def counted(name, real=devices.resolve_device):
        resolved.append(name)
        return real(name)

    monkeypatch.setattr(devices, "resolve_device", counted)  # what the trainer would call
    monkeypatch.setattr(reproduce, "resolve_device", counted)
    monkeypatch.setattr(reproduce, "protocol_for", lambda cfg: synthetic_protocol())
    monkeypatch.setattr(reproduce, "require_protocol_data", lambda *args, **kwargs: [])  # no lenet++ data read
    config = tmp_path / "one.yaml"
    config.write_text(yaml.safe_dump({"approaches": ["entropic"], "epochs": 1, "batch_size": 16,
                                      "model_kwargs": {"activation": "prelu"}, "tensorboard": False}))
    assert main(["train", str(config), "--out", str(tmp_path / "run"), "--no-progress", "--device", "cpu"]) == 0
    assert resolved == ["cpu"]
    assert (tmp_path / "run" / "seed0" / "entropic" / "outputs.npz").exists()


def test_train_command_exits_with_one_line_when_training_diverges(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(reproduce, "protocol_for", lambda cfg: synthetic_protocol())
    monkeypatch.setattr(reproduce, "require_protocol_data", lambda *args, **kwargs: [])  # no lenet++ data read
    config = tmp_path / "absurd.yaml"
    config.write_text(yaml.safe_dump({"approaches": ["entropic"], "epochs": 3, "batch_size": 16, "lr": 1e30,
                                      "model_kwargs": {"activation": "prelu"}, "tensorboard": False}))
    assert main(["train", str(config), "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("agnostophobia: error: entropic (seed 0) diverged in epoch 1:")
    assert not (tmp_path / "run" / "seed0" / "entropic" / "outputs.npz").exists()


def count_host_reads(cfg, run_dir) -> int:
    """How often agnostophobia's code (trainer, losses, weights) reads a tensor's value on the
    host during ``fit``: ``item()``, ``tolist()``, ``int()``, ``float()``, ``bool()``, and the
    operations that read values inside (a boolean mask, ``nonzero``, ``unique``, ...: each a
    host synchronisation on a GPU). PyTorch's own reads (e.g. of Adam's CPU step counter) aside."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from tests.training.test_hostsync import DATA_DEPENDENT, INDEXING

    package = os.path.dirname(os.path.dirname(trainer.__file__))
    torch_dir = os.path.dirname(torch.__file__)
    reads = []

    def counted(real):
        def read(self):
            reads.append(sys._getframe(1).f_code.co_filename.startswith(package))
            return real(self)
        return read

    class ValueReadingOps(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            masked = name in INDEXING and any(t is not None and t.dtype in (torch.bool, torch.uint8) for t in args[1])
            if masked or (name in DATA_DEPENDENT and name != "aten::_local_scalar_dense"):  # those: counted above
                frame = sys._getframe(1)
                while frame.f_code.co_filename.startswith(torch_dir):  # to the code that called PyTorch
                    frame = frame.f_back
                reads.append(frame.f_code.co_filename.startswith(package))
            return func(*args, **(kwargs or {}))

    with pytest.MonkeyPatch.context() as mp, ValueReadingOps():
        for name in ("item", "tolist", "__int__", "__float__", "__bool__", "__index__"):
            mp.setattr(torch.Tensor, name, counted(getattr(torch.Tensor, name)))
        fit(cfg, synthetic_protocol(), run_dir)
    return sum(reads)


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_trainer_reads_tensors_on_the_host_per_epoch_not_per_batch(tmp_path):
    """Neither the loop nor the losses' input checks read anything back per batch (labels and
    weights are checked once per dataset), nor does the accuracy use a boolean mask: 3 training
    and 1 validation batches cost as many reads as 9 and 6, with crop-flip augmentation too."""
    for augment in ("none", "crop-flip"):
        few = count_host_reads(tiny_config(epochs=1, batch_size=24, eval_batch_size=18, augment=augment),
                               tmp_path / augment / "few")
        many = count_host_reads(tiny_config(epochs=1, batch_size=8, eval_batch_size=3, augment=augment),
                                tmp_path / augment / "many")
        assert few == many, augment


# ------------------------------------------------------------------ files from elsewhere
def test_every_checkpoint_fit_writes_loads_without_unpickling_objects(tmp_path):
    fit(tiny_config(epochs=1), synthetic_protocol(), tmp_path)
    for name in ("last.pt", "best.pt"):
        torch.load(tmp_path / name, weights_only=True)


def test_rng_state_survives_a_weights_only_round_trip(tmp_path):
    random.seed(3)
    np.random.seed(4)
    torch.manual_seed(5)
    random.gauss(0, 1)  # python and numpy both keep a cached Gaussian in their state
    np.random.normal()
    save_checkpoint(tmp_path / "rng.pt", {"rng": rng_state()})
    expected = (random.random(), random.gauss(0, 1), np.random.rand(3), np.random.normal(), torch.rand(3))
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True)["rng"])
    drawn = (random.random(), random.gauss(0, 1), np.random.rand(3), np.random.normal(), torch.rand(3))
    assert drawn[:2] == expected[:2] and drawn[3] == expected[3]
    assert np.array_equal(drawn[2], expected[2]) and torch.equal(drawn[4], expected[4])


def _leave_marker(path):
    with open(path, "w") as marker:
        marker.write("code from a checkpoint ran")


class RunsCodeWhenUnpickled:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return _leave_marker, (self.marker,)


def test_checkpoint_that_would_run_code_is_refused_without_running_it(tmp_path):
    marker, path = tmp_path / "marker", tmp_path / "downloaded.pt"
    torch.save({"model": {}, "payload": RunsCodeWhenUnpickled(str(marker))}, path)
    with pytest.raises(AgnostophobiaError, match=f"checkpoint {re.escape(str(path))} holds objects other than tensors.*refusing"):
        load_checkpoint(path)
    assert not marker.exists()
    torch.load(path, weights_only=False)  # the file does carry code: a plain unpickling runs it
    assert marker.exists()


def test_checkpoint_with_a_pickled_numpy_array_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "old.pt"
    torch.save({"rng": {"numpy": np.random.get_state()}}, path)
    with pytest.raises(AgnostophobiaError, match=f"checkpoint {re.escape(str(path))} holds objects .*numpy"):
        load_checkpoint(path)
    path.write_bytes(pickle.dumps({"not": "a torch file"}, protocol=2))
    with pytest.raises(AgnostophobiaError, match=f"checkpoint {re.escape(str(path))} cannot be read"):
        load_checkpoint(path)
