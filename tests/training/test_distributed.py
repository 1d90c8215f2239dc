"""DistributedDataParallel (agnostophobia.training.distributed) on the CPU with gloo.

The sharding and the global-batch loss are checked in this process; two tests start two
processes each (one thread apiece, a time limit, everything they start is ended):

* 2-process DDP with B/2 samples per process ends with the weights of 1 process with batch B
  (an MLP: no BatchNorm, so no batch statistics that differ), to ``atol=1e-5`` in fp32;
* ``torchrun --nproc_per_node 2`` runs the ``train`` command: the model learns, rank 1 writes
  nothing, a kill point still stops the run, and its checkpoint resumes in one process.
"""
import csv
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from agnostophobia._runlock import run_lock
from agnostophobia.errors import ConfigError
from agnostophobia.losses import build_loss
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.config import TrainConfig
from agnostophobia.training.distributed import World
from agnostophobia.training.fitting import fit
from agnostophobia.training.batches import epoch_order

import ddp_helpers
from augmentation import crop_flip
from repo_paths import REPO

TIME_LIMIT_S = 240  # far above what a run takes (seconds), only so that a hang cannot last


# ------------------------------------------------------------------ sharding, in this process
@pytest.mark.parametrize("n, batch_size, size", [(69, 20, 2), (45, 20, 2), (70, 21, 3), (41, 20, 2), (7, 6, 3)])
def test_shards_of_all_processes_make_up_the_single_process_batches(n, batch_size, size):
    order = epoch_order(n, seed=3, epoch=1)
    single = [shard.indices for shard in World().shards(order, batch_size)]
    per_rank = [list(World(rank, size).shards(order, batch_size)) for rank in range(size)]
    steps = World(size=size).steps_per_epoch(n, batch_size)
    assert all(len(shards) == steps for shards in per_rank)  # every process takes the same number of steps
    for step in range(steps):
        parts = [per_rank[rank][step] for rank in range(size)]
        assert torch.equal(torch.cat([p.indices for p in parts]), single[step])  # the global order is kept
        assert all(p.global_size == len(single[step]) for p in parts)
        assert max(len(p.indices) for p in parts) - min(len(p.indices) for p in parts) <= 1
    dropped = single[steps:]  # only a last batch with fewer samples than processes
    assert all(len(batch) < size for batch in dropped) and len(dropped) <= 1


@pytest.mark.parametrize("approach", ["softmax", "entropic", "objectosphere"])
def test_scaled_process_losses_average_to_the_global_batch_mean(approach):
    """What DDP's gradient average sees: the mean over processes of each process's scaled loss is
    the loss of the whole batch, also for the softmax loss (mean over knowns) and with weights."""
    torch.manual_seed(0)
    n, size = 13, 2
    labels = torch.tensor([0, -1, 1, -1, -1, 2, 0, -1, -1, -1, 1, -1, 2])  # rank 1's half has fewer knowns
    logits, features = torch.randn(n, 3), torch.randn(n, 4)
    weights = torch.rand(n) + 0.5
    kwargs = {"xi": 2.0, "lambda_": 0.1} if approach == "objectosphere" else {}
    loss_fn = build_loss(approach, 3, **kwargs)

    def loss(idx):
        features_of = {"features": features[idx]} if loss_fn.uses_features else {}
        return loss_fn(logits[idx], labels[idx], sample_weight=weights[idx], **features_of)

    order = torch.arange(n)
    known_labels = None if loss_fn.trains_on_unknowns else labels
    shards = [next(World(rank, size).shards(order, n, known_labels)) for rank in range(size)]
    averaged = sum(loss(s.indices) * s.loss_scale for s in shards) / size
    torch.testing.assert_close(averaged, loss(order), rtol=1e-6, atol=0)


def test_the_global_batch_must_split_evenly():
    with pytest.raises(ConfigError, match=r"'batch_size': 20 is the global batch, split evenly over 3 processes"):
        World(0, 3).check_batch_size(20)
    World(0, 4).check_batch_size(20)


def test_a_shard_is_augmented_as_in_the_whole_batch():
    x = torch.rand(9, 1, 12, 12)
    whole = crop_flip(x, torch.Generator().manual_seed(5))
    part = crop_flip(x[5:], torch.Generator().manual_seed(5), offset=5, batch_size=9)
    assert torch.equal(part, whole[5:])


# ------------------------------------------------------------------ processes
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def equivalence_config(**changes) -> TrainConfig:
    base = dict(model="mlp", model_kwargs={"hidden": [32, 16]}, epochs=2, batch_size=20, eval_batch_size=4,
                optimizer="sgd", lr=0.05, momentum=0.9, device="cpu", precision="fp32", cpu_threads=1,
                tensorboard=False, progress=False, seed=4)
    return TrainConfig(**{**base, **changes}).validate()


def test_two_processes_with_half_batches_train_the_weights_of_one_process(tmp_path):
    """Global batch 20 = 2 x 10. Sample weights, a softmax loss averaging over the knowns of the
    whole batch, uneven last batches, crop-flip augmentation and FGSM adversarial training (two
    forward passes per step) all as in one process; validation (4 batches of 4, dealt to the two
    processes) gives the same numbers. Tolerance: atol 1e-5 on every weight, fp32. Before training,
    the processes meet a run locked by another command: all of them stop with rank 0's error."""
    configs = {"softmax": equivalence_config(approach="softmax"),
               "entropic": equivalence_config(approach="entropic", augment="crop-flip", adversarial_epsilon=0.02)}
    with run_lock(tmp_path / "locked"):  # rank 0 finds this run in use: every process must get its error
        context = torch.multiprocessing.start_processes(
            ddp_helpers.equivalence_worker, nprocs=2, join=False, start_method="spawn",
            args=(2, free_port(), configs, str(tmp_path / "ddp"), str(tmp_path / "locked")))
        deadline = time.monotonic() + TIME_LIMIT_S
        try:
            while not context.join(timeout=1):
                assert time.monotonic() < deadline, "the DDP processes did not finish in time"
        finally:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name, cfg in configs.items():
            fit(cfg, ddp_helpers.synthetic_factory(), tmp_path / "one" / name)
    finally:
        torch.set_num_threads(previous)
    for name in configs:
        ddp, one = (load_checkpoint(tmp_path / run / name / "last.pt") for run in ("ddp", "one"))
        assert ddp["model"].keys() == one["model"].keys()  # the plain model's state dict, no "module." prefix
        for key in one["model"]:
            torch.testing.assert_close(ddp["model"][key], one["model"][key], atol=1e-5, rtol=0, msg=key)
        assert not torch.equal(one["model"]["body.1.weight"], fit_start_weights(configs[name]))  # it trained
        for ddp_row, one_row in zip(ddp["history"], one["history"]):
            for key in ("train_loss", "train_acc", "val_loss", "val_acc"):
                assert ddp_row[key] == pytest.approx(one_row[key], rel=1e-5), (name, key)
    assert not list((tmp_path / "ddp").glob("*/.*.tmp"))


def fit_start_weights(cfg):
    from agnostophobia.models import build_model

    torch.manual_seed(cfg.seed)
    return build_model(cfg.model, num_outputs=3, **cfg.model_kwargs).state_dict()["body.1.weight"]


def run_torchrun(args, env, cwd):
    """``torchrun --standalone --nproc_per_node 2 ARGS`` (torchrun is ``python -m torch.distributed.run``);
    on a time-out the whole process group ends."""
    process = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                                "--monitor_interval", "0.2", *map(str, args)], env=env, cwd=cwd,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=TIME_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("torchrun did not finish in time")
    return process.returncode, output


def metrics(path: Path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow  # 7-10 s: with the slow tests, keeping make test under its 570 s
def test_train_under_torchrun_writes_on_rank_0_only_and_resumes_in_one_process(tmp_path, monkeypatch):
    """softmax trains its 3 epochs under DDP and stores its outputs; the fourth epoch end, in
    entropic's first epoch, is a kill point (rank 0 kills itself, torchrun ends rank 1). The
    same command in one process then keeps softmax and resumes entropic from the DDP checkpoint."""
    area = tmp_path / "area"
    area.mkdir()
    config = area / "tiny.yaml"
    config.write_text(yaml.safe_dump({
        "name": "tiny", "protocol": "synthetic", "model": "lenet++", "model_kwargs": {"activation": "prelu"},
        "approaches": ["softmax", "entropic"], "epochs": 3, "batch_size": 16, "lr": 3e-3, "device": "cpu",
        "precision": "fp32", "cpu_threads": 1, "tensorboard": False}))
    out = area / "run"
    src = REPO / "src"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "DDP_TEST_WATCH": str(area), "AGNOSTOPHOBIA_KILL_AT": "epoch-end:4",
           "PYTHONUNBUFFERED": "1"}
    code, output = run_torchrun([Path(ddp_helpers.__file__), "train", config, "--out", out, "--no-progress"],
                                env, tmp_path)
    assert code != 0, output  # killed, as planned, after entropic's first epoch
    softmax, entropic = out / "seed0" / "softmax", out / "seed0" / "entropic"
    rows = metrics(softmax / "metrics.csv")
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3], output
    assert float(rows[-1]["train_loss"]) < 0.8 * float(rows[0]["train_loss"])  # it learns under DDP
    assert (softmax / "outputs.npz").exists() and load_checkpoint(softmax / "last.pt")["finished"]
    assert load_checkpoint(entropic / "last.pt")["epoch"] == 1 and not (entropic / "outputs.npz").exists()
    assert (tmp_path / "writes-rank1.txt").exists()  # the audit ran ...
    assert (tmp_path / "writes-rank1.txt").read_text() == ""  # ... and rank 1 wrote nothing
    assert not (tmp_path / "writes-rank0.txt").exists()

    # the same command, in this process, continues the run
    from agnostophobia.cli import main
    from agnostophobia.data.protocols import PROTOCOLS

    monkeypatch.setitem(PROTOCOLS._items, "synthetic", ddp_helpers.synthetic_spec())
    monkeypatch.delenv("AGNOSTOPHOBIA_KILL_AT", raising=False)
    assert main(["train", str(config), "--out", str(out), "--resume", "--no-progress"]) == 0
    rows = metrics(entropic / "metrics.csv")
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]
    assert (entropic / "outputs.npz").exists() and load_checkpoint(entropic / "last.pt")["finished"]
    assert (out / "run_meta.json").exists()


@pytest.mark.parametrize("command", [["reproduce", "lenet++"], ["evaluate", "RUN"]])
def test_commands_of_one_process_refuse_to_run_under_torchrun(command, tmp_path, monkeypatch, capsys):
    from agnostophobia.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.chdir(tmp_path)
    assert main(command) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"agnostophobia: error: `agnostophobia {command[0]}` runs in one process, not under torchrun")
    assert not list(tmp_path.iterdir())  # nothing written
