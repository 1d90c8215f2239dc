"""The training peers (issue 34) in the trainer and the commands: every peer through ``reproduce``
with sample weights (the loss x detector matrix), a peer of each kind resumed bit for bit with
sample weights (Outlier Exposure: trains on negatives; VOS: parameters and state; MixOE: a batch
hook drawing from the generators a resume restores), ``batched_seeds`` falling back for a loss that
cannot be batched, and the paper's four as the default approaches."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from agnostophobia.detectors import DETECTORS, detector_applies
from agnostophobia.errors import ConfigError
from agnostophobia.experiments.reproduce import training_units
from agnostophobia.losses import LOSSES, PAPER_APPROACHES, OpenSetLoss
from agnostophobia.rundir import RunDir
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.config import TrainConfig, load_experiment, parse_experiment
from agnostophobia.training.cuda_graph import check_cuda_graph
from agnostophobia.training.distributed import current
from agnostophobia.training.fitting import fit
from agnostophobia.training.trainer import Training
from runs import reproduce_args, run_cli, write_config
from synthetic import synthetic_protocol
from tests.training.test_cuda_graph import history

# the fine-tuning variants are these losses again, started from a softmax network (tests/training/test_fine_tune.py)
PEERS = [name for name in LOSSES.registered() if name not in PAPER_APPROACHES and LOSSES.get(name).fine_tune is None]
SMALL_VOS = {"queue_size": 4, "candidates": 64}  # queues fill within the first epoch of a tiny run


def peer_config(approach, **changes) -> TrainConfig:
    base = dict(approach=approach, epochs=2, batch_size=16, lr=1e-3, tensorboard=False, progress=False, seed=3,
                sample_weighting=True, loss=SMALL_VOS if approach == "vos" else {})
    return TrainConfig(**{**base, **changes}).validate()


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
def test_every_peer_trains_through_reproduce_and_every_detector_that_applies_scores_it(real_data_dir, tmp_path):
    limits = {"max_known_train": 32, "max_unknown_train": 32, "max_val": 16, "max_test_per_set": 16}
    config = write_config(tmp_path / "peers.yaml", approaches=PEERS, epochs=1, sample_weighting=True, loss=SMALL_VOS,
                          protocol_limits=limits)
    result = run_cli([*reproduce_args(config, tmp_path / "run", real_data_dir), "--no-plots"])
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    report = (tmp_path / "run" / "report.md").read_text()
    for approach in PEERS:
        evaluated = {r["detector"] for r in metrics["results"] if r["approach"] == approach}
        skipped = {d for d in DETECTORS.names() if any(n.startswith(f"{d} on the {approach} model")
                                                       for n in metrics["skipped"])}
        applicable = {d for d in DETECTORS.names() if detector_applies(d, approach)}  # e.g. not cac: CAC's networks only
        assert evaluated | skipped == applicable and LOSSES.get(approach).default_detector in evaluated, approach
        assert applicable <= {d for d in DETECTORS.names() if not DETECTORS.get(d).reads_background_column}
        assert f"\n| {approach} | " in report  # a row of the approach x detector matrix
        history = (tmp_path / "run" / "seed0" / approach / "metrics.csv").read_text().splitlines()
        assert len(history) == 2 and "nan" not in history[1].lower(), approach


def assert_same_run(a, b):
    one, other = load_checkpoint(a / "last.pt"), load_checkpoint(b / "last.pt")
    for part in ("model", "loss"):
        assert one[part].keys() == other[part].keys()
        for key in one[part]:
            assert torch.equal(one[part][key], other[part][key]), (part, key)
    for index, entry in one["optimizer"]["state"].items():
        for key, value in entry.items():
            assert torch.equal(value, other["optimizer"]["state"][index][key]), (index, key)
    assert history(a) == history(b)


def overrides_a_hook(name: str) -> bool:
    """Whether the loss registered as ``name`` overrides a hook the trainer calls (its state or draws
    must then survive a resume)."""
    return any(getattr(LOSSES.get(name), hook) is not getattr(OpenSetLoss, hook)
               for hook in ("attach", "begin_epoch", "mix_batch"))


# Outlier Exposure trains on negatives without a hook; every loss with a hook (MixOE, VOS, and any
# registered beside them) is resumed too, so a new one is checked without an edit here
RESUMED = ["outlier-exposure"] + [name for name in PEERS if overrides_a_hook(name)]


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
@pytest.mark.parametrize("approach", RESUMED)
def test_a_resumed_peer_equals_an_uninterrupted_one_bit_for_bit(approach, tmp_path):
    protocol = synthetic_protocol(n_known=24, n_unknown=16)  # 3 batches an epoch
    cfg = peer_config(approach)
    fit(cfg, protocol, tmp_path / "whole")
    fit(cfg, protocol, tmp_path / "resumed", stop_after_epoch=1)
    fit(cfg, protocol, tmp_path / "resumed")
    assert_same_run(tmp_path / "whole", tmp_path / "resumed")
    saved = load_checkpoint(tmp_path / "whole" / "last.pt")
    if approach == "vos":  # its state and parameters are in the checkpoint, and were trained
        assert saved["loss"]["filled"].tolist() == [4, 4, 4]
        assert not torch.equal(saved["loss"]["energy_weights"], Training(cfg, protocol).loss_fn.energy_weights)
    elif approach in ("outlier-exposure", "mixoe"):  # no state of their own
        assert saved["loss"] == {}


def test_batched_seeds_falls_back_for_a_loss_that_cannot_be_batched(tmp_path, capsys):
    pending = [(dataclasses.replace(peer_config(approach), seed=seed), RunDir(tmp_path).model(seed, approach))
               for approach in ("entropic", "vos", "mixoe") for seed in (0, 1)]
    units = training_units(pending, batched=True, world=current())
    assert sorted([(unit[0][0].approach, [cfg.seed for cfg, _ in unit]) for unit in units]) == [
        ("entropic", [0, 1]), ("mixoe", [0]), ("mixoe", [1]), ("vos", [0]), ("vos", [1])]
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"batched_seeds: {name} trains its seeds one by one (its loss cannot be batched over seeds)"
                     for name in ("vos", "mixoe")]
    with pytest.raises(ConfigError, match="'vos'.*batches_over_seeds = False"):
        Training(peer_config("vos"), synthetic_protocol(), seeds=[0, 1])


@pytest.mark.parametrize("approach", [name for name in PEERS if not LOSSES.get(name).replays_in_cuda_graph])
def test_cuda_graph_refuses_a_loss_one_capture_cannot_stand_for(approach):
    with pytest.raises(ConfigError, match=f"cuda_graph.*{approach!r}"):
        check_cuda_graph(True, "cuda", False, approach)


def test_a_config_without_approaches_trains_the_papers_four_and_the_shipped_ones_are_unchanged():
    assert parse_experiment({}).approaches == list(PAPER_APPROACHES)
    for name in ("lenet++", "cifar"):
        assert load_experiment(name).approaches == list(PAPER_APPROACHES)
    assert parse_experiment({"approaches": ["vos"], "loss": {"vos_start": 0.5}}).for_approach("vos", 0) \
        .loss_settings() == {"vos_start": 0.5}
