#!/usr/bin/env bash
# Prints the path of nfpm, the packager `make dist` builds the Debian
# package with, building it from the Go module proxy into ~/.cache/sluice/bin
# first if it is not there (about 30 s on 2 cores, once per version). It is
# a tool, not a dependency of sluice: it stays out of go.mod.
set -euo pipefail
version=v2.48.0
bin="${NFPM_BIN_DIR:-$HOME/.cache/sluice/bin}"
if [ "$(cat "$bin/nfpm.version" 2>/dev/null)" != "$version" ] || [ ! -x "$bin/nfpm" ]; then
	mkdir -p "$bin"
	# From / so that no go.mod around it has a say.
	(cd / && GOBIN="$bin" go install "github.com/goreleaser/nfpm/v2/cmd/nfpm@$version") >&2
	echo "$version" >"$bin/nfpm.version"
fi
echo "$bin/nfpm"
