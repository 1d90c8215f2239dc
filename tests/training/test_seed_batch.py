"""Seeds trained as one batched model (``training.seed_batch``; issue 21, config key ``batched_seeds``).

What a batched run must equal: the separate runs of its seeds. On the CPU in fp32 the batched
kernels (``vmap`` turns each convolution into a grouped one) round differently from a single
network's, so the comparison has a tolerance, stated per test:

* one step, from the same weights and batch: every seed's loss within 1e-5 (relative) of its
  separate run's, every gradient tensor within 1e-2 of that tensor's largest entry (BatchNorm's
  backward subtracts nearly equal terms, so a few entries of conv-weight gradients carry the
  rounding of the whole sum; measured worst: 5.5e-4);
* whole runs (two epochs, SGD with momentum): the weights end apart by at most 15 % of the
  distance the separate run moved them (measured: 3e-6 to 0.09), every logged loss within 2 %.
  Rounding also flips rare discrete choices (a PReLU input or a max-pooling pair
  within rounding of a tie), which routes one gradient entry elsewhere; so the comparison is of
  whole weight vectors, not of single entries. Adam's first steps are nearly ``lr * sign(g)``,
  which turns a rounding difference in a near-zero gradient entry into a 2 lr step, so the
  whole-run test uses SGD.

In float64 (the head's casts patched out, a scratch measurement) a batched step's gradients
equal the separate run's within 4e-15 over five steps with momentum: the batched computation is
the same function; what differs in fp32 is rounding only.

A batching mistake (a seed trained on another seed's order, augmentation or initialisation, or its
optimiser state sliced wrong) moves the losses by 1e-2 or more; the tests check that such a swap fails.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from agnostophobia.errors import ConfigError
from agnostophobia.losses import LOSSES
from agnostophobia.rundir import ModelDir
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.config import parse_experiment
from agnostophobia.training.seed_batch import check_batched_seeds, resolve_batched_seeds
from agnostophobia.training.augment import crop_flip_draws, to_input
from agnostophobia.training.fitting import fit, fit_seeds
from agnostophobia.training.trainer import Training
from augmentation import crop_flip
from synthetic import BATCHED_APPROACHES, synthetic_protocol
from tests.training.test_trainer import tiny_config

SEEDS = [0, 3]


def exact_config(**changes):
    """fp32, NCHW: the arithmetic in which a batched run can be compared with separate ones."""
    base = dict(precision="fp32", channels_last=False, batch_size=16, cpu_threads=1)
    return tiny_config(**{**base, **changes})


@pytest.fixture(scope="module")
def protocol():
    return synthetic_protocol(n_known=48, n_unknown=24)


def first_step(run: Training, augment=False):
    """Each seed's loss and gradients at the first training step of epoch 0 (one seed's when not batched)."""
    run.model.train()
    order = run.epoch_order(0)[..., :run.cfg.batch_size]
    x = to_input(run.train_data.images[order], False)
    if augment:
        x = crop_flip(x, run.augment_generator(0))
    y = run.train_data.labels[order]
    loss, _ = run.training_loss(x, y, run.train_data.weights_of(order))
    run.optimizer.zero_grad(set_to_none=True)
    loss.sum().backward()
    if run.seed_shape:  # seeds stacked
        return [(loss[i].item(), {name: None if p.grad is None else p.grad[i] for name, p in run.model.params().items()})
                for i in range(len(run.seed_cfgs))]
    return [(loss.item(), {name: p.grad for name, p in run.model.named_parameters()})]


VARIANTS = [dict(), dict(sample_weighting=True), dict(augment="crop-flip"), dict(adversarial_epsilon=0.03)]


@pytest.mark.parametrize("options", VARIANTS, ids=["plain", "weights", "crop-flip", "fgsm"])
@pytest.mark.parametrize("approach", BATCHED_APPROACHES)
def test_a_batched_step_equals_each_seeds_own_step(approach, options, protocol):
    cfg = exact_config(approach=approach, **options)
    batched = Training(cfg, protocol, seeds=SEEDS)
    augment = options.get("augment") == "crop-flip"
    initial = [batched.model.seed_state_dict(i) for i in range(len(SEEDS))]
    steps = first_step(batched, augment)
    for i, seed in enumerate(SEEDS):
        alone = Training(dataclasses.replace(cfg, seed=seed), protocol)
        assert [k for k, v in alone.model.state_dict().items() if not torch.equal(initial[i][k], v)] == []
        [(loss, grads)] = first_step(alone, augment)
        batched_loss, batched_grads = steps[i]
        # FGSM steps along the sign of the input gradient: where a pixel's gradient is near 0 its
        # sign can differ between the batched and the separate kernels (seen on an AVX2-only
        # Zen 3: loss 7.5e-5 apart, gradients up to 7 % of their scale), moving that pixel by
        # 2*epsilon; a mixed-up seed is off by far more
        adversarial = "adversarial_epsilon" in options
        assert batched_loss == pytest.approx(loss, rel=5e-4 if adversarial else 1e-5)
        for name, grad in grads.items():
            if grad is None:
                assert batched_grads[name] is None
                continue
            scale = grad.abs().max().clamp(min=1e-12)
            assert ((batched_grads[name] - grad).abs().max() / scale).item() < (0.15 if adversarial else 1e-2), name


def test_a_seed_given_another_seeds_batch_is_told_apart(protocol):
    """The step tolerance catches a mix-up: seed 3's loss on seed 0's batch is not seed 3's loss."""
    cfg = exact_config(approach="entropic")
    batched = Training(cfg, protocol, seeds=SEEDS)
    alone = Training(dataclasses.replace(cfg, seed=SEEDS[1]), protocol)
    [(loss, _)] = first_step(alone)
    assert first_step(batched)[1][0] == pytest.approx(loss, rel=1e-5)
    wrong = Training(cfg, protocol, seeds=SEEDS)
    wrong.epoch_order = lambda epoch: batched.epoch_order(epoch)[[0, 0]]  # both seeds in seed 0's order
    assert first_step(wrong)[1][0] != pytest.approx(loss, rel=1e-5)


def weights_of(path):
    return load_checkpoint(path)["model"]


def trained_parameters(state, model):
    """The trained parameters (no BatchNorm statistics) of a state dict, as one vector."""
    names = [name for name, _ in model.named_parameters()]
    return torch.cat([state[name].double().reshape(-1) for name in names])


def assert_runs_agree(batched_dir, separate_dir, initial, model, tolerance=0.6):
    """The batched seed's run ends where its separate run ends: files of the same form, weights
    apart by at most ``tolerance`` of the distance the separate run moved them from ``initial``
    (measured over the four approaches: 3e-6 to 0.09 on a Zen 4 with AVX-512, up to 0.48 on an
    AVX2-only Zen 3, whose kernels round differently and flip more choices along the way), every
    logged loss within 2 %."""
    batched, separate = load_checkpoint(batched_dir / "last.pt"), load_checkpoint(separate_dir / "last.pt")
    assert list(batched["model"]) == list(separate["model"])
    assert [v.shape for v in batched["model"].values()] == [v.shape for v in separate["model"].values()]
    moved = (trained_parameters(separate["model"], model) - trained_parameters(initial, model)).norm()
    apart = (trained_parameters(batched["model"], model) - trained_parameters(separate["model"], model)).norm()
    assert apart / moved < tolerance, f"{batched_dir}: {float(apart / moved):.3g} of the distance trained"
    assert set(batched) == set(separate) and batched["epoch"] == separate["epoch"]
    assert batched["config"] == separate["config"] and batched["finished"] == separate["finished"]
    assert batched["scheduler"] == separate["scheduler"]
    assert batched["optimizer"]["param_groups"] == separate["optimizer"]["param_groups"]
    assert set(batched["optimizer"]["state"]) == set(separate["optimizer"]["state"])
    for index, entry in separate["optimizer"]["state"].items():
        assert {k: v.shape for k, v in batched["optimizer"]["state"][index].items()} == {
            k: v.shape for k, v in entry.items()}
    for row, other in zip(separate["history"], batched["history"], strict=True):
        for key in ("train_loss", "val_loss"):
            assert other[key] == pytest.approx(row[key], rel=2e-2), key
    assert (batched_dir / "best.pt").is_file() and (batched_dir / "metrics.csv").is_file()
    return float(apart / moved)


def noise_protocol(num_classes=3, seed=0):
    """Uniform noise images: no two conv outputs tie exactly (the squares and zero padding of
    the synthetic protocol make max-pooling ties, which a batched kernel may break otherwise)."""
    import numpy as np

    from agnostophobia.data.protocols import OpenSetProtocol, ProtocolSplit

    rng = np.random.default_rng(seed)

    def split(name, knowns, unknowns):
        labels = np.concatenate([np.arange(knowns) % num_classes, -np.ones(unknowns)]).astype(np.int64)
        return ProtocolSplit(name, rng.integers(0, 256, (len(labels), 1, 28, 28), dtype=np.uint8), labels, None)

    return OpenSetProtocol("noise", num_classes, (1, 28, 28), split("train", 48, 24), split("val", 12, 6),
                           split("known", 12, 0), {"noise": split("noise", 0, 12)}, ["uniform noise"],
                           [f"class{c}" for c in range(num_classes)])


SGD = dict(optimizer="sgd", lr=0.001, momentum=0.9, epochs=2)


def initial_weights(cfg, protocol, seed):
    run = Training(dataclasses.replace(cfg, seed=seed), protocol)
    return run.model.state_dict(), run.model


#: Learning rates of the whole-run test other than SGD's: Outlier Exposure's per-term mean weighs a
#: batch's few negatives heavily, and at lr 1e-3 one rounding-flipped choice took seed 3's batched
#: run 0.19 of the distance trained from its separate run (measured 2026-11-27; seed 0: 0.04); at
#: lr 1e-4 they end 4e-6 apart. (The paper's four at lr 1e-4 measured 5e-6 to 0.03, so 1e-4 is no
#: tighter a test for them.)
WHOLE_RUN_LR = {"outlier-exposure": 1e-4}


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
@pytest.mark.parametrize("approach", BATCHED_APPROACHES)
def test_batched_seeds_train_as_their_separate_runs(approach, tmp_path):
    protocol = noise_protocol()
    cfg = exact_config(approach=approach, **{**SGD, "lr": WHOLE_RUN_LR.get(approach, SGD["lr"])})
    runs = fit_seeds(cfg, protocol, {seed: tmp_path / f"batched{seed}" for seed in SEEDS})
    assert [run.cfg.seed for run in runs] == SEEDS
    for seed in SEEDS:
        fit(dataclasses.replace(cfg, seed=seed), protocol, tmp_path / f"alone{seed}")
        initial, model = initial_weights(cfg, protocol, seed)
        ratio = assert_runs_agree(tmp_path / f"batched{seed}", tmp_path / f"alone{seed}", initial, model)
        print(f"{approach} seed {seed}: weights apart by {ratio:.2e} of the distance trained")
    # the check tells seeds apart: seed 3's batched run is not seed 0's separate one
    initial, model = initial_weights(cfg, protocol, SEEDS[0])
    with pytest.raises(AssertionError):
        assert_runs_agree(tmp_path / f"batched{SEEDS[1]}", tmp_path / f"alone{SEEDS[0]}", initial, model)


@pytest.mark.slow  # 10-27 s: make test stays within its time; CI runs it with the slow tests
def test_a_run_resumes_with_batching_switched_either_way(tmp_path):
    """Checkpoints have one form: a batched run resumed one seed at a time, and separate runs
    resumed batched, end where uninterrupted separate runs end (within the whole-run tolerance);
    a killed batched run resumed batched ends bit for bit where the uninterrupted one does."""
    protocol = noise_protocol()
    cfg = exact_config(approach="objectosphere", **SGD)
    dirs = lambda name: [tmp_path / f"{name}{seed}" for seed in SEEDS]
    fit_seeds(cfg, protocol, dict(zip(SEEDS, dirs("straight"))))
    fit_seeds(cfg, protocol, dict(zip(SEEDS, dirs("killed"))), stop_after_epoch=1)
    assert load_checkpoint(dirs("killed")[0] / "last.pt")["epoch"] == 1
    fit_seeds(cfg, protocol, dict(zip(SEEDS, dirs("killed"))))
    for straight, killed in zip(dirs("straight"), dirs("killed")):
        for key, value in weights_of(straight / "last.pt").items():
            assert torch.equal(weights_of(killed / "last.pt")[key], value), key
    fit_seeds(cfg, protocol, dict(zip(SEEDS, dirs("off"))), stop_after_epoch=1)
    for seed, run_dir in zip(SEEDS, dirs("off")):
        fit(dataclasses.replace(cfg, seed=seed), protocol, run_dir)  # resumed unbatched
        fit(dataclasses.replace(cfg, seed=seed), protocol, tmp_path / f"alone{seed}")
        assert_runs_agree(run_dir, tmp_path / f"alone{seed}", *initial_weights(cfg, protocol, seed))
    for seed, run_dir in zip(SEEDS, dirs("on")):
        fit(dataclasses.replace(cfg, seed=seed), protocol, run_dir, stop_after_epoch=1)
    fit_seeds(cfg, protocol, dict(zip(SEEDS, dirs("on"))))  # resumed batched
    for seed, run_dir in zip(SEEDS, dirs("on")):
        assert_runs_agree(run_dir, tmp_path / f"alone{seed}", *initial_weights(cfg, protocol, seed))


def test_seeds_at_different_epochs_are_not_batched_together(protocol, tmp_path):
    cfg = exact_config(approach="softmax", epochs=2)
    fit(dataclasses.replace(cfg, seed=SEEDS[0]), protocol, tmp_path / "a", stop_after_epoch=1)
    with pytest.raises(ConfigError, match=r"same epoch: .*a at epoch 1, .*b at no checkpoint"):
        fit_seeds(cfg, protocol, dict(zip(SEEDS, [tmp_path / "a", tmp_path / "b"])))


# ------------------------------------------------------------------------ the config key
@pytest.mark.parametrize("value, expected", [("auto", "auto"), (True, True), (False, False), ("true", True),
                                             ("False", False)])
def test_batched_seeds_values(value, expected):
    assert check_batched_seeds(value) == expected
    assert parse_experiment({"batched_seeds": value}).batched_seeds == expected


@pytest.mark.parametrize("value", ["yes", 1, None, 2.0])
def test_a_bad_batched_seeds_is_one_line_naming_the_key(value):
    with pytest.raises(ConfigError, match=r"config key 'batched_seeds': must be auto, true or false"):
        parse_experiment({"batched_seeds": value})
    with pytest.raises(ConfigError, match=r"config key 'budgets.fast.batched_seeds'"):
        parse_experiment({"budgets": {"fast": {"batched_seeds": value}}})


def test_auto_batches_seeds_on_a_gpu_only_and_never_under_ddp_or_streaming(monkeypatch):
    from agnostophobia.training import seed_batch

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert resolve_batched_seeds("auto", cuda, seeds=5, distributed=False, streamed=False) is False  # not yet shown
    assert resolve_batched_seeds(True, cuda, seeds=5, distributed=False, streamed=False) is True
    monkeypatch.setattr(seed_batch, "BATCHED_BY_DEFAULT_ON_CUDA", True)  # once a GPU has shown it
    assert resolve_batched_seeds("auto", cuda, seeds=5, distributed=False, streamed=False) is True
    assert resolve_batched_seeds("auto", cuda, seeds=1, distributed=False, streamed=False) is False
    assert resolve_batched_seeds("auto", cpu, seeds=5, distributed=False, streamed=False) is False
    assert resolve_batched_seeds("auto", cuda, seeds=5, distributed=True, streamed=False) is False
    assert resolve_batched_seeds("auto", cuda, seeds=5, distributed=False, streamed=True) is False
    assert resolve_batched_seeds(True, cpu, seeds=2, distributed=False, streamed=False) is True
    with pytest.raises(ConfigError, match="batched_seeds: true cannot run under torchrun"):
        resolve_batched_seeds(True, cpu, seeds=2, distributed=True, streamed=False)
    with pytest.raises(ConfigError, match="batched_seeds: true cannot train a protocol streamed"):
        resolve_batched_seeds(True, cpu, seeds=2, distributed=False, streamed=True)


# ------------------------------------------------------------------------ in a reproduction
def test_a_reproduction_trains_each_approachs_seeds_as_one_batch_and_adds_seeds_later(tmp_path, monkeypatch):
    """``batched_seeds: true``: one batch per approach, each seed's files as a separate run's; a
    later ``--seeds 3`` keeps seeds 0-1 and trains seed 2 (alone: the only seed left)."""
    from agnostophobia.experiments import reproduce as reproduce_module
    from agnostophobia.training.config import ExperimentConfig
    from agnostophobia.training.device import resolve_device

    batches = []
    real = reproduce_module.fit_seeds
    monkeypatch.setattr(reproduce_module, "fit_seeds", lambda cfg, protocol, folders, **kw: (
        batches.append((cfg.approach, list(folders))), real(cfg, protocol, folders, **kw))[1])
    experiment = ExperimentConfig(exact_config(epochs=1), ["softmax", "entropic"], seeds=2, concurrent_runs=1,
                                  batched_seeds=True)
    messages = []
    protocol = noise_protocol()
    device = resolve_device(experiment.train.device)  # as the command resolves it
    stored = reproduce_module.train_and_store(experiment, tmp_path, device, log=messages.append, protocol=protocol)
    assert batches == [("softmax", [0, 1]), ("entropic", [0, 1])]
    assert stored.batched_seeds is True
    assert any("[seeds 0, 1] entropic: training on" in m and "2 seeds batched as one model" in m for m in messages)
    for seed in (0, 1):
        for approach in ("softmax", "entropic"):
            run_dir = tmp_path / f"seed{seed}" / approach
            assert load_checkpoint(run_dir / "last.pt")["finished"]
            assert all((run_dir / name).is_file() for name in ("outputs.npz", "fit_outputs.npz", "val_outputs.npz"))
    timings = __import__("json").loads((tmp_path / "timings.json").read_text())
    assert set(timings) == {f"seed{s}/{a}" for s in (0, 1) for a in ("softmax", "entropic")}
    experiment.seeds = 3
    batches.clear()
    messages.clear()
    reproduce_module.train_and_store(experiment, tmp_path, device, log=messages.append, protocol=protocol)
    assert batches == []  # seed 2 is alone in its approach
    assert sum("finished earlier, kept" in m for m in messages) == 4
    assert (tmp_path / "seed2" / "entropic" / "outputs.npz").is_file()
    # a run whose network finished but whose outputs are gone (a copy) predicts them and says so
    (tmp_path / "seed0" / "softmax" / "outputs.npz").unlink()
    messages.clear()
    reproduce_module.train_and_store(experiment, tmp_path, device, log=messages.append, protocol=protocol)
    assert any(m.startswith("[seed 0] softmax: trained (1 epoch(s)); predicting its stored outputs") for m in messages)
    assert not any("training on" in m for m in messages)
    assert (tmp_path / "seed0" / "softmax" / "outputs.npz").is_file()


def test_seeds_resume_in_groups_of_the_same_epoch(tmp_path):
    """A batch killed between two seeds' checkpoints, or seeds added later, resume as groups of
    seeds at the same epoch, each group one batch (a group of one trains as a separate run)."""
    from agnostophobia.experiments.reproduce import training_units
    from agnostophobia.training.distributed import current

    protocol = noise_protocol()
    cfg = exact_config(approach="entropic", epochs=3)
    pending = [(dataclasses.replace(cfg, seed=seed), ModelDir.at(tmp_path / f"seed{seed}")) for seed in range(4)]
    for seed in (0, 1):
        fit(pending[seed][0], protocol, pending[seed][1], stop_after_epoch=1)
    fit(pending[2][0], protocol, pending[2][1], stop_after_epoch=2)
    units = training_units(pending, batched=True, world=current())
    assert [[c.seed for c, _ in unit] for unit in units] == [[0, 1], [2], [3]]
    assert [[c.seed for c, _ in unit] for unit in training_units(pending, False, current())] == [[0], [1], [2], [3]]


# ------------------------------------------------------------------------ no host synchronisation
def test_batched_crop_flip_draws_each_seeds_own_augmentation():
    x = torch.rand(2, 5, 3, 8, 8)
    got = crop_flip(x, [torch.Generator().manual_seed(seed) for seed in (4, 9)])
    for i, seed in enumerate((4, 9)):
        assert torch.equal(got[i], crop_flip(x[i], torch.Generator().manual_seed(seed)))


def test_one_seeds_run_draws_from_its_one_generator_as_a_list_of_one(protocol):
    """The trainer hands every run its augmentation generators as a list, one per seed: a separate
    run's list of one draws what its generator alone draws, so its augmentation is as it always was."""
    assert len(Training(exact_config(augment="crop-flip"), protocol).augment_generator(0)) == 1
    alone = crop_flip_draws(torch.Generator().manual_seed(5), 7, 3, 16)
    assert torch.equal(crop_flip_draws([torch.Generator().manual_seed(5)], 7, 3, 16), alone)
    assert not torch.equal(crop_flip_draws([torch.Generator().manual_seed(6)], 7, 3, 16), alone)


@pytest.mark.parametrize("options", [{}, {"augment": "crop-flip", "adversarial_epsilon": 0.01}], ids=["plain", "augment-fgsm"])
@pytest.mark.parametrize("approach", BATCHED_APPROACHES)
def test_batched_steps_need_no_host_synchronisation(approach, options, monkeypatch):
    """Traced on the ``meta`` device as ``tests/training/test_hostsync.py`` traces one run."""
    from tests.training.test_hostsync import META, HostSyncs, meta_run

    from agnostophobia.training.trainer import evaluation_sums, train_steps

    run = meta_run(approach, options, monkeypatch, seeds=SEEDS)
    with HostSyncs(META) as syncs:
        sums = train_steps(run, 0)
        loss_sums, corrects = evaluation_sums(run, run.val_data)
    assert syncs.found == []
    assert sums.loss_sum.shape == sums.correct.shape == loss_sums.shape == corrects.shape == (len(SEEDS),)


@pytest.mark.cuda
@pytest.mark.parametrize("approach", BATCHED_APPROACHES)
def test_cuda_batched_steps_never_synchronise_and_train_every_seed(approach, monkeypatch, tmp_path):
    """bf16, sample weights, crop-flip and FGSM, under ``set_sync_debug_mode("error")``; then a
    whole batched fit on CUDA leaves each seed a separate run's files with finite losses."""
    from tests.training.test_hostsync import steps_under_sync_error

    from agnostophobia.training import trainer
    from agnostophobia.training.hostsync import read_once
    from agnostophobia.training.trainer import train_one_epoch_seeds

    monkeypatch.setattr(trainer, "DIVERGENCE_CHECK_EVERY", 4)
    cfg = tiny_config(approach=approach, device="cuda", precision="bf16", sample_weighting=True, batch_size=4,
                      augment="crop-flip", adversarial_epsilon=0.01)
    run = Training(cfg, synthetic_protocol(), seeds=SEEDS)
    train_one_epoch_seeds(run, 0)  # warm-up
    sums, loss_sums, _ = steps_under_sync_error(run)
    assert all(torch.isfinite(torch.tensor(read_once(sums.loss_sum, loss_sums))))
    fit_seeds(dataclasses.replace(cfg, epochs=2), synthetic_protocol(), {s: tmp_path / str(s) for s in SEEDS})
    for seed in SEEDS:
        saved = load_checkpoint(tmp_path / str(seed) / "last.pt")
        assert saved["finished"] and all(torch.isfinite(torch.tensor(row["val_loss"])) for row in saved["history"])
