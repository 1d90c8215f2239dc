"""The CIFAR recipe trials (benchmarks/recipe_curve.py): every trial is a valid change of the
shipped configs' ``converged`` budget, its compute grows with its network and its schedule, and a
run that has not trained every epoch is not scored."""
import importlib.util
import sys
from types import SimpleNamespace

import pytest
from repo_paths import REPO


def _script():
    sys.path.insert(0, str(REPO / "benchmarks"))  # its sibling module, as `python benchmarks/...` has it
    spec = importlib.util.spec_from_file_location("recipe_curve", REPO / "benchmarks" / "recipe_curve.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


recipe_curve = _script()


@pytest.mark.parametrize("config", ["osr-cifar10", "cifar"])
@pytest.mark.parametrize("name", sorted(recipe_curve.TRIALS))
def test_every_trial_is_a_valid_change_of_the_converged_budget(config, name):
    what, sets = recipe_curve.TRIALS[name]
    train = recipe_curve.trial_config(SimpleNamespace(config=config, budget="converged"), sets).train
    undone = "lowest-val-loss" if name == "w32-16-lowest-loss" else "last"  # the one trial that undoes it
    assert train.model == "airbench" and train.keep_checkpoint == undone
    assert f"{train.epochs} epochs" in what and "-".join(map(str, train.model_kwargs["widths"])) in what


def test_each_ablation_undoes_one_choice_of_the_cifar_budget_and_nothing_else():
    """The trials that make the test-image choices again on validation differ from their control
    (the budget's widths, epochs and peak lr) in the one setting they name."""
    def train_of(name):
        return recipe_curve.trial_config(SimpleNamespace(config="cifar", budget="converged"),
                                         recipe_curve.TRIALS[name][1]).train

    control = train_of("w32-16")
    assert recipe_curve.ABLATIONS[0] == "w32-16" and set(recipe_curve.ABLATIONS) <= set(recipe_curve.TRIALS)
    for name in recipe_curve.ABLATIONS[1:]:
        changed = {k for k, v in vars(train_of(name)).items() if vars(control).get(k) != v}
        assert changed == recipe_curve.SECOND_CHANGE[name] if name in recipe_curve.SECOND_CHANGE \
            else len(changed) == 1, (name, changed)
    assert train_of("w32-16-no-tta").model_kwargs["tta"] == "none" and control.model_kwargs["tta"] == "flip-translate"


def test_compute_grows_with_the_widths_and_the_epochs():
    def tflop(name):
        sets = recipe_curve.TRIALS[name][1]
        return recipe_curve.training_tflop(recipe_curve.trial_config(
            SimpleNamespace(config="osr-cifar10", budget="converged"), sets))

    budget, longer, wider = tflop("w32-12"), tflop("w32-24"), tflop("w64-256-10")
    assert longer == pytest.approx(2 * budget)  # the same network for twice the epochs
    assert wider > 3 * budget


def test_a_run_short_of_its_epochs_is_not_scored(tmp_path):
    rows = ["epoch,lr,train_loss,train_acc,train_images_per_s,train_seconds,val_loss,val_acc",
            "1,0.1,1.0,0.5,100,30.0,1.0,0.61", "2,0.0,0.5,0.8,100,90.0,0.6,0.83"]
    (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n")
    assert recipe_curve.read_scores(tmp_path, epochs=3) is None
    assert recipe_curve.read_scores(tmp_path, epochs=2) == (0.83, 2.0)  # the last epoch; minutes of training


def test_the_accuracy_is_the_kept_checkpoints(tmp_path):
    """Scored as the run keeps its network: the last epoch, or the first of the lowest validation loss,
    as the trainer does (a trial of the lowest-loss rule read the last epoch before)."""
    rows = ["epoch,lr,train_loss,train_acc,train_images_per_s,train_seconds,val_loss,val_acc",
            "1,0.1,1.0,0.5,100,30.0,0.9,0.61", "2,0.1,0.6,0.7,100,60.0,0.5,0.79", "3,0.0,0.5,0.8,100,30.0,0.5,0.83"]
    (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n")
    assert recipe_curve.read_scores(tmp_path, epochs=3) == (0.83, 2.0)
    # epoch 3 ties epoch 2's loss: the first of the lowest is kept
    assert recipe_curve.read_scores(tmp_path, epochs=3, keep="lowest-val-loss") == (0.79, 2.0)
    assert recipe_curve.read_scores(tmp_path, epochs=4, keep="lowest-val-loss") is None


def test_splits_are_read_as_ranges_lists_or_none():
    assert recipe_curve.split_list("0-4") == [0, 1, 2, 3, 4]
    assert recipe_curve.split_list("0,2") == [0, 2]
    assert recipe_curve.split_list("none") == [None]


def test_the_table_is_the_mean_over_every_split_and_seed_a_trial_ran():
    table = {"budget": {"what": "as shipped", "tflop": 34.0, "runs": {
        "0/seed0": {"split": "0", "seed": 0, "val_accuracy": 0.90, "train_minutes": 3.0},
        "0/seed1": {"split": "0", "seed": 1, "val_accuracy": 0.92, "train_minutes": 2.0},
        "2/seed0": {"split": "2", "seed": 0, "val_accuracy": 0.94, "train_minutes": 4.0, "load_at_start": 0.1}}},
        "w32-24": {"what": "not run", "tflop": 68.0, "runs": {}}}
    text = recipe_curve.markdown(table)
    assert "| `budget`: as shipped | 34.0 | 0, 2 | 2 | 3.0 | 0.9200 (0.9000-0.9400) |" in text
    assert "not run" not in text and "load average at each trial's start: [0.1]" in text


def _runs(accuracies):
    return {"runs": {f"all/seed{seed}": {"split": "all", "seed": seed, "val_accuracy": a, "train_minutes": 1.0}
                     for seed, a in enumerate(accuracies)}}


def test_a_choice_is_undone_only_where_undoing_it_beats_the_budget_by_the_margin_and_the_noise():
    control, no_tta, zero_pad, lowest, pad4 = recipe_curve.ABLATIONS[:5]
    table = {control: _runs([0.900, 0.905, 0.902]),
             no_tta: _runs([0.910, 0.912, 0.909]),      # +0.008, tight: undone
             zero_pad: _runs([0.930, 0.895, 0.903]),    # +0.007 on average, interval across 0: kept
             pad4: _runs([0.903, 0.908, 0.905]),        # +0.003, below the margin: kept
             lowest: _runs([0.91, 0.92])}               # not every seed of the control: no decision
    decisions = {d["trial"]: d for d in recipe_curve.ablation_decisions(table)}
    assert set(decisions) == {no_tta, zero_pad, pad4}
    assert decisions[no_tta]["undo"] and decisions[no_tta]["difference"] == pytest.approx(0.008)
    assert not decisions[zero_pad]["undo"] and decisions[zero_pad]["low"] < 0 < decisions[zero_pad]["difference"]
    assert not decisions[pad4]["undo"] and decisions[pad4]["low"] > 0
    text = recipe_curve.decisions_markdown(list(decisions.values()))
    assert f"| `{no_tta}` | 3 | +0.0080 (" in text and "undo the choice" in text and "keep the choice" in text
    assert recipe_curve.decisions_markdown([]) == ""
