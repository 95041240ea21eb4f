# Sourced by bench/submit.sh and scripts/api-fuzz.sh: starts `sluice serve`
# on a free loopback port with two joined agents (a1, a2) in a temporary
# directory $D, all stopped and removed on exit. Needs BIN; sets D and port.
D=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$D"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" serve --listen 127.0.0.1:"$port" --data-dir "$D/srv" >"$D/server.log" 2>&1 &
pids+=($!)
for i in $(seq 100); do [ -f "$D/srv/join.token" ] && (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
mkdir -p "$D/a1" "$D/a2"
for n in a1 a2; do
	"$BIN" agent --listen 127.0.0.1:0 --root "$D/$n" --name "$n" --server http://127.0.0.1:"$port" \
		--join-token @"$D/srv/join.token" >"$D/$n.log" 2>&1 &
	pids+=($!)
done
sleep 1
