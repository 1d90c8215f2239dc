"""Bounded reads (issue 31, item 3): a FIFO, socket or device, or a link to one, given as any
input is refused in one line before it is read (it would block, or never end), and an array an
input declares beyond 4 GiB or half the available memory is refused from its header."""
from __future__ import annotations

import os
import signal
import socket
import struct
import zipfile

import numpy as np
import pytest
from PIL import Image
from runs import run_main, snapshot

from agnostophobia import _reading
from agnostophobia.data.inputs import open_image_input, read_images
from agnostophobia.errors import DataError


@pytest.fixture(autouse=True)
def never_blocks():
    """A read that blocks on a FIFO fails the test after 60 s instead of hanging it."""
    def blocked(*_):
        raise TimeoutError("blocked reading an input")
    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def fifo(path):
    os.mkfifo(path)
    return path


def unix_socket(path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return path


def link(path, target):
    path.symlink_to(target)
    return path


def png(path, size=(28, 28)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.zeros(size[::-1], np.uint8)).save(path)
    return path


SPECIAL = {  # (how a special file is made at a path, what the line says it is)
    "fifo": (fifo, "FIFO"),
    "socket": (unix_socket, "socket"),
    "link-to-fifo": (lambda p: link(p, fifo(p.parent / "real-fifo")), "FIFO"),
    "link-to-device": (lambda p: link(p, "/dev/zero"), "character device"),
}


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("where", ["image", "in-folder", "npz"])
def test_predict_refuses_a_special_file_in_one_line(calibrated, tmp_path, capsys, kind, where):
    make, says = SPECIAL[kind]
    if where == "in-folder":
        png(tmp_path / "images" / "a.png")
        bad = make(tmp_path / "images" / "b.png")
        arg = tmp_path / "images"
    else:
        bad = arg = make(tmp_path / ("x.png" if where == "image" else "x.npz"))
    before = snapshot(calibrated)
    code, _, err = run_main(["predict", calibrated, arg, "--out", tmp_path / "rows.csv"], capsys)
    assert code == 1 and len(err) == 1 and str(bad) in err[0] and says in err[0], err
    assert not (tmp_path / "rows.csv").exists() and snapshot(calibrated) == before


@pytest.mark.parametrize("kind", ["fifo", "link-to-device"])
def test_evaluate_unknowns_refuses_a_special_file(calibrated, tmp_path, capsys, kind):
    make, says = SPECIAL[kind]
    bad = make(tmp_path / "set.npz")
    before = snapshot(calibrated)
    code, _, err = run_main(["evaluate", calibrated, "--unknowns", bad], capsys)
    assert code == 1 and len(err) == 1 and str(bad) in err[0] and says in err[0], err
    assert snapshot(calibrated) == before


@pytest.mark.parametrize("kind", ["fifo", "link-to-fifo", "link-to-device"])
def test_a_config_that_is_a_special_file_is_refused(tmp_path, capsys, kind):
    make, says = SPECIAL[kind]
    bad = make(tmp_path / "exp.yaml")
    code, _, err = run_main(["train", bad, "--out", tmp_path / "run", "--no-progress"], capsys)
    assert code == 1 and len(err) == 1 and "exp.yaml" in err[0] and says in err[0], err
    assert not (tmp_path / "run").exists()


def folder_protocol(tmp_path):
    root = tmp_path / "shapes"
    for split in ("train", "val", "test"):
        for cls in ("a", "b"):
            for i in range(2):
                png(root / split / cls / f"{i}.png")
    return root


@pytest.mark.parametrize("kind", ["fifo", "link-to-fifo"])
def test_a_special_file_in_a_protocol_tree_is_a_problem_naming_it(tmp_path, capsys, kind):
    from agnostophobia.data.file_protocols import check_file_protocol

    root = folder_protocol(tmp_path)
    bad = SPECIAL[kind][0](root / "train" / "a" / "2.png")
    problems = check_file_protocol({"type": "folders", "root": str(root), "known": ["a", "b"], "image_size": 28,
                                    "channels": 1})
    assert any(str(bad) in p and "FIFO" in p for p in problems), problems


def test_a_special_file_as_a_csv_protocols_list_is_a_problem_naming_it(tmp_path):
    from agnostophobia.data.file_protocols import check_file_protocol

    root = folder_protocol(tmp_path)
    lists = {split: tmp_path / f"{split}.csv" for split in ("train", "val", "test")}
    for split, path in lists.items():
        path.write_text("".join(f"{split}/{c}/{i}.png,{k}\n" for k, c in enumerate("ab") for i in range(2))
                        + ("".join(f"{split}/b/{i}.png,-1\n" for i in range(2)) if split == "test" else ""))
    lists["val"].unlink()
    fifo(lists["val"])
    problems = check_file_protocol({"type": "csv", "root": str(root), "image_size": 28, "channels": 1,
                                    **{s: str(p) for s, p in lists.items()}})
    assert any(str(lists["val"]) in p and "FIFO" in p for p in problems), problems


# ------------------------------------------------------------------ declared sizes
def npz_declaring(path, shape, dtype="<u1"):
    """An .npz whose member ``x`` declares ``shape`` in its header but holds a few bytes."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    member = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 16
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x.npy", member)
    return path


def test_an_npz_declaring_a_huge_array_is_refused_from_its_header(tmp_path, monkeypatch):
    path = npz_declaring(tmp_path / "huge.npz", (1 << 20, 1 << 13, 3))  # 24 GiB
    with pytest.raises(DataError, match=r"huge.npz: array 'x': declares 24.0 GiB"):
        read_images(str(path))


def test_an_npz_over_half_the_available_memory_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(_reading, "available_memory", lambda: 2 << 20)  # 2 MiB free: 1 MiB per input
    path = tmp_path / "set.npz"
    np.savez(path, x=np.zeros((2000, 28, 28), np.uint8))  # 1.5 MiB
    with pytest.raises(DataError, match="declares"):
        read_images(str(path))
    np.savez(path, x=np.zeros((1000, 28, 28), np.uint8))  # 0.75 MiB: read
    assert read_images(str(path)).images.shape == (1000, 28, 28)


@pytest.mark.parametrize("folder", [False, True])
def test_an_image_whose_header_declares_too_many_pixels_is_refused_before_decoding(tmp_path, monkeypatch, folder):
    monkeypatch.setattr(_reading, "MAX_ARRAY_BYTES", 100 * 100)  # grey: one byte a pixel
    big = png(tmp_path / "images" / "big.png", (200, 100))
    png(tmp_path / "images" / "small.png", (100, 100))
    with pytest.raises(DataError, match=r"big.png: 200x100 image: declares"):
        open_image_input(str(tmp_path / "images" if folder else big))
    with pytest.raises(DataError, match=r"big.png: 200x100 image: declares"):
        read_images(str(big))


def test_a_regular_file_and_links_to_regular_files_still_read(tmp_path):
    real = png(tmp_path / "elsewhere" / "a.png")
    (tmp_path / "images").mkdir()
    link(tmp_path / "images" / "linked.png", real)
    assert [str(p) for p in open_image_input(str(tmp_path / "images")).files] == [str(tmp_path / "images/linked.png")]
    assert len(read_images(str(tmp_path / "images")).images) == 1
