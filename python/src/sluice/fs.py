"""``sluice://ENDPOINT/path`` as an fsspec file system (``pip install
'sluice[fsspec]'``), so that pandas, xarray, h5py and anything else that
opens fsspec URLs read and write the service's agents directly::

    import pandas as pd
    df = pd.read_csv("sluice://dtn1/data/run42/summary.csv")

    import fsspec
    fs = fsspec.filesystem("sluice")            # the login of `sluice login`
    fs.ls("sluice://dtn1/data/run42")
    with fs.open("sluice://dtn1/data/run42/r00.h5") as f:   # read by ranges
        f.seek(1 << 30); head = f.read(4096)
    fs.get("sluice://dtn1/data/run42/r00.h5", "r00.h5")
    fs.put("calib.h5", "sluice://dtn2/home/alice/calib.h5")

Each access asks the server for a data token (``POST /v1/data-tokens``),
which the caller's access rules bound exactly as they bound a job's file,
and then talks to the agent itself (its HTTP protocol,
docs/agent-protocol.md); tokens are kept for their hour and reused for
the paths below the one they were given for. Writes go to a temporary
file beside the destination, which is synced, checked (its SHA-256 at the
agent against the bytes sent) and renamed into place: a reader never sees
half a file. Paths are file names, not URLs: no percent-encoding.
Storage endpoints (GridFTP, XRootD, S3) are refused by the server: their
credentials stay with it; copy to or from them with a job.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import posixpath
import secrets
import threading
from typing import Any

import httpx

try:
    from fsspec.spec import AbstractBufferedFile, AbstractFileSystem
except ImportError as e:  # pragma: no cover - the extra is not installed
    raise ImportError("sluice.fs needs fsspec: pip install 'sluice[fsspec]'") from e

from ._core import quote_path
from .client import Client
from .config import ssl_context
from .errors import APIError, Forbidden, NotFound, Unauthorized
from .models import DataToken

__all__ = ["SluiceFileSystem", "SluiceFile", "AgentError"]

#: A token is renewed when it has less than this left (seconds).
TOKEN_MARGIN = 120.0
#: Bytes per request when a file is read whole or uploaded.
CHUNK = 8 << 20


class AgentError(OSError):
    """An agent's error answer ({"error", "kind"}), as an OSError whose
    errno-like subclass follows the kind (FileNotFoundError for not_found,
    PermissionError for permission, ...)."""


_KINDS: dict[str, type[OSError]] = {
    "not_found": FileNotFoundError, "permission": PermissionError, "unauthorized": PermissionError,
    "exist": FileExistsError,
}


def _agent_error(resp: httpx.Response, what: str) -> OSError:
    kind, msg = "", resp.text[:512]
    try:
        doc = resp.json()
        kind, msg = str(doc.get("kind", "")), str(doc.get("error", msg))[:512]
    except ValueError:
        pass
    cls = _KINDS.get(kind, AgentError)
    return cls(f"{what}: {msg} ({resp.status_code} {kind})".rstrip())


def _api_error(e: APIError, what: str) -> OSError:
    if isinstance(e, NotFound):
        return FileNotFoundError(f"{what}: {e.detail or e}")
    if isinstance(e, (Forbidden, Unauthorized)):
        return PermissionError(f"{what}: {e.detail or e}")
    return OSError(f"{what}: {e}")


def _covers(prefix: str, path: str) -> bool:
    return prefix == "/" or path == prefix or path.startswith(prefix.rstrip("/") + "/")


class SluiceFileSystem(AbstractFileSystem):
    """fsspec file system of a Sluice service's agents.

    client: a :class:`sluice.Client` (default: one from the login of
    ``sluice login``, or server, token and ca given here).
    """

    protocol = ("sluice",)
    root_marker = ""

    def __init__(self, client: Client | None = None, *, server: str | None = None, token: str | None = None,
                 ca: str | None = None, timeout: float = 60.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.client = client or Client(server, token, ca=ca, timeout=timeout)
        self._http = httpx.Client(timeout=timeout, verify=ssl_context(self.client.login.ca),
                                  follow_redirects=False)
        self._tokens: dict[tuple[str, bool], list[DataToken]] = {}
        self._lock = threading.Lock()

    # Paths: "ENDPOINT/a/b" (the protocol stripped, as fsspec keeps them).

    @staticmethod
    def _split(path: str) -> tuple[str, str]:
        p = SluiceFileSystem._strip_protocol(path)
        endpoint, _, rest = p.partition("/")
        if not endpoint or ":" in endpoint:
            raise ValueError(f"{path!r}: want sluice://ENDPOINT/path (an endpoint's name, not its address)")
        parts = [s for s in rest.split("/") if s not in ("", ".")]
        if ".." in parts:
            raise ValueError(f"{path!r}: '..' is not allowed in a path")
        return endpoint, "/" + "/".join(parts)

    @staticmethod
    def _name(endpoint: str, p: str) -> str:
        return endpoint + ("" if p == "/" else p)

    # Data tokens.

    def _token(self, endpoint: str, p: str, write: bool) -> DataToken:
        """A data token covering path p (write: writing in its directory)."""
        need = posixpath.dirname(p) if write else p
        now = _dt.datetime.now(_dt.timezone.utc)
        with self._lock:
            for t in self._tokens.get((endpoint, write), []):
                if _covers(t.prefix, need) and (t.expires - now).total_seconds() > TOKEN_MARGIN:
                    return t
        url = f"sluice://{endpoint}{quote_path(p)}"
        try:
            t = self.client.data_token(url, write=write)
        except APIError as e:
            raise _api_error(e, url) from e
        with self._lock:
            live = [x for x in self._tokens.get((endpoint, write), []) if x.expires > now]
            self._tokens[(endpoint, write)] = live + [t]
        return t

    def _agent(self, method: str, t: DataToken, route: str, p: str, *, params: dict | None = None,
               headers: dict | None = None, content: Any = None, json: Any = None,
               stream: bool = False) -> httpx.Response:
        scheme, _, host = t.agent.partition("://")
        base = ("https://" if scheme == "sluices" else "http://") + host
        url = f"{base}/v1/{route}{quote_path(p)}" if route else f"{base}/v1/{p}"
        h = {"Authorization": f"Bearer {t.token}"}
        h.update(headers or {})
        req = self._http.build_request(method, url, params=params, headers=h, content=content, json=json)
        try:
            resp = self._http.send(req, stream=stream)
        except httpx.TransportError as e:
            raise ConnectionError(f"agent {t.endpoint} ({t.agent}): {e}") from e
        if "sluice-agent" not in resp.headers:
            resp.close()
            raise AgentError(f"{t.agent} did not answer as a Sluice agent (no Sluice-Agent header)")
        if resp.status_code >= 300:
            if stream:
                resp.read()
            raise _agent_error(resp, f"{method} sluice://{t.endpoint}{p}")
        return resp

    # Reading.

    def _entry(self, endpoint: str, d: dict) -> dict:
        e = {"name": self._name(endpoint, d["path"]), "size": 0 if d.get("dir") else int(d.get("size", 0)),
             "type": "directory" if d.get("dir") else "file"}
        if d.get("mtime"):
            e["mtime"] = d["mtime"]
        if d.get("error"):
            e["error"] = d["error"]  # listed, but cannot be read (a broken link, a device)
            e["type"] = "other"
        return e

    def info(self, path: str, **kw: Any) -> dict:
        endpoint, p = self._split(path)
        t = self._token(endpoint, p, False)
        return self._entry(endpoint, self._agent("GET", t, "stat", p).json())

    def ls(self, path: str, detail: bool = True, **kw: Any) -> list:
        endpoint, p = self._split(path)
        t = self._token(endpoint, p, False)
        try:
            listed = self._agent("GET", t, "list", p).json()
        except AgentError:
            # A file is not listed by the agent (400, not a directory);
            # fsspec lists it as itself.
            e = self.info(path)
            if e["type"] == "directory":
                raise
            listed, entries = None, [e]
        if listed is not None:
            entries = [self._entry(endpoint, d) for d in listed]
        entries.sort(key=lambda e: e["name"])
        return entries if detail else [e["name"] for e in entries]

    def find(self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False,
             **kw: Any):
        if maxdepth is not None:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kw)
        # The agent lists a tree in one request.
        endpoint, p = self._split(path)
        t = self._token(endpoint, p, False)
        out = {}
        for d in self._agent("GET", t, "list", p, params={"recursive": "1"}).json():
            e = self._entry(endpoint, d)
            if e["type"] != "directory" or withdirs:
                out[e["name"]] = e
        names = sorted(out)
        return {n: out[n] for n in names} if detail else names

    def modified(self, path: str) -> _dt.datetime:
        from .models import parse_time

        return parse_time(self.info(path)["mtime"])

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kw: Any) -> bytes:
        endpoint, p = self._split(path)
        if start is not None and start < 0 or end is not None and end < 0:
            size = self.info(path)["size"]
            start = size + start if start is not None and start < 0 else start
            end = size + end if end is not None and end < 0 else end
        return self._read(endpoint, p, start or 0, end)

    def _read(self, endpoint: str, p: str, start: int, end: int | None) -> bytes:
        """Bytes [start, end) of a file (end None: to its end)."""
        if end is not None and end <= start:
            return b""
        t = self._token(endpoint, p, False)
        headers = {}
        if start or end is not None:
            headers["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
        try:
            resp = self._agent("GET", t, "files", p, headers=headers)
        except AgentError as e:
            if "416" in str(e):  # a range beyond the end: nothing there
                return b""
            raise
        return resp.content

    def get_file(self, rpath: str, lpath: str, callback: Any = None, **kw: Any) -> None:
        if self.isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        endpoint, p = self._split(rpath)
        t = self._token(endpoint, p, False)
        resp = self._agent("GET", t, "files", p, stream=True)
        tmp = f"{lpath}.sluice-part-{secrets.token_hex(4)}"
        try:
            if callback is not None:
                callback.set_size(int(resp.headers.get("content-length", 0)) or None)
            with open(tmp, "wb") as f:
                for chunk in resp.iter_bytes(CHUNK):
                    f.write(chunk)
                    if callback is not None:
                        callback.relative_update(len(chunk))
            os.replace(tmp, lpath)
        finally:
            resp.close()
            if os.path.exists(tmp):
                os.remove(tmp)

    # Writing.

    def _temp(self, p: str) -> str:
        d, base = posixpath.split(p)
        return posixpath.join(d, f".{base}.sluice-part-{secrets.token_hex(6)}")

    def _commit(self, t: DataToken, tmp: str, p: str, sha256: str) -> None:
        """Sync tmp, check its bytes are those sent, rename it to p."""
        try:
            self._agent("POST", t, "sync", tmp)
            got = self._agent("GET", t, "checksum", tmp, params={"algo": "sha256"}).json().get("value", "")
            if got != sha256:
                raise AgentError(f"sluice://{t.endpoint}{p}: the bytes written differ from those sent "
                                 f"(sha256 {got} at the agent, {sha256} sent); nothing was put in place")
            self._agent("POST", t, "", "rename", json={"from": tmp, "to": p, "replace": True})
        except BaseException:
            self._discard(t, tmp)
            raise

    def _discard(self, t: DataToken, tmp: str) -> None:
        try:
            self._agent("DELETE", t, "files", tmp)
        except (OSError, ConnectionError):
            pass

    def put_file(self, lpath: str, rpath: str, callback: Any = None, mode: str = "overwrite", **kw: Any) -> None:
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        endpoint, p = self._split(rpath)
        if mode == "create" and self.exists(rpath):
            raise FileExistsError(rpath)
        t = self._token(endpoint, p, True)
        tmp = self._temp(p)
        size = os.path.getsize(lpath)
        if callback is not None:
            callback.set_size(size)
        h = hashlib.sha256()
        offset = 0
        try:
            with open(lpath, "rb") as f:
                while True:
                    chunk = f.read(CHUNK)
                    if not chunk and offset > 0:
                        break
                    h.update(chunk)
                    headers = {}
                    if chunk:
                        headers["Content-Range"] = f"bytes {offset}-{offset + len(chunk) - 1}/*"
                    self._agent("PUT", t, "files", tmp, headers=headers, content=chunk)
                    offset += len(chunk)
                    if callback is not None:
                        callback.relative_update(len(chunk))
                    if not chunk:
                        break  # an empty file: made by the PUT above
        except BaseException:
            self._discard(t, tmp)
            raise
        self._commit(t, tmp, p, h.hexdigest())

    def mkdir(self, path: str, create_parents: bool = True, **kw: Any) -> None:
        endpoint, p = self._split(path)
        t = self._token(endpoint, p + "/", True)
        self._agent("POST", t, "mkdir", p)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        if not exist_ok and self.exists(path):
            raise FileExistsError(path)
        self.mkdir(path)

    def rm_file(self, path: str) -> None:
        endpoint, p = self._split(path)
        t = self._token(endpoint, p, True)
        self._agent("DELETE", t, "files", p)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rmdir(self, path: str) -> None:
        self.rm_file(path)  # the agent removes empty directories alike

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, autocommit: bool = True,
              cache_options: dict | None = None, **kw: Any) -> SluiceFile:
        return SluiceFile(self, path, mode=mode, block_size=block_size or CHUNK, autocommit=autocommit,
                          cache_options=cache_options, **kw)

    def __reduce__(self):  # the client's connections do not pickle: its login does
        login = self.client.login
        return (_rebuild, (login.server, login.token, login.ca))


def _rebuild(server: str, token: str, ca: str) -> SluiceFileSystem:
    return SluiceFileSystem(server=server, token=token, ca=ca or None)


class SluiceFile(AbstractBufferedFile):
    """A file of an agent opened through :class:`SluiceFileSystem`: read by
    ranges (each block one request), written block by block into a
    temporary file that is checked and renamed into place on close."""

    fs: SluiceFileSystem

    def _fetch_range(self, start: int, end: int) -> bytes:
        endpoint, p = self.fs._split(self.path)
        return self.fs._read(endpoint, p, start, end)

    def _initiate_upload(self) -> None:
        endpoint, p = self.fs._split(self.path)
        self._dest = p
        self._t = self.fs._token(endpoint, p, True)
        self._tmp = self.fs._temp(p)
        self._sha = hashlib.sha256()
        self._written = 0

    def _upload_chunk(self, final: bool = False) -> bool:
        data = self.buffer.getvalue()
        if data or self._written == 0:
            headers = {}
            if data:
                headers["Content-Range"] = f"bytes {self._written}-{self._written + len(data) - 1}/*"
            try:
                self.fs._agent("PUT", self._t, "files", self._tmp, headers=headers, content=data)
            except BaseException:
                self.fs._discard(self._t, self._tmp)
                raise
            self._sha.update(data)
            self._written += len(data)
        if final:
            self.fs._commit(self._t, self._tmp, self._dest, self._sha.hexdigest())
        return True

    def discard(self) -> None:
        if getattr(self, "_tmp", None):
            self.fs._discard(self._t, self._tmp)
