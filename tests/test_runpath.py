"""Paths inside a run reached without a link (``_runpath``): every component below the run
folder is opened with ``O_NOFOLLOW``; a link, FIFO, socket or device, or a file with a second
name, is refused in one line naming it; the run folder itself may be a link."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from agnostophobia._runpath import RunTree, UnsafeRunPath, relative_parts


@pytest.fixture
def tree(tmp_path) -> RunTree:
    root = tmp_path / "run"
    (root / "seed0" / "softmax").mkdir(parents=True)
    (root / "seed0" / "softmax" / "outputs.npz").write_bytes(b"outputs")
    (root / "config.yaml").write_text("config")
    return RunTree(root)


def plant_symlink(path: Path, outside: Path):
    os.symlink(outside, path)


def plant_hardlink(path: Path, outside: Path):
    os.link(outside, path)


def plant_fifo(path: Path, outside: Path):
    os.mkfifo(path)


def plant_socket(path: Path, outside: Path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()


PLANTS = {"symlink": plant_symlink, "hardlink": plant_hardlink, "fifo": plant_fifo, "socket": plant_socket}
KINDS = {"symlink": "a symbolic link", "hardlink": "hard-linked", "fifo": "a FIFO", "socket": "a socket"}


@pytest.mark.parametrize("where", ["figures/a.png", "seed0/softmax/val_outputs.npz", "seed1", "report.md"])
@pytest.mark.parametrize("kind", list(PLANTS))
def test_anything_but_the_runs_own_files_and_folders_is_refused_anywhere_under_it(tree, tmp_path, kind, where):
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's")
    path = tree.root / where
    path.parent.mkdir(parents=True, exist_ok=True)
    PLANTS[kind](path, outside)
    with pytest.raises(UnsafeRunPath) as error:
        tree.check_tree()
    message = str(error.value)
    assert message.startswith(f"{path}: is {KINDS[kind]}") and "\n" not in message
    assert outside.read_text() == "the user's"


def test_a_clean_run_is_read_whole_and_its_folder_may_be_a_link(tree, tmp_path):
    os.symlink(tree.root, tmp_path / "alias")
    assert RunTree(tmp_path / "alias").check_tree() == 4  # seed0, softmax, outputs.npz, config.yaml


def test_a_link_on_the_way_is_never_followed_by_open_rename_link_unlink_or_remove(tree, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    os.symlink(outside, tree.root / "figures")
    calls = [lambda: tree.open(("figures", "keep.txt"), os.O_RDONLY),
             lambda: tree.open(("figures", "new.png"), os.O_WRONLY | os.O_CREAT),
             lambda: tree.rename(("config.yaml",), ("figures", "config.yaml")),
             lambda: tree.rename(("figures", "keep.txt"), ("moved.txt",)),
             lambda: tree.link(("config.yaml",), ("figures", "second.yaml")),
             lambda: tree.unlink(("figures", "keep.txt")),
             lambda: tree.remove_tree(("figures", "sub")),
             lambda: tree.lstat(("figures", "keep.txt"))]
    for call in calls:
        with pytest.raises(UnsafeRunPath, match="figures: is a symbolic link"):
            call()
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"] and (outside / "keep.txt").read_text() == "keep"


def test_removing_a_folder_removes_a_link_inside_it_as_a_name(tree, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (tree.root / "old").mkdir()
    os.symlink(outside, tree.root / "old" / "link")
    tree.remove_tree(("old",))
    assert not (tree.root / "old").exists() and (outside / "keep.txt").read_text() == "keep"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tree):
    os.mkfifo(tree.root / "metrics.json")
    with pytest.raises(UnsafeRunPath, match="metrics.json: is a FIFO"):
        tree.read_bytes(("metrics.json",))


@pytest.mark.parametrize("name", ["../outside", "/etc/passwd", "seed0/../../outside"])
def test_a_name_that_leaves_the_run_is_refused(tree, name):
    with pytest.raises(UnsafeRunPath):
        relative_parts(tree.root, tree.root / name if not name.startswith("/") else name)


def test_the_run_object_refuses_a_link_anywhere_under_the_run_when_locked(tree, tmp_path):
    from agnostophobia._runlock import run_lock, run_read_lock
    os.symlink(tmp_path, tree.root / "seed0" / "softmax" / "fit_outputs.npz")
    for lock in (run_lock, run_read_lock):
        with pytest.raises(UnsafeRunPath, match="fit_outputs.npz: is a symbolic link"):
            with lock(tree.root):
                pass
