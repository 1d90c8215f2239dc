"""Trainer: determinism, atomic checkpoints, resume after a stop or a kill, configs."""
import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from agnostophobia._killpoints import ENV as KILL_ENV
from agnostophobia.errors import AgnostophobiaWarning, ConfigError
from agnostophobia.losses import LOSSES, build_loss, known_columns
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.config import TrainConfig, load_experiment, parse_experiment
from agnostophobia.training.outputs import predict
from agnostophobia.training.fitting import fit
from agnostophobia.training.batches import epoch_order
from agnostophobia.training.trainer import Training
from synthetic import END_TO_END_APPROACHES, synthetic_protocol
from repo_paths import SUPPORT


def tiny_config(**changes) -> TrainConfig:
    base = dict(approach="entropic", epochs=3, batch_size=16, lr=1e-3, model_kwargs={"activation": "prelu"},
                tensorboard=False, progress=False, seed=1)
    base.update(changes)
    return TrainConfig(**base).validate()


def weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("approach", END_TO_END_APPROACHES)
def test_every_approach_trains_and_predicts(approach, tmp_path):
    protocol = synthetic_protocol()
    run = fit(tiny_config(approach=approach, epochs=1), protocol, tmp_path)
    logits, features = predict(run.model, protocol.test_known.images)
    width = protocol.num_classes + (approach == "background")
    assert logits.shape == (len(protocol.test_known.labels), width)
    assert features.shape == (len(protocol.test_known.labels), 2)
    history = (tmp_path / "metrics.csv").read_text().splitlines()
    assert len(history) == 2 and history[0].startswith("epoch,lr,train_loss")
    assert torch.isfinite(torch.tensor([float(x) for x in history[1].split(",")])).all()


def test_training_learns_the_synthetic_task(tmp_path):
    protocol = synthetic_protocol()
    run = fit(tiny_config(epochs=4, lr=3e-3), protocol, tmp_path)
    logits, _ = predict(run.model, protocol.test_known.images)
    accuracy = (logits.argmax(1) == protocol.test_known.labels).mean()
    assert accuracy > 0.6  # chance is 1/3


def test_same_seed_same_weights_other_seed_differs(tmp_path):
    protocol = synthetic_protocol()
    a = weights(fit(tiny_config(epochs=2), protocol, tmp_path / "a").model)
    b = weights(fit(tiny_config(epochs=2), protocol, tmp_path / "b").model)
    c = weights(fit(tiny_config(epochs=2, seed=2), protocol, tmp_path / "c").model)
    assert_same_weights(a, b)
    assert not torch.equal(a["features.weight"], c["features.weight"])


def test_epoch_order_depends_only_on_seed_and_epoch():
    assert torch.equal(epoch_order(50, 3, 7), epoch_order(50, 3, 7))
    assert not torch.equal(epoch_order(50, 3, 7), epoch_order(50, 3, 8))
    assert sorted(epoch_order(50, 3, 7).tolist()) == list(range(50))


def test_resume_after_stop_equals_uninterrupted(tmp_path):
    protocol = synthetic_protocol()
    cfg = tiny_config(approach="objectosphere", epochs=3)
    full = fit(cfg, protocol, tmp_path / "full")
    fit(cfg, protocol, tmp_path / "split", stop_after_epoch=1)
    assert load_checkpoint(tmp_path / "split" / "last.pt")["epoch"] == 1
    resumed = fit(cfg, protocol, tmp_path / "split", resume=True)
    assert_same_weights(weights(full.model), weights(resumed.model))
    for name in ("last.pt", "best.pt"):
        assert_same_weights(load_checkpoint(tmp_path / "full" / name)["model"],
                            load_checkpoint(tmp_path / "split" / name)["model"])
    # the log is rewritten from the checkpoint: one row per epoch, no duplicates
    assert (tmp_path / "split" / "metrics.csv").read_text() .count("\n") == 4


def test_existing_run_needs_resume_and_matching_config(tmp_path):
    protocol = synthetic_protocol()
    fit(tiny_config(epochs=1), protocol, tmp_path)
    with pytest.raises(ConfigError, match="resume"):
        fit(tiny_config(epochs=1), protocol, tmp_path, resume=False)
    with pytest.raises(ConfigError, match="lr"):
        fit(tiny_config(epochs=1, lr=0.5), protocol, tmp_path, resume=True)


def test_best_checkpoint_holds_lowest_validation_loss(tmp_path):
    protocol = synthetic_protocol()
    fit(tiny_config(epochs=4, lr=3e-2), protocol, tmp_path)
    last = load_checkpoint(tmp_path / "last.pt")
    losses = [row["val_loss"] for row in last["history"]]
    best = load_checkpoint(tmp_path / "best.pt")
    assert best["epoch"] == 1 + losses.index(min(losses))
    assert best["val_loss"] == min(losses)


def test_keep_checkpoint_last_keeps_the_last_epoch_whatever_its_validation_loss(tmp_path):
    """keep_checkpoint: last (a schedule decaying to zero): best.pt is the last epoch's network, the
    one the run ends with, also where an earlier epoch had the lower validation loss."""
    protocol = synthetic_protocol()
    training = fit(tiny_config(epochs=4, lr=3e-2, keep_checkpoint="last"), protocol, tmp_path)
    last, best = load_checkpoint(tmp_path / "last.pt"), load_checkpoint(tmp_path / "best.pt")
    assert best["epoch"] == 4 and best["val_loss"] == last["history"][-1]["val_loss"]
    assert_same_weights(best["model"], last["model"])
    assert_same_weights(weights(training.model), best["model"])  # the network fit leaves is the kept one
    with pytest.raises(ConfigError, match="keep_checkpoint"):
        tiny_config(keep_checkpoint="best")


TRAIN_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from synthetic import synthetic_protocol
    from agnostophobia.training.config import TrainConfig
    from agnostophobia.training.fitting import fit
    cfg = TrainConfig(**{fields!r}).validate()
    fit(cfg, synthetic_protocol(), {run_dir!r})
""")


def train_in_subprocess(cfg: TrainConfig, run_dir, kill_at=None) -> int:
    """Train ``cfg`` on the synthetic protocol into ``run_dir`` (resuming) in a fresh process
    with one thread, killed at the kill point ``kill_at`` if given; returns its exit status."""
    script = TRAIN_SCRIPT.format(tests=str(SUPPORT), fields=dataclasses.asdict(cfg), run_dir=str(run_dir))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop(KILL_ENV, None)
    if kill_at:
        env[KILL_ENV] = kill_at
    return subprocess.run([sys.executable, "-c", script], env=env, timeout=300).returncode


@pytest.mark.slow  # over 10 s on 2 cores: make test stays within 10 minutes; CI runs it with the slow tests
@pytest.mark.parametrize("kill_at, temps_left", [("train-step:7", 0), ("write:last.pt:3", 1)])
def test_resume_after_sigkill_equals_uninterrupted(tmp_path, kill_at, temps_left):
    """A real kill (SIGKILL, no clean-up) in epoch 3, mid-epoch or while ``last.pt`` is being
    replaced, then a resume, gives the weights of an uninterrupted run."""
    cfg = tiny_config(epochs=4, batch_size=24)  # 72 training samples: 3 steps per epoch
    run_dir = tmp_path / "killed"
    assert train_in_subprocess(cfg, run_dir, kill_at) == -signal.SIGKILL
    # the checkpoint is whole and from epoch 2; a complete temporary copy of epoch 3's may be
    # left behind, but it never replaced the checkpoint
    assert load_checkpoint(run_dir / "last.pt")["epoch"] == 2
    leftovers = list(run_dir.glob(".*.tmp"))
    assert len(leftovers) == temps_left
    assert all(load_checkpoint(tmp)["epoch"] == 3 for tmp in leftovers)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the killed process: float sums depend on the thread count
    try:
        resumed = fit(cfg, synthetic_protocol(), run_dir, resume=True)
        full = fit(cfg, synthetic_protocol(), tmp_path / "full")
    finally:
        torch.set_num_threads(threads)
    assert not list(run_dir.glob(".*.tmp"))  # resuming removed what the kill left
    assert_same_weights(weights(full.model), weights(resumed.model))


def test_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ConfigError, match="'epochz'"):
        parse_experiment({"epochz": 3})
    with pytest.raises(ConfigError, match="'lr'"):
        parse_experiment({"lr": -1})
    with pytest.raises(ConfigError, match="approach"):
        parse_experiment({"approaches": ["softmax", "magic"]})
    with pytest.raises(ConfigError, match=r"'budgets\.smoke\.epoch'"):
        parse_experiment({"budgets": {"smoke": {"epoch": 1}}})
    experiment = parse_experiment({"loss": {"lambda": 0.5}, "budgets": {"smoke": {"epochs": 2, "seeds": 3}}})
    assert experiment.train.loss == {"lambda_": 0.5}
    smoke = experiment.for_budget("smoke")
    assert (smoke.train.epochs, smoke.seeds) == (2, 3)
    with pytest.raises(ConfigError, match="budget 'cpu'"):
        experiment.for_budget("cpu")


def test_the_background_approach_is_the_one_with_an_extra_output():
    shipped = ["softmax", "background", "entropic", "objectosphere",  # the paper's order
               "outlier-exposure", "outlier-exposure-ft", "energy-regularized", "energy-regularized-ft", "mixoe",
               "mixoe-ft", "maximal-entropy", "logitnorm", "vos"]  # then the training peers, each fine-tune beside its loss
    # in this order among whatever else is registered (a new loss needs no edit here)
    assert [name for name in LOSSES.registered() if name in shipped] == shipped
    assert [name for name in shipped if LOSSES.get(name).background_class] == ["background"]
    for name in LOSSES.registered():  # the network width the trainer builds agrees with the flag
        loss = build_loss(name, 10)
        assert loss.num_outputs == 10 + LOSSES.get(name).background_class
        assert known_columns(name, loss.num_outputs) == 10


def test_adversarial_training_adds_the_loss_of_fgsm_examples():
    from agnostophobia.training.adversarial import fgsm_step
    from agnostophobia.training.augment import to_input
    from agnostophobia.training.trainer import Training

    protocol = synthetic_protocol()
    run = Training(tiny_config(approach="softmax", adversarial_epsilon=0.05), protocol)
    x, y = to_input(run.train_data.images[:8], False), run.train_data.labels[:8]
    loss, _ = run.training_loss(x, y)
    inputs = x.clone().requires_grad_(True)
    clean, _ = run.batch_loss(inputs, y)
    (grad,) = torch.autograd.grad(clean, inputs)
    adversarial, _ = run.batch_loss(fgsm_step(x, grad, 0.05), y)
    torch.testing.assert_close(loss, clean + adversarial)
    assert adversarial > clean
    plain = Training(tiny_config(approach="softmax"), protocol)  # same seed, same weights, no FGSM
    torch.testing.assert_close(plain.training_loss(x, y)[0], clean)


def test_old_top_level_xi_and_lambda_still_set_the_objectosphere_loss(tmp_path, capsys):
    experiment = parse_experiment({"approaches": ["objectosphere"], "xi": 10, "lambda": 1e-3,
                                   "budgets": {"cpu": {"xi": 20}}})
    cfg = experiment.for_approach("objectosphere", 0)
    assert cfg.loss == {"xi": 10, "lambda_": 1e-3} and not hasattr(cfg, "xi")
    assert cfg.loss_settings() == {"xi": 10, "lambda_": 1e-3}
    assert experiment.for_budget("cpu").train.loss == {"xi": 20, "lambda_": 1e-3}  # over the config's own
    with pytest.raises(ConfigError, match="'xi' and 'loss.xi' disagree"):
        parse_experiment({"xi": 10, "loss": {"xi": 20}})
    assert parse_experiment({"xi": 10, "loss": {"xi": 10}}).train.loss == {"xi": 10}
    path = tmp_path / "old.yaml"  # a file with the old keys says once, in one line, where they live now
    path.write_text("approaches: [objectosphere]\nxi: 10\nlambda: 1.0e-3\n")
    with pytest.warns(AgnostophobiaWarning) as note:
        load_experiment(path), load_experiment(path)
    assert len(note) == 1 and "xi, lambda: read as loss.xi / loss.lambda" in str(note[0].message)
    loss = Training(cfg, synthetic_protocol()).loss_fn
    assert (loss.xi, loss.lambda_) == (10.0, 1e-3)
    assert experiment.for_approach("entropic", 0).loss_settings() == {}  # J_E reads neither


def test_loss_settings_are_checked_against_the_losses_signatures():
    with pytest.raises(ConfigError, match="'loss.smoothing': no registered loss declares it"):
        parse_experiment({"loss": {"smoothing": 1.0}})
    with pytest.raises(ConfigError, match="'loss.margin': must be a number >= 0"):  # Maximal Entropy's margin
        parse_experiment({"approaches": ["maximal-entropy"], "loss": {"margin": -1.0}})
    with pytest.raises(ConfigError, match="config key 'loss': must be a mapping"):
        parse_experiment({"loss": [1]})


def test_every_scalar_config_key_is_declared_once_and_checked_by_its_declaration():
    """TrainConfig's scalar keys carry their Setting (type, default, range or choices,
    resumability): the dataclass default is the declared one, a value outside the declaration
    is refused naming the key, and the resume rule lists exactly the keys declared resumable."""
    from agnostophobia.settings import field_settings
    from agnostophobia.training.records import RESUME_FREE_KEYS

    declared = field_settings(TrainConfig)
    defaults = TrainConfig()
    assert {"epochs", "lr", "optimizer", "precision", "cpu_threads", "tensorboard", "knn"} <= set(declared)
    for key, setting in declared.items():
        assert getattr(defaults, key) == setting.default, key
        assert setting.problem(setting.default) is None, key
    assert RESUME_FREE_KEYS == {key for key, setting in declared.items() if setting.resumable}
    assert "deterministic" not in RESUME_FREE_KEYS and "lr" not in RESUME_FREE_KEYS
    for key, bad, message in (("epochs", 0, "must be an integer in \\[1, 100000\\]"), ("lr", 0.0, "must be a number > 0"),
                              ("optimizer", "rmsprop", "must be one of adam, sgd"),
                              ("adversarial_epsilon", 2.0, r"must be a number in \[0, 1\]"),
                              ("cpu_threads", 0, "must be null or an integer >= 1"),
                              ("tensorboard", "yes", "must be auto or true or false")):
        with pytest.raises(ConfigError, match=f"'{key}': {message}"):
            parse_experiment({key: bad})
    assert parse_experiment({"cpu_threads": None}).train.cpu_threads is None


def test_an_experiment_file_is_parsed_once_per_process(tmp_path, monkeypatch):
    """``--budget`` checked, then the run configured: one read of the YAML; each caller gets its
    own copy, and a changed file is read again."""
    from agnostophobia.training import config as config_module

    reads = []
    real_read = config_module.read_yaml
    monkeypatch.setattr(config_module, "read_yaml", lambda path: reads.append(path) or real_read(path))
    path = tmp_path / "once.yaml"
    path.write_text("epochs: 3\nbudgets: {quick: {epochs: 1}}\n")
    first, second = load_experiment(path), load_experiment(path)
    assert len(reads) == 1 and first is not second
    first.train.epochs = 99
    assert load_experiment(path).train.epochs == 3
    path.write_text("epochs: 4\nbudgets: {quick: {epochs: 1}}\n# changed\n")
    assert load_experiment(path).train.epochs == 4 and len(reads) == 2


def test_tensorboard_is_on_where_installed_and_true_without_it_names_the_extra(monkeypatch, tmp_path, capsys):
    """tensorboard is the [tensorboard] extra: the config key's default, auto, logs where it is
    installed; true without it stops the command in one line, before anything is written."""
    import importlib.util

    from runs import write_config

    from agnostophobia.cli import main
    from agnostophobia.training import epoch_log

    real_find_spec = importlib.util.find_spec
    assert TrainConfig().tensorboard == "auto" and parse_experiment({"tensorboard": True}).train.tensorboard is True
    assert epoch_log.use_tensorboard("auto") is (real_find_spec("tensorboard") is not None)
    assert epoch_log.use_tensorboard(False) is False
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "tensorboard" else real_find_spec(name, *rest))
    assert epoch_log.use_tensorboard("auto") is False and epoch_log.open_tensorboard(tmp_path, "auto") is None
    config = write_config(tmp_path / "logged.yaml", tensorboard=True)
    assert main(["train", str(config), "--out", str(tmp_path / "run"), "--no-progress"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "agnostophobia: error: config key 'tensorboard': true needs the tensorboard package: "
        "pip install 'agnostophobia[tensorboard]' (or set tensorboard: auto or false)"]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("width, unsafe", [(2, True), (4, True), (8, False), (16, False)])
def test_a_narrow_resnet_trains_contiguous_on_a_cpu_and_a_wide_one_in_channels_last(width, unsafe):
    """oneDNN corrupts the heap computing the weight gradient of a 1x1 stride-2 convolution with
    2-7 input channels in channels_last (torch 2.14.1, AVX2 Zen 3): a narrow ResNet's shortcut."""
    from agnostophobia.training.device import unsafe_channels_last_convolutions
    cfg = tiny_config(model="resnet18", model_kwargs={"width": width, "feature_dim": 8, "in_channels": 1},
                      channels_last=True)
    run = Training(cfg, synthetic_protocol())
    assert bool(unsafe_channels_last_convolutions(run.model)) == unsafe
    assert run.channels_last == (not unsafe)
    assert run.seed_run(0).channels_last == run.channels_last
    asked_off = Training(dataclasses.replace(cfg, channels_last=False), synthetic_protocol())
    assert asked_off.channels_last is False


def test_a_narrow_resnet_trains_on_a_cpu_without_corrupting_memory():
    """The layer that crashed (above) trains through the trainer's step 20 times in a fresh process,
    where a corrupted heap aborts or hangs (it did within 20 steps before the rule)."""
    code = textwrap.dedent("""\
        import sys; sys.path[:0] = [%r]
        from synthetic import synthetic_protocol
        from agnostophobia.training.config import TrainConfig
        from agnostophobia.training.fitting import fit
        cfg = TrainConfig(approach="softmax", model="resnet18", epochs=7, batch_size=16, tensorboard=False,
                          progress=False, compile=False, model_kwargs={"width": 2, "feature_dim": 8, "in_channels": 1})
        fit(cfg.validate(), synthetic_protocol(), sys.argv[1])
        print("trained")
        """) % str(SUPPORT)
    import tempfile
    with tempfile.TemporaryDirectory() as out:
        result = subprocess.run([sys.executable, "-c", code, out], capture_output=True, text=True, timeout=120,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0 and "trained" in result.stdout, result.stderr[-2000:]
