"""A real Sluice service for the SDK's tests: `sluice serve` over HTTPS with
the site's CA (`sluice ca init`, `ca issue`), two agents joined to it (a1,
and a2 throttled to 16 MB/s with the agent's --emulate test facility, so
that a transfer into it lasts long enough to watch, cancel and drop), and
the login file `sluice login` would write, which Client() reads.

The binary is $SLUICE_BIN (`make test` builds bin/sluice first), else
built once per session with `go build -o` into a temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

import sluice

REPO = Path(__file__).resolve().parents[2]
#: a2's throttle: bytes/s over all its streams.
A2_RATE = 16e6


def pytest_configure(config):
    # `make test-python` tests the wheel it built, installed: not the tree.
    if os.environ.get("SLUICE_WHEEL") and Path(sluice.__file__).resolve().is_relative_to(REPO / "python" / "src"):
        raise pytest.UsageError(f"SLUICE_WHEEL is set but sluice comes from the source tree ({sluice.__file__})")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(cond, what: str, timeout: float = 30.0, logs: list[Path] = ()) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    tails = "\n".join(f"--- {p}:\n{p.read_text()[-3000:]}" for p in logs if p.exists())
    raise RuntimeError(f"{what}: not after {timeout} s\n{tails}")


@pytest.fixture(scope="session")
def sluice_bin(tmp_path_factory) -> str:
    b = os.environ.get("SLUICE_BIN")
    if b:
        b = os.path.abspath(b)
        if not os.access(b, os.X_OK):
            raise RuntimeError(f"SLUICE_BIN={b} is not an executable")
        return b
    go = shutil.which("go")
    if not go:
        pytest.skip("no sluice binary: set SLUICE_BIN or put go on PATH to build one")
    out = tmp_path_factory.mktemp("bin") / "sluice"
    subprocess.run([go, "build", "-o", str(out), "./cmd/sluice"], cwd=REPO, check=True)
    return str(out)


class Service:
    """The running service: its URL, admin token, CA, agents' roots."""

    def __init__(self, bin: str, d: Path) -> None:
        self.bin, self.d = bin, d
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []
        ca = d / "ca"
        self._run("ca", "init", "--dir", str(ca))
        self._run("ca", "issue", "--dir", str(ca), "--out", str(d / "server"), "127.0.0.1", "localhost")
        self.ca = str(ca / "ca.pem")
        self.port = _free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.data = d / "srv"
        self.server_args = ["serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(self.data),
                            "--tls-cert", str(d / "server.pem"), "--tls-key", str(d / "server.key"), "--cycle", "0.1"]
        self.server = self._start("server", *self.server_args)
        _wait_for(lambda: (self.data / "join.token").exists() and self._listening(), "the server", logs=self.logs)
        self.token = (self.data / "admin.token").read_text().strip()
        self.roots: dict[str, Path] = {}
        emu = d / "a2-emul.json"
        emu.write_text(json.dumps({"capacity_bps": A2_RATE}))
        for name, extra in (("a1", []), ("a2", ["--emulate", str(emu)])):
            root = d / name
            root.mkdir()
            self.roots[name] = root
            self._start(name, "agent", "--listen", "127.0.0.1:0", "--root", str(root), "--name", name,
                        "--server", self.url, "--ca", self.ca, "--join-token", f"@{self.data / 'join.token'}",
                        *extra)
        with sluice.Client(self.url, self.token, ca=self.ca) as c:
            _wait_for(lambda: sum(e.up for e in c.endpoints()) == 2, "two agents up", logs=self.logs)

    def _run(self, *args: str) -> None:
        subprocess.run([self.bin, *args], check=True, capture_output=True)

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = self.d / f"{name}.log"
        self.logs.append(log)
        p = subprocess.Popen([self.bin, *args], stdout=log.open("a"), stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def restart_server(self) -> None:
        """Kill the server (SIGKILL: a crash; a SIGTERM waits up to 5 s for
        open event streams) and start it again on the same port and store;
        the agents stay up."""
        self.server.kill()
        self.server.wait(timeout=30)
        self.procs.remove(self.server)
        self.server = self._start("server", *self.server_args)
        _wait_for(self._listening, "the restarted server", logs=self.logs)

    def _listening(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def login_file(self, path: Path) -> Path:
        """A login as `sluice login` saves it."""
        path.write_text(json.dumps({"server": self.url, "token": self.token, "ca": self.ca}, indent=2))
        path.chmod(0o600)
        return path

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


@pytest.fixture(scope="session")
def service(sluice_bin, tmp_path_factory):
    s = Service(sluice_bin, tmp_path_factory.mktemp("svc"))
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def login(service, tmp_path, monkeypatch) -> Path:
    """Each test sees only the login file, as after `sluice login`: no
    variable of the developer's shell, no configuration file of the host."""
    for k in ("SLUICE_SERVER", "SLUICE_TOKEN", "SLUICE_CA"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SLUICE_CONFIG_FILE", os.devnull)
    f = service.login_file(tmp_path / "client.json")
    monkeypatch.setenv("SLUICE_CONFIG", str(f))
    return f


@pytest.fixture
def client(service):
    with sluice.Client() as c:
        yield c


@pytest.fixture
def tree(service, request):
    """A fresh directory under each agent's root for one test: (name, paths
    by agent)."""
    name = request.node.name.replace("[", "_").replace("]", "")
    paths = {}
    for agent, root in service.roots.items():
        p = root / name
        p.mkdir(parents=True, exist_ok=True)
        paths[agent] = p
    return name, paths


def write(path: Path, size: int, seed: int = 0) -> Path:
    """A file of size pseudo-random bytes (different per seed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    block = bytes((i * 131 + seed * 7 + (i >> 8)) % 251 for i in range(65536))
    with path.open("wb") as f:
        left = size
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)
    return path


class Proxy:
    """A TCP proxy in front of the server whose connections the test can
    cut (a dropped event stream) and whose listener it can close (a
    server that does not answer)."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.ls = socket.create_server(("127.0.0.1", 0))
        self.port = self.ls.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns += [c, u]
                self.accepted += 1
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def drop(self) -> None:
        """Cut every connection open now (as a network failure would)."""
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.ls.close()
        self.drop()


@pytest.fixture
def proxy(service):
    p = Proxy(service.port)
    yield p
    p.close()
