"""The event stream: resumption after a dropped connection (cut by a proxy
between the client and the server), a server that stops answering, and
timeouts."""

from __future__ import annotations

import time

import pytest
from conftest import write

import sluice


def _slow_job(client, p, name, size=40 << 20):
    """A job that lasts a few seconds (into the throttled a2)."""
    write(p["a1"] / "slow.dat", size)
    return client.submit(sluice.TransferData().add(f"sluice://a1/{name}/slow.dat", f"sluice://a2/{name}/slow.dat"))


def test_a_dropped_stream_of_one_job_resumes_and_resyncs(service, proxy, tree):
    name, p = tree
    with sluice.Client(f"https://127.0.0.1:{proxy.port}") as c:
        sub = _slow_job(c, p, name)
        seen, dropped_at = [], None
        for ev in c.events(sub, timeout=60):
            seen.append(ev)
            if dropped_at is None and ev.type == "progress" and ev.bytes_done > 0:
                dropped_at = len(seen)
                proxy.drop()  # the network fails under the open stream
        assert dropped_at is not None, seen
        assert seen[0].type == "resync" and seen[0].detail == "subscribed"
        after = seen[dropped_at:]
        resyncs = [e for e in after if e.type == "resync"]
        assert resyncs and resyncs[0].detail == "reconnected", after
        assert resyncs[0].job == sub.id and resyncs[0].bytes > 0
        # The stream ended with the job's end, seen after the reconnection.
        last = seen[-1]
        assert (last.type, last.state) in (("job", "done"), ("resync", "done")), last
        assert proxy.accepted >= 3  # submit and the first stream, then the new one
        assert c.status(sub).state == "done"


def test_a_dropped_stream_of_all_jobs_says_it_reconnected(service, proxy, tree):
    name, p = tree
    with sluice.Client(f"https://127.0.0.1:{proxy.port}") as c:
        events = c.events(keepalives=True, timeout=30)
        first = next(events)
        assert first.type == "keepalive"  # subscribed
        proxy.drop()
        sub = None
        for ev in events:
            if ev.type == "resync":
                assert ev.job == 0 and "not replayed" in ev.detail
                sub = _slow_job(c, p, name, size=1 << 20)
            elif sub is not None and ev.type == "job" and ev.job == sub.id:
                assert ev.state in ("active", "done")
                if ev.state == "done":
                    break
        assert sub is not None
        events.close()


def test_a_server_that_does_not_answer_is_given_up_after_patience(service, proxy, tree):
    name, p = tree
    with sluice.Client(f"https://127.0.0.1:{proxy.port}") as c:
        sub = _slow_job(c, p, name)
        events = c.events(sub, patience=0.5)
        assert next(events).type == "resync"
        proxy.close()  # connections refused from now on
        t0 = time.monotonic()
        with pytest.raises(sluice.ServerUnreachable):
            for _ in events:
                pass
        assert time.monotonic() - t0 < 20
    # No reconnection asked for: the first drop raises.
    proxy2 = type(proxy)(service.port)
    try:
        with sluice.Client(f"https://127.0.0.1:{proxy2.port}") as c:
            events = c.events(sub, reconnect=False)
            next(events)
            proxy2.drop()
            with pytest.raises(sluice.ServerUnreachable):
                for _ in events:
                    pass
    finally:
        proxy2.close()
        sluice.Client().cancel(sub)


def test_timeouts(client, tree):
    name, p = tree
    sub = _slow_job(client, p, name)
    with pytest.raises(TimeoutError, match=f"job {sub.id}"):
        for _ in client.events(sub, timeout=0.3):
            pass
    with pytest.raises(TimeoutError):
        client.wait(sub, timeout=0.3)
    client.cancel(sub)
    with pytest.raises(sluice.JobCanceled):
        client.wait(sub, timeout=30)
    # A job that ended before the stream opened: the resync says so at once.
    evs = list(client.events(sub, timeout=30))
    assert [(e.type, e.state) for e in evs] == [("resync", "canceled")]


def test_past_the_streams_a_user_may_hold_wait_reads_the_job_instead(client, tree, monkeypatch):
    name, p = tree
    write(p["a1"] / "f", 100)
    held = []
    try:
        for _ in range(32):  # the server's bound per user (server.MaxStreamsPerUser)
            s = client.events(keepalives=True)
            assert next(s).type == "keepalive"
            held.append(s)
        with pytest.raises(sluice.EventStreamError, match="too many event streams") as e:
            next(iter(client.events()))
        assert not e.value.subscribed
        polls = []
        real = sluice._core.Poller.after
        monkeypatch.setattr(sluice._core.Poller, "after", lambda self, j, bar=None: polls.append(j) or real(self, j, bar))
        sub = client.submit(sluice.TransferData().add(f"sluice://a1/{name}/f", f"sluice://a1/{name}/g"))
        assert client.wait(sub, timeout=60).state == "done"
        assert polls and polls[-1].state == "done"
    finally:
        for s in held:
            s.close()


def test_wait_and_events_outlast_a_server_restart(service, client, tree):
    name, p = tree
    sub = _slow_job(client, p, name)
    seen, restarted = [], False
    for ev in client.events(sub, timeout=120):
        seen.append(ev)
        if not restarted and ev.type == "progress" and ev.bytes_done > 0:
            restarted = True
            service.restart_server()
    assert restarted
    assert any(e.type == "resync" and e.detail == "reconnected" for e in seen), seen
    assert client.wait(sub, timeout=120).state == "done"
    assert (p["a2"] / "slow.dat").read_bytes() == (p["a1"] / "slow.dat").read_bytes()
