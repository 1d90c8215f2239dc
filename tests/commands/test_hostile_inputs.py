"""Inputs a hostile or careless user gives, each class refused at the depth where it arises,
in one line, before anything is written: names that would become paths, a training folder of
the user's own files, outputs onto what is not a regular file, seed counts no command could loop
over, devices that are not there; and the data-fingerprint cache, which must notice a file
rewritten in place and never block on a FIFO; and the message after Ctrl-C, which names the
command that continues."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from reliability_table import proves
from runs import damage_weights, run_main, snapshot

from agnostophobia.errors import AgnostophobiaError, AgnostophobiaWarning, ConfigError

BAD_NAMES = {"escape": "/".join(["..", "..", "escape"]), "separator": "a/b", "backslash": "a\\b", "dotdot": "..", "dot": ".",
             "nul": "a\0b", "long": "x" * 101, "empty": ""}


def registries():
    from agnostophobia.data.datasets import DATASETS
    from agnostophobia.data.protocol_types import PROTOCOLS, UNKNOWN_SETS
    from agnostophobia.detectors import DETECTORS
    from agnostophobia.losses import LOSSES

    return {"loss": LOSSES, "detector": DETECTORS, "dataset": DATASETS, "protocol": PROTOCOLS,
            "unknown set": UNKNOWN_SETS}


@proves("refused input", "a name that becomes a path (a registered loss, detector, dataset, protocol or unknown "
                         "set) with a separator, `..`, a NUL or over 100 characters is refused when registered")
@pytest.mark.parametrize("kind", ["loss", "detector", "dataset", "protocol", "unknown set"])
@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_a_registered_name_that_is_no_single_path_component_is_refused(kind, name):
    registry = registries()[kind]
    with pytest.raises(ConfigError, match=f"registering {kind}") as error:
        registry.register(name)(object())
    assert "\n" not in str(error.value) and name not in registry.names()


def test_a_name_of_100_characters_is_registered_and_one_of_101_is_not():
    from agnostophobia.registry import Registry

    registry = Registry("thing", path_names=True)
    registry.register("y" * 100)(1)
    with pytest.raises(ConfigError, match="at most 100 characters, has 101"):
        registry.register("y" * 101)(1)


@proves("refused input", "an unknown set whose file name cannot name its figures (240 characters) is refused "
                         "before anything is written")
@pytest.mark.parametrize("stem", ["u" * 101, "u" * 240])
def test_an_unknown_set_named_by_a_long_file_is_refused(tmp_path, stem):
    from agnostophobia.data.inputs import unknown_set_name
    from agnostophobia.errors import DataError

    path = tmp_path / f"{stem}.npz"
    path.write_bytes(b"")
    with pytest.raises(DataError, match="at most 100 characters"):
        unknown_set_name(str(path))


# ------------------------------------------------------------------ train --out DIR
#: A folder of the user's own files: the file a training would replace first, and what it holds.
USERS_FILES = {"config": {"config.yaml": "name: my experiment\nepochs: 3\n"},  # an experiment file of the user's
               "data_split": {"data_split/train.csv": "mine\n"}, "other": {"notes.txt": "mine\n"}}
#: What the code before issue 54 took for a run by its name alone (a trailing / is an empty folder).
LOOKALIKES = {"nothing": {}, "empty-lock": {".lock": ""}, "foreign-run-meta": {"run_meta.json": '{"name": "mine"}'},
              "seed0": {"seed0/": None}, "seed3": {"seed3/": None}}


def make_files(root: Path, files: dict) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).mkdir() if name.endswith("/") else (root / name).write_text(text)


def every_path(root: Path) -> dict:
    """Every file (with its bytes and modification time) and every folder under ``root``."""
    return {**snapshot(root), **{p: None for p in root.rglob("*") if p.is_dir()}}


@proves("refused input", "`train --out DIR` into a folder of the user's own files is refused naming a file it "
                         "would replace, also where the folder holds an empty `.lock`, a `run_meta.json` not of this "
                         "project or an empty `seed<N>/`; the folder is unchanged, byte for byte")
@pytest.mark.parametrize("lookalike", LOOKALIKES.values(), ids=LOOKALIKES.keys())
@pytest.mark.parametrize("files", USERS_FILES.values(), ids=USERS_FILES.keys())
def test_train_into_a_folder_of_other_files_is_refused(tiny_config, real_data_dir, tmp_path, capsys, files, lookalike):
    out = tmp_path / "mine"
    make_files(out, {**files, **lookalike})
    before = every_path(out)
    code, _, err = run_main(["train", tiny_config, "--out", out, "--no-progress", "--data-dir", real_data_dir],
                            capsys)
    assert code == 1 and len(err) == 1 and "not a run of this project" in err[0], err
    named = re.search(r"\(it (?:would replace|holds) (\S+)\)", err[0]).group(1)
    assert Path(named) in before, err  # a file of the folder, the first it would replace
    assert every_path(out) == before


# ------------------------------------------------------------------ --out onto what is not a regular file
@proves("refused input", "`--out` onto a FIFO or a device (export, predict) is refused; the FIFO stays")
@pytest.mark.parametrize("command", ["export", "predict"])
def test_an_output_onto_a_fifo_is_refused(tiny_run, tmp_path, capsys, command):
    fifo = tmp_path / ("model.pt" if command == "export" else "rows.csv")
    os.mkfifo(fifo)
    argv = (["export", tiny_run, "--format", "torchscript", "--out", fifo] if command == "export"
            else ["predict", tiny_run, tmp_path / "none.png", "--out", fifo])
    code, _, err = run_main(argv, capsys)
    assert code == 1 and len(err) == 1 and "is a FIFO, not a regular file" in err[0], err
    assert Path(fifo).is_fifo()


def test_a_device_is_never_replaced_by_an_atomic_write():
    from agnostophobia._atomic import check_replaceable

    with pytest.raises(AgnostophobiaError, match="/dev/null: is a character device"):
        check_replaceable("/dev/null")  # what atomic_write checks before it writes anything


# ------------------------------------------------------------------ seeds, devices
@proves("refused input", "`--seeds 2**63`, `epochs` past 100,000 and an unavailable `--device` are refused at "
                         "once, before the run folder is made")
@pytest.mark.parametrize("option", [["--seeds", str(2**63)], ["--seeds", "10001"], ["--device", "mps"],
                                    ["--set", f"epochs={10**30}"], ["--set", "epochs=100001"]],
                         ids=["seeds-2-63", "seeds-10001", "mps", "epochs-10-30", "epochs-100001"])
def test_a_seed_count_or_device_no_run_can_use_is_refused_before_the_folder(tiny_config, tmp_path, capsys, option):
    import torch

    if option[0] == "--device" and torch.backends.mps.is_available():
        pytest.skip("this machine has MPS")
    out = tmp_path / "run"
    code, _, err = run_main(["train", tiny_config, "--out", out, "--no-progress", *option], capsys)
    assert code == 1 and len(err) == 1 and not out.exists(), err


# ------------------------------------------------------------------ the fingerprint cache
@proves("refused input", "a data file rewritten in place with its old size and modification time is hashed "
                         "again (the cache keys on inode and ctime too)")
def test_a_file_rewritten_with_its_old_size_and_mtime_is_hashed_again(tmp_path):
    from agnostophobia.data.fingerprint import file_fingerprint

    data = tmp_path / "data.npz"
    data.write_bytes(b"first content")
    st = os.stat(data)
    first = file_fingerprint(data)["sha256"]
    data.write_bytes(b"other content")  # same size
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))  # the old modification time, set back
    assert os.stat(data).st_size == st.st_size and os.stat(data).st_mtime_ns == st.st_mtime_ns
    assert file_fingerprint(data)["sha256"] != first


def test_a_fifo_as_the_fingerprint_cache_is_ignored_with_a_warning(tmp_path, monkeypatch):
    from agnostophobia.data import fingerprint

    monkeypatch.setenv("AGNOSTOPHOBIA_CACHE", str(tmp_path / "cache"))
    fingerprint._cache_path().parent.mkdir(parents=True)
    os.mkfifo(fingerprint._cache_path())
    data = tmp_path / "data.npz"
    data.write_bytes(b"content")
    with pytest.warns(AgnostophobiaWarning, match="fingerprint cache.*FIFO.*ignored"):
        assert len(fingerprint.file_fingerprint(data)["sha256"]) == 64
    assert fingerprint._cache_path().is_fifo()


# ------------------------------------------------------------------ Ctrl-C
@proves("kill", "after Ctrl-C the message names the command that continues (`train` with `--resume`)")
@pytest.mark.parametrize("argv, continuing", [
    (["train", "{cfg}", "--out", "r"], "agnostophobia train {cfg} --out r --resume"),
    (["train", "{cfg}", "--out", "r", "--resume"], "agnostophobia train {cfg} --out r --resume"),
    (["calibrate", "r", "--fpr", "0.1"], "agnostophobia calibrate r --fpr 0.1")], ids=["train", "resume", "calibrate"])
def test_the_message_after_ctrl_c_names_the_command_that_continues(tiny_config, monkeypatch, capsys, tmp_path, argv,
                                                                    continuing):
    import agnostophobia.deploy.calibration as calibration
    import agnostophobia.experiments.reproduce as reproduce

    monkeypatch.chdir(tmp_path)  # a run "r" that passes the checks made before loading
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "config.yaml").write_text("approaches: [softmax]\n")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(reproduce, "train_run", interrupted)
    monkeypatch.setattr(calibration, "calibrate_run", interrupted)
    code, _, err = run_main([a.format(cfg=tiny_config) for a in argv], capsys)
    assert code == 130 and len(err) == 1 and f"run `{continuing.format(cfg=tiny_config)}`" in err[0], err


# ------------------------------------------------------------------ nesting, numbers, sizes
@proves("refused input", "YAML nested thousands deep and folders nested past 64 levels are one-line refusals, "
                         "not RecursionError")
@pytest.mark.parametrize("text", ["a: " + "[" * 5000 + "]" * 5000, "a:\n" + "".join("  " * i + "k:\n" for i in range(1, 3000))],
                         ids=["flow", "block"])
def test_yaml_nested_too_deep_is_one_line(tmp_path, text):
    from agnostophobia._yaml import read_yaml_file

    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="nested more than 100 levels deep") as error:
        read_yaml_file(path, ConfigError)
    assert "\n" not in str(error.value)


def deep_folder(root: Path, depth: int) -> Path:
    """``root/d/d/.../d`` ``depth`` deep (past the bound of 64; not 1,100, which pytest's own clean-up of
    temporary folders could not remove without recursing too deep)."""
    folder = root / "/".join(["d"] * depth)
    folder.mkdir(parents=True)
    return folder


@pytest.mark.parametrize("reader", ["predict-folder", "fingerprint"])
def test_folders_nested_too_deep_are_one_line(tmp_path, reader):
    from agnostophobia.data.fingerprint import source_fingerprint
    from agnostophobia.data.inputs import open_image_input
    from agnostophobia.errors import DataError

    root = tmp_path / "images"
    (deep_folder(root, 100) / "x.png").write_bytes(b"")
    with pytest.raises(DataError, match="nested more than 64 deep"):
        open_image_input(str(root)) if reader == "predict-folder" else source_fingerprint(root)


@proves("refused input", "a CSV label of 10**30 is refused as out of range before any array holds it")
@pytest.mark.parametrize("label", [str(10**30), "100000", str(-(10**30))])
def test_a_label_beyond_any_class_is_refused_before_casting(tmp_path, label):
    from agnostophobia.data.file_protocols import check_file_protocol

    (tmp_path / "img").mkdir()
    Image = pytest.importorskip("PIL.Image")
    for name in "abc":
        Image.fromarray(__import__("numpy").zeros((28, 28), "uint8")).save(tmp_path / "img" / f"{name}.png")
    for split, text in (("train", f"a.png,{label}\n"), ("val", "b.png,0\n"), ("test", "c.png,0\n")):
        (tmp_path / f"{split}.csv").write_text(text)
    problems = check_file_protocol({"type": "csv", "root": str(tmp_path / "img"), "train": str(tmp_path / "train.csv"),
                                    "val": str(tmp_path / "val.csv"), "test": str(tmp_path / "test.csv"),
                                    "image_size": 28, "channels": 1})
    assert any("out of range" in p and "train.csv:1" in p for p in problems), problems


# ------------------------------------------------------------------ sizes declared before allocating
def npz_declaring(path: Path, shape) -> Path:
    """An .npz whose member's .npy header declares ``shape`` (uint8) over a few bytes of data:
    1.57 GB said, 300 bytes on disk."""
    import io
    import zipfile

    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "|u1", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", header.getvalue() + bytes(64))
    return path


def _npz_member(tmp_path):
    from agnostophobia.data.inputs import read_images

    read_images(str(npz_declaring(tmp_path / "big.npz", (20000, 280, 280))))  # 1.57 GB declared


def _wide_image(tmp_path):
    import numpy as np

    from agnostophobia.data.preprocess import LENET_INPUT, prepare_images

    prepare_images([np.zeros((1, 300000), np.uint8)], LENET_INPUT, name="wide.png")  # 28 x 8.4 M once resized


def _prepared_set(tmp_path):
    import numpy as np

    from agnostophobia.data.preprocess import InputSpec, prepare_images

    stored = np.broadcast_to(np.zeros((1, 28, 28), np.uint8), (1000, 28, 28))  # 784 bytes held, 784 kB said
    prepare_images(stored, InputSpec(3, 4096, "natural"), name="set.npz")  # 1000 x 3 x 4096 x 4096: 50 GB


def _prepared_folder(tmp_path):
    import numpy as np

    from agnostophobia.data.preprocess import InputSpec, prepare_images

    prepare_images([np.zeros((28, 28), np.uint8)] * 2000, InputSpec(3, 4096, "natural"), name="folder")  # 100 GB


@proves("refused input", "an input whose declared size does not fit (an .npz member's header, an image once "
                         "resized, a set prepared at image_size 4096) is refused in one line naming it and the "
                         "limit, before the array is allocated")
@pytest.mark.parametrize("read", [_npz_member, _wide_image, _prepared_set, _prepared_folder],
                         ids=["npz-member", "wide-image", "prepared-set", "prepared-folder"])
def test_an_input_declaring_more_than_fits_is_refused_before_allocating(tmp_path, monkeypatch, read):
    import agnostophobia._reading as reading
    from agnostophobia.errors import DataError

    monkeypatch.setattr(reading, "available_memory", lambda: 256 << 20)  # the limit: half of it, 128 MiB
    with pytest.raises(DataError, match=r"more than the 0\.1 GiB one input may take") as error:
        read(tmp_path)
    assert "\n" not in str(error.value)


def test_rgb_to_grey_works_a_few_images_at_a_time(monkeypatch):
    import tracemalloc

    import numpy as np

    import agnostophobia.data.preprocess as preprocess

    monkeypatch.setattr(preprocess, "GREY_CHUNK_PIXELS", 1 << 14)  # 4 images of 64 x 64 at a time
    images = np.random.default_rng(0).integers(0, 256, (200, 64, 64, 3), dtype=np.uint8)  # 2.5 MB
    rgb = images.astype(np.uint32)
    luma = ((rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) >> 16).astype(np.uint8)
    del rgb
    tracemalloc.start()
    grey = preprocess.rgb_to_grey(images)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert np.array_equal(grey, luma)
    assert peak < images.nbytes  # the whole set in 32 bits took 4 x its size, and as much again


@proves("refused input", "a command that runs out of memory where no declared size foretold it (a network on "
                         "huge images) ends in one line, not a traceback")
@pytest.mark.parametrize("error", [MemoryError(), RuntimeError("[enforce fail at alloc_cpu.cpp:118] data. "
                                                               "DefaultCPUAllocator: can't allocate memory: you tried "
                                                               "to allocate 34359738368 bytes.")],
                         ids=["MemoryError", "torch-cpu-allocator"])
def test_running_out_of_memory_is_one_line(tiny_config, tmp_path, capsys, monkeypatch, error):
    import agnostophobia.experiments.reproduce as reproduce

    def out_of_memory(*args, **kwargs):
        raise error

    monkeypatch.setattr(reproduce, "train_run", out_of_memory)
    code, _, err = run_main(["train", tiny_config, "--out", tmp_path / "run"], capsys)
    assert code == 1 and len(err) == 1 and "out of memory" in err[0], err


# ------------------------------------------------------------------ a best.pt that is not this run's network
def _nan(state):
    state["logits.weight"][0, 0] = float("nan")
    return "layer logits.weight holds 1 NaN value(s)"


def _inf(state):
    first = next(iter(state))
    state[first].view(-1)[3] = float("inf")
    return f"layer {first} holds 1 infinite value(s)"


def _outputs(state):
    import torch

    state["logits.weight"] = torch.zeros(13, 2)  # 13 outputs in a run of 10 classes
    return "layer logits.weight has shape (13, 2), the network of this run has (10, 2)"


def _shape(state):
    import torch

    first = next(iter(state))
    wanted = tuple(state[first].shape)
    state[first] = torch.zeros(*wanted[:-1], wanted[-1] + 1)
    shown = ", ".join(map(str, wanted[:-1]))
    return f"layer {first} has shape ({shown}, {wanted[-1] + 1}), the network of this run has ({shown}, {wanted[-1]})"


def _integers(state):
    for name, value in list(state.items()):
        if value.is_floating_point():
            state[name] = value.round().long()
    return f"layer {next(iter(state))} holds int64 values"


BAD_WEIGHTS = {"nan": _nan, "inf": _inf, "outputs": _outputs, "shape": _shape, "integers": _integers}
MODEL_COMMANDS = {
    "export": lambda r, t: ["export", r, "--approach", "entropic", "--out", t / "model.pt2"],
    "calibrate": lambda r, t: ["calibrate", r, "--fpr", "0.1"],
    "compare": lambda r, t: ["compare", r],
    "evaluate": lambda r, t: ["evaluate", r, "--no-progress"],
    "predict": lambda r, t: ["predict", r, _images(t), "--approach", "entropic"],
}


def _images(tmp: Path) -> Path:
    import numpy as np

    np.savez(tmp / "images.npz", x=np.zeros((2, 28, 28), np.uint8))
    return tmp / "images.npz"


@proves("refused input", "a `best.pt` whose weights are not the run's network (NaN or inf, a logit layer of "
                         "another number of outputs, a layer of another shape, integers) is refused in one line "
                         "naming the file and the layer by export, calibrate, compare, evaluate and predict; the "
                         "run is unchanged")
@pytest.mark.parametrize("command", MODEL_COMMANDS)
@pytest.mark.parametrize("weights", BAD_WEIGHTS)
def test_a_checkpoint_that_is_not_the_runs_network_is_refused_by_every_command(calibrated, tmp_path, capsys,
                                                                                command, weights):
    import shutil

    from runs import snapshot

    run = shutil.copytree(calibrated, tmp_path / "run")
    best, said = damage_weights(run, BAD_WEIGHTS[weights])
    argv = MODEL_COMMANDS[command](run, tmp_path)
    before = snapshot(run)
    code, _, err = run_main(argv, capsys)
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith(f"agnostophobia: error: {best}: {said}"), err
    assert snapshot(run) == before and not (tmp_path / "model.pt2").exists()


# ------------------------------------------------------------------ flags without effect
NO_DATA = "{tmp}/no-data"
UNUSED_FLAGS = [  # (command, warning line, after "agnostophobia: warning: ")
    (["calibrate", "{run}", "--fpr", "0.5", "--device", "cuda:99", "--data-dir", NO_DATA],
     f"--data-dir {NO_DATA} and --device cuda:99 have no effect: every validation output this needs is stored"),
    (["compare", "{run}", "--data-dir", NO_DATA], f"--data-dir {NO_DATA} has no effect: compare ranks the run's stored"),
    (["predict", "{run}", "{tmp}/images.npz", "--approach", "entropic", "--data-dir", NO_DATA],
     f"--data-dir {NO_DATA} has no effect: every validation output this needs is stored"),
    (["evaluate", "{run}", "--device", "cpu", "--data-dir", NO_DATA],
     f"--data-dir {NO_DATA} and --device cpu have no effect: without --unknowns, evaluate reads the run's stored"),
]


@proves("refused input", "a `--device` or `--data-dir` that has no effect (every output the command needs is "
                         "stored in the run) is said in one warning line, not ignored")
@pytest.mark.parametrize("argv, said", UNUSED_FLAGS, ids=[c[0][0] for c in UNUSED_FLAGS])
def test_a_flag_without_effect_says_so_in_one_line(calibrated, tmp_path, capsys, monkeypatch, argv, said):
    import shutil

    import agnostophobia.experiments.reproduce as reproduce

    monkeypatch.setattr(reproduce, "finish_run", lambda run_dir, *a, **k: run_dir)  # evaluate's report: not the point
    run = shutil.copytree(calibrated, tmp_path / "run")
    _images(tmp_path)
    code, _, err = run_main([a.format(run=run, tmp=tmp_path) for a in argv], capsys)
    assert code == 0 and len(err) == 1, err
    assert err[0].startswith(f"agnostophobia: warning: {said.format(tmp=tmp_path)}"), err


def test_a_device_this_machine_lacks_is_refused_where_a_network_runs(calibrated, tmp_path, capsys):
    import torch

    if torch.cuda.device_count() > 99:
        pytest.skip("this machine has a GPU 99")
    code, _, err = run_main(["predict", calibrated, _images(tmp_path), "--device", "cuda:99"], capsys)
    assert code == 1 and len(err) == 1 and "device 'cuda:99': requested but" in err[0], err
