"""The shared core's state machines on their own, with an injected clock:
the event follower's reconnection, patience and timeout, and the poller
a waiter falls back to. (The tests against the service exercise them on
real connections.)"""

from __future__ import annotations

import datetime as dt
import json

import httpx
import pytest
from httpx_sse import ServerSentEvent

import sluice
from sluice import _core
from sluice.config import Login
from sluice.models import Job

CORE = _core.Core(Login("https://sluice.example:8080", "t"), 60)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def sse(**ev) -> ServerSentEvent:
    ev.setdefault("at", "2026-01-02T03:04:05.123456789Z")
    ev.setdefault("job", 0)
    return ServerSentEvent(event="event", data=json.dumps(ev))


def job(state: str) -> Job:
    return Job(id=7, owner="a", vo="v", class_="interactive", state=state,
               created=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), verify_checksum=True,
               checksum_algorithm="adler32", overwrite=False, if_exists="skip_identical", files=3, files_done=1,
               files_failed=0, files_canceled=0, bytes=30, bytes_done=10, throughput=5.0)


def test_a_job_follower_resyncs_on_each_subscription_and_ends_with_the_job():
    f = _core.EventFollower(CORE, 7, clock=Clock())
    f.request()
    assert f.message(sse(type="keepalive")) == [_core.RESYNC]
    (r,) = f.resync(job("active"))
    assert (r.type, r.detail, r.bytes_done, r.files) == ("resync", "subscribed", 10, 3)
    assert f.message(sse(type="keepalive")) == []  # later keepalives are not events
    (p,) = f.message(sse(type="progress", job=7, bytes_done=20, bytes=30))
    assert p.bytes_done == 20 and p.at.microsecond == 123456
    assert not f.ended
    f.dropped(httpx.ReadError("cut"))
    f.request()
    assert f.message(sse(type="keepalive")) == [_core.RESYNC]
    (r,) = f.resync(job("active"))
    assert r.detail == "reconnected"
    f.message(sse(type="job", job=8, state="done"))  # another job's end
    assert not f.ended
    f.message(sse(type="job", job=7, state="failed"))
    assert f.ended


def test_a_follower_of_all_jobs_says_when_it_reconnected():
    f = _core.EventFollower(CORE, None, keepalives=True, clock=Clock())
    f.request()
    assert [e.type for e in f.message(sse(type="keepalive"))] == ["keepalive"]
    f.dropped(httpx.ReadError("cut"))
    f.request()
    assert [e.type for e in f.message(sse(type="keepalive"))] == ["resync", "keepalive"]


def test_the_servers_error_event_ends_the_stream_saying_whether_it_subscribed():
    f = _core.EventFollower(CORE, 7, clock=Clock())
    f.request()
    with pytest.raises(sluice.EventStreamError, match="too many") as e:
        f.message(sse(type="error", detail="too many event streams open for this user"))
    assert not e.value.subscribed
    f.request()
    f.message(sse(type="keepalive"))
    with pytest.raises(sluice.EventStreamError) as e:
        f.message(sse(type="error", detail="the token expired"))
    assert e.value.subscribed
    with pytest.raises(sluice.SluiceError, match="cannot read event"):
        f.message(ServerSentEvent(data="{not json"))


@pytest.mark.parametrize("err,drop", [
    (httpx.ReadError("x"), True), (httpx.ConnectError("x"), True), (httpx.ReadTimeout("x"), True),
    (_core.StreamEnded(), True), (sluice.ServerUnreachable("x"), True),
    (sluice.Unavailable(503, {}), True), (sluice.APIError(502, {}), True),
    (sluice.Unauthorized(401, {}), False), (sluice.NotFound(404, {}), False), (ValueError("x"), False),
])
def test_what_is_a_drop(err, drop):
    assert _core.EventFollower.is_drop(err) is drop


def test_reconnection_backs_off_and_gives_up_after_patience():
    clock = Clock()
    f = _core.EventFollower(CORE, 7, patience=10, clock=clock)
    delays = []
    with pytest.raises(sluice.ServerUnreachable, match="has not answered for 10 s"):
        while True:
            d = f.dropped(_core.StreamEnded())
            delays.append(d)
            clock.t += d
    assert delays[:6] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0]
    assert all(d == 5.0 for d in delays[5:])
    assert 10 < sum(delays) <= 15
    # A subscription resets it: a later outage gets its own patience.
    f2 = _core.EventFollower(CORE, 7, patience=10, clock=clock)
    f2.dropped(_core.StreamEnded())
    clock.t += 8
    f2.request()
    f2.message(sse(type="keepalive"))
    clock.t += 100
    assert f2.dropped(_core.StreamEnded()) == 0.2


def test_a_server_never_reached_is_not_waited_for():
    f = _core.EventFollower(CORE, 7, clock=Clock())
    f.request()
    with pytest.raises(sluice.ServerUnreachable, match="refused"):
        f.dropped(httpx.ConnectError("refused"))
    # Once reached, the same error is a restart to wait out.
    f.request()
    f.message(sse(type="keepalive"))
    assert f.dropped(httpx.ConnectError("refused")) == 0.2


def test_without_reconnection_the_first_drop_raises_the_cause():
    f = _core.EventFollower(CORE, 7, reconnect=False, clock=Clock())
    with pytest.raises(sluice.Unavailable):
        f.dropped(sluice.Unavailable(503, {"detail": "database down"}))
    with pytest.raises(sluice.ServerUnreachable, match="GET /v1/events"):
        f.dropped(httpx.ConnectError("refused"))


def test_the_timeout_bounds_reads_and_reconnections():
    clock = Clock()
    f = _core.EventFollower(CORE, 7, timeout=2, clock=clock)
    assert f.request().extensions["timeout"]["read"] == 2
    clock.t += 1.5
    assert f.request().extensions["timeout"]["read"] == pytest.approx(0.5)
    assert f.dropped(_core.StreamEnded()) == pytest.approx(0.2)
    clock.t += 0.5
    with pytest.raises(TimeoutError, match="job 7"):
        f.dropped(httpx.ReadTimeout("x"))
    assert _core.EventFollower(CORE, None, clock=clock).request().extensions["timeout"]["read"] == 45


def test_the_poller_reads_soon_then_every_5_s_within_the_timeout():
    clock = Clock()
    p = _core.Poller(7, None, clock=clock)
    assert [p.after(job("active")) for _ in range(6)] == [0.5, 1.0, 2.0, 3.0, 5.0, 5.0]
    assert p.after(job("done")) is None
    p = _core.Poller(7, 1.2, clock=clock)
    assert p.after(job("active")) == 0.5
    clock.t += 0.5
    assert p.after(job("active")) == pytest.approx(0.7)
    clock.t += 0.7
    with pytest.raises(TimeoutError, match="job 7"):
        p.after(job("active"))


def test_times_as_go_writes_them():
    from sluice.models import parse_time

    utc = dt.timezone.utc
    assert parse_time("2026-12-07T21:26:14.179072872Z") == dt.datetime(2026, 12, 7, 21, 26, 14, 179072, tzinfo=utc)
    assert parse_time("2026-12-07T21:26:14Z") == dt.datetime(2026, 12, 7, 21, 26, 14, tzinfo=utc)
    assert parse_time("2026-12-07T21:26:14.5+02:00") == dt.datetime(2026, 12, 7, 19, 26, 14, 500000, tzinfo=utc)


def test_an_answer_with_fields_a_newer_server_adds_still_reads():
    doc = {"name": "a", "vo": "v", "admin": False, "quota": 5}
    u = sluice.models.decode(sluice.User, doc)
    assert u == sluice.User(name="a", vo="v", admin=False) and u.raw["quota"] == 5
