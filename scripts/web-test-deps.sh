#!/usr/bin/env bash
# Installs what the dashboard's browser test (web/browser_test.go) needs
# besides Debian's chromium: playwright-core from npm, into a cache
# directory (default .cache/web-test in the repository; SLUICE_WEB_DEPS
# overrides). Nothing is committed: .cache/ is ignored. Warns rather than
# fails when npm is missing or offline; the test then skips.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${SLUICE_WEB_DEPS:-$root/.cache/web-test}
if ! command -v npm >/dev/null 2>&1; then
	echo "web-test-deps: npm is missing; the browser test will skip" >&2
	exit 0
fi
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"sluice-web-test","private":true}' >"$dir/package.json"
if [ -d "$dir/node_modules/playwright-core" ]; then
	exit 0
fi
if ! (cd "$dir" && npm install --no-save --no-audit --no-fund --silent playwright-core >&2); then
	echo "web-test-deps: could not install playwright-core; the browser test will skip" >&2
fi
