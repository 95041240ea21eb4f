#!/usr/bin/env bash
# The Python SDK's test environment (python/, `make test-python`): a venv of
# the system's Python in .cache/py-venv (.cache/ is ignored) with the PyPI
# packages of python/requirements-ci.txt (httpx, httpx-sse, tqdm, fsspec,
# pytest, nbclient, ipykernel, build, hatchling), remade when that file
# changes. Warns rather than fails: `make test-python` skips, saying why,
# without it. Run by scripts/ci-deps.sh; prints nothing on stdout.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.cache/py-venv"
req="$root/python/requirements-ci.txt"
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp"; then
	exit 0
fi
# Debian's Python, with venv and ensurepip (python3-venv).
py=/usr/bin/python3
if ! { [ -x "$py" ] && "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; }; then
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO="sudo -n"
	{ $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3 python3-venv; } >&2 ||
		echo "python-sdk-deps: could not install python3 and python3-venv" >&2
fi
if ! [ -x "$py" ]; then
	py=$(command -v python3 || true)
fi
if [ -z "$py" ]; then
	echo "python-sdk-deps: no python3; the Python SDK's tests will skip" >&2
	exit 0
fi
rm -rf "$venv"
if { "$py" -m venv "$venv" && "$venv/bin/pip" install -q -r "$req"; } >&2; then
	cp "$req" "$stamp"
else
	rm -rf "$venv"
	echo "python-sdk-deps: could not make $venv; the Python SDK's tests will skip" >&2
fi
exit 0
