"""Data fixtures: the real staged data (when $AGNOSTOPHOBIA_DATA is set) and small
synthetic files in every supported on-disk format.

Synthetic files are tiny stand-ins for the *format*, never for the data: tests that
need real images use ``real_data_dir`` and are skipped only when the variable is unset
(CI sets it).
"""
from __future__ import annotations

import gzip
import importlib.util
import io
import os
import pickle
import shutil
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from repo_paths import REPO


def pytest_configure(config):
    """Under pytest-xdist (the Makefile's targets) each worker computes with its share of the cores:
    torch's default, a thread per core in every worker, has the workers' threads wait on each other."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        torch.set_num_threads(max(1, cores // workers))


@pytest.fixture(scope="session", autouse=True)
def _data_cache_in_tmp(tmp_path_factory):
    """Decoded-JPEG caches go to a per-session temp dir, not the user's cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("AGNOSTOPHOBIA_CACHE", str(tmp_path_factory.mktemp("agnostophobia-cache")))
    yield
    mp.undo()


_LOOPBACK = {None, "", "localhost", "127.0.0.1", "::1", "0.0.0.0", "::"}


@pytest.fixture(scope="session", autouse=True)
def _no_internet():
    """Only loopback hosts resolve, so no test downloads anything: ``reproduce`` fetches
    missing data by itself, and a test of a missing-data path must see an unreachable
    network on every machine (the fetch tests serve their files on 127.0.0.1)."""
    import socket

    real = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name not in _LOOPBACK:
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: no network in tests")
        return real(host, *args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(socket, "getaddrinfo", loopback_only)
    yield
    mp.undo()


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    value = os.environ.get("AGNOSTOPHOBIA_DATA")
    if not value:
        pytest.skip("AGNOSTOPHOBIA_DATA is not set (CI sets it to the staged data)")
    path = Path(value)
    assert path.is_dir(), f"AGNOSTOPHOBIA_DATA={value} is not a directory"
    return path


@pytest.fixture(scope="session")
def real_lenet(real_data_dir):
    """The full LeNet++ protocol on the real data, built once per session."""
    from agnostophobia.data import build_protocol

    return build_protocol("lenet++", real_data_dir, seed=0)


# --------------------------------------------------------------- synthetic
def glyphs(rng: np.random.Generator, labels: np.ndarray, size: int = 28, pad: int = 0) -> np.ndarray:
    """White-on-black stand-in glyphs: a class-dependent bright bar on black."""
    n = len(labels)
    x = np.zeros((n, size, size), np.uint8)
    inner = size - 2 * pad
    for i, c in enumerate(labels):
        r = pad + 4 + int(c) % max(1, inner - 10)
        x[i, r:r + 3, pad + 4:pad + inner - 4] = rng.integers(150, 256)
        x[i, pad + 6:pad + inner - 6, pad + inner // 2] = 255
    return x


def idx_bytes(arr: np.ndarray) -> bytes:
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    return bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def png_bytes(img: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="PNG")
    return buf.getvalue()


def jpeg_bytes(img: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def _tar_add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


class Synth:
    """Writers of small synthetic datasets under ``root`` (a data directory)."""

    def __init__(self, root: Path, seed: int = 0):
        self.root = Path(root)
        self.rng = np.random.default_rng(seed)

    def dir(self, name: str) -> Path:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def labels(self, classes: int, per_class: int, offset: int = 0) -> np.ndarray:
        return self.rng.permutation(np.repeat(np.arange(classes), per_class)) + offset

    # ---- prepared npz layouts
    def mnist_npz(self, per_class=(30, 10)):
        ytr, yte = self.labels(10, per_class[0]), self.labels(10, per_class[1])
        arrays = dict(x_train=glyphs(self.rng, ytr), y_train=ytr.astype(np.uint8),
                      x_test=glyphs(self.rng, yte), y_test=yte.astype(np.uint8))
        np.savez_compressed(self.dir("mnist") / "mnist.npz", **arrays)
        return arrays

    def letters_npz(self, per_class=(10, 4)):
        ytr, yte = self.labels(26, per_class[0], 1), self.labels(26, per_class[1], 1)
        arrays = dict(x_train=glyphs(self.rng, ytr), y_train=ytr.astype(np.uint8),
                      x_test=glyphs(self.rng, yte), y_test=yte.astype(np.uint8))
        np.savez_compressed(self.dir("letters") / "letters.npz", **arrays)
        return arrays

    def notmnist_npz(self, per_class=10):
        y = self.labels(10, per_class)
        arrays = dict(x_test=glyphs(self.rng, y), y_test=y.astype(np.uint8))
        np.savez_compressed(self.dir("notmnist") / "notmnist.npz", **arrays)
        return arrays

    def nhcd_npz(self, per_class=3):
        ys, groups = [], []
        for g, (k, first) in enumerate(((36, 1), (12, 1), (10, 0))):
            ys.append(np.repeat(np.arange(k) + first, per_class))
            groups.append(np.full(k * per_class, g))
        y, group = np.concatenate(ys), np.concatenate(groups)
        arrays = dict(x=glyphs(self.rng, y), y=y.astype(np.int16), group=group.astype(np.int8))
        np.savez_compressed(self.dir("nhcd") / "nhcd.npz", **arrays)
        return arrays

    def dhcd_npz(self, per_class=3):
        y = self.labels(46, per_class)
        arrays = dict(x_test=glyphs(self.rng, y, 32, pad=2), y_test=y.astype(np.uint8))
        np.savez_compressed(self.dir("devanagari") / "devanagari.npz", **arrays)
        return arrays

    def rgb(self, n: int) -> np.ndarray:
        return self.rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)

    def cifar10_npz(self, per_class=(20, 10), jpeg_train: bool = True):
        ytr, yte = self.labels(10, per_class[0]), self.labels(10, per_class[1])
        xtr, xte = self.rgb(len(ytr)), self.rgb(len(yte))
        d = self.dir("cifar10")
        np.savez_compressed(d / "cifar10.npz", x_test=xte, y_test=yte.astype(np.uint8))
        if jpeg_train:
            blobs = [np.frombuffer(jpeg_bytes(img), np.uint8) for img in xtr]
            off = np.concatenate([[0], np.cumsum([len(b) for b in blobs])]).astype(np.int64)
            np.savez(d / "cifar10_train_jpeg.npz", train_jpeg=np.concatenate(blobs), train_jpeg_offsets=off,
                     y_train=ytr.astype(np.uint8))
        return dict(x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)

    # ---- official formats
    def mnist_idx(self, gz: bool = True, per_class=(30, 10)):
        d = self.dir("mnist")
        out = {}
        for split, stem, k in (("train", "train", per_class[0]), ("test", "t10k", per_class[1])):
            y = self.labels(10, k)
            x = glyphs(self.rng, y)
            for kind, arr in (("images-idx3", x), ("labels-idx1", y)):
                data = idx_bytes(arr)
                name = f"{stem}-{kind}-ubyte"
                if gz:
                    (d / (name + ".gz")).write_bytes(gzip.compress(data))
                else:
                    (d / name).write_bytes(data)
            out[split] = (x, y)
        return out

    def emnist_zip(self, per_class=(4, 2)):
        """The official EMNIST layout: gzip/emnist-letters-*.gz, images stored transposed."""
        out = {}
        with zipfile.ZipFile(self.dir("letters") / "gzip.zip", "w") as zf:
            for split, k in (("train", per_class[0]), ("test", per_class[1])):
                y = self.labels(26, k, 1)
                x = glyphs(self.rng, y)
                x[:, 2, 20:26] = 200  # an asymmetric mark: catches a missing transpose
                zf.writestr(f"gzip/emnist-letters-{split}-images-idx3-ubyte.gz",
                            gzip.compress(idx_bytes(x.transpose(0, 2, 1))))
                zf.writestr(f"gzip/emnist-letters-{split}-labels-idx1-ubyte.gz", gzip.compress(idx_bytes(y)))
                zf.writestr(f"gzip/emnist-digits-{split}-labels-idx1-ubyte.gz", b"ignored")
                out[split] = (x, y)
        return out

    def notmnist_archive(self, per_class=3, as_tar: bool = True, broken: int = 1):
        y = np.repeat(np.arange(10), per_class)
        x = glyphs(self.rng, y)
        files = [(f"notMNIST_small/{'ABCDEFGHIJ'[c]}/f{i:03d}.png", png_bytes(img)) for i, (img, c) in enumerate(zip(x, y))]
        files += [(f"notMNIST_small/A/broken{j}.png", b"") for j in range(broken)]
        d = self.dir("notmnist")
        if as_tar:
            with tarfile.open(d / "notMNIST_small.tar.gz", "w:gz") as tf:
                for name, data in files:
                    _tar_add(tf, name, data)
        else:
            for name, data in files:
                (d / name).parent.mkdir(parents=True, exist_ok=True)
                (d / name).write_bytes(data)
        return x, y

    def nhcd_folder(self, per_class=2, as_zip: bool = False):
        """Official NHCD: black glyph on white, {consonants,vowels,numerals}/<n>/<file>."""
        files, xs, ys = [], [], []
        for group, k, first, offset in (("consonants", 36, 1, 0), ("vowels", 12, 1, 36), ("numerals", 10, 0, 48)):
            for c in range(k):
                for j in range(per_class):
                    img = glyphs(self.rng, np.array([c]))[0]
                    files.append((f"nhcd/{group}/{c + first}/{j:03d}_01.png", png_bytes(255 - img)))
                    xs.append(img)
                    ys.append(offset + c)
        d = self.dir("nhcd")
        if as_zip:
            with zipfile.ZipFile(d / "devanagari-character-dataset.zip", "w") as zf:
                for name, data in files:
                    zf.writestr(name, data)
        else:
            for name, data in files:
                (d / name).parent.mkdir(parents=True, exist_ok=True)
                (d / name).write_bytes(data)
        return np.stack(xs), np.array(ys)

    def dhcd_zip(self, per_class=2):
        names = [f"character_{i}_c{i}" for i in range(1, 37)] + [f"digit_{d}" for d in range(10)]
        out = {}
        with zipfile.ZipFile(self.dir("devanagari") / "DevanagariHandwrittenCharacterDataset.zip", "w") as zf:
            for split in ("Train", "Test"):
                y = np.repeat(np.arange(46), per_class)
                x = glyphs(self.rng, y, 32, pad=2)
                for i, (img, c) in enumerate(zip(x, y)):
                    zf.writestr(f"DevanagariHandwrittenCharacterDataset/{split}/{names[c]}/{i}.png", png_bytes(img))
                out[split.lower()] = (x, y)
        return out

    def cifar10_python(self, per_batch: int = 20, as_tar: bool = True):
        batches, out = {}, {"train": ([], []), "test": ([], [])}
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            y = self.rng.integers(0, 10, per_batch)
            y[:10] = np.arange(10)  # every class in every batch
            x = self.rgb(per_batch)
            data = x.transpose(0, 3, 1, 2).reshape(per_batch, 3072)  # R, G, B planes, row-major
            batches[name] = pickle.dumps({b"batch_label": name.encode(), b"labels": y.tolist(), b"data": data}, protocol=2)
            split = "test" if name == "test_batch" else "train"
            out[split][0].append(x)
            out[split][1].append(y)
        batches["batches.meta"] = pickle.dumps({b"label_names": [b"airplane"] * 10}, protocol=2)
        self._cifar_write("cifar10", "cifar-10-batches-py", "cifar-10-python.tar.gz", batches, as_tar)
        return {k: (np.concatenate(v[0]), np.concatenate(v[1])) for k, v in out.items()}

    def cifar100_python(self, per_fine=(3, 2), as_tar: bool = True):
        from agnostophobia.data import FINE_TO_COARSE

        batches, out = {}, {}
        for split, k in (("train", per_fine[0]), ("test", per_fine[1])):
            fine = self.labels(100, k)
            x = self.rgb(len(fine))
            batches[split] = pickle.dumps({"data": x.transpose(0, 3, 1, 2).reshape(len(fine), 3072),
                                           "fine_labels": fine.tolist(),
                                           "coarse_labels": FINE_TO_COARSE[fine].tolist()}, protocol=4)
            out[split] = (x, fine)
        batches["meta"] = pickle.dumps({"fine_label_names": [], "coarse_label_names": []})
        self._cifar_write("cifar100", "cifar-100-python", "cifar-100-python.tar.gz", batches, as_tar)
        return out

    def _cifar_write(self, dirname, folder, tarname, batches, as_tar):
        d = self.dir(dirname)
        if as_tar:
            with tarfile.open(d / tarname, "w:gz") as tf:
                for name, data in batches.items():
                    _tar_add(tf, f"{folder}/{name}", data)
        else:
            (d / folder).mkdir(exist_ok=True)
            for name, data in batches.items():
                (d / folder / name).write_bytes(data)

    def svhn_mat(self, n: int = 40, split: str = "test"):
        import scipy.io

        y = (np.arange(n) % 10).astype(np.uint8)
        x = self.rgb(n)
        scipy.io.savemat(self.dir("svhn") / f"{split}_32x32.mat",
                         {"X": x.transpose(1, 2, 3, 0), "y": np.where(y == 0, 10, y).reshape(-1, 1)})
        return x, y

    def lenet_set(self):
        """Everything the LeNet++ protocol reads, in the prepared npz layout."""
        return dict(mnist=self.mnist_npz(), letters=self.letters_npz(), nhcd=self.nhcd_npz(),
                    notmnist=self.notmnist_npz(), cifar10=self.cifar10_npz())


@pytest.fixture
def synth(tmp_path) -> Synth:
    """A writer of synthetic dataset files into an empty data directory ``synth.root``."""
    root = tmp_path / "data"
    root.mkdir()
    return Synth(root)


# --------------------------------------------------------------- whole commands
@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory):
    from runs import write_config

    return write_config(tmp_path_factory.mktemp("config") / "tiny.yaml")


@pytest.fixture(scope="session")
def tiny_run(real_data_dir, tiny_config, tmp_path_factory):
    """An uninterrupted tiny reproduction (tests/_support/runs.py) in its own process, trained once."""
    from runs import reproduce_args, run_cli

    out = tmp_path_factory.mktemp("tiny") / "run"
    result = run_cli(reproduce_args(tiny_config, out, real_data_dir))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def calibrated(tiny_run, tmp_path_factory):
    """A copy of the session's tiny run calibrated at FPR 0.1 (32 validation negatives: 3 false positives
    allowed), made once per test run. Shared by every module that reads a calibrated run: a test that
    writes into a run copies this one into its own ``tmp_path`` first."""
    from agnostophobia.cli import main

    copy = tmp_path_factory.mktemp("calibrated") / "run"
    shutil.copytree(tiny_run, copy)
    assert main(["calibrate", str(copy), "--fpr", "0.1"]) == 0
    return copy


EXAMPLE = REPO / "examples" / "make_folder_protocol.py"


def make_example(out: Path, data_dir: Path, fmt: str, per_class: int = 6) -> Path:
    """``python examples/make_folder_protocol.py --out OUT --per-class N --format FMT`` (in this process)."""
    spec = importlib.util.spec_from_file_location("make_folder_protocol", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--out", str(out), "--per-class", str(per_class), "--format", fmt, "--data-dir", str(data_dir)]) == 0
    return out / "experiment.yaml"


def pytest_collection_modifyitems(config, items):
    """``@pytest.mark.cuda`` tests need a CUDA device: skipped without one (``pytest -m cuda`` runs them
    alone, as ``benchmarks/gpu_check.sh`` does on a GPU machine)."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
