#!/usr/bin/env bash
# Installs the pinned libraries, then runs a short fencer gate for one Python and one Node
# adapter against Redis under client faults, and fails (exit 1) unless each gate's exit code is
# the expected one. Takes a few minutes on two cores.
# Usage (from the repository root): examples/clients/ci.sh
#   FENCER=path/to/fencer (default: fencer on PATH)
#   LOCK=redis://host:port (default: private:redis, a Redis fencer starts for each run)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
fencer="${FENCER:-fencer}"
lock="${LOCK:-private:redis}"
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

EXPECTATIONS_GO_HERE

exit $((failures > 0))
