#!/usr/bin/env bash
# Installs the pinned libraries, then runs a short fencer gate for one Python and one Node
# adapter against Redis under client faults, and fails (exit 1) unless each gate's exit code is
# the expected one. It took under a minute on two cores (examples/clients/README.md).
# Usage (from the repository root): examples/clients/ci.sh
#   FENCER=path/to/fencer (default: fencer on PATH)
#   LOCK=redis://host:port (default: redis://127.0.0.1:6379 when a Redis answers there, else
#   private:redis, a Redis fencer starts for each run)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
fencer="${FENCER:-fencer}"
if [ -z "${LOCK:-}" ]; then
  if (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then LOCK=redis://127.0.0.1:6379; else LOCK=private:redis; fi
fi
lock="$LOCK"
# Python adapters import their library before answering hello; on a loaded machine that can
# take longer than fencer's default 10 s.
export FENCER_EXEC_HELLO_TIMEOUT_MS="${FENCER_EXEC_HELLO_TIMEOUT_MS:-60000}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cd "$root"

"$here/install.sh" || { echo "ci.sh: install.sh failed" >&2; exit 1; }

failures=0
# gate NAME EXPECTED_EXIT CLIENT WORKLOAD STORE
gate() {
  local name="$1" expected="$2" client="$3" workload="$4" store="$5"
  local start=$SECONDS
  "$fencer" gate --client "$client" --lock "$lock" --workload "$workload" --store "$store" \
    --workers 3 --ops 8 --ttl 300ms --renew-every 100ms --call-timeout 200ms \
    --nemesis pause,skew,partition,delay-replies,drop-replies,cut --fault-gap 50ms \
    --seeds "${SEEDS:-0..10}" --jobs 4 --no-regressions --no-shrink --out "$out/$name" \
    > "$out/$name.log" 2>&1
  local rc=$?
  local summary
  summary="$(grep -E '^  (verdicts|anomalies) ' "$out/$name.log" | tr -s ' ' | tr '\n' ';')"
  if [ "$rc" = "$expected" ]; then
    echo "ci.sh: $name: exit $rc as expected in $((SECONDS - start)) s ($summary)"
  else
    echo "ci.sh: $name: exit $rc, expected $expected ($summary); log:" >&2
    grep -v '^exec\[' "$out/$name.log" | tail -20 >&2
    failures=$((failures + 1))
  fi
}

# Both were valid in every one of 20 seeds of examples/clients/FINDINGS.md under these faults: a
# failure here is a change in the library, the adapter or fencer, to be looked at.
gate redis_py_lock-mutex 0 'exec:python3 examples/clients/python/redis_py_lock/client.py' mutex sqlite
gate redlock-mutex 0 'exec:node examples/clients/node/redlock/client.js' mutex sqlite

exit $((failures > 0))
