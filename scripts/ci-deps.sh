#!/usr/bin/env bash
# Installs and starts what the integration tests use, on a fresh Debian
# machine: PostgreSQL (store and service tests against it), the Globus
# GridFTP server and client (backend/gridftp), the XRootD server
# (backend/root), nginx and XRootD's HTTP (backend/webdav), gfal2 (interoperability tests), rsvg-convert (the report charts' SVGs are rendered
# in a test), iperf3 (`sluice estimate --iperf3`, and with ping from
# iputils-ping the emulated WAN's validation, wan/), chromium, node and playwright-core (the dashboard's
# browser test, web/browser_test.go), promtool (the monitoring rules, below), and systemd-analyze and nfpm (the package check). Tests that need a missing one skip with a message, so
# this script warns rather than fails when it cannot install something.
# Prints the environment the tests need (eval it).
set -uo pipefail

need=()
command -v pg_ctlcluster >/dev/null 2>&1 || need+=(postgresql)
command -v globus-url-copy >/dev/null 2>&1 || need+=(globus-gass-copy-progs)
command -v globus-gridftp-server >/dev/null 2>&1 || [ -x /usr/sbin/globus-gridftp-server ] || need+=(globus-gridftp-server-progs)
command -v xrootd >/dev/null 2>&1 || need+=(xrootd-server)
command -v xrdcp >/dev/null 2>&1 || need+=(xrootd-client)
# gfal2, the WLCG data clients' library (FTS3 and Rucio move data through it): the
# interoperability tests copy with it from and to the servers Sluice uses.
command -v gfal-copy >/dev/null 2>&1 || need+=(gfal2-util-scripts python3-gfal2-util gfal2-plugin-xrootd gfal2-plugin-http gfal2-plugin-file)

# WebDAV and HTTP third-party copy (backend/webdav, internal/storagetest):
# nginx with its WebDAV extension module (PROPFIND, OPTIONS), and XRootD's
# HTTP protocol with its third-party-copy handler (libXrdHttp,
# libXrdHttpTPC, beside xrootd-server above).
{ command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } || need+=(nginx)
[ -e /usr/lib/nginx/modules/ngx_http_dav_ext_module.so ] || need+=(libnginx-mod-http-dav-ext)
{ /sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null; } | grep -q 'libXrdHttpTPC-5\.so' || need+=(xrootd-server-plugins)

command -v rsvg-convert >/dev/null 2>&1 || need+=(librsvg2-bin)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
# The package check (scripts/dist-check.sh): systemd-analyze verifies the
# units; dpkg, which installs the package into an empty root, is essential.
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
if [ ${#need[@]} -gt 0 ]; then
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO="sudo -n"
	if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"; } >&2; then
		echo "ci-deps: could not install ${need[*]}; the tests that need them will skip" >&2
	fi
fi

# PostgreSQL: start the default cluster and give this OS user a role that
# may create the per-test databases.
if command -v pg_ctlcluster >/dev/null 2>&1; then
	ver=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
	if [ -z "$ver" ]; then
		ver=$(ls /usr/lib/postgresql | sort -V | tail -1)
		pg_createcluster "$ver" main >&2 || true
	fi
	pg_ctlcluster "$ver" main start >&2 2>/dev/null || true
	me=$(id -un)
	for i in $(seq 50); do
		su postgres -c "psql -qAtc 'select 1'" >/dev/null 2>&1 && break
		sleep 0.2
	done
	su postgres -c "psql -qc \"do \\\$\\\$ begin if not exists (select from pg_roles where rolname = '$me') then create role \\\"$me\\\" login createdb; end if; end \\\$\\\$\"" >&2 || true
	su postgres -c "psql -qAtc \"select 1 from pg_database where datname = 'sluice_test'\"" | grep -q 1 ||
		su postgres -c "createdb -O '$me' sluice_test" >&2 || true
	if psql "postgres:///sluice_test?host=/var/run/postgresql" -qAtc 'select 1' >/dev/null 2>&1; then
		echo "export SLUICE_TEST_POSTGRES='postgres:///sluice_test?host=/var/run/postgresql'"
	else
		echo "ci-deps: PostgreSQL is not reachable; its tests will skip" >&2
	fi
fi

# The dashboard's browser test: playwright-core from npm, in .cache/web-test
# (the script warns rather than fails).
"$(dirname "$0")/web-test-deps.sh" >&2 || echo "ci-deps: playwright-core is not installed; the browser test will skip" >&2

# FTS3's Python client (pip package fts3), which TestFTS3Client in
# cmd/sluice drives Sluice's /fts3 API with. It needs M2Crypto, which
# PyPI has only as source (a C build against OpenSSL with swig): Debian's
# python3-m2crypto and python3-requests serve it instead, in a venv of the
# system's Python that sees them (.cache/fts3-venv; .cache/ is ignored).
# The test skips, saying why, when this fails.
fts3_venv="$(cd "$(dirname "$0")/.." && pwd)/.cache/fts3-venv"
if ! "$fts3_venv/bin/python" -c 'import fts3.rest.client.easy' >/dev/null 2>&1; then
	fts3_need=()
	/usr/bin/python3 -c 'import M2Crypto' >/dev/null 2>&1 || fts3_need+=(python3-m2crypto)
	/usr/bin/python3 -c 'import requests' >/dev/null 2>&1 || fts3_need+=(python3-requests)
	/usr/bin/python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || fts3_need+=(python3-venv)
	if [ ${#fts3_need[@]} -gt 0 ]; then
		SUDO=""
		[ "$(id -u)" = 0 ] || SUDO="sudo -n"
		{ $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${fts3_need[@]}"; } >&2 ||
			echo "ci-deps: could not install ${fts3_need[*]}" >&2
	fi
	{ /usr/bin/python3 -m venv --system-site-packages "$fts3_venv" && "$fts3_venv/bin/pip" install -q fts3==3.14.2; } >&2 ||
		echo "ci-deps: FTS3's Python client is not installed; TestFTS3Client will skip" >&2
fi
if "$fts3_venv/bin/python" -c 'import fts3.rest.client.easy' >/dev/null 2>&1; then
	echo "export SLUICE_FTS3_PYTHON='$fts3_venv/bin/python'"
fi

# promtool, from Debian's prometheus package: the alert rules in
# monitoring/ are checked (`promtool check rules`) and unit-tested
# (`promtool test rules`) by monitoring's tests. Only the tool is taken
# from the package (apt-get download, dpkg-deb -x into ~/.cache/sluice):
# installing the package would also set up a Prometheus server that
# starts as a service on a machine with an init system. The tests skip,
# saying why, when this fails.
prom_dir="$HOME/.cache/sluice/prometheus"
promtool=$(command -v promtool 2>/dev/null || true)
if [ -z "$promtool" ] && [ ! -x "$prom_dir/usr/bin/promtool" ]; then
	prom_tmp=$(mktemp -d)
	get_prom() { (cd "$prom_tmp" && apt-get download -qq prometheus) >&2 2>/dev/null; }
	if { get_prom || { apt-get update -qq >&2 && get_prom; }; } && mkdir -p "$prom_dir" &&
		dpkg-deb -x "$prom_tmp"/prometheus_*.deb "$prom_dir" >&2; then
		:
	else
		echo "ci-deps: could not get promtool from Debian's prometheus package; the monitoring checks will skip" >&2
	fi
	rm -rf "$prom_tmp"
fi
[ -n "$promtool" ] || { [ -x "$prom_dir/usr/bin/promtool" ] && promtool="$prom_dir/usr/bin/promtool"; }
if [ -n "$promtool" ]; then
	echo "export SLUICE_PROMTOOL='$promtool'"
fi

# nfpm, the packager of `make dist` and of the package check in `make
# test`: built from the Go module proxy once per version (scripts/nfpm.sh,
# about 30 s). The check skips, saying why, when this fails.
bash "$(dirname "$0")/nfpm.sh" >/dev/null || echo "ci-deps: could not build nfpm; the package check will skip" >&2

# The Python SDK's tests (make test-python): a venv with httpx, pytest,
# nbclient and the rest of python/requirements-ci.txt in .cache/py-venv.
bash "$(dirname "$0")/python-sdk-deps.sh" >&2

# The S3 server backend/s3's tests run against: the Versity S3 Gateway
# (versitygw) with its posix backend, each object a file (the conformance
# suite looks at them on disk). Not in Debian: built from the Go module
# proxy (about 80 s on 2 cores) into ~/.cache/sluice/bin, once per
# version. SeaweedFS cannot be `go install`ed (its go.mod has replace
# directives) and Ceph's radosgw needs a whole cluster. The tests skip,
# saying why, when this fails.
vgw_version=v1.8.0
vgw_bin="$HOME/.cache/sluice/bin"
if [ "$(cat "$vgw_bin/versitygw.version" 2>/dev/null)" != "$vgw_version" ] || [ ! -x "$vgw_bin/versitygw" ]; then
	if mkdir -p "$vgw_bin" && GOBIN="$vgw_bin" go install "github.com/versity/versitygw/cmd/versitygw@$vgw_version" >&2; then
		echo "$vgw_version" >"$vgw_bin/versitygw.version"
	else
		echo "ci-deps: could not build versitygw $vgw_version; the S3 tests will skip" >&2
	fi
fi
if [ -x "$vgw_bin/versitygw" ]; then
	echo "export SLUICE_VERSITYGW='$vgw_bin/versitygw'"
fi
