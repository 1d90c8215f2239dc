"""The one validating reader of run records (``training.records``, issue 22 item 3): each
record's checks, the agreement rule, and the library versions a run records."""
import json
import os
import shutil

import numpy as np
import pytest
import yaml
from runs import TINY

from agnostophobia.cli import main
from agnostophobia.detectors.stored import SCORES_FILE, model_scores
from agnostophobia.training import records
from agnostophobia.training.outputs import save_outputs
from agnostophobia.rundir import ModelDir, RunDir
from agnostophobia import rundir
from agnostophobia.rundir import RecordError
from agnostophobia.errors import ConfigError


def split(n=6, classes=3, dim=2, unknown=False):
    rng = np.random.default_rng(n)
    labels = np.full(n, -1) if unknown else np.arange(n) % classes
    return {"logits": rng.normal(size=(n, classes)).astype(np.float32),
            "features": rng.normal(size=(n, dim)).astype(np.float32), "labels": labels.astype(np.int64)}


def write(path, outputs=None, **arrays):
    if arrays:
        np.savez(path, **arrays)
    else:
        save_outputs(path, outputs)
    return path


# ------------------------------------------------------------------------- stored outputs
def test_valid_outputs_are_read_back_as_written(tmp_path):
    written = {"known": split(), "letters": split(4, unknown=True)}
    read = records.read_outputs(write(tmp_path / "outputs.npz", written))
    for name, fields in written.items():
        for field, value in fields.items():
            np.testing.assert_array_equal(read[name][field], value)


def arrays_of(outputs):
    return {f"{s}__{f}": v for s, fields in outputs.items() for f, v in fields.items()}


BROKEN_OUTPUTS = [
    ("nan-logits", lambda a: a["known__logits"].__setitem__((0, 0), np.nan), "known__logits: 1 non-finite"),
    ("inf-features", lambda a: a["known__features"].__setitem__((1, 1), np.inf), "known__features: 1 non-finite"),
    ("no-features", lambda a: a.pop("known__features"), "known__features: missing"),
    ("rows", lambda a: a.update(known__labels=a["known__labels"][:-1]), "known__logits: 6 rows but 5 labels"),
    ("float-labels", lambda a: a.update(known__labels=a["known__labels"].astype(float)), "known__labels"),
    ("label-too-large", lambda a: a["known__labels"].__setitem__(0, 7), "label 7 but only 3 logit columns"),
    ("widths", lambda a: a.update(letters__logits=np.zeros((4, 5), np.float32)), "letters__logits: 5 columns"),
    ("int-logits", lambda a: a.update(known__logits=a["known__logits"].astype(np.int64)), "known__logits"),
    ("stray-key", lambda a: a.update(readme=np.zeros(1)), "readme: unexpected array"),
    ("no-known", lambda a: [a.pop(k) for k in list(a) if k.startswith("known")], "known (the known test set)"),
]


@pytest.mark.parametrize("change, message", [c[1:] for c in BROKEN_OUTPUTS], ids=[c[0] for c in BROKEN_OUTPUTS])
def test_broken_outputs_name_the_file_and_the_key(tmp_path, change, message):
    arrays = arrays_of({"known": split(), "letters": split(4, unknown=True)})
    change(arrays)
    path = write(tmp_path / "outputs.npz", **arrays)
    with pytest.raises(RecordError, match="outputs.npz") as error:
        records.read_outputs(path)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("keep", [0, 30, 300, -20])
def test_a_truncated_or_empty_outputs_file_is_one_line(tmp_path, keep):
    path = write(tmp_path / "outputs.npz", {"known": split(200)})
    path.write_bytes(path.read_bytes()[:keep])
    with pytest.raises(RecordError, match="outputs.npz: .*(not a readable npz|cannot be read)"):
        records.read_outputs(path)


def test_fit_and_val_outputs_hold_their_one_split(tmp_path):
    with pytest.raises(RecordError, match="must hold the split 'train' alone"):
        records.read_outputs(write(tmp_path / "fit_outputs.npz", {"val": split()}))
    with pytest.raises(RecordError, match="train__labels: training knowns only"):
        records.read_outputs(write(tmp_path / "fit_outputs.npz", {"train": split(unknown=True)}))
    assert set(records.read_outputs(write(tmp_path / "val_outputs.npz", {"val": split()}))) == {"val"}


# ---------------------------------------------------------------------- detector_scores.npz
@pytest.mark.parametrize("change", ["nan-score", "predicted-out-of-range", "no-notes"])
def test_a_damaged_scores_cache_is_never_trusted_but_recomputed(tmp_path, change):
    model = tmp_path / "seed0" / "entropic"
    save_outputs(model / "outputs.npz", {"known": split(), "letters": split(4, unknown=True)})
    first = model_scores(model, "entropic")
    with np.load(model / SCORES_FILE) as data:
        arrays = dict(data)
    if change == "nan-score":
        arrays["softmax__known__score"][0] = np.nan
    elif change == "predicted-out-of-range":
        arrays["softmax__known__predicted"][0] = 9
    else:
        del arrays["__notes"]
    np.savez(model / SCORES_FILE, **arrays)  # the fingerprint still matches
    with pytest.raises(RecordError, match=SCORES_FILE):
        records.read_detector_scores(model / SCORES_FILE)
    again = model_scores(model, "entropic")
    np.testing.assert_array_equal(again.top["softmax"]["known"][1], first.top["softmax"]["known"][1])
    records.read_detector_scores(model / SCORES_FILE)  # rewritten whole


# --------------------------------------------------------------------------- calibration.json
def calibration(**entry):
    base = {"approach": "entropic", "detector": "softmax", "seed": 0, "target_fpr": 0.1, "threshold": 0.5,
            "val_fpr": 0.1, "val_ccr": 0.9, "reason": None}
    return {"format": 1, "rule": "r", "class_names": ["0", "1"], "entries": [{**base, **entry}]}


@pytest.mark.parametrize("entry, message", [
    ({"threshold": float("nan")}, "entries[0].threshold: must be a finite number"),
    ({"threshold": "0.5"}, "entries[0].threshold"),
    ({"threshold": True}, "entries[0].threshold"),
    ({"threshold": None}, "entries[0].reason: a null threshold needs a reason"),
    ({"seed": "0"}, "entries[0].seed"),
    ({"target_fpr": 2}, "entries[0].target_fpr"),
    ({"approach": "magic"}, "entries[0].approach: unknown approach"),
    ({"val_ccr": float("inf")}, "entries[0].val_ccr"),
])
def test_calibration_entries_are_checked_key_by_key(tmp_path, entry, message):
    (tmp_path / "calibration.json").write_text(json.dumps(calibration(**entry)))
    with pytest.raises(RecordError, match="calibration.json") as error:
        records.read_calibration(tmp_path)
    assert message in str(error.value)


def test_a_valid_calibration_and_a_null_threshold_with_reason_are_read(tmp_path):
    (tmp_path / "calibration.json").write_text(json.dumps(calibration(threshold=None, reason="too few")))
    assert records.read_calibration(tmp_path)["entries"][0]["reason"] == "too few"
    assert records.read_calibration(tmp_path / "elsewhere") is None


# ------------------------------------------------------------------ detector_settings.json (tune-detectors)
TUNED = {"format": 1, "target_fpr": 0.01, "split": "val", "chosen": {"entropic": {"knn": {"k": 20}}}}


@pytest.mark.parametrize("change, message", [
    ({"format": 2}, "format"), ({"target_fpr": 0}, "target_fpr"), ({"chosen": []}, "chosen"),
    ({"chosen": {"magic": {}}}, "chosen.magic: unknown approach"),
    ({"chosen": {"entropic": {"knn": {"k": [20]}}}}, "chosen.entropic.knn"),
    ({"chosen": {"entropic": {"knn": {"k": "x"}}}}, "chosen.entropic.knn.k"),
    ({"chosen": {"entropic": {"knm": {"k": 3}}}}, "chosen.entropic.knm"),
])
def test_tuned_detector_settings_are_checked_on_read(tmp_path, change, message):
    from agnostophobia.detectors.stored import read_run_settings
    from agnostophobia.errors import AgnostophobiaError

    (tmp_path / rundir.TUNED_SETTINGS).write_text(json.dumps({**TUNED, **change}))
    with pytest.raises(AgnostophobiaError, match="detector_settings.json") as error:
        read_run_settings(tmp_path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_valid_tuned_settings_are_read_and_an_untuned_run_has_none(tmp_path):
    from agnostophobia.detectors.stored import read_run_settings

    untuned = read_run_settings(tmp_path)
    assert records.read_tuned_settings(tmp_path) is None and untuned.tuned == {} and untuned.target_fpr is None
    (tmp_path / rundir.TUNED_SETTINGS).write_text(json.dumps(TUNED))
    tuned = read_run_settings(tmp_path)
    assert tuned.tuned == {"entropic": {"knn": {"k": 20}}} and (tuned.target_fpr, tuned.tuned_split) == (0.01, "val")


# ------------------------------------------------------------------------------- config.yaml
@pytest.mark.parametrize("text, message", [
    ("", "is empty"), ("- 1\n", "top level must be a mapping"), ("epochs: [1,\n", "not valid YAML at line"),
    ("epochs: two\n", "'epochs'"), ("openmax: 3\n", "'openmax'"), ("seeds: 0\n", "'seeds'"),
    ("budget: 3\n", "'budget'"), ("epochz: 1\n", "epochz"), ("model_kwargs: {feature_dim: two}\n",
                                                            "model_kwargs.feature_dim"),
])
def test_a_broken_config_yaml_is_never_replaced_by_defaults(tmp_path, text, message):
    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(RecordError, match="config.yaml") as error:
        records.read_run_config(tmp_path)
    assert message in str(error.value)
    from agnostophobia.training.outputs import run_config

    with pytest.raises(RecordError):  # the figures' and metrics' reader: the same check, no {} fallback
        run_config(tmp_path)


def test_a_missing_config_yaml_is_an_error_for_a_run_and_empty_for_outputs_stored_by_hand(tmp_path):
    with pytest.raises(RecordError, match="config.yaml: missing"):
        records.read_run_config(tmp_path)
    assert records.read_run_config(tmp_path, required=False) == {}


# ----------------------------------------------------------------------------- seed folders
def model(run, seed="seed0", approach="softmax"):
    save_outputs(run / seed / approach / "outputs.npz", {"known": split()})
    return run / seed / approach


def test_seed_folders_are_real_distinct_and_named_seed_n(tmp_path):
    model(tmp_path)
    model(tmp_path, "seed1")
    (tmp_path / "seeds.txt").write_text("not a seed")
    assert [(s, a) for s, a, _ in RunDir(tmp_path).models()] == [(0, "softmax"), (1, "softmax")]
    os.symlink("seed0", tmp_path / "seed2")
    with pytest.raises(RecordError, match="seed2: is a symbolic link"):
        RunDir(tmp_path).models()
    (tmp_path / "seed2").unlink()
    os.symlink(tmp_path / "seed0" / "softmax", tmp_path / "seed1" / "entropic")
    with pytest.raises(RecordError, match="entropic: is a symbolic link"):
        RunDir(tmp_path).models()
    (tmp_path / "seed1" / "entropic").unlink()
    shutil.copytree(tmp_path / "seed1", tmp_path / "seed01")
    with pytest.raises(RecordError, match="seed01: a seed folder is named seed<N> without leading zeros"):
        RunDir(tmp_path).models()


# ------------------------------------------------------------------------ agreement, versions
def run_records(tmp_path, config, meta=None):
    model(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    if meta is not None:
        (tmp_path / "run_meta.json").write_text(json.dumps(meta))
    return tmp_path


CONFIG = {"name": "x", "approaches": ["softmax"], "seeds": 1, "budget": "smoke", "openmax": {"tail_size": 3}}


@pytest.mark.parametrize("meta, message", [
    ({"seeds": 2}, "seeds is 2 in one and 1 in the other"),
    ({"approaches": ["entropic"]}, "approaches"),
    ({"budget": "cpu"}, "budget"),
    ({"experiment": "y"}, "experiment"),
    ({"train_config": {"openmax": {"tail_size": 20}}}, "train_config.openmax"),
    ({"train_config": {"lr": 0.5}}, "train_config.lr is 0.5 in one and missing in the other"),
])
def test_run_meta_and_config_yaml_must_agree(tmp_path, meta, message):
    run = run_records(tmp_path, CONFIG, meta)
    with pytest.raises(RecordError, match="run_meta.json and .*config.yaml disagree") as error:
        records.check_run(run)
    assert message in str(error.value)


def test_agreeing_records_pass_and_a_run_without_run_meta_is_an_unfinished_one(tmp_path):
    run = run_records(tmp_path, CONFIG, {"seeds": 1, "approaches": ["softmax"], "budget": "smoke",
                                         "experiment": "x", "train_config": {"openmax": {"tail_size": 3}}})
    assert records.check_run(run).config["openmax"] == {"tail_size": 3}
    (run / "run_meta.json").unlink()
    assert records.check_run(run).meta is None


def test_check_run_keeps_the_tuned_settings_it_read_and_the_settings_built_from_them_are_checked(tmp_path):
    """What check_run read of detector_settings.json travels in its RunRecords: the settings
    built from them are those read from the run alone, and a value no detector takes names its file."""
    from agnostophobia.detectors.stored import read_run_settings, run_settings

    run = run_records(tmp_path, CONFIG)
    assert records.check_run(run).tuned is None and run_settings(records.check_run(run)).target_fpr is None
    (run / rundir.TUNED_SETTINGS).write_text(json.dumps({**TUNED, "chosen": {"softmax": {"knn": {"k": 20}}}}))
    checked = records.check_run(run)
    assert checked.tuned["chosen"] == {"softmax": {"knn": {"k": 20}}}
    assert run_settings(checked) == read_run_settings(run)
    assert run_settings(checked).for_approach("softmax") == {"openmax": {"tail_size": 3}, "knn": {"k": 20}}
    (run / rundir.TUNED_SETTINGS).write_text(json.dumps({**TUNED, "chosen": {"softmax": {"knn": {"k": "x"}}}}))
    with pytest.raises(ConfigError, match=r"detector_settings.json: .*'chosen.softmax.knn.k'"):
        run_settings(records.check_run(run))
    (run / rundir.TUNED_SETTINGS).unlink()
    (run / "config.yaml").write_text(yaml.safe_dump({**CONFIG, "detectors": {"knn": {"k": "x"}}}))
    with pytest.raises(ConfigError, match=r"config.yaml: .*'detectors.knn.k'"):
        run_settings(records.check_run(run))


# ------------------------------------------------------------------ a run is known by content
#: An old run's run_meta.json (made before the marker) that agrees with :data:`CONFIG`.
OLD_META = {"experiment": "x", "budget": "smoke", "seeds": 1, "approaches": ["softmax"],
            "train_config": {"openmax": {"tail_size": 3}}}
MARK = records.run_marker("0" * 32)


def folder(tmp_path, config=None, meta=None, config_text=None):
    """A folder with a config.yaml (``config`` as YAML, or ``config_text``) and a run_meta.json, as given."""
    if config is not None or config_text is not None:
        (tmp_path / "config.yaml").write_text(config_text if config_text is not None else yaml.safe_dump(config))
    if meta is not None:
        (tmp_path / "run_meta.json").write_text(json.dumps(meta))
    return tmp_path


KNOWN_BY_CONTENT = {  # (config.yaml, run_meta.json): is it a run of this project?
    "marked-config-alone": (({**MARK, **CONFIG}, None), True),  # a training killed before its run_meta.json
    "marked-config-and-meta": (({**MARK, **CONFIG}, {**MARK, **OLD_META}), True),
    "old-run-agreeing": ((CONFIG, OLD_META), True),
    "old-run-continued": (({**MARK, **CONFIG, "seeds": 2}, OLD_META), True),  # its run_meta.json comes at the end
    "ids-differ": (({**MARK, **CONFIG}, {**records.run_marker("1" * 32), **OLD_META}), False),
    "marked-meta-unmarked-config": ((CONFIG, {**MARK, **OLD_META}), False),
    "marked-meta-alone": ((None, {**MARK, **OLD_META}), False),
    "old-run-disagreeing": ((CONFIG, {**OLD_META, "seeds": 2}), False),
    "foreign-meta": ((CONFIG, {"name": "mine"}), False),  # agreeing on nothing proves nothing
    "foreign-meta-marked-config": (({**MARK, **CONFIG}, {"name": "mine"}), False),
    "unmarked-config-alone": ((CONFIG, None), False),
    "meta-alone": ((None, OLD_META), False),
    "other-project": (({**MARK, "project": "other", **CONFIG}, None), False),
}


@pytest.mark.parametrize("records_, expected", KNOWN_BY_CONTENT.values(), ids=KNOWN_BY_CONTENT.keys())
def test_a_run_is_known_by_its_records_marker_or_agreement(tmp_path, records_, expected):
    assert records.is_run(folder(tmp_path, *records_)) is expected


@pytest.mark.parametrize("lookalike", ["lock", "seed-folder", "model-folder", "users-experiment"])
def test_names_alone_make_no_run(tmp_path, lookalike):
    """What the code before issue 54 took for a run: a ``.lock`` (even empty), a ``seed<N>/``."""
    (tmp_path / "notes.txt").write_text("mine\n")
    if lookalike == "lock":
        (tmp_path / ".lock").touch()
    elif lookalike == "seed-folder":
        (tmp_path / "seed3").mkdir()
    elif lookalike == "model-folder":
        model(tmp_path)
    else:  # an experiment file of the user's: refused by the run config's reader (budgets), so no run
        folder(tmp_path, config_text=yaml.safe_dump({**TINY, "budgets": {"smoke": {}}}), meta={"name": "mine"})
    assert not records.is_run(tmp_path)


@pytest.mark.parametrize("files, refused", [
    ({}, False), ({".lock": ""}, False),  # new, or left by a training killed before its config.yaml
    ({".lock": "process 1 (mine)\n"}, True), ({".lock": "", "notes.txt": "mine"}, True), ({"seed0/": None}, True),
    ({"config.yaml": yaml.safe_dump({**MARK, **CONFIG})}, False)])
def test_a_training_writes_into_a_new_or_empty_folder_or_a_run(tmp_path, files, refused):
    out = tmp_path / "out"
    out.mkdir()
    for name, text in files.items():
        (out / name).mkdir() if name.endswith("/") else (out / name).write_text(text)
    if refused:
        with pytest.raises(rundir.AgnostophobiaError, match="not a run of this project"):
            records.check_run_folder(out)
    else:
        records.check_run_folder(out)


@pytest.mark.parametrize("key, value", [("run_id", 5), ("run_id", ""), ("run_format", True), ("run_format", 0),
                                        ("project", ["agnostophobia"])])
def test_the_markers_keys_are_read_with_their_kinds(tmp_path, key, value):
    folder(tmp_path, {**MARK, **CONFIG, key: value}, {**MARK, **OLD_META, key: value})
    with pytest.raises(RecordError, match=f"config.yaml: {key}: must be"):
        records.read_run_config(tmp_path)
    with pytest.raises(RecordError, match=f"run_meta.json: {key}: must be"):
        records.read_run_meta(tmp_path)
    assert not records.is_run(tmp_path)


def test_the_marker_is_read_as_no_training_setting_and_the_ids_must_agree(tmp_path):
    model(tmp_path)
    folder(tmp_path, {**MARK, **CONFIG}, {**MARK, **OLD_META})
    assert records.check_run(tmp_path).config["run_id"] == MARK["run_id"]
    folder(tmp_path, meta={**records.run_marker("1" * 32), **OLD_META})
    with pytest.raises(RecordError, match="disagree: run_id is '1{32}' in one and '0{32}' in the other"):
        records.check_run(tmp_path)


def test_a_checkpoint_must_agree_with_its_folder_and_the_runs_config(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    checked = records.check_run(run)
    assert {m.approach for m in checked.checkpoint_configs} == set(TINY["approaches"])
    config = yaml.safe_load((run / "config.yaml").read_text())
    records.check_agreement(records.RunRecords(run, {**config, "device": "cuda:3", "openmax": {"tail_size": 5}},
                                               None, checked.models, None, checked.checkpoint_configs))
    for key, value in (("loss", {"xi": 7.0}), ("model_kwargs", {"feature_dim": 3}), ("data_seed", 1)):
        with pytest.raises(RecordError, match=f"best.pt and .*config.yaml disagree: the model was trained with {key}="):
            records.check_agreement(records.RunRecords(run, {**config, key: value}, None, checked.models, None,
                                                       checked.checkpoint_configs))


# ------------------------------------------- a checkpoint's weights against the run's network
LENET = {"model": "lenet++", "model_kwargs": {"activation": "prelu", "feature_dim": 2}}


def lenet_state(num_outputs=10):
    from agnostophobia.models import build_model

    return build_model("lenet++", num_outputs, **LENET["model_kwargs"]).state_dict()


def _renamed(state):
    state["logits.kernel"] = state.pop("logits.weight")


WEIGHT_CASES = [  # (id, change to a LeNet++ state dict of 10 outputs, approach, what the one line says)
    ("background-needs-11", lambda s: None, "background",
     "layer logits.weight has shape (10, 2), the network of this run has (11, 2) (11 outputs: one per class of the "
     "run, and background's background class)"),
    ("missing-and-unexpected", lambda s: s.update({"extra": s.pop("backbone.0.0.bias")}), "softmax",
     "not the weights of this run's network (lenet++): missing layer(s) backbone.0.0.bias; unexpected layer(s) extra"),
    ("bool", lambda s: s.update({"logits.weight": s["logits.weight"] > 0}), "softmax",
     "layer logits.weight holds bool values, the network of this run holds floating-point ones there"),
    ("float-counter", lambda s: s.update({name: v.float() for name, v in s.items() if "num_batches" in name}),
     "softmax", "num_batches_tracked holds float32 values, the network of this run holds int64 ones there"),
    ("nan-and-inf", lambda s: s["logits.weight"].view(-1)[:3].copy_(__import__("torch").tensor(
        [float("nan"), float("inf"), -float("inf")])), "softmax", "layer logits.weight holds 1 NaN and 2 infinite value(s)"),
    ("no-logits", _renamed, "softmax", "model: not the state dict of a trained network (no logits.weight)"),
    ("not-tensors", lambda s: s.update({"logits.bias": [1.0]}), "softmax", "model: not the state dict"),
]


@pytest.mark.parametrize("change, approach, message", [c[1:] for c in WEIGHT_CASES], ids=[c[0] for c in WEIGHT_CASES])
def test_weights_that_are_not_the_runs_network_are_one_line_naming_the_layer(change, approach, message):
    state = lenet_state()
    change(state)
    with pytest.raises(RecordError, match="^best.pt: ") as error:
        records.check_network_state("best.pt", state, {**LENET, "approach": approach}, 11 if approach == "background"
                                    else 10)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_weights_of_the_runs_network_pass_and_a_run_without_class_names_checks_all_but_the_width(tmp_path):
    records.check_network_state("best.pt", lenet_state(11), {**LENET, "approach": "background"}, 11)
    records.check_network_state("best.pt", lenet_state(13), {**LENET, "approach": "softmax"}, None)
    (tmp_path / "classes.json").write_text(json.dumps({"class_names": list("abc")}))
    assert records.network_state.run_outputs(tmp_path, "background") == 4
    assert records.network_state.run_outputs(tmp_path / "none", "softmax") is None


def one_nan(state):
    state["logits.weight"][0, 0] = float("nan")
    return "layer logits.weight holds 1 NaN value(s)"


def test_the_library_loaders_refuse_a_checkpoint_with_non_finite_weights(tiny_run, tmp_path):
    from runs import damage_weights

    from agnostophobia.errors import AgnostophobiaError
    from agnostophobia.training.trained import load_last_layer, load_trained_model

    run = shutil.copytree(tiny_run, tmp_path / "run")
    best, said = damage_weights(run, one_nan)
    with pytest.raises(AgnostophobiaError) as error:
        load_trained_model(best.parent, "cpu")
    assert str(error.value).startswith(f"{best}: {said}")
    (best.parent / "last_layer.npz").unlink()  # read back from best.pt, which is refused: no layer, and why
    layer, why = load_last_layer(ModelDir.at(best.parent))
    assert layer is None and said in why and not (best.parent / "last_layer.npz").exists()


def test_runs_record_their_library_versions_and_a_mismatch_is_one_warning(tiny_run, tmp_path, capsys):
    meta = json.loads((tiny_run / "run_meta.json").read_text())
    assert meta["versions"] == records.library_versions()
    assert meta["code"] == records.code_version()  # and the code: the version, a checkout's commit
    assert set(meta["versions"]) == {"torch", "torchvision", "numpy"}
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    meta["versions"]["torch"] = "1.0.0"
    (run / "run_meta.json").write_text(json.dumps(meta))
    assert main(["evaluate", str(run), "--no-progress"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "warning:" in err[0] and "torch 1.0.0" in err[0] and "numpy" not in err[0], err
    assert main(["calibrate", str(run), "--fpr", "0.1"]) == 0
    capsys.readouterr()
    np.savez(tmp_path / "x.npz", x=np.zeros((2, 28, 28), np.uint8))
    assert main(["predict", str(run), str(tmp_path / "x.npz")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "torch 1.0.0" in err[0], err


def test_a_run_records_its_code_with_the_commit_of_a_checkout_that_tracks_it(tmp_path):
    """A run's record names the code that made it (a review found published records without a
    commit): the version, and the checkout's commit where git tracks the file, "+changes" where tracked
    files differ from it; an untracked copy (an installed wheel, a venv inside a repository) gives the
    version alone."""
    import subprocess

    from agnostophobia import __version__

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "checkout"
    repo.mkdir()
    source = repo / "module.py"
    source.write_text("x = 1\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    assert records.code_version(source) == f"agnostophobia {__version__}"  # not tracked yet: no commit
    subprocess.run([*git, "add", "module.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert records.code_version(source) == f"agnostophobia {__version__}, commit {head}"
    source.write_text("x = 2\n")
    assert records.code_version(source) == f"agnostophobia {__version__}, commit {head}+changes"


def test_a_run_recorded_before_versions_evaluates_calibrates_and_predicts_without_a_word(tiny_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    meta = json.loads((run / "run_meta.json").read_text())
    del meta["versions"]  # as the code before issue 22 wrote it
    (run / "run_meta.json").write_text(json.dumps(meta))
    np.savez(tmp_path / "x.npz", x=np.zeros((2, 28, 28), np.uint8))
    # FPR 0.5: 16 of the 32 validation negatives may be false positives, so calibrate has no warning of its own
    for args in (["evaluate", run, "--no-progress"], ["calibrate", run, "--fpr", "0.5"], ["predict", run, tmp_path / "x.npz"]):
        assert main([str(a) for a in args]) == 0
        assert capsys.readouterr().err == ""


# ------------------------------------------- what training recorded beside run_meta.json
TRAINING_RECORDS = [  # (file, text, what the one line names)
    ("timings.json", "{not json", "timings.json: not valid JSON"),
    ("timings.json", '{"seed0/entropic": "12 s"}', "timings.json: seed0/entropic: must be a finite number"),
    ("timings.json", '{"seed0/entropic": -1}', "timings.json: seed0/entropic: must be a finite number"),
    ("timings.json", '{"entropic": 3.0}', "timings.json: entropic: not a run name"),
    ("timings.json", '[1, 2]', "timings.json: top level must be a mapping"),
    ("wall_time.json", '{"training_s": 5.0}', "wall_time.json: concurrent_runs: must be an integer >= 1"),
    ("wall_time.json", '{"training_s": NaN, "concurrent_runs": 1}', "wall_time.json: training_s: must be a finite"),
    ("wall_time.json", '{"training_s": 5, "concurrent_runs": 2, "batched_seeds": "yes"}',
     "wall_time.json: batched_seeds: must be true or false"),
    ("classes.json", '{"class_names": ["0", 1]}', "classes.json: class_names: must be a list of strings"),
    ("classes.json", '{"names": ["0"]}', "classes.json: must be a mapping with class_names"),
    ("classes.json", '{"class_names": ["0"], "extra": []}', "classes.json: extra: unexpected key"),
    ("data_notes.json", '{"note": "x"}', "data_notes.json: must be a list of strings"),
    ("preprocessing_notes.json", '["fine", 3]', "preprocessing_notes.json: must be a list of strings"),
]


@pytest.mark.parametrize("name, text, message", TRAINING_RECORDS, ids=[f"{c[0]}-{i}" for i, c in enumerate(TRAINING_RECORDS)])
def test_training_records_are_checked_on_read(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(RecordError, match=message.replace("(", r"\(")):
        records.check_training_records(tmp_path)


def test_valid_training_records_are_read_back_and_absent_ones_are_empty(tmp_path):
    assert records.read_timings(tmp_path) == {} and records.read_wall_time(tmp_path) is None
    assert records.read_classes(tmp_path) is None and records.read_notes(tmp_path, records.DATA_NOTES) is None
    (tmp_path / "timings.json").write_text('{"seed0/entropic": 12.5, "seed10/background": 0}')
    (tmp_path / "wall_time.json").write_text('{"training_s": 20.0, "concurrent_runs": 2, "batched_seeds": true}')
    (tmp_path / "classes.json").write_text('{"class_names": ["a", "b"], "negative_class_names": ["c"]}')
    (tmp_path / "data_notes.json").write_text('["cut to 10,000"]')
    records.check_training_records(tmp_path)
    assert records.read_timings(tmp_path)["seed10/background"] == 0
    assert records.read_wall_time(tmp_path)["batched_seeds"] is True
    assert records.read_notes(tmp_path, records.DATA_NOTES) == ["cut to 10,000"]


def test_continuing_a_run_with_a_damaged_training_record_is_one_line_and_writes_nothing(
        tiny_run, tiny_config, real_data_dir, tmp_path, capsys):
    from runs import reproduce_args, snapshot

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / "timings.json").write_text('{"seed0/softmax": "fast"}')
    before = snapshot(run)
    assert main([str(a) for a in reproduce_args(tiny_config, run, real_data_dir)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "timings.json: seed0/softmax: must be a finite number" in err[0], err
    assert snapshot(run) == before


@pytest.mark.parametrize("text, message", [
    ("{", "not a readable fetch record"),
    ('{"files": {}}', "files: must be a list"),
    ('{"files": [{"dataset": "mnist", "file": "a.npz", "url": 3, "sha256": "ab", "verified": true}]}', r"files\[0\]"),
])
def test_a_damaged_fetch_record_is_one_line_naming_it(tmp_path, text, message):
    from agnostophobia.data.fetch import fetch_record_lines
    from agnostophobia.rundir import DATA_FETCHED
    from agnostophobia.errors import DataError

    (tmp_path / DATA_FETCHED).write_text(text)
    with pytest.raises(DataError, match=f"{DATA_FETCHED}: {message}"):
        fetch_record_lines(tmp_path)


@pytest.mark.parametrize("metrics, message", [
    ({"seeds": 0, "approaches": [], "results": []}, "metrics.json: seeds: must be an integer >= 1"),
    ({"seeds": 1, "approaches": ["entropic"], "results": {}}, "metrics.json: results: must be a list"),
    ({"seeds": 1, "approaches": ["entropic"], "results": [{"row": "entropic"}]},
     r"metrics.json: results\[0\]: must be a mapping with row and unknowns"),
    ({"seeds": 1, "approaches": ["entropic"], "results": [{"row": "entropic", "unknowns": "letters",
                                                            "ccr_at_fpr": {"1e-2": "0.9"}}]},
     r"metrics.json: results\[0\].ccr_at_fpr: must be a mapping of FPR to a number or null"),
])
def test_metrics_read_by_other_commands_are_checked(tmp_path, metrics, message):
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(RecordError, match=message):
        records.read_metrics(tmp_path)


def test_the_metrics_of_a_real_run_are_read(tiny_run):
    metrics = records.read_metrics(tiny_run)
    assert metrics["seeds"] == 1 and {r["row"] for r in metrics["results"]} >= set(TINY["approaches"])


def test_a_missing_or_empty_run_is_refused_in_one_line_by_every_reader(tmp_path):
    """check_run (evaluate, plot, predict, ...) and calibrate find a run's models through one
    function, run_models: the same refusal, naming what cannot be done where a command is given."""
    from agnostophobia.deploy.calibration import trained_models
    from agnostophobia.errors import AgnostophobiaError
    from agnostophobia.training.records import check_run, run_models

    with pytest.raises(AgnostophobiaError, match="^run directory .*missing does not exist$"):
        run_models(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AgnostophobiaError, match=r"holds no trained run \(seed\*/<approach>/outputs.npz\), nothing "
                                                 r"to plot; train one with"):
        check_run(tmp_path / "empty", "plot")
    with pytest.raises(AgnostophobiaError, match=r"holds no trained run \(seed\*/<approach>/outputs.npz\); train one"):
        trained_models(tmp_path / "empty")
