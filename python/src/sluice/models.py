"""The JSON documents of Sluice's REST API as Python types.

Each type mirrors one schema of the server's OpenAPI document
(``GET /openapi.json``, built from the Go package ``wire``), named in
:data:`SCHEMAS`: answers are frozen dataclasses, requests are
``TypedDict``\\ s (plain dicts, as FTS3's client builds them). Fields carry
the JSON names, except where a name is a Python keyword (``class`` is
``class_``). The SDK's test suite compares every type here with the
schema of a running server, field by field and in both directions, so
that the two cannot drift apart unnoticed.

Answers keep fields a newer server adds in :attr:`raw` rather than fail.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

__all__ = [
    "Job", "Submitted", "File", "Endpoint", "Estimate", "EstimateSample", "Event", "User",
    "DataToken", "FileIn", "JobIn", "EstimateIn", "DataTokenIn", "AdaptiveSpec", "ParamsIn",
    "JobState", "FileState", "SyncLevel", "ChecksumAlgorithm", "JobClass", "IfExists",
    "SCHEMAS", "decode",
]

JobState = Literal["active", "done", "failed", "canceled"]
FileState = Literal["resolving", "queued", "running", "done", "failed", "canceled"]
#: Globus's sync levels, cheapest first; "" is none.
SyncLevel = Literal["exists", "size", "mtime", "checksum", ""]
ChecksumAlgorithm = Literal["adler32", "md5", "sha256", "crc32c", "none"]
JobClass = Literal["interactive", "batch"]
IfExists = Literal["skip_identical", "fail", "replace", "sync"]
Selection = Literal["bos", "eas", "ms", "ntss", "tcs", "tcs-minus", "tcs-dynamic", ""]

T = typing.TypeVar("T")

#: The SDK's type of each schema of the OpenAPI document it mirrors.
SCHEMAS: dict[str, type] = {}


def _schema(name: str) -> typing.Callable[[T], T]:
    def register(cls: T) -> T:
        SCHEMAS[name] = cls  # type: ignore[assignment]
        cls.__schema__ = name  # type: ignore[attr-defined]
        return cls

    return register


def _json(name: str, **kw: Any) -> Any:
    """A field whose JSON name is not its Python name."""
    return field(metadata={"json": name}, **kw)


def _raw() -> Any:
    """The answer as the server sent it: the SDK's own, not the API's."""
    return field(default=None, compare=False, repr=False, metadata={"sdk": True})


@_schema("JobOut")
@dataclass(frozen=True, kw_only=True)
class Job:
    """A job's status (``GET /v1/jobs/{id}``)."""

    id: int
    owner: str
    vo: str
    class_: str = _json("class")
    state: JobState
    created: _dt.datetime
    verify_checksum: bool
    checksum_algorithm: str
    overwrite: bool
    if_exists: IfExists
    files: int
    files_done: int
    files_failed: int
    files_canceled: int
    bytes: int
    bytes_done: int
    #: Bytes per second now.
    throughput: float
    label: str = ""
    priority: int = 0
    submission_id: str = ""
    finished: _dt.datetime | None = None
    deadline: _dt.datetime | None = None
    metadata: Any = None
    optimization: bool = False
    streams: int = 0
    adaptive: bool = False
    selection: str = ""
    preserve_mtime: bool = False
    #: A directory of the job is still being listed: more files may come.
    listing: bool = False
    listing_error: str = ""
    sync_level: SyncLevel = ""
    files_in_place: int = 0
    #: Estimated seconds to completion at the current throughput.
    eta_seconds: float = 0.0
    raw: dict[str, Any] | None = _raw()

    @property
    def active(self) -> bool:
        """The job has not ended."""
        return self.state == "active"


@_schema("SubmitOut")
@dataclass(frozen=True, kw_only=True)
class Submitted(Job):
    """A submission's answer: the job, and what of the submission the
    service accepted without honouring (FTS3 parameters it does not use)."""

    warnings: list[str] | None = None
    #: False when the server returned an earlier job with the same
    #: submission_id (HTTP 200 rather than 201).
    created_now: bool = field(default=True, metadata={"sdk": True})


@_schema("FileOut")
@dataclass(frozen=True, kw_only=True)
class File:
    """One file of a job (``GET /v1/jobs/{id}/files``)."""

    index: int
    source: str
    destination: str
    #: -1 while not yet stat'ed.
    size: int
    state: FileState
    bytes_done: int
    wait_seconds: float
    transfer_seconds: float
    metadata: Any = None
    cc: int = 0
    attempts: int = 0
    preemptions: int = 0
    #: Verified checksum, ALGO:HEX.
    checksum: str = ""
    expected_checksum: str = ""
    throughput: float = 0.0
    slowdown: float = 0.0
    started: _dt.datetime | None = None
    finished: _dt.datetime | None = None
    error: str = ""
    #: How a done file ended when not by a copy ("already in place").
    note: str = ""
    raw: dict[str, Any] | None = _raw()


@_schema("EndpointOut")
@dataclass(frozen=True, kw_only=True)
class Endpoint:
    """An endpoint (an agent, or a storage server an admin registered)."""

    name: str
    url: str
    up: bool
    #: Observed aggregate bytes/s now.
    throughput: float
    cc: int
    registered: _dt.datetime
    last_seen: _dt.datetime
    kind: Literal["agent", "storage"]
    max_throughput: float = 0.0
    max_cc: int = 0
    peak_throughput: float = 0.0
    via: str = ""
    credential: str = ""
    raw: dict[str, Any] | None = _raw()


@_schema("EstimateSample")
@dataclass(frozen=True, kw_only=True)
class EstimateSample:
    """One sample transfer of an estimate."""

    streams: int
    throughput: float
    seconds: float
    bytes: int = 0
    raw: dict[str, Any] | None = _raw()


@_schema("EstimateOut")
@dataclass(frozen=True, kw_only=True)
class Estimate:
    """How a transfer should run: best streams, throughput and time."""

    source: str
    destination: str
    streams: int
    #: Predicted bytes per second with that many streams.
    throughput: float
    throughput_fitted: float
    uncertainty: float
    clamped: bool
    #: Predicted transfer time of size bytes.
    seconds: float
    size: int
    sample_size: int
    samples: list[EstimateSample] | None
    model: str
    cost_seconds: float
    cost_bytes: int
    from_history: bool
    measured_at: _dt.datetime
    note: str = ""
    raw: dict[str, Any] | None = _raw()


@_schema("Event")
@dataclass(frozen=True, kw_only=True)
class Event:
    """One change from the event stream (``GET /v1/events``).

    type is ``job`` (a job's state changed), ``task`` (a file's),
    ``progress`` (about once a second per active job), or, from the SDK
    after it reconnected a dropped stream of one job, ``resync``: the
    job's counters and state read again, so that nothing that happened
    while the stream was down is lost (its :attr:`state` is the job's).
    """

    type: str
    at: _dt.datetime
    job: int
    task: int = 0
    state: str = ""
    detail: str = ""
    files_done: int = 0
    files: int = 0
    bytes_done: int = 0
    bytes: int = 0
    throughput: float = 0.0
    raw: dict[str, Any] | None = _raw()


@_schema("UserOut")
@dataclass(frozen=True, kw_only=True)
class User:
    """A user (``GET /v1/whoami``)."""

    name: str
    vo: str
    admin: bool
    raw: dict[str, Any] | None = _raw()


@_schema("DataTokenOut")
@dataclass(frozen=True, kw_only=True)
class DataToken:
    """A data token for one path of an agent (``POST /v1/data-tokens``)."""

    endpoint: str
    #: The agent's address, sluice://host:port or sluices://host:port.
    agent: str
    path: str
    #: What the token covers: the path (reading) or its directory (writing).
    prefix: str
    scope: str
    token: str
    expires: _dt.datetime
    raw: dict[str, Any] | None = _raw()


# Requests: plain dicts. The classes ending in _Required hold the keys a
# request must have (Python 3.10 has no typing.Required).


@_schema("FileIn")
class FileIn(TypedDict, total=False):
    """One file of a submission: source and destination (Sluice's form) or
    sources and destinations (FTS3's)."""

    source: str
    destination: str
    sources: list[str] | None
    destinations: list[str] | None
    size: int
    filesize: int
    checksum: str
    metadata: Any
    activity: str
    recursive: bool


@_schema("AdaptiveSpec")
class AdaptiveSpec(TypedDict, total=False):
    """An adaptive job's client parameters (Chervenak et al.)."""

    ci: int
    cmax: int
    delta: int
    d: int
    p: int
    t: float


@_schema("ParamsIn")
class ParamsIn(TypedDict, total=False):
    """FTS3's job parameters (others than these are passed on as sent)."""

    verify_checksum: Any
    priority: int
    retry: int
    nostreams: int
    overwrite: bool


# "class" is a Python keyword: the functional form names it.
_JobInOptional = TypedDict(
    "_JobInOptional",
    {
        "class": JobClass,
        "priority": int,
        "label": str,
        "deadline": str,
        "verify_checksum": bool,
        "checksum_algorithm": ChecksumAlgorithm,
        "retry": int,
        "submission_id": str,
        "params": ParamsIn,
        "streams": int,
        "adaptive": bool,
        "adaptive_params": AdaptiveSpec,
        "selection": Selection,
        "optimization": bool,
        "preserve_mtime": bool,
        "sync_level": SyncLevel,
        "overwrite": bool,
    },
    total=False,
)


@_schema("JobIn")
class JobIn(_JobInOptional):
    """A submission (``POST /v1/jobs``), in Sluice's shape or FTS3's."""

    files: list[FileIn] | None


class _EstimateInRequired(TypedDict):
    source: str
    destination: str
    size: int


@_schema("EstimateIn")
class EstimateIn(_EstimateInRequired, total=False):
    """An estimation request (``POST /v1/estimate``)."""

    sample_size: int
    buffer: int
    max_streams: int
    growth: int
    use_history: bool


class _DataTokenInRequired(TypedDict):
    url: str


@_schema("DataTokenIn")
class DataTokenIn(_DataTokenInRequired, total=False):
    """A data token request (``POST /v1/data-tokens``)."""

    write: bool


# Decoding answers.

_FRACTION = re.compile(r"(\.\d+)?(Z|[+-]\d\d:\d\d)?$")


def parse_time(s: str) -> _dt.datetime:
    """An RFC 3339 time as Go writes it (nanoseconds, Z), timezone-aware."""
    m = _FRACTION.search(s)
    head = s[: m.start()] if m else s
    frac = (m.group(1) or "") if m else ""
    zone = (m.group(2) or "") if m else ""
    if frac:
        frac = (frac[1:] + "000000")[:6]
        head += "." + frac
    if zone in ("", "Z"):
        zone = "+00:00"
    return _dt.datetime.fromisoformat(head + zone)


def json_name(f: dataclasses.Field[Any]) -> str:
    """The JSON name of a dataclass field."""
    return str(f.metadata.get("json", f.name))


def api_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of an answer type that the API sends (not the SDK's own)."""
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("sdk")]


_HINTS: dict[type, dict[str, Any]] = {}


def hints(cls: type) -> dict[str, Any]:
    """The resolved type hints of a type (cached)."""
    h = _HINTS.get(cls)
    if h is None:
        h = typing.get_type_hints(cls, globalns=vars(sys.modules[__name__]))
        _HINTS[cls] = h
    return h


def _convert(tp: Any, v: Any) -> Any:
    if v is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if arg is type(None):
                continue
            return _convert(arg, v)
    if tp is _dt.datetime:
        return parse_time(v)
    if dataclasses.is_dataclass(tp):
        return decode(tp, v)  # type: ignore[arg-type]
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_convert(item, x) for x in v]
    if tp is float and isinstance(v, int):
        return float(v)
    return v


def decode(cls: type[T], obj: dict[str, Any], **extra: Any) -> T:
    """An answer type from its JSON object; fields it lacks take their
    defaults, fields it has that the type does not know stay in raw."""
    if not isinstance(obj, dict):
        raise TypeError(f"{cls.__name__}: want a JSON object, got {type(obj).__name__}")
    h = hints(cls)
    kw: dict[str, Any] = {}
    for f in api_fields(cls):
        name = json_name(f)
        if name in obj:
            kw[f.name] = _convert(h[f.name], obj[name])
    kw.update(extra)
    if "raw" in {f.name for f in dataclasses.fields(cls)}:  # type: ignore[arg-type]
        kw["raw"] = obj
    return cls(**kw)
