"""Fine-tuning approaches (``outlier-exposure-ft``, ``energy-regularized-ft``, ``mixoe-ft``): their
papers' schedule, a start that must exist before anything is written, and the start recorded with
its hash; the network really starts from the start's weights."""
from __future__ import annotations

import hashlib
import json

import pytest
import torch

from agnostophobia.losses import LOSSES
from agnostophobia.losses.recipes import FineTune
from agnostophobia.rundir import BEST, FINE_TUNE_START
from agnostophobia.training.config import load_experiment

from runs import TINY, run_main, write_config

FINE_TUNES = [name for name in LOSSES.names() if LOSSES.get(name).fine_tune is not None]


def test_the_fine_tunes_are_the_three_papers_that_fine_tune():
    assert FINE_TUNES == ["energy-regularized-ft", "mixoe-ft", "outlier-exposure-ft"]
    for name in FINE_TUNES:
        loss, base = LOSSES.get(name), LOSSES.get(name.removesuffix("-ft"))
        assert issubclass(loss, base) and loss.SETTINGS == base.SETTINGS  # the same loss, the same settings
        assert loss.fine_tune.start == "softmax" and loss.default_detector == base.default_detector


def _schedule(cfg):
    return cfg.epochs, cfg.lr, cfg.scheduler, cfg.optimizer, cfg.weight_decay


@pytest.mark.parametrize("name", FINE_TUNES)
def test_a_fine_tune_trains_with_its_authors_recipe_for_the_protocols_images(name, tmp_path):
    """On glyphs (``lenet++``) the fine-tunes train with Outlier Exposure's MNIST recipe (SGD at lr 0.01,
    5 epochs, no weight decay: MNIST/oe_tune.py; the energy loss and MixOE at their authors' lr 10⁻³,
    as they diverge at 0.01 on LeNet++), on natural images (``cifar10-split``) with their own CIFAR
    recipe (SGD at lr 10⁻³, 10 epochs, the authors' weight decay), whatever the budget's optimizer;
    the approaches that train from scratch keep the run's."""
    declared = LOSSES.get(name).fine_tune
    weight_decay = {"mixoe-ft": 1e-5}.get(name, 5e-4)  # zjysteven/MixOE train_mixoe.py: --decay 0.00001
    glyph_lr = {"outlier-exposure-ft": 0.01}.get(name, 1e-3)
    glyphs = load_experiment(write_config(tmp_path / "tiny.yaml", approaches=["softmax", name], optimizer="adam"))
    assert _schedule(glyphs.for_approach(name, 0)) == (5, glyph_lr, "cosine", "sgd", 0.0)
    assert _schedule(glyphs.for_approach("softmax", 0)) == (TINY["epochs"], TINY["lr"], "none", "adam", 0.0)
    natural = load_experiment(write_config(tmp_path / "cifar.yaml", approaches=["softmax", name], optimizer="adam",
                                           protocol="cifar10-split", model="resnet18", model_kwargs={}))
    assert _schedule(natural.for_approach(name, 0)) == (10, 1e-3, "cosine", "sgd", weight_decay)
    assert (declared.epochs, declared.lr, declared.weight_decay) == (10, 1e-3, weight_decay)  # as declared
    assert declared.for_images("glyph") is not declared and declared.for_images("natural") is declared


@pytest.mark.parametrize("name", FINE_TUNES)
def test_fine_tune_epochs_shortens_the_recipe_and_nothing_else(name, tmp_path):
    """``fine_tune_epochs`` (a budget's choice where its networks converge sooner than the papers')
    replaces the recipe's epochs, keeps its learning rate and schedule, leaves the approaches that
    train from scratch alone, and is refused below 1."""
    from agnostophobia.errors import ConfigError

    config = write_config(tmp_path / "tiny.yaml", approaches=["softmax", name], fine_tune_epochs=2)
    experiment = load_experiment(config)
    recipe = LOSSES.get(name).fine_tune.for_images("glyph")  # TINY's protocol is lenet++
    cfg = experiment.for_approach(name, 0)
    assert _schedule(cfg) == (2, recipe.lr, recipe.schedule()["scheduler"], recipe.optimizer, recipe.weight_decay)
    assert experiment.for_approach("softmax", 0).epochs == TINY["epochs"]
    with pytest.raises(ConfigError, match="fine_tune_epochs"):
        load_experiment(write_config(tmp_path / "bad.yaml", approaches=["softmax", name], fine_tune_epochs=0))


def test_a_fine_tune_without_its_start_is_refused_before_anything_is_written(tmp_path, capsys):
    config = write_config(tmp_path / "tiny.yaml", approaches=["outlier-exposure-ft"])
    code, _, err = run_main(["train", config, "--out", tmp_path / "run", "--no-progress"], capsys)
    assert code != 0 and len(err) == 1
    assert "fine-tunes the same seed's 'softmax' network" in err[0] and "add softmax" in err[0]
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_fine_tune_starts_from_the_softmax_network_and_records_it(real_data_dir, tmp_path, monkeypatch, capsys):
    """At a learning rate of ~0 the fine-tuned network keeps the start's parameters exactly: it
    started from them, not from a random initialisation (the test fails if the weights are not loaded)."""
    loss = LOSSES.get("outlier-exposure-ft")
    monkeypatch.setattr(loss, "fine_tune", FineTune("softmax", epochs=1, lr=1e-30, scheduler="none", source="test"))
    config = write_config(tmp_path / "tiny.yaml", approaches=["softmax", "outlier-exposure-ft"])
    out = tmp_path / "run"
    code, _, err = run_main(["train", config, "--out", out, "--no-progress", "--data-dir", real_data_dir], capsys)
    assert code == 0, err
    start, tuned = out / "seed0" / "softmax" / BEST, out / "seed0" / "outlier-exposure-ft" / BEST
    record = json.loads((out / "seed0" / "outlier-exposure-ft" / FINE_TUNE_START).read_text())
    assert record["sha256"] == hashlib.sha256(start.read_bytes()).hexdigest()
    assert record["approach"] == "softmax" and record["checkpoint"] == "softmax/best.pt"
    before = torch.load(start, weights_only=True)["model"]
    after = torch.load(tuned, weights_only=True)["model"]
    # BatchNorm's running statistics move at any learning rate: the learned parameters are compared
    learned = [name for name, value in before.items() if value.is_floating_point()
               and "running_" not in name and "num_batches" not in name]
    assert learned
    for name in learned:
        torch.testing.assert_close(after[name], before[name], rtol=0, atol=1e-6, msg=name)


def test_a_fine_tune_trained_with_an_older_recipe_still_reads(synth, tmp_path, capsys):
    """A run of an older version fine-tuned with the run's optimizer (Adam at 10⁻³ on LeNet++), and
    its fine_tune_start.json names no optimizer: its records are read as they were trained, not
    against today's recipe; a checkpoint that disagrees with its own record is still refused."""
    from agnostophobia.errors import RecordError
    from agnostophobia.training.records import check_run

    synth.lenet_set()
    config = write_config(tmp_path / "tiny.yaml", approaches=["softmax", "outlier-exposure-ft"], fine_tune_epochs=1)
    out = tmp_path / "run"
    code, _, err = run_main(["train", config, "--out", out, "--no-progress", "--data-dir", synth.root], capsys)
    assert code == 0, err
    model = out / "seed0" / "outlier-exposure-ft"
    assert json.loads((model / FINE_TUNE_START).read_text())["recipe"]["optimizer"] == "sgd"
    check_run(out, "test")

    def rewrite(lr):
        for name in (BEST, "last.pt"):
            checkpoint = torch.load(model / name, weights_only=False)
            checkpoint["config"].update(optimizer="adam", weight_decay=0.0, lr=lr)
            torch.save(checkpoint, model / name)

    record = json.loads((model / FINE_TUNE_START).read_text())
    for key in ("optimizer", "weight_decay", "glyphs"):
        record["recipe"].pop(key, None)
    record["recipe"]["lr"] = 1e-3
    (model / FINE_TUNE_START).write_text(json.dumps(record))
    rewrite(1e-3)
    check_run(out, "test")  # as an older version wrote it
    rewrite(0.5)
    with pytest.raises(RecordError, match="lr=0.5"):
        check_run(out, "test")


def test_an_exact_fine_tune_trains_and_records_its_authors_batches(synth, tmp_path, capsys):
    """``fine_tune_exact: true``: the fine-tune draws Outlier Exposure's MNIST batch (50 knowns + 100
    negatives) with the per-step cosine and, as the authors' code, the last epoch's checkpoint; its
    record says so and names no departure but the start's optimiser, and the run's records read back
    against that record, not against the shared batches."""
    from agnostophobia.training.records import check_run

    synth.lenet_set()
    config = write_config(tmp_path / "tiny.yaml", approaches=["softmax", "outlier-exposure-ft"], fine_tune_epochs=1,
                          fine_tune_exact=True, keep_checkpoint="last")
    out = tmp_path / "run"
    code, _, err = run_main(["train", config, "--out", out, "--no-progress", "--data-dir", synth.root], capsys)
    assert code == 0, err
    recipe = json.loads((out / "seed0" / "outlier-exposure-ft" / FINE_TUNE_START).read_text())["recipe"]
    mnist = LOSSES.get("outlier-exposure-ft").fine_tune.for_images("glyph")
    assert (recipe["batch_size"], recipe["negatives_per_batch"], recipe["scheduler"]) == (150, 100, "cosine-per-step")
    assert recipe["differs"] == mnist.differs
    check_run(out, "test")
