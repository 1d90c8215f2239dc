"""``fetch`` against an HTTP server on 127.0.0.1: verified, atomic, nothing half-written."""
from __future__ import annotations

import dataclasses
import hashlib
import http.server
import threading

import numpy as np
import pytest

from agnostophobia.cli import main
from agnostophobia.data import DATASETS, Resource, download, fetch_dataset, load_dataset
from agnostophobia.data.fetch import read_sums
from agnostophobia.errors import DataError


class Server:
    """Serves ``files`` by name; names in ``dying`` announce twice their length and hang up halfway."""

    def __init__(self):
        self.files, self.dying, self.requests = {}, set(), []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                name = self.path.lstrip("/")
                server.requests.append(name)
                data = server.files.get(name)
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
    path = download(res_for(data), tmp_path, mirror=server.url, log=quiet)
    assert path.read_bytes() == data
    assert read_sums(tmp_path) == {"blob.bin": hashlib.sha256(data).hexdigest()}
    assert leftovers(tmp_path) == []
    download(res_for(data), tmp_path, mirror=server.url, log=quiet)  # present and valid: no request
    assert server.requests == ["blob.bin"]


def test_wrong_checksum_leaves_no_file(server, tmp_path):
    server.files["blob.bin"] = b"the wrong bytes" * 100
    with pytest.raises(DataError, match="md5 .* does not match the published"):
        download(res_for(b"the right bytes"), tmp_path, mirror=server.url, log=quiet)
    assert list(tmp_path.iterdir()) == []


def test_server_dying_mid_file_leaves_no_partial_file(server, tmp_path):
    data = b"x" * 100_000
    server.files["blob.bin"] = data
    server.dying.add("blob.bin")
    with pytest.raises(DataError, match="incomplete download: got 50000 of 200000 bytes"):
        download(res_for(data), tmp_path, mirror=server.url, log=quiet)
    assert list(tmp_path.iterdir()) == []


def test_corrupt_existing_file_is_replaced(server, tmp_path):
    data = b"good" * 1000
    server.files["blob.bin"] = data
    (tmp_path / "blob.bin").write_bytes(b"half a fi")
    download(res_for(data), tmp_path, mirror=server.url, log=quiet)
    assert (tmp_path / "blob.bin").read_bytes() == data


def test_http_error_then_fallback_url(server, tmp_path):
    data = b"payload" * 10
    server.files["ok/blob.bin"] = data
    res = Resource("blob.bin", (server.url + "/gone/blob.bin", server.url + "/ok/blob.bin"),
                   md5=hashlib.md5(data).hexdigest())
    assert download(res, tmp_path, log=quiet).read_bytes() == data
    assert server.requests == ["gone/blob.bin", "ok/blob.bin"]
    with pytest.raises(DataError, match="404"):
        download(Resource("nope.bin", (server.url + "/nope.bin",), md5="0" * 32), tmp_path, log=quiet)
    assert leftovers(tmp_path) == []


def test_unverified_refused_unless_allowed(server, tmp_path, monkeypatch):
    data = b"no checksum published"
    server.files["blob.bin"] = data
    res = Resource("blob.bin", ("http://example.invalid/blob.bin",), size=999, checksum_source="no checksum published")
    with pytest.raises(DataError, match="--allow-unverified"):
        download(res, tmp_path, mirror=server.url, log=quiet)
    assert server.requests == [] and list(tmp_path.iterdir()) == []
    messages = []
    monkeypatch.setenv("AGNOSTOPHOBIA_MIRROR", server.url)  # the environment variable works too
    download(res, tmp_path, allow_unverified=True, log=messages.append)
    sha = hashlib.sha256(data).hexdigest()
    assert any("UNVERIFIED" in m and sha in m for m in messages)
    assert any("documented size is 999" in m for m in messages)
    assert read_sums(tmp_path)["blob.bin"] == sha
    download(res, tmp_path, allow_unverified=True, log=quiet)  # matches the recorded sum: kept
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
    paths = fetch_dataset("mnist", data_dir=root, mirror=server.url, log=log.append)
    assert sorted(p.name for p in paths) == sorted(files)
    assert any("mnist train: 300 images" in m for m in log)
    assert len(load_dataset("mnist", "test", root)) == 100
    assert leftovers(root / "mnist") == []


def test_fetch_dataset_with_real_checksums_rejects_other_bytes(server, synth, tmp_path):
    server.files.update(_mnist_files(synth))  # not the real MNIST bytes
    with pytest.raises(DataError, match="does not match"):
        fetch_dataset("mnist", data_dir=tmp_path, mirror=server.url, log=quiet)
    assert not (tmp_path / "mnist").exists()


def test_fetch_skips_when_prepared_npz_present(synth, server):
    synth.mnist_npz()
    assert fetch_dataset("mnist", data_dir=synth.root, mirror=server.url, log=quiet) == []
    assert server.requests == []


def test_fetch_unverified_dataset_refused_before_download(server, tmp_path):
    with pytest.raises(DataError, match="notMNIST_small.tar.gz: no published checksum"):
        fetch_dataset("notmnist", data_dir=tmp_path, mirror=server.url, log=quiet)
    assert server.requests == []


def test_fetch_substitute_has_no_download(tmp_path):
    with pytest.raises(DataError, match="no official download"):
        fetch_dataset("nist_sd19_vowels", data_dir=tmp_path, log=quiet)


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


def test_cli_fetch_refusal_is_one_line(tmp_path, capsys):
    rc = main(["data", "fetch", "dhcd", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "--allow-unverified" in err[0]


def test_failed_fetch_leaves_no_new_folders(server, tmp_path):
    root = tmp_path / "new" / "data"
    with pytest.raises(DataError, match="404"):
        download(res_for(b"x"), root / "mnist", mirror=server.url, log=quiet)
    assert list(tmp_path.iterdir()) == []


def test_read_only_data_dir_is_refused_even_for_root(server, tmp_path):
    ro = tmp_path / "shared"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(DataError, match="read-only"):
            download(res_for(b"x"), ro / "cifar100", mirror=server.url, log=quiet)
        assert list(ro.iterdir()) == [] and server.requests == []
    finally:
        ro.chmod(0o755)
