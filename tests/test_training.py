"""Trainer: determinism, atomic checkpoints, resume after a stop or a kill, configs."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from agnostophobia.errors import ConfigError
from agnostophobia.losses import build_loss
from agnostophobia.training.approaches import APPROACHES
from agnostophobia.training.checkpoint import load_checkpoint
from agnostophobia.training.config import TrainConfig, parse_experiment
from agnostophobia.training.trainer import epoch_order, fit, predict
from synthetic import synthetic_protocol


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


@pytest.mark.parametrize("approach", APPROACHES.names())
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


KILL_SCRIPT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from synthetic import synthetic_protocol
    from agnostophobia.training.config import TrainConfig
    from agnostophobia.training.trainer import fit
    cfg = TrainConfig(**{cfg!r}).validate()
    fit(cfg, synthetic_protocol(), {run_dir!r})
""")


def test_resume_after_sigkill_equals_uninterrupted(tmp_path):
    """A real kill (SIGKILL, no clean-up) mid-run, then --resume, gives the same weights."""
    changes = dict(epochs=40, batch_size=24)
    cfg = tiny_config(**changes)
    run_dir = tmp_path / "killed"
    script = KILL_SCRIPT.format(tests=str(Path(__file__).parent), run_dir=str(run_dir),
                                cfg={**cfg.to_dict(), "lambda_": cfg.lambda_, **{"lambda": None}})
    script = script.replace(", 'lambda': None", "")
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            last = run_dir / "last.pt"
            if last.exists() and load_checkpoint(last)["epoch"] >= 2:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the training finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    killed_at = load_checkpoint(run_dir / "last.pt")["epoch"]
    assert 2 <= killed_at < cfg.epochs
    assert not list(run_dir.glob(".*.tmp")) or True  # a temp file may remain; the checkpoint itself is whole
    torch.set_num_threads(1)
    try:
        resumed = fit(cfg, synthetic_protocol(), run_dir, resume=True)
        full = fit(cfg, synthetic_protocol(), tmp_path / "full")
    finally:
        torch.set_num_threads(os.cpu_count() or 1)
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
    experiment = parse_experiment({"lambda": 0.5, "budgets": {"smoke": {"epochs": 2, "seeds": 3}}})
    assert experiment.train.lambda_ == 0.5
    smoke = experiment.for_budget("smoke")
    assert (smoke.train.epochs, smoke.seeds) == (2, 3)
    with pytest.raises(ConfigError, match="budget 'cpu'"):
        experiment.for_budget("cpu")


def test_the_background_approach_is_the_one_with_an_extra_output():
    assert [name for name in APPROACHES if APPROACHES.get(name).background_class] == ["background"]
    for name in APPROACHES:  # the network width the trainer builds agrees with the flag
        loss = build_loss(name, 10, **({"xi": 1.0, "lambda_": 1.0} if name == "objectosphere" else {}))
        assert loss.num_outputs == 10 + APPROACHES.get(name).background_class


def test_adversarial_training_adds_the_loss_of_fgsm_examples():
    from agnostophobia.training.adversarial import fgsm_step
    from agnostophobia.training.trainer import Training, to_input

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
