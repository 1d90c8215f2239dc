"""Every on-disk format loads to the same convention, and every bad file is a one-line DataError."""
from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import pytest

from agnostophobia.data import DATASETS, SplitUnavailable, load_dataset
from agnostophobia.data.formats import decode_image
from agnostophobia.errors import DataError


def one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg
    return msg


# ----------------------------------------------------------------- prepared npz
def test_npz_layouts_load(synth):
    arrays = synth.lenet_set()
    mn = load_dataset("mnist", "train", synth.root)
    assert mn.images.dtype == np.uint8 and mn.images.shape == arrays["mnist"]["x_train"].shape
    assert mn.labels.dtype == np.int64 and np.array_equal(mn.labels, arrays["mnist"]["y_train"])
    assert mn.format == "npz" and mn.source.endswith("mnist.npz")
    lt = load_dataset("letters", "test", synth.root)
    assert np.array_equal(lt.labels, arrays["letters"]["y_test"].astype(np.int64) - 1)  # a=1 -> 0
    assert lt.class_names[0] == "a" and len(lt.class_names) == 26
    nm = load_dataset("notmnist", "test", synth.root)
    assert len(nm) == 100 and nm.class_names == list("ABCDEFGHIJ")


def test_nhcd_npz_label_mapping_and_devanagari_subset(synth):
    arrays = synth.nhcd_npz(per_class=3)
    full = load_dataset("nhcd", "all", synth.root)
    assert len(full.class_names) == 58
    hist = full.histogram()
    assert hist.tolist() == [3] * 58
    g = arrays["group"]
    assert np.array_equal(full.labels[g == 0], arrays["y"][g == 0] - 1)
    assert np.array_equal(full.labels[g == 1], arrays["y"][g == 1] + 35)
    assert np.array_equal(full.labels[g == 2], arrays["y"][g == 2] + 48)
    dev = load_dataset("devanagari", "test", synth.root)
    assert len(dev) == 48 * 3 and dev.labels.max() == 47
    assert any("NHCD consonants + vowels" in n for n in dev.notes)


def test_devanagari_falls_back_to_dhcd_consonants(synth):
    synth.dhcd_npz(per_class=3)
    dev = load_dataset("devanagari", "test", synth.root)
    assert len(dev) == 36 * 3 and dev.images.shape[1:] == (32, 32)
    assert dev.meta["padding"] == 2
    assert any("substituted DHCD" in n for n in dev.notes)
    with pytest.raises(SplitUnavailable) as err:  # the staged DHCD has no train split
        load_dataset("dhcd", "train", synth.root)
    assert "fetch dhcd" in one_line(err)


def test_cifar10_jpeg_train_decoded_lazily_and_cached(synth, monkeypatch, tmp_path):
    monkeypatch.setenv("AGNOSTOPHOBIA_CACHE", str(tmp_path / "cache"))
    ref = synth.cifar10_npz(per_class=(5, 3))
    test = load_dataset("cifar10", "test", synth.root)
    assert np.array_equal(test.images, ref["x_test"])
    assert not (tmp_path / "cache").exists()  # the test split never touches the JPEGs
    train = load_dataset("cifar10", "train", synth.root)
    assert train.format == "jpeg-npz" and train.images.shape == (50, 32, 32, 3)
    with np.load(synth.root / "cifar10" / "cifar10_train_jpeg.npz") as z:
        buf, off = z["train_jpeg"], z["train_jpeg_offsets"]
    assert np.array_equal(train.images[7], decode_image(buf[off[7]:off[8]].tobytes(), "7", mode="RGB"))
    assert np.array_equal(train.labels, ref["y_train"])
    cached = list((tmp_path / "cache").glob("*.npy"))
    assert len(cached) == 1
    again = load_dataset("cifar10", "train", synth.root)
    assert np.array_equal(again.images, train.images)
    assert not list((synth.root / "cifar10").glob("*.npy"))  # nothing written next to the data


# -------------------------------------------------------------- official formats
#: case -> (dataset, how its official files are written, the format it loads as); both splits each
TWO_SPLIT_FORMATS = {
    "mnist-idx-gz": ("mnist", lambda synth: synth.mnist_idx(gz=True), "idx"),
    "mnist-idx": ("mnist", lambda synth: synth.mnist_idx(gz=False), "idx"),
    "cifar10-python-tar": ("cifar10", lambda synth: synth.cifar10_python(as_tar=True), "cifar-python"),
    "cifar10-python": ("cifar10", lambda synth: synth.cifar10_python(as_tar=False), "cifar-python"),
}


@pytest.mark.parametrize("case", TWO_SPLIT_FORMATS)
def test_official_format_loads_both_splits_as_written(synth, case):
    name, write, format_name = TWO_SPLIT_FORMATS[case]
    ref = write(synth)
    for split in ("train", "test"):
        ds = load_dataset(name, split, synth.root)
        assert ds.format == format_name
        assert np.array_equal(ds.images, ref[split][0]), "CIFAR: RGB planes must map to (H, W, 3) without transpose"
        assert np.array_equal(ds.labels, ref[split][1])


def test_npz_preferred_over_idx(synth):
    synth.mnist_idx()
    arrays = synth.mnist_npz(per_class=(5, 5))
    ds = load_dataset("mnist", "train", synth.root)
    assert ds.format == "npz" and len(ds) == len(arrays["y_train"])


def test_emnist_zip_read_in_place_and_transposed_upright(synth):
    ref = synth.emnist_zip()
    ds = load_dataset("letters", "train", synth.root)
    assert ds.format == "idx-zip"
    assert np.array_equal(ds.images, ref["train"][0])  # upright again
    assert np.array_equal(ds.labels, ref["train"][1] - 1)


@pytest.mark.parametrize("as_tar", [True, False])
def test_cifar100_python_fine_and_coarse(synth, as_tar):
    from agnostophobia.data import FINE_TO_COARSE

    ref = synth.cifar100_python(as_tar=as_tar)
    ds = load_dataset("cifar100", "test", synth.root)
    assert np.array_equal(ds.images, ref["test"][0]) and np.array_equal(ds.labels, ref["test"][1])
    assert np.array_equal(ds.extra["coarse"], FINE_TO_COARSE[ds.labels])
    assert ds.class_names[0] == "apple" and ds.class_names[99] == "worm"


def test_fine_to_coarse_map_is_the_standard_one():
    from agnostophobia.data import FINE_TO_COARSE
    from agnostophobia.data.datasets import CIFAR100_CLASSES, CIFAR100_COARSE

    assert np.bincount(FINE_TO_COARSE).tolist() == [5] * 20
    spot = {"apple": "fruit_and_vegetables", "aquarium_fish": "fish", "baby": "people", "bear": "large_carnivores",
            "beaver": "aquatic_mammals", "pickup_truck": "vehicles_1", "tractor": "vehicles_2", "worm": "non-insect_invertebrates"}
    for fine, coarse in spot.items():
        assert CIFAR100_COARSE[FINE_TO_COARSE[CIFAR100_CLASSES.index(fine)]] == coarse


def test_cifar100_coarse_disagreeing_with_map_is_an_error(synth):
    d = synth.dir("cifar100") / "cifar-100-python"
    d.mkdir()
    data = np.zeros((2, 3072), np.uint8)
    (d / "test").write_bytes(pickle.dumps({"data": data, "fine_labels": [0, 1], "coarse_labels": [0, 0]}))
    with pytest.raises(DataError, match="coarse labels disagree"):
        load_dataset("cifar100", "test", synth.root)


def test_svhn_mat_digit_zero_is_label_zero(synth):
    x, y = synth.svhn_mat()
    ds = load_dataset("svhn", "test", synth.root)
    assert ds.format == "mat" and np.array_equal(ds.images, x) and np.array_equal(ds.labels, y)
    with pytest.raises(SplitUnavailable):
        load_dataset("svhn", "train", synth.root)


@pytest.mark.parametrize("as_tar", [True, False])
def test_notmnist_png_tree_skips_unreadable(synth, as_tar):
    x, y = synth.notmnist_archive(as_tar=as_tar, broken=2)
    ds = load_dataset("notmnist", "test", synth.root)
    assert ds.format == "images" and len(ds) == 30
    assert np.array_equal(ds.histogram(), np.bincount(y, minlength=10))
    assert any("skipped 2 unreadable" in n for n in ds.notes)


@pytest.mark.parametrize("as_zip", [False, True])
def test_nhcd_images_are_inverted_to_white_on_black(synth, as_zip):
    x, y = synth.nhcd_folder(as_zip=as_zip)
    ds = load_dataset("nhcd", "all", synth.root)
    order = np.lexsort((np.arange(len(y)), y))
    assert np.array_equal(ds.labels, y[order])
    assert np.array_equal(ds.images, x[order])  # stored black on white, returned white on black
    assert np.median(ds.images[:, 0, :]) == 0
    assert len(load_dataset("devanagari", "test", synth.root)) == 48 * 2


def test_dhcd_zip(synth):
    ref = synth.dhcd_zip()
    for split in ("train", "test"):
        ds = load_dataset("dhcd", split, synth.root)
        assert ds.images.shape == (92, 32, 32)
        assert np.array_equal(ds.labels, ref[split][1])
        assert ds.class_names[0] == "character_1_c1" and ds.class_names[36] == "digit_0"


# ------------------------------------------------------------------- bad files
def test_missing_dataset_names_dir_and_fetch_command(synth):
    with pytest.raises(DataError) as err:
        load_dataset("cifar100", "train", synth.root)
    msg = one_line(err)
    assert msg.startswith(f"cifar100 not found in {synth.root}; get it with `agnostophobia data fetch cifar100`")


def test_devanagari_missing_points_to_nhcd_fetch(synth):
    with pytest.raises(DataError, match="agnostophobia data fetch nhcd"):
        load_dataset("devanagari", "test", synth.root)


def test_truncated_npz(synth):
    synth.mnist_npz()
    path = synth.root / "mnist" / "mnist.npz"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError) as err:
        load_dataset("mnist", "train", synth.root)
    msg = one_line(err)
    assert str(path) in msg and "truncated or corrupt" in msg and "agnostophobia data fetch mnist" in msg


def test_corrupt_member_inside_npz(synth):
    synth.mnist_npz()
    path = synth.root / "mnist" / "mnist.npz"
    data = bytearray(path.read_bytes())
    data[200:260] = b"\xff" * 60  # inside the first member's compressed data
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match="mnist.npz"):
        load_dataset("mnist", "train", synth.root)


@pytest.mark.parametrize("arrays, problem", [
    ({"x_train": np.zeros((5, 28, 27), np.uint8), "y_train": np.zeros(5, np.uint8)}, "shape"),
    ({"x_train": np.zeros((5, 28, 28), np.float32), "y_train": np.zeros(5, np.uint8)}, "uint8"),
    ({"x_train": np.zeros((5, 28, 28), np.uint8), "y_train": np.array([0, 1, 2, 3, 10])}, "out of range 0..9"),
    ({"x_train": np.zeros((5, 28, 28), np.uint8), "y_train": np.zeros(4, np.uint8)}, "4 labels for 5 images"),
    ({"x_train": np.zeros((5, 28, 28), np.uint8), "y_train": np.zeros(5, np.float64)}, "integers"),
    ({"x_train": np.zeros((5, 28, 28), np.uint8)}, "has no array 'y_train'"),
])
def test_malformed_npz_arrays(synth, arrays, problem):
    np.savez(synth.dir("mnist") / "mnist.npz", **arrays)
    with pytest.raises(DataError) as err:
        load_dataset("mnist", "train", synth.root)
    msg = one_line(err)
    assert problem in msg and "mnist.npz" in msg


def test_letters_label_zero_is_out_of_range(synth):
    arrays = synth.letters_npz()
    arrays["y_train"][0] = 0  # EMNIST letters are 1..26
    np.savez(synth.root / "letters" / "letters.npz", **arrays)
    with pytest.raises(DataError, match="out of range 1..26"):
        load_dataset("letters", "train", synth.root)


def test_not_a_zip_npz(synth):
    (synth.dir("notmnist") / "notmnist.npz").write_bytes(b"this is not a zip file at all")
    with pytest.raises(DataError, match="not a readable npz"):
        load_dataset("notmnist", "test", synth.root)


def _cut(keep: slice):
    return lambda path: path.write_bytes(path.read_bytes()[keep])


#: case -> (how the dataset's files are written, the file then broken (under the data folder, in the
#: dataset's own folder), how, the split loaded, what the one line says)
BROKEN_FILES = {
    "idx-truncated": (lambda synth: synth.mnist_idx(gz=False), "mnist/t10k-images-idx3-ubyte", _cut(slice(-100)),
                      "test", "truncated"),
    "idx-gz-truncated": (lambda synth: synth.mnist_idx(gz=True), "mnist/train-labels-idx1-ubyte.gz",
                         _cut(slice(20)), "train", "train-labels-idx1-ubyte.gz"),
    "idx-bad-magic": (lambda synth: synth.mnist_idx(gz=False), "mnist/t10k-labels-idx1-ubyte",
                      lambda path: path.write_bytes(b"\x01\x02\x03\x04" + bytes(20)), "test", "bad magic"),
    "idx-file-missing": (lambda synth: synth.mnist_idx(gz=True), "mnist/t10k-labels-idx1-ubyte.gz", Path.unlink,
                         "test", "t10k-labels-idx1-ubyte"),
    "cifar-tar-truncated": (lambda synth: synth.cifar10_python(as_tar=True), "cifar10/cifar-10-python.tar.gz",
                            _cut(slice(3000)), "train", "cifar-10-python.tar.gz"),
    "svhn-mat-truncated": (lambda synth: synth.svhn_mat(), "svhn/test_32x32.mat", _cut(slice(500)),
                           "test", "test_32x32.mat"),
}


@pytest.mark.parametrize("case", BROKEN_FILES)
def test_a_broken_file_is_one_line_naming_what_is_wrong(synth, case):
    write, file, damage, split, says = BROKEN_FILES[case]
    write(synth)
    damage(synth.root / file)
    with pytest.raises(DataError) as err:
        load_dataset(file.split("/")[0], split, synth.root)
    assert says in one_line(err)


def test_bad_zip(synth):
    (synth.dir("letters") / "gzip.zip").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(DataError, match="gzip.zip"):
        load_dataset("letters", "test", synth.root)


def test_malicious_pickle_is_refused(synth):
    d = synth.dir("cifar10") / "cifar-10-batches-py"
    d.mkdir()

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (d / "test_batch").write_bytes(pickle.dumps({"data": Evil(), "labels": []}))
    with pytest.raises(DataError, match="refusing to load builtins.print"):
        load_dataset("cifar10", "test", synth.root)


def test_svhn_label_out_of_range(synth):
    import scipy.io

    scipy.io.savemat(synth.dir("svhn") / "test_32x32.mat",
                     {"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.array([[1], [11]])})
    with pytest.raises(DataError, match="out of range 1..10"):
        load_dataset("svhn", "test", synth.root)


def test_wrong_image_size_in_folder(synth):
    from PIL import Image

    p = synth.dir("notmnist") / "notMNIST_small" / "A"
    p.mkdir(parents=True)
    Image.fromarray(np.zeros((30, 30), np.uint8)).save(p / "x.png")
    with pytest.raises(DataError, match="expected 28x28"):
        load_dataset("notmnist", "test", synth.root)


def test_unknown_split_and_dataset(synth):
    with pytest.raises(DataError, match="no split 'valid'"):
        load_dataset("mnist", "valid", synth.root)
    with pytest.raises(ValueError, match="unknown dataset 'emnist'"):
        load_dataset("emnist", "train", synth.root)


def test_registry_sources_and_checksums():
    """Every dataset either has downloads or says why not; the md5s are torchvision's."""
    import importlib.util
    from pathlib import Path

    for name in DATASETS.names():
        info = DATASETS.get(name)
        assert info.npz_layout and info.official_layout and info.label_convention
        for res in info.resources:
            assert res.urls and all(u.startswith("http") for u in res.urls)
            assert res.verifiable or "no checksum" in res.checksum_source
    # Read torchvision's source instead of importing it (importing pulls in torch: seconds).
    tv = Path(importlib.util.find_spec("torchvision").origin).parent / "datasets"
    source = {f: (tv / f).read_text() for f in ("mnist.py", "cifar.py", "svhn.py")}
    expected = {"mnist": "mnist.py", "letters": "mnist.py", "cifar10": "cifar.py", "cifar100": "cifar.py",
                "svhn": "svhn.py"}
    for name, fname in expected.items():
        for res in DATASETS.get(name).resources:
            assert res.md5 and f'"{res.md5}"' in source[fname], (name, res.filename)
            assert res.filename in source[fname] or name == "letters"
    for name in ("notmnist", "nhcd", "dhcd"):
        assert not any(r.verifiable for r in DATASETS.get(name).resources)


def test_idx_roundtrip_plain_and_gzip():
    from agnostophobia.data.formats import parse_idx

    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    raw = bytes([0, 0, 8, 3]) + (2).to_bytes(4, "big") + (3).to_bytes(4, "big") + (4).to_bytes(4, "big") + arr.tobytes()
    assert np.array_equal(parse_idx(gzip.compress(raw), "x.gz"), arr)
    assert np.array_equal(parse_idx(raw, "x"), arr)
