"""The fsspec file system sluice://ENDPOINT/path against the real agents:
listing, reading by ranges, get, put and open for writing, and the
user's access rules through the server's data tokens."""

from __future__ import annotations

import os
import subprocess

import fsspec
import pytest
from conftest import write

import sluice
from sluice.fs import SluiceFileSystem


@pytest.fixture
def fs(service):
    f = SluiceFileSystem(skip_instance_cache=True)
    yield f
    f.client.close()


def test_list_info_find(fs, tree):
    name, p = tree
    write(p["a1"] / "d" / "x.dat", 1000)
    write(p["a1"] / "d" / "sub" / "y.dat", 10)
    base = f"sluice://a1/{name}/d"
    assert fs.ls(base, detail=False) == [f"a1/{name}/d/sub", f"a1/{name}/d/x.dat"]
    entries = {e["name"]: e for e in fs.ls(base)}
    assert entries[f"a1/{name}/d/x.dat"]["size"] == 1000 and entries[f"a1/{name}/d/sub"]["type"] == "directory"
    assert fs.ls(base + "/x.dat", detail=False) == [f"a1/{name}/d/x.dat"]
    assert fs.info(base)["type"] == "directory"
    assert fs.isfile(base + "/x.dat") and not fs.exists(base + "/nope")
    assert fs.find(base) == [f"a1/{name}/d/sub/y.dat", f"a1/{name}/d/x.dat"]
    assert fs.find(base, maxdepth=1) == [f"a1/{name}/d/x.dat"]
    assert fs.du(base) == 1010
    assert fs.modified(base + "/x.dat").tzinfo is not None
    with pytest.raises(FileNotFoundError):
        fs.info(base + "/nope")
    with pytest.raises(ValueError, match="not allowed"):
        fs.info(base + "/../../etc")


def test_read_by_ranges(fs, tree):
    name, p = tree
    src = write(p["a1"] / "big.dat", 3 << 20, seed=3)
    data = src.read_bytes()
    url = f"sluice://a1/{name}/big.dat"
    assert fs.cat_file(url, 100, 200) == data[100:200]
    assert fs.cat_file(url, -10) == data[-10:]
    assert fs.cat_file(url, len(data) + 5) == b""
    with fs.open(url, block_size=1 << 20) as f:
        f.seek(2 << 20)
        assert f.read(4096) == data[2 << 20:(2 << 20) + 4096]
        f.seek(10)
        assert f.read(5) == data[10:15]
    assert fs.cat(url) == data
    # fsspec's own entry points: sluice:// opens through the registered class.
    with fsspec.open(url, "rb") as f:
        assert f.read(7) == data[:7]


def test_get_and_put(fs, tree, tmp_path):
    name, p = tree
    write(p["a1"] / "d" / "a.dat", 5000, seed=1)
    write(p["a1"] / "d" / "s" / "b.dat", 7, seed=2)
    fs.get(f"sluice://a1/{name}/d/a.dat", str(tmp_path / "a.dat"))
    assert (tmp_path / "a.dat").read_bytes() == (p["a1"] / "d" / "a.dat").read_bytes()
    fs.get(f"sluice://a1/{name}/d", str(tmp_path / "tree"), recursive=True)
    assert (tmp_path / "tree" / "s" / "b.dat").read_bytes() == (p["a1"] / "d" / "s" / "b.dat").read_bytes()
    local = write(tmp_path / "up.dat", (9 << 20) + 17, seed=4)  # more than one upload chunk
    fs.put(str(local), f"sluice://a2/{name}/in/up.dat")
    assert (p["a2"] / "in" / "up.dat").read_bytes() == local.read_bytes()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    fs.put(str(empty), f"sluice://a2/{name}/in/empty")
    assert (p["a2"] / "in" / "empty").read_bytes() == b""
    # Nothing temporary is left beside them.
    assert sorted(os.listdir(p["a2"] / "in")) == ["empty", "up.dat"]
    fs.rm(f"sluice://a2/{name}/in/empty")
    assert not (p["a2"] / "in" / "empty").exists()


def test_open_for_writing(fs, tree):
    name, p = tree
    url = f"sluice://a2/{name}/out/w.dat"
    chunks = [bytes([i]) * 700_000 for i in range(5)]
    with fs.open(url, "wb", block_size=1 << 20) as f:
        for c in chunks:
            f.write(c)
        assert not (p["a2"] / "out" / "w.dat").exists()  # in place only on close
    assert (p["a2"] / "out" / "w.dat").read_bytes() == b"".join(chunks)
    fs.mkdir(f"sluice://a2/{name}/made/deeper")
    assert (p["a2"] / "made" / "deeper").is_dir()


def test_tokens_are_reused_below_their_path(fs, tree, monkeypatch):
    name, p = tree
    for i in range(5):
        write(p["a1"] / "d" / f"f{i}", 100 + i)
    asked = []
    real = sluice.Client.data_token
    monkeypatch.setattr(sluice.Client, "data_token", lambda self, url, **kw: asked.append(url) or real(self, url, **kw))
    names = fs.ls(f"sluice://a1/{name}/d", detail=False)
    assert [len(fs.cat_file("sluice://" + n)) for n in names] == [100 + i for i in range(5)]
    assert asked == [f"sluice://a1/{name}/d"]


def test_access_rules_bound_a_user(service, tree):
    name, p = tree
    write(p["a1"] / "secret.dat", 10)
    env = dict(os.environ, SLUICE_SERVER=service.url, SLUICE_TOKEN=service.token, SLUICE_CA=service.ca)
    bob = subprocess.run([service.bin, "token", "create", "--user", f"bob-{name}"[:60], "--ttl", "1h"], env=env,
                         check=True, capture_output=True, text=True).stdout.strip()
    f = SluiceFileSystem(server=service.url, token=bob, ca=service.ca, skip_instance_cache=True)
    with pytest.raises(PermissionError, match="no access rule"):
        f.cat_file(f"sluice://a1/{name}/secret.dat")
    with pytest.raises(PermissionError):
        f.ls(f"sluice://a1/{name}")
    with pytest.raises(OSError, match='no endpoint "nosuch"'):
        SluiceFileSystem(skip_instance_cache=True).ls("sluice://nosuch/x")
