"""Exceptions of the Sluice SDK.

Every exception the SDK raises on purpose is a :class:`SluiceError`. An
answer of the server other than success is an :class:`APIError` carrying
the server's RFC 9457 problem document (status, title, detail, and the
validation errors' messages and locations); its subclasses name the
statuses a script handles differently. A job that ends other than done is
a :class:`JobError` from :meth:`Client.wait`, naming the files that failed
and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import File, Job

__all__ = [
    "SluiceError", "ConfigError", "ServerUnreachable", "APIError", "BadRequest", "Unauthorized",
    "Forbidden", "NotFound", "Conflict", "Invalid", "Unavailable", "EventStreamError",
    "JobError", "JobFailed", "JobCanceled",
]


class SluiceError(Exception):
    """Base of every error the SDK raises."""


class ConfigError(SluiceError):
    """No server or token could be found, or the login file is unreadable."""


class ServerUnreachable(SluiceError):
    """The server could not be reached or the connection broke (the request
    may or may not have been carried out). ``__cause__`` is httpx's error."""


class APIError(SluiceError):
    """The server answered with an error: an RFC 9457 problem document.

    Attributes are the problem's members: :attr:`status` (the HTTP status),
    :attr:`title`, :attr:`detail`, :attr:`errors` (validation errors, each
    a dict with ``message`` and ``location``), and :attr:`problem`, the
    whole document as sent.
    """

    def __init__(self, status: int, problem: dict[str, Any] | None = None, *,
                 method: str = "", path: str = "", reason: str = "") -> None:
        problem = dict(problem or {})
        self.status = status
        self.title: str = str(problem.get("title") or reason)
        self.detail: str = str(problem.get("detail") or "")
        self.errors: list[dict[str, Any]] = [e for e in (problem.get("errors") or []) if isinstance(e, dict)]
        self.type: str = str(problem.get("type") or "about:blank")
        self.instance: str = str(problem.get("instance") or "")
        self.problem = problem
        self.method = method
        self.path = path
        super().__init__(self._message())

    def _message(self) -> str:
        msg = f"server: {self.status} {self.title}"
        if self.detail:
            msg += f": {self.detail}"
        for e in self.errors:
            msg += f"; {e.get('message', '')}"
            if e.get("location"):
                msg += f" ({e['location']})"
        if self.method:
            msg += f" [{self.method} {self.path}]"
        return msg


class BadRequest(APIError):
    """400: the request is malformed."""


class Unauthorized(APIError):
    """401: the API token is unknown, expired or revoked."""


class Forbidden(APIError):
    """403: the caller may not do this (an access rule, an admin's call)."""


class NotFound(APIError):
    """404: no such job or endpoint (or not the caller's)."""


class Conflict(APIError):
    """409: the request clashes with the current state."""


class Invalid(APIError):
    """422: the request is well-formed JSON the server refuses; detail and
    errors say which field and why."""


class Unavailable(APIError):
    """503: the service cannot take the request now (an endpoint or its
    database is down); the same request may work later."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
    409: Conflict, 422: Invalid, 503: Unavailable,
}


def api_error(status: int, problem: dict[str, Any] | None, **kw: Any) -> APIError:
    """The APIError subclass for a status."""
    return _BY_STATUS.get(status, APIError)(status, problem, **kw)


class EventStreamError(SluiceError):
    """The server ended an event stream on purpose, saying why in an error
    event (the token expired or was revoked; too many streams open)."""

    def __init__(self, detail: str, *, subscribed: bool = True) -> None:
        self.detail = detail
        #: False when the server refused the stream before subscribing the
        #: caller (too many streams open): no event of it was missed.
        self.subscribed = subscribed
        super().__init__(f"event stream: {detail}")


class JobError(SluiceError):
    """A job ended other than done.

    :attr:`job` is its final status; :attr:`failed` lists the files that
    failed (each with its error), :attr:`canceled_files` how many were
    canceled.
    """

    def __init__(self, job: Job, failed: list[File]) -> None:
        self.job = job
        self.failed = failed
        self.canceled_files = job.files_canceled
        super().__init__(self._message())

    def _message(self) -> str:
        j = self.job
        msg = (f"job {j.id} {j.state}: {j.files_done} of {j.files} files done, "
               f"{j.files_failed} failed, {j.files_canceled} canceled")
        if j.listing_error:
            msg += f"; the listing stopped: {j.listing_error}"
        shown = self.failed[:10]
        for f in shown:
            msg += f"\n  {f.source} -> {f.destination}: {f.error or f.state}"
        if len(self.failed) > len(shown):
            msg += f"\n  ... and {len(self.failed) - len(shown)} more (see .failed)"
        return msg


class JobFailed(JobError):
    """Some of the job's files failed (the others may be done)."""


class JobCanceled(JobError):
    """The job was canceled before all its files were done."""
