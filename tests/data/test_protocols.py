"""Protocol construction on synthetic files: sizes, label sets, splits, seeds, limits."""
from __future__ import annotations

import numpy as np
import pytest

from agnostophobia.data import (PROTOCOLS, FINE_TO_COARSE, build_protocol, paper_protocols, stratified_split,
                                stratified_subset)
from agnostophobia.data.datasets import CIFAR10_CLASSES
from agnostophobia.data.preprocess import RESNET_INPUT, InputSpec
from agnostophobia.data.protocols import (UNKNOWN_SETS, UnknownSet, protocol_input, protocol_spec, register_protocol,
                                          require_protocol_data, unknown_set)
from agnostophobia.errors import ConfigError, DataError


def rows(images: np.ndarray) -> set:
    return {img.tobytes() for img in images}


def test_registry_names():
    # the package's own; a protocol registered beside them (docs/architecture.md) needs no edit here
    assert {"cifar", "cifar10-split", "lenet++", "mnist-notmnist"} <= set(PROTOCOLS.names())


def test_mnist_notmnist_protocol_has_no_validation_and_no_known_unknowns(synth):
    synth.lenet_set()
    p = build_protocol("mnist-notmnist", synth.root, seed=0, max_known_train=200, max_test_per_set=50)
    assert p.num_classes == 10 and p.input_shape == (1, 28, 28)
    assert p.sizes() == {"train": {"known": 200, "unknown": 0}, "val": {"known": 0, "unknown": 0},
                         "test_known": {"known": 50, "unknown": 0},
                         "test_unknowns/notmnist": {"known": 0, "unknown": 50}}
    assert p.val.images.shape == (0, 1, 28, 28) and p.train.labels.dtype == np.int64
    assert np.bincount(p.train.labels).tolist() == [20] * 10  # class-stratified cap
    whole = build_protocol("mnist-notmnist", synth.root, seed=0)
    assert rows(p.train.images) <= rows(whole.train.images)
    assert any("no validation split" in note for note in p.notes)


def test_stratified_split_is_exact_disjoint_and_proportional():
    labels = np.repeat(np.arange(4), [100, 50, 30, 20])
    keep, held = stratified_split(labels, 0.2, np.random.default_rng(0))
    assert len(held) == 40 and len(keep) == 160
    assert np.intersect1d(keep, held).size == 0 and np.union1d(keep, held).size == 200
    assert np.bincount(labels[held]).tolist() == [20, 10, 6, 4]
    sub = stratified_subset(labels, 50, np.random.default_rng(0))
    assert len(sub) == 50 and np.bincount(labels[sub]).tolist() == [25, 13, 7, 5]  # ties: lower class first
    assert np.array_equal(stratified_subset(labels, None, np.random.default_rng(0)), np.arange(200))


def test_lenet_protocol_sizes_and_labels(synth):
    synth.lenet_set()
    p = build_protocol("lenet++", synth.root, seed=0)
    assert p.num_classes == 10 and p.input_shape == (1, 28, 28)
    assert p.sizes() == {
        "train": {"known": 240, "unknown": 208}, "val": {"known": 60, "unknown": 52},
        "test_known": {"known": 100, "unknown": 0},
        "test_unknowns/letters": {"known": 0, "unknown": 104},
        "test_unknowns/devanagari": {"known": 0, "unknown": 144},
        "test_unknowns/notmnist": {"known": 0, "unknown": 100},
        "test_unknowns/cifar10": {"known": 0, "unknown": 100}}
    for split in [p.train, p.val, p.test_known, *p.test_unknowns.values()]:
        assert split.images.dtype == np.uint8 and split.images.shape[1:] == (1, 28, 28)
        assert split.labels.dtype == np.int64 and len(split.images) == len(split.labels)
    assert set(np.unique(p.train.labels)) == set(range(-1, 10))
    assert np.bincount(p.val.labels[p.val.labels >= 0]).tolist() == [6] * 10  # stratified 20 %
    assert all((s.labels == -1).all() for s in p.test_unknowns.values())
    assert any("data_batch_1" in n for n in p.notes)


def test_lenet_protocol_deterministic_by_seed(synth):
    synth.lenet_set()
    a = build_protocol("lenet++", synth.root, seed=3)
    b = build_protocol("lenet++", synth.root, seed=3)
    c = build_protocol("lenet++", synth.root, seed=4)
    for x, y in ((a.train, b.train), (a.val, b.val), (a.test_unknowns["cifar10"], b.test_unknowns["cifar10"])):
        assert np.array_equal(x.images, y.images) and np.array_equal(x.labels, y.labels)
    assert not np.array_equal(a.val.images, c.val.images)


def test_limits_are_stratified_and_independent(synth):
    synth.lenet_set()
    full = build_protocol("lenet++", synth.root, seed=0)
    small = build_protocol("lenet++", synth.root, seed=0, max_known_train=50, max_unknown_train=26, max_val=20,
                           max_test_per_set=30)
    s = small.sizes()
    assert s["train"] == {"known": 50, "unknown": 26} and s["val"] == {"known": 20, "unknown": 20}
    assert all(v["unknown"] == 30 for k, v in s.items() if k.startswith("test_unknowns/"))
    assert s["test_known"]["known"] == 30
    assert np.bincount(small.train.labels[small.train.labels >= 0]).tolist() == [5] * 10
    # the validation hold-out does not depend on the training cap
    capped = build_protocol("lenet++", synth.root, seed=0, max_known_train=50)
    assert np.array_equal(capped.val.images, full.val.images)
    assert rows(small.train.images[small.train.labels >= 0]) <= rows(full.train.images[full.train.labels >= 0])
    assert any("subsampled" in n for n in small.notes)


@pytest.mark.parametrize("kwargs, match", [
    ({"max_trian": 5}, "unknown protocol option 'max_trian'"),
    ({"max_val": 0}, "positive integer"),
    ({"max_val": 2.5}, "positive integer"),
    ({"val_fraction": 1.5}, "val_fraction"),
    ({"seed": -1}, "seed"),
])
def test_bad_options(synth, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        build_protocol("lenet++", synth.root, **kwargs)


def test_unknown_protocol():
    with pytest.raises(ValueError, match="unknown protocol 'mnist'"):
        build_protocol("mnist")


def test_inverted_glyph_set_is_rejected(synth):
    synth.lenet_set()
    path = synth.root / "nhcd" / "nhcd.npz"
    with np.load(path) as z:
        arrays = dict(z)
    arrays["x"] = 255 - arrays["x"]  # e.g. raw NHCD prepared without inversion
    np.savez(path, **arrays)
    with pytest.raises(DataError, match="looks like a black glyph on white"):
        build_protocol("lenet++", synth.root)


def test_lenet_needs_every_set(synth):
    synth.lenet_set()
    (synth.root / "notmnist" / "notmnist.npz").unlink()
    with pytest.raises(DataError, match="notmnist not found in .*agnostophobia data fetch notmnist"):
        build_protocol("lenet++", synth.root)


def cifar_files(synth):
    c10 = synth.cifar10_python(per_batch=20)
    c100 = synth.cifar100_python(per_fine=(3, 2))
    svhn = synth.svhn_mat(n=40)
    return c10, c100, svhn


def test_cifar_protocol(synth):
    c10, c100, svhn = cifar_files(synth)
    p = build_protocol("cifar", synth.root, seed=0)
    assert p.input_shape == (3, 32, 32) and p.num_classes == 10
    s = p.sizes()
    assert s["train"] == {"known": 80, "unknown": 120} and s["val"] == {"known": 20, "unknown": 30}
    assert s["test_known"]["known"] == 20
    assert {k: v["unknown"] for k, v in s.items() if k.startswith("test_unknowns/")} == {
        "test_unknowns/cifar100": 100, "test_unknowns/svhn": 40, "test_unknowns/cifar100-db": 100}
    x100, fine = c100["test"]
    chw = x100.transpose(0, 3, 1, 2)
    coarse = FINE_TO_COARSE[fine]
    assert rows(p.test_unknowns["cifar100"].images) == rows(chw[coarse >= 10])  # D_a: super-classes 10-19
    assert rows(p.test_unknowns["cifar100-db"].images) == rows(chw[coarse < 10])
    xtr, ftr = c100["train"]
    negatives = rows(np.concatenate([p.train.images[p.train.labels < 0], p.val.images[p.val.labels < 0]]))
    assert negatives == rows(xtr.transpose(0, 3, 1, 2)[FINE_TO_COARSE[ftr] < 10])  # D_b': 0-9 only
    assert rows(p.test_unknowns["svhn"].images) == rows(svhn[0].transpose(0, 3, 1, 2))
    assert any("4,500" in n for n in p.notes)


def test_cifar_protocol_stops_without_cifar100(synth):
    synth.cifar10_python()
    synth.svhn_mat()
    with pytest.raises(DataError) as err:
        build_protocol("cifar", synth.root)
    assert str(err.value).startswith(f"cifar100 not found in {synth.root}; get it with `agnostophobia data fetch cifar100`")


def test_cifar_protocol_stops_without_svhn(synth):
    synth.cifar10_python()
    synth.cifar100_python()
    with pytest.raises(DataError, match="svhn not found in .*agnostophobia data fetch svhn"):
        build_protocol("cifar", synth.root)


@pytest.mark.parametrize("name, known, negative, unknown, near, known_unknowns", [
    ("cifar10-split", [0, 1, 2, 3, 4, 6], [7, 8], [5, 9], "cifar10-dog-truck", "cifar10-horse-ship"),
    ("cifar10-split-b", [0, 2, 5, 6, 7, 9], [1, 4], [3, 8], "cifar10-cat-ship", "cifar10-automobile-deer")])
def test_cifar10_split_protocol(synth, name, known, negative, unknown, near, known_unknowns):
    """Both partitions of the CIFAR-10 split: which classes are known (numbered in label order), trained on
    as negatives, and kept for the test alone; the near sets' names and declarations; the far sets."""
    from agnostophobia.data.protocol_types import unknown_set

    c10 = synth.cifar10_python(per_batch=40)
    mnist, notmnist = synth.mnist_npz(), synth.notmnist_npz()
    p = build_protocol(name, synth.root, seed=0)
    assert p.num_classes == 6 and p.input_shape == (3, 32, 32)
    assert p.class_names == [CIFAR10_CLASSES[c] for c in known]
    assert list(p.test_unknowns) == [near, known_unknowns, "mnist-rgb", "notmnist-rgb"]
    assert unknown_set(near).proximity == "near" and not unknown_set(near).known_unknowns
    assert unknown_set(known_unknowns).known_unknowns and unknown_set("mnist-rgb").proximity == "far"
    xte, yte = c10["test"]
    chw = xte.transpose(0, 3, 1, 2)
    assert rows(p.test_unknowns[near].images) == rows(chw[np.isin(yte, unknown)])
    assert rows(p.test_unknowns[known_unknowns].images) == rows(chw[np.isin(yte, negative)])
    is_known = np.isin(yte, known)
    assert len(p.test_known) == is_known.sum() and set(np.unique(p.test_known.labels)) <= set(range(6))
    last = np.flatnonzero(yte == known[-1])[0]  # the last known class in label order is class 5
    idx = [i for i, img in enumerate(p.test_known.images) if img.tobytes() == chw[last].tobytes()]
    assert p.test_known.labels[idx[0]] == 5
    xtr, ytr = c10["train"]
    train_rows = rows(np.concatenate([p.train.images, p.val.images]))
    assert not train_rows & rows(xtr.transpose(0, 3, 1, 2)[np.isin(ytr, unknown)])  # D_a never in training
    assert train_rows >= rows(xtr.transpose(0, 3, 1, 2)[np.isin(ytr, negative)])  # every negative trained or validated
    assert set(np.unique(p.train.labels)) == set(range(-1, 6))
    # the far unknowns: each grey test glyph in R, G and B, resized from 28x28 to 32x32, every one kept
    for name, stored in (("mnist-rgb", mnist["x_test"]), ("notmnist-rgb", notmnist["x_test"])):
        far = p.test_unknowns[name]
        assert far.images.shape == (len(stored), 3, 32, 32) and (far.labels == -1).all()
        assert (far.images[:, 0] == far.images[:, 1]).all() and (far.images[:, 1] == far.images[:, 2]).all()
        assert (np.abs(far.images[:, 0].astype(int).mean(axis=(1, 2)) - stored.mean(axis=(1, 2))) < 8).all()


# ------------------------------------------------------------------ declarations
@pytest.mark.parametrize("name", ["lenet++", "mnist-notmnist", "cifar", "cifar10-split", "cifar10-split-b", "osr-mnist",
                                  "osr-cifar10"])
def test_a_protocol_reads_exactly_the_datasets_it_declares(name, synth, monkeypatch):
    """The declaration registered beside the builder says what the builder does: the datasets
    `reproduce` checks (or fetches) before it writes anything, and the input `evaluate` prepares."""
    if name in ("lenet++", "mnist-notmnist", "osr-mnist", "osr-cifar10"):
        synth.lenet_set()
    else:
        cifar_files(synth)
        synth.mnist_npz(), synth.notmnist_npz()  # cifar10-split's far unknowns
    loaded, load = set(), paper_protocols.load_dataset
    monkeypatch.setattr(paper_protocols, "load_dataset", lambda dataset, *a, **k: loaded.add(dataset) or load(
        dataset, *a, **k))
    spec = PROTOCOLS.get(name)
    assert spec.name == name and spec.require_data(synth.root) == []
    built = build_protocol(name, synth.root, seed=0, **({"split": 0} if spec.splits else {}))
    assert built.input_shape == spec.input.shape
    assert loaded == set(spec.datasets)
    # and how its unknown sets are named: each is declared, so reports and figures title it alike
    assert set(built.test_unknowns) <= set(UNKNOWN_SETS.names())


def test_an_unknown_set_is_titled_from_its_one_declaration():
    """Reports, figure headings, legends and notes take a set's title from its declaration, and
    no module spells a declared title again (the letters set had three titles that disagreed)."""
    import agnostophobia
    from pathlib import Path

    declared = [unknown_set(name) for name in UNKNOWN_SETS.names()]
    assert unknown_set("letters").label == "EMNIST letters test (D_b)"
    for s in declared:
        assert s.heading.startswith("Known unknowns" if s.known_unknowns else "Unknown unknowns")
        assert s.label in s.heading and f"({s.role})" in s.label
    assert unknown_set("my photos") == UnknownSet("my photos", "my photos")  # a user's set: D_a, as named
    package = Path(agnostophobia.__file__).parent
    spelled = {s.title: [p.relative_to(package).as_posix() for p in package.rglob("*.py")
                         if f'"{s.title}"' in p.read_text()] for s in declared}
    # the CIFAR-10 splits' near sets are titled from their classes' names (CifarPartition): spelled nowhere
    composed = {s.title for s in declared if s.name.startswith("cifar10-") and s.proximity == "near"}
    assert composed and all(spelled[title] == [] for title in composed), spelled
    assert all(len(places) == 1 and places[0].startswith("data/") for title, places in spelled.items()
               if title not in composed), spelled


def test_protocol_spec_tells_a_name_from_a_mapping(tmp_path):
    assert protocol_spec("lenet++") is PROTOCOLS.get("lenet++") and not protocol_spec("lenet++").check_by_building
    assert protocol_spec("lenet++").config_value(tmp_path) == "lenet++"
    mapping = {"type": "folders", "root": "tree", "image_size": 32, "channels": 3, "known": ["cat"]}
    files = protocol_spec(mapping)
    assert files.input == InputSpec(3, 32, "natural") and files.datasets == () and files.check_by_building
    assert files.config_value(tmp_path) == {**mapping, "root": str(tmp_path / "tree")}  # paths from the YAML's folder
    assert require_protocol_data(mapping) == []  # reads no registered dataset
    with pytest.raises(ConfigError, match=r"config key 'protocol': must be one of \['cifar', .*\], or a mapping"):
        protocol_spec("imagenet", "protocol")
    with pytest.raises(ConfigError, match="unknown protocol 'imagenet'; known: cifar, "):
        protocol_spec("imagenet")
    with pytest.raises(ConfigError, match=r"config key 'protocol.channels': must be 1 \(grey\) or 3"):
        protocol_spec({**mapping, "channels": 2})
    with pytest.raises(ConfigError, match="'authors' .* applies to the lenet\\+\\+ protocol only, not to a protocol "
                                          "from files"):
        protocol_input(mapping, "authors")


def test_a_new_protocol_is_one_registered_declaration(monkeypatch, tmp_path):
    monkeypatch.setattr(PROTOCOLS, "_items", dict(PROTOCOLS._items))
    register_protocol("toy", RESNET_INPUT, datasets=("svhn",), data_hint="toy needs SVHN")(lambda **kw: kw)
    assert protocol_input("toy") == RESNET_INPUT and "toy" in PROTOCOLS
    assert build_protocol("toy", tmp_path, seed=2, max_val=3) == {"data_dir": tmp_path, "seed": 2,
                                                                   "preprocessing": "ours", "max_val": 3}
    with pytest.raises(ConfigError, match="applies to the lenet\\+\\+ protocol only, not to protocol 'toy'; use"):
        protocol_input("toy", "authors")
    with pytest.raises(DataError, match=r"^svhn not found in .*agnostophobia data fetch svhn.* \(toy needs SVHN\)$"):
        require_protocol_data("toy", tmp_path)
