#!/usr/bin/env bash
# Runs schemathesis (PyPI) against the service's own OpenAPI document, for
# a bounded number of examples per operation: every generated request must
# get a documented status and no server error. Skips when schemathesis is
# not installed (.ci/run installs it).
set -euo pipefail
BIN=${BIN:-bin/sluice}
EXAMPLES=${SLUICE_FUZZ_EXAMPLES:-25}
if ! command -v schemathesis >/dev/null 2>&1; then
	echo "api-fuzz: schemathesis not installed (pip install schemathesis); skipped" >&2
	exit 0
fi
source "$(dirname "$0")/../scripts/local-service.sh"
# Operations that would change the service's trust (agent registration with
# the join token, token creation) are fuzzed too: with the admin token they
# must still answer with documented statuses. Token revocation is not:
# the stateful phase lists the admin's tokens and revokes them, and every
# request after that is a 401 that tests nothing (Go tests cover it).
status=0
schemathesis run "http://127.0.0.1:$port/openapi.json" \
	-H "Authorization: Bearer $(cat "$D/srv/admin.token")" \
	--max-examples "$EXAMPLES" --seed 1 --generation-deterministic \
	--checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
	--exclude-path /v1/events \
	--exclude-operation-id revoke-token \
	--request-timeout 20 --no-color || status=$?
if [ $status -ne 0 ]; then
	echo "api-fuzz: schemathesis found problems; server log:" >&2
	tail -50 "$D/server.log" >&2
fi
exit $status
