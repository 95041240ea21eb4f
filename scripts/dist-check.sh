#!/usr/bin/env bash
# The package's checks, run by `make test` (a few seconds): builds the
# Debian package once, from the binary `make test` built ($BIN, default
# bin/sluice), and
#   - installs it with dpkg into an empty directory, as onto a fresh host:
#     the files in place, the conffile registered, the sluice user made by
#     its postinst inside that root and not on this machine, the installed
#     binary runs and takes the installed configuration file, the bash
#     completion loads;
#   - checks the installed systemd units: `systemd-analyze verify` with no
#     warning at all (it exits 0 on unknown keys and bad values, which it
#     only prints), and `systemd-analyze security` at an exposure of 2.0 or
#     less, so that a loosened unit fails here;
#   - removes it (the conffile stays) and purges it (the conffile goes, the
#     sluice user stays).
# A missing tool (dpkg, systemd-analyze, nfpm) skips what needs it, saying
# so; scripts/ci-deps.sh installs them.
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${BIN:-bin/sluice}"
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() {
	echo "dist-check: FAIL: $*" >&2
	fail=$((fail + 1))
}
# check WHAT CMD...: CMD succeeds.
check() {
	local what=$1
	shift
	if "$@"; then ok; else bad "$what"; fi
}
skip() { echo "dist-check: skipped: $*" >&2; }
finish() {
	echo "dist-check: $pass passed, $fail failed"
	[ "$fail" -eq 0 ]
	exit
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -x "$bin" ]; then
	bad "no binary $bin (make build)"
	finish
fi
if ! bash scripts/nfpm.sh >/dev/null 2>"$work/nfpm.log"; then
	skip "nfpm could not be built ($(tail -1 "$work/nfpm.log")): no package to check"
	finish
fi
if ! DIST_BIN="$bin" DIST_ARCHS="$(go env GOARCH)" DIST_FORMATS=deb DIST_OUT="$work/out" \
	bash scripts/dist.sh 2>"$work/dist.log"; then
	cat "$work/dist.log" >&2
	bad "scripts/dist.sh could not build the package"
	finish
fi
deb=$(ls "$work"/out/sluice_*.deb)
ok

if ! command -v dpkg >/dev/null 2>&1; then
	skip "no dpkg: the package is not installed"
	finish
fi
root="$work/root"
admin="$root/var/lib/dpkg"
mkdir -p "$admin/info" "$admin/updates" "$admin/triggers"
: >"$admin/status"
dpkg_root() {
	dpkg --instdir="$root" --admindir="$admin" --force-not-root --force-script-chrootless "$@"
}
host_passwd=$(cat /etc/passwd /etc/group 2>/dev/null | md5sum)
if ! dpkg_root -i "$deb" >"$work/install.log" 2>&1; then
	cat "$work/install.log" >&2
	bad "dpkg -i into an empty root"
	finish
fi
ok
for f in usr/bin/sluice usr/lib/systemd/system/sluice-serve.service usr/lib/systemd/system/sluice-agent@.service \
	usr/lib/sysusers.d/sluice.conf etc/sluice/sluice.toml usr/share/bash-completion/completions/sluice \
	usr/share/zsh/vendor-completions/_sluice usr/share/fish/vendor_completions.d/sluice.fish \
	usr/share/doc/sluice/operator-guide.md usr/share/doc/sluice/deploy.md \
	usr/share/sluice/monitoring/alerts.yml usr/share/sluice/monitoring/dashboard.json; do
	check "installed $f" test -s "$root/$f"
done
check "the binary is executable" test -x "$root/usr/bin/sluice"
check "the package is installed in its root's database" \
	grep -qx 'Status: install ok installed' <(dpkg --admindir="$admin" -s sluice 2>&1)
check "the configuration file is a conffile" grep -qx /etc/sluice/sluice.toml "$admin/info/sluice.conffiles"
check "postinst made the sluice user in the root" grep -q '^sluice:x\?:[0-9]*:[0-9]*:.*:/var/lib/sluice:' "$root/etc/passwd"
check "postinst left this machine's users alone" test "$(cat /etc/passwd /etc/group 2>/dev/null | md5sum)" = "$host_passwd"
version=$(SLUICE_CONFIG_FILE=/dev/null "$root/usr/bin/sluice" version 2>&1)
check "sluice version runs ($version)" grep -q '^sluice .*agent protocol' <<<"$version"
check "the installed configuration file is valid" \
	env -u SLUICE_CONFIG_FILE "$root/usr/bin/sluice" --config-file "$root/etc/sluice/sluice.toml" version >/dev/null
check "the bash completion loads" \
	bash -c 'source "$1" 2>/dev/null; complete -p sluice' _ "$root/usr/share/bash-completion/completions/sluice" >/dev/null

if command -v systemd-analyze >/dev/null 2>&1 && [ -d /usr/lib/systemd/system ]; then
	# verify resolves the units' dependencies (sysinit.target, ...) and
	# ExecStart= in the root: the host's units join the package's there.
	cp -rn /usr/lib/systemd/system/. "$root/usr/lib/systemd/system/"
	for unit in sluice-serve.service sluice-agent@srv-data.service; do
		out=$(systemd-analyze verify --root="$root" "$unit" 2>&1)
		rc=$?
		if [ $rc -eq 0 ] && [ -z "$out" ]; then ok; else bad "systemd-analyze verify $unit (exit $rc): $out"; fi
		out=$(systemd-analyze security --offline=yes --root="$root" --threshold=20 "$unit" 2>&1)
		rc=$?
		if [ $rc -eq 0 ]; then ok; else bad "systemd-analyze security $unit: $(grep 'Overall exposure' <<<"$out")"; fi
	done
else
	skip "no systemd-analyze: the units are not verified"
fi

check "dpkg -r" dpkg_root -r sluice >"$work/remove.log" 2>&1
check "removed: the binary is gone" test ! -e "$root/usr/bin/sluice"
check "removed: the configuration file is kept" test -s "$root/etc/sluice/sluice.toml"
check "dpkg -P" dpkg_root -P sluice >"$work/purge.log" 2>&1
check "purged: the configuration file is gone" test ! -e "$root/etc/sluice/sluice.toml"
check "purged: the sluice user is kept (its files may remain)" grep -q '^sluice:' "$root/etc/passwd"
finish
