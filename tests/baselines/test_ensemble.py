"""The adversarially trained MLP ensemble baseline (paper Fig. 3b/3c, ``reproduce ensemble``):
scaling invariance of OSCR, FGSM, ensemble averaging, members trained and resumed by the
shared trainer, the config (an experiment YAML like every other), and the smoke
reproduction on the real staged data."""
import json
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from synthetic import synthetic_protocol

from agnostophobia.baselines import ensemble as ens
from agnostophobia.cli import main
from agnostophobia.detectors import softmax_scores
from agnostophobia.errors import ConfigError
from agnostophobia.experiments.reproduce_ensemble import reproduce_ensemble
from agnostophobia.experiments.request import RunRequest
from agnostophobia.experiments.run_metrics import FPR_KEYS
from agnostophobia.metrics import ccr_at_fpr, oscr, precision_vs_confidence
from agnostophobia.models.mlp import build_mlp
from agnostophobia.training.adversarial import adversarial_loss, fgsm_step
from agnostophobia.training.checkpoint import load_checkpoint, seed_everything
from agnostophobia.training.config import CONFIG_DIR, TrainConfig, load_experiment
from agnostophobia.training.outputs import load_outputs, save_outputs
from agnostophobia.training.fitting import fit

GRID = np.linspace(0, 1, 101)


def synthetic_probabilities(seed=0, n_known=400, n_unknown=300, classes=10):
    """Peaked probabilities for knowns (mostly right), flatter ones for unknowns."""
    rng = np.random.default_rng(seed)
    labels = np.concatenate([rng.integers(0, classes, n_known), np.full(n_unknown, -1)])
    alpha = np.ones((n_known + n_unknown, classes))
    alpha[np.arange(n_known), labels[:n_known]] += rng.uniform(0, 30, n_known)
    return np.stack([rng.dirichlet(a) for a in alpha]), labels


# ------------------------------------------------------------------ scaling invariance

def test_squaring_keeps_oscr_and_ccr_but_moves_precision_vs_confidence():
    probs, labels = synthetic_probabilities()
    squared = ens.squared_scores(probs)
    np.testing.assert_array_equal(squared, probs ** 2)
    a, b = oscr(probs, labels), oscr(squared, labels)
    np.testing.assert_array_equal(a.fpr, b.fpr)
    np.testing.assert_array_equal(a.ccr, b.ccr)
    assert len(a.fpr) > 100  # a real curve, not a trivial one
    np.testing.assert_array_equal(ccr_at_fpr(probs, labels, [1e-2, 1e-1, 0.5]),
                                  ccr_at_fpr(squared, labels, [1e-2, 1e-1, 0.5]))
    diff = np.abs(precision_vs_confidence(probs, labels, GRID).value -
                  precision_vs_confidence(squared, labels, GRID).value)
    assert np.nanmax(diff) > 0.05
    summary = ens.scaling_invariance(probs, labels)
    assert summary["oscr_identical"] and summary["ccr_at_fpr_identical"]
    assert summary["precision_max_abs_difference"] > 0.05


def test_a_non_monotonic_rescaling_does_change_the_oscr_curve():
    """Negative control: the equality above is not vacuous."""
    probs, labels = synthetic_probabilities()
    a, b = oscr(probs, labels), oscr(probs * (1 - probs), labels)
    assert not (np.array_equal(a.fpr, b.fpr) and np.array_equal(a.ccr, b.ccr))
    assert not ens.scaling_invariance(probs, labels, transform=lambda p: p * (1 - p))["oscr_identical"]


MONOTONIC = {
    "affine": lambda x, a, b: a * x + b,
    "square": lambda x, a, b: x ** 2,
    "cube": lambda x, a, b: a * x ** 3,
    "sqrt": lambda x, a, b: np.sqrt(x),
    "exp": lambda x, a, b: np.exp(a * x),
    "log": lambda x, a, b: np.log(x + 0.01),
    "tanh": lambda x, a, b: np.tanh(a * x) + b,
}


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(2, 60), classes=st.integers(2, 5),
       names=st.lists(st.sampled_from(sorted(MONOTONIC)), min_size=1, max_size=3),
       a=st.floats(0.5, 4.0), b=st.floats(-1.0, 1.0))
def test_oscr_and_ccr_are_invariant_under_random_monotonic_transforms(data, n, classes, names, a, b):
    # scores on a grid of 1/64 steps: many ties within and across rows, no rounding merges
    grid = data.draw(st.lists(st.integers(0, 64), min_size=n * classes, max_size=n * classes))
    scores = np.array(grid, dtype=np.float64).reshape(n, classes) / 64
    labels = np.array(data.draw(st.lists(st.integers(-1, classes - 1), min_size=n, max_size=n)))
    labels[0], labels[-1] = -1, 0  # both kinds present
    transformed = scores
    for name in names:  # a composition of strictly increasing maps is strictly increasing
        # each map sees values in [0.25, 0.75] (positive, far from saturation and overflow)
        low, high = transformed.min(), transformed.max()
        if high > low:
            transformed = (transformed - low) / (high - low) * 0.5 + 0.25
        transformed = MONOTONIC[name](transformed, a, b)
    a_curve, b_curve = oscr(scores, labels), oscr(transformed, labels)
    np.testing.assert_array_equal(a_curve.fpr, b_curve.fpr)
    np.testing.assert_array_equal(a_curve.ccr, b_curve.ccr)
    targets = [0.0, 0.1, 0.25, 0.5, 1.0]
    np.testing.assert_array_equal(ccr_at_fpr(scores, labels, targets), ccr_at_fpr(transformed, labels, targets))


# ------------------------------------------------------------------------------ FGSM

def fgsm(model, x, y, epsilon):
    """The FGSM example of ``x`` for the NLL of ``model`` (in its current mode), the parameter
    gradients left untouched: the reference the trainer's :func:`adversarial_loss` is held to."""
    x = x.detach().requires_grad_(True)
    (grad,) = torch.autograd.grad(F.cross_entropy(model(x), y), x)
    return fgsm_step(x, grad, epsilon)


def _fixed_model(seed=0, batch_norm=False):
    seed_everything(seed)
    return build_mlp([32, 32], 10, 784, batch_norm).eval()


def test_fgsm_moves_every_pixel_by_epsilon_along_the_gradient_sign_and_raises_the_loss():
    model = _fixed_model()
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(16, 784, generator=gen)
    x[:, :100] = 0.0     # MNIST background: pixels that cannot go lower
    x[:, 100:150] = 1.0  # saturated strokes: cannot go higher
    x[:, 150:160] = 0.995
    y = torch.randint(0, 10, (16,), generator=gen)
    eps = 0.01
    xg = x.clone().requires_grad_(True)
    loss = F.cross_entropy(model(xg), y)
    (grad,) = torch.autograd.grad(loss, xg)

    adv = fgsm(model, x, y, eps)
    assert all(p.grad is None for p in model.parameters())  # the model is left alone
    up, down = grad > 0, grad < 0
    assert up.sum() > 1000 and down.sum() > 1000
    step = adv - x
    free_up, free_down = up & (x <= 1 - eps), down & (x >= eps)
    torch.testing.assert_close(step[free_up], torch.full_like(step[free_up], eps), atol=1e-7, rtol=0)
    torch.testing.assert_close(step[free_down], torch.full_like(step[free_down], -eps), atol=1e-7, rtol=0)
    assert torch.equal(adv[up & (x > 1 - eps)], torch.ones_like(adv[up & (x > 1 - eps)]))   # clipped at 1
    assert torch.equal(adv[down & (x < eps)], torch.zeros_like(adv[down & (x < eps)]))     # clipped at 0
    assert torch.equal(adv[grad == 0], x[grad == 0])
    assert adv.min() >= 0 and adv.max() <= 1 and (adv - x).abs().max() <= eps + 1e-7
    with torch.no_grad():
        assert F.cross_entropy(model(adv), y) > F.cross_entropy(model(x), y)
        per_sample = F.cross_entropy(model(adv), y, reduction="none") - F.cross_entropy(model(x), y, reduction="none")
    assert (per_sample > 0).all()
    # the batch-mean gradient gives each sample the step of its own loss (no batch norm)
    torch.testing.assert_close(fgsm(model, x[3:4], y[3:4], eps), adv[3:4], atol=0, rtol=0)


def test_adversarial_training_loss_is_nll_of_clean_plus_nll_of_fgsm_example():
    model = _fixed_model(2)
    x = torch.rand(8, 784, generator=torch.Generator().manual_seed(3))
    y = torch.arange(8) % 10

    def nll(inputs, labels):
        logits = model(inputs)
        return F.cross_entropy(logits, labels), logits

    loss, logits = adversarial_loss(nll, x, y, 0.01)  # what the trainer adds with adversarial_epsilon
    x_adv = fgsm(model, x, y, 0.01)
    with torch.no_grad():
        clean, adv = F.cross_entropy(model(x), y), F.cross_entropy(model(x_adv), y)
        torch.testing.assert_close(logits, model(x))
    torch.testing.assert_close(loss, clean + adv)
    assert adv > clean


# --------------------------------------------------------------------------- ensemble

def test_the_ensemble_is_the_mean_of_member_softmaxes_and_members_differ():
    models = []
    for seed in (0, 1, 2):
        seed_everything(seed)
        models.append(build_mlp())
    images = np.random.default_rng(0).integers(0, 256, (20, 784), dtype=np.uint8)
    with torch.no_grad():
        x = torch.from_numpy(images).float() / 255
        members = [softmax_scores(m(x)) for m in models]  # as the members' stored logits are read
        expected = torch.stack([torch.softmax(m(x), dim=1) for m in models]).double()
    mean = ens.average_probabilities(members)
    np.testing.assert_allclose(mean, expected.mean(0).numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(mean.sum(1), 1.0, rtol=1e-12)
    assert not torch.equal(models[0][1].weight, models[1][1].weight)
    assert np.abs(members[0] - members[1]).max() > 1e-3 and np.abs(members[1] - members[2]).max() > 1e-3
    with pytest.raises(ValueError, match="at least one member"):
        ens.average_probabilities([])


def _tiny_member_cfg(**changes):
    return TrainConfig(**{"approach": "softmax", "model": "mlp", "model_kwargs": {"hidden": [16]},
                          "adversarial_epsilon": 0.01, "sample_weighting": False, "channels_last": False,
                          "batch_size": 50, "epochs": 2, "lr": 1e-3, "tensorboard": False, "progress": False,
                          "seed": 7, **changes}).validate()


def _without_validation(protocol):
    protocol.val.images, protocol.val.labels = protocol.val.images[:0], protocol.val.labels[:0]
    return protocol


def test_an_interrupted_member_resumes_after_its_last_epoch_with_identical_weights(tmp_path):
    """A member is an ordinary run of the shared trainer: MLP, FGSM, no validation data."""
    protocol = _without_validation(synthetic_protocol(num_classes=10, n_known=300, n_unknown=0))
    cfg = _tiny_member_cfg()
    reference = fit(cfg, protocol, tmp_path / "straight")
    assert [row["epoch"] for row in load_checkpoint(tmp_path / "straight" / "last.pt")["history"]] == [1, 2]
    fit(cfg, protocol, tmp_path / "cut", stop_after_epoch=1)  # as a kill after epoch 1 would leave it
    resumed = fit(cfg, protocol, tmp_path / "cut")
    for a, b in zip(reference.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)
    # without validation data the last epoch's weights are the ones kept
    best = load_checkpoint(tmp_path / "cut" / "best.pt")
    assert best["epoch"] == 2
    for a, b in zip(best["model"].values(), resumed.model.state_dict().values()):
        assert torch.equal(a, b)
    with pytest.raises(ConfigError, match="lr"):  # another configuration never continues this member
        fit(_tiny_member_cfg(lr=0.01), protocol, tmp_path / "cut")


# ----------------------------------------------------------------------------- config

def test_shipped_config_budgets():
    smoke, cpu, paper = (load_experiment("ensemble").for_budget(b) for b in ("smoke", "cpu", "paper"))
    assert smoke.train.epochs == 1
    assert smoke.train.protocol_limits == {"max_known_train": 1000, "max_test_per_set": 500}
    assert cpu.train.protocol_limits == {} and 1 <= cpu.train.epochs <= paper.train.epochs
    for experiment in (smoke, cpu, paper):
        cfg = experiment.train
        assert (experiment.seeds, cfg.model, cfg.model_kwargs["hidden"], cfg.adversarial_epsilon, cfg.optimizer,
                experiment.approaches) == (5, "mlp", [200, 200, 200], 0.01, "adam", ["softmax"])


@pytest.mark.parametrize("edit, named", [
    (lambda d: d.update(bogus_key=1), "bogus_key"),
    (lambda d: d["budgets"]["smoke"].update(epoch=3), "budgets.smoke.epoch"),
    (lambda d: d["budgets"].update(huge={"epoch": 3}), "budgets.huge"),
    (lambda d: d.update(adversarial_epsilon="0.01"), "adversarial_epsilon"),
    (lambda d: d.update(seeds=0), "seeds"),
])
def test_config_errors_name_the_key(tmp_path, edit, named):
    data = yaml.safe_load((CONFIG_DIR / "ensemble.yaml").read_text())
    edit(data)
    path = tmp_path / "ensemble.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_experiment(path).for_budget("smoke")


# ------------------------------------------------------- smoke run on the real data

@pytest.fixture(scope="module")
def smoke_run(real_data_dir, tmp_path_factory):
    base = tmp_path_factory.mktemp("ensemble")
    messages = []
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(base)  # no runs/lenet++-smoke here: no LeNet++ rows by default
        out = reproduce_ensemble(RunRequest("ensemble", budget="smoke", out=base / "run", data_dir=real_data_dir,
                                            progress=False, plots=True), log=messages.append)
    return out, messages


def test_smoke_run_writes_ensemble_rows_and_is_labelled_not_a_result(smoke_run):
    out, messages = smoke_run
    assert sum("softmax: training on 1,000 knowns" in m for m in messages) == 5  # five members
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["budget"] == "smoke"
    rows = {r["row"]: r for r in metrics["ensemble"]["results"]}
    assert set(rows) == {"ensemble", "ensemble-squared"}
    for r in rows.values():
        assert set(r["ccr_at_fpr"]) == set(FPR_KEYS) and (r["num_known"], r["num_unknown"]) == (500, 500)
        assert r["ccr_at_fpr"]["1e-4"] is None and r["ccr_at_fpr"]["1e-3"] is None  # 500 unknowns: N/A
        assert r["ccr_at_fpr"]["1e-1"] is not None
    assert rows["ensemble"]["ccr_at_fpr"] == rows["ensemble-squared"]["ccr_at_fpr"]
    assert rows["ensemble"]["closed_set_accuracy"] == rows["ensemble-squared"]["closed_set_accuracy"]
    inv = metrics["ensemble"]["invariance"]
    assert inv["oscr_identical"] and inv["ccr_at_fpr_identical"] and inv["precision_max_abs_difference"] > 0
    curves = metrics["ensemble"]["confidence_curves"]["rows"]
    assert curves["ensemble"]["precision"] != curves["ensemble-squared"]["precision"]
    for key in ("epochs", "lr", "batch_size", "adversarial_epsilon", "model_kwargs"):
        assert key in metrics["train_config"]
    assert metrics["seeds"] == 5 and metrics["ensemble"]["members"] == [0, 1, 2, 3, 4]
    assert metrics["wall_time_s"] > 0 and metrics["ensemble"]["lenet_run"] is None
    # the members are evaluated like every trained model: every detector, in the shared tables
    assert {r["detector"] for r in metrics["results"]} >= {"softmax", "max-logit", "energy", "knn"}
    report = (out / "report.md").read_text()
    assert "not a result" in report and "Deviations" in report and "| mlp-ensemble: MLP ensemble |" in report
    assert "## Every detector on every trained approach" in report
    for name in ("fig3b_confidence.png", "fig3c_oscr.png"):
        assert (out / "figures" / name).stat().st_size > 10_000 and f"figures/{name}" in report


def test_stored_outputs_recompute_the_numbers_and_members_differ(smoke_run):
    out, _ = smoke_run
    members = [load_outputs(out / f"seed{m}" / "softmax" / "outputs.npz") for m in range(5)]
    probs = {split: [softmax_scores(m[split]["logits"]) for m in members] for split in ("known", "notmnist")}
    for a in range(5):
        for b in range(a + 1, 5):
            assert np.abs(probs["known"][a] - probs["known"][b]).max() > 1e-3
    scores = np.concatenate([np.mean(probs["known"], axis=0), np.mean(probs["notmnist"], axis=0)])
    labels = np.concatenate([members[0]["known"]["labels"], members[0]["notmnist"]["labels"]])
    assert (members[0]["notmnist"]["labels"] == -1).all()
    assert set(members[0]["known"]["labels"].tolist()) == set(range(10))
    metrics = json.loads((out / "metrics.json").read_text())
    row = next(r for r in metrics["ensemble"]["results"] if r["row"] == "ensemble")
    assert row["ccr_at_fpr"]["1e-1"] == pytest.approx(ccr_at_fpr(scores, labels, [1e-1])[0])
    assert members[0]["known"]["features"].shape == (500, 200)  # the last hidden layer


def _fake_lenet_run(root):
    rng = np.random.default_rng(0)
    for approach in ("softmax", "entropic", "objectosphere", "background"):
        n_known, n_unknown = 60, 40
        classes = 11 if approach == "background" else 10
        save_outputs(root / "seed0" / approach / "outputs.npz", {
            "known": {"logits": rng.normal(size=(n_known, classes)).astype(np.float32),
                      "features": rng.normal(size=(n_known, 2)).astype(np.float32),
                      "labels": rng.integers(0, 10, n_known)},
            "notmnist": {"logits": rng.normal(size=(n_unknown, classes)).astype(np.float32),
                         "features": rng.normal(size=(n_unknown, 2)).astype(np.float32),
                         "labels": np.full(n_unknown, -1)}})
    return root


def test_second_call_resumes_without_retraining_and_adds_lenet_rows(smoke_run, tmp_path, capsys):
    out, _ = smoke_run
    run = tmp_path / "run"
    shutil.copytree(out, run)
    stamps = {p: p.stat().st_mtime_ns for p in run.glob("seed*/softmax/*.pt")}
    assert len(stamps) == 10  # last.pt and best.pt of five members
    lenet = _fake_lenet_run(tmp_path / "lenet")
    assert main(["reproduce", "ensemble", "--budget", "smoke", "--out", str(run), "--no-progress", "--no-plots",
                 "--lenet-run", str(lenet)]) == 0
    printed = capsys.readouterr().out
    assert printed.count("finished earlier, kept") == 5 and "training on" not in printed
    assert stamps == {p: p.stat().st_mtime_ns for p in run.glob("seed*/softmax/*.pt")}
    metrics = json.loads((run / "metrics.json").read_text())
    rows = {(r["model"], r["row"]): r for r in metrics["ensemble"]["results"]}
    assert set(rows) == {("mlp-ensemble", "ensemble"), ("mlp-ensemble", "ensemble-squared"),
                         ("lenet++", "softmax"), ("lenet++", "entropic"), ("lenet++", "objectosphere")}
    assert (rows[("lenet++", "entropic")]["num_known"], rows[("lenet++", "entropic")]["num_unknown"]) == (60, 40)
    assert set(metrics["ensemble"]["confidence_curves"]["rows"]) >= {"softmax", "entropic", "objectosphere"}
    report = (run / "report.md").read_text()
    assert "| lenet++: Entropic Open-Set |" in report and "| *paper: lenet++: Entropic Open-Set* |" in report


def test_a_run_with_other_settings_is_not_mixed_in(smoke_run, tmp_path):
    out, _ = smoke_run
    data = yaml.safe_load((CONFIG_DIR / "ensemble.yaml").read_text())
    data["budgets"]["smoke"]["epochs"] = 2
    path = tmp_path / "ensemble.yaml"
    path.write_text(yaml.safe_dump(data))
    run = tmp_path / "run"
    shutil.copytree(out, run)
    with pytest.raises(ConfigError, match="epochs"):
        reproduce_ensemble(RunRequest(path, budget="smoke", out=run, progress=False, plots=False), log=lambda s: None)
    with pytest.raises(ValueError, match="no such directory"):
        reproduce_ensemble(RunRequest("ensemble", budget="smoke", out=run, lenet_run=tmp_path / "missing"),
                           log=lambda s: None)
