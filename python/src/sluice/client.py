"""The synchronous client (:class:`Client`); the asyncio one is
:class:`sluice.AsyncClient`, with the same methods as coroutines. Both
build their requests and read the answers with the same code
(``sluice._core``)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import closing
from typing import Any, TypeVar

import httpx
from httpx_sse import EventSource

from . import _core
from ._core import RESYNC, Call, Core, EventFollower, StreamEnded
from .config import Login, resolve, ssl_context
from .errors import EventStreamError
from .models import DataToken, Endpoint, Estimate, Event, File, Job, Submitted, User
from .progress import JobProgress, progress_factory
from .transfer import TransferData

__all__ = ["Client"]

T = TypeVar("T")


class Client:
    """A client of one Sluice server.

    ``Client()`` uses the login of the ``sluice`` command line: the
    server, the API token (or ``@FILE``) and the site's CA from
    ``SLUICE_SERVER``, ``SLUICE_TOKEN`` and ``SLUICE_CA``, else from the
    file ``sluice login`` saved; arguments given here come first. The
    server's certificate is checked against the system's roots and that
    CA. timeout bounds each request (not an estimate's sampling, nor the
    event stream, which is kept alive by the server's keepalives).

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, server: str | None = None, token: str | None = None, *, ca: str | None = None,
                 timeout: float | None = 60.0, **httpx_options: Any) -> None:
        self.login: Login = resolve(server, token, ca)
        self._core = Core(self.login, timeout)
        httpx_options.setdefault("verify", ssl_context(self.login.ca))
        self._http = httpx.Client(timeout=timeout, **httpx_options)

    def __repr__(self) -> str:
        return f"<sluice.Client {self.login.server}>"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def _send(self, request: httpx.Request, stream: bool = False) -> httpx.Response:
        try:
            return self._http.send(request, stream=stream)
        except httpx.TransportError as e:
            raise _core.explain(e, request.method, str(request.url)) from e

    def _call(self, call: Call[T]) -> T:
        return Core.finish(call, self._send(call.request))

    # The API.

    def whoami(self) -> User:
        """The caller's user (checks the login)."""
        return self._call(self._core.whoami())

    def submit(self, job: TransferData | Mapping[str, Any]) -> Submitted:
        """Submit a job: a :class:`TransferData`, or the API's job JSON as a
        dict (Sluice's shape or FTS3's, as ``fts3.rest.client.easy.new_job``
        makes it). Returns the job; its warnings name what of the submission
        the service accepted without honouring."""
        return self._call(self._core.submit(job))

    def status(self, job: int | Job) -> Job:
        """A job's status."""
        return self._call(self._core.status(job))

    def jobs(self, state: str | None = None, *, limit: int = 100, before: int | None = None) -> list[Job]:
        """Jobs, newest first (users see their own, admins all); before
        pages on (only jobs with a smaller id)."""
        return self._call(self._core.jobs(state, limit, before))

    def files(self, job: int | Job, start: int = 0, limit: int = 1000, *, state: str | None = None) -> list[File]:
        """One page of a job's files: at most limit (up to 100,000) from
        file index start, only those in state if given (resolving, queued,
        running, done, failed, canceled). :meth:`iter_files` pages through
        them all."""
        return self._call(self._core.files(job, start, limit, state))

    def iter_files(self, job: int | Job, *, state: str | None = None, page_size: int = 1000) -> Iterator[File]:
        """Every file of a job, page by page (only those in state, if
        given: the server filters them)."""
        start: int | None = 0
        while start is not None:
            page = self.files(job, start, page_size, state=state)
            # A server from before the state filter lists every file.
            yield from (f for f in page if state is None or f.state == state)
            start = _core.next_start(page, page_size)

    def cancel(self, job: int | Job) -> Job:
        """Cancel a job: files not yet done are abandoned and their partial
        copies removed; files done stay."""
        return self._call(self._core.cancel(job))

    def estimate(self, source: str, destination: str, size: int, *, sample_size: int | None = None,
                 max_streams: int | None = None, growth: int | None = None, use_history: bool = False,
                 timeout: float | None = None) -> Estimate:
        """How a transfer of size bytes from source to destination should
        run: the best streams, the predicted throughput and time, by
        sampling the path (a fresh stored answer with use_history).
        Sampling takes as long as the path needs; timeout bounds it."""
        return self._call(self._core.estimate(source, destination, size, sample_size=sample_size,
                                              max_streams=max_streams, growth=growth,
                                              use_history=use_history, timeout=timeout))

    def endpoints(self) -> list[Endpoint]:
        """The endpoints (agents and storage servers) with their live load."""
        return self._call(self._core.endpoints())

    def data_token(self, url: str, *, write: bool = False) -> DataToken:
        """A data token to read (or, with write, write in the directory of)
        one path of an agent, sluice://ENDPOINT/path, bounded by the
        caller's access rules."""
        return self._call(self._core.data_token(url, write))

    def events(self, job: int | Job | None = None, *, reconnect: bool = True,
               patience: float = _core.DEFAULT_PATIENCE, keepalives: bool = False,
               timeout: float | None = None) -> Iterator[Event]:
        """The server's events (of one job, or of all the caller may see),
        as they come.

        A dropped connection is reopened (for patience seconds of a server
        that does not answer, then ServerUnreachable). Each time the server
        has subscribed the client, the events of one job start with a
        ``resync`` event: the job read again, so that nothing that happened
        while the stream was down (or before it opened) is lost; they end
        after the job's end. timeout ends the iteration with TimeoutError.
        The server's error event (an expired token) raises EventStreamError.
        """
        f = EventFollower(self._core, None if job is None else _core.job_id(job), reconnect=reconnect,
                          patience=patience, keepalives=keepalives, timeout=timeout)
        while not f.ended:
            req = f.request()
            try:
                with closing(self._http.send(req, stream=True)) as resp:
                    if resp.status_code != 200:
                        resp.read()
                        f.check_open(resp)
                    for sse in EventSource(resp).iter_sse():
                        for item in f.message(sse):
                            if item is RESYNC:
                                yield from f.resync(self.status(f.job))  # type: ignore[arg-type]
                            else:
                                yield item
                        if f.ended:
                            return
                    raise StreamEnded()
            except Exception as e:
                if not f.is_drop(e):
                    raise
                time.sleep(f.dropped(e))

    def wait(self, job: int | Job, *, timeout: float | None = None, progress: Any = False,
             patience: float = _core.DEFAULT_PATIENCE) -> Job:
        """Wait for a job to end, following its events (no polling), and
        return it when done.

        Raises :class:`JobFailed` (or :class:`JobCanceled`) when it ends
        otherwise, naming the failed files and their errors; TimeoutError
        after timeout seconds. progress=True shows a tqdm progress bar of
        the bytes moved, the rate and the time left (a tqdm class picks
        the bar). A server that restarts or a stream that drops is waited
        out for patience seconds.
        """
        jid = _core.job_id(job)
        factory = progress_factory(progress)
        bar = JobProgress(factory, jid) if factory else None
        final: Job | None = None
        try:
            try:
                for ev in self.events(jid, timeout=timeout, patience=patience):
                    if bar:
                        bar.event(ev)
            except EventStreamError as e:
                if e.subscribed:
                    raise
                # The server would not subscribe us (a user holds a bounded
                # number of streams): read the job now and then instead.
                self._poll(jid, timeout, bar)
            final = self.status(jid)
        finally:
            if bar:
                bar.close(final)
        if _core.ended(final) and final.state != "done":
            raise _core.job_error(final, list(self.iter_files(jid, state="failed", page_size=10_000)))
        return final

    def _poll(self, jid: int, timeout: float | None, bar: JobProgress | None) -> None:
        p = _core.Poller(jid, timeout)
        while (delay := p.after(self.status(jid), bar)) is not None:
            time.sleep(delay)
