"""The synchronous client against the real service: the login, every call,
errors as the server's problem documents, a failed file and a canceled
job."""

from __future__ import annotations

import io
import json

import pytest
from conftest import write

import sluice


def test_client_uses_the_login_file(client, service, login):
    assert client.login.server == service.url
    assert client.login.ca == service.ca
    assert client.whoami() == sluice.User(name="admin", vo="admin", admin=True)
    assert service.token not in repr(client.login)


def test_environment_and_token_file_come_before_the_login_file(service, tmp_path, monkeypatch):
    tok = tmp_path / "tok"
    tok.write_text(service.token + "\n")
    monkeypatch.setenv("SLUICE_CONFIG", str(tmp_path / "none.json"))
    monkeypatch.setenv("SLUICE_SERVER", service.url)
    monkeypatch.setenv("SLUICE_TOKEN", f"@{tok}")
    monkeypatch.setenv("SLUICE_CA", service.ca)
    with sluice.Client() as c:
        assert c.login.token == service.token
        assert c.whoami().admin
    # Arguments come first.
    with pytest.raises(sluice.Unauthorized):
        sluice.Client(token="not-the-token").whoami()


def test_the_configuration_files_top_comes_after_the_environment_and_before_the_login(service, tmp_path,
                                                                                    monkeypatch, login):
    tok = tmp_path / "tok"
    tok.write_text(service.token)
    toml = tmp_path / "sluice.toml"
    toml.write_text(f'server = "{service.url}"\ntoken = "@{tok}"\nca = "{service.ca}"\n'
                    '[serve]\nlisten = ":8443"\n')  # the commands' sections are not the SDK's
    monkeypatch.setenv("SLUICE_CONFIG_FILE", str(toml))
    # The login file names another server and token: the file's top wins.
    login.write_text('{"server": "https://127.0.0.1:1", "token": "stale"}')
    with sluice.Client() as c:
        assert c.login.server == service.url and c.whoami().admin
    monkeypatch.setenv("SLUICE_TOKEN", "from-the-environment")
    assert sluice.Client().login.token == "from-the-environment"
    monkeypatch.delenv("SLUICE_TOKEN")
    toml.write_text("server = 8080\n")
    with pytest.raises(sluice.ConfigError, match="top level server: want a string"):
        sluice.Client()
    toml.write_text("server = [broken\n")
    with pytest.raises(sluice.ConfigError, match="sluice.toml"):
        sluice.Client()
    monkeypatch.setenv("SLUICE_CONFIG_FILE", str(tmp_path / "absent.toml"))
    with pytest.raises(sluice.ConfigError, match="absent.toml"):  # named, so it must exist
        sluice.Client()


def test_no_login_says_how_to_give_one(tmp_path, monkeypatch):
    monkeypatch.setenv("SLUICE_CONFIG", str(tmp_path / "none.json"))
    with pytest.raises(sluice.ConfigError, match="no server: .*sluice login"):
        sluice.Client()
    with pytest.raises(sluice.ConfigError, match="no API token"):
        sluice.Client("https://127.0.0.1:1")
    with pytest.raises(sluice.ConfigError, match="want http"):
        sluice.Client("127.0.0.1:8080", "t")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    monkeypatch.setenv("SLUICE_CONFIG", str(bad))
    with pytest.raises(sluice.ConfigError, match="bad.json"):
        sluice.Client()


def test_a_server_certificate_the_site_ca_did_not_sign_is_refused(service, tmp_path, monkeypatch):
    monkeypatch.setenv("SLUICE_CONFIG", str(tmp_path / "none.json"))
    with sluice.Client(service.url, service.token) as c:  # no CA: the system's roots only
        with pytest.raises(sluice.ServerUnreachable, match="certificate is not trusted.*SLUICE_CA"):
            c.whoami()
        with pytest.raises(sluice.ServerUnreachable, match="certificate is not trusted"):
            next(c.events())  # at once: not a restart to wait out


def test_wrong_token_is_the_servers_401(service):
    with sluice.Client(token="wrong-token") as c:
        with pytest.raises(sluice.Unauthorized) as e:
            c.endpoints()
        assert e.value.status == 401
        assert e.value.title == "Unauthorized"
        assert "unknown or expired token" in e.value.detail
        assert e.value.problem["status"] == 401
        assert "401 Unauthorized" in str(e.value)
        # The event stream too, at once rather than after retries.
        with pytest.raises(sluice.Unauthorized):
            next(iter(c.events()))
        with pytest.raises(sluice.Unauthorized):
            c.wait(1)


def test_errors_carry_the_problem_document(client):
    with pytest.raises(sluice.NotFound) as e:
        client.status(987654)
    assert e.value.status == 404 and e.value.detail
    # Validation: each error's message and location.
    with pytest.raises(sluice.Invalid) as e:
        client.submit({"files": [{"source": "sluice://a1/f", "destination": "sluice://a2/f"}], "class": "urgent"})
    assert e.value.status == 422
    assert any("class" in (x.get("location") or "") for x in e.value.errors), e.value.problem
    assert "class" in str(e.value)
    with pytest.raises(ValueError, match="not a job"):
        client.status(0)


def test_endpoints(client):
    eps = {e.name: e for e in client.endpoints()}
    assert set(eps) == {"a1", "a2"}
    for e in eps.values():
        assert e.kind == "agent" and e.up and e.url.startswith("http")


def test_submit_a_directory_and_wait_with_progress(client, tree):
    name, p = tree
    sizes = {"a.dat": 1 << 20, "sub/b.dat": 3 << 20, "sub/deeper/c.dat": 123}
    for i, (rel, size) in enumerate(sizes.items()):
        write(p["a1"] / "run" / rel, size, seed=i)
    write(p["a1"] / "calib.h5", 4096, seed=9)
    job = sluice.TransferData(label=name)
    job.add_dir(f"sluice://a1/{name}/run", f"sluice://a2/{name}/copy")
    job.add(f"sluice://a1/{name}/calib.h5", f"sluice://a2/{name}/calib.h5", metadata={"kind": "calib"})
    sub = client.submit(job)
    assert isinstance(sub, sluice.Submitted) and sub.created_now and sub.label == name
    out = io.StringIO()

    def bar(**kw):
        from tqdm import tqdm

        return tqdm(file=out, mininterval=0, **kw)

    done = client.wait(sub, progress=bar)
    assert done.state == "done" and done.files == 4 and done.files_done == 4
    assert done.bytes_done == sum(sizes.values()) + 4096
    for rel in sizes:
        assert (p["a2"] / "copy" / rel).read_bytes() == (p["a1"] / "run" / rel).read_bytes()
    text = out.getvalue()
    assert f"job {sub.id} done" in text and "4/4 files" in text and "B/s" in text, text
    assert "100%" in text, text
    files = list(client.iter_files(sub))
    # In index order (a directory's files take the indexes after its own).
    assert [f.index for f in files] == sorted(f.index for f in files) and len(files) == 4
    calib = next(f for f in files if f.source.endswith("calib.h5"))
    assert calib.metadata == {"kind": "calib"} and calib.checksum.startswith("adler32:")
    assert sub.id in [j.id for j in client.jobs(limit=1000)]
    assert sub.id in [j.id for j in client.jobs("done", limit=1000)]


def test_files_are_paged(client, tree):
    name, p = tree
    job = sluice.TransferData()
    for i in range(7):
        write(p["a1"] / f"f{i}", 10 + i, seed=i)
        job.add(f"sluice://a1/{name}/f{i}", f"sluice://a1/{name}/out/f{i}")
    j = client.wait(client.submit(job))
    pages = [client.files(j, 0, 3), client.files(j, 3, 3), client.files(j, 6, 3)]
    assert [[f.index for f in pg] for pg in pages] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [f.size for f in client.iter_files(j, page_size=3)] == [10 + i for i in range(7)]
    assert len(list(client.iter_files(j, state="done", page_size=2))) == 7
    assert list(client.iter_files(j, state="failed")) == []
    with pytest.raises(ValueError, match="limit"):
        client.files(j, 0, 0)


def test_a_failed_file_is_named_by_wait(client, tree):
    name, p = tree
    write(p["a1"] / "here.dat", 1000)
    job = sluice.TransferData(label="one missing")
    job.add(f"sluice://a1/{name}/here.dat", f"sluice://a2/{name}/here.dat")
    job.add(f"sluice://a1/{name}/missing.dat", f"sluice://a2/{name}/missing.dat")
    sub = client.submit(job)
    with pytest.raises(sluice.JobFailed) as e:
        client.wait(sub, timeout=60)
    err = e.value
    assert err.job.state == "failed" and err.job.files_done == 1 and err.job.files_failed == 1
    assert [f.source for f in err.failed] == [f"sluice://a1/{name}/missing.dat"]
    assert err.failed[0].error
    assert f"sluice://a1/{name}/missing.dat" in str(err) and err.failed[0].error in str(err)
    assert (p["a2"] / "here.dat").exists() and not (p["a2"] / "missing.dat").exists()
    # The server's state filter: the failed file alone, the done one alone.
    assert [f.index for f in client.files(sub, state="failed")] == [1]
    assert [f.index for f in client.files(sub, state="done")] == [0]
    with pytest.raises(ValueError, match="state 'broken'"):
        client.files(sub, state="broken")


def test_cancel_a_running_job(client, tree):
    name, p = tree
    write(p["a1"] / "big.dat", 64 << 20)  # four seconds into the throttled a2
    sub = client.submit(sluice.TransferData().add(f"sluice://a1/{name}/big.dat", f"sluice://a2/{name}/big.dat"))
    for ev in client.events(sub, timeout=30):
        if ev.type == "progress" and ev.bytes_done > 0:
            break
    j = client.cancel(sub)
    assert j.id == sub.id
    with pytest.raises(sluice.JobCanceled) as e:
        client.wait(sub, timeout=30)
    assert e.value.job.state == "canceled" and e.value.canceled_files == 1
    assert client.status(sub).state == "canceled"
    assert not (p["a2"] / "big.dat").exists()


def test_fts3_job_document_and_idempotent_submission(client, tree):
    name, p = tree
    write(p["a1"] / "f", 2048)
    fts3_job = {  # as fts3.rest.client.easy.new_job builds it
        "files": [{"sources": [f"sluice://a1/{name}/f"], "destinations": [f"sluice://a2/{name}/f"],
                   "filesize": 2048, "activity": "User Subscriptions", "metadata": {"request_id": "r1"}}],
        "params": {"verify_checksum": "both", "overwrite": False, "priority": 3,
                   "job_metadata": {"issuer": "rucio"}},
    }
    sub = client.submit(sluice.TransferData.from_fts3(fts3_job, submission_id=f"{name}-1"))
    assert sub.created_now and sub.metadata == {"issuer": "rucio"} and sub.if_exists == "fail"
    assert sub.warnings and any("activity" in w for w in sub.warnings)
    again = client.submit(sluice.TransferData.from_fts3(fts3_job, submission_id=f"{name}-1"))
    assert again.id == sub.id and not again.created_now
    assert client.wait(sub).files_done == 1
    # The same document straight to submit: FTS3's overwrite false fails
    # the file that now exists.
    with pytest.raises(sluice.JobFailed, match="exist"):
        client.wait(client.submit(fts3_job))


def test_estimate(client, tree):
    name, p = tree
    write(p["a1"] / "sample.dat", 2 << 20)
    est = client.estimate(f"sluice://a1/{name}/sample.dat", f"sluice://a2/{name}/", size=1 << 30,
                          sample_size=256 << 10)
    assert est.streams >= 1 and est.throughput > 0 and est.seconds > 0
    assert est.samples and all(s.throughput > 0 for s in est.samples)
    assert est.size == 1 << 30 and not est.from_history
    again = client.estimate(f"sluice://a1/{name}/sample.dat", f"sluice://a2/{name}/", size=1 << 30,
                            use_history=True)
    assert again.from_history
    json.dumps(est.raw)  # the answer as sent
