#!/usr/bin/env bash
# make dist: release archives (sluice-VERSION-linux-ARCH.tar.gz: the
# binary, the systemd units, the commented sluice.toml, the sysusers.d
# file, shell completions, README and guides) and Debian packages
# (sluice_VERSION_ARCH.deb, by nfpm from dist/nfpm.yaml), for each of
# DIST_ARCHS (default "amd64 arm64"), in DIST_OUT (default bin/dist).
# DIST_FORMATS="deb" builds the packages alone, and DIST_BIN packages that
# binary (of this machine's architecture) instead of building one: the CI
# check (scripts/dist-check.sh) packages the binary `make test` built.
# VERSION is `git describe` of a v* tag, or 0.0.0-COMMITS-gHASH before the
# first tag, -dirty for a tree with changes; the Debian package spells it
# 0.0.0+gitCOMMITS.gHASH so that dpkg orders builds as git does.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${DIST_OUT:-bin/dist}"
archs="${DIST_ARCHS:-amd64 arm64}"
formats="${DIST_FORMATS:-tar deb}"

if desc=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
	version=${desc#v}
elif hash=$(git rev-parse --short=12 HEAD 2>/dev/null); then
	version=0.0.0-$(git rev-list --count HEAD)-g$hash
	git diff --quiet HEAD -- 2>/dev/null || version=$version-dirty
else
	version=0.0.0-unknown
fi
# 1.2.0 stays; 1.2.0-5-gabc-dirty is 1.2.0+git5.gabc.dirty.
deb_version=$version
if [[ $version == *-* ]]; then
	rest=${version#*-}
	deb_version=${version%%-*}+git${rest//-/.}
fi
# Files in the archives and packages carry the commit's time, not the
# build's: two builds of one commit are the same bytes.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# The binaries: static (no cgo: SQLite is modernc's Go), without the
# builder's paths nor the symbol table and DWARF (-s -w: a third smaller;
# stack traces keep their names), stamped with the commit (this machine's
# go env may turn that off: -buildvcs=auto turns it back on where .git is
# a directory).
host=$(go env GOARCH)
build() {
	mkdir -p "$work/$1"
	CGO_ENABLED=0 GOOS=linux GOARCH="$1" go build -trimpath -buildvcs=auto -ldflags='-s -w' -o "$work/$1/sluice" ./cmd/sluice
}
if [ -n "${DIST_BIN:-}" ]; then
	if [ "$archs" != "$host" ]; then
		echo "dist: DIST_BIN is a binary for $host; DIST_ARCHS is \"$archs\"" >&2
		exit 2
	fi
	mkdir -p "$work/$host"
	cp "$DIST_BIN" "$work/$host/sluice"
else
	for arch in $archs; do
		echo "dist: building linux/$arch" >&2
		build "$arch"
	done
fi
[ -x "$work/$host/sluice" ] || build "$host"

# Shell completions, from cobra, by this host's binary (they are the same
# for every architecture), reading no configuration file.
comp="$work/completions"
mkdir -p "$comp"
SLUICE_CONFIG_FILE=/dev/null "$work/$host/sluice" completion bash >"$comp/sluice.bash"
SLUICE_CONFIG_FILE=/dev/null "$work/$host/sluice" completion zsh >"$comp/_sluice"
SLUICE_CONFIG_FILE=/dev/null "$work/$host/sluice" completion fish >"$comp/sluice.fish"

for arch in $archs; do
	cp -r "$comp" "$work/$arch/completions"
	if [[ " $formats " == *" tar "* ]]; then
		name=sluice-$version-linux-$arch
		d="$work/tar/$name"
		mkdir -p "$d/docs" "$d/systemd"
		cp "$work/$arch/sluice" "$d/"
		cp -r "$comp" "$d/completions"
		cp README.md "$d/"
		cp docs/operator-guide.md docs/user-guide.md "$d/docs/"
		cp dist/sluice.toml "$d/"
		cp dist/systemd/*.service "$d/systemd/"
		cp dist/sysusers.conf "$d/sysusers-sluice.conf"
		for f in LICENSE LICENSE.md COPYING; do
			[ -f "$f" ] && cp "$f" "$d/"
		done
		tar -C "$work/tar" --sort=name --owner=0 --group=0 --numeric-owner \
			--mtime="@$SOURCE_DATE_EPOCH" -cf - "$name" | gzip -n -9 >"$out/$name.tar.gz"
		echo "dist: $out/$name.tar.gz" >&2
	fi
	if [[ " $formats " == *" deb "* ]]; then
		nfpm=$(bash scripts/nfpm.sh)
		# nfpm expands variables in arch and version, not in contents'
		# paths: the stage's is written in.
		sed "s|\${DIST_STAGE}|$work/$arch|g" dist/nfpm.yaml >"$work/nfpm-$arch.yaml"
		DIST_ARCH=$arch DIST_VERSION=$deb_version \
			"$nfpm" package --config "$work/nfpm-$arch.yaml" --packager deb \
			--target "$out/sluice_${deb_version}_$arch.deb" >&2
		echo "dist: $out/sluice_${deb_version}_$arch.deb" >&2
	fi
done
