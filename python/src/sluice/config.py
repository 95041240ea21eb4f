"""Where the SDK finds the server, the API token and the site's CA: the same
places, in the same order, as the ``sluice`` command line.

1. what the caller gives (``Client(server, token, ca=...)``);
2. the environment: ``SLUICE_SERVER``, ``SLUICE_TOKEN`` (a token, or
   ``@FILE`` to read it from a file), ``SLUICE_CA``;
3. the keys ``server``, ``token`` and ``ca`` at the top of the commands'
   configuration file (TOML: ``$SLUICE_CONFIG_FILE``, else
   ``/etc/sluice/sluice.toml`` when it exists), which apply to every
   command (the SDK is no command: the file's sections are the commands');
4. the file ``sluice login`` wrote: ``$SLUICE_CONFIG``, else
   ``client.json`` in the user's configuration directory
   (``~/.config/sluice/client.json`` on Linux), holding
   ``{"server", "token", "ca"}``.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Login", "config_file", "settings_file", "resolve", "ssl_context"]

#: The commands' configuration file where the package installs it.
DEFAULT_SETTINGS = "/etc/sluice/sluice.toml"


@dataclass(frozen=True)
class Login:
    """A resolved login: the server's base URL, the API token, and the CA
    file (PEM) its certificate is checked against besides the system's."""

    server: str
    token: str
    ca: str = ""

    def __repr__(self) -> str:  # never show the token
        return f"Login(server={self.server!r}, token='***', ca={self.ca!r})"


def _user_config_dir() -> Path | None:
    # As Go's os.UserConfigDir, which the CLI uses.
    if sys.platform == "win32":
        d = os.environ.get("APPDATA")
        return Path(d) if d else None
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support"
    d = os.environ.get("XDG_CONFIG_HOME")
    if d and os.path.isabs(d):
        return Path(d)
    home = os.environ.get("HOME")
    return Path(home) / ".config" if home else None


def config_file() -> Path | None:
    """The login file: $SLUICE_CONFIG, else client.json under the user's
    configuration directory (None if there is none)."""
    f = os.environ.get("SLUICE_CONFIG")
    if f:
        return Path(f)
    d = _user_config_dir()
    return d / "sluice" / "client.json" if d else None


def settings_file() -> tuple[Path | None, bool]:
    """The commands' configuration file and whether it was named
    ($SLUICE_CONFIG_FILE; a named file must exist, the default need not)."""
    f = os.environ.get("SLUICE_CONFIG_FILE")
    if f:
        return Path(f), True
    return Path(DEFAULT_SETTINGS), False


def _settings() -> dict[str, str]:
    """server, token and ca from the top of the configuration file."""
    name, named = settings_file()
    if name is None:
        return {}
    try:
        doc = tomllib.loads(name.read_text())
    except FileNotFoundError as e:
        if named:
            raise ConfigError(f"configuration file: {e}") from e
        return {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"configuration file {name}: {e}") from e
    out = {}
    for key in ("server", "token", "ca"):
        v = doc.get(key)
        if v is None:
            continue
        if not isinstance(v, str):
            raise ConfigError(f"{name}: top level {key}: want a string, got {type(v).__name__}")
        out[key] = v
    return out


def _secret(value: str, what: str) -> str:
    """A token, or @FILE's contents (stripped), as the CLI reads --token."""
    if not value.startswith("@"):
        return value
    name = os.path.expanduser(value[1:])
    try:
        return Path(name).read_text().strip()
    except OSError as e:
        raise ConfigError(f"{what}: {e}") from e


def resolve(server: str | None = None, token: str | None = None, ca: str | None = None) -> Login:
    """The login for a client: what is given, then the environment, then
    the configuration file's top level, then the file ``sluice login``
    saved. Raises ConfigError naming what is missing and how to give it."""
    saved: dict = {}
    name = config_file()
    if name is not None and name.exists():
        try:
            saved = json.loads(name.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"{name}: {e}") from e
        if not isinstance(saved, dict):
            raise ConfigError(f"{name}: want a JSON object with server, token and ca")
    common = _settings()
    server = server or os.environ.get("SLUICE_SERVER") or common.get("server") or saved.get("server") or ""
    token = token or os.environ.get("SLUICE_TOKEN") or common.get("token") or saved.get("token") or ""
    ca = ca or os.environ.get("SLUICE_CA") or common.get("ca") or saved.get("ca") or ""
    if not server:
        raise ConfigError("no server: give Client(server=...), set SLUICE_SERVER, or run `sluice login`")
    if not token:
        raise ConfigError("no API token: give Client(token=...), set SLUICE_TOKEN, or run `sluice login`")
    u = urlsplit(server)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise ConfigError(f"server URL {server!r}: want http(s)://host:port")
    return Login(server=server.rstrip("/"), token=_secret(token, "token"), ca=ca)


def ssl_context(ca: str = "") -> ssl.SSLContext:
    """A TLS context that trusts the system's roots (and certifi's, which
    httpx uses by default) and, if given, the site's CA file, as the CLI's
    --ca does."""
    import certifi  # httpx's own dependency

    ctx = ssl.create_default_context(cafile=certifi.where())
    ctx.load_default_certs()
    if ca:
        try:
            ctx.load_verify_locations(cafile=os.path.expanduser(ca))
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"CA {ca}: {e}") from e
    return ctx
