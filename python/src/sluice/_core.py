"""What the synchronous and the asyncio clients share: every request built
and every answer read here, without I/O ("sans-I/O"). The clients only send
the requests this module builds (httpx.Client.send or await
httpx.AsyncClient.send), sleep when it says so, and hand the answers back;
the event stream's reconnection and resynchronisation, wait's decisions and
the paging of files are state machines here that both drive.
"""

from __future__ import annotations

import datetime as _dt
import json
import ssl
import typing
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from httpx_sse import ServerSentEvent, SSEError

from . import __version__
from .config import Login
from .errors import (APIError, EventStreamError, JobCanceled, JobError, JobFailed, ServerUnreachable,
                     SluiceError, api_error)
from .models import DataToken, Endpoint, Estimate, Event, File, FileState, Job, Submitted, User, decode
from .transfer import TransferData

T = TypeVar("T")

#: The server sends a keepalive every 15 s: a stream silent for three of
#: them is dead (a half-open connection after a network failure).
STREAM_READ_TIMEOUT = 45.0
#: Largest page of files the API gives (list-files' limit's maximum).
MAX_FILES_PAGE = 100_000
#: A file's states (list-files' state filter).
FILE_STATES = typing.get_args(FileState)
#: How long a watch waits for a server that stopped answering (the CLI's).
DEFAULT_PATIENCE = 120.0


def job_id(job: Any) -> int:
    """A job's id from an id or anything with an id (Job, Submitted)."""
    jid = getattr(job, "id", job)
    if isinstance(jid, bool) or not isinstance(jid, int) or jid <= 0:
        raise ValueError(f"{job!r} is not a job (want a job id or a Job)")
    return jid


@dataclass
class Call(Generic[T]):
    """One request and how to read its answer."""

    request: httpx.Request
    parse: Callable[[httpx.Response], T]


def explain(err: Exception, method: str, url: str) -> ServerUnreachable:
    """A transport error as the SDK raises it; an untrusted certificate
    says what to do, as the CLI does."""
    msg = f"{method} {url}: {err or type(err).__name__}"
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            msg += (" (the server's certificate is not trusted here: give Client(ca=FILE) with the "
                    "site's CA, set SLUICE_CA, or `sluice login --ca FILE`)")
            break
        cause = cause.__cause__ or cause.__context__
    return ServerUnreachable(msg)


def problem_of(resp: httpx.Response) -> APIError:
    """The error of an answer that is not a success (its body read)."""
    problem: dict[str, Any] = {}
    try:
        doc = resp.json()
        if isinstance(doc, dict):
            problem = doc
    except ValueError:
        text = resp.text.strip()
        if text:
            problem = {"detail": text[:2000]}
    return api_error(resp.status_code, problem, method=resp.request.method,
                     path=resp.request.url.raw_path.decode("ascii", "replace"), reason=resp.reason_phrase)


def check(resp: httpx.Response) -> None:
    """Raises the server's problem for an answer that is not a success."""
    if resp.status_code >= 300:
        raise problem_of(resp)


class Core:
    """Builds the API's requests and reads its answers."""

    def __init__(self, login: Login, timeout: float | None) -> None:
        self.login = login
        self.base = httpx.URL(login.server + "/")
        self.timeout = httpx.Timeout(timeout)
        self.headers = {
            "Authorization": f"Bearer {login.token}",
            "Accept": "application/json",
            "User-Agent": f"sluice-python/{__version__}",
        }

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                body: Any = None, timeout: httpx.Timeout | None = None, accept: str = "") -> httpx.Request:
        headers = dict(self.headers)
        if accept:
            headers["Accept"] = accept
        content = None
        if body is not None:
            content = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        q = {k: str(v).lower() if isinstance(v, bool) else v for k, v in (params or {}).items() if v is not None}
        url = self.base.join(path.lstrip("/")).copy_merge_params(q)
        return httpx.Request(method, url, headers=headers, content=content,
                             extensions={"timeout": (timeout or self.timeout).as_dict()})

    @staticmethod
    def finish(call: Call[T], resp: httpx.Response) -> T:
        """The answer of call, or the server's problem raised."""
        check(resp)
        try:
            return call.parse(resp)
        except (ValueError, TypeError, KeyError) as e:
            raise SluiceError(f"decoding the answer to {resp.request.method} {resp.request.url.path}: {e}") from e

    # The API's operations.

    def whoami(self) -> Call[User]:
        return Call(self.request("GET", "/v1/whoami"), lambda r: decode(User, r.json()))

    def submit(self, job: TransferData | Mapping[str, Any]) -> Call[Submitted]:
        if isinstance(job, TransferData):
            body: Any = job.to_dict()
        elif isinstance(job, Mapping):
            body = dict(job)
            if not body.get("files"):
                raise ValueError("submit: the job has no files")
        else:
            raise TypeError(f"submit: want a TransferData or a job dict, got {type(job).__name__}")
        return Call(self.request("POST", "/v1/jobs", body=body),
                    lambda r: decode(Submitted, r.json(), created_now=r.status_code == 201))

    def status(self, job: Any) -> Call[Job]:
        return Call(self.request("GET", f"/v1/jobs/{job_id(job)}"), lambda r: decode(Job, r.json()))

    def jobs(self, state: str | None = None, limit: int = 100, before: int | None = None) -> Call[list[Job]]:
        return Call(self.request("GET", "/v1/jobs", params={"state": state, "limit": limit, "before": before}),
                    lambda r: [decode(Job, j) for j in r.json()])

    def files(self, job: Any, start: int = 0, limit: int = 1000, state: str | None = None) -> Call[list[File]]:
        if start < 0:
            raise ValueError(f"start {start}: want 0 or more")
        if not 0 < limit <= MAX_FILES_PAGE:
            raise ValueError(f"limit {limit}: want 1 to {MAX_FILES_PAGE}")
        if state is not None and state not in FILE_STATES:
            raise ValueError(f"state {state!r}: want one of {', '.join(FILE_STATES)}")
        params = {"from": start, "limit": limit, "state": state}
        return Call(self.request("GET", f"/v1/jobs/{job_id(job)}/files", params=params),
                    lambda r: [decode(File, f) for f in r.json()])

    def cancel(self, job: Any) -> Call[Job]:
        return Call(self.request("DELETE", f"/v1/jobs/{job_id(job)}"), lambda r: decode(Job, r.json()))

    def estimate(self, source: str, destination: str, size: int, *, sample_size: int | None = None,
                 max_streams: int | None = None, growth: int | None = None, use_history: bool = False,
                 timeout: float | None = None) -> Call[Estimate]:
        body: dict[str, Any] = {"source": source, "destination": destination, "size": size}
        for k, v in (("sample_size", sample_size), ("max_streams", max_streams), ("growth", growth)):
            if v is not None:
                body[k] = v
        if use_history:
            body["use_history"] = True
        # Sampling takes as long as the path needs: no timeout unless the
        # caller gives one (the CLI's Estimate lifts its client's too).
        t = httpx.Timeout(self.timeout.connect, read=timeout, write=timeout, pool=timeout)
        return Call(self.request("POST", "/v1/estimate", body=body, timeout=t), lambda r: decode(Estimate, r.json()))

    def endpoints(self) -> Call[list[Endpoint]]:
        return Call(self.request("GET", "/v1/endpoints"), lambda r: [decode(Endpoint, e) for e in r.json()])

    def data_token(self, url: str, write: bool = False) -> Call[DataToken]:
        body: dict[str, Any] = {"url": url}
        if write:
            body["write"] = True
        return Call(self.request("POST", "/v1/data-tokens", body=body), lambda r: decode(DataToken, r.json()))

    def events_request(self, job: int | None, read_timeout: float) -> httpx.Request:
        t = httpx.Timeout(self.timeout.connect, read=read_timeout, write=self.timeout.write, pool=self.timeout.pool)
        return self.request("GET", "/v1/events", params={"job": job}, timeout=t, accept="text/event-stream")


def next_start(page: list[File], limit: int) -> int | None:
    """Where the next page of files starts (None: that was the last). The
    API pages by file index (from), which a job's files hold in order,
    also those of one state."""
    if len(page) < limit or not page:
        return None
    return page[-1].index + 1


def job_error(job: Job, failed: list[File]) -> JobError:
    """What wait raises for a job that ended other than done."""
    cls = JobCanceled if job.state == "canceled" else JobFailed
    return cls(job, failed)


def quote_path(path: str) -> str:
    """A slash path percent-encoded per segment, as agents read it."""
    return "/".join(quote(seg, safe="") for seg in path.split("/"))


# The event stream.

#: What a follower asks its driver for: the job read again (status).
RESYNC = object()


class EventFollower:
    """Follows GET /v1/events across dropped connections.

    The driver connects (request()), feeds each server-sent event to
    message() and yields what it returns; when message() returns RESYNC it
    reads the job and yields resync(job). A connection that drops or ends
    goes to dropped(), which says how long to wait before connecting again,
    or raises once the server has not answered for patience seconds.

    The API has no event ids to resume from, so what happens while the
    stream is down is not replayed: instead, each time the server has
    subscribed the caller (its first event, a keepalive), the follower of
    one job has it read again and yields a ``resync`` event with its
    counters and state. A stream of one job ends after the job's end.
    """

    def __init__(self, core: Core, job: int | None, *, reconnect: bool = True,
                 patience: float = DEFAULT_PATIENCE, keepalives: bool = False,
                 timeout: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.core = core
        self.job = job
        self.reconnect = reconnect
        self.patience = patience
        self.keepalives = keepalives
        self.clock = clock
        self.deadline = None if timeout is None else clock() + timeout
        self.timeout = timeout
        self.subscribed = False  # the current connection's first event came
        self.connections = 0  # connections on which the server subscribed us
        self.failing_since: float | None = None
        self.failures = 0
        self.ended = False  # the followed job ended: stop

    def request(self) -> httpx.Request:
        self.subscribed = False
        read = STREAM_READ_TIMEOUT
        if self.deadline is not None:
            read = max(0.001, min(read, self.deadline - self.clock()))
        return self.core.events_request(self.job, read)

    @staticmethod
    def check_open(resp: httpx.Response) -> None:
        """A connection answered other than 200 (body read): raises the
        server's problem (is_drop says which are retried)."""
        check(resp)
        raise SluiceError(f"events: the server answered {resp.status_code}, not a stream")

    @staticmethod
    def is_drop(err: BaseException) -> bool:
        """Whether an error ends a connection rather than the stream: the
        network, a server that restarts (5xx, or a stream that ends
        without an error event), a resync that could not read the job."""
        if isinstance(err, APIError):
            return err.status >= 500
        return isinstance(err, (httpx.TransportError, SSEError, StreamEnded, ServerUnreachable))

    def message(self, sse: ServerSentEvent) -> list[Any]:
        """What to yield for one server-sent event."""
        try:
            data = json.loads(sse.data)
            ev = decode(Event, data)
        except (ValueError, TypeError) as e:
            raise SluiceError(f"event stream: cannot read event {sse.data[:200]!r}: {e}") from e
        if ev.type == "error":
            # The server ended the stream on purpose (token expired or
            # revoked, too many streams): not a drop to retry.
            raise EventStreamError(ev.detail, subscribed=self.subscribed)
        out: list[Any] = []
        if ev.type == "keepalive":
            if not self.subscribed:
                self.subscribed = True
                self.connections += 1
                self.failing_since, self.failures = None, 0
                if self.job is not None:
                    out.append(RESYNC)
                elif self.connections > 1:
                    out.append(Event(type="resync", at=ev.at, job=0,
                                     detail="the stream was reconnected: events while it was down are not replayed"))
            if self.keepalives:
                out.append(ev)
            return out
        out.append(ev)
        if self.job is not None and ev.type == "job" and ev.job == self.job and ev.state not in ("", "active"):
            self.ended = True
        return out

    def resync(self, job: Job) -> list[Event]:
        """The resync event of the followed job, read after subscribing."""
        ev = Event(type="resync", at=_now(), job=job.id, state=job.state, files_done=job.files_done,
                   files=job.files, bytes_done=job.bytes_done, bytes=job.bytes, throughput=job.throughput,
                   detail="reconnected" if self.connections > 1 else "subscribed", raw=None)
        if job.state != "active":
            self.ended = True
        return [ev]

    def expired(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def timed_out(self) -> TimeoutError:
        return TimeoutError(f"events of job {self.job}: no end after {self.timeout} s" if self.job
                            else f"events: {self.timeout} s passed")

    def dropped(self, err: BaseException) -> float:
        """The connection broke, timed out or ended (is_drop): seconds to
        wait before connecting again; raises when it should not."""
        if self.expired():
            raise self.timed_out() from err
        now = self.clock()
        if self.failing_since is None:
            self.failing_since = now
        if not self.reconnect or (self.connections == 0 and isinstance(err, httpx.ConnectError)):
            # No reconnection asked for, or a server never reached (a wrong
            # address, an untrusted certificate): not a restart to wait out.
            raise self._error(err) from err
        if now - self.failing_since > self.patience:
            if isinstance(err, APIError):
                raise err  # the server's own answer, e.g. 503 all along
            raise ServerUnreachable(
                f"events: the server has not answered for {self.patience:g} s: {self._error(err)}") from err
        self.failures += 1
        delay = min(5.0, 0.1 * 2.0 ** min(self.failures, 6))
        if self.deadline is not None:
            delay = min(delay, max(0.0, self.deadline - now))
        return delay


    @staticmethod
    def _error(err: BaseException) -> BaseException:
        if isinstance(err, (APIError, ServerUnreachable)):
            return err
        if isinstance(err, httpx.TransportError):
            return explain(err, "GET", "/v1/events")
        return ServerUnreachable(f"events: {err}")


class StreamEnded(Exception):
    """The server closed the event stream without an error event (it is
    shutting down): retried as a drop."""

    def __str__(self) -> str:
        return "the event stream ended"


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


# wait: the polling a waiter falls back to when the server refuses it a
# stream (a user holds at most 32 at once).


class Poller:
    """When a waiter that polls reads the job next: soon at first, then
    every 5 s, within its timeout."""

    DELAYS = (0.5, 1.0, 2.0, 3.0)
    EVERY = 5.0

    def __init__(self, job: int, timeout: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.job = job
        self.timeout = timeout
        self.clock = clock
        self.deadline = None if timeout is None else clock() + timeout
        self.n = 0

    def after(self, j: Job, bar: Any = None) -> float | None:
        """Seconds until the next read after reading j (None: it ended)."""
        if bar is not None:
            bar.job_status(j)
        if ended(j):
            return None
        delay = self.DELAYS[self.n] if self.n < len(self.DELAYS) else self.EVERY
        self.n += 1
        if self.deadline is not None:
            left = self.deadline - self.clock()
            if left <= 0:
                raise TimeoutError(f"job {self.job}: no end after {self.timeout} s")
            delay = min(delay, left)
        return delay


def ended(job: Job) -> bool:
    return job.state != "active"


__all__ = ["Core", "Call", "EventFollower", "RESYNC", "StreamEnded", "job_id", "job_error",
           "next_start", "explain", "check", "problem_of", "quote_path", "Poller", "ended",
           "DEFAULT_PATIENCE", "JobError"]
