"""``atomic_write``: files get the permissions a plain ``open()`` gives, and an error names
the file the user asked for, never the temporary file written in its place."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from runs import unwritable_folder

from agnostophobia import _atomic
from agnostophobia._atomic import TMP_SUFFIX, atomic_write, current_umask


@pytest.fixture
def umask():
    """Set the process's umask for one test; the old one comes back afterwards."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def write_text(text):
    return lambda tmp: Path(tmp).write_text(text)


def leftovers(folder: Path):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(TMP_SUFFIX))


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664), (0o027, 0o640)],
                         ids=["022", "077", "002", "027"])
def test_a_new_file_gets_the_mode_open_gives_under_the_umask(umask, tmp_path, mask, expected):
    umask(mask)
    atomic_write(tmp_path / "written.json", write_text("{}"))
    with open(tmp_path / "plain.json", "w") as plain:
        plain.write("{}")
    assert mode(tmp_path / "written.json") == mode(tmp_path / "plain.json") == expected


def test_an_existing_file_keeps_its_mode_as_with_open(umask, tmp_path):
    umask(0o022)
    target = tmp_path / "metrics.json"
    target.write_text("old")
    target.chmod(0o640)
    atomic_write(target, write_text("new"))
    assert target.read_text() == "new" and mode(target) == 0o640


def test_the_umask_is_read_without_proc_too(umask, monkeypatch, tmp_path):
    umask(0o027)
    assert current_umask() == 0o027
    monkeypatch.setattr(_atomic, "PROC_STATUS", str(tmp_path / "no-proc"))  # not Linux: set and restore
    assert current_umask() == 0o027
    assert current_umask() == 0o027  # restored by the first call


def test_an_os_error_while_writing_names_the_target_not_the_temporary_file(tmp_path):
    target = tmp_path / "outputs.npz"

    def disk_full(tmp):
        with open(tmp, "wb"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as a write() on a full disk

    with pytest.raises(OSError) as caught:
        atomic_write(target, disk_full)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert str(target) in str(caught.value) and TMP_SUFFIX not in str(caught.value)
    assert leftovers(tmp_path) == [] and not target.exists()


def test_a_failed_rename_names_the_target(tmp_path, monkeypatch):
    """The rename's error names the file asked for, never the temporary (a rename across devices
    fails with EXDEV; a folder in the target's place is refused before anything is written)."""
    import agnostophobia._atomic as atomic_module

    target = tmp_path / "report.md"

    def cross_device(source, destination):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), source, destination)

    monkeypatch.setattr(atomic_module.os, "replace", cross_device)
    with pytest.raises(OSError) as caught:
        atomic_write(target, write_text("# report"))
    assert str(caught.value) == f"[Errno {errno.EXDEV}] {os.strerror(errno.EXDEV)}: '{target}'"
    assert leftovers(tmp_path) == []
    monkeypatch.undo()
    target.mkdir()
    with pytest.raises(Exception, match=f"{target}: is a folder, not a regular file"):
        atomic_write(target, write_text("# report"))
    assert leftovers(tmp_path) == [] and target.is_dir()


def test_an_unwritable_folder_is_named_with_the_target_file(tmp_path):
    target = unwritable_folder(tmp_path) / "predictions.csv"
    with pytest.raises(PermissionError) as caught:
        atomic_write(target, write_text("a,b\n"))
    assert str(caught.value) == f"[Errno {errno.EACCES}] {os.strerror(errno.EACCES)}: '{target}'"
