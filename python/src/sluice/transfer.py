"""Building a job, in the spirit of globus-sdk's ``TransferData``.

::

    job = sluice.TransferData(label="run42", sync_level="checksum")
    job.add("sluice://dtn1/data/run42/calib.h5", "sluice://dtn2/archive/run42/calib.h5")
    job.add_dir("sluice://dtn1/data/run42/raw", "sluice://dtn2/archive/run42/raw")
    client.submit(job)

FTS3's shapes are taken as they are: a transfer from
``fts3.rest.client.easy.new_transfer`` (``{"sources": [...],
"destinations": [...], "filesize", "checksum", "metadata", ...}``) with
:meth:`TransferData.add`, and a whole job from ``new_job``
(``{"files": [...], "params": {...}}``) with :meth:`TransferData.from_fts3`
or straight to :meth:`Client.submit`: the server reads FTS3's fields and
parameters with FTS3's meaning (``params.overwrite`` false fails every
file whose destination exists, as in FTS3).
"""

from __future__ import annotations

import copy
import datetime as _dt
from collections.abc import Mapping
from typing import Any, get_args

from .models import ChecksumAlgorithm, FileIn, JobClass, JobIn, SyncLevel

__all__ = ["TransferData"]

_SYNC_LEVELS = tuple(s for s in get_args(SyncLevel) if s)
_CHECKSUMS = get_args(ChecksumAlgorithm)
_CLASSES = get_args(JobClass)
# FTS3's sync levels are Globus's numbers: 0 exists, 1 size, 2 mtime, 3 checksum.
_SYNC_NUMBERS = dict(enumerate(_SYNC_LEVELS))
# Fields of an FTS3 transfer (new_transfer) the server reads.
_FTS3_FILE_KEYS = set(FileIn.__annotations__)


def _url(value: Any, what: str) -> str:
    if not isinstance(value, str) or "://" not in value:
        raise ValueError(f"{what} {value!r}: want a URL such as sluice://ENDPOINT/path")
    return value


def _sync_level(level: str | int | None) -> str:
    if level is None or level == "":
        return ""
    if isinstance(level, int) and not isinstance(level, bool):
        if level not in _SYNC_NUMBERS:
            raise ValueError(f"sync level {level}: want 0 to 3 (exists, size, mtime, checksum)")
        return _SYNC_NUMBERS[level]
    if level not in _SYNC_LEVELS:
        raise ValueError(f"sync level {level!r}: want one of {', '.join(_SYNC_LEVELS)}")
    return str(level)


class TransferData:
    """A job to submit: files and directories with their destinations, and
    how the job runs.

    Parameters (each optional; the server's defaults otherwise):

    label: a name for the job. batch: True for the batch (background) class,
    False for interactive (the default). checksum: the verification's
    algorithm (adler32, md5, sha256, crc32c; "none" or verify=False to
    skip verification). overwrite: True replaces files already at their
    destinations; False (the default) keeps them: an identical one is done
    without a copy, any other fails. sync_level: copy only what is missing
    or differs by this test and replace what differs (exists, size, mtime,
    checksum, or Globus's 0 to 3). preserve_mtime: give each file its
    source's modification time. priority: 1 to 5. retry: transient failures
    tolerated per file. submission_id: makes submission idempotent.
    deadline: when the job should be done by (recorded, not scheduled by).
    streams: fix each file's concurrency. optimization: estimate each pair's
    best concurrency first. extra: further fields of the API's job, as is.
    """

    def __init__(
        self,
        *,
        label: str | None = None,
        batch: bool | None = None,
        checksum: str | None = None,
        verify: bool | None = None,
        overwrite: bool | None = None,
        sync_level: str | int | None = None,
        preserve_mtime: bool = False,
        priority: int | None = None,
        retry: int | None = None,
        submission_id: str | None = None,
        deadline: _dt.datetime | str | None = None,
        streams: int | None = None,
        optimization: bool = False,
        **extra: Any,
    ) -> None:
        self.files: list[FileIn] = []
        self.params: dict[str, Any] | None = None
        self.label = label
        self.batch = batch
        if checksum is not None and checksum not in _CHECKSUMS:
            raise ValueError(f"checksum {checksum!r}: want one of {', '.join(_CHECKSUMS)}")
        self.checksum = checksum
        self.verify = verify
        self.overwrite = overwrite
        self.sync_level = _sync_level(sync_level)
        self.preserve_mtime = preserve_mtime
        if priority is not None and not 1 <= priority <= 5:
            raise ValueError(f"priority {priority}: want 1 to 5")
        self.priority = priority
        self.retry = retry
        self.submission_id = submission_id
        self.deadline = deadline
        self.streams = streams
        self.optimization = optimization
        self.extra = dict(extra)
        self._check_sync()

    def _check_sync(self) -> None:
        if self.sync_level and self.overwrite is False:
            raise ValueError(
                f"sync_level {self.sync_level} replaces the files that differ from their source, "
                "and overwrite=False says to replace nothing: give one")

    def add(self, source: str | Mapping[str, Any], destination: str | None = None, *,
            size: int | None = None, checksum: str | None = None, metadata: Any = None) -> TransferData:
        """Add one file: its source and destination URLs
        (sluice://ENDPOINT/path, or a storage endpoint's gsiftp://, root://,
        https://, s3:// URLs), with its size if known (else the source is
        stat'ed), the expected checksum (ALGO:HEX) and anything to attach
        to the file (given back with it).

        A mapping instead of source is an FTS3 transfer
        (``new_transfer(...)``: sources, destinations, filesize,
        checksum, metadata, activity) or a file in Sluice's JSON, added as
        it is. Returns self, so that calls chain.
        """
        if isinstance(source, Mapping):
            if destination is not None:
                raise ValueError("add(mapping): give the destination inside the mapping")
            item = {k: v for k, v in source.items() if v is not None}
            unknown = set(item) - _FTS3_FILE_KEYS
            if unknown:
                # FTS3's new_transfer sets selection_strategy and the like
                # per job, not per file: passing them would be refused.
                raise ValueError(f"add(mapping): fields {', '.join(sorted(unknown))} are not a file's "
                                 f"(a file has {', '.join(sorted(_FTS3_FILE_KEYS))})")
            has_src = "source" in item or item.get("sources")
            has_dst = "destination" in item or item.get("destinations")
            if not has_src or not has_dst:
                raise ValueError("add(mapping): want source(s) and destination(s)")
            self.files.append(copy.deepcopy(item))  # type: ignore[arg-type]
            return self
        if destination is None:
            raise ValueError("add: give a source and a destination")
        f: FileIn = {"source": _url(source, "source"), "destination": _url(destination, "destination")}
        if size is not None:
            if size < 0:
                raise ValueError(f"size {size}: want 0 or more")
            f["size"] = size
        if checksum:
            if ":" not in checksum:
                raise ValueError(f"checksum {checksum!r}: want ALGO:HEX (e.g. adler32:0a1b2c3d)")
            f["checksum"] = checksum
        if metadata is not None:
            f["metadata"] = metadata
        self.files.append(f)
        return self

    def add_dir(self, source: str, destination: str, *, recursive: bool = True,
                sync_level: str | int | None = None) -> TransferData:
        """Add a directory, copied whole into destination as ``cp -r`` copies
        it (its contents land in destination). The service lists it a page
        at a time and starts its files while it lists; empty directories
        are made too.

        recursive must be True: the service copies directories whole (to
        pick some of a directory's files, list it with the fsspec file
        system, ``fsspec.filesystem("sluice").ls(url)``, and add them). sync_level sets the job's sync level, as
        the constructor's does (Globus's add_item with sync_level).
        """
        if not recursive:
            raise ValueError(
                "add_dir(recursive=False): the service copies a directory whole; to copy only some "
                "of its files, list it (fsspec.filesystem('sluice').ls(url)) and add() them")
        level = _sync_level(sync_level)
        if level:
            if self.sync_level and self.sync_level != level:
                raise ValueError(f"sync level {level}: the job already has sync level {self.sync_level}")
            self.sync_level = level
            self._check_sync()
        self.files.append({"source": _url(source, "source").rstrip("/"),
                           "destination": _url(destination, "destination").rstrip("/"),
                           "recursive": True})
        return self

    @classmethod
    def from_fts3(cls, job: Mapping[str, Any], **kw: Any) -> TransferData:
        """A job from FTS3's job document (``fts3.rest.client.easy.new_job``:
        ``{"files": [...], "params": {...}}``). Its params keep FTS3's
        meaning on the server; keyword arguments add Sluice's fields."""
        if not isinstance(job, Mapping) or not isinstance(job.get("files"), list):
            raise ValueError("from_fts3: want FTS3's job document, {\"files\": [...], \"params\": {...}}")
        t = cls(**kw)
        for f in job["files"]:
            t.add(f)
        if job.get("params") is not None:
            t.params = copy.deepcopy(dict(job["params"]))
        for k, v in job.items():
            if k not in ("files", "params") and v is not None:
                t.extra.setdefault(k, v)
        return t

    def __len__(self) -> int:
        return len(self.files)

    def to_dict(self) -> JobIn:
        """The job as the API's JSON (POST /v1/jobs)."""
        if not self.files:
            raise ValueError("the job has no files: add() or add_dir() some")
        self._check_sync()
        job: dict[str, Any] = dict(self.extra)
        job["files"] = copy.deepcopy(self.files)
        if self.params is not None:
            job["params"] = copy.deepcopy(self.params)
        if self.label is not None:
            job["label"] = self.label
        if self.batch is not None:
            job["class"] = "batch" if self.batch else "interactive"
        if self.checksum is not None:
            job["checksum_algorithm"] = self.checksum
        if self.verify is not None:
            job["verify_checksum"] = self.verify
        if self.overwrite is not None:
            job["overwrite"] = self.overwrite
        if self.sync_level:
            job["sync_level"] = self.sync_level
            params = job.get("params")
            if isinstance(params, dict) and params.get("overwrite") is False:
                # FTS3's default written out; the sync level asks for its
                # replacing (as `sluice submit --sync -f` does).
                del params["overwrite"]
        if self.preserve_mtime:
            job["preserve_mtime"] = True
        for k in ("priority", "retry", "submission_id", "streams"):
            v = getattr(self, k)
            if v is not None:
                job[k] = v
        if self.optimization:
            job["optimization"] = True
        if self.deadline is not None:
            d = self.deadline
            if isinstance(d, _dt.datetime):
                if d.tzinfo is None:
                    raise ValueError("deadline: give a timezone-aware datetime")
                d = d.isoformat()
            job["deadline"] = d
        return job  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<TransferData {len(self.files)} item(s) label={self.label!r}>"
