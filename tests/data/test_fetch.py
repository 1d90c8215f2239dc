"""``fetch`` against an HTTP server on 127.0.0.1: verified, atomic, nothing half-written."""
from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import os
import shlex
import stat
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import Synth
from agnostophobia.cli import main
from agnostophobia.data import DATASETS, Downloader, Resource, build_protocol, download, fetch_dataset, load_dataset
from agnostophobia.data.fetch import FetchedFile, LoginRequired, fetch_missing, read_sums, write_fetch_record
from agnostophobia.experiments.report import write_report
from agnostophobia.errors import DataError
from repo_paths import REPO
from runs import one_error_line


class Server:
    """Serves ``files`` by name; names in ``dying`` announce twice their length and hang up halfway;
    ``answers`` maps a name to (status, Content-Type) for a login wall or a web page."""

    def __init__(self):
        self.files, self.dying, self.requests, self.answers = {}, set(), [], {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                name = self.path.lstrip("/")
                server.requests.append(name)
                data = server.files.get(name)
                if name in server.answers:
                    status, content_type = server.answers[name]
                    page = b"<html><body>Sign in to continue</body></html>"
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                if data is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                if name in server.dying:
                    self.send_header("Content-Length", str(2 * len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".part") or p.name.startswith("."))


def quiet(msg):
    pass


def res_for(data: bytes, name="blob.bin", **kw) -> Resource:
    return Resource(name, ("http://example.invalid/" + name,), md5=hashlib.md5(data).hexdigest(), **kw)


def test_download_success_records_sha256(server, tmp_path):
    data = np.random.default_rng(0).bytes(300_000)
    server.files["blob.bin"] = data
    path = download(res_for(data), tmp_path, Downloader(mirror=server.url, log=quiet))
    assert path.read_bytes() == data
    assert read_sums(tmp_path) == {"blob.bin": hashlib.sha256(data).hexdigest()}
    assert leftovers(tmp_path) == []
    download(res_for(data), tmp_path, Downloader(mirror=server.url, log=quiet))  # present and valid: no request
    assert server.requests == ["blob.bin"]


def test_a_killed_downloads_temporary_is_removed_by_the_next_and_a_users_file_is_not(server, tmp_path):
    """A download killed mid-file (SIGKILL: no ``finally``) leaves its temporary; the next fetch of
    that file removes it, as every atomic write's clean-up does, and leaves the user's own files."""
    import subprocess
    import sys

    from agnostophobia._atomic import TMP_SUFFIX, temporary_prefix

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    stale = tmp_path / (temporary_prefix("blob.bin").replace(str(os.getpid()), dead.stdout.strip())
                        + "x1" + TMP_SUFFIX)
    stale.write_bytes(b"half a file")
    mine = tmp_path / ".blob.bin.mine.part"
    mine.write_bytes(b"the user's")
    data = b"y" * 1000
    server.files["blob.bin"] = data
    download(res_for(data), tmp_path, Downloader(mirror=server.url, log=quiet))
    assert not stale.exists() and mine.read_bytes() == b"the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".blob.bin.mine.part", "blob.bin", "SHA256SUMS"])


def test_wrong_checksum_leaves_no_file(server, tmp_path):
    server.files["blob.bin"] = b"the wrong bytes" * 100
    with pytest.raises(DataError, match="md5 .* does not match the published"):
        download(res_for(b"the right bytes"), tmp_path, Downloader(mirror=server.url, log=quiet))
    assert list(tmp_path.iterdir()) == []


def test_server_dying_mid_file_leaves_no_partial_file(server, tmp_path):
    data = b"x" * 100_000
    server.files["blob.bin"] = data
    server.dying.add("blob.bin")
    with pytest.raises(DataError, match="incomplete download: got 50000 of 200000 bytes"):
        download(res_for(data), tmp_path, Downloader(mirror=server.url, log=quiet))
    assert list(tmp_path.iterdir()) == []


def test_corrupt_existing_file_is_replaced(server, tmp_path):
    data = b"good" * 1000
    server.files["blob.bin"] = data
    (tmp_path / "blob.bin").write_bytes(b"half a fi")
    download(res_for(data), tmp_path, Downloader(mirror=server.url, log=quiet))
    assert (tmp_path / "blob.bin").read_bytes() == data


def test_http_error_then_fallback_url(server, tmp_path):
    data = b"payload" * 10
    server.files["ok/blob.bin"] = data
    res = Resource("blob.bin", (server.url + "/gone/blob.bin", server.url + "/ok/blob.bin"),
                   md5=hashlib.md5(data).hexdigest())
    assert download(res, tmp_path, Downloader(log=quiet)).read_bytes() == data
    assert server.requests == ["gone/blob.bin", "ok/blob.bin"]
    with pytest.raises(DataError, match="404"):
        download(Resource("nope.bin", (server.url + "/nope.bin",), md5="0" * 32), tmp_path, Downloader(log=quiet))
    assert leftovers(tmp_path) == []


def test_unverified_refused_unless_allowed(server, tmp_path, monkeypatch):
    data = b"no checksum published"
    server.files["blob.bin"] = data
    res = Resource("blob.bin", ("http://example.invalid/blob.bin",), size=999, checksum_source="no checksum published")
    with pytest.raises(DataError, match="--allow-unverified"):
        download(res, tmp_path, Downloader(mirror=server.url, log=quiet))
    assert server.requests == [] and list(tmp_path.iterdir()) == []
    messages = []
    monkeypatch.setenv("AGNOSTOPHOBIA_MIRROR", server.url)  # the environment variable works too
    download(res, tmp_path, Downloader(allow_unverified=True, log=messages.append))
    sha = hashlib.sha256(data).hexdigest()
    assert any("UNVERIFIED" in m and sha in m for m in messages)
    assert any("documented size is 999" in m for m in messages)
    assert read_sums(tmp_path)["blob.bin"] == sha
    download(res, tmp_path, Downloader(allow_unverified=True, log=quiet))  # matches the recorded sum: kept
    assert server.requests == ["blob.bin"]


def _mnist_files(synth):
    """Official-format MNIST files (synthetic content) as the server would serve them."""
    synth.mnist_idx(gz=True)
    d = synth.root / "mnist"
    files = {p.name: p.read_bytes() for p in d.iterdir()}
    for p in d.iterdir():
        p.unlink()
    return files


def test_fetch_dataset_end_to_end_then_loadable(server, synth, tmp_path, monkeypatch):
    files = _mnist_files(synth)
    server.files.update(files)
    info = DATASETS.get("mnist")
    patched = dataclasses.replace(info, resources=tuple(
        dataclasses.replace(r, md5=hashlib.md5(files[r.filename]).hexdigest()) for r in info.resources))
    monkeypatch.setitem(DATASETS._items, "mnist", patched)
    root = tmp_path / "fresh"
    log = []
    paths = fetch_dataset("mnist", data_dir=root, downloader=Downloader(mirror=server.url, log=log.append))
    assert sorted(p.name for p in paths) == sorted(files)
    assert any("mnist train: 300 images" in m for m in log)
    assert len(load_dataset("mnist", "test", root)) == 100
    assert leftovers(root / "mnist") == []


def test_fetch_dataset_with_real_checksums_rejects_other_bytes(server, synth, tmp_path):
    server.files.update(_mnist_files(synth))  # not the real MNIST bytes
    with pytest.raises(DataError, match="does not match"):
        fetch_dataset("mnist", data_dir=tmp_path, downloader=Downloader(mirror=server.url, log=quiet))
    assert not (tmp_path / "mnist").exists()


def test_fetch_skips_when_prepared_npz_present(synth, server):
    synth.mnist_npz()
    assert fetch_dataset("mnist", data_dir=synth.root, downloader=Downloader(mirror=server.url, log=quiet)) == []
    assert server.requests == []


def test_fetch_unverified_dataset_refused_before_download(server, tmp_path):
    with pytest.raises(DataError, match="notMNIST_small.tar.gz: no published checksum"):
        fetch_dataset("notmnist", data_dir=tmp_path, downloader=Downloader(mirror=server.url, log=quiet))
    assert server.requests == []


def test_fetch_substitute_has_no_download(tmp_path):
    with pytest.raises(DataError, match="no official download"):
        fetch_dataset("nist_sd19_vowels", data_dir=tmp_path, downloader=Downloader(log=quiet))


def test_cli_fetch_unverified_notmnist(server, synth, tmp_path, capsys):
    synth.notmnist_archive(as_tar=True, broken=1)
    tar = synth.root / "notmnist" / "notMNIST_small.tar.gz"
    server.files["notMNIST_small.tar.gz"] = tar.read_bytes()
    root = tmp_path / "user-data"
    rc = main(["data", "fetch", "notmnist", "--data-dir", str(root), "--allow-unverified", "--mirror", server.url])
    err = capsys.readouterr().err
    assert rc == 0
    assert hashlib.sha256(tar.read_bytes()).hexdigest() in err
    assert "notmnist test: 30 images" in err
    assert main(["data", "check", "notmnist", "--data-dir", str(root)]) == 0


def test_cli_fetch_gives_its_files_the_mode_of_the_umask(server, synth, tmp_path, capsys):
    """A shared data folder stays readable by the group: the download and SHA256SUMS get the
    mode a plain open() gives (0o640 under umask 0o027), not mkstemp's 0o600."""
    synth.notmnist_archive(as_tar=True, broken=0)
    server.files["notMNIST_small.tar.gz"] = (synth.root / "notmnist" / "notMNIST_small.tar.gz").read_bytes()
    root = tmp_path / "group-data"
    old = os.umask(0o027)
    try:
        rc = main(["data", "fetch", "notmnist", "--data-dir", str(root), "--allow-unverified", "--mirror", server.url])
    finally:
        os.umask(old)
    assert rc == 0, capsys.readouterr().err
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == ["notmnist/SHA256SUMS", "notmnist/notMNIST_small.tar.gz"]
    assert {stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if p.is_file()} == {0o640}


def test_cli_fetch_refusal_is_one_line(tmp_path, capsys):
    rc = main(["data", "fetch", "dhcd", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "--allow-unverified" in err[0]


def test_failed_fetch_leaves_no_new_folders(server, tmp_path):
    root = tmp_path / "new" / "data"
    with pytest.raises(DataError, match="404"):
        download(res_for(b"x"), root / "mnist", Downloader(mirror=server.url, log=quiet))
    assert list(tmp_path.iterdir()) == []


def test_a_temporary_download_that_cannot_be_made_is_named_by_its_target(server, tmp_path, monkeypatch):
    """The OS names the ``.part`` file it could not create; the user is told the file asked for."""
    def refused(dir, prefix, suffix):
        raise PermissionError(13, "Permission denied", f"{dir}/{prefix}k2j4x{suffix}")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(DataError) as caught:
        download(res_for(b"x"), tmp_path, Downloader(mirror=server.url, log=quiet))
    assert str(caught.value) == f"{tmp_path}: not writable ([Errno 13] Permission denied: '{tmp_path / 'blob.bin'}')"


def test_read_only_data_dir_is_refused_even_for_root(server, tmp_path):
    ro = tmp_path / "shared"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(DataError, match="read-only"):
            download(res_for(b"x"), ro / "cifar100", Downloader(mirror=server.url, log=quiet))
        assert list(ro.iterdir()) == [] and server.requests == []
    finally:
        ro.chmod(0o755)


# ------------------------------------------------- a first run fetches its own data
def _publish(monkeypatch, name, files):
    """Give a registered dataset the checksums of the synthetic files the server serves."""
    info = DATASETS.get(name)
    monkeypatch.setitem(DATASETS._items, name, dataclasses.replace(info, resources=tuple(
        dataclasses.replace(r, md5=hashlib.md5(files[r.filename]).hexdigest()) for r in info.resources)))


@pytest.fixture
def lenet_server(server, tmp_path, monkeypatch):
    """Official-format files of every dataset of the lenet++ protocol (synthetic content) on the
    loopback server, which replaces every official URL. mnist, letters and cifar10 are verified
    against the checksums of these files; notMNIST and NHCD have none, as in the registry."""
    made = Synth(tmp_path / "made")
    made.mnist_idx(gz=True)
    made.emnist_zip()
    made.nhcd_folder(as_zip=True)
    made.notmnist_archive(as_tar=True, broken=0)
    made.cifar10_python(as_tar=True)
    server.files.update({p.name: p.read_bytes() for p in made.root.rglob("*") if p.is_file()})
    for name in ("mnist", "letters", "cifar10"):
        _publish(monkeypatch, name, server.files)
    monkeypatch.setenv("AGNOSTOPHOBIA_MIRROR", server.url)
    return server


def _reproduce(tmp_path, *flags):
    return main(["reproduce", "lenet++", "--budget", "smoke", "--data-dir", str(tmp_path / "data"),
                 "--out", str(tmp_path / "run"), "--no-progress", "--no-plots", *flags])


class TrainingStarted(Exception):
    pass


def test_reproduce_fetches_missing_data_then_trains(lenet_server, tmp_path, monkeypatch):
    def stop(experiment, out, device, log=print, protocol=None):  # the run got as far as training: stop there, it takes seconds
        raise TrainingStarted(out)

    monkeypatch.setattr("agnostophobia.experiments.reproduce.train_and_store", stop)
    with pytest.raises(TrainingStarted):
        _reproduce(tmp_path, "--allow-unverified")
    data, run = tmp_path / "data", tmp_path / "run"
    for name, payload in lenet_server.files.items():
        assert next(data.rglob(name)).read_bytes() == payload
    assert leftovers(data / "mnist") == [] and (run / "config.yaml").exists()
    assert build_protocol("lenet++", data).sizes()["test_unknowns/notmnist"] == {"known": 0, "unknown": 30}
    record = json.loads((run / "data_fetched.json").read_text())["files"]
    by_file = {r["file"]: r for r in record}
    assert set(by_file) == set(lenet_server.files)
    for name, row in by_file.items():
        assert row["sha256"] == hashlib.sha256(lenet_server.files[name]).hexdigest()
        assert row["url"] == f"{lenet_server.url}/{name}"
    assert {r["dataset"] for r in record if not r["verified"]} == {"notmnist", "nhcd"}
    assert {r["dataset"] for r in record if r["verified"]} == {"mnist", "letters", "cifar10"}


def quick_start_commands():
    """The commands of the README's Quick start, as a user types them."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def test_the_quick_start_main_job_fetches_its_data_then_trains_as_written(lenet_server, tmp_path, monkeypatch):
    """A fresh machine: no AGNOSTOPHOBIA_DATA, an empty user cache, the internet (here the
    loopback server behind every official URL). The command runs as written; only the
    budget is the smoke one, for the small synthetic sets, and training stops once it starts."""
    commands = quick_start_commands()
    assert commands[0] == ["make", "test"]
    program, *args = commands[1]
    assert program == ".venv/bin/agnostophobia" and args[:2] == ["reproduce", "lenet++"]
    monkeypatch.delenv("AGNOSTOPHOBIA_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the user's default data directory
    monkeypatch.chdir(tmp_path)

    def stop(experiment, out, device, log=print, protocol=None):
        raise TrainingStarted(out)

    monkeypatch.setattr("agnostophobia.experiments.reproduce.train_and_store", stop)
    with pytest.raises(TrainingStarted):
        main([*args, "--budget", "smoke", "--no-progress"])
    data = tmp_path / "cache" / "agnostophobia" / "data"
    assert {p.name for p in data.rglob("*") if p.is_file()} >= set(lenet_server.files)
    assert (tmp_path / "runs" / "lenet++-smoke" / "config.yaml").exists()


def test_report_lists_the_files_fetched_for_the_run(tmp_path):
    rows = [FetchedFile("notmnist", "notMNIST_small.tar.gz", "/x", "http://h/notMNIST_small.tar.gz", "ab" * 32, False),
            FetchedFile("mnist", "t10k-labels-idx1-ubyte.gz", "/y", "http://h/t10k", "cd" * 32, True)]
    write_fetch_record(tmp_path, rows)
    metrics = {"experiment": "lenet++", "budget": "smoke", "results": [], "table1": [], "fpr_readout": "Eq. 3"}
    report = write_report(tmp_path, metrics).read_text()
    assert ("- notmnist: `notMNIST_small.tar.gz` from http://h/notMNIST_small.tar.gz, sha256 `" + "ab" * 32 +
            "` — **unverified**: no published checksum") in report.splitlines()
    assert f"- mnist: `t10k-labels-idx1-ubyte.gz` from http://h/t10k, sha256 `{'cd' * 32}`" in report.splitlines()


def test_reproduce_without_allow_unverified_stops_once_before_downloading(lenet_server, tmp_path, capsys):
    assert _reproduce(tmp_path) == 1
    line = one_error_line(capsys)
    assert "devanagari-character-dataset.zip (nhcd), notMNIST_small.tar.gz (notmnist) have no published checksum" in line
    assert "--allow-unverified" in line and "nothing was downloaded" in line
    assert lenet_server.requests == []
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


def test_reproduce_no_fetch_stops_and_explains_as_before(lenet_server, tmp_path, capsys):
    assert _reproduce(tmp_path, "--no-fetch", "--allow-unverified") == 1
    assert one_error_line(capsys) == (
        f"agnostophobia: error: mnist, letters, devanagari, notmnist and cifar10 not found in {tmp_path / 'data'}; "
        f"get them with `agnostophobia data fetch mnist letters nhcd notmnist cifar10`")
    assert lenet_server.requests == [] and not (tmp_path / "run").exists()


def test_reproduce_with_unreachable_network_stops_with_the_usual_line(tmp_path, capsys, monkeypatch):
    # No server: the official host does not resolve (tests have no network), a mirror refuses.
    for mirror in (None, "http://127.0.0.1:9"):
        if mirror:
            monkeypatch.setenv("AGNOSTOPHOBIA_MIRROR", mirror)
        assert main(["reproduce", "cifar", "--protocol", "cifar10-split", "--budget", "smoke", "--no-progress",
                     "--data-dir", str(tmp_path / "data"), "--out", str(tmp_path / "run")]) == 1
        line = one_error_line(capsys)
        assert line.startswith(f"agnostophobia: error: cifar10, mnist and notmnist not found in {tmp_path / 'data'}; "
                               f"get them with `agnostophobia data fetch cifar10 mnist notmnist`; ")
        # notMNIST (a far unknown set) has no published checksum: nothing is downloaded unverified
        assert line.endswith("rerun with --allow-unverified to download it anyway (the sha256 received is recorded "
                             "in the run's data_fetched.json); nothing was downloaded")
        assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


def test_fetch_missing_turns_a_timeout_into_the_usual_line(tmp_path, monkeypatch):
    import socket

    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections, never answers
    try:
        monkeypatch.setenv("AGNOSTOPHOBIA_MIRROR", f"http://127.0.0.1:{silent.getsockname()[1]}")
        with pytest.raises(DataError, match=r"^svhn not found; get it \(here\); automatic download failed: "
                                            r"test_32x32.mat: download failed: .*timed out"):
            fetch_missing(["svhn"], tmp_path / "data", "svhn not found; get it (here)",
                          Downloader(timeout=0.2, log=quiet))
    finally:
        silent.close()
    assert not (tmp_path / "data").exists()


def test_read_only_data_dir_is_never_fetched_into(lenet_server, tmp_path, capsys):
    ro = tmp_path / "data"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert _reproduce(tmp_path, "--allow-unverified") == 1
        line = one_error_line(capsys)
        assert f"not found in {ro}; get them with `agnostophobia data fetch" in line
        assert line.endswith(f"nothing downloaded: {ro} is read-only")
        assert list(ro.iterdir()) == [] and lenet_server.requests == []
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize("status, content_type", [(401, "application/json"), (200, "text/html; charset=utf-8"),
                                                  (403, "text/html")])
def test_source_behind_a_login_says_so_and_where_to_put_the_file(server, tmp_path, status, content_type):
    server.answers["devanagari-character-dataset.zip"] = (status, content_type)
    with pytest.raises(LoginRequired) as err:
        fetch_dataset("nhcd", data_dir=tmp_path,
                      downloader=Downloader(allow_unverified=True, mirror=server.url, log=quiet))
    message = str(err.value)
    target = tmp_path / "nhcd" / "devanagari-character-dataset.zip"
    assert "needs a login" in message and f"save it as {target}" in message
    assert "kaggle.com" in message  # where a person downloads it by hand
    assert not (tmp_path / "nhcd").exists() and read_sums(tmp_path / "nhcd") == {}
