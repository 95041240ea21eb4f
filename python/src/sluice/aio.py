"""The asyncio client (:class:`AsyncClient`): :class:`sluice.Client`'s
methods as coroutines, events and files as async iterators, over
httpx.AsyncClient, with the same requests and answers (``sluice._core``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
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

__all__ = ["AsyncClient"]

T = TypeVar("T")


class AsyncClient:
    """An asyncio client of one Sluice server: see :class:`sluice.Client`
    for the login, the arguments and what each method does.

    ``async with sluice.AsyncClient() as c: job = await c.submit(...)``.
    Many calls may run at once (``asyncio.gather``); max_connections bounds
    the connections they share.
    """

    def __init__(self, server: str | None = None, token: str | None = None, *, ca: str | None = None,
                 timeout: float | None = 60.0, max_connections: int = 100, **httpx_options: Any) -> None:
        self.login: Login = resolve(server, token, ca)
        self._core = Core(self.login, timeout)
        httpx_options.setdefault("verify", ssl_context(self.login.ca))
        httpx_options.setdefault("limits", httpx.Limits(max_connections=max_connections,
                                                        max_keepalive_connections=min(20, max_connections)))
        self._http = httpx.AsyncClient(timeout=timeout, **httpx_options)

    def __repr__(self) -> str:
        return f"<sluice.AsyncClient {self.login.server}>"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def _send(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self._http.send(request)
        except httpx.TransportError as e:
            raise _core.explain(e, request.method, str(request.url)) from e

    async def _call(self, call: Call[T]) -> T:
        return Core.finish(call, await self._send(call.request))

    async def whoami(self) -> User:
        return await self._call(self._core.whoami())

    async def submit(self, job: TransferData | Mapping[str, Any]) -> Submitted:
        return await self._call(self._core.submit(job))

    async def status(self, job: int | Job) -> Job:
        return await self._call(self._core.status(job))

    async def jobs(self, state: str | None = None, *, limit: int = 100, before: int | None = None) -> list[Job]:
        return await self._call(self._core.jobs(state, limit, before))

    async def files(self, job: int | Job, start: int = 0, limit: int = 1000, *,
                    state: str | None = None) -> list[File]:
        return await self._call(self._core.files(job, start, limit, state))

    async def iter_files(self, job: int | Job, *, state: str | None = None,
                         page_size: int = 1000) -> AsyncIterator[File]:
        start: int | None = 0
        while start is not None:
            page = await self.files(job, start, page_size, state=state)
            for f in page:
                if state is None or f.state == state:
                    yield f
            start = _core.next_start(page, page_size)

    async def cancel(self, job: int | Job) -> Job:
        return await self._call(self._core.cancel(job))

    async def estimate(self, source: str, destination: str, size: int, *, sample_size: int | None = None,
                       max_streams: int | None = None, growth: int | None = None, use_history: bool = False,
                       timeout: float | None = None) -> Estimate:
        return await self._call(self._core.estimate(source, destination, size, sample_size=sample_size,
                                                    max_streams=max_streams, growth=growth,
                                                    use_history=use_history, timeout=timeout))

    async def endpoints(self) -> list[Endpoint]:
        return await self._call(self._core.endpoints())

    async def data_token(self, url: str, *, write: bool = False) -> DataToken:
        return await self._call(self._core.data_token(url, write))

    async def events(self, job: int | Job | None = None, *, reconnect: bool = True,
                     patience: float = _core.DEFAULT_PATIENCE, keepalives: bool = False,
                     timeout: float | None = None) -> AsyncIterator[Event]:
        """See :meth:`sluice.Client.events`: an async iterator."""
        f = EventFollower(self._core, None if job is None else _core.job_id(job), reconnect=reconnect,
                          patience=patience, keepalives=keepalives, timeout=timeout)
        while not f.ended:
            req = f.request()
            try:
                resp = await self._http.send(req, stream=True)
                try:
                    if resp.status_code != 200:
                        await resp.aread()
                        f.check_open(resp)
                    async for sse in EventSource(resp).aiter_sse():
                        for item in f.message(sse):
                            if item is RESYNC:
                                for ev in f.resync(await self.status(f.job)):  # type: ignore[arg-type]
                                    yield ev
                            else:
                                yield item
                        if f.ended:
                            return
                    raise StreamEnded()
                finally:
                    await resp.aclose()
            except Exception as e:
                if not f.is_drop(e):
                    raise
                await asyncio.sleep(f.dropped(e))

    async def wait(self, job: int | Job, *, timeout: float | None = None, progress: Any = False,
                   patience: float = _core.DEFAULT_PATIENCE) -> Job:
        """See :meth:`sluice.Client.wait`."""
        jid = _core.job_id(job)
        factory = progress_factory(progress)
        bar = JobProgress(factory, jid) if factory else None
        final: Job | None = None
        try:
            try:
                async for ev in self.events(jid, timeout=timeout, patience=patience):
                    if bar:
                        bar.event(ev)
            except EventStreamError as e:
                if e.subscribed:
                    raise
                await self._poll(jid, timeout, bar)
            final = await self.status(jid)
        finally:
            if bar:
                bar.close(final)
        if _core.ended(final) and final.state != "done":
            failed = [f async for f in self.iter_files(jid, state="failed", page_size=10_000)]
            raise _core.job_error(final, failed)
        return final

    async def _poll(self, jid: int, timeout: float | None, bar: JobProgress | None) -> None:
        p = _core.Poller(jid, timeout)
        while (delay := p.after(await self.status(jid), bar)) is not None:
            await asyncio.sleep(delay)
