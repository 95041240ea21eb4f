#!/usr/bin/env bash
# `make run`: the main job of Sluice on one machine. Starts a server (SQLite
# store), two agents in temporary directories, submits a job of large and
# small files, shows its progress until done, prints the summary with the
# verified checksums, and leaves the service running for `sluice status`.
set -euo pipefail

BIN=${BIN:-bin/sluice}
# By its absolute path, so that the commands the closing hint prints work
# from any directory (a relative bin/sluice only from the repository's).
case $BIN in */*) BIN=$(realpath -- "$BIN") ;; esac
PORT=${SLUICE_DEMO_PORT:-8080}
DEMO=$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo.XXXXXX")
SERVER=http://127.0.0.1:$PORT
LOG=$DEMO/logs
mkdir -p "$LOG" "$DEMO/dtn1/data" "$DEMO/dtn2"

free() { ! (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }
if ! free "$PORT"; then
	echo "port $PORT is taken (an earlier demo? stop it with: make stop); choose another with SLUICE_DEMO_PORT=..." >&2
	exit 1
fi

echo "== demo directory $DEMO"
setsid nohup "$BIN" serve --listen 127.0.0.1:"$PORT" --data-dir "$DEMO/server" >"$LOG/server.log" 2>&1 &
echo $! >"$DEMO/pids"
for i in $(seq 100); do free "$PORT" || break; sleep 0.1; done
if free "$PORT"; then echo "server did not start:" >&2; cat "$LOG/server.log" >&2; exit 1; fi
head -3 "$LOG/server.log"

for n in 1 2; do
	setsid nohup "$BIN" agent --listen 127.0.0.1:0 --root "$DEMO/dtn$n" --name "dtn$n" \
		--server "$SERVER" --join-token @"$DEMO/server/join.token" >"$LOG/dtn$n.log" 2>&1 &
	echo $! >>"$DEMO/pids"
done
echo "$DEMO" >"${SLUICE_DEMO_STATE:-$HOME/.sluice-demo}"

export SLUICE_SERVER=$SERVER SLUICE_TOKEN=@$DEMO/server/admin.token
for i in $(seq 100); do
	up=$("$BIN" endpoints --json 2>/dev/null | grep -c '"up": true' || true)
	[ "$up" = 2 ] && break
	sleep 0.1
done
"$BIN" endpoints

echo "== making demo data on dtn1: 2 large files and 300 small ones"
head -c $((512 << 20)) /dev/urandom >"$DEMO/dtn1/data/large-1.bin"
head -c $((256 << 20)) /dev/urandom >"$DEMO/dtn1/data/large-2.bin"
mkdir -p "$DEMO/dtn1/data/small"
for i in $(seq -w 300); do head -c $((RANDOM * 40 + 1)) /dev/urandom >"$DEMO/dtn1/data/small/s$i"; done
{
	echo '{"label":"demo","files":['
	sep=""
	for f in $(cd "$DEMO/dtn1" && find data -type f | sort); do
		printf '%s{"source":"sluice://dtn1/%s","destination":"sluice://dtn2/copy/%s"}\n' "$sep" "$f" "$f"
		sep=","
	done
	echo ']}'
} >"$DEMO/job.json"

echo "== submitting (sluice submit -f $DEMO/job.json --watch)"
JOB=$("$BIN" submit -f "$DEMO/job.json" --watch)
"$BIN" status "$JOB" --files | awk '/^#/ { t = 1 } t && n++ < 4'
echo "   ..."
if ! diff -r "$DEMO/dtn1/data" "$DEMO/dtn2/copy/data" >/dev/null; then
	echo "the copy differs from the source!" >&2
	exit 1
fi
echo "== diff -r of source and destination trees: identical"
echo
echo "The service is still running (server log: $LOG/server.log). Try:"
echo "  export SLUICE_SERVER=$SERVER SLUICE_TOKEN=@$DEMO/server/admin.token"
echo "  $BIN status; $BIN status $JOB --files; $BIN endpoints"
echo "  $BIN cp sluice://dtn2/copy/data/small/s001 ./s001   # a copy at once, with the same login"
echo "  the console: $SERVER/ (sign in with the token in $DEMO/server/admin.token)"
echo "Stop it with: make stop"
