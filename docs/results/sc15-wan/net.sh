# Sourced by this directory's scripts (from the repository's root): builds
# sluice, brings up the sc15 network under PREFIX (default slcq-) until the
# script exits, and defines net (sluice net under that prefix), addr HOST
# (a host's address) and DST (the five destinations).
PREFIX=${PREFIX:-slcq-}
go build -o bin/sluice ./cmd/sluice
net() { bin/sluice net --prefix "$PREFIX" "$@"; }
addr() { net status --json | jq -r --arg h "$1" '.hosts[] | select(.name == $h) | .addr'; }
net up --profile sc15 >/dev/null
trap 'net down >/dev/null 2>&1 || true' EXIT
DST="yellowstone gordon blacklight mason darter"
